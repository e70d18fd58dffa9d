/*-------------------------------------------------------------------------
 *
 * launcher.c
 *		  The ctas_fed launcher: one per cluster, connected to no database,
 *		  like autovacuum's launcher and TimescaleDB's.  It keeps the job
 *		  history on disk and starts one resolver per database that has
 *		  the extension (resolver.c).
 *
 * The launcher reads pg_database when it starts, every
 * ctas_fed.resolver_naptime, and when asked, and starts a resolver for
 * every database that allows connections and is not a template.  A
 * resolver that finds no ctas_fed extension in its database exits at once
 * and is not started again until a backend of that database uses the
 * extension (CtasJobStart and the in-doubt wake-up ask for it).  So after
 * any restart every database with the extension gets its resolver without
 * any setting, and a database without it costs one short-lived connection
 * per start of the launcher.  Templates are left out: a connection to a
 * template would make CREATE DATABASE fail.  A resolver stopped for a DROP
 * DATABASE (CtasResolverStopDatabase) is not started again before its
 * pause ends; one that failed, not before RESOLVER_RESTART_SECS.
 *
 * Who saves the history: the launcher, shortly after every change and when
 * it exits (die() included).
 *
 * SIGHUP reloads the configuration; SIGTERM ends the loop.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/workers/launcher.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "jobs.h"
#include "workers/workers_int.h"

PGDLLEXPORT void ctas_fed_launcher_main(Datum main_arg);

static void launcher_on_exit(int code, Datum arg);

/*
 * CtasLauncherRegister
 *		Register the launcher; called from _PG_init when preloading.  The
 *		resolvers are started by the launcher.
 */
void
CtasLauncherRegister(void)
{
	BackgroundWorker worker;

	/* the job registry wakes resolvers through this */
	CtasJobsResolverWake = CtasResolverWake;

	/* a connection to no database: it reads pg_database only */
	CtasBackgroundWorkerInit(&worker, "ctas_fed_launcher_main",
							 "ctas_fed launcher", true,
							 BgWorkerStart_RecoveryFinished, 10);
	RegisterBackgroundWorker(&worker);
}

/*
 * scan_databases
 *		The OIDs of the databases that may have a resolver: those that
 *		allow connections and are not templates.  Palloc'd in cxt, count
 *		in *n.  Starts and commits a transaction.
 */
static Oid *
scan_databases(MemoryContext cxt, int *n)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	Oid		   *oids;
	int			size = 16;

	*n = 0;
	oids = MemoryContextAlloc(cxt, size * sizeof(Oid));
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (!db->datallowconn || db->datistemplate)
			continue;
		if (*n == size)
		{
			size *= 2;
			oids = repalloc(oids, size * sizeof(Oid));
		}
		oids[(*n)++] = db->oid;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return oids;
}

/*
 * launcher_sync_slots
 *		After a scan of pg_database: a slot for every database that has
 *		none, and the slots of databases that are gone freed (their
 *		resolver, if any, is told to stop).
 */
static void
launcher_sync_slots(Oid *oids, int n, BackgroundWorkerHandle **handles)
{
	int			i;
	int			j;

	LWLockAcquire(CtasResolvers->lock, LW_EXCLUSIVE);
	CtasResolvers->rescan = false;
	for (i = 0; i < CtasResolvers->nslots; i++)
	{
		ResolverSlot *slot = &CtasResolvers->slots[i];
		bool		exists = false;

		if (!OidIsValid(slot->dboid))
			continue;
		for (j = 0; j < n && !exists; j++)
			exists = oids[j] == slot->dboid;
		if (exists)
			continue;
		if (handles[i] != NULL)
			TerminateBackgroundWorker(handles[i]);
		else
			slot->dboid = InvalidOid;
	}
	for (j = 0; j < n; j++)
	{
		if (CtasResolverFindSlot(oids[j]) == NULL && CtasResolverAddSlot(oids[j]) == NULL)
		{
			ereport(LOG,
					(errmsg("ctas_fed launcher: no free resolver slot for database %u",
							oids[j]),
					 errhint("Raise max_worker_processes.")));
			break;
		}
	}
	LWLockRelease(CtasResolvers->lock);
}

/*
 * launcher_start_resolvers
 *		Reap the resolvers that exited, and start one for every database
 *		slot that needs one.  Returns true when a scan of pg_database is
 *		wanted first (a pause ended: the database may be gone).
 */
static bool
launcher_start_resolvers(BackgroundWorkerHandle **handles)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		rescan = false;
	int			i;

	for (i = 0; i < CtasResolvers->nslots; i++)
	{
		ResolverSlot *slot = &CtasResolvers->slots[i];
		pid_t		pid;
		BackgroundWorker worker;
		bool		start;

		if (handles[i] != NULL &&
			GetBackgroundWorkerPid(handles[i], &pid) == BGWH_STOPPED)
		{
			pfree(handles[i]);
			handles[i] = NULL;
			LWLockAcquire(CtasResolvers->lock, LW_EXCLUSIVE);
			slot->pid = 0;
			slot->latch = NULL;
			/* a resolver that failed is not restarted at once */
			if (!slot->no_extension && slot->paused_until < now)
				slot->paused_until =
					TimestampTzPlusMilliseconds(now, RESOLVER_RESTART_SECS * 1000);
			LWLockRelease(CtasResolvers->lock);
		}
		if (handles[i] != NULL)
			continue;

		LWLockAcquire(CtasResolvers->lock, LW_EXCLUSIVE);
		start = OidIsValid(slot->dboid) && slot->pid == 0 &&
			(!slot->no_extension || slot->wanted);
		if (start && slot->paused_until != 0)
		{
			if (slot->paused_until > now)
				start = false;
			else
			{
				slot->paused_until = 0;
				rescan = true;
				start = false;
			}
		}
		if (start)
		{
			slot->wanted = false;
			slot->no_extension = false;
		}
		LWLockRelease(CtasResolvers->lock);
		if (!start)
			continue;

		CtasBackgroundWorkerInit(&worker, "ctas_fed_resolver_main",
								 "ctas_fed resolver", true,
								 BgWorkerStart_RecoveryFinished,
								 BGW_NEVER_RESTART);
		snprintf(worker.bgw_name, BGW_MAXLEN, "ctas_fed resolver %u",
				 slot->dboid);
		worker.bgw_main_arg = ObjectIdGetDatum(slot->dboid);
		memcpy(worker.bgw_extra, &i, sizeof(int));
		worker.bgw_notify_pid = MyProcPid;
		if (!RegisterDynamicBackgroundWorker(&worker, &handles[i]))
		{
			/* no free background worker: try again a little later */
			handles[i] = NULL;
			LWLockAcquire(CtasResolvers->lock, LW_EXCLUSIVE);
			slot->wanted = true;
			slot->paused_until =
				TimestampTzPlusMilliseconds(now, RESOLVER_RESTART_SECS * 1000);
			LWLockRelease(CtasResolvers->lock);
			ereport(LOG,
					(errmsg("ctas_fed launcher could not start the resolver of database %u",
							slot->dboid),
					 errhint("Raise max_worker_processes.")));
		}
	}
	return rescan;
}

/*
 * ctas_fed_launcher_main
 *		Save the registry after changes; keep one resolver running per
 *		database with the extension.
 */
void
ctas_fed_launcher_main(Datum main_arg)
{
	uint64		saved = 0;
	TimestampTz last_scan = 0;
	MemoryContext cxt;
	BackgroundWorkerHandle **handles;

	/* SIGTERM is die(); the registry is saved by the exit callback */
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* no database: shared catalogs only, so no DROP DATABASE waits for us */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("ctas_fed launcher");
	cxt = AllocSetContextCreate(TopMemoryContext, "ctas_fed launcher",
								ALLOCSET_DEFAULT_SIZES);
	handles = MemoryContextAllocZero(TopMemoryContext,
									 CtasResolvers->nslots * sizeof(BackgroundWorkerHandle *));
	CtasJobsSetLatch(MyLatch, false);
	LWLockAcquire(CtasResolvers->lock, LW_EXCLUSIVE);
	CtasResolvers->launcher_latch = MyLatch;
	LWLockRelease(CtasResolvers->lock);
	before_shmem_exit(launcher_on_exit, (Datum) 0);

	for (;;)
	{
		uint64		changes;
		uint64		ended;
		bool		rescan;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		/* the history on disk first: it is what a crash would lose */
		CtasJobsCounters(&changes, &ended);
		if (changes != saved)
			saved = CtasJobsSave();

		LWLockAcquire(CtasResolvers->lock, LW_SHARED);
		rescan = CtasResolvers->rescan;
		LWLockRelease(CtasResolvers->lock);
		if (rescan || last_scan == 0 ||
			TimestampDifferenceExceeds(last_scan, GetCurrentTimestamp(),
									   CtasResolverNaptime * 1000))
		{
			Oid		   *oids;
			int			n;

			oids = scan_databases(cxt, &n);
			launcher_sync_slots(oids, n, handles);
			MemoryContextReset(cxt);
			last_scan = GetCurrentTimestamp();
		}
		if (launcher_start_resolvers(handles))
		{
			LWLockAcquire(CtasResolvers->lock, LW_EXCLUSIVE);
			CtasResolvers->rescan = true;
			LWLockRelease(CtasResolvers->lock);
			continue;
		}

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* save the registry when the launcher exits (die() included) */
static void
launcher_on_exit(int code, Datum arg)
{
	CtasJobsSave();
	CtasJobsSetLatch(NULL, false);
	LWLockAcquire(CtasResolvers->lock, LW_EXCLUSIVE);
	CtasResolvers->launcher_latch = NULL;
	LWLockRelease(CtasResolvers->lock);
}
