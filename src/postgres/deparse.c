/*-------------------------------------------------------------------------
 *
 * deparse.c
 *		  The SQL text that the PostgreSQL writer (writer.c) sends: CREATE
 *		  TABLE, ADD PRIMARY KEY and COPY of a load, names quoted, and the
 *		  remote types of column_types rebuilt from their parse so that
 *		  nothing but a type name reaches the remote.  No remote work here:
 *		  writer.c runs the statements.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/postgres/deparse.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "parser/parser.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "postgres_target.h"

/*
 * bad_remote_type
 *		ERROR for a column_types entry that is not a plain type name.
 */
static void
bad_remote_type(CtasColumn *col, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid type \"%s\" for column \"%s\" in option \"column_types\"",
					col->remote_type, col->name),
			 detail ? errdetail("%s", detail) : 0,
			 errhint("Write a type name with optional modifiers and array bounds, as in numeric(18,2) or text[].")));
}

/*
 * plain_identifier
 *		Is name a lower-case identifier that needs no quotes where the
 *		grammar accepts any keyword ([a-z_][a-z0-9_$]*)?
 */
static bool
plain_identifier(const char *name)
{
	const char *p;

	if (!((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_'))
		return false;
	for (p = name + 1; *p; p++)
	{
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
			  *p == '_' || *p == '$'))
			return false;
	}
	return true;
}

/*
 * deparse_remote_type
 *		The remote type of a column_types override, rebuilt from its parse:
 *		the user's text is parsed with the raw parser as a type name (no
 *		catalog lookup, the type is the remote's business) and the result is
 *		written back from the parse tree - each name part quoted where
 *		needed (see below), each modifier a number, a quoted literal or a
 *		quoted name, the array bounds - so that nothing the user wrote
 *		outside a type can reach the remote CREATE TABLE.  Result palloc'd
 *		in the current memory context; ereport(ERROR) when the text is not a
 *		plain type name (%TYPE, SETOF, COLLATE, DEFAULT, constraints and
 *		anything else the type grammar rejects).
 */
static char *
deparse_remote_type(CtasColumn *col)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *volatile parsed = NIL;
	bool		ok = true;
	TypeName   *tn;
	StringInfoData buf;
	ListCell   *lc;

	/* a syntax error holds no resource: no subtransaction needed */
	PG_TRY();
	{
		parsed = raw_parser(col->remote_type, RAW_PARSE_TYPE_NAME);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		ok = false;
	}
	PG_END_TRY();
	if (!ok || list_length(parsed) != 1 || !IsA(linitial(parsed), TypeName))
		bad_remote_type(col, NULL);

	tn = linitial_node(TypeName, parsed);
	if (tn->setof || tn->pct_type || tn->names == NIL)
		bad_remote_type(col, "Only a type name is allowed.");

	initStringInfo(&buf);
	foreach(lc, tn->names)
	{
		const char *name = strVal(lfirst(lc));

		if (foreach_current_index(lc) > 0)
			appendStringInfoChar(&buf, '.');

		/*
		 * After a dot the grammar takes any label, keywords included
		 * (attrs: '.' attr_name), so the last part of a qualified name
		 * needs quotes only when it is not a plain lower-case identifier:
		 * pg_catalog.varchar(10), not pg_catalog."varchar"(10).  A name
		 * standing alone keeps quote_identifier: "char" is not char.
		 */
		if (foreach_current_index(lc) > 0 && lnext(tn->names, lc) == NULL &&
			plain_identifier(name))
			appendStringInfoString(&buf, name);
		else
			appendStringInfoString(&buf, quote_identifier(name));
	}

	/* the modifiers that typenameTypeMod accepts, nothing else */
	foreach(lc, tn->typmods)
	{
		Node	   *mod = (Node *) lfirst(lc);

		appendStringInfoString(&buf, foreach_current_index(lc) == 0 ?
							   "(" : ", ");
		if (IsA(mod, A_Const) && !((A_Const *) mod)->isnull)
		{
			A_Const    *ac = (A_Const *) mod;

			switch (nodeTag(&ac->val))
			{
				case T_Integer:
					appendStringInfo(&buf, "%d", intVal(&ac->val));
					break;
				case T_Float:
					{
						const char *f = castNode(Float, &ac->val)->fval;

						/* the scanner's numeric literal, maybe negated */
						if (strspn(f, "-+.0123456789eE") != strlen(f))
							bad_remote_type(col, NULL);
						appendStringInfoString(&buf, f);
					}
					break;
				case T_String:
					appendStringInfoString(&buf,
										   quote_literal_cstr(strVal(&ac->val)));
					break;
				default:
					bad_remote_type(col, "A type modifier must be a number, a string or a name.");
			}
		}
		else if (IsA(mod, ColumnRef) &&
				 list_length(((ColumnRef *) mod)->fields) == 1 &&
				 IsA(linitial(((ColumnRef *) mod)->fields), String))
		{
			/* a bare name, which typenameTypeMod passes on as a string */
			char	   *name = strVal(linitial(((ColumnRef *) mod)->fields));

			appendStringInfoString(&buf, quote_identifier(name));
		}
		else
			bad_remote_type(col, "A type modifier must be a number, a string or a name.");
	}
	if (tn->typmods != NIL)
		appendStringInfoChar(&buf, ')');

	foreach(lc, tn->arrayBounds)
	{
		int			bound = intVal(lfirst(lc));

		if (bound < 0)
			appendStringInfoString(&buf, "[]");
		else
			appendStringInfo(&buf, "[%d]", bound);
	}
	return buf.data;
}

/*
 * CtasPgQualifiedName
 *		"schema"."table" of the load (palloc'd).
 */
char *
CtasPgQualifiedName(CtasLoad *load)
{
	return psprintf("%s.%s", quote_identifier(load->schema),
					quote_identifier(load->table));
}

/*
 * CtasPgCreateTableSql
 *		CREATE TABLE qualified (...) for the load's columns (palloc'd).
 *		Types from column_types are deparsed, never copied
 *		(deparse_remote_type, which may ERROR); the others come from
 *		format_type_with_typemod.
 */
char *
CtasPgCreateTableSql(CtasLoad *load, const char *qualified)
{
	StringInfoData sql;
	int			i;

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE %s (", qualified);
	for (i = 0; i < load->ncolumns; i++)
	{
		CtasColumn *col = &load->columns[i];

		appendStringInfo(&sql, "%s%s %s", i > 0 ? ", " : "",
						 quote_identifier(col->name),
						 col->overridden ? deparse_remote_type(col) :
						 col->remote_type);
	}
	appendStringInfoChar(&sql, ')');
	return sql.data;
}

/*
 * CtasPgPrimaryKeySql
 *		ALTER TABLE ... ADD PRIMARY KEY (...) for the load's primary_key
 *		option (palloc'd), or NULL when it has none.
 */
char *
CtasPgPrimaryKeySql(CtasLoad *load)
{
	StringInfoData sql;
	ListCell   *lc;
	bool		first = true;

	if (load->opts.primary_key == NIL)
		return NULL;
	initStringInfo(&sql);
	appendStringInfo(&sql, "ALTER TABLE %s ADD PRIMARY KEY (",
					 CtasPgQualifiedName(load));
	foreach(lc, load->opts.primary_key)
	{
		appendStringInfo(&sql, "%s%s", first ? "" : ", ",
						 quote_identifier(strVal(lfirst(lc))));
		first = false;
	}
	appendStringInfoChar(&sql, ')');
	return sql.data;
}

/*
 * CtasPgCopySql
 *		COPY qualified (columns) FROM STDIN, in binary format when binary
 *		(palloc'd).
 */
char *
CtasPgCopySql(CtasLoad *load, const char *qualified, bool binary)
{
	StringInfoData sql;
	int			i;

	initStringInfo(&sql);
	appendStringInfo(&sql, "COPY %s (", qualified);
	for (i = 0; i < load->ncolumns; i++)
		appendStringInfo(&sql, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(load->columns[i].name));
	appendStringInfo(&sql, ") FROM STDIN%s", binary ? " (FORMAT binary)" : "");
	return sql.data;
}
