/*-------------------------------------------------------------------------
 *
 * sqlfuncs.c
 *		  SQL functions that read or repair catalogs: remote_tables,
 *		  remote_columns, resolve_in_doubt.
 *
 * Each one rebuilds the catalog from its descriptor (catalog.c), checks
 * USAGE and the user mapping like a CTAS would, and hands the work to the
 * catalog's writer, so that none of them knows what kind of catalog it is
 * talking to.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sqlfuncs.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "foreign/foreign.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "guc.h"
#include "jobs.h"
#include "target.h"
#include "targets.h"
#include "workers/workers.h"

PG_FUNCTION_INFO_V1(ctas_fed_remote_tables);
PG_FUNCTION_INFO_V1(ctas_fed_remote_columns);
PG_FUNCTION_INFO_V1(ctas_fed_resolve_in_doubt);

/* where emit callbacks put their rows */
typedef struct EmitState
{
	ReturnSetInfo *rsinfo;
	const char *catalog;
} EmitState;

static void
emit_table(void *arg, const char *name, const char *kind)
{
	ReturnSetInfo *rsinfo = ((EmitState *) arg)->rsinfo;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	values[0] = CStringGetTextDatum(name);
	values[1] = CStringGetTextDatum(kind);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

static void
emit_column(void *arg, const char *name, const char *type, bool nullable)
{
	ReturnSetInfo *rsinfo = ((EmitState *) arg)->rsinfo;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	values[0] = CStringGetTextDatum(name);
	values[1] = CStringGetTextDatum(type);
	values[2] = BoolGetDatum(nullable);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

static void
emit_action(void *arg, const char *object, const char *action)
{
	EmitState  *es = (EmitState *) arg;
	NameData	catalog;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	/* the column is of type name: a text datum there reads as garbage */
	namestrcpy(&catalog, es->catalog);
	values[0] = NameGetDatum(&catalog);
	values[1] = CStringGetTextDatum(object);
	values[2] = CStringGetTextDatum(action);

	/* jobs left in doubt on this object are settled now */
	if (strcmp(action, "committed") == 0)
		CtasJobsResolveGid(object, CTAS_JOB_COMMITTED);
	else if (strcmp(action, "rolled back") == 0)
		CtasJobsResolveGid(object, CTAS_JOB_ABORTED);
	tuplestore_putvalues(es->rsinfo->setResult, es->rsinfo->setDesc,
						 values, nulls);
}

/*
 * lookup
 *		The descriptor of the catalog called name for the current user,
 *		with USAGE and a user mapping required.  ERROR when there is no such
 *		catalog.
 */
static CtasCatalog *
lookup(const char *name)
{
	Oid			serverid = CtasCatalogServerOid(name);

	if (!OidIsValid(serverid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("catalog \"%s\" does not exist", name),
				 errhint("A catalog is a foreign server of the ctas_fed foreign-data wrapper.")));
	return CtasGetCatalog(serverid, GetUserId(), true, true);
}

/*
 * begin_srf
 *		Common start of the set-returning functions: the catalog named by
 *		the first argument, and the tuplestore to fill.
 */
static CtasCatalog *
begin_srf(FunctionCallInfo fcinfo, EmitState *es)
{
	CtasCatalog *catalog;

	CtasCheckPreloaded();
	InitMaterializedSRF(fcinfo, 0);
	catalog = lookup(NameStr(*PG_GETARG_NAME(0)));
	es->rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	es->catalog = catalog->name;
	return catalog;
}

/*
 * ctas_fed.remote_tables(catalog name, schema text)
 *		RETURNS TABLE (name text, kind text)
 */
Datum
ctas_fed_remote_tables(PG_FUNCTION_ARGS)
{
	EmitState	es;
	CtasCatalog *catalog = begin_srf(fcinfo, &es);

	CtasCatalogRoutine(catalog)->list_tables(catalog,
											 text_to_cstring(PG_GETARG_TEXT_PP(1)),
											 emit_table, &es);
	return (Datum) 0;
}

/*
 * ctas_fed.remote_columns(catalog name, schema text, table text)
 *		RETURNS TABLE (name text, type text, nullable boolean)
 */
Datum
ctas_fed_remote_columns(PG_FUNCTION_ARGS)
{
	EmitState	es;
	CtasCatalog *catalog = begin_srf(fcinfo, &es);

	CtasCatalogRoutine(catalog)->list_columns(catalog,
											  text_to_cstring(PG_GETARG_TEXT_PP(1)),
											  text_to_cstring(PG_GETARG_TEXT_PP(2)),
											  emit_column, &es);
	return (Datum) 0;
}

/*
 * ctas_fed.resolve_in_doubt(catalog name DEFAULT NULL)
 *		RETURNS TABLE (catalog name, object text, action text)
 *
 * Resolves what this cluster left in doubt on one catalog, or on every
 * catalog the current user has a user mapping for, and returns one row per
 * object found.  Each catalog is resolved on its own, in a subtransaction
 * and within ctas_fed.resolve_timeout (CtasResolveCatalog): a catalog that
 * fails or does not answer gives a row with the action "error: <message>"
 * (and an empty object), and the others are still resolved.  Waits while
 * the resolver of this database (or another call) is resolving.
 */
Datum
ctas_fed_resolve_in_doubt(PG_FUNCTION_ARGS)
{
	EmitState	es;
	List	   *catalogs;
	ListCell   *lc;

	CtasCheckPreloaded();
	InitMaterializedSRF(fcinfo, 0);
	es.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	if (!PG_ARGISNULL(0))
		catalogs = list_make1_oid(lookup(NameStr(*PG_GETARG_NAME(0)))->serverid);
	else
	{
		catalogs = NIL;
		foreach(lc, CtasListCatalogs(false))
			catalogs = lappend_oid(catalogs,
								   ((CtasCatalogRef *) lfirst(lc))->serverid);
	}

	(void) CtasResolverLock(true);
	PG_TRY();
	{
		foreach(lc, catalogs)
		{
			Oid			serverid = lfirst_oid(lc);
			Oid			umid;
			char	   *error;

			/*
			 * The name is copied here, outside the subtransaction: the
			 * rows emitted after an error must not point into memory that
			 * its rollback freed.
			 */
			es.catalog = pstrdup(GetForeignServer(serverid)->servername);
			if (PG_ARGISNULL(0) &&
				pg_foreign_server_aclcheck(serverid, GetUserId(),
										   ACL_USAGE) != ACLCHECK_OK)
			{
				emit_action(&es, "", "skipped: no USAGE privilege");
				continue;
			}
			if (!OidIsValid(CtasGetCatalog(serverid, GetUserId(), true, false)->umid))
			{
				emit_action(&es, "", "skipped: no user mapping for the current user");
				continue;
			}
			if (!CtasResolveCatalog(serverid, GetUserId(), true,
									emit_action, &es, &umid, &error))
				emit_action(&es, "", psprintf("error: %s", error));
		}
	}
	PG_FINALLY();
	{
		CtasResolverUnlock();
	}
	PG_END_TRY();
	return (Datum) 0;
}
