/*-------------------------------------------------------------------------
 *
 * joincopy.c
 *		  The copy worker of a sync that joins a running stream: a
 *		  short-lived background worker that copies the job's table (the
 *		  join copy of sync/join.c) while the stream's worker goes on
 *		  applying the stream's other jobs, as PostgreSQL's tablesync
 *		  worker copies a table while the apply worker applies.
 *
 * The handshake, as the SUBREL_STATE_* of pg_subscription_rel, recorded in
 * the job's row (ctas_fed.syncs.state, applied_lsn) and its remote
 * progress row, so that it survives any crash:
 *
 *	copying		(INIT, DATASYNC) the sync's statement recorded it.  The
 *				stream's worker sees it at the start of a round, before
 *				that round advances the slot, and holds the slot where it is
 *				(C0) until the job joins, stops or fails
 *				(CtasSyncLeaveStopped, sync/join.c); after the round it
 *				starts the job's copy worker (CtasSyncStartCopies).  The
 *				copy worker makes the temporary slot, whose consistent point
 *				X is at or after C0, copies under its snapshot and commits,
 *				in one remote transaction, the rows and X as the job's
 *				applied lsn.
 *	streaming	(SYNCDONE) the copy worker records it with X, and ends.  The
 *				stream's worker takes the job in at its next round
 *				(CtasSyncJoinCopied) and releases the slot: its peeks,
 *				read from the slot held at C0 <= X, give the job every
 *				transaction that commits at or after X, and the job skips
 *				those before, its applied lsn being X (READY; the catch-up
 *				of PostgreSQL's tablesync, SYNCWAIT and CATCHUP, is not
 *				needed: the stream reads again from C0 for the job).
 *
 * A copy worker that ends with the job still "copying" (an error, SIGTERM,
 * a duplicate that found the job's copy lock taken) is started again by the
 * stream's worker CTAS_SYNC_RESTART_SECS later; its remote transaction
 * rolled back, its temporary slot was ephemeral (and is dropped again by
 * the next copy, drop_join_slot, if a crash left it).  A copy that fails
 * the job for good (SYNC_FAIL) marks it failed there (CtasSyncFailJob).
 * Whoever copies a job holds its copy lock (CtasSyncLockCopy): a copy
 * worker started by an earlier worker of the stream, which goes on after
 * that worker ended, is never doubled by the next one.
 *
 * The bound: at most CTAS_SYNC_COPY_WORKERS copy workers per stream run at
 * once; more joining jobs wait for one of them to end.  They are not taken
 * from the pool of ctas_fed.max_sync_workers (which bounds the long-lived
 * stream workers), as PostgreSQL's max_sync_workers_per_subscription is
 * apart from max_logical_replication_workers' apply workers, but they need
 * a free slot of max_worker_processes.  When none is free the stream's
 * worker copies the job itself between two rounds, as before there were
 * copy workers (the fallback: a join is never stuck behind a server whose
 * background worker slots are all taken, at the price of the stream's
 * pause for that copy).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/joincopy.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/slot.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "sync/sync_int.h"
#include "workers/workers.h"

PGDLLEXPORT void ctas_fed_sync_copy_main(Datum main_arg);

/* the job the copy worker copies, for its error exit */
static SyncJob *copied_job = NULL;

/*
 * CtasSyncLoadJobAlone
 *		Job id read from its row, in a transaction of its own; NULL when
 *		it no longer runs.  Outside a transaction.  Can ERROR.
 */
SyncJob *
CtasSyncLoadJobAlone(int64 id)
{
	SyncJob    *job;

	CtasSyncCurrentJob = NULL;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	job = CtasSyncLoadJob(id);
	CtasSyncLoadingId = 0;
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	return job;
}

/*
 * CtasSyncJoinCopied
 *		Load each job of ids (from CtasSyncLeaveStopped: copied, now
 *		"streaming") and add it to *jobs: the next round opens its target,
 *		which reads its applied lsn X, and its peeks, read from the slot
 *		held at or before X, apply to it what commits at or after X.
 *		Outside a transaction.  Can ERROR.
 */
void
CtasSyncJoinCopied(List *ids, List **jobs)
{
	ListCell   *lc;

	foreach(lc, ids)
	{
		SyncJob    *job;
		MemoryContext oldcxt;

		int64		id = *(int64 *) lfirst(lc);
		HeldJob    *h = NULL;
		ListCell   *lc2;

		CHECK_FOR_INTERRUPTS();
		job = CtasSyncLoadJobAlone(id);
		/* the slot held for it goes once it is in *jobs (or gone) */
		foreach(lc2, CtasSyncHeldJobs)
		{
			if (((HeldJob *) lfirst(lc2))->id == id)
				h = lfirst(lc2);
		}
		if (job == NULL || job->state != CTAS_SYNC_STREAMING)
		{
			/* stopped meanwhile, or copying again: the next round sees */
			if (job == NULL && h != NULL)
				CtasSyncHeldJobs = list_delete_ptr(CtasSyncHeldJobs, h);
			continue;
		}
		if (!CtasSyncStatusAttach(job->id))
			proc_exit(0);		/* its database is being dropped */
		CtasSyncStatusLabels(job->target.catalog->name, job->target.schema,
							 job->target.table, job->slot_name);
		oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);
		*jobs = lappend(*jobs, job);
		MemoryContextSwitchTo(oldcxt);
		if (h != NULL)
			CtasSyncHeldJobs = list_delete_ptr(CtasSyncHeldJobs, h);
		ereport(LOG,
				(errmsg("ctas_fed sync " INT64_FORMAT ": copied, streaming with stream " INT64_FORMAT,
						job->id, job->stream_id)));
	}
}

/*
 * start_copier
 *		Register the copy worker of h's job; false when no background
 *		worker slot is free.
 */
static bool
start_copier(HeldJob *h)
{
	BackgroundWorker worker;
	MemoryContext oldcxt;
	bool		ok;

	CtasBackgroundWorkerInit(&worker, "ctas_fed_sync_copy_main",
							 "ctas_fed sync copy", true,
							 BgWorkerStart_RecoveryFinished, BGW_NEVER_RESTART);
	snprintf(worker.bgw_name, BGW_MAXLEN, "ctas_fed sync copy " INT64_FORMAT,
			 h->id);
	worker.bgw_main_arg = Int64GetDatum(h->id);
	memcpy(worker.bgw_extra, &MyDatabaseId, sizeof(Oid));
	/* its end sets this worker's latch */
	worker.bgw_notify_pid = MyProcPid;
	/* tests: every background worker slot taken */
	if (CtasFaultPointOn("sync_copy_worker_none"))
	{
		h->copier = NULL;
		return false;
	}
	oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);
	ok = RegisterDynamicBackgroundWorker(&worker, &h->copier);
	MemoryContextSwitchTo(oldcxt);
	if (!ok)
		h->copier = NULL;
	return ok;
}

/*
 * copy_here
 *		The fallback: h's job copied by the stream's worker itself, between
 *		two rounds, and taken into *jobs.  Can ERROR (CtasSyncCatchJobError
 *		holds or fails the job).
 */
static void
copy_here(HeldJob *h, List **jobs)
{
	SyncJob    *job;
	MemoryContext oldcxt;

	job = CtasSyncLoadJobAlone(h->id);
	if (job == NULL || job->state != CTAS_SYNC_COPYING)
		return;					/* the next round sees what it became */
	if (!CtasSyncLockCopy(job->id, false))
	{
		h->retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												  CTAS_SYNC_RESTART_SECS * 1000);
		return;
	}
	if (!CtasSyncStatusAttach(job->id))
		proc_exit(0);			/* its database is being dropped */
	CtasSyncStatusLabels(job->target.catalog->name, job->target.schema,
						 job->target.table, job->slot_name);
	ereport(LOG,
			(errmsg("ctas_fed sync " INT64_FORMAT ": no background worker is free for its join copy, copied by the worker of stream " INT64_FORMAT,
					job->id, job->stream_id)));
	PG_TRY();
	{
		CtasSyncJoinCopy(job);
	}
	PG_CATCH();
	{
		CtasSyncUnlockCopy(job->id);
		PG_RE_THROW();
	}
	PG_END_TRY();
	CtasSyncUnlockCopy(job->id);
	CtasSyncHeldJobs = list_delete_ptr(CtasSyncHeldJobs, h);
	oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);
	*jobs = lappend(*jobs, job);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * CtasSyncStartCopies
 *		In the stream's worker, after a round: the joining jobs whose copy
 *		worker ended with the job still "copying" are tried again after
 *		CTAS_SYNC_RESTART_SECS; the copy worker of each joining job that
 *		has none and is due is started, at most CTAS_SYNC_COPY_WORKERS at
 *		once; when no background worker slot is free, the job is copied
 *		here (copy_here).  Outside a transaction.  Can ERROR.
 */
void
CtasSyncStartCopies(List **jobs)
{
	TimestampTz now = GetCurrentTimestamp();
	int			running = 0;
	ListCell   *lc;

	foreach(lc, CtasSyncHeldJobs)
	{
		HeldJob    *h = lfirst(lc);
		pid_t		pid;

		if (!h->copying || h->copier == NULL)
			continue;
		if (GetBackgroundWorkerPid(h->copier, &pid) != BGWH_STOPPED)
			running++;
		else
		{
			/* ended, the job still copying at the last round: later */
			pfree(h->copier);
			h->copier = NULL;
			h->retry_at = TimestampTzPlusMilliseconds(now,
													  CTAS_SYNC_RESTART_SECS * 1000);
		}
	}
	foreach(lc, CtasSyncHeldJobs)
	{
		HeldJob    *h = lfirst(lc);

		if (!h->copying || h->copier != NULL || h->retry_at > now)
			continue;
		if (running >= CTAS_SYNC_COPY_WORKERS)
			break;
		if (start_copier(h))
		{
			running++;
			ereport(DEBUG1,
					(errmsg_internal("ctas_fed sync " INT64_FORMAT ": copy worker started, the slot held at %X/%X",
									 h->id, LSN_FORMAT_ARGS(h->hold_at))));
			continue;
		}
		/* copy_here may take h out of the list: one at a time */
		copy_here(h, jobs);
		break;
	}
}

/*
 * CtasSyncWorkerConnect
 *		What every sync process does first, the stream's worker
 *		(sync/worker.c) and a copy worker alike: signals, the connection to
 *		the database in bgw_extra, appname as its application_name, and the
 *		session settings that the owner's code runs under.
 *
 *		The owner's functions run with an empty search_path, as in
 *		PostgreSQL's apply worker: an unqualified name in them cannot reach
 *		another user's object in a schema of the default path.
 *
 *		Every text form of a value the worker produces or parses is made
 *		independent of the settings of the database, of its role and of the
 *		job's owner: pgoutput sends each column as its type's text output,
 *		made in this process by the peek, which CtasSyncFillSlot parses
 *		back, and a target may send values as text too (the PostgreSQL
 *		target's statements).  A database set to DateStyle 'SQL, DMY'
 *		swapped day and month on the way to a remote that reads ISO, and
 *		extra_float_digits below 1 rounded floats.  The values
 *		(CtasSyncTextSettings, shared with the event triggers of
 *		sync/partition.c) are those that the writer of a CTAS pins around
 *		its text output (CtasPgBeginTextOutput, as postgres_fdw's
 *		set_transmission_modes), and those its remote connection pins
 *		(TimeZone UTC), plus the text of bytea and money.  PGC_S_OVERRIDE
 *		outranks the session source: the owner's code (set_config in an
 *		"immutable" function) cannot change them for the rest of a chunk
 *		either.
 */
void
CtasSyncWorkerConnect(const char *appname)
{
	Oid			dboid;
	int			i;

	memcpy(&dboid, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname(appname);
	SetConfigOption("search_path", "", PGC_SUSET, PGC_S_OVERRIDE);
	for (i = 0; i < CtasSyncNTextSettings; i++)
		SetConfigOption(CtasSyncTextSettings[i][0], CtasSyncTextSettings[i][1],
						PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * ctas_fed_sync_copy_main
 *		Entry point of a copy worker: main_arg is the job's sync_id,
 *		bgw_extra its database.
 */
void
ctas_fed_sync_copy_main(Datum main_arg)
{
	int64		id = DatumGetInt64(main_arg);

	CtasSyncWorkerConnect(psprintf("ctas_fed sync copy " INT64_FORMAT, id));
	CtasSyncJobCxt = AllocSetContextCreate(TopMemoryContext,
										   "ctas_fed sync copy",
										   ALLOCSET_DEFAULT_SIZES);

	/* a copy of the job runs already (started by an earlier worker) */
	if (!CtasSyncLockCopy(id, false))
		proc_exit(0);

	PG_TRY();
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);

		copied_job = CtasSyncLoadJobAlone(id);
		MemoryContextSwitchTo(oldcxt);
		if (copied_job != NULL && copied_job->state == CTAS_SYNC_COPYING)
			CtasSyncJoinCopy(copied_job);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(CtasSyncJobCxt);
		edata = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
		if (copied_job != NULL && copied_job->open)
		{
			copied_job->apply->close(&copied_job->target);
			copied_job->open = false;
		}
		RESUME_INTERRUPTS();

		/* for good: failed here; else the stream's worker tries again */
		if (CtasSyncFailed)
		{
			CtasSyncFailJob(id, edata->message);
			if (copied_job != NULL)
				CtasSyncJobEvent(copied_job, CTAS_SYNC_FAILED, edata->message);
		}
		else
			CtasSyncSetError(id, edata->message);
		proc_exit(1);
	}
	PG_END_TRY();
	proc_exit(0);
}
