/*-------------------------------------------------------------------------
 *
 * pipeline.c
 *		  Statements sent to a PostgreSQL catalog in one libpq pipeline
 *		  (libpq 14+, any server of the extended protocol), whose results
 *		  are read later: the sync's apply (sync.c) sends a batch's
 *		  statements and COMMIT and builds the next batch while the remote
 *		  runs them.
 *
 * Protocol: CtasPgPipelineSend enters pipeline mode, sends each statement
 * (PQsendQueryParams, no parameters) and a sync, and returns with the
 * connection in pipeline mode; nothing else may be sent on it until
 * CtasPgPipelineFinish has read every result up to the sync and left
 * pipeline mode.  The server runs the statements as one implicit
 * transaction unless they hold their own BEGIN/COMMIT; after an error it
 * skips the rest (PGRES_PIPELINE_ABORTED) up to the sync, so a COMMIT after
 * a failed statement never commits anything.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/postgres/pipeline.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "postgres_target.h"

/*
 * CtasPgPipelineSend
 *		Send the statements (a List of SQL strings) in one pipeline ended
 *		by a sync, without reading results.  ERROR when libpq refuses.
 */
void
CtasPgPipelineSend(PGconn *conn, CtasCatalog *catalog, List *statements)
{
	ListCell   *lc;

	if (!PQenterPipelineMode(conn))
		CtasPgReportError(ERROR, NULL, conn, catalog, NULL);
	foreach(lc, statements)
	{
		if (!PQsendQueryParams(conn, lfirst(lc), 0, NULL, NULL, NULL,
							   NULL, 0))
			CtasPgReportError(ERROR, NULL, conn, catalog, lfirst(lc));
	}
	if (!PQpipelineSync(conn))
		CtasPgReportError(ERROR, NULL, conn, catalog, NULL);
}

/*
 * CtasPgPipelineFinish
 *		Read every result of the pipeline CtasPgPipelineSend sent with
 *		statements (the same List, to name the statement that failed), up
 *		to its sync, waiting interruptibly, and leave pipeline mode.  ERROR
 *		with the first remote error.
 */
void
CtasPgPipelineFinish(PGconn *conn, CtasCatalog *catalog, List *statements)
{
	PGresult   *failed = NULL;
	const char *failed_sql = NULL;
	ListCell   *cur = list_head(statements);
	bool		synced = false;

	while (!synced)
	{
		PGresult   *res = CtasPgGetResult(conn, 0, NULL);

		if (res == NULL)
		{
			if (PQstatus(conn) == CONNECTION_BAD)
				CtasPgReportError(ERROR, NULL, conn, catalog, NULL);
			/* the end of one statement's results */
			if (cur != NULL)
				cur = lnext(statements, cur);
			continue;
		}
		switch (PQresultStatus(res))
		{
			case PGRES_PIPELINE_SYNC:
				synced = true;
				PQclear(res);
				break;
			case PGRES_COMMAND_OK:
			case PGRES_TUPLES_OK:
			case PGRES_PIPELINE_ABORTED:
				PQclear(res);
				break;
			default:
				if (failed == NULL)
				{
					failed = res;
					failed_sql = cur ? pstrdup(lfirst(cur)) : NULL;
				}
				else
					PQclear(res);
				break;
		}
	}
	if (!PQexitPipelineMode(conn))
		CtasPgReportError(ERROR, NULL, conn, catalog, NULL);
	if (failed != NULL)
		CtasPgReportError(ERROR, failed, conn, catalog, failed_sql);
}
