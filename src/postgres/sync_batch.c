/*-------------------------------------------------------------------------
 *
 * sync_batch.c
 *		  Continuous sync into a PostgreSQL catalog: the queue of statements
 *		  and the batch of net changes of the CtasSyncApply in sync.c (which
 *		  tells the protocol of a batch and of its remote transaction).
 *
 *	queue		statements are queued (CtasPgSyncEnqueue) and sent in one
 *				pipeline (pipeline.c): at once, or when PIPELINE_STATEMENTS
 *				are queued, or in the background (CtasPgSyncSendQueueAsync),
 *				their results read before the next send
 *				(CtasPgSyncFinishPending)
 *	batch		the net change of each key (syncbatch.c); past BATCH_KEYS
 *				keys or the memory syncbatch.c allows it is applied before
 *				it takes more (CtasPgSyncBatchBound)
 *	apply		the queue sent, the batch's rows by one COPY into the
 *				temporary batch table, then the statements of sync_sql.c
 *				that apply them, queued for the caller to send
 *				(CtasPgSyncApplyBatch); the batch is empty after
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/postgres/sync_batch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "postgres_target.h"

/* statements queued before they are sent */
#define PIPELINE_STATEMENTS	1000
/*
 * a batch of more keys than this (or of more memory than syncbatch.c
 * allows) is applied before it takes more, in the background while the
 * next part is built (see pipelining)
 */
#define BATCH_KEYS			10000

/* queue sql (allocated in st->cxt) */
void
CtasPgSyncEnqueue(CtasSyncTarget *t, char *sql)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt = MemoryContextSwitchTo(st->cxt);

	st->queue = lappend(st->queue, sql);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * send_pipeline
 *		Send every queued statement in one pipeline (pipeline.c) and keep
 *		their text for CtasPgSyncFinishPending; the queue is empty after.  The
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
 * CtasPgSyncFinishPending
 *		Read every result of the pipeline send_pipeline sent, if one is
 *		pending, waiting for them (interruptibly); ERROR with the first
 *		remote error.
 */
void
CtasPgSyncFinishPending(CtasSyncTarget *t)
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
 * CtasPgSyncSendQueue
 *		Send every queued statement in one pipeline and read every result
 *		(after those of a pipeline still pending); ERROR with the first
 *		remote error.
 */
void
CtasPgSyncSendQueue(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;

	CtasPgSyncFinishPending(t);
	if (st->queue == NIL)
		return;
	send_pipeline(t);
	CtasPgSyncFinishPending(t);
}

/*
 * CtasPgSyncSendQueueAsync
 *		The same without reading the results: whatever talks to the remote
 *		next reads them first (CtasPgSyncFinishPending).
 */
void
CtasPgSyncSendQueueAsync(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;

	CtasPgSyncFinishPending(t);
	if (st->queue != NIL)
		send_pipeline(t);
}

/* queue sql, and send the queue when it is long */
void
CtasPgSyncEnqueueAndMaybeSend(CtasSyncTarget *t, char *sql)
{
	PgSyncState *st = (PgSyncState *) t->private;

	CtasPgSyncEnqueue(t, sql);
	if (list_length(st->queue) >= PIPELINE_STATEMENTS)
		CtasPgSyncSendQueue(t);
}
/*
 * CtasPgSyncStartCopy
 *		Send the queue, then start sql, a COPY ... FROM STDIN, on the
 *		connection.  ERROR, before anything is sent, while a column of the
 *		sync is missing remotely.
 */
void
CtasPgSyncStartCopy(CtasSyncTarget *t, const char *sql)
{
	PgSyncState *st = (PgSyncState *) t->private;
	PGresult   *res;

	if (st->missing != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of the sync is missing in table %s of catalog \"%s\"",
						st->missing, st->qualified, t->catalog->name)));
	CtasPgSyncSendQueue(t);
	if (!PQsendQuery(st->conn, sql))
		CtasPgReportError(ERROR, NULL, st->conn, t->catalog, sql);
	res = CtasPgGetResult(st->conn, 0, NULL);
	if (res == NULL || PQresultStatus(res) != PGRES_COPY_IN)
		CtasPgReportError(ERROR, res, st->conn, t->catalog, sql);
	PQclear(res);
}

/* ---- the batch ----------------------------------------------------------- */

/* apply the batch now if it is large, in the same remote transaction */
void
CtasPgSyncBatchBound(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;

	if (CtasSyncBatchFull(&st->batch, BATCH_KEYS))
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(st->cxt);

		CtasPgSyncApplyBatch(t);
		/* the next part of the batch into an empty table */
		CtasPgSyncEnqueue(t, pstrdup(st->sql.batch_truncate));
		MemoryContextSwitchTo(oldcxt);
		/* applied remotely while the next part is built */
		CtasPgSyncSendQueueAsync(t);
	}
}

/*
 * CtasPgSyncApplyBatch
 *		Send the queue, then the batch's rows by COPY into the batch table,
 *		and queue the statements that apply them (sent by the caller, with
 *		what it queues after them).  A batch with rows whose unchanged
 *		columns the remote keeps is first checked to find each row.  The
 *		batch is empty after.  Can ERROR.
 */
void
CtasPgSyncApplyBatch(CtasSyncTarget *t)
{
	PgSyncState *st = (PgSyncState *) t->private;
	MemoryContext oldcxt;
	HASH_SEQ_STATUS scan;
	CtasSyncBatchEntry *entry;
	PGresult   *res;
	uint64		rows = 0;
	uint64		unchanged_rows = 0;
	uint64		deletes = 0;
	uint64		received;

	if (CtasSyncBatchEmpty(&st->batch))
	{
		CtasSyncBatchReset(&st->batch);
		return;
	}
	CtasPgSyncStartCopy(t, st->sql.batch_copy);

	oldcxt = MemoryContextSwitchTo(st->cxt);
	resetStringInfo(&st->copy_buf);
	CtasPgCopyHeader(&st->copy_buf, st->binary);
	hash_seq_init(&scan, st->batch.hash);
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
		deletes += kind == CTAS_SYNC_BATCH_DELETE;
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
	CtasSyncBatchReset(&st->batch);

	oldcxt = MemoryContextSwitchTo(st->cxt);
	if (unchanged_rows > 0)
	{
		uint64		found;

		/* a value not sent cannot be made up: the row must be there */
		res = CtasPgQuery(st->conn, t->catalog, st->sql.count_unchanged);
		found = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
		PQclear(res);
		CtasSyncBatchCheckKept(&st->batch, unchanged_rows, found);
		if (st->sql.apply_unchanged != NULL)
			CtasPgSyncEnqueue(t, pstrdup(st->sql.apply_unchanged));
	}
	if (deletes > 0)
		CtasPgSyncEnqueue(t, pstrdup(st->sql.apply_delete));
	if (rows > deletes + unchanged_rows)
		CtasPgSyncEnqueue(t, pstrdup(st->sql.apply_upsert));
	MemoryContextSwitchTo(oldcxt);
}
