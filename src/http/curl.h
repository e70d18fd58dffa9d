/*-------------------------------------------------------------------------
 *
 * curl.h
 *		  The generic libcurl engine (curl.c): one hardened HTTP transfer
 *		  driven inside a backend, with interruptible waits and timeouts.
 *
 * A CtasCurl is one transfer (a multi handle driving one easy handle) for
 * the peer a CtasCurlConfig describes: its name for messages, timeouts,
 * extra header lines, and which response headers mark an answer of the
 * expected server.  It knows nothing of what it talks to; the protocol of
 * a target (src/<target>/client.c) and the worker's webhooks build on
 * it.  The fields below the "read by the caller" line are the outcome of
 * the last request.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/http/curl.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_CURL_H
#define CTAS_CURL_H

#include <curl/curl.h>

#include "lib/stringinfo.h"

#define CTAS_CURL_MAX_SOCKETS	4
#define CTAS_CURL_MAX_RESPONSE	((size_t) 256 * 1024 * 1024)

/* Why CtasCurlRun returned */
typedef enum CtasCurlResult
{
	CTAS_CURL_DONE,				/* transfer finished (see result) */
	CTAS_CURL_DRAINED,			/* upload buffer consumed, stream paused */
	CTAS_CURL_INTERRUPTED,		/* cancel or die pending */
	CTAS_CURL_TIMEOUT			/* inactivity limit or deadline reached */
} CtasCurlResult;

/* What a transfer is for; copied by CtasCurlCreate */
typedef struct CtasCurlConfig
{
	const char *peer;			/* for messages, e.g. catalog "x" */
	long		connect_timeout_ms;
	long		timeout_ms;		/* inactivity limit */
	const char *const *headers; /* extra header lines, NULL-terminated */
	bool		stream;			/* chunked upload from a buffer */
	long		upload_buffer_size; /* stream: libcurl's upload buffer */
	bool		must_succeed;	/* commit/abort path: reserve the FD anyway */
	const char *mark_prefix;	/* a header so named marks the answer */
	const char *code_header;	/* "Name:" of a numeric error-code header */
} CtasCurlConfig;

/*
 * One curl transfer, with the state the callbacks share with us.
 * Palloc'd, and released by a reset callback of the context it lives in
 * (CtasCurlRelease).
 */
typedef struct CtasCurl
{
	CURLM	   *multi;
	CURL	   *easy;
	struct curl_slist *headers;
	bool		fd_reserved;	/* one external FD counted for us */
	bool		attached;		/* easy is added to multi */
	char	   *peer;
	long		timeout_ms;
	char	   *mark_prefix;
	char	   *code_header;

	/* sockets curl wants us to watch (socket callback) */
	int			nsock;
	curl_socket_t sock[CTAS_CURL_MAX_SOCKETS];
	int			sock_what[CTAS_CURL_MAX_SOCKETS];
	long		timer_ms;		/* timer callback; -1: no timer */

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
	bool		allow_interrupt;	/* set by the caller; false on cleanup */

	/* read by the caller: the response, malloc'd (callbacks never palloc) */
	char	   *resp;
	size_t		resp_len;
	size_t		resp_cap;
	bool		resp_overflow;
	int			header_code;	/* value of code_header, or -1 */
	bool		marked;			/* a mark_prefix header was seen */

	/* read by the caller: outcome */
	bool		done;
	CURLcode	result;
	char		errbuf[CURL_ERROR_SIZE];
} CtasCurl;

/* in curl.c */
extern void CtasCurlInit(void);
extern CtasCurl *CtasCurlCreate(const CtasCurlConfig *config,
								MemoryContext cxt);
extern void CtasCurlRelease(void *arg);
extern void CtasCurlStart(CtasCurl *t, const char *url, const char *body,
						  StringInfo up, bool once);
extern void CtasCurlStartData(CtasCurl *t, const char *url,
							  const char *data, size_t len);
extern CtasCurlResult CtasCurlRun(CtasCurl *t, bool drain, long deadline_ms);
extern void CtasCurlResume(CtasCurl *t);
extern void CtasCurlDetach(CtasCurl *t);
extern bool CtasCurlSentRequest(CtasCurl *t);
extern bool CtasCurlSend(const char *url, const char *method,
						 const char *content_type, const char *body,
						 int timeout_secs, char **error);

#endif							/* CTAS_CURL_H */
