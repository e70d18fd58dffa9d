/*-------------------------------------------------------------------------
 *
 * ctas_fed.h
 *		  Private declarations of ctas_fed, one section per source file.
 *
 * The extern blocks below double as a map of the module: each one is
 * headed by the file that defines it.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 * Portions Copyright (c) 1996-2022, PostgreSQL Global Development Group
 *
 * IDENTIFICATION
 *		  src/ctas_fed.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_FED_H
#define CTAS_FED_H

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

/* in guc.c */
extern bool CtasPreloaded;
extern int	CtasMaxJobs;
extern int	CtasHistorySize;
extern int	CtasResolverNaptime;
extern int	CtasResolveTimeout;
extern char *CtasNotifyUrl;
extern char *CtasPushgatewayUrl;
extern bool CtasProgress;
extern int	CtasProgressInterval;
extern char *CtasFaultPoint;
extern void CtasFaultPointWait(const char *name);
extern int	CtasMaxSyncsPerRole;
extern int	CtasSyncPeekChanges;
extern int	CtasMaxSyncWorkers;
extern void CtasDefineSettings(void);
extern void CtasCheckPreloaded(void);

/* in catalog.c */
extern Oid	CtasCatalogServerOid(const char *name);
extern CtasCatalog *CtasGetCatalog(Oid serverid, Oid userid,
								   bool check_usage, bool need_mapping);
extern const char *CtasCatalogOption(const CtasCatalog *catalog,
									 const char *name);
extern bool CtasPasswordRequired(const CtasCatalog *catalog,
								 bool *owner_rule);
extern List *CtasListCatalogs(bool per_mapping);

#endif							/* CTAS_FED_H */
