/*-------------------------------------------------------------------------
 *
 * sync.c
 *		  Continuous sync into a PostgreSQL catalog: the CtasSyncApply of
 *		  the PostgreSQL target.
 *
 * Protocol (one connection per sync worker, of its own, not cached):
 *
 *	open		connect; CREATE TABLE IF NOT EXISTS
 *				"<schema>"._ctas_fed_sync_progress (job, lsn); read the
 *				remote table's column types and whether it has its
 *				primary key yet
 *	applied_lsn	the lsn stored for the job, 0 if none
 *	begin		queue BEGIN
 *	upsert		queue INSERT ... ON CONFLICT (key) DO UPDATE; with an
 *				unchanged mask (TOAST values the change did not carry),
 *				UPDATE ... SET only the columns carried WHERE key = ...
 *	delete		queue DELETE ... WHERE key = ...
 *	truncate	queue DELETE (MVCC-safe for readers, unlike TRUNCATE)
 *	copy_row	(the initial copy, after truncate) send the queue, open a
 *				COPY ... FROM STDIN, binary when every remote column has
 *				the local column's built-in type (as the CTAS writer does),
 *				else text; add the row to it
 *	commit		end the COPY if one is open; queue ALTER TABLE ... ADD
 *				PRIMARY KEY if the table has none yet, the upsert of the
 *				job's progress row and COMMIT, send the queue in one
 *				pipeline (one round trip), check every result
 *
 * The statement creates the remote table without its primary key
 * (writer.c); the initial copy fills it and adds the key in the remote
 * transaction that stores the consistent point, so that the index is built
 * once rather than row by row, and a copy interrupted at any point leaves a
 * table without rows or key, as it found it.  Streaming needs the key
 * (ON CONFLICT), and only begins after that transaction committed.
 *
 * The queue is sent whenever it holds PIPELINE_STATEMENTS statements, so
 * that a long batch never piles up in memory; the remote transaction stays
 * open across these flushes and only COMMIT ends it.  Any error raises; the
 * worker then closes the connection, which rolls back the remote
 * transaction, and retries from the lsn stored remotely: rows and progress
 * commit together, so a restart applies each source transaction exactly
 * once.
 *
 * Values are literals (quote_literal_cstr) of the local type's text output,
 * which the remote column (of the same type, or text: typemap.c) accepts;
 * identifiers go through quote_identifier.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/postgres/sync.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/catalog.h"
#include "catalog/pg_type.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"

#include "postgres_target.h"

/* statements queued before they are sent */
#define PIPELINE_STATEMENTS	1000
/* bytes of COPY data collected before they are handed to libpq */
#define COPY_CHUNK			(64 * 1024)

#define PROGRESS_TABLE	"_ctas_fed_sync_progress"
/* first key of the remote advisory lock that guards its creation */
#define PROGRESS_LOCK	0x43544153

typedef struct PgSyncState
{
	PGconn	   *conn;
	char	   *qualified;		/* "schema"."table" */
	char	   *progress;		/* "schema"._ctas_fed_sync_progress */
	char	   *upsert_tail;	/* ON CONFLICT ... */
	char	   *insert_head;	/* INSERT INTO ... VALUES ( */
	List	   *queue;			/* SQL strings not sent yet */
	MemoryContext cxt;			/* the queue; reset after each send */
	FmgrInfo   *out;			/* output function of each column */
	FmgrInfo   *key_out;		/* and of each key column */
	char	   *copy_sql;		/* COPY ... FROM STDIN of the initial copy */
	bool		binary;			/* copy_sql is in binary format */
	FmgrInfo   *send;			/* send function of each column, if binary */
	bool		has_key;		/* the remote table has its primary key */
	bool		in_copy;		/* that COPY is open */
	uint64		copy_rows;
	StringInfoData copy_buf;	/* COPY data not handed to libpq yet */
} PgSyncState;

static void pg_sync_open(CtasSyncTarget *t);
static void read_remote_table(CtasSyncTarget *t);
static uint64 pg_sync_applied_lsn(CtasSyncTarget *t);
static void pg_sync_begin(CtasSyncTarget *t);
static void pg_sync_upsert(CtasSyncTarget *t, Datum *values, bool *nulls,
						   const bool *unchanged);
static void pg_sync_delete(CtasSyncTarget *t, Datum *keys);
static void pg_sync_copy_row(CtasSyncTarget *t, Datum *values, bool *nulls);
static void pg_sync_truncate(CtasSyncTarget *t);
static void pg_sync_commit(CtasSyncTarget *t, uint64 lsn);
static void pg_sync_close(CtasSyncTarget *t);

const CtasSyncApply CtasPgSyncApply = {
	.open = pg_sync_open,
	.applied_lsn = pg_sync_applied_lsn,
	.begin = pg_sync_begin,
	.upsert = pg_sync_upsert,
	.keeps_unchanged = true,
	.transactional = true,
	.copy_row = pg_sync_copy_row,
	.delete = pg_sync_delete,
	.truncate = pg_sync_truncate,
	.commit = pg_sync_commit,
	.close = pg_sync_close,
};

/* the literal of a value in its type's text form, NULL for SQL NULL */
static const char *
literal(FmgrInfo *out, Datum value, bool isnull)
{
	return isnull ? "NULL" :
		quote_literal_cstr(OutputFunctionCall(out, value));
}

/* output functions of types, in the current memory context */
static FmgrInfo *
output_functions(int n, Oid *types)
{
	FmgrInfo   *out = palloc0(sizeof(FmgrInfo) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
	{
		Oid			func;
		bool		isvarlena;

		getTypeOutputInfo(types[i], &func, &isvarlena);
		fmgr_info(func, &out[i]);
	}
	return out;
}

/*
 * pg_sync_open
 *		Connect and make sure the progress table exists.  The state lives
 *		in the current memory context.
 */
static void
pg_sync_open(CtasSyncTarget *t)
{
	PgSyncState *st = palloc0(sizeof(PgSyncState));
	StringInfoData buf;
	PGresult   *res;
	int			i;

	st->qualified = psprintf("%s.%s", quote_identifier(t->schema),
							 quote_identifier(t->table));
	st->progress = psprintf("%s.%s", quote_identifier(t->schema),
							PROGRESS_TABLE);

	initStringInfo(&buf);
	appendStringInfo(&buf, "INSERT INTO %s (", st->qualified);
	for (i = 0; i < t->ncolumns; i++)
		appendStringInfo(&buf, "%s%s", i ? ", " : "",
						 quote_identifier(t->columns[i]));
	appendStringInfoString(&buf, ") VALUES (");
	st->insert_head = buf.data;

	initStringInfo(&buf);
	appendStringInfo(&buf, "COPY %s (", st->qualified);
	for (i = 0; i < t->ncolumns; i++)
		appendStringInfo(&buf, "%s%s", i ? ", " : "",
						 quote_identifier(t->columns[i]));
	appendStringInfoString(&buf, ") FROM STDIN");
	st->copy_sql = buf.data;
	initStringInfo(&st->copy_buf);

	initStringInfo(&buf);
	appendStringInfoString(&buf, ") ON CONFLICT (");
	for (i = 0; i < t->nkeys; i++)
		appendStringInfo(&buf, "%s%s", i ? ", " : "",
						 quote_identifier(t->keys[i]));
	appendStringInfoString(&buf, ") DO ");
	if (t->ncolumns == t->nkeys)
		appendStringInfoString(&buf, "NOTHING");
	else
	{
		bool		first = true;

		appendStringInfoString(&buf, "UPDATE SET ");
		for (i = 0; i < t->ncolumns; i++)
		{
			int			k;
			bool		is_key = false;

			for (k = 0; k < t->nkeys; k++)
				is_key |= strcmp(t->keys[k], t->columns[i]) == 0;
			if (is_key)
				continue;
			appendStringInfo(&buf, "%s%s = EXCLUDED.%s", first ? "" : ", ",
							 quote_identifier(t->columns[i]),
							 quote_identifier(t->columns[i]));
			first = false;
		}
	}
	st->upsert_tail = buf.data;
	st->cxt = AllocSetContextCreate(CurrentMemoryContext,
									"ctas_fed sync queue",
									ALLOCSET_DEFAULT_SIZES);
	st->out = output_functions(t->ncolumns, t->types);
	st->key_out = output_functions(t->nkeys, t->key_types);
	t->private = st;

	st->conn = CtasPgConnectFresh(t->catalog);
	/* no NOTICE from IF NOT EXISTS in the server log */
	CtasPgExec(st->conn, t->catalog, "SET client_min_messages = warning");
	/* two workers may create it at once: serialize them */
	CtasPgExec(st->conn, t->catalog, "BEGIN");
	CtasPgExec(st->conn, t->catalog,
			   psprintf("SELECT pg_catalog.pg_advisory_xact_lock(%d, pg_catalog.hashtext(%s))",
						PROGRESS_LOCK, quote_literal_cstr(st->progress)));
	CtasPgExec(st->conn, t->catalog,
			   psprintf("CREATE TABLE IF NOT EXISTS %s "
						"(job text PRIMARY KEY, lsn pg_catalog.pg_lsn NOT NULL)",
						st->progress));

	/*
	 * The table holds the position of every sync into the schema: one that
	 * another remote role owns (made first, or on purpose) could make this
	 * sync skip changes, so it is not used.
	 */
	res = CtasPgQuery(st->conn, t->catalog,
					  psprintf("SELECT pg_catalog.pg_get_userbyid(c.relowner) "
							   "FROM pg_catalog.pg_class c "
							   "WHERE c.oid = %s::pg_catalog.regclass "
							   "AND c.relowner OPERATOR(pg_catalog.<>) "
							   "(SELECT r.oid FROM pg_catalog.pg_roles r "
							   "WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)",
							   quote_literal_cstr(st->progress)));
	if (PQntuples(res) > 0)
	{
		char	   *owner = pstrdup(PQgetvalue(res, 0, 0));

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("sync progress table %s on catalog \"%s\" is owned by role \"%s\", not by the catalog's user",
						st->progress, t->catalog->name, owner),
				 errdetail("The table holds the applied position of every sync into its schema; its owner could make this sync skip changes."),
				 errhint("Sync into a schema of its own for each remote user, or make the remote user of this catalog the table's owner.")));
	}
	PQclear(res);
	CtasPgExec(st->conn, t->catalog, "COMMIT");

	read_remote_table(t);
	if (st->binary)
	{
		st->copy_sql = psprintf("%s (FORMAT binary)", st->copy_sql);
		st->send = palloc0(sizeof(FmgrInfo) * Max(t->ncolumns, 1));
		for (i = 0; i < t->ncolumns; i++)
		{
			Oid			func;
			bool		isvarlena;

			getTypeBinaryOutputInfo(t->types[i], &func, &isvarlena);
			fmgr_info(func, &st->send[i]);
		}
	}
}

/*
 * read_remote_table
 *		Whether the remote table has a primary key (st->has_key), and
 *		whether every column has the built-in type of the local column, so
 *		that the binary form of the local type is the remote's
 *		(st->binary).  A column_types option, or a type that is not
 *		built-in, makes the remote type text: the copy is then in text.
 *		Can ERROR.
 */
static void
read_remote_table(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;
	PGresult   *res;
	int			i;

	res = CtasPgQuery(st->conn, t->catalog,
					  psprintf("SELECT a.attname, a.atttypid::pg_catalog.int8, "
							   "EXISTS (SELECT FROM pg_catalog.pg_index i "
							   "WHERE i.indrelid = a.attrelid AND i.indisprimary) "
							   "FROM pg_catalog.pg_attribute a "
							   "WHERE a.attrelid = %s::pg_catalog.regclass "
							   "AND a.attnum > 0 AND NOT a.attisdropped",
							   quote_literal_cstr(st->qualified)));
	st->has_key = PQntuples(res) > 0 &&
		strcmp(PQgetvalue(res, 0, 2), "t") == 0;
	st->binary = true;
	for (i = 0; i < t->ncolumns && st->binary; i++)
	{
		Oid			local = getBaseType(t->types[i]);
		Oid			remote = InvalidOid;
		int			r;

		for (r = 0; r < PQntuples(res); r++)
		{
			if (strcmp(PQgetvalue(res, r, 0), t->columns[i]) == 0)
				remote = (Oid) strtoul(PQgetvalue(res, r, 1), NULL, 10);
		}
		/* money (refused by pg_map_column anyway): lc_monetary's units */
		if (local >= FirstGenbkiObjectId || local == CASHOID ||
			remote != local)
			st->binary = false;
	}
	PQclear(res);
}

/*
 * pg_sync_applied_lsn
 *		The end of the last source transaction the remote has committed for
 *		this job, 0 when none.
 */
static uint64
pg_sync_applied_lsn(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;
	PGresult   *res;
	uint64		lsn = 0;

	res = CtasPgQuery(st->conn, t->catalog,
					  psprintf("SELECT lsn FROM %s WHERE job = %s",
							   st->progress, quote_literal_cstr(t->job_key)));
	if (PQntuples(res) == 1)
	{
		bool		have_error = false;

		lsn = pg_lsn_in_internal(PQgetvalue(res, 0, 0), &have_error);
		if (have_error)
			lsn = 0;
	}
	PQclear(res);
	return lsn;
}

/* queue sql (allocated in st->cxt) */
static void
enqueue(CtasSyncTarget *t, char *sql)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt = MemoryContextSwitchTo(st->cxt);

	st->queue = lappend(st->queue, sql);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * send_queue
 *		Send every queued statement in one pipeline and read every result;
 *		ERROR with the first remote error.
 */
static void
send_queue(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;
	PGresult   *failed = NULL;
	const char *failed_sql = NULL;
	ListCell   *lc;
	ListCell   *cur;
	bool		synced = false;

	if (st->queue == NIL)
		return;
	if (!PQenterPipelineMode(st->conn))
		CtasPgReportError(ERROR, NULL, st->conn, t->catalog, NULL);
	foreach(lc, st->queue)
	{
		if (!PQsendQueryParams(st->conn, lfirst(lc), 0, NULL, NULL, NULL,
							   NULL, 0))
			CtasPgReportError(ERROR, NULL, st->conn, t->catalog, lfirst(lc));
	}
	if (!PQpipelineSync(st->conn))
		CtasPgReportError(ERROR, NULL, st->conn, t->catalog, NULL);

	cur = list_head(st->queue);
	while (!synced)
	{
		PGresult   *res = CtasPgGetResult(st->conn, 0, NULL);

		if (res == NULL)
		{
			if (PQstatus(st->conn) == CONNECTION_BAD)
				CtasPgReportError(ERROR, NULL, st->conn, t->catalog, NULL);
			/* the end of one statement's results */
			if (cur != NULL)
				cur = lnext(st->queue, cur);
			continue;
		}
		switch (PQresultStatus(res))
		{
			case PGRES_PIPELINE_SYNC:
				synced = true;
				PQclear(res);
				break;
			case PGRES_COMMAND_OK:
			case PGRES_TUPLES_OK:
			case PGRES_PIPELINE_ABORTED:
				PQclear(res);
				break;
			default:
				if (failed == NULL)
				{
					failed = res;
					failed_sql = cur ? pstrdup(lfirst(cur)) : NULL;
				}
				else
					PQclear(res);
				break;
		}
	}
	if (!PQexitPipelineMode(st->conn))
		CtasPgReportError(ERROR, NULL, st->conn, t->catalog, NULL);
	st->queue = NIL;
	MemoryContextReset(st->cxt);
	if (failed != NULL)
		CtasPgReportError(ERROR, failed, st->conn, t->catalog, failed_sql);
}

/* queue sql, and send the queue when it is long */
static void
enqueue_and_maybe_send(CtasSyncTarget *t, char *sql)
{
	PgSyncState *st = (PgSyncState *) t->private;

	enqueue(t, sql);
	if (list_length(st->queue) >= PIPELINE_STATEMENTS)
		send_queue(t);
}

static void
pg_sync_begin(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt = MemoryContextSwitchTo(st->cxt);

	enqueue(t, pstrdup("BEGIN"));
	MemoryContextSwitchTo(oldcxt);
}

/* whether output column i is a key column */
static bool
is_key_column(CtasSyncTarget *t, int i)
{
	int			k;

	for (k = 0; k < t->nkeys; k++)
	{
		if (strcmp(t->keys[k], t->columns[i]) == 0)
			return true;
	}
	return false;
}

/*
 * pg_sync_upsert
 *		INSERT ... ON CONFLICT (key) DO UPDATE of the row; with an
 *		unchanged mask, an UPDATE by key of the columns the change carries.
 */
static void
pg_sync_upsert(CtasSyncTarget *t, Datum *values, bool *nulls,
			   const bool *unchanged)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt;
	StringInfoData sql;
	int			i;

	oldcxt = MemoryContextSwitchTo(st->cxt);
	initStringInfo(&sql);
	if (unchanged != NULL)
	{
		/*
		 * A row that exists remotely (sync/toast.c) whose unchanged TOAST
		 * values the remote keeps: only the columns the change carries.
		 */
		bool		first = true;
		bool		any;

		appendStringInfo(&sql, "UPDATE %s SET ", st->qualified);
		for (i = 0; i < t->ncolumns; i++)
		{
			if (unchanged[i] || is_key_column(t, i))
				continue;
			appendStringInfo(&sql, "%s%s = %s", first ? "" : ", ",
							 quote_identifier(t->columns[i]),
							 literal(&st->out[i], values[i], nulls[i]));
			first = false;
		}
		any = !first;
		appendStringInfoString(&sql, " WHERE ");
		first = true;
		for (i = 0; i < t->ncolumns; i++)
		{
			if (!is_key_column(t, i))
				continue;
			appendStringInfo(&sql, "%s%s = %s", first ? "" : " AND ",
							 quote_identifier(t->columns[i]),
							 literal(&st->out[i], values[i], nulls[i]));
			first = false;
		}
		MemoryContextSwitchTo(oldcxt);
		/* nothing but unchanged values and the key: nothing to write */
		if (any)
			enqueue_and_maybe_send(t, sql.data);
		return;
	}

	appendStringInfoString(&sql, st->insert_head);
	for (i = 0; i < t->ncolumns; i++)
		appendStringInfo(&sql, "%s%s", i ? ", " : "",
						 literal(&st->out[i], values[i], nulls[i]));
	appendStringInfoString(&sql, st->upsert_tail);
	MemoryContextSwitchTo(oldcxt);
	enqueue_and_maybe_send(t, sql.data);
}

static void
pg_sync_delete(CtasSyncTarget *t, Datum *keys)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt = MemoryContextSwitchTo(st->cxt);
	StringInfoData sql;
	int			i;

	initStringInfo(&sql);
	appendStringInfo(&sql, "DELETE FROM %s WHERE ", st->qualified);
	for (i = 0; i < t->nkeys; i++)
		appendStringInfo(&sql, "%s%s = %s", i ? " AND " : "",
						 quote_identifier(t->keys[i]),
						 literal(&st->key_out[i], keys[i], false));
	MemoryContextSwitchTo(oldcxt);
	enqueue_and_maybe_send(t, sql.data);
}

static void
pg_sync_truncate(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt = MemoryContextSwitchTo(st->cxt);
	char	   *sql = psprintf("DELETE FROM %s", st->qualified);

	MemoryContextSwitchTo(oldcxt);
	enqueue_and_maybe_send(t, sql);
}

/*
 * pg_sync_copy_row
 *		A row of the initial copy: into a COPY FROM STDIN (binary or text
 *		format, see read_remote_table), opened at the first row after what
 *		is queued (BEGIN, the DELETE of truncate) has been sent.
 */
static void
pg_sync_copy_row(CtasSyncTarget *t, Datum *values, bool *nulls)
{
	PgSyncState *st = (PgSyncState *) t->private;
	int			i;

	if (!st->in_copy)
	{
		PGresult   *res;

		send_queue(t);
		if (!PQsendQuery(st->conn, st->copy_sql))
			CtasPgReportError(ERROR, NULL, st->conn, t->catalog, st->copy_sql);
		res = CtasPgGetResult(st->conn, 0, NULL);
		if (res == NULL || PQresultStatus(res) != PGRES_COPY_IN)
			CtasPgReportError(ERROR, res, st->conn, t->catalog, st->copy_sql);
		PQclear(res);
		st->in_copy = true;
		st->copy_rows = 0;
		resetStringInfo(&st->copy_buf);
		if (st->binary)
		{
			/* signature, flags, header extension length */
			appendBinaryStringInfo(&st->copy_buf, "PGCOPY\n\377\r\n\0", 11);
			pq_sendint32(&st->copy_buf, 0);
			pq_sendint32(&st->copy_buf, 0);
		}
	}
	if (st->binary)
	{
		pq_sendint16(&st->copy_buf, t->ncolumns);
		for (i = 0; i < t->ncolumns; i++)
		{
			bytea	   *b;

			if (nulls[i])
			{
				pq_sendint32(&st->copy_buf, -1);
				continue;
			}
			b = SendFunctionCall(&st->send[i], values[i]);
			pq_sendint32(&st->copy_buf, VARSIZE(b) - VARHDRSZ);
			appendBinaryStringInfo(&st->copy_buf, VARDATA(b),
								   VARSIZE(b) - VARHDRSZ);
		}
	}
	else
	{
		for (i = 0; i < t->ncolumns; i++)
		{
			if (i > 0)
				appendStringInfoChar(&st->copy_buf, '\t');
			if (nulls[i])
				appendStringInfoString(&st->copy_buf, "\\N");
			else
				CtasAppendCopyText(&st->copy_buf,
								   OutputFunctionCall(&st->out[i], values[i]));
		}
		appendStringInfoChar(&st->copy_buf, '\n');
	}
	st->copy_rows++;
	if (st->copy_buf.len >= COPY_CHUNK)
	{
		CtasPgPutCopyData(st->conn, t->catalog, st->copy_buf.data,
						  st->copy_buf.len);
		resetStringInfo(&st->copy_buf);
	}
}

/* end the COPY of the initial copy, checking what arrived */
static void
end_copy(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;
	uint64		rows;

	if (st->binary)
		pq_sendint16(&st->copy_buf, -1);
	if (st->copy_buf.len > 0)
		CtasPgPutCopyData(st->conn, t->catalog, st->copy_buf.data,
						  st->copy_buf.len);
	resetStringInfo(&st->copy_buf);
	rows = CtasPgEndCopy(st->conn, t->catalog, st->copy_sql);
	st->in_copy = false;
	if (rows != st->copy_rows)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("catalog \"%s\" received " UINT64_FORMAT " rows, but " UINT64_FORMAT " were sent",
						t->catalog->name, rows, st->copy_rows)));
}

/*
 * pg_sync_commit
 *		Store lsn as the job's progress and commit the remote transaction,
 *		with whatever is still queued, in one round trip.  The first commit
 *		of a table without its primary key (the initial copy's) adds it.
 */
static void
pg_sync_commit(CtasSyncTarget *t, uint64 lsn)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt;

	if (st->in_copy)
		end_copy(t);
	oldcxt = MemoryContextSwitchTo(st->cxt);

	if (!st->has_key)
	{
		StringInfoData sql;
		int			i;

		initStringInfo(&sql);
		appendStringInfo(&sql, "ALTER TABLE %s ADD PRIMARY KEY (",
						 st->qualified);
		for (i = 0; i < t->nkeys; i++)
			appendStringInfo(&sql, "%s%s", i ? ", " : "",
							 quote_identifier(t->keys[i]));
		appendStringInfoChar(&sql, ')');
		enqueue(t, sql.data);
	}
	enqueue(t, psprintf("INSERT INTO %s (job, lsn) VALUES (%s, '%X/%X') "
						"ON CONFLICT (job) DO UPDATE SET lsn = EXCLUDED.lsn",
						st->progress, quote_literal_cstr(t->job_key),
						LSN_FORMAT_ARGS(lsn)));
	enqueue(t, pstrdup("COMMIT"));
	MemoryContextSwitchTo(oldcxt);
	send_queue(t);
	st->has_key = true;
}

/*
 * pg_sync_close
 *		Close the connection; a remote transaction still open rolls back.
 */
static void
pg_sync_close(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;

	if (st == NULL)
		return;
	CtasPgCloseFresh(st->conn);
	st->conn = NULL;
	st->queue = NIL;
	t->private = NULL;
}
