/*-------------------------------------------------------------------------
 *
 * ctas_fed.c
 *		  Library entry point: hooks, shared memory, background worker; the
 *		  settings are defined in guc.c.
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
 * lock, shmem_startup_hook attaches (jobs.c, workers/resolver.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/ctas_fed.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"

#include "ctas.h"
#include "guc.h"
#include "jobs.h"
#include "sync/sync.h"
#include "utility.h"
#include "workers/workers.h"
#include "xact.h"

PG_MODULE_MAGIC;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);
static void ctas_shmem_request(void);
static void ctas_shmem_startup(void);

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

	CtasDefineSettings();

	CtasPreloaded = true;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = ctas_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = ctas_shmem_startup;
	CtasUtilityInit();
	CtasXactInit();
	CtasLauncherRegister();
	CtasNotifierRegister();
}

static void
ctas_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	CtasJobsShmemRequest();
	CtasResolverShmemRequest();
	CtasSyncShmemRequest();
}

static void
ctas_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	CtasJobsShmemStartup();
	CtasResolverShmemStartup();
	CtasSyncShmemStartup();
}
