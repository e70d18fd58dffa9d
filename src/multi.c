/*-------------------------------------------------------------------------
 *
 * multi.c
 *		  ctas_fed.create_tables_as(): many tables into one catalog in one
 *		  call, atomically with the caller's transaction.
 *
 * Each source table becomes one federated CREATE TABLE AS SELECT * FROM
 * the table, run by ctas.c exactly as the statement would be: the same
 * options (passed as the DefElems of WITH (...), so an unknown option gets
 * the statement's error), the same type map, DestReceiver, jobs and
 * transaction participants.  Nothing here knows a target.
 *
 * Order of work:
 *	1. arguments: the tables (an array, or the ordinary tables of a schema
 *	   in name order), the options object split into per-table DefElems;
 *	2. for every table, before any remote work: lock it, parse its query,
 *	   check SELECT as the executor would, and prepare its load (catalog
 *	   USAGE and mapping, options, columns) - so a bad option, type or
 *	   privilege on the last table costs nothing remotely;
 *	3. the loads run one after the other, each a job of one job group;
 *	   with {"parallel": N} and more than one table that can be loaded in
 *	   parallel, those are created first and then loaded together by one
 *	   set of N parallel workers, which take whole tables (parallel.c),
 *	   after the others.  Every table is read under the snapshot of the
 *	   calling statement.
 *
 * Atomicity comes from xact.c: every load joins the local transaction, so
 * an error in any table aborts the transaction and with it every remote
 * table of the call, in every catalog.  Errors carry the context "table
 * <source>".
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/multi.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/analyze.h"
#include "parser/scansup.h"
#include "storage/lmgr.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

#include "ctas.h"
#include "guc.h"
#include "parallel.h"

PG_FUNCTION_INFO_V1(ctas_fed_create_tables_as);

/* One source table of the call */
typedef struct MultiTable
{
	Oid			relid;
	char		relkind;
	char	   *source;			/* schema-qualified, quoted: for messages */
	char	   *target;			/* remote table name */
	List	   *options;		/* DefElems of WITH (...) */
	bool		key_given;		/* options name primary_key, maybe null */
	ParseState *pstate;
	Query	   *query;			/* SELECT * FROM the table, analyzed */
	CtasLoad   *load;
	Query	   *rewritten;		/* query rewritten, when the table is
								 * loaded by the parallel set */
} MultiTable;

/*
 * One member of the options object other than "rename": a value for every
 * table, or per-table values.  A value is a DefElem argument; NULL stands
 * for a JSON null.
 */
typedef struct MultiOption
{
	char	   *name;
	bool		per_table;
	Node	   *value;			/* !per_table */
	bool	   *given;			/* per_table: [ntables] */
	Node	  **values;			/* per_table: [ntables] */
} MultiOption;

static MultiTable *list_schema_tables(const char *schema, int *ntables);
static MultiTable *array_tables(ArrayType *arr, int *ntables);
static void multi_describe_table(MultiTable *t);
static List *parse_call_options(Jsonb *options, MultiTable *tables,
								int ntables);
static void table_options(MultiTable *t, int index, List *calloptions);
static void prepare_table(MultiTable *t, Oid serverid,
						  const char *remote_schema);
static void table_error_context(void *arg);
static int	plan_parallel(MultiTable *tables, int ntables);
static void load_parallel(MultiTable *tables, int ntables, int nworkers);

/*
 * ctas_fed.create_tables_as(catalog name, remote_schema text,
 *		tables regclass[] DEFAULT NULL, source_schema name DEFAULT NULL,
 *		options jsonb DEFAULT '{}')
 *		RETURNS TABLE (source regclass, target text, rows bigint)
 *
 * One remote table per source table, in the caller's transaction.  ERROR
 * (22023) for a call that names no tables, or both an array and a schema.
 */
Datum
ctas_fed_create_tables_as(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *catalog_name;
	char	   *remote_schema;
	Oid			serverid;
	MultiTable *tables;
	int			ntables;
	List	   *calloptions;
	int64		group_id;
	int			nworkers;
	int			i;

	CtasCheckPreloaded();
	PreventCommandIfReadOnly("ctas_fed.create_tables_as()");
	PreventCommandIfParallelMode("ctas_fed.create_tables_as()");

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"catalog\" must not be null")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"remote_schema\" must not be null")));
	catalog_name = NameStr(*PG_GETARG_NAME(0));
	remote_schema = text_to_cstring(PG_GETARG_TEXT_PP(1));
	/* a name of the statement: not empty, cut as the parser cuts one */
	if (remote_schema[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"remote_schema\" must not be empty")));
	truncate_identifier(remote_schema, strlen(remote_schema), true);

	serverid = CtasCatalogServerOid(catalog_name);
	if (!OidIsValid(serverid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("catalog \"%s\" does not exist", catalog_name),
				 errhint("A catalog is a foreign server of the ctas_fed foreign-data wrapper.")));
	/* USAGE and a user mapping, before anything about the tables */
	(void) CtasGetCatalog(serverid, GetUserId(), true, true);

	if (PG_ARGISNULL(2) == PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("exactly one of \"tables\" and \"source_schema\" must be given"),
				 errhint("Pass an array of tables, or the name of a schema whose tables are all copied.")));
	if (!PG_ARGISNULL(2))
		tables = array_tables(PG_GETARG_ARRAYTYPE_P(2), &ntables);
	else
		tables = list_schema_tables(NameStr(*PG_GETARG_NAME(3)), &ntables);

	calloptions = parse_call_options(PG_ARGISNULL(4) ? NULL :
									 PG_GETARG_JSONB_P(4),
									 tables, ntables);

	/* every table checked and prepared before any remote work */
	for (i = 0; i < ntables; i++)
	{
		MultiTable *t = &tables[i];
		ErrorContextCallback errcallback;
		int			j;

		errcallback.callback = table_error_context;
		errcallback.arg = t;
		errcallback.previous = error_context_stack;
		error_context_stack = &errcallback;

		table_options(t, i, calloptions);
		for (j = 0; j < i; j++)
		{
			if (strcmp(tables[j].target, t->target) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_TABLE),
						 errmsg("tables %s and %s would both be created as \"%s\"",
								tables[j].source, t->source, t->target),
						 errhint("Give one of them another name with the option \"rename\".")));
		}
		prepare_table(t, serverid, remote_schema);

		error_context_stack = errcallback.previous;
	}

	InitMaterializedSRF(fcinfo, 0);
	group_id = CtasJobNewGroup();
	for (i = 0; i < ntables; i++)
		tables[i].load->group_id = group_id;
	nworkers = plan_parallel(tables, ntables);

	for (i = 0; i < ntables; i++)
	{
		MultiTable *t = &tables[i];
		ErrorContextCallback errcallback;

		if (t->rewritten != NULL)
			continue;			/* loaded by the parallel set below */
		errcallback.callback = table_error_context;
		errcallback.arg = t;
		errcallback.previous = error_context_stack;
		error_context_stack = &errcallback;

		CtasRunLoad(t->load, t->pstate, t->query, NULL, NULL);

		error_context_stack = errcallback.previous;
	}
	if (nworkers > 0)
		load_parallel(tables, ntables, nworkers);

	for (i = 0; i < ntables; i++)
	{
		MultiTable *t = &tables[i];
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = ObjectIdGetDatum(t->relid);
		values[1] = CStringGetTextDatum(psprintf("%s.%s",
												 quote_identifier(t->load->schema),
												 quote_identifier(t->load->table)));
		values[2] = Int64GetDatum((int64) t->load->rows);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
							 values, nulls);
		MemoryContextDelete(t->load->cxt);
		t->load = NULL;
	}
	return (Datum) 0;
}

/*
 * plan_parallel
 *		With {"parallel": N} on more than one table that can be loaded in
 *		parallel (CtasParallelIneligible), those tables get their rewritten
 *		query in t->rewritten, and the result is the most workers any of
 *		them asks for.  Else 0: every table loads on its own, by block
 *		ranges or serially after a NOTICE saying why, as a CTAS would.
 */
static int
plan_parallel(MultiTable *tables, int ntables)
{
	int			nworkers = 0;
	int			n = 0;
	int			i;

	for (i = 0; i < ntables; i++)
	{
		MultiTable *t = &tables[i];

		t->rewritten = NULL;
		if (t->load->opts.parallel > 0 &&
			CtasParallelIneligible(t->load, t->query, &t->rewritten) == NULL)
		{
			nworkers = Max(nworkers, t->load->opts.parallel);
			n++;
		}
		else
			t->rewritten = NULL;
	}
	if (n >= 2)
		return nworkers;
	for (i = 0; i < ntables; i++)
		tables[i].rewritten = NULL;
	return 0;
}

/* The tables of a call, for table_loaded */
typedef struct MultiCall
{
	MultiTable *tables;
	int			ntables;
} MultiCall;

/*
 * table_loaded
 *		The set's callback: end_load of a table its workers are done with,
 *		while they load the others.  ERROR (with the context of the table,
 *		its job failed) when the target's check fails.
 */
static void
table_loaded(CtasLoad *load, void *arg)
{
	MultiCall  *call = (MultiCall *) arg;
	ErrorContextCallback errcallback;
	int			i;

	for (i = 0; i < call->ntables && call->tables[i].load != load; i++)
		;
	Assert(i < call->ntables);
	errcallback.callback = table_error_context;
	errcallback.arg = &call->tables[i];
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	CtasEndLoad(load);
	error_context_stack = errcallback.previous;
}

/*
 * load_parallel
 *		Load the tables that plan_parallel chose with one set of nworkers
 *		parallel workers: create each (its job started) and hand it to the
 *		set, then run the set, which ends each load as soon as its workers
 *		are done with it.  ERROR (with the context of the table, and its
 *		job failed) when any of it fails.
 */
static void
load_parallel(MultiTable *tables, int ntables, int nworkers)
{
	MultiCall	call = {tables, ntables};
	CtasParallelSet *set = CtasParallelSetCreate(nworkers, table_loaded,
												 &call);
	ErrorContextCallback errcallback;
	int			i;

	errcallback.callback = table_error_context;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	/* one remote stream is open at a time: create, then export, each */
	for (i = 0; i < ntables; i++)
	{
		MultiTable *t = &tables[i];

		if (t->rewritten == NULL)
			continue;
		errcallback.arg = t;
		if (!CtasBeginLoad(t->load))
		{
			CtasEndLoad(t->load);	/* IF NOT EXISTS found it: no rows */
			continue;
		}
		PG_TRY();
		{
			CtasParallelSetAdd(set, t->load, t->rewritten,
							   t->pstate->p_sourcetext, t->source);
		}
		PG_CATCH();
		{
			CtasFailLoad(t->load);
			PG_RE_THROW();
		}
		PG_END_TRY();
	}

	/* a worker's error has the context of its table */
	error_context_stack = errcallback.previous;
	PG_TRY();
	{
		CtasParallelSetRun(set);
	}
	PG_CATCH();
	{
		for (i = 0; i < ntables; i++)
		{
			if (tables[i].rewritten != NULL &&
				CtasParallelSetFailed(set, tables[i].load))
				CtasFailLoad(tables[i].load);
		}
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/* errcontext of the work on one table */
static void
table_error_context(void *arg)
{
	MultiTable *t = (MultiTable *) arg;

	errcontext("table %s", t->source);
}

/*
 * multi_describe_table
 *		Fill in relkind and the quoted qualified name of t->relid, which the
 *		caller has locked.  ERROR when it is gone or cannot be read as a
 *		table.
 */
static void
multi_describe_table(MultiTable *t)
{
	HeapTuple	tp;
	Form_pg_class form;

	tp = SearchSysCache1(RELOID, ObjectIdGetDatum(t->relid));
	if (!HeapTupleIsValid(tp))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", t->relid)));
	form = (Form_pg_class) GETSTRUCT(tp);
	t->relkind = form->relkind;
	t->source = quote_qualified_identifier(get_namespace_name(form->relnamespace),
										   NameStr(form->relname));
	t->target = pstrdup(NameStr(form->relname));
	ReleaseSysCache(tp);

	switch (t->relkind)
	{
		case RELKIND_RELATION:
		case RELKIND_PARTITIONED_TABLE:
		case RELKIND_VIEW:
		case RELKIND_MATVIEW:
		case RELKIND_FOREIGN_TABLE:
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("\"%s\" is not a table, view or foreign table",
							t->source)));
	}
}

/*
 * array_tables
 *		The tables of a regclass[] argument, each locked AccessShare, in
 *		the order given.  Palloc'd in the current context.  ERROR for an
 *		empty array, a NULL element or a table listed twice.
 */
static MultiTable *
array_tables(ArrayType *arr, int *ntables)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	MultiTable *tables;
	int			i;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("\"tables\" must be a one-dimensional array")));
	deconstruct_array(arr, REGCLASSOID, sizeof(Oid), true, TYPALIGN_INT,
					  &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"tables\" is empty")));

	tables = palloc0(sizeof(MultiTable) * n);
	for (i = 0; i < n; i++)
	{
		int			j;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("\"tables\" must not contain nulls")));
		tables[i].relid = DatumGetObjectId(elems[i]);
		LockRelationOid(tables[i].relid, AccessShareLock);
		multi_describe_table(&tables[i]);
		for (j = 0; j < i; j++)
		{
			if (tables[j].relid == tables[i].relid)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("table %s is listed more than once in \"tables\"",
								tables[i].source)));
		}
	}
	*ntables = n;
	return tables;
}

/* qsort comparator of MultiTables by remote (= source) name */
static int
table_name_cmp(const void *a, const void *b)
{
	return strcmp(((const MultiTable *) a)->target,
				  ((const MultiTable *) b)->target);
}

/*
 * list_schema_tables
 *		The ordinary and partitioned tables of schema, in name order,
 *		each locked AccessShare.  Partitions are left out: their rows come
 *		with their partitioned table.  ERROR (with USAGE on the schema
 *		checked first) when the schema does not exist or has no table.
 *		Palloc'd in the current context.
 */
static MultiTable *
list_schema_tables(const char *schema, int *ntables)
{
	Oid			nspid = LookupExplicitNamespace(schema, false);
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *relids = NIL;
	MultiTable *tables;
	ListCell   *lc;
	int			n = 0;

	rel = table_open(RelationRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_class_relnamespace, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(nspid));
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tup);

		if ((form->relkind == RELKIND_RELATION ||
			 form->relkind == RELKIND_PARTITIONED_TABLE) &&
			!form->relispartition)
			relids = lappend_oid(relids, form->oid);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	if (relids == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schema \"%s\" has no tables", schema)));

	tables = palloc0(sizeof(MultiTable) * list_length(relids));
	foreach(lc, relids)
	{
		MultiTable *t = &tables[n];

		t->relid = lfirst_oid(lc);
		LockRelationOid(t->relid, AccessShareLock);
		/* dropped between the scan and the lock: it is not there */
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(t->relid)))
		{
			UnlockRelationOid(t->relid, AccessShareLock);
			continue;
		}
		multi_describe_table(t);
		n++;
	}
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schema \"%s\" has no tables", schema)));
	qsort(tables, n, sizeof(MultiTable), table_name_cmp);
	*ntables = n;
	return tables;
}

/*
 * json_scalar_arg
 *		A JSON scalar as the argument of a DefElem, as the grammar would
 *		have made it from WITH (name = value): strings and booleans as
 *		String, integers as Integer, other numbers as Float.  NULL for a
 *		JSON null.  ERROR for a container.
 */
static Node *
json_scalar_arg(const char *option, JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return NULL;
		case jbvString:
			return (Node *) makeString(pnstrdup(v->val.string.val,
												v->val.string.len));
		case jbvBool:
			return (Node *) makeString(pstrdup(v->val.boolean ? "true" : "false"));
		case jbvNumeric:
			{
				char	   *s = DatumGetCString(DirectFunctionCall1(numeric_out,
																	NumericGetDatum(v->val.numeric)));
				char	   *end;
				long		l;

				errno = 0;
				l = strtol(s, &end, 10);
				if (*end == '\0' && errno == 0 && l >= PG_INT32_MIN &&
					l <= PG_INT32_MAX)
					return (Node *) makeInteger((int) l);
				return (Node *) makeFloat(s);
			}
		default:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"%s\"", option),
					 errdetail("The value must be a string, a number, a boolean or null, or an object whose keys are tables of the call.")));
	}
	return NULL;				/* keep compiler quiet */
}

/*
 * table_index
 *		Index in tables of the table that key (a table name, as regclass
 *		input reads it) names.  ERROR naming the option when it names none
 *		of them.
 */
static int
table_index(const char *option, const char *key, MultiTable *tables,
			int ntables)
{
	List	   *names = stringToQualifiedNameList(key);
	Oid			relid;
	int			i;

	relid = RangeVarGetRelid(makeRangeVarFromNameList(names), NoLock, true);
	for (i = 0; OidIsValid(relid) && i < ntables; i++)
	{
		if (tables[i].relid == relid)
			return i;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("table \"%s\" named in option \"%s\" is not one of the tables of the call",
					key, option),
			 errhint("Keys of a per-table option name tables as the \"tables\" argument does.")));
	return -1;					/* keep compiler quiet */
}

/*
 * named_once
 *		given[i] says whether an earlier key of the per-table object of
 *		option already named table i (under another spelling: "t" and
 *		"public.t"); ERROR (22023) if so, rather than letting the last one
 *		win; else sets it.
 */
static void
named_once(const char *option, const char *key, MultiTable *tables, int i,
		   bool *given)
{
	if (given[i])
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("table %s is named more than once in option \"%s\"",
						tables[i].source, option),
				 errdetail("The key \"%s\" names a table that an earlier key named.",
						   key)));
	given[i] = true;
}

/*
 * parse_call_options
 *		Split the options object into MultiOptions; "rename" sets the
 *		targets of the tables it names.  A member's value is a scalar for
 *		every table, or an object whose keys are tables of the call.
 *		Whether a name is an option of CREATE TABLE AS, and whether its
 *		value is valid, is left to ctas.c.  Palloc'd in the current
 *		context.  ERROR (22023) for anything but an object.
 */
static List *
parse_call_options(Jsonb *options, MultiTable *tables, int ntables)
{
	List	   *result = NIL;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *name = NULL;
	bool	   *given;

	if (options == NULL)
		return NIL;
	if (!JB_ROOT_IS_OBJECT(options))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"options\" must be a JSON object")));

	it = JsonbIteratorInit(&options->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		MultiOption *opt;
		JsonbIterator *sub;
		JsonbValue	sv;
		JsonbIteratorToken stok;
		char	   *key = NULL;

		if (tok == WJB_KEY)
		{
			name = pnstrdup(v.val.string.val, v.val.string.len);
			continue;
		}
		if (tok != WJB_VALUE)
			continue;

		if (strcmp(name, "rename") == 0)
		{
			if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"rename\" must be an object that maps tables to new names")));
			given = palloc0(sizeof(bool) * ntables);
			sub = JsonbIteratorInit(v.val.binary.data);
			while ((stok = JsonbIteratorNext(&sub, &sv, true)) != WJB_DONE)
			{
				if (stok == WJB_KEY)
					key = pnstrdup(sv.val.string.val, sv.val.string.len);
				else if (stok == WJB_VALUE)
				{
					int			i = table_index(name, key, tables, ntables);

					if (sv.type != jbvString || sv.val.string.len == 0)
						ereport(ERROR,
								(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
								 errmsg("new name of table \"%s\" in option \"rename\" must be a non-empty string",
										key)));
					named_once(name, key, tables, i, given);
					tables[i].target = pnstrdup(sv.val.string.val,
												sv.val.string.len);

					/*
					 * The name of a statement's table is cut at NAMEDATALEN
					 * - 1 bytes by the parser (and by a remote PostgreSQL):
					 * cut here too, so that two names equal in their first
					 * 63 bytes clash here rather than in the remote.
					 */
					truncate_identifier(tables[i].target,
										strlen(tables[i].target), true);
				}
			}
			continue;
		}

		opt = palloc0(sizeof(MultiOption));
		opt->name = name;
		if (v.type == jbvBinary && JsonContainerIsObject(v.val.binary.data))
		{
			opt->per_table = true;
			opt->given = palloc0(sizeof(bool) * ntables);
			opt->values = palloc0(sizeof(Node *) * ntables);
			sub = JsonbIteratorInit(v.val.binary.data);
			while ((stok = JsonbIteratorNext(&sub, &sv, true)) != WJB_DONE)
			{
				if (stok == WJB_KEY)
					key = pnstrdup(sv.val.string.val, sv.val.string.len);
				else if (stok == WJB_VALUE)
				{
					int			i = table_index(name, key, tables, ntables);

					named_once(name, key, tables, i, opt->given);
					opt->values[i] = json_scalar_arg(name, &sv);
				}
			}
		}
		else
			opt->value = json_scalar_arg(name, &v);
		result = lappend(result, opt);
	}
	return result;
}

/*
 * primary_key_of
 *		The columns of the primary key of relid as a primary_key option
 *		value ("a, \"B\""), or NULL when it has none.  Palloc'd.
 */
static char *
primary_key_of(Oid relid)
{
	Relation	rel = table_open(relid, NoLock);
	Oid			indexid = RelationGetPrimaryKeyIndex(rel);
	StringInfoData buf;
	HeapTuple	tp;
	Form_pg_index index;
	int			i;

	table_close(rel, NoLock);
	if (!OidIsValid(indexid))
		return NULL;

	tp = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexid));
	if (!HeapTupleIsValid(tp))
		elog(ERROR, "cache lookup failed for index %u", indexid);
	index = (Form_pg_index) GETSTRUCT(tp);
	initStringInfo(&buf);
	for (i = 0; i < index->indnkeyatts; i++)
	{
		AttrNumber	attnum = index->indkey.values[i];

		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(get_attname(relid, attnum, false)));
	}
	ReleaseSysCache(tp);
	return buf.data;
}

/*
 * table_options
 *		The WITH (...) list of table number index: each option's value for
 *		it (a JSON null leaves the option out), and the source's primary
 *		key when primary_key was not given at all.
 */
static void
table_options(MultiTable *t, int index, List *calloptions)
{
	ListCell   *lc;

	t->options = NIL;
	foreach(lc, calloptions)
	{
		MultiOption *opt = lfirst(lc);
		Node	   *value;

		if (opt->per_table && !opt->given[index])
			continue;
		if (strcmp(opt->name, "primary_key") == 0)
			t->key_given = true;
		value = opt->per_table ? opt->values[index] : opt->value;
		if (value == NULL)
			continue;
		t->options = lappend(t->options,
							 makeDefElem(opt->name, copyObject(value), -1));
	}
	if (!t->key_given)
	{
		char	   *key = primary_key_of(t->relid);

		if (key)
			t->options = lappend(t->options,
								 makeDefElem("primary_key",
											 (Node *) makeString(key), -1));
	}
}

/*
 * prepare_table
 *		Parse SELECT * FROM the table (ONLY its own rows for a plain table:
 *		its inheritance children are tables of their own), check SELECT on
 *		it as the executor will, and prepare its load.  No remote work.
 *		ERROR on any of it.
 */
static void
prepare_table(MultiTable *t, Oid serverid, const char *remote_schema)
{
	char	   *sql;
	RawStmt    *raw;
	IntoClause *into;
	CreateTableAsStmt *stmt;

	sql = psprintf("SELECT * FROM %s%s",
				   t->relkind == RELKIND_RELATION ? "ONLY " : "", t->source);
	raw = linitial_node(RawStmt, pg_parse_query(sql));
	t->query = parse_analyze_fixedparams(raw, sql, NULL, 0, NULL);
	(void) ExecCheckRTPerms(t->query->rtable, true);

	t->pstate = make_parsestate(NULL);
	t->pstate->p_sourcetext = sql;

	into = makeNode(IntoClause);
	into->rel = makeRangeVar(pstrdup(remote_schema), t->target, -1);
	into->options = t->options;
	into->onCommit = ONCOMMIT_NOOP;

	stmt = makeNode(CreateTableAsStmt);
	stmt->query = (Node *) t->query;
	stmt->into = into;
	stmt->objtype = OBJECT_TABLE;

	t->load = CtasPrepareLoad(serverid, stmt);
}
