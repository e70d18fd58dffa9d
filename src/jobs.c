/*-------------------------------------------------------------------------
 *
 * jobs.c
 *		  The shared-memory job registry: running jobs, a bounded history,
 *		  per-catalog counters, the queue of status events for webhooks;
 *		  jobs_file.c has the file that makes all of it survive a restart.
 *
 * Every federated CTAS, DROP and streaming load is a job.  Its backend
 * owns its slot while it runs: it publishes rows and bytes with atomic
 * writes (no lock per row) and takes the lock only to change the state.  A
 * job that reaches a final state (committed, aborted, failed) moves to the
 * history ring; an in-doubt job stays in the history until the resolver
 * decides it.
 *
 * An aborted transaction cannot write a row of its own, so nothing here is
 * a table: the registry lives in shared memory, and the launcher
 * (workers/launcher.c) writes it to pg_stat/ctas_fed_jobs.stat shortly after every
 * change and at shutdown.  The postmaster loads that file when shared
 * memory is created, so the history survives a clean restart and a crash
 * restart (minus at most the last moments before a crash); jobs that were
 * running when the server went down come back as in_doubt, for the
 * resolver of their database to decide from the local transaction's commit
 * status.
 *
 * Locking: "lock" (one LWLock of our tranche) protects everything but the
 * rows/bytes counters of a running slot, which only its owner writes.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/jobs.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "jobs.h"
#include "jobs_int.h"
#include "jobshards.h"
#include "mb/pg_wchar.h"

/* upper bounds of the duration histogram, in seconds */
const double CtasDurationBuckets[CTAS_DURATION_BUCKETS] = {
	0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 3600
};

JobsShared *CtasJobsShared = NULL;

/* set by workers/launcher.c (see jobs.h) */
CtasResolverWakeFunc CtasJobsResolverWake = NULL;

static CtasCatalogStats *catalog_stats(const char *name);
static void count_finished(const CtasJob *job);
static void enqueue_event(const CtasJob *job);

/*
 * clip_copy
 *		strlcpy that never cuts a multibyte character of the database
 *		encoding in two.
 */
static void
clip_copy(char *dst, const char *src, size_t size)
{
	int			len = strlen(src);

	if (len >= (int) size)
		len = pg_mbcliplen(src, len, size - 1);
	memcpy(dst, src, len);
	dst[len] = '\0';
}

/* the size of the registry in shared memory */
Size
CtasJobsShmemSize(void)
{
	return add_size(offsetof(JobsShared, jobs),
					mul_size(CtasMaxJobs + CtasHistorySize, sizeof(CtasJob)));
}

/*
 * CtasJobsShmemRequest
 *		Called from the shmem_request_hook.
 */
void
CtasJobsShmemRequest(void)
{
	RequestAddinShmemSpace(CtasJobsShmemSize());
	RequestNamedLWLockTranche("ctas_fed", 1);
	CtasJobShardsShmemRequest();
}

const char *
CtasJobStateName(CtasJobState state)
{
	switch (state)
	{
		case CTAS_JOB_RUNNING:
			return "running";
		case CTAS_JOB_PREPARED:
			return "prepared";
		case CTAS_JOB_COMMITTED:
			return "committed";
		case CTAS_JOB_ABORTED:
			return "aborted";
		case CTAS_JOB_FAILED:
			return "failed";
		case CTAS_JOB_IN_DOUBT:
			return "in_doubt";
	}
	return "unknown";
}

static bool
state_is_final(CtasJobState state)
{
	return state == CTAS_JOB_COMMITTED || state == CTAS_JOB_ABORTED ||
		state == CTAS_JOB_FAILED;
}

static void
wake_resolver(Oid dboid, bool now)
{
	if (CtasJobsResolverWake != NULL)
		CtasJobsResolverWake(dboid, now);
}

static void
notify_worker(void)
{
	CtasJobsShared->change_count++;
	if (CtasJobsShared->worker_latch)
		SetLatch(CtasJobsShared->worker_latch);
	if (CtasJobsShared->notifier_latch)
		SetLatch(CtasJobsShared->notifier_latch);
}

/*
 * jobs_on_exit
 *		on_shmem_exit callback, so it runs after the transaction of an
 *		exiting backend was aborted (which settles its atomic jobs): a job
 *		still running here - a streaming load cut by FATAL, which skips
 *		every PG_CATCH - is marked failed (streaming) or in doubt, so that
 *		no slot stays taken by a dead process.
 */
static void
jobs_on_exit(int code, Datum arg)
{
	int			i;
	bool		wake = false;

	if (CtasJobsShared == NULL)
		return;
	LWLockAcquire(CtasJobsShared->lock, LW_EXCLUSIVE);
	for (i = 0; i < CtasMaxJobs; i++)
	{
		CtasJob    *job = RUNNING(i);

		if (!job->in_use || job->pid != MyProcPid)
			continue;
		job->state = strcmp(job->mode, "streaming") == 0 ?
			CTAS_JOB_FAILED : CTAS_JOB_IN_DOUBT;
		strlcpy(job->error, "the backend exited while the job was running",
				sizeof(job->error));
		job->finished_at = GetCurrentTimestamp();
		enqueue_event(job);
		CtasJobsAddToHistory(job);
		if (job->state != CTAS_JOB_IN_DOUBT)
			count_finished(job);
		job->in_use = false;
		notify_worker();
		if (job->state == CTAS_JOB_IN_DOUBT)
			wake = true;
	}
	LWLockRelease(CtasJobsShared->lock);
	if (wake)
		wake_resolver(MyDatabaseId, true);
}

/*
 * jobs_reserve_ids
 *		Wait until the history file reserves the next job ids (see
 *		JOBS_ID_RESERVE): ask the launcher for a save while fewer than half
 *		the reserve are left.  Never fails a statement: when the launcher
 *		cannot save (its last save failed, or none came within
 *		JOBS_ID_WAIT_MS) the job goes on with a WARNING, as a crash could
 *		then give its id again.  Takes and releases shared->lock; may
 *		ERROR only on an interrupt.
 */
static void
jobs_reserve_ids(void)
{
	TimestampTz start = GetCurrentTimestamp();

	for (;;)
	{
		bool		low;
		bool		failed;

		LWLockAcquire(CtasJobsShared->lock, LW_EXCLUSIVE);
		low = CtasJobsShared->next_job_id >= CtasJobsShared->ids_reserved - JOBS_ID_RESERVE / 2;
		failed = CtasJobsShared->save_failed;
		if (low && !failed)
			notify_worker();	/* a change: the launcher saves */
		LWLockRelease(CtasJobsShared->lock);
		if (!low)
			return;
		if (failed ||
			TimestampDifferenceExceeds(start, GetCurrentTimestamp(),
									   JOBS_ID_WAIT_MS))
		{
			ereport(WARNING,
					(errmsg("ctas_fed could not reserve job ids in \"%s\"",
							JOBS_FILE),
					 errdetail("After a crash, the id of this job may be given to another job."),
					 errhint("See the server log for why the ctas_fed launcher cannot save the file.")));
			return;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT |
						 WL_EXIT_ON_PM_DEATH, 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * CtasJobStart
 *		Register a running job of this backend.  When every slot is taken
 *		the job is not tracked (ref.slot = -1) and a WARNING says so: the
 *		registry must never fail a statement.
 */
CtasJobRef
CtasJobStart(const CtasCatalog *catalog, const char *target, const char *mode,
			 const char *notify_url)
{
	static bool exit_registered = false;
	CtasJobRef	ref = {-1, 0};
	int			i;

	if (CtasJobsShared == NULL)
		return ref;
	if (!exit_registered)
	{
		on_shmem_exit(jobs_on_exit, (Datum) 0);
		exit_registered = true;
	}

	jobs_reserve_ids();
	LWLockAcquire(CtasJobsShared->lock, LW_EXCLUSIVE);
	for (i = 0; i < CtasMaxJobs; i++)
	{
		CtasJob    *job = RUNNING(i);

		if (job->in_use)
			continue;
		job->in_use = true;
		job->job_id = CtasJobsShared->next_job_id++;
		clip_copy(job->catalog, catalog->name, sizeof(job->catalog));
		clip_copy(job->target, target, sizeof(job->target));
		strlcpy(job->mode, mode, sizeof(job->mode));
		strlcpy(job->notify_url, notify_url ? notify_url : "",
				sizeof(job->notify_url));
		/* only a non-superuser's own notify_url is limited */
		job->notify_trusted = !(catalog->notify_url_limited &&
								notify_url != NULL &&
								catalog->notify_url != NULL &&
								strcmp(notify_url, catalog->notify_url) == 0);
		job->state = CTAS_JOB_RUNNING;
		pg_atomic_write_u64(&job->rows, 0);
		pg_atomic_write_u64(&job->bytes, 0);
		job->started_at = GetCurrentTimestamp();
		job->finished_at = 0;
		job->error[0] = '\0';
		job->gid[0] = '\0';
		job->pid = MyProcPid;
		job->dbid = MyDatabaseId;
		job->userid = GetUserId();
		job->serverid = catalog->serverid;
		job->umid = catalog->umid;
		job->fxid = U64FromFullTransactionId(GetTopFullTransactionIdIfAny());
		job->encoding = GetDatabaseEncoding();
		job->group_id = 0;
		ref.slot = i;
		ref.id = job->job_id;
		(void) catalog_stats(job->catalog);
		enqueue_event(job);
		notify_worker();
		break;
	}
	LWLockRelease(CtasJobsShared->lock);

	/* a database whose backends use ctas_fed needs its resolver */
	wake_resolver(MyDatabaseId, false);

	if (ref.slot < 0)
		ereport(WARNING,
				(errmsg("ctas_fed.jobs is full; this job is not tracked"),
				 errhint("Raise ctas_fed.max_jobs.")));
	return ref;
}

/* the running slot of ref, or NULL when it is no longer ours */
static CtasJob *
running_job(CtasJobRef ref)
{
	CtasJob    *job;

	if (CtasJobsShared == NULL || ref.slot < 0)
		return NULL;
	job = RUNNING(ref.slot);
	if (!job->in_use || job->job_id != ref.id)
		return NULL;
	return job;
}

/*
 * CtasJobProgress
 *		Publish rows and bytes.  No lock: only the owner writes them.
 */
void
CtasJobProgress(CtasJobRef ref, uint64 rows, uint64 bytes)
{
	CtasJob    *job = running_job(ref);

	if (job == NULL)
		return;
	pg_atomic_write_u64(&job->rows, rows);
	pg_atomic_write_u64(&job->bytes, bytes);
}

/*
 * CtasJobSetGid
 *		Record the gid (or staging table) of the job, and its local xid.
 */
void
CtasJobSetGid(CtasJobRef ref, const char *gid)
{
	CtasJob    *job = running_job(ref);

	if (job == NULL)
		return;
	LWLockAcquire(CtasJobsShared->lock, LW_EXCLUSIVE);
	clip_copy(job->gid, gid, sizeof(job->gid));
	job->fxid = U64FromFullTransactionId(GetTopFullTransactionIdIfAny());
	notify_worker();
	LWLockRelease(CtasJobsShared->lock);
}

/*
 * CtasJobNewGroup
 *		A new job group id, for the jobs of one multi-table call.  Group ids
 *		are drawn from the sequence of job ids, which survives restarts, so
 *		no two groups share one.  0 when the registry is not there.
 */
int64
CtasJobNewGroup(void)
{
	int64		id;

	if (CtasJobsShared == NULL)
		return 0;
	jobs_reserve_ids();
	LWLockAcquire(CtasJobsShared->lock, LW_EXCLUSIVE);
	id = CtasJobsShared->next_job_id++;
	notify_worker();
	LWLockRelease(CtasJobsShared->lock);
	return id;
}

/*
 * CtasJobSetGroup
 *		Put a running job in group group_id (see CtasJobNewGroup).
 */
void
CtasJobSetGroup(CtasJobRef ref, int64 group_id)
{
	CtasJob    *job = running_job(ref);

	if (job == NULL)
		return;
	LWLockAcquire(CtasJobsShared->lock, LW_EXCLUSIVE);
	job->group_id = group_id;
	notify_worker();
	LWLockRelease(CtasJobsShared->lock);
}

/*
 * CtasJobSetState
 *		Move a job to state; a final state (or in_doubt) frees its running
 *		slot into the history.  error (may be NULL) is kept for failed jobs.
 *		Never raises an error: called on commit and abort paths.
 */
void
CtasJobSetState(CtasJobRef ref, CtasJobState state, const char *error)
{
	CtasJob    *job = running_job(ref);
	bool		wake = false;

	if (job == NULL)
		return;
	LWLockAcquire(CtasJobsShared->lock, LW_EXCLUSIVE);
	if (job->state != state)
	{
		wake = state == CTAS_JOB_IN_DOUBT;
		job->state = state;
		if (error)
			clip_copy(job->error, error, sizeof(job->error));
		if (state_is_final(state) || state == CTAS_JOB_IN_DOUBT)
		{
			job->finished_at = GetCurrentTimestamp();
			enqueue_event(job);
			CtasJobsAddToHistory(job);
			/* an in-doubt job is counted when it is decided */
			if (state != CTAS_JOB_IN_DOUBT)
				count_finished(job);
			job->in_use = false;
		}
		else
			enqueue_event(job);
		notify_worker();
	}
	LWLockRelease(CtasJobsShared->lock);

	/* the resolver of this database takes over at once */
	if (wake)
		wake_resolver(MyDatabaseId, true);
}

/*
 * CtasJobsAddToHistory
 *		Copy job into the history ring, overwriting the oldest entry.
 *		Caller holds the lock.
 */
void
CtasJobsAddToHistory(const CtasJob *job)
{
	CtasJob    *h;

	if (CtasHistorySize <= 0)
		return;
	h = HISTORY(CtasJobsShared->history_head);
	/* the owner no longer writes the counters: a plain copy is exact */
	memcpy(h, job, sizeof(CtasJob));
	h->in_use = true;
	CtasJobsShared->history_head = (CtasJobsShared->history_head + 1) % CtasHistorySize;
	if (CtasJobsShared->history_count < CtasHistorySize)
		CtasJobsShared->history_count++;
}

/*
 * catalog_stats
 *		The counters of catalog name, created on first use; NULL when the
 *		table is full.  Caller holds the lock.
 */
static CtasCatalogStats *
catalog_stats(const char *name)
{
	int			i;

	for (i = 0; i < CtasJobsShared->ncatalogs; i++)
	{
		if (strcmp(CtasJobsShared->catalogs[i].catalog, name) == 0)
			return &CtasJobsShared->catalogs[i];
	}
	if (CtasJobsShared->ncatalogs >= MAX_CATALOG_STATS)
		return NULL;
	strlcpy(CtasJobsShared->catalogs[i].catalog, name, NAMEDATALEN);
	CtasJobsShared->ncatalogs++;
	return &CtasJobsShared->catalogs[i];
}

/*
 * count_finished
 *		Add a job that ended to the cumulative counters of its catalog.
 */
static void
count_finished(const CtasJob *job)
{
	CtasCatalogStats *st = catalog_stats(job->catalog);
	double		secs;
	int			b;

	if (st == NULL)
		return;
	st->jobs[job->state]++;
	if (job->state == CTAS_JOB_COMMITTED)
	{
		/* what reached the catalog for good */
		st->rows += pg_atomic_read_u64((pg_atomic_uint64 *) &job->rows);
		st->bytes += pg_atomic_read_u64((pg_atomic_uint64 *) &job->bytes);
		CtasJobShardsCommitted(job->job_id, job->catalog);
	}
	secs = (double) (job->finished_at - job->started_at) / USECS_PER_SEC;
	for (b = 0; b < CTAS_DURATION_BUCKETS; b++)
	{
		if (secs <= CtasDurationBuckets[b])
			st->duration_buckets[b]++;
	}
	st->duration_count++;
	st->duration_sum += secs;
}

/*
 * enqueue_event
 *		Queue a snapshot of job for the webhook, when it has a notify_url.
 *		A full queue drops the oldest event (and counts it).  Caller holds
 *		the lock.
 */
static void
enqueue_event(const CtasJob *job)
{
	CtasJobEvent *ev;

	if (job->notify_url[0] == '\0')
		return;
	if (CtasJobsShared->events_written - CtasJobsShared->events_read >= EVENT_QUEUE_SIZE)
	{
		CtasJobsShared->events_read++;
		CtasJobsShared->events_dropped++;
	}
	ev = &CtasJobsShared->events[CtasJobsShared->events_written % EVENT_QUEUE_SIZE];
	ev->state_name[0] = '\0';
	ev->job_id = job->job_id;
	strlcpy(ev->catalog, job->catalog, sizeof(ev->catalog));
	strlcpy(ev->target, job->target, sizeof(ev->target));
	strlcpy(ev->mode, job->mode, sizeof(ev->mode));
	strlcpy(ev->error, job->error, sizeof(ev->error));
	strlcpy(ev->notify_url, job->notify_url, sizeof(ev->notify_url));
	ev->notify_trusted = job->notify_trusted;
	ev->state = job->state;
	ev->rows = pg_atomic_read_u64((pg_atomic_uint64 *) &job->rows);
	ev->bytes = pg_atomic_read_u64((pg_atomic_uint64 *) &job->bytes);
	ev->started_at = job->started_at;
	ev->finished_at = job->finished_at;
	CtasJobsShared->events_written++;
}

/*
 * CtasJobsQueueEvent
 *		Queue an event that no job of the registry makes (a state change
 *		of a sync job, sync/worker.c) and wake the notifier.  Like the
 *		registry's own events, a full queue drops the oldest.
 */
void
CtasJobsQueueEvent(const CtasJobEvent *ev)
{
	if (ev->notify_url[0] == '\0')
		return;
	LWLockAcquire(CtasJobsShared->lock, LW_EXCLUSIVE);
	if (CtasJobsShared->events_written - CtasJobsShared->events_read >= EVENT_QUEUE_SIZE)
	{
		CtasJobsShared->events_read++;
		CtasJobsShared->events_dropped++;
	}
	memcpy(&CtasJobsShared->events[CtasJobsShared->events_written % EVENT_QUEUE_SIZE], ev,
		   sizeof(CtasJobEvent));
	CtasJobsShared->events_written++;
	LWLockRelease(CtasJobsShared->lock);
	if (CtasJobsShared->notifier_latch)
		SetLatch(CtasJobsShared->notifier_latch);
}

/*
 * CtasJobsNextEvent
 *		Copy the oldest queued webhook event into *ev; false when none.
 */
bool
CtasJobsNextEvent(CtasJobEvent *ev)
{
	bool		found = false;

	LWLockAcquire(CtasJobsShared->lock, LW_EXCLUSIVE);
	if (CtasJobsShared->events_read < CtasJobsShared->events_written)
	{
		memcpy(ev, &CtasJobsShared->events[CtasJobsShared->events_read % EVENT_QUEUE_SIZE],
			   sizeof(CtasJobEvent));
		CtasJobsShared->events_read++;
		found = true;
	}
	LWLockRelease(CtasJobsShared->lock);
	return found;
}

/*
 * CtasJobsSnapshot
 *		A palloc'd copy of every job (running first, then history from the
 *		oldest), of the catalog counters, and of change_count.  Taken under
 *		the lock; rows and bytes of running jobs as of now.
 */
CtasJobsSnapshotData *
CtasJobsSnapshot(void)
{
	CtasJobsSnapshotData *snap = palloc0(sizeof(CtasJobsSnapshotData));
	int			i;

	if (CtasJobsShared == NULL)
		return snap;
	snap->jobs = palloc(sizeof(CtasJob) * (CtasMaxJobs + CtasHistorySize));
	LWLockAcquire(CtasJobsShared->lock, LW_SHARED);
	for (i = 0; i < CtasMaxJobs; i++)
	{
		if (RUNNING(i)->in_use)
			memcpy(&snap->jobs[snap->njobs++], RUNNING(i), sizeof(CtasJob));
	}
	for (i = 0; i < CtasJobsShared->history_count; i++)
	{
		int			idx = (CtasJobsShared->history_head - CtasJobsShared->history_count + i +
						   CtasHistorySize) % CtasHistorySize;

		memcpy(&snap->jobs[snap->njobs++], HISTORY(idx), sizeof(CtasJob));
	}
	snap->ncatalogs = CtasJobsShared->ncatalogs;
	memcpy(snap->catalogs, CtasJobsShared->catalogs,
		   sizeof(CtasCatalogStats) * CtasJobsShared->ncatalogs);
	snap->change_count = CtasJobsShared->change_count;
	snap->events_dropped = CtasJobsShared->events_dropped;
	LWLockRelease(CtasJobsShared->lock);
	return snap;
}

/*
 * settle_in_doubt
 *		Give the in-doubt history entries that match (job_id, or gid when
 *		job_id is 0) their decided state.  Returns how many matched.
 */
static int
settle_in_doubt(int64 job_id, const char *gid, CtasJobState state,
				const char *note)
{
	int			n = 0;
	int			i;

	LWLockAcquire(CtasJobsShared->lock, LW_EXCLUSIVE);
	for (i = 0; i < CtasJobsShared->history_count; i++)
	{
		CtasJob    *job = HISTORY(i);

		if (job->state != CTAS_JOB_IN_DOUBT ||
			(job_id != 0 ? job->job_id != job_id : strcmp(job->gid, gid) != 0))
			continue;
		job->state = state;
		if (note)
			clip_copy(job->error, note, sizeof(job->error));
		if (job->finished_at == 0)
			job->finished_at = GetCurrentTimestamp();
		count_finished(job);
		enqueue_event(job);
		n++;
	}
	if (n > 0)
		notify_worker();
	LWLockRelease(CtasJobsShared->lock);
	return n;
}

/*
 * CtasJobsResolveHistory
 *		Set the state of the in-doubt history entry job_id (after the
 *		resolver decided it).  Returns false when there is no such entry.
 */
bool
CtasJobsResolveHistory(int64 job_id, CtasJobState state, const char *note)
{
	return settle_in_doubt(job_id, NULL, state, note) > 0;
}

/*
 * CtasJobsResolveGid
 *		Settle the in-doubt history entries whose gid (or staging table) is
 *		gid, after a resolver acted on it.
 */
void
CtasJobsResolveGid(const char *gid, CtasJobState state)
{
	if (gid[0] != '\0')
		(void) settle_in_doubt(0, gid, state, NULL);
}

/*
 * CtasJobsCounters
 *		change_count (bumped by every change) and the number of jobs that
 *		ended so far, read under the lock without copying the registry:
 *		what the workers poll every second.
 */
void
CtasJobsCounters(uint64 *change_count, uint64 *ended)
{
	int			i;

	LWLockAcquire(CtasJobsShared->lock, LW_SHARED);
	*change_count = CtasJobsShared->change_count;
	*ended = 0;
	for (i = 0; i < CtasJobsShared->ncatalogs; i++)
		*ended += CtasJobsShared->catalogs[i].duration_count;
	LWLockRelease(CtasJobsShared->lock);
}

/*
 * CtasJobsGidIsLive
 *		Is a running job of a live backend about to finish gid itself?  The
 *		resolver leaves such gids alone.
 */
bool
CtasJobsGidIsLive(const char *gid)
{
	bool		live = false;
	int			i;

	LWLockAcquire(CtasJobsShared->lock, LW_SHARED);
	for (i = 0; i < CtasMaxJobs; i++)
	{
		CtasJob    *job = RUNNING(i);

		if (job->in_use && strcmp(job->gid, gid) == 0)
			live = true;
	}
	LWLockRelease(CtasJobsShared->lock);
	return live;
}

/*
 * CtasJobsSetLatch
 *		Register (or with NULL, unregister) the latch of the worker
 *		(notifier false) or of the notifier, set on every change.
 */
void
CtasJobsSetLatch(Latch *latch, bool notifier)
{
	LWLockAcquire(CtasJobsShared->lock, LW_EXCLUSIVE);
	if (notifier)
		CtasJobsShared->notifier_latch = latch;
	else
		CtasJobsShared->worker_latch = latch;
	LWLockRelease(CtasJobsShared->lock);
}
