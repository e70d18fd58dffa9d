/*-------------------------------------------------------------------------
 *
 * parallel.c
 *		  The remote side of parallel loads into a PostgreSQL catalog: the
 *		  scratch table the workers load and the remote transaction takes
 *		  (writer.c, pg_parallel_export, pg_parallel_attach, end_load).
 *
 * The scratch table's name carries the local transaction (gid.c), so that
 * the resolver (resolve.c) knows whose it is.  The remote transaction of
 * the leader takes its rows at end_load (take); after the transaction is
 * over, every scratch table of it is dropped (drop), a no-op for one that
 * was renamed and committed.
 *
 * This file calls only into connection.c; writer.c calls it.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/postgres/parallel.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "postgres_target.h"

/*
 * CtasPgTakeScratch
 *		end_load of a parallel load, in the remote transaction on conn: the
 *		scratch table the workers loaded becomes the table qualified (when
 *		the load created it), or its rows are inserted into qualified and it
 *		is dropped, after a check of its row count against the rows the
 *		workers sent (load->rows).  ERROR on any failure.
 */
void
CtasPgTakeScratch(CtasLoad *load, PGconn *conn, const char *scratch,
				  const char *qualified, bool created)
{
	PGresult   *res;
	uint64		n;
	StringInfoData cols;
	int			i;

	res = CtasPgQuery(conn, load->catalog,
					  psprintf("SELECT count(*) FROM %s", scratch));
	n = strtou64(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	if (n != load->rows)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("catalog \"%s\" received " UINT64_FORMAT " rows, but " UINT64_FORMAT " were sent",
						load->catalog->name, n, load->rows)));
	if (created)
	{
		CtasPgExec(conn, load->catalog,
				   psprintf("DROP TABLE %s", qualified));
		CtasPgExec(conn, load->catalog,
				   psprintf("ALTER TABLE %s RENAME TO %s", scratch,
							quote_identifier(load->table)));
		return;
	}
	initStringInfo(&cols);
	for (i = 0; i < load->ncolumns; i++)
		appendStringInfo(&cols, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(load->columns[i].name));
	CtasPgExec(conn, load->catalog,
			   psprintf("INSERT INTO %s (%s) SELECT %s FROM %s",
						qualified, cols.data, cols.data, scratch));
	CtasPgExec(conn, load->catalog,
			   psprintf("DROP TABLE %s", scratch));
}

/*
 * CtasPgDropScratch
 *		After the remote transaction is over (committed or rolled back), on
 *		conn, a connection outside a transaction block (NULL when it is not
 *		usable): DROP TABLE IF EXISTS of the scratch tables in *scratch,
 *		bounded in time.  *scratch becomes NIL when all are gone; what
 *		cannot be dropped is left to the resolver, with a WARNING.  Never an
 *		error.
 */
void
CtasPgDropScratch(CtasCatalog *catalog, PGconn *conn, List **scratch)
{
	ListCell   *lc;
	char	   *msg;

	foreach(lc, *scratch)
	{
		char	   *name = lfirst(lc);

		if (conn == NULL ||
			!CtasPgExecBounded(conn,
							   psprintf("DROP TABLE IF EXISTS %s", name),
							   CLEANUP_TIMEOUT_MS, &msg))
		{
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not drop scratch table %s on catalog \"%s\"",
							name, catalog->name),
					 errhint("ctas_fed.resolve_in_doubt() drops it once the catalog is reachable.")));
			return;
		}
	}
	*scratch = NIL;
}
