/*-------------------------------------------------------------------------
 *
 * typemap.c
 *		  The PostgreSQL -> PostgreSQL type map and the COPY text encoding
 *		  of the PostgreSQL target.
 *
 * Built-in types keep their type and modifier on the remote; anything
 * else becomes text, which represents every value exactly.  Values that
 * travel as COPY text are written with unambiguous output settings
 * (CtasBeginTextOutput, as postgres_fdw's set_transmission_modes) and
 * escaped as COPY's text format (CtasAppendCopyText).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 * Portions Copyright (c) 1996-2022, PostgreSQL Global Development Group
 *
 * IDENTIFICATION
 *		  src/postgres/typemap.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "postgres_target.h"

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
