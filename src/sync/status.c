/*-------------------------------------------------------------------------
 *
 * status.c
 *		  What the running sync workers report, in shared memory, and the
 *		  readers of it: ctas_fed.sync_status() and the sync metrics.
 *
 * One entry per job, found by (database, job), room for
 * SYNC_STATUS_PER_WORKER jobs per possible background worker.  A sync
 * worker (sync/worker.c) attaches to the entry of each job of its stream,
 * writes their counters under the lock once per batch and gives the
 * entries up when it ends; an entry whose worker ended on an error keeps
 * the time the job was last caught up, so lag_seconds goes on growing
 * while no worker runs, until the resolver forgets a stopped or failed
 * job.  The entries also find the
 * workers of a database that DROP DATABASE must stop first
 * (CtasSyncStopDatabase), which also marks the database as stopping under
 * the same lock: a worker that comes later (started just before, not
 * attached yet) finds the mark when it attaches and exits by itself.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/status.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xlog.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "replication/slot.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "storage/standby.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "guc.h"
#include "sync/sync.h"

/* status entries per possible background worker (a worker runs a stream) */
#define SYNC_STATUS_PER_WORKER	4

/*
 * What the running sync workers report, in shared memory: one entry per
 * job, found by (database, job).  The worker of the job writes its entry
 * under the lock once per batch; ctas_fed.sync_status() reads.
 */
typedef struct SyncStatus
{
	Oid			dboid;			/* InvalidOid: free */
	int64		id;
	pid_t		pid;
	char		catalog[NAMEDATALEN];	/* labels of the metrics */
	char		target[CTAS_SYNC_TARGET_LEN];
	char		slot_name[NAMEDATALEN];
	uint64		rows;			/* rows copied plus changes applied */
	uint64		changes;		/* source changes applied by the stream */
	uint64		resyncs;		/* copies into a table that held rows
								 * (sync/resync.c) */
	uint64		copied;			/* rows copied while no worker held the
								 * entry (a join copy, sync/joincopy.c):
								 * the worker that takes it counts them */
	uint64		verify_asked;	/* verify_sync() tickets given out */
	uint64		verify_done;	/* the last one answered */
	int64		verify_check;	/* its row in ctas_fed.sync_checks, or 0 */
	int64		verify_differences; /* keys it found differing */
	TimestampTz verified_at;	/* when, or 0 */
	TimestampTz caught_up_at;	/* everything committed before this had
								 * been applied */
} SyncStatus;

/*
 * A database whose sync workers CtasSyncStopDatabase stopped, and until
 * when new ones may not attach: longer than its own wait and DROP
 * DATABASE's for the other users of the database together (10 s + 5 s),
 * shorter than the pause of the database's resolver (workers/resolver.c, 30 s), which
 * starts the workers again should the command fail.
 */
#define SYNC_STOPPING_SLOTS	8
#define SYNC_STOPPING_SECS	20

typedef struct SyncStopping
{
	Oid			dboid;
	TimestampTz until;
} SyncStopping;

typedef struct SyncShared
{
	LWLock	   *lock;
	SyncStopping stopping[SYNC_STOPPING_SLOTS];
	int			nentries;
	SyncStatus	entries[FLEXIBLE_ARRAY_MEMBER];
} SyncShared;

static SyncShared *sync_shared = NULL;
static SyncStatus *my_status = NULL;	/* of the job being worked for */
static List *my_entries = NIL;	/* of every job of the worker's stream */

static Size
sync_shmem_size(void)
{
	return add_size(offsetof(SyncShared, entries),
					mul_size(mul_size(max_worker_processes,
									  SYNC_STATUS_PER_WORKER),
							 sizeof(SyncStatus)));
}

/*
 * CtasSyncShmemRequest / CtasSyncShmemStartup
 *		The status entries of the sync workers.  Called from the shmem
 *		hooks.
 */
void
CtasSyncShmemRequest(void)
{
	RequestAddinShmemSpace(sync_shmem_size());
	RequestNamedLWLockTranche("ctas_fed syncs", 1);
}

void
CtasSyncShmemStartup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sync_shared = ShmemInitStruct("ctas_fed syncs", sync_shmem_size(), &found);
	if (!found)
	{
		memset(sync_shared, 0, sync_shmem_size());
		sync_shared->lock = &(GetNamedLWLockTranche("ctas_fed syncs"))->lock;
		sync_shared->nentries = max_worker_processes * SYNC_STATUS_PER_WORKER;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * sync_status_release
 *		On exit of a sync worker: free the status entries of its jobs,
 *		unless the worker ends on an error it will be started again after;
 *		then each entry keeps the time its job was last caught up, so that
 *		lag_seconds goes on growing while no worker runs (the remote down,
 *		say).
 */
static void
sync_status_release(int code, Datum arg)
{
	ListCell   *lc;

	LWLockAcquire(sync_shared->lock, LW_EXCLUSIVE);
	foreach(lc, my_entries)
	{
		SyncStatus *e = (SyncStatus *) lfirst(lc);

		if (code == 0)
			e->dboid = InvalidOid;
		else
			e->pid = 0;
	}
	LWLockRelease(sync_shared->lock);
	my_entries = NIL;
	my_status = NULL;
}

/*
 * status_entry_of
 *		The entry of job id of this database, else a free one made its own,
 *		else NULL (they are all taken).  The caller holds sync_shared->lock
 *		exclusively.
 */
static SyncStatus *
status_entry_of(int64 id)
{
	SyncStatus *free_entry = NULL;
	int			i;

	for (i = 0; i < sync_shared->nentries; i++)
	{
		SyncStatus *e = &sync_shared->entries[i];

		if (e->dboid == MyDatabaseId && e->id == id)
			return e;
		if (e->dboid == InvalidOid && free_entry == NULL)
			free_entry = e;
	}
	if (free_entry != NULL)
	{
		memset(free_entry, 0, sizeof(SyncStatus));
		free_entry->dboid = MyDatabaseId;
		free_entry->id = id;
	}
	return free_entry;
}

/*
 * CtasSyncStatusAttach
 *		In a sync worker, once connected to its database: take the status
 *		entry of job id, the one an earlier worker of the job left, else a
 *		free one; none when they are all taken (the job then runs without
 *		counters).  The entry becomes the one the other functions of a
 *		worker use (CtasSyncStatusUse).  Returns false, attaching nothing,
 *		while CtasSyncStopDatabase has the database marked: the worker must
 *		exit.
 */
bool
CtasSyncStatusAttach(int64 id)
{
	static bool registered = false;
	bool		mine;
	TimestampTz now;
	int			i;

	/* tests: a worker connected to its database but not attached yet */
	CtasFaultPointWait("sync_worker_attach");

	now = GetCurrentTimestamp();
	if (!registered)
		before_shmem_exit(sync_status_release, (Datum) 0);
	registered = true;
	my_status = NULL;
	LWLockAcquire(sync_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < SYNC_STOPPING_SLOTS; i++)
	{
		if (sync_shared->stopping[i].dboid == MyDatabaseId &&
			sync_shared->stopping[i].until > now)
		{
			LWLockRelease(sync_shared->lock);
			ereport(LOG,
					(errmsg("ctas_fed sync " INT64_FORMAT ": the worker exits, its database is being dropped or changed",
							id)));
			return false;
		}
	}
	my_status = status_entry_of(id);
	/*
	 * Taken again by this worker (a job it copied again in a copy worker,
	 * sync/joincopy.c): its counters go on.
	 */
	mine = my_status != NULL && list_member_ptr(my_entries, my_status);
	if (my_status != NULL && !mine)
	{
		my_status->pid = MyProcPid;
		/* counters are those of this worker, and its job's copy */
		my_status->rows = my_status->copied;
		my_status->copied = 0;
		my_status->changes = 0;
		my_status->resyncs = 0;
	}
	LWLockRelease(sync_shared->lock);
	if (my_status != NULL && !mine)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);

		my_entries = lappend(my_entries, my_status);
		MemoryContextSwitchTo(oldcxt);
	}
	return true;
}

/*
 * CtasSyncStatusUse
 *		In a sync worker: the functions below report for job id from now
 *		on (nothing when it has no entry).
 */
void
CtasSyncStatusUse(int64 id)
{
	ListCell   *lc;

	my_status = NULL;
	foreach(lc, my_entries)
	{
		SyncStatus *e = (SyncStatus *) lfirst(lc);

		if (e->id == id)
			my_status = e;
	}
}

/*
 * CtasSyncStatusRelease
 *		In a sync worker: free the entry of job id, which left the worker's
 *		stream (stopped) while the others go on, so that neither the
 *		metrics nor ctas_fed.sync_status() show it any longer.
 */
void
CtasSyncStatusRelease(int64 id)
{
	ListCell   *lc;

	foreach(lc, my_entries)
	{
		SyncStatus *e = (SyncStatus *) lfirst(lc);

		if (e->id != id)
			continue;
		LWLockAcquire(sync_shared->lock, LW_EXCLUSIVE);
		e->dboid = InvalidOid;
		LWLockRelease(sync_shared->lock);
		if (my_status == e)
			my_status = NULL;
		my_entries = foreach_delete_current(my_entries, lc);
	}
}

/*
 * CtasSyncStatusForget
 *		In the resolver: free the entry a worker of job id left, once the
 *		job is stopped or failed.
 */
void
CtasSyncStatusForget(int64 id)
{
	int			i;

	if (sync_shared == NULL)
		return;
	LWLockAcquire(sync_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < sync_shared->nentries; i++)
	{
		SyncStatus *e = &sync_shared->entries[i];

		if (e->dboid == MyDatabaseId && e->id == id && e->pid == 0)
			e->dboid = InvalidOid;
	}
	LWLockRelease(sync_shared->lock);
}

/*
 * CtasSyncStatusReport
 *		In a sync worker: add to its counters; caught_up_at when not 0.
 */
void
CtasSyncStatusReport(uint64 rows, uint64 changes, TimestampTz caught_up_at)
{
	if (my_status == NULL)
		return;
	LWLockAcquire(sync_shared->lock, LW_EXCLUSIVE);
	my_status->rows += rows;
	my_status->changes += changes;
	if (caught_up_at != 0)
		my_status->caught_up_at = caught_up_at;
	LWLockRelease(sync_shared->lock);
}

/*
 * CtasSyncStatusResynced
 *		In a sync process: count a resync of job id in its entry, whichever
 *		worker has it (the copy again runs in a copy worker, sync/joincopy.c,
 *		while the stream's worker keeps the entry).
 */
void
CtasSyncStatusResynced(int64 id)
{
	int			i;

	LWLockAcquire(sync_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < sync_shared->nentries; i++)
	{
		SyncStatus *e = &sync_shared->entries[i];

		if (e->dboid == MyDatabaseId && e->id == id)
		{
			e->resyncs++;
			break;
		}
	}
	LWLockRelease(sync_shared->lock);
}

/*
 * CtasSyncStatusCopied
 *		In a sync process: add the rows of a copy of job id to its entry,
 *		whichever process copied them.  The copy worker of a join
 *		(sync/joincopy.c) holds no entry: its rows go to the entry of the
 *		stream's worker when it has the job (a copy again), else to one
 *		that no worker holds yet, made here if need be, and which the
 *		stream's worker takes when the job joins (CtasSyncStatusAttach),
 *		so that the jobs view's rows count the copy.
 */
void
CtasSyncStatusCopied(int64 id, uint64 rows)
{
	SyncStatus *entry;

	if (sync_shared == NULL)
		return;
	LWLockAcquire(sync_shared->lock, LW_EXCLUSIVE);
	entry = status_entry_of(id);
	if (entry != NULL && entry->pid != 0)
		entry->rows += rows;
	else if (entry != NULL)
	{
		/* a copy replaces the table: that of a copy done again counts */
		entry->rows = rows;
		entry->copied = rows;
	}
	LWLockRelease(sync_shared->lock);
}

/*
 * CtasSyncStatusAskVerify
 *		In a backend (sync/verify.c): ask the worker of job id for a check,
 *		setting its latch.  Returns false when no worker runs the job;
 *		else *ticket is the answer to wait for (CtasSyncStatusVerifyDone)
 *		and *pid the worker's.
 */
bool
CtasSyncStatusAskVerify(int64 id, uint64 *ticket, pid_t *pid)
{
	int			i;
	bool		found = false;

	if (sync_shared == NULL)
		return false;
	LWLockAcquire(sync_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < sync_shared->nentries; i++)
	{
		SyncStatus *e = &sync_shared->entries[i];

		if (e->dboid == MyDatabaseId && e->id == id && e->pid != 0)
		{
			*ticket = ++e->verify_asked;
			*pid = e->pid;
			found = true;
			break;
		}
	}
	LWLockRelease(sync_shared->lock);
	if (found)
	{
		PGPROC	   *proc = BackendPidGetProc(*pid);

		if (proc != NULL)
			SetLatch(&proc->procLatch);
	}
	return found;
}

/*
 * CtasSyncStatusVerifyDone
 *		In a backend: has the worker of job id answered ticket?  Then
 *		*check is the row of the answer (0: none, the job left the worker).
 *		*pid is the worker's now (0: none).
 */
bool
CtasSyncStatusVerifyDone(int64 id, uint64 ticket, int64 *check, pid_t *pid)
{
	int			i;
	bool		done = false;

	*pid = 0;
	LWLockAcquire(sync_shared->lock, LW_SHARED);
	for (i = 0; i < sync_shared->nentries; i++)
	{
		SyncStatus *e = &sync_shared->entries[i];

		if (e->dboid == MyDatabaseId && e->id == id)
		{
			*pid = e->pid;
			if (e->verify_done >= ticket)
			{
				done = true;
				*check = e->verify_check;
			}
		}
	}
	LWLockRelease(sync_shared->lock);
	return done;
}

/*
 * CtasSyncStatusVerifyWanted
 *		In a sync worker: a job of its stream whose check was asked for and
 *		not answered yet, with the ticket to answer; 0 when none.
 */
int64
CtasSyncStatusVerifyWanted(uint64 *ticket)
{
	ListCell   *lc;
	int64		id = 0;

	LWLockAcquire(sync_shared->lock, LW_SHARED);
	foreach(lc, my_entries)
	{
		SyncStatus *e = (SyncStatus *) lfirst(lc);

		if (e->verify_asked > e->verify_done)
		{
			id = e->id;
			*ticket = e->verify_asked;
			break;
		}
	}
	LWLockRelease(sync_shared->lock);
	return id;
}

/*
 * CtasSyncStatusVerified
 *		In a sync worker: answer ticket of job id with row check of
 *		ctas_fed.sync_checks (0: none) that found differences keys
 *		differing (-1: no answer).
 */
void
CtasSyncStatusVerified(int64 id, uint64 ticket, int64 check,
					   int64 differences)
{
	ListCell   *lc;

	LWLockAcquire(sync_shared->lock, LW_EXCLUSIVE);
	foreach(lc, my_entries)
	{
		SyncStatus *e = (SyncStatus *) lfirst(lc);

		if (e->id != id)
			continue;
		e->verify_done = ticket;
		e->verify_check = check;
		if (differences >= 0)
		{
			e->verify_differences = differences;
			e->verified_at = GetCurrentTimestamp();
		}
	}
	LWLockRelease(sync_shared->lock);
}

/*
 * CtasSyncStatusLabels
 *		In a sync worker: the metric labels and the slot of its job, once
 *		loaded.
 */
void
CtasSyncStatusLabels(const char *catalog, const char *schema,
					 const char *table, const char *slot_name)
{
	if (my_status == NULL)
		return;
	LWLockAcquire(sync_shared->lock, LW_EXCLUSIVE);
	strlcpy(my_status->catalog, catalog, NAMEDATALEN);
	snprintf(my_status->target, CTAS_SYNC_TARGET_LEN, "%s.%s",
			 quote_identifier(schema), quote_identifier(table));
	strlcpy(my_status->slot_name, slot_name, NAMEDATALEN);
	LWLockRelease(sync_shared->lock);
}

/*
 * CtasSyncStatusRows
 *		In a sync worker: the rows its counters hold (0 without an entry).
 */
uint64
CtasSyncStatusRows(void)
{
	return my_status ? my_status->rows : 0;
}

/*
 * CtasSyncMetricsSnapshot
 *		The running sync workers of every database, for the metrics: their
 *		labels, lag and changes applied.  Needs no database connection (the
 *		notifier pushes the metrics too).  Returns the number of entries
 *		and a palloc'd array in *out.
 */
int
CtasSyncMetricsSnapshot(CtasSyncMetric **out)
{
	CtasSyncMetric *m;
	XLogRecPtr	current = GetXLogWriteRecPtr();
	TimestampTz now = GetCurrentTimestamp();
	int			n = 0;
	int			i;

	*out = NULL;
	if (sync_shared == NULL)
		return 0;
	m = palloc0(sizeof(CtasSyncMetric) * Max(sync_shared->nentries, 1));
	LWLockAcquire(sync_shared->lock, LW_SHARED);
	for (i = 0; i < sync_shared->nentries; i++)
	{
		SyncStatus *e = &sync_shared->entries[i];

		if (e->dboid == InvalidOid || e->catalog[0] == '\0')
			continue;
		strlcpy(m[n].catalog, e->catalog, NAMEDATALEN);
		strlcpy(m[n].target, e->target, CTAS_SYNC_TARGET_LEN);
		strlcpy(m[n].slot_name, e->slot_name, NAMEDATALEN);
		m[n].changes = e->changes;
		m[n].resyncs = e->resyncs;
		m[n].verify_differences = e->verified_at == 0 ? -1 :
			e->verify_differences;
		m[n].verified_at = e->verified_at == 0 ? 0 :
			(double) (e->verified_at - SetEpochTimestamp()) / USECS_PER_SEC;
		m[n].lag_seconds = e->caught_up_at == 0 ? -1 :
			(double) (now - e->caught_up_at) / USECS_PER_SEC;
		n++;
	}
	LWLockRelease(sync_shared->lock);

	/*
	 * The WAL each slot has not confirmed, as lag_bytes of the jobs view,
	 * and the WAL it holds (from its restart_lsn), as wal_held_bytes
	 */
	for (i = 0; i < n; i++)
	{
		ReplicationSlot *slot;

		m[i].lag_bytes = -1;
		m[i].wal_held_bytes = -1;
		LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
		slot = SearchNamedReplicationSlot(m[i].slot_name, false);
		if (slot != NULL)
		{
			XLogRecPtr	confirmed;
			XLogRecPtr	restart;

			SpinLockAcquire(&slot->mutex);
			confirmed = slot->data.confirmed_flush;
			restart = slot->data.restart_lsn;
			SpinLockRelease(&slot->mutex);
			m[i].lag_bytes = current > confirmed ? (double) (current - confirmed) : 0;
			if (restart != InvalidXLogRecPtr)
				m[i].wal_held_bytes = current > restart ?
					(double) (current - restart) : 0;
		}
		LWLockRelease(ReplicationSlotControlLock);
	}
	*out = m;
	return n;
}

/* restart_lsn this far behind confirmed_flush: write a running_xacts */
#define SYNC_RESTART_LAG_BYTES	(64 * 1024)
/* and not more often than this, ms */
#define SYNC_RESTART_NUDGE_MS	200

/*
 * CtasSyncKeepRestartNear
 *		In a sync worker, after it advanced its slot: when the slot's
 *		restart_lsn lies more than SYNC_RESTART_LAG_BYTES behind its
 *		confirmed position, write a running_xacts record (as a checkpoint
 *		does, and the background writer every 15 s while the server
 *		writes), at most every SYNC_RESTART_NUDGE_MS.  Logical decoding can
 *		only restart where such a record lets it know every running
 *		transaction, so without one the slot's restart_lsn stays behind:
 *		the slot holds that WAL (wal_held_bytes), and each peek decodes
 *		it all again from there before it reaches the changes not yet
 *		confirmed, which under steady writes cost the worker most of its
 *		CPU (docs/sync-performance.md).  The next peek and advance read
 *		the record and move restart_lsn up to it, or to the oldest
 *		transaction still running then.  Never ERROR on a missing slot.
 */
void
CtasSyncKeepRestartNear(const char *slot_name)
{
	static TimestampTz last = 0;
	ReplicationSlot *slot;
	XLogRecPtr	restart = InvalidXLogRecPtr;
	XLogRecPtr	confirmed = InvalidXLogRecPtr;
	TimestampTz now = GetCurrentTimestamp();

	if (RecoveryInProgress() || !XLogStandbyInfoActive() ||
		!TimestampDifferenceExceeds(last, now, SYNC_RESTART_NUDGE_MS))
		return;
	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	slot = SearchNamedReplicationSlot(slot_name, false);
	if (slot != NULL)
	{
		SpinLockAcquire(&slot->mutex);
		restart = slot->data.restart_lsn;
		confirmed = slot->data.confirmed_flush;
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);
	if (restart == InvalidXLogRecPtr || confirmed < restart ||
		confirmed - restart < SYNC_RESTART_LAG_BYTES)
		return;
	last = now;
	(void) LogStandbySnapshot();
}

/* does a sync worker of dboid still run, or hold a slot of dboid active? */
static bool
database_busy(Oid dboid)
{
	int			nslots;
	int			nactive;
	bool		busy = false;
	int			i;

	LWLockAcquire(sync_shared->lock, LW_SHARED);
	for (i = 0; i < sync_shared->nentries; i++)
	{
		if (sync_shared->entries[i].dboid == dboid &&
			sync_shared->entries[i].pid != 0)
			busy = true;
	}
	LWLockRelease(sync_shared->lock);
	(void) ReplicationSlotsCountDBSlots(dboid, &nslots, &nactive);
	return busy || nactive > 0;
}

/*
 * CtasSyncStopDatabase
 *		Before DROP DATABASE and the other commands that need the database
 *		to themselves (utility.c), after the database's resolver, which
 *		starts the sync workers, is paused: mark dboid as stopping for
 *		SYNC_STOPPING_SECS, terminate its sync workers and, when there were
 *		any, wait up to 10 s until none runs and none of the database's
 *		replication slots is active, so that DROP DATABASE finds them
 *		inactive and drops them.  A worker registered before the resolver
 *		was paused that attaches only after this (CtasSyncStatusAttach)
 *		sees the mark and exits by itself, within the time DROP DATABASE
 *		waits for the other users of the database.  A job whose worker is
 *		stopped this way is started again by the resolver, should the
 *		command fail.  Raises an error only on interrupts.
 */
void
CtasSyncStopDatabase(Oid dboid)
{
	bool		signalled = false;
	TimestampTz now = GetCurrentTimestamp();
	SyncStopping *mark = NULL;
	int			i;

	if (sync_shared == NULL || !OidIsValid(dboid))
		return;

	LWLockAcquire(sync_shared->lock, LW_EXCLUSIVE);
	/* the database's own mark, else a lapsed one, else the oldest */
	for (i = 0; i < SYNC_STOPPING_SLOTS; i++)
	{
		SyncStopping *s = &sync_shared->stopping[i];

		if (s->dboid == dboid)
		{
			mark = s;
			break;
		}
		if (mark == NULL || s->until < mark->until)
			mark = s;
	}
	mark->dboid = dboid;
	mark->until = TimestampTzPlusMilliseconds(now, SYNC_STOPPING_SECS * 1000);
	for (i = 0; i < sync_shared->nentries; i++)
	{
		SyncStatus *e = &sync_shared->entries[i];

		if (e->dboid == dboid && e->pid != 0)
		{
			(void) kill(e->pid, SIGTERM);
			signalled = true;
		}
	}
	LWLockRelease(sync_shared->lock);

	/* other users of the database's slots are not ours to wait for */
	for (i = 0; signalled && i < 1000 && database_busy(dboid); i++)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

PG_FUNCTION_INFO_V1(ctas_fed_sync_status);

/*
 * ctas_fed_sync_status
 *		ctas_fed.sync_status(): the running sync workers of this database
 *		and their counters.
 */
Datum
ctas_fed_sync_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	if (sync_shared == NULL)
		PG_RETURN_VOID();
	LWLockAcquire(sync_shared->lock, LW_SHARED);
	for (i = 0; i < sync_shared->nentries; i++)
	{
		SyncStatus *e = &sync_shared->entries[i];
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		if (e->dboid != MyDatabaseId)
			continue;
		values[0] = Int64GetDatum(e->id);
		values[1] = Int32GetDatum(e->pid);
		nulls[1] = e->pid == 0;
		values[2] = Int64GetDatum((int64) e->rows);
		values[3] = Int64GetDatum((int64) e->changes);
		values[4] = TimestampTzGetDatum(e->caught_up_at);
		nulls[4] = e->caught_up_at == 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values,
							 nulls);
	}
	LWLockRelease(sync_shared->lock);
	PG_RETURN_VOID();
}
