/*-------------------------------------------------------------------------
 *
 * conn.c
 *		  Connections to MariaDB / MySQL catalogs through libmariadb.
 *
 * Every call that talks to the server goes through the non-blocking API
 * (mysql_*_start / _cont) and waits in WaitLatchOrSocket, so that a cancel,
 * statement_timeout or pg_terminate_backend ends the wait at once.  A wait
 * that an interrupt ends leaves the protocol in the middle of a statement:
 * the connection is then shut down (the server sees the end of a LOAD DATA
 * stream and stops), marked broken and never used again.
 *
 * Local files.  A MySQL server may answer any statement with a request for
 * a local file of its choosing.  The handler installed here serves one
 * thing only: the in-memory stream of the LOAD DATA statement that
 * CtasMyLoadStart sent, under a random name that this statement chose,
 * until CtasMyLoadFinish; every other request (another name, or a request
 * at any other time) is refused and nothing is read.  Outside a load the
 * client's local-infile capability is switched off as well.  No client
 * file is ever opened.
 *
 * Sessions run with a strict sql_mode (no silent truncation, no zero
 * dates), time_zone '+00:00' and the utf8mb4 character set.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/mysql/conn.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <poll.h>
#include <sys/socket.h>

/* libmariadb's ma_list.h declares functions of the names of pg_list.h's */
#define list_length ma_list_length
#define list_delete ma_list_delete
#define list_free ma_list_free
#include <mysql.h>
#include <errmsg.h>
#include <mysqld_error.h>
#undef list_length
#undef list_delete
#undef list_free

#include "catalog/pg_foreign_server.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "hosts.h"
#include "mysql_target.h"

/* how long commit and abort paths wait for the server, in ms */
#define MY_CLEANUP_TIMEOUT_MS	30000
#define MY_DEFAULT_CONNECT_TIMEOUT	10

#define MY_SQL_MODE "STRICT_ALL_TABLES,NO_ZERO_DATE,NO_ZERO_IN_DATE," \
	"ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO"

struct MyConn
{
	MYSQL	   *my;
	char	   *catalog;		/* name, for messages */
	bool		broken;			/* interrupted or lost: never used again */
	bool		busy;			/* a statement was sent and not finished */
	int			q_ret;			/* result of the running statement */
	int			q_status;		/* what it waits for (MYSQL_WAIT_*), 0: done */
	unsigned long thread_id;	/* the server's id of the session */
	bool		fd_reserved;
	/* the stream the local-infile handler may serve */
	bool		armed;
	char		stream_name[64];
	const char *data;
	size_t		len;
	size_t		pos;
	bool		refused;		/* a request was refused */
};

static void my_raise(MyConn *conn, const char *what) pg_attribute_noreturn();

/* ------------------------------------------------------------------------
 * The local-infile handler
 * ------------------------------------------------------------------------
 */

/*
 * Called by libmariadb when the server asks for a local file: serve it only
 * if it is the stream armed now, under the name we gave.  These run inside
 * the library's coroutine: no palloc, no ereport.
 */
static int
my_infile_init(void **ptr, const char *filename, void *userdata)
{
	MyConn	   *conn = (MyConn *) userdata;

	*ptr = conn;
	if (!conn->armed || filename == NULL ||
		strcmp(filename, conn->stream_name) != 0)
	{
		conn->refused = true;
		return 1;
	}
	conn->pos = 0;
	return 0;
}

static int
my_infile_read(void *ptr, char *buf, unsigned int buf_len)
{
	MyConn	   *conn = (MyConn *) ptr;
	size_t		n;

	if (conn->refused || !conn->armed)
		return -1;
	n = conn->len - conn->pos;
	if (n > buf_len)
		n = buf_len;
	memcpy(buf, conn->data + conn->pos, n);
	conn->pos += n;
	return (int) n;
}

static void
my_infile_end(void *ptr)
{
}

static int
my_infile_error(void *ptr, char *msg, unsigned int msg_len)
{
	snprintf(msg, msg_len, "ctas_fed serves no local file but its own row stream");
	return CR_UNKNOWN_ERROR;
}

/* switch the client's LOCAL INFILE capability on or off */
static void
my_local_infile(MyConn *conn, bool on)
{
	unsigned int v = on ? 1 : 0;

	mysql_optionsv(conn->my, MYSQL_OPT_LOCAL_INFILE, &v);
}

/* ------------------------------------------------------------------------
 * Waiting
 * ------------------------------------------------------------------------
 */

/*
 * my_mark_broken
 *		The protocol stopped in the middle: shut the socket down (the server
 *		sees the end of the stream at once) and never use it again.
 */
static void
my_mark_broken(MyConn *conn)
{
	if (conn->my && !conn->broken)
	{
		my_socket	s = mysql_get_socket(conn->my);

		if (s >= 0)
			(void) shutdown(s, SHUT_RDWR);
	}
	conn->broken = true;
	conn->armed = false;
}

/*
 * my_wait
 *		Wait for what status (MYSQL_WAIT_*) asks, or the latch, or the
 *		deadline (0: none).  Returns the status to hand to the _cont call,
 *		or -1 when the deadline passed.  Interrupts: unless cleanup, an
 *		interrupt that raises an ERROR breaks the connection first.  In
 *		cleanup mode interrupts are not serviced here.
 */
static int
my_wait(MyConn *conn, int status, TimestampTz deadline, bool cleanup)
{
	for (;;)
	{
		int			events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH;
		long		timeout = -1;
		int			rc;
		int			ready = 0;
		my_socket	s = mysql_get_socket(conn->my);

		if (status & MYSQL_WAIT_READ)
			events |= WL_SOCKET_READABLE;
		if (status & MYSQL_WAIT_WRITE)
			events |= WL_SOCKET_WRITEABLE;
		if (status & MYSQL_WAIT_TIMEOUT)
			timeout = mysql_get_timeout_value_ms(conn->my);
		if (deadline != 0)
		{
			long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
															   deadline);

			if (left <= 0)
				return -1;
			if (timeout < 0 || left < timeout)
				timeout = left;
		}
		if (timeout >= 0)
			events |= WL_TIMEOUT;

		rc = WaitLatchOrSocket(MyLatch, events, s, timeout, PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			if (!cleanup)
			{
				PG_TRY();
				{
					CHECK_FOR_INTERRUPTS();
				}
				PG_CATCH();
				{
					my_mark_broken(conn);
					PG_RE_THROW();
				}
				PG_END_TRY();
			}
		}
		if (rc & WL_SOCKET_READABLE)
			ready |= MYSQL_WAIT_READ;
		if (rc & WL_SOCKET_WRITEABLE)
			ready |= MYSQL_WAIT_WRITE;
		if ((rc & WL_TIMEOUT) && (status & MYSQL_WAIT_TIMEOUT))
			ready |= MYSQL_WAIT_TIMEOUT;
		if (ready)
			return ready;
	}
}

/* ------------------------------------------------------------------------
 * Connecting
 * ------------------------------------------------------------------------
 */

static void
my_close_cb(void *arg)
{
	CtasMyClose((MyConn *) arg);
}

static const char *const my_ssl_modes[] = {"disable", "require", "verify-full", NULL};

/*
 * type 'mysql': libmariadb over TCP.  The routine's server_options
 * (writer.c); here because CtasMyConnect asks it which options name hosts.
 */
const CtasOption CtasMyServerOptions[] = {
	{"host", ForeignServerRelationId, CTAS_OPT_STRING, 0, 0, NULL, false, CTAS_HOSTS_NAMES},
	{"port", ForeignServerRelationId, CTAS_OPT_INT, 1, 65535},
	{"database", ForeignServerRelationId, CTAS_OPT_STRING},
	{"connect_timeout", ForeignServerRelationId, CTAS_OPT_INT, 1, 3600},
	{"ssl_mode", ForeignServerRelationId, CTAS_OPT_ENUM, 0, 0, my_ssl_modes},
	{"ssl_ca", ForeignServerRelationId, CTAS_OPT_STRING},
	{NULL}
};

/*
 * CtasMyConnect
 *		A session on the MySQL catalog, allocated in cxt and closed when cxt
 *		is reset or deleted.  ereport(ERROR) on any failure unless cleanup,
 *		which returns NULL after a WARNING instead (commit, abort and
 *		resolve paths: short deadline, no interrupts).
 */
MyConn *
CtasMyConnect(const CtasCatalog *catalog, MemoryContext cxt, bool cleanup)
{
	MemoryContext old;
	MyConn	   *conn;
	MemoryContextCallback *cb;
	const char *host = CtasCatalogOption(catalog, "host");
	const char *v;
	const char *user = CtasCatalogOption(catalog, "user");
	const char *password = CtasCatalogOption(catalog, "password");
	const char *ssl_mode = CtasCatalogOption(catalog, "ssl_mode");
	const char *ssl_ca = CtasCatalogOption(catalog, "ssl_ca");
	unsigned int port = 3306;
	unsigned int connect_timeout = MY_DEFAULT_CONNECT_TIMEOUT;
	unsigned int one = 1;
	MYSQL	   *ret = NULL;
	int			status;
	TimestampTz deadline;

	/*
	 * The rules of a non-superuser's catalog, checked on every use; on a
	 * cleanup path a refusal is a WARNING (what is left stays for the
	 * resolver, which applies the same rules).
	 */
	if (cleanup)
	{
		MemoryContext ecxt = CurrentMemoryContext;
		bool		refused = false;

		PG_TRY();
		{
			CtasCheckCatalogHosts(catalog, CtasMyServerOptions);
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(ecxt);
			edata = CopyErrorData();
			FlushErrorState();
			ereport(WARNING,
					(errcode(edata->sqlerrcode),
					 errmsg_internal("%s", edata->message)));
			FreeErrorData(edata);
			refused = true;
		}
		PG_END_TRY();
		if (refused)
			return NULL;
	}
	else
		CtasCheckCatalogHosts(catalog, CtasMyServerOptions);
	if ((password == NULL || password[0] == '\0') &&
		CtasPasswordRequired(catalog, NULL))
		ereport(cleanup ? WARNING : ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("Non-superusers must provide a password in the user mapping of MySQL catalog \"%s\".",
						   catalog->name),
				 errhint("Set the password option of the user mapping, or have a superuser set password_required 'false' on it.")));
	if (host == NULL)
		ereport(cleanup ? WARNING : ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("MySQL catalog \"%s\" has no host", catalog->name)));
	if (host == NULL ||
		((password == NULL || password[0] == '\0') &&
		 CtasPasswordRequired(catalog, NULL)))
		return NULL;			/* cleanup: refused above with a WARNING */
	if ((v = CtasCatalogOption(catalog, "port")) != NULL)
		port = (unsigned int) atoi(v);
	if ((v = CtasCatalogOption(catalog, "connect_timeout")) != NULL)
		connect_timeout = (unsigned int) atoi(v);

	old = MemoryContextSwitchTo(cxt);
	conn = palloc0(sizeof(MyConn));
	conn->catalog = pstrdup(catalog->name);
	if (!AcquireExternalFD())
	{
		MemoryContextSwitchTo(old);
		ereport(cleanup ? WARNING : ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to MySQL catalog \"%s\"", catalog->name),
				 errdetail("There are too many open files on the local server.")));
		return NULL;
	}
	conn->fd_reserved = true;
	conn->my = mysql_init(NULL);
	if (conn->my == NULL)
	{
		ReleaseExternalFD();
		conn->fd_reserved = false;
		MemoryContextSwitchTo(old);
		ereport(cleanup ? WARNING : ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
		return NULL;
	}
	cb = palloc(sizeof(MemoryContextCallback));
	cb->func = my_close_cb;
	cb->arg = conn;
	MemoryContextRegisterResetCallback(cxt, cb);
	MemoryContextSwitchTo(old);

	mysql_options(conn->my, MYSQL_OPT_NONBLOCK, 0);
	mysql_options(conn->my, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout);
	mysql_options(conn->my, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	mysql_options(conn->my, MYSQL_OPT_LOCAL_INFILE, &one);
	mysql_set_local_infile_handler(conn->my, my_infile_init, my_infile_read,
								   my_infile_end, my_infile_error, conn);
	if (ssl_mode != NULL && strcmp(ssl_mode, "disable") != 0)
	{
		my_bool		on = 1;

		mysql_optionsv(conn->my, MYSQL_OPT_SSL_ENFORCE, &on);
		if (strcmp(ssl_mode, "verify-full") == 0)
			mysql_optionsv(conn->my, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on);
		if (ssl_ca)
			mysql_optionsv(conn->my, MYSQL_OPT_SSL_CA, ssl_ca);
	}

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   cleanup ? Min(MY_CLEANUP_TIMEOUT_MS, connect_timeout * 1000) :
										   connect_timeout * 1000);
	status = mysql_real_connect_start(&ret, conn->my, host, user, password,
									  NULL, port, NULL, CLIENT_LOCAL_FILES);
	while (status)
	{
		status = my_wait(conn, status, deadline, cleanup);
		if (status < 0)
		{
			my_mark_broken(conn);
			ereport(cleanup ? WARNING : ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to MySQL catalog \"%s\"", catalog->name),
					 errdetail("The connection timed out after %u s.", connect_timeout)));
			return NULL;
		}
		status = mysql_real_connect_cont(&ret, conn->my, status);
	}
	if (ret == NULL)
	{
		char	   *detail = pstrdup(mysql_error(conn->my));

		conn->broken = true;
		ereport(cleanup ? WARNING : ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to MySQL catalog \"%s\"", catalog->name),
				 errdetail_internal("%s", detail)));
		return NULL;
	}
	my_local_infile(conn, false);
	conn->thread_id = mysql_thread_id(conn->my);

	if (!CtasMyTryQuery(conn,
						"SET SESSION sql_mode = '" MY_SQL_MODE "', time_zone = '+00:00', "
						"autocommit = 1, sql_quote_show_create = 1",
						"set up the session", cleanup ? MY_Q_CLEANUP : 0,
						NULL, NULL, NULL))
	{
		if (!cleanup)
			my_raise(conn, "set up the session");
		return NULL;
	}
	return conn;
}

/*
 * CtasMyClose
 *		Close the session (also the reset callback of its context).  A
 *		broken session is shut down without a goodbye.  Never an ERROR.
 */
void
CtasMyClose(MyConn *conn)
{
	if (conn == NULL || conn->my == NULL)
		return;
	if (!CtasMyBroken(conn))
	{
		int			status = mysql_close_start(conn->my);
		TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 2000);

		while (status)
		{
			status = my_wait(conn, status, deadline, true);
			if (status < 0)
			{
				my_mark_broken(conn);
				mysql_close(conn->my);
				break;
			}
			status = mysql_close_cont(conn->my, status);
		}
	}
	else
	{
		my_mark_broken(conn);
		mysql_close(conn->my);
	}
	conn->my = NULL;
	if (conn->fd_reserved)
		ReleaseExternalFD();
	conn->fd_reserved = false;
}

const char *
CtasMyCatalogName(MyConn *conn)
{
	return conn->catalog;
}

/*
 * CtasMyKill
 *		When victim broke in the middle of a statement (an interrupt, a
 *		deadline), the server may still run it, or wait for the rest of a
 *		LOAD DATA stream, holding its locks: end that session through via.
 *		Never an ERROR.
 */
void
CtasMyKill(MyConn *victim, MyConn *via)
{
	if (victim == NULL || via == NULL || victim == via || !victim->busy ||
		victim->thread_id == 0 || CtasMyBroken(via))
		return;
	(void) CtasMyTryQuery(via, psprintf("KILL CONNECTION %lu", victim->thread_id),
						  "end a broken session", MY_Q_CLEANUP, NULL, NULL, NULL);
	my_mark_broken(victim);
	victim->busy = false;
}

/*
 * CtasMyBroken
 *		Is the session unusable?  Also when a statement of it never finished:
 *		a FATAL (pg_terminate_backend) leaves my_wait without the PG_CATCH
 *		that marks the session broken, and the abort path must not talk on
 *		it.
 */
bool
CtasMyBroken(MyConn *conn)
{
	return conn == NULL || conn->broken || conn->busy || conn->my == NULL;
}

/* ------------------------------------------------------------------------
 * Statements
 * ------------------------------------------------------------------------
 */

/* the SQLSTATE of a MySQL error number, for the errors we tell apart */
static int
my_sqlstate(unsigned int e)
{
	switch (e)
	{
		case ER_TABLE_EXISTS_ERROR:
			return ERRCODE_DUPLICATE_TABLE;
		case ER_BAD_DB_ERROR:
			return ERRCODE_INVALID_SCHEMA_NAME;
		case ER_NO_SUCH_TABLE:
		case ER_BAD_TABLE_ERROR:
			return ERRCODE_UNDEFINED_TABLE;
		case ER_BAD_FIELD_ERROR:
			return ERRCODE_UNDEFINED_COLUMN;
		case ER_ACCESS_DENIED_ERROR:
		case ER_DBACCESS_DENIED_ERROR:
		case ER_TABLEACCESS_DENIED_ERROR:
			return ERRCODE_INSUFFICIENT_PRIVILEGE;
		case ER_DUP_ENTRY:
			return ERRCODE_UNIQUE_VIOLATION;
		case ER_DATA_TOO_LONG:
		case ER_WARN_DATA_OUT_OF_RANGE:
		case ER_TRUNCATED_WRONG_VALUE:
		case ER_TRUNCATED_WRONG_VALUE_FOR_FIELD:
			return ERRCODE_DATA_EXCEPTION;
		case CR_SERVER_LOST:
		case CR_SERVER_GONE_ERROR:
		case CR_CONNECTION_ERROR:
			return ERRCODE_CONNECTION_FAILURE;
		default:
			return ERRCODE_FDW_ERROR;
	}
}

static void
my_raise(MyConn *conn, const char *what)
{
	unsigned int e = conn->my ? mysql_errno(conn->my) : CR_SERVER_LOST;
	const char *msg = conn->my ? mysql_error(conn->my) : "connection closed";

	if (conn->refused)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("MySQL catalog \"%s\" asked for a local file, which ctas_fed refused",
						conn->catalog),
				 errdetail("ctas_fed serves no local file but the row stream of its own LOAD DATA statement."),
				 errcontext("%s on MySQL catalog \"%s\"", what, conn->catalog)));
	ereport(ERROR,
			(errcode(my_sqlstate(e)),
			 errmsg("could not %s on MySQL catalog \"%s\"", what, conn->catalog),
			 errdetail_internal("%s (MySQL error %u)", msg, e)));
}

/* send sql; the answer is read by my_query_poll and my_query_finish */
static void
my_query_start(MyConn *conn, const char *sql)
{
	conn->refused = false;
	conn->busy = true;
	conn->q_ret = 0;
	conn->q_status = mysql_real_query_start(&conn->q_ret, conn->my, sql,
											strlen(sql));
}

/*
 * my_query_poll
 *		Let the running statement make the progress the socket allows now,
 *		without waiting.  Never an ERROR.
 */
static void
my_query_poll(MyConn *conn)
{
	struct pollfd p;

	if (!conn->busy || conn->broken || conn->q_status == 0 ||
		!(conn->q_status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE)))
		return;
	p.fd = mysql_get_socket(conn->my);
	p.events = ((conn->q_status & MYSQL_WAIT_READ) ? POLLIN : 0) |
		((conn->q_status & MYSQL_WAIT_WRITE) ? POLLOUT : 0);
	p.revents = 0;
	while (poll(&p, 1, 0) > 0 && p.revents != 0)
	{
		int			ready = 0;

		if (p.revents & (POLLIN | POLLERR | POLLHUP))
			ready |= MYSQL_WAIT_READ;
		if (p.revents & (POLLOUT | POLLERR | POLLHUP))
			ready |= MYSQL_WAIT_WRITE;
		conn->q_status = mysql_real_query_cont(&conn->q_ret, conn->my,
											   ready & conn->q_status ? ready & conn->q_status : ready);
		if (conn->q_status == 0 ||
			!(conn->q_status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE)))
			return;
		p.events = ((conn->q_status & MYSQL_WAIT_READ) ? POLLIN : 0) |
			((conn->q_status & MYSQL_WAIT_WRITE) ? POLLOUT : 0);
		p.revents = 0;
	}
}

/*
 * my_query_finish
 *		Wait until the running statement has its answer (conn->q_ret).
 *		false when the deadline passed (the session is then broken).
 */
static bool
my_query_finish(MyConn *conn, TimestampTz deadline, bool cleanup)
{
	while (conn->q_status)
	{
		int			status = my_wait(conn, conn->q_status, deadline, cleanup);

		if (status < 0)
		{
			my_mark_broken(conn);
			return false;
		}
		conn->q_status = mysql_real_query_cont(&conn->q_ret, conn->my, status);
	}
	conn->busy = false;
	return true;
}

/*
 * my_run
 *		Send sql and read its answer (a result set into *res when res is
 *		not NULL).  false on an error of the server or the connection,
 *		which the caller reports from mysql_errno; with a deadline passed
 *		(cleanup), false with the connection broken.
 */
static bool
my_run(MyConn *conn, const char *sql, bool cleanup, MYSQL_RES **res)
{
	int			ret = 0;
	int			status;
	TimestampTz deadline = 0;
	MYSQL_RES  *r = NULL;

	if (res)
		*res = NULL;
	if (CtasMyBroken(conn))
		return false;
	if (cleanup)
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   MY_CLEANUP_TIMEOUT_MS);
	my_query_start(conn, sql);
	if (!my_query_finish(conn, deadline, cleanup))
		return false;
	ret = conn->q_ret;
	if (conn->refused)
	{
		/* a server that asks for a file it was not offered is not trusted */
		my_mark_broken(conn);
		return false;
	}
	if (ret != 0)
	{
		unsigned int e = mysql_errno(conn->my);

		if (e == CR_SERVER_LOST || e == CR_SERVER_GONE_ERROR ||
			e == CR_CONNECTION_ERROR || (e >= 2000 && e < 3000))
			conn->broken = true;
		return false;
	}
	if (mysql_field_count(conn->my) == 0)
		return true;
	status = mysql_store_result_start(&r, conn->my);
	while (status)
	{
		status = my_wait(conn, status, deadline, cleanup);
		if (status < 0)
		{
			my_mark_broken(conn);
			return false;
		}
		status = mysql_store_result_cont(&r, conn->my, status);
	}
	if (r == NULL)
	{
		conn->broken = true;
		return false;
	}
	if (res)
		*res = r;
	else
		mysql_free_result(r);
	return true;
}

/* the rows of a result, as a List of palloc'd char ** (NULL: SQL NULL) */
static List *
my_rows(MYSQL_RES *r, int *nfields)
{
	List	   *rows = NIL;
	MYSQL_ROW	row;
	int			nf = (int) mysql_num_fields(r);

	if (nfields)
		*nfields = nf;
	while ((row = mysql_fetch_row(r)) != NULL)
	{
		unsigned long *lens = mysql_fetch_lengths(r);
		char	  **f = palloc(sizeof(char *) * Max(nf, 1));
		int			i;

		for (i = 0; i < nf; i++)
			f[i] = row[i] ? pnstrdup(row[i], lens[i]) : NULL;
		rows = lappend(rows, f);
	}
	mysql_free_result(r);
	return rows;
}

/*
 * CtasMyExec
 *		Run a statement; ERROR (naming what) when it fails.
 */
void
CtasMyExec(MyConn *conn, const char *sql, const char *what)
{
	if (!my_run(conn, sql, false, NULL))
		my_raise(conn, what);
}

/*
 * CtasMyQuery
 *		Run a query and return its rows (List of char **, palloc'd), the
 *		number of fields in *nfields.  ERROR when it fails.
 */
List *
CtasMyQuery(MyConn *conn, const char *sql, const char *what, int *nfields)
{
	MYSQL_RES  *r;

	if (nfields)
		*nfields = 0;
	if (!my_run(conn, sql, false, &r))
		my_raise(conn, what);
	return r ? my_rows(r, nfields) : NIL;
}

/*
 * CtasMyTryQuery
 *		Run sql without raising an ERROR: false on failure, with the
 *		server's message in *detail and its error number in *errnum (when
 *		not NULL).  With MY_Q_CLEANUP the wait has a deadline and is not
 *		ended by interrupts.
 */
bool
CtasMyTryQuery(MyConn *conn, const char *sql, const char *what, int flags,
			   List **rows, char **detail, unsigned int *errnum)
{
	MYSQL_RES  *r = NULL;
	bool		ok;

	if (detail)
		*detail = NULL;
	if (errnum)
		*errnum = 0;
	if (rows)
		*rows = NIL;
	ok = my_run(conn, sql, (flags & MY_Q_CLEANUP) != 0, rows ? &r : NULL);
	if (!ok)
	{
		if (detail)
			*detail = conn->my ? psprintf("%s (MySQL error %u)",
										  mysql_error(conn->my),
										  mysql_errno(conn->my)) :
				pstrdup("connection closed");
		if (errnum && conn->my)
			*errnum = mysql_errno(conn->my);
		if (errnum && conn->broken && *errnum == 0)
			*errnum = CR_SERVER_LOST;
		return false;
	}
	if (rows && r)
		*rows = my_rows(r, NULL);
	return true;
}

/*
 * CtasMyLoadStart
 *		Send LOAD DATA LOCAL INFILE '<name>' followed by sql (INTO TABLE
 *		...), to be served data[0..len-1] from memory under <name>, a
 *		random name chosen here.  data must stay as it is until
 *		CtasMyLoadFinish.  The server reads it while the caller goes on
 *		(CtasMyLoadPoll moves it along).  ERROR when it cannot be sent.
 */
void
CtasMyLoadStart(MyConn *conn, const char *sql, const char *data, size_t len)
{
	uint32		r[2];
	char	   *stmt;

	if (CtasMyBroken(conn))
		my_raise(conn, "load the rows");
	if (!pg_strong_random(r, sizeof(r)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random stream name")));
	snprintf(conn->stream_name, sizeof(conn->stream_name),
			 "ctas_fed_stream_%08x%08x", r[0], r[1]);
	stmt = psprintf("LOAD DATA LOCAL INFILE '%s' %s", conn->stream_name, sql);
	conn->data = data;
	conn->len = len;
	conn->pos = 0;
	conn->armed = true;
	my_local_infile(conn, true);
	my_query_start(conn, stmt);
	pfree(stmt);
}

/* Let a load started by CtasMyLoadStart progress, without waiting */
void
CtasMyLoadPoll(MyConn *conn)
{
	if (conn->armed)
		my_query_poll(conn);
}

/*
 * CtasMyLoadFinish
 *		Wait for the end of the load CtasMyLoadStart began.  Returns the rows
 *		the server took and the warnings it counted.  ERROR when it failed,
 *		or when the server asked for any other file.
 */
uint64
CtasMyLoadFinish(MyConn *conn, unsigned int *warnings)
{
	bool		ok;

	PG_TRY();
	{
		ok = my_query_finish(conn, 0, false);
	}
	PG_FINALLY();
	{
		conn->armed = false;
		conn->data = NULL;
		if (conn->my)
			my_local_infile(conn, false);
	}
	PG_END_TRY();
	if (conn->refused)
	{
		/* the server asked for something else: never trust it again */
		my_mark_broken(conn);
		my_raise(conn, "load the rows");
	}
	if (!ok || conn->q_ret != 0)
	{
		unsigned int e = conn->my ? mysql_errno(conn->my) : 0;

		if (e >= 2000 && e < 3000)
			conn->broken = true;
		my_raise(conn, "load the rows");
	}
	if (conn->pos != conn->len)
	{
		my_mark_broken(conn);
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("MySQL catalog \"%s\" read %zu of %zu bytes of a row stream",
						conn->catalog, conn->pos, conn->len)));
	}
	*warnings = mysql_warning_count(conn->my);
	return (uint64) mysql_affected_rows(conn->my);
}

/*
 * CtasMyFirstWarning
 *		The first warning of the last statement, as "Level Code Message",
 *		or NULL.  Palloc'd; ERROR if the server cannot be asked.
 */
char *
CtasMyFirstWarning(MyConn *conn)
{
	List	   *rows;
	int			nf;
	char	  **f;

	rows = CtasMyQuery(conn, "SHOW WARNINGS LIMIT 1", "read the warnings", &nf);
	if (rows == NIL || nf < 3)
		return NULL;
	f = linitial(rows);
	return psprintf("%s %s: %s", f[0] ? f[0] : "", f[1] ? f[1] : "",
					f[2] ? f[2] : "");
}

/* ------------------------------------------------------------------------
 * Quoting
 * ------------------------------------------------------------------------
 */

/* `name`, with backquotes doubled.  Palloc'd. */
char *
CtasMyQuoteIdent(const char *s)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '`');
	for (; *s; s++)
	{
		if (*s == '`')
			appendStringInfoChar(&buf, '`');
		appendStringInfoChar(&buf, *s);
	}
	appendStringInfoChar(&buf, '`');
	return buf.data;
}

char *
CtasMyQname(const char *db, const char *table)
{
	return psprintf("%s.%s", CtasMyQuoteIdent(db), CtasMyQuoteIdent(table));
}

/*
 * A string literal that means s whatever the sql_mode (backslashes and
 * quotes escaped; NO_BACKSLASH_ESCAPES is never set by us, and a session
 * that had it would read \\ as two characters: our sessions do not).
 */
char *
CtasMyLiteral(const char *s)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '\'');
	for (; *s; s++)
	{
		if (*s == '\'' || *s == '\\')
			appendStringInfoChar(&buf, '\\');
		appendStringInfoChar(&buf, *s);
	}
	appendStringInfoChar(&buf, '\'');
	return buf.data;
}

/* db.table for messages */
char *
CtasMyDisplay(const char *db, const char *table)
{
	return psprintf("%s.%s", db, table);
}
