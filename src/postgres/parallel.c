/*-------------------------------------------------------------------------
 *
 * parallel.c
 *		  The remote side of parallel loads into a PostgreSQL catalog: the
 *		  scratch table the workers load and the remote transaction takes,
 *		  and the workers' prepared transactions (writer.c,
 *		  pg_parallel_export, pg_parallel_attach, end_load, abort).
 *
 * The scratch table's name carries the local transaction, and so do the
 * gids of the workers' remote transactions (gid.c), so that the resolver
 * (resolve.c) knows whose they are.  The order (writer.c's header has the
 * steps):
 *	1. each worker PREPAREs its COPY into the scratch table;
 *	2. at end_load, once every worker is done, the leader COMMITs PREPARED
 *	   them (their locks on the scratch table go, their rows become
 *	   visible), then its remote transaction takes the scratch table
 *	   (rename, or insert and drop);
 *	3. the leader's remote transaction is prepared at pre-commit and
 *	   committed after the local commit, as for a serial load.
 * The workers' rows are thus committed before the local commit, but into a
 * table that is no one's but this transaction's: only the leader's remote
 * transaction, which the local transaction decides, shows them under the
 * table's name.  Committing them later (at pre-commit, before the leader's
 * PREPARE) would keep them uncommitted a little longer and gain nothing,
 * but would move the load's own errors (row count, primary key) from the
 * statement to COMMIT.  A worker gid never outlives end_load in a
 * transaction that commits, so the resolver never has to commit one.
 *
 * What a crash of the leader leaves (the local transaction is aborted by
 * the crash unless its commit record was written) and who settles it:
 *	before a worker's PREPARE	its open remote transaction: rolled back
 *								when its connection closes; the scratch
 *								table: the resolver drops it
 *	after it, before end_load	the worker's prepared transaction: the
 *								resolver rolls it back, then drops the
 *								scratch table
 *	after the workers' COMMIT PREPARED, before the leader's PREPARE
 *								the scratch table with the rows: the
 *								resolver drops it; the leader's open
 *								remote transaction dies with its connection
 *	after the leader's PREPARE	its prepared transaction: the resolver rolls
 *								it back (the scratch table comes back) and
 *								drops the scratch table
 *	after the local commit		its prepared transaction: the resolver
 *								commits it (the table, every row); no
 *								scratch table is left
 * Without a crash, abort (or the abort of the subtransaction that ran the
 * load) rolls back the worker gids of the loads that end_load did not
 * settle, on the side connection, and then drops the scratch tables (at the
 * end of the transaction).  A worker whose PREPARE was still on its way
 * when the leader gave up is waited for: the abort rolls back only once no
 * worker's remote session holds the scratch table any more (it ended, or
 * prepared); what still appears after CLEANUP_TIMEOUT_MS is the
 * resolver's.  With two_phase off (or a remote without prepared
 * transactions), the workers commit in one phase, as the leader does.
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
 *		end_load of a parallel load, in the remote transaction on conn, once
 *		the workers' transactions are committed (committed of them by
 *		CtasPgCommitWorkers; -1 when the workers committed in one phase):
 *		the scratch table the workers loaded becomes the table qualified
 *		(when the load created it), or its rows are inserted into qualified
 *		and it is dropped.  ERROR on any failure, and when rows were lost on
 *		the way.
 *
 * The rows lost on the way are found without reading the scratch table
 * again (a count(*) of it cost about 0.1 CPU second per million rows on the
 * remote, in the leader alone, however many workers loaded it):
 *	- rows reach the scratch table only through the workers' COPYs, one per
 *	  stream, and each worker checks, before it prepares or commits, that
 *	  its COPY stored as many rows as it sent (writer.c, finish_copy: the
 *	  count the remote reports leaves out the rows a trigger skipped); its
 *	  error is the statement's;
 *	- each stream's rows are in the table's counters in the DSM once it has
 *	  ended without error, so load->rows is the sum of what every stream
 *	  stored, and load->streams how many streams there were (parallel.c);
 *	- two-phase, every stream is one prepared transaction with a gid of
 *	  this load, and CtasPgCommitWorkers committed as many as there were
 *	  streams, or else some stored rows are not in the table: checked here;
 *	  one-phase, each stream committed its rows before it ended;
 *	- the rename takes the scratch table as it is, and the INSERT's own
 *	  count is checked against load->rows.
 */
void
CtasPgTakeScratch(CtasLoad *load, PGconn *conn, const char *scratch,
				  const char *qualified, bool created, int committed)
{
	PGresult   *res;
	uint64		n = 0;
	StringInfoData cols;
	char	   *sql;
	int			i;

	if (committed >= 0 && (uint32) committed != load->streams)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("found %d prepared transactions of parallel workers on catalog \"%s\", expected %u",
						committed, load->catalog->name, load->streams),
				 errdetail("The rows of the missing ones would be missing from table %s.",
						   qualified)));
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
	sql = psprintf("INSERT INTO %s (%s) SELECT %s FROM %s",
				   qualified, cols.data, cols.data, scratch);
	res = CtasPgRun(conn, load->catalog, sql);
	if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK)
		CtasPgReportError(ERROR, res, conn, load->catalog, sql);
	if (PQcmdTuples(res)[0] != '\0')
		n = strtou64(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	if (n != load->rows)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("catalog \"%s\" received " UINT64_FORMAT " rows, but " UINT64_FORMAT " were sent",
						load->catalog->name, n, load->rows)));
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

	/*
	 * Most of them are gone already (taken by the committed transaction):
	 * no "does not exist, skipping" NOTICE for each in the server's log.
	 */
	if (conn != NULL &&
		!CtasPgExecBounded(conn, "SET client_min_messages = warning",
						   CLEANUP_TIMEOUT_MS, &msg))
		conn = NULL;
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
	(void) CtasPgExecBounded(conn, "RESET client_min_messages",
							 CLEANUP_TIMEOUT_MS, &msg);
	*scratch = NIL;
}

/*
 * CtasPgCommitWorkers
 *		end_load of a parallel load, on conn (the leader's connection for
 *		parallel loads, outside any transaction block), before the remote
 *		transaction takes the scratch table: COMMIT PREPARED of every worker
 *		gid that starts with prefix.  Their prepared transactions hold locks
 *		on the scratch table, and their rows must be visible to the remote
 *		transaction.  Returns how many there were.  ERROR on any failure
 *		(the abort then rolls back those that are left).
 */
int
CtasPgCommitWorkers(CtasCatalog *catalog, PGconn *conn, const char *prefix)
{
	PGresult   *res;
	List	   *gids = NIL;
	ListCell   *lc;
	int			i;

	res = CtasPgQuery(conn, catalog,
					  psprintf("SELECT gid FROM pg_catalog.pg_prepared_xacts "
							   "WHERE database = pg_catalog.current_database() "
							   "AND pg_catalog.starts_with(gid, %s) ORDER BY gid",
							   quote_literal_cstr(prefix)));
	for (i = 0; i < PQntuples(res); i++)
		gids = lappend(gids, pstrdup(PQgetvalue(res, i, 0)));
	PQclear(res);
	foreach(lc, gids)
		CtasPgExec(conn, catalog,
				   psprintf("COMMIT PREPARED %s",
							quote_literal_cstr((char *) lfirst(lc))));
	return list_length(gids);
}

/*
 * workers_gone
 *		Wait, until deadline, for the remote sessions of the workers of a
 *		load to end or to prepare.  A worker that the leader's abort
 *		terminated may have sent its PREPARE TRANSACTION without waiting for
 *		the answer, and its remote session may not have read it yet: until
 *		that session ends (or has prepared), pg_prepared_xacts does not say
 *		what it will leave.  Every worker's session holds RowExclusiveLock
 *		on the scratch table from its COPY on, until its transaction ends or
 *		is prepared (a prepared transaction's locks have no pid); the
 *		leader's own sessions never take that mode on it.  true when no such
 *		session is left; false on timeout or error (the caller goes on: the
 *		resolver rolls back what appears later).  Interrupts are held.
 */
static bool
workers_gone(PGconn *conn, const char *scratch, TimestampTz deadline)
{
	for (;;)
	{
		PGresult   *res;
		bool		timed_out = false;
		bool		gone = false;
		bool		ok = false;

		if (!PQsendQueryParams(conn,
							   "SELECT NOT EXISTS (SELECT FROM pg_catalog.pg_locks "
							   "WHERE locktype = 'relation' "
							   "AND relation = pg_catalog.to_regclass($1) "
							   "AND mode = 'RowExclusiveLock' "
							   "AND pid IS NOT NULL "
							   "AND pid <> pg_catalog.pg_backend_pid())",
							   1, NULL, &scratch, NULL, NULL, 0))
			return false;
		while ((res = CtasPgGetResult(conn, deadline, &timed_out)) != NULL)
		{
			if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
			{
				ok = true;
				gone = (strcmp(PQgetvalue(res, 0, 0), "t") == 0);
			}
			PQclear(res);
		}
		if (!ok || timed_out)
			return false;
		if (gone)
			return true;
		if (GetCurrentTimestamp() >= deadline)
			return false;
		pg_usleep(10000L);
	}
}

/*
 * rollback_workers
 *		ROLLBACK PREPARED of every worker gid that starts with prefix, on
 *		conn, once no worker's session can still prepare (workers_gone),
 *		each step bounded by CLEANUP_TIMEOUT_MS with interrupts held.
 *		false, with a palloc'd message in *msg, when it could not be done.
 *		Never an error.
 */
static bool
rollback_workers(PGconn *conn, const CtasPgWorkerGids *w, char **msg)
{
	const char *prefix = w->prefix;
	TimestampTz deadline;
	PGresult   *res;
	List	   *gids = NIL;
	ListCell   *lc;
	bool		timed_out = false;
	bool		ok = false;

	*msg = NULL;

	/* a COMMIT PREPARED of end_load that a cancel interrupted */
	if (conn != NULL && PQtransactionStatus(conn) == PQTRANS_ACTIVE &&
		!CtasPgCancel(conn, false, CLEANUP_TIMEOUT_MS))
		conn = NULL;
	if (conn != NULL && PQstatus(conn) == CONNECTION_OK)
		(void) workers_gone(conn, w->scratch,
							TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														CLEANUP_TIMEOUT_MS));
	if (conn == NULL || PQstatus(conn) != CONNECTION_OK ||
		!PQsendQueryParams(conn,
						   "SELECT gid FROM pg_catalog.pg_prepared_xacts "
						   "WHERE database = pg_catalog.current_database() "
						   "AND pg_catalog.starts_with(gid, $1)",
						   1, NULL, &prefix, NULL, NULL, 0))
	{
		*msg = pstrdup("connection lost");
		return false;
	}
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   CLEANUP_TIMEOUT_MS);
	while ((res = CtasPgGetResult(conn, deadline, &timed_out)) != NULL)
	{
		int			i;

		if (PQresultStatus(res) == PGRES_TUPLES_OK)
		{
			ok = true;
			for (i = 0; i < PQntuples(res); i++)
				gids = lappend(gids, pstrdup(PQgetvalue(res, i, 0)));
		}
		PQclear(res);
	}
	if (!ok || timed_out)
	{
		*msg = timed_out ? psprintf("no answer within %d ms", CLEANUP_TIMEOUT_MS) :
			pchomp(PQerrorMessage(conn));
		return false;
	}
	foreach(lc, gids)
	{
		if (!CtasPgExecBounded(conn,
							   psprintf("ROLLBACK PREPARED %s",
										quote_literal_cstr((char *) lfirst(lc))),
							   CLEANUP_TIMEOUT_MS, msg))
			return false;
	}
	return true;
}

/*
 * CtasPgRollbackWorkers
 *		Abort of the (sub)transaction at nesting level: ROLLBACK PREPARED of
 *		the worker gids of every parallel load in *pending (a List of
 *		CtasPgWorkerGids) done at that level or deeper, on conn (NULL when
 *		there is none), and forget those loads.  What cannot be rolled back
 *		is left to the resolver, with a WARNING; returns false then.  Never
 *		an error.
 */
bool
CtasPgRollbackWorkers(CtasCatalog *catalog, PGconn *conn, List **pending,
					  int level)
{
	ListCell   *lc;
	bool		all = true;

	foreach(lc, *pending)
	{
		CtasPgWorkerGids *w = lfirst(lc);
		char	   *msg;

		if (w->level < level)
			continue;
		if (!rollback_workers(conn, w, &msg))
		{
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not roll back the prepared transactions \"%s*\" of parallel workers on catalog \"%s\"",
							w->prefix, catalog->name),
					 errdetail_internal("%s", msg),
					 errhint("ctas_fed.resolve_in_doubt() rolls them back once the catalog is reachable.")));
			all = false;
		}
		*pending = foreach_delete_current(*pending, lc);
	}
	return all;
}

/*
 * CtasPgSubCommitWorkers
 *		Commit of the subtransaction at nesting level: its parallel loads in
 *		pending become the parent's.
 */
void
CtasPgSubCommitWorkers(List *pending, int level)
{
	ListCell   *lc;

	foreach(lc, pending)
	{
		CtasPgWorkerGids *w = lfirst(lc);

		if (w->level >= level)
			w->level = level - 1;
	}
}
