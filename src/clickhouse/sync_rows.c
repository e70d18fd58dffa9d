/*-------------------------------------------------------------------------
 *
 * sync_rows.c
 *		  Continuous sync into a ClickHouse catalog: the rows of a batch,
 *		  kept and written for the CtasSyncApply of sync.c.
 *
 * sync.c holds the routine, the state of a synced table (ChSyncState,
 * clickhouse.h) and the protocol of a batch and of its versions; this file
 * holds what the routine's upsert, delete, truncate, copy_row and commit do
 * with the rows, on one state (one shard's, for a cluster catalog):
 *
 *	encode		a change's row and key into RowBinary (EncodeRow); with
 *				unchanged values, each column as its length and bytes
 *				(EncodeSegments), so that a missing one can be filled in
 *	keep		a change into the transaction's tuplesort by (encoded key,
 *				sequence number, descending), in bounded memory
 *				(KeepChange); a change of another commit lsn first writes
 *				the kept ones (SwitchTransaction)
 *	write		at the end of the transaction (WriteChanges): the due
 *				TRUNCATE's delete rows (L - 1), then the last change of each
 *				key, version L, rows into the batch's rows (StreamRow),
 *				streamed once they pass a chunk, keys into a buffer of
 *				delete rows sent early when it passes DELETES_MAX; a row with unchanged values is held until the
 *				earlier change of its key or the remote row (sync_keep.c,
 *				KEEP_BATCH keys at once) completes it
 *	send		send the rows (one request on the catalog client's own
 *				transfer) or finish their streamed INSERT, send the delete
 *				rows (SendPending); a
 *				TRUNCATE's delete rows of every key there is
 *				(SendTruncate); forget a transaction's changes
 *				(ForgetChanges)
 *
 * Nothing of a transaction is sent before its end, and the progress row is
 * sync.c's, written after all of this.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/sync_rows.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tupdesc.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplesort.h"

#include "clickhouse.h"

/* delete rows buffered before they are sent even inside a transaction */
#define DELETES_MAX		(8 * 1024 * 1024)

/* a buffer of rows of this capacity or less is kept from batch to batch */
#define KEEP_BUFFER		(64 * 1024)

/* rows completed from the remote row at once (sync_keep.c) */
#define KEEP_BATCH		1000
/* the length of a column of a row whose value the change did not carry */
#define SEG_UNCHANGED	0xFFFFFFFF

static void split_segments(CtasSyncTarget *t, const char *row, int len,
						   ChKeptRow *r, bool fill_only);
static void stream_segments(CtasSyncTarget *t, ChSyncState *st,
							const char *row, int len, uint64 version);
static void finish_held(CtasSyncTarget *t, ChSyncState *st);
static void hold_change(CtasSyncTarget *t, ChSyncState *st);
static void flush_kept(CtasSyncTarget *t, ChSyncState *st);

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

/*
 * The rows of a batch are kept in st->rows and sent with one request on
 * the catalog client's own transfer when the batch commits (or a TRUNCATE,
 * a schema change or a lookup of kept rows needs them sent); only the rows
 * of a state that pass CTAS_HTTP_STREAM_CHUNK go into a streamed INSERT of
 * their own, then chunk by chunk.  A batch touching many tables thus holds
 * no transfer, connection or 1 MB upload buffer per table while it is
 * read, and makes none per table and batch: the worker's memory stays the
 * same batch after batch.
 */
static StringInfo
rows_buffer(ChSyncState *st)
{
	return st->stream ? CtasChHttpStreamBuffer(st->stream) : &st->rows;
}

/* empty buf; a large one is given back rather than kept for every table */
static void
release_buffer(ChSyncState *st, StringInfo buf)
{
	if (buf->maxlen > KEEP_BUFFER)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(st->cxt);

		pfree(buf->data);
		initStringInfo(buf);
		MemoryContextSwitchTo(oldcxt);
	}
	else
		resetStringInfo(buf);
}

/* after rows went into rows_buffer(st): past a chunk, they are streamed */
static void
rows_appended(ChSyncState *st)
{
	StringInfo	buf;

	if (st->stream == NULL)
	{
		if (st->rows.len < CTAS_HTTP_STREAM_CHUNK)
			return;
		st->stream_cxt = AllocSetContextCreate(st->cxt, "ctas_fed sync stream",
											   ALLOCSET_DEFAULT_SIZES);
		st->stream = CtasChHttpStreamOpen(st->http, st->insert_sql,
										  "insert synced rows", st->stream_cxt);
		appendBinaryStringInfo(CtasChHttpStreamBuffer(st->stream),
							   st->rows.data, st->rows.len);
		release_buffer(st, &st->rows);
	}
	buf = CtasChHttpStreamBuffer(st->stream);
	if (buf->len >= CTAS_HTTP_STREAM_CHUNK)
		CtasChHttpStreamFlush(st->stream);
}

/* a row of all columns, encoded, into the rows of the batch */
void
CtasChSyncStreamRow(ChSyncState *st, const char *row, int len, uint64 version)
{
	StringInfo	buf = rows_buffer(st);

	appendBinaryStringInfo(buf, row, len);
	put_version(buf, version, false);
	rows_appended(st);
}

/* send the rows and the delete rows not sent yet */
void
CtasChSyncSendPending(ChSyncState *st)
{
	if (st->stream != NULL)
	{
		CtasChHttpStreamFinish(st->stream);
		st->stream = NULL;
		MemoryContextDelete(st->stream_cxt);
		st->stream_cxt = NULL;
	}
	else if (st->rows.len > 0)
		CtasChHttpInsert(st->http, st->insert_sql, st->rows.data,
						 st->rows.len, "insert synced rows");
	release_buffer(st, &st->rows);
	if (st->deletes.len > 0)
		CtasChHttpInsert(st->http, st->delete_sql, st->deletes.data,
						 st->deletes.len, "insert delete rows");
	release_buffer(st, &st->deletes);
}

/* the due TRUNCATE: a delete row of version for every key in the table */
void
CtasChSyncSendTruncate(CtasSyncTarget *t, ChSyncState *st, uint64 version)
{
	CtasChSyncSendPending(st);
	CtasChHttpQuery(st->http,
				  psprintf("%s" UINT64_FORMAT "%s", st->truncate_head,
						   version, st->truncate_tail),
				  "insert delete rows for a TRUNCATE");
	st->truncated = false;
}

/* forget the kept changes */
void
CtasChSyncForgetChanges(ChSyncState *st)
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
 * CtasChSyncWriteChanges
 *		Write what the transaction at st->lsn left: its TRUNCATE, then the
 *		last change of each key, all of version st->lsn, rows into the
 *		streamed INSERT, keys into the delete rows.  ERROR on a failed
 *		request.
 */
void
CtasChSyncWriteChanges(CtasSyncTarget *t, ChSyncState *st)
{
	bool		first = true;

	if (st->truncated)
		CtasChSyncSendTruncate(t, st, st->lsn - 1);
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
		{
			/* an earlier change of a held key: its values, if it has them */
			if (st->held != NULL)
			{
				bytea	   *row;

				if (DatumGetBool(st->sorted_slot->tts_values[CHANGE_DELETED - 1]))
					elog(ERROR, "a change with unchanged values after a delete of its key");
				row = change_bytes(st, CHANGE_ROW);
				split_segments(t, VARDATA_ANY(row), VARSIZE_ANY_EXHDR(row),
							   st->held, true);
			}
			continue;
		}
		finish_held(t, st);
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
				CtasChSyncSendPending(st);
		}
		else if (!st->sorted_slot->tts_isnull[CHANGE_KEYTEXT - 1])
			hold_change(t, st);
		else
		{
			bytea	   *row = change_bytes(st, CHANGE_ROW);

			stream_segments(t, st, VARDATA_ANY(row), VARSIZE_ANY_EXHDR(row),
							st->lsn);
		}
	}
	finish_held(t, st);
	flush_kept(t, st);
	ExecClearTuple(st->sorted_slot);
	CtasChSyncForgetChanges(st);
}

/* a change of another transaction than the kept changes writes them */
void
CtasChSyncSwitchTransaction(CtasSyncTarget *t, ChSyncState *st)
{
	if (t->change_lsn == st->lsn)
		return;
	CtasChSyncWriteChanges(t, st);
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
 * CtasChSyncKeepChange
 *		Keep the change of the key encoded in st->keybuf, after the earlier
 *		ones of the transaction: deleted, or the row encoded in st->rowbuf.
 *		Into the tuplesort, begun at the first change, in txn_cxt, of at
 *		most work_mem; it spills to a temporary file of the current
 *		transaction's resource owner.
 */
void
CtasChSyncKeepChange(ChSyncState *st, bool deleted)
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
	slot->tts_values[CHANGE_KEYTEXT - 1] =
		st->keytext ? CStringGetTextDatum(st->keytext) : (Datum) 0;
	slot->tts_isnull[CHANGE_KEYTEXT - 1] = st->keytext == NULL;
	ExecStoreVirtualTuple(slot);
	tuplesort_puttupleslot(st->changes, slot);
	ExecClearTuple(slot);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(st->change_cxt);
}

/* encode the row into st->rowbuf */
void
CtasChSyncEncodeRow(CtasSyncTarget *t, ChSyncState *st, Datum *values,
					bool *nulls)
{
	int			i;

	resetStringInfo(&st->rowbuf);
	for (i = 0; i < t->ncolumns; i++)
	{
		if (!st->gone[i])
			CtasChPutValue(&st->cols[i].enc, &st->rowbuf, values[i], nulls[i]);
	}
}

/*
 * CtasChSyncEncodeSegments
 *		The row of a change into st->rowbuf, each column as its length
 *		(uint32) and its bytes, so that a value the change did not carry
 *		(unchanged, length SEG_UNCHANGED) can be put in later.
 */
void
CtasChSyncEncodeSegments(CtasSyncTarget *t, ChSyncState *st, Datum *values,
						 bool *nulls, const bool *unchanged)
{
	int			i;

	resetStringInfo(&st->rowbuf);
	for (i = 0; i < t->ncolumns; i++)
	{
		uint32		len = SEG_UNCHANGED;

		resetStringInfo(&st->colbuf);
		if (st->gone[i])
			len = 0;			/* not written */
		else if (unchanged == NULL || !unchanged[i])
		{
			CtasChPutValue(&st->cols[i].enc, &st->colbuf, values[i], nulls[i]);
			len = st->colbuf.len;
		}
		appendBinaryStringInfo(&st->rowbuf, (char *) &len, sizeof(len));
		appendBinaryStringInfo(&st->rowbuf, st->colbuf.data, st->colbuf.len);
	}
}

/* the segments of row (len bytes) into r, marking the missing ones */
static void
split_segments(CtasSyncTarget *t, const char *row, int len, ChKeptRow *r,
			   bool fill_only)
{
	int			off = 0;
	int			i;

	for (i = 0; i < t->ncolumns; i++)
	{
		uint32		n;

		if (off + (int) sizeof(n) > len)
			elog(ERROR, "malformed kept change");
		memcpy(&n, row + off, sizeof(n));
		off += sizeof(n);
		if (fill_only && !r->missing[i])
		{
			if (n != SEG_UNCHANGED)
				off += n;
			continue;
		}
		resetStringInfo(&r->segs[i]);
		r->missing[i] = n == SEG_UNCHANGED;
		if (n != SEG_UNCHANGED)
		{
			appendBinaryStringInfo(&r->segs[i], row + off, n);
			off += n;
		}
	}
}

/* a row of all columns given as segments, into the streamed INSERT */
static void
stream_segments(CtasSyncTarget *t, ChSyncState *st, const char *row, int len,
				uint64 version)
{
	StringInfo	buf = rows_buffer(st);
	int			off = 0;
	int			i;

	for (i = 0; i < t->ncolumns; i++)
	{
		uint32		n;

		memcpy(&n, row + off, sizeof(n));
		off += sizeof(n);
		if (n == SEG_UNCHANGED)
			elog(ERROR, "a value of a synced row is missing");
		appendBinaryStringInfo(buf, row + off, n);
		off += n;
	}
	Assert(off == len);
	put_version(buf, version, false);
	rows_appended(st);
}

/* complete the rows of st->kept from the remote, and write them */
static void
flush_kept(CtasSyncTarget *t, ChSyncState *st)
{
	ListCell   *lc;

	if (st->kept == NIL)
		return;
	/* FINAL must see every row written before */
	CtasChSyncSendPending(st);
	CtasChSyncFetchKept(st->http, t, st->qtable, st->cols, st->kept);
	foreach(lc, st->kept)
	{
		ChKeptRow  *r = lfirst(lc);
		StringInfo	buf = rows_buffer(st);
		int			i;

		for (i = 0; i < t->ncolumns; i++)
			appendBinaryStringInfo(buf, r->segs[i].data, r->segs[i].len);
		put_version(buf, st->lsn, false);
		rows_appended(st);
	}
	st->kept = NIL;
	MemoryContextReset(st->keep_cxt);
}

/*
 * finish_held
 *		The last change of a key whose unchanged values were looked for in
 *		its earlier changes of the transaction: written when complete, else
 *		left to complete from the remote row.
 */
static void
finish_held(CtasSyncTarget *t, ChSyncState *st)
{
	ChKeptRow  *r = st->held;
	bool		complete = true;
	int			i;

	if (r == NULL)
		return;
	st->held = NULL;
	for (i = 0; i < t->ncolumns; i++)
		complete &= !r->missing[i];
	if (complete)
	{
		StringInfo	buf = rows_buffer(st);

		for (i = 0; i < t->ncolumns; i++)
			appendBinaryStringInfo(buf, r->segs[i].data, r->segs[i].len);
		put_version(buf, st->lsn, false);
		rows_appended(st);
		return;
	}
	st->kept = lappend(st->kept, r);
	if (list_length(st->kept) >= KEEP_BATCH)
		flush_kept(t, st);
}

/* hold the change in sorted_slot, whose row has unchanged values */
static void
hold_change(CtasSyncTarget *t, ChSyncState *st)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(st->keep_cxt);
	ChKeptRow  *r = palloc0(sizeof(ChKeptRow));
	bytea	   *row = change_bytes(st, CHANGE_ROW);
	int			i;

	r->keyraw = TextDatumGetCString(st->sorted_slot->tts_values[CHANGE_KEYTEXT - 1]);
	r->segs = palloc(sizeof(StringInfoData) * Max(t->ncolumns, 1));
	r->missing = palloc0(sizeof(bool) * Max(t->ncolumns, 1));
	for (i = 0; i < t->ncolumns; i++)
		initStringInfo(&r->segs[i]);
	split_segments(t, VARDATA_ANY(row), VARSIZE_ANY_EXHDR(row), r, false);
	MemoryContextSwitchTo(oldcxt);
	st->held = r;
}
