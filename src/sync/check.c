/*-------------------------------------------------------------------------
 *
 * check.c
 *		  Continuous sync at statement time, before any remote work: the
 *		  checks of CtasSyncCheck, and the key of the remote table.
 *
 * CtasSyncCheck is the first step of a sync's statement (the others, and
 * the protocol of the statement's transaction, are in sync/statement.c).
 * It refuses, with nothing done anywhere, what the sync cannot keep:
 *
 *	the user		may create a replication slot (superuser or
 *					REPLICATION), and has not reached
 *					ctas_fed.max_syncs_per_role (CtasSyncCheckRoleQuota,
 *					sync/statement.c)
 *	the statement	atomic, and not IF NOT EXISTS or if_exists
 *	the query		is eligible: one table with a primary key or a replica
 *					identity index, a projection and a WHERE of immutable
 *					expressions of its row, which the user may execute; a
 *					partitioned table as sync/partition.c allows
 *	the server		wal_level is logical and a replication slot is free
 *
 * It then fills the load's CtasSync: the source's columns the query reads,
 * and the remote key, the source's identity projected as plain columns
 * (an explicit primary_key must name it); and makes the load "WITH NO
 * DATA": the sync worker copies the rows.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/check.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "catalog/catalog.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "replication/slot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "sync/sync_int.h"

static void ineligible(const char *what) pg_attribute_noreturn();
static void check_query_shape(Query *query);
static void check_relation(CtasSync *sync, RangeTblEntry *rte);
static void check_privileges(Query *query);
static void check_settings(void);
static void collect_columns(CtasSync *sync, Query *query);
static void derive_key(CtasLoad *load, CtasSync *sync, Query *query,
					   List *colnames);

/*
 * ineligible
 *		The error for a query that cannot be synced; what names the feature
 *		that made it ineligible.
 */
static void
ineligible(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("continuous sync does not support %s", what),
			 errdetail("A synced query reads one table with a primary key or a replica identity index, projects its columns or immutable expressions of them, and may filter its rows with an immutable WHERE clause."),
			 errhint("Remove the option \"sync\" for a one-time load.")));
}

/*
 * CtasSyncCheck
 *		Check that the query of a CTAS WITH (sync = 'continuous') can be
 *		kept in sync, and set up the load for it: the remote key becomes the
 *		load's primary key, and the load creates the table only.  colnames
 *		are the column names of the CTAS, if any.  The result hangs on
 *		load->sync, in the load's memory context.  ereport(ERROR) saying what
 *		makes the query ineligible.
 */
void
CtasSyncCheck(CtasLoad *load, Query *query, List *colnames)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(load->cxt);
	CtasSync   *sync = palloc0(sizeof(CtasSync));
	RangeTblEntry *rte;
	ListCell   *lc;

	/*
	 * The job holds a logical replication slot, and with it WAL and the
	 * catalog rows that decoding needs, for as long as it runs: the same
	 * right PostgreSQL requires of whoever creates a slot
	 * (CheckSlotPermissions).
	 */
	if (!has_rolreplication(GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to create a continuous sync"),
				 errdetail("A continuous sync holds a logical replication slot, which only superusers and roles with the REPLICATION attribute may create."),
				 errhint("Ask a superuser for ALTER ROLE %s REPLICATION, or remove the option \"sync\" for a one-time load.",
						 quote_identifier(GetUserNameFromId(GetUserId(), false)))));

	CtasSyncCheckRoleQuota();

	if (!load->opts.atomic)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"sync\" cannot be combined with atomic = false"),
				 errdetail("A synced table is created atomically with the statement; its rows are then copied and kept up to date by a background worker.")));
	if (load->opts.if_exists != CTAS_IF_EXISTS_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"sync\" cannot be combined with IF NOT EXISTS or the option \"if_exists\""),
				 errdetail("A synced table must be a new table: the rows of another one could not be kept equal to the query.")));

	check_query_shape(query);
	check_privileges(query);
	rte = linitial_node(RangeTblEntry, query->rtable);
	check_relation(sync, rte);
	collect_columns(sync, query);
	check_settings();

	sync->relid = rte->relid;
	sync->query = copyObject(query);
	foreach(lc, query->targetList)
	{
		if (!lfirst_node(TargetEntry, lc)->resjunk)
			sync->ncolumns++;
	}
	derive_key(load, sync, query, colnames);
	CtasSyncPartitionCheck(sync->relid, sync->key_attnums);

	/* the sync worker copies the rows under the snapshot of its slot */
	load->skip_data = true;
	load->sync = sync;
	MemoryContextSwitchTo(oldcxt);
}

/*
 * check_query_shape
 *		One table, no joins, no grouping, no set operations, nothing that
 *		depends on more than one row or on when it runs.
 */
static void
check_query_shape(Query *query)
{
	RangeTblEntry *rte;
	List	   *exprs;

	if (query->commandType != CMD_SELECT || query->utilityStmt != NULL)
		ineligible("CREATE TABLE AS EXECUTE");
	if (query->cteList != NIL)
		ineligible("WITH queries");
	if (query->setOperations != NULL)
		ineligible("UNION, INTERSECT or EXCEPT");
	if (query->hasAggs || query->groupClause != NIL ||
		query->groupingSets != NIL || query->havingQual != NULL)
		ineligible("aggregate functions or GROUP BY");
	if (query->hasWindowFuncs)
		ineligible("window functions");
	if (query->hasTargetSRFs)
		ineligible("set-returning functions");
	if (query->hasSubLinks)
		ineligible("subqueries");
	if (query->distinctClause != NIL)
		ineligible("DISTINCT");
	if (query->limitCount != NULL || query->limitOffset != NULL)
		ineligible("LIMIT or OFFSET");
	if (query->rowMarks != NIL || query->hasForUpdate)
		ineligible("FOR UPDATE or FOR SHARE");
	if (query->jointree == NULL || query->jointree->fromlist == NIL)
		ineligible("a query without a FROM clause");
	if (list_length(query->rtable) != 1 ||
		list_length(query->jointree->fromlist) != 1 ||
		!IsA(linitial(query->jointree->fromlist), RangeTblRef))
		ineligible("joins or more than one table");

	rte = linitial_node(RangeTblEntry, query->rtable);
	if (rte->rtekind != RTE_RELATION)
		ineligible("a FROM item that is not a table");
	if (rte->tablesample != NULL)
		ineligible("TABLESAMPLE");

	exprs = list_make2(query->targetList, query->jointree->quals);
	if (contain_mutable_functions((Node *) exprs))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("continuous sync does not support volatile or stable functions"),
				 errdetail("Every change of the source is evaluated when it is applied, so the query may use only immutable functions and operators."),
				 errhint("Remove the option \"sync\" for a one-time load.")));
}

/* check_privileges_walker's callback: EXECUTE on one function */
static bool
check_execute(Oid funcid, void *context)
{
	AclResult	aclresult = pg_proc_aclcheck(funcid, GetUserId(),
											 ACL_EXECUTE);

	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FUNCTION, get_func_name(funcid));
	return false;
}

/* every function an expression calls, as ExecInitExpr would check it */
static bool
check_privileges_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	/* the executor does not check the I/O functions of a coercion */
	if (!IsA(node, CoerceViaIO))
		(void) check_functions_in_node(node, check_execute, context);
	return expression_tree_walker(node, check_privileges_walker, context);
}

/*
 * check_privileges
 *		The query of a sync is not executed by its statement, which would
 *		check the caller's SELECT on the table (and its columns) and
 *		EXECUTE on each function and operator: check them here, as the
 *		executor would.  The worker later runs the query as the caller.
 *		ereport(ERROR) on the first privilege missing.
 */
static void
check_privileges(Query *query)
{
	(void) ExecCheckRTPerms(query->rtable, true);
	(void) check_privileges_walker((Node *) query->targetList, NULL);
	(void) check_privileges_walker(query->jointree->quals, NULL);
}

/*
 * check_relation
 *		The source must be a permanent plain table that logical decoding
 *		publishes whole, and that the worker can read as the query would.
 */
static void
check_relation(CtasSync *sync, RangeTblEntry *rte)
{
	char		relkind = get_rel_relkind(rte->relid);
	char		persistence = get_rel_persistence(rte->relid);
	Relation	rel;
	bool		rowsecurity;

	if (relkind == RELKIND_VIEW)
		ineligible("views");
	if (relkind == RELKIND_MATVIEW)
		ineligible("materialized views");
	if (relkind == RELKIND_FOREIGN_TABLE)
		ineligible("foreign tables");
	if (relkind == RELKIND_PARTITIONED_TABLE && !rte->inh)
		ineligible("ONLY on a partitioned table");
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ineligible("a FROM item that is not a table");
	if (persistence != RELPERSISTENCE_PERMANENT)
		ineligible("temporary or unlogged tables");
	if (IsCatalogRelationOid(rte->relid))
		ineligible("system catalogs");
	/* a partitioned table is followed whole (sync/partition.c) */
	if (relkind == RELKIND_RELATION && rte->inh && has_subclass(rte->relid))
		ineligible("tables with inheritance children");
	rel = relation_open(rte->relid, AccessShareLock);
	rowsecurity = rel->rd_rel->relrowsecurity;
	relation_close(rel, AccessShareLock);
	if (rowsecurity)
		ineligible("tables with row-level security");
}

/*
 * collect_columns
 *		The source columns the query reads, into sync->attnums.  Whole-row
 *		references, system columns and generated columns (logical decoding
 *		does not send them) are refused.
 */
static void
collect_columns(CtasSync *sync, Query *query)
{
	RangeTblEntry *rte = linitial_node(RangeTblEntry, query->rtable);
	List	   *vars;
	ListCell   *lc;

	vars = pull_var_clause((Node *) list_make2(query->targetList,
											   query->jointree->quals), 0);
	foreach(lc, vars)
	{
		Var		   *var = lfirst_node(Var, lc);

		if (var->varlevelsup != 0 || var->varno != 1)
			ineligible("references to other queries");
		if (var->varattno == 0)
			ineligible("whole-row references");
		if (var->varattno < 0)
			ineligible("system columns");
		if (get_attgenerated(rte->relid, var->varattno) != '\0')
			ineligible("generated columns");
		sync->attnums = list_append_unique_int(sync->attnums, var->varattno);
	}
}

/*
 * check_settings
 *		Logical decoding needs wal_level = logical and a free replication
 *		slot.  The slot is created after commit; a full slot array then is
 *		reported by the job, but the common case is caught here.
 */
static void
check_settings(void)
{
	int			used = 0;
	int			i;

	if (wal_level < WAL_LEVEL_LOGICAL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("continuous sync requires wal_level = logical"),
				 errhint("Set wal_level = logical in postgresql.conf and restart the server.")));

	if (max_replication_slots > 0 && ReplicationSlotCtl != NULL)
	{
		LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
		for (i = 0; i < max_replication_slots; i++)
		{
			if (ReplicationSlotCtl->replication_slots[i].in_use)
				used++;
		}
		LWLockRelease(ReplicationSlotControlLock);
	}
	if (used >= max_replication_slots)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("continuous sync needs a free replication slot"),
				 errdetail("All %d replication slots are in use.",
						   max_replication_slots),
				 errhint("Increase max_replication_slots in postgresql.conf and restart the server, or drop a slot that is no longer used.")));
}

/*
 * derive_key
 *		The remote key: the columns of the source's replica identity index
 *		(its primary key with REPLICA IDENTITY DEFAULT or FULL), each of
 *		which the query must project as a plain column, renamed or not.
 *		A primary_key option must name exactly those columns.  Sets
 *		load->opts.primary_key to them, in the index's order.
 */
static void
derive_key(CtasLoad *load, CtasSync *sync, Query *query, List *colnames)
{
	Relation	rel = relation_open(sync->relid, AccessShareLock);
	Oid			indexoid;
	Relation	index;
	int			i;
	char	   *relname = RelationGetRelationName(rel);

	if (rel->rd_rel->relreplident == REPLICA_IDENTITY_NOTHING)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot sync table \"%s\" because its replica identity is NOTHING",
						relname),
				 errhint("Use ALTER TABLE ... REPLICA IDENTITY DEFAULT with a primary key, or REPLICA IDENTITY USING INDEX.")));
	indexoid = RelationGetReplicaIndex(rel);
	if (!OidIsValid(indexoid))
		indexoid = RelationGetPrimaryKeyIndex(rel);
	if (!OidIsValid(indexoid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot sync table \"%s\" because it has no primary key or replica identity index",
						relname),
				 errdetail("The remote table is kept equal to the query by key."),
				 errhint("Add a primary key to the table, or use ALTER TABLE ... REPLICA IDENTITY USING INDEX with a unique index.")));

	index = index_open(indexoid, AccessShareLock);
	for (i = 0; i < index->rd_index->indnkeyatts; i++)
	{
		AttrNumber	attnum = index->rd_index->indkey.values[i];
		ListCell   *lc;
		int			pos = 0;
		char	   *name = NULL;

		if (attnum == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot sync table \"%s\" because its key index \"%s\" has an expression",
							relname, RelationGetRelationName(index))));
		foreach(lc, query->targetList)
		{
			TargetEntry *tle = lfirst_node(TargetEntry, lc);
			Var		   *var = (Var *) tle->expr;

			if (tle->resjunk)
				continue;
			if (IsA(var, Var) && var->varattno == attnum && name == NULL)
				name = pos < list_length(colnames) ?
					strVal(list_nth(colnames, pos)) : tle->resname;
			pos++;
		}
		if (name == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("continuous sync needs the key column \"%s\" of table \"%s\" in the query result",
							get_attname(sync->relid, attnum, false), relname),
					 errdetail("The remote table is kept equal to the query by the key of the source."),
					 errhint("Add the column to the select list, as it is or renamed.")));
		sync->key_names = lappend(sync->key_names, makeString(pstrdup(name)));
		sync->key_attnums = lappend_int(sync->key_attnums, attnum);
		sync->attnums = list_append_unique_int(sync->attnums, attnum);
	}
	index_close(index, AccessShareLock);
	relation_close(rel, AccessShareLock);

	if (load->opts.primary_key != NIL)
	{
		ListCell   *lc;
		bool		same = list_length(load->opts.primary_key) ==
			list_length(sync->key_names);

		foreach(lc, load->opts.primary_key)
		{
			ListCell   *lc2;
			bool		found = false;

			foreach(lc2, sync->key_names)
			{
				if (strcmp(strVal(lfirst(lc)), strVal(lfirst(lc2))) == 0)
					found = true;
			}
			same = same && found;
		}
		if (!same)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"primary_key\" of a synced table must name the key of the source"),
					 errdetail("The key of table \"%s\" is projected as the columns %s.",
							   relname,
							   NameListToQuotedString(sync->key_names)),
					 errhint("Omit the option \"primary_key\": the key of the source is used.")));
	}
	load->opts.primary_key = sync->key_names;
}
