/*-------------------------------------------------------------------------
 *
 * verify.c
 *		  Verify of a continuous sync into a MySQL catalog: the verify_local
 *		  and verify_remote members of CtasMySyncApply (target.h,
 *		  sync/verify.c).
 *
 * Both sides must hash the same text of each value.  The MySQL side takes
 * the text of the stored value as MySQL prints it, the local side builds
 * the same text from the local value (under the settings sync/verify.c
 * pins):
 *
 *	int2/4/8, text, varchar, name, uuid, enum	the value's text (char(n)
 *					as text: trailing blanks dropped, as MySQL's CHAR)
 *	bpchar		the same
 *	numeric		trailing zeros of the fraction (and a bare point) dropped
 *				on both sides: DECIMAL(p,s) prints s digits
 *	bool		1 or 0 (TINYINT(1))
 *	bytea		lower-case hex
 *	date		YYYY-MM-DD
 *	timestamp	YYYY-MM-DD HH:MI:SS.ffffff (timestamptz in UTC, as stored)
 *	time		HH:MI:SS.ffffff
 * float4/8, json/jsonb and arrays print differently on the two sides: a
 * column of those cannot be verified (sync/verify.c says so).
 *
 * Each step is one query on a connection of its own (the worker applies
 * nothing while it checks, so every step sees the same remote table),
 * mirroring the local one over the remote table.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/mysql/verify.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/lsyscache.h"

#include "mysql_target.h"

/* hex digits of the key hash per level, as sync/verify.c */
#define VERIFY_HEX	3

#define MY_US_FORMAT	"'%%Y-%%m-%%d %%H:%%i:%%s.%%f'"

/*
 * CtasMySyncVerifyLocal
 *		The local expression of the text of column col's value expr, as the
 *		remote prints the stored value; NULL when it cannot be compared.
 */
char *
CtasMySyncVerifyLocal(CtasSyncTarget *t, int col, const char *expr)
{
	Oid			type = getBaseType(t->types[col]);

	switch (type)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case NAMEOID:
		case UUIDOID:
			return psprintf("(%s)::pg_catalog.text", expr);
		case NUMERICOID:
			return psprintf("pg_catalog.trim_scale(%s)::pg_catalog.text", expr);
		case BOOLOID:
			return psprintf("CASE WHEN %s THEN '1' ELSE '0' END", expr);
		case BYTEAOID:
			return psprintf("pg_catalog.encode(%s, 'hex')", expr);
		case DATEOID:
			return psprintf("pg_catalog.to_char(%s, 'YYYY-MM-DD')", expr);
		case TIMESTAMPOID:
			return psprintf("pg_catalog.to_char(%s, 'YYYY-MM-DD HH24:MI:SS.US')",
							expr);
		case TIMESTAMPTZOID:
			return psprintf("pg_catalog.to_char((%s) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')",
							expr);
		case TIMEOID:
			return psprintf("pg_catalog.to_char(DATE '2000-01-01' + (%s), 'HH24:MI:SS.US')",
							expr);
		default:
			if (type_is_enum(type))
				return psprintf("(%s)::pg_catalog.text", expr);
			return NULL;
	}
}

/* the MySQL expression of the text of column i, as verify_local's */
static char *
remote_text(CtasSyncTarget *t, int i)
{
	Oid			type = getBaseType(t->types[i]);
	char	   *c = CtasMyQuoteIdent(t->columns[i]);

	switch (type)
	{
		case NUMERICOID:
			return psprintf("IF(LOCATE('.', CAST(%s AS CHAR)) > 0, "
							"TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM CAST(%s AS CHAR))), "
							"CAST(%s AS CHAR))", c, c, c);
		case BYTEAOID:
			return psprintf("LOWER(HEX(%s))", c);
		case DATEOID:
			return psprintf("DATE_FORMAT(%s, '%%Y-%%m-%%d')", c);
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return psprintf("DATE_FORMAT(%s, " MY_US_FORMAT ")", c);
		case TIMEOID:
			return psprintf("TIME_FORMAT(%s, '%%H:%%i:%%s.%%f')", c);
		default:
			return psprintf("CAST(%s AS CHAR)", c);
	}
}

/* the canonical text of the columns idx[0..n-1], as sync/verify.c's */
static char *
canonical(CtasSyncTarget *t, int n, const int *idx)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "CONCAT(");
	for (i = 0; i < n; i++)
	{
		char	   *v = remote_text(t, idx[i]);

		appendStringInfo(&buf, "%sIF(%s IS NULL, 'N', CONCAT(LENGTH(%s), ':', %s))",
						 i ? ", " : "", CtasMyQuoteIdent(t->columns[idx[i]]),
						 v, v);
	}
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * CtasMySyncVerifyRemote
 *		One step of a check on the remote table (target.h).
 */
void
CtasMySyncVerifyRemote(CtasSyncTarget *t, const int *keys, int level,
					   const char *buckets, bool rows,
					   void (*emit) (void *arg, char **fields), void *arg)
{
	int		   *all = palloc(sizeof(int) * Max(t->ncolumns, 1));
	char	   *inner;
	char	   *sql;
	List	   *volatile res = NIL;
	MyConn	   *conn;
	ListCell   *lc;
	int			i;

	for (i = 0; i < t->ncolumns; i++)
		all[i] = i;
	inner = psprintf("SELECT MD5(%s) AS kh, %s AS kt, %s AS rt FROM %s",
					 canonical(t, t->nkeys, keys), canonical(t, t->nkeys, keys),
					 canonical(t, t->ncolumns, all),
					 CtasMyQname(t->schema, t->table));
	if (rows)
		sql = psprintf("SELECT kh, kt, rt FROM (%s) s WHERE LEFT(kh, %d) IN (%s) "
					   "ORDER BY kh LIMIT 10000",
					   inner, VERIFY_HEX * level, buckets);
	else
		sql = psprintf("SELECT LEFT(kh, %d), CAST(COUNT(*) AS CHAR), "
					   "CAST(MOD(SUM(CAST(CONV(LEFT(MD5(rt), 16), 16, 10) AS UNSIGNED)), "
					   "18446744073709551616) AS CHAR) "
					   "FROM (%s) s %s GROUP BY 1",
					   VERIFY_HEX * level, inner,
					   buckets ? psprintf("WHERE LEFT(kh, %d) IN (%s)",
										  VERIFY_HEX * (level - 1), buckets) : "");
	conn = CtasMyConnect(t->catalog, CurrentMemoryContext, false);
	PG_TRY();
	{
		res = CtasMyQuery(conn, sql, "compute the check of the sync", NULL);
	}
	PG_FINALLY();
	{
		CtasMyClose(conn);
	}
	PG_END_TRY();
	foreach(lc, res)
		emit(arg, (char **) lfirst(lc));
}
