/*-------------------------------------------------------------------------
 *
 * sync.c
 *		  Continuous sync into a MariaDB / MySQL catalog: the CtasSyncApply
 *		  of the MySQL target, applying each batch as a set.
 *
 * Protocol (one connection per sync worker, of its own, not cached):
 *
 *	open		connect; CREATE TABLE IF NOT EXISTS
 *				`<db>`._ctas_fed_sync_progress (job, lsn), InnoDB; check
 *				that the remote table is InnoDB (transactional); CREATE
 *				TEMPORARY TABLE _ctas_fed_sync_batch with the remote
 *				table's columns (CREATE ... SELECT ... LIMIT 0: their
 *				types, charset and collation, no keys) and the change's
 *				kind, order and unchanged columns
 *	applied_lsn	the lsn stored for the job, 0 if none
 *	begin		START TRANSACTION
 *	upsert		put the row in the batch, replacing what the batch held
 *				for its key (the net change per key, syncbatch.c)
 *	delete		the same with a delete of the key
 *	truncate	forget the batch; DELETE FROM the table (TRUNCATE would
 *				commit by itself in MySQL)
 *	copy_row	(the initial copy, after truncate) the row into a chunk;
 *				every MY_CHUNK_BYTES one LOAD DATA LOCAL INFILE of the
 *				chunk, served from memory (conn.c), into the table
 *	commit		the last chunk; apply the batch; INSERT the job's progress
 *				row ... ON DUPLICATE KEY UPDATE; COMMIT
 *
 * Applying a batch (apply_batch): its rows go by LOAD DATA into the
 * temporary table (chunks of MY_CHUNK_BYTES; InnoDB, so the remote
 * transaction covers it), then, in the remote transaction,
 *		UPDATE t JOIN batch s ON key SET c = IF(unchanged, t.c, s.c), ...
 *			WHERE kind = 'm' (only when the batch holds such rows, checked
 *			first to all have their row)
 *		DELETE t FROM t JOIN batch s ON key WHERE kind = 'd'
 *		INSERT INTO t (...) SELECT ... FROM batch WHERE kind = 'u'
 *			ORDER BY order ON DUPLICATE KEY UPDATE c = VALUES(c), ...
 *		DELETE FROM batch
 * Every column is updated, the key too, and the upsert runs in the order
 * of the changes: where two keys of different text are one key for the
 * remote (a PAD SPACE collation's trailing spaces), the later change wins.
 * A batch that grows past BATCH_KEYS keys (or the memory syncbatch.c
 * allows) is applied in the same remote transaction before it takes more; only
 * COMMIT ends the remote transaction.
 *
 * The net change per key and the unchanged mask are syncbatch.c's:
 * the remote transaction holds every source transaction of the batch, so
 * only the last state of each key matters; an upsert with unchanged
 * columns takes them from the key's earlier upsert in the batch, else the
 * remote row keeps its values (kind 'm'), which must then exist.
 *
 * Rows and progress commit together (InnoDB): any error raises, the worker
 * closes the connection, which rolls the remote transaction back, and
 * retries from the lsn stored remotely, so a restart applies each source
 * transaction exactly once.  A lost reply to COMMIT is the same: the lsn
 * read after reconnecting says whether it took effect.
 *
 * verify_local / verify_remote are in verify.c; no rebuild: a resync
 * deletes and copies in one remote transaction, which readers see whole at
 * commit.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/mysql/sync.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "mysql_target.h"

/*
 * a batch of more keys than this (or of more memory than syncbatch.c
 * allows) is applied before it takes more
 */
#define BATCH_KEYS			100000

#define PROGRESS_TABLE		"_ctas_fed_sync_progress"
#define BATCH_TABLE			"_ctas_fed_sync_batch"
#define KIND_COLUMN			"_ctas_fed_kind"
#define ORDER_COLUMN		"_ctas_fed_order"
#define UNCHANGED_COLUMN	"_ctas_fed_unchanged"

typedef struct MySyncState
{
	MemoryContext cxt;			/* everything below; deleted by close */
	MyConn	   *conn;
	char	   *qualified;		/* `db`.`table` */
	char	   *progress;		/* `db`._ctas_fed_sync_progress */
	char	   *column_list;	/* `a`, `b`, ... */
	MyColumn   *cols;			/* the encoder's view of the columns */
	/* the statements */
	char	   *copy_load;		/* LOAD DATA clauses into the table */
	char	   *batch_load;		/* and into the batch table */
	char	   *apply_delete;
	char	   *apply_upsert;
	char	   *apply_unchanged;	/* NULL when every column is a key */
	char	   *count_unchanged;
	/* the initial copy's chunk */
	StringInfoData chunk;
	uint64		chunk_rows;
	MemoryContext tmp_cxt;		/* reset after each chunk */
	CtasSyncBatch batch;		/* the net change per key (syncbatch.c) */
} MySyncState;

static void my_sync_open(CtasSyncTarget *t);
static uint64 my_sync_applied_lsn(CtasSyncTarget *t);
static void my_sync_begin(CtasSyncTarget *t);
static void my_sync_upsert(CtasSyncTarget *t, Datum *values, bool *nulls,
						   const bool *unchanged);
static void my_sync_delete(CtasSyncTarget *t, Datum *keys);
static void my_sync_copy_row(CtasSyncTarget *t, Datum *values, bool *nulls);
static void my_sync_truncate(CtasSyncTarget *t);
static void my_sync_commit(CtasSyncTarget *t, uint64 lsn);
static void my_sync_close(CtasSyncTarget *t);
static void apply_batch(CtasSyncTarget *t);

const CtasSyncApply CtasMySyncApply = {
	.open = my_sync_open,
	.applied_lsn = my_sync_applied_lsn,
	.begin = my_sync_begin,
	.upsert = my_sync_upsert,
	.copy_row = my_sync_copy_row,
	.delete = my_sync_delete,
	.truncate = my_sync_truncate,
	.commit = my_sync_commit,
	.close = my_sync_close,
	.verify_local = CtasMySyncVerifyLocal,	/* verify.c */
	.verify_remote = CtasMySyncVerifyRemote,
	.keeps_unchanged = true,
	.transactional = true,
};

/* ------------------------------------------------------------------------
 * The statements
 * ------------------------------------------------------------------------
 */

/* the statements of the sync, in the current memory context */
static void
build_sql(CtasSyncTarget *t, MySyncState *st)
{
	StringInfoData buf;
	StringInfoData match;
	StringInfoData cols;
	StringInfoData scols;
	bool		first = true;
	int			i;

	st->copy_load = CtasMyLoadSql(st->qualified, st->cols, t->ncolumns, NULL,
								  false);
	st->batch_load = CtasMyLoadSql(BATCH_TABLE, st->cols, t->ncolumns,
								   KIND_COLUMN ", " ORDER_COLUMN ", "
								   UNCHANGED_COLUMN, false);

	initStringInfo(&match);
	for (i = 0; i < t->nkeys; i++)
		appendStringInfo(&match, "%st.%s = s.%s", i ? " AND " : "",
						 CtasMyQuoteIdent(t->keys[i]),
						 CtasMyQuoteIdent(t->keys[i]));
	initStringInfo(&cols);
	initStringInfo(&scols);
	for (i = 0; i < t->ncolumns; i++)
	{
		appendStringInfo(&cols, "%s%s", i ? ", " : "",
						 CtasMyQuoteIdent(t->columns[i]));
		appendStringInfo(&scols, "%ss.%s", i ? ", " : "",
						 CtasMyQuoteIdent(t->columns[i]));
	}

	st->column_list = cols.data;
	st->apply_delete = psprintf("DELETE t FROM %s t JOIN " BATCH_TABLE
								" s ON %s WHERE s." KIND_COLUMN " = 'd'",
								st->qualified, match.data);

	initStringInfo(&buf);
	appendStringInfo(&buf, "INSERT INTO %s (%s) SELECT %s FROM " BATCH_TABLE
					 " s WHERE s." KIND_COLUMN " = 'u' ORDER BY s."
					 ORDER_COLUMN " ON DUPLICATE KEY UPDATE ",
					 st->qualified, cols.data, scols.data);
	for (i = 0; i < t->ncolumns; i++)
	{
		const char *c = CtasMyQuoteIdent(t->columns[i]);

		appendStringInfo(&buf, "%s%s = VALUES(%s)", i ? ", " : "", c, c);
	}
	st->apply_upsert = buf.data;

	st->apply_unchanged = NULL;
	if (t->ncolumns > t->nkeys)
	{
		initStringInfo(&buf);
		appendStringInfo(&buf, "UPDATE %s t JOIN " BATCH_TABLE " s ON %s SET ",
						 st->qualified, match.data);
		for (i = 0; i < t->ncolumns; i++)
		{
			const char *c = CtasMyQuoteIdent(t->columns[i]);

			if (CtasSyncIsKey(t, i))
				continue;
			appendStringInfo(&buf, "%st.%s = IF(SUBSTRING(s." UNCHANGED_COLUMN
							 ", %d, 1) = 't', t.%s, s.%s)",
							 first ? "" : ", ", c, i + 1, c, c);
			first = false;
		}
		appendStringInfoString(&buf, " WHERE s." KIND_COLUMN " = 'm'");
		st->apply_unchanged = buf.data;
	}
	st->count_unchanged = psprintf("SELECT COUNT(*) FROM %s t JOIN "
								   BATCH_TABLE " s ON %s WHERE s."
								   KIND_COLUMN " = 'm'",
								   st->qualified, match.data);
}

/* ------------------------------------------------------------------------
 * Open, progress, transaction
 * ------------------------------------------------------------------------
 */

/* the engine of db.table, or NULL when there is no such table */
static char *
table_engine(MyConn *conn, const char *db, const char *table)
{
	List	   *rows;

	rows = CtasMyQuery(conn,
					   psprintf("SELECT engine FROM information_schema.tables "
								"WHERE table_schema = %s AND table_name = %s",
								CtasMyLiteral(db), CtasMyLiteral(table)),
					   "read the engine of the synced table", NULL);
	if (rows == NIL)
		return NULL;
	return ((char **) linitial(rows))[0] ? ((char **) linitial(rows))[0] : "";
}

/*
 * my_sync_open
 *		Connect, make sure the progress table exists, check that both
 *		tables are transactional, create the batch table.  The state lives
 *		in a context of its own under the current one.
 */
static void
my_sync_open(CtasSyncTarget *t)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "ctas_fed mysql sync",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	MySyncState *st = palloc0(sizeof(MySyncState));
	const char *tables[2];
	const char *names[2];
	int			i;

	st->cxt = cxt;
	st->qualified = CtasMyQname(t->schema, t->table);
	st->progress = CtasMyQname(t->schema, PROGRESS_TABLE);
	st->cols = CtasMySyncColumns(t->ncolumns, t->columns, t->types);
	initStringInfo(&st->chunk);
	st->tmp_cxt = AllocSetContextCreate(cxt, "ctas_fed mysql sync rows",
										ALLOCSET_DEFAULT_SIZES);
	CtasSyncBatchInit(&st->batch, t,
					  AllocSetContextCreate(cxt, "ctas_fed mysql sync batch",
											ALLOCSET_DEFAULT_SIZES),
					  psprintf("\"%s\"", CtasMyDisplay(t->schema, t->table)));
	build_sql(t, st);
	t->private = st;

	st->conn = CtasMyConnect(t->catalog, cxt, false);
	/* the batch table is a temporary table of the synced table's database */
	CtasMyExec(st->conn, psprintf("USE %s", CtasMyQuoteIdent(t->schema)),
			   "use the database of the synced table");
	CtasMyExec(st->conn,
			   psprintf("CREATE TABLE IF NOT EXISTS %s "
						"(job VARCHAR(255) NOT NULL PRIMARY KEY, "
						"lsn BIGINT UNSIGNED NOT NULL) "
						"ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 "
						"COLLATE = utf8mb4_bin", st->progress),
			   "create the sync progress table");

	/* rows and progress must commit together */
	tables[0] = t->table;
	tables[1] = PROGRESS_TABLE;
	names[0] = "synced table";
	names[1] = "sync progress table";
	for (i = 0; i < 2; i++)
	{
		char	   *engine = table_engine(st->conn, t->schema, tables[i]);

		if (engine == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("table \"%s\" does not exist in catalog \"%s\"",
							CtasMyDisplay(t->schema, tables[i]),
							t->catalog->name)));
		if (pg_strcasecmp(engine, "InnoDB") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("%s \"%s\" of catalog \"%s\" uses the storage engine %s",
							names[i], CtasMyDisplay(t->schema, tables[i]),
							t->catalog->name, engine),
					 errdetail("A sync commits its rows and its progress in one transaction, which needs InnoDB."),
					 errhint("ALTER TABLE %s ENGINE = InnoDB on the MySQL server.",
							 CtasMyQname(t->schema, tables[i]))));
	}

	CtasMyExec(st->conn,
			   psprintf("CREATE TEMPORARY TABLE " BATCH_TABLE " ("
						KIND_COLUMN " CHAR(1) NULL, "
						ORDER_COLUMN " INT NULL, "
						UNCHANGED_COLUMN " TEXT NULL) ENGINE = InnoDB "
						"SELECT %s FROM %s LIMIT 0",
						st->column_list, st->qualified),
			   "create the sync batch table");
	MemoryContextSwitchTo(oldcxt);
}

/*
 * my_sync_applied_lsn
 *		The end of the last source transaction the remote has committed for
 *		this job, 0 when none.
 */
static uint64
my_sync_applied_lsn(CtasSyncTarget *t)
{
	MySyncState *st = (MySyncState *) t->private;
	List	   *rows;
	char	  **f;

	rows = CtasMyQuery(st->conn,
					   psprintf("SELECT lsn FROM %s WHERE job = %s",
								st->progress, CtasMyLiteral(t->job_key)),
					   "read the sync progress", NULL);
	if (rows == NIL)
		return 0;
	f = linitial(rows);
	return f[0] ? strtou64(f[0], NULL, 10) : 0;
}

static void
my_sync_begin(CtasSyncTarget *t)
{
	MySyncState *st = (MySyncState *) t->private;

	CtasMyExec(st->conn, "START TRANSACTION", "start the sync transaction");
}

/* ------------------------------------------------------------------------
 * Loads
 * ------------------------------------------------------------------------
 */

/*
 * load_chunk
 *		One LOAD DATA of the chunk's rows with the clauses given; the server
 *		must take every row without a warning.  The chunk is empty after.
 */
static void
load_chunk(CtasSyncTarget *t, const char *clauses)
{
	MySyncState *st = (MySyncState *) t->private;
	unsigned int warnings = 0;
	uint64		n;

	if (st->chunk_rows == 0)
		return;
	CtasMyLoadStart(st->conn, clauses, st->chunk.data, st->chunk.len);
	n = CtasMyLoadFinish(st->conn, &warnings);
	if (warnings > 0 || n != st->chunk_rows)
	{
		char	   *w = warnings > 0 ? CtasMyFirstWarning(st->conn) : NULL;

		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("MySQL catalog \"%s\" did not take the rows of the sync into \"%s\" exactly",
						t->catalog->name, CtasMyDisplay(t->schema, t->table)),
				 errdetail_internal("It took " UINT64_FORMAT " of " UINT64_FORMAT " rows with %u warning(s)%s%s.",
									n, st->chunk_rows, warnings,
									w ? "; the first: " : "", w ? w : "")));
	}
	resetStringInfo(&st->chunk);
	st->chunk_rows = 0;
	MemoryContextReset(st->tmp_cxt);
}

/* the LOAD DATA text of the row's columns, tab-separated, into the chunk */
static void
put_columns(MySyncState *st, int ncolumns, Datum *values, bool *nulls)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(st->tmp_cxt);
	int			i;

	for (i = 0; i < ncolumns; i++)
	{
		if (i > 0)
			appendStringInfoChar(&st->chunk, '\t');
		CtasMyPutValue(&st->cols[i], &st->chunk, values[i], nulls[i]);
	}
	MemoryContextSwitchTo(oldcxt);
}

/* ------------------------------------------------------------------------
 * The batch
 * ------------------------------------------------------------------------
 */

/* apply the batch now if it is large, in the same remote transaction */
static void
batch_bound(CtasSyncTarget *t)
{
	MySyncState *st = (MySyncState *) t->private;

	if (CtasSyncBatchFull(&st->batch, BATCH_KEYS))
		apply_batch(t);
}

/*
 * my_sync_upsert
 *		The row as it is now becomes the net change of its key.  Columns in
 *		unchanged (NULL: none) keep their value: the batch's earlier row of
 *		the key, else the remote row's.
 */
static void
my_sync_upsert(CtasSyncTarget *t, Datum *values, bool *nulls,
			   const bool *unchanged)
{
	MySyncState *st = (MySyncState *) t->private;

	CtasSyncBatchUpsert(&st->batch, values, nulls, unchanged);
	batch_bound(t);
}

/*
 * my_sync_delete
 *		The deletion of the key becomes its net change.
 */
static void
my_sync_delete(CtasSyncTarget *t, Datum *keys)
{
	MySyncState *st = (MySyncState *) t->private;

	CtasSyncBatchDelete(&st->batch, keys);
	batch_bound(t);
}

/*
 * my_sync_truncate
 *		Every change before it is void: forget the batch, delete every row
 *		in the remote transaction.
 */
static void
my_sync_truncate(CtasSyncTarget *t)
{
	MySyncState *st = (MySyncState *) t->private;

	CtasSyncBatchReset(&st->batch);
	CtasMyExec(st->conn, psprintf("DELETE FROM %s", st->qualified),
			   "empty the synced table");
}

/*
 * apply_batch
 *		Load the batch into the batch table and apply it to the remote
 *		table, in the remote transaction.  A batch with rows whose
 *		unchanged columns the remote keeps is first checked to find each
 *		row.  The batch and the batch table are empty after.  Can ERROR.
 */
static void
apply_batch(CtasSyncTarget *t)
{
	MySyncState *st = (MySyncState *) t->private;
	HASH_SEQ_STATUS scan;
	CtasSyncBatchEntry *entry;
	uint64		rows = 0;
	uint64		unchanged_rows = 0;
	uint64		deletes = 0;

	if (CtasSyncBatchEmpty(&st->batch))
	{
		CtasSyncBatchReset(&st->batch);
		return;
	}
	Assert(st->chunk_rows == 0);
	hash_seq_init(&scan, st->batch.hash);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		put_columns(st, t->ncolumns, entry->values, entry->nulls);
		appendStringInfo(&st->chunk, "\t%c\t%d\t", entry->kind, entry->order);
		if (entry->unchanged != NULL)
		{
			int			c;

			for (c = 0; c < t->ncolumns; c++)
				appendStringInfoChar(&st->chunk, entry->unchanged[c] ? 't' : 'f');
			unchanged_rows++;
		}
		else
			appendStringInfoString(&st->chunk, "\\N");
		appendStringInfoChar(&st->chunk, '\n');
		st->chunk_rows++;
		deletes += entry->kind == CTAS_SYNC_BATCH_DELETE;
		rows++;
		if (st->chunk.len >= MY_CHUNK_BYTES)
			load_chunk(t, st->batch_load);
	}
	load_chunk(t, st->batch_load);
	CtasSyncBatchReset(&st->batch);

	if (unchanged_rows > 0)
	{
		List	   *res;
		uint64		found;

		/* a value not sent cannot be made up: the row must be there */
		res = CtasMyQuery(st->conn, st->count_unchanged,
						  "count the rows that keep unchanged values", NULL);
		found = res ? strtou64(((char **) linitial(res))[0], NULL, 10) : 0;
		CtasSyncBatchCheckKept(&st->batch, unchanged_rows, found);
		if (st->apply_unchanged != NULL)
			CtasMyExec(st->conn, st->apply_unchanged,
					   "apply the sync's rows with unchanged values");
	}
	if (deletes > 0)
		CtasMyExec(st->conn, st->apply_delete, "apply the sync's deletes");
	if (rows > deletes + unchanged_rows)
		CtasMyExec(st->conn, st->apply_upsert, "apply the sync's upserts");
	CtasMyExec(st->conn, "DELETE FROM " BATCH_TABLE,
			   "empty the sync batch table");
}

/*
 * my_sync_copy_row
 *		A row of the initial copy: into the chunk, loaded into the table by
 *		one LOAD DATA when full (the batch applied first, when it holds
 *		changes).
 */
static void
my_sync_copy_row(CtasSyncTarget *t, Datum *values, bool *nulls)
{
	MySyncState *st = (MySyncState *) t->private;

	if (st->batch.hash != NULL)
		apply_batch(t);
	put_columns(st, t->ncolumns, values, nulls);
	appendStringInfoChar(&st->chunk, '\n');
	st->chunk_rows++;
	if (st->chunk.len >= MY_CHUNK_BYTES)
		load_chunk(t, st->copy_load);
}

/*
 * my_sync_commit
 *		The initial copy's last chunk, the batch, lsn as the job's progress,
 *		and COMMIT: rows and progress in one InnoDB transaction.
 */
static void
my_sync_commit(CtasSyncTarget *t, uint64 lsn)
{
	MySyncState *st = (MySyncState *) t->private;

	load_chunk(t, st->copy_load);
	apply_batch(t);
	CtasMyExec(st->conn,
			   psprintf("INSERT INTO %s (job, lsn) VALUES (%s, " UINT64_FORMAT ") "
						"ON DUPLICATE KEY UPDATE lsn = VALUES(lsn)",
						st->progress, CtasMyLiteral(t->job_key), lsn),
			   "store the sync progress");
	CtasMyExec(st->conn, "COMMIT", "commit the sync transaction");
}

/*
 * my_sync_close
 *		Close the connection (its context's reset callback); a remote
 *		transaction still open rolls back, and the batch is forgotten.
 */
static void
my_sync_close(CtasSyncTarget *t)
{
	MySyncState *st = (MySyncState *) t->private;

	if (st == NULL)
		return;
	t->private = NULL;
	MemoryContextDelete(st->cxt);
}
