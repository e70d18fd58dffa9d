/*-------------------------------------------------------------------------
 *
 * typemap.c
 *		  Remote column types from the query's result type, and the text
 *		  encoding that every target's row stream shares.
 *
 * The remote column list and its types always come from the query's
 * result type; the user can only override single columns with the
 * column_types statement option, parsed here.  Each target maps the types
 * it receives in its own map_column; this file holds what they share: the
 * PostgreSQL -> PostgreSQL map, the parser of column_types and the COPY
 * text escaping (which ClickHouse's TabSeparated format reads the same
 * way).
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

#include "access/transam.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "parser/scansup.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "target.h"

/*
 * CtasAppendCopyText
 *		Append s to buf escaped as a field of COPY's text format: backslash
 *		and the control characters that COPY would misread are written as
 *		backslash sequences.  The server encoding is ASCII-safe, so a byte
 *		below 0x80 is always a whole character.
 */
void
CtasAppendCopyText(StringInfo buf, const char *s)
{
	const char *start = s;
	const char *p;

	for (p = s; *p; p++)
	{
		char		c = *p;
		char		esc;

		if ((unsigned char) c >= 0x20 && c != '\\')
			continue;
		switch (c)
		{
			case '\\':
				esc = '\\';
				break;
			case '\b':
				esc = 'b';
				break;
			case '\f':
				esc = 'f';
				break;
			case '\n':
				esc = 'n';
				break;
			case '\r':
				esc = 'r';
				break;
			case '\t':
				esc = 't';
				break;
			case '\v':
				esc = 'v';
				break;
			default:
				continue;		/* other control characters pass as is */
		}
		if (p > start)
			appendBinaryStringInfo(buf, start, p - start);
		appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, esc);
		start = p + 1;
	}
	if (p > start)
		appendBinaryStringInfo(buf, start, p - start);
}

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

/*
 * CtasPostgresRemoteType
 *		The remote PostgreSQL type of a column of local type typid/typmod
 *		(domains already stripped by the caller).  Built-in types keep their
 *		type and modifier; anything else - enums, composites, types from
 *		extensions the remote may lack - becomes text, which represents
 *		every value exactly.  *same_type tells whether the remote type is
 *		the local one (so that the binary format can be used).
 */
char *
CtasPostgresRemoteType(Oid typid, int32 typmod, bool *same_type)
{
	/* reg* types name local objects by OID: send their text form */
	static const Oid by_name[] = {
		REGPROCOID, REGPROCEDUREOID, REGOPEROID, REGOPERATOROID,
		REGCLASSOID, REGCOLLATIONOID, REGTYPEOID, REGROLEOID,
		REGNAMESPACEOID, REGCONFIGOID, REGDICTIONARYOID
	};
	Oid			elemtype = get_element_type(typid);
	Oid			checked = OidIsValid(elemtype) ? elemtype : typid;
	int			i;

	*same_type = false;
	for (i = 0; i < lengthof(by_name); i++)
	{
		if (checked == by_name[i])
			return OidIsValid(elemtype) ? "text[]" : "text";
	}
	if (checked >= FirstGenbkiObjectId)
		return "text";

	*same_type = true;
	return format_type_with_typemod(typid, typmod);
}

/*
 * CtasBeginTextOutput
 *		Make the text output of dates, intervals and floats unambiguous and
 *		exact for the remote parser (DateStyle ISO, IntervalStyle postgres,
 *		extra_float_digits 3), as postgres_fdw's set_transmission_modes
 *		does.  Settings are changed only when the session's differ, and
 *		only around the conversion of values: the query itself runs with
 *		the user's settings.  Returns the GUC nest level to pass to
 *		CtasEndTextOutput, or -1 when nothing had to change.
 */
int
CtasBeginTextOutput(void)
{
	int			nestlevel;

	if (DateStyle == USE_ISO_DATES && IntervalStyle == INTSTYLE_POSTGRES &&
		extra_float_digits >= 1)
		return -1;

	nestlevel = NewGUCNestLevel();
	if (DateStyle != USE_ISO_DATES)
		(void) set_config_option("datestyle", "ISO",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	if (IntervalStyle != INTSTYLE_POSTGRES)
		(void) set_config_option("intervalstyle", "postgres",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	if (extra_float_digits < 1)
		(void) set_config_option("extra_float_digits", "3",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/*
 * CtasEndTextOutput
 *		Undo CtasBeginTextOutput.
 */
void
CtasEndTextOutput(int nestlevel)
{
	if (nestlevel >= 0)
		AtEOXact_GUC(true, nestlevel);
}
