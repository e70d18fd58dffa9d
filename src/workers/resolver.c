/*-------------------------------------------------------------------------
 *
 * resolver.c
 *		  The ctas_fed resolvers: one per database that has the extension
 *		  (started by the launcher, launcher.c), which finish or undo what
 *		  crashes and failed commits left in doubt and tick the database's
 *		  continuous syncs; and the resolver slots in shared memory through
 *		  which backends wake them.
 *
 * A resolver exits when the extension is dropped (it looks every second)
 * or when its database goes.  DROP DATABASE, ALTER DATABASE ... RENAME or
 * SET TABLESPACE and CREATE DATABASE ... TEMPLATE fail while another
 * process is connected to the database, so the ProcessUtility hook first
 * stops the resolver of that database and keeps it stopped for
 * RESOLVER_PAUSE_SECS (CtasResolverStopDatabase), as TimescaleDB stops
 * its scheduler.
 *
 * A backend that leaves anything in doubt wakes its database's resolver
 * (CtasResolverWake), which resolves at once and, while anything stays in
 * doubt (a job of an unreachable catalog, a gid still in doubt), again
 * after 1 s, 2 s, 4 s, then every 8 s (or every ctas_fed.resolver_naptime
 * if that is shorter), so that the work ends within about 10 s after its
 * catalog is reachable again; once nothing is left, it resolves every
 * naptime.  Each (catalog, user mapping) is resolved in a
 * subtransaction with a deadline of ctas_fed.resolve_timeout
 * (CtasResolveCatalog), so a catalog that is down or never answers costs
 * that much and no more, and the others go on.
 *
 * Resolution connects to each catalog once per user mapping, so that a
 * prepared transaction is finished by the remote role that prepared it,
 * and each target decides each of this cluster's gids from the commit
 * status of the local transaction it names (the targets' resolve.c).
 * Gids of jobs whose backend is still finishing them are left to that
 * backend.  In each database one resolution runs at a time (the resolver
 * or a ctas_fed.resolve_in_doubt() call): a session-level lock of that
 * database (CtasResolverLock).  Two databases whose catalogs reach the
 * same remote database may both see a gid; the second COMMIT PREPARED of
 * it fails, which leaves nothing wrong, and is retried.
 *
 * The jobs still in doubt are settled by the resolver of their database:
 * from what resolution found, and from the local transaction's status
 * alone when that is enough (see decide_in_doubt_jobs).
 *
 * SIGHUP reloads the configuration; SIGTERM is die(): a resolver waiting
 * on a remote server is interrupted at once.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/workers/resolver.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "gid.h"
#include "guc.h"
#include "jobs.h"
#include "sync/sync.h"
#include "target.h"
#include "targets.h"
#include "workers/workers_int.h"

#define RESOLVER_FIRST_RETRY_MS	1000	/* first retry after work in doubt */
#define RESOLVER_MAX_RETRY_MS	8000	/* so that it ends within ~10 s */
#define RESOLVER_PAUSE_SECS		30	/* no restart after a DROP DATABASE */

/* field4 of the advisory lock tag of the resolution lock (cf. Citus) */
#define CTAS_LOCKTAG_RESOLVER	0xCF01

ResolverShared *CtasResolvers = NULL;

/* per-catalog deadline of CtasResolveCatalog */
static TimeoutId resolve_timeout_id = MAX_TIMEOUTS;
static volatile sig_atomic_t resolve_timed_out = false;

PGDLLEXPORT void ctas_fed_resolver_main(Datum main_arg);

static bool resolve_all(void);
static void resolver_on_exit(int code, Datum arg);
static int	decide_in_doubt_jobs(List *unresolved, List *scanned);

static Size
resolver_shmem_size(void)
{
	return add_size(offsetof(ResolverShared, slots),
					mul_size(max_worker_processes, sizeof(ResolverSlot)));
}

/*
 * CtasResolverShmemRequest / CtasResolverShmemStartup
 *		The resolver slots: one per possible background worker, since
 *		each running resolver is one.  Called from the shmem hooks.
 */
void
CtasResolverShmemRequest(void)
{
	RequestAddinShmemSpace(resolver_shmem_size());
	RequestNamedLWLockTranche("ctas_fed resolvers", 1);
}

void
CtasResolverShmemStartup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	CtasResolvers = ShmemInitStruct("ctas_fed resolvers", resolver_shmem_size(),
							  &found);
	if (!found)
	{
		memset(CtasResolvers, 0, resolver_shmem_size());
		CtasResolvers->lock = &(GetNamedLWLockTranche("ctas_fed resolvers"))->lock;
		CtasResolvers->nslots = max_worker_processes;
	}
	LWLockRelease(AddinShmemInitLock);
}

/* the slot of database dboid, or NULL; caller holds the lock */
ResolverSlot *
CtasResolverFindSlot(Oid dboid)
{
	int			i;

	for (i = 0; i < CtasResolvers->nslots; i++)
	{
		if (CtasResolvers->slots[i].dboid == dboid)
			return &CtasResolvers->slots[i];
	}
	return NULL;
}

/* a new slot for dboid, or NULL when all are taken; caller holds the lock */
ResolverSlot *
CtasResolverAddSlot(Oid dboid)
{
	ResolverSlot *slot = CtasResolverFindSlot(InvalidOid);

	if (slot == NULL)
		return NULL;
	memset(slot, 0, sizeof(ResolverSlot));
	slot->dboid = dboid;
	return slot;
}

/*
 * CtasResolverWake
 *		Called by backends of database dboid: with now, something was left
 *		in doubt and the resolver should resolve at once (and retry with
 *		backoff); without, the extension is in use, so a resolver must be
 *		running.  Cheap when it is; never raises an error.
 */
void
CtasResolverWake(Oid dboid, bool now)
{
	ResolverSlot *slot;
	bool		running;

	if (CtasResolvers == NULL || !OidIsValid(dboid))
		return;

	if (!now)
	{
		LWLockAcquire(CtasResolvers->lock, LW_SHARED);
		slot = CtasResolverFindSlot(dboid);
		running = slot != NULL && slot->pid != 0;
		LWLockRelease(CtasResolvers->lock);
		if (running)
			return;
	}

	LWLockAcquire(CtasResolvers->lock, LW_EXCLUSIVE);
	slot = CtasResolverFindSlot(dboid);
	if (slot == NULL)
		slot = CtasResolverAddSlot(dboid);
	if (slot == NULL)
		CtasResolvers->rescan = true;
	else if (slot->pid != 0)
	{
		if (now)
		{
			slot->wake = true;
			SetLatch(slot->latch);
		}
	}
	else
	{
		slot->wanted = true;
		slot->no_extension = false;
		if (now)
			slot->wake = true;
	}
	if ((slot == NULL || slot->pid == 0) && CtasResolvers->launcher_latch)
		SetLatch(CtasResolvers->launcher_latch);
	LWLockRelease(CtasResolvers->lock);
}

/*
 * CtasResolverNudge
 *		Have the resolver of database dboid look at its sync jobs now
 *		(CtasSyncTick) rather than at its next round, without a round of
 *		resolution: called once a transaction that created a sync job has
 *		committed, so that its worker starts at once.  Starts a resolver
 *		when there is none, as CtasResolverWake.  Never raises an error.
 */
void
CtasResolverNudge(Oid dboid)
{
	ResolverSlot *slot;
	Latch	   *latch = NULL;

	if (CtasResolvers == NULL || !OidIsValid(dboid))
		return;
	LWLockAcquire(CtasResolvers->lock, LW_SHARED);
	slot = CtasResolverFindSlot(dboid);
	if (slot != NULL && slot->pid != 0)
		latch = slot->latch;
	if (latch != NULL)
		SetLatch(latch);
	LWLockRelease(CtasResolvers->lock);
	if (latch == NULL)
		CtasResolverWake(dboid, false);
}

/*
 * CtasResolverWakeAtCommit's and CtasResolverNudgeAtCommit's request for
 * the current transaction, and their transaction callback
 */
#define AT_COMMIT_NONE	0
#define AT_COMMIT_WAKE	1		/* CtasResolverWake(.., false) */
#define AT_COMMIT_NUDGE 2		/* CtasResolverNudge */
static int	wake_at_commit = AT_COMMIT_NONE;

static void
wake_at_commit_callback(XactEvent event, void *arg)
{
	if (wake_at_commit == AT_COMMIT_NONE)
		return;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
	{
		int			what = wake_at_commit;

		wake_at_commit = AT_COMMIT_NONE;
		if (what == AT_COMMIT_NUDGE)
			CtasResolverNudge(MyDatabaseId);
		else
			CtasResolverWake(MyDatabaseId, false);
	}
	else if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
			 event == XACT_EVENT_PREPARE)
		wake_at_commit = AT_COMMIT_NONE;
}

static void
request_at_commit(int what)
{
	static bool registered = false;

	if (!registered)
	{
		RegisterXactCallback(wake_at_commit_callback, NULL);
		registered = true;
	}
	wake_at_commit = Max(wake_at_commit, what);
}

/*
 * CtasResolverWakeAtCommit
 *		Ask for a resolver in this database once the current transaction
 *		commits: called after CREATE EXTENSION ctas_fed, which a resolver
 *		started earlier would not see.
 */
void
CtasResolverWakeAtCommit(void)
{
	request_at_commit(AT_COMMIT_WAKE);
}

/*
 * CtasResolverNudgeAtCommit
 *		CtasResolverNudge this database once the current transaction
 *		commits: called when a sync job is created (sync/statement.c), so that its
 *		worker starts right after the commit rather than up to a second
 *		later.  Nothing happens if the transaction aborts.
 */
void
CtasResolverNudgeAtCommit(void)
{
	request_at_commit(AT_COMMIT_NUDGE);
}

/*
 * CtasResolverStopDatabase
 *		Stop the resolver of database dboid, and keep it stopped for
 *		RESOLVER_PAUSE_SECS: called before DROP DATABASE and the other
 *		commands that need the database to themselves.  Waits up to 10 s
 *		for the resolver to exit.  Raises an error only on interrupts.
 */
void
CtasResolverStopDatabase(Oid dboid)
{
	ResolverSlot *slot;
	pid_t		pid = 0;
	int			i;

	if (CtasResolvers == NULL || !OidIsValid(dboid))
		return;

	LWLockAcquire(CtasResolvers->lock, LW_EXCLUSIVE);
	slot = CtasResolverFindSlot(dboid);
	if (slot != NULL)
	{
		slot->paused_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 RESOLVER_PAUSE_SECS * 1000);
		pid = slot->pid;
	}
	LWLockRelease(CtasResolvers->lock);
	if (pid == 0)
		return;

	(void) kill(pid, SIGTERM);
	for (i = 0; i < 1000; i++)
	{
		bool		gone;

		LWLockAcquire(CtasResolvers->lock, LW_SHARED);
		gone = slot->dboid != dboid || slot->pid != pid;
		LWLockRelease(CtasResolvers->lock);
		if (gone)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * CtasResolverLock
 *		Take the resolution lock of the current database: a session-level
 *		lock, so that it spans the transactions of a round and goes with
 *		the process if it dies.  With wait, waits for it (interruptibly,
 *		subject to lock_timeout); without, returns false when another
 *		process holds it.
 */
bool
CtasResolverLock(bool wait)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, 0, 0, CTAS_LOCKTAG_RESOLVER);
	return LockAcquire(&tag, ExclusiveLock, true, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

void
CtasResolverUnlock(void)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, 0, 0, CTAS_LOCKTAG_RESOLVER);
	LockRelease(&tag, ExclusiveLock, true);
}


/*
 * resolve_timeout_handler
 *		The deadline of one catalog passed: cancel what runs, as the
 *		statement timeout does.  Signal handler.
 */
static void
resolve_timeout_handler(void)
{
	resolve_timed_out = true;
	InterruptPending = true;
	QueryCancelPending = true;
	SetLatch(MyLatch);
}

/*
 * CtasResolveCatalog
 *		Resolve the catalog serverid as local user userid (with
 *		check_usage, that user needs USAGE on it), in a subtransaction and
 *		within ctas_fed.resolve_timeout.  emit is called with arg for every
 *		object found, as the writer's resolve does.
 *
 * Returns true when the catalog was resolved, with *umid set to the user
 * mapping used.  Otherwise returns false with *error set to the message of
 * the error, followed by its detail in parentheses on the same line when
 * it has one (palloc'd in the caller's memory context); the subtransaction
 * is rolled back, so that the caller can go on with other catalogs.  A
 * query cancel that is not this deadline is raised again, so that the user
 * can still interrupt ctas_fed.resolve_in_doubt().
 * Must be called in a transaction.
 */
bool
CtasResolveCatalog(Oid serverid, Oid userid, bool check_usage,
				   void (*emit) (void *arg, const char *object,
								 const char *action),
				   void *arg, Oid *umid, char **error)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = false;

	if (resolve_timeout_id == MAX_TIMEOUTS)
		resolve_timeout_id = RegisterTimeout(USER_TIMEOUT,
											 resolve_timeout_handler);

	*error = NULL;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		CtasCatalog *catalog;
		const CtasTargetRoutine *routine;

		resolve_timed_out = false;
		if (CtasResolveTimeout > 0)
			enable_timeout_after(resolve_timeout_id, CtasResolveTimeout * 1000);
		catalog = CtasGetCatalog(serverid, userid, check_usage, true);
		routine = CtasCatalogRoutine(catalog);
		if (routine->resolve)
			routine->resolve(catalog, emit, arg);
		*umid = catalog->umid;
		disable_timeout(resolve_timeout_id, false);
		/* a deadline that passed just now must not cancel what follows */
		if (resolve_timed_out)
			QueryCancelPending = false;
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		ok = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		timed_out;

		disable_timeout(resolve_timeout_id, false);
		timed_out = resolve_timed_out;
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;

		if (timed_out)
			*error = psprintf("no answer within ctas_fed.resolve_timeout (%d s)",
							  CtasResolveTimeout);
		else if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			ReThrowError(edata);
		else if (edata->detail)
		{
			/* one line: libpq's reasons come with line breaks and tabs */
			char	   *detail = pstrdup(edata->detail);
			char	   *c;

			for (c = detail; *c; c++)
				if (*c == '\n' || *c == '\t' || *c == '\r')
					*c = ' ';
			*error = psprintf("%s (%s)",
							  edata->message ? edata->message : "unknown error",
							  detail);
		}
		else
			*error = pstrdup(edata->message ? edata->message : "unknown error");
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return ok;
}

/*
 * extension_installed
 *		Is ctas_fed installed in the resolver's database?  Starts and
 *		commits a transaction.
 */
static bool
extension_installed(void)
{
	bool		found;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	found = OidIsValid(get_extension_oid("ctas_fed", true));
	CommitTransactionCommand();
	return found;
}

/*
 * ctas_fed_resolver_main
 *		The resolver of one database (main_arg, slot number in bgw_extra):
 *		resolve at start, when woken, with backoff while work stays in
 *		doubt, and every naptime; exit when the extension is not there.
 */
void
ctas_fed_resolver_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	int			slotno;
	ResolverSlot *slot;
	TimestampTz next_round = 0;
	int			backoff_ms = RESOLVER_FIRST_RETRY_MS;

	memcpy(&slotno, MyBgworkerEntry->bgw_extra, sizeof(int));
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("ctas_fed resolver");

	slot = &CtasResolvers->slots[slotno];
	LWLockAcquire(CtasResolvers->lock, LW_EXCLUSIVE);
	/* a DROP DATABASE may have begun while we were starting */
	if (slot->dboid != dboid || slot->paused_until > GetCurrentTimestamp())
	{
		LWLockRelease(CtasResolvers->lock);
		proc_exit(0);
	}
	slot->pid = MyProcPid;
	slot->latch = MyLatch;
	LWLockRelease(CtasResolvers->lock);
	before_shmem_exit(resolver_on_exit, Int32GetDatum(slotno));

	for (;;)
	{
		bool		wake;
		TimestampTz now;
		long		wait_ms;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		if (!extension_installed())
		{
			LWLockAcquire(CtasResolvers->lock, LW_EXCLUSIVE);
			slot->no_extension = true;
			LWLockRelease(CtasResolvers->lock);
			proc_exit(0);
		}

		/* continuous sync: start workers, release slots */
		CtasSyncTick();

		LWLockAcquire(CtasResolvers->lock, LW_EXCLUSIVE);
		wake = slot->wake;
		slot->wake = false;
		LWLockRelease(CtasResolvers->lock);
		if (wake)
		{
			next_round = 0;
			backoff_ms = RESOLVER_FIRST_RETRY_MS;
		}

		now = GetCurrentTimestamp();
		if (now >= next_round)
		{
			if (resolve_all())
			{
				/* something stays in doubt: again soon, then less often */
				next_round = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 backoff_ms);
				backoff_ms = Min(backoff_ms * 2,
								 Min(RESOLVER_MAX_RETRY_MS,
									 CtasResolverNaptime * 1000));
			}
			else
			{
				next_round = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 CtasResolverNaptime * 1000);
				backoff_ms = RESOLVER_FIRST_RETRY_MS;
			}
			now = GetCurrentTimestamp();
		}

		/* at least every second: a dropped extension ends the resolver */
		wait_ms = Min(1000L, TimestampDifferenceMilliseconds(now, next_round));
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(wait_ms, 1L), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* the slot is no longer served once the resolver exits */
static void
resolver_on_exit(int code, Datum arg)
{
	ResolverSlot *slot = &CtasResolvers->slots[DatumGetInt32(arg)];

	LWLockAcquire(CtasResolvers->lock, LW_EXCLUSIVE);
	if (slot->pid == MyProcPid)
	{
		slot->pid = 0;
		slot->latch = NULL;
	}
	LWLockRelease(CtasResolvers->lock);
	if (CtasResolvers->launcher_latch)
		SetLatch(CtasResolvers->launcher_latch);
}

/* what one resolution round saw */
typedef struct ResolveState
{
	List	   *unresolved;		/* gids left or failed */
	List	   *scanned;		/* (serverid, umid) pairs resolved without
								 * error, as two-element OID lists */
	const char *catalog;		/* name of the catalog being resolved */
} ResolveState;

static void
worker_emit(void *arg, const char *object, const char *action)
{
	ResolveState *rs = (ResolveState *) arg;

	if (strcmp(action, "committed") == 0)
		CtasJobsResolveGid(object, CTAS_JOB_COMMITTED);
	else if (strcmp(action, "rolled back") == 0)
		CtasJobsResolveGid(object, CTAS_JOB_ABORTED);
	else if (strncmp(action, "dropped", 7) != 0)
		rs->unresolved = lappend(rs->unresolved, pstrdup(object));
	ereport(LOG,
			(errmsg("ctas_fed resolver: catalog \"%s\": %s: %s",
					rs->catalog, object, action)));
}

/*
 * in_doubt_first
 *		pairs (as resolve_all lists them) reordered so that the catalogs
 *		with jobs of this database in doubt come first: the work that
 *		waits is not held up by a catalog that takes its whole deadline.
 *		The order is otherwise kept.  Result in the current context.
 */
static List *
in_doubt_first(List *pairs)
{
	CtasJobsSnapshotData *snap = CtasJobsSnapshot();
	List	   *first = NIL;
	List	   *rest = NIL;
	ListCell   *lc;

	foreach(lc, pairs)
	{
		Oid			serverid = linitial_oid(linitial(lfirst(lc)));
		bool		waits = false;
		int			i;

		for (i = 0; i < snap->njobs && !waits; i++)
			waits = snap->jobs[i].state == CTAS_JOB_IN_DOUBT &&
				snap->jobs[i].dbid == MyDatabaseId &&
				snap->jobs[i].serverid == serverid;
		if (waits)
			first = lappend(first, lfirst(lc));
		else
			rest = lappend(rest, lfirst(lc));
	}
	return list_concat(first, rest);
}

/*
 * resolve_all
 *		One round of resolution over the catalogs of the resolver's
 *		database, each (catalog, user mapping) on its own
 *		(CtasResolveCatalog), those with jobs in doubt first, then the
 *		decision of the in-doubt jobs of this database.  Everything is allocated in a memory context of the
 *		round.  Returns true when a job of this database stays in doubt or
 *		when the round could not run, so that the caller tries again soon.
 */
static bool
resolve_all(void)
{
	MemoryContext round_cxt;
	MemoryContext old;
	ResolveState rs = {NIL, NIL, NULL};
	bool		pending = false;

	if (!CtasResolverLock(false))
		return true;			/* a resolve_in_doubt() call is at it */

	round_cxt = AllocSetContextCreate(TopMemoryContext, "ctas_fed resolver round",
									  ALLOCSET_DEFAULT_SIZES);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "ctas_fed: resolving");
	old = MemoryContextSwitchTo(round_cxt);

	PG_TRY();
	{
		List	   *pairs = NIL;
		ListCell   *lc;

		/* every (server, mapped user) of this database */
		foreach(lc, CtasListCatalogs(true))
		{
			CtasCatalogRef *ref = lfirst(lc);

			pairs = lappend(pairs,
							list_make2(list_make2_oid(ref->serverid,
													  ref->userid),
									   ref->name));
		}

		pairs = in_doubt_first(pairs);
		foreach(lc, pairs)
		{
			List	   *ids = linitial(lfirst(lc));
			Oid			umid;
			char	   *error;

			rs.catalog = lsecond(lfirst(lc));
			if (CtasResolveCatalog(linitial_oid(ids), lsecond_oid(ids), false,
								   worker_emit, &rs, &umid, &error))
				rs.scanned = lappend(rs.scanned,
									 list_make2_oid(linitial_oid(ids), umid));
			else
				ereport(LOG,
						(errmsg("ctas_fed resolver: could not resolve catalog \"%s\"",
								rs.catalog),
						 errdetail_internal("%s", error)));
		}

		/* a catalog that failed matters only if it has jobs in doubt */
		if (decide_in_doubt_jobs(rs.unresolved, rs.scanned) > 0)
			pending = true;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		CtasResolverUnlock();
		MemoryContextDelete(round_cxt);
		pgstat_report_activity(STATE_IDLE, NULL);
		return true;
	}
	PG_END_TRY();

	MemoryContextSwitchTo(old);
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextDelete(round_cxt);
	pgstat_report_activity(STATE_IDLE, NULL);
	CtasResolverUnlock();
	return pending;
}

/*
 * decide_in_doubt_jobs
 *		Settle the history entries of this database left in doubt, as far
 *		as the evidence goes, and return how many stay in doubt.
 *
 * A job that never got an xid, or whose local transaction aborted before
 * anything remote was recorded for it (no gid), had no remote effect that
 * could outlive the abort: aborted, whether or not its catalog is
 * reachable.  The others need the catalog: only jobs whose catalog and
 * user mapping were resolved without error in this round are decided, from
 * the commit status of their local transaction: aborted -> aborted;
 * committed -> committed unless their gid is still unresolved; in
 * progress or unknown -> left in doubt.
 */
static int
decide_in_doubt_jobs(List *unresolved, List *scanned)
{
	CtasJobsSnapshotData *snap = CtasJobsSnapshot();
	int			left = 0;
	int			i;

	for (i = 0; i < snap->njobs; i++)
	{
		CtasJob    *job = &snap->jobs[i];
		CtasXactStatus status;
		ListCell   *lc;
		bool		pending = false;
		bool		seen = false;

		if (job->state != CTAS_JOB_IN_DOUBT || job->dbid != MyDatabaseId)
			continue;
		if (job->fxid == 0)
		{
			CtasJobsResolveHistory(job->job_id, CTAS_JOB_ABORTED, NULL);
			continue;
		}
		status = CtasLocalXactStatus(job->fxid);
		if (status == CTAS_XACT_ABORTED && job->gid[0] == '\0')
		{
			CtasJobsResolveHistory(job->job_id, CTAS_JOB_ABORTED, NULL);
			continue;
		}
		foreach(lc, scanned)
		{
			if (linitial_oid(lfirst(lc)) == job->serverid &&
				lsecond_oid(lfirst(lc)) == job->umid)
				seen = true;
		}
		if (!seen)
		{
			left++;
			continue;
		}
		foreach(lc, unresolved)
		{
			if (job->gid[0] && strcmp((char *) lfirst(lc), job->gid) == 0)
				pending = true;
		}
		switch (status)
		{
			case CTAS_XACT_UNKNOWN:
			case CTAS_XACT_IN_PROGRESS:
				left++;
				break;
			case CTAS_XACT_ABORTED:
			case CTAS_XACT_COMMITTED:
				/* what the catalog still holds of it keeps the job in doubt */
				if (pending)
					left++;
				else
					CtasJobsResolveHistory(job->job_id,
										   status == CTAS_XACT_COMMITTED ?
										   CTAS_JOB_COMMITTED : CTAS_JOB_ABORTED,
										   NULL);
				break;
		}
	}
	if (snap->jobs)
		pfree(snap->jobs);
	pfree(snap);
	return left;
}

