/*-------------------------------------------------------------------------
 *
 * typemap.c
 *		  Remote column types from the query's result type: the parser of
 *		  the column_types statement option.
 *
 * The remote column list and its types always come from the query's
 * result type; the user can only override single columns with the
 * column_types statement option, parsed here.  Each target maps the types
 * it receives in its own map_column (src/postgres/typemap.c for the
 * PostgreSQL -> PostgreSQL map and the COPY text encoding).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 * Portions Copyright (c) 1996-2022, PostgreSQL Global Development Group
 *
 * IDENTIFICATION
 *		  src/typemap.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "lib/stringinfo.h"
#include "nodes/value.h"
#include "parser/scansup.h"

#include "typemap.h"

/*
 * CtasParseColumnTypes
 *		Parse the column_types option, "name type, name type(p, s), ...",
 *		into a list of two-element lists of Strings (name, type).  A name
 *		may be double-quoted; a type runs to the next comma that is not
 *		inside parentheses or quotes.  A comment (two dashes, or slash and
 *		star, outside quotes) is refused: a type holds none, and what
 *		follows one must never reach a target.  ereport(ERROR) on a
 *		malformed spec.
 *		The result is palloc'd in the current memory context.
 */
List *
CtasParseColumnTypes(const char *spec)
{
	List	   *result = NIL;
	const char *p = spec;

	for (;;)
	{
		StringInfoData name;
		StringInfoData type;
		int			depth = 0;
		char		quote = 0;

		while (*p && isspace((unsigned char) *p))
			p++;
		if (*p == '\0')
			break;

		initStringInfo(&name);
		if (*p == '"')
		{
			for (p++; *p; p++)
			{
				if (*p == '"')
				{
					if (p[1] != '"')
						break;
					p++;
				}
				appendStringInfoChar(&name, *p);
			}
			if (*p != '"')
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for option \"column_types\": unterminated quoted column name")));
			p++;
		}
		else
		{
			while (*p && !isspace((unsigned char) *p) && *p != ',')
				appendStringInfoChar(&name, *p++);
			/* unquoted names fold to lower case, as in SQL */
			name.data = downcase_identifier(name.data, name.len, false, false);
		}

		initStringInfo(&type);
		while (*p && isspace((unsigned char) *p))
			p++;
		for (; *p; p++)
		{
			if (quote)
			{
				if (*p == quote)
					quote = 0;
			}
			else if ((p[0] == '-' && p[1] == '-') ||
					 (p[0] == '/' && p[1] == '*'))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for option \"column_types\": comments are not allowed"),
						 errdetail("Each entry must be a column name and a type, nothing else.")));
			else if (*p == '\'' || *p == '"' || *p == '`')
				quote = *p;
			else if (*p == '(')
				depth++;
			else if (*p == ')')
				depth--;
			else if (*p == ',' && depth == 0)
				break;
			appendStringInfoChar(&type, *p);
		}
		while (type.len > 0 && isspace((unsigned char) type.data[type.len - 1]))
			type.data[--type.len] = '\0';

		if (name.len == 0 || type.len == 0 || depth != 0 || quote)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"column_types\": \"%s\"",
							spec),
					 errhint("Write a comma-separated list of column names and remote types, as in 'amount numeric(18,2), ts timestamptz'.")));

		result = lappend(result, list_make2(makeString(name.data),
											makeString(type.data)));
		if (*p == ',')
			p++;
	}
	return result;
}
