/*-------------------------------------------------------------------------
 *
 * sync.c
 *		  Continuous sync into a ClickHouse catalog: the CtasSyncApply of the
 *		  ClickHouse target.
 *
 * ClickHouse has no transactions and no upsert: a synced table is a
 * ReplacingMergeTree(_version) ordered by the key, with two more columns,
 *
 *	_version	UInt64: the commit lsn of the source transaction shifted
 *				left by 16 bits, plus the change's place in the batch of
 *				that transaction (capped at 65535)
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
 * Protocol of one batch (the initial copy is one batch after truncate):
 *
 *	begin		nothing
 *	upsert		encode the row (RowBinary) into a streamed INSERT of all
 *				columns, opened at the first row
 *	copy_row	same as upsert
 *	delete		encode the key into a buffer of delete rows
 *	truncate	finish what is pending, then INSERT the delete rows of every
 *				key in the table
 *	commit		finish the streamed INSERT, send the delete rows, then the
 *				progress row
 *
 * XXX: more than 65535 changes of one source transaction share the last
 * version; two changes of the same key beyond that point are applied in
 * no defined order.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/sync.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "clickhouse.h"

#define PROGRESS_TABLE	"_ctas_fed_sync_progress"
#define VERSION_COLUMN	"_version"
#define DELETED_COLUMN	"_deleted"
#define VERSION_SEQ_MAX	0xFFFF

typedef struct ChSyncState
{
	CtasHttp   *http;
	char	   *qtable;			/* `db`.`table` */
	char	   *progress;		/* `db`.`_ctas_fed_sync_progress` */
	ChColumn   *cols;			/* encoders of the query's columns */
	ChColumn   *keycols;		/* encoders of the key columns */
	char	   *insert_sql;		/* INSERT of all columns */
	char	   *delete_sql;		/* INSERT of the key columns */
	char	   *truncate_head;	/* INSERT ... SELECT keys, before the version */
	char	   *truncate_tail;	/* after it */
	CtasHttpStream *stream;		/* the open INSERT of rows, or NULL */
	MemoryContext stream_cxt;
	StringInfoData deletes;		/* RowBinary delete rows, not sent yet */
	uint64		lsn;			/* change_lsn of the last change */
	uint32		seq;			/* changes at that lsn so far */
	MemoryContext cxt;
} ChSyncState;

static void ch_sync_prepare(CtasLoad *load);
static void ch_sync_open(CtasSyncTarget *t);
static uint64 ch_sync_applied_lsn(CtasSyncTarget *t);
static void ch_sync_begin(CtasSyncTarget *t);
static void ch_sync_upsert(CtasSyncTarget *t, Datum *values, bool *nulls);
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
	.copy_row = ch_sync_upsert,
	.delete = ch_sync_delete,
	.truncate = ch_sync_truncate,
	.commit = ch_sync_commit,
	.close = ch_sync_close,
};

/*
 * ch_sync_prepare
 *		At statement time: the table is a ReplacingMergeTree(_version)
 *		ordered by the key (load->opts.primary_key, set by sync.c), with
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

	body = CtasHttpQuery(st->http,
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
 *		read from the server), the progress table.  State in the current
 *		memory context.
 */
static void
ch_sync_open(CtasSyncTarget *t)
{
	ChSyncState *st = palloc0(sizeof(ChSyncState));
	StringInfoData sql;
	int			i;

	st->cxt = CurrentMemoryContext;
	t->private = st;
	st->http = CtasHttpCreate(t->catalog, st->cxt);
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

	CtasHttpQuery(st->http,
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

	body = CtasHttpQuery(st->http,
						 psprintf("SELECT max(lsn) FROM %s WHERE job = %s",
								  st->progress, CtasChLit(t->job_key)),
						 "read the progress of the sync");
	return CtasChParseCount(st->http, body, "read the progress of the sync");
}

/* the version of the next change */
static uint64
next_version(CtasSyncTarget *t, ChSyncState *st)
{
	if (t->change_lsn != st->lsn)
	{
		st->lsn = t->change_lsn;
		st->seq = 0;
	}
	if (st->seq < VERSION_SEQ_MAX)
		st->seq++;
	return (st->lsn << 16) | st->seq;
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

static void
ch_sync_upsert(CtasSyncTarget *t, Datum *values, bool *nulls)
{
	ChSyncState *st = (ChSyncState *) t->private;
	StringInfo	buf;
	int			i;

	if (st->stream == NULL)
	{
		st->stream_cxt = AllocSetContextCreate(st->cxt, "ctas_fed sync stream",
											   ALLOCSET_DEFAULT_SIZES);
		st->stream = CtasHttpStreamOpen(st->http, st->insert_sql,
										"insert synced rows", st->stream_cxt);
	}
	buf = CtasHttpStreamBuffer(st->stream);
	for (i = 0; i < t->ncolumns; i++)
		CtasChPutValue(&st->cols[i].enc, buf, values[i], nulls[i]);
	put_version(buf, next_version(t, st), false);
	if (buf->len >= CTAS_HTTP_STREAM_CHUNK)
		CtasHttpStreamFlush(st->stream);
}

static void
ch_sync_delete(CtasSyncTarget *t, Datum *keys)
{
	ChSyncState *st = (ChSyncState *) t->private;
	MemoryContext oldcxt = MemoryContextSwitchTo(st->cxt);
	int			k;

	for (k = 0; k < t->nkeys; k++)
		CtasChPutValue(&st->keycols[k].enc, &st->deletes, keys[k], false);
	put_version(&st->deletes, next_version(t, st), true);
	MemoryContextSwitchTo(oldcxt);
}

/* send the rows and the delete rows not sent yet */
static void
send_pending(CtasSyncTarget *t)
{
	ChSyncState *st = (ChSyncState *) t->private;

	if (st->stream != NULL)
	{
		CtasHttpStreamFinish(st->stream);
		st->stream = NULL;
		MemoryContextDelete(st->stream_cxt);
		st->stream_cxt = NULL;
	}
	if (st->deletes.len > 0)
	{
		MemoryContext cxt = AllocSetContextCreate(st->cxt,
												  "ctas_fed sync stream",
												  ALLOCSET_DEFAULT_SIZES);
		CtasHttpStream *stream = CtasHttpStreamOpen(st->http, st->delete_sql,
													"insert delete rows", cxt);

		appendBinaryStringInfo(CtasHttpStreamBuffer(stream), st->deletes.data,
							   st->deletes.len);
		CtasHttpStreamFinish(stream);
		MemoryContextDelete(cxt);
		resetStringInfo(&st->deletes);
	}
}

static void
ch_sync_truncate(CtasSyncTarget *t)
{
	ChSyncState *st = (ChSyncState *) t->private;

	send_pending(t);
	CtasHttpQuery(st->http,
				  psprintf("%s" UINT64_FORMAT "%s", st->truncate_head,
						   next_version(t, st), st->truncate_tail),
				  "insert delete rows for a TRUNCATE");
}

/*
 * ch_sync_commit
 *		Send what is pending, then the progress row: lsn is applied.
 */
static void
ch_sync_commit(CtasSyncTarget *t, uint64 lsn)
{
	ChSyncState *st = (ChSyncState *) t->private;

	send_pending(t);
	CtasHttpQuery(st->http,
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
		CtasHttpStreamClose(st->stream);
	st->stream = NULL;
	t->private = NULL;
}
