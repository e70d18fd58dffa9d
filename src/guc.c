/*-------------------------------------------------------------------------
 *
 * guc.c
 *		  Every setting of ctas_fed, and the check that the library was
 *		  preloaded.
 *
 * The variables live here, at the bottom of the module, so that the files
 * that read them (jobs.c, workers/, ctas.c, xact.c, hosts.c) need nothing
 * above their own layer.  _PG_init defines the settings only when the
 * library is preloaded; otherwise every entry point fails through
 * CtasCheckPreloaded.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/guc.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "hosts.h"

/* true when loaded by shared_preload_libraries */
bool		CtasPreloaded = false;

/* jobs.c */
int			CtasMaxJobs = 64;
int			CtasHistorySize = 1000;

/* workers/ */
int			CtasResolverNaptime = 60;
int			CtasResolveTimeout = 30;
char	   *CtasNotifyUrl = NULL;
char	   *CtasPushgatewayUrl = NULL;

/* ctas.c */
bool		CtasProgress = false;
int			CtasProgressInterval = 10;

/* sync/statement.c */
int			CtasMaxSyncsPerRole = 10;

/* sync/worker.c: pgoutput messages asked of one peek at a sync's slot */
int			CtasSyncPeekChanges = 100000;

/* sync/tick.c, sync/worker.c: the sync workers of the cluster at most */
int			CtasMaxSyncWorkers = 2;

/* xact.c: ctas_fed.fault_point (tests only, superuser only) */
char	   *CtasFaultPoint = NULL;

/*
 * CtasDefineSettings
 *		Every setting of ctas_fed, by meaning: sizes of shared memory are
 *		postmaster settings, the worker's are reloadable, the webhook and
 *		the fault point are superuser-only, progress reporting is the
 *		user's.
 */
void
CtasDefineSettings(void)
{
	DefineCustomIntVariable("ctas_fed.max_jobs",
							"Maximum number of jobs running at once.",
							NULL, &CtasMaxJobs, 64, 1, 10000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("ctas_fed.history_size",
							"Number of finished jobs kept in ctas_fed.jobs.",
							NULL, &CtasHistorySize, 1000, 0, 100000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("ctas_fed.resolver_naptime",
							"Time between two rounds of in-doubt resolution.",
							"Also the longest wait between two retries while work stays in doubt.",
							&CtasResolverNaptime, 60, 1, 86400,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("ctas_fed.resolve_timeout",
							"Longest time the resolution of one catalog may take.",
							"A catalog that does not answer within it is reported and skipped; 0 means no limit.",
							&CtasResolveTimeout, 30, 0, 3600,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomStringVariable("ctas_fed.notify_url",
							   "Status webhook for catalogs without a notify_url of their own.",
							   NULL, &CtasNotifyUrl, "",
							   PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("ctas_fed.pushgateway_url",
							   "Prometheus Pushgateway that receives the metrics when jobs end.",
							   NULL, &CtasPushgatewayUrl, "",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("ctas_fed.progress",
							 "Report the progress of long loads with NOTICEs.",
							 NULL, &CtasProgress, false,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("ctas_fed.progress_interval",
							"Time between two progress NOTICEs.",
							NULL, &CtasProgressInterval, 10, 1, 3600,
							PGC_USERSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomStringVariable("ctas_fed.fault_point",
							   "For tests only: stop the backend at this point of the commit protocol.",
							   "after_workers, after_prepare, after_rename, after_commit_record, sync_worker_attach, sync_between_commits or sync_before_advance, optionally followed by :N (seconds).",
							   &CtasFaultPoint, "",
							   PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomIntVariable("ctas_fed.sync_peek_changes",
							"Messages a sync worker asks of one peek at its replication slot.",
							"A peek never splits a source transaction: it ends after the transaction that reaches this number.  Tests set 1, so that every transaction boundary is a peek boundary.",
							&CtasSyncPeekChanges, 100000, 1, 1000000,
							PGC_SIGHUP, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomIntVariable("ctas_fed.max_sync_workers",
							"Maximum number of sync workers running at once in the cluster.",
							"Every decoding stream of every database is served by one of them; when streams outnumber them, a worker yields its stream to a waiting one after a time slice.",
							&CtasMaxSyncWorkers, 2, 1, 1024,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("ctas_fed.max_syncs_per_role",
							"Maximum number of continuous syncs one non-superuser role may run in a database.",
							"-1 means no limit; 0 allows continuous syncs to superusers only.",
							&CtasMaxSyncsPerRole, 10, -1, 100000,
							PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("ctas_fed.allowed_hosts",
							   "Hosts that the catalogs of non-superusers may reach.",
							   "Comma-separated host names, IP addresses and address/prefix lengths; empty allows every host.",
							   &CtasAllowedHosts, "",
							   PGC_SUSET, 0,
							   CtasAllowedHostsCheck, NULL, NULL);

	MarkGUCPrefixReserved("ctas_fed");
}

/*
 * CtasCheckPreloaded
 *		ereport(ERROR) unless the library was loaded through
 *		shared_preload_libraries.  Every SQL-callable entry point calls it.
 */
void
CtasCheckPreloaded(void)
{
	if (!CtasPreloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("ctas_fed must be loaded via shared_preload_libraries"),
				 errhint("Add ctas_fed to shared_preload_libraries in postgresql.conf and restart the server: shared_preload_libraries = 'ctas_fed'.")));
}

/*
 * CtasFaultPointOn
 *		Test support: is ctas_fed.fault_point "name"?  Logs it when it is.
 *		For a fault that is not a wait (a resource made to look exhausted).
 */
bool
CtasFaultPointOn(const char *name)
{
	if (CtasFaultPoint == NULL || strcmp(CtasFaultPoint, name) != 0)
		return false;
	ereport(LOG,
			(errmsg("ctas_fed: at fault point \"%s\"", name)));
	return true;
}

/*
 * CtasFaultPointWait
 *		Test support.  When ctas_fed.fault_point is "name", log it and wait
 *		here until the server is stopped (immediate) or the backend is
 *		killed; when it is "name:N", wait N seconds and go on (so that a
 *		test can stop a remote server at that point).  Interrupts are not
 *		serviced while waiting; this is how crash tests stop at exact
 *		points of the commit protocol.  Here, beside the setting, so that
 *		every layer can have fault points.
 */
void
CtasFaultPointWait(const char *name)
{
	size_t		len = strlen(name);
	long		secs = -1;
	TimestampTz start;

	if (CtasFaultPoint == NULL || strncmp(CtasFaultPoint, name, len) != 0)
		return;
	if (CtasFaultPoint[len] == ':')
		secs = atol(CtasFaultPoint + len + 1);
	else if (CtasFaultPoint[len] != '\0')
		return;

	ereport(LOG,
			(errmsg("ctas_fed: stopped at fault point \"%s\"", name)));
	start = GetCurrentTimestamp();
	while (secs < 0 ||
		   !TimestampDifferenceExceeds(start, GetCurrentTimestamp(), secs * 1000))
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
