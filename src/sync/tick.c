/*-------------------------------------------------------------------------
 *
 * tick.c
 *		  The resolver's side of continuous sync (CtasSyncTick): it starts
 *		  the sync worker of every stream that has a job to run (worker.c)
 *		  and drops the replication slot and the publication of every
 *		  stream whose jobs have all stopped or failed.
 *
 * The resolver of a database calls CtasSyncTick about every second, and at
 * once when a transaction that created a sync commits
 * (CtasResolverNudgeAtCommit).  A worker that ended is started again, but
 * not sooner than CTAS_SYNC_RESTART_SECS after its last start, so that an
 * error that ends it costs one attempt every few seconds.  Only slots and
 * publications that a job's row names are ever touched.
 *
 * The pool: at most ctas_fed.max_sync_workers sync workers run in the
 * cluster, whatever the number of databases and streams.  Each worker holds
 * a slot of the pool, a cluster-wide advisory lock, for its life
 * (CtasSyncPoolTake, sync/syncs.c); a resolver starts a worker only while a
 * slot is free.  When none is, the stream waits: its jobs say so in their
 * error, and the resolver holds the waiters' lock in share mode
 * (CtasSyncPoolWait), which a running worker sees at the end of each time
 * slice (CTAS_SYNC_SLICE_MS) and then yields: it ends, its stream's
 * position safe in the slot and the remotes, and the resolver of its stream
 * lets the waiting streams take the slot first, waiting in its turn.  So
 * every stream progresses, a slice at a time, however many there are.
 * XXX: which waiting resolver takes a freed slot is a race between their
 * rounds, not a queue; a lowered max_sync_workers takes effect as workers
 * end.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/tick.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_publication.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "replication/slot.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "sync/sync_int.h"
#include "workers/workers.h"

/* the sync workers this resolver started, one per stream */
typedef struct SyncWorkerEntry
{
	int64		id;				/* stream_id */
	BackgroundWorkerHandle *handle;
	TimestampTz started;
	bool		waiting;		/* for a slot of the pool */
} SyncWorkerEntry;

static List *sync_workers = NIL;

/*
 * start_worker
 *		Register the sync worker of stream id in this database; false when
 *		no background worker slot is free (tried again later).
 */
static bool
start_worker(int64 id, BackgroundWorkerHandle **handle)
{
	BackgroundWorker worker;

	CtasBackgroundWorkerInit(&worker, "ctas_fed_sync_main", "ctas_fed sync",
							 true, BgWorkerStart_RecoveryFinished,
							 BGW_NEVER_RESTART);
	snprintf(worker.bgw_name, BGW_MAXLEN, "ctas_fed sync " INT64_FORMAT, id);
	worker.bgw_main_arg = Int64GetDatum(id);
	memcpy(worker.bgw_extra, &MyDatabaseId, sizeof(Oid));
	worker.bgw_notify_pid = MyProcPid;
	return RegisterDynamicBackgroundWorker(&worker, handle);
}

/*
 * others_wait
 *		Whether a stream of this database other than entry's waits for a
 *		slot of the pool (CtasSyncPoolWaited sees those of the other
 *		databases only: this process's own lock does not conflict with
 *		itself).
 */
static bool
others_wait(SyncWorkerEntry *entry)
{
	ListCell   *lc;

	foreach(lc, sync_workers)
	{
		SyncWorkerEntry *e = lfirst(lc);

		if (e != entry && e->waiting)
			return true;
	}
	return false;
}

/*
 * stopped_event
 *		The webhook event of a stopped job, from row i of the resolver's
 *		scan of ctas_fed.syncs (sync_id, state, slot_name, publication,
 *		server, owner, job_id, remote_schema, remote_table, created_at).
 */
static void
stopped_event(uint64 i)
{
	Oid			serverid = DatumGetObjectId(CtasSyncSpiDatum(i, 5));
	Oid			owner = DatumGetObjectId(CtasSyncSpiDatum(i, 6));
	CtasCatalog *catalog;

	if (GetForeignServerExtended(serverid, FSV_MISSING_OK) == NULL)
		return;
	catalog = CtasGetCatalog(serverid, owner, false, false);
	CtasSyncQueueEvent(DatumGetInt64(CtasSyncSpiDatum(i, 7)), catalog, CtasSyncSpiText(i, 8),
				CtasSyncSpiText(i, 9), CtasSyncStateName(CTAS_SYNC_STOPPED), 0, NULL,
				DatumGetTimestampTz(CtasSyncSpiDatum(i, 10)));
}

/*
 * CtasSyncTick
 *		Called by the resolver of the database about every second, outside
 *		a transaction: start a worker for each stream that has a job that
 *		should run and no worker (not sooner than CTAS_SYNC_RESTART_SECS after
 *		the last start), and drop the slot and the publication of each
 *		stream whose jobs are all stopped or failed, once no process uses
 *		the slot.  Only slots and publications that a job's row names are
 *		touched.  Can ERROR.
 */
void
CtasSyncTick(void)
{
	uint64		i;
	uint64		n;
	MemoryContext oldcxt;
	List	   *drop_publication = NIL;
	List	   *no_worker = NIL;
	List	   *waiting = NIL;
	int			started_now = 0;	/* workers started by this round */
	bool		started_waiter = false; /* one of them for a waiting stream */
	ListCell   *lc;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	n = CtasSyncListForTick();

	for (i = 0; i < n; i++)
	{
		int64		id = DatumGetInt64(CtasSyncSpiDatum(i, 1));
		CtasSyncState state = CtasSyncStateFromName(CtasSyncSpiText(i, 2));
		char	   *slot_name = CtasSyncSpiText(i, 3);
		char	   *publication = CtasSyncSpiText(i, 4);
		int64		stream_id = DatumGetInt64(CtasSyncSpiDatum(i, 11));
		bool		stream_runs = DatumGetBool(CtasSyncSpiDatum(i, 12));

		if (CtasSyncStateRuns(state))
		{
			SyncWorkerEntry *entry = NULL;
			ListCell   *lc;
			pid_t		pid;
			bool		started;

			/* the stream's worker; its other jobs may have started it */
			foreach(lc, sync_workers)
			{
				if (((SyncWorkerEntry *) lfirst(lc))->id == stream_id)
					entry = lfirst(lc);
			}
			if (entry != NULL && entry->handle != NULL &&
				GetBackgroundWorkerPid(entry->handle, &pid) != BGWH_STOPPED)
				continue;
			if (entry != NULL && !entry->waiting &&
				!TimestampDifferenceExceeds(entry->started,
											GetCurrentTimestamp(),
											CTAS_SYNC_RESTART_SECS * 1000))
				continue;
			oldcxt = MemoryContextSwitchTo(TopMemoryContext);
			if (entry == NULL)
			{
				entry = palloc0(sizeof(SyncWorkerEntry));
				entry->id = stream_id;
				sync_workers = lappend(sync_workers, entry);
			}
			MemoryContextSwitchTo(oldcxt);

			/*
			 * The pool: a worker only while a slot is free, and a stream
			 * whose worker ended (it may have yielded its slot) lets the
			 * streams that wait go first, waiting in its turn.  The
			 * workers started by this round have not taken their slots
			 * yet: they count as taken, and a waiting stream started by
			 * it still goes first (else the stream that yielded would be
			 * started beside it, and win the slot, round after round).
			 */
			if (CtasSyncPoolFreeSlots() <= started_now ||
				(!entry->waiting &&
				 (others_wait(entry) || started_waiter || CtasSyncPoolWaited())))
			{
				if (!entry->waiting)
					ereport(DEBUG1,
							(errmsg_internal("ctas_fed: stream " INT64_FORMAT " waits for a sync worker",
											 stream_id)));
				entry->waiting = true;
				if (entry->handle != NULL)
					pfree(entry->handle);
				entry->handle = NULL;
				waiting = lappend(waiting, psprintf(INT64_FORMAT, stream_id));
				continue;
			}
			if (entry->waiting)
				started_waiter = true;
			entry->waiting = false;
			oldcxt = MemoryContextSwitchTo(TopMemoryContext);
			if (entry->handle != NULL)
				pfree(entry->handle);
			entry->handle = NULL;
			entry->started = GetCurrentTimestamp();
			started = start_worker(stream_id, &entry->handle);
			if (!started)
				entry->handle = NULL;
			MemoryContextSwitchTo(oldcxt);
			if (!started)
				no_worker = lappend(no_worker,
									psprintf(INT64_FORMAT, stream_id));
			else
				started_now++;
		}
		else
		{
			ReplicationSlot *s;
			bool		idle = false;
			uint64		j;

			CtasSyncStatusForget(id);
			/* the slot and the publication go with the stream's last job */
			if (stream_runs)
				continue;
			/* an ended stream waits for nothing */
			foreach(lc, sync_workers)
			{
				if (((SyncWorkerEntry *) lfirst(lc))->id == stream_id)
					((SyncWorkerEntry *) lfirst(lc))->waiting = false;
			}

			LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
			s = SearchNamedReplicationSlot(slot_name, false);
			if (s != NULL)
			{
				SpinLockAcquire(&s->mutex);
				idle = s->active_pid == 0 &&
					s->data.database == MyDatabaseId;
				SpinLockRelease(&s->mutex);
			}
			LWLockRelease(ReplicationSlotControlLock);
			if (idle)
			{
				ReplicationSlotDrop(slot_name, true);
				ereport(LOG,
						(errmsg("ctas_fed: dropped replication slot \"%s\" of %s sync " INT64_FORMAT,
								slot_name, CtasSyncStateName(state), id)));
				/*
				 * The worker reported the failures, and the stops of jobs
				 * whose stream went on; the last stop is told here (one or
				 * more jobs, stopped in one transaction).
				 */
				for (j = 0; j < n; j++)
				{
					if (DatumGetInt64(CtasSyncSpiDatum(j, 11)) == stream_id &&
						DatumGetBool(CtasSyncSpiDatum(j, 13)))
						stopped_event(j);
				}
			}
			/*
			 * the publication of a stream that ended on a failure, or on
			 * stops of its last jobs in concurrent transactions, each of
			 * which left it to the other (stop_sync drops it otherwise)
			 */
			if (OidIsValid(get_publication_oid(publication, true)))
				drop_publication = lappend(drop_publication, publication);
		}
	}
	/* tell, in the job, why it does not run */
	foreach(lc, no_worker)
		CtasSyncRecordStreamNote(pg_strtoint64(lfirst(lc)),
								 "no background worker is free for the sync worker: increase max_worker_processes",
								 true);
	/* tell, in the job, that it waits for the pool */
	foreach(lc, waiting)
		CtasSyncRecordStreamNote(pg_strtoint64(lfirst(lc)),
								 psprintf("waiting for a sync worker: all %d of ctas_fed.max_sync_workers are busy",
										   CtasMaxSyncWorkers),
								 false);
	CtasSyncPoolWait(waiting != NIL);
	foreach(lc, drop_publication)
	{
		if (SPI_execute(psprintf("DROP PUBLICATION IF EXISTS %s",
								 quote_identifier(lfirst(lc))),
						false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not drop publication \"%s\"",
				 (char *) lfirst(lc));
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}
