/*-------------------------------------------------------------------------
 *
 * catalog.c
 *		  Catalogs as foreign servers: option validation, descriptors,
 *		  privilege checks and the SQL conveniences built on them.
 *
 * A catalog is a foreign server of the ctas_fed foreign-data wrapper.  Its
 * descriptor is the server's name and options plus the user mapping of the
 * calling user, all in system tables, so any backend or background worker
 * can rebuild it (CtasGetCatalog).
 *
 * Option validation is table driven, as in postgres_fdw's option.c: each
 * kind of catalog has one table of the options it accepts, and the options
 * that every kind shares live in a common table.  Credentials belong on
 * user mappings only; a server never holds a secret, which is what lets
 * the descriptor and the catalogs view show every server option.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 * Portions Copyright (c) 1996-2022, PostgreSQL Global Development Group
 *
 * IDENTIFICATION
 *		  src/catalog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/htup_details.h"
#include "access/reloptions.h"
#include "access/xact.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_type.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/syscache.h"

#include "guc.h"
#include "hosts.h"
#include "catalog.h"

PG_FUNCTION_INFO_V1(ctas_fed_handler);
PG_FUNCTION_INFO_V1(ctas_fed_register_catalog);
PG_FUNCTION_INFO_V1(ctas_fed_catalog_descriptor);

#define CTAS_FDW_NAME	"ctas_fed"

#define SRV		ForeignServerRelationId
#define UM		UserMappingRelationId

/* Options every kind of catalog accepts */
const CtasOption CtasCommonOptions[] = {
	{"notify_url", SRV, CTAS_OPT_HOOK_URL, 0, 0, NULL, false, CTAS_HOSTS_URL},
	{"user", UM, CTAS_OPT_STRING},
	{"password", UM, CTAS_OPT_STRING, 0, 0, NULL, true},
	{"password_required", UM, CTAS_OPT_BOOL},
	{NULL}
};

static bool is_ctas_server(ForeignServer *server);
static void append_descriptor_options(StringInfo buf, List *options);

/*
 * CtasLookupOption
 *		The entry of table for option name in context, or NULL.  context
 *		InvalidOid matches any context.
 */
const CtasOption *
CtasLookupOption(const CtasOption *table, const char *name, Oid context)
{
	const CtasOption *opt;

	for (opt = table; opt->name; opt++)
	{
		if (strcmp(opt->name, name) == 0 &&
			(context == InvalidOid || opt->context == context))
			return opt;
	}
	return NULL;
}

/*
 * ctas_fed_handler
 *		Handler of the ctas_fed foreign-data wrapper.
 *
 * A catalog is written with CREATE TABLE ... AS, not scanned through
 * foreign tables, and the validator refuses to create any.  Should a
 * foreign table reach the planner anyway, say so instead of crashing.
 */
Datum
ctas_fed_handler(PG_FUNCTION_ARGS)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("ctas_fed does not support foreign tables"),
			 errhint("A ctas_fed server is a catalog: create tables in it with CREATE TABLE catalog.schema.table AS ...")));
	PG_RETURN_NULL();			/* keep compiler quiet */
}

/*
 * is_ctas_server
 *		Is server a catalog of this extension?
 */
static bool
is_ctas_server(ForeignServer *server)
{
	ForeignDataWrapper *fdw = GetForeignDataWrapper(server->fdwid);

	return strcmp(fdw->fdwname, CTAS_FDW_NAME) == 0;
}

/*
 * CtasCatalogServerOid
 *		OID of the ctas_fed server called name, or InvalidOid when there is
 *		no such server or it belongs to another foreign-data wrapper.  Never
 *		raises an error for a missing name; does not check privileges.
 */
Oid
CtasCatalogServerOid(const char *name)
{
	ForeignServer *server = GetForeignServerByName(name, true);

	if (server == NULL || !is_ctas_server(server))
		return InvalidOid;
	return server->serverid;
}

/*
 * CtasGetCatalog
 *		Rebuild the descriptor of catalog serverid for local user userid.
 *
 * With check_usage, the user must have USAGE on the server (checked before
 * any option is read).  With need_mapping, a user mapping for the user or
 * for PUBLIC must exist.  Raises ERROR otherwise, and when the server is
 * not a ctas_fed catalog.  The result is palloc'd in the current memory
 * context.
 */
CtasCatalog *
CtasGetCatalog(Oid serverid, Oid userid, bool check_usage, bool need_mapping)
{
	ForeignServer *server;
	CtasCatalog *catalog;
	HeapTuple	tp;
	ListCell   *lc;
	char	   *typename = NULL;

	server = GetForeignServer(serverid);
	if (!is_ctas_server(server))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" is not a ctas_fed catalog",
						server->servername)));

	if (check_usage)
	{
		AclResult	aclresult;

		aclresult = pg_foreign_server_aclcheck(serverid, userid, ACL_USAGE);
		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, OBJECT_FOREIGN_SERVER,
						   server->servername);
	}

	catalog = palloc0(sizeof(CtasCatalog));
	catalog->serverid = serverid;
	catalog->name = server->servername;
	catalog->userid = userid;

	foreach(lc, server->options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);

		if (strcmp(def->defname, "type") == 0)
			typename = defGetString(def);
		else if (strcmp(def->defname, "notify_url") == 0)
			catalog->notify_url = defGetString(def);
		else
			catalog->server_options = lappend(catalog->server_options, def);
	}
	catalog->type_name = typename;
	catalog->notify_url_limited = catalog->notify_url != NULL &&
		!superuser_arg(server->owner);
	if (catalog->type_name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("catalog \"%s\" has no valid type", catalog->name)));

	/* the user's own mapping, else the PUBLIC one, as GetUserMapping does */
	tp = SearchSysCache2(USERMAPPINGUSERSERVER,
						 ObjectIdGetDatum(userid), ObjectIdGetDatum(serverid));
	if (!HeapTupleIsValid(tp))
		tp = SearchSysCache2(USERMAPPINGUSERSERVER,
							 ObjectIdGetDatum(InvalidOid),
							 ObjectIdGetDatum(serverid));
	if (HeapTupleIsValid(tp))
	{
		Datum		datum;
		bool		isnull;

		catalog->umid = ((Form_pg_user_mapping) GETSTRUCT(tp))->oid;
		datum = SysCacheGetAttr(USERMAPPINGUSERSERVER, tp,
								Anum_pg_user_mapping_umoptions, &isnull);
		if (!isnull)
			catalog->user_options = untransformRelOptions(datum);
		ReleaseSysCache(tp);
	}
	else if (need_mapping)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("user mapping not found for user \"%s\" on catalog \"%s\"",
						GetUserNameFromId(userid, false), catalog->name),
				 errhint("Create one with CREATE USER MAPPING FOR CURRENT_USER SERVER %s OPTIONS (user '...', password '...').",
						 quote_identifier(catalog->name))));

	return catalog;
}

/*
 * CtasCatalogOption
 *		Value of option name of the catalog's server or user mapping, or
 *		NULL when it is not set.
 */
const char *
CtasCatalogOption(const CtasCatalog *catalog, const char *name)
{
	ListCell   *lc;

	foreach(lc, catalog->server_options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);

		if (strcmp(def->defname, name) == 0)
			return defGetString(def);
	}
	foreach(lc, catalog->user_options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);

		if (strcmp(def->defname, name) == 0)
			return defGetString(def);
	}
	return NULL;
}

/*
 * CtasPasswordRequired
 *		Must a connection to catalog authenticate with a password from its
 *		user mapping (each target says what "used" means for it)?  The one
 *		password rule of every catalog type, postgres_fdw's
 *		password_required made stricter: yes, unless the mapping's user
 *		and the server's owner are both superusers (a superuser's own
 *		catalog), or a superuser set password_required 'false' on the
 *		mapping (only a superuser may: options.c).  The owner of a server
 *		chooses its host and options and can create a user mapping for any
 *		role, superusers included, so a superuser's mapping on a server a
 *		non-superuser owns follows the rule of a non-superuser: the server's
 *		own credentials (.pgpass, peer, trust, a remote's default user let in
 *		without a password from this host) are never borrowed.  When
 *		owner_rule is not NULL, *owner_rule tells whether the rule applies
 *		only because of the server's owner (for the message).  Can ERROR
 *		only on a catalog lookup failure.
 */
bool
CtasPasswordRequired(const CtasCatalog *catalog, bool *owner_rule)
{
	ListCell   *lc;

	if (owner_rule)
		*owner_rule = false;
	if (superuser_arg(catalog->userid))
	{
		ForeignServer *server = GetForeignServer(catalog->serverid);

		if (superuser_arg(server->owner))
			return false;
		if (owner_rule)
			*owner_rule = true;
	}
	foreach(lc, catalog->user_options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);

		if (strcmp(def->defname, "password_required") == 0)
			return defGetBoolean(def);
	}
	return true;
}

/*
 * CtasListCatalogs
 *		Every catalog of this database: a List of CtasCatalogRef in name
 *		order.  With per_mapping, one entry per (server, user mapping) pair,
 *		ordered by name then user (PUBLIC's mapping has userid InvalidOid),
 *		and a server without a user mapping is left out; without, one entry
 *		per server, userid InvalidOid.  No privilege is checked: the caller
 *		decides what the current user may do with each.
 *
 * The list and its entries are allocated in the caller's memory context.
 * Needs a transaction and an active snapshot; uses SPI, so the caller must
 * not be inside an SPI procedure of its own.  ERRORs only when SPI fails.
 */
List *
CtasListCatalogs(bool per_mapping)
{
	MemoryContext cxt = CurrentMemoryContext;
	ForeignDataWrapper *fdw;
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1];
	List	   *result = NIL;
	uint64		i;

	/* without the wrapper (no extension here) there is no catalog */
	fdw = GetForeignDataWrapperByName(CTAS_FDW_NAME, true);
	if (fdw == NULL)
		return NIL;
	args[0] = ObjectIdGetDatum(fdw->fdwid);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(per_mapping ?
							  "SELECT s.oid, um.umuser, s.srvname "
							  "FROM pg_catalog.pg_foreign_server s "
							  "JOIN pg_catalog.pg_user_mapping um "
							  "ON um.umserver = s.oid "
							  "WHERE s.srvfdw = $1 "
							  "ORDER BY s.srvname, um.umuser" :
							  "SELECT s.oid, 0::pg_catalog.oid, s.srvname "
							  "FROM pg_catalog.pg_foreign_server s "
							  "WHERE s.srvfdw = $1 ORDER BY s.srvname",
							  1, argtypes, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not list catalogs");

	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		srv = SPI_getbinval(tup, desc, 1, &isnull);
		Datum		usr = SPI_getbinval(tup, desc, 2, &isnull);
		Datum		name = SPI_getbinval(tup, desc, 3, &isnull);

		/* SPI's memory goes with SPI_finish: build the result outside it */
		MemoryContext spi_cxt = MemoryContextSwitchTo(cxt);
		CtasCatalogRef *ref = palloc(sizeof(CtasCatalogRef));

		ref->serverid = DatumGetObjectId(srv);
		ref->userid = DatumGetObjectId(usr);
		ref->name = pstrdup(NameStr(*DatumGetName(name)));
		result = lappend(result, ref);
		MemoryContextSwitchTo(spi_cxt);
	}
	SPI_finish();
	return result;
}

/*
 * append_descriptor_options
 *		Append the server options as a JSON object, leaving out "type" and
 *		anything secret.
 */
static void
append_descriptor_options(StringInfo buf, List *options)
{
	ListCell   *lc;
	bool		first = true;

	appendStringInfoChar(buf, '{');
	foreach(lc, options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);
		const CtasOption *opt;

		if (strcmp(def->defname, "type") == 0)
			continue;
		opt = CtasLookupOption(CtasCommonOptions, def->defname, InvalidOid);
		if (opt != NULL && opt->secret)
			continue;
		if (!first)
			appendStringInfoString(buf, ", ");
		escape_json(buf, def->defname);
		appendStringInfoString(buf, ": ");
		escape_json(buf, defGetString(def));
		first = false;
	}
	appendStringInfoChar(buf, '}');
}

/*
 * ctas_fed_catalog_descriptor(name text) RETURNS jsonb
 *		{"name": ..., "type": ..., "options": {...}} of a catalog, from
 *		pg_foreign_server alone.  Servers never hold credentials, so the
 *		descriptor has nothing to hide; secret options are skipped anyway.
 */
Datum
ctas_fed_catalog_descriptor(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ForeignServer *server;
	StringInfoData buf;
	ListCell   *lc;
	char	   *typename = NULL;

	CtasCheckPreloaded();

	server = GetForeignServerByName(name, false);
	if (!is_ctas_server(server))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" is not a ctas_fed catalog", name)));

	foreach(lc, server->options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);

		if (strcmp(def->defname, "type") == 0)
			typename = defGetString(def);
	}

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"name\": ");
	escape_json(&buf, server->servername);
	appendStringInfoString(&buf, ", \"type\": ");
	if (typename)
		escape_json(&buf, typename);
	else
		appendStringInfoString(&buf, "null");
	appendStringInfoString(&buf, ", \"options\": ");
	append_descriptor_options(&buf, server->options);
	appendStringInfoChar(&buf, '}');

	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

/*
 * create_server_text
 *		The text of CREATE SERVER stmt, names quoted with quote_identifier
 *		and values with quote_literal, the value of any password option
 *		masked.  Only shown to those who look at the statement's text
 *		(ProcessUtility hooks); the statement run is stmt itself.
 */
static char *
create_server_text(CreateForeignServerStmt *stmt)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfo(&buf, "CREATE SERVER %s FOREIGN DATA WRAPPER %s",
					 quote_identifier(stmt->servername),
					 quote_identifier(stmt->fdwname));
	foreach(lc, stmt->options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);

		appendStringInfo(&buf, "%s%s %s",
						 foreach_current_index(lc) == 0 ? " OPTIONS (" : ", ",
						 quote_identifier(def->defname),
						 strstr(def->defname, "password") ? "'********'" :
						 quote_literal_cstr(defGetString(def)));
	}
	if (stmt->options != NIL)
		appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * ctas_fed_register_catalog(name text, type text, options jsonb) RETURNS oid
 *		Create the foreign server of a catalog from a descriptor held as
 *		data.  Runs CREATE SERVER through ProcessUtility, so it needs
 *		exactly the privileges of CREATE SERVER, runs the same validator,
 *		and fires event triggers and utility hooks like a typed CREATE
 *		SERVER; the new server belongs to the calling user.  Option values
 *		may be JSON strings, numbers or Booleans.
 */
Datum
ctas_fed_register_catalog(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *typename;
	Jsonb	   *jb;
	CreateForeignServerStmt *stmt;
	PlannedStmt *pstmt;
	List	   *options = NIL;

	CtasCheckPreloaded();

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("catalog name and type must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	typename = text_to_cstring(PG_GETARG_TEXT_PP(1));

	options = lappend(options, makeDefElem("type",
										   (Node *) makeString(typename), -1));

	if (!PG_ARGISNULL(2))
	{
		JsonbIterator *it;
		JsonbValue	v;
		JsonbIteratorToken tok;
		char	   *key = NULL;

		jb = PG_GETARG_JSONB_P(2);
		if (!JB_ROOT_IS_OBJECT(jb))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("catalog options must be a JSON object")));

		it = JsonbIteratorInit(&jb->root);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			char	   *value;

			if (tok == WJB_KEY)
			{
				key = pnstrdup(v.val.string.val, v.val.string.len);
				continue;
			}
			if (tok != WJB_VALUE)
				continue;

			switch (v.type)
			{
				case jbvString:
					value = pnstrdup(v.val.string.val, v.val.string.len);
					break;
				case jbvNumeric:
					value = DatumGetCString(DirectFunctionCall1(numeric_out,
																NumericGetDatum(v.val.numeric)));
					break;
				case jbvBool:
					value = v.val.boolean ? "true" : "false";
					break;
				default:
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("value of catalog option \"%s\" must be a string, number or Boolean",
									key)));
					value = NULL;	/* keep compiler quiet */
			}

			if (strcmp(key, "type") == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("catalog option \"type\" must be given as the type argument")));

			options = lappend(options,
							  makeDefElem(key, (Node *) makeString(value), -1));
		}
	}

	stmt = makeNode(CreateForeignServerStmt);
	stmt->servername = name;
	stmt->fdwname = CTAS_FDW_NAME;
	stmt->if_not_exists = false;
	stmt->options = options;

	/*
	 * Run it as the utility statement it is, so that event triggers,
	 * ProcessUtility hooks (auditing) and the dependency bookkeeping see
	 * the same CREATE SERVER as when it is typed.  The statement is the
	 * tree built above; its text, for those who look, is rebuilt from it
	 * with every name and value quoted, password values masked.
	 */
	pstmt = makeNode(PlannedStmt);
	pstmt->commandType = CMD_UTILITY;
	pstmt->canSetTag = false;
	pstmt->utilityStmt = (Node *) stmt;
	pstmt->stmt_location = -1;
	pstmt->stmt_len = 0;
	ProcessUtility(pstmt, create_server_text(stmt), false,
				   PROCESS_UTILITY_QUERY, NULL, NULL, None_Receiver, NULL);
	CommandCounterIncrement();

	PG_RETURN_OID(GetForeignServerByName(name, false)->serverid);
}
