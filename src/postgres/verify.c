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

/* the canonical text of the columns idx[0..n-1], as sync/verify.c's */
static char *
pg_canonical(CtasSyncTarget *t, int n, const int *idx)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < n; i++)
	{
		const char *c = quote_identifier(t->columns[idx[i]]);

		appendStringInfo(&buf, "%sCASE WHEN %s IS NULL THEN 'N' "
						 "ELSE octet_length((%s)::text)::text || ':' || (%s)::text END",
						 i ? " || " : "", c, c, c);
	}
	return buf.data;
}

/* 'a', 'b', ... */
static char *
pg_in_list(List *prefixes)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, prefixes)
		appendStringInfo(&buf, "%s%s", buf.len ? ", " : "",
						 quote_literal_cstr(lfirst(lc)));
	return buf.data;
}

/*
 * CtasPgSyncVerifyRemote
 *		One step of a check on the remote table (target.h).
 */
void
CtasPgSyncVerifyRemote(CtasSyncTarget *t, int level, List *prefixes,
					   bool rows, void (*emit) (void *arg, char **fields),
					   void *arg)
{
	int		   *all = palloc(sizeof(int) * Max(t->ncolumns, 1));
	int		   *keys = palloc(sizeof(int) * Max(t->nkeys, 1));
	char	   *inner;
	char	   *sql;
	int			i;
	int			k;
	PGconn	   *volatile conn = NULL;

	for (i = 0; i < t->ncolumns; i++)
		all[i] = i;
	for (k = 0; k < t->nkeys; k++)
	{
		keys[k] = 0;
		for (i = 0; i < t->ncolumns; i++)
		{
			if (strcmp(t->columns[i], t->keys[k]) == 0)
				keys[k] = i;
		}
	}
	inner = psprintf("SELECT md5(%s) AS kh, %s AS kt, %s AS rt FROM %s.%s",
					 pg_canonical(t, t->nkeys, keys), pg_canonical(t, t->nkeys, keys),
					 pg_canonical(t, t->ncolumns, all),
					 quote_identifier(t->schema), quote_identifier(t->table));
	if (rows)
		sql = psprintf("SELECT kh, kt, rt FROM (%s) s WHERE left(kh, %d) IN (%s) "
					   "ORDER BY kh LIMIT 10000",
					   inner, VERIFY_HEX * level, pg_in_list(prefixes));
	else
		sql = psprintf("SELECT left(kh, %d), count(*)::text, "
					   "(((sum(('x' || left(md5(rt), 16))::bit(64)::int8) "
					   "%% 18446744073709551616) + 18446744073709551616) "
					   "%% 18446744073709551616)::text "
					   "FROM (%s) s %s GROUP BY 1",
					   VERIFY_HEX * level, inner,
					   prefixes ? psprintf("WHERE left(kh, %d) IN (%s)",
										   VERIFY_HEX * (level - 1),
										   pg_in_list(prefixes)) : "");

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
