/*-------------------------------------------------------------------------
 *
 * join.c
 *		  How the jobs of a continuous sync enter, leave and come back to
 *		  their stream: the copy of a new stream, a job joining a stream
 *		  that streams, a stopped job leaving, a job held while its catalog
 *		  is down.  The sync worker (sync/worker.c) calls these between
 *		  and around the rounds of its streaming loop.
 *
 * The copy of a new stream, as PostgreSQL's own tablesync: create the
 * logical replication slot (pgoutput) in a REPEATABLE READ read-only
 * transaction, exactly as the walsender's CREATE_REPLICATION_SLOT ...
 * (SNAPSHOT 'use') does (CtasSyncSlotSnapshot): the snapshot built at the
 * slot's consistent point becomes the transaction's snapshot, so the copy sees
 * every transaction that committed before that point and none after it;
 * the decoding stream begins there.
 *
 * Joining.  A sync's statement adds its table to the stream's publication
 * and records the job "copying", in its transaction, which commits at T.
 * At the start of a round, before the round advances the slot, the worker
 * sees the job (CtasSyncLeaveStopped), holds it out of the stream as
 * joining, and holds the stream's slot at the position C0 it is confirmed
 * at then (CtasSyncHeldPosition), until the job joins, stops or fails.
 * After the round it starts the job's copy worker (sync/joincopy.c, which
 * tells the handshake) and goes on applying the others.  The copy worker
 * (CtasSyncJoinCopy) makes a temporary slot, with the same code
 * (CtasSyncSlotSnapshot), which gives its consistent point X and the
 * snapshot of X, under which the table is copied in a remote transaction of
 * the job's own that stores X as the job's applied lsn; the temporary slot
 * is dropped once the snapshot is taken (the transaction's xmin keeps what
 * the snapshot sees); then it records the job "streaming" with X.  The
 * stream's worker takes the job in at its next round (CtasSyncJoinCopied),
 * as a held job comes back: the next peek opens its target, which reads X,
 * and the job streams with the others, skipping the source transactions
 * that commit before X.  Nothing is lost and nothing applied twice:
 *	- the copy holds exactly the transactions that commit before X, as the
 *	  first copy does; the job skips exactly those (a commit before X);
 *	- the stream's slot is confirmed at C <= C0 <= X when the temporary slot
 *	  is made, and stays at or before C0 until the job is taken in: C0 was
 *	  read before the copy worker started, from a slot confirmed no further
 *	  than the WAL written then, and X is at or after the end of the WAL
 *	  when the temporary slot is made; the slot is not advanced past C0
 *	  meanwhile, whatever the other jobs apply (the hold), and a worker of
 *	  the stream that starts while a copy worker of an earlier one still
 *	  runs holds it from its first round, before any advance (the job is
 *	  "copying" in its row: the earlier worker held the slot until it
 *	  ended).  So the peeks after the job is taken in, read from C, return
 *	  every transaction that commits at or after X, and give it the job;
 *	  the other jobs skip what they applied already, each below its own
 *	  applied lsn, as after a held job's return;
 *	- such a transaction has all its changes after T, so pgoutput publishes
 *	  them for the job's table: the temporary slot is consistent only once
 *	  every transaction that had an xid when it was made has ended, so one
 *	  that commits at or after X had none then, and wrote nothing before
 *	  that, after T;
 *	- one copy at a time: whoever copies a job holds its copy lock
 *	  (CtasSyncLockCopy), so a copy worker left running by an earlier worker
 *	  of the stream is never doubled, and a copy that committed X but not
 *	  yet "streaming" is copied again from scratch (CtasSyncCopyStart
 *	  empties the remote table in the copy's remote transaction).
 * A crash, an error or a SIGTERM during the join copy rolls its remote
 * transaction back (the ephemeral temporary slot goes with its process, or
 * with the crash; a leftover is dropped by the next copy); the job is still
 * "copying", the slot still held, and the stream's worker starts its copy
 * again CTAS_SYNC_RESTART_SECS later; after a crash the next stream worker
 * does.  When no background worker slot is free, the stream's worker
 * copies the job itself between two rounds (the same CtasSyncJoinCopy, the
 * fallback of sync/joincopy.c); the others then wait for that copy.

 * Held jobs.  An error of one job's catalog that does not fail it for
 * good is caught (CtasSyncCatchJobError): the job, and when the catalog is
 * unreachable the stream's other jobs into it, is held out of the stream
 * (CtasSyncHeldJobs) with its error recorded, until CTAS_SYNC_RESTART_SECS
 * later (CtasSyncRejoinHeld); meanwhile the slot is advanced no further than
 * the oldest applied lsn of a held job (CtasSyncHeldPosition).  An error
 * while a peek is applied (CtasSyncInPeek) closes the targets of every job
 * of the stream: what they did not commit of the peek rolls back, and each
 * applies it again from its own applied lsn.
 *
 * Failed jobs.  An error that fails one job for good (SYNC_FAIL) is caught
 * there too, in the worker's process (fail_job): the local transaction is
 * aborted, whatever it was doing (the owner's code, SPI, a decoding call,
 * a remote call), which releases what it held; the targets are closed as
 * for a held job, so the round is read again by the others; the job is
 * recorded failed and its table leaves the publication.  No subtransaction
 * is needed: a round keeps no local state worth keeping past an error, and
 * the jobs' positions are their remote applied lsns.  An error of the
 * stream (its slot, out of memory, a resync of the stream) still ends the
 * worker; FATAL never reaches the catch.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/join.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xlogutils.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "replication/logical.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/rls.h"

#include "guc.h"
#include "sync/sync_int.h"

/* a peek is being applied: the jobs' remote transactions may be open */
bool		CtasSyncInPeek = false;

/* HeldJob (sync/sync_int.h), in CtasSyncJobCxt */
List	   *CtasSyncHeldJobs = NIL;

/*
 * CtasSyncCheckSource
 *		The source table still exists, the owner may still read it, and
 *		(with columns) the columns the query reads have the names and types
 *		they had.  While streaming, the columns are checked on each Relation
 *		message instead, so that the changes made before a DDL are applied
 *		before the job fails.  A failure is permanent.
 */
void
CtasSyncCheckSource(SyncJob *job, bool columns)
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
 *		of the slot, see CtasSyncDoCopy), into its remote table in one remote
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
	/* the columns of a retype the copy follows (sync/resync.c) */
	CtasSyncReshapeForCopy(job, consistent);
	CtasSyncCheckSource(job, true);
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
	/*
	 * every partition, as the root's rows (sync/partition.c); read in
	 * parallel only when nothing is evaluated here: while the readers run
	 * this process is in parallel mode, where PostgreSQL 15 refuses what a
	 * function marked PARALLEL SAFE may still do (a PL/pgSQL EXCEPTION block
	 * starts a subtransaction), and the copy would fail at every try
	 */
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		CtasSyncPartitionCopy(job, rel, plain != NULL, copy_row, &copy);
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
	/* whichever process copies, in the job's entry (sync/status.c) */
	CtasSyncStatusCopied(job->id, rows);
	CtasSyncStatusUse(job->id);
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
 * CtasSyncDoCopy
 *		The copying phase of a stream: a new slot, then the copy of every
 *		job's table under its snapshot (copy_job), each in a remote
 *		transaction of its job.  Returns the slot's consistent point.
 */
XLogRecPtr
CtasSyncDoCopy(List *jobs)
{
	SyncJob    *first = linitial(jobs);
	XLogRecPtr	consistent;
	ListCell   *lc;
	TimestampTz started = GetCurrentTimestamp();

	foreach(lc, jobs)
		CtasSyncJobEvent(lfirst(lc), CTAS_SYNC_COPYING, NULL);
	/* a copy worker of an earlier stream worker may still copy one */
	foreach(lc, jobs)
		(void) CtasSyncLockCopy(((SyncJob *) lfirst(lc))->id, true);

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
	foreach(lc, jobs)
	{
		/* the new shape stored before another copier may take the job */
		CtasSyncReshapeSave(lfirst(lc));
		CtasSyncUnlockCopy(((SyncJob *) lfirst(lc))->id);
	}

	return consistent;
}

/*
 * find_held
 *		The held entry of job id, or NULL.
 */
static HeldJob *
find_held(int64 id)
{
	ListCell   *lc;

	foreach(lc, CtasSyncHeldJobs)
	{
		HeldJob    *h = lfirst(lc);

		if (h->id == id)
			return h;
	}
	return NULL;
}

/*
 * CtasSyncLeaveStopped
 *		Take out of *jobs the jobs that no longer stream (stopped by
 *		stop_sync or DROP TABLE, marked for a resync, or gone), in a
 *		transaction connected to SPI, closing their targets.  A job of the
 *		stream "copying" (a sync that joined it, or a resync) that is not
 *		held yet is held, joining, the slot held at its confirmed position
 *		from now on (CtasSyncHeldPosition): before this round advances it,
 *		so before any copy of the job can make its temporary slot (its copy
 *		worker is started after the round, CtasSyncStartCopies; one started
 *		by an earlier worker of the stream found the slot held by that
 *		worker, which never advanced it since).  A joining job that no
 *		longer runs is no longer held; one whose copy is done ("streaming")
 *		stays held through this round, and its sync_id is returned (a List
 *		of int64 *, palloc'd) for CtasSyncJoinCopied, which takes it in
 *		after the round and only then lets the slot go.  The stop of a job whose stream
 *		goes on is told here; that of the stream's last jobs by the
 *		resolver, when it drops the slot (CtasSyncTick).
 */
List *
CtasSyncLeaveStopped(int64 stream_id, const char *slot_name, List **jobs)
{
	uint64		n;
	List	   *left = NIL;
	List	   *kept = NIL;
	List	   *still = NIL;
	List	   *joined = NIL;
	ListCell   *lc;
	MemoryContext oldcxt;
	uint64		i;

	n = CtasSyncListRunningOfStream(stream_id);
	oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);
	foreach(lc, *jobs)
	{
		SyncJob    *job = lfirst(lc);
		bool		streaming = false;

		for (i = 0; i < n; i++)
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

	/* joining jobs: gone, copied, or still copying */
	foreach(lc, CtasSyncHeldJobs)
	{
		HeldJob    *h = lfirst(lc);
		bool		found = false;
		bool		copying = false;

		for (i = 0; h->copying && i < n; i++)
		{
			if (DatumGetInt64(CtasSyncSpiDatum(i, 1)) == h->id)
			{
				found = true;
				copying = DatumGetBool(CtasSyncSpiDatum(i, 2));
			}
		}
		if (!h->copying || copying)
			still = lappend(still, h);
		else if (found)
		{
			int64	   *p = palloc(sizeof(int64));

			/*
			 * copied: still held through this round's advance, until
			 * CtasSyncJoinCopied takes it in after the round
			 */
			*p = h->id;
			joined = lappend(joined, p);
			still = lappend(still, h);
		}
	}
	CtasSyncHeldJobs = still;

	/* newly copying: held, joining, the slot held where it is now */
	for (i = 0; i < n; i++)
	{
		int64		id = DatumGetInt64(CtasSyncSpiDatum(i, 1));
		HeldJob    *h;

		if (!DatumGetBool(CtasSyncSpiDatum(i, 2)) || find_held(id) != NULL)
			continue;
		h = palloc0(sizeof(HeldJob));
		h->id = id;
		h->copying = true;
		h->hold_at = CtasSyncSlotConfirmed(slot_name);
		h->retry_at = 0;
		CtasSyncHeldJobs = lappend(CtasSyncHeldJobs, h);
	}
	MemoryContextSwitchTo(oldcxt);

	foreach(lc, left)
	{
		SyncJob    *job = lfirst(lc);
		HeldJob    *h = find_held(job->id);

		if (job->open)
		{
			job->apply->close(&job->target);
			job->open = false;
		}
		if (h != NULL && h->copying)
			continue;			/* a resync: copied again (joincopy.c) */
		ereport(LOG,
				(errmsg("ctas_fed sync " INT64_FORMAT ": stopped, leaving stream " INT64_FORMAT,
						job->id, stream_id)));
		if (kept != NIL)
		{
			CtasSyncJobEvent(job, CTAS_SYNC_STOPPED, NULL);
			CtasSyncStatusRelease(job->id);
		}
	}
	*jobs = kept;
	return joined;
}

/*
 * CtasSyncCopiesPending
 *		Whether a job joins the stream (its copy running or to run).
 */
bool
CtasSyncCopiesPending(void)
{
	ListCell   *lc;

	foreach(lc, CtasSyncHeldJobs)
	{
		if (((HeldJob *) lfirst(lc))->copying)
			return true;
	}
	return false;
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
	HeldJob    *h = copying ? find_held(job->id) : NULL;

	close_job(job);
	/* a join copy in this process (joincopy.c): its entry, held already */
	if (h == NULL)
	{
		h = palloc0(sizeof(HeldJob));
		h->id = job->id;
		h->job = job;
		h->copying = copying;
		CtasSyncHeldJobs = lappend(CtasSyncHeldJobs, h);
	}
	h->retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											  CTAS_SYNC_RESTART_SECS * 1000);
	MemoryContextSwitchTo(oldcxt);
	ereport(LOG,
			(errmsg("ctas_fed sync " INT64_FORMAT ": catalog \"%s\" failed, retrying in %d s while stream " INT64_FORMAT " goes on",
					job->id, job->target.catalog->name,
					CTAS_SYNC_RESTART_SECS, job->stream_id),
			 errdetail_internal("%s", error)));
	CtasSyncSetError(job->id, error);
}

/*
 * join_slot_name
 *		The name of the temporary slot of job id's join copy (CtasSyncJoinCopy).
 */
static char *
join_slot_name(int64 id)
{
	return psprintf("%sj%u_" INT64_FORMAT, CTAS_SYNC_PREFIX, MyDatabaseId, id);
}

/*
 * drop_join_slot
 *		Drop the temporary slot of job id's join copy, left by a copy that
 *		an error or a crash interrupted, if there is one.  Outside a
 *		transaction.  Can ERROR.
 */
static void
drop_join_slot(int64 id)
{
	char	   *name = join_slot_name(id);

	if (SearchNamedReplicationSlot(name, true) != NULL)
	{
		StartTransactionCommand();
		ReplicationSlotDrop(name, true);
		CommitTransactionCommand();
	}
	pfree(name);
}

/*
 * fail_job
 *		The error in flight fails job id for good (SYNC_FAIL): it leaves the
 *		stream, which goes on without it, in the same process.  The local
 *		transaction is aborted (whatever the error interrupted: the owner's
 *		code, SPI, a decoding call); the targets of every job of the stream
 *		are closed when a peek was being applied (what they did not commit of
 *		it rolls back, and each applies it again from its own applied lsn in
 *		the next round, as after a held job's error), else the failed job's
 *		alone.  Then, each in a transaction of its own, as the worker's exit
 *		did before: the job is marked "failed" with the error and its table
 *		taken out of the publication (CtasSyncFailJob), the schema change it
 *		failed at recorded, the webhook told.  job is NULL for a job that
 *		failed while it was being loaded (CtasSyncLoadingId).  The slot is
 *		then advanced by the others alone: the failed job is neither in
 *		*jobs nor held.  Can ERROR.
 */
static void
fail_job(List **jobs, SyncJob *job, int64 id, ErrorData *edata)
{
	List	   *kept = NIL;
	List	   *still = NIL;
	ListCell   *lc;

	foreach(lc, *jobs)
	{
		SyncJob    *other = lfirst(lc);

		if (CtasSyncInPeek || other == job || other->id == id)
			close_job(other);
		if (other != job && other->id != id)
			kept = lappend(kept, other);
	}
	*jobs = kept;
	CtasSyncInPeek = false;
	if (job != NULL)
		close_job(job);
	/* loaded by CtasSyncRejoinHeld: no longer held */
	foreach(lc, CtasSyncHeldJobs)
	{
		HeldJob    *h = lfirst(lc);

		if (h->id != id)
			still = lappend(still, h);
	}
	CtasSyncHeldJobs = still;
	/* a join copy that failed: its temporary slot holds no WAL */
	drop_join_slot(id);

	ereport(LOG,
			(errmsg("ctas_fed sync " INT64_FORMAT ": failed, leaving its stream, which goes on",
					id),
			 errdetail_internal("%s", edata->message)));
	CtasSyncFailJob(id, edata->message);
	if (job != NULL)
	{
		/* a schema change it could not follow: recorded (sync/follow.c) */
		if (job->schema_failed_at != InvalidXLogRecPtr)
			CtasSyncRecordSchemaFailure(job, edata->message);
		CtasSyncJobEvent(job, CTAS_SYNC_FAILED, edata->message);
	}
	CtasSyncStatusRelease(id);
}

/*
 * CtasSyncCatchJobError
 *		In the PG_CATCH of the streaming loop (do_stream).  When the error in
 *		flight fails one job of the stream for good (SYNC_FAIL: a schema
 *		change it cannot follow, its source dropped, a right its owner lost),
 *		that job leaves the stream (fail_job) and true is returned.  When it
 *		was raised by a target call of one job (CtasSyncInTarget), it is that
 *		job's catalog's: abort
 *		the local transaction, close the targets of the stream's jobs (the
 *		remote transactions they did not commit roll back; each applies
 *		again from its own applied lsn), hold the job out of the stream
 *		(hold_job), and with it, when the catalog is unreachable (SQLSTATE
 *		class 08), the stream's other jobs into that catalog, and return
 *		true.  Otherwise (an error of the stream: its slot, out of memory, a
 *		resync of the stream asked for) return false, with the error
 *		untouched: the caller re-throws it, and the worker ends as before.
 *		Can ERROR.
 */
bool
CtasSyncCatchJobError(List **jobs)
{
	SyncJob    *job = CtasSyncInTarget;
	ErrorData  *edata;
	List	   *kept = NIL;
	List	   *hold = NIL;
	bool		unreachable;
	ListCell   *lc;

	if (CtasSyncFailed)
	{
		SyncJob    *failed = CtasSyncCurrentJob;
		int64		id = failed != NULL ? failed->id : CtasSyncLoadingId;
		MemoryContext oldcxt = CurrentMemoryContext;

		/* the failed job: one of the stream, joining it, or being loaded */
		if (failed != NULL && !list_member_ptr(*jobs, failed) &&
			failed->state != CTAS_SYNC_COPYING)
			return false;
		if (id == 0)
			return false;
		MemoryContextSwitchTo(CtasSyncJobCxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode == ERRCODE_OUT_OF_MEMORY)
		{
			FreeErrorData(edata);
			MemoryContextSwitchTo(oldcxt);
			return false;
		}
		HOLD_INTERRUPTS();
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
		RESUME_INTERRUPTS();
		CtasSyncFailed = false;
		CtasSyncResyncWanted = false;
		CtasSyncInTarget = NULL;
		CtasSyncCurrentJob = NULL;
		CtasSyncLoadingId = 0;
		fail_job(jobs, failed, id, edata);
		FreeErrorData(edata);
		return true;
	}
	if (job == NULL)
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
		if (CtasSyncInPeek || other == job)
			close_job(other);
		if (other == job ||
			(unreachable &&
			 other->target.catalog->serverid == job->target.catalog->serverid))
			hold = lappend(hold, other);
		else
			kept = lappend(kept, other);
	}
	*jobs = kept;
	CtasSyncInPeek = false;
	if (!list_member_ptr(hold, job))
		hold = lappend(hold, job);	/* a job being joined */
	foreach(lc, hold)
	{
		SyncJob    *h = lfirst(lc);

		hold_job(h, edata->message, h->state == CTAS_SYNC_COPYING);
	}
	FreeErrorData(edata);
	return true;
}

/*
 * CtasSyncRejoinHeld
 *		The held jobs whose retry is due go back: a streaming one into
 *		*jobs, read again from its row (its catalog's options may have
 *		changed; stream_round opens its target, and the job then reads from
 *		its own applied lsn), a copying one to the joins of the next round.
 *		Returns whether any came back.  Can ERROR.
 */
bool
CtasSyncRejoinHeld(List **jobs)
{
	TimestampTz now = GetCurrentTimestamp();
	List	   *still = NIL;
	bool		any = false;
	ListCell   *lc;
	MemoryContext oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);

	foreach(lc, CtasSyncHeldJobs)
	{
		HeldJob    *h = lfirst(lc);

		/* joining: started again by CtasSyncStartCopies */
		if (h->retry_at > now || h->copying)
		{
			still = lappend(still, h);
			continue;
		}
		{
			SyncJob    *job;

			/* read again: its catalog's options may have changed */
			MemoryContextSwitchTo(oldcxt);
			SetCurrentStatementStartTimestamp();
			StartTransactionCommand();
			SPI_connect();
			PushActiveSnapshot(GetTransactionSnapshot());
			CtasSyncCurrentJob = NULL;
			job = CtasSyncLoadJob(h->id);
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
	CtasSyncHeldJobs = still;
	MemoryContextSwitchTo(oldcxt);
	return any;
}

/*
 * CtasSyncHeldPosition
 *		The position the slot may be advanced to at most while jobs are
 *		held: the oldest applied lsn of a held streaming job (its
 *		transactions from there must still be decoded when it comes back),
 *		or confirmed, the slot's, for one whose applied lsn this worker
 *		never read (it is at or after the slot's: the slot is never
 *		advanced past a job's applied lsn).  InvalidXLogRecPtr when none
 *		is held.
 */
XLogRecPtr
CtasSyncHeldPosition(XLogRecPtr confirmed)
{
	XLogRecPtr	pos = InvalidXLogRecPtr;
	ListCell   *lc;

	foreach(lc, CtasSyncHeldJobs)
	{
		HeldJob    *h = lfirst(lc);
		XLogRecPtr	applied;

		/* joining: where the slot was when the stream saw it copying */
		if (h->copying)
			applied = h->hold_at;
		else
			applied = h->job->applied;
		if (applied == InvalidXLogRecPtr || applied < confirmed)
			applied = confirmed;
		if (pos == InvalidXLogRecPtr || applied < pos)
			pos = applied;
	}
	return pos;
}

/*
 * CtasSyncJoinCopy
 *		The copy of a job that joined a running stream (a new sync, or a
 *		resync of one job), as PostgreSQL's tablesync joins an apply
 *		worker: a temporary slot gives the consistent point X and its
 *		snapshot, under which the job's table is copied in a remote
 *		transaction of its own that stores X as its applied lsn; the job is
 *		then "streaming", and the stream takes it in (CtasSyncJoinCopied)
 *		and applies to it every source transaction that commits at or after
 *		X, skipping those before (see the head of this file).  Outside a
 *		transaction, in the job's copy worker (sync/joincopy.c) or, when
 *		none can be started, in the stream's worker between two rounds;
 *		either way the stream's slot is held meanwhile (CtasSyncLeaveStopped)
 *		and the caller holds the job's copy lock (CtasSyncLockCopy).  Can
 *		ERROR: the remote transaction rolls back, the job stays "copying".
 */
void
CtasSyncJoinCopy(SyncJob *job)
{
	char	   *name = join_slot_name(job->id);
	TimestampTz started = GetCurrentTimestamp();
	XLogRecPtr	consistent;
	XLogRecPtr	confirmed;

	CtasSyncJobEvent(job, CTAS_SYNC_COPYING, NULL);

	/* the temporary slot of a copy that a crash interrupted */
	drop_join_slot(job->id);

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
	CtasSyncReshapeSave(job);

	/* tests: a crash with the copy committed, the job still "copying" */
	CtasFaultPointWait("sync_join_before_streaming");
	CtasSyncSetState(job->id, CTAS_SYNC_STREAMING, NULL, consistent);
	job->state = CTAS_SYNC_STREAMING;
	CtasSyncJobEvent(job, CTAS_SYNC_STREAMING, NULL);
	ereport(LOG,
			(errmsg("ctas_fed sync " INT64_FORMAT ": joined stream " INT64_FORMAT " at %X/%X",
					job->id, job->stream_id, LSN_FORMAT_ARGS(consistent))));
}
