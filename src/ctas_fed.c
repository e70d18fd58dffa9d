/*-------------------------------------------------------------------------
 *
 * ctas_fed.c
 *		  Library entry point: GUCs, hooks, shared memory, background worker.
 *
 * ctas_fed must be loaded through shared_preload_libraries: its hooks
 * decide whether a CREATE TABLE AS is about an external catalog, and
 * without them a federated CTAS would be ordinary PostgreSQL's business.
 * When the library is loaded any other way, _PG_init installs nothing and
 * every entry point (the foreign-data wrapper validator included, which
 * CREATE EXTENSION calls) fails with a hint naming the setting.
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
#include "utils/guc.h"

#include "target.h"

PG_MODULE_MAGIC;

/* true when loaded by shared_preload_libraries */
bool		CtasPreloaded = false;

void		_PG_init(void);

/*
 * _PG_init
 *		Define GUCs; when preloading, install hooks and request shared
 *		memory.
 */
void
_PG_init(void)
{
	MarkGUCPrefixReserved("ctas_fed");

	if (!process_shared_preload_libraries_in_progress)
		return;

	CtasPreloaded = true;
	CtasUtilityInit();
	CtasXactInit();
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
