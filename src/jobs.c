/*-------------------------------------------------------------------------
 *
 * jobs.c
 *		  The shared-memory job registry: running jobs, a bounded history,
 *		  per-catalog counters, the queue of status events for webhooks, and
 *		  the file that makes all of it survive a restart.
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
#include "jobshards.h"
#include "mb/pg_wchar.h"

#define JOBS_FILE		PGSTAT_STAT_PERMANENT_DIRECTORY "/ctas_fed_jobs.stat"
#define JOBS_FILE_TMP	JOBS_FILE ".tmp"
#define JOBS_MAGIC		0x43544a46	/* "CTJF" */
#define JOBS_VERSION	2
#define MAX_CATALOG_STATS	64

/*
 * The file reserves job ids ahead, as a sequence logs values ahead: its
 * header holds the next id plus JOBS_ID_RESERVE, and a restart continues
 * from there, so that a job that started after the last save and was lost
 * with a crash never gives its id (which its webhook events may already
 * carry) to another job.  No id at or above what the file reserves is
 * handed out: a backend that would take one (the first job after a start,
 * or half the reserve used between two saves) asks the launcher for a save
 * and waits for it (jobs_reserve_ids).
 */
#define JOBS_ID_RESERVE	1000
/* how long a backend waits for the launcher to reserve ids, in ms */
#define JOBS_ID_WAIT_MS	10000
#define EVENT_QUEUE_SIZE	256

/* upper bounds of the duration histogram, in seconds */
const double CtasDurationBuckets[CTAS_DURATION_BUCKETS] = {
	0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 3600
};

typedef struct JobsShared
{
	LWLock	   *lock;
	int64		next_job_id;
	int64		ids_reserved;	/* ids below it are reserved on disk */
	bool		save_failed;	/* the last CtasJobsSave failed */
	uint64		change_count;	/* bumped on every change to persist */
	int			history_head;	/* next history slot to write */
	int			history_count;
	int			ncatalogs;
	CtasCatalogStats catalogs[MAX_CATALOG_STATS];
	uint64		events_written;
	uint64		events_read;
	uint64		events_dropped;
	Latch	   *worker_latch;	/* the launcher: registry on disk */
	Latch	   *notifier_latch;	/* webhooks, Pushgateway */
	CtasJobEvent events[EVENT_QUEUE_SIZE];
	CtasJob		jobs[FLEXIBLE_ARRAY_MEMBER];	/* running, then history */
} JobsShared;

static JobsShared *shared = NULL;

/* set by workers/launcher.c (see jobs.h) */
CtasResolverWakeFunc CtasJobsResolverWake = NULL;

#define RUNNING(i)	(&shared->jobs[(i)])
#define HISTORY(i)	(&shared->jobs[CtasMaxJobs + (i)])

static Size jobs_shmem_size(void);
static CtasCatalogStats *catalog_stats(const char *name);
static void load_jobs_file(void);
static void add_to_history(const CtasJob *job);
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

static Size
jobs_shmem_size(void)
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
	RequestAddinShmemSpace(jobs_shmem_size());
	RequestNamedLWLockTranche("ctas_fed", 1);
	CtasJobShardsShmemRequest();
}

/*
 * CtasJobsShmemStartup
 *		Called from the shmem_startup_hook: attach, or create and load the
 *		saved registry (in the postmaster).
 */
void
CtasJobsShmemStartup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("ctas_fed jobs", jobs_shmem_size(), &found);
	if (!found)
	{
		int			i;

		memset(shared, 0, jobs_shmem_size());
		shared->lock = &(GetNamedLWLockTranche("ctas_fed"))->lock;
		shared->next_job_id = 1;
		shared->ids_reserved = 1;
		for (i = 0; i < CtasMaxJobs + CtasHistorySize; i++)
		{
			pg_atomic_init_u64(&shared->jobs[i].rows, 0);
			pg_atomic_init_u64(&shared->jobs[i].bytes, 0);
		}
		if (!IsUnderPostmaster)
			load_jobs_file();
	}
	CtasJobShardsShmemStartup();
	LWLockRelease(AddinShmemInitLock);
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
	shared->change_count++;
	if (shared->worker_latch)
		SetLatch(shared->worker_latch);
	if (shared->notifier_latch)
		SetLatch(shared->notifier_latch);
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

	if (shared == NULL)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
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
		add_to_history(job);
		if (job->state != CTAS_JOB_IN_DOUBT)
			count_finished(job);
		job->in_use = false;
		notify_worker();
		if (job->state == CTAS_JOB_IN_DOUBT)
			wake = true;
	}
	LWLockRelease(shared->lock);
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

		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		low = shared->next_job_id >= shared->ids_reserved - JOBS_ID_RESERVE / 2;
		failed = shared->save_failed;
		if (low && !failed)
			notify_worker();	/* a change: the launcher saves */
		LWLockRelease(shared->lock);
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

	if (shared == NULL)
		return ref;
	if (!exit_registered)
	{
		on_shmem_exit(jobs_on_exit, (Datum) 0);
		exit_registered = true;
	}

	jobs_reserve_ids();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < CtasMaxJobs; i++)
	{
		CtasJob    *job = RUNNING(i);

		if (job->in_use)
			continue;
		job->in_use = true;
		job->job_id = shared->next_job_id++;
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
	LWLockRelease(shared->lock);

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

	if (shared == NULL || ref.slot < 0)
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
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	clip_copy(job->gid, gid, sizeof(job->gid));
	job->fxid = U64FromFullTransactionId(GetTopFullTransactionIdIfAny());
	notify_worker();
	LWLockRelease(shared->lock);
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

	if (shared == NULL)
		return 0;
	jobs_reserve_ids();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	id = shared->next_job_id++;
	notify_worker();
	LWLockRelease(shared->lock);
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
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	job->group_id = group_id;
	notify_worker();
	LWLockRelease(shared->lock);
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
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
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
			add_to_history(job);
			/* an in-doubt job is counted when it is decided */
			if (state != CTAS_JOB_IN_DOUBT)
				count_finished(job);
			job->in_use = false;
		}
		else
			enqueue_event(job);
		notify_worker();
	}
	LWLockRelease(shared->lock);

	/* the resolver of this database takes over at once */
	if (wake)
		wake_resolver(MyDatabaseId, true);
}

/*
 * add_to_history
 *		Copy job into the history ring, overwriting the oldest entry.
 *		Caller holds the lock.
 */
static void
add_to_history(const CtasJob *job)
{
	CtasJob    *h;

	if (CtasHistorySize <= 0)
		return;
	h = HISTORY(shared->history_head);
	/* the owner no longer writes the counters: a plain copy is exact */
	memcpy(h, job, sizeof(CtasJob));
	h->in_use = true;
	shared->history_head = (shared->history_head + 1) % CtasHistorySize;
	if (shared->history_count < CtasHistorySize)
		shared->history_count++;
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

	for (i = 0; i < shared->ncatalogs; i++)
	{
		if (strcmp(shared->catalogs[i].catalog, name) == 0)
			return &shared->catalogs[i];
	}
	if (shared->ncatalogs >= MAX_CATALOG_STATS)
		return NULL;
	strlcpy(shared->catalogs[i].catalog, name, NAMEDATALEN);
	shared->ncatalogs++;
	return &shared->catalogs[i];
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
	if (shared->events_written - shared->events_read >= EVENT_QUEUE_SIZE)
	{
		shared->events_read++;
		shared->events_dropped++;
	}
	ev = &shared->events[shared->events_written % EVENT_QUEUE_SIZE];
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
	shared->events_written++;
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
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (shared->events_written - shared->events_read >= EVENT_QUEUE_SIZE)
	{
		shared->events_read++;
		shared->events_dropped++;
	}
	memcpy(&shared->events[shared->events_written % EVENT_QUEUE_SIZE], ev,
		   sizeof(CtasJobEvent));
	shared->events_written++;
	LWLockRelease(shared->lock);
	if (shared->notifier_latch)
		SetLatch(shared->notifier_latch);
}

/*
 * CtasJobsNextEvent
 *		Copy the oldest queued webhook event into *ev; false when none.
 */
bool
CtasJobsNextEvent(CtasJobEvent *ev)
{
	bool		found = false;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (shared->events_read < shared->events_written)
	{
		memcpy(ev, &shared->events[shared->events_read % EVENT_QUEUE_SIZE],
			   sizeof(CtasJobEvent));
		shared->events_read++;
		found = true;
	}
	LWLockRelease(shared->lock);
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

	if (shared == NULL)
		return snap;
	snap->jobs = palloc(sizeof(CtasJob) * (CtasMaxJobs + CtasHistorySize));
	LWLockAcquire(shared->lock, LW_SHARED);
	for (i = 0; i < CtasMaxJobs; i++)
	{
		if (RUNNING(i)->in_use)
			memcpy(&snap->jobs[snap->njobs++], RUNNING(i), sizeof(CtasJob));
	}
	for (i = 0; i < shared->history_count; i++)
	{
		int			idx = (shared->history_head - shared->history_count + i +
						   CtasHistorySize) % CtasHistorySize;

		memcpy(&snap->jobs[snap->njobs++], HISTORY(idx), sizeof(CtasJob));
	}
	snap->ncatalogs = shared->ncatalogs;
	memcpy(snap->catalogs, shared->catalogs,
		   sizeof(CtasCatalogStats) * shared->ncatalogs);
	snap->change_count = shared->change_count;
	snap->events_dropped = shared->events_dropped;
	LWLockRelease(shared->lock);
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

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < shared->history_count; i++)
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
	LWLockRelease(shared->lock);
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

	LWLockAcquire(shared->lock, LW_SHARED);
	*change_count = shared->change_count;
	*ended = 0;
	for (i = 0; i < shared->ncatalogs; i++)
		*ended += shared->catalogs[i].duration_count;
	LWLockRelease(shared->lock);
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

	LWLockAcquire(shared->lock, LW_SHARED);
	for (i = 0; i < CtasMaxJobs; i++)
	{
		CtasJob    *job = RUNNING(i);

		if (job->in_use && strcmp(job->gid, gid) == 0)
			live = true;
	}
	LWLockRelease(shared->lock);
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
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (notifier)
		shared->notifier_latch = latch;
	else
		shared->worker_latch = latch;
	LWLockRelease(shared->lock);
}

/*
 * The registry file, written like the statistics files of pg_stat: a
 * header, then the jobs (history oldest first, running ones last) and the
 * catalog counters.  It is written to a temporary file, fsynced and
 * renamed, and loaded all or nothing: the header carries its own CRC-32C,
 * so that a damaged body still gives a trustworthy job id counter, and the
 * CRC-32C of the body.
 */
typedef struct JobsFileHeader
{
	uint32		magic;			/* JOBS_MAGIC */
	uint32		version;		/* JOBS_VERSION */
	uint32		job_size;		/* sizeof(CtasJob) */
	uint32		stats_size;		/* sizeof(CtasCatalogStats) */
	int32		njobs;
	int32		ncatalogs;
	int64		next_job_id;	/* JOBS_ID_RESERVE above the next id */
	pg_crc32c	body_crc;		/* of everything after the header */
	pg_crc32c	header_crc;		/* of the fields above */
} JobsFileHeader;

/*
 * job_is_live
 *		Was job running when it was saved?  The file holds the history
 *		first, then the live jobs, so that a reload keeps the order.
 */
static bool
job_is_live(const CtasJob *job)
{
	return job->state == CTAS_JOB_RUNNING || job->state == CTAS_JOB_PREPARED;
}

/*
 * CtasJobsSave
 *		Write the registry to JOBS_FILE (write, fsync, durable rename).
 *		Called by the worker.  Returns the change_count saved; LOG on
 *		failure (never ERROR: the worker must go on).  Allocates in the
 *		current memory context and frees it.
 */
uint64
CtasJobsSave(void)
{
	CtasJobsSnapshotData *snap = CtasJobsSnapshot();
	JobsFileHeader hdr;
	FILE	   *f = NULL;
	uint64		saved = 0;
	int			pass;
	int			i;

	/* the rows per shard first: a saved registry implies them */
	CtasJobShardsSave();
	LWLockAcquire(shared->lock, LW_SHARED);
	hdr.next_job_id = shared->next_job_id + JOBS_ID_RESERVE;
	LWLockRelease(shared->lock);

	hdr.magic = JOBS_MAGIC;
	hdr.version = JOBS_VERSION;
	hdr.job_size = sizeof(CtasJob);
	hdr.stats_size = sizeof(CtasCatalogStats);
	hdr.njobs = snap->njobs;
	hdr.ncatalogs = snap->ncatalogs;
	INIT_CRC32C(hdr.body_crc);
	for (pass = 0; pass < 2; pass++)
	{
		for (i = 0; i < snap->njobs; i++)
		{
			if (job_is_live(&snap->jobs[i]) == (pass == 1))
				COMP_CRC32C(hdr.body_crc, &snap->jobs[i], sizeof(CtasJob));
		}
	}
	COMP_CRC32C(hdr.body_crc, snap->catalogs,
				sizeof(CtasCatalogStats) * snap->ncatalogs);
	FIN_CRC32C(hdr.body_crc);
	INIT_CRC32C(hdr.header_crc);
	COMP_CRC32C(hdr.header_crc, &hdr, offsetof(JobsFileHeader, header_crc));
	FIN_CRC32C(hdr.header_crc);

	f = AllocateFile(JOBS_FILE_TMP, PG_BINARY_W);
	if (f == NULL)
		goto error;
	if (fwrite(&hdr, sizeof(hdr), 1, f) != 1)
		goto error;
	for (pass = 0; pass < 2; pass++)
	{
		for (i = 0; i < snap->njobs; i++)
		{
			if (job_is_live(&snap->jobs[i]) == (pass == 1) &&
				fwrite(&snap->jobs[i], sizeof(CtasJob), 1, f) != 1)
				goto error;
		}
	}
	if (fwrite(snap->catalogs, sizeof(CtasCatalogStats), snap->ncatalogs,
			   f) != (size_t) snap->ncatalogs)
		goto error;
	if (fflush(f) != 0 || pg_fsync(fileno(f)) != 0)
		goto error;
	if (FreeFile(f) != 0)
	{
		f = NULL;
		goto error;
	}
	f = NULL;
	if (durable_rename(JOBS_FILE_TMP, JOBS_FILE, LOG) != 0)
		goto error;
	saved = snap->change_count;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->ids_reserved = Max(shared->ids_reserved, hdr.next_job_id);
	shared->save_failed = false;
	LWLockRelease(shared->lock);
	goto done;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", JOBS_FILE_TMP)));
	if (f)
		FreeFile(f);
	unlink(JOBS_FILE_TMP);
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->save_failed = true;
	LWLockRelease(shared->lock);
done:
	pfree(snap->jobs);
	pfree(snap);
	return saved;
}

/*
 * valid_string
 *		Is the buffer buf of size bytes a NUL-terminated string, valid in
 *		encoding (NULL: any bytes but NUL)?
 */
static bool
valid_string(const char *buf, size_t size, int encoding)
{
	const char *end = memchr(buf, '\0', size);

	if (end == NULL)
		return false;
	return encoding < 0 ||
		pg_verify_mbstr(encoding, buf, end - buf, true);
}

/*
 * valid_job
 *		Does job, read from the file, hold only what the server could have
 *		written?  Its id must be below next_job_id.
 */
static bool
valid_job(const CtasJob *job, int64 next_job_id)
{
	if (job->job_id < 1 || job->job_id >= next_job_id)
		return false;
	if (job->group_id < 0 || job->group_id >= next_job_id)
		return false;
	if ((unsigned int) job->state >= CTAS_JOB_NSTATES)
		return false;
	if (!PG_VALID_BE_ENCODING(job->encoding))
		return false;
	return valid_string(job->catalog, sizeof(job->catalog), job->encoding) &&
		valid_string(job->target, sizeof(job->target), job->encoding) &&
		valid_string(job->mode, sizeof(job->mode), job->encoding) &&
		valid_string(job->gid, sizeof(job->gid), job->encoding) &&
		valid_string(job->notify_url, sizeof(job->notify_url),
					 job->encoding) &&
		valid_string(job->error, sizeof(job->error), job->encoding);
}

/*
 * valid_stats
 *		The same for the counters of one catalog.  Its name comes from a job
 *		of any database, so only its termination can be checked.
 */
static bool
valid_stats(const CtasCatalogStats *st)
{
	return st->catalog[0] != '\0' &&
		valid_string(st->catalog, sizeof(st->catalog), -1) &&
		!isnan(st->duration_sum) && !isinf(st->duration_sum);
}

/*
 * reset_registry
 *		Forget what a damaged file left in the history and the counters.
 */
static void
reset_registry(void)
{
	int			i;

	for (i = 0; i < CtasHistorySize; i++)
	{
		CtasJob    *h = HISTORY(i);

		memset(h, 0, sizeof(CtasJob));
		pg_atomic_init_u64(&h->rows, 0);
		pg_atomic_init_u64(&h->bytes, 0);
	}
	shared->history_head = 0;
	shared->history_count = 0;
	memset(shared->catalogs, 0, sizeof(shared->catalogs));
	shared->ncatalogs = 0;
}

/*
 * load_jobs_file
 *		Fill freshly created shared memory from JOBS_FILE, in the
 *		postmaster.  Jobs that were running or prepared when it was written
 *		come back as in_doubt (failed for streaming loads).  A missing file
 *		is no error.  A damaged one (truncated, wrong size, checksum, a
 *		field the server could not have written) is ignored as a whole, with
 *		a LOG message: the history starts empty.  The job id counter stays
 *		above every id the file gave out: that of its header when the header
 *		is intact, else the current time in microseconds since 2000 (above
 *		any id unless jobs started faster than one a microsecond).  Never
 *		raises an error.
 */
static void
load_jobs_file(void)
{
	FILE	   *f;
	JobsFileHeader hdr;
	struct stat st;
	pg_crc32c	crc;
	char		detail[256];
	bool		header_ok = false;
	int			i;

	f = AllocateFile(JOBS_FILE, PG_BINARY_R);
	if (f == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", JOBS_FILE)));
		return;
	}

	detail[0] = '\0';
	if (fstat(fileno(f), &st) != 0)
	{
		snprintf(detail, sizeof(detail), "Could not stat the file: %m.");
		goto bad;
	}
	if (fread(&hdr, sizeof(hdr), 1, f) != 1)
	{
		snprintf(detail, sizeof(detail),
				 "The file is shorter than its header.");
		goto bad;
	}
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, &hdr, offsetof(JobsFileHeader, header_crc));
	FIN_CRC32C(crc);
	if (!EQ_CRC32C(crc, hdr.header_crc) || hdr.magic != JOBS_MAGIC)
	{
		snprintf(detail, sizeof(detail),
				 "The header's magic number or checksum is wrong.");
		goto bad;
	}
	if (hdr.version != JOBS_VERSION)
	{
		snprintf(detail, sizeof(detail),
				 "The file has format version %u, this server expects %u.",
				 hdr.version, JOBS_VERSION);
		goto bad;
	}
	if (hdr.job_size != sizeof(CtasJob) ||
		hdr.stats_size != sizeof(CtasCatalogStats))
	{
		snprintf(detail, sizeof(detail),
				 "The file's records have %u and %u bytes, this server's %zu and %zu.",
				 hdr.job_size, hdr.stats_size,
				 sizeof(CtasJob), sizeof(CtasCatalogStats));
		goto bad;
	}
	if (hdr.next_job_id < 1)
	{
		snprintf(detail, sizeof(detail),
				 "The header's next job id is " INT64_FORMAT ".",
				 hdr.next_job_id);
		goto bad;
	}
	header_ok = true;
	if (hdr.njobs < 0 || hdr.ncatalogs < 0 ||
		hdr.ncatalogs > MAX_CATALOG_STATS ||
		(uint64) st.st_size != sizeof(hdr) +
		(uint64) hdr.njobs * sizeof(CtasJob) +
		(uint64) hdr.ncatalogs * sizeof(CtasCatalogStats))
	{
		snprintf(detail, sizeof(detail),
				 "The file is %lld bytes long, its header announces %d jobs and %d catalogs.",
				 (long long) st.st_size, hdr.njobs, hdr.ncatalogs);
		goto bad;
	}

	/* the checksum of the whole body first, then its fields */
	INIT_CRC32C(crc);
	for (;;)
	{
		char		buf[8192];
		size_t		n = fread(buf, 1, sizeof(buf), f);

		if (n == 0)
			break;
		COMP_CRC32C(crc, buf, n);
	}
	FIN_CRC32C(crc);
	if (ferror(f) || fseek(f, sizeof(hdr), SEEK_SET) != 0)
	{
		snprintf(detail, sizeof(detail), "Could not read the file: %m.");
		goto bad;
	}
	if (!EQ_CRC32C(crc, hdr.body_crc))
	{
		snprintf(detail, sizeof(detail),
				 "The checksum of the jobs does not match the header.");
		goto bad;
	}

	for (i = 0; i < hdr.njobs; i++)
	{
		CtasJob		job;

		if (fread(&job, sizeof(CtasJob), 1, f) != 1)
		{
			snprintf(detail, sizeof(detail), "Could not read job %d.", i);
			goto bad;
		}
		if (!valid_job(&job, hdr.next_job_id))
		{
			snprintf(detail, sizeof(detail),
					 "Job %d holds a value the server cannot have written.",
					 i);
			goto bad;
		}
		if (job_is_live(&job))
		{
			/* a streaming load keeps what it committed: nothing to decide */
			job.state = strcmp(job.mode, "streaming") == 0 ?
				CTAS_JOB_FAILED : CTAS_JOB_IN_DOUBT;
			strlcpy(job.error, "the server stopped while the job was running",
					sizeof(job.error));
			job.notify_url[0] = '\0';
		}
		add_to_history(&job);
	}
	if (fread(shared->catalogs, sizeof(CtasCatalogStats), hdr.ncatalogs,
			  f) != (size_t) hdr.ncatalogs)
	{
		snprintf(detail, sizeof(detail), "Could not read the counters.");
		goto bad;
	}
	for (i = 0; i < hdr.ncatalogs; i++)
	{
		if (!valid_stats(&shared->catalogs[i]))
		{
			snprintf(detail, sizeof(detail),
					 "The counters of catalog %d hold a value the server cannot have written.",
					 i);
			goto bad;
		}
	}
	shared->ncatalogs = hdr.ncatalogs;
	shared->next_job_id = hdr.next_job_id;
	shared->ids_reserved = hdr.next_job_id;
	FreeFile(f);
	return;

bad:
	FreeFile(f);
	reset_registry();
	shared->next_job_id = header_ok ? hdr.next_job_id :
		Max(GetCurrentTimestamp(), 1);
	shared->ids_reserved = shared->next_job_id;
	ereport(LOG,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("ctas_fed job history file \"%s\" is damaged, starting with an empty history",
					JOBS_FILE),
			 errdetail_internal("%s Job ids continue from " INT64_FORMAT ".",
								detail, shared->next_job_id)));
}
