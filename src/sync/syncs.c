/*-------------------------------------------------------------------------
 *
 * syncs.c
 *		  The job records of continuous sync: the rows of ctas_fed.syncs as
 *		  the sync worker reads and writes them (load a job or a stream,
 *		  record a state, an error, a failure), the webhook events of their
 *		  state changes, and the guard on a job's target calls.
 *
 * A job is loaded into a SyncJob in CtasSyncJobCxt, the worker's memory
 * for its jobs.  Its target routine is a copy whose calls that reach the
 * remote name the job in CtasSyncInTarget while they run (guard_routine):
 * an error raised there is that job's catalog's, which the streaming loop
 * holds out of its stream without ending it (sync/worker.c).  State
 * changes are each written in a transaction of their own; a failure also
 * takes the job's table out of its stream's publication, under the
 * stream's lock (CtasSyncLockStream, see sync/statement.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/syncs.c
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
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
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

MemoryContext CtasSyncJobCxt = NULL;

/* in a sync worker: the job being loaded, before it has a SyncJob */
int64		CtasSyncLoadingId = 0;

/*
 * The names of CtasSyncState, as column ctas_fed.syncs.state and its CHECK
 * spell them; CTAS_SYNC_RUNNING_SQL (sync/sync_int.h) lists the names of
 * the running ones.
 */
static const char *const sync_state_names[] = {
	[CTAS_SYNC_COPYING] = "copying",
	[CTAS_SYNC_STREAMING] = "streaming",
	[CTAS_SYNC_STOPPED] = "stopped",
	[CTAS_SYNC_FAILED] = "failed",
};

StaticAssertDecl(lengthof(sync_state_names) == CTAS_SYNC_FAILED + 1,
				 "sync_state_names must name every CtasSyncState");

/*
 * CtasSyncStateName
 *		The name of state, as column ctas_fed.syncs.state spells it.
 */
const char *
CtasSyncStateName(CtasSyncState state)
{
	if ((int) state < 0 || (int) state >= lengthof(sync_state_names))
		elog(ERROR, "invalid sync state %d", (int) state);
	return sync_state_names[state];
}

/*
 * CtasSyncStateLiteral
 *		The name of state as an SQL literal, for a statement's text.
 */
const char *
CtasSyncStateLiteral(CtasSyncState state)
{
	return quote_literal_cstr(CtasSyncStateName(state));
}

/*
 * CtasSyncStateFromName
 *		The state named name (a value of column ctas_fed.syncs.state); ERROR
 *		on any other name.
 */
CtasSyncState
CtasSyncStateFromName(const char *name)
{
	int			i;

	for (i = 0; i < lengthof(sync_state_names); i++)
		if (strcmp(name, sync_state_names[i]) == 0)
			return (CtasSyncState) i;
	elog(ERROR, "invalid sync state \"%s\"", name);
	return CTAS_SYNC_FAILED;	/* keep compiler quiet */
}


/*
 * The job whose target call runs (the guard_* functions), NULL outside
 * one: an error raised there is that job's, and its catalog's.
 */
SyncJob    *CtasSyncInTarget = NULL;

/* the job of a target, which is embedded in it */
#define TARGET_JOB(t) ((SyncJob *) ((char *) (t) - offsetof(SyncJob, target)))
/* the target's own routine */
#define TARGET_SYNC(t) (CtasCatalogRoutine(TARGET_JOB(t)->target.catalog)->sync)
/* call, with CtasSyncInTarget naming the job of target t */
#define GUARDED(t, call) \
	do { \
		SyncJob    *save_ = CtasSyncInTarget; \
		CtasSyncInTarget = TARGET_JOB(t); \
		call; \
		CtasSyncInTarget = save_; \
	} while (0)

static void
guard_open(CtasSyncTarget *t)
{
	GUARDED(t, TARGET_SYNC(t)->open(t));
}

static uint64
guard_applied_lsn(CtasSyncTarget *t)
{
	uint64		lsn;

	GUARDED(t, lsn = TARGET_SYNC(t)->applied_lsn(t));
	return lsn;
}

static void
guard_begin(CtasSyncTarget *t)
{
	GUARDED(t, TARGET_SYNC(t)->begin(t));
}

static void
guard_upsert(CtasSyncTarget *t, Datum *values, bool *nulls,
			 const bool *unchanged)
{
	GUARDED(t, TARGET_SYNC(t)->upsert(t, values, nulls, unchanged));
}

static void
guard_copy_row(CtasSyncTarget *t, Datum *values, bool *nulls)
{
	GUARDED(t, TARGET_SYNC(t)->copy_row(t, values, nulls));
}

static void
guard_delete(CtasSyncTarget *t, Datum *keys)
{
	GUARDED(t, TARGET_SYNC(t)->delete(t, keys));
}

static void
guard_truncate(CtasSyncTarget *t)
{
	GUARDED(t, TARGET_SYNC(t)->truncate(t));
}

static void
guard_commit(CtasSyncTarget *t, uint64 lsn)
{
	GUARDED(t, TARGET_SYNC(t)->commit(t, lsn));
}

/* branch speed: the pipelined commit (sync/apply.c) */
static void
guard_commit_send(CtasSyncTarget *t, uint64 lsn)
{
	GUARDED(t, TARGET_SYNC(t)->commit_send(t, lsn));
}

static void
guard_commit_wait(CtasSyncTarget *t)
{
	GUARDED(t, TARGET_SYNC(t)->commit_wait(t));
}

static void
guard_rebuild(CtasSyncTarget *t)
{
	GUARDED(t, TARGET_SYNC(t)->rebuild(t));
}

static void
guard_rebuilt(CtasSyncTarget *t)
{
	GUARDED(t, TARGET_SYNC(t)->rebuilt(t));
}

/*
 * guard_routine
 *		A copy of routine, in the current memory context, whose calls that
 *		reach the remote name their job in CtasSyncInTarget while they run, so
 *		that the streaming loop can tell an error of one catalog from one
 *		of the stream (CtasSyncCatchJobError).  close never errors; the verify
 *		members, and any a target adds later, are called as they are.
 */
static const CtasSyncApply *
guard_routine(const CtasSyncApply *routine)
{
	CtasSyncApply *g = palloc(sizeof(CtasSyncApply));

	memcpy(g, routine, sizeof(CtasSyncApply));
	g->open = guard_open;
	g->applied_lsn = guard_applied_lsn;
	g->begin = guard_begin;
	g->upsert = guard_upsert;
	g->copy_row = guard_copy_row;
	g->delete = guard_delete;
	g->truncate = guard_truncate;
	g->commit = guard_commit;
	if (routine->commit_send != NULL)
	{
		g->commit_send = guard_commit_send;
		g->commit_wait = guard_commit_wait;
	}
	if (routine->rebuild != NULL)
		g->rebuild = guard_rebuild;
	if (routine->rebuilt != NULL)
		g->rebuilt = guard_rebuilt;
	return g;
}


/*
 * CtasSyncSpiExec
 *		Run sql with args through SPI (connected by the caller); ERROR on
 *		failure.
 */
void
CtasSyncSpiExec(const char *sql, int nargs, Oid *types, Datum *values, bool ro)
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
	if (strcmp(state, CtasSyncStateName(CTAS_SYNC_STOPPED)) == 0 ||
		strcmp(state, CtasSyncStateName(CTAS_SYNC_FAILED)) == 0)
		ev.finished_at = GetCurrentTimestamp();
	CtasJobsQueueEvent(&ev);
}

void
CtasSyncJobEventNamed(SyncJob *job, const char *event, const char *error)
{
	CtasSyncStatusUse(job->id);
	CtasSyncQueueEvent(job->job_id, job->target.catalog, job->target.schema,
				job->target.table, event,
				CtasSyncStatusRows(), error, job->created_at);
}

void
CtasSyncJobEvent(SyncJob *job, CtasSyncState state, const char *error)
{
	CtasSyncJobEventNamed(job, CtasSyncStateName(state), error);
}

/*
 * CtasSyncLoadJob
 *		Read the job's row into a SyncJob in CtasSyncJobCxt, in a transaction of
 *		the caller's.  Returns NULL when the row is gone.
 */
SyncJob *
CtasSyncLoadJob(int64 id)
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
	CtasSyncLoadingId = id;
	CtasSyncSpiExec("SELECT owner, server, remote_schema, remote_table, source, "
			 "query_tree, publication, slot_name, state, source_attnums, "
			 "source_columns, source_types, key_columns, source_key, "
			 "remote_columns, job_id, created_at, stream_id, "
			 "schema_changes = 'fail', whole_row "
			 "FROM ctas_fed.syncs WHERE sync_id = $1",
			 1, argtypes, args, true);
	if (SPI_processed != 1)
		return NULL;

	oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);
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
	job->state = CtasSyncStateFromName(CtasSyncSpiText(0, 9));

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
		fmgr_info_cxt(infunc, &job->infuncs[i], CtasSyncJobCxt);
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
	job->apply = guard_routine(job->apply);
	job->target.job_key = psprintf(UINT64_FORMAT "/%u/" INT64_FORMAT,
								   GetSystemIdentifier(), MyDatabaseId, id);
	MemoryContextSwitchTo(oldcxt);
	return job;
}

/*
 * CtasSyncLoadStream
 *		The jobs of stream stream_id that run (copying or streaming), as a
 *		List of SyncJob in CtasSyncJobCxt, in a transaction of the caller's.  NIL
 *		when there is none.
 */
List *
CtasSyncLoadStream(int64 stream_id)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1];
	int64	   *ids;
	int			n;
	int			i;
	List	   *jobs = NIL;

	args[0] = Int64GetDatum(stream_id);
	CtasSyncSpiExec("SELECT sync_id FROM ctas_fed.syncs WHERE stream_id = $1 "
			 "AND state IN " CTAS_SYNC_RUNNING_SQL " ORDER BY sync_id",
			 1, argtypes, args, true);
	n = (int) SPI_processed;
	ids = palloc(sizeof(int64) * Max(n, 1));
	for (i = 0; i < n; i++)
		ids[i] = DatumGetInt64(CtasSyncSpiDatum(i, 1));
	for (i = 0; i < n; i++)
	{
		SyncJob    *job = CtasSyncLoadJob(ids[i]);
		MemoryContext oldcxt;

		if (job == NULL)
			continue;
		oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);
		jobs = lappend(jobs, job);
		MemoryContextSwitchTo(oldcxt);
	}
	CtasSyncLoadingId = 0;
	return jobs;
}


/*
 * set_state
 *		Record the running job's state named state ("": keep its state),
 *		its error, and its applied lsn when valid, in a transaction of its
 *		own.
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
	rc = SPI_execute_with_args(psprintf("UPDATE ctas_fed.syncs SET "
										"state = CASE WHEN $2 = '' THEN state ELSE $2 END, "
										"finished_at = CASE WHEN $2 = %s "
										"THEN pg_catalog.now() END, "
										"error = $3, "
										"applied_lsn = coalesce($4, applied_lsn) "
										"WHERE sync_id = $1 "
										"AND state IN " CTAS_SYNC_RUNNING_SQL,
										CtasSyncStateLiteral(CTAS_SYNC_FAILED)),
							   4, types, values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "could not record the state of sync " INT64_FORMAT, id);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * CtasSyncSetState
 *		Record the job's state (and error, and applied lsn when valid) in a
 *		transaction of its own.
 */
void
CtasSyncSetState(int64 id, CtasSyncState state, const char *error,
				 XLogRecPtr lsn)
{
	set_state(id, CtasSyncStateName(state), error, lsn);
}

/*
 * CtasSyncSetError
 *		Record the job's error (NULL: none), keeping its state, in a
 *		transaction of its own.
 */
void
CtasSyncSetError(int64 id, const char *error)
{
	set_state(id, "", error, InvalidXLogRecPtr);
}

/*
 * CtasSyncSetStreamError
 *		Record error (NULL: none) in every running job of stream stream_id,
 *		in a transaction of its own: what ended or delays the worker that
 *		runs them all.
 */
void
CtasSyncSetStreamError(int64 stream_id, const char *error)
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
							  "AND state IN " CTAS_SYNC_RUNNING_SQL " "
							  "AND error IS DISTINCT FROM $2",
							  2, types, values, nulls, false, 0) < 0)
		elog(ERROR, "could not record the error of stream " INT64_FORMAT,
			 stream_id);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * CtasSyncSpiBeginAs, CtasSyncSpiEndAs
 *		SPI as another user (the owner of ctas_fed.syncs, or a job's
 *		owner), in the current transaction: the identity switched as
 *		SECURITY DEFINER code switches it, and a search_path of pg_catalog
 *		and pg_temp only, so that no operator or function of the caller's
 *		schemas (an "=" for oid and integer, a "||" for name) can stand in
 *		for a built-in one and run with that user's rights.  The one place
 *		of that rule for the sync (statement.c, CtasSyncUnpublish).
 *		ereport(ERROR) when SPI cannot connect; an error in between restores
 *		both with the (sub)transaction's abort.
 */
void
CtasSyncSpiBeginAs(Oid userid, CtasSyncSpiAs *as)
{
	GetUserIdAndSecContext(&as->save_userid, &as->save_sec);
	SetUserIdAndSecContext(userid,
						   as->save_sec | SECURITY_LOCAL_USERID_CHANGE);
	as->nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
}

void
CtasSyncSpiEndAs(CtasSyncSpiAs *as)
{
	SPI_finish();
	AtEOXact_GUC(true, as->nestlevel);
	SetUserIdAndSecContext(as->save_userid, as->save_sec);
}

/*
 * CtasSyncUnpublish
 *		Take table relid out of publication, as user userid, in the current
 *		transaction (stop_sync of one job of a stream, sync/statement.c, or a failed
 *		job here); nothing when it is not, or no longer, in it, or when
 *		another running job of the stream than sync_id reads it too (two
 *		syncs of one table).  The other tables of the publication's stream
 *		go on.  ereport(ERROR) on failure.
 */
void
CtasSyncUnpublish(const char *publication, Oid relid, Oid userid,
				  int64 sync_id)
{
	Oid			argtypes[3] = {NAMEOID, OIDOID, INT8OID};
	Datum		values[3];
	char	   *relname = get_rel_name(relid);
	CtasSyncSpiAs as;

	if (relname == NULL)
		return;					/* dropped, and with it its membership */
	values[0] = DirectFunctionCall1(namein, CStringGetDatum(publication));
	values[1] = ObjectIdGetDatum(relid);
	values[2] = Int64GetDatum(sync_id);

	CtasSyncSpiBeginAs(userid, &as);
	CtasSyncSpiExec("SELECT FROM pg_catalog.pg_publication_rel pr "
			 "JOIN pg_catalog.pg_publication p ON p.oid = pr.prpubid "
			 "WHERE p.pubname = $1 AND pr.prrelid = $2 "
			 "AND NOT EXISTS (SELECT FROM ctas_fed.syncs s "
			 "WHERE s.publication = $1 AND s.source = $2 "
			 "AND s.sync_id <> $3 "
			 "AND s.state IN " CTAS_SYNC_RUNNING_SQL ")",
			 3, argtypes, values, true);
	if (SPI_processed > 0)
		CtasSyncSpiExec(psprintf("ALTER PUBLICATION %s DROP TABLE ONLY %s",
						  quote_identifier(publication),
						  quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
													 relname)),
				 0, NULL, NULL, false);
	CtasSyncSpiEndAs(&as);
}

/*
 * CtasSyncLockStream
 *		Lock stream stream_id of this database until the end of the
 *		transaction: a sync joining it, a stop of one of its jobs and the
 *		failure of one take this lock before they read whether the stream
 *		still runs, so that a join never adds a table to a publication that
 *		the stop of the stream's last job drops, nor a stop drops the
 *		publication of a stream that a new sync joined.  Can ERROR.
 */
void
CtasSyncLockStream(int64 stream_id)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (stream_id >> 32),
						 (uint32) stream_id, CTAS_LOCKTAG_STREAM);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/*
 * CtasSyncFailJob
 *		Mark job id "failed" with error, and take its table out of its
 *		stream's publication, in a transaction of its own, so that the
 *		stream's other jobs go on without it.  Nothing when the job no
 *		longer runs (stopped meanwhile).
 */
void
CtasSyncFailJob(int64 id, const char *error)
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
	CtasSyncSpiExec(psprintf("UPDATE ctas_fed.syncs SET state = %s, error = $2, "
							 "finished_at = pg_catalog.now() WHERE sync_id = $1 "
							 "AND state IN " CTAS_SYNC_RUNNING_SQL " "
							 "RETURNING publication, source, stream_id",
							 CtasSyncStateLiteral(CTAS_SYNC_FAILED)),
					2, types, values, false);
	if (SPI_processed == 1)
	{
		publication = CtasSyncSpiText(0, 1);
		source = DatumGetObjectId(CtasSyncSpiDatum(0, 2));
		/* a sync joining the stream waits for this (sync/statement.c) */
		CtasSyncLockStream(DatumGetInt64(CtasSyncSpiDatum(0, 3)));
	}
	if (publication != NULL)
		CtasSyncUnpublish(publication, source, GetUserId(), id);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}


/*
 * CtasSyncOpenTarget
 *		Connect to the catalog (in a transaction of the caller's) and read
 *		the applied lsn; an error leaves the job open, for the caller to
 *		close (the target's close takes a half-opened target).
 */
void
CtasSyncOpenTarget(SyncJob *job)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);

	if (!job->open)
	{
		/*
		 * Open before the call: an open that fails half way is closed too
		 * (a connection left with its transaction open would hold what it
		 * locked until the worker ends, and the next open wait for it).
		 */
		job->open = true;
		job->apply->open(&job->target);
	}
	job->applied = job->apply->applied_lsn(&job->target);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * pool_tag
 *		The lock tag of pool slot i, or of the waiters (i < 0): advisory
 *		locks of database 0, the same in every database of the cluster.
 */
static void
pool_tag(LOCKTAG *tag, int i)
{
	if (i < 0)
		SET_LOCKTAG_ADVISORY(*tag, InvalidOid, 0, 0, CTAS_LOCKTAG_POOL_WAIT);
	else
		SET_LOCKTAG_ADVISORY(*tag, InvalidOid, 0, (uint32) i, CTAS_LOCKTAG_POOL);
}

/*
 * CtasSyncPoolTake
 *		In a sync worker: take a free slot of the pool of
 *		ctas_fed.max_sync_workers for the life of the process (a session
 *		lock, released at exit).  Returns its number, or -1 when every slot
 *		is taken (the worker must exit; its resolver tries again).
 */
int
CtasSyncPoolTake(void)
{
	int			i;

	for (i = 0; i < CtasMaxSyncWorkers; i++)
	{
		LOCKTAG		tag;

		pool_tag(&tag, i);
		if (LockAcquire(&tag, ExclusiveLock, true, true) != LOCKACQUIRE_NOT_AVAIL)
			return i;
	}
	return -1;
}

/*
 * CtasSyncPoolFreeSlots
 *		How many slots of the pool are free now (each taken and given back
 *		at once): a resolver starts a sync worker only while one is.
 */
int
CtasSyncPoolFreeSlots(void)
{
	int			free_slots = 0;
	int			i;

	for (i = 0; i < CtasMaxSyncWorkers; i++)
	{
		LOCKTAG		tag;

		pool_tag(&tag, i);
		if (LockAcquire(&tag, ExclusiveLock, true, true) != LOCKACQUIRE_NOT_AVAIL)
		{
			LockRelease(&tag, ExclusiveLock, true);
			free_slots++;
		}
	}
	return free_slots;
}

/*
 * CtasSyncPoolWaited
 *		Whether a resolver other than this process has a stream waiting for
 *		a slot of the pool (holds the waiters' lock in share mode).
 */
bool
CtasSyncPoolWaited(void)
{
	LOCKTAG		tag;

	pool_tag(&tag, -1);
	if (LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		return true;
	LockRelease(&tag, ExclusiveLock, true);
	return false;
}

/*
 * CtasSyncPoolWait
 *		In a resolver: say (wait) or stop saying that a stream of its
 *		database waits for a slot of the pool.
 */
void
CtasSyncPoolWait(bool wait)
{
	static bool waiting = false;
	LOCKTAG		tag;

	if (wait == waiting)
		return;
	pool_tag(&tag, -1);
	if (wait)
		(void) LockAcquire(&tag, ShareLock, true, false);
	else
		LockRelease(&tag, ShareLock, true);
	waiting = wait;
}

/*
 * CtasSyncStopFailed
 *		stop_sync of a failed sync (sync/statement.c, when no running sync
 *		goes into the table): mark the failed syncs into catalog serverid's
 *		schema.table "stopped", keeping their error, in the current
 *		transaction.  Their tables left their publications when they failed
 *		(CtasSyncFailJob), and the resolver drops the slot of a stream that
 *		has no running job left.  Returns whether there was any.
 *		ereport(ERROR) when the current user is not the owner of one.
 */
bool
CtasSyncStopFailed(Oid serverid, const char *schema, const char *table)
{
	Oid			relid = get_relname_relid("syncs",
										  get_namespace_oid("ctas_fed", false));
	Oid			owner;
	HeapTuple	tup;
	CtasSyncSpiAs as;
	Oid			argtypes[3] = {OIDOID, TEXTOID, TEXTOID};
	Datum		values[3];
	uint64		n;
	uint64		i;

	if (!OidIsValid(relid))
		elog(ERROR, "table ctas_fed.syncs is missing");
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);

	values[0] = ObjectIdGetDatum(serverid);
	values[1] = CStringGetTextDatum(schema);
	values[2] = CStringGetTextDatum(table);
	CtasSyncSpiBeginAs(owner, &as);
	CtasSyncSpiExec("SELECT owner FROM ctas_fed.syncs WHERE server = $1 "
					"AND remote_schema = $2 AND remote_table = $3 "
					"AND state = 'failed' FOR UPDATE",
					3, argtypes, values, false);
	n = SPI_processed;
	for (i = 0; i < n; i++)
	{
		Oid			job_owner = DatumGetObjectId(CtasSyncSpiDatum(i, 1));

		if (!has_privs_of_role(as.save_userid, job_owner))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("must be a member of role \"%s\" to stop its sync into \"%s.%s\"",
							GetUserNameFromId(job_owner, false), schema,
							table)));
	}
	if (n > 0)
		CtasSyncSpiExec("UPDATE ctas_fed.syncs SET state = 'stopped', "
						"finished_at = pg_catalog.now() WHERE server = $1 "
						"AND remote_schema = $2 AND remote_table = $3 "
						"AND state = 'failed'",
						3, argtypes, values, false);
	CtasSyncSpiEndAs(&as);
	return n > 0;
}

/*
 * CtasSyncRecordedTupdesc
 *		The row type the query's expressions run on, built from what the
 *		job recorded (the attnums it reads and their types), never from the
 *		catalog of the moment: the worker may be reading WAL written before
 *		a DDL that the catalog already shows, and meets that DDL at its
 *		place (sync/ddl.c, sync/follow.c).  The columns the query does not
 *		read stay NULL.  In the current memory context.
 */
TupleDesc
CtasSyncRecordedTupdesc(SyncJob *job)
{
	int			natts = 1;
	int			i;
	TupleDesc	desc;

	for (i = 0; i < job->ncols; i++)
		natts = Max(natts, job->attnums[i]);
	desc = CreateTemplateTupleDesc(natts);
	for (i = 1; i <= natts; i++)
		TupleDescInitEntry(desc, i, NULL, INT4OID, -1, 0);
	for (i = 0; i < job->ncols; i++)
		TupleDescInitEntry(desc, job->attnums[i], NULL, job->atttypes[i],
						   -1, 0);
	return desc;
}
