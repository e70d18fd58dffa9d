/*-------------------------------------------------------------------------
 *
 * sync.c
 *		  Continuous sync into a ClickHouse catalog: the CtasSyncApply of the
 *		  ClickHouse target, the state of a synced table, the protocol of a
 *		  batch; how the rows of a batch are kept, encoded and sent is in
 *		  sync_rows.c.
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
 * A cluster catalog (cluster.c): the synced table is a Distributed table
 * over ReplacingMergeTree(_version) local tables, one per shard, created
 * by the statement like any cluster CTAS.  The worker keeps one state per
 * shard (its local table, its kept changes, its streams) and routes each
 * change to the shard the Distributed table sends its key to
 * (CtasChShardOf, the routing of a load); a TRUNCATE is a delete row for
 * every key on every shard, from that shard's own rows.  commit writes the
 * changes of every shard, then the progress row on the catalog's url (the
 * metadata server; shard 1 in the tests).
 *
 * Exactly once, in a cluster.  The sharding key must be computed from a
 * column of the sync's key (checked when the table is created and again
 * when the worker opens it, from the Distributed table's definition): a
 * key's every version, its delete rows and the TRUNCATE rows for it then go
 * to one shard, the one the Distributed table would send the key to, where
 * ReplacingMergeTree keeps its highest version, so FINAL through the
 * Distributed table shows each key once, as on one server.  Versions are
 * those of one server (the source's commit lsns), so writing a batch again
 * writes rows equal to those already there, on the same shards.  The
 * progress row is written only after every shard took its rows: a worker
 * that fails or dies with some shards written and others not (a shard
 * down, a crash between two shards) has not stored the batch's lsn, and
 * the next worker applies the whole batch again from the stored progress,
 * which completes the shards that missed it and rewrites equal rows on the
 * others.  A shard that is down stops the batch (the worker retries) and
 * never moves the progress past changes that shard has not taken.
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
static bool ch_sync_can_keep(CtasSyncTarget *t, int col);

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
	.can_keep = ch_sync_can_keep,
	.keeps_unchanged = true,
	.alter = CtasChSyncAlter,	/* sync_alter.c */
	.rebuild = CtasChSyncRebuild,
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

/*
 * open_state
 *		The state of remote table db.table on the server http talks to:
 *		the encoders of its columns (types read from the server), the place
 *		of each key among the columns.  In the current memory context.
 */
static ChSyncState *
open_state(CtasSyncTarget *t, CtasChHttp *http, const char *table)
{
	ChSyncState *st = palloc0(sizeof(ChSyncState));
	StringInfoData sql;
	int			i;

	st->cxt = CurrentMemoryContext;
	st->http = http;
	st->qtable = CtasChQname(t->schema, table);
	st->progress = CtasChQname(t->schema, PROGRESS_TABLE);
	st->gone = palloc0(sizeof(bool) * Max(t->ncolumns, 1));
	st->cols = CtasChSyncEncoders(t, st, t->ncolumns, t->columns, t->types, st->gone);
	st->keycols = CtasChSyncEncoders(t, st, t->nkeys, t->keys, t->key_types, NULL);
	st->insert_sql = CtasChSyncInsertSql(st, t->ncolumns, t->columns, st->gone);
	st->delete_sql = CtasChSyncInsertSql(st, t->nkeys, t->keys, NULL);

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
	initStringInfo(&st->rows);
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
	TupleDescInitEntry(st->change_desc, CHANGE_KEYTEXT, "keytext", TEXTOID,
					   -1, 0);
	initStringInfo(&st->colbuf);
	st->keep_cxt = AllocSetContextCreate(st->cxt, "ctas_fed sync kept rows",
										 ALLOCSET_DEFAULT_SIZES);
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
	return st;
}

/* the two clients talk to the same server as the same user, alike */
static bool
same_client(const CtasChHttp *a, const CtasChHttp *b)
{
#define SAME_STR(x, y) ((x) == NULL ? (y) == NULL : (y) != NULL && strcmp(x, y) == 0)
	return SAME_STR(a->catalog, b->catalog) &&
		SAME_STR(a->base_url, b->base_url) &&
		SAME_STR(a->user, b->user) &&
		SAME_STR(a->password, b->password) &&
		a->connect_timeout_ms == b->connect_timeout_ms &&
		a->timeout_ms == b->timeout_ms;
#undef SAME_STR
}

/*
 * sync_client
 *		The client of catalog that every sync of the process into it uses:
 *		one curl transfer for all their requests (the progress rows, the
 *		rows of small batches), made once and kept for the life of the
 *		process, instead of one per sync.  CtasChHttpCreate reads the
 *		catalog and checks its rules (allowed hosts, password) on every
 *		open; a catalog whose url, user, password or timeouts changed gets
 *		a client of its own.  XXX: the client of a catalog's old settings
 *		is kept until the worker ends (a few hundred bytes and a transfer).
 */
static CtasChHttp *
sync_client(const CtasCatalog *catalog)
{
	static MemoryContext clients_cxt = NULL;
	static List *clients = NIL;
	CtasChHttp *probe = CtasChHttpCreate(catalog, CurrentMemoryContext);
	CtasChHttp *http;
	MemoryContext oldcxt;
	ListCell   *lc;

	foreach(lc, clients)
	{
		http = lfirst(lc);
		if (same_client(http, probe))
			return http;
	}
	if (clients_cxt == NULL)
		clients_cxt = AllocSetContextCreate(TopMemoryContext,
											"ctas_fed ClickHouse sync clients",
											ALLOCSET_SMALL_SIZES);
	http = CtasChHttpCreate(catalog, clients_cxt);
	oldcxt = MemoryContextSwitchTo(clients_cxt);
	clients = lappend(clients, http);
	MemoryContextSwitchTo(oldcxt);
	return http;
}

/*
 * ch_sync_open
 *		The state of the remote table (open_state), and of each shard's
 *		local table for a cluster catalog, and the progress table (on the
 *		catalog's url: the metadata server of a cluster).
 */
static void
ch_sync_open(CtasSyncTarget *t)
{
	CtasChHttp   *http = sync_client(t->catalog);
	ChCluster  *c = CtasChClusterOpen(t->catalog, CurrentMemoryContext);
	ChSyncState *st;

	if (c == NULL)
		CtasChSyncSettle(t, http);
	st = open_state(t, http, t->table);

	t->private = st;
	if (c != NULL)
	{
		char	   *local;
		int			i;

		local = CtasChClusterSyncTable(c, http, t->schema, t->table,
									   t->nkeys, t->keys, &st->key,
									   &st->key_k);
		st->cluster = c;
		st->shards = palloc0(sizeof(ChSyncState *) * c->nshards);
		for (i = 0; i < c->nshards; i++)
			st->shards[i] = open_state(t, c->http[i], local);
		initStringInfo(&st->route_buf);
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

static void
ch_sync_begin(CtasSyncTarget *t)
{
}

/* the buffer of the streamed INSERT of rows, opened at the first row */

/*
 * shard_state
 *		The state that takes a change of key value v (of key column
 *		st->key_k): the remote table's own, or for a cluster that of the
 *		shard the Distributed table sends the key to.
 */
static ChSyncState *
shard_state(ChSyncState *st, Datum v)
{
	if (st->cluster == NULL)
		return st;
	return st->shards[CtasChShardOf(st->cluster, &st->key,
									&st->keycols[st->key_k], &st->route_buf,
									v, false) - 1];
}

static void
ch_sync_upsert(CtasSyncTarget *t, Datum *values, bool *nulls,
			   const bool *unchanged)
{
	ChSyncState *top = (ChSyncState *) t->private;
	ChSyncState *st = shard_state(top, values[top->keypos[Max(top->key_k, 0)]]);
	int			k;

	CtasChSyncSwitchTransaction(t, st);
	CtasChSyncEncodeSegments(t, st, values, nulls, unchanged);
	resetStringInfo(&st->keybuf);
	for (k = 0; k < t->nkeys; k++)
		CtasChPutValue(&st->keycols[k].enc, &st->keybuf,
					   values[st->keypos[k]], false);
	st->keytext = unchanged ? CtasChSyncKeyText(t, st->keycols, values,
												st->keypos) : NULL;
	CtasChSyncKeepChange(st, false);
	st->keytext = NULL;
}

static void
ch_sync_copy_row(CtasSyncTarget *t, Datum *values, bool *nulls)
{
	ChSyncState *top = (ChSyncState *) t->private;
	ChSyncState *st = shard_state(top, values[top->keypos[Max(top->key_k, 0)]]);

	if (st->truncated)
		CtasChSyncSendTruncate(t, st, t->change_lsn - 3);
	CtasChSyncEncodeRow(t, st, values, nulls);
	CtasChSyncStreamRow(st, st->rowbuf.data, st->rowbuf.len, t->change_lsn - 2);
}

static void
ch_sync_delete(CtasSyncTarget *t, Datum *keys)
{
	ChSyncState *top = (ChSyncState *) t->private;
	ChSyncState *st = shard_state(top, keys[Max(top->key_k, 0)]);
	int			k;

	CtasChSyncSwitchTransaction(t, st);
	resetStringInfo(&st->keybuf);
	for (k = 0; k < t->nkeys; k++)
		CtasChPutValue(&st->keycols[k].enc, &st->keybuf, keys[k], false);
	CtasChSyncKeepChange(st, true);
}

static void
truncate_state(CtasSyncTarget *t, ChSyncState *st)
{
	CtasChSyncSwitchTransaction(t, st);
	CtasChSyncForgetChanges(st);
	CtasChSyncSendPending(st);
	st->truncated = true;
}

/* a cluster: every shard truncates its local table */
static void
ch_sync_truncate(CtasSyncTarget *t)
{
	ChSyncState *st = (ChSyncState *) t->private;
	int			i;

	if (st->cluster == NULL)
		truncate_state(t, st);
	for (i = 0; st->cluster && i < st->cluster->nshards; i++)
		truncate_state(t, st->shards[i]);
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
	int			i;

	if (st->cluster == NULL)
	{
		CtasChSyncWriteChanges(t, st);
		CtasChSyncSendPending(st);
	}
	/* a cluster: every shard's rows before the progress row */
	for (i = 0; st->cluster && i < st->cluster->nshards; i++)
	{
		CtasChSyncWriteChanges(t, st->shards[i]);
		CtasChSyncSendPending(st->shards[i]);
	}
	CtasChHttpQuery(st->http,
				  psprintf("INSERT INTO %s (job, lsn) VALUES (%s, " UINT64_FORMAT ")",
						   st->progress, CtasChLit(t->job_key), lsn),
				  "store the progress of the sync");
}

static void
close_state(ChSyncState *st)
{
	if (st->stream != NULL)
		CtasChHttpStreamClose(st->stream);
	st->stream = NULL;
	/* rows of a batch that will not be applied */
	resetStringInfo(&st->rows);
	resetStringInfo(&st->deletes);

	/*
	 * The kept changes of a source transaction that will not be applied.
	 * After an abort, the transaction's resource owner closed the
	 * tuplesort's temporary file and tuplesort_end must not touch it; its
	 * memory goes with the worker.
	 */
	if (st->changes != NULL && IsTransactionState())
		tuplesort_end(st->changes);
	st->changes = NULL;
}

static void
ch_sync_close(CtasSyncTarget *t)
{
	ChSyncState *st = (ChSyncState *) t->private;
	int			i;

	if (st == NULL)
		return;
	close_state(st);
	for (i = 0; st->cluster && st->shards && i < st->cluster->nshards; i++)
	{
		if (st->shards[i])
			close_state(st->shards[i]);
	}
	t->private = NULL;
}

/* whether the remote row gives column col's unchanged value (sync_keep.c) */
static bool
ch_sync_can_keep(CtasSyncTarget *t, int col)
{
	ChSyncState *st = (ChSyncState *) t->private;

	/* a cluster: the rows are pending on the shards (no remote lookup) */
	if (st->cluster != NULL)
		return false;
	return CtasChSyncCanKeep(t, st->cols, st->keycols, col);
}

