/*-------------------------------------------------------------------------
 *
 * ctas_prepare.c
 *		  A federated CREATE TABLE AS, before any remote work: the load's
 *		  catalog, its statement options parsed and checked, its columns
 *		  derived from the query's result type and mapped by the target
 *		  (steps 1 and 2 of ctas.c's order of work).
 *
 * A bad option or type is an error here, so that it costs nothing
 * remotely.  ctas.c runs the load CtasPrepareLoad returns.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 * Portions Copyright (c) 1996-2022, PostgreSQL Global Development Group
 *
 * IDENTIFICATION
 *		  src/ctas_prepare.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/prepare.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/varlena.h"

#include "ctas.h"
#include "gid.h"
#include "parallel.h"
#include "sync/sync.h"
#include "targets.h"
#include "typemap.h"

/* statement options that every target takes; a target adds its own */
static const char *const generic_options[] = {
	"atomic", "if_exists", "commit_every", "column_types", "primary_key",
	"sync", "parallel", "schema_changes", "stream", NULL
};

static void parse_options(CtasLoad *load, List *options);
static bool parse_generic_option(CtasLoad *load, DefElem *def);
static void derive_columns(CtasLoad *load, TupleDesc tupdesc, List *colnames);
static List *parse_name_list(const char *option, const char *value);

/*
 * check_remote_name
 *		A name that goes to the remote as an identifier must hold no control
 *		character (a byte below 0x20, or 0x7f): quoting makes one harmless
 *		to the remote parser, but not to logs, error messages and the tools
 *		that read the remote's catalog.  what is "column", "schema" or
 *		"table".  ereport(ERROR) naming the object, with the character
 *		escaped.
 */
static void
check_remote_name(const char *what, const char *name)
{
	const unsigned char *p;

	for (p = (const unsigned char *) name; *p; p++)
	{
		if (*p < 0x20 || *p == 0x7f)
		{
			StringInfoData shown;
			const unsigned char *q;

			initStringInfo(&shown);
			for (q = (const unsigned char *) name; *q; q++)
			{
				if (*q < 0x20 || *q == 0x7f)
					appendStringInfo(&shown, "\\x%02x", *q);
				else
					appendStringInfoChar(&shown, (char) *q);
			}
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_NAME),
					 errmsg("%s name \"%s\" contains a control character",
							what, shown.data),
					 errdetail("Names in a remote catalog cannot contain characters below 0x20 or the character 0x7f.")));
		}
	}
}

/*
 * CtasNewLoad
 *		Set up the load of one statement into catalog serverid: descriptor,
 *		privileges, options.  No remote work.  The load and what hangs off it
 *		live in a new context under the current one.
 */
CtasLoad *
CtasNewLoad(Oid serverid, RangeVar *rel, List *options)
{
	MemoryContext cxt;
	MemoryContext oldcxt;
	CtasLoad   *load;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "ctas_fed load",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);

	load = palloc0(sizeof(CtasLoad));
	load->cxt = cxt;
	load->row_cxt = AllocSetContextCreate(cxt, "ctas_fed row",
										  ALLOCSET_DEFAULT_SIZES);
	load->catalog = CtasGetCatalog(serverid, GetUserId(), true, true);
	load->routine = CtasCatalogRoutine(load->catalog);
	load->schema = pstrdup(rel->schemaname);
	load->table = pstrdup(rel->relname);
	check_remote_name("schema", load->schema);
	check_remote_name("table", load->table);
	if (CtasIsScratchName(load->table))
		ereport(ERROR,
				(errcode(ERRCODE_RESERVED_NAME),
				 errmsg("table name \"%s\" is reserved", load->table),
				 errdetail("Names beginning with \"%s\" are reserved for the scratch tables of ctas_fed.",
						   CTAS_SCRATCH_PREFIX),
				 errhint("Choose a table name that does not begin with \"%s\".",
						 CTAS_SCRATCH_PREFIX)));
	parse_options(load, options);
	if (load->routine->check_options)
		load->routine->check_options(load);

	MemoryContextSwitchTo(oldcxt);
	return load;
}

/*
 * parse_options
 *		WITH (...) of a federated CTAS into load->opts: the generic options
 *		here, the others by the target's parse_option.  ERROR on names that
 *		neither knows, with the valid names of this target in the hint, and
 *		on bad values.
 */
static void
parse_options(CtasLoad *load, List *options)
{
	const CtasTargetRoutine *routine = load->routine;
	CtasOptions *o = &load->opts;
	ListCell   *lc;

	o->atomic = true;
	o->if_exists = CTAS_IF_EXISTS_ERROR;
	o->commit_every = 100000;

	foreach(lc, options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);
		StringInfoData buf;
		const char *const *name;

		if (def->defnamespace == NULL)
		{
			if (parse_generic_option(load, def))
				continue;
			if (routine->parse_option && routine->parse_option(load, def))
				continue;
		}

		initStringInfo(&buf);
		for (name = generic_options; *name; name++)
			appendStringInfo(&buf, "%s%s", buf.len ? ", " : "", *name);
		for (name = routine->statement_options; name && *name; name++)
			appendStringInfo(&buf, ", %s", *name);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unrecognized option \"%s\" for CREATE TABLE AS into a catalog",
						def->defname),
				 errhint("Valid options are: %s.", buf.data)));
	}

	/*
	 * A streaming load commits each remote step on its own: replacing would
	 * drop the old table before the first row, and a failure would leave
	 * no table at all.
	 */
	if (!o->atomic && o->if_exists == CTAS_IF_EXISTS_REPLACE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option if_exists = 'replace' needs atomic = true"),
				 errdetail("A streaming load cannot replace a table: the old one would be gone before the new one is complete."),
				 errhint("Use atomic = true, the default, which replaces the table when the transaction commits.")));

	/* the initial copy of a sync is its worker's, under the slot's snapshot */
	if (o->sync && o->parallel > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"parallel\" cannot be combined with the option \"sync\""),
				 errdetail("The initial copy of a continuous sync is made by its sync worker, under the snapshot of its replication slot.")));
	if (o->schema_changes != NULL && !o->sync)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"schema_changes\" requires sync = 'continuous'")));
	if (o->stream != NULL && !o->sync)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"stream\" requires sync = 'continuous'")));
}

/*
 * parse_generic_option
 *		One of the generic options into load->opts; false when def names
 *		none of them.  ERROR on a bad value.
 */
static bool
parse_generic_option(CtasLoad *load, DefElem *def)
{
	CtasOptions *o = &load->opts;

	if (strcmp(def->defname, "atomic") == 0)
		o->atomic = defGetBoolean(def);
	else if (strcmp(def->defname, "if_exists") == 0)
	{
		char	   *v = defGetString(def);

		if (strcmp(v, "error") == 0)
			o->if_exists = CTAS_IF_EXISTS_ERROR;
		else if (strcmp(v, "replace") == 0)
			o->if_exists = CTAS_IF_EXISTS_REPLACE;
		else if (strcmp(v, "append") == 0)
			o->if_exists = CTAS_IF_EXISTS_APPEND;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"if_exists\": \"%s\"", v),
					 errhint("Valid values are: error, replace, append.")));
	}
	else if (strcmp(def->defname, "commit_every") == 0)
	{
		o->commit_every = defGetInt64(def);
		if (o->commit_every <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"commit_every\": " INT64_FORMAT,
							o->commit_every),
					 errdetail("The value must be a positive number of rows.")));
	}
	else if (strcmp(def->defname, "parallel") == 0)
	{
		int64		n = defGetInt64(def);

		if (n < 0 || n > CTAS_MAX_PARALLEL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"parallel\": " INT64_FORMAT, n),
					 errdetail("The value must be a number of workers between 0 and %d.",
							   CTAS_MAX_PARALLEL)));
		o->parallel = (int) n;
	}
	else if (strcmp(def->defname, "column_types") == 0)
		o->column_types = defGetString(def);
	else if (strcmp(def->defname, "primary_key") == 0)
		o->primary_key = parse_name_list("primary_key", defGetString(def));
	else if (strcmp(def->defname, "sync") == 0)
	{
		char	   *v = defGetString(def);

		if (strcmp(v, "continuous") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"sync\": \"%s\"", v),
					 errhint("Valid values are: continuous.")));
		o->sync = true;
	}
	else if (strcmp(def->defname, "schema_changes") == 0)
	{
		char	   *v = defGetString(def);

		if (strcmp(v, "follow") != 0 && strcmp(v, "fail") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"schema_changes\": \"%s\"", v),
					 errhint("Valid values are: follow, fail.")));
		o->schema_changes = v;
	}
	else if (strcmp(def->defname, "stream") == 0)
	{
		char	   *v = defGetString(def);
		bool		valid = v[0] != '\0' && strlen(v) <= 32 &&
			!(v[0] >= '0' && v[0] <= '9');
		const char *c;

		for (c = v; valid && *c; c++)
			valid = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
				*c == '_';
		if (!valid)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"stream\": \"%s\"", v),
					 errdetail("A stream name has 1 to 32 lower-case letters, digits and underscores, and does not begin with a digit.")));
		/* "default": the database's shared stream, as without the option */
		o->stream = strcmp(v, "default") == 0 ? NULL : v;
	}
	else
		return false;
	return true;
}

/*
 * parse_name_list
 *		"a, b, \"C\"" into a list of String column names.
 */
static List *
parse_name_list(const char *option, const char *value)
{
	char	   *copy = pstrdup(value);
	List	   *names = NIL;
	List	   *result = NIL;
	ListCell   *lc;

	if (!SplitIdentifierString(copy, ',', &names) || names == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"",
						option, value),
				 errhint("Write a comma-separated list of column names.")));
	foreach(lc, names)
		result = lappend(result, makeString(pstrdup(lfirst(lc))));
	return result;
}

/*
 * find_column
 *		Index of the column called name among those derived so far; ERROR
 *		naming the statement option that referred to it otherwise.
 */
static int
find_column(CtasLoad *load, const char *name, const char *option)
{
	int			i;

	for (i = 0; i < load->ncolumns; i++)
	{
		if (strcmp(load->columns[i].name, name) == 0)
			return i;
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("column \"%s\" named in option \"%s\" does not exist in the query result",
					name, option)));
	return -1;					/* keep compiler quiet */
}

/*
 * derive_columns
 *		The remote columns from the query's result type: names (the column
 *		name list first), local types with domains stripped, remote types
 *		from column_types or the target's map, and the I/O functions.
 *		ERROR naming the column when a type cannot be used.
 */
static void
derive_columns(CtasLoad *load, TupleDesc tupdesc, List *colnames)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(load->cxt);
	List	   *overrides = NIL;
	ListCell   *lc;
	int			i;
	int			n = 0;

	if (list_length(colnames) > tupdesc->natts)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("too many column names were specified")));

	load->columns = palloc0(sizeof(CtasColumn) * Max(tupdesc->natts, 1));
	for (i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);
		CtasColumn *col = &load->columns[n];
		int			j;

		if (attr->attisdropped)
			continue;
		col->name = pstrdup(i < list_length(colnames) ?
							strVal(list_nth(colnames, i)) :
							NameStr(attr->attname));
		check_remote_name("column", col->name);
		for (j = 0; j < n; j++)
		{
			if (strcmp(load->columns[j].name, col->name) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("column \"%s\" specified more than once",
								col->name)));
		}
		col->typid = attr->atttypid;
		col->typmod = attr->atttypmod;
		col->basetypmod = col->typmod;
		col->basetypid = getBaseTypeAndTypmod(col->typid, &col->basetypmod);
		if (get_typtype(col->basetypid) == TYPTYPE_PSEUDO)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("column \"%s\" has pseudo-type %s",
							col->name, format_type_be(col->typid))));
		n++;
	}
	load->ncolumns = n;
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a table in catalog \"%s\" needs at least one column",
						load->catalog->name)));

	/* key columns */
	foreach(lc, load->opts.primary_key)
		load->columns[find_column(load, strVal(lfirst(lc)), "primary_key")].is_key = true;

	/* overrides, then the target's map for the rest */
	if (load->opts.column_types)
		overrides = CtasParseColumnTypes(load->opts.column_types);
	foreach(lc, overrides)
	{
		List	   *pair = lfirst(lc);

		i = find_column(load, strVal(linitial(pair)), "column_types");
		load->columns[i].remote_type = strVal(lsecond(pair));
		load->columns[i].overridden = true;
	}

	for (i = 0; i < n; i++)
	{
		CtasColumn *col = &load->columns[i];
		Oid			func;
		bool		isvarlena;

		getTypeOutputInfo(col->typid, &func, &isvarlena);
		fmgr_info_cxt(func, &col->out_func, load->cxt);

		if (!col->overridden)
			load->routine->map_column(load, col);

		if (col->binary_ok)
		{
			getTypeBinaryOutputInfo(col->typid, &func, &isvarlena);
			if (OidIsValid(func))
				fmgr_info_cxt(func, &col->send_func, load->cxt);
			else
				col->binary_ok = false;
		}
	}
	MemoryContextSwitchTo(oldcxt);
}

/*
 * result_desc
 *		The result type of the query of a CTAS: a SELECT's target list, or
 *		the prepared statement's result for AS EXECUTE.  ERROR when the
 *		prepared statement does not return rows.
 */
static TupleDesc
result_desc(Query *query)
{
	if (query->commandType == CMD_UTILITY &&
		IsA(query->utilityStmt, ExecuteStmt))
	{
		ExecuteStmt *estmt = (ExecuteStmt *) query->utilityStmt;
		PreparedStatement *ps = FetchPreparedStatement(estmt->name, true);

		if (ps->plansource->commandTag != CMDTAG_SELECT ||
			ps->plansource->resultDesc == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("prepared statement is not a SELECT")));
		return CreateTupleDescCopy(ps->plansource->resultDesc);
	}
	return ExecCleanTypeFromTL(query->targetList);
}

/*
 * CtasPrepareLoad
 *		Everything about a CTAS that needs no remote work: descriptor,
 *		options, columns.  Shared by execution and EXPLAIN.
 */
CtasLoad *
CtasPrepareLoad(Oid serverid, CreateTableAsStmt *stmt)
{
	IntoClause *into = stmt->into;
	CtasLoad   *load;

	load = CtasNewLoad(serverid, into->rel, into->options);
	if (stmt->if_not_exists)
	{
		if (load->opts.if_exists != CTAS_IF_EXISTS_ERROR)
			ereport(ERROR,
					(errcode(ERRCODE_SYNTAX_ERROR),
					 errmsg("IF NOT EXISTS cannot be combined with the option \"if_exists\"")));
		load->opts.if_exists = CTAS_IF_EXISTS_SKIP;
	}
	load->skip_data = into->skipData;
	if (load->opts.if_exists == CTAS_IF_EXISTS_REPLACE ||
		load->opts.if_exists == CTAS_IF_EXISTS_APPEND)
		CtasSyncCheckTarget(serverid, load->schema, load->table);
	if (load->opts.sync)
	{
		if (load->routine->sync == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("catalogs of type \"%s\" do not support continuous sync",
							load->routine->type_name)));
		CtasSyncCheck(load, castNode(Query, stmt->query), into->colNames);
	}
	derive_columns(load, result_desc(castNode(Query, stmt->query)),
				   into->colNames);
	if (load->sync && load->routine->sync->prepare)
		load->routine->sync->prepare(load);
	return load;
}
