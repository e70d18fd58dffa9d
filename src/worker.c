/*-------------------------------------------------------------------------
 *
 * worker.c
 *		  The ctas_fed background worker: keeps the job history on disk,
 *		  delivers status webhooks, pushes metrics to a Pushgateway, and
 *		  resolves what crashes and failed commits left in doubt.
 *
 * They are the analogue of Flink's job-status hook, off every commit path:
 * backends only put events into shared memory and set the workers'
 * latches.  Two processes, so that a slow or dead webhook endpoint, which
 * may cost the notifier seconds per event, never delays saving the history
 * or resolving transactions.
 *
 * One worker per cluster, connected to the database named by
 * ctas_fed.database (default "postgres"), as pg_cron does: catalogs are
 * foreign servers, which live in one database, so the worker resolves the
 * catalogs of that database; catalogs defined in other databases are
 * resolved there with ctas_fed.resolve_in_doubt().  The history, webhooks
 * and metrics cover jobs of every database.
 *
 * The worker's loop: save the registry if it changed; every
 * ctas_fed.resolver_naptime, resolve.  The notifier's loop: deliver queued
 * webhooks (bounded retries and timeouts); push metrics when jobs ended.
 * SIGHUP reloads the configuration; SIGTERM ends the loops (the worker
 * saves first).
 *
 * Resolution connects to each PostgreSQL catalog once per user mapping, so
 * that a prepared transaction is finished by the remote role that prepared
 * it, and decides each of this cluster's gids from the commit status of the
 * local transaction it names (see target_postgres.c).  Gids of jobs whose
 * backend is still finishing them are left to that backend.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/worker.c
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
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/resowner.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "http.h"
#include "jobs.h"
#include "target.h"

/* GUCs */
char	   *CtasWorkerDatabase = NULL;
int			CtasResolverNaptime = 60;
char	   *CtasNotifyUrl = NULL;
char	   *CtasPushgatewayUrl = NULL;

#define WEBHOOK_ATTEMPTS	3
#define WEBHOOK_TIMEOUT		5	/* seconds per attempt */

PGDLLEXPORT void ctas_fed_worker_main(Datum main_arg);
PGDLLEXPORT void ctas_fed_notifier_main(Datum main_arg);

static void resolve_all(void);
static void worker_on_exit(int code, Datum arg);
static void decide_in_doubt_jobs(List *unresolved, List *scanned);

/*
 * CtasWorkerRegister
 *		Register the worker; called from _PG_init when preloading.
 */
void
CtasWorkerRegister(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	strcpy(worker.bgw_library_name, "ctas_fed");
	strcpy(worker.bgw_function_name, "ctas_fed_worker_main");
	strcpy(worker.bgw_name, "ctas_fed worker");
	strcpy(worker.bgw_type, "ctas_fed worker");
	RegisterBackgroundWorker(&worker);

	/* the notifier needs no database */
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	worker.bgw_start_time = BgWorkerStart_PostmasterStart;
	strcpy(worker.bgw_function_name, "ctas_fed_notifier_main");
	strcpy(worker.bgw_name, "ctas_fed notifier");
	strcpy(worker.bgw_type, "ctas_fed notifier");
	RegisterBackgroundWorker(&worker);
}

/*
 * deliver_webhooks
 *		POST every queued status event to its URL, each with bounded
 *		retries.  A dead endpoint costs this worker at most
 *		WEBHOOK_ATTEMPTS * WEBHOOK_TIMEOUT seconds per event, never a
 *		backend anything.
 */
static void
deliver_webhooks(MemoryContext cxt)
{
	CtasJobEvent ev;

	while (!ShutdownRequestPending && CtasJobsNextEvent(&ev))
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);
		char	   *body = CtasJobEventJson(&ev);
		char	   *err = NULL;
		int			attempt;

		for (attempt = 1; attempt <= WEBHOOK_ATTEMPTS; attempt++)
		{
			if (CtasHttpSend(ev.notify_url, "POST", "application/json", body,
							 WEBHOOK_TIMEOUT, &err))
				break;
			if (attempt < WEBHOOK_ATTEMPTS)
				pg_usleep(200000L * attempt);
		}
		if (attempt > WEBHOOK_ATTEMPTS)
			ereport(LOG,
					(errmsg("ctas_fed could not deliver the status of job " INT64_FORMAT " to its webhook",
							ev.job_id),
					 errdetail_internal("%s", err ? err : "")));
		MemoryContextSwitchTo(old);
		MemoryContextReset(cxt);
	}
}

/*
 * push_metrics
 *		PUT the metrics to the Pushgateway, grouped by this cluster.
 */
static void
push_metrics(MemoryContext cxt)
{
	MemoryContext old;
	char	   *url;
	char	   *err = NULL;

	if (CtasPushgatewayUrl == NULL || CtasPushgatewayUrl[0] == '\0')
		return;
	old = MemoryContextSwitchTo(cxt);
	url = psprintf("%.*s/metrics/job/ctas_fed/instance/" UINT64_FORMAT,
				   (int) strcspn(CtasPushgatewayUrl, "?#") -
				   (CtasPushgatewayUrl[strlen(CtasPushgatewayUrl) - 1] == '/'),
				   CtasPushgatewayUrl, GetSystemIdentifier());
	if (!CtasHttpSend(url, "PUT", "text/plain; version=0.0.4",
					  CtasMetricsText(), WEBHOOK_TIMEOUT, &err))
		ereport(LOG,
				(errmsg("ctas_fed could not push metrics to the Pushgateway"),
				 errdetail_internal("%s", err ? err : "")));
	MemoryContextSwitchTo(old);
	MemoryContextReset(cxt);
}

/*
 * ctas_fed_worker_main
 *		Save the registry after changes; resolve every naptime.
 */
void
ctas_fed_worker_main(Datum main_arg)
{
	uint64		saved = 0;
	TimestampTz last_resolve = 0;

	/*
	 * SIGTERM is die(): a resolver waiting on a remote server is
	 * interrupted at once; the registry is saved by the exit callback.
	 */
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(CtasWorkerDatabase, NULL, 0);
	pgstat_report_appname("ctas_fed worker");
	CtasJobsSetLatch(MyLatch, false);
	before_shmem_exit(worker_on_exit, (Datum) 0);

	for (;;)
	{
		uint64		changes;
		uint64		ended;

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

		if (TimestampDifferenceExceeds(last_resolve, GetCurrentTimestamp(),
									   CtasResolverNaptime * 1000))
		{
			resolve_all();
			last_resolve = GetCurrentTimestamp();
		}

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(1000L, CtasResolverNaptime * 1000L),
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* save the registry when the worker exits (die() included) */
static void
worker_on_exit(int code, Datum arg)
{
	CtasJobsSave();
	CtasJobsSetLatch(NULL, false);
}

/*
 * ctas_fed_notifier_main
 *		Deliver webhooks; push metrics when jobs ended.
 */
void
ctas_fed_notifier_main(Datum main_arg)
{
	MemoryContext cxt;
	uint64		pushed_ended = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	cxt = AllocSetContextCreate(TopMemoryContext, "ctas_fed notifier",
								ALLOCSET_DEFAULT_SIZES);
	CtasJobsSetLatch(MyLatch, true);

	while (!ShutdownRequestPending)
	{
		uint64		changes;
		uint64		ended;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		deliver_webhooks(cxt);

		CtasJobsCounters(&changes, &ended);
		if (ended != pushed_ended)
		{
			push_metrics(cxt);
			pushed_ended = ended;
		}

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	CtasJobsSetLatch(NULL, true);
	proc_exit(0);
}

/* what one resolution round saw */
typedef struct ResolveState
{
	List	   *unresolved;		/* gids left or failed */
	List	   *scanned;		/* (serverid, umid) pairs resolved without
								 * error, as two-element OID lists */
	const char *catalog;
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
 * resolve_one
 *		Resolve one (catalog, user mapping) in a subtransaction: an
 *		unreachable or broken catalog is logged and skipped, and the others
 *		are still resolved.
 */
static void
resolve_one(Oid serverid, Oid userid, ResolveState *rs)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		CtasCatalog *catalog = CtasGetCatalog(serverid, userid, false, true);
		const CtasTargetRoutine *routine = CtasCatalogRoutine(catalog);

		rs->catalog = catalog->name;
		if (routine->resolve)
			routine->resolve(catalog, worker_emit, rs);
		rs->scanned = lappend(rs->scanned,
							  list_make2_oid(serverid, catalog->umid));
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();
}

/*
 * resolve_all
 *		One round of resolution over the catalogs of the worker's database,
 *		each (catalog, user mapping) on its own, then the decision of the
 *		in-doubt jobs that round could see.  Everything is allocated in a
 *		memory context of the round.
 */
static void
resolve_all(void)
{
	MemoryContext round_cxt;
	MemoryContext old;
	ResolveState rs = {NIL, NIL, NULL};

	if (!CtasJobsResolverAcquire())
		return;

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
		uint64		i;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		/* every (server, mapped user) of the ctas_fed wrapper, if installed */
		if (SPI_execute("SELECT s.oid, um.umuser FROM pg_catalog.pg_foreign_server s "
						"JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid = s.srvfdw "
						"JOIN pg_catalog.pg_user_mapping um ON um.umserver = s.oid "
						"WHERE w.fdwname = 'ctas_fed' ORDER BY s.srvname, um.umuser",
						true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not list catalogs");
		for (i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			Oid			srv = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
															 SPI_tuptable->tupdesc, 1, &isnull));
			Oid			usr = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
															 SPI_tuptable->tupdesc, 2, &isnull));

			MemoryContextSwitchTo(round_cxt);
			pairs = lappend(pairs, list_make2_oid(srv, usr));
		}
		SPI_finish();
		MemoryContextSwitchTo(round_cxt);

		foreach(lc, pairs)
			resolve_one(linitial_oid(lfirst(lc)), lsecond_oid(lfirst(lc)), &rs);

		decide_in_doubt_jobs(rs.unresolved, rs.scanned);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		CtasJobsResolverRelease();
		MemoryContextDelete(round_cxt);
		pgstat_report_activity(STATE_IDLE, NULL);
		return;
	}
	PG_END_TRY();

	MemoryContextSwitchTo(old);
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextDelete(round_cxt);
	pgstat_report_activity(STATE_IDLE, NULL);
	CtasJobsResolverRelease();
}

/*
 * decide_in_doubt_jobs
 *		Settle the history entries left in doubt that this round can speak
 *		for: jobs of this database whose catalog and user mapping were
 *		resolved without error.  From the commit status of their local
 *		transaction: aborted -> aborted; committed -> committed unless their
 *		gid is still unresolved; in progress or unknown -> left in doubt.
 *		A job that never got an xid had no remote effect: aborted.
 */
static void
decide_in_doubt_jobs(List *unresolved, List *scanned)
{
	CtasJobsSnapshotData *snap = CtasJobsSnapshot();
	int			i;

	for (i = 0; i < snap->njobs; i++)
	{
		CtasJob    *job = &snap->jobs[i];
		const char *status;
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
		foreach(lc, scanned)
		{
			if (linitial_oid(lfirst(lc)) == job->serverid &&
				lsecond_oid(lfirst(lc)) == job->umid)
				seen = true;
		}
		if (!seen)
			continue;
		status = CtasLocalXactStatus(job->fxid);
		if (status == NULL || strcmp(status, "in progress") == 0)
			continue;
		foreach(lc, unresolved)
		{
			if (job->gid[0] && strcmp((char *) lfirst(lc), job->gid) == 0)
				pending = true;
		}
		if (strcmp(status, "aborted") == 0)
			CtasJobsResolveHistory(job->job_id, CTAS_JOB_ABORTED, NULL);
		else if (!pending)
			CtasJobsResolveHistory(job->job_id, CTAS_JOB_COMMITTED, NULL);
	}
}
