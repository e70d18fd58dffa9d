/*-------------------------------------------------------------------------
 *
 * utility.c
 *		  The ProcessUtility hook: is this CREATE TABLE AS, SELECT INTO,
 *		  EXPLAIN or DROP TABLE about a catalog?
 *
 * A statement is ours when its table has a three-part name
 * catalog.schema.table whose first part names a ctas_fed server and is not
 * the current database (which keeps PostgreSQL's own meaning).  Anything
 * else - a first part naming no ctas_fed server included - goes on to the
 * next hook or standard_ProcessUtility unchanged, and so keeps PostgreSQL's
 * own behaviour and errors.
 *
 * DROP SERVER, DROP USER MAPPING, DROP FOREIGN DATA WRAPPER, DROP EXTENSION
 * and DROP OWNED are refused while they would take away the catalog or
 * user mapping of a running load or of remote work in doubt
 * (check_drop_in_use), as PostgreSQL refuses to drop a database that
 * prepared transactions use.
 *
 * It also looks after the resolvers (workers/resolver.c): CREATE EXTENSION ctas_fed
 * asks for one in its database, and the commands that need a database to
 * themselves (DROP DATABASE, ...) stop the database's resolver first.
 *
 * EXPLAIN of a federated CTAS is handed to PostgreSQL's ExplainQuery with
 * the CTAS's SELECT in its place, so that option parsing and output formats
 * are PostgreSQL's; an ExplainOneQuery hook, installed only for the
 * duration of that call, takes over planning and execution of that SELECT.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/utility.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "catalog/pg_user_mapping.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_node.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "ctas.h"
#include "jobs.h"
#include "sync/sync.h"
#include "utility.h"
#include "workers/workers.h"

static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static ExplainOneQuery_hook_type saved_ExplainOneQuery = NULL;

/* the load whose SELECT is being explained, while ExplainQuery runs */
static CtasLoad *explain_load = NULL;

static void ctas_process_utility(PlannedStmt *pstmt, const char *queryString,
								 bool readOnlyTree,
								 ProcessUtilityContext context,
								 ParamListInfo params,
								 QueryEnvironment *queryEnv,
								 DestReceiver *dest, QueryCompletion *qc);
static void ctas_explain_one_query(Query *query, int cursorOptions,
								   IntoClause *into, ExplainState *es,
								   const char *queryString,
								   ParamListInfo params,
								   QueryEnvironment *queryEnv);

/*
 * CtasUtilityInit
 *		Install the ProcessUtility hook; called from _PG_init.
 */
void
CtasUtilityInit(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = ctas_process_utility;
}

/*
 * catalog_of
 *		The OID of the ctas_fed server named by the first part of a
 *		three-part name, or InvalidOid when the statement is not ours.
 */
static Oid
catalog_of(const char *catalogname)
{
	if (catalogname == NULL)
		return InvalidOid;
	if (strcmp(catalogname, get_database_name(MyDatabaseId)) == 0)
		return InvalidOid;
	return CtasCatalogServerOid(catalogname);
}

/*
 * check_ctas_supported
 *		ERROR for the parts of CREATE TABLE AS that have no meaning for a
 *		table in a catalog.
 */
static void
check_ctas_supported(CreateTableAsStmt *stmt)
{
	IntoClause *into = stmt->into;
	const char *what = NULL;

	if (stmt->objtype == OBJECT_MATVIEW)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot create a materialized view in catalog \"%s\"",
						into->rel->catalogname),
				 errhint("Use CREATE TABLE ... AS to copy the rows into the catalog.")));

	if (into->rel->relpersistence == RELPERSISTENCE_TEMP)
		what = "TEMPORARY";
	else if (into->rel->relpersistence == RELPERSISTENCE_UNLOGGED)
		what = "UNLOGGED";
	else if (into->onCommit != ONCOMMIT_NOOP)
		what = "ON COMMIT";
	else if (into->tableSpaceName != NULL)
		what = "TABLESPACE";
	else if (into->accessMethod != NULL)
		what = "USING";
	if (what)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s is not supported for a table in catalog \"%s\"",
						what, into->rel->catalogname)));
}

/*
 * explain_ctas
 *		EXPLAIN [ANALYZE] CREATE TABLE catalog.schema.table AS SELECT ...
 */
static void
explain_ctas(PlannedStmt *pstmt, ExplainStmt *stmt, CreateTableAsStmt *ctas,
			 Oid serverid, const char *queryString,
			 ProcessUtilityContext context, ParamListInfo params,
			 QueryEnvironment *queryEnv, DestReceiver *dest,
			 QueryCompletion *qc)
{
	Query	   *select = castNode(Query, ctas->query);
	ExplainStmt *newstmt;
	PlannedStmt *newpstmt;

	if (select->commandType == CMD_UTILITY)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("EXPLAIN of CREATE TABLE AS EXECUTE into a catalog is not supported")));

	/* options, columns and types are checked before anything runs */
	explain_load = CtasPrepareLoad(serverid, ctas);

	newstmt = makeNode(ExplainStmt);
	/* ExplainQuery rewrites in place: never the caller's (cached) tree */
	newstmt->query = (Node *) copyObject(select);
	newstmt->options = stmt->options;
	newpstmt = makeNode(PlannedStmt);
	memcpy(newpstmt, pstmt, sizeof(PlannedStmt));
	newpstmt->utilityStmt = (Node *) newstmt;

	saved_ExplainOneQuery = ExplainOneQuery_hook;
	ExplainOneQuery_hook = ctas_explain_one_query;
	PG_TRY();
	{
		if (prev_ProcessUtility)
			prev_ProcessUtility(newpstmt, queryString, false, context, params,
								queryEnv, dest, qc);
		else
			standard_ProcessUtility(newpstmt, queryString, false, context,
									params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		ExplainOneQuery_hook = saved_ExplainOneQuery;
		explain_load = NULL;
	}
	PG_END_TRY();
}

/*
 * ctas_explain_one_query
 *		ExplainOneQuery hook, installed only while explain_ctas runs: the
 *		SELECT of the federated CTAS goes to CtasExplainLoad; anything else
 *		to the hook that was there before, or PostgreSQL's own code.
 */
static void
ctas_explain_one_query(Query *query, int cursorOptions, IntoClause *into,
					   ExplainState *es, const char *queryString,
					   ParamListInfo params, QueryEnvironment *queryEnv)
{
	if (explain_load != NULL && into == NULL &&
		query->commandType == CMD_SELECT)
	{
		CtasLoad   *load = explain_load;

		explain_load = NULL;
		CtasExplainLoad(load, query, es, queryString, params, queryEnv);
	}
	else if (saved_ExplainOneQuery)
		saved_ExplainOneQuery(query, cursorOptions, into, es, queryString,
							  params, queryEnv);
	else
		CtasStandardExplainOneQuery(query, cursorOptions, into, es,
									queryString, params, queryEnv);
}

/*
 * drop_tables
 *		DROP TABLE of catalog tables.  Returns false when the statement names
 *		no catalog table; ERROR when it mixes local and catalog tables.
 */
static bool
drop_tables(DropStmt *stmt, QueryCompletion *qc)
{
	ListCell   *lc;
	int			ours = 0;

	foreach(lc, stmt->objects)
	{
		List	   *names = lfirst(lc);

		if (list_length(names) == 3 &&
			OidIsValid(catalog_of(strVal(linitial(names)))))
			ours++;
	}
	if (ours == 0)
		return false;
	PreventCommandIfParallelMode("DROP TABLE");
	if (ours != list_length(stmt->objects))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot drop local tables and catalog tables in one statement")));
	if (stmt->behavior == DROP_CASCADE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("DROP TABLE ... CASCADE is not supported for catalog tables")));
	if (stmt->concurrent)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("DROP TABLE CONCURRENTLY is not supported for catalog tables")));

	foreach(lc, stmt->objects)
	{
		List	   *names = lfirst(lc);

		CtasExecDrop(catalog_of(strVal(linitial(names))), names,
					 stmt->missing_ok);
	}
	if (qc)
		SetQueryCompletion(qc, CMDTAG_DROP_TABLE, 0);
	return true;
}

/*
 * job_is_active
 *		Does job hold on to its catalog: a load running, or a remote
 *		transaction prepared or in doubt, in this database?
 */
static bool
job_is_active(const CtasJob *job)
{
	return job->dbid == MyDatabaseId &&
		(job->state == CTAS_JOB_RUNNING ||
		 job->state == CTAS_JOB_PREPARED ||
		 job->state == CTAS_JOB_IN_DOUBT);
}

/*
 * mapping_user
 *		The role of user mapping umid (InvalidOid for PUBLIC or when it is
 *		gone).
 */
static Oid
mapping_user(Oid umid)
{
	HeapTuple	tp = SearchSysCache1(USERMAPPINGOID, ObjectIdGetDatum(umid));
	Oid			user = InvalidOid;

	if (HeapTupleIsValid(tp))
	{
		user = ((Form_pg_user_mapping) GETSTRUCT(tp))->umuser;
		ReleaseSysCache(tp);
	}
	return user;
}

/*
 * check_catalog_idle
 *		ERROR (55006, as DROP DATABASE with prepared transactions) when an
 *		active job would lose what it needs: on server serverid (InvalidOid:
 *		any), through user mapping umid (InvalidOid: any), or, with roles,
 *		whose server or user mapping belongs to one of roles.  Without its
 *		server and user mapping nothing could resolve the job's remote work
 *		any more.
 */
static void
check_catalog_idle(Oid serverid, Oid umid, List *roles)
{
	CtasJobsSnapshotData *snap = CtasJobsSnapshot();
	int			i;

	for (i = 0; i < snap->njobs; i++)
	{
		CtasJob    *job = &snap->jobs[i];

		if (!job_is_active(job))
			continue;
		if (OidIsValid(serverid) && job->serverid != serverid)
			continue;
		if (OidIsValid(umid) && job->umid != umid)
			continue;
		if (roles != NIL)
		{
			ForeignServer *server = GetForeignServerExtended(job->serverid,
															 FSV_MISSING_OK);

			if (!(server && list_member_oid(roles, server->owner)) &&
				!list_member_oid(roles, mapping_user(job->umid)))
				continue;
		}
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("catalog \"%s\" is being used by a running or in-doubt job",
						job->catalog),
				 errdetail("Job " INT64_FORMAT " (%s) is %s; without its catalog and user mapping it could not be finished or resolved.",
						   job->job_id, job->target,
						   CtasJobStateName(job->state)),
				 errhint("Let the load finish, or resolve what is in doubt with ctas_fed.resolve_in_doubt(), then try again.")));
	}
}

/*
 * check_drop_in_use
 *		Refuse DROP SERVER, DROP USER MAPPING, DROP FOREIGN DATA WRAPPER,
 *		DROP EXTENSION ctas_fed and DROP OWNED (CASCADE or not) when they
 *		would remove a catalog or user mapping that a running or in-doubt
 *		job needs; DROP SERVER and DROP EXTENSION also while a continuous
 *		sync runs into the catalog or still has a slot (sync/statement.c).
 */
static void
check_drop_in_use(Node *parsetree)
{
	ListCell   *lc;

	if (IsA(parsetree, DropStmt))
	{
		DropStmt   *stmt = (DropStmt *) parsetree;

		if (stmt->removeType == OBJECT_FOREIGN_SERVER)
		{
			foreach(lc, stmt->objects)
			{
				ForeignServer *server =
					GetForeignServerByName(strVal(lfirst(lc)), true);

				if (server)
				{
					check_catalog_idle(server->serverid, InvalidOid, NIL);
					CtasSyncCheckIdle(server->serverid);
				}
			}
		}
		else if (stmt->removeType == OBJECT_FDW ||
				 stmt->removeType == OBJECT_EXTENSION)
		{
			/* the wrapper and the extension are both called ctas_fed */
			foreach(lc, stmt->objects)
			{
				if (strcmp(strVal(lfirst(lc)), "ctas_fed") == 0)
				{
					check_catalog_idle(InvalidOid, InvalidOid, NIL);
					CtasSyncCheckIdle(InvalidOid);
				}
			}
		}
	}
	else if (IsA(parsetree, DropUserMappingStmt))
	{
		DropUserMappingStmt *stmt = (DropUserMappingStmt *) parsetree;
		ForeignServer *server = GetForeignServerByName(stmt->servername, true);
		Oid			userid = InvalidOid;
		HeapTuple	tp;

		if (server == NULL)
			return;
		if (stmt->user->roletype != ROLESPEC_PUBLIC)
		{
			userid = get_rolespec_oid(stmt->user, true);
			if (!OidIsValid(userid))
				return;
		}
		tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(userid),
							 ObjectIdGetDatum(server->serverid));
		if (HeapTupleIsValid(tp))
		{
			Oid			umid = ((Form_pg_user_mapping) GETSTRUCT(tp))->oid;

			ReleaseSysCache(tp);
			check_catalog_idle(server->serverid, umid, NIL);
		}
	}
	else if (IsA(parsetree, DropOwnedStmt))
	{
		DropOwnedStmt *stmt = (DropOwnedStmt *) parsetree;
		List	   *roles = NIL;

		foreach(lc, stmt->roles)
		{
			Oid			roleid = get_rolespec_oid(lfirst(lc), true);

			if (OidIsValid(roleid))
				roles = lappend_oid(roles, roleid);
		}
		if (roles != NIL)
			check_catalog_idle(InvalidOid, InvalidOid, roles);
	}
}

/*
 * stop_resolver_for
 *		DROP DATABASE, ALTER DATABASE ... RENAME or SET TABLESPACE and
 *		CREATE DATABASE ... TEMPLATE fail while another process is
 *		connected to the database: stop its ctas_fed resolver first (see
 *		workers/resolver.c), then the sync workers the resolver starts (and DROP
 *		DATABASE drops their slots).
 */
static void
stop_resolver_for(Node *parsetree)
{
	const char *dbname = NULL;
	ListCell   *lc;

	if (IsA(parsetree, DropdbStmt))
		dbname = ((DropdbStmt *) parsetree)->dbname;
	else if (IsA(parsetree, RenameStmt) &&
			 ((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
		dbname = ((RenameStmt *) parsetree)->subname;
	else if (IsA(parsetree, CreatedbStmt))
	{
		foreach(lc, ((CreatedbStmt *) parsetree)->options)
		{
			DefElem    *def = lfirst_node(DefElem, lc);

			if (strcmp(def->defname, "template") == 0 && def->arg)
				dbname = defGetString(def);
		}
	}
	else if (IsA(parsetree, AlterDatabaseStmt))
	{
		foreach(lc, ((AlterDatabaseStmt *) parsetree)->options)
		{
			if (strcmp(lfirst_node(DefElem, lc)->defname, "tablespace") == 0)
				dbname = ((AlterDatabaseStmt *) parsetree)->dbname;
		}
	}
	if (dbname != NULL)
	{
		Oid			dboid = get_database_oid(dbname, true);

		/* each of them needs ownership: nobody else may pause a resolver */
		if (OidIsValid(dboid) && pg_database_ownercheck(dboid, GetUserId()))
		{
			CtasResolverStopDatabase(dboid);
			CtasSyncStopDatabase(dboid);
		}
	}
}

/*
 * ctas_process_utility
 *		The ProcessUtility hook; see the file header.
 */
static void
ctas_process_utility(PlannedStmt *pstmt, const char *queryString,
					 bool readOnlyTree, ProcessUtilityContext context,
					 ParamListInfo params, QueryEnvironment *queryEnv,
					 DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (IsA(parsetree, CreateTableAsStmt))
	{
		CreateTableAsStmt *stmt = (CreateTableAsStmt *) parsetree;
		Oid			serverid = catalog_of(stmt->into->rel->catalogname);

		if (OidIsValid(serverid))
		{
			ParseState *pstate = make_parsestate(NULL);

			PreventCommandIfParallelMode("CREATE TABLE AS");
			check_ctas_supported(stmt);
			pstate->p_sourcetext = queryString;
			pstate->p_queryEnv = queryEnv;
			CtasExecCreateTableAs(pstate, stmt, serverid, params, queryEnv,
								  qc);
			free_parsestate(pstate);
			return;
		}
	}
	else if (IsA(parsetree, ExplainStmt))
	{
		ExplainStmt *stmt = (ExplainStmt *) parsetree;
		Query	   *query = castNode(Query, stmt->query);

		if (query->commandType == CMD_UTILITY &&
			IsA(query->utilityStmt, CreateTableAsStmt))
		{
			CreateTableAsStmt *ctas = (CreateTableAsStmt *) query->utilityStmt;
			Oid			serverid = catalog_of(ctas->into->rel->catalogname);

			if (OidIsValid(serverid))
			{
				check_ctas_supported(ctas);
				explain_ctas(pstmt, stmt, ctas, serverid, queryString,
							 context, params, queryEnv, dest, qc);
				return;
			}
		}
	}
	else if (IsA(parsetree, DropStmt) &&
			 ((DropStmt *) parsetree)->removeType == OBJECT_TABLE)
	{
		if (drop_tables((DropStmt *) parsetree, qc))
			return;
	}
	else
	{
		check_drop_in_use(parsetree);
		stop_resolver_for(parsetree);
	}

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);

	/* a database that gets the extension gets its resolver */
	if (IsA(parsetree, CreateExtensionStmt) &&
		strcmp(((CreateExtensionStmt *) parsetree)->extname, "ctas_fed") == 0)
		CtasResolverWakeAtCommit();
}
