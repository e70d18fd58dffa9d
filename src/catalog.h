/*-------------------------------------------------------------------------
 *
 * catalog.h
 *		  Catalogs as foreign servers (catalog.c): the descriptor, the
 *		  option tables every target's options are checked by, the
 *		  password rule.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/catalog.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_CATALOG_H
#define CTAS_CATALOG_H

#include "nodes/pg_list.h"

/*
 * A catalog descriptor, rebuilt from the system tables alone:
 * pg_foreign_server gives the name and options, pg_user_mapping the
 * credentials of one local user.  Nothing of a catalog lives only in the
 * memory of one process.
 */
typedef struct CtasCatalog
{
	Oid			serverid;		/* OID of the foreign server */
	char	   *name;			/* server name = catalog name */
	char	   *type_name;		/* server option "type": the kind of
								 * catalog, whose routine targets.c finds
								 * (CtasCatalogRoutine) */
	Oid			userid;			/* local user the descriptor is for */
	Oid			umid;			/* user mapping used, or InvalidOid */
	List	   *server_options; /* DefElems, without "type" and "notify_url" */
	List	   *user_options;	/* DefElems of the user mapping */
	char	   *notify_url;		/* status webhook, or NULL */
	bool		notify_url_limited; /* notify_url is subject to
									 * ctas_fed.allowed_hosts: the server's
									 * owner is not a superuser */
} CtasCatalog;

/* one entry of CtasListCatalogs */
typedef struct CtasCatalogRef
{
	Oid			serverid;		/* OID of the foreign server */
	Oid			userid;			/* user of the mapping, or InvalidOid */
	char	   *name;			/* server name = catalog name */
} CtasCatalogRef;

/*
 * A server or user mapping option a target accepts; the validator in
 * catalog.c checks the value by kind.
 */
typedef enum CtasOptionKind
{
	CTAS_OPT_STRING,			/* any single-line text */
	CTAS_OPT_INT,				/* integer in [min, max] */
	CTAS_OPT_BOOL,				/* anything parse_bool accepts */
	CTAS_OPT_ENUM,				/* one of choices */
	CTAS_OPT_SERVICE_URL,		/* http(s) URL of a service: no path/query */
	CTAS_OPT_HOOK_URL,			/* http(s) URL of a webhook: path, query ok */
	CTAS_OPT_SERVICE_URL_LIST	/* comma-separated service URLs */
} CtasOptionKind;

/*
 * Which hosts an option names, for ctas_fed.allowed_hosts (hosts.c): each
 * target's option table says so, so that no generic code knows the name of
 * an option that names a host.
 */
typedef enum CtasHostKind
{
	CTAS_HOSTS_NONE = 0,		/* names no host */
	CTAS_HOSTS_NAMES,			/* comma-separated host names or addresses
								 * (libpq's host and hostaddr) */
	CTAS_HOSTS_URL,				/* the host of one http(s) URL */
	CTAS_HOSTS_URL_LIST			/* the host of each of comma-separated
								 * URLs, checked URL by URL where each is
								 * used (CtasCheckCatalogUrl) */
} CtasHostKind;

typedef struct CtasOption
{
	const char *name;
	Oid			context;		/* ForeignServer- or UserMappingRelationId */
	CtasOptionKind kind;
	int			min;			/* CTAS_OPT_INT only */
	int			max;
	const char *const *choices; /* CTAS_OPT_ENUM only, NULL-terminated */
	bool		secret;			/* never shown anywhere */
	CtasHostKind hosts;			/* the hosts it names, limited by
								 * ctas_fed.allowed_hosts */
} CtasOption;

extern Oid	CtasCatalogServerOid(const char *name);
extern CtasCatalog *CtasGetCatalog(Oid serverid, Oid userid,
								   bool check_usage, bool need_mapping);
extern const char *CtasCatalogOption(const CtasCatalog *catalog,
									 const char *name);
extern bool CtasPasswordRequired(const CtasCatalog *catalog,
								 bool *owner_rule);
extern List *CtasListCatalogs(bool per_mapping);
extern const CtasOption CtasCommonOptions[];
extern const CtasOption *CtasLookupOption(const CtasOption *table,
										  const char *name, Oid context);

#endif							/* CTAS_CATALOG_H */
