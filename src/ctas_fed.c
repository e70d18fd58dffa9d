/*-------------------------------------------------------------------------
 *
 * ctas_fed.c
 *		  Library entry point: GUCs, hooks, shared memory, background worker.
 *
 * ctas_fed must be loaded through shared_preload_libraries: its hooks
 * decide whether a CREATE TABLE AS is about an external catalog, its job
 * registry lives in shared memory, and its workers resolve what crashes
 * leave in doubt.  When the library is loaded any other way, _PG_init
 * installs nothing and every entry point (the foreign-data wrapper
 * validator included, which CREATE EXTENSION calls) fails with a hint
 * naming the setting.
 *
 * Shared memory is set up in the two steps of PostgreSQL 15, as
 * pg_stat_statements does: shmem_request_hook asks for the space and the
 * lock, shmem_startup_hook attaches (jobs.c, worker.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/ctas_fed.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/guc.h"

#include "hosts.h"
#include "jobs.h"
#include "target.h"

PG_MODULE_MAGIC;

/* true when loaded by shared_preload_libraries */
bool		CtasPreloaded = false;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);
static void ctas_shmem_request(void);
static void ctas_shmem_startup(void);
static void define_gucs(void);

/*
 * _PG_init
 *		Define GUCs; when preloading, install hooks, request shared memory
 *		and register the worker.
 */
void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	define_gucs();

	CtasPreloaded = true;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = ctas_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = ctas_shmem_startup;
	CtasUtilityInit();
	CtasXactInit();
	CtasWorkerRegister();
}

static void
ctas_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	CtasJobsShmemRequest();
	CtasWorkerShmemRequest();
}

static void
ctas_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	CtasJobsShmemStartup();
	CtasWorkerShmemStartup();
}

/*
 * define_gucs
 *		Every setting of ctas_fed, by meaning: sizes of shared memory are
 *		postmaster settings, the worker's are reloadable, the webhook and
 *		the fault point are superuser-only, progress reporting is the
 *		user's.
 */
static void
define_gucs(void)
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
							   "after_prepare, after_commit_record or after_rename.",
							   &CtasFaultPoint, "",
							   PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
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
