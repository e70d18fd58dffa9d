/*-------------------------------------------------------------------------
 *
 * notifier.c
 *		  The ctas_fed notifier: one per cluster, connected to no database.
 *		  It delivers the status webhooks of the jobs and pushes the
 *		  metrics to a Prometheus Pushgateway when jobs end.
 *
 * The analogue of Flink's job-status hook, off every commit path: backends
 * only put events into shared memory (jobs.c) and set the notifier's
 * latch.  A process of its own, so that a slow or dead webhook endpoint,
 * which may cost it seconds per event, never delays saving the history or
 * resolving transactions.
 *
 * SIGHUP reloads the configuration (a narrowed ctas_fed.allowed_hosts
 * applies from the next event); SIGTERM ends the loop.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/workers/notifier.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "guc.h"
#include "hosts.h"
#include "http/curl.h"
#include "jobs.h"
#include "metrics.h"
#include "workers/workers.h"

#define WEBHOOK_ATTEMPTS	3
#define WEBHOOK_TIMEOUT		5	/* seconds per attempt */
#define WEBHOOK_REFUSED_REMEMBERED 64	/* jobs whose refusal was logged */

PGDLLEXPORT void ctas_fed_notifier_main(Datum main_arg);

/*
 * CtasNotifierRegister
 *		Register the notifier; called from _PG_init when preloading.
 */
void
CtasNotifierRegister(void)
{
	BackgroundWorker worker;

	/* the notifier needs no database */
	CtasBackgroundWorkerInit(&worker, "ctas_fed_notifier_main",
							 "ctas_fed notifier", false,
							 BgWorkerStart_PostmasterStart, 10);
	RegisterBackgroundWorker(&worker);
}

/*
 * webhook_refused
 *		Does ctas_fed.allowed_hosts forbid sending ev?  Only the notify_url
 *		of a catalog whose server a non-superuser owns is limited (the
 *		backend that made the job decided, ev->notify_trusted).  The
 *		setting is read as this worker has it (postgresql.conf, ALTER
 *		SYSTEM) at every event, since it may have been narrowed after the
 *		job started.  A refusal is logged once per job, with the host only
 *		(the URL is not shown): the ids of the last jobs refused are
 *		remembered.  Can ERROR only when out of memory.
 */
static bool
webhook_refused(const CtasJobEvent *ev)
{
	static int64 refused[WEBHOOK_REFUSED_REMEMBERED];
	static int	next = 0;
	char	   *host;
	int			i;

	if (ev->notify_trusted)
		return false;
	host = CtasNotifyHostRefused(ev->notify_url);
	if (host == NULL)
		return false;
	for (i = 0; i < WEBHOOK_REFUSED_REMEMBERED; i++)
	{
		if (refused[i] == ev->job_id)
			return true;
	}
	refused[next] = ev->job_id;
	next = (next + 1) % WEBHOOK_REFUSED_REMEMBERED;
	ereport(LOG,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("ctas_fed did not send the status of job " INT64_FORMAT " to the webhook of catalog \"%s\"",
					ev->job_id, ev->catalog),
			 errdetail("The owner of the catalog's server is not a superuser, and option \"notify_url\" names host \"%s\", which \"ctas_fed.allowed_hosts\" does not list.",
					   host),
			 errhint("A superuser can add the host to the setting \"ctas_fed.allowed_hosts\".")));
	return true;
}

/*
 * deliver_webhooks
 *		POST every queued status event to its URL, each with bounded
 *		retries, unless ctas_fed.allowed_hosts forbids it
 *		(webhook_refused).  A dead endpoint costs this worker at most
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
		char	   *body;
		char	   *err = NULL;
		int			attempt;

		/* a narrowed ctas_fed.allowed_hosts applies from the next event */
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (webhook_refused(&ev))
		{
			MemoryContextSwitchTo(old);
			MemoryContextReset(cxt);
			continue;
		}
		body = CtasJobEventJson(&ev);
		for (attempt = 1; attempt <= WEBHOOK_ATTEMPTS; attempt++)
		{
			if (CtasCurlSend(ev.notify_url, "POST", "application/json", body,
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
	if (!CtasCurlSend(url, "PUT", "text/plain; version=0.0.4",
					  CtasMetricsText(), WEBHOOK_TIMEOUT, &err))
		ereport(LOG,
				(errmsg("ctas_fed could not push metrics to the Pushgateway"),
				 errdetail_internal("%s", err ? err : "")));
	MemoryContextSwitchTo(old);
	MemoryContextReset(cxt);
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
