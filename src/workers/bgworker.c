/*-------------------------------------------------------------------------
 *
 * bgworker.c
 *		  The one place that fills a BackgroundWorker for ctas_fed: the
 *		  launcher and the notifier (registered at preload), the resolvers
 *		  (started by the launcher) and the sync workers (started by the
 *		  resolvers) all come from here, so that the library name, the
 *		  flags and the naming stay one rule.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/workers/bgworker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "postmaster/bgworker.h"

#include "workers/workers.h"

/*
 * CtasBackgroundWorkerInit
 *		Fill *worker for a process of ours running function_name of this
 *		library: bgw_type and bgw_name are type (the caller may then write a
 *		more specific bgw_name), shared memory access always, a database
 *		connection when database, no main_arg, extra or notify pid (the
 *		caller sets those it needs).  Never raises an error.
 */
void
CtasBackgroundWorkerInit(BackgroundWorker *worker, const char *function_name,
						 const char *type, bool database,
						 BgWorkerStartTime start_time, int restart_time)
{
	memset(worker, 0, sizeof(BackgroundWorker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS;
	if (database)
		worker->bgw_flags |= BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = start_time;
	worker->bgw_restart_time = restart_time;
	strlcpy(worker->bgw_library_name, "ctas_fed", BGW_MAXLEN);
	strlcpy(worker->bgw_function_name, function_name, BGW_MAXLEN);
	strlcpy(worker->bgw_type, type, BGW_MAXLEN);
	strlcpy(worker->bgw_name, type, BGW_MAXLEN);
}
