/*-------------------------------------------------------------------------
 *
 * verify.c
 *		  Verify of a continuous sync into a PostgreSQL catalog: the
 *		  verify_local and verify_remote members of CtasPgSyncApply
 *		  (target.h, sync/verify.c).
 *
 * The remote column has the local column's type, or text (column_types,
 * typemap.c) holding the local text output: the value's text is (v)::text
 * on both sides, under the same pinned settings (DateStyle ISO, YMD,
 * IntervalStyle postgres, extra_float_digits 1, bytea_output hex, TimeZone
 * UTC).  Each step is one query on a connection of its own (the worker
 * applies nothing while it checks, so every step sees the same remote
 * table), mirroring the local one of sync/verify.c over the remote table.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/postgres/verify.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "postgres_target.h"

/* hex digits of the key hash per level, as sync/verify.c */
#define VERIFY_HEX	3

/*
 * CtasPgSyncVerifyLocal
 *		The local expression of a value's text: its text output.
 */
char *
CtasPgSyncVerifyLocal(CtasSyncTarget *t, int col, const char *expr)
{
	return psprintf("(%s)::text", expr);
}

/*
 * pg_canonical
 *		The canonical text of the columns idx[0..n-1], as sync/verify.c's,
 *		over the texts t1, t2, ... of the columns (pg_texts).
 */
static char *
pg_canonical(int n, const int *idx)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < n; i++)
		appendStringInfo(&buf, "%sCASE WHEN v.t%d IS NULL THEN 'N' "
						 "ELSE octet_length(v.t%d)::text || ':' || v.t%d END",
						 i ? " || " : "", idx[i] + 1, idx[i] + 1, idx[i] + 1);
	return buf.data;
}

/*
 * pg_texts
 *		SELECT (c1)::text AS t1, ... FROM the remote table, behind an OFFSET 0
 *		so that each value's text is computed once (sync/verify.c,
 *		local_inner).
 */
static char *
pg_texts(CtasSyncTarget *t)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "SELECT ");
	for (i = 0; i < t->ncolumns; i++)
		appendStringInfo(&buf, "%s(%s)::text AS t%d", i ? ", " : "",
						 quote_identifier(t->columns[i]), i + 1);
	appendStringInfo(&buf, " FROM %s.%s OFFSET 0",
					 quote_identifier(t->schema), quote_identifier(t->table));
	return buf.data;
}

/*
 * CtasPgSyncVerifyRemote
 *		One step of a check on the remote table (target.h).
 */
void
CtasPgSyncVerifyRemote(CtasSyncTarget *t, const int *keys, int level,
					   const char *buckets, bool rows,
					   void (*emit) (void *arg, char **fields), void *arg)
{
	int		   *all = palloc(sizeof(int) * Max(t->ncolumns, 1));
	char	   *inner;
	char	   *sql;
	int			i;
	PGconn	   *volatile conn = NULL;

	for (i = 0; i < t->ncolumns; i++)
		all[i] = i;
	inner = psprintf("SELECT md5(%s) AS kh, %s AS kt, %s AS rt FROM (%s) v",
					 pg_canonical(t->nkeys, keys), pg_canonical(t->nkeys, keys),
					 pg_canonical(t->ncolumns, all), pg_texts(t));
	if (rows)
		sql = psprintf("SELECT kh, kt, rt FROM (%s) s WHERE left(kh, %d) IN (%s) "
					   "ORDER BY kh LIMIT 10000",
					   inner, VERIFY_HEX * level, buckets);
	else
		sql = psprintf("SELECT left(kh, %d), count(*)::text, "
					   "(((sum(('x' || left(md5(rt), 16))::bit(64)::int8) "
					   "%% 18446744073709551616) + 18446744073709551616) "
					   "%% 18446744073709551616)::text "
					   "FROM (%s) s %s GROUP BY 1",
					   VERIFY_HEX * level, inner,
					   buckets ? psprintf("WHERE left(kh, %d) IN (%s)",
										  VERIFY_HEX * (level - 1), buckets) : "");

	PG_TRY();
	{
		PGresult   *res;
		int			r;

		conn = CtasPgConnectFresh(t->catalog);
		PQclear(CtasPgQuery(conn, t->catalog,
							"SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false), "
							"pg_catalog.set_config('datestyle', 'ISO, YMD', false), "
							"pg_catalog.set_config('intervalstyle', 'postgres', false), "
							"pg_catalog.set_config('extra_float_digits', '1', false), "
							"pg_catalog.set_config('bytea_output', 'hex', false), "
							"pg_catalog.set_config('timezone', 'UTC', false)"));
		res = CtasPgQuery(conn, t->catalog, sql);
		for (r = 0; r < PQntuples(res); r++)
		{
			char	   *fields[3];

			for (i = 0; i < 3; i++)
				fields[i] = PQgetvalue(res, r, i);
			emit(arg, fields);
		}
		PQclear(res);
	}
	PG_FINALLY();
	{
		if (conn != NULL)
			CtasPgCloseFresh(conn);
	}
	PG_END_TRY();
}
