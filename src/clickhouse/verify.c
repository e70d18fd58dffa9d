/*-------------------------------------------------------------------------
 *
 * verify.c
 *		  Verify of a continuous sync into a ClickHouse catalog: the
 *		  optional verify_local and verify_remote members of
 *		  CtasChSyncApply (target.h, sync/verify.c).
 *
 * Resync: the rebuild and rebuilt of a resync are in sync.c (a staging
 * table renamed over the synced table).
 *
 * Verify.  The text of a value is toString() of the remote column, which
 * the local side reproduces by type (verify_local): integers, strings,
 * dates and floats print as PostgreSQL prints them (a float of a large or
 * small exponent may not: 1e+20 against 100000000000000000000, reported
 * as a difference), a boolean is 1 or 0, a Decimal(P, S) has S digits, a
 * DateTime (whole seconds) is the UTC time without its fraction.  Other
 * remote types cannot be compared yet.  Rows are read as readers read
 * them: FINAL WHERE _deleted = 0.  halfMD5 is MD5's first 8 bytes
 * big-endian, as sync/verify.c reads them; sum() of UInt64 wraps modulo
 * 2^64, as it takes them.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/verify.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "clickhouse.h"

/* hex digits of the key hash per level, as sync/verify.c */
#define VERIFY_HEX	3

/*
 * remote_type
 *		The type of remote column col, without Nullable( ) or
 *		LowCardinality( ), read from system.columns.  ERROR when missing.
 */
static char *
remote_type(CtasChHttp *http, CtasSyncTarget *t, int col)
{
	char	   *body;
	List	   *rows;
	int			nf;
	char	   *type;
	size_t		len;

	body = CtasChHttpQuery(http,
						 psprintf("SELECT type FROM system.columns WHERE database = %s "
								  "AND table = %s AND name = %s",
								  CtasChLit(t->schema), CtasChLit(t->table),
								  CtasChLit(t->columns[col])),
						 "read the type of a synced column");
	rows = CtasChTsv(body, &nf);
	if (rows == NIL || nf != 1 || ((char **) linitial(rows))[0] == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of the synced table %s is missing on catalog \"%s\"",
						t->columns[col], CtasChDisplay(t->schema, t->table),
						t->catalog->name)));
	type = ((char **) linitial(rows))[0];
	while (true)
	{
		len = strlen(type);
		if (strncmp(type, "Nullable(", 9) == 0 && type[len - 1] == ')')
			type = pnstrdup(type + 9, len - 10);
		else if (strncmp(type, "LowCardinality(", 15) == 0 && type[len - 1] == ')')
			type = pnstrdup(type + 15, len - 16);
		else
			return type;
	}
}

/*
 * CtasChSyncVerifyLocal
 *		The local expression over expr that prints as toString() of the
 *		remote column col, or NULL when its type cannot be compared.
 */
char *
CtasChSyncVerifyLocal(CtasSyncTarget *t, int col, const char *expr)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "ctas_fed sync verify",
											  ALLOCSET_SMALL_SIZES);
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	char	   *type = remote_type(CtasChHttpCreate(t->catalog, cxt), t, col);
	Oid			local = getBaseType(t->types[col]);
	const char *scale;
	char	   *result = NULL;

	MemoryContextSwitchTo(oldcxt);
	if (local == BYTEAOID)
		result = NULL;			/* raw bytes remotely */
	else if (strcmp(type, "String") == 0 || strcmp(type, "Date") == 0 ||
			 strncmp(type, "Float", 5) == 0)
		result = psprintf("(%s)::text", expr);
	else if (strncmp(type, "Int", 3) == 0 || strncmp(type, "UInt", 4) == 0)
		result = local == BOOLOID ?
			psprintf("CASE WHEN %s THEN '1' ELSE '0' END", expr) :
			psprintf("(%s)::text", expr);
	else if (strncmp(type, "Decimal", 7) == 0 &&
			 ((scale = strrchr(type, ',')) != NULL ||
			  (scale = strchr(type, '(')) != NULL))
		result = psprintf("round((%s)::numeric, %d)::text", expr,
						  atoi(scale + 1));
	else if (strncmp(type, "DateTime", 8) == 0 && local == TIMESTAMPTZOID)
		result = psprintf("to_char((%s) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')",
						  expr);
	else if (strncmp(type, "DateTime", 8) == 0 && local == TIMESTAMPOID)
		result = psprintf("to_char(%s, 'YYYY-MM-DD HH24:MI:SS')", expr);
	MemoryContextDelete(cxt);
	return result;
}

/* the canonical text of the columns idx[0..n-1], as sync/verify.c's */
static char *
ch_canonical(CtasSyncTarget *t, char **types, int n, const int *idx)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < n; i++)
	{
		StringInfoData c;
		char	   *v;

		initStringInfo(&c);
		CtasChAppendIdent(&c, t->columns[idx[i]]);
		if (strcmp(types[idx[i]], "String") == 0)
			v = psprintf("assumeNotNull(%s)", c.data);
		else if (strncmp(types[idx[i]], "DateTime", 8) == 0)
			v = psprintf("toString(assumeNotNull(%s), 'UTC')", c.data);
		else
			v = psprintf("toString(assumeNotNull(%s))", c.data);
		appendStringInfo(&buf, "%sif(isNull(%s), 'N', concat(toString(length(%s)), ':', %s))",
						 i ? ", " : "", c.data, v, v);
	}
	return n > 1 ? psprintf("concat(%s)", buf.data) : buf.data;
}

/*
 * CtasChSyncVerifyRemote
 *		One step of a check on the remote table (target.h), as readers see
 *		it.  Its own HTTP client, freed with a memory context of its own.
 */
void
CtasChSyncVerifyRemote(CtasSyncTarget *t, const int *keys, int level,
					   const char *buckets, bool rows,
					   void (*emit) (void *arg, char **fields), void *arg)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "ctas_fed sync verify",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	CtasChHttp   *http = CtasChHttpCreate(t->catalog, cxt);
	char	  **types = palloc(sizeof(char *) * Max(t->ncolumns, 1));
	int		   *all = palloc(sizeof(int) * Max(t->ncolumns, 1));
	char	   *inner;
	char	   *sql;
	List	   *result;
	ListCell   *lc;
	int			nf;
	int			i;

	for (i = 0; i < t->ncolumns; i++)
	{
		types[i] = remote_type(http, t, i);
		all[i] = i;
	}
	inner = psprintf("SELECT lower(hex(MD5(%s))) AS kh, %s AS kt, %s AS rt "
					 "FROM %s FINAL WHERE _deleted = 0",
					 ch_canonical(t, types, t->nkeys, keys),
					 ch_canonical(t, types, t->nkeys, keys),
					 ch_canonical(t, types, t->ncolumns, all),
					 CtasChQname(t->schema, t->table));
	if (rows)
		sql = psprintf("SELECT kh, kt, rt FROM (%s) WHERE substring(kh, 1, %d) IN (%s) "
					   "ORDER BY kh LIMIT 10000 FORMAT TabSeparated",
					   inner, VERIFY_HEX * level, buckets);
	else
		sql = psprintf("SELECT substring(kh, 1, %d) AS b, toString(count()), "
					   "toString(sum(halfMD5(rt))) FROM (%s) %s GROUP BY b "
					   "FORMAT TabSeparated",
					   VERIFY_HEX * level, inner,
					   buckets ? psprintf("WHERE substring(kh, 1, %d) IN (%s)",
										  VERIFY_HEX * (level - 1), buckets) : "");
	result = CtasChTsv(CtasChHttpQuery(http, sql, "hash the synced table"), &nf);
	if (result != NIL && nf != 3)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("unexpected result from catalog \"%s\" while hashing the synced table",
						t->catalog->name)));
	/* what emit keeps is the caller's */
	MemoryContextSwitchTo(oldcxt);
	foreach(lc, result)
		emit(arg, (char **) lfirst(lc));
	MemoryContextDelete(cxt);
}
