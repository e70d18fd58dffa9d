/*-------------------------------------------------------------------------
 *
 * worker.c
 *		  The sync worker of a continuous sync: one dynamic background
 *		  worker per decoding stream of ctas_fed.syncs, started by the
 *		  resolver of its database (CtasSyncTick), which also drops the
 *		  replication slot of a stream once none of its jobs runs.
 *
 * A stream is one publication and one replication slot, and the jobs that
 * read them: the one job of a CTAS, or the jobs of the tables of one
 * create_tables_as call, so that the WAL is decoded once for all of them.
 * Each job keeps its own remote transactions, applied lsn and state; the
 * worker runs them together:
 *
 *	copying		the slot is created once and every job's table is copied
 *				under its snapshot, each in its own remote transaction that
 *				stores the consistent point as that job's applied lsn; a
 *				copy interrupted by anything copies every job of the stream
 *				again with a new slot.
 *	streaming	one peek with the stream's publication; each change goes to
 *				the jobs of its table (sync/apply.c), each job applies in a
 *				remote transaction of its own, all committed at the end of
 *				the peek; the slot is advanced only after that.  A job skips
 *				the source transactions below its own applied lsn, so a
 *				crash between two of those commits still applies each
 *				transaction once per table.
 *
 * A job that is stopped leaves the stream (its table leaves the
 * publication in the stopping transaction, sync/statement.c) and the worker goes on
 * with the others; one that fails is recorded as failed and its table
 * taken out of the publication, the worker ends, and the resolver starts
 * it again for the others.  The slot and the publication go with the
 * stream's last job.
 *
 * Each job goes through two phases, as PostgreSQL's own tablesync does:
 *
 *	copying		create the logical replication slot (pgoutput) in a
 *				REPEATABLE READ read-only transaction, exactly as the
 *				walsender's CREATE_REPLICATION_SLOT ... (SNAPSHOT 'use') does:
 *				the snapshot built at the slot's consistent point becomes the
 *				transaction's snapshot, so the copy sees every transaction
 *				that committed before that point and none after it; the
 *				decoding stream begins there.  The copy goes to the remote in
 *				one remote transaction, which also stores the consistent
 *				point as the job's applied lsn; then the job is "streaming".
 *				A copy interrupted by anything starts again with a new slot.
 *	streaming	peek at the slot's changes through SQL
 *				(pg_logical_slot_peek_binary_changes, proto_version 1, the
 *				job's publication), parse the pgoutput messages with
 *				logicalrep_read_*, evaluate the query's WHERE and select
 *				list on each new row, and apply by key: a row in the WHERE
 *				is upserted, a row that is not (or no longer) is deleted, a
 *				changed key deletes the old one, TRUNCATE deletes all.  One
 *				remote transaction per peek, which stores the end lsn of
 *				its last source transaction with the rows; after its
 *				COMMIT the slot is advanced there.  Source transactions
 *				whose commit lies before the lsn stored remotely are
 *				skipped, so a restart at any point applies each exactly
 *				once.
 *
 * The worker connects as the bootstrap superuser, which the slot functions
 * need, but reads the source and evaluates the query's expressions as the
 * job's owner, in a security-restricted operation as REFRESH MATERIALIZED
 * VIEW does (an "immutable" function is still the owner's code), and
 * reaches the catalog with the owner's user mapping under the usual
 * password rules.
 *
 * Errors: a transient one (remote down, cancel) is recorded in the job's
 * row and ends the worker; the resolver starts it again after
 * CTAS_SYNC_RESTART_SECS (sync/tick.c).  One that cannot heal (a DDL that changed a column the
 * query reads, the source dropped, an unchanged TOAST value the worker cannot
 * rebuild) marks the job "failed"; the resolver then drops its slot, so that
 * it holds no WAL (README: Continuous sync).
 *
 * While the source has nothing for the job, the slot is still advanced
 * over the WAL that empty peeks read whole, to a record boundary (at most
 * every SYNC_IDLE_ADVANCE_MS), so that an idle sync holds no WAL either; a
 * peek is skipped while no WAL at all was flushed since the last empty
 * one.
 *
 * What the workers report (rows, changes, the time they were last caught
 * up) lives in a small shared-memory table, read by ctas_fed.sync_status()
 * for the jobs view and by the metrics, which the notifier also pushes
 * without a database connection.  State changes go to the webhook through
 * the registry's event queue (CtasJobsQueueEvent).
 *
 * The apply side of the streaming phase is sync/apply.c.  A peek returns
 * whole source transactions, however large: its rows are read through a
 * cursor and applied a chunk at a time there, so that the worker's memory
 * stays bounded.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogutils.h"
#include "catalog/pg_publication.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/logical.h"
#include "replication/logicalproto.h"
#include "replication/slot.h"
#include "replication/snapbuild.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "sync/sync_int.h"
#include "targets.h"
#include "workers/workers.h"

/* sleep when the slot had nothing new, ms */
#define SYNC_IDLE_MS		100
/* advance the slot over WAL without our changes at most this often, ms */
#define SYNC_IDLE_ADVANCE_MS	1000
/* field4 of the advisory lock tag that makes a worker the only one */
#define CTAS_LOCKTAG_SYNC	0xCF02

PGDLLEXPORT void ctas_fed_sync_main(Datum main_arg);

static MemoryContext job_cxt = NULL;

/* in a sync worker: the job being loaded, before it has a SyncJob */
static int64 loading_id = 0;

/*
 * spi_exec
 *		Run sql with args through SPI (connected by the caller); ERROR on
 *		failure.
 */
static void
spi_exec(const char *sql, int nargs, Oid *types, Datum *values, bool ro)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, NULL,
										   ro, 0);

	if (rc < 0)
		elog(ERROR, "SPI_execute_with_args failed for \"%s\": %s", sql,
			 SPI_result_code_string(rc));
}

/* column col of row of SPI_tuptable, as text (NULL for NULL) */
char *
CtasSyncSpiText(int row, int col)
{
	return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);
}

/* column col of row of SPI_tuptable, a by-value type, never NULL */
Datum
CtasSyncSpiDatum(int row, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[row],
								  SPI_tuptable->tupdesc, col, &isnull);

	if (isnull)
		elog(ERROR, "unexpected NULL in column %d of ctas_fed.syncs", col);
	return d;
}

/* an int2[] or oid[] or text[] column of row 0 as a Datum array */
static Datum *
spi_array(int col, Oid elemtype, int *n)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
								  col, &isnull);
	Datum	   *elems;
	int16		typlen;
	bool		typbyval;
	char		typalign;

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(DatumGetArrayTypeP(d), elemtype, typlen, typbyval,
					  typalign, &elems, NULL, n);
	return elems;
}

/*
 * CtasSyncQueueEvent
 *		The webhook event of a state change of a sync job, if its catalog
 *		(or ctas_fed.notify_url) names a webhook.
 */
void
CtasSyncQueueEvent(int64 job_id, const CtasCatalog *catalog,
				   const char *schema, const char *table, const char *state,
				   uint64 rows, const char *error, TimestampTz started_at)
{
	CtasJobEvent ev;
	const char *url = catalog->notify_url ? catalog->notify_url : CtasNotifyUrl;

	if (url == NULL || url[0] == '\0')
		return;
	memset(&ev, 0, sizeof(ev));
	ev.job_id = job_id;
	strlcpy(ev.catalog, catalog->name, sizeof(ev.catalog));
	snprintf(ev.target, sizeof(ev.target), "%s.%s",
			 quote_identifier(schema), quote_identifier(table));
	strlcpy(ev.mode, "sync", sizeof(ev.mode));
	strlcpy(ev.state_name, state, sizeof(ev.state_name));
	ev.rows = rows;
	if (error)
		strlcpy(ev.error, error, sizeof(ev.error));
	strlcpy(ev.notify_url, url, sizeof(ev.notify_url));
	ev.notify_trusted = !(catalog->notify_url_limited &&
						  url == catalog->notify_url);
	ev.started_at = started_at;
	if (strcmp(state, "stopped") == 0 || strcmp(state, "failed") == 0)
		ev.finished_at = GetCurrentTimestamp();
	CtasJobsQueueEvent(&ev);
}

static void
job_event(SyncJob *job, const char *state, const char *error)
{
	CtasSyncStatusUse(job->id);
	CtasSyncQueueEvent(job->job_id, job->target.catalog, job->target.schema,
				job->target.table, state,
				CtasSyncStatusRows(), error, job->created_at);
}

/*
 * load_job
 *		Read the job's row into a SyncJob in job_cxt, in a transaction of
 *		the caller's.  Returns NULL when the row is gone.
 */
static SyncJob *
load_job(int64 id)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1];
	SyncJob    *job;
	MemoryContext oldcxt;
	Datum	   *elems;
	int			n;
	int			i;
	Oid			serverid;
	ListCell   *lc;

	args[0] = Int64GetDatum(id);
	loading_id = id;
	spi_exec("SELECT owner, server, remote_schema, remote_table, source, "
			 "query_tree, publication, slot_name, state, source_attnums, "
			 "source_columns, source_types, key_columns, source_key, "
			 "remote_columns, job_id, created_at, stream_id, "
			 "schema_changes = 'fail', whole_row "
			 "FROM ctas_fed.syncs WHERE sync_id = $1",
			 1, argtypes, args, true);
	if (SPI_processed != 1)
		return NULL;

	oldcxt = MemoryContextSwitchTo(job_cxt);
	job = palloc0(sizeof(SyncJob));
	job->id = id;
	job->owner = DatumGetObjectId(CtasSyncSpiDatum(0, 1));
	serverid = DatumGetObjectId(CtasSyncSpiDatum(0, 2));
	job->target.schema = CtasSyncSpiText(0, 3);
	job->target.table = CtasSyncSpiText(0, 4);
	job->relid = DatumGetObjectId(CtasSyncSpiDatum(0, 5));
	job->query = (Query *) stringToNode(CtasSyncSpiText(0, 6));
	job->publication = CtasSyncSpiText(0, 7);
	job->slot_name = CtasSyncSpiText(0, 8);
	job->state = CtasSyncSpiText(0, 9);

	elems = spi_array(10, INT2OID, &job->ncols);
	job->attnums = palloc(sizeof(AttrNumber) * job->ncols);
	for (i = 0; i < job->ncols; i++)
		job->attnums[i] = DatumGetInt16(elems[i]);
	elems = spi_array(11, TEXTOID, &n);
	job->attnames = palloc(sizeof(char *) * job->ncols);
	for (i = 0; i < job->ncols; i++)
		job->attnames[i] = TextDatumGetCString(elems[i]);
	elems = spi_array(12, OIDOID, &n);
	job->atttypes = palloc(sizeof(Oid) * job->ncols);
	job->infuncs = palloc0(sizeof(FmgrInfo) * job->ncols);
	job->ioparams = palloc(sizeof(Oid) * job->ncols);
	job->msgcol = palloc(sizeof(int) * job->ncols);
	for (i = 0; i < job->ncols; i++)
	{
		Oid			infunc;

		job->atttypes[i] = DatumGetObjectId(elems[i]);
		getTypeInputInfo(job->atttypes[i], &infunc, &job->ioparams[i]);
		fmgr_info_cxt(infunc, &job->infuncs[i], job_cxt);
		job->msgcol[i] = -1;
	}

	elems = spi_array(13, TEXTOID, &job->target.nkeys);
	job->target.keys = palloc(sizeof(char *) * job->target.nkeys);
	for (i = 0; i < job->target.nkeys; i++)
		job->target.keys[i] = TextDatumGetCString(elems[i]);
	elems = spi_array(14, INT2OID, &n);
	job->keycol = palloc(sizeof(int) * n);
	for (i = 0; i < n; i++)
	{
		int			j;

		job->keycol[i] = -1;
		for (j = 0; j < job->ncols; j++)
		{
			if (job->attnums[j] == DatumGetInt16(elems[i]))
				job->keycol[i] = j;
		}
		if (job->keycol[i] < 0)
			elog(ERROR, "key column %d of sync " INT64_FORMAT " is not read",
				 DatumGetInt16(elems[i]), id);
	}
	elems = spi_array(15, TEXTOID, &job->target.ncolumns);
	job->target.columns = palloc(sizeof(char *) * job->target.ncolumns);
	for (i = 0; i < job->target.ncolumns; i++)
		job->target.columns[i] = TextDatumGetCString(elems[i]);

	/* the types of the values the target gets */
	job->target.types = palloc(sizeof(Oid) * Max(job->target.ncolumns, 1));
	n = 0;
	foreach(lc, job->query->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (!tle->resjunk && n < job->target.ncolumns)
			job->target.types[n++] = exprType((Node *) tle->expr);
	}
	job->target.key_types = palloc(sizeof(Oid) * Max(job->target.nkeys, 1));
	for (i = 0; i < job->target.nkeys; i++)
		job->target.key_types[i] = job->atttypes[job->keycol[i]];

	job->job_id = DatumGetInt64(CtasSyncSpiDatum(0, 16));
	job->created_at = DatumGetTimestampTz(CtasSyncSpiDatum(0, 17));
	job->stream_id = DatumGetInt64(CtasSyncSpiDatum(0, 18));
	job->fail_on_ddl = DatumGetBool(CtasSyncSpiDatum(0, 19));
	job->whole_row = DatumGetBool(CtasSyncSpiDatum(0, 20));
	job->tupdesc = CtasSyncRecordedTupdesc(job);

	/*
	 * The owner's catalog, USAGE and user mapping: their loss does not
	 * heal by itself, and a job retried for ever would hold its slot's WAL.
	 */
	CtasSyncFailed = true;
	job->target.catalog = CtasGetCatalog(serverid, job->owner, true, true);
	CtasSyncFailed = false;
	job->apply = CtasCatalogRoutine(job->target.catalog)->sync;
	if (job->apply == NULL)
		SYNC_FAIL(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				  errmsg("catalogs of type \"%s\" do not support continuous sync",
						 CtasCatalogRoutine(job->target.catalog)->type_name));
	job->target.job_key = psprintf(UINT64_FORMAT "/%u/" INT64_FORMAT,
								   GetSystemIdentifier(), MyDatabaseId, id);
	MemoryContextSwitchTo(oldcxt);
	return job;
}

/*
 * load_stream
 *		The jobs of stream stream_id that run (copying or streaming), as a
 *		List of SyncJob in job_cxt, in a transaction of the caller's.  NIL
 *		when there is none.
 */
static List *
load_stream(int64 stream_id)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1];
	int64	   *ids;
	int			n;
	int			i;
	List	   *jobs = NIL;

	args[0] = Int64GetDatum(stream_id);
	spi_exec("SELECT sync_id FROM ctas_fed.syncs WHERE stream_id = $1 "
			 "AND state IN ('copying', 'streaming') ORDER BY sync_id",
			 1, argtypes, args, true);
	n = (int) SPI_processed;
	ids = palloc(sizeof(int64) * Max(n, 1));
	for (i = 0; i < n; i++)
		ids[i] = DatumGetInt64(CtasSyncSpiDatum(i, 1));
	for (i = 0; i < n; i++)
	{
		SyncJob    *job = load_job(ids[i]);
		MemoryContext oldcxt;

		if (job == NULL)
			continue;
		oldcxt = MemoryContextSwitchTo(job_cxt);
		jobs = lappend(jobs, job);
		MemoryContextSwitchTo(oldcxt);
	}
	loading_id = 0;
	return jobs;
}

/*
 * check_source
 *		The source table still exists, the owner may still read it, and
 *		(with columns) the columns the query reads have the names and types
 *		they had.  While streaming, the columns are checked on each Relation
 *		message instead, so that the changes made before a DDL are applied
 *		before the job fails.  A failure is permanent.
 */
static void
check_source(SyncJob *job, bool columns)
{
	Relation	rel;
	int			i;

	CtasSyncCurrentJob = job;
	rel = try_relation_open(job->relid, AccessShareLock);
	if (rel == NULL)
		SYNC_FAIL(errcode(ERRCODE_UNDEFINED_TABLE),
				  errmsg("the source table of sync " INT64_FORMAT " was dropped",
						 job->id));
	/* SELECT on the table, or on every column the query reads */
	if (pg_class_aclcheck(job->relid, job->owner, ACL_SELECT) != ACLCHECK_OK)
	{
		bool		readable = job->ncols > 0;

		for (i = 0; readable && i < job->ncols; i++)
		{
			bool		missing = false;

			readable = pg_attribute_aclcheck_ext(job->relid, job->attnums[i],
												 job->owner, ACL_SELECT,
												 &missing) == ACLCHECK_OK &&
				!missing;
		}
		if (!readable)
			SYNC_FAIL(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					  errmsg("the owner of sync " INT64_FORMAT " may no longer read table \"%s\"",
							 job->id, RelationGetRelationName(rel)));
	}
	if (job->target.catalog != NULL &&
		pg_foreign_server_aclcheck(job->target.catalog->serverid, job->owner,
								   ACL_USAGE) != ACLCHECK_OK)
		SYNC_FAIL(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				  errmsg("the owner of sync " INT64_FORMAT " may no longer use catalog \"%s\"",
						 job->id, job->target.catalog->name));

	/*
	 * The changes come from the WAL, past any row-level security policy:
	 * a table whose policies now apply to the owner cannot be synced (the
	 * statement refuses it too), nor may an owner who lost the right to
	 * hold a replication slot keep one.
	 */
	if (check_enable_rls(job->relid, job->owner, true) == RLS_ENABLED)
		SYNC_FAIL(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				  errmsg("row-level security applies to the owner of sync " INT64_FORMAT " on table \"%s\"",
						 job->id, RelationGetRelationName(rel)),
				  errdetail("Logical decoding would send rows the policies hide."));
	if (!CtasSyncSchemaTriggerOn())
		SYNC_FAIL(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				  errmsg("the event trigger \"ctas_fed_schema_changes\" of sync " INT64_FORMAT " is gone or not enabled always",
						 job->id),
				  errdetail("Without it the sync cannot see a schema change of its source in the WAL (docs/sync-schema-changes.md)."),
				  errhint("ALTER EVENT TRIGGER ctas_fed_schema_changes ENABLE ALWAYS, then create the sync again."));
	if (!has_rolreplication(job->owner))
		SYNC_FAIL(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				  errmsg("the owner of sync " INT64_FORMAT " no longer has the REPLICATION attribute",
						 job->id),
				  errdetail("A continuous sync holds a replication slot, which only superusers and roles with REPLICATION may do."));
	for (i = 0; columns && i < job->ncols; i++)
	{
		Form_pg_attribute att;

		if (job->attnums[i] > RelationGetDescr(rel)->natts)
			att = NULL;
		else
			att = TupleDescAttr(RelationGetDescr(rel), job->attnums[i] - 1);
		if (att == NULL || att->attisdropped ||
			strcmp(NameStr(att->attname), job->attnames[i]) != 0 ||
			att->atttypid != job->atttypes[i])
			SYNC_FAIL(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					  errmsg("column \"%s\" of table \"%s\" read by sync " INT64_FORMAT " was dropped, renamed or changed its type",
							 job->attnames[i], RelationGetRelationName(rel),
							 job->id),
					  errhint("Stop the sync with ctas_fed.stop_sync() and create it again."));
	}
	relation_close(rel, AccessShareLock);
}

/*
 * set_state
 *		Record the job's state (and error, and applied lsn when valid) in a
 *		transaction of its own.
 */
static void
set_state(int64 id, const char *state, const char *error, XLogRecPtr lsn)
{
	Oid			types[4] = {INT8OID, TEXTOID, TEXTOID, PG_LSNOID};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', error ? ' ' : 'n', lsn ? ' ' : 'n'};
	int			rc;

	values[0] = Int64GetDatum(id);
	values[1] = CStringGetTextDatum(state ? state : "");
	values[2] = error ? CStringGetTextDatum(error) : (Datum) 0;
	values[3] = LSNGetDatum(lsn);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	rc = SPI_execute_with_args("UPDATE ctas_fed.syncs SET "
							   "state = CASE WHEN $2 = '' THEN state ELSE $2 END, "
							   "finished_at = CASE WHEN $2 = 'failed' "
							   "THEN pg_catalog.now() END, "
							   "error = $3, "
							   "applied_lsn = coalesce($4, applied_lsn) "
							   "WHERE sync_id = $1 "
							   "AND state IN ('copying', 'streaming')",
							   4, types, values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "could not record the state of sync " INT64_FORMAT, id);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * set_stream_error
 *		Record error (NULL: none) in every running job of stream stream_id,
 *		in a transaction of its own: what ended or delays the worker that
 *		runs them all.
 */
static void
set_stream_error(int64 stream_id, const char *error)
{
	Oid			types[2] = {INT8OID, TEXTOID};
	Datum		values[2];
	char		nulls[2] = {' ', error ? ' ' : 'n'};

	values[0] = Int64GetDatum(stream_id);
	values[1] = error ? CStringGetTextDatum(error) : (Datum) 0;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute_with_args("UPDATE ctas_fed.syncs SET error = $2 "
							  "WHERE stream_id = $1 "
							  "AND state IN ('copying', 'streaming') "
							  "AND error IS DISTINCT FROM $2",
							  2, types, values, nulls, false, 0) < 0)
		elog(ERROR, "could not record the error of stream " INT64_FORMAT,
			 stream_id);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * CtasSyncUnpublish
 *		Take table relid out of publication, as user userid, in the current
 *		transaction (stop_sync of one job of a stream, sync/statement.c, or a failed
 *		job here); nothing when it is not, or no longer, in it.  The other
 *		tables of the publication's stream go on.  ereport(ERROR) on
 *		failure.
 */
void
CtasSyncUnpublish(const char *publication, Oid relid, Oid userid)
{
	Oid			argtypes[2] = {NAMEOID, OIDOID};
	Datum		values[2];
	char	   *relname = get_rel_name(relid);
	Oid			save_userid;
	int			save_sec;
	int			nestlevel;

	if (relname == NULL)
		return;					/* dropped, and with it its membership */
	values[0] = DirectFunctionCall1(namein, CStringGetDatum(publication));
	values[1] = ObjectIdGetDatum(relid);

	/* as sync/statement.c's spi_begin_as: no operator of the caller's schemas */
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(userid, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	spi_exec("SELECT FROM pg_catalog.pg_publication_rel pr "
			 "JOIN pg_catalog.pg_publication p ON p.oid = pr.prpubid "
			 "WHERE p.pubname = $1 AND pr.prrelid = $2",
			 2, argtypes, values, true);
	if (SPI_processed > 0)
		spi_exec(psprintf("ALTER PUBLICATION %s DROP TABLE ONLY %s",
						  quote_identifier(publication),
						  quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
													 relname)),
				 0, NULL, NULL, false);
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec);
}

/*
 * fail_job
 *		Mark job id "failed" with error, and take its table out of its
 *		stream's publication, in a transaction of its own, so that the
 *		stream's other jobs go on without it.  Nothing when the job no
 *		longer runs (stopped meanwhile).
 */
static void
fail_job(int64 id, const char *error)
{
	Oid			types[2] = {INT8OID, TEXTOID};
	Datum		values[2];
	char	   *publication = NULL;
	Oid			source = InvalidOid;

	values[0] = Int64GetDatum(id);
	values[1] = CStringGetTextDatum(error);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	spi_exec("UPDATE ctas_fed.syncs SET state = 'failed', error = $2, "
			 "finished_at = pg_catalog.now() WHERE sync_id = $1 "
			 "AND state IN ('copying', 'streaming') "
			 "RETURNING publication, source",
			 2, types, values, false);
	if (SPI_processed == 1)
	{
		publication = CtasSyncSpiText(0, 1);
		source = DatumGetObjectId(CtasSyncSpiDatum(0, 2));
	}
	if (publication != NULL)
		CtasSyncUnpublish(publication, source, GetUserId());
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * open_target
 *		Connect to the catalog (in a transaction of the caller's) and read
 *		the applied lsn.
 */
static void
open_target(SyncJob *job)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(job_cxt);

	if (!job->open)
	{
		job->apply->open(&job->target);
		job->open = true;
	}
	job->applied = job->apply->applied_lsn(&job->target);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * copy_job
 *		The copy of one job's table under the transaction's snapshot (that
 *		of the slot, see do_copy), into its remote table in one remote
 *		transaction that stores consistent, the slot's consistent point.
 */
static void
copy_job(SyncJob *job, XLogRecPtr consistent, TimestampTz started)
{
	Relation	rel;
	TableScanDesc scan;
	TupleTableSlot *hslot;
	SyncEval   *ev;
	Oid			save_userid;
	int			save_sec;
	int			gucnest;
	uint64		rows = 0;
	AttrNumber *plain;
	bool		rebuilding;
	TimestampTz at[5];			/* start, slot, catalog, rows, commit */

	at[0] = started;
	at[1] = GetCurrentTimestamp();
	check_source(job, true);
	open_target(job);
	ev = CtasSyncBuildEval(job);
	/* plain columns and no WHERE: nothing to evaluate (sync/copy.c) */
	plain = CtasSyncPlainColumns(job->query, ev->nexprs);

	job->target.change_lsn = consistent;
	job->apply->begin(&job->target);
	/* empty it, or rebuild a table readers read (sync/resync.c) */
	rebuilding = CtasSyncCopyStart(job);
	at[2] = GetCurrentTimestamp();

	GetUserIdAndSecContext(&save_userid, &save_sec);
	/* as for REFRESH MATERIALIZED VIEW: the owner's code, restricted */
	SetUserIdAndSecContext(job->owner, save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	/* what the owner's code sets ends with the copy (sync/apply.c) */
	gucnest = NewGUCNestLevel();
	rel = table_open(job->relid, AccessShareLock);
	hslot = table_slot_create(rel, NULL);
	scan = table_beginscan(rel, GetActiveSnapshot(), 0, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, hslot))
	{
		MemoryContext oldcxt;

		CHECK_FOR_INTERRUPTS();
		oldcxt = MemoryContextSwitchTo(ev->econtext->ecxt_per_tuple_memory);
		if (plain != NULL)
			CtasSyncPlainRow(hslot, ev->nexprs, plain, ev->values, ev->nulls);
		if (plain != NULL || CtasSyncEvaluate(ev, hslot))
		{
			job->apply->copy_row(&job->target, ev->values, ev->nulls);
			rows++;
		}
		MemoryContextSwitchTo(oldcxt);
		ResetExprContext(ev->econtext);
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(hslot);
	table_close(rel, AccessShareLock);
	AtEOXact_GUC(false, gucnest);
	SetUserIdAndSecContext(save_userid, save_sec);
	at[3] = GetCurrentTimestamp();

	job->apply->commit(&job->target, consistent);
	CtasSyncCopyEnd(job, rebuilding);
	at[4] = GetCurrentTimestamp();
	job->applied = consistent;
	CtasSyncStatusUse(job->id);
	CtasSyncStatusReport(rows, 0, 0);
	CtasSyncFreeEval(ev);

	ereport(LOG,
			(errmsg("ctas_fed sync " INT64_FORMAT ": copied " UINT64_FORMAT " rows, streaming from %X/%X",
					job->id, rows, LSN_FORMAT_ARGS(consistent))));
	ereport(DEBUG1,
			(errmsg_internal("ctas_fed sync " INT64_FORMAT " copy phases: started %ld ms after the job was created, slot %ld ms, catalog %ld ms, rows %ld ms, key and commit %ld ms",
							 job->id, (long) ((at[0] - job->created_at) / 1000),
							 (long) ((at[1] - at[0]) / 1000),
							 (long) ((at[2] - at[1]) / 1000),
							 (long) ((at[3] - at[2]) / 1000),
							 (long) ((at[4] - at[3]) / 1000))));
}

/*
 * do_copy
 *		The copying phase of a stream: a new slot, then the copy of every
 *		job's table under its snapshot (copy_job), each in a remote
 *		transaction of its job.  Returns the slot's consistent point.
 */
static XLogRecPtr
do_copy(List *jobs)
{
	SyncJob    *first = linitial(jobs);
	LogicalDecodingContext *ctx;
	Snapshot	snap;
	XLogRecPtr	consistent;
	ListCell   *lc;
	TimestampTz started = GetCurrentTimestamp();

	foreach(lc, jobs)
		job_event(lfirst(lc), "copying", NULL);

	/* a slot of an interrupted copy: begin again */
	if (SearchNamedReplicationSlot(first->slot_name, true) != NULL)
	{
		StartTransactionCommand();
		ReplicationSlotDrop(first->slot_name, false);
		CommitTransactionCommand();
	}

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	/* as walsender's CREATE_REPLICATION_SLOT ... (SNAPSHOT 'use') */
	XactIsoLevel = XACT_REPEATABLE_READ;
	XactReadOnly = true;

	CheckLogicalDecodingRequirements();
	ReplicationSlotCreate(first->slot_name, true, RS_EPHEMERAL, false);
	ctx = CreateInitDecodingContext("pgoutput", NIL, true, InvalidXLogRecPtr,
									XL_ROUTINE(.page_read = read_local_xlog_page,
											   .segment_open = wal_segment_open,
											   .segment_close = wal_segment_close),
									NULL, NULL, NULL);
	DecodingContextFindStartpoint(ctx);
	snap = SnapBuildInitialSnapshot(ctx->snapshot_builder);
	RestoreTransactionSnapshot(snap, MyProc);
	consistent = MyReplicationSlot->data.confirmed_flush;
	FreeDecodingContext(ctx);
	ReplicationSlotPersist();
	ReplicationSlotRelease();

	PushActiveSnapshot(GetTransactionSnapshot());
	foreach(lc, jobs)
		copy_job(lfirst(lc), consistent, started);
	PopActiveSnapshot();
	CommitTransactionCommand();

	return consistent;
}

/* the slot's confirmed_flush_lsn */
static XLogRecPtr
slot_confirmed(const char *slot_name)
{
	ReplicationSlot *s;
	XLogRecPtr	lsn = InvalidXLogRecPtr;

	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	s = SearchNamedReplicationSlot(slot_name, false);
	if (s != NULL)
	{
		SpinLockAcquire(&s->mutex);
		lsn = s->data.confirmed_flush;
		SpinLockRelease(&s->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);
	return lsn;
}

/*
 * leave_stopped
 *		Take out of *jobs the jobs that no longer stream (stopped by
 *		stop_sync or DROP TABLE, or gone), in a transaction connected to
 *		SPI, closing their targets.  The stop of a job whose stream goes on
 *		is told here; that of the stream's last jobs by the resolver, when
 *		it drops the slot (CtasSyncTick).
 */
static void
leave_stopped(int64 stream_id, List **jobs)
{
	Datum		args[1];
	List	   *left = NIL;
	List	   *kept = NIL;
	ListCell   *lc;
	MemoryContext oldcxt;

	args[0] = Int64GetDatum(stream_id);
	spi_exec("SELECT sync_id FROM ctas_fed.syncs WHERE stream_id = $1 "
			 "AND state = 'streaming'",
			 1, (Oid[]) {INT8OID}, args, true);
	oldcxt = MemoryContextSwitchTo(job_cxt);
	foreach(lc, *jobs)
	{
		SyncJob    *job = lfirst(lc);
		bool		streaming = false;
		uint64		i;

		for (i = 0; i < SPI_processed; i++)
		{
			if (DatumGetInt64(CtasSyncSpiDatum(i, 1)) == job->id)
				streaming = true;
		}
		if (streaming)
			kept = lappend(kept, job);
		else
			left = lappend(left, job);
	}
	MemoryContextSwitchTo(oldcxt);

	foreach(lc, left)
	{
		SyncJob    *job = lfirst(lc);

		if (job->open)
		{
			job->apply->close(&job->target);
			job->open = false;
		}
		ereport(LOG,
				(errmsg("ctas_fed sync " INT64_FORMAT ": stopped, leaving stream " INT64_FORMAT,
						job->id, stream_id)));
		if (kept != NIL)
		{
			job_event(job, "stopped", NULL);
			CtasSyncStatusRelease(job->id);
		}
	}
	*jobs = kept;
}

/*
 * do_stream
 *		The streaming phase of the jobs of a stream (a List of SyncJob in
 *		job_cxt, updated as jobs leave), until none is left.
 */
static void
do_stream(List **jobs)
{
	SyncJob    *first = linitial(*jobs);
	int64		stream_id = first->stream_id;
	char	   *slot_name = first->slot_name;
	TimestampTz last_idle_advance = 0;
	XLogRecPtr	idle_flush = InvalidXLogRecPtr;
	XLogRecPtr	idle_safe = InvalidXLogRecPtr;
	char	   *peek_sql;
	char	   *pubs = pstrdup(quote_identifier(first->publication));
	ListCell   *lc;

	/*
	 * $2: ctas_fed.sync_peek_changes, read at each peek; a peek never splits
	 * a transaction
	 */
	peek_sql = psprintf("SELECT lsn, data FROM "
						"pg_catalog.pg_logical_slot_peek_binary_changes($1, NULL, $2, "
						"'proto_version', '1', 'publication_names', %s, "
						"'messages', 'true')",
						quote_literal_cstr(pubs));

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	/*
	 * The columns are not checked against the catalog here: the WAL still
	 * to read may have been written before a DDL that the catalog shows,
	 * and the changes committed before it are applied before the job meets
	 * it (sync/ddl.c, Relation messages in sync/apply.c).
	 */
	foreach(lc, *jobs)
	{
		check_source(lfirst(lc), false);
		open_target(lfirst(lc));
	}
	PopActiveSnapshot();
	CommitTransactionCommand();

	for (;;)
	{
		Oid			types[2] = {NAMEOID, INT4OID};
		Datum		args[2];
		int			peek_changes = CtasSyncPeekChanges;
		XLogRecPtr	flush;
		XLogRecPtr	insert;
		XLogRecPtr	advance_to = InvalidXLogRecPtr;
		bool		idle;
		Portal		portal;
		SyncPeekResult peek = {0};
		TimestampTz peek_at;
		uint64		nrows = 0;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		/* a check that ctas_fed.verify_sync() asked for (sync/verify.c) */
		CtasSyncVerifyIfAsked(*jobs);

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());

		/* stopped (stop_sync, DROP TABLE) or gone: leave; none left: end */
		leave_stopped(stream_id, jobs);
		if (*jobs == NIL)
		{
			SPI_finish();
			PopActiveSnapshot();
			CommitTransactionCommand();
			return;
		}
		foreach(lc, *jobs)
			check_source(lfirst(lc), false);

		insert = GetXLogInsertRecPtr();
		flush = GetFlushRecPtr(NULL);
		peek_at = GetCurrentTimestamp();
		args[0] = DirectFunctionCall1(namein, CStringGetDatum(slot_name));
		if (flush == idle_flush)
			idle = true;		/* no WAL since the last empty peek */
		else
		{
			/*
			 * Every call of a decoding function logs "starting logical
			 * decoding" at LOG: not ten times a second in the server log.
			 */
			(void) set_config_option("log_min_messages", "warning",
									 PGC_SUSET, PGC_S_SESSION,
									 GUC_ACTION_LOCAL, true, 0, false);
			args[1] = Int32GetDatum(peek_changes);
			portal = SPI_cursor_open_with_args(NULL, peek_sql, 2, types, args,
											   NULL, true, 0);
			CtasSyncApplyPeek(*jobs, portal, &peek);
			SPI_cursor_close(portal);
			nrows = peek.nrows;
			idle = nrows == 0;
			if (peek.redo)
			{
				/* roll the remote transactions back, then read again */
				foreach(lc, *jobs)
				{
					SyncJob    *job = lfirst(lc);

					CtasSyncCurrentJob = job;
					if (job->open)
						job->apply->close(&job->target);
					job->open = false;
					open_target(job);
				}
			}
			else if (idle)
			{
				idle_flush = flush;

				/*
				 * The slot may be advanced over WAL that this empty peek read
				 * whole, but only to a record boundary: a commit record cut
				 * by the flush position would be skipped for good.  An
				 * insert position taken before an earlier peek is such a
				 * boundary, and this peek read up to it when it was flushed
				 * before the peek began.
				 */
				if (idle_safe != InvalidXLogRecPtr && idle_safe <= flush &&
					TimestampDifferenceExceeds(last_idle_advance, peek_at,
											   SYNC_IDLE_ADVANCE_MS))
				{
					advance_to = idle_safe;
					last_idle_advance = peek_at;
				}
				idle_safe = insert;
			}
			else
			{
				idle_safe = InvalidXLogRecPtr;
				advance_to = peek.last_end;
			}
		}

		/*
		 * Only after the remote COMMITs: what they hold may be confirmed.
		 * The slot goes to the end lsn of the last source transaction read
		 * (its commit record's end): the decoder returns again every
		 * transaction whose commit record begins at or after the slot's
		 * confirmed position, and a transaction whose commit record begins
		 * exactly at that end is one not yet applied
		 * (docs/sync-exactly-once.md).
		 */
		if (advance_to != InvalidXLogRecPtr &&
			advance_to > slot_confirmed(slot_name))
		{
			/* tests: a crash between the remote commits and the advance */
			if (!idle)
				CtasFaultPointWait("sync_before_advance");
			args[1] = LSNGetDatum(advance_to);
			spi_exec("SELECT pg_catalog.pg_replication_slot_advance($1, $2)",
					 2, (Oid[]) {NAMEOID, PG_LSNOID}, args, false);
		}

		/* a peek that read to the end: all before it is applied */
		if (idle || (nrows < (uint64) peek_changes && !peek.redo))
		{
			foreach(lc, *jobs)
			{
				CtasSyncStatusUse(((SyncJob *) lfirst(lc))->id);
				CtasSyncStatusReport(0, 0, peek_at);
			}
		}

		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		pgstat_report_stat(false);

		if (idle)
		{
			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 SYNC_IDLE_MS, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
}

/*
 * close_targets
 *		Close the open targets of jobs, which rolls back what they did not
 *		commit; never ERROR.
 */
static void
close_targets(List *jobs)
{
	ListCell   *lc;

	foreach(lc, jobs)
	{
		SyncJob    *job = lfirst(lc);

		if (job->open)
		{
			job->apply->close(&job->target);
			job->open = false;
		}
	}
}

/*
 * pin_text_settings
 *		Make every text form of a value the worker produces or parses
 *		independent of the settings of the database, of its role and of
 *		the job's owner: pgoutput sends each column as its type's text
 *		output, made in this process by the peek, which fill_slot parses
 *		back, and a target may send values as text too (the PostgreSQL
 *		target's statements).  A database set to DateStyle 'SQL, DMY'
 *		swapped day and month on the way to a remote that reads ISO, and
 *		extra_float_digits below 1 rounded floats.  The values are those
 *		that the writer of a CTAS pins around its text output
 *		(CtasPgBeginTextOutput, as postgres_fdw's set_transmission_modes), and
 *		those its remote connection pins (TimeZone UTC), plus the text of
 *		bytea and money.  PGC_S_OVERRIDE outranks the session source: the
 *		owner's code (set_config in an "immutable" function) cannot change
 *		them for the rest of a chunk either.
 */
static void
pin_text_settings(void)
{
	static const char *const pinned[][2] = {
		{"datestyle", "ISO, MDY"},
		{"intervalstyle", "postgres"},
		{"extra_float_digits", "3"},
		{"bytea_output", "hex"},
		{"timezone", "UTC"},
		{"lc_monetary", "C"},
	};
	int			i;

	for (i = 0; i < lengthof(pinned); i++)
		SetConfigOption(pinned[i][0], pinned[i][1], PGC_SUSET,
						PGC_S_OVERRIDE);
}

/*
 * ctas_fed_sync_main
 *		Entry point of a sync worker: main_arg is the stream's id, bgw_extra
 *		its database.
 */
void
ctas_fed_sync_main(Datum main_arg)
{
	int64		stream_id = DatumGetInt64(main_arg);
	Oid			dboid;
	LOCKTAG		tag;
	List	   *volatile jobs = NIL;

	memcpy(&dboid, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname(psprintf("ctas_fed sync " INT64_FORMAT, stream_id));

	/*
	 * The owner's functions run with an empty search_path, as in
	 * PostgreSQL's apply worker: an unqualified name in them cannot reach
	 * another user's object in a schema of the default path.
	 */
	SetConfigOption("search_path", "", PGC_SUSET, PGC_S_OVERRIDE);
	pin_text_settings();

	job_cxt = AllocSetContextCreate(TopMemoryContext, "ctas_fed sync job",
									ALLOCSET_DEFAULT_SIZES);

	/* one worker per stream: a session lock that goes with the process */
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (stream_id >> 32),
						 (uint32) stream_id, CTAS_LOCKTAG_SYNC);
	if (LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		proc_exit(0);

	PG_TRY();
	{
		List	   *loaded;
		bool		copying = false;
		char	   *lost;
		ListCell   *lc;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		loaded = load_stream(stream_id);
		jobs = loaded;
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		foreach(lc, loaded)
		{
			SyncJob    *job = lfirst(lc);

			if (!CtasSyncStatusAttach(job->id))
				proc_exit(0);	/* its database is being dropped */
			CtasSyncStatusLabels(job->target.catalog->name, job->target.schema,
								 job->target.table, job->slot_name);
			if (strcmp(job->state, "copying") == 0)
				copying = true;
		}

		/* a lost slot: copy again (sync/resync.c) */
		if (!copying && loaded != NIL &&
			(lost = CtasSyncResyncIfLost(loaded)) != NULL)
		{
			foreach(lc, loaded)
				job_event(lfirst(lc), "resyncing", lost);
			copying = true;
		}
		/* a job to copy copies them all, under one new slot */
		if (copying)
		{
			XLogRecPtr	consistent = do_copy(loaded);

			foreach(lc, loaded)
			{
				SyncJob    *job = lfirst(lc);

				set_state(job->id, "streaming", NULL, consistent);
				job->state = "streaming";
				job_event(job, "streaming", NULL);
			}
		}
		if (loaded != NIL)
		{
			set_stream_error(stream_id, NULL);
			do_stream(&loaded);
			jobs = loaded;
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		SyncJob    *failed = CtasSyncFailed ? CtasSyncCurrentJob : NULL;
		int64		failed_id = failed ? failed->id : loading_id;
		bool		others = false;
		ListCell   *lc;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(job_cxt);
		edata = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
		close_targets(jobs);
		RESUME_INTERRUPTS();

		/*
		 * An error that cannot heal fails its job alone; the resolver starts
		 * the worker again for the others.  Any other error is the
		 * stream's: its jobs are tried again.
		 */
		if (CtasSyncFailed && failed_id != 0)
		{
			fail_job(failed_id, edata->message);
			if (failed != NULL)
				job_event(failed, "failed", edata->message);
			foreach(lc, jobs)
				others |= ((SyncJob *) lfirst(lc))->id != failed_id;
		}
		else
			set_stream_error(stream_id, edata->message);
		proc_exit(CtasSyncFailed && !others ? 0 : 1);
	}
	PG_END_TRY();

	close_targets(jobs);
	proc_exit(0);
}
