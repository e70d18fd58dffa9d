/*-------------------------------------------------------------------------
 *
 * answer.c
 *		  What the ClickHouse client (client.c) reads of an answer: the
 *		  exception in its headers or body, the SQLSTATE of ClickHouse's
 *		  error code, remote text made safe for a message, and the errors
 *		  raised for a failed request.
 *
 * Only ClickHouse's own answers are read: one without an X-ClickHouse-*
 * header and without a ClickHouse exception is "not a ClickHouse server",
 * and nothing of its body reaches an error, a result or a log (a
 * non-superuser's catalog can name any HTTP endpoint).  A body can end
 * with "Code: N, ..." even after a 200 status (18.16 streams the status
 * line before the result).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/answer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "clickhouse.h"
#include "http/curl.h"

static bool ch_find_exception(const char *body, size_t len, bool at_end_only,
							  int *code, const char **msg, size_t *msglen);
static int	ch_code_sqlstate(int code);

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
 * CtasChSanitize
 *		A printable copy of remote text, at most cap bytes (then "..."):
 *		line breaks and tabs become spaces, other control characters and
 *		bytes that are not valid in the server encoding become '?'.
 *		Remote messages can quote our binary rows; they must not corrupt
 *		the log or the client's encoding.  Palloc'd.
 */
char *
CtasChSanitize(const char *s, size_t len, size_t cap)
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
 * CtasChCheckResponse
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
bool
CtasChCheckResponse(CtasChHttp *http, CtasCurl *t, CtasCurlResult rr,
				  ChFailure *f, bool *missing)
{
	long		status = 0;
	int			code;
	const char *msg;
	size_t		msglen;

	if (missing)
		*missing = false;
	f->not_clickhouse = 0;

	if (rr == CTAS_CURL_TIMEOUT)
	{
		f->sqlstate = ERRCODE_CONNECTION_FAILURE;
		f->detail = psprintf("The server did not answer for %d seconds (catalog option \"timeout\").",
							 http->timeout_s);
		return false;
	}
	if (rr == CTAS_CURL_INTERRUPTED)
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
								 CTAS_CURL_MAX_RESPONSE);
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
							 CtasChSanitize(errtext, strlen(errtext),
										 CH_MAX_REMOTE_TEXT));
		return false;
	}

	(void) curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);

	if (!t->marked && !ch_is_exception_body(t->resp, t->resp_len))
	{
		f->sqlstate = ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION;
		f->not_clickhouse = status > 0 ? status : -1;
		f->detail = psprintf("\"%s\" is not a ClickHouse server (HTTP status %ld).",
							 http->base_url, status);
		return false;
	}

	if (ch_find_exception(t->resp, t->resp_len, status == 200,
						  &code, &msg, &msglen) ||
		(t->header_code >= 0 &&
		 ch_find_exception(t->resp, t->resp_len, false, &code, &msg, &msglen)))
	{
		f->sqlstate = ch_code_sqlstate(code);
		f->detail = psprintf("HTTP status %ld, ClickHouse error %d: %s",
							 status, code,
							 CtasChSanitize(msg, msglen, CH_MAX_REMOTE_TEXT));
		if (missing && (code == 60 || code == 81))
			*missing = true;
		return false;
	}
	if (t->header_code >= 0)
	{
		f->sqlstate = ch_code_sqlstate(t->header_code);
		f->detail = psprintf("HTTP status %ld, ClickHouse error %d: %s",
							 status, t->header_code,
							 CtasChSanitize(t->resp ? t->resp : "", t->resp_len,
										 CH_MAX_REMOTE_TEXT));
		return false;
	}
	if (status != 200)
	{
		f->sqlstate = ERRCODE_FDW_ERROR;
		f->detail = psprintf("HTTP status %ld: %s", status,
							 CtasChSanitize(t->resp ? t->resp : "", t->resp_len,
										 CH_MAX_REMOTE_TEXT));
		return false;
	}
	return true;
}

/*
 * CtasChRaise
 *		ereport(ERROR) a failed request.  The message names the operation
 *		and the catalog, the detail the server's answer, the context the
 *		SQL (capped).
 */
void
CtasChRaise(CtasChHttp *http, const char *what, const char *sql, ChFailure *f)
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
							  CtasChSanitize(sql, strlen(sql), CH_MAX_SQL_TEXT)) : 0));
	pg_unreachable();
}

/*
 * CtasChAfterInterrupt
 *		The transfer was abandoned for a pending cancel or termination and
 *		the remote query stopped: let PostgreSQL raise its own error.  Only
 *		if that does not happen (the interrupt was absorbed), report the
 *		abandoned request.
 */
void
CtasChAfterInterrupt(CtasChHttp *http, const char *what, const char *sql)
{
	ChFailure	f;

	CHECK_FOR_INTERRUPTS();
	f.sqlstate = ERRCODE_CONNECTION_FAILURE;
	f.detail = pstrdup("The request was interrupted.");
	f.not_clickhouse = 0;
	CtasChRaise(http, what, sql, &f);
}
