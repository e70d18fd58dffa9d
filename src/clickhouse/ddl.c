/*-------------------------------------------------------------------------
 *
 * ddl.c
 *		  The SQL text the ClickHouse target sends: quoted names, small
 *		  results, the checks of the table options and CREATE TABLE.
 *
 * Every remote identifier is backquoted with escapes, every literal
 * single-quoted with escapes (client.c); the table options engine, order_by,
 * partition_by and settings are ClickHouse expressions and pass through,
 * after a check that they cannot end the statement or comment out the
 * rest of it.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/ddl.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/defrem.h"

#include "clickhouse.h"

/* ------------------------------------------------------------------------
 * Quoting and small results
 * ------------------------------------------------------------------------
 */

/* `db`.`table`, palloc'd */
char *
CtasChQname(const char *db, const char *table)
{
	StringInfoData buf;

	initStringInfo(&buf);
	CtasChAppendIdent(&buf, db);
	appendStringInfoChar(&buf, '.');
	CtasChAppendIdent(&buf, table);
	return buf.data;
}

/* 'literal', palloc'd */
char *
CtasChLit(const char *s)
{
	StringInfoData buf;

	initStringInfo(&buf);
	CtasChAppendLiteral(&buf, s);
	return buf.data;
}

/* db.table for messages, palloc'd */
char *
CtasChDisplay(const char *db, const char *table)
{
	return psprintf("%s.%s", db, table);
}

/*
 * CtasChTsv
 *		Split a TabSeparated result into a List (rows) of char ** (fields,
 *		unescaped; \N becomes NULL).  *nfields gets the field count of the
 *		rows, or -1 when they do not all have the same count (then no row
 *		may be read beyond its first field).  Palloc'd.
 */
List *
CtasChTsv(const char *body, int *nfields)
{
	List	   *rows = NIL;
	const char *p = body;

	*nfields = 0;
	while (*p)
	{
		List	   *fields = NIL;
		char	  **arr;
		int			n;
		int			i;
		ListCell   *lc;

		for (;;)
		{
			StringInfoData f;
			bool		isnull = false;

			initStringInfo(&f);
			if (p[0] == '\\' && p[1] == 'N' && (p[2] == '\t' || p[2] == '\n' || p[2] == '\0'))
			{
				isnull = true;
				p += 2;
			}
			while (*p && *p != '\t' && *p != '\n')
			{
				if (*p == '\\' && p[1])
				{
					p++;
					switch (*p)
					{
						case 'n':
							appendStringInfoChar(&f, '\n');
							break;
						case 't':
							appendStringInfoChar(&f, '\t');
							break;
						case 'r':
							appendStringInfoChar(&f, '\r');
							break;
						case 'b':
							appendStringInfoChar(&f, '\b');
							break;
						case 'f':
							appendStringInfoChar(&f, '\f');
							break;
						case '0':
							appendStringInfoChar(&f, '?');	/* NUL: never ours */
							break;
						default:
							appendStringInfoChar(&f, *p);
							break;
					}
					p++;
				}
				else
					appendStringInfoChar(&f, *p++);
			}
			fields = lappend(fields, isnull ? NULL : f.data);
			if (*p == '\t')
			{
				p++;
				continue;
			}
			if (*p == '\n')
				p++;
			break;
		}
		n = list_length(fields);
		arr = palloc(sizeof(char *) * n);
		i = 0;
		foreach(lc, fields)
			arr[i++] = lfirst(lc);
		if (rows == NIL)
			*nfields = n;
		else if (n != *nfields)
			*nfields = -1;
		rows = lappend(rows, arr);
	}
	return rows;
}

/* The single number a query like SELECT count() returns */
uint64
CtasChParseCount(CtasChHttp *http, const char *body, const char *what)
{
	char	   *end;
	uint64		v;

	errno = 0;
	v = strtou64(body, &end, 10);
	if (errno != 0 || end == body || (*end != '\n' && *end != '\0'))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("unexpected answer from ClickHouse catalog \"%s\" to %s",
						CtasChHttpCatalogName(http), what),
				 errdetail_internal("The answer was \"%.100s\".", body)));
	return v;
}

/* ------------------------------------------------------------------------
 * Options and DDL
 * ------------------------------------------------------------------------
 */

/*
 * ch_expr_reaches_out
 *		Does the expression expr (balanced, see ch_check_expr) read anything
 *		but the row: a subquery (SELECT, which also brings table functions:
 *		url(), file(), remote()...), an IN operator (x IN db.table reads a
 *		table), or a function that reads a dictionary or another table?
 *		ClickHouse evaluates a partition key at each INSERT and shows the
 *		values it cannot convert in its error, so any of these would let a
 *		user of a shared mapping read, in an error message, what the
 *		mapping's ClickHouse user may read, or reach hosts from the
 *		ClickHouse server.  Returns what was found, for an errdetail, or
 *		NULL.
 */
static const char *const ch_reaching_functions[] = {
	"in", "notin", "nullin", "notnullin", "globalin", "globalnotin",
	"globalnullin", "globalnotnullin", "hascolumnintable",
	NULL
};

static const char *
ch_expr_reaches_out(const char *expr)
{
	const char *p = expr;

	while (*p)
	{
		char		word[NAMEDATALEN];
		bool		quoted = false;
		int			len = 0;
		const char *after;

		if (*p == '\'')
		{
			for (p++; *p && *p != '\''; p++)
			{
				if (*p == '\\' && p[1])
					p++;
			}
			if (*p)
				p++;
			continue;
		}
		if (*p == '`' || *p == '"')
		{
			char		q = *p;

			quoted = true;
			for (p++; *p && *p != q; p++)
			{
				if (*p == '\\' && p[1])
					p++;
				if (len < NAMEDATALEN - 1)
					word[len++] = pg_ascii_tolower((unsigned char) *p);
			}
			if (*p)
				p++;
		}
		else if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
				 *p == '_')
		{
			while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
				   (*p >= '0' && *p <= '9') || *p == '_')
			{
				if (len < NAMEDATALEN - 1)
					word[len++] = pg_ascii_tolower((unsigned char) *p);
				p++;
			}
		}
		else
		{
			/* a number's letters (1e5, 0x1F) are no word */
			if (*p >= '0' && *p <= '9')
			{
				while ((*p >= '0' && *p <= '9') || *p == '.' ||
					   (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))
					p++;
			}
			else
				p++;
			continue;
		}
		word[len] = '\0';

		if (!quoted && strcmp(word, "select") == 0)
			return "a subquery";
		if (!quoted && (strcmp(word, "in") == 0 || strcmp(word, "global") == 0))
			return "an IN operator, which can read another table";
		after = p + strspn(p, " \t\r\n");
		if (*after == '(')
		{
			const char *const *f;

			for (f = ch_reaching_functions; *f; f++)
			{
				if (strcmp(word, *f) == 0)
					break;
			}
			if (*f || strncmp(word, "dict", 4) == 0 ||
				strncmp(word, "join", 4) == 0)
				return psprintf("a call of function \"%s\", which can read another table or dictionary",
								word);
		}
	}
	return NULL;
}

/*
 * ch_check_expr
 *		A table option is a ClickHouse expression that goes into our DDL as
 *		written.  Refuse what could end the statement or hide the rest of
 *		it: a semicolon, a comment, an unbalanced bracket or quote; what
 *		could crash the server: brackets nested deeper than
 *		CH_MAX_EXPR_DEPTH; and what reads beyond the row
 *		(ch_expr_reaches_out).
 */
static void
ch_check_expr(const char *option, const char *value)
{
	const char *p;
	int			depth = 0;
	const char *why = NULL;

	if (value == NULL)
		return;
	for (p = value; *p && why == NULL; p++)
	{
		switch (*p)
		{
			case '\'':
			case '"':
			case '`':
				{
					char		q = *p;

					for (p++; *p && *p != q; p++)
					{
						if (*p == '\\' && p[1])
							p++;
					}
					if (*p == '\0')
					{
						why = "an unterminated quote";
						p--;
					}
					break;
				}
			case '(':
			case '[':
				if (++depth > CH_MAX_EXPR_DEPTH)
					why = psprintf("brackets nested more than %d deep",
								   CH_MAX_EXPR_DEPTH);
				break;
			case ')':
			case ']':
				if (--depth < 0)
					why = "an unbalanced bracket";
				break;
			case ';':
				why = "a semicolon";
				break;
			case '-':
				if (p[1] == '-')
					why = "a comment";
				break;
			case '/':
				if (p[1] == '*')
					why = "a comment";
				break;
			case '#':
				why = "a comment";
				break;
			default:
				break;
		}
	}
	if (why == NULL && depth != 0)
		why = "an unbalanced bracket";
	if (why == NULL && value[strspn(value, " \t\r\n")] == '\0')
		why = "nothing";
	if (why == NULL)
		why = ch_expr_reaches_out(value);
	if (why)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
				 errdetail("The value contains %s.", why)));
}

/*
 * Engines a CTAS may create: tables that keep their own rows.  An engine
 * that writes elsewhere or reads other tables (Buffer, Distributed, Merge,
 * File, URL, Replicated*, ...) would let a user of a shared user mapping
 * reach other data, and would break the staging protocol.
 */
static const char *const ch_allowed_engines[] = {
	"MergeTree", "ReplacingMergeTree", "SummingMergeTree",
	"AggregatingMergeTree", "CollapsingMergeTree",
	"VersionedCollapsingMergeTree", "Memory", "Log", "TinyLog", "StripeLog",
	NULL
};

/*
 * The most arguments each engine above takes in the syntax ctas_fed
 * writes (the key in ORDER BY, not in the engine's arguments): the old
 * MergeTree(date, key, 8192) form is refused by ClickHouse once ORDER BY
 * follows ("requires no parameters"), so it is refused here first.
 */
static const int ch_engine_max_args[] = {
	0, 1, 1,
	0, 1,
	2, 0, 0, 0, 0
};

StaticAssertDecl(lengthof(ch_engine_max_args) ==
				 lengthof(ch_allowed_engines) - 1,
				 "one argument count per allowed engine");

/*
 * ch_engine_nargs
 *		Number of top-level arguments in args, which starts at the engine's
 *		"(" (0 for "()" or no brackets).
 */
static int
ch_engine_nargs(const char *args)
{
	int			depth = 0;
	int			n = 0;
	const char *p;

	if (*args != '(')
		return 0;
	for (p = args; *p; p++)
	{
		if (*p == '(')
		{
			if (depth++ == 0 && p[1 + strspn(p + 1, " ")] != ')')
				n = 1;
		}
		else if (*p == ')')
		{
			if (--depth == 0)
				break;
		}
		else if (*p == ',' && depth == 1)
			n++;
	}
	return n;
}

/*
 * ch_check_engine
 *		engine must be an allowed engine name, optionally with arguments
 *		made of column names, numbers, commas and brackets only
 *		(ReplacingMergeTree(ver), ...), no more of them than the engine
 *		takes when its key is given by ORDER BY.
 */
static void
ch_check_engine(const char *engine)
{
	const char *const *e;
	const char *p = engine;
	size_t		len;
	int			max_args;

	while (*p == ' ')
		p++;
	len = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
	for (e = ch_allowed_engines; *e; e++)
	{
		if (strlen(*e) == len && strncmp(*e, p, len) == 0)
			break;
	}
	if (*e == NULL ||
		p[len + strspn(p + len,
					   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_,() ")] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for option \"engine\": \"%s\"", engine),
				 errdetail("A table created by ctas_fed must use one of the engines MergeTree, ReplacingMergeTree, SummingMergeTree, AggregatingMergeTree, CollapsingMergeTree, VersionedCollapsingMergeTree, Memory, Log, TinyLog or StripeLog, with column names and numbers as arguments.")));

	p += len;
	p += strspn(p, " ");
	max_args = ch_engine_max_args[e - ch_allowed_engines];
	if (ch_engine_nargs(p) > max_args)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for option \"engine\": \"%s\"", engine),
				 max_args == 0 ?
				 errdetail("Engine %s takes no arguments when its key is given by ORDER BY.",
						   *e) :
				 errdetail_plural("Engine %s takes at most %d argument when its key is given by ORDER BY.",
								  "Engine %s takes at most %d arguments when its key is given by ORDER BY.",
								  max_args, *e, max_args),
				 errhint("Give the sorting key with order_by (or primary_key) and the partition key with partition_by, not as engine arguments (the old MergeTree(date, key, granularity) syntax).")));
}

/*
 * ch_check_settings
 *		settings must be "name = number" or "name = 'literal'" pairs.
 */
static void
ch_check_settings(const char *settings)
{
	const char *p = settings;

	for (;;)
	{
		size_t		n;
		const char *name;
		size_t		namelen;

		p += strspn(p, " ");
		n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
		if (n == 0)
			break;
		name = p;
		namelen = n;
		p += n;
		p += strspn(p, " ");
		if (*p++ != '=')
			break;
		p += strspn(p, " ");
		if (*p == '\'')
		{
			for (p++; *p && *p != '\''; p++)
			{
				if (*p == '\\' && p[1])
					p++;
			}
			if (*p++ != '\'')
				break;
		}
		else
		{
			n = strspn(p, "0123456789.");
			if (n == 0)
				break;

			/*
			 * ClickHouse 18.16 loops for ever inserting into a table whose
			 * index_granularity is 0 (or wraps around to 0): the INSERT
			 * never ends, and the table cannot be dropped.
			 */
			if (namelen == strlen("index_granularity") &&
				strncmp(name, "index_granularity", namelen) == 0 &&
				(strspn(p, "0123456789") != n || n > 8 ||
				 strtol(p, NULL, 10) < 1 || strtol(p, NULL, 10) > 16777216))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for option \"settings\": \"%s\"", settings),
						 errdetail("index_granularity must be an integer from 1 to 16777216.")));
			p += n;
		}
		p += strspn(p, " ");
		if (*p == '\0')
			return;
		if (*p++ != ',')
			break;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for option \"settings\": \"%s\"", settings),
			 errdetail("Write table settings as name = number or name = 'text' pairs separated by commas.")));
}

/* the statement options of a ClickHouse table, for the routine */
const char *const CtasChStatementOptions[] = {
	"engine", "order_by", "partition_by", "settings", "sharding_key",
	"local_table", NULL
};

/*
 * CtasChParseOption
 *		parse_option of the routine: keep one of CtasChStatementOptions on
 *		the load's ChOptions, created in the current memory context (the
 *		load's) on first use.  false for any other name.  Values are checked
 *		later, by CtasChCheckOptions.
 */
bool
CtasChParseOption(CtasLoad *load, DefElem *def)
{
	ChOptions  *o = (ChOptions *) load->opts.target_opts;
	const char *const *name;

	for (name = CtasChStatementOptions; *name; name++)
	{
		if (strcmp(*name, def->defname) == 0)
			break;
	}
	if (*name == NULL)
		return false;

	if (o == NULL)
		load->opts.target_opts = o = palloc0(sizeof(ChOptions));
	if (strcmp(def->defname, "engine") == 0)
		o->engine = defGetString(def);
	else if (strcmp(def->defname, "order_by") == 0)
		o->order_by = defGetString(def);
	else if (strcmp(def->defname, "partition_by") == 0)
		o->partition_by = defGetString(def);
	else if (strcmp(def->defname, "sharding_key") == 0)
		o->sharding_key = defGetString(def);
	else if (strcmp(def->defname, "local_table") == 0)
		o->local_table = defGetString(def);
	else
		o->settings = defGetString(def);
	return true;
}

/*
 * CtasChCheckOptions
 *		check_options of the routine: the table options are expressions
 *		that cannot reach out of the statement or the row, the engine one
 *		that keeps its own rows, the settings name = value pairs.  ERROR
 *		naming the option otherwise.
 */
void
CtasChCheckOptions(CtasLoad *load)
{
	const ChOptions *o = CtasChOptions(load);

	ch_check_expr("engine", o->engine);
	ch_check_expr("order_by", o->order_by);
	ch_check_expr("partition_by", o->partition_by);
	ch_check_expr("settings", o->settings);
	if (o->engine)
		ch_check_engine(o->engine);
	if (o->settings)
		ch_check_settings(o->settings);
}

/* The engine name of an ENGINE expression: "ReplacingMergeTree(ver)" */
char *
CtasChEngineName(const char *engine)
{
	const char *p = engine;
	const char *start;

	CtasChSkipWs(&p);
	start = p;
	while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		   (*p >= '0' && *p <= '9') || *p == '_')
		p++;
	return pnstrdup(start, p - start);
}

bool
CtasChIsMergetree(const char *engine_name)
{
	size_t		len = strlen(engine_name);

	return len >= 9 && strcmp(engine_name + len - 9, "MergeTree") == 0;
}

/*
 * CtasChRemoteEngine
 *		The engine name of db.table on the server, "" when there is no such
 *		table.  ERROR when the server cannot be asked.  Palloc'd.
 */
char *
CtasChRemoteEngine(CtasChHttp *http, const char *db, const char *table)
{
	char	   *body;
	List	   *rows;
	int			nf;

	body = CtasChHttpQuery(http,
						   psprintf("SELECT engine FROM system.tables WHERE database = %s AND name = %s",
									CtasChLit(db), CtasChLit(table)),
						   "read the table engine");
	rows = CtasChTsv(body, &nf);
	if (rows == NIL || nf != 1)
		return pstrdup("");
	return ((char **) linitial(rows))[0];
}

/*
 * CtasChCountCheckMode
 *		Can the rows of a table of this engine be counted right after the
 *		load?  1: yes; 2: yes, while merges are stopped (engines whose
 *		merges fold rows: Replacing, Summing, Collapsing...); 0: no (Null,
 *		Buffer, Distributed, ...).
 */
int
CtasChCountCheckMode(const char *engine)
{
	if (strcmp(engine, "MergeTree") == 0 || strcmp(engine, "Log") == 0 ||
		strcmp(engine, "TinyLog") == 0 || strcmp(engine, "StripeLog") == 0 ||
		strcmp(engine, "Memory") == 0)
		return 1;
	if (CtasChIsMergetree(engine) && strncmp(engine, "Replicated", 10) != 0)
		return 2;
	return 0;
}

/*
 * CtasChCreateSql
 *		CREATE TABLE db.name (...) ENGINE = ... for the statement's columns
 *		and table options.  MergeTree engines get ORDER BY tuple() unless
 *		order_by or primary_key says otherwise.  Palloc'd.
 */
char *
CtasChCreateSql(CtasLoad *load, ChColumn *cols, const char *db,
			  const char *name)
{
	const ChOptions *o = CtasChOptions(load);
	StringInfoData buf;
	const char *engine = o->engine ? o->engine : "MergeTree";
	bool		mergetree = CtasChIsMergetree(CtasChEngineName(engine));
	StringInfoData pk;
	ListCell   *lc;
	int			i;

	initStringInfo(&pk);
	foreach(lc, load->opts.primary_key)
	{
		if (pk.len > 0)
			appendStringInfoString(&pk, ", ");
		CtasChAppendIdent(&pk, strVal(lfirst(lc)));
	}

	initStringInfo(&buf);
	appendStringInfo(&buf, "CREATE TABLE %s (", CtasChQname(db, name));
	for (i = 0; i < load->ncolumns; i++)
	{
		if (i > 0)
			appendStringInfoString(&buf, ", ");
		CtasChAppendIdent(&buf, load->columns[i].name);
		appendStringInfoChar(&buf, ' ');
		CtasChAppendType(&buf, cols[i].enc.type);
	}
	appendStringInfo(&buf, ") ENGINE = %s", engine);
	if (o->partition_by)
		appendStringInfo(&buf, " PARTITION BY %s", o->partition_by);
	if (o->order_by)
		appendStringInfo(&buf, " ORDER BY %s", o->order_by);
	else if (mergetree && pk.len > 0)
		appendStringInfo(&buf, " ORDER BY (%s)", pk.data);
	else if (mergetree)
		appendStringInfoString(&buf, " ORDER BY tuple()");
	if (pk.len > 0)
		appendStringInfo(&buf, " PRIMARY KEY (%s)", pk.data);
	if (o->settings)
		appendStringInfo(&buf, " SETTINGS %s", o->settings);
	return buf.data;
}
