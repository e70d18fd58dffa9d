/*-------------------------------------------------------------------------
 *
 * connection.c
 *		  libpq connections to PostgreSQL catalogs: the cache, connecting
 *		  without blocking, remote notices, the password rules.  Commands,
 *		  results, remote errors and COPY on a connection are exec.c's.
 *
 * As in postgres_fdw, connections are cached per user mapping in
 * CacheMemoryContext for the life of the backend, and dropped when the
 * server or user mapping changes (syscache callbacks) or when a connection
 * is found broken at the start of a transaction - before it is used, or by
 * the first command of the remote transaction, which is then tried once
 * more on a new connection (CtasPgBrokenAtStart).  Unlike postgres_fdw 15,
 * every wait - the connection itself included - is non-blocking: the
 * socket is waited for with WaitLatchOrSocket and interrupts are checked,
 * so cancel and statement_timeout take effect promptly.  A statement
 * interrupted while the remote is busy leaves the connection "busy"; the
 * abort path (xact.c) cancels the remote command with a bounded wait
 * (CtasPgCancel, exec.c).
 *
 * Every connection is accounted for with AcquireExternalFD.
 *
 * Remote notices.  libpq's default notice processor writes a NOTICE or
 * WARNING of the remote server raw to the local server's stderr, so that
 * a catalog pointed at a hostile server could write anything into the log,
 * forged log lines included.  Every connection gets a notice receiver
 * instead, which re-emits the message at LOG with the catalog's name, its
 * control characters escaped (notice_receiver).  LOG, as dblink and
 * postgres_fdw of PostgreSQL 18 do (libpqsrv_notice_receiver): these lines
 * reached the log before, so they still do, and a remote server does not
 * get to talk to the local client.
 *
 * Password rules.  As in postgres_fdw 15 (check_conn_params and
 * connect_pg_server), a connection for a non-superuser needs a non-empty
 * password in its user mapping, and the remote must actually have used it
 * (PQconnectionUsedPassword), unless a superuser set password_required
 * 'false' on the mapping: otherwise the connection could authenticate with
 * the local server's own identity (trust, peer, ~/.pgpass).  postgres_fdw
 * exempts superusers.  Here the exemption also needs the server to be
 * owned by a superuser: the owner of a server chooses its host and options
 * and can create a user mapping for any role, superusers included, and the
 * resolver connects with every mapping of every catalog, with nobody
 * present to consent.  So a connection for a superuser on a server owned
 * by a non-superuser follows the rules of a non-superuser (password given
 * and used, unless password_required 'false', which only a superuser can
 * set).  The rule is the same for interactive sessions and background
 * work: nothing a worker does needs more than the session would.  Whether
 * it applies is decided in one place for every target
 * (CtasPasswordRequired, src/catalog.c); what "used" means is libpq's.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 * Portions Copyright (c) 2012-2022, PostgreSQL Global Development Group
 *
 * IDENTIFICATION
 *		  src/postgres/connection.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq-events.h"

#include "access/xact.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "postgres_target.h"
#include "hosts.h"

/* The cache: one entry per user mapping */
static HTAB *conn_cache = NULL;

static void conn_cache_init(void);
static void conn_inval_callback(Datum arg, int cacheid, uint32 hashvalue);
static PGconn *connect_catalog(CtasCatalog *catalog);
static void set_notice_receiver(PGconn *conn, const char *name);

/*
 * conn_cache_init
 *		Create the cache and register the invalidation callbacks once.
 */
static void
conn_cache_init(void)
{
	HASHCTL		ctl;

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(CtasConn);
	conn_cache = hash_create("ctas_fed connections", 8, &ctl,
							 HASH_ELEM | HASH_BLOBS);

	CacheRegisterSyscacheCallback(FOREIGNSERVEROID,
								  conn_inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(USERMAPPINGOID,
								  conn_inval_callback, (Datum) 0);
}

/*
 * conn_inval_callback
 *		A server or user mapping changed: mark the connections built from
 *		it, which are closed at their next use outside a transaction.
 */
static void
conn_inval_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	HASH_SEQ_STATUS scan;
	CtasConn   *entry;

	hash_seq_init(&scan, conn_cache);
	while ((entry = (CtasConn *) hash_seq_search(&scan)))
	{
		if (entry->conn == NULL)
			continue;
		if (hashvalue == 0 ||
			(cacheid == FOREIGNSERVEROID &&
			 entry->server_hashvalue == hashvalue) ||
			(cacheid == USERMAPPINGOID &&
			 entry->mapping_hashvalue == hashvalue))
			entry->invalidated = true;
	}
}

/*
 * CtasPgDisconnect
 *		Close entry's connection, if any.  Never raises an error.
 */
void
CtasPgDisconnect(CtasConn *entry)
{
	if (entry->conn != NULL)
	{
		PQfinish(entry->conn);
		entry->conn = NULL;
		ReleaseExternalFD();
	}
	entry->xact_depth = 0;
	entry->in_copy = false;
	entry->broken = false;
	entry->invalidated = false;
}

/*
 * CtasPgGetConnection
 *		The cached connection entry of catalog's user mapping, connected.
 *
 * Outside a remote transaction (xact_depth 0), a connection that is
 * broken, or whose server or user mapping changed, is replaced first.
 * ereport(ERROR) when the catalog cannot be reached or the password rules
 * for non-superusers are not met.
 */
CtasConn *
CtasPgGetConnection(CtasCatalog *catalog)
{
	CtasConn   *entry;
	bool		found;
	Oid			key = catalog->umid;

	if (conn_cache == NULL)
		conn_cache_init();

	entry = hash_search(conn_cache, &key, HASH_ENTER, &found);
	if (!found)
	{
		memset(((char *) entry) + sizeof(Oid), 0,
			   sizeof(CtasConn) - sizeof(Oid));
	}

	/*
	 * Outside a remote transaction the connection must be idle; one that
	 * an interrupt left with a command in flight (or in a transaction that
	 * nobody ended) is replaced, as postgres_fdw does.
	 */
	if (entry->conn != NULL && entry->xact_depth == 0 &&
		(entry->invalidated || entry->broken ||
		 PQstatus(entry->conn) != CONNECTION_OK ||
		 PQtransactionStatus(entry->conn) != PQTRANS_IDLE))
		CtasPgDisconnect(entry);

	if (entry->conn == NULL)
	{
		entry->server_hashvalue =
			GetSysCacheHashValue1(FOREIGNSERVEROID,
								  ObjectIdGetDatum(catalog->serverid));
		entry->mapping_hashvalue =
			GetSysCacheHashValue1(USERMAPPINGOID,
								  ObjectIdGetDatum(catalog->umid));
		entry->conn = connect_catalog(catalog);
		entry->remote_version = PQserverVersion(entry->conn);
		entry->max_prepared = -1;
	}
	return entry;
}

/*
 * CtasPgTryGetConnection
 *		CtasPgGetConnection for EXPLAIN, which works without the remote:
 *		NULL when the catalog cannot be reached (the connection could not
 *		be established: refused, timed out, authentication failed).  Any
 *		other error, a cancel included, is raised.
 */
CtasConn *
CtasPgTryGetConnection(CtasCatalog *catalog)
{
	MemoryContext cxt = CurrentMemoryContext;
	CtasConn   *volatile entry = NULL;

	PG_TRY();
	{
		entry = CtasPgGetConnection(catalog);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode !=
			ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION)
			PG_RE_THROW();
		/* connect_catalog released the connection and its descriptor */
		FlushErrorState();
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return entry;
}

/*
 * CtasPgBrokenAtStart
 *		Called in a PG_CATCH block around the first commands of a remote
 *		transaction on entry's connection (BEGIN, and what precedes it),
 *		with CurrentMemoryContext not ErrorContext: is the error being
 *		handled a connection that broke while it was idle in the cache?
 *
 * A connection that the remote closed between two local transactions (its
 * backend terminated, idle_session_timeout, a restart) is only found
 * broken by the next command sent on it.  As postgres_fdw does since
 * PostgreSQL 14 (GetConnection), such a failure is not the user's: when
 * the command failed with a connection error, libpq now says the
 * connection is bad, and no remote transaction was open on it
 * (xact_depth 0, so nothing was done on it in this local transaction),
 * the error is forgotten, the connection closed, and true returned: the
 * caller connects again (CtasPgGetConnection) and starts over, once.
 * Otherwise returns false and the caller re-throws.  The error code is
 * checked too, so that an error raised after libpq noticed the break (out
 * of memory, a cancel) is not mistaken for it.  Raises no error of its own
 * (out of memory aside).
 */
bool
CtasPgBrokenAtStart(CtasConn *entry, CtasCatalog *catalog)
{
	ErrorData  *edata;
	bool		broken;

	if (entry->conn == NULL || entry->xact_depth > 0 ||
		PQstatus(entry->conn) != CONNECTION_BAD)
		return false;

	edata = CopyErrorData();
	broken = edata->sqlerrcode == ERRCODE_CONNECTION_FAILURE ||
		edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
		edata->sqlerrcode == ERRCODE_CRASH_SHUTDOWN ||
		edata->sqlerrcode == ERRCODE_IDLE_SESSION_TIMEOUT;
	if (broken)
	{
		FlushErrorState();
		ereport(DEBUG1,
				(errmsg_internal("reconnecting to catalog \"%s\": its cached connection was closed by the remote",
								 catalog->name),
				 edata->message ? errdetail_internal("%s", edata->message) : 0));
		CtasPgDisconnect(entry);
	}
	FreeErrorData(edata);
	return broken;
}

/*
 * CtasPgConnectFresh
 *		A new connection that is not cached (streaming loads, the resolver).
 *		The caller closes it with CtasPgCloseFresh.
 */
PGconn *
CtasPgConnectFresh(CtasCatalog *catalog)
{
	return connect_catalog(catalog);
}

void
CtasPgCloseFresh(PGconn *conn)
{
	if (conn != NULL)
	{
		PQfinish(conn);
		ReleaseExternalFD();
	}
}

/*
 * escape_notice_text
 *		text with every control character but tab escaped (\n, \r, \xNN)
 *		and a final newline dropped, so that it stays one log line.
 *		Palloc'd.
 */
static char *
escape_notice_text(const char *text)
{
	StringInfoData buf;
	size_t		len = strlen(text);
	size_t		i;

	if (len > 0 && text[len - 1] == '\n')
		len--;
	initStringInfo(&buf);
	for (i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) text[i];

		if (c == '\n')
			appendStringInfoString(&buf, "\\n");
		else if (c == '\r')
			appendStringInfoString(&buf, "\\r");
		else if ((c < 0x20 && c != '\t') || c == 0x7f)
			appendStringInfo(&buf, "\\x%02x", c);
		else
			appendStringInfoChar(&buf, (char) c);
	}
	return buf.data;
}

/*
 * notice_receiver
 *		libpq notice receiver of every connection: a NOTICE, WARNING (or
 *		any other message that is not an error) of the remote server goes
 *		to the local log at LOG, prefixed with the catalog's name (arg) and
 *		the remote severity, its text escaped (escape_notice_text).  See
 *		"Remote notices" in the file header.  Never raises an ERROR (but
 *		out of memory).
 */
static void
notice_receiver(void *arg, const PGresult *res)
{
	const char *name = (const char *) arg;
	const char *severity = PQresultErrorField(res,
											  PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *message = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	char	   *safe_name = escape_notice_text(name);
	char	   *safe_severity = escape_notice_text(severity ? severity :
												   "NOTICE");
	char	   *safe_message;
	char	   *safe_detail = NULL;

	/* a message of libpq's own has no fields, only its text */
	safe_message = escape_notice_text(message ? message :
									  PQresultErrorMessage(res));
	if (detail != NULL)
		safe_detail = escape_notice_text(detail);

	ereport(LOG,
			(errmsg_internal("catalog \"%s\" sent %s: %s",
							 safe_name, safe_severity, safe_message),
			 safe_detail ? errdetail_internal("%s", safe_detail) : 0));

	pfree(safe_name);
	pfree(safe_severity);
	pfree(safe_message);
	if (safe_detail)
		pfree(safe_detail);
}

/*
 * notice_event_proc
 *		libpq event procedure that frees the catalog name of the notice
 *		receiver (passThrough, malloc'd) when the connection is finished.
 */
static int
notice_event_proc(PGEventId evtId, void *evtInfo, void *passThrough)
{
	if (evtId == PGEVT_CONNDESTROY)
		free(passThrough);
	return true;
}

/*
 * set_notice_receiver
 *		Install notice_receiver on conn, for catalog name.  The copy of the
 *		name lives (in malloc'd memory) as long as conn: an event procedure
 *		frees it in PQfinish.  ereport(ERROR) when out of memory; the
 *		caller still owns conn.
 */
static void
set_notice_receiver(PGconn *conn, const char *name)
{
	char	   *copy = strdup(name);

	if (copy == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (!PQregisterEventProc(conn, notice_event_proc, "ctas_fed notices",
							 copy))
	{
		free(copy);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}
	PQsetNoticeReceiver(conn, notice_receiver, copy);
}

static const char *const two_phase_choices[] = {"auto", "on", "off", NULL};
static const char *const sslmode_choices[] = {
	"disable", "allow", "prefer", "require", "verify-ca", "verify-full", NULL
};
static const char *const gssencmode_choices[] = {
	"disable", "prefer", "require", NULL
};
static const char *const session_attrs_choices[] = {
	"any", "read-write", "read-only", "primary", "standby",
	"prefer-standby", NULL
};

/*
 * type 'postgres': the libpq connection keywords that describe a server.
 * user and password are credentials and live on the user mapping (generic
 * options, catalog.c); client_encoding, replication and fallback_application_name
 * are set by ctas_fed itself.  The routine's server_options (writer.c);
 * here because connect_catalog asks it which options name hosts.
 */
const CtasOption CtasPgServerOptions[] = {
	{"host", ForeignServerRelationId, CTAS_OPT_STRING, 0, 0, NULL, false, CTAS_HOSTS_NAMES},
	{"hostaddr", ForeignServerRelationId, CTAS_OPT_STRING, 0, 0, NULL, false, CTAS_HOSTS_NAMES},
	{"port", ForeignServerRelationId, CTAS_OPT_INT, 1, 65535},
	{"dbname", ForeignServerRelationId, CTAS_OPT_STRING},
	{"options", ForeignServerRelationId, CTAS_OPT_STRING},
	{"application_name", ForeignServerRelationId, CTAS_OPT_STRING},
	{"connect_timeout", ForeignServerRelationId, CTAS_OPT_INT, 0, INT_MAX},
	{"keepalives", ForeignServerRelationId, CTAS_OPT_INT, 0, 1},
	{"keepalives_idle", ForeignServerRelationId, CTAS_OPT_INT, 0, INT_MAX},
	{"keepalives_interval", ForeignServerRelationId, CTAS_OPT_INT, 0, INT_MAX},
	{"keepalives_count", ForeignServerRelationId, CTAS_OPT_INT, 0, INT_MAX},
	{"tcp_user_timeout", ForeignServerRelationId, CTAS_OPT_INT, 0, INT_MAX},
	{"sslmode", ForeignServerRelationId, CTAS_OPT_ENUM, 0, 0, sslmode_choices},
	{"sslcompression", ForeignServerRelationId, CTAS_OPT_INT, 0, 1},
	{"sslcert", ForeignServerRelationId, CTAS_OPT_STRING},
	{"sslkey", ForeignServerRelationId, CTAS_OPT_STRING},
	{"sslrootcert", ForeignServerRelationId, CTAS_OPT_STRING},
	{"sslcrl", ForeignServerRelationId, CTAS_OPT_STRING},
	{"sslcrldir", ForeignServerRelationId, CTAS_OPT_STRING},
	{"sslsni", ForeignServerRelationId, CTAS_OPT_INT, 0, 1},
	{"ssl_min_protocol_version", ForeignServerRelationId, CTAS_OPT_STRING},
	{"ssl_max_protocol_version", ForeignServerRelationId, CTAS_OPT_STRING},
	{"gssencmode", ForeignServerRelationId, CTAS_OPT_ENUM, 0, 0, gssencmode_choices},
	{"krbsrvname", ForeignServerRelationId, CTAS_OPT_STRING},
	{"target_session_attrs", ForeignServerRelationId, CTAS_OPT_ENUM, 0, 0, session_attrs_choices},
	{"two_phase", ForeignServerRelationId, CTAS_OPT_ENUM, 0, 0, two_phase_choices},
	{NULL}
};

/*
 * connect_catalog
 *		Open a connection with the catalog's libpq keywords and the user
 *		mapping's credentials, without blocking: the connection is polled
 *		with interruptible waits until done or until connect_timeout (10
 *		seconds by default) passes.  Then pin the session settings that make
 *		the transfer exact.  Returns a connection in CONNECTION_OK state;
 *		ereport(ERROR) otherwise, never leaking the PGconn.
 */
static PGconn *
connect_catalog(CtasCatalog *catalog)
{
	const char **keywords;
	const char **values;
	int			n = 0;
	int			size;
	ListCell   *lc;
	PGconn	   *volatile conn = NULL;
	int			timeout_secs = 10;
	bool		have_password = false;
	bool		owner_rule;
	bool		pw_required = CtasPasswordRequired(catalog, &owner_rule);

	size = list_length(catalog->server_options) +
		list_length(catalog->user_options) + 4;
	keywords = palloc(size * sizeof(char *));
	values = palloc(size * sizeof(char *));

	foreach(lc, catalog->server_options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);

		if (strcmp(def->defname, "two_phase") == 0)
			continue;			/* ours, not libpq's */
		if (strcmp(def->defname, "connect_timeout") == 0)
			timeout_secs = atoi(defGetString(def));
		keywords[n] = def->defname;
		values[n] = defGetString(def);
		n++;
	}
	foreach(lc, catalog->user_options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);

		if (strcmp(def->defname, "password_required") == 0)
			continue;
		if (strcmp(def->defname, "password") == 0 &&
			defGetString(def)[0] != '\0')
			have_password = true;
		keywords[n] = def->defname;
		values[n] = defGetString(def);
		n++;
	}
	keywords[n] = "fallback_application_name";
	values[n] = "ctas_fed";
	n++;
	keywords[n] = "client_encoding";
	values[n] = GetDatabaseEncodingName();
	n++;
	keywords[n] = values[n] = NULL;

	/* a non-superuser must not borrow the server's own credentials */
	if (pw_required && !have_password)
	{
		if (owner_rule)
			ereport(ERROR,
					(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
					 errmsg("password is required"),
					 errdetail("Catalog \"%s\" is owned by a non-superuser, so its user mapping for superuser \"%s\" must provide a password.",
							   catalog->name,
							   GetUserNameFromId(catalog->userid, false)),
					 errhint("Add a password to the user mapping, or have a superuser own the server.")));
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("Non-superusers must provide a password in the user mapping of catalog \"%s\".",
						   catalog->name)));
	}

	/* ctas_fed.allowed_hosts, for a non-superuser's server */
	CtasCheckCatalogHosts(catalog, CtasPgServerOptions);

	if (!AcquireExternalFD())
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to catalog \"%s\"", catalog->name),
				 errdetail("There are too many open files on the local server."),
				 errhint("Raise the server's max_files_per_process and/or \"ulimit -n\" limits.")));

	PG_TRY();
	{
		PostgresPollingStatusType st = PGRES_POLLING_WRITING;
		TimestampTz deadline = 0;

		if (timeout_secs > 0)
			deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   timeout_secs * 1000);

		conn = PQconnectStartParams(keywords, values, false);
		if (conn == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		/* before any message of the remote can arrive */
		set_notice_receiver(conn, catalog->name);

		while (PQstatus(conn) != CONNECTION_BAD &&
			   st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED)
		{
			int			events = (st == PGRES_POLLING_READING) ?
			WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;

			if (!CtasPgWaitSocket(conn, events, deadline, true))
				ereport(ERROR,
						(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
						 errmsg("could not connect to catalog \"%s\"",
								catalog->name),
						 errdetail("Connection timed out after %d seconds.",
								   timeout_secs)));
			st = PQconnectPoll(conn);
		}

		if (PQstatus(conn) != CONNECTION_OK)
		{
			char	   *msg = pchomp(PQerrorMessage(conn));

			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to catalog \"%s\"",
							catalog->name),
					 errdetail_internal("%s", msg)));
		}

		/* the password must actually have been used (dblink, postgres_fdw) */
		if (pw_required && !PQconnectionUsedPassword(conn))
			ereport(ERROR,
					(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
					 errmsg("password is required"),
					 owner_rule ?
					 errdetail("Catalog \"%s\" is owned by a non-superuser, and the remote server did not request the password of the user mapping for superuser \"%s\".",
							   catalog->name,
							   GetUserNameFromId(catalog->userid, false)) :
					 errdetail("Non-superuser cannot connect if the server does not request a password."),
					 errhint("Target server's authentication method must be changed or set the password_required=false in the user mapping attributes.")));

		if (PQsetnonblocking(conn, 1) != 0)
			elog(ERROR, "could not make the connection to catalog \"%s\" non-blocking",
				 catalog->name);

		/*
		 * Pin what the row stream depends on, as postgres_fdw does:
		 * qualified names only, and unambiguous date, interval and float
		 * formats.
		 */
		CtasPgExec(conn, catalog,
				   "SELECT pg_catalog.set_config('search_path', 'pg_catalog', false), "
				   "pg_catalog.set_config('timezone', 'UTC', false), "
				   "pg_catalog.set_config('datestyle', 'ISO', false), "
				   "pg_catalog.set_config('intervalstyle', 'postgres', false), "
				   "pg_catalog.set_config('extra_float_digits', '3', false)");
	}
	PG_CATCH();
	{
		if (conn != NULL)
			PQfinish(conn);
		ReleaseExternalFD();
		PG_RE_THROW();
	}
	PG_END_TRY();

	pfree(keywords);
	pfree(values);
	return conn;
}
