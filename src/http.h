/*-------------------------------------------------------------------------
 *
 * http.h
 *		  The hardened libcurl client that talks to ClickHouse's HTTP
 *		  interface (http.c).
 *
 * A CtasHttp is one catalog's client: base URL, credentials, timeouts and
 * a reusable connection.  It lives in a memory context chosen by the
 * caller; when that context is reset or deleted (ERROR included), every
 * curl handle, header list and socket of the client goes with it.
 *
 * Every request carries a query_id of ours, so that a request the client
 * gives up on (cancel, timeout, broken connection) can be stopped on the
 * server with KILL QUERY; every response is checked for a ClickHouse
 * exception, also after HTTP 200.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/http.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_HTTP_H
#define CTAS_HTTP_H

#include "lib/stringinfo.h"
#include "utils/guc.h"

#include "ctas_fed.h"

typedef struct CtasHttp CtasHttp;
typedef struct CtasHttpStream CtasHttpStream;

/* Flags of CtasHttpTryQuery */
#define CTAS_HTTP_CLEANUP		0x0001	/* commit/abort path: short deadline,
										 * never aborted by an interrupt */
#define CTAS_HTTP_MISSING_OK	0x0002	/* report "unknown table/database"
										 * as success with a NULL result */

/* Server version, read once per client */
typedef struct CtasHttpVersion
{
	int			major;
	int			minor;
	int			patch;
	const char *text;			/* as the server printed it */
} CtasHttpVersion;

/* in http.c */
extern CtasHttp *CtasHttpCreate(const CtasCatalog *catalog,
								MemoryContext cxt);
extern const char *CtasHttpCatalogName(CtasHttp *http);
extern const CtasHttpVersion *CtasHttpServerVersion(CtasHttp *http);
extern bool CtasHttpServerVersionKnown(CtasHttp *http);
extern bool CtasHttpVersionAtLeast(CtasHttp *http, int major, int minor);
extern void CtasHttpAddSetting(CtasHttp *http, const char *name,
							   const char *value);
extern char *CtasHttpQuery(CtasHttp *http, const char *sql,
						   const char *what);
extern bool CtasHttpTryQuery(CtasHttp *http, const char *sql,
							 const char *what, int flags,
							 char **result, char **errdetail);
extern void CtasHttpKillQuery(CtasHttp *http, const char *query_id);
extern char *CtasHttpNewQueryId(void);
extern bool CtasHttpSend(const char *url, const char *method,
						 const char *content_type, const char *body,
						 int timeout_secs, char **error);

/* ctas_fed.allowed_hosts: hosts non-superusers' catalogs may reach */
extern char *CtasAllowedHosts;
extern bool CtasAllowedHostsCheck(char **newval, void **extra,
								  GucSource source);
extern bool CtasHostAllowed(const char *host);
extern void CtasCheckHostOption(const char *option, const char *value);
extern void CtasCheckCatalogHosts(const CtasCatalog *catalog);

extern CtasHttpStream *CtasHttpStreamOpen(CtasHttp *http, const char *sql,
										  const char *what,
										  MemoryContext cxt);
extern void CtasHttpStreamWatch(CtasHttpStream *stream,
								CtasHttpStream **slot);
extern void CtasHttpStreamUnwatch(CtasHttpStream *stream);
extern void CtasHttpStreamOnFailure(CtasHttpStream *stream,
									void (*cb) (void *arg), void *arg);
extern StringInfo CtasHttpStreamBuffer(CtasHttpStream *stream);
extern void CtasHttpStreamFlush(CtasHttpStream *stream);
extern void CtasHttpStreamFinish(CtasHttpStream *stream);
extern void CtasHttpStreamClose(CtasHttpStream *stream);
extern const char *CtasHttpStreamQueryId(CtasHttpStream *stream);
extern uint64 CtasHttpStreamBytes(CtasHttpStream *stream);

/* Size at which CtasHttpStreamFlush hands the buffer to the socket */
#define CTAS_HTTP_STREAM_CHUNK	(1024 * 1024)

#endif							/* CTAS_HTTP_H */
