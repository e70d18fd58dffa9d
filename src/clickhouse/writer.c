/*-------------------------------------------------------------------------
 *
 * writer.c
 *		  The ClickHouse writer: CREATE TABLE AS into a ClickHouse catalog
 *		  through its HTTP interface (client.c), and the routine of the target.
 *
 * ClickHouse has no transactions, so an atomic load is built from objects
 * that only this transaction knows about, published at the very end
 * (xact.c):
 *
 *	begin_load	does the target exist, in ClickHouse or among what this
 *				transaction already did to it?  (ctas.c decides what
 *				follows from if_exists.)
 *	create_table
 *				a staging table _ctas_fed_stage_<sysid>_<xid>_<n>_<random>
 *				is created with the mapped columns and the table options of
 *				the statement (for 'append', as a copy of the target), and
 *				one streamed INSERT ... FORMAT RowBinary is opened on it.
 *	put_row		each row is encoded into the stream's buffer; the buffer
 *				goes to the socket whenever it holds 1 MB (bounded memory,
 *				back-pressure from the server).
 *	end_load	the stream is closed and the staging table must hold
 *				exactly the rows sent (a dropped connection makes ClickHouse
 *				keep what it got, so the count is the proof).
 *
 * A cluster catalog (server options cluster and shard_urls) does each
 * step on every shard, with a Distributed table over them: cluster.c.  The
 * steps on one server are in stage.c.
 *
 * Streaming mode (atomic = false) creates the target directly and sends
 * one INSERT per commit_every rows; what is committed stays.
 *
 * Parallel loads (WITH (parallel = N), parallel.c): the leader creates the
 * staging table as above, parallel_export hands its name and column types
 * to the workers and closes the leader's empty INSERT; parallel_attach
 * opens one INSERT of each worker's own on the same staging table (its
 * query_id, like every one of this transaction, starts with
 * ctas_fed_<sysid>_<xid>_).  end_load of the leader then checks the staging
 * table against the sum of the workers' rows, and pre-commit publishes it
 * as for one stream: the workers have no state of their own to commit,
 * abort or resolve.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/writer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_foreign_server.h"
#include "commands/explain.h"
#include "executor/tuptable.h"
#include "utils/memutils.h"

#include "clickhouse.h"
#include "gid.h"

/* ------------------------------------------------------------------------
 * Remote steps of a load
 * ------------------------------------------------------------------------
 */

/*
 * ch_begin_load
 *		begin_load of the writer: set up the load's state and connection,
 *		and say whether the target exists, in ClickHouse or among what this
 *		transaction already did to it.  No remote change.
 */
static bool
ch_begin_load(CtasLoad *load)
{
	ChLoad	   *cl = palloc0(sizeof(ChLoad));
	const char *db = load->schema;
	const char *table = load->table;

	load->private = cl;
	load->format = "RowBinary";
	cl->load = load;
	cl->db = pstrdup(db);
	cl->streaming = !load->opts.atomic;

	cl->key_col = -1;
	if (load->part)
	{
		cl->xs = CtasChXact(load->part);
		cl->http = cl->xs->http;
		cl->cluster = cl->xs->cluster;
	}
	else
	{
		cl->http = CtasChHttpCreate(load->catalog, load->cxt);
		CtasChCheckVersion(cl->http);
	}

	/* the name, before anything moves */
	if (CtasIsScratchName(table))
		ereport(ERROR,
				(errcode(ERRCODE_RESERVED_NAME),
				 errmsg("table name \"%s\" is reserved", table),
				 errdetail("Names beginning with \"%s\" are kept for the scratch tables of ctas_fed.",
						   CTAS_SCRATCH_PREFIX)));
	if (cl->cluster)
		return CtasChClusterBeginLoad(cl);
	return CtasChLogicalExists(cl->http, cl->xs, 0, db, table, &cl->phys);
}

/*
 * ch_create_table
 *		create_table of the writer: create the staging table (atomic) or the
 *		target (streaming) - for if_exists 'append' a copy of the existing
 *		table, or nothing when streaming - and open the INSERT; a cluster
 *		catalog's load makes them on every shard (cluster.c).  Always
 *		true: a table created meanwhile by someone else makes the RENAME of
 *		pre-commit fail, not this.
 */
static bool
ch_create_table(CtasLoad *load, bool exists)
{
	ChLoad	   *cl = (ChLoad *) load->private;
	const char *db = load->schema;
	const char *table = load->table;
	ChActionKind kind = CH_CREATE;

	if (exists)
	{
		Assert(load->opts.if_exists == CTAS_IF_EXISTS_REPLACE ||
			   load->opts.if_exists == CTAS_IF_EXISTS_APPEND);
		kind = load->opts.if_exists == CTAS_IF_EXISTS_REPLACE ?
			CH_REPLACE : CH_APPEND;
	}
	if (cl->cluster)
	{
		CtasChClusterCreateTable(cl, exists);
		return true;
	}

	/* 1. the remote types: the target's when appending, else ours */
	cl->ncols = load->ncolumns;
	cl->types = CtasChTargetTypes(cl, kind);
	cl->cols = CtasChSetupColumns(load, cl->types);

	/* 2. the table the rows go into */
	if (cl->streaming)
	{
		cl->insert_table = pstrdup(table);
		if (kind == CH_CREATE)
		{
			CtasChHttpQuery(cl->http, CtasChCreateSql(load, cl->cols, db, table),
							"create the table");
			cl->engine = CtasChLoadEngine(load);
		}
		else
		{
			cl->count_before = CtasChParseCount(cl->http,
											  CtasChHttpQuery(cl->http,
															  psprintf("SELECT count() FROM %s", CtasChQname(db, table)),
															  "count the rows of the target table"),
											  "SELECT count()");
		}
	}
	else
		CtasChStage(cl, kind);

	/* 3. the row stream */
	CtasChInsertSql(cl);
	if (!load->skip_data)
		CtasChStreamOpen(cl);
	return true;
}

/*
 * ch_parallel_export
 *		parallel_export of the writer, in the leader after create_table of
 *		an atomic load: the database, the staging table, and of each column
 *		its type and whether it is a key (for the errors of NULLs), as the
 *		text of a List (palloc'd); and the leader's own INSERT finished
 *		empty.
 */
static char *
ch_parallel_export(CtasLoad *load)
{
	ChLoad	   *cl = (ChLoad *) load->private;
	List	   *state;
	int			i;

	Assert(!cl->streaming && (cl->action != NULL || cl->cluster != NULL));
	state = list_make2(makeString(cl->db),
					   makeString(cl->cluster ? "" : cl->insert_table));
	for (i = 0; i < cl->ncols; i++)
		state = lappend(state, list_make2(makeString(cl->types[i]),
										  makeBoolean(cl->cols[i].key)));
	if (cl->cluster)
		return nodeToString(CtasChClusterExport(cl, state));
	if (cl->stream)
		CtasChStreamStep(cl, true);
	cl->exported = true;
	return nodeToString(state);
}

/*
 * ch_parallel_attach
 *		parallel_attach of the writer, in a parallel worker: a client of
 *		its own and one INSERT into the leader's staging table, with the
 *		leader's column types.  ERROR when the server cannot be reached.
 */
static void
ch_parallel_attach(CtasLoad *load, const char *state)
{
	ChLoad	   *cl = palloc0(sizeof(ChLoad));
	List	   *l = (List *) stringToNode(state);
	int			i;

	if (list_length(l) != load->ncolumns + 2 &&
		list_length(l) != load->ncolumns + 6)
		elog(ERROR, "parallel ClickHouse load has %d fields, expected %d",
			 list_length(l), load->ncolumns + 2);
	load->private = cl;
	load->format = "RowBinary";
	cl->load = load;
	cl->worker = true;
	cl->db = strVal(linitial(l));
	cl->insert_table = strVal(lsecond(l));
	cl->ncols = load->ncolumns;
	cl->types = palloc(sizeof(char *) * cl->ncols);
	for (i = 0; i < cl->ncols; i++)
	{
		List	   *col = list_nth(l, i + 2);

		cl->types[i] = strVal(linitial(col));
		load->columns[i].is_key = boolVal(lsecond(col));
	}
	cl->cols = CtasChSetupColumns(load, cl->types);
	if (list_length(l) == load->ncolumns + 6)
	{
		/* a cluster: an INSERT into each shard's staging table */
		CtasChClusterAttach(cl, list_copy_tail(l, load->ncolumns + 2));
		return;
	}
	cl->http = CtasChHttpCreate(load->catalog, load->cxt);
	CtasChCheckVersion(cl->http);
	CtasChInsertSql(cl);
	CtasChStreamOpen(cl);
}

/*
 * ch_put_row
 *		put_row of the writer: encode one row into the stream's buffer.
 */
static void
ch_put_row(CtasLoad *load, TupleTableSlot *slot)
{
	ChLoad	   *cl = (ChLoad *) load->private;
	StringInfo	buf;
	int			before;
	int			i;

	slot_getallattrs(slot);
	if (cl->cluster)
	{
		/* to the shard the Distributed table would send it to */
		CtasChClusterPutRow(cl, slot);
		return;
	}
	buf = CtasChHttpStreamBuffer(cl->stream);
	before = buf->len;
	for (i = 0; i < cl->ncols; i++)
		CtasChPutValue(&cl->cols[i].enc, buf, slot->tts_values[i],
					 slot->tts_isnull[i]);
	load->bytes += buf->len - before;
	cl->rows++;
	cl->block_rows++;

	if (cl->streaming && cl->block_rows >= (uint64) load->opts.commit_every)
	{
		CtasChStreamStep(cl, true);
		CtasChStreamOpen(cl);
	}
	else if (buf->len >= CTAS_HTTP_STREAM_CHUNK)
	{
		/* what the socket took is kept when the connection drops */
		CtasChStreamStep(cl, false);
	}
}

/*
 * ch_end_load
 *		end_load of the writer: finish the INSERT and, in atomic mode,
 *		check that the staging table holds exactly the rows sent (on every
 *		shard of a cluster catalog: cluster.c).
 */
static void
ch_end_load(CtasLoad *load)
{
	ChLoad	   *cl = (ChLoad *) load->private;

	if (cl == NULL || load->skipped)
		return;
	if (cl->cluster)
	{
		CtasChClusterEndLoad(cl);
		return;
	}
	if (cl->stream)
		CtasChStreamStep(cl, true);
	if (cl->streaming || cl->worker)
		return;
	/* a parallel load: the workers sent the rows, load->rows sums them */
	if (cl->exported)
		cl->rows = load->rows;
	CtasChStageCheck(cl);
}

/*
 * ch_drop_table
 *		drop_table of the writer: the table is renamed away at pre-commit
 *		and dropped after the local commit, so that an abort can put it
 *		back.
 */
static void
ch_drop_table(CtasLoad *load, bool missing_ok)
{
	ChXact	   *xs;
	char	   *phys;
	ChAction   *a;

	/* ctas.c has joined the transaction (CtasExecDrop) */
	Assert(load->part != NULL);
	xs = CtasChXact(load->part);
	if (xs->cluster ? !CtasChClusterDrop(load) :
		!CtasChLogicalExists(xs->http, xs, 0, load->schema, load->table, &phys))
	{
		CtasStagedDropMissing(load, missing_ok,
							  CtasChDisplay(load->schema, load->table));
		return;
	}
	if (xs->cluster)
		return;					/* every shard's drop is recorded */
	a = CtasChNewAction(load->part, xs, CH_DROP, 0, load->schema, load->table);
	a->base.state = CTAS_STAGED_LOADED;
}

/* ------------------------------------------------------------------------
 * EXPLAIN and metadata
 * ------------------------------------------------------------------------
 */

/*
 * ch_explain
 *		explain of the writer: target, mode, format and the DDL, with no
 *		remote work.
 */
static void
ch_explain(CtasLoad *load, ExplainState *es)
{
	char	  **types = palloc(sizeof(char *) * load->ncolumns);
	ChColumn   *cols;
	int			i;
	const char *mode;

	for (i = 0; i < load->ncolumns; i++)
		types[i] = load->columns[i].remote_type;
	cols = CtasChSetupColumns(load, types);

	ExplainPropertyText("Catalog", load->catalog->name, es);
	ExplainPropertyText("Catalog Type", "clickhouse", es);
	ExplainPropertyText("Target", CtasChQname(load->schema, load->table), es);
	if (load->opts.atomic)
		mode = "atomic: staging table, RENAME TABLE to the target at commit";
	else
		mode = psprintf("streaming: table created first, one INSERT every " INT64_FORMAT " rows",
						load->opts.commit_every);
	ExplainPropertyText("Mode", mode, es);
	ExplainPropertyText("If Exists",
						load->opts.if_exists == CTAS_IF_EXISTS_REPLACE ? "replace" :
						load->opts.if_exists == CTAS_IF_EXISTS_APPEND ? "append" :
						load->opts.if_exists == CTAS_IF_EXISTS_SKIP ? "skip" : "error",
						es);
	ExplainPropertyText("Format", "RowBinary", es);
	if (CtasCatalogOption(load->catalog, "cluster"))
		CtasChClusterExplain(load, es);		/* the DDL of every shard */
	else
		ExplainPropertyText("Remote DDL",
							CtasChCreateSql(load, cols, load->schema, load->table), es);
}

/* the database a listing reads: schema, else the catalog's, else default */
static const char *
ch_list_database(CtasCatalog *catalog, const char *schema)
{
	const char *db = schema ? schema : CtasCatalogOption(catalog, "database");

	return db ? db : "default";
}

static void
ch_list_tables(CtasCatalog *catalog, const char *schema,
			   void (*emit) (void *arg, const char *name, const char *kind),
			   void *arg)
{
	CtasChHttp *http = CtasChHttpCreate(catalog, CurrentMemoryContext);
	const char *db = ch_list_database(catalog, schema);
	char	   *body;
	List	   *rows;
	int			nf;
	ListCell   *lc;

	(void) CtasChRemoteExists(http, db, "");	/* ERROR for a missing database */
	body = CtasChHttpQuery(http,
						   psprintf("SELECT name, engine FROM system.tables WHERE database = %s ORDER BY name",
									CtasChLit(db)),
						   "list tables");
	rows = CtasChTsv(body, &nf);
	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		if (nf == 2 && f[0] && f[1])
			emit(arg, f[0], f[1]);
	}
}

static void
ch_list_columns(CtasCatalog *catalog, const char *schema, const char *table,
				void (*emit) (void *arg, const char *name, const char *type,
							  bool nullable),
				void *arg)
{
	CtasChHttp *http = CtasChHttpCreate(catalog, CurrentMemoryContext);
	const char *db = ch_list_database(catalog, schema);
	char	   *body;
	List	   *rows;
	int			nf;
	ListCell   *lc;

	if (!CtasChRemoteExists(http, db, table))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table \"%s\" does not exist in catalog \"%s\"",
						CtasChDisplay(db, table), catalog->name)));
	body = CtasChHttpQuery(http,
						   psprintf("SELECT name, type FROM system.columns WHERE database = %s AND table = %s",
									CtasChLit(db), CtasChLit(table)),
						   "list columns");
	rows = CtasChTsv(body, &nf);
	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		if (nf == 2 && f[0] && f[1])
			emit(arg, f[0], f[1], strncmp(f[1], "Nullable(", 9) == 0);
	}
}

/* ------------------------------------------------------------------------
 * The routine
 * ------------------------------------------------------------------------
 */

/* check_options: the table's, then the cluster's (sharding_key...) */
static void
ch_check_options(CtasLoad *load)
{
	CtasChCheckOptions(load);
	CtasChClusterCheckOptions(load);
}

static const char *const ch_required_options[] = {"url", NULL};

const CtasTargetRoutine CtasClickHouseTarget = {
	.type_name = "clickhouse",
	.server_options = CtasChServerOptions,
	.required_options = ch_required_options,
	.commit_order = CTAS_COMMIT_LAST_RESOURCE,
	.map_column = CtasChMapColumn,
	.statement_options = CtasChStatementOptions,
	.parse_option = CtasChParseOption,
	.check_options = ch_check_options,
	.explain = ch_explain,
	.begin_load = ch_begin_load,
	.create_table = ch_create_table,
	.put_row = ch_put_row,
	.end_load = ch_end_load,
	.parallel_export = ch_parallel_export,
	.parallel_attach = ch_parallel_attach,
	.drop_table = ch_drop_table,
	.pre_commit = CtasChPreCommit,
	.post_commit = CtasChPostCommit,
	.abort = CtasChAbort,
	.subxact = CtasChSubxact,
	.list_tables = ch_list_tables,
	.list_columns = ch_list_columns,
	.resolve = CtasChResolve,
	.sync = &CtasChSyncApply,
};
