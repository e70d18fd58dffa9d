/*-------------------------------------------------------------------------
 *
 * http.c
 *		  A hardened libcurl client for ClickHouse's HTTP interface.
 *
 * Everything ctas_fed sends to ClickHouse goes through here: small
 * queries (DDL, SELECT count(), system tables) and one streamed INSERT per
 * statement.  The rules, from STYLE.md rule 5 and issue 5:
 *
 *	- libcurl never installs signal handlers (CURLOPT_NOSIGNAL: the backend
 *	  owns SIGALRM), speaks http and https only, also on redirects, follows
 *	  no redirect, verifies TLS peers and host names, and ignores proxy
 *	  environment variables: a catalog's url is reached directly.
 *	- Every wait is a WaitLatchOrSocket on curl's socket, so a query cancel
 *	  or a termination request wakes us at once.  An interrupt that is about
 *	  to raise an error aborts the transfer, stops the remote query with
 *	  KILL QUERY, then lets CHECK_FOR_INTERRUPTS() raise PostgreSQL's own
 *	  error (57014, or FATAL); we never write a cancel error by hand.
 *	- Timeouts: connect_timeout (catalog option, default 10 s) for the TCP
 *	  and TLS handshake; timeout (default 300 s) is an *inactivity* limit:
 *	  while we wait on the server and no byte moves either way for that
 *	  long, the request fails.  There is no total limit, so a large healthy
 *	  load is never cut off.  Requests on commit and abort paths
 *	  (CTAS_HTTP_CLEANUP) also have a total deadline of 30 s, as
 *	  postgres_fdw's abort cleanup does.
 *	- Credentials travel in the X-ClickHouse-User / X-ClickHouse-Key
 *	  headers, never in a URL; no error message ever shows them.
 *	- Every request carries a query_id of ours (CtasHttpNewQueryId), so that
 *	  a request we gave up on can be stopped with KILL QUERY: ClickHouse
 *	  goes on running an HTTP query whose client has gone.
 *	- Every response is checked for a ClickHouse exception: the
 *	  X-ClickHouse-Exception-Code header (newer servers), a non-200 status,
 *	  and the body, which can end with "Code: N, ..." even after a 200
 *	  status (18.16 streams the status line before the result).
 *	- Only ClickHouse's own answers are read: one without an X-ClickHouse-*
 *	  header and without a ClickHouse exception is "not a ClickHouse
 *	  server", and nothing of its body reaches an error, a result or a log
 *	  (a non-superuser's catalog can name any HTTP endpoint).
 *	- A non-superuser's catalog needs a password and, when the superuser
 *	  setting ctas_fed.allowed_hosts is set, a listed host (at the end of
 *	  this file; catalog.c and connection.c call the host check too).
 *	- Resources have owners: each curl transfer (multi handle, easy handle,
 *	  header list, response buffer, file descriptor reservation) is freed by
 *	  a reset callback of the memory context it was created in, so an ERROR
 *	  anywhere cannot leak it.  curl callbacks never palloc and never
 *	  ereport (no longjmp through libcurl): they only copy bytes and set
 *	  flags; the response buffer is malloc'd for that reason.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/http.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <limits.h>
#include <poll.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "http.h"

#define CH_DEFAULT_CONNECT_TIMEOUT	10	/* s, option connect_timeout */
#define CH_DEFAULT_TIMEOUT			300 /* s, option timeout */
#define CH_CLEANUP_DEADLINE_MS		30000	/* commit/abort requests */
#define CH_KILL_DEADLINE_MS			1000	/* KILL QUERY */
#define CH_MAX_RESPONSE				((size_t) 256 * 1024 * 1024)
#define CH_MAX_REMOTE_TEXT			1000	/* bytes of remote text shown */
#define CH_MAX_SQL_TEXT				300 /* bytes of SQL in a context */
#define CH_MAX_SOCKETS				4
#define CH_MAX_WAIT_MS				1000	/* re-check deadlines this often */

/* Why ch_xfer_run returned */
typedef enum ch_run_result
{
	CH_RUN_DONE,				/* transfer finished (see result) */
	CH_RUN_DRAINED,				/* upload buffer consumed, stream paused */
	CH_RUN_INTERRUPTED,			/* cancel or die pending */
	CH_RUN_TIMEOUT				/* inactivity limit or deadline reached */
} ch_run_result;

/*
 * One curl transfer: a multi handle driving one easy handle, with the
 * state the callbacks share with us.  Palloc'd, and released by a reset
 * callback of the context it lives in (ch_xfer_release).
 */
typedef struct ch_xfer
{
	CURLM	   *multi;
	CURL	   *easy;
	struct curl_slist *headers;
	bool		fd_reserved;	/* one external FD counted for us */
	bool		attached;		/* easy is added to multi */

	/* sockets curl wants us to watch (socket callback) */
	int			nsock;
	curl_socket_t sock[CH_MAX_SOCKETS];
	int			sock_what[CH_MAX_SOCKETS];
	long		timer_ms;		/* timer callback; -1: no timer */

	/* response, malloc'd: the callbacks must not palloc */
	char	   *resp;
	size_t		resp_len;
	size_t		resp_cap;
	bool		resp_overflow;
	int			exc_header;		/* X-ClickHouse-Exception-Code, or -1 */
	bool		from_clickhouse;	/* an X-ClickHouse-* header was seen */

	/* request body streamed by the read callback, or NULL */
	StringInfo	up;
	size_t		up_off;
	bool		up_eof;
	bool		up_paused;
	uint64		up_total;

	/* progress callback */
	curl_off_t	seen_ul;
	curl_off_t	seen_dl;
	bool		activity;
	bool		interrupted;
	bool		allow_interrupt;	/* false on cleanup paths */

	/* outcome */
	bool		done;
	CURLcode	result;
	char		errbuf[CURL_ERROR_SIZE];
} ch_xfer;

struct CtasHttp
{
	MemoryContext cxt;
	char	   *catalog;		/* catalog name, for messages */
	char	   *base_url;		/* scheme://host[:port], no slash */
	char	   *user;			/* or NULL */
	char	   *password;		/* or NULL; never printed */
	long		connect_timeout_ms;
	long		timeout_ms;		/* inactivity limit */
	int			timeout_s;		/* the same, for messages */
	ch_xfer    *xfer;			/* reused for queries, or NULL */
	CtasHttpVersion *version;	/* read once, or NULL */
	char	   *settings;		/* "&name=value..." on every URL, or NULL */
	char		inflight[96];	/* query_id of the query on xfer, or "" */
	bool		unresponsive;	/* a request or KILL QUERY got no answer */
};

struct CtasHttpStream
{
	CtasHttp   *http;
	ch_xfer    *xfer;
	StringInfoData buf;			/* rows not yet taken by curl */
	char	   *query_id;
	char	   *sql;			/* for error contexts */
	char	   *what;
	bool		closed;			/* finished, failed or aborted */
	CtasHttpStream **slot;		/* cleared when the stream goes away */
	void		(*on_failure) (void *arg);	/* before the error is raised */
	void	   *on_failure_arg;
};

/* A failed request, described for an ereport */
typedef struct ch_failure
{
	int			sqlstate;
	char	   *detail;
	long		not_clickhouse; /* HTTP status of a foreign response, or 0 */
} ch_failure;

static bool curl_initialized = false;
static uint32 query_serial = 0;

/* ctas_fed.allowed_hosts, defined in ctas_fed.c */
char	   *CtasAllowedHosts = NULL;

static void ch_global_init(void);
static ch_xfer *ch_xfer_create(CtasHttp *http, MemoryContext cxt,
							   bool stream, bool must_succeed);
static void ch_xfer_release(void *arg);
static void ch_xfer_start(CtasHttp *http, ch_xfer *t, const char *url,
						  const char *body, StringInfo up);
static ch_run_result ch_xfer_run(CtasHttp *http, ch_xfer *t, bool drain,
								 long deadline_ms);
static void ch_xfer_detach(ch_xfer *t);
static bool ch_xfer_sent_request(ch_xfer *t);
static size_t ch_write_cb(char *ptr, size_t size, size_t nmemb, void *arg);
static size_t ch_header_cb(char *ptr, size_t size, size_t nitems, void *arg);
static size_t ch_read_cb(char *buf, size_t size, size_t nitems, void *arg);
static int	ch_xferinfo_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow,
						   curl_off_t ultotal, curl_off_t ulnow);
static int	ch_socket_cb(CURL *easy, curl_socket_t s, int what, void *arg,
						 void *socketp);
static int	ch_timer_cb(CURLM *multi, long timeout_ms, void *arg);
static void ch_socket_action(ch_xfer *t, curl_socket_t s, int mask);
static char *ch_url(CtasHttp *http, ch_xfer *t, const char *query_id,
					const char *sql_in_url, bool wait_end);
static bool ch_check_response(CtasHttp *http, ch_xfer *t, ch_run_result rr,
							  ch_failure *f, bool *missing);
static bool ch_find_exception(const char *body, size_t len, bool at_end_only,
							  int *code, const char **msg, size_t *msglen);
static int	ch_code_sqlstate(int code);
static char *ch_sanitize(const char *s, size_t len, size_t cap);
static void ch_raise(CtasHttp *http, const char *what, const char *sql,
					 ch_failure *f) pg_attribute_noreturn();
static void ch_after_interrupt(CtasHttp *http, const char *what,
							   const char *sql) pg_attribute_noreturn();
static void ch_stream_fail(CtasHttpStream *s, ch_run_result rr);
static bool ch_password_required(const CtasCatalog *catalog);
static bool ch_next_entry(const char **p, char *buf, size_t bufsize);
static bool ch_entry_valid(const char *entry);
static bool ch_entry_matches(const char *entry, const char *host);
static void ch_check_host(const CtasCatalog *catalog, const char *option,
						  const char *host);
static void ch_stream_reset_cb(void *arg);
static CURLcode ch_harden(CURL *easy);


/*
 * ch_global_init
 *		curl_global_init, once per process.
 */
static void
ch_global_init(void)
{
	if (curl_initialized)
		return;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("could not initialize libcurl")));
	curl_initialized = true;
}

/*
 * ch_harden
 *		The options every handle of ctas_fed gets (STYLE rule 5): no
 *		signals (the backend owns SIGALRM), http and https only - also on
 *		redirects, which are not followed anyway -, TLS peer and host
 *		verified, no proxy taken from the environment.
 */
static CURLcode
ch_harden(CURL *easy)
{
	CURLcode	rc = CURLE_OK;

#define SETOPT(opt, val) \
	do { if (rc == CURLE_OK) rc = curl_easy_setopt(easy, opt, val); } while (0)

	SETOPT(CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
	SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
	SETOPT(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
	SETOPT(CURLOPT_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS));
	SETOPT(CURLOPT_REDIR_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	SETOPT(CURLOPT_FOLLOWLOCATION, 0L);
	SETOPT(CURLOPT_SSL_VERIFYPEER, 1L);
	SETOPT(CURLOPT_SSL_VERIFYHOST, 2L);
	SETOPT(CURLOPT_PROXY, "");
	SETOPT(CURLOPT_USERAGENT, "ctas_fed");
#undef SETOPT
	return rc;
}

/*
 * CtasHttpCreate
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
CtasHttp *
CtasHttpCreate(const CtasCatalog *catalog, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	CtasHttp   *http;
	const char *url;
	const char *v;
	size_t		len;

	ch_global_init();

	url = CtasCatalogOption(catalog, "url");
	if (url == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("ClickHouse catalog \"%s\" has no url", catalog->name)));

	http = palloc0(sizeof(CtasHttp));
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
	CtasCheckCatalogHosts(catalog);
	if ((http->password == NULL || http->password[0] == '\0') &&
		ch_password_required(catalog))
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
CtasHttpCatalogName(CtasHttp *http)
{
	return http->catalog;
}

/*
 * CtasHttpNewQueryId
 *		A query_id that no other running query has:
 *		ctas_fed_<system identifier>_<top xid or 0>_<pid>_<serial>.
 *		Palloc'd in the current memory context.
 */
char *
CtasHttpNewQueryId(void)
{
	return psprintf("ctas_fed_" UINT64_FORMAT "_%u_%d_%u",
					GetSystemIdentifier(), GetTopTransactionIdIfAny(),
					MyProcPid, ++query_serial);
}

/*
 * ch_xfer_create
 *		A transfer in cxt: multi and easy handle with every option that
 *		does not change between requests.  Counts one external file
 *		descriptor (the socket), as postgres_fdw does for its connections;
 *		with must_succeed (commit and abort paths) the descriptor is
 *		reserved even beyond the limit.  ereport(ERROR) on failure;
 *		whatever was acquired is released by the reset callback, which is
 *		registered first.
 */
static ch_xfer *
ch_xfer_create(CtasHttp *http, MemoryContext cxt, bool stream,
			   bool must_succeed)
{
	ch_xfer    *t;
	MemoryContextCallback *cb;
	struct curl_slist *h;
	CURLcode	rc = CURLE_OK;

	t = MemoryContextAllocZero(cxt, sizeof(ch_xfer));
	t->timer_ms = -1;
	t->exc_header = -1;
	cb = MemoryContextAlloc(cxt, sizeof(MemoryContextCallback));
	cb->func = ch_xfer_release;
	cb->arg = t;
	MemoryContextRegisterResetCallback(cxt, cb);

	if (must_succeed)
		ReserveExternalFD();
	else if (!AcquireExternalFD())
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to ClickHouse catalog \"%s\"",
						http->catalog),
				 errdetail("There are too many open files on the local server."),
				 errhint("Raise the server's max_files_per_process and/or \"ulimit -n\" limits.")));
	t->fd_reserved = true;

	t->multi = curl_multi_init();
	t->easy = curl_easy_init();
	if (t->multi == NULL || t->easy == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Could not create a libcurl handle.")));

	curl_multi_setopt(t->multi, CURLMOPT_SOCKETFUNCTION, ch_socket_cb);
	curl_multi_setopt(t->multi, CURLMOPT_SOCKETDATA, t);
	curl_multi_setopt(t->multi, CURLMOPT_TIMERFUNCTION, ch_timer_cb);
	curl_multi_setopt(t->multi, CURLMOPT_TIMERDATA, t);

	/* headers: credentials, never in the URL */
	h = curl_slist_append(NULL, "Expect:");
	if (h)
		t->headers = h;
	if (h && stream)
		h = curl_slist_append(t->headers, "Transfer-Encoding: chunked");
	if (h && http->user)
	{
		char	   *line = psprintf("X-ClickHouse-User: %s", http->user);

		h = curl_slist_append(t->headers, line);
		pfree(line);
	}
	if (h && http->password)
	{
		char	   *line = psprintf("X-ClickHouse-Key: %s", http->password);

		h = curl_slist_append(t->headers, line);
		memset(line, 0, strlen(line));
		pfree(line);
	}
	if (h == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Could not build the HTTP headers.")));

	rc = ch_harden(t->easy);

#define SETOPT(opt, val) \
	do { if (rc == CURLE_OK) rc = curl_easy_setopt(t->easy, opt, val); } while (0)

	SETOPT(CURLOPT_CONNECTTIMEOUT_MS, http->connect_timeout_ms);
	SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);
	SETOPT(CURLOPT_TCP_NODELAY, 1L);
	SETOPT(CURLOPT_HTTPHEADER, t->headers);
	SETOPT(CURLOPT_ERRORBUFFER, t->errbuf);
	SETOPT(CURLOPT_NOPROGRESS, 0L);
	SETOPT(CURLOPT_XFERINFOFUNCTION, ch_xferinfo_cb);
	SETOPT(CURLOPT_XFERINFODATA, t);
	SETOPT(CURLOPT_WRITEFUNCTION, ch_write_cb);
	SETOPT(CURLOPT_WRITEDATA, t);
	SETOPT(CURLOPT_HEADERFUNCTION, ch_header_cb);
	SETOPT(CURLOPT_HEADERDATA, t);
	SETOPT(CURLOPT_POST, 1L);
	if (stream)
	{
		SETOPT(CURLOPT_READFUNCTION, ch_read_cb);
		SETOPT(CURLOPT_READDATA, t);
		SETOPT(CURLOPT_UPLOAD_BUFFERSIZE, (long) CTAS_HTTP_STREAM_CHUNK);
	}
#undef SETOPT

	if (rc != CURLE_OK)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("could not configure libcurl: %s",
						curl_easy_strerror(rc))));
	return t;
}

/*
 * ch_xfer_release
 *		Free every resource of a transfer; idempotent.  Runs as a memory
 *		context reset callback, so it must not fail.
 */
static void
ch_xfer_release(void *arg)
{
	ch_xfer    *t = (ch_xfer *) arg;

	if (t->attached)
		curl_multi_remove_handle(t->multi, t->easy);
	t->attached = false;
	if (t->easy)
		curl_easy_cleanup(t->easy);
	t->easy = NULL;
	if (t->multi)
		curl_multi_cleanup(t->multi);
	t->multi = NULL;
	if (t->headers)
		curl_slist_free_all(t->headers);
	t->headers = NULL;
	if (t->resp)
		free(t->resp);
	t->resp = NULL;
	t->resp_len = t->resp_cap = 0;
	if (t->fd_reserved)
		ReleaseExternalFD();
	t->fd_reserved = false;
	t->nsock = 0;
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
 * ch_xfer_start
 *		Reset the per-request state of t and start a POST of url: body is
 *		the whole request body (a query), or up the buffer streamed by the
 *		read callback.
 *
 * At most once: libcurl silently sends a request again on a new
 * connection when a reused connection dies before any byte of the answer
 * (it takes that for a keep-alive connection the server had closed).  The
 * server may have run the statement already (a reply lost after the
 * work), so every request that is not read-only goes over a connection of
 * its own (CURLOPT_FRESH_CONNECT), which libcurl never retries, closed
 * after it (CURLOPT_FORBID_REUSE: the transfer keeps at most one idle
 * connection, the one its file descriptor reservation counts).
 */
static void
ch_xfer_start(CtasHttp *http, ch_xfer *t, const char *url, const char *body,
			  StringInfo up)
{
	CURLcode	rc;
	CURLMcode	mrc;
	bool		once;

	t->resp_len = 0;
	t->resp_overflow = false;
	t->exc_header = -1;
	t->from_clickhouse = false;
	t->up = up;
	t->up_off = 0;
	t->up_eof = false;
	t->up_paused = false;
	t->up_total = 0;
	t->seen_ul = t->seen_dl = 0;
	t->activity = false;
	t->interrupted = false;
	t->done = false;
	t->result = CURLE_OK;
	t->errbuf[0] = '\0';
	t->timer_ms = -1;

	once = body == NULL || !ch_sql_is_read_only(body);
	rc = curl_easy_setopt(t->easy, CURLOPT_URL, url);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(t->easy, CURLOPT_FRESH_CONNECT, (long) once);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(t->easy, CURLOPT_FORBID_REUSE, (long) once);
	if (rc == CURLE_OK && body != NULL)
	{
		rc = curl_easy_setopt(t->easy, CURLOPT_POSTFIELDSIZE_LARGE,
							  (curl_off_t) strlen(body));
		if (rc == CURLE_OK)
			rc = curl_easy_setopt(t->easy, CURLOPT_POSTFIELDS, body);
	}
	if (rc != CURLE_OK)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("could not configure libcurl: %s",
						curl_easy_strerror(rc))));

	mrc = curl_multi_add_handle(t->multi, t->easy);
	if (mrc != CURLM_OK)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("could not start a request to ClickHouse catalog \"%s\": %s",
						http->catalog, curl_multi_strerror(mrc))));
	t->attached = true;
	ch_socket_action(t, CURL_SOCKET_TIMEOUT, 0);
}

/*
 * ch_xfer_detach
 *		After a complete request: take the easy handle out of the multi
 *		handle, keeping the connection for the next request.
 */
static void
ch_xfer_detach(ch_xfer *t)
{
	if (t->attached)
		curl_multi_remove_handle(t->multi, t->easy);
	t->attached = false;
	t->nsock = 0;
}

/*
 * ch_xfer_sent_request
 *		Did any byte of the request reach the wire?  If not, no query can
 *		be running on the server and there is nothing to kill.
 */
static bool
ch_xfer_sent_request(ch_xfer *t)
{
	long		reqsize = 0;

	if (t->easy == NULL)
		return true;			/* unknown: assume so */
	if (curl_easy_getinfo(t->easy, CURLINFO_REQUEST_SIZE, &reqsize) != CURLE_OK)
		return true;
	return reqsize > 0 || t->up_total > 0;
}

/*
 * ch_socket_action
 *		Let curl act on socket s (mask: what is ready), or on its timer
 *		(CURL_SOCKET_TIMEOUT).  curl's timer is single-shot: once we call
 *		for it, it is spent unless curl sets a new one during the call;
 *		keeping a stale 0 would spin without ever waiting on the socket.
 */
static void
ch_socket_action(ch_xfer *t, curl_socket_t s, int mask)
{
	int			running;

	if (s == CURL_SOCKET_TIMEOUT)
		t->timer_ms = -1;
	(void) curl_multi_socket_action(t->multi, s, mask, &running);
}

/*
 * ch_xfer_run
 *		Drive t until it is done, or with drain until the read callback
 *		has taken the whole upload buffer and paused.
 *
 * Waits on the latch and curl's socket.  Returns CH_RUN_INTERRUPTED when a
 * cancel or termination is pending and interrupts can be processed (the
 * caller stops the remote query and then calls CHECK_FOR_INTERRUPTS), and
 * CH_RUN_TIMEOUT when nothing moved for the catalog's timeout or when
 * deadline_ms (if > 0) has passed.  Other interrupts are serviced here.
 */
static ch_run_result
ch_xfer_run(CtasHttp *http, ch_xfer *t, bool drain, long deadline_ms)
{
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz last = start;

	for (;;)
	{
		CURLMsg    *msg;
		int			left;
		long		wait_ms;
		TimestampTz now;

		while ((msg = curl_multi_info_read(t->multi, &left)) != NULL)
		{
			if (msg->msg == CURLMSG_DONE && msg->easy_handle == t->easy)
			{
				t->done = true;
				t->result = msg->data.result;
			}
		}
		if (t->interrupted)
			return CH_RUN_INTERRUPTED;
		if (t->done)
			return CH_RUN_DONE;
		if (drain && t->up_paused && t->up_off >= (size_t) t->up->len)
			return CH_RUN_DRAINED;

		now = GetCurrentTimestamp();
		if (t->activity)
		{
			last = now;
			t->activity = false;
		}
		if (TimestampDifferenceExceeds(last, now, (int) Min(http->timeout_ms, INT_MAX)))
			return CH_RUN_TIMEOUT;
		if (deadline_ms > 0 &&
			TimestampDifferenceExceeds(start, now, (int) deadline_ms))
			return CH_RUN_TIMEOUT;

		wait_ms = t->timer_ms < 0 ? CH_MAX_WAIT_MS : Min(t->timer_ms, CH_MAX_WAIT_MS);
		if (deadline_ms > 0 && wait_ms > 0)
		{
			/* wake up at the deadline, not up to a second after it */
			long		left_ms = deadline_ms -
				(long) ((now - start) / 1000) + 1;

			wait_ms = Max(Min(wait_ms, left_ms), 1);
		}
		if (wait_ms == 0)
			ch_socket_action(t, CURL_SOCKET_TIMEOUT, 0);
		else if (t->nsock == 1)
		{
			int			events = WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH;
			int			rc;
			int			mask = 0;

			if (t->sock_what[0] & CURL_POLL_IN)
				events |= WL_SOCKET_READABLE;
			if (t->sock_what[0] & CURL_POLL_OUT)
				events |= WL_SOCKET_WRITEABLE;
			rc = WaitLatchOrSocket(MyLatch, events, t->sock[0], wait_ms,
								   PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if (rc & WL_SOCKET_READABLE)
				mask |= CURL_CSELECT_IN;
			if (rc & WL_SOCKET_WRITEABLE)
				mask |= CURL_CSELECT_OUT;
			if (mask != 0)
				ch_socket_action(t, t->sock[0], mask);
			else if (rc & WL_TIMEOUT)
				ch_socket_action(t, CURL_SOCKET_TIMEOUT, 0);
		}
		else if (t->nsock > 1)
		{
			/* happy eyeballs: several sockets; poll them, 100 ms at most */
			struct pollfd pfd[CH_MAX_SOCKETS];
			int			n = t->nsock;
			int			i;
			int			rc;

			for (i = 0; i < n; i++)
			{
				pfd[i].fd = t->sock[i];
				pfd[i].events = ((t->sock_what[i] & CURL_POLL_IN) ? POLLIN : 0) |
					((t->sock_what[i] & CURL_POLL_OUT) ? POLLOUT : 0);
				pfd[i].revents = 0;
			}
			rc = poll(pfd, n, (int) Min(wait_ms, 100));
			if (rc > 0)
			{
				for (i = 0; i < n; i++)
				{
					int			mask = 0;

					if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
						mask |= CURL_CSELECT_IN;
					if (pfd[i].revents & POLLOUT)
						mask |= CURL_CSELECT_OUT;
					if (mask != 0)
						ch_socket_action(t, pfd[i].fd, mask);
				}
			}
			else
				ch_socket_action(t, CURL_SOCKET_TIMEOUT, 0);
		}
		else
		{
			int			rc;

			rc = WaitLatch(MyLatch,
						   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						   wait_ms, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			ch_socket_action(t, CURL_SOCKET_TIMEOUT, 0);
		}

		/* cleanup requests leave interrupts alone: the deadline bounds them */
		if (t->allow_interrupt && InterruptPending &&
			INTERRUPTS_CAN_BE_PROCESSED())
		{
			if (QueryCancelPending || ProcDiePending)
			{
				t->interrupted = true;
				return CH_RUN_INTERRUPTED;
			}
			CHECK_FOR_INTERRUPTS();
		}
	}
}

/* curl callbacks: no palloc, no ereport */

static size_t
ch_write_cb(char *ptr, size_t size, size_t nmemb, void *arg)
{
	ch_xfer    *t = (ch_xfer *) arg;
	size_t		n = size * nmemb;

	t->activity = true;
	if (t->resp_len + n + 1 > t->resp_cap)
	{
		size_t		cap = t->resp_cap ? t->resp_cap : 8192;
		char	   *p;

		while (cap < t->resp_len + n + 1)
			cap *= 2;
		if (cap > CH_MAX_RESPONSE)
		{
			t->resp_overflow = true;
			return 0;			/* CURLE_WRITE_ERROR */
		}
		p = realloc(t->resp, cap);
		if (p == NULL)
		{
			t->resp_overflow = true;
			return 0;
		}
		t->resp = p;
		t->resp_cap = cap;
	}
	memcpy(t->resp + t->resp_len, ptr, n);
	t->resp_len += n;
	t->resp[t->resp_len] = '\0';
	return n;
}

static size_t
ch_header_cb(char *ptr, size_t size, size_t nitems, void *arg)
{
	ch_xfer    *t = (ch_xfer *) arg;
	size_t		n = size * nitems;
	static const char name[] = "X-ClickHouse-Exception-Code:";
	static const char prefix[] = "X-ClickHouse-";

	t->activity = true;
	if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0)
	{
		/* a new response (after 100 Continue) */
		t->exc_header = -1;
		t->from_clickhouse = false;
	}
	else if (n > sizeof(prefix) - 1 &&
			 pg_strncasecmp(ptr, prefix, sizeof(prefix) - 1) == 0)
		t->from_clickhouse = true;

	if (n > sizeof(name) - 1 &&
		pg_strncasecmp(ptr, name, sizeof(name) - 1) == 0)
	{
		size_t		i = sizeof(name) - 1;
		int			code = 0;

		while (i < n && (ptr[i] == ' ' || ptr[i] == '\t'))
			i++;
		while (i < n && ptr[i] >= '0' && ptr[i] <= '9' && code < 100000)
			code = code * 10 + (ptr[i++] - '0');
		t->exc_header = code;
	}
	return n;
}

static size_t
ch_read_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	ch_xfer    *t = (ch_xfer *) arg;
	size_t		avail;
	size_t		n = size * nitems;

	if (t->up == NULL)
		return 0;
	avail = (size_t) t->up->len - t->up_off;
	if (avail == 0)
	{
		if (t->up_eof)
			return 0;
		t->up_paused = true;
		return CURL_READFUNC_PAUSE;
	}
	if (n > avail)
		n = avail;
	memcpy(buf, t->up->data + t->up_off, n);
	t->up_off += n;
	t->up_total += n;
	return n;
}

static int
ch_xferinfo_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow,
			   curl_off_t ultotal, curl_off_t ulnow)
{
	ch_xfer    *t = (ch_xfer *) arg;

	if (dlnow != t->seen_dl || ulnow != t->seen_ul)
	{
		t->activity = true;
		t->seen_dl = dlnow;
		t->seen_ul = ulnow;
	}
	/* abort the transfer when the interrupt will raise an error */
	if (t->allow_interrupt && InterruptPending &&
		(QueryCancelPending || ProcDiePending) &&
		INTERRUPTS_CAN_BE_PROCESSED())
	{
		t->interrupted = true;
		return 1;
	}
	return 0;
}

static int
ch_socket_cb(CURL *easy, curl_socket_t s, int what, void *arg, void *socketp)
{
	ch_xfer    *t = (ch_xfer *) arg;
	int			i;

	for (i = 0; i < t->nsock; i++)
	{
		if (t->sock[i] == s)
			break;
	}
	if (what == CURL_POLL_REMOVE)
	{
		if (i < t->nsock)
		{
			t->nsock--;
			t->sock[i] = t->sock[t->nsock];
			t->sock_what[i] = t->sock_what[t->nsock];
		}
		return 0;
	}
	if (i == t->nsock)
	{
		if (t->nsock == CH_MAX_SOCKETS)
			return -1;			/* cannot happen with one easy handle */
		t->nsock++;
	}
	t->sock[i] = s;
	t->sock_what[i] = what;
	return 0;
}

static int
ch_timer_cb(CURLM *multi, long timeout_ms, void *arg)
{
	ch_xfer    *t = (ch_xfer *) arg;

	t->timer_ms = timeout_ms;
	return 0;
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
ch_url(CtasHttp *http, ch_xfer *t, const char *query_id,
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
 * ch_find_exception
 *		Find a ClickHouse exception in a response body: "Code: N, e.display
 *		Text() = DB::Exception: ..." (18.16) or "Code: N. DB::Exception:
 *		..." (later versions), at the start of the body or of a line.  With
 *		at_end_only (a 200 response, whose body may hold data), only on the
 *		last line.  Sets the code and the message (without the
 *		"DB::Exception: " prefix and the ", e.what() = ..." suffix).
 */
static bool
ch_find_exception(const char *body, size_t len, bool at_end_only,
				  int *code, const char **msg, size_t *msglen)
{
	const char *p = NULL;
	const char *end = body + len;
	const char *q;
	const char *m;
	const char *e;
	int			c = 0;

	if (body == NULL || len == 0)
		return false;

	if (at_end_only)
	{
		/* start of the last non-empty line */
		q = end;
		while (q > body && (q[-1] == '\n' || q[-1] == '\r'))
			q--;
		while (q > body && q[-1] != '\n')
			q--;
		if (end - q >= 6 && strncmp(q, "Code: ", 6) == 0)
			p = q;
	}
	else
	{
		for (q = body; q < end; q++)
		{
			if ((q == body || q[-1] == '\n') && end - q >= 6 &&
				strncmp(q, "Code: ", 6) == 0)
			{
				p = q;
				break;
			}
		}
	}
	if (p == NULL)
		return false;

	q = p + 6;
	if (q >= end || *q < '0' || *q > '9')
		return false;
	while (q < end && *q >= '0' && *q <= '9' && c < 100000)
		c = c * 10 + (*q++ - '0');

	if (end - q >= 19 && strncmp(q, ", e.displayText() = ", 19) == 0)
		m = q + 19;
	else if (end - q >= 2 && strncmp(q, ". ", 2) == 0)
		m = q + 2;
	else if (at_end_only)
		return false;
	else
		m = q;
	while (m < end && *m == ' ')
		m++;
	if (end - m >= 15 && strncmp(m, "DB::Exception: ", 15) == 0)
		m += 15;

	/* the message ends at ", e.what() = " or at the end of its line */
	for (e = m; e < end && *e != '\n'; e++)
	{
		if (end - e >= 13 && strncmp(e, ", e.what() = ", 13) == 0)
			break;
	}

	*code = c;
	*msg = m;
	*msglen = e - m;
	return true;
}

/*
 * ch_is_exception_body
 *		Does the body start with a ClickHouse exception in one of the exact
 *		forms servers print ("Code: N, e.displayText() = DB::Exception: "
 *		in 18.16, "Code: N. DB::Exception: " later)?  Used to recognise a
 *		ClickHouse answer that carries no X-ClickHouse-* header.
 */
static bool
ch_is_exception_body(const char *body, size_t len)
{
	static const char old_form[] = ", e.displayText() = DB::Exception: ";
	static const char new_form[] = ". DB::Exception: ";
	size_t		i = 6;

	if (body == NULL || len < 6 || strncmp(body, "Code: ", 6) != 0)
		return false;
	if (i >= len || body[i] < '0' || body[i] > '9')
		return false;
	while (i < len && body[i] >= '0' && body[i] <= '9')
		i++;
	if (len - i >= sizeof(old_form) - 1 &&
		strncmp(body + i, old_form, sizeof(old_form) - 1) == 0)
		return true;
	if (len - i >= sizeof(new_form) - 1 &&
		strncmp(body + i, new_form, sizeof(new_form) - 1) == 0)
		return true;
	return false;
}

/*
 * ch_code_sqlstate
 *		The SQLSTATE for a ClickHouse error code (ErrorCodes.cpp).
 */
static int
ch_code_sqlstate(int code)
{
	switch (code)
	{
		case 60:				/* UNKNOWN_TABLE */
			return ERRCODE_UNDEFINED_TABLE;
		case 81:				/* UNKNOWN_DATABASE */
			return ERRCODE_INVALID_SCHEMA_NAME;
		case 57:				/* TABLE_ALREADY_EXISTS */
			return ERRCODE_DUPLICATE_TABLE;
		case 82:				/* DATABASE_ALREADY_EXISTS */
			return ERRCODE_DUPLICATE_SCHEMA;
		case 62:				/* SYNTAX_ERROR */
			return ERRCODE_SYNTAX_ERROR;
		case 16:				/* NO_SUCH_COLUMN_IN_TABLE */
		case 47:				/* UNKNOWN_IDENTIFIER */
			return ERRCODE_UNDEFINED_COLUMN;
		case 46:				/* UNKNOWN_FUNCTION */
			return ERRCODE_UNDEFINED_FUNCTION;
		case 50:				/* UNKNOWN_TYPE */
		case 56:				/* UNKNOWN_STORAGE */
		case 115:				/* UNKNOWN_SETTING */
			return ERRCODE_UNDEFINED_OBJECT;
		case 44:				/* ILLEGAL_COLUMN */
		case 42:				/* NUMBER_OF_ARGUMENTS_DOESNT_MATCH */
		case 36:				/* BAD_ARGUMENTS */
			return ERRCODE_INVALID_TABLE_DEFINITION;
		case 43:				/* ILLEGAL_TYPE_OF_ARGUMENT */
		case 53:				/* TYPE_MISMATCH */
		case 70:				/* CANNOT_CONVERT_TYPE */
			return ERRCODE_DATATYPE_MISMATCH;
		case 69:				/* ARGUMENT_OUT_OF_BOUND */
			return ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE;
		case 6:					/* CANNOT_PARSE_TEXT */
		case 26:				/* CANNOT_PARSE_QUOTED_STRING */
		case 27:				/* CANNOT_PARSE_INPUT_ASSERTION_FAILED */
		case 32:				/* ATTEMPT_TO_READ_AFTER_EOF */
		case 33:				/* CANNOT_READ_ALL_DATA */
		case 38:				/* CANNOT_PARSE_DATE */
		case 41:				/* CANNOT_PARSE_DATETIME */
		case 72:				/* CANNOT_PARSE_NUMBER */
		case 117:				/* INCORRECT_DATA */
			return ERRCODE_DATA_EXCEPTION;
		case 192:				/* UNKNOWN_USER */
		case 516:				/* AUTHENTICATION_FAILED */
			return ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION;
		case 193:				/* WRONG_PASSWORD */
		case 194:				/* REQUIRED_PASSWORD */
			return ERRCODE_INVALID_PASSWORD;
		case 164:				/* READONLY */
		case 497:				/* ACCESS_DENIED */
			return ERRCODE_INSUFFICIENT_PRIVILEGE;
		case 241:				/* MEMORY_LIMIT_EXCEEDED */
			return ERRCODE_OUT_OF_MEMORY;
		case 202:				/* TOO_MANY_SIMULTANEOUS_QUERIES */
			return ERRCODE_TOO_MANY_CONNECTIONS;
		case 252:				/* TOO_MANY_PARTS */
			return ERRCODE_PROGRAM_LIMIT_EXCEEDED;
		default:
			return ERRCODE_FDW_ERROR;
	}
}

/*
 * ch_sanitize
 *		A printable copy of remote text, at most cap bytes (then "..."):
 *		line breaks and tabs become spaces, other control characters and
 *		bytes that are not valid in the server encoding become '?'.
 *		Remote messages can quote our binary rows; they must not corrupt
 *		the log or the client's encoding.  Palloc'd.
 */
static char *
ch_sanitize(const char *s, size_t len, size_t cap)
{
	StringInfoData buf;
	size_t		i = 0;
	bool		utf8 = GetDatabaseEncoding() == PG_UTF8;

	initStringInfo(&buf);
	while (i < len)
	{
		unsigned char c = (unsigned char) s[i];

		if ((size_t) buf.len >= cap)
		{
			appendStringInfoString(&buf, "...");
			break;
		}
		if (c < 0x80)
		{
			if (c == '\n' || c == '\r' || c == '\t')
				appendStringInfoChar(&buf, ' ');
			else if (c < 0x20 || c == 0x7f)
				appendStringInfoChar(&buf, '?');
			else
				appendStringInfoChar(&buf, (char) c);
			i++;
		}
		else
		{
			int			l = pg_utf_mblen((const unsigned char *) s + i);

			if (utf8 && i + l <= len &&
				pg_utf8_islegal((const unsigned char *) s + i, l))
			{
				appendBinaryStringInfo(&buf, s + i, l);
				i += l;
			}
			else
			{
				appendStringInfoChar(&buf, '?');
				i++;
			}
		}
	}
	/* drop trailing blanks */
	while (buf.len > 0 && buf.data[buf.len - 1] == ' ')
		buf.data[--buf.len] = '\0';
	return buf.data;
}

/*
 * ch_check_response
 *		Classify the outcome of a finished (or abandoned) request.  Returns
 *		true for a 200 response without exception; otherwise fills f.  With
 *		missing != NULL, an "unknown table" or "unknown database" error sets
 *		*missing and returns false.
 *
 * A response that does not come from ClickHouse - no X-ClickHouse-* header
 * (18.16 sends X-ClickHouse-Server-Display-Name with every answer) and no
 * exception in ClickHouse's own format - is a failure whatever its status,
 * and nothing of its body is kept: a catalog's url can name any HTTP
 * endpoint (a cloud metadata service, an internal admin page), and its
 * answer must not reach the user through an error or a result.
 */
static bool
ch_check_response(CtasHttp *http, ch_xfer *t, ch_run_result rr,
				  ch_failure *f, bool *missing)
{
	long		status = 0;
	int			code;
	const char *msg;
	size_t		msglen;

	if (missing)
		*missing = false;
	f->not_clickhouse = 0;

	if (rr == CH_RUN_TIMEOUT)
	{
		f->sqlstate = ERRCODE_CONNECTION_FAILURE;
		f->detail = psprintf("The server did not answer for %d seconds (catalog option \"timeout\").",
							 http->timeout_s);
		return false;
	}
	if (rr == CH_RUN_INTERRUPTED)
	{
		f->sqlstate = ERRCODE_CONNECTION_FAILURE;
		f->detail = pstrdup("The request was interrupted.");
		return false;
	}

	if (t->result != CURLE_OK)
	{
		const char *errtext = t->errbuf[0] ? t->errbuf : curl_easy_strerror(t->result);

		if (t->resp_overflow)
		{
			f->sqlstate = ERRCODE_PROGRAM_LIMIT_EXCEEDED;
			f->detail = psprintf("The response is larger than %zu bytes.",
								 CH_MAX_RESPONSE);
			return false;
		}
		switch (t->result)
		{
			case CURLE_COULDNT_RESOLVE_HOST:
			case CURLE_COULDNT_CONNECT:
			case CURLE_SSL_CONNECT_ERROR:
			case CURLE_PEER_FAILED_VERIFICATION:
			case CURLE_SSL_CACERT_BADFILE:
			case CURLE_UNSUPPORTED_PROTOCOL:
				f->sqlstate = ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION;
				break;
			case CURLE_OPERATION_TIMEDOUT:
				/* only the connect timeout is left to curl */
				f->sqlstate = ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION;
				break;
			default:
				f->sqlstate = ERRCODE_CONNECTION_FAILURE;
				break;
		}
		f->detail = psprintf("libcurl error %d (%s): %s", (int) t->result,
							 curl_easy_strerror(t->result),
							 ch_sanitize(errtext, strlen(errtext),
										 CH_MAX_REMOTE_TEXT));
		return false;
	}

	(void) curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);

	if (!t->from_clickhouse && !ch_is_exception_body(t->resp, t->resp_len))
	{
		f->sqlstate = ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION;
		f->not_clickhouse = status > 0 ? status : -1;
		f->detail = psprintf("\"%s\" is not a ClickHouse server (HTTP status %ld).",
							 http->base_url, status);
		return false;
	}

	if (ch_find_exception(t->resp, t->resp_len, status == 200,
						  &code, &msg, &msglen) ||
		(t->exc_header >= 0 &&
		 ch_find_exception(t->resp, t->resp_len, false, &code, &msg, &msglen)))
	{
		f->sqlstate = ch_code_sqlstate(code);
		f->detail = psprintf("HTTP status %ld, ClickHouse error %d: %s",
							 status, code,
							 ch_sanitize(msg, msglen, CH_MAX_REMOTE_TEXT));
		if (missing && (code == 60 || code == 81))
			*missing = true;
		return false;
	}
	if (t->exc_header >= 0)
	{
		f->sqlstate = ch_code_sqlstate(t->exc_header);
		f->detail = psprintf("HTTP status %ld, ClickHouse error %d: %s",
							 status, t->exc_header,
							 ch_sanitize(t->resp ? t->resp : "", t->resp_len,
										 CH_MAX_REMOTE_TEXT));
		return false;
	}
	if (status != 200)
	{
		f->sqlstate = ERRCODE_FDW_ERROR;
		f->detail = psprintf("HTTP status %ld: %s", status,
							 ch_sanitize(t->resp ? t->resp : "", t->resp_len,
										 CH_MAX_REMOTE_TEXT));
		return false;
	}
	return true;
}

/*
 * ch_raise
 *		ereport(ERROR) a failed request.  The message names the operation
 *		and the catalog, the detail the server's answer, the context the
 *		SQL (capped).
 */
static void
ch_raise(CtasHttp *http, const char *what, const char *sql, ch_failure *f)
{
	if (f->not_clickhouse != 0)
		ereport(ERROR,
				(errcode(f->sqlstate),
				 errmsg("\"%s\" is not a ClickHouse server", http->base_url),
				 errdetail("HTTP status %ld.", f->not_clickhouse),
				 errhint("Check option \"url\" of catalog \"%s\"; an answer that does not come from ClickHouse is not shown.",
						 http->catalog)));
	ereport(ERROR,
			(errcode(f->sqlstate),
			 errmsg("could not %s on ClickHouse catalog \"%s\"",
					what, http->catalog),
			 errdetail_internal("%s", f->detail),
			 sql ? errcontext("ClickHouse query: %s",
							  ch_sanitize(sql, strlen(sql), CH_MAX_SQL_TEXT)) : 0));
	pg_unreachable();
}

/*
 * ch_after_interrupt
 *		The transfer was abandoned for a pending cancel or termination and
 *		the remote query stopped: let PostgreSQL raise its own error.  Only
 *		if that does not happen (the interrupt was absorbed), report the
 *		abandoned request.
 */
static void
ch_after_interrupt(CtasHttp *http, const char *what, const char *sql)
{
	ch_failure	f;

	CHECK_FOR_INTERRUPTS();
	f.sqlstate = ERRCODE_CONNECTION_FAILURE;
	f.detail = pstrdup("The request was interrupted.");
	f.not_clickhouse = 0;
	ch_raise(http, what, sql, &f);
}

/*
 * ch_query_xfer
 *		The client's transfer for a query.  A transfer still busy with an
 *		earlier query means that query was abandoned by an ERROR thrown
 *		while we waited: its connection is closed and the query killed
 *		first.
 */
static ch_xfer *
ch_query_xfer(CtasHttp *http, bool cleanup)
{
	if (http->xfer != NULL && http->xfer->attached)
	{
		ch_xfer_release(http->xfer);
		if (http->inflight[0] != '\0')
			CtasHttpKillQuery(http, http->inflight);
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
 *		CtasHttpTryQuery).
 */
static void
ch_abandon(CtasHttp *http, ch_xfer *t, ch_run_result rr, ch_failure *f,
		   const char *qid, const char *what, const char *sql)
{
	bool		sent;

	if (rr != CH_RUN_DONE)
		(void) ch_check_response(http, t, rr, f, NULL);
	sent = ch_xfer_sent_request(t);
	ch_xfer_release(t);
	if (sent)
		CtasHttpKillQuery(http, qid);
	if (rr == CH_RUN_TIMEOUT)
		http->unresponsive = true;
	if (rr == CH_RUN_INTERRUPTED)
		ch_after_interrupt(http, what, sql);
}

/*
 * CtasHttpTryQuery
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
CtasHttpTryQuery(CtasHttp *http, const char *sql, const char *what,
				 int flags, char **result, char **errdetail)
{
	ch_xfer    *t;
	char	   *qid;
	char	   *url;
	ch_run_result rr;
	ch_failure	f;
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
	qid = CtasHttpNewQueryId();
	url = ch_url(http, t, qid, NULL, true);
	strlcpy(http->inflight, qid, sizeof(http->inflight));
	ch_xfer_start(http, t, url, sql, NULL);
	rr = ch_xfer_run(http, t, false,
					 cleanup ? Min(CH_CLEANUP_DEADLINE_MS, http->timeout_ms) : 0);
	http->inflight[0] = '\0';

	if (rr == CH_RUN_DONE && ch_check_response(http, t, rr, &f, &missing))
	{
		ch_xfer_detach(t);
		http->unresponsive = false;
		*result = palloc(t->resp_len + 1);
		memcpy(*result, t->resp ? t->resp : "", t->resp_len);
		(*result)[t->resp_len] = '\0';
		return true;
	}

	if (rr == CH_RUN_DONE && t->result == CURLE_OK)
	{
		/* the server answered with an error: the connection is fine */
		ch_xfer_detach(t);
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
 * CtasHttpQuery
 *		Run one query and return its response body (palloc'd); ereport
 *		(ERROR) on any failure, with the SQLSTATE derived from ClickHouse's
 *		error code.
 */
char *
CtasHttpQuery(CtasHttp *http, const char *sql, const char *what)
{
	ch_xfer    *t;
	char	   *qid;
	char	   *url;
	char	   *result;
	ch_run_result rr;
	ch_failure	f;

	t = ch_query_xfer(http, false);
	qid = CtasHttpNewQueryId();
	url = ch_url(http, t, qid, NULL, true);
	strlcpy(http->inflight, qid, sizeof(http->inflight));
	ch_xfer_start(http, t, url, sql, NULL);
	rr = ch_xfer_run(http, t, false, 0);
	http->inflight[0] = '\0';

	if (rr == CH_RUN_DONE && ch_check_response(http, t, rr, &f, NULL))
	{
		ch_xfer_detach(t);
		http->unresponsive = false;
		result = palloc(t->resp_len + 1);
		memcpy(result, t->resp ? t->resp : "", t->resp_len);
		result[t->resp_len] = '\0';
		return result;
	}

	if (rr == CH_RUN_DONE && t->result == CURLE_OK)
		ch_xfer_detach(t);
	else
		ch_abandon(http, t, rr, &f, qid, what, sql);
	ch_raise(http, what, sql, &f);
	return NULL;				/* keep compiler quiet */
}

/*
 * CtasHttpKillQuery
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
CtasHttpKillQuery(CtasHttp *http, const char *query_id)
{
	MemoryContext cxt;
	MemoryContext old;
	ch_xfer    *t;
	char	   *sql;
	char	   *url;
	ch_run_result rr;
	ch_failure	f;
	const char *p;
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
	appendStringInfoChar(&lit, '\'');
	for (p = query_id; *p; p++)
	{
		if (*p == '\'' || *p == '\\')
			appendStringInfoChar(&lit, '\\');
		appendStringInfoChar(&lit, *p);
	}
	appendStringInfoChar(&lit, '\'');
	sql = psprintf("KILL QUERY WHERE query_id = %s SYNC", lit.data);

	t = ch_xfer_create(http, cxt, false, true);
	t->allow_interrupt = false;
	url = ch_url(http, t, CtasHttpNewQueryId(), NULL, true);
	ch_xfer_start(http, t, url, sql, NULL);
	rr = ch_xfer_run(http, t, false, CH_KILL_DEADLINE_MS);
	if (rr == CH_RUN_DONE && ch_check_response(http, t, rr, &f, NULL))
		elog(DEBUG1, "ctas_fed: killed ClickHouse query %s on catalog \"%s\": %s",
			 query_id, http->catalog,
			 ch_sanitize(t->resp, t->resp_len, CH_MAX_REMOTE_TEXT));
	else
	{
		if (rr != CH_RUN_DONE)
			(void) ch_check_response(http, t, rr, &f, NULL);
		if (rr == CH_RUN_TIMEOUT)
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
CtasHttpServerVersionKnown(CtasHttp *http)
{
	return http->version != NULL;
}

/*
 * CtasHttpServerVersion
 *		The server's version, read with SELECT version() on first use and
 *		kept for the client's lifetime.  ereport(ERROR) if it cannot be read.
 */
const CtasHttpVersion *
CtasHttpServerVersion(CtasHttp *http)
{
	char	   *body;
	CtasHttpVersion *v;
	MemoryContext old;

	if (http->version)
		return http->version;

	body = CtasHttpQuery(http, "SELECT version()", "read the server version");
	old = MemoryContextSwitchTo(http->cxt);
	v = palloc0(sizeof(CtasHttpVersion));
	v->text = pstrdup(ch_sanitize(body, strlen(body), 64));
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
 * CtasHttpAddSetting
 *		Send the ClickHouse setting name=value with every later request of
 *		this client (URL parameters; name and value are URL-encoded).
 */
void
CtasHttpAddSetting(CtasHttp *http, const char *name, const char *value)
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
 * CtasHttpVersionAtLeast
 *		Is the server's version at least major.minor?
 */
bool
CtasHttpVersionAtLeast(CtasHttp *http, int major, int minor)
{
	const CtasHttpVersion *v = CtasHttpServerVersion(http);

	return v->major > major || (v->major == major && v->minor >= minor);
}

/*
 * CtasHttpStreamOpen
 *		Start a streamed POST of sql (an INSERT ... FORMAT ...), whose data
 *		the caller appends to CtasHttpStreamBuffer() and hands over with
 *		CtasHttpStreamFlush().  One chunked request for the whole stream,
 *		with bounded memory: the buffer is sent whenever it reaches
 *		CTAS_HTTP_STREAM_CHUNK bytes.  The stream and its curl resources
 *		live in cxt.  Errors come out of Flush or Finish.
 */
CtasHttpStream *
CtasHttpStreamOpen(CtasHttp *http, const char *sql, const char *what,
				   MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	CtasHttpStream *s;
	MemoryContextCallback *cb;
	char	   *url;

	s = palloc0(sizeof(CtasHttpStream));
	s->http = http;
	s->sql = pstrdup(sql);
	s->what = pstrdup(what);
	s->query_id = CtasHttpNewQueryId();
	initStringInfo(&s->buf);
	enlargeStringInfo(&s->buf, CTAS_HTTP_STREAM_CHUNK + 64 * 1024);

	cb = palloc(sizeof(MemoryContextCallback));
	cb->func = ch_stream_reset_cb;
	cb->arg = s;
	MemoryContextRegisterResetCallback(cxt, cb);

	s->xfer = ch_xfer_create(http, cxt, true, false);
	s->xfer->allow_interrupt = true;
	url = ch_url(http, s->xfer, s->query_id, sql, false);
	ch_xfer_start(http, s->xfer, url, NULL, &s->buf);
	MemoryContextSwitchTo(old);
	return s;
}

/* reset callback: the stream is gone, tell whoever watches it */
static void
ch_stream_reset_cb(void *arg)
{
	CtasHttpStream *s = (CtasHttpStream *) arg;

	if (s->slot && *s->slot == s)
		*s->slot = NULL;
	s->slot = NULL;
}

/*
 * CtasHttpStreamWatch
 *		Make *slot point to the stream until the stream is finished,
 *		closed, or freed with its memory context; then *slot is set to
 *		NULL.  The owner of slot must call CtasHttpStreamClose (or clear the
 *		slot) before slot's own memory goes away.
 */
void
CtasHttpStreamWatch(CtasHttpStream *s, CtasHttpStream **slot)
{
	s->slot = slot;
	*slot = s;
}

/*
 * CtasHttpStreamUnwatch
 *		Forget the slot of CtasHttpStreamWatch without touching it (its
 *		memory may be about to go).
 */
void
CtasHttpStreamUnwatch(CtasHttpStream *s)
{
	s->slot = NULL;
}

/*
 * CtasHttpStreamOnFailure
 *		Call cb(arg) when the stream fails, after the connection is closed
 *		and the remote INSERT killed, before the error is raised: the place
 *		to find out what the server kept.  cb must not raise an ERROR and
 *		should only run requests with CTAS_HTTP_CLEANUP.
 */
void
CtasHttpStreamOnFailure(CtasHttpStream *s, void (*cb) (void *arg), void *arg)
{
	s->on_failure = cb;
	s->on_failure_arg = arg;
}

StringInfo
CtasHttpStreamBuffer(CtasHttpStream *s)
{
	return &s->buf;
}

const char *
CtasHttpStreamQueryId(CtasHttpStream *s)
{
	return s->query_id;
}

uint64
CtasHttpStreamBytes(CtasHttpStream *s)
{
	return s->xfer ? s->xfer->up_total + (uint64) s->buf.len : 0;
}

/*
 * ch_stream_fail
 *		The stream failed (early answer from the server, broken connection,
 *		timeout, interrupt): close the connection, stop the remote INSERT,
 *		and raise the error.
 */
static void
ch_stream_fail(CtasHttpStream *s, ch_run_result rr)
{
	CtasHttp   *http = s->http;
	ch_xfer    *t = s->xfer;
	ch_failure	f;
	bool		sent;

	if (!ch_check_response(http, t, rr, &f, NULL))
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
	sent = ch_xfer_sent_request(t);
	ch_xfer_release(t);
	s->closed = true;
	if (s->slot && *s->slot == s)
		*s->slot = NULL;
	s->slot = NULL;
	if (sent)
		CtasHttpKillQuery(http, s->query_id);
	if (rr == CH_RUN_TIMEOUT)
		http->unresponsive = true;
	if (s->on_failure)
		s->on_failure(s->on_failure_arg);
	if (rr == CH_RUN_INTERRUPTED)
		ch_after_interrupt(http, s->what, s->sql);
	ch_raise(http, s->what, s->sql, &f);
}

/*
 * CtasHttpStreamFlush
 *		Call after appending to the buffer: when it holds a chunk or more,
 *		wait until curl has taken all of it (back-pressure from the
 *		server), then empty it.  ereport(ERROR) when the stream fails; the
 *		remote query is killed first.
 */
void
CtasHttpStreamFlush(CtasHttpStream *s)
{
	ch_xfer    *t = s->xfer;
	ch_run_result rr;

	if (s->buf.len < CTAS_HTTP_STREAM_CHUNK)
		return;
	if (s->closed)
		elog(ERROR, "ClickHouse stream used after close");

	if (t->up_paused)
	{
		t->up_paused = false;
		curl_easy_pause(t->easy, CURLPAUSE_CONT);
		ch_socket_action(t, CURL_SOCKET_TIMEOUT, 0);
	}
	rr = ch_xfer_run(s->http, t, true, 0);
	if (rr != CH_RUN_DRAINED)
		ch_stream_fail(s, rr);
	resetStringInfo(&s->buf);
	t->up_off = 0;
}

/*
 * CtasHttpStreamFinish
 *		Send the rest of the buffer and the end of the body, wait for the
 *		server's answer and check it.  ereport(ERROR) on failure (after
 *		killing the remote query); the stream is closed either way.
 */
void
CtasHttpStreamFinish(CtasHttpStream *s)
{
	ch_xfer    *t = s->xfer;
	ch_run_result rr;
	ch_failure	f;

	if (s->closed)
		elog(ERROR, "ClickHouse stream used after close");

	t->up_eof = true;
	if (t->up_paused)
	{
		t->up_paused = false;
		curl_easy_pause(t->easy, CURLPAUSE_CONT);
		ch_socket_action(t, CURL_SOCKET_TIMEOUT, 0);
	}
	rr = ch_xfer_run(s->http, t, false, 0);
	if (rr != CH_RUN_DONE || !ch_check_response(s->http, t, rr, &f, NULL))
		ch_stream_fail(s, rr);

	ch_xfer_release(t);
	resetStringInfo(&s->buf);
	s->closed = true;
	if (s->slot && *s->slot == s)
		*s->slot = NULL;
	s->slot = NULL;
}

/*
 * CtasHttpStreamClose
 *		Abandon the stream without error: close the connection and, when
 *		the request had started, kill the remote INSERT.  Idempotent; for
 *		abort paths (interrupts are held there, and the kill has a short
 *		deadline).
 */
void
CtasHttpStreamClose(CtasHttpStream *s)
{
	bool		sent;

	if (s->slot && *s->slot == s)
		*s->slot = NULL;
	s->slot = NULL;
	if (s->closed)
		return;
	s->closed = true;
	sent = s->xfer->easy != NULL && ch_xfer_sent_request(s->xfer);
	ch_xfer_release(s->xfer);
	if (sent)
		CtasHttpKillQuery(s->http, s->query_id);
}

/* discard a response body */
static size_t
send_discard_cb(char *ptr, size_t size, size_t nmemb, void *arg)
{
	return size * nmemb;
}

/*
 * CtasHttpSend
 *		One request with a body to an http(s) URL that is not a ClickHouse
 *		catalog: status webhooks and the Pushgateway, sent by the worker.
 *
 * Hardened like the catalog client (no signals, http/https only, no
 * redirects, TLS verified, no proxy from the environment), with a total
 * deadline of timeout_secs since a webhook body is small.  It blocks, which
 * only the worker may do.  Never raises an error: returns false with a
 * palloc'd message in *error for a transport failure or a status other than
 * 2xx.  The curl handle and header list are released before returning, on
 * every path.
 */
bool
CtasHttpSend(const char *url, const char *method, const char *content_type,
			 const char *body, int timeout_secs, char **error)
{
	CURL	   *easy;
	struct curl_slist *headers = NULL;
	struct curl_slist *h;
	char	   *ct_line;
	char		errbuf[CURL_ERROR_SIZE];
	CURLcode	rc = CURLE_OK;
	long		status = 0;

	*error = NULL;
	if (!curl_initialized)
	{
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		{
			*error = pstrdup("could not initialize libcurl");
			return false;
		}
		curl_initialized = true;
	}

	easy = curl_easy_init();
	ct_line = psprintf("Content-Type: %s", content_type);
	h = curl_slist_append(NULL, ct_line);
	if (h)
		headers = h;
	if (h)
		h = curl_slist_append(headers, "Expect:");
	if (easy == NULL || h == NULL)
	{
		if (easy)
			curl_easy_cleanup(easy);
		curl_slist_free_all(headers);
		*error = pstrdup("out of memory");
		return false;
	}
	errbuf[0] = '\0';

	rc = ch_harden(easy);

#define SETOPT(opt, val) \
	do { if (rc == CURLE_OK) rc = curl_easy_setopt(easy, opt, val); } while (0)

	SETOPT(CURLOPT_CONNECTTIMEOUT, (long) Min(timeout_secs, 5));
	SETOPT(CURLOPT_TIMEOUT, (long) timeout_secs);
	SETOPT(CURLOPT_URL, url);
	SETOPT(CURLOPT_CUSTOMREQUEST, method);
	SETOPT(CURLOPT_POSTFIELDS, body);
	SETOPT(CURLOPT_POSTFIELDSIZE, (long) strlen(body));
	SETOPT(CURLOPT_HTTPHEADER, headers);
	SETOPT(CURLOPT_ERRORBUFFER, errbuf);
	SETOPT(CURLOPT_WRITEFUNCTION, send_discard_cb);
#undef SETOPT

	if (rc == CURLE_OK)
		rc = curl_easy_perform(easy);
	if (rc == CURLE_OK)
		curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);

	curl_easy_cleanup(easy);
	curl_slist_free_all(headers);
	pfree(ct_line);

	if (rc != CURLE_OK)
	{
		*error = psprintf("%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
		return false;
	}
	if (status < 200 || status > 299)
	{
		*error = psprintf("HTTP status %ld", status);
		return false;
	}
	return true;
}


/* ---- who may reach what: password and host rules ---- */

/*
 * ch_password_required
 *		Must the user mapping of catalog carry a non-empty password?  Yes,
 *		unless both the mapping's user and the server's owner are
 *		superusers (a superuser's own catalog), or a superuser set
 *		password_required 'false' on the mapping (only a superuser may:
 *		catalog.c).  ClickHouse's own users.xml may let "default" in
 *		without a password from this host: a non-superuser must not borrow
 *		the database server's network position, as postgres_fdw's
 *		password_required keeps them from borrowing its .pgpass or peer
 *		authentication.
 */
static bool
ch_password_required(const CtasCatalog *catalog)
{
	ForeignServer *server = GetForeignServer(catalog->serverid);
	ListCell   *lc;

	if (superuser_arg(catalog->userid) && superuser_arg(server->owner))
		return false;
	foreach(lc, catalog->user_options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);

		if (strcmp(def->defname, "password_required") == 0)
			return defGetBoolean(def);
	}
	return true;
}

/*
 * ch_next_entry
 *		Copy the next comma-separated entry of *p, blanks trimmed, into buf
 *		and advance *p.  Returns false at the end of the list.  An entry
 *		too long for buf comes back truncated to "", which no check
 *		accepts.
 */
static bool
ch_next_entry(const char **p, char *buf, size_t bufsize)
{
	const char *s = *p;
	const char *e;
	size_t		len;

	while (*s == ' ' || *s == '\t' || *s == ',')
		s++;
	if (*s == '\0')
	{
		*p = s;
		return false;
	}
	e = s;
	while (*e != '\0' && *e != ',')
		e++;
	*p = e;
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	len = e - s;
	if (len >= bufsize)
		len = 0;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return true;
}

/*
 * ch_parse_addr
 *		Parse an IPv4 or IPv6 address literal (IPv6 with or without
 *		brackets) into addr (16 bytes); returns the address family, or 0
 *		when text is no address literal.
 */
static int
ch_parse_addr(const char *text, unsigned char *addr)
{
	char		buf[64];
	size_t		len = strlen(text);

	if (len >= 2 && text[0] == '[' && text[len - 1] == ']')
	{
		if (len - 2 >= sizeof(buf))
			return 0;
		memcpy(buf, text + 1, len - 2);
		buf[len - 2] = '\0';
	}
	else
		strlcpy(buf, text, sizeof(buf));
	if (inet_pton(AF_INET, buf, addr) == 1)
		return AF_INET;
	if (inet_pton(AF_INET6, buf, addr) == 1)
		return AF_INET6;
	return 0;
}

/*
 * ch_split_entry
 *		Split an entry of ctas_fed.allowed_hosts: an address with an
 *		optional /prefix length (then *family, addr and *bits are set), or
 *		a host name (*family = 0).  Returns false for a malformed entry.
 */
static bool
ch_split_entry(const char *entry, int *family, unsigned char *addr,
			   int *bits)
{
	char		buf[NAMEDATALEN * 4];
	const char *slash = strchr(entry, '/');
	const char *c;

	*family = 0;
	*bits = 0;
	if (entry[0] == '\0' || strlen(entry) >= sizeof(buf))
		return false;
	strlcpy(buf, entry, sizeof(buf));
	if (slash != NULL && entry[0] != '/')
	{
		char	   *end;
		long		n;

		buf[slash - entry] = '\0';
		*family = ch_parse_addr(buf, addr);
		if (*family == 0)
			return false;
		errno = 0;
		n = strtol(slash + 1, &end, 10);
		if (errno != 0 || end == slash + 1 || *end != '\0' || n < 0 ||
			n > (*family == AF_INET ? 32 : 128))
			return false;
		*bits = (int) n;
		return true;
	}
	*family = ch_parse_addr(buf, addr);
	if (*family != 0)
	{
		*bits = *family == AF_INET ? 32 : 128;
		return true;
	}
	/* a host name (or a socket directory, as libpq's host takes it) */
	for (c = entry; *c; c++)
	{
		if (*c == ' ' || *c == '\t' || (unsigned char) *c < 0x20)
			return false;
	}
	return true;
}

static bool
ch_entry_valid(const char *entry)
{
	int			family;
	unsigned char addr[16];
	int			bits;

	return ch_split_entry(entry, &family, addr, &bits);
}

/*
 * ch_entry_matches
 *		Does host (a name or an address literal, as written in a catalog's
 *		options) match one entry of ctas_fed.allowed_hosts?  Names are
 *		compared case-insensitively and never resolved; an address literal
 *		matches an address entry of its family whose first bits agree.
 */
static bool
ch_entry_matches(const char *entry, const char *host)
{
	int			efamily;
	int			hfamily;
	unsigned char eaddr[16];
	unsigned char haddr[16];
	int			bits;
	int			i;

	if (!ch_split_entry(entry, &efamily, eaddr, &bits))
		return false;
	hfamily = ch_parse_addr(host, haddr);
	if (efamily == 0 || hfamily == 0)
		return efamily == 0 && hfamily == 0 && pg_strcasecmp(entry, host) == 0;
	if (efamily != hfamily)
		return false;
	for (i = 0; i < bits / 8; i++)
	{
		if (eaddr[i] != haddr[i])
			return false;
	}
	if (bits % 8 != 0)
	{
		unsigned char mask = (unsigned char) (0xff << (8 - bits % 8));

		if ((eaddr[i] & mask) != (haddr[i] & mask))
			return false;
	}
	return true;
}

/*
 * CtasAllowedHostsCheck
 *		GUC check hook of ctas_fed.allowed_hosts: every entry must be a
 *		host name, an IPv4 or IPv6 address, or an address/prefix length.
 */
bool
CtasAllowedHostsCheck(char **newval, void **extra, GucSource source)
{
	const char *p = *newval;
	char		entry[NAMEDATALEN * 4];

	if (p == NULL)
		return true;
	while (ch_next_entry(&p, entry, sizeof(entry)))
	{
		if (!ch_entry_valid(entry))
		{
			GUC_check_errdetail("Entry \"%s\" is neither a host name nor an IP address with an optional prefix length.",
								entry);
			return false;
		}
	}
	return true;
}

/*
 * ch_hosts_limited
 *		Does ctas_fed.allowed_hosts list anything?  A setting of blanks and
 *		commas only is as empty as ''.
 */
static bool
ch_hosts_limited(void)
{
	const char *p = CtasAllowedHosts;
	char		entry[NAMEDATALEN * 4];

	return p != NULL && ch_next_entry(&p, entry, sizeof(entry));
}

/*
 * CtasHostAllowed
 *		Is host (a name or an address literal) one that non-superusers'
 *		catalogs may reach?  Any host is while ctas_fed.allowed_hosts is
 *		empty.
 */
bool
CtasHostAllowed(const char *host)
{
	const char *p = CtasAllowedHosts;
	char		entry[NAMEDATALEN * 4];

	if (!ch_hosts_limited())
		return true;
	while (ch_next_entry(&p, entry, sizeof(entry)))
	{
		if (ch_entry_matches(entry, host))
			return true;
	}
	return false;
}

/*
 * ch_url_host
 *		The host of an http(s) URL, IPv6 brackets removed; palloc'd, or
 *		NULL when curl cannot parse the URL.
 */
static char *
ch_url_host(const char *url)
{
	CURLU	   *h = curl_url();
	char	   *part = NULL;
	char	   *host = NULL;

	if (h == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (curl_url_set(h, CURLUPART_URL, url,
					 CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK &&
		curl_url_get(h, CURLUPART_HOST, &part, 0) == CURLUE_OK)
	{
		size_t		len = strlen(part);

		if (len >= 2 && part[0] == '[' && part[len - 1] == ']')
			host = pnstrdup(part + 1, len - 2);
		else
			host = pstrdup(part);
		curl_free(part);
	}
	curl_url_cleanup(h);
	return host;
}

/*
 * ch_check_host
 *		ereport(ERROR) unless host may be reached by a non-superuser's
 *		catalog.  catalog is NULL when a server's options are validated.
 */
static void
ch_check_host(const CtasCatalog *catalog, const char *option,
			  const char *host)
{
	if (host != NULL && CtasHostAllowed(host))
		return;
	if (catalog != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("catalog \"%s\" may not connect to host \"%s\"",
						catalog->name, host ? host : ""),
				 errdetail("The owner of the catalog's server is not a superuser, and option \"%s\" names a host that \"ctas_fed.allowed_hosts\" does not list.",
						   option),
				 errhint("A superuser can add the host to the setting \"ctas_fed.allowed_hosts\".")));
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("host \"%s\" in option \"%s\" is not allowed",
					host ? host : "", option),
			 errdetail("Non-superusers may only name hosts that \"ctas_fed.allowed_hosts\" lists."),
			 errhint("A superuser can add the host to the setting \"ctas_fed.allowed_hosts\".")));
}

/*
 * ch_check_host_option
 *		Check every host that option names: the host of a url, or each
 *		host of a libpq host/hostaddr list.
 */
static void
ch_check_host_option(const CtasCatalog *catalog, const char *option,
					 const char *value)
{
	if (strcmp(option, "host") == 0 || strcmp(option, "hostaddr") == 0)
	{
		const char *p = value;
		char		entry[NAMEDATALEN * 4];
		bool		any = false;

		while (ch_next_entry(&p, entry, sizeof(entry)))
		{
			ch_check_host(catalog, option, entry);
			any = true;
		}
		if (!any)
			ch_check_host(catalog, option, NULL);
	}
	else
		ch_check_host(catalog, option, ch_url_host(value));
}

/*
 * CtasCheckHostOption
 *		Validator side of ctas_fed.allowed_hosts: ereport(ERROR) when a
 *		non-superuser sets a server option (url, host, hostaddr) naming a
 *		host the setting does not list.  The caller checks superuser().
 */
void
CtasCheckHostOption(const char *option, const char *value)
{
	if (!ch_hosts_limited())
		return;
	ch_check_host_option(NULL, option, value);
}

/*
 * CtasCheckCatalogHosts
 *		Connect side of ctas_fed.allowed_hosts, for both kinds of catalog:
 *		when the setting is not empty and the catalog's server belongs to a
 *		non-superuser, its url, host and hostaddr must name listed hosts,
 *		and a catalog that names none (libpq's default, a local socket) is
 *		refused.  The setting may have changed since the server was
 *		created, so every connection checks again.  ereport(ERROR) when
 *		refused.
 */
void
CtasCheckCatalogHosts(const CtasCatalog *catalog)
{
	static const char *const options[] = {"url", "host", "hostaddr", NULL};
	const char *const *opt;
	bool		any = false;

	if (!ch_hosts_limited())
		return;
	if (superuser_arg(GetForeignServer(catalog->serverid)->owner))
		return;
	for (opt = options; *opt; opt++)
	{
		const char *value = CtasCatalogOption(catalog, *opt);

		if (value == NULL)
			continue;
		ch_check_host_option(catalog, *opt, value);
		any = true;
	}
	if (!any)
		ch_check_host(catalog, "host", NULL);
}
