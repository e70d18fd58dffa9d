/*-------------------------------------------------------------------------
 *
 * curl.c
 *		  The generic libcurl engine: one hardened HTTP transfer driven
 *		  inside a backend.  It takes a CtasCurlConfig, not a catalog; the
 *		  HTTP client of a target (src/<target>/client.c) and the worker's
 *		  webhook and Pushgateway sender use it.  Its rules:
 *
 *	- libcurl never installs signal handlers (CURLOPT_NOSIGNAL: the backend
 *	  owns SIGALRM), speaks http and https only, also on redirects, follows
 *	  no redirect, verifies TLS peers and host names, and ignores proxy
 *	  environment variables: a catalog's url is reached directly.
 *	- Every wait is a WaitLatchOrSocket on curl's socket, so a query cancel
 *	  or a termination request wakes us at once.  An interrupt that is about
 *	  to raise an error aborts the transfer (CTAS_CURL_INTERRUPTED); the
 *	  caller stops the remote work, then lets CHECK_FOR_INTERRUPTS() raise
 *	  PostgreSQL's own error (57014, or FATAL); we never write a cancel
 *	  error by hand.
 *	- Timeouts: connect_timeout_ms for the TCP and TLS handshake;
 *	  timeout_ms is an *inactivity* limit: while we wait on the server and
 *	  no byte moves either way for that long, the request fails.  There is
 *	  no total limit unless the caller gives a deadline, so a large healthy
 *	  load is never cut off.
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
 *		  src/http/curl.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <poll.h>

#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "http/curl.h"

#define XFER_MAX_WAIT_MS			1000	/* re-check deadlines this often */

static bool curl_initialized = false;

static CURLcode xfer_harden(CURL *easy);
static void xfer_start(CtasCurl *t, const char *url, const char *body,
					   size_t body_len, StringInfo up, bool once);
static void xfer_socket_action(CtasCurl *t, curl_socket_t s, int mask);
static size_t xfer_write_cb(char *ptr, size_t size, size_t nmemb, void *arg);
static size_t xfer_header_cb(char *ptr, size_t size, size_t nitems,
							 void *arg);
static size_t xfer_read_cb(char *buf, size_t size, size_t nitems, void *arg);
static int	xfer_xferinfo_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow,
							 curl_off_t ultotal, curl_off_t ulnow);
static int	xfer_socket_cb(CURL *easy, curl_socket_t s, int what, void *arg,
						   void *socketp);
static int	xfer_timer_cb(CURLM *multi, long timeout_ms, void *arg);

/*
 * CtasCurlInit
 *		curl_global_init, once per process.  ereport(ERROR) on failure.
 */
void
CtasCurlInit(void)
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
 * xfer_harden
 *		The options every handle of ctas_fed gets: no signals (the backend
 *		owns SIGALRM), http and https only - also on redirects, which are
 *		not followed anyway -, TLS peer and host verified, no proxy taken
 *		from the environment.
 */
static CURLcode
xfer_harden(CURL *easy)
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
 * CtasCurlCreate
 *		A transfer in cxt for the peer that config describes: multi and
 *		easy handle with every option that does not change between
 *		requests (config is copied, its header lines too; the caller may
 *		wipe and free them afterwards).  Counts one external file
 *		descriptor (the socket), as postgres_fdw does for its connections;
 *		with must_succeed (commit and abort paths) the descriptor is
 *		reserved even beyond the limit.  ereport(ERROR) on failure;
 *		whatever was acquired is released by the reset callback, which is
 *		registered first.
 */
CtasCurl *
CtasCurlCreate(const CtasCurlConfig *config, MemoryContext cxt)
{
	CtasCurl   *t;
	MemoryContextCallback *cb;
	struct curl_slist *h;
	CURLcode	rc = CURLE_OK;
	const char *const *line;
	bool		stream = config->stream;

	CtasCurlInit();
	t = MemoryContextAllocZero(cxt, sizeof(CtasCurl));
	t->timer_ms = -1;
	t->header_code = -1;
	t->peer = MemoryContextStrdup(cxt, config->peer);
	t->timeout_ms = config->timeout_ms;
	t->mark_prefix = config->mark_prefix ?
		MemoryContextStrdup(cxt, config->mark_prefix) : NULL;
	t->code_header = config->code_header ?
		MemoryContextStrdup(cxt, config->code_header) : NULL;
	cb = MemoryContextAlloc(cxt, sizeof(MemoryContextCallback));
	cb->func = CtasCurlRelease;
	cb->arg = t;
	MemoryContextRegisterResetCallback(cxt, cb);

	if (config->must_succeed)
		ReserveExternalFD();
	else if (!AcquireExternalFD())
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to %s", t->peer),
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

	curl_multi_setopt(t->multi, CURLMOPT_SOCKETFUNCTION, xfer_socket_cb);
	curl_multi_setopt(t->multi, CURLMOPT_SOCKETDATA, t);
	curl_multi_setopt(t->multi, CURLMOPT_TIMERFUNCTION, xfer_timer_cb);
	curl_multi_setopt(t->multi, CURLMOPT_TIMERDATA, t);

	/* headers: the caller's (credentials: never in the URL) */
	h = curl_slist_append(NULL, "Expect:");
	if (h)
		t->headers = h;
	if (h && stream)
		h = curl_slist_append(t->headers, "Transfer-Encoding: chunked");
	for (line = config->headers; h && line && *line; line++)
		h = curl_slist_append(t->headers, *line);
	if (h == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Could not build the HTTP headers.")));

	rc = xfer_harden(t->easy);

#define SETOPT(opt, val) \
	do { if (rc == CURLE_OK) rc = curl_easy_setopt(t->easy, opt, val); } while (0)

	SETOPT(CURLOPT_CONNECTTIMEOUT_MS, config->connect_timeout_ms);
	SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);
	SETOPT(CURLOPT_TCP_NODELAY, 1L);
	SETOPT(CURLOPT_HTTPHEADER, t->headers);
	SETOPT(CURLOPT_ERRORBUFFER, t->errbuf);
	SETOPT(CURLOPT_NOPROGRESS, 0L);
	SETOPT(CURLOPT_XFERINFOFUNCTION, xfer_xferinfo_cb);
	SETOPT(CURLOPT_XFERINFODATA, t);
	SETOPT(CURLOPT_WRITEFUNCTION, xfer_write_cb);
	SETOPT(CURLOPT_WRITEDATA, t);
	SETOPT(CURLOPT_HEADERFUNCTION, xfer_header_cb);
	SETOPT(CURLOPT_HEADERDATA, t);
	SETOPT(CURLOPT_POST, 1L);
	if (stream)
	{
		SETOPT(CURLOPT_READFUNCTION, xfer_read_cb);
		SETOPT(CURLOPT_READDATA, t);
		SETOPT(CURLOPT_UPLOAD_BUFFERSIZE, config->upload_buffer_size);
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
 * CtasCurlRelease
 *		Free every resource of a transfer; idempotent.  Runs as a memory
 *		context reset callback, so it must not fail.
 */
void
CtasCurlRelease(void *arg)
{
	CtasCurl    *t = (CtasCurl *) arg;

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
 * CtasCurlStart
 *		Reset the per-request state of t and start a POST of url: body is
 *		the whole request body (a query), or up the buffer streamed by the
 *		read callback.  once: the request must not be sent twice (see
 *		below); the caller knows which requests are read-only.
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
void
CtasCurlStart(CtasCurl *t, const char *url, const char *body, StringInfo up,
			  bool once)
{
	xfer_start(t, url, body, body ? strlen(body) : 0, up, once);
}

/*
 * CtasCurlStartData
 *		Start a POST of url whose whole body is the len bytes at data
 *		(binary: an INSERT's rows, the statement being in url), sent at
 *		most once.  data must stay valid until the transfer is done.
 */
void
CtasCurlStartData(CtasCurl *t, const char *url, const char *data, size_t len)
{
	xfer_start(t, url, data, len, NULL, true);
}

static void
xfer_start(CtasCurl *t, const char *url, const char *body, size_t body_len,
		   StringInfo up, bool once)
{
	CURLcode	rc;
	CURLMcode	mrc;

	t->resp_len = 0;
	t->resp_overflow = false;
	t->header_code = -1;
	t->marked = false;
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

	rc = curl_easy_setopt(t->easy, CURLOPT_URL, url);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(t->easy, CURLOPT_FRESH_CONNECT, (long) once);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(t->easy, CURLOPT_FORBID_REUSE, (long) once);
	if (rc == CURLE_OK && body != NULL)
	{
		rc = curl_easy_setopt(t->easy, CURLOPT_POSTFIELDSIZE_LARGE,
							  (curl_off_t) body_len);
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
				 errmsg("could not start a request to %s: %s",
						t->peer, curl_multi_strerror(mrc))));
	t->attached = true;
	xfer_socket_action(t, CURL_SOCKET_TIMEOUT, 0);
}

/*
 * CtasCurlDetach
 *		After a complete request: take the easy handle out of the multi
 *		handle, keeping the connection for the next request.
 */
void
CtasCurlDetach(CtasCurl *t)
{
	if (t->attached)
		curl_multi_remove_handle(t->multi, t->easy);
	t->attached = false;
	t->nsock = 0;
}

/*
 * CtasCurlSentRequest
 *		Did any byte of the request reach the wire?  If not, no query can
 *		be running on the server and there is nothing to kill.
 */
bool
CtasCurlSentRequest(CtasCurl *t)
{
	long		reqsize = 0;

	if (t->easy == NULL)
		return true;			/* unknown: assume so */
	if (curl_easy_getinfo(t->easy, CURLINFO_REQUEST_SIZE, &reqsize) != CURLE_OK)
		return true;
	return reqsize > 0 || t->up_total > 0;
}

/*
 * CtasCurlResume
 *		More of the upload buffer is ready: wake the read callback if it
 *		paused the transfer.
 */
void
CtasCurlResume(CtasCurl *t)
{
	if (t->up_paused)
	{
		t->up_paused = false;
		curl_easy_pause(t->easy, CURLPAUSE_CONT);
		xfer_socket_action(t, CURL_SOCKET_TIMEOUT, 0);
	}
}

/*
 * xfer_socket_action
 *		Let curl act on socket s (mask: what is ready), or on its timer
 *		(CURL_SOCKET_TIMEOUT).  curl's timer is single-shot: once we call
 *		for it, it is spent unless curl sets a new one during the call;
 *		keeping a stale 0 would spin without ever waiting on the socket.
 */
static void
xfer_socket_action(CtasCurl *t, curl_socket_t s, int mask)
{
	int			running;

	if (s == CURL_SOCKET_TIMEOUT)
		t->timer_ms = -1;
	(void) curl_multi_socket_action(t->multi, s, mask, &running);
}

/*
 * CtasCurlRun
 *		Drive t until it is done, or with drain until the read callback
 *		has taken the whole upload buffer and paused.
 *
 * Waits on the latch and curl's socket.  Returns CTAS_CURL_INTERRUPTED when a
 * cancel or termination is pending and interrupts can be processed (the
 * caller stops the remote query and then calls CHECK_FOR_INTERRUPTS), and
 * CTAS_CURL_TIMEOUT when nothing moved for the configured timeout or when
 * deadline_ms (if > 0) has passed.  Other interrupts are serviced here.
 */
CtasCurlResult
CtasCurlRun(CtasCurl *t, bool drain, long deadline_ms)
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
			return CTAS_CURL_INTERRUPTED;
		if (t->done)
			return CTAS_CURL_DONE;
		if (drain && t->up_paused && t->up_off >= (size_t) t->up->len)
			return CTAS_CURL_DRAINED;

		now = GetCurrentTimestamp();
		if (t->activity)
		{
			last = now;
			t->activity = false;
		}
		if (TimestampDifferenceExceeds(last, now, (int) Min(t->timeout_ms, INT_MAX)))
			return CTAS_CURL_TIMEOUT;
		if (deadline_ms > 0 &&
			TimestampDifferenceExceeds(start, now, (int) deadline_ms))
			return CTAS_CURL_TIMEOUT;

		wait_ms = t->timer_ms < 0 ? XFER_MAX_WAIT_MS : Min(t->timer_ms, XFER_MAX_WAIT_MS);
		if (deadline_ms > 0 && wait_ms > 0)
		{
			/* wake up at the deadline, not up to a second after it */
			long		left_ms = deadline_ms -
				(long) ((now - start) / 1000) + 1;

			wait_ms = Max(Min(wait_ms, left_ms), 1);
		}
		if (wait_ms == 0)
			xfer_socket_action(t, CURL_SOCKET_TIMEOUT, 0);
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
				xfer_socket_action(t, t->sock[0], mask);
			else if (rc & WL_TIMEOUT)
				xfer_socket_action(t, CURL_SOCKET_TIMEOUT, 0);
		}
		else if (t->nsock > 1)
		{
			/* happy eyeballs: several sockets; poll them, 100 ms at most */
			struct pollfd pfd[CTAS_CURL_MAX_SOCKETS];
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
						xfer_socket_action(t, pfd[i].fd, mask);
				}
			}
			else
				xfer_socket_action(t, CURL_SOCKET_TIMEOUT, 0);
		}
		else
		{
			int			rc;

			rc = WaitLatch(MyLatch,
						   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						   wait_ms, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			xfer_socket_action(t, CURL_SOCKET_TIMEOUT, 0);
		}

		/* cleanup requests leave interrupts alone: the deadline bounds them */
		if (t->allow_interrupt && InterruptPending &&
			INTERRUPTS_CAN_BE_PROCESSED())
		{
			if (QueryCancelPending || ProcDiePending)
			{
				t->interrupted = true;
				return CTAS_CURL_INTERRUPTED;
			}
			CHECK_FOR_INTERRUPTS();
		}
	}
}

/* curl callbacks: no palloc, no ereport */

static size_t
xfer_write_cb(char *ptr, size_t size, size_t nmemb, void *arg)
{
	CtasCurl    *t = (CtasCurl *) arg;
	size_t		n = size * nmemb;

	t->activity = true;
	if (t->resp_len + n + 1 > t->resp_cap)
	{
		size_t		cap = t->resp_cap ? t->resp_cap : 8192;
		char	   *p;

		while (cap < t->resp_len + n + 1)
			cap *= 2;
		if (cap > CTAS_CURL_MAX_RESPONSE)
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
xfer_header_cb(char *ptr, size_t size, size_t nitems, void *arg)
{
	CtasCurl   *t = (CtasCurl *) arg;
	size_t		n = size * nitems;
	size_t		plen = t->mark_prefix ? strlen(t->mark_prefix) : 0;
	size_t		clen = t->code_header ? strlen(t->code_header) : 0;

	t->activity = true;
	if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0)
	{
		/* a new response (after 100 Continue) */
		t->header_code = -1;
		t->marked = false;
	}
	else if (plen > 0 && n > plen &&
			 pg_strncasecmp(ptr, t->mark_prefix, plen) == 0)
		t->marked = true;

	if (clen > 0 && n > clen &&
		pg_strncasecmp(ptr, t->code_header, clen) == 0)
	{
		size_t		i = clen;
		int			code = 0;

		while (i < n && (ptr[i] == ' ' || ptr[i] == '\t'))
			i++;
		while (i < n && ptr[i] >= '0' && ptr[i] <= '9' && code < 100000)
			code = code * 10 + (ptr[i++] - '0');
		t->header_code = code;
	}
	return n;
}

static size_t
xfer_read_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	CtasCurl    *t = (CtasCurl *) arg;
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
xfer_xferinfo_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow,
			   curl_off_t ultotal, curl_off_t ulnow)
{
	CtasCurl    *t = (CtasCurl *) arg;

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
xfer_socket_cb(CURL *easy, curl_socket_t s, int what, void *arg, void *socketp)
{
	CtasCurl    *t = (CtasCurl *) arg;
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
		if (t->nsock == CTAS_CURL_MAX_SOCKETS)
			return -1;			/* cannot happen with one easy handle */
		t->nsock++;
	}
	t->sock[i] = s;
	t->sock_what[i] = what;
	return 0;
}

static int
xfer_timer_cb(CURLM *multi, long timeout_ms, void *arg)
{
	CtasCurl    *t = (CtasCurl *) arg;

	t->timer_ms = timeout_ms;
	return 0;
}


/* discard a response body */
static size_t
xfer_discard_cb(char *ptr, size_t size, size_t nmemb, void *arg)
{
	return size * nmemb;
}

/*
 * CtasCurlSend
 *		One blocking request with a body to an http(s) URL: status
 *		webhooks and the Pushgateway, sent by the worker.
 *
 * Hardened like every transfer (no signals, http/https only, no
 * redirects, TLS verified, no proxy from the environment), with a total
 * deadline of timeout_secs since a webhook body is small.  It blocks, which
 * only the worker may do.  Never raises an error: returns false with a
 * palloc'd message in *error for a transport failure or a status other than
 * 2xx.  The curl handle and header list are released before returning, on
 * every path.
 */
bool
CtasCurlSend(const char *url, const char *method, const char *content_type,
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

	rc = xfer_harden(easy);

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
	SETOPT(CURLOPT_WRITEFUNCTION, xfer_discard_cb);
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
