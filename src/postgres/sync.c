/*-------------------------------------------------------------------------
 *
 * sync.c
 *		  Continuous sync into a PostgreSQL catalog: the CtasSyncApply of
 *		  the PostgreSQL target, applying each batch as a set.
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
 *				next (finish_pending), so that the worker builds the next
 *				batch while the remote applies this one (pipeline.c)
 *
 * Applying a batch (apply_batch; its SQL comes from sync_sql.c): what is
 * queued is sent (BEGIN, the DELETE
 * of a truncate); the batch's rows go by one COPY into the temporary
 * table; then, in one pipeline with whatever the caller queues after them
 * (the progress row and COMMIT at commit),
 *		DELETE FROM t USING batch WHERE kind = 'd' AND key matches
 *		INSERT INTO t SELECT ... FROM batch WHERE kind = 'u'
 *			ON CONFLICT (key) DO UPDATE SET every other column
 *		UPDATE t SET c = CASE WHEN unchanged THEN t.c ELSE batch.c END ...
 *			FROM batch WHERE kind = 'm' AND key matches (only when the
 *			batch holds such rows, checked first to all have their row)
 * A batch that grows past BATCH_KEYS keys or BATCH_BYTES of memory is
 * applied in the same remote transaction, and TRUNCATEd, before it takes
 * more (its statements run remotely while the next part is built, as
 * after commit_send); only COMMIT ends the remote transaction.
 *
 * The net change per key.  The remote transaction holds every source
 * transaction of the batch, in commit order, and is seen whole or not at
 * all, so only the last state of each key matters: a key's later change
 * replaces its earlier one (an upsert its full row, a delete the key's
 * deletion), and a TRUNCATE forgets every change before it (its DELETE
 * removes whatever they would have left).  Keys are told apart by the text
 * output of their values, which never makes two remotely different keys
 * one; where two different texts may be equal keys for the remote type
 * (numeric 1.0 and 1.00, float -0 and 0), the batch is read through
 * DISTINCT ON (key) ... ORDER BY the change's order, descending, so that
 * the later change wins there too.  An upsert with unchanged columns
 * (unchanged TOAST values, see target.h) takes them from the key's earlier
 * upsert in the batch, when there is one; otherwise the remote row keeps
 * its values (kind 'm'); the remote row must then exist, since a value
 * not sent cannot be made up: a key deleted earlier in the batch, or
 * missing on the remote (a TRUNCATE's DELETE has run by then), is an
 * ERROR.
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

/* statements queued before they are sent */
#define PIPELINE_STATEMENTS	1000
/* bytes of COPY data collected before they are handed to libpq */
#define COPY_CHUNK			(64 * 1024)
/*
 * a batch larger than this is applied before it takes more, in the
 * background while the next part is built (see pipelining)
 */
#define BATCH_KEYS			10000
#define BATCH_BYTES			(64 * 1024 * 1024)

#define PROGRESS_TABLE	"_ctas_fed_sync_progress"
/* first key of the remote advisory lock that guards its creation */
#define PROGRESS_LOCK	0x43544153

/* the batch table's columns after the remote table's (sync_sql.c) */
#define BATCH_EXTRA		3

/* what the batch holds for a key: its net change */
typedef enum PgSyncKind
{
	PG_SYNC_UPSERT = 'u',		/* the full row */
	PG_SYNC_DELETE = 'd',		/* the key's deletion */
	PG_SYNC_UNCHANGED = 'm'		/* the row, some columns kept remotely */
} PgSyncKind;

/* the identity of a key: the text of its values */
typedef struct PgSyncKey
{
	const char *data;
	Size		len;
} PgSyncKey;

typedef struct PgSyncEntry
{
	PgSyncKey	key;			/* hash key, first */
	char		kind;			/* a PgSyncKind */
	int32		order;			/* when it last changed in the batch */
	Datum	   *values;			/* every column (keys only for a delete) */
	bool	   *nulls;
	bool	   *unchanged;		/* PG_SYNC_UNCHANGED: columns kept */
} PgSyncEntry;

typedef struct PgSyncState
{
	PGconn	   *conn;
	char	   *qualified;		/* "schema"."table" */
	char	   *progress;		/* "schema"._ctas_fed_sync_progress */
	List	   *queue;			/* SQL strings not sent yet */
	MemoryContext cxt;			/* the queue; reset after each send */
	bool		pending;		/* a pipeline sent, its results not read */
	List	   *sent;			/* its statements, in sent_cxt */
	MemoryContext sent_cxt;
	int		   *keycol;			/* column of each key */
	int16	   *typlen;			/* of each column */
	bool	   *typbyval;
	FmgrInfo   *out;			/* output function of each column */
	FmgrInfo   *send;			/* send function of each column, if binary */
	FmgrInfo	extra_out[BATCH_EXTRA]; /* of kind, order, unchanged */
	FmgrInfo	extra_send[BATCH_EXTRA];
	CtasPgSyncSql sql;			/* the statements (sync_sql.c) */
	bool		binary;			/* the remote has the local types */
	bool		has_key;		/* the remote table has its primary key */
	char	   *missing;		/* a column of t the remote table lacks (a
								 * followed DROP COLUMN whose new columns
								 * were not stored yet: nothing is written
								 * until they are), or NULL */
	bool		in_copy;		/* the initial copy's COPY is open */
	uint64		copy_rows;
	StringInfoData copy_buf;	/* COPY data not handed to libpq yet */
	/* the batch */
	MemoryContext batch_cxt;	/* entries and the hash table */
	HTAB	   *batch;			/* PgSyncEntry by PgSyncKey, or NULL */
	int32		order;			/* changes put in the batch */
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
static void pg_sync_commit_send(CtasSyncTarget *t, uint64 lsn);
static void pg_sync_commit_wait(CtasSyncTarget *t);
static char *pg_sync_alter(CtasSyncTarget *t, const CtasSyncAlter *changes,
						   int nchanges);
static void send_queue(CtasSyncTarget *t);
static void send_queue_async(CtasSyncTarget *t);
static void finish_pending(CtasSyncTarget *t);
static void apply_batch(CtasSyncTarget *t);

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
	int			i;

	st->qualified = psprintf("%s.%s", quote_identifier(t->schema),
							 quote_identifier(t->table));
	st->progress = psprintf("%s.%s", quote_identifier(t->schema),
							PROGRESS_TABLE);
	initStringInfo(&st->copy_buf);
	st->cxt = AllocSetContextCreate(CurrentMemoryContext,
									"ctas_fed sync queue",
									ALLOCSET_DEFAULT_SIZES);
	st->batch_cxt = AllocSetContextCreate(CurrentMemoryContext,
										  "ctas_fed sync batch",
										  ALLOCSET_DEFAULT_SIZES);
	st->sent_cxt = AllocSetContextCreate(CurrentMemoryContext,
										 "ctas_fed sync pipeline",
										 ALLOCSET_SMALL_SIZES);

	st->keycol = palloc0(sizeof(int) * Max(t->nkeys, 1));
	for (i = 0; i < t->nkeys; i++)
	{
		int			c;

		st->keycol[i] = -1;
		for (c = 0; c < t->ncolumns; c++)
		{
			if (strcmp(t->keys[i], t->columns[c]) == 0)
			{
				st->keycol[i] = c;
		}
		}
		if (st->keycol[i] < 0)
			elog(ERROR, "key column \"%s\" is not a column of the sync",
				 t->keys[i]);
	}
	st->typlen = palloc0(sizeof(int16) * Max(t->ncolumns, 1));
	st->typbyval = palloc0(sizeof(bool) * Max(t->ncolumns, 1));
	for (i = 0; i < t->ncolumns; i++)
		get_typlenbyval(t->types[i], &st->typlen[i], &st->typbyval[i]);
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

	read_remote_table(t);
	st->out = palloc0(sizeof(FmgrInfo) * Max(t->ncolumns, 1));
	st->send = palloc0(sizeof(FmgrInfo) * Max(t->ncolumns, 1));
	for (i = 0; i < t->ncolumns; i++)
		type_functions(t->types[i], &st->out[i],
					   st->binary ? &st->send[i] : NULL);
	type_functions(CHAROID, &st->extra_out[0], &st->extra_send[0]);
	type_functions(INT4OID, &st->extra_out[1], &st->extra_send[1]);
	type_functions(TEXTOID, &st->extra_out[2], &st->extra_send[2]);
	CtasPgSyncBuildSql(&st->sql, t, st->qualified, st->binary);

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

	finish_pending(t);
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
 * send_pipeline
 *		Send every queued statement in one pipeline (pipeline.c) and keep
 *		their text for finish_pending; the queue is empty after.  The
 *		results are not read.
 */
static void
send_pipeline(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt;
	ListCell   *lc;

	Assert(!st->pending);
	CtasPgPipelineSend(st->conn, t->catalog, st->queue);
	oldcxt = MemoryContextSwitchTo(st->sent_cxt);
	foreach(lc, st->queue)
		st->sent = lappend(st->sent, pstrdup(lfirst(lc)));
	MemoryContextSwitchTo(oldcxt);
	st->queue = NIL;
	MemoryContextReset(st->cxt);
	st->pending = true;
}

/*
 * finish_pending
 *		Read every result of the pipeline send_pipeline sent, if one is
 *		pending, waiting for them (interruptibly); ERROR with the first
 *		remote error.
 */
static void
finish_pending(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;

	if (!st->pending)
		return;
	CtasPgPipelineFinish(st->conn, t->catalog, st->sent);
	st->pending = false;
	st->sent = NIL;
	MemoryContextReset(st->sent_cxt);
}

/*
 * send_queue
 *		Send every queued statement in one pipeline and read every result
 *		(after those of a pipeline still pending); ERROR with the first
 *		remote error.
 */
static void
send_queue(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;

	finish_pending(t);
	if (st->queue == NIL)
		return;
	send_pipeline(t);
	finish_pending(t);
}

/*
 * send_queue_async
 *		The same without reading the results: whatever talks to the remote
 *		next reads them first (finish_pending).
 */
static void
send_queue_async(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;

	finish_pending(t);
	if (st->queue != NIL)
		send_pipeline(t);
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

/* ---- the batch ----------------------------------------------------------- */

static uint32
batch_key_hash(const void *key, Size keysize)
{
	const PgSyncKey *k = (const PgSyncKey *) key;

	return hash_bytes((const unsigned char *) k->data, (int) k->len);
}

static int
batch_key_match(const void *key1, const void *key2, Size keysize)
{
	const PgSyncKey *a = (const PgSyncKey *) key1;
	const PgSyncKey *b = (const PgSyncKey *) key2;

	if (a->len != b->len)
		return 1;
	return memcmp(a->data, b->data, a->len);
}

/*
 * batch_entry
 *		The entry of the key whose values (of the key types, in the order of
 *		t->keys) are given, made empty (kind 0) if the batch has none, and
 *		stamped with the batch's next order.  Memory: st->batch_cxt.
 */
static PgSyncEntry *
batch_entry(CtasSyncTarget *t, Datum *keyvals)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt = MemoryContextSwitchTo(st->batch_cxt);
	StringInfoData buf;
	PgSyncKey	key;
	PgSyncEntry *entry;
	bool		found;
	int			k;

	if (st->batch == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(PgSyncKey);
		ctl.entrysize = sizeof(PgSyncEntry);
		ctl.hash = batch_key_hash;
		ctl.match = batch_key_match;
		ctl.hcxt = st->batch_cxt;
		st->batch = hash_create("ctas_fed sync batch", 1024, &ctl,
								HASH_ELEM | HASH_FUNCTION | HASH_COMPARE |
								HASH_CONTEXT);
	}

	/* each value's text, with its length: never two keys in one */
	initStringInfo(&buf);
	for (k = 0; k < t->nkeys; k++)
	{
		char	   *text = OutputFunctionCall(&st->out[st->keycol[k]],
											  keyvals[k]);
		uint32		len = strlen(text);

		appendBinaryStringInfo(&buf, (char *) &len, sizeof(len));
		appendBinaryStringInfo(&buf, text, len);
	}
	key.data = buf.data;
	key.len = buf.len;
	entry = hash_search(st->batch, &key, HASH_ENTER, &found);
	if (!found)
	{
		entry->kind = 0;
		entry->values = NULL;
		entry->nulls = NULL;
		entry->unchanged = NULL;
	}
	entry->order = ++st->order;
	MemoryContextSwitchTo(oldcxt);
	return entry;
}

/*
 * batch_put_row
 *		Keep a copy of the row's values in entry (in st->batch_cxt), the
 *		columns in unchanged (if not NULL) taken from the entry's earlier
 *		row.
 */
static void
batch_put_row(CtasSyncTarget *t, PgSyncEntry *entry, Datum *values,
			  bool *nulls, const bool *unchanged)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt = MemoryContextSwitchTo(st->batch_cxt);
	Datum	   *v = palloc(sizeof(Datum) * t->ncolumns);
	bool	   *n = palloc(sizeof(bool) * t->ncolumns);
	bool	   *u = palloc0(sizeof(bool) * t->ncolumns);
	bool		any_unchanged = false;
	int			i;

	for (i = 0; i < t->ncolumns; i++)
	{
		if (unchanged != NULL && unchanged[i])
		{
			/* the earlier row of the batch has it, or the remote keeps it */
			if (entry->kind == PG_SYNC_UPSERT ||
				(entry->kind == PG_SYNC_UNCHANGED && !entry->unchanged[i]))
			{
				v[i] = entry->values[i];
				n[i] = entry->nulls[i];
			}
			else
			{
				v[i] = (Datum) 0;
				n[i] = true;
				u[i] = true;
				any_unchanged = true;
			}
			continue;
		}
		n[i] = nulls[i];
		v[i] = nulls[i] ? (Datum) 0 :
			datumCopy(values[i], st->typbyval[i], st->typlen[i]);
	}
	entry->values = v;
	entry->nulls = n;
	entry->unchanged = any_unchanged ? u : NULL;
	entry->kind = any_unchanged ? PG_SYNC_UNCHANGED : PG_SYNC_UPSERT;
	MemoryContextSwitchTo(oldcxt);
}

/* apply the batch now if it is large, in the same remote transaction */
static void
batch_bound(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;

	if (hash_get_num_entries(st->batch) >= BATCH_KEYS ||
		((st->order & 1023) == 0 &&
		 MemoryContextMemAllocated(st->batch_cxt, true) >= BATCH_BYTES))
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(st->cxt);

		apply_batch(t);
		/* the next part of the batch into an empty table */
		enqueue(t, pstrdup(st->sql.batch_truncate));
		MemoryContextSwitchTo(oldcxt);
		/* applied remotely while the next part is built */
		send_queue_async(t);
	}
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
	Datum		keyvals[INDEX_MAX_KEYS];
	PgSyncEntry *entry;
	int			k;

	Assert(t->nkeys <= INDEX_MAX_KEYS);
	for (k = 0; k < t->nkeys; k++)
		keyvals[k] = values[st->keycol[k]];
	entry = batch_entry(t, keyvals);
	/* a key deleted earlier in the batch (a truncate: see apply_batch) */
	if (unchanged != NULL && entry->kind == PG_SYNC_DELETE)
	{
		int			i;

		for (i = 0; i < t->ncolumns; i++)
		{
			if (unchanged[i])
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("the unchanged value of column \"%s\" cannot be kept in table %s of catalog \"%s\"",
								t->columns[i], st->qualified, t->catalog->name),
						 errdetail("The row was deleted earlier in the same batch, and the change did not carry the value."),
						 errhint("Set REPLICA IDENTITY FULL on the source table.")));
		}
	}
	batch_put_row(t, entry, values, nulls, unchanged);
	batch_bound(t);
}

/*
 * pg_sync_delete
 *		The deletion of the key becomes its net change.
 */
static void
pg_sync_delete(CtasSyncTarget *t, Datum *keys)
{
	PgSyncState *st = (PgSyncState *) t->private;
	PgSyncEntry *entry = batch_entry(t, keys);
	MemoryContext oldcxt = MemoryContextSwitchTo(st->batch_cxt);
	int			k;

	entry->kind = PG_SYNC_DELETE;
	entry->values = palloc0(sizeof(Datum) * t->ncolumns);
	entry->nulls = palloc(sizeof(bool) * t->ncolumns);
	memset(entry->nulls, true, sizeof(bool) * t->ncolumns);
	entry->unchanged = NULL;
	for (k = 0; k < t->nkeys; k++)
	{
		int			c = st->keycol[k];

		entry->values[c] = datumCopy(keys[k], st->typbyval[c],
									 st->typlen[c]);
		entry->nulls[c] = false;
	}
	MemoryContextSwitchTo(oldcxt);
	batch_bound(t);
}

/* forget the batch */
static void
batch_reset(PgSyncState *st)
{
	st->batch = NULL;
	st->order = 0;
	MemoryContextReset(st->batch_cxt);
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
	batch_reset(st);
	enqueue_and_maybe_send(t, sql);
}

/*
 * apply_batch
 *		Send the queue, then the batch's rows by COPY into the batch table,
 *		and queue the statements that apply them (sent by the caller, with
 *		what it queues after them).  A batch with rows whose unchanged
 *		columns the remote keeps is first checked to find each row.  The
 *		batch is empty after.  Can ERROR.
 */
static void
apply_batch(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt;
	HASH_SEQ_STATUS scan;
	PgSyncEntry *entry;
	PGresult   *res;
	uint64		rows = 0;
	uint64		unchanged_rows = 0;
	uint64		deletes = 0;
	uint64		received;

	if (st->batch == NULL || hash_get_num_entries(st->batch) == 0)
	{
		batch_reset(st);
		return;
	}
	if (st->missing != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of the sync is missing in table %s of catalog \"%s\"",
						st->missing, st->qualified, t->catalog->name)));
	send_queue(t);
	if (!PQsendQuery(st->conn, st->sql.batch_copy))
		CtasPgReportError(ERROR, NULL, st->conn, t->catalog,
						  st->sql.batch_copy);
	res = CtasPgGetResult(st->conn, 0, NULL);
	if (res == NULL || PQresultStatus(res) != PGRES_COPY_IN)
		CtasPgReportError(ERROR, res, st->conn, t->catalog,
						  st->sql.batch_copy);
	PQclear(res);

	oldcxt = MemoryContextSwitchTo(st->cxt);
	resetStringInfo(&st->copy_buf);
	CtasPgCopyHeader(&st->copy_buf, st->binary);
	hash_seq_init(&scan, st->batch);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		StringInfo	buf = &st->copy_buf;
		bool		binary = st->binary;
		int			nestlevel;
		char		kind = entry->kind;
		int			i;

		nestlevel = CtasPgCopyRowStart(buf, binary,
									   t->ncolumns + BATCH_EXTRA);
		for (i = 0; i < t->ncolumns; i++)
			CtasPgCopyField(buf, binary, i,
							binary ? &st->send[i] : &st->out[i],
							entry->values[i], entry->nulls[i]);
		CtasPgCopyField(buf, binary, i++,
						binary ? &st->extra_send[0] : &st->extra_out[0],
						CharGetDatum(kind), false);
		CtasPgCopyField(buf, binary, i++,
						binary ? &st->extra_send[1] : &st->extra_out[1],
						Int32GetDatum(entry->order), false);
		if (entry->unchanged != NULL)
		{
			char	   *mask = palloc(t->ncolumns + 1);
			int			c;

			for (c = 0; c < t->ncolumns; c++)
				mask[c] = entry->unchanged[c] ? 't' : 'f';
			mask[c] = '\0';
			CtasPgCopyField(buf, binary, i,
							binary ? &st->extra_send[2] : &st->extra_out[2],
							CStringGetTextDatum(mask), false);
			unchanged_rows++;
		}
		else
			CtasPgCopyField(buf, binary, i, NULL, (Datum) 0, true);
		CtasPgCopyRowEnd(buf, binary, nestlevel);
		deletes += kind == PG_SYNC_DELETE;
		rows++;
		if (buf->len >= COPY_CHUNK)
		{
			CtasPgPutCopyData(st->conn, t->catalog, buf->data, buf->len);
			resetStringInfo(buf);
			MemoryContextReset(st->cxt);
		}
	}
	CtasPgCopyTrailer(&st->copy_buf, st->binary);
	CtasPgPutCopyData(st->conn, t->catalog, st->copy_buf.data,
					  st->copy_buf.len);
	resetStringInfo(&st->copy_buf);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(st->cxt);
	received = CtasPgEndCopy(st->conn, t->catalog, st->sql.batch_copy);
	if (received != rows)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("catalog \"%s\" received " UINT64_FORMAT " rows, but " UINT64_FORMAT " were sent",
						t->catalog->name, received, rows)));
	batch_reset(st);

	oldcxt = MemoryContextSwitchTo(st->cxt);
	if (unchanged_rows > 0)
	{
		uint64		found;

		/* a value not sent cannot be made up: the row must be there */
		res = CtasPgQuery(st->conn, t->catalog, st->sql.count_unchanged);
		found = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
		PQclear(res);
		if (found != unchanged_rows)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("unchanged values cannot be kept in table %s of catalog \"%s\": " UINT64_FORMAT " of its rows are missing",
							st->qualified, t->catalog->name,
							unchanged_rows - found),
					 errdetail("A change that did not carry every value of its row found no row to keep them from."),
					 errhint("Set REPLICA IDENTITY FULL on the source table.")));
		if (st->sql.apply_unchanged != NULL)
			enqueue(t, pstrdup(st->sql.apply_unchanged));
	}
	if (deletes > 0)
		enqueue(t, pstrdup(st->sql.apply_delete));
	if (rows > deletes + unchanged_rows)
		enqueue(t, pstrdup(st->sql.apply_upsert));
	MemoryContextSwitchTo(oldcxt);
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
		PGresult   *res;

		if (st->missing != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of the sync is missing in table %s of catalog \"%s\"",
							st->missing, st->qualified, t->catalog->name)));
		apply_batch(t);
		send_queue(t);
		if (!PQsendQuery(st->conn, st->sql.copy))
			CtasPgReportError(ERROR, NULL, st->conn, t->catalog, st->sql.copy);
		res = CtasPgGetResult(st->conn, 0, NULL);
		if (res == NULL || PQresultStatus(res) != PGRES_COPY_IN)
			CtasPgReportError(ERROR, res, st->conn, t->catalog, st->sql.copy);
		PQclear(res);
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
	apply_batch(t);
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
	send_queue_async(t);
	st->has_key = true;
}

/* wait for the remote COMMIT pg_sync_commit_send sent; ERROR if it failed */
static void
pg_sync_commit_wait(CtasSyncTarget *t)
{
	if (t->private != NULL)
		finish_pending(t);
}

/* pg_sync_commit_send, then wait for it */
static void
pg_sync_commit(CtasSyncTarget *t, uint64 lsn)
{
	pg_sync_commit_send(t, lsn);
	finish_pending(t);
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
	st->batch = NULL;
	t->private = NULL;
}

/*
 * pg_sync_alter
 *		Schema changes of a whole-row sync (target.h), in the remote
 *		transaction: the batch so far is applied to the table as it is,
 *		then ALTER TABLE, and for an added column the value the source gave
 *		the rows there are (text under the pinned settings, as any value);
 *		the batch table and the statements are made again for the new
 *		columns.  Every change maps: a retype is one whose values keep their
 *		text (sync/ddl.c), so USING the cast changes none.
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
	apply_batch(t);
	send_queue(t);
	for (n = 0; n < nchanges; n++)
	{
		const CtasSyncAlter *c = &changes[n];
		const char *col = quote_identifier(c->column);
		bool		same;
		char	   *type = NULL;

		if (c->kind == CTAS_SYNC_ADD_COLUMN || c->kind == CTAS_SYNC_RETYPE_COLUMN)
			type = CtasPostgresRemoteType(getBaseType(c->typid), c->typmod,
										  &same);
		switch (c->kind)
		{
			case CTAS_SYNC_ADD_COLUMN:
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
						   psprintf("ALTER TABLE %s DROP COLUMN %s",
									st->qualified, col));
				break;
			case CTAS_SYNC_RENAME_COLUMN:
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
	for (i = 0; i < t->nkeys; i++)
	{
		int			c;

		for (c = 0; c < t->ncolumns; c++)
		{
			if (strcmp(t->keys[i], t->columns[c]) == 0)
				st->keycol[i] = c;
		}
	}
	st->typlen = palloc0(sizeof(int16) * Max(t->ncolumns, 1));
	st->typbyval = palloc0(sizeof(bool) * Max(t->ncolumns, 1));
	for (i = 0; i < t->ncolumns; i++)
		get_typlenbyval(t->types[i], &st->typlen[i], &st->typbyval[i]);
	read_remote_table(t);
	st->out = palloc0(sizeof(FmgrInfo) * Max(t->ncolumns, 1));
	st->send = palloc0(sizeof(FmgrInfo) * Max(t->ncolumns, 1));
	for (i = 0; i < t->ncolumns; i++)
		type_functions(t->types[i], &st->out[i],
					   st->binary ? &st->send[i] : NULL);
	CtasPgSyncBuildSql(&st->sql, t, st->qualified, st->binary);
	MemoryContextSwitchTo(oldcxt);
	CtasPgExec(st->conn, t->catalog, "DROP TABLE IF EXISTS pg_temp._ctas_fed_sync_batch");
	CtasPgExec(st->conn, t->catalog, st->sql.batch_create);
	return NULL;
}
