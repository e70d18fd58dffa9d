/*-------------------------------------------------------------------------
 *
 * typemap.c
 *		  The PostgreSQL -> PostgreSQL type map and the COPY text encoding
 *		  of the PostgreSQL target.
 *
 * Built-in types keep their type and modifier on the remote; anything
 * else becomes text, which represents every value exactly - and so does a
 * built-in type that an older remote server lacks (CtasPgAdaptColumns, once
 * connected: the remote may run any PostgreSQL from 12 on).  Values that
 * travel as COPY text are written with unambiguous output settings
 * (CtasPgBeginTextOutput, as postgres_fdw's set_transmission_modes) and
 * escaped as COPY's text format (CtasPgAppendCopyText).
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
#include "utils/syscache.h"

#include "postgres_target.h"

/*
 * CtasPgAppendCopyText
 *		Append s to buf escaped as a field of COPY's text format: backslash
 *		and the control characters that COPY would misread are written as
 *		backslash sequences.  The server encoding is ASCII-safe, so a byte
 *		below 0x80 is always a whole character.
 */
void
CtasPgAppendCopyText(StringInfo buf, const char *s)
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
 * CtasPgRemoteVersion
 *		"PostgreSQL 13.23", the version of conn's server as it reports it,
 *		for messages and EXPLAIN (palloc'd).
 */
char *
CtasPgRemoteVersion(PGconn *conn)
{
	const char *v = PQparameterStatus(conn, "server_version");

	return psprintf("PostgreSQL %s", v ? v : "(unknown version)");
}

/*
 * local_typname
 *		pg_type.typname of a local type (palloc'd).
 */
static char *
local_typname(Oid typid)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	char	   *name;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for type %u", typid);
	name = pstrdup(NameStr(((Form_pg_type) GETSTRUCT(tup))->typname));
	ReleaseSysCache(tup);
	return name;
}

/*
 * CtasPgBinarySafe
 *		May values of built-in type typid travel in the binary COPY format
 *		to a remote of server_version_num version?  Not where that remote's
 *		binary input refuses a value the text input takes, or refuses it
 *		without naming the value: numeric (and numeric[], numrange) before
 *		14, whose binary numeric has no infinity ("invalid sign in external
 *		numeric value"; the text input names the value), and tsquery, whose
 *		binary input refuses the empty query in the releases of every major
 *		version we test (12.22, 13.23, 14.23, 16.14, 17.10 and 18.4;
 *		15.20 takes it).
 */
bool
CtasPgBinarySafe(Oid typid, int version)
{
	Oid			elemtype = get_element_type(typid);
	Oid			checked = OidIsValid(elemtype) ? elemtype : typid;

	if (checked == TSQUERYOID)
		return false;
	if (version < 140000 && (checked == NUMERICOID || checked == NUMRANGEOID))
		return false;
	return true;
}

/*
 * CtasPgAdaptColumns
 *		Adapt the remote types that pg_map_column chose to the server behind
 *		conn, which may run an older major version than the local server.
 *		A built-in type the remote lacks (multiranges before PostgreSQL 14,
 *		xid8 and pg_snapshot before 13) becomes text, text[] for an array
 *		of it, as any type the remote lacks does (its text form represents
 *		every value exactly), with the NOTICE of pg_map_column naming the
 *		column and a detail naming the remote version.  The remote's own
 *		pg_type says which types it has, by OID and name (built-in OIDs are
 *		fixed across versions): no table of versions to keep up to date.
 *		A remote of the local major version or newer has every built-in
 *		type of ours: no query.  Types from column_types are the user's and
 *		left alone.  The binary format is given up for the columns that
 *		CtasPgBinarySafe refuses.  ERROR when the remote query fails.
 */
void
CtasPgAdaptColumns(CtasLoad *load, PGconn *conn)
{
	StringInfoData sql;
	PGresult   *res;
	Oid		   *checked;
	int			n = 0;
	int			i;

	for (i = 0; i < load->ncolumns; i++)
	{
		CtasColumn *col = &load->columns[i];

		if (!col->overridden &&
			!CtasPgBinarySafe(col->basetypid, PQserverVersion(conn)))
			col->binary_ok = false;
	}
	if (PQserverVersion(conn) / 10000 >= PG_VERSION_NUM / 10000)
		return;

	/* the built-in type (or element type) of each column, or InvalidOid */
	checked = palloc0(sizeof(Oid) * load->ncolumns);
	initStringInfo(&sql);
	appendStringInfoString(&sql,
						   "SELECT oid::pg_catalog.int8, typname FROM pg_catalog.pg_type "
						   "WHERE oid IN (");
	for (i = 0; i < load->ncolumns; i++)
	{
		CtasColumn *col = &load->columns[i];
		Oid			elemtype = get_element_type(col->basetypid);
		bool		same_type;

		if (col->overridden)
			continue;
		(void) CtasPostgresRemoteType(col->basetypid, col->basetypmod,
									  &same_type);
		if (!same_type)
			continue;
		checked[i] = OidIsValid(elemtype) ? elemtype : col->basetypid;
		appendStringInfo(&sql, "%s%u", n++ > 0 ? ", " : "", checked[i]);
	}
	appendStringInfoChar(&sql, ')');
	if (n == 0)
		return;

	res = CtasPgQuery(conn, load->catalog, sql.data);
	for (i = 0; i < load->ncolumns; i++)
	{
		CtasColumn *col = &load->columns[i];
		char	   *name;
		bool		found = false;
		int			r;

		if (!OidIsValid(checked[i]))
			continue;
		name = local_typname(checked[i]);
		for (r = 0; r < PQntuples(res) && !found; r++)
			found = strtoul(PQgetvalue(res, r, 0), NULL, 10) == checked[i] &&
				strcmp(PQgetvalue(res, r, 1), name) == 0;
		if (found)
			continue;
		col->remote_type = checked[i] == col->basetypid ? "text" : "text[]";
		col->binary_ok = false;
		ereport(NOTICE,
				(errmsg("column \"%s\" of type %s is created as %s in catalog \"%s\"",
						col->name, format_type_be(col->typid),
						col->remote_type, load->catalog->name),
				 errdetail("The remote server runs %s, which has no type %s.",
						   CtasPgRemoteVersion(conn), name),
				 errhint("Use the column_types option to choose another remote type.")));
	}
	PQclear(res);
}

/*
 * CtasPgBeginTextOutput
 *		Make the text output of dates, intervals and floats unambiguous and
 *		exact for the remote parser (DateStyle ISO, IntervalStyle postgres,
 *		extra_float_digits 3), as postgres_fdw's set_transmission_modes
 *		does.  Settings are changed only when the session's differ, and
 *		only around the conversion of values: the query itself runs with
 *		the user's settings.  Returns the GUC nest level to pass to
 *		CtasEndTextOutput, or -1 when nothing had to change.
 */
int
CtasPgBeginTextOutput(void)
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
 *		Undo CtasPgBeginTextOutput.
 */
void
CtasEndTextOutput(int nestlevel)
{
	if (nestlevel >= 0)
		AtEOXact_GUC(true, nestlevel);
}
