/*-------------------------------------------------------------------------
 *
 * sync.c
 *		  Continuous sync into a ClickHouse catalog: the CtasSyncApply of the
 *		  ClickHouse target.
 *
 * ClickHouse has no transactions and no upsert: a synced table is a
 * ReplacingMergeTree(_version) ordered by the key, with two more columns,
 *
 *	_version	UInt64: the commit lsn of the source transaction
 *	_deleted	UInt8: 1 for a row that says "this key is gone"
 *
 * and a reader sees the query's result with
 * SELECT ... FROM t FINAL WHERE _deleted = 0.  A change is a new row with a
 * higher version: an upsert writes every column, a delete the key only
 * (the other columns take their defaults), TRUNCATE writes a delete row for
 * every key there is (INSERT ... SELECT ... FINAL).  Versions come from the
 * source's WAL, so applying a batch twice writes the same rows twice, which
 * FINAL shows once: the progress row (the end lsn of the batch, in
 * `<database>`._ctas_fed_sync_progress) is written after the rows, and a
 * worker that dies between them applies the batch again, harmlessly.
 *
 * Versions.  ReplacingMergeTree keeps the row of the highest version of a
 * key, and of equal versions one it does not define, so no two rows of a
 * key may share a version.  The changes of one source transaction are
 * therefore kept, encoded RowBinary, and written when the transaction
 * ends, only the last change of each key, all with its commit lsn as
 * version: a key has at most one row per transaction, and commit lsns grow
 * in commit order.  They are kept in a tuplesort by (encoded key, sequence
 * number in the transaction, descending), which holds at most work_mem in
 * memory and spills the rest to a temporary file, so that a transaction of
 * any size is applied in bounded memory; the sorted changes are read once
 * at the end, the first of each key written.  A tuplesort rather than
 * writing what a bounded buffer holds whenever it fills: the rows of a key
 * would then share a version across INSERTs, correct only if
 * ReplacingMergeTree kept the last inserted of equal versions, which its
 * merge code does ("last row with maximum version",
 * ReplacingSortedBlockInputStream) but its documentation does not promise;
 * and a DDL the sync cannot follow, found in the middle of a source
 * transaction, must leave nothing of it in the table (sync/apply.c), which
 * holds only if nothing of a transaction is written before its end.
 * Commit records are more than 2 bytes long, so
 * the versions just below a commit lsn belong to no other transaction:
 *
 *	L		the rows of a transaction committed at lsn L
 *	L - 1	the delete rows of a TRUNCATE in it (what came before it in the
 *			transaction is dropped from memory, what comes after has L)
 *	C - 2	the rows of the initial copy at the slot's consistent point C;
 *			a transaction that commits at C itself is not in the copy's
 *			snapshot but is streamed, and must win
 *	C - 3	the delete rows of the TRUNCATE that starts the copy
 *
 * The worker calls truncate before copy_row and before the changes of a
 * transaction alike, so which of L - 1 and C - 3 a TRUNCATE gets is known
 * only at the next call: it is sent then.
 *
 * Protocol of one batch (the initial copy is one batch after truncate):
 *
 *	begin		nothing
 *	upsert		encode the row and its key, put them in the tuplesort
 *	delete		encode the key, put it in the tuplesort
 *	truncate	send what earlier transactions left pending, forget this
 *				transaction's changes, remember that a TRUNCATE is due
 *	copy_row	send the due TRUNCATE (C - 3), encode the row into a
 *				streamed INSERT of all columns (C - 2)
 *	commit		write the last transaction's changes: the due TRUNCATE
 *				(L - 1), then the last change of each key from the sorted
 *				changes, rows into the streamed INSERT, keys into a buffer
 *				of delete rows (sent early when it is large); finish the
 *				INSERT, send the delete rows, then the progress row
 *
 * A change of another commit lsn than the kept ones writes them first, as
 * commit does.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/sync.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tupdesc.h"
#include "access/xact.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplesort.h"

#include "clickhouse.h"

#define PROGRESS_TABLE	"_ctas_fed_sync_progress"
#define VERSION_COLUMN	"_version"
#define DELETED_COLUMN	"_deleted"

/* delete rows buffered before they are sent even inside a transaction */
#define DELETES_MAX		(8 * 1024 * 1024)

/*
 * The columns of a kept change in the tuplesort: the key (RowBinary), minus
 * its sequence number in the transaction (so that the ascending sort puts
 * the last change of a key first), whether it deletes the key, the row
 * (all columns, RowBinary; NULL for a delete)
 */
#define CHANGE_KEY		1
#define CHANGE_SEQ		2
#define CHANGE_DELETED	3
#define CHANGE_ROW		4
#define CHANGE_NATTS	4

typedef struct ChSyncState
{
	CtasChHttp *http;
	char	   *qtable;			/* `db`.`table` */
	char	   *progress;		/* `db`.`_ctas_fed_sync_progress` */
	ChColumn   *cols;			/* encoders of the query's columns */
	ChColumn   *keycols;		/* encoders of the key columns */
	char	   *insert_sql;		/* INSERT of all columns */
	char	   *delete_sql;		/* INSERT of the key columns */
	char	   *truncate_head;	/* INSERT ... SELECT keys, before the version */
	char	   *truncate_tail;	/* after it */
	CtasChHttpStream *stream;		/* the open INSERT of rows, or NULL */
	MemoryContext stream_cxt;
	StringInfoData deletes;		/* RowBinary delete rows, not sent yet */
	int		   *keypos;			/* place of each key among the columns */
	uint64		lsn;			/* change_lsn of the kept changes */
	Tuplesortstate *changes;	/* the kept changes, or NULL for none */
	int64		nchanges;		/* put into it */
	TupleDesc	change_desc;	/* of a kept change */
	TupleTableSlot *change_slot;	/* virtual, to put a change */
	TupleTableSlot *sorted_slot;	/* minimal, to read one back */
	bool		truncated;		/* a TRUNCATE at lsn is due */
	MemoryContext txn_cxt;		/* the tuplesort */
	MemoryContext change_cxt;	/* one change, reset after each */
	StringInfoData lastkey;		/* the key last written */
	StringInfoData rowbuf;		/* one encoded row */
	StringInfoData keybuf;		/* one encoded key */
	MemoryContext cxt;
} ChSyncState;

static void ch_sync_prepare(CtasLoad *load);
static void ch_sync_open(CtasSyncTarget *t);
static uint64 ch_sync_applied_lsn(CtasSyncTarget *t);
static void ch_sync_begin(CtasSyncTarget *t);
static void ch_sync_upsert(CtasSyncTarget *t, Datum *values, bool *nulls,
						   const bool *unchanged);
static void ch_sync_copy_row(CtasSyncTarget *t, Datum *values, bool *nulls);
static void ch_sync_delete(CtasSyncTarget *t, Datum *keys);
static void ch_sync_truncate(CtasSyncTarget *t);
static void ch_sync_commit(CtasSyncTarget *t, uint64 lsn);
static void ch_sync_close(CtasSyncTarget *t);

const CtasSyncApply CtasChSyncApply = {
	.prepare = ch_sync_prepare,
	.open = ch_sync_open,
	.applied_lsn = ch_sync_applied_lsn,
	.begin = ch_sync_begin,
	.upsert = ch_sync_upsert,
	.copy_row = ch_sync_copy_row,
	.delete = ch_sync_delete,
	.truncate = ch_sync_truncate,
	.commit = ch_sync_commit,
	.close = ch_sync_close,
	.rebuild = CtasChSyncRebuild,	/* verify.c */
	.rebuilt = CtasChSyncRebuilt,
	.verify_local = CtasChSyncVerifyLocal,
	.verify_remote = CtasChSyncVerifyRemote,
};

/*
 * ch_sync_prepare
 *		At statement time: the table is a ReplacingMergeTree(_version)
 *		ordered by the key (load->opts.primary_key, set by sync/statement.c), with
 *		the columns _version and _deleted after the query's.  The table
 *		options that would change that are refused.
 */
static void
ch_sync_prepare(CtasLoad *load)
{
	const ChOptions *given = CtasChOptions(load);
	ChOptions  *o;
	const char *bad = NULL;
	CtasColumn *cols;
	int			i;

	if (given->engine)
		bad = "engine";
	else if (given->order_by)
		bad = "order_by";
	else if (given->partition_by)
		bad = "partition_by";
	if (bad)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" cannot be combined with the option \"sync\"", bad),
				 errdetail("A synced ClickHouse table is a ReplacingMergeTree(_version) ordered by the key of the source, unpartitioned.")));
	for (i = 0; i < load->ncolumns; i++)
	{
		if (strcmp(load->columns[i].name, VERSION_COLUMN) == 0 ||
			strcmp(load->columns[i].name, DELETED_COLUMN) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_COLUMN),
					 errmsg("column name \"%s\" is reserved in a synced ClickHouse table",
							load->columns[i].name),
					 errhint("Rename the column in the query.")));
	}

	if (load->opts.target_opts == NULL)
		load->opts.target_opts = MemoryContextAllocZero(load->cxt,
														sizeof(ChOptions));
	o = (ChOptions *) load->opts.target_opts;
	o->engine = MemoryContextStrdup(load->cxt,
									"ReplacingMergeTree(" VERSION_COLUMN ")");
	cols = MemoryContextAllocZero(load->cxt,
								  sizeof(CtasColumn) * (load->ncolumns + 2));
	memcpy(cols, load->columns, sizeof(CtasColumn) * load->ncolumns);
	for (i = load->ncolumns; i < load->ncolumns + 2; i++)
	{
		CtasColumn *c = &cols[i];
		bool		version = i == load->ncolumns;

		c->name = version ? VERSION_COLUMN : DELETED_COLUMN;
		c->typid = c->basetypid = INT8OID;
		c->typmod = c->basetypmod = -1;
		c->remote_type = version ? "UInt64" : "UInt8";
		c->overridden = true;
	}
	load->columns = cols;
	load->ncolumns += 2;
}

/* the remote types of columns of `db`.`table`, in the order of names */
static char **
remote_types(CtasSyncTarget *t, ChSyncState *st, int n, char **names)
{
	char	   *body;
	List	   *rows;
	int			nf;
	char	  **types = palloc0(sizeof(char *) * Max(n, 1));
	int			i;

	body = CtasChHttpQuery(st->http,
						   psprintf("SELECT name, type FROM system.columns WHERE database = %s AND table = %s",
									CtasChLit(t->schema), CtasChLit(t->table)),
						   "read the columns of the synced table");
	rows = CtasChTsv(body, &nf);
	for (i = 0; i < n; i++)
	{
		ListCell   *lc;

		foreach(lc, rows)
		{
			char	  **f = lfirst(lc);

			if (nf == 2 && f[0] && strcmp(f[0], names[i]) == 0)
				types[i] = f[1];
		}
		if (types[i] == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" does not exist in table \"%s\" of catalog \"%s\"",
							names[i], CtasChDisplay(t->schema, t->table),
							t->catalog->name)));
	}
	return types;
}

/* encoders of n columns named names, of local types types */
static ChColumn *
encoders(CtasSyncTarget *t, ChSyncState *st, int n, char **names, Oid *types)
{
	CtasLoad	load;
	int			i;

	memset(&load, 0, sizeof(load));
	load.catalog = t->catalog;
	load.cxt = st->cxt;
	load.ncolumns = n;
	load.columns = palloc0(sizeof(CtasColumn) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		load.columns[i].name = names[i];
		load.columns[i].typid = types[i];
		load.columns[i].typmod = -1;
		load.columns[i].basetypmod = -1;
		load.columns[i].basetypid = getBaseTypeAndTypmod(types[i],
														 &load.columns[i].basetypmod);
	}
	return CtasChSetupColumns(&load, remote_types(t, st, n, names));
}

/* INSERT INTO qtable (names..., _version, _deleted) FORMAT RowBinary */
static char *
insert_sql(ChSyncState *st, int n, char **names)
{
	StringInfoData sql;
	int			i;

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (", st->qtable);
	for (i = 0; i < n; i++)
	{
		CtasChAppendIdent(&sql, names[i]);
		appendStringInfoString(&sql, ", ");
	}
	appendStringInfoString(&sql, VERSION_COLUMN ", " DELETED_COLUMN ") FORMAT RowBinary");
	return sql.data;
}

/*
 * ch_sync_open
 *		The HTTP client, the encoders of the remote table's columns (types
 *		read from the server), the place of each key among the columns, the
 *		progress table.  State in the current memory context.
 */
static void
ch_sync_open(CtasSyncTarget *t)
{
	ChSyncState *st = palloc0(sizeof(ChSyncState));
	StringInfoData sql;
	int			i;

	st->cxt = CurrentMemoryContext;
	t->private = st;
	st->http = CtasChHttpCreate(t->catalog, st->cxt);
	st->qtable = CtasChQname(t->schema, t->table);
	st->progress = CtasChQname(t->schema, PROGRESS_TABLE);
	st->cols = encoders(t, st, t->ncolumns, t->columns, t->types);
	st->keycols = encoders(t, st, t->nkeys, t->keys, t->key_types);
	st->insert_sql = insert_sql(st, t->ncolumns, t->columns);
	st->delete_sql = insert_sql(st, t->nkeys, t->keys);

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (", st->qtable);
	for (i = 0; i < t->nkeys; i++)
	{
		CtasChAppendIdent(&sql, t->keys[i]);
		appendStringInfoString(&sql, ", ");
	}
	appendStringInfoString(&sql, VERSION_COLUMN ", " DELETED_COLUMN ") SELECT ");
	for (i = 0; i < t->nkeys; i++)
	{
		CtasChAppendIdent(&sql, t->keys[i]);
		appendStringInfoString(&sql, ", ");
	}
	appendStringInfoString(&sql, "toUInt64(");
	st->truncate_head = sql.data;
	st->truncate_tail = psprintf("), 1 FROM %s FINAL WHERE " DELETED_COLUMN " = 0",
								 st->qtable);
	initStringInfo(&st->deletes);
	initStringInfo(&st->rowbuf);
	initStringInfo(&st->keybuf);
	st->txn_cxt = AllocSetContextCreate(st->cxt, "ctas_fed sync transaction",
										ALLOCSET_DEFAULT_SIZES);
	st->change_cxt = AllocSetContextCreate(st->cxt, "ctas_fed sync change",
										   ALLOCSET_SMALL_SIZES);
	initStringInfo(&st->lastkey);
	st->change_desc = CreateTemplateTupleDesc(CHANGE_NATTS);
	TupleDescInitEntry(st->change_desc, CHANGE_KEY, "key", BYTEAOID, -1, 0);
	TupleDescInitEntry(st->change_desc, CHANGE_SEQ, "seq", INT8OID, -1, 0);
	TupleDescInitEntry(st->change_desc, CHANGE_DELETED, "deleted", BOOLOID,
					   -1, 0);
	TupleDescInitEntry(st->change_desc, CHANGE_ROW, "row", BYTEAOID, -1, 0);
	st->change_slot = MakeSingleTupleTableSlot(st->change_desc,
											   &TTSOpsVirtual);
	st->sorted_slot = MakeSingleTupleTableSlot(st->change_desc,
											   &TTSOpsMinimalTuple);
	st->keypos = palloc(sizeof(int) * Max(t->nkeys, 1));
	for (i = 0; i < t->nkeys; i++)
	{
		int			j;

		st->keypos[i] = -1;
		for (j = 0; j < t->ncolumns; j++)
		{
			if (strcmp(t->columns[j], t->keys[i]) == 0)
				st->keypos[i] = j;
		}
		if (st->keypos[i] < 0 || t->types[st->keypos[i]] != t->key_types[i])
			elog(ERROR, "key column \"%s\" of the synced table is not a column of the query",
				 t->keys[i]);
	}

	CtasChHttpQuery(st->http,
					psprintf("CREATE TABLE IF NOT EXISTS %s (job String, lsn UInt64) "
							 "ENGINE = ReplacingMergeTree(lsn) ORDER BY job",
							 st->progress),
					"create the progress table of continuous syncs");
}

static uint64
ch_sync_applied_lsn(CtasSyncTarget *t)
{
	ChSyncState *st = (ChSyncState *) t->private;
	char	   *body;

	body = CtasChHttpQuery(st->http,
						   psprintf("SELECT max(lsn) FROM %s WHERE job = %s",
									st->progress, CtasChLit(t->job_key)),
						   "read the progress of the sync");
	return CtasChParseCount(st->http, body, "read the progress of the sync");
}

/* _version and _deleted, RowBinary */
static void
put_version(StringInfo buf, uint64 version, bool deleted)
{
	char		b[9];
	int			i;

	for (i = 0; i < 8; i++)
		b[i] = (char) ((version >> (8 * i)) & 0xff);
	b[8] = deleted ? 1 : 0;
	appendBinaryStringInfo(buf, b, 9);
}

static void
ch_sync_begin(CtasSyncTarget *t)
{
}

/* the buffer of the streamed INSERT of rows, opened at the first row */
static StringInfo
stream_buffer(ChSyncState *st)
{
	if (st->stream == NULL)
	{
		st->stream_cxt = AllocSetContextCreate(st->cxt, "ctas_fed sync stream",
											   ALLOCSET_DEFAULT_SIZES);
		st->stream = CtasChHttpStreamOpen(st->http, st->insert_sql,
										  "insert synced rows", st->stream_cxt);
	}
	return CtasChHttpStreamBuffer(st->stream);
}

/* a row of all columns, encoded, into the streamed INSERT */
static void
stream_row(ChSyncState *st, const char *row, int len, uint64 version)
{
	StringInfo	buf = stream_buffer(st);

	appendBinaryStringInfo(buf, row, len);
	put_version(buf, version, false);
	if (buf->len >= CTAS_HTTP_STREAM_CHUNK)
		CtasChHttpStreamFlush(st->stream);
}

/* send the rows and the delete rows not sent yet */
static void
send_pending(CtasSyncTarget *t)
{
	ChSyncState *st = (ChSyncState *) t->private;

	if (st->stream != NULL)
	{
		CtasChHttpStreamFinish(st->stream);
		st->stream = NULL;
		MemoryContextDelete(st->stream_cxt);
		st->stream_cxt = NULL;
	}
	if (st->deletes.len > 0)
	{
		MemoryContext cxt = AllocSetContextCreate(st->cxt,
												  "ctas_fed sync stream",
												  ALLOCSET_DEFAULT_SIZES);
		CtasChHttpStream *stream = CtasChHttpStreamOpen(st->http, st->delete_sql,
														"insert delete rows", cxt);

		appendBinaryStringInfo(CtasChHttpStreamBuffer(stream), st->deletes.data,
							   st->deletes.len);
		CtasChHttpStreamFinish(stream);
		MemoryContextDelete(cxt);
		resetStringInfo(&st->deletes);
	}
}

/* the due TRUNCATE: a delete row of version for every key in the table */
static void
send_truncate(CtasSyncTarget *t, ChSyncState *st, uint64 version)
{
	send_pending(t);
	CtasChHttpQuery(st->http,
					psprintf("%s" UINT64_FORMAT "%s", st->truncate_head,
							 version, st->truncate_tail),
					"insert delete rows for a TRUNCATE");
	st->truncated = false;
}

/* forget the kept changes */
static void
forget_changes(ChSyncState *st)
{
	if (st->changes != NULL)
		tuplesort_end(st->changes);
	st->changes = NULL;
	st->nchanges = 0;
	MemoryContextReset(st->txn_cxt);
}

/* the bytes of a bytea column of the change in st->sorted_slot */
static bytea *
change_bytes(ChSyncState *st, int attnum)
{
	return DatumGetByteaPP(st->sorted_slot->tts_values[attnum - 1]);
}

/*
 * write_changes
 *		Write what the transaction at st->lsn left: its TRUNCATE, then the
 *		last change of each key, all of version st->lsn, rows into the
 *		streamed INSERT, keys into the delete rows.  ERROR on a failed
 *		request.
 */
static void
write_changes(CtasSyncTarget *t, ChSyncState *st)
{
	bool		first = true;

	if (st->truncated)
		send_truncate(t, st, st->lsn - 1);
	if (st->changes == NULL)
		return;
	tuplesort_performsort(st->changes);
	while (tuplesort_gettupleslot(st->changes, true, false, st->sorted_slot,
								  NULL))
	{
		bytea	   *key;

		CHECK_FOR_INTERRUPTS();
		slot_getallattrs(st->sorted_slot);
		key = change_bytes(st, CHANGE_KEY);
		/* a key's first change in the sort order is its last one */
		if (!first && st->lastkey.len == VARSIZE_ANY_EXHDR(key) &&
			memcmp(st->lastkey.data, VARDATA_ANY(key), st->lastkey.len) == 0)
			continue;
		first = false;
		resetStringInfo(&st->lastkey);
		appendBinaryStringInfo(&st->lastkey, VARDATA_ANY(key),
							   VARSIZE_ANY_EXHDR(key));
		if (DatumGetBool(st->sorted_slot->tts_values[CHANGE_DELETED - 1]))
		{
			appendBinaryStringInfo(&st->deletes, st->lastkey.data,
								   st->lastkey.len);
			put_version(&st->deletes, st->lsn, true);
			/* rows and delete rows of one version have distinct keys */
			if (st->deletes.len >= DELETES_MAX)
				send_pending(t);
		}
		else
		{
			bytea	   *row = change_bytes(st, CHANGE_ROW);

			stream_row(st, VARDATA_ANY(row), VARSIZE_ANY_EXHDR(row), st->lsn);
		}
	}
	ExecClearTuple(st->sorted_slot);
	forget_changes(st);
}

/* a change of another transaction than the kept changes writes them */
static void
switch_transaction(CtasSyncTarget *t, ChSyncState *st)
{
	if (t->change_lsn == st->lsn)
		return;
	write_changes(t, st);
	st->lsn = t->change_lsn;
}

/* a bytea of the bytes of buf, in the current memory context */
static bytea *
buf_bytea(StringInfo buf)
{
	bytea	   *b = palloc(VARHDRSZ + buf->len);

	SET_VARSIZE(b, VARHDRSZ + buf->len);
	memcpy(VARDATA(b), buf->data, buf->len);
	return b;
}

/*
 * keep_change
 *		Keep the change of the key encoded in st->keybuf, after the earlier
 *		ones of the transaction: deleted, or the row encoded in st->rowbuf.
 *		Into the tuplesort, begun at the first change, in txn_cxt, of at
 *		most work_mem; it spills to a temporary file of the current
 *		transaction's resource owner.
 */
static void
keep_change(ChSyncState *st, bool deleted)
{
	TupleTableSlot *slot = st->change_slot;
	MemoryContext oldcxt;

	if (st->changes == NULL)
	{
		AttrNumber	attnums[2] = {CHANGE_KEY, CHANGE_SEQ};
		Oid			operators[2] = {ByteaLessOperator, Int8LessOperator};
		Oid			collations[2] = {InvalidOid, InvalidOid};
		bool		nulls_first[2] = {false, false};

		oldcxt = MemoryContextSwitchTo(st->txn_cxt);
		st->changes = tuplesort_begin_heap(st->change_desc, 2, attnums,
										   operators, collations,
										   nulls_first, work_mem, NULL,
										   TUPLESORT_NONE);
		MemoryContextSwitchTo(oldcxt);
		st->nchanges = 0;
	}
	oldcxt = MemoryContextSwitchTo(st->change_cxt);
	ExecClearTuple(slot);
	slot->tts_values[CHANGE_KEY - 1] = PointerGetDatum(buf_bytea(&st->keybuf));
	slot->tts_isnull[CHANGE_KEY - 1] = false;
	slot->tts_values[CHANGE_SEQ - 1] = Int64GetDatum(-(++st->nchanges));
	slot->tts_isnull[CHANGE_SEQ - 1] = false;
	slot->tts_values[CHANGE_DELETED - 1] = BoolGetDatum(deleted);
	slot->tts_isnull[CHANGE_DELETED - 1] = false;
	slot->tts_values[CHANGE_ROW - 1] =
		deleted ? (Datum) 0 : PointerGetDatum(buf_bytea(&st->rowbuf));
	slot->tts_isnull[CHANGE_ROW - 1] = deleted;
	ExecStoreVirtualTuple(slot);
	tuplesort_puttupleslot(st->changes, slot);
	ExecClearTuple(slot);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(st->change_cxt);
}

/* encode the row into st->rowbuf */
static void
encode_row(CtasSyncTarget *t, ChSyncState *st, Datum *values, bool *nulls)
{
	int			i;

	resetStringInfo(&st->rowbuf);
	for (i = 0; i < t->ncolumns; i++)
		CtasChPutValue(&st->cols[i].enc, &st->rowbuf, values[i], nulls[i]);
}

static void
ch_sync_upsert(CtasSyncTarget *t, Datum *values, bool *nulls,
			   const bool *unchanged)
{
	ChSyncState *st = (ChSyncState *) t->private;
	int			k;

	if (unchanged != NULL)
		elog(ERROR, "unchanged values are not supported by this target yet");

	switch_transaction(t, st);
	encode_row(t, st, values, nulls);
	resetStringInfo(&st->keybuf);
	for (k = 0; k < t->nkeys; k++)
		CtasChPutValue(&st->keycols[k].enc, &st->keybuf,
					   values[st->keypos[k]], false);
	keep_change(st, false);
}

static void
ch_sync_copy_row(CtasSyncTarget *t, Datum *values, bool *nulls)
{
	ChSyncState *st = (ChSyncState *) t->private;

	if (st->truncated)
		send_truncate(t, st, t->change_lsn - 3);
	encode_row(t, st, values, nulls);
	stream_row(st, st->rowbuf.data, st->rowbuf.len, t->change_lsn - 2);
}

static void
ch_sync_delete(CtasSyncTarget *t, Datum *keys)
{
	ChSyncState *st = (ChSyncState *) t->private;
	int			k;

	switch_transaction(t, st);
	resetStringInfo(&st->keybuf);
	for (k = 0; k < t->nkeys; k++)
		CtasChPutValue(&st->keycols[k].enc, &st->keybuf, keys[k], false);
	keep_change(st, true);
}

static void
ch_sync_truncate(CtasSyncTarget *t)
{
	ChSyncState *st = (ChSyncState *) t->private;

	switch_transaction(t, st);
	forget_changes(st);
	send_pending(t);
	st->truncated = true;
}

/*
 * ch_sync_commit
 *		Write the kept changes, send what is pending, then the progress
 *		row: lsn is applied.
 */
static void
ch_sync_commit(CtasSyncTarget *t, uint64 lsn)
{
	ChSyncState *st = (ChSyncState *) t->private;

	write_changes(t, st);
	send_pending(t);
	CtasChHttpQuery(st->http,
					psprintf("INSERT INTO %s (job, lsn) VALUES (%s, " UINT64_FORMAT ")",
							 st->progress, CtasChLit(t->job_key), lsn),
					"store the progress of the sync");
}

static void
ch_sync_close(CtasSyncTarget *t)
{
	ChSyncState *st = (ChSyncState *) t->private;

	if (st == NULL)
		return;
	if (st->stream != NULL)
		CtasChHttpStreamClose(st->stream);
	st->stream = NULL;

	/*
	 * The kept changes of a source transaction that will not be applied.
	 * After an abort, the transaction's resource owner closed the
	 * tuplesort's temporary file and tuplesort_end must not touch it; its
	 * memory goes with the worker.
	 */
	if (st->changes != NULL && IsTransactionState())
		tuplesort_end(st->changes);
	st->changes = NULL;
	t->private = NULL;
}
