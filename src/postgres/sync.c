/*-------------------------------------------------------------------------
 *
 * sync.c
 *		  Continuous sync into a PostgreSQL catalog: the CtasSyncApply of
 *		  the PostgreSQL target, applying each batch as a set.  The queue of
 *		  statements and how a batch is applied are in sync_batch.c, the
 *		  net change per key in syncbatch.c; the protocol is told here.
 *
 * Protocol (one connection per sync worker, of its own, not cached):
 *
 *	open		connect; CREATE TABLE IF NOT EXISTS
 *				"<schema>"._ctas_fed_sync_progress (job, lsn); read the
 *				remote table's column types and whether it has its
 *				primary key yet; CREATE TEMP TABLE _ctas_fed_sync_batch
 *				ON COMMIT DELETE ROWS, the remote table's columns plus
 *				the change's kind, order and unchanged columns
 *	applied_lsn	the lsn stored for the job, 0 if none
 *	begin		queue BEGIN
 *	upsert		put the row in the batch, replacing what the batch held
 *				for its key (the net change per key, below)
 *	delete		the same with a delete of the key
 *	truncate	forget the batch; queue DELETE (MVCC-safe for readers,
 *				unlike TRUNCATE)
 *	copy_row	(the initial copy, after truncate) send the queue, open a
 *				COPY ... FROM STDIN into the table; add the row to it
 *	commit		end the COPY if one is open; apply the batch; queue ALTER
 *				TABLE ... ADD PRIMARY KEY if the table has none yet, the
 *				upsert of the job's progress row and COMMIT, send the
 *				queue in one pipeline (one round trip), check every result
 *	commit_send	the same, but return once the pipeline is sent; the
 *				results are read by commit_wait, or by whatever sends
 *				next (CtasPgSyncFinishPending), so that the worker builds
 *				the next
 *				batch while the remote applies this one (pipeline.c)
 *
 * Applying a batch (CtasPgSyncApplyBatch; its SQL comes from sync_sql.c):
 * what is queued is sent (BEGIN, the DELETE
 * of a truncate); the batch's rows go by one COPY into the temporary
 * table; then, in one pipeline with whatever the caller queues after them
 * (the progress row and COMMIT at commit),
 *		DELETE FROM t USING batch WHERE kind = 'd' AND key matches
 *		INSERT INTO t SELECT ... FROM batch WHERE kind = 'u'
 *			ON CONFLICT (key) DO UPDATE SET every other column
 *		UPDATE t SET c = CASE WHEN unchanged THEN t.c ELSE batch.c END ...
 *			FROM batch WHERE kind = 'm' AND key matches (only when the
 *			batch holds such rows, checked first to all have their row)
 * A batch that grows past BATCH_KEYS keys (or the memory syncbatch.c
 * allows) is applied in the same remote transaction, and TRUNCATEd, before it takes
 * more (its statements run remotely while the next part is built, as
 * after commit_send); only COMMIT ends the remote transaction.
 *
 * The net change per key is kept by syncbatch.c, which tells its rules:
 * only the last state of each key matters, keys told apart by the text
 * output of their values; an upsert with unchanged columns (unchanged
 * TOAST values, see target.h) takes them from the key's earlier upsert in
 * the batch, else the remote row keeps its values (kind 'm') and must
 * then exist (a key deleted earlier in the batch, or missing on the
 * remote once a TRUNCATE's DELETE has run, is an ERROR).  Where two
 * different texts may be equal keys for the remote type (numeric 1.0 and
 * 1.00, float -0 and 0), the batch is read through DISTINCT ON (key) ...
 * ORDER BY the change's order, descending, so that the later change wins
 * there too.
 *
 * Rows and progress commit together: any error raises, the worker closes
 * the connection, which rolls the remote transaction back, and retries
 * from the lsn stored remotely, so a restart applies each source
 * transaction exactly once.
 *
 * Values travel in COPY's binary format when every remote column has the
 * local column's built-in type (read_remote_table), else as text made
 * under pinned settings (copy.c, shared with the CTAS writer); identifiers
 * go through quote_identifier.
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
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"

#include "postgres_target.h"

#define PROGRESS_TABLE	"_ctas_fed_sync_progress"
/* first key of the remote advisory lock that guards its creation */
#define PROGRESS_LOCK	0x43544153

static void pg_sync_open(CtasSyncTarget *t);
static void read_remote_table(CtasSyncTarget *t);
static void take_columns(CtasSyncTarget *t);
static uint64 pg_sync_applied_lsn(CtasSyncTarget *t);
static void pg_sync_begin(CtasSyncTarget *t);
static void pg_sync_upsert(CtasSyncTarget *t, Datum *values, bool *nulls,
						   const bool *unchanged);
static void pg_sync_delete(CtasSyncTarget *t, Datum *keys);
static void pg_sync_copy_row(CtasSyncTarget *t, Datum *values, bool *nulls);
static void pg_sync_truncate(CtasSyncTarget *t);
static void pg_sync_commit(CtasSyncTarget *t, uint64 lsn);
static void pg_sync_close(CtasSyncTarget *t);
static void pg_sync_commit_send(CtasSyncTarget *t, uint64 lsn);
static void pg_sync_commit_wait(CtasSyncTarget *t);
static char *pg_sync_alter(CtasSyncTarget *t, const CtasSyncAlter *changes,
						   int nchanges);

const CtasSyncApply CtasPgSyncApply = {
	.open = pg_sync_open,
	.applied_lsn = pg_sync_applied_lsn,
	.begin = pg_sync_begin,
	.upsert = pg_sync_upsert,
	.copy_row = pg_sync_copy_row,
	.delete = pg_sync_delete,
	.truncate = pg_sync_truncate,
	.commit = pg_sync_commit,
	.close = pg_sync_close,
	.commit_send = pg_sync_commit_send,
	.commit_wait = pg_sync_commit_wait,
	.alter = pg_sync_alter,
	.verify_local = CtasPgSyncVerifyLocal,	/* verify.c */
	.verify_remote = CtasPgSyncVerifyRemote,
	.keeps_unchanged = true,
	.transactional = true,
};

/* functions of a type, in the current memory context */
static void
type_functions(Oid type, FmgrInfo *out, FmgrInfo *send)
{
	Oid			func;
	bool		isvarlena;

	getTypeOutputInfo(type, &func, &isvarlena);
	fmgr_info(func, out);
	if (send != NULL)
	{
		getTypeBinaryOutputInfo(type, &func, &isvarlena);
		fmgr_info(func, send);
	}
}

/*
 * pg_sync_open
 *		Connect, make sure the progress table exists, create the batch
 *		table.  The state lives in the current memory context.
 */
static void
pg_sync_open(CtasSyncTarget *t)
{
	PgSyncState *st = palloc0(sizeof(PgSyncState));
	PGresult   *res;

	st->qualified = psprintf("%s.%s", quote_identifier(t->schema),
							 quote_identifier(t->table));
	st->progress = psprintf("%s.%s", quote_identifier(t->schema),
							PROGRESS_TABLE);
	initStringInfo(&st->copy_buf);
	st->cxt = AllocSetContextCreate(CurrentMemoryContext,
									"ctas_fed sync queue",
									ALLOCSET_DEFAULT_SIZES);
	st->sent_cxt = AllocSetContextCreate(CurrentMemoryContext,
										 "ctas_fed sync pipeline",
										 ALLOCSET_SMALL_SIZES);

	CtasSyncBatchInit(&st->batch, t,
					  AllocSetContextCreate(CurrentMemoryContext,
											"ctas_fed sync batch",
											ALLOCSET_DEFAULT_SIZES),
					  st->qualified);
	t->private = st;

	st->conn = CtasPgConnectFresh(t->catalog);
	/* no NOTICE from IF NOT EXISTS in the server log */
	CtasPgExec(st->conn, t->catalog, "SET client_min_messages = warning");

	/*
	 * One remote session per job at a time.  Statements already sent (a
	 * pipeline, see commit_send) run on the remote even after the worker
	 * that sent them is gone, up to their COMMIT: a new worker must not
	 * read the job's progress before that session has ended, or it would
	 * apply the same source transactions again.  The session holds an
	 * advisory lock on the job for its life; the next one waits for it.
	 * A session whose client is gone ends at its next wait when the
	 * remote can check (14+), rolling back what it had not committed.
	 */
	if (PQserverVersion(st->conn) >= 140000)
		CtasPgExec(st->conn, t->catalog,
				   "SET client_connection_check_interval = '1s'");
	CtasPgExec(st->conn, t->catalog,
			   psprintf("SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtextextended(%s, %d))",
						quote_literal_cstr(t->job_key), PROGRESS_LOCK));
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

	type_functions(CHAROID, &st->extra_out[0], &st->extra_send[0]);
	type_functions(INT4OID, &st->extra_out[1], &st->extra_send[1]);
	type_functions(TEXTOID, &st->extra_out[2], &st->extra_send[2]);
	take_columns(t);

	/*
	 * The batch table: the remote table's columns, with their remote types,
	 * without constraints; emptied by every COMMIT.  Not while a column is
	 * missing: the job then reads source transactions it applied before
	 * until the schema change that dropped it (sync/apply.c), and writes
	 * nothing.
	 */
	if (st->missing == NULL)
		CtasPgExec(st->conn, t->catalog, st->sql.batch_create);
}

/*
 * read_remote_table
 *		Whether the remote table has a primary key (st->has_key), and
 *		whether every column has the built-in type of the local column, so
 *		that the binary form of the local type is the remote's
 *		(st->binary).  A column_types option, or a type that is not
 *		built-in, makes the remote type text: the copy is then in text; so
 *		does a type that the remote's version cannot take in binary
 *		(CtasPgBinarySafe).
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
	st->missing = NULL;
	for (i = 0; i < t->ncolumns; i++)
	{
		Oid			local = getBaseType(t->types[i]);
		Oid			remote = InvalidOid;
		int			r;

		for (r = 0; r < PQntuples(res); r++)
		{
			if (strcmp(PQgetvalue(res, r, 0), t->columns[i]) == 0)
				remote = (Oid) strtoul(PQgetvalue(res, r, 1), NULL, 10);
		}
		if (remote == InvalidOid)
			st->missing = pstrdup(t->columns[i]);
		/* money (refused by pg_map_column anyway): lc_monetary's units */
		if (local >= FirstGenbkiObjectId || local == CASHOID ||
			remote != local ||
			!CtasPgBinarySafe(local, PQserverVersion(st->conn)))
			st->binary = false;
	}
	PQclear(res);
}

/*
 * take_columns
 *		What depends on t's columns as they are now (at open, and after
 *		followed schema changes): the remote table read again, the output
 *		and send functions, the statements.  In the current memory context.
 */
static void
take_columns(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;
	int			i;

	read_remote_table(t);
	st->out = palloc0(sizeof(FmgrInfo) * Max(t->ncolumns, 1));
	st->send = palloc0(sizeof(FmgrInfo) * Max(t->ncolumns, 1));
	for (i = 0; i < t->ncolumns; i++)
		type_functions(t->types[i], &st->out[i],
					   st->binary ? &st->send[i] : NULL);
	CtasPgSyncBuildSql(&st->sql, t, st->qualified, st->binary);
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

	CtasPgSyncFinishPending(t);
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

static void
pg_sync_begin(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt = MemoryContextSwitchTo(st->cxt);

	CtasPgSyncEnqueue(t, pstrdup("BEGIN"));
	MemoryContextSwitchTo(oldcxt);
}

/*
 * pg_sync_upsert
 *		The row as it is now becomes the net change of its key.  Columns in
 *		unchanged (NULL: none) keep their value: the batch's earlier row of
 *		the key, else the remote row's.
 */
static void
pg_sync_upsert(CtasSyncTarget *t, Datum *values, bool *nulls,
			   const bool *unchanged)
{
	PgSyncState *st = (PgSyncState *) t->private;

	CtasSyncBatchUpsert(&st->batch, values, nulls, unchanged);
	CtasPgSyncBatchBound(t);
}

/*
 * pg_sync_delete
 *		The deletion of the key becomes its net change.
 */
static void
pg_sync_delete(CtasSyncTarget *t, Datum *keys)
{
	PgSyncState *st = (PgSyncState *) t->private;

	CtasSyncBatchDelete(&st->batch, keys);
	CtasPgSyncBatchBound(t);
}

/*
 * pg_sync_truncate
 *		Every change before it is void: forget the batch, queue the DELETE.
 */
static void
pg_sync_truncate(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt = MemoryContextSwitchTo(st->cxt);
	char	   *sql = psprintf("DELETE FROM %s", st->qualified);

	MemoryContextSwitchTo(oldcxt);
	CtasSyncBatchReset(&st->batch);
	CtasPgSyncEnqueueAndMaybeSend(t, sql);
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
	int			nestlevel;
	int			i;

	if (!st->in_copy)
	{
		CtasPgSyncApplyBatch(t);
		CtasPgSyncStartCopy(t, st->sql.copy);
		st->in_copy = true;
		st->copy_rows = 0;
		resetStringInfo(&st->copy_buf);
		CtasPgCopyHeader(&st->copy_buf, st->binary);
	}
	nestlevel = CtasPgCopyRowStart(&st->copy_buf, st->binary, t->ncolumns);
	for (i = 0; i < t->ncolumns; i++)
		CtasPgCopyField(&st->copy_buf, st->binary, i,
						st->binary ? &st->send[i] : &st->out[i],
						values[i], nulls[i]);
	CtasPgCopyRowEnd(&st->copy_buf, st->binary, nestlevel);
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

	CtasPgCopyTrailer(&st->copy_buf, st->binary);
	if (st->copy_buf.len > 0)
		CtasPgPutCopyData(st->conn, t->catalog, st->copy_buf.data,
						  st->copy_buf.len);
	resetStringInfo(&st->copy_buf);
	rows = CtasPgEndCopy(st->conn, t->catalog, st->sql.copy);
	st->in_copy = false;
	if (rows != st->copy_rows)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("catalog \"%s\" received " UINT64_FORMAT " rows, but " UINT64_FORMAT " were sent",
						t->catalog->name, rows, st->copy_rows)));
}

/*
 * pg_sync_commit_send
 *		Apply the batch, store lsn as the job's progress and commit the
 *		remote transaction, the statements in one pipeline, sent without
 *		waiting for their results (pg_sync_commit_wait reads them).  The
 *		first commit of a table without its primary key (the initial
 *		copy's) adds it.
 */
static void
pg_sync_commit_send(CtasSyncTarget *t, uint64 lsn)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt;

	if (st->in_copy)
		end_copy(t);
	CtasPgSyncApplyBatch(t);
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
		CtasPgSyncEnqueue(t, sql.data);
	}
	CtasPgSyncEnqueue(t, psprintf("INSERT INTO %s (job, lsn) VALUES (%s, '%X/%X') "
						"ON CONFLICT (job) DO UPDATE SET lsn = EXCLUDED.lsn",
						st->progress, quote_literal_cstr(t->job_key),
						LSN_FORMAT_ARGS(lsn)));
	CtasPgSyncEnqueue(t, pstrdup("COMMIT"));
	MemoryContextSwitchTo(oldcxt);
	CtasPgSyncSendQueueAsync(t);
	st->has_key = true;
}

/* wait for the remote COMMIT pg_sync_commit_send sent; ERROR if it failed */
static void
pg_sync_commit_wait(CtasSyncTarget *t)
{
	if (t->private != NULL)
		CtasPgSyncFinishPending(t);
}

/* pg_sync_commit_send, then wait for it */
static void
pg_sync_commit(CtasSyncTarget *t, uint64 lsn)
{
	pg_sync_commit_send(t, lsn);
	CtasPgSyncFinishPending(t);
}

/*
 * pg_sync_close
 *		Close the connection; a remote transaction still open rolls back,
 *		and the batch is forgotten.
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
	st->batch.hash = NULL;
	t->private = NULL;
}

/* whether the remote table has a column named name, in its transaction */
static bool
remote_has_column(CtasSyncTarget *t, const char *name)
{
	PgSyncState *st = (PgSyncState *) t->private;
	PGresult   *res;
	bool		found;

	res = CtasPgQuery(st->conn, t->catalog,
					  psprintf("SELECT FROM pg_catalog.pg_attribute "
							   "WHERE attrelid = %s::pg_catalog.regclass "
							   "AND attname = %s AND attnum > 0 "
							   "AND NOT attisdropped",
							   quote_literal_cstr(st->qualified),
							   quote_literal_cstr(name)));
	found = PQntuples(res) > 0;
	PQclear(res);
	return found;
}

/*
 * rekey
 *		A new key (CTAS_SYNC_REKEY), in the remote transaction: the primary
 *		key of the remote table, named as its catalog says, is dropped and
 *		one on the new key columns added; the upserts and deletes from then
 *		on name them.  Found done (the same columns, in order: a crash
 *		after the remote commit), only the latter.  Every key the source's
 *		new identity index holds once is once in the remote table, which
 *		holds the source's rows: the new key is unique there too.
 */
static void
rekey(CtasSyncTarget *t, const CtasSyncAlter *c)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext cxt = GetMemoryChunkContext(st);
	StringInfoData want;
	StringInfoData sql;
	PGresult   *res;
	int			i;

	initStringInfo(&want);
	for (i = 0; i < c->nkeys; i++)
		appendStringInfo(&want, "%s%s", i ? "," : "", c->keys[i]);
	res = CtasPgQuery(st->conn, t->catalog,
					  psprintf("SELECT c.conname, (SELECT pg_catalog.string_agg(a.attname::pg_catalog.text, ',' ORDER BY k.n) "
							   "FROM pg_catalog.unnest(c.conkey) WITH ORDINALITY k(attnum, n) "
							   "JOIN pg_catalog.pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum) "
							   "FROM pg_catalog.pg_constraint c "
							   "WHERE c.conrelid = %s::pg_catalog.regclass AND c.contype = 'p'",
							   quote_literal_cstr(st->qualified)));
	initStringInfo(&sql);
	if (PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 1), want.data) == 0)
		;						/* done before a crash (target.h) */
	else
	{
		appendStringInfo(&sql, "ALTER TABLE %s ", st->qualified);
		if (PQntuples(res) == 1)
			appendStringInfo(&sql, "DROP CONSTRAINT %s, ",
							 quote_identifier(PQgetvalue(res, 0, 0)));
		appendStringInfoString(&sql, "ADD PRIMARY KEY (");
		for (i = 0; i < c->nkeys; i++)
			appendStringInfo(&sql, "%s%s", i ? ", " : "",
							 quote_identifier(c->keys[i]));
		appendStringInfoChar(&sql, ')');

		/*
		 * the old key's columns still there lose the NOT NULL their primary
		 * key gave them (after its DROP: each subcommand sees the ones
		 * before it), else a NULL the source may now write there fails the
		 * job
		 */
		for (i = 0; i < t->nkeys; i++)
		{
			int			j;
			int			k;

			for (j = 0; j < c->nkeys && strcmp(c->keys[j], t->keys[i]) != 0; j++)
				;
			for (k = 0; k < c->ncolumns && strcmp(c->columns[k], t->keys[i]) != 0; k++)
				;
			if (j == c->nkeys && k < c->ncolumns)
				appendStringInfo(&sql, ", ALTER COLUMN %s DROP NOT NULL",
								 quote_identifier(t->keys[i]));
		}
		CtasPgExec(st->conn, t->catalog, sql.data);
	}
	PQclear(res);
	t->nkeys = c->nkeys;
	t->keys = MemoryContextAlloc(cxt, sizeof(char *) * c->nkeys);
	t->key_types = MemoryContextAlloc(cxt, sizeof(Oid) * c->nkeys);
	for (i = 0; i < c->nkeys; i++)
	{
		t->keys[i] = MemoryContextStrdup(cxt, c->keys[i]);
		t->key_types[i] = c->key_types[i];
	}
}

/*
 * pg_sync_alter
 *		Schema changes of a whole-row sync (target.h), in the remote
 *		transaction: the batch so far is applied to the table as it is,
 *		then ALTER TABLE, and for an added column the value the source gave
 *		the rows there are (text under the pinned settings, as any value);
 *		the batch table and the statements are made again for the new
 *		columns.  Every change maps.  In the stream a retype is one whose
 *		values keep their text (sync/follow.c), so USING the cast changes
 *		none; at the copy that follows one that changes values
 *		(sync/resync.c) the table has no row left in the transaction when
 *		it is retyped.  A change found done (a copy committed remotely and
 *		not locally before a crash, then copied again) is skipped.
 */
static char *
pg_sync_alter(CtasSyncTarget *t, const CtasSyncAlter *changes, int nchanges)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext cxt = GetMemoryChunkContext(st);
	MemoryContext oldcxt;
	int			n;
	int			i;

	if (st->in_copy)
		end_copy(t);
	CtasPgSyncApplyBatch(t);
	CtasPgSyncSendQueue(t);
	for (n = 0; n < nchanges; n++)
	{
		const CtasSyncAlter *c = &changes[n];
		const char *col = c->column ? quote_identifier(c->column) : NULL;
		bool		same;
		char	   *type = NULL;

		if (c->kind == CTAS_SYNC_ADD_COLUMN || c->kind == CTAS_SYNC_RETYPE_COLUMN)
			type = CtasPostgresRemoteType(getBaseType(c->typid), c->typmod,
										  &same);
		switch (c->kind)
		{
			case CTAS_SYNC_ADD_COLUMN:
				if (remote_has_column(t, c->column))
					break;		/* done before a crash (target.h) */
				CtasPgExec(st->conn, t->catalog,
						   psprintf("ALTER TABLE %s ADD COLUMN %s %s",
									st->qualified, col, type));
				if (!c->isnull)
				{
					FmgrInfo	out;
					int			nest = CtasPgBeginTextOutput();
					char	   *text;

					type_functions(c->typid, &out, NULL);
					text = OutputFunctionCall(&out, c->value);
					CtasEndTextOutput(nest);
					CtasPgExec(st->conn, t->catalog,
							   psprintf("UPDATE %s SET %s = %s::%s",
										st->qualified, col,
										quote_literal_cstr(text), type));
				}
				break;
			case CTAS_SYNC_DROP_COLUMN:
				CtasPgExec(st->conn, t->catalog,
						   psprintf("ALTER TABLE %s DROP COLUMN IF EXISTS %s",
									st->qualified, col));
				break;
			case CTAS_SYNC_RENAME_COLUMN:
				if (remote_has_column(t, c->column) ||
					!remote_has_column(t, c->newname))
					CtasPgExec(st->conn, t->catalog,
							   psprintf("ALTER TABLE %s RENAME COLUMN %s TO %s",
										st->qualified, col,
										quote_identifier(c->newname)));
				/* a key column: the statements name it */
				for (i = 0; i < t->nkeys; i++)
				{
					if (strcmp(t->keys[i], c->column) == 0)
						t->keys[i] = MemoryContextStrdup(cxt, c->newname);
				}
				break;
			case CTAS_SYNC_RETYPE_COLUMN:
				CtasPgExec(st->conn, t->catalog,
						   psprintf("ALTER TABLE %s ALTER COLUMN %s TYPE %s USING %s::%s",
									st->qualified, col, type, col, type));
				break;
			case CTAS_SYNC_REKEY:
				rekey(t, c);
				break;
		}
	}

	/* the columns after the changes, and what depends on them */
	oldcxt = MemoryContextSwitchTo(cxt);
	t->ncolumns = changes[nchanges - 1].ncolumns;
	t->columns = palloc(sizeof(char *) * Max(t->ncolumns, 1));
	t->types = palloc(sizeof(Oid) * Max(t->ncolumns, 1));
	for (i = 0; i < t->ncolumns; i++)
	{
		t->columns[i] = pstrdup(changes[nchanges - 1].columns[i]);
		t->types[i] = changes[nchanges - 1].types[i];
	}
	CtasSyncBatchColumns(&st->batch);
	take_columns(t);
	MemoryContextSwitchTo(oldcxt);
	CtasPgExec(st->conn, t->catalog, "DROP TABLE IF EXISTS pg_temp._ctas_fed_sync_batch");
	CtasPgExec(st->conn, t->catalog, st->sql.batch_create);
	return NULL;
}
