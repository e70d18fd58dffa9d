/*-------------------------------------------------------------------------
 *
 * client.c
 *		  The ClickHouse protocol over the generic libcurl engine
 *		  (src/http/curl.c): queries, streamed INSERTs, KILL QUERY.
 *
 * Everything ctas_fed sends to ClickHouse goes through here: small
 * queries (DDL, SELECT count(), system tables) and one streamed INSERT per
 * statement.  The engine's rules (no signals, http/https only, latch
 * waits, inactivity timeouts, owned resources) hold for every request;
 * on top of them:
 *
 *	- Timeouts come from the catalog: connect_timeout (default 10 s) and
 *	  timeout (default 300 s, an inactivity limit).  Requests on commit and
 *	  abort paths (CTAS_HTTP_CLEANUP) also have a total deadline of 30 s,
 *	  as postgres_fdw's abort cleanup does.
 *	- An interrupted request stops the remote query with KILL QUERY before
 *	  CHECK_FOR_INTERRUPTS() raises PostgreSQL's own error.
 *	- Credentials travel in the X-ClickHouse-User / X-ClickHouse-Key
 *	  headers, never in a URL; no error message ever shows them.
 *	- Every request carries a query_id of ours (CtasChHttpNewQueryId), so that
 *	  a request we gave up on can be stopped with KILL QUERY: ClickHouse
 *	  goes on running an HTTP query whose client has gone.
 *	- Every response is checked for a ClickHouse exception: the
 *	  X-ClickHouse-Exception-Code header (newer servers), a non-200 status,
 *	  and the body (answer.c: CtasChCheckResponse, which also refuses what
 *	  is not ClickHouse's own answer).
 *	- Identifiers are backquoted and literals single-quoted, with
 *	  backslash escapes (CtasChAppendIdent, CtasChAppendLiteral): the
 *	  quoting of every SQL text of the target, these requests included.
 *	- A non-superuser's catalog needs a password (the one password rule,
 *	  CtasPasswordRequired in src/catalog.c) and, when the superuser
 *	  setting ctas_fed.allowed_hosts is set, a listed host (src/hosts.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/client.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_foreign_server.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "clickhouse.h"
#include "hosts.h"
#include "http/curl.h"

#define CH_DEFAULT_CONNECT_TIMEOUT	10	/* s, option connect_timeout */
#define CH_DEFAULT_TIMEOUT			300 /* s, option timeout */
#define CH_CLEANUP_DEADLINE_MS		30000	/* commit/abort requests */
#define CH_KILL_DEADLINE_MS			1000	/* KILL QUERY */

struct CtasChHttpStream
{
	CtasChHttp *http;
	CtasCurl   *xfer;
	StringInfoData buf;			/* rows not yet taken by curl */
	char	   *query_id;
	char	   *sql;			/* for error contexts */
	char	   *what;
	bool		closed;			/* finished, failed or aborted */
	CtasChHttpStream **slot;		/* cleared when the stream goes away */
	void		(*on_failure) (void *arg);	/* before the error is raised */
	void	   *on_failure_arg;
};

static uint32 query_serial = 0;

static CtasCurl *ch_xfer_create(CtasChHttp *http, MemoryContext cxt,
								bool stream, bool must_succeed);
static void ch_xfer_start(CtasCurl *t, const char *url, const char *body,
						  StringInfo up);
static char *ch_url(CtasChHttp *http, CtasCurl *t, const char *query_id,
					const char *sql_in_url, bool wait_end);
static void ch_stream_fail(CtasChHttpStream *s, CtasCurlResult rr);
static void ch_stream_reset_cb(void *arg);
static char *ch_run(CtasChHttp *http, const char *sql, const char *data,
					size_t len, const char *what);
static CtasChHttp *ch_http_create(const CtasCatalog *catalog, const char *url,
								  MemoryContext cxt);

/*
 * type 'clickhouse': the HTTP interface.  The routine's server_options
 * (writer.c); here because CtasChHttpCreate asks it which options name hosts.
 */
const CtasOption CtasChServerOptions[] = {
	{"url", ForeignServerRelationId, CTAS_OPT_SERVICE_URL, 0, 0, NULL, false, CTAS_HOSTS_URL},
	{"database", ForeignServerRelationId, CTAS_OPT_STRING},
	{"connect_timeout", ForeignServerRelationId, CTAS_OPT_INT, 1, 3600},
	{"timeout", ForeignServerRelationId, CTAS_OPT_INT, 1, 86400},
	{"cluster", ForeignServerRelationId, CTAS_OPT_STRING},
	{"shard_urls", ForeignServerRelationId, CTAS_OPT_SERVICE_URL_LIST, 0, 0, NULL, false, CTAS_HOSTS_URL_LIST},
	{NULL}
};

/*
 * CtasChHttpCreate
 *		A client for the ClickHouse catalog, allocated in cxt.
 *
 * Reads url, connect_timeout and timeout from the server options and user
 * and password from the user mapping.  No connection is made yet.  All
 * curl resources the client acquires later are released when cxt is reset
 * or deleted.  ereport(ERROR) when the catalog has no url, when a
 * non-superuser's mapping has no password (2F003) and when the catalog of
 * a non-superuser names a host that ctas_fed.allowed_hosts does not list
 * (42501).
 */
CtasChHttp *
CtasChHttpCreate(const CtasCatalog *catalog, MemoryContext cxt)
{
	const char *url = CtasCatalogOption(catalog, "url");

	if (url == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("ClickHouse catalog \"%s\" has no url", catalog->name)));
	return ch_http_create(catalog, url, cxt);
}

/*
 * CtasChHttpCreateShard
 *		A client for one shard of a cluster catalog: as CtasChHttpCreate, on
 *		url (entry shard, from 1, of the catalog's shard_urls), which must
 *		also be a host that ctas_fed.allowed_hosts lists when that applies.
 */
CtasChHttp *
CtasChHttpCreateShard(const CtasCatalog *catalog, const char *url, int shard,
					  MemoryContext cxt)
{
	CtasChHttp *http;

	CtasCheckCatalogUrl(catalog, "shard_urls", url);
	http = ch_http_create(catalog, url, cxt);
	/* messages name the shard: "lake (shard 2)" */
	http->catalog = MemoryContextStrdup(cxt,
										psprintf("%s (shard %d)",
												 catalog->name, shard));
	return http;
}

/*
 * CtasChClusterOpen
 *		The cluster of a catalog, with a client per shard, in cxt; NULL when
 *		the catalog names no cluster.  Nothing is sent yet.  ERROR when
 *		only one of cluster and shard_urls is set, when there are too many
 *		shards, or when a shard's host is not allowed.
 */
ChCluster *
CtasChClusterOpen(const CtasCatalog *catalog, MemoryContext cxt)
{
	const char *name = CtasCatalogOption(catalog, "cluster");
	const char *urls = CtasCatalogOption(catalog, "shard_urls");
	MemoryContext old;
	ChCluster  *c;
	List	   *list;
	ListCell   *lc;
	int			i = 0;

	if (name == NULL && urls == NULL)
		return NULL;
	if (name == NULL || urls == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("ClickHouse catalog \"%s\" has option \"%s\" but not \"%s\"",
						catalog->name, name ? "cluster" : "shard_urls",
						name ? "shard_urls" : "cluster"),
				 errhint("A cluster catalog needs both: the cluster's name in remote_servers, and the HTTP URL of each shard.")));
	old = MemoryContextSwitchTo(cxt);
	list = CtasSplitUrlList(urls);
	if (list == NIL || list_length(list) > CH_MAX_SHARDS)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"shard_urls\" of ClickHouse catalog \"%s\"",
						catalog->name),
				 errdetail("A cluster catalog has from 1 to %d shards.",
						   CH_MAX_SHARDS)));
	c = palloc0(sizeof(ChCluster));
	c->name = pstrdup(name);
	c->nshards = list_length(list);
	c->urls = palloc(sizeof(char *) * c->nshards);
	c->http = palloc(sizeof(CtasChHttp *) * c->nshards);
	foreach(lc, list)
	{
		c->urls[i] = lfirst(lc);
		c->http[i] = CtasChHttpCreateShard(catalog, c->urls[i], i + 1, cxt);
		i++;
	}
	MemoryContextSwitchTo(old);
	return c;
}

static CtasChHttp *
ch_http_create(const CtasCatalog *catalog, const char *url,
			   MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	CtasChHttp *http;
	const char *v;
	size_t		len;

	CtasCurlInit();

	http = palloc0(sizeof(CtasChHttp));
	http->cxt = cxt;
	http->catalog = pstrdup(catalog->name);
	http->base_url = pstrdup(url);
	len = strlen(http->base_url);
	while (len > 0 && http->base_url[len - 1] == '/')
		http->base_url[--len] = '\0';

	v = CtasCatalogOption(catalog, "user");
	http->user = v ? pstrdup(v) : NULL;
	v = CtasCatalogOption(catalog, "password");
	http->password = v ? pstrdup(v) : NULL;

	/* the rules of a non-superuser's catalog, checked on every use */
	CtasCheckCatalogHosts(catalog, CtasChServerOptions);
	if ((http->password == NULL || http->password[0] == '\0') &&
		CtasPasswordRequired(catalog, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("Non-superusers must provide a password in the user mapping of ClickHouse catalog \"%s\".",
						   catalog->name),
				 errhint("Set the password option of the user mapping, or have a superuser set password_required 'false' on it.")));

	v = CtasCatalogOption(catalog, "connect_timeout");
	http->connect_timeout_ms = 1000L * (v ? atoi(v) : CH_DEFAULT_CONNECT_TIMEOUT);
	v = CtasCatalogOption(catalog, "timeout");
	http->timeout_s = v ? atoi(v) : CH_DEFAULT_TIMEOUT;
	if (http->connect_timeout_ms <= 0)
		http->connect_timeout_ms = 1000L * CH_DEFAULT_CONNECT_TIMEOUT;
	if (http->timeout_s <= 0)
		http->timeout_s = CH_DEFAULT_TIMEOUT;
	http->timeout_ms = 1000L * http->timeout_s;

	MemoryContextSwitchTo(old);
	return http;
}

const char *
CtasChHttpCatalogName(CtasChHttp *http)
{
	return http->catalog;
}

/* Append a backquoted identifier: `a\`b` */
void
CtasChAppendIdent(StringInfo buf, const char *s)
{
	appendStringInfoChar(buf, '`');
	for (; *s; s++)
	{
		if (*s == '`' || *s == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, *s);
	}
	appendStringInfoChar(buf, '`');
}

/* Append a single-quoted literal: 'it\'s' */
void
CtasChAppendLiteral(StringInfo buf, const char *s)
{
	appendStringInfoChar(buf, '\'');
	for (; *s; s++)
	{
		if (*s == '\'' || *s == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, *s);
	}
	appendStringInfoChar(buf, '\'');
}

/*
 * ch_new_query_id
 *		A query_id that no other running query has:
 *		ctas_fed_<system identifier>_<top xid or 0>_<pid>_<serial>.
 *		Palloc'd in the current memory context.
 */
static char *
ch_new_query_id(void)
{
	return psprintf("ctas_fed_" UINT64_FORMAT "_%u_%d_%u",
					GetSystemIdentifier(), GetTopTransactionIdIfAny(),
					MyProcPid, ++query_serial);
}


/*
 * ch_sql_is_read_only
 *		Is sql a statement that may safely run twice (SELECT, SHOW, EXISTS,
 *		DESCRIBE)?  Only those may go over a reused connection.
 */
static bool
ch_sql_is_read_only(const char *sql)
{
	static const char *const words[] = {
		"SELECT", "SHOW", "EXISTS", "DESCRIBE", "DESC", NULL
	};
	int			i;

	while (*sql == ' ' || *sql == '\t' || *sql == '\n' || *sql == '\r' ||
		   *sql == '(')
		sql++;
	for (i = 0; words[i]; i++)
	{
		size_t		len = strlen(words[i]);

		if (pg_strncasecmp(sql, words[i], len) == 0 &&
			!isalnum((unsigned char) sql[len]) && sql[len] != '_')
			return true;
	}
	return false;
}

/*
 * ch_xfer_create
 *		A transfer in cxt for http's catalog (CtasCurlCreate): its timeouts,
 *		and its credentials in the X-ClickHouse-User / X-ClickHouse-Key
 *		headers; an answer counts as ClickHouse's when it has an
 *		X-ClickHouse-* header.  The header line holding the password is
 *		wiped once libcurl has its copy.  ereport(ERROR) on failure.
 */
static CtasCurl *
ch_xfer_create(CtasChHttp *http, MemoryContext cxt, bool stream,
			   bool must_succeed)
{
	CtasCurlConfig config;
	const char *headers[3];
	char	   *user_line = NULL;
	char	   *key_line = NULL;
	int			n = 0;
	CtasCurl   *t;

	if (http->user)
		headers[n++] = user_line = psprintf("X-ClickHouse-User: %s",
											http->user);
	if (http->password)
		headers[n++] = key_line = psprintf("X-ClickHouse-Key: %s",
										   http->password);
	headers[n] = NULL;

	memset(&config, 0, sizeof(config));
	config.peer = psprintf("ClickHouse catalog \"%s\"", http->catalog);
	config.connect_timeout_ms = http->connect_timeout_ms;
	config.timeout_ms = http->timeout_ms;
	config.headers = headers;
	config.stream = stream;
	config.upload_buffer_size = CTAS_HTTP_STREAM_CHUNK;
	config.must_succeed = must_succeed;
	config.mark_prefix = "X-ClickHouse-";
	config.code_header = "X-ClickHouse-Exception-Code:";

	PG_TRY();
	{
		t = CtasCurlCreate(&config, cxt);
	}
	PG_FINALLY();
	{
		if (key_line)
		{
			memset(key_line, 0, strlen(key_line));
			pfree(key_line);
		}
		if (user_line)
			pfree(user_line);
	}
	PG_END_TRY();
	pfree((char *) config.peer);
	return t;
}

/*
 * ch_xfer_start
 *		Start a request on t (CtasCurlStart).  Only a read-only statement
 *		may go over a reused connection: anything else is sent at most
 *		once.
 */
static void
ch_xfer_start(CtasCurl *t, const char *url, const char *body, StringInfo up)
{
	CtasCurlStart(t, url, body, up,
				  body == NULL || !ch_sql_is_read_only(body));
}

/*
 * ch_url
 *		The URL of a request: base URL, our query_id, and either the SQL of
 *		a streamed INSERT (in the query parameter, URL-encoded) or
 *		wait_end_of_query=1 for a query whose SQL is the body (the server
 *		then buffers the result and reports an error with its status).
 *		Palloc'd.
 */
static char *
ch_url(CtasChHttp *http, CtasCurl *t, const char *query_id,
	   const char *sql_in_url, bool wait_end)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s/?query_id=%s", http->base_url, query_id);
	if (http->settings)
		appendStringInfoString(&buf, http->settings);
	if (wait_end)
		appendStringInfoString(&buf, "&wait_end_of_query=1");
	if (sql_in_url)
	{
		char	   *esc = curl_easy_escape(t->easy, sql_in_url, 0);

		if (esc == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		appendStringInfo(&buf, "&query=%s", esc);
		curl_free(esc);
	}
	return buf.data;
}

/*
 * ch_query_xfer
 *		The client's transfer for a query.  A transfer still busy with an
 *		earlier query means that query was abandoned by an ERROR thrown
 *		while we waited: its connection is closed and the query killed
 *		first.
 */
static CtasCurl *
ch_query_xfer(CtasChHttp *http, bool cleanup)
{
	if (http->xfer != NULL && http->xfer->attached)
	{
		CtasCurlRelease(http->xfer);
		if (http->inflight[0] != '\0')
			CtasChHttpKillQuery(http, http->inflight);
	}
	http->inflight[0] = '\0';
	if (http->xfer == NULL || http->xfer->easy == NULL)
		http->xfer = ch_xfer_create(http, http->cxt, false, cleanup);
	http->xfer->allow_interrupt = !cleanup;
	return http->xfer;
}

/*
 * ch_abandon
 *		A query that did not get an answer (interrupted, timed out, broken
 *		connection): fill *f, close the connection, stop the query on the
 *		server if the request went out, and let an interrupt raise its own
 *		error.  A server that let the request time out is taken as
 *		unresponsive for the rest of the client's life (see
 *		CtasChHttpTryQuery).
 */
static void
ch_abandon(CtasChHttp *http, CtasCurl *t, CtasCurlResult rr, ChFailure *f,
		   const char *qid, const char *what, const char *sql)
{
	bool		sent;

	if (rr != CTAS_CURL_DONE)
		(void) CtasChCheckResponse(http, t, rr, f, NULL);
	sent = CtasCurlSentRequest(t);
	CtasCurlRelease(t);
	if (sent)
		CtasChHttpKillQuery(http, qid);
	if (rr == CTAS_CURL_TIMEOUT)
		http->unresponsive = true;
	if (rr == CTAS_CURL_INTERRUPTED)
		CtasChAfterInterrupt(http, what, sql);
}

/*
 * CtasChHttpTryQuery
 *		Run one query (SQL in the body) and return whether it succeeded.
 *
 * On success *result is the response body, palloc'd in the current
 * context.  On a remote or transport failure, *errdetail (if not NULL)
 * describes it and false is returned: no ERROR, for callers on commit and
 * abort paths.  With CTAS_HTTP_MISSING_OK, an "unknown table/database"
 * error counts as success with *result = NULL.  With CTAS_HTTP_CLEANUP the
 * request has a total deadline and is not cut short by interrupts; and once
 * the server has failed to answer a request or a KILL QUERY of this client
 * (it stopped, or stopped reading), a cleanup request is not sent at all
 * but fails at once, so that an abort after a cancel does not wait on a
 * stalled server once per table (what is left is the resolver's).
 *
 * A cancel pending while waiting (without CTAS_HTTP_CLEANUP) does raise
 * an ERROR: the query is killed on the server, then CHECK_FOR_INTERRUPTS.
 */
bool
CtasChHttpTryQuery(CtasChHttp *http, const char *sql, const char *what,
				   int flags, char **result, char **errdetail)
{
	CtasCurl    *t;
	char	   *qid;
	char	   *url;
	CtasCurlResult rr;
	ChFailure	f;
	bool		missing = false;
	bool		cleanup = (flags & CTAS_HTTP_CLEANUP) != 0;

	*result = NULL;
	if (errdetail)
		*errdetail = NULL;

	if (cleanup && http->unresponsive)
	{
		if (errdetail)
			*errdetail = pstrdup("The server did not answer an earlier request; nothing more is sent to it in this transaction.");
		return false;
	}

	t = ch_query_xfer(http, cleanup);
	qid = ch_new_query_id();
	url = ch_url(http, t, qid, NULL, true);
	strlcpy(http->inflight, qid, sizeof(http->inflight));
	ch_xfer_start(t, url, sql, NULL);
	rr = CtasCurlRun(t, false,
					 cleanup ? Min(CH_CLEANUP_DEADLINE_MS, http->timeout_ms) : 0);
	http->inflight[0] = '\0';

	if (rr == CTAS_CURL_DONE && CtasChCheckResponse(http, t, rr, &f, &missing))
	{
		CtasCurlDetach(t);
		http->unresponsive = false;
		*result = palloc(t->resp_len + 1);
		memcpy(*result, t->resp ? t->resp : "", t->resp_len);
		(*result)[t->resp_len] = '\0';
		return true;
	}

	if (rr == CTAS_CURL_DONE && t->result == CURLE_OK)
	{
		/* the server answered with an error: the connection is fine */
		CtasCurlDetach(t);
		if (missing && (flags & CTAS_HTTP_MISSING_OK))
			return true;
	}
	else
		ch_abandon(http, t, rr, &f, qid, what, sql);

	if (errdetail)
		*errdetail = f.detail;
	return false;
}

/*
 * CtasChHttpQuery
 *		Run one query and return its response body (palloc'd); ereport
 *		(ERROR) on any failure, with the SQLSTATE derived from ClickHouse's
 *		error code.
 */
char *
CtasChHttpQuery(CtasChHttp *http, const char *sql, const char *what)
{
	return ch_run(http, sql, NULL, 0, what);
}

/*
 * CtasChHttpInsert
 *		Run sql (an INSERT ... FORMAT ...) with the len bytes at data as
 *		its whole body, in one request on the client's own transfer: rows
 *		that are all at hand, where CtasChHttpStreamOpen would make a
 *		transfer (handles, buffers, an upload buffer of
 *		CTAS_HTTP_STREAM_CHUNK) for each INSERT.  Sent at most once.
 *		ereport(ERROR) on any failure, after killing the query.
 */
void
CtasChHttpInsert(CtasChHttp *http, const char *sql, const char *data,
				 size_t len, const char *what)
{
	(void) ch_run(http, sql, data, len, what);
}

/*
 * ch_run
 *		A query on the client's transfer: sql in the body, or (data not
 *		NULL) sql in the URL and data as the body.  The response body,
 *		palloc'd; ERROR on a failure.
 */
static char *
ch_run(CtasChHttp *http, const char *sql, const char *data, size_t len,
	   const char *what)
{
	CtasCurl    *t;
	char	   *qid;
	char	   *url;
	char	   *result;
	CtasCurlResult rr;
	ChFailure	f;

	t = ch_query_xfer(http, false);
	qid = ch_new_query_id();
	url = ch_url(http, t, qid, data ? sql : NULL, true);
	strlcpy(http->inflight, qid, sizeof(http->inflight));
	if (data)
		CtasCurlStartData(t, url, data, len);
	else
		ch_xfer_start(t, url, sql, NULL);
	rr = CtasCurlRun(t, false, 0);
	http->inflight[0] = '\0';
	pfree(url);

	if (rr == CTAS_CURL_DONE && CtasChCheckResponse(http, t, rr, &f, NULL))
	{
		CtasCurlDetach(t);
		http->unresponsive = false;
		result = palloc(t->resp_len + 1);
		memcpy(result, t->resp ? t->resp : "", t->resp_len);
		result[t->resp_len] = '\0';
		pfree(qid);
		return result;
	}

	if (rr == CTAS_CURL_DONE && t->result == CURLE_OK)
		CtasCurlDetach(t);
	else
		ch_abandon(http, t, rr, &f, qid, what, sql);
	CtasChRaise(http, what, sql, &f);
	return NULL;				/* keep compiler quiet */
}

/*
 * CtasChHttpKillQuery
 *		KILL QUERY WHERE query_id = '...' SYNC, on a fresh connection, with
 *		interrupts held and a deadline of one second: it runs on the way out
 *		of a cancel, a statement_timeout or a termination, which must not
 *		wait on a server that stopped answering.  A kill that gets no answer
 *		in time marks the server unresponsive (no further kill or cleanup
 *		request is sent by this client); the abandoned query then ends with
 *		its connection, which is closed already.  Never raises an ERROR for
 *		a remote failure (a server that is down has nothing left running);
 *		the outcome is logged at DEBUG1.
 */
void
CtasChHttpKillQuery(CtasChHttp *http, const char *query_id)
{
	MemoryContext cxt;
	MemoryContext old;
	CtasCurl    *t;
	char	   *sql;
	char	   *url;
	CtasCurlResult rr;
	ChFailure	f;
	StringInfoData lit;

	if (http->unresponsive)
	{
		elog(DEBUG1, "ctas_fed: not killing ClickHouse query %s on catalog \"%s\": the server did not answer",
			 query_id, http->catalog);
		return;
	}

	cxt = AllocSetContextCreate(CurrentMemoryContext, "ctas_fed kill query",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	HOLD_INTERRUPTS();

	/* our query ids are [A-Za-z0-9_], but quote anyway */
	initStringInfo(&lit);
	CtasChAppendLiteral(&lit, query_id);
	sql = psprintf("KILL QUERY WHERE query_id = %s SYNC", lit.data);

	t = ch_xfer_create(http, cxt, false, true);
	t->allow_interrupt = false;
	url = ch_url(http, t, ch_new_query_id(), NULL, true);
	ch_xfer_start(t, url, sql, NULL);
	rr = CtasCurlRun(t, false, CH_KILL_DEADLINE_MS);
	if (rr == CTAS_CURL_DONE && CtasChCheckResponse(http, t, rr, &f, NULL))
		elog(DEBUG1, "ctas_fed: killed ClickHouse query %s on catalog \"%s\": %s",
			 query_id, http->catalog,
			 CtasChSanitize(t->resp, t->resp_len, CH_MAX_REMOTE_TEXT));
	else
	{
		if (rr != CTAS_CURL_DONE)
			(void) CtasChCheckResponse(http, t, rr, &f, NULL);
		if (rr == CTAS_CURL_TIMEOUT)
			http->unresponsive = true;
		elog(DEBUG1, "ctas_fed: could not kill ClickHouse query %s on catalog \"%s\": %s",
			 query_id, http->catalog, f.detail);
	}

	RESUME_INTERRUPTS();
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);	/* releases the transfer */
}

/* Has the server version been read already? */
bool
CtasChHttpServerVersionKnown(CtasChHttp *http)
{
	return http->version != NULL;
}

/*
 * CtasChHttpServerVersion
 *		The server's version, read with SELECT version() on first use and
 *		kept for the client's lifetime.  ereport(ERROR) if it cannot be read.
 */
const CtasChHttpVersion *
CtasChHttpServerVersion(CtasChHttp *http)
{
	char	   *body;
	CtasChHttpVersion *v;
	MemoryContext old;

	if (http->version)
		return http->version;

	body = CtasChHttpQuery(http, "SELECT version()", "read the server version");
	old = MemoryContextSwitchTo(http->cxt);
	v = palloc0(sizeof(CtasChHttpVersion));
	v->text = pstrdup(CtasChSanitize(body, strlen(body), 64));
	if (sscanf(v->text, "%d.%d.%d", &v->major, &v->minor, &v->patch) < 2)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not read the server version of ClickHouse catalog \"%s\"",
						http->catalog),
				 errdetail_internal("SELECT version() returned \"%s\".", v->text)));
	MemoryContextSwitchTo(old);
	http->version = v;
	return v;
}

/*
 * CtasChHttpAddSetting
 *		Send the ClickHouse setting name=value with every later request of
 *		this client (URL parameters; name and value are URL-encoded).
 */
void
CtasChHttpAddSetting(CtasChHttp *http, const char *name, const char *value)
{
	MemoryContext old = MemoryContextSwitchTo(http->cxt);
	char	   *n = curl_easy_escape(NULL, name, 0);
	char	   *v = curl_easy_escape(NULL, value, 0);

	if (n == NULL || v == NULL)
	{
		curl_free(n);
		curl_free(v);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}
	http->settings = psprintf("%s&%s=%s", http->settings ? http->settings : "",
							  n, v);
	curl_free(n);
	curl_free(v);
	MemoryContextSwitchTo(old);
}

/*
 * CtasChHttpVersionAtLeast
 *		Is the server's version at least major.minor?
 */
bool
CtasChHttpVersionAtLeast(CtasChHttp *http, int major, int minor)
{
	const CtasChHttpVersion *v = CtasChHttpServerVersion(http);

	return v->major > major || (v->major == major && v->minor >= minor);
}

/*
 * CtasChHttpStreamOpen
 *		Start a streamed POST of sql (an INSERT ... FORMAT ...), whose data
 *		the caller appends to CtasChHttpStreamBuffer() and hands over with
 *		CtasChHttpStreamFlush().  One chunked request for the whole stream,
 *		with bounded memory: the buffer is sent whenever it reaches
 *		CTAS_HTTP_STREAM_CHUNK bytes.  The stream and its curl resources
 *		live in cxt.  Errors come out of Flush or Finish.
 */
CtasChHttpStream *
CtasChHttpStreamOpen(CtasChHttp *http, const char *sql, const char *what,
					 MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	CtasChHttpStream *s;
	MemoryContextCallback *cb;
	char	   *url;

	s = palloc0(sizeof(CtasChHttpStream));
	s->http = http;
	s->sql = pstrdup(sql);
	s->what = pstrdup(what);
	s->query_id = ch_new_query_id();
	initStringInfo(&s->buf);
	enlargeStringInfo(&s->buf, CTAS_HTTP_STREAM_CHUNK + 64 * 1024);

	cb = palloc(sizeof(MemoryContextCallback));
	cb->func = ch_stream_reset_cb;
	cb->arg = s;
	MemoryContextRegisterResetCallback(cxt, cb);

	s->xfer = ch_xfer_create(http, cxt, true, false);
	s->xfer->allow_interrupt = true;
	url = ch_url(http, s->xfer, s->query_id, sql, false);
	ch_xfer_start(s->xfer, url, NULL, &s->buf);
	MemoryContextSwitchTo(old);
	return s;
}

/* reset callback: the stream is gone, tell whoever watches it */
static void
ch_stream_reset_cb(void *arg)
{
	CtasChHttpStream *s = (CtasChHttpStream *) arg;

	if (s->slot && *s->slot == s)
		*s->slot = NULL;
	s->slot = NULL;
}

/*
 * CtasChHttpStreamWatch
 *		Make *slot point to the stream until the stream is finished,
 *		closed, or freed with its memory context; then *slot is set to
 *		NULL.  The owner of slot must call CtasChHttpStreamClose (or clear the
 *		slot) before slot's own memory goes away.
 */
void
CtasChHttpStreamWatch(CtasChHttpStream *s, CtasChHttpStream **slot)
{
	s->slot = slot;
	*slot = s;
}

/*
 * CtasChHttpStreamUnwatch
 *		Forget the slot of CtasChHttpStreamWatch without touching it (its
 *		memory may be about to go).
 */
void
CtasChHttpStreamUnwatch(CtasChHttpStream *s)
{
	s->slot = NULL;
}

/*
 * CtasChHttpStreamOnFailure
 *		Call cb(arg) when the stream fails, after the connection is closed
 *		and the remote INSERT killed, before the error is raised: the place
 *		to find out what the server kept.  cb must not raise an ERROR and
 *		should only run requests with CTAS_HTTP_CLEANUP.
 */
void
CtasChHttpStreamOnFailure(CtasChHttpStream *s, void (*cb) (void *arg), void *arg)
{
	s->on_failure = cb;
	s->on_failure_arg = arg;
}

StringInfo
CtasChHttpStreamBuffer(CtasChHttpStream *s)
{
	return &s->buf;
}

const char *
CtasChHttpStreamQueryId(CtasChHttpStream *s)
{
	return s->query_id;
}

/*
 * ch_stream_fail
 *		The stream failed (early answer from the server, broken connection,
 *		timeout, interrupt): close the connection, stop the remote INSERT,
 *		and raise the error.
 */
static void
ch_stream_fail(CtasChHttpStream *s, CtasCurlResult rr)
{
	CtasChHttp *http = s->http;
	CtasCurl    *t = s->xfer;
	ChFailure	f;
	bool		sent;

	if (!CtasChCheckResponse(http, t, rr, &f, NULL))
	{
		/* f is filled */
	}
	else
	{
		/* a 200 before the end of our data: the server stopped reading */
		f.sqlstate = ERRCODE_CONNECTION_FAILURE;
		f.detail = pstrdup("The server answered before the end of the data.");
		f.not_clickhouse = 0;
	}
	sent = CtasCurlSentRequest(t);
	CtasCurlRelease(t);
	s->closed = true;
	if (s->slot && *s->slot == s)
		*s->slot = NULL;
	s->slot = NULL;
	if (sent)
		CtasChHttpKillQuery(http, s->query_id);
	if (rr == CTAS_CURL_TIMEOUT)
		http->unresponsive = true;
	if (s->on_failure)
		s->on_failure(s->on_failure_arg);
	if (rr == CTAS_CURL_INTERRUPTED)
		CtasChAfterInterrupt(http, s->what, s->sql);
	CtasChRaise(http, s->what, s->sql, &f);
}

/*
 * CtasChHttpStreamFlush
 *		Call after appending to the buffer: when it holds a chunk or more,
 *		wait until curl has taken all of it (back-pressure from the
 *		server), then empty it.  ereport(ERROR) when the stream fails; the
 *		remote query is killed first.
 */
void
CtasChHttpStreamFlush(CtasChHttpStream *s)
{
	CtasCurl    *t = s->xfer;
	CtasCurlResult rr;

	if (s->buf.len < CTAS_HTTP_STREAM_CHUNK)
		return;
	if (s->closed)
		elog(ERROR, "ClickHouse stream used after close");

	CtasCurlResume(t);
	rr = CtasCurlRun(t, true, 0);
	if (rr != CTAS_CURL_DRAINED)
		ch_stream_fail(s, rr);
	resetStringInfo(&s->buf);
	t->up_off = 0;
}

/*
 * CtasChHttpStreamFinish
 *		Send the rest of the buffer and the end of the body, wait for the
 *		server's answer and check it.  ereport(ERROR) on failure (after
 *		killing the remote query); the stream is closed either way.
 */
void
CtasChHttpStreamFinish(CtasChHttpStream *s)
{
	CtasCurl    *t = s->xfer;
	CtasCurlResult rr;
	ChFailure	f;

	if (s->closed)
		elog(ERROR, "ClickHouse stream used after close");

	t->up_eof = true;
	CtasCurlResume(t);
	rr = CtasCurlRun(t, false, 0);
	if (rr != CTAS_CURL_DONE || !CtasChCheckResponse(s->http, t, rr, &f, NULL))
		ch_stream_fail(s, rr);

	CtasCurlRelease(t);
	resetStringInfo(&s->buf);
	s->closed = true;
	if (s->slot && *s->slot == s)
		*s->slot = NULL;
	s->slot = NULL;
}

/*
 * CtasChHttpStreamClose
 *		Abandon the stream without error: close the connection and, when
 *		the request had started, kill the remote INSERT.  Idempotent; for
 *		abort paths (interrupts are held there, and the kill has a short
 *		deadline).
 */
void
CtasChHttpStreamClose(CtasChHttpStream *s)
{
	bool		sent;

	if (s->slot && *s->slot == s)
		*s->slot = NULL;
	s->slot = NULL;
	if (s->closed)
		return;
	s->closed = true;
	sent = s->xfer->easy != NULL && CtasCurlSentRequest(s->xfer);
	CtasCurlRelease(s->xfer);
	if (sent)
		CtasChHttpKillQuery(s->http, s->query_id);
}
