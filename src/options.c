/*-------------------------------------------------------------------------
 *
 * options.c
 *		  The validator of the ctas_fed foreign-data wrapper: the options of
 *		  catalogs (servers) and their user mappings.
 *
 * Table driven, as postgres_fdw's option.c: the options every kind of
 * catalog accepts are CtasCommonOptions (catalog.c); each target adds its
 * own in its routine's server_options and names the ones it cannot work
 * without in required_options.  A server's "type" picks the target; a
 * user mapping does not know its server's type, so it may carry an option
 * of any target.  Credentials belong on user mappings only: a server never
 * holds a secret, which is what lets the descriptor and the catalogs view
 * show every server option.
 *
 * This file sits above the targets (it reads their tables through
 * targets.c), catalog.c below them: a target may read a catalog, never
 * the other way round.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 * Portions Copyright (c) 1996-2022, PostgreSQL Global Development Group
 *
 * IDENTIFICATION
 *		  src/options.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <curl/curl.h>
#include <limits.h>

#include "access/reloptions.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "guc.h"
#include "hosts.h"
#include "target.h"
#include "targets.h"

PG_FUNCTION_INFO_V1(ctas_fed_validator);

static void check_url(const CtasOption *opt, const char *value);

/*
 * valid_options_list
 *		Comma-separated names of the options valid for type (NULL: every
 *		type) in context, for error hints.  Palloc'd.
 */
static char *
valid_options_list(const CtasTargetRoutine *type, Oid context)
{
	StringInfoData buf;
	const CtasTargetRoutine *const *t;
	const CtasOption *opt;

	initStringInfo(&buf);
	if (context == ForeignServerRelationId)
		appendStringInfoString(&buf, "type");

	for (opt = CtasCommonOptions; opt->name; opt++)
	{
		if (opt->context != context)
			continue;
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", opt->name);
	}

	for (t = CtasTargets; *t; t++)
	{
		if (type != NULL && *t != type)
			continue;
		for (opt = (*t)->server_options; opt->name; opt++)
		{
			/* with no type given, name each option once */
			if (opt->context != context ||
				(type == NULL && t != CtasTargets &&
				 CtasLookupOption(CtasTargets[0]->server_options, opt->name,
							   context)))
				continue;
			appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "",
							 opt->name);
		}
	}
	return buf.data;
}

static char *
valid_types_list(void)
{
	StringInfoData buf;
	const CtasTargetRoutine *const *t;

	initStringInfo(&buf);
	for (t = CtasTargets; *t; t++)
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "",
						 (*t)->type_name);
	return buf.data;
}

/*
 * check_option_value
 *		ereport(ERROR) unless value is acceptable for opt.  A secret's
 *		value is never printed.
 */
static void
check_option_value(const CtasOption *opt, const char *value)
{
	switch (opt->kind)
	{
		case CTAS_OPT_STRING:
			break;
		case CTAS_OPT_INT:
			{
				char	   *end;
				long		v;

				errno = 0;
				v = strtol(value, &end, 10);
				if (errno != 0 || end == value || *end != '\0' ||
					v < opt->min || v > opt->max)
					ereport(ERROR,
							(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
							 errmsg("invalid value for option \"%s\": \"%s\"",
									opt->name, value),
							 errdetail("The value must be an integer between %d and %d.",
									   opt->min, opt->max)));
				break;
			}
		case CTAS_OPT_BOOL:
			{
				bool		b;

				if (!parse_bool(value, &b))
					ereport(ERROR,
							(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
							 errmsg("invalid value for option \"%s\": \"%s\"",
									opt->name, value),
							 errdetail("The value must be a Boolean.")));
				break;
			}
		case CTAS_OPT_ENUM:
			{
				const char *const *c;
				StringInfoData buf;

				for (c = opt->choices; *c; c++)
				{
					if (strcmp(*c, value) == 0)
						return;
				}
				initStringInfo(&buf);
				for (c = opt->choices; *c; c++)
					appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "",
									 *c);
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"%s\": \"%s\"",
								opt->name, value),
						 errhint("Valid values are: %s.", buf.data)));
				break;
			}
		case CTAS_OPT_SERVICE_URL:
		case CTAS_OPT_HOOK_URL:
			check_url(opt, value);
			break;
		case CTAS_OPT_SERVICE_URL_LIST:
			{
				List	   *urls = CtasSplitUrlList(value);
				ListCell   *lc;

				if (urls == NIL)
					ereport(ERROR,
							(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
							 errmsg("invalid value for option \"%s\": \"%s\"",
									opt->name, value),
							 errdetail("The value must be a comma-separated list of http or https URLs.")));
				foreach(lc, urls)
					check_url(opt, lfirst(lc));
				break;
			}
	}
}

/*
 * check_url
 *		Parse value with libcurl's URL parser and ereport(ERROR) unless it
 *		is an http or https URL with a host, an optional numeric port, and
 *		no credentials.  A service URL (the base of an HTTP interface) has
 *		no path, query or fragment; a webhook URL may have a path and query.
 *
 * The curl handle and its strings are released before any error is raised.
 */
static void
check_url(const CtasOption *opt, const char *value)
{
	CURLU	   *h;
	CURLUcode	rc;
	char	   *part;
	char	   *scheme = NULL;
	bool		has_host = false;
	bool		has_credentials = false;
	bool		has_query = false;
	bool		has_fragment = false;
	bool		has_path = false;

	/* a value curl cannot parse is echoed below: never one with userinfo */
	if (strchr(value, '@') != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"%s\" must not contain credentials",
						opt->name),
				 errhint("Put the user and password in the user mapping.")));

	h = curl_url();
	if (h == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));

	rc = curl_url_set(h, CURLUPART_URL, value, CURLU_NON_SUPPORT_SCHEME);
	if (rc == CURLUE_OK)
	{
		if (curl_url_get(h, CURLUPART_SCHEME, &part, 0) == CURLUE_OK)
		{
			scheme = pstrdup(part);
			curl_free(part);
		}
		if (curl_url_get(h, CURLUPART_HOST, &part, 0) == CURLUE_OK)
		{
			has_host = part[0] != '\0';
			curl_free(part);
		}
		if (curl_url_get(h, CURLUPART_USER, &part, 0) == CURLUE_OK)
		{
			has_credentials = true;
			curl_free(part);
		}
		if (curl_url_get(h, CURLUPART_PASSWORD, &part, 0) == CURLUE_OK)
		{
			has_credentials = true;
			curl_free(part);
		}
		if (curl_url_get(h, CURLUPART_QUERY, &part, 0) == CURLUE_OK)
		{
			has_query = true;
			curl_free(part);
		}
		if (curl_url_get(h, CURLUPART_FRAGMENT, &part, 0) == CURLUE_OK)
		{
			has_fragment = true;
			curl_free(part);
		}
		if (curl_url_get(h, CURLUPART_PATH, &part, 0) == CURLUE_OK)
		{
			has_path = strcmp(part, "/") != 0 && part[0] != '\0';
			curl_free(part);
		}
	}
	curl_url_cleanup(h);

	/* credentials first: never echo a URL that may carry a password */
	if (has_credentials)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"%s\" must not contain credentials",
						opt->name),
				 errhint("Put the user and password in the user mapping.")));

	if (rc != CURLUE_OK || scheme == NULL || !has_host)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"",
						opt->name, value),
				 errdetail("The value must be an absolute http or https URL with a host name.")));

	if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"",
						opt->name, value),
				 errdetail("URL scheme \"%s\" is not supported; only http and https are.",
						   scheme)));

	if ((opt->kind == CTAS_OPT_SERVICE_URL ||
		 opt->kind == CTAS_OPT_SERVICE_URL_LIST) && (has_path || has_query))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"",
						opt->name, value),
				 errdetail("The URL of a service must not have a path or a query.")));

	if (has_fragment)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"",
						opt->name, value),
				 errdetail("The URL must not have a fragment.")));
}

/*
 * ctas_fed_validator
 *		Validator of the ctas_fed foreign-data wrapper.
 *
 * Called with the complete option list of the object being created or
 * altered.  Raises an error for: any option of the wrapper itself; any
 * foreign table (a catalog is written to with CTAS, not mapped); a server
 * without a known "type"; an option unknown for the server's type or the
 * object; a credential on a server; a malformed value; a line break in any
 * value; password_required = false set by a non-superuser; a host that
 * ctas_fed.allowed_hosts does not list, set by a non-superuser (checked
 * again at connect time, since the owner need not be the one who sets it
 * and the setting can change).
 */
Datum
ctas_fed_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	const CtasTargetRoutine *type = NULL;
	ListCell   *lc;

	CtasCheckPreloaded();

	if (catalog == ForeignTableRelationId || catalog == AttributeRelationId)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("ctas_fed does not support foreign tables"),
				 errhint("A ctas_fed server is a catalog: create tables in it with CREATE TABLE catalog.schema.table AS ...")));

	if (catalog == ForeignServerRelationId)
	{
		char	   *typename = NULL;

		foreach(lc, options)
		{
			DefElem    *def = lfirst_node(DefElem, lc);

			if (strcmp(def->defname, "type") == 0)
				typename = defGetString(def);
		}
		if (typename == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
					 errmsg("option \"type\" is required for a ctas_fed server"),
					 errhint("Valid types are: %s.", valid_types_list())));
		type = CtasTargetByName(typename);
		if (type == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("invalid value for option \"type\": \"%s\"",
							typename),
					 errhint("Valid types are: %s.", valid_types_list())));
	}

	foreach(lc, options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);
		const char *value = defGetString(def);
		const CtasOption *opt = NULL;

		if (catalog == ForeignServerRelationId &&
			strcmp(def->defname, "type") == 0)
			continue;

		if (catalog != ForeignDataWrapperRelationId)
		{
			opt = CtasLookupOption(CtasCommonOptions, def->defname, catalog);
			if (opt == NULL && type != NULL)
				opt = CtasLookupOption(type->server_options, def->defname,
									 catalog);
			if (opt == NULL && type == NULL)
			{
				const CtasTargetRoutine *const *t;

				/* a user mapping does not know its server's type */
				for (t = CtasTargets; *t && opt == NULL; t++)
					opt = CtasLookupOption((*t)->server_options, def->defname,
										catalog);
			}
		}

		if (opt == NULL)
		{
			if (catalog == ForeignServerRelationId &&
				CtasLookupOption(CtasCommonOptions, def->defname,
							  UserMappingRelationId))
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("option \"%s\" belongs on a user mapping, not on a server",
								def->defname),
						 errhint("Put credentials in CREATE USER MAPPING ... OPTIONS (user '...', password '...').")));

			if (catalog == ForeignDataWrapperRelationId)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("invalid option \"%s\"", def->defname),
						 errhint("There are no valid options in this context.")));

			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\"", def->defname),
					 errhint("Valid options in this context are: %s.",
							 valid_options_list(type, catalog))));
		}

		if (strchr(value, '\n') != NULL || strchr(value, '\r') != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("value of option \"%s\" must not contain a line break",
							def->defname)));

		check_option_value(opt, value);

		if (opt->hosts != CTAS_HOSTS_NONE && !superuser())
			CtasCheckHostOption(opt, value);

		if (strcmp(opt->name, "password_required") == 0 &&
			!defGetBoolean(def) && !superuser())
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("password_required=false is superuser-only"),
					 errhint("User mappings with the password_required option set to false may only be created or modified by the superuser.")));
	}

	/* options a type cannot work without */
	if (type != NULL && type->required_options != NULL)
	{
		const char *const *req;

		for (req = type->required_options; *req; req++)
		{
			bool		found = false;

			foreach(lc, options)
			{
				if (strcmp(lfirst_node(DefElem, lc)->defname, *req) == 0)
					found = true;
			}
			if (!found)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
						 errmsg("option \"%s\" is required for a catalog of type \"%s\"",
								*req, type->type_name)));
		}
	}

	PG_RETURN_VOID();
}

