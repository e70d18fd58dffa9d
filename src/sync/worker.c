/*-------------------------------------------------------------------------
 *
 * worker.c
 *		  The sync worker of a continuous sync: one dynamic background
 *		  worker per decoding stream of ctas_fed.syncs, started by the
 *		  resolver of its database (CtasSyncTick), which also drops the
 *		  replication slot of a stream once none of its jobs runs.
 *
 * A stream is one publication and one replication slot, and the jobs that
 * read them: every sync of the database into every catalog (the default
 * stream), or those that named one stream (the option stream), so that the
 * WAL is decoded once for all of them (sync/statement.c says how a sync
 * joins).  Each job keeps its own remote transactions, applied lsn and
 * state; the worker runs them together:
 *
 *	copying		a new stream: the slot is created and every job's table is
 *				copied under its snapshot, each in its own remote
 *				transaction that stores the consistent point as that job's
 *				applied lsn (do_copy); a copy interrupted by anything copies
 *				every job of the stream again with a new slot.
 *	joining		a job "copying" in a stream that streams (a sync that
 *				joined it, or a resync of one job): see "Joining" below.
 *	streaming	rounds of one peek with the stream's publication; each
 *				change goes to the jobs of its table (sync/apply.c), each
 *				job applies in a remote transaction of its own, all
 *				committed at the end of the peek; the slot is advanced only
 *				after that.  A job skips the source transactions below its
 *				own applied lsn, so a crash between two of those commits
 *				still applies each transaction once per table.
 *
 * The copy of a new stream, as PostgreSQL's own tablesync: create the
 * logical replication slot (pgoutput) in a REPEATABLE READ read-only
 * transaction, exactly as the walsender's CREATE_REPLICATION_SLOT ...
 * (SNAPSHOT 'use') does (CtasSyncSlotSnapshot): the snapshot built at the slot's
 * consistent point becomes the transaction's snapshot, so the copy sees
 * every transaction that committed before that point and none after it;
 * the decoding stream begins there.
 *
 * Joining.  A sync's statement adds its table to the stream's publication
 * and records the job "copying", in its transaction, which commits at T.
 * Between two rounds the worker sees the job (leave_stopped) and copies it
 * (join_copy): a temporary slot, made by the same code (CtasSyncSlotSnapshot),
 * gives its consistent point X and the snapshot of X, under which the table
 * is copied in a remote transaction of the job's own that stores X as the
 * job's applied lsn; the temporary slot is dropped once the snapshot is
 * taken (the transaction's xmin keeps what the snapshot sees), and the job
 * streams with the others, skipping the source transactions that commit
 * before X.  Nothing is lost and nothing applied twice:
 *	- the copy holds exactly the transactions that commit before X, as the
 *	  first copy does; the job skips exactly those (a commit before X);
 *	- the stream's slot is confirmed at C <= X when the temporary slot is
 *	  made (the slot is advanced only by the rounds, which wait for the
 *	  join, to positions they read, all before X), so its next peek returns
 *	  every transaction that commits at or after X;
 *	- such a transaction has all its changes after T, so pgoutput publishes
 *	  them for the job's table: the temporary slot is consistent only once
 *	  every transaction that had an xid when it was made has ended, so one
 *	  that commits at or after X had none then, and wrote nothing before
 *	  that, after T.
 * A crash or an error during the join copy rolls its remote transaction
 * back; the job is still "copying" and is copied again, with a new
 * temporary slot.  The join copy runs in the worker between two rounds:
 * the stream's other jobs wait for it (XXX: a large table joining a busy
 * stream delays the others by its copy).
 *
 * Merging.  The worker of the oldest default stream of the database takes
 * the other default streams (of syncs made before version 0.3, one per
 * CTAS) into its own between two rounds, without a copy again
 * (sync/merge.c).
 *
 * A job that is stopped leaves the stream (its table leaves the
 * publication in the stopping transaction, sync/statement.c) and the worker
 * goes on with the others; one that fails for good is recorded as failed
 * and its table taken out of the publication, the worker ends, and the
 * resolver starts it again for the others.  The slot and the publication
 * go with the stream's last job.
 *
 * A catalog that is down holds back only its own jobs.  Every call of a
 * job's target that reaches the remote runs under guard_routine, which
 * names the job in CtasSyncInTarget; an error raised there that does not fail
 * the job for good (remote unreachable, a remote error) is caught by the
 * streaming loop (catch_job_error): the local transaction is aborted, the
 * remote transactions the jobs did not commit roll back, the job (and,
 * when the catalog is unreachable, the stream's other jobs into it) is
 * held out of the stream with its error recorded, and the round is read
 * again by the others, each from its own applied lsn.  While a job is held
 * the slot is advanced no further than its applied lsn (held_position),
 * the oldest position still needed; after CTAS_SYNC_RESTART_SECS it comes
 * back and catches up from there, the peeks reading again from the slot's
 * position what the others skip (a full peek that gave them nothing new is
 * read further the next time: XXX a long outage of one catalog makes every
 * peek read again the WAL it holds back).  When every job of the stream is
 * held, the worker ends, and the resolver starts it again after
 * CTAS_SYNC_RESTART_SECS, as after any other error: a new worker reads
 * every job anew and checks the slot (sync/resync.c).
 *
 * In the streaming phase the slot's changes are peeked at through SQL
 * (pg_logical_slot_peek_binary_changes, proto_version 1, the stream's
 * publication), the pgoutput messages parsed with logicalrep_read_*, the
 * query's WHERE and select list evaluated on each new row, and applied by
 * key: a row in the WHERE is upserted, a row that is not (or no longer) is
 * deleted, a changed key deletes the old one, TRUNCATE deletes all.  Each
 * job's remote transaction stores the end lsn of its last source
 * transaction with the rows; after the COMMITs the slot is advanced.
 *
 * The worker connects as the bootstrap superuser, which the slot functions
 * need, but reads the source and evaluates the query's expressions as the
 * job's owner, in a security-restricted operation as REFRESH MATERIALIZED
 * VIEW does (an "immutable" function is still the owner's code), and
 * reaches the catalog with the owner's user mapping under the usual
 * password rules.
 *
 * Errors that cannot heal (a DDL that changed a column the query reads, the
 * source dropped, an unchanged TOAST value the worker cannot rebuild) mark
 * the job "failed"; its table leaves the publication, so that the stream
 * holds no WAL for it (docs/sync.md).
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

/* sleep when the slot had nothing new, ms */
#define SYNC_IDLE_MS		100
/* look for default streams to merge into this one this often, ms */
#define SYNC_MERGE_MS		5000
/* advance the slot over WAL without our changes at most this often, ms */
#define SYNC_IDLE_ADVANCE_MS	1000

PGDLLEXPORT void ctas_fed_sync_main(Datum main_arg);

/* the jobs that stream (do_stream), for the worker's error exit */
static List *stream_jobs = NIL;

/* the worker yielded its stream to one that waits for the pool */
static bool stream_yielded = false;

/* a peek is being applied: the jobs' remote transactions may be open */
static bool in_peek = false;

/*
 * A job held out of the stream after a transient error of its catalog
 * (catch_job_error), until retry_at; in CtasSyncJobCxt.
 */
typedef struct HeldJob
{
	SyncJob    *job;
	TimestampTz retry_at;
	bool		copying;		/* its join copy failed (join_copy) */
} HeldJob;

static List *held_jobs = NIL;

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
	if (!CtasSyncPartitionTriggerOn(job->relid))
		SYNC_FAIL(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				  errmsg("the event trigger \"ctas_fed_partition_drops\" of sync " INT64_FORMAT " is gone or not enabled always",
						 job->id),
				  errdetail("Without it the sync cannot see a partition of its source dropped (docs/sync.md, \"Partitioned sources\")."),
				  errhint("ALTER EVENT TRIGGER ctas_fed_partition_drops ENABLE ALWAYS, then create the sync again."));
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

/* what copy_row needs */
typedef struct SyncCopyRow
{
	SyncJob    *job;
	SyncEval   *ev;
	AttrNumber *plain;
	uint64		rows;
} SyncCopyRow;

/*
 * copy_row
 *		The row of the query for the source row in slot, if any, given to
 *		the job's target, in per-tuple memory.
 */
static void
copy_row(TupleTableSlot *slot, void *arg)
{
	SyncCopyRow *copy = arg;
	SyncEval   *ev = copy->ev;
	MemoryContext oldcxt;

	oldcxt = MemoryContextSwitchTo(ev->econtext->ecxt_per_tuple_memory);
	if (copy->plain != NULL)
		CtasSyncPlainRow(slot, ev->nexprs, copy->plain, ev->values,
						 ev->nulls);
	if (copy->plain != NULL || CtasSyncEvaluate(ev, slot))
	{
		copy->job->apply->copy_row(&copy->job->target, ev->values,
								   ev->nulls);
		copy->rows++;
	}
	MemoryContextSwitchTo(oldcxt);
	ResetExprContext(ev->econtext);
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
	SyncCopyRow	copy;
	bool		rebuilding;
	TimestampTz at[5];			/* start, slot, catalog, rows, commit */

	at[0] = started;
	at[1] = GetCurrentTimestamp();
	check_source(job, true);
	CtasSyncOpenTarget(job);
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
	copy.job = job;
	copy.ev = ev;
	copy.plain = plain;
	copy.rows = 0;
	rel = relation_open(job->relid, AccessShareLock);
	/* every partition, as the root's rows (sync/partition.c) */
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		CtasSyncPartitionCopy(job, rel, copy_row, &copy);
	else
	{
		hslot = table_slot_create(rel, NULL);
		scan = table_beginscan(rel, GetActiveSnapshot(), 0, NULL);
		while (table_scan_getnextslot(scan, ForwardScanDirection, hslot))
		{
			CHECK_FOR_INTERRUPTS();
			copy_row(hslot, &copy);
		}
		table_endscan(scan);
		ExecDropSingleTupleTableSlot(hslot);
	}
	rows = copy.rows;
	relation_close(rel, AccessShareLock);
	AtEOXact_GUC(false, gucnest);
	SetUserIdAndSecContext(save_userid, save_sec);
	at[3] = GetCurrentTimestamp();

	/* tests: a worker killed with the copy sent and not committed */
	CtasFaultPointWait("sync_copy_commit");
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
	XLogRecPtr	consistent;
	ListCell   *lc;
	TimestampTz started = GetCurrentTimestamp();

	foreach(lc, jobs)
		CtasSyncJobEvent(lfirst(lc), "copying", NULL);

	/* a slot of an interrupted copy: begin again */
	if (SearchNamedReplicationSlot(first->slot_name, true) != NULL)
	{
		StartTransactionCommand();
		ReplicationSlotDrop(first->slot_name, false);
		CommitTransactionCommand();
	}

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	/* partitions stay those of the slot's snapshot (sync/partition.c) */
	CtasSyncPartitionLock(jobs);
	consistent = CtasSyncSlotSnapshot(first->slot_name, true);

	PushActiveSnapshot(GetTransactionSnapshot());
	foreach(lc, jobs)
		copy_job(lfirst(lc), consistent, started);
	PopActiveSnapshot();
	CommitTransactionCommand();

	return consistent;
}

/*
 * leave_stopped
 *		Take out of *jobs the jobs that no longer stream (stopped by
 *		stop_sync or DROP TABLE, marked for a resync, or gone), in a
 *		transaction connected to SPI, closing their targets, and return the
 *		sync_ids (a List of int64 *, palloc'd) of the stream's jobs to copy
 *		that neither stream here nor wait for a retry: those of syncs that
 *		joined the stream, or of resyncs, which the worker copies
 *		(join_copy).  The stop of a job whose stream goes on is told here;
 *		that of the stream's last jobs by the resolver, when it drops the
 *		slot (CtasSyncTick).
 */
static List *
leave_stopped(int64 stream_id, List **jobs)
{
	Datum		args[1];
	List	   *left = NIL;
	List	   *kept = NIL;
	List	   *copying = NIL;
	ListCell   *lc;
	MemoryContext oldcxt;
	uint64		i;

	args[0] = Int64GetDatum(stream_id);
	CtasSyncSpiExec("SELECT sync_id, state = 'copying' FROM ctas_fed.syncs "
			 "WHERE stream_id = $1 AND state IN ('copying', 'streaming')",
			 1, (Oid[]) {INT8OID}, args, true);
	oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);
	foreach(lc, *jobs)
	{
		SyncJob    *job = lfirst(lc);
		bool		streaming = false;

		for (i = 0; i < SPI_processed; i++)
		{
			if (DatumGetInt64(CtasSyncSpiDatum(i, 1)) == job->id &&
				!DatumGetBool(CtasSyncSpiDatum(i, 2)))
				streaming = true;
		}
		if (streaming)
			kept = lappend(kept, job);
		else
			left = lappend(left, job);
	}
	/* copying: read after the transaction (join_all), in CtasSyncJobCxt */
	for (i = 0; i < SPI_processed; i++)
	{
		int64		id = DatumGetInt64(CtasSyncSpiDatum(i, 1));
		bool		held = false;

		foreach(lc, held_jobs)
			held |= ((HeldJob *) lfirst(lc))->job->id == id;
		if (DatumGetBool(CtasSyncSpiDatum(i, 2)) && !held)
		{
			int64	   *p = palloc(sizeof(int64));

			*p = id;
			copying = lappend(copying, p);
		}
	}
	MemoryContextSwitchTo(oldcxt);

	foreach(lc, left)
	{
		SyncJob    *job = lfirst(lc);
		bool		resync = false;
		ListCell   *lc2;

		foreach(lc2, copying)
			resync |= *(int64 *) lfirst(lc2) == job->id;
		if (job->open)
		{
			job->apply->close(&job->target);
			job->open = false;
		}
		if (resync)
			continue;			/* copied again at once (join_copy) */
		ereport(LOG,
				(errmsg("ctas_fed sync " INT64_FORMAT ": stopped, leaving stream " INT64_FORMAT,
						job->id, stream_id)));
		if (kept != NIL)
		{
			CtasSyncJobEvent(job, "stopped", NULL);
			CtasSyncStatusRelease(job->id);
		}
	}
	*jobs = kept;
	return copying;
}

/*
 * close_job
 *		Close the target of job if it is open, which rolls back what it did
 *		not commit; never ERROR.
 */
static void
close_job(SyncJob *job)
{
	if (job->open)
	{
		job->apply->close(&job->target);
		job->open = false;
	}
}

/*
 * hold_job
 *		Take job out of the stream after a transient error of its catalog
 *		(error), until CTAS_SYNC_RESTART_SECS from now: its target is
 *		closed, the error recorded in its row (in a transaction of its own),
 *		and the stream goes on without it.  copying: its join copy failed,
 *		and is tried again then.  Outside a transaction.  Can ERROR.
 */
static void
hold_job(SyncJob *job, const char *error, bool copying)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);
	HeldJob    *h = palloc0(sizeof(HeldJob));

	close_job(job);
	h->job = job;
	h->copying = copying;
	h->retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											  CTAS_SYNC_RESTART_SECS * 1000);
	held_jobs = lappend(held_jobs, h);
	MemoryContextSwitchTo(oldcxt);
	ereport(LOG,
			(errmsg("ctas_fed sync " INT64_FORMAT ": catalog \"%s\" failed, retrying in %d s while stream " INT64_FORMAT " goes on",
					job->id, job->target.catalog->name,
					CTAS_SYNC_RESTART_SECS, job->stream_id),
			 errdetail_internal("%s", error)));
	CtasSyncSetState(job->id, "", error, InvalidXLogRecPtr);
}

/*
 * catch_job_error
 *		In the PG_CATCH of the streaming loop (do_stream): when the error in
 *		flight was raised by a target call of one job (CtasSyncInTarget) and is not
 *		one that fails the job for good, it is that job's catalog's: abort
 *		the local transaction, close the targets of the stream's jobs (the
 *		remote transactions they did not commit roll back; each applies
 *		again from its own applied lsn), hold the job out of the stream
 *		(hold_job), and with it, when the catalog is unreachable (SQLSTATE
 *		class 08), the stream's other jobs into that catalog, and return
 *		true.  Otherwise return false, with the error untouched: the caller
 *		re-throws it, and the worker ends as before.  Can ERROR.
 */
static bool
catch_job_error(List **jobs)
{
	SyncJob    *job = CtasSyncInTarget;
	ErrorData  *edata;
	List	   *kept = NIL;
	List	   *hold = NIL;
	bool		unreachable;
	ListCell   *lc;

	if (job == NULL || CtasSyncFailed)
		return false;
	CtasSyncInTarget = NULL;

	HOLD_INTERRUPTS();
	MemoryContextSwitchTo(CtasSyncJobCxt);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	if (MyReplicationSlot != NULL)
		ReplicationSlotRelease();
	RESUME_INTERRUPTS();
	unreachable = ERRCODE_TO_CATEGORY(edata->sqlerrcode) ==
		ERRCODE_CONNECTION_EXCEPTION;

	foreach(lc, *jobs)
	{
		SyncJob    *other = lfirst(lc);

		/* what the others did not commit of the peek rolls back */
		if (in_peek || other == job)
			close_job(other);
		if (other == job ||
			(unreachable &&
			 other->target.catalog->serverid == job->target.catalog->serverid))
			hold = lappend(hold, other);
		else
			kept = lappend(kept, other);
	}
	*jobs = kept;
	in_peek = false;
	if (!list_member_ptr(hold, job))
		hold = lappend(hold, job);	/* a job being joined */
	foreach(lc, hold)
	{
		SyncJob    *h = lfirst(lc);

		hold_job(h, edata->message, strcmp(h->state, "copying") == 0);
	}
	FreeErrorData(edata);
	return true;
}

/*
 * rejoin_held
 *		The held jobs whose retry is due go back: a streaming one into
 *		*jobs, read again from its row (its catalog's options may have
 *		changed; stream_round opens its target, and the job then reads from
 *		its own applied lsn), a copying one to the joins of the next round.
 *		Returns whether any came back.  Can ERROR.
 */
static bool
rejoin_held(List **jobs)
{
	TimestampTz now = GetCurrentTimestamp();
	List	   *still = NIL;
	bool		any = false;
	ListCell   *lc;
	MemoryContext oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);

	foreach(lc, held_jobs)
	{
		HeldJob    *h = lfirst(lc);

		if (h->retry_at > now)
		{
			still = lappend(still, h);
			continue;
		}
		if (!h->copying)
		{
			SyncJob    *job;

			/* read again: its catalog's options may have changed */
			MemoryContextSwitchTo(oldcxt);
			SetCurrentStatementStartTimestamp();
			StartTransactionCommand();
			SPI_connect();
			PushActiveSnapshot(GetTransactionSnapshot());
			CtasSyncCurrentJob = NULL;
			job = CtasSyncLoadJob(h->job->id);
			CtasSyncLoadingId = 0;
			SPI_finish();
			PopActiveSnapshot();
			CommitTransactionCommand();
			MemoryContextSwitchTo(CtasSyncJobCxt);
			if (job != NULL)
				*jobs = lappend(*jobs, job);
		}
		any = true;
	}
	held_jobs = still;
	MemoryContextSwitchTo(oldcxt);
	return any;
}

/*
 * held_position
 *		The position the slot may be advanced to at most while jobs are
 *		held: the oldest applied lsn of a held streaming job (its
 *		transactions from there must still be decoded when it comes back),
 *		or confirmed, the slot's, for one whose applied lsn this worker
 *		never read (it is at or after the slot's: the slot is never
 *		advanced past a job's applied lsn).  InvalidXLogRecPtr when none
 *		is held.
 */
static XLogRecPtr
held_position(XLogRecPtr confirmed)
{
	XLogRecPtr	pos = InvalidXLogRecPtr;
	ListCell   *lc;

	foreach(lc, held_jobs)
	{
		HeldJob    *h = lfirst(lc);
		XLogRecPtr	applied = h->job->applied;

		if (h->copying)
			continue;
		if (applied == InvalidXLogRecPtr || applied < confirmed)
			applied = confirmed;
		if (pos == InvalidXLogRecPtr || applied < pos)
			pos = applied;
	}
	return pos;
}

/*
 * join_copy
 *		The copy of a job that joined a running stream (a new sync, or a
 *		resync of one job), as PostgreSQL's tablesync joins an apply
 *		worker: a temporary slot gives the consistent point X and its
 *		snapshot, under which the job's table is copied in a remote
 *		transaction of its own that stores X as its applied lsn; the job is
 *		then "streaming" and the stream applies to it every source
 *		transaction that commits at or after X, skipping those before
 *		(see the head of this file).  Outside a transaction, between two
 *		rounds of the stream (so that the stream's slot is not advanced
 *		meanwhile).  Can ERROR; an error of the job's catalog holds it
 *		(catch_job_error), its copy tried again later.
 */
static void
join_copy(SyncJob *job)
{
	char	   *name = psprintf("%sj%u_" INT64_FORMAT, CTAS_SYNC_PREFIX,
								MyDatabaseId, job->id);
	TimestampTz started = GetCurrentTimestamp();
	XLogRecPtr	consistent;
	XLogRecPtr	confirmed;

	CtasSyncJobEvent(job, "copying", NULL);

	/* the temporary slot of a copy that a crash interrupted */
	if (SearchNamedReplicationSlot(name, true) != NULL)
	{
		StartTransactionCommand();
		ReplicationSlotDrop(name, true);
		CommitTransactionCommand();
	}

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	confirmed = CtasSyncSlotConfirmed(job->slot_name);
	/* partitions stay those of the slot's snapshot (sync/partition.c) */
	CtasSyncPartitionLock(list_make1(job));
	consistent = CtasSyncSlotSnapshot(name, false);
	if (confirmed > consistent)
		elog(ERROR, "slot \"%s\" is confirmed at %X/%X, past the consistent point %X/%X of sync " INT64_FORMAT,
			 job->slot_name, LSN_FORMAT_ARGS(confirmed),
			 LSN_FORMAT_ARGS(consistent), job->id);

	PushActiveSnapshot(GetTransactionSnapshot());
	copy_job(job, consistent, started);
	PopActiveSnapshot();
	CommitTransactionCommand();

	CtasSyncSetState(job->id, "streaming", NULL, consistent);
	job->state = "streaming";
	CtasSyncJobEvent(job, "streaming", NULL);
	ereport(LOG,
			(errmsg("ctas_fed sync " INT64_FORMAT ": joined stream " INT64_FORMAT " at %X/%X",
					job->id, job->stream_id, LSN_FORMAT_ARGS(consistent))));
}

/*
 * join_all
 *		Load and copy (join_copy) each job of ids (from leave_stopped), and
 *		add it to *jobs, streaming.  Outside a transaction.  Can ERROR.
 */
static void
join_all(List *ids, List **jobs)
{
	ListCell   *lc;

	foreach(lc, ids)
	{
		SyncJob    *job;
		MemoryContext oldcxt;

		CHECK_FOR_INTERRUPTS();
		CtasSyncCurrentJob = NULL;
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		job = CtasSyncLoadJob(*(int64 *) lfirst(lc));
		CtasSyncLoadingId = 0;
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		if (job == NULL || strcmp(job->state, "copying") != 0)
			continue;
		if (!CtasSyncStatusAttach(job->id))
			proc_exit(0);		/* its database is being dropped */
		CtasSyncStatusLabels(job->target.catalog->name, job->target.schema,
							 job->target.table, job->slot_name);
		join_copy(job);
		oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);
		*jobs = lappend(*jobs, job);
		MemoryContextSwitchTo(oldcxt);
	}
}

/* What the rounds of the streaming loop carry from one to the next */
typedef struct StreamLoop
{
	int64		stream_id;
	char	   *slot_name;
	char	   *peek_sql;
	TimestampTz last_idle_advance;
	XLogRecPtr	idle_flush;		/* flush position at the last peek that
								 * brought nothing new */
	XLogRecPtr	idle_safe;
	int			peek_limit;		/* rows of the next peek, 0: the setting */
	List	   *joining;		/* sync_ids to copy after the round */
	bool		done;			/* no job left */
} StreamLoop;

/*
 * stream_round
 *		One round of the streaming loop: leave the jobs that stopped, open
 *		the targets not open (of jobs back from a retry, or closed by an
 *		error), one peek applied to every job, the slot advanced as far as
 *		every job (held ones too) has applied.  Returns whether the worker
 *		should sleep before the next round.  Can ERROR.
 */
static bool
stream_round(StreamLoop *sl, List **jobs)
{
	Oid			types[2] = {NAMEOID, INT4OID};
	Datum		args[2];
	int			peek_changes = sl->peek_limit > 0 ? sl->peek_limit :
		CtasSyncPeekChanges;
	XLogRecPtr	flush;
	XLogRecPtr	insert;
	XLogRecPtr	advance_to = InvalidXLogRecPtr;
	XLogRecPtr	confirmed;
	XLogRecPtr	hold;
	bool		idle;
	bool		sleep;
	Portal		portal;
	SyncPeekResult peek = {0};
	TimestampTz peek_at;
	uint64		nrows = 0;
	uint64		applied_before = 0;
	uint64		applied_after = 0;
	ListCell   *lc;

	/* a check that ctas_fed.verify_sync() asked for (sync/verify.c) */
	if (*jobs != NIL)
		CtasSyncVerifyIfAsked(*jobs);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());

	/* stopped (stop_sync, DROP TABLE) or gone: leave; joined: copy after */
	sl->joining = leave_stopped(sl->stream_id, jobs);
	if (*jobs == NIL)
	{
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		/*
		 * None left, or all held by errors of their catalogs: end (the
		 * resolver starts the worker again, which reads every job anew);
		 * jobs to copy: copy them.
		 */
		sl->done = sl->joining == NIL;
		return false;
	}
	foreach(lc, *jobs)
		check_source(lfirst(lc), false);
	foreach(lc, *jobs)
	{
		SyncJob    *job = lfirst(lc);

		if (!job->open)
		{
			Datum		id[1];

			CtasSyncOpenTarget(job);
			/* back after a retry: its error is over */
			id[0] = Int64GetDatum(job->id);
			CtasSyncSpiExec("UPDATE ctas_fed.syncs SET error = NULL "
					 "WHERE sync_id = $1 AND error IS NOT NULL "
					 "AND state IN ('copying', 'streaming')",
					 1, (Oid[]) {INT8OID}, id, false);
		}
		applied_before += job->applied;
	}

	insert = GetXLogInsertRecPtr();
	flush = GetFlushRecPtr(NULL);
	peek_at = GetCurrentTimestamp();
	args[0] = DirectFunctionCall1(namein, CStringGetDatum(sl->slot_name));
	if (flush == sl->idle_flush)
		idle = true;			/* no WAL since the last empty peek */
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
		portal = SPI_cursor_open_with_args(NULL, sl->peek_sql, 2, types, args,
										   NULL, true, 0);
		in_peek = true;
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
				CtasSyncOpenTarget(job);
			}
		}
		/* the remote transactions are committed, or rolled back */
		in_peek = false;
		if (!peek.redo && idle)
		{
			sl->idle_flush = flush;

			/*
			 * The slot may be advanced over WAL that this empty peek read
			 * whole, but only to a record boundary: a commit record cut by
			 * the flush position would be skipped for good.  An insert
			 * position taken before an earlier peek is such a boundary, and
			 * this peek read up to it when it was flushed before the peek
			 * began.
			 */
			if (sl->idle_safe != InvalidXLogRecPtr && sl->idle_safe <= flush &&
				TimestampDifferenceExceeds(sl->last_idle_advance, peek_at,
										   SYNC_IDLE_ADVANCE_MS))
			{
				advance_to = sl->idle_safe;
				sl->last_idle_advance = peek_at;
			}
			sl->idle_safe = insert;
		}
		else if (!peek.redo)
		{
			sl->idle_safe = InvalidXLogRecPtr;
			advance_to = peek.last_end;
		}
	}
	foreach(lc, *jobs)
		applied_after += ((SyncJob *) lfirst(lc))->applied;

	/*
	 * Only after the remote COMMITs: what they hold may be confirmed. The
	 * slot goes to the end lsn of the last source transaction read (its
	 * commit record's end): the decoder returns again every transaction
	 * whose commit record begins at or after the slot's confirmed position,
	 * and a transaction whose commit record begins exactly at that end is
	 * one not yet applied (docs/sync-exactly-once.md).  A held job keeps
	 * it at its own applied lsn.
	 */
	confirmed = CtasSyncSlotConfirmed(sl->slot_name);
	hold = held_position(confirmed);
	if (hold != InvalidXLogRecPtr && advance_to > hold)
		advance_to = hold;
	if (advance_to != InvalidXLogRecPtr && advance_to > confirmed)
	{
		/* tests: a crash between the remote commits and the advance */
		if (!idle)
			CtasFaultPointWait("sync_before_advance");
		args[1] = LSNGetDatum(advance_to);
		CtasSyncSpiExec("SELECT pg_catalog.pg_replication_slot_advance($1, $2)",
				 2, (Oid[]) {NAMEOID, PG_LSNOID}, args, false);
		/* branch speed: restart_lsn kept near (sync/status.c) */
		CtasSyncKeepRestartNear(sl->slot_name);
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

	/*
	 * While a held job keeps the slot back, each peek reads again from its
	 * position what the other jobs applied already.  A full peek that gave
	 * them nothing new is read further the next time; one that read to the
	 * end is not read again before new WAL comes.
	 */
	sleep = idle;
	if (held_jobs == NIL)
		sl->peek_limit = 0;
	else if (!idle && !peek.redo && applied_after == applied_before)
	{
		if (nrows >= (uint64) peek_changes)
			sl->peek_limit = peek_changes < INT_MAX / 4 ?
				peek_changes * 4 : INT_MAX;
		else
		{
			sl->idle_flush = flush;
			sleep = true;
		}
	}

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	/* branch speed: small peeks paced (sync/apply.c) */
	if (!sleep && !peek.redo)
		CtasSyncPacePeek(nrows, peek_at);
	return sleep;
}

/*
 * do_stream
 *		The streaming phase of the jobs of a stream (a List of SyncJob in
 *		CtasSyncJobCxt, updated as jobs leave, join and are held), until none is
 *		left: rounds of stream_round, the joins between them.  An error of
 *		one job's catalog holds that job (catch_job_error) and the stream
 *		goes on; any other ends the worker.
 */
static void
do_stream(List **jobs)
{
	SyncJob    *first = linitial(*jobs);
	StreamLoop *sl = palloc0(sizeof(StreamLoop));
	char	   *pubs = pstrdup(quote_identifier(first->publication));
	TimestampTz slice_start = GetCurrentTimestamp();
	TimestampTz merge_at = 0;
	ListCell   *lc;

	sl->stream_id = first->stream_id;
	sl->slot_name = first->slot_name;

	/*
	 * $2: ctas_fed.sync_peek_changes, read at each peek; a peek never splits
	 * a transaction
	 */
	sl->peek_sql = psprintf("SELECT lsn, data FROM "
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
	 * it (sync/ddl.c, Relation messages in sync/apply.c).  The targets are
	 * opened by the first round, each job's error its own.
	 */
	foreach(lc, *jobs)
		check_source(lfirst(lc), false);
	PopActiveSnapshot();
	CommitTransactionCommand();

	for (;;)
	{
		volatile bool sleep = false;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (rejoin_held(jobs))
			sl->idle_flush = InvalidXLogRecPtr;

		CtasSyncInTarget = NULL;
		PG_TRY();
		{
			sleep = stream_round(sl, jobs);
			if (sl->joining != NIL)
			{
				join_all(sl->joining, jobs);
				list_free_deep(sl->joining);
				sl->joining = NIL;
				sl->idle_flush = InvalidXLogRecPtr;
			}
		}
		PG_CATCH();
		{
			if (!catch_job_error(jobs))
				PG_RE_THROW();
			sl->idle_flush = InvalidXLogRecPtr;
			sleep = *jobs == NIL;
		}
		PG_END_TRY();
		if (sl->done)
			return;
		pgstat_report_stat(false);

		/*
		 * Other default streams of the database (of syncs made before 0.3)
		 * merge into the oldest, between two of its rounds (sync/merge.c);
		 * looked for about every SYNC_MERGE_MS.
		 */
		if (TimestampDifferenceExceeds(merge_at, GetCurrentTimestamp(),
									   SYNC_MERGE_MS))
		{
			merge_at = GetCurrentTimestamp();
			if (CtasSyncMergeStreams(sl->stream_id, first->publication,
									 sl->slot_name, jobs))
			{
				sl->idle_flush = InvalidXLogRecPtr;
				merge_at = 0;	/* another one may follow */
			}
		}

		/* a time slice served, and a stream waits for the pool: yield */
		if (TimestampDifferenceExceeds(slice_start, GetCurrentTimestamp(),
									   CTAS_SYNC_SLICE_MS))
		{
			slice_start = GetCurrentTimestamp();
			if (CtasSyncPoolWaited())
			{
				ereport(LOG,
						(errmsg("ctas_fed sync " INT64_FORMAT ": yielding to a stream that waits for a sync worker",
								sl->stream_id)));
				stream_yielded = true;
				return;
			}
		}

		if (sleep)
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
	int			i;

	/* the list is shared with the event triggers (sync/partition.c) */
	for (i = 0; i < CtasSyncNTextSettings; i++)
		SetConfigOption(CtasSyncTextSettings[i][0], CtasSyncTextSettings[i][1],
						PGC_SUSET, PGC_S_OVERRIDE);
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

	CtasSyncJobCxt = AllocSetContextCreate(TopMemoryContext, "ctas_fed sync job",
									ALLOCSET_DEFAULT_SIZES);

	/* one worker per stream: a session lock that goes with the process */
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (stream_id >> 32),
						 (uint32) stream_id, CTAS_LOCKTAG_SYNC);
	if (LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		proc_exit(0);
	/* a slot of the pool of ctas_fed.max_sync_workers (sync/tick.c) */
	if (CtasSyncPoolTake() < 0)
	{
		ereport(DEBUG1,
				(errmsg_internal("ctas_fed sync " INT64_FORMAT ": no slot of the pool is free",
								 stream_id)));
		proc_exit(0);
	}

	PG_TRY();
	{
		List	   *loaded;
		List	   *streaming = NIL;
		bool		copying = false;
		char	   *lost;
		ListCell   *lc;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		loaded = CtasSyncLoadStream(stream_id);
		stream_jobs = loaded;
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
			else
				streaming = lappend(streaming, job);
		}

		/*
		 * Jobs to copy in a stream that streams: they join it, each under
		 * a temporary slot of its own (join_copy, in do_stream's first
		 * round).  Otherwise (a new stream, or one whose first copy was
		 * interrupted, or whose slot is gone) all are copied under the
		 * stream's new slot.
		 */
		if (copying && streaming != NIL &&
			SearchNamedReplicationSlot(((SyncJob *) linitial(loaded))->slot_name,
									   true) != NULL)
		{
			loaded = streaming;
			copying = false;
		}
		stream_jobs = loaded;

		/* a lost slot: copy again (sync/resync.c) */
		if (!copying && loaded != NIL &&
			(lost = CtasSyncResyncIfLost(loaded)) != NULL)
		{
			foreach(lc, loaded)
				CtasSyncJobEvent(lfirst(lc), "resyncing", lost);
			copying = true;
		}
		/* a job to copy copies them all, under one new slot */
		if (copying)
		{
			XLogRecPtr	consistent = do_copy(loaded);

			foreach(lc, loaded)
			{
				SyncJob    *job = lfirst(lc);

				CtasSyncSetState(job->id, "streaming", NULL, consistent);
				job->state = "streaming";
				CtasSyncJobEvent(job, "streaming", NULL);
			}
		}
		if (loaded != NIL)
		{
			CtasSyncSetStreamError(stream_id, NULL);
			stream_jobs = loaded;
			do_stream(&stream_jobs);
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		SyncJob    *failed = CtasSyncFailed ? CtasSyncCurrentJob : NULL;
		int64		failed_id = failed ? failed->id : CtasSyncLoadingId;
		bool		others = false;
		ListCell   *lc;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(CtasSyncJobCxt);
		edata = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
		close_targets(stream_jobs);
		RESUME_INTERRUPTS();

		/*
		 * An error that cannot heal fails its job alone; the resolver starts
		 * the worker again for the others.  Any other error is the
		 * stream's: its jobs are tried again.
		 */
		/* a partition attached, detached or dropped (sync/partition.c) */
		if (CtasSyncResyncWanted && !CtasSyncFailed)
		{
			/* the jobs of the source whose partition changed */
			Oid			source = CtasSyncCurrentJob ?
				CtasSyncCurrentJob->relid : InvalidOid;

			CtasSyncPartitionResync(stream_id, source, edata->message);
			foreach(lc, stream_jobs)
			{
				SyncJob    *job = lfirst(lc);

				if (!OidIsValid(source) || job->relid == source)
					CtasSyncJobEvent(job, "resyncing", edata->message);
			}
		}
		else if (CtasSyncFailed && failed_id != 0)
		{
			CtasSyncFailJob(failed_id, edata->message);
			/* a schema change it could not follow: recorded (sync/follow.c) */
			if (failed != NULL && failed->schema_failed_at != InvalidXLogRecPtr)
				CtasSyncRecordSchemaFailure(failed, edata->message);
			if (failed != NULL)
				CtasSyncJobEvent(failed, "failed", edata->message);
			foreach(lc, stream_jobs)
				others |= ((SyncJob *) lfirst(lc))->id != failed_id;
			others |= held_jobs != NIL;
		}
		else
			CtasSyncSetStreamError(stream_id, edata->message);
		proc_exit(CtasSyncFailed && !others ? 0 : 1);
	}
	PG_END_TRY();

	close_targets(stream_jobs);

	/*
	 * Jobs held by their catalogs, or a stream that yielded to another:
	 * the stream goes on in a later worker, which keeps the jobs' status
	 * entries (sync/status.c) only after an exit that is not 0.
	 */
	proc_exit(held_jobs != NIL || stream_yielded ? 1 : 0);
}
