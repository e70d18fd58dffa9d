/*-------------------------------------------------------------------------
 *
 * resync.c
 *		  Resync of a continuous sync: the remote table rebuilt from a new
 *		  snapshot, and the stream going on from there in the same job
 *		  (DESIGN.md section 1.7, "Verify and resync").
 *
 * A resync is the initial copy again.  ctas_fed.resync() marks its job
 * "copying"; the stream's worker leaves it at its next round (it no longer
 * streams) and copies it again as it copies a sync that joins the stream,
 * under a temporary slot's snapshot, then streams it from that slot's
 * consistent point (sync/join.c, CtasSyncJoinCopy, in a copy worker): no
 * gap and no duplicate, by the same argument as a join's.  The other jobs of the stream go on.  A
 * lost slot (below) copies every job of the stream, under a new slot.
 *
 * What differs from the first copy is that readers already read the
 * remote table: the copy must leave it readable until the new rows replace
 * the old (CtasSyncCopyStart, CtasSyncCopyEnd, and the target's optional
 * rebuild and rebuilt, target.h).
 *
 * A resync starts
 *
 *	by ctas_fed.resync(target), run by the job's owner (or a member of
 *		that role, or a superuser), as ctas_fed.stop_sync();
 *	by itself (CtasSyncResyncIfLost), when a worker starts on a stream
 *		whose jobs stream but whose slot is gone (dropped, or not in a
 *		restored backup) or was invalidated (max_slot_wal_keep_size): the
 *		WAL it needed is gone, so nothing but a new copy can tell what the
 *		remote misses.  The worker sends a webhook event "resyncing"
 *		that names the reason.
 *		A slot invalidated while the worker streams makes its peek fail;
 *		the worker ends on that error and the next one finds the slot
 *		lost.
 *
 * Each resync is counted in the job's status entry (sync/status.c), shown
 * as the metric ctas_fed_sync_resyncs_total.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/resync.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "replication/slot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "sync/sync_int.h"
#include "targets.h"

/*
 * slot_lost
 *		Why the slot slot_name can no longer stream, or NULL when it can:
 *		gone, or invalidated (pg_replication_slots.wal_status 'lost').
 */
static char *
slot_lost(const char *slot_name)
{
	ReplicationSlot *s;
	XLogRecPtr	restart = InvalidXLogRecPtr;
	XLogRecPtr	invalidated = InvalidXLogRecPtr;

	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	s = SearchNamedReplicationSlot(slot_name, false);
	if (s != NULL)
	{
		SpinLockAcquire(&s->mutex);
		restart = s->data.restart_lsn;
		invalidated = s->data.invalidated_at;
		SpinLockRelease(&s->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);

	if (s == NULL)
		return psprintf("replication slot \"%s\" is missing", slot_name);
	if (XLogRecPtrIsInvalid(restart) && !XLogRecPtrIsInvalid(invalidated))
		return psprintf("replication slot \"%s\" was invalidated (max_slot_wal_keep_size)",
						slot_name);
	if (!XLogRecPtrIsInvalid(restart) &&
		GetWALAvailability(restart) == WALAVAIL_REMOVED)
		return psprintf("the WAL that replication slot \"%s\" needs was removed",
						slot_name);
	return NULL;
}

/*
 * CtasSyncResyncIfLost
 *		In a sync worker, before it streams the jobs of a stream (a List of
 *		SyncJob, all streaming): when their slot is lost, mark them
 *		"copying" in a transaction of its own, tell it in the log, and
 *		return why (palloc'd), for the webhook event the worker sends: it
 *		then copies them again under a new slot.  NULL when the slot is
 *		sound.  Outside a transaction.  Can ERROR.
 */
char *
CtasSyncResyncIfLost(List *jobs)
{
	SyncJob    *first = linitial(jobs);
	char	   *why = slot_lost(first->slot_name);
	ListCell   *lc;

	if (why == NULL)
		return NULL;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	CtasSyncMarkCopyAgain(first->stream_id, InvalidOid);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();

	foreach(lc, jobs)
	{
		SyncJob    *job = lfirst(lc);

		ereport(LOG,
				(errmsg("ctas_fed sync " INT64_FORMAT ": %s, resyncing the remote table from a new snapshot",
						job->id, why)));
		job->state = CTAS_SYNC_COPYING;
	}
	return why;
}

/*
 * reshape_remote
 *		The changes CtasSyncReshapeForCopy planned for the remote table, in
 *		the copy's remote transaction (a target with transactions), or on
 *		the table that rebuild made (one without), before the rows.  A change
 *		the target cannot make fails the job with its reason.
 */
static void
reshape_remote(SyncJob *job)
{
	char	   *reason;

	if (job->recopy == NULL)
		return;
	if (job->apply->alter == NULL)
		reason = psprintf("catalogs of type \"%s\" do not change the columns of a synced table",
						  CtasCatalogRoutine(job->target.catalog)->type_name);
	else
		reason = job->apply->alter(&job->target, job->recopy, job->nrecopy);
	if (reason != NULL)
		SYNC_FAIL(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				  errmsg_internal("sync " INT64_FORMAT ": %s", job->id, reason),
				  errdetail("The source table changed the type or the values of a column the sync reads; the remote table cannot take the new columns."),
				  errhint("Stop the sync with ctas_fed.stop_sync() and create it again (docs/sync.md, \"Schema changes\")."));
}

/*
 * CtasSyncCopyStart
 *		In copy_job (sync/join.c), after the target's begin: empty the
 *		remote table for the copy, or, when it already holds applied rows
 *		(job->applied, read from the remote), start a rebuild that keeps it
 *		readable until the copy replaces it (target.h), and count the
 *		resync.  The remote table then takes the columns the copy writes
 *		(reshape_remote): before the DELETE of a first copy, after that of
 *		a target with transactions (in the same remote transaction, so that
 *		the retyped column never holds a value the remote cast), and on
 *		the rebuilt table of one without.  Returns whether it rebuilds, for
 *		CtasSyncCopyEnd.
 */
bool
CtasSyncCopyStart(SyncJob *job)
{
	if (job->applied == InvalidXLogRecPtr)
	{
		reshape_remote(job);
		job->apply->truncate(&job->target);
		return false;
	}
	CtasSyncStatusResynced(job->id);
	if (job->apply->rebuild == NULL)
	{
		job->apply->truncate(&job->target);
		reshape_remote(job);
		return false;
	}
	job->apply->rebuild(&job->target);
	reshape_remote(job);
	return true;
}

/*
 * CtasSyncCopyEnd
 *		In copy_job, after the copy's commit: finish the rebuild that
 *		CtasSyncCopyStart began, if it did.
 */
void
CtasSyncCopyEnd(SyncJob *job, bool rebuilding)
{
	if (rebuilding)
		job->apply->rebuilt(&job->target);
}

PG_FUNCTION_INFO_V1(ctas_fed_resync);

/*
 * ctas_fed_resync
 *		ctas_fed.resync(target text): copy the remote table of the running
 *		sync into catalog.schema.table again from a new snapshot, then
 *		stream on, in the same job.  Marks the job "copying" in the
 *		caller's transaction; the worker acts after commit.  Who may
 *		stop the sync may resync it.  ERROR when there is no running sync
 *		into target.
 */
Datum
ctas_fed_resync(PG_FUNCTION_ARGS)
{
	int64		stream_id;
	int64		sync_id;
	CtasSyncState state;

	sync_id = CtasSyncFindRunning(PG_GETARG_TEXT_PP(0), "resync", true,
								  &stream_id, &state);
	CtasSyncMarkResync(sync_id);
	PG_RETURN_VOID();
}
