/*-------------------------------------------------------------------------
 *
 * hosts.h
 *		  ctas_fed.allowed_hosts: the hosts non-superusers' catalogs may
 *		  reach (hosts.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/hosts.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_HOSTS_H
#define CTAS_HOSTS_H

#include "nodes/pg_list.h"
#include "utils/guc.h"

#include "catalog.h"

/* in hosts.c */
extern char *CtasAllowedHosts;
extern bool CtasAllowedHostsCheck(char **newval, void **extra,
								  GucSource source);
extern void CtasCheckHostOption(const CtasOption *opt, const char *value);
extern void CtasCheckCatalogHosts(const CtasCatalog *catalog,
								  const CtasOption *options);
extern char *CtasNotifyHostRefused(const char *url);
extern List *CtasSplitUrlList(const char *value);
extern void CtasCheckCatalogUrl(const CtasCatalog *catalog,
								const char *option, const char *url);

#endif							/* CTAS_HOSTS_H */
