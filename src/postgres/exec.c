/*-------------------------------------------------------------------------
 *
 * exec.c
 *		  Running SQL and COPY on a libpq connection of a PostgreSQL
 *		  catalog: interruptible waits, results with deadlines, remote
 *		  errors rebuilt with their SQLSTATE, cancel, COPY with
 *		  back-pressure.
 *
 * Every wait is non-blocking: the socket is waited for with
 * WaitLatchOrSocket and interrupts are checked, so cancel and
 * statement_timeout take effect promptly (connection.c connects the same
 * way).  A statement interrupted while the remote is busy leaves the
 * connection "busy"; the abort path (xact.c) cancels the remote command
 * with a bounded wait (CtasPgCancel).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/postgres/exec.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "postgres_target.h"

/*
 * CtasPgWaitSocket
 *		Wait until conn's socket is ready for events, the latch is set, or
 *		deadline (0: none) passes.  With interruptible, interrupts are
 *		serviced (and may raise an ERROR).  Returns false on timeout.
 */
bool
CtasPgWaitSocket(PGconn *conn, int events, TimestampTz deadline, bool interruptible)
{
	for (;;)
	{
		long		timeout = -1;
		int			rc;
		int			flags = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | events;

		if (deadline != 0)
		{
			TimestampTz now = GetCurrentTimestamp();

			if (now >= deadline)
				return false;
			timeout = TimestampDifferenceMilliseconds(now, deadline);
			flags |= WL_TIMEOUT;
		}

		rc = WaitLatchOrSocket(MyLatch, flags, PQsocket(conn), timeout,
							   PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			if (interruptible)
				CHECK_FOR_INTERRUPTS();
		}
		if (rc & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
			return true;
		if (rc & WL_TIMEOUT)
			return false;
	}
}

/*
 * CtasPgGetResult
 *		The next result of the command in progress on conn, or NULL when
 *		there is none, waiting interruptibly (deadline 0) or until deadline
 *		with interrupts held (the commit and abort paths).  With a deadline,
 *		*timed_out tells whether it passed.  On a broken connection returns
 *		NULL and leaves the error in PQerrorMessage.
 */
PGresult *
CtasPgGetResult(PGconn *conn, TimestampTz deadline, bool *timed_out)
{
	if (timed_out)
		*timed_out = false;

	while (PQisBusy(conn))
	{
		/* flush anything still queued (non-blocking connection) */
		int			pending = PQflush(conn);

		if (pending < 0)
			return NULL;
		if (!CtasPgWaitSocket(conn, WL_SOCKET_READABLE |
						 (pending ? WL_SOCKET_WRITEABLE : 0),
						 deadline, deadline == 0))
		{
			if (timed_out)
				*timed_out = true;
			return NULL;
		}
		if (!PQconsumeInput(conn))
			return NULL;
	}
	return PQgetResult(conn);
}

/*
 * CtasPgReportError
 *		Rebuild a remote error (res, or conn's error when res is NULL) as a
 *		local one at elevel, with the remote SQLSTATE, message, detail,
 *		hint, and a context line naming the catalog and the remote command.
 *		Clears res.  Never prints connection parameters.
 */
void
CtasPgReportError(int elevel, PGresult *res, PGconn *conn,
				  CtasCatalog *catalog, const char *sql)
{
	char	   *diag_sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	char	   *message_primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	char	   *message_detail = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;
	char	   *message_hint = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_HINT) : NULL;
	char	   *message_context = res ? PQresultErrorField(res, PG_DIAG_CONTEXT) : NULL;
	int			sqlstate;
	char	   *primary;

	if (diag_sqlstate)
		sqlstate = MAKE_SQLSTATE(diag_sqlstate[0], diag_sqlstate[1],
								 diag_sqlstate[2], diag_sqlstate[3],
								 diag_sqlstate[4]);
	else
		sqlstate = ERRCODE_CONNECTION_FAILURE;

	/* copy out of res before clearing it */
	primary = message_primary ? pstrdup(message_primary) :
		pchomp(PQerrorMessage(conn));
	if (primary == NULL || primary[0] == '\0')
		primary = pstrdup("could not obtain message string for remote error");
	message_detail = message_detail ? pstrdup(message_detail) : NULL;
	message_hint = message_hint ? pstrdup(message_hint) : NULL;
	message_context = message_context ? pstrdup(message_context) : NULL;
	if (res)
		PQclear(res);

	{
		char	   *where = sql ?
		psprintf("remote SQL command on catalog \"%s\": %s",
				 catalog->name, sql) :
		psprintf("catalog \"%s\"", catalog->name);

		ereport(elevel,
				(errcode(sqlstate),
				 errmsg_internal("%s", primary),
				 message_detail ? errdetail_internal("%s", message_detail) : 0,
				 message_hint ? errhint("%s", message_hint) : 0,
				 message_context ? errcontext("%s", message_context) : 0,
				 errcontext("%s", where)));
	}
}

static bool
result_failed(const PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);

	return st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK;
}

/*
 * run_command
 *		Send sql and wait for all its results, interruptibly.  Returns the
 *		first failed result, else the last one, else NULL (connection
 *		lost); the others are cleared.  The caller clears what it gets.
 */
static PGresult *
run_command(PGconn *conn, CtasCatalog *catalog, const char *sql)
{
	PGresult   *res;
	PGresult   *kept = NULL;

	/*
	 * The extended protocol runs exactly one statement: whatever text ends
	 * up in a command, it cannot smuggle in a second one.
	 */
	if (!PQsendQueryParams(conn, sql, 0, NULL, NULL, NULL, NULL, 0))
		CtasPgReportError(ERROR, NULL, conn, catalog, sql);

	while ((res = CtasPgGetResult(conn, 0, NULL)) != NULL)
	{
		/* keep the first failure, else the latest result */
		if (kept != NULL && result_failed(kept))
			PQclear(res);
		else
		{
			if (kept)
				PQclear(kept);
			kept = res;
		}
	}
	return kept;
}

/*
 * CtasPgExec
 *		Run sql on conn and wait for it, interruptibly; ERROR if any of its
 *		results is an error.  Results are discarded.
 */
void
CtasPgExec(PGconn *conn, CtasCatalog *catalog, const char *sql)
{
	PGresult   *res = run_command(conn, catalog, sql);

	if (res == NULL || result_failed(res) || PQstatus(conn) == CONNECTION_BAD)
		CtasPgReportError(ERROR, res, conn, catalog, sql);
	PQclear(res);
}

/*
 * CtasPgRun
 *		Run sql on conn and wait for it, interruptibly, and return its
 *		result for the caller to inspect (the first failed one, else the
 *		last; NULL when the connection was lost).  The caller clears it, or
 *		hands it to CtasPgReportError.  ERROR only when the command cannot
 *		be sent.
 */
PGresult *
CtasPgRun(PGconn *conn, CtasCatalog *catalog, const char *sql)
{
	return run_command(conn, catalog, sql);
}

/*
 * CtasPgQuery
 *		Run one query returning rows and return its PGresult (caller
 *		PQclears it).  ERROR on any failure.
 */
PGresult *
CtasPgQuery(PGconn *conn, CtasCatalog *catalog, const char *sql)
{
	PGresult   *res = run_command(conn, catalog, sql);

	if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK)
		CtasPgReportError(ERROR, res, conn, catalog, sql);
	return res;
}

/*
 * CtasPgExecBounded
 *		Run sql and report failure instead of raising it: returns false (and
 *		a message in *errmsg_out, palloc'd) when the command failed or timed
 *		out.  With timeout_ms > 0, for the commit and abort paths, the wait
 *		has that deadline and ignores interrupts, and no error is ever
 *		raised; with 0 it waits interruptibly (a cancel still raises).
 */
bool
CtasPgExecBounded(PGconn *conn, const char *sql, int timeout_ms,
				  char **errmsg_out)
{
	TimestampTz deadline = timeout_ms <= 0 ? 0 :
	TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	PGresult   *res;
	bool		ok = true;
	bool		timed_out = false;

	*errmsg_out = NULL;
	if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
	{
		*errmsg_out = pstrdup("connection lost");
		return false;
	}
	if (!PQsendQueryParams(conn, sql, 0, NULL, NULL, NULL, NULL, 0))
	{
		*errmsg_out = pchomp(PQerrorMessage(conn));
		return false;
	}
	while ((res = CtasPgGetResult(conn, deadline, &timed_out)) != NULL)
	{
		ExecStatusType st = PQresultStatus(res);

		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && ok)
		{
			char	   *m = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

			*errmsg_out = pstrdup(m ? m : "unknown remote error");
			ok = false;
		}
		PQclear(res);
	}
	if (timed_out)
	{
		*errmsg_out = psprintf("no answer within %d ms", timeout_ms);
		return false;
	}
	if (ok && PQstatus(conn) != CONNECTION_OK)
	{
		*errmsg_out = pchomp(PQerrorMessage(conn));
		return false;
	}
	return ok;
}

/*
 * CtasPgCancel
 *		Stop whatever conn is doing, for the abort paths: end a COPY IN with
 *		an error, or send a cancel request, then drain the results until
 *		deadline.  Returns false when the connection is not usable
 *		afterwards.  Never raises an error.
 */
bool
CtasPgCancel(PGconn *conn, bool in_copy, int timeout_ms)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   timeout_ms);
	PGresult   *res;
	bool		timed_out = false;

	if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
		return false;

	if (in_copy)
	{
		if (PQputCopyEnd(conn, "canceled by ctas_fed") < 0)
			return false;
	}
	else if (PQtransactionStatus(conn) == PQTRANS_ACTIVE)
	{
		PGcancel   *cancel = PQgetCancel(conn);
		char		errbuf[256];

		/*
		 * PQcancel blocks while it opens a new connection to the remote;
		 * that is bounded by the OS connect timeout.
		 */
		if (cancel != NULL)
		{
			(void) PQcancel(cancel, errbuf, sizeof(errbuf));
			PQfreeCancel(cancel);
		}
	}

	/* flush what a non-blocking COPY end may have queued */
	while (PQflush(conn) == 1)
	{
		if (!CtasPgWaitSocket(conn, WL_SOCKET_WRITEABLE, deadline, false))
			return false;
	}

	while ((res = CtasPgGetResult(conn, deadline, &timed_out)) != NULL)
	{
		/* a COPY that the server still wants data for: end it */
		if (PQresultStatus(res) == PGRES_COPY_IN)
			(void) PQputCopyEnd(conn, "canceled by ctas_fed");
		PQclear(res);
	}
	return !timed_out && PQstatus(conn) == CONNECTION_OK;
}

/*
 * CtasPgPutCopyData
 *		Send len bytes of COPY data and wait (interruptibly) until libpq's
 *		output buffer has drained into the socket.  This is the
 *		back-pressure that keeps memory bounded when the remote is slower
 *		than the query: in non-blocking mode PQputCopyData() never refuses
 *		data, it enlarges its buffer, so the wait has to be here.  Callers
 *		hand over about 64 kB at a time, which keeps the socket busy.
 */
void
CtasPgPutCopyData(PGconn *conn, CtasCatalog *catalog, const char *data,
				  int len)
{
	if (PQputCopyData(conn, data, len) != 1)
		CtasPgReportError(ERROR, NULL, conn, catalog, "COPY");

	for (;;)
	{
		int			rc = PQflush(conn);

		if (rc < 0)
			CtasPgReportError(ERROR, NULL, conn, catalog, "COPY");
		if (rc == 0)
			break;
		(void) CtasPgWaitSocket(conn, WL_SOCKET_WRITEABLE | WL_SOCKET_READABLE,
						   0, true);

		/*
		 * Read what the remote sent meanwhile, so that a lost connection is
		 * noticed now.  (libpq reports a remote COPY error only at
		 * PQputCopyEnd.)
		 */
		if (PQconsumeInput(conn) == 0)
			CtasPgReportError(ERROR, NULL, conn, catalog, "COPY");
	}
}

/*
 * CtasPgEndCopy
 *		Finish a COPY IN and return the number of rows the remote reports.
 *		ERROR (with the remote's SQLSTATE) if the COPY failed.
 */
uint64
CtasPgEndCopy(PGconn *conn, CtasCatalog *catalog, const char *sql)
{
	PGresult   *res;
	PGresult   *error = NULL;
	uint64		rows = 0;
	int			rc;

	while ((rc = PQputCopyEnd(conn, NULL)) == 0)
		(void) CtasPgWaitSocket(conn, WL_SOCKET_WRITEABLE, 0, true);
	if (rc < 0)
		CtasPgReportError(ERROR, NULL, conn, catalog, sql);
	for (;;)
	{
		rc = PQflush(conn);
		if (rc < 0)
			CtasPgReportError(ERROR, NULL, conn, catalog, sql);
		if (rc == 0)
			break;
		(void) CtasPgWaitSocket(conn, WL_SOCKET_WRITEABLE | WL_SOCKET_READABLE,
						   0, true);
		if (!PQconsumeInput(conn))
			CtasPgReportError(ERROR, NULL, conn, catalog, sql);
	}

	while ((res = CtasPgGetResult(conn, 0, NULL)) != NULL)
	{
		if (PQresultStatus(res) != PGRES_COMMAND_OK && error == NULL)
			error = res;
		else
		{
			char	   *tuples = PQcmdTuples(res);

			if (tuples && tuples[0])
				rows = strtou64(tuples, NULL, 10);
			PQclear(res);
		}
	}
	if (error)
		CtasPgReportError(ERROR, error, conn, catalog, sql);
	if (PQstatus(conn) == CONNECTION_BAD)
		CtasPgReportError(ERROR, NULL, conn, catalog, sql);
	return rows;
}
