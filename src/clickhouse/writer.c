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
 * ch_remote_exists
 *		Does db.table exist on the server?  ERROR when the database does not
 *		exist.  One round trip.
 */
static bool
ch_remote_exists(CtasHttp *http, const char *db, const char *table)
{
	char	   *sql;
	char	   *body;
	List	   *rows;
	int			nf;
	char	  **f;

	sql = psprintf("SELECT (SELECT count() FROM system.databases WHERE name = %s), "
				   "(SELECT count() FROM system.tables WHERE database = %s AND name = %s)",
				   CtasChLit(db), CtasChLit(db), CtasChLit(table));
	body = CtasHttpQuery(http, sql, "check the target table");
	rows = CtasChTsv(body, &nf);
	if (list_length(rows) != 1 || nf != 2)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("unexpected answer from ClickHouse catalog \"%s\" to a table check",
						CtasHttpCatalogName(http))));
	f = linitial(rows);
	if (strcmp(f[0], "0") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_SCHEMA_NAME),
				 errmsg("database \"%s\" does not exist in ClickHouse catalog \"%s\"",
						db, CtasHttpCatalogName(http))));
	return strcmp(f[1], "0") != 0;
}

/*
 * ch_logical_exists
 *		Does db.table exist as this transaction sees it: the latest action
 *		of this transaction on it decides, else the server.  *phys is the
 *		table that holds its current definition (a staging table when the
 *		table was created in this transaction).
 */
static bool
ch_logical_exists(CtasHttp *http, ChXact *xs, const char *db,
				  const char *table, char **phys)
{
	ListCell   *lc;
	ChAction   *last = NULL;

	*phys = pstrdup(table);
	if (xs)
	{
		foreach(lc, xs->actions)
		{
			ChAction   *a = lfirst(lc);

			if (strcmp(a->db, db) == 0 && strcmp(a->table, table) == 0)
				last = a;
		}
	}
	if (last == NULL)
		return ch_remote_exists(http, db, table);
	switch (last->kind)
	{
		case CH_CREATE:
		case CH_REPLACE:
			*phys = pstrdup(last->stage);
			return true;
		case CH_APPEND:
			*phys = pstrdup(last->source);
			return true;
		case CH_DROP:
			return false;
	}
	return false;
}

/*
 * ch_token
 *		Eight random hex digits, for the names of our scratch tables.  The
 *		rest of such a name (system identifier, xid, counter) can be
 *		guessed, and anyone who may create tables in the target database
 *		could create it first: our CREATE or RENAME would then fail, and
 *		undo would take the planted table for ours.  Palloc'd.
 */
static char *
ch_token(void)
{
	uint32		r;

	if (!pg_strong_random(&r, sizeof(r)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random name for a ClickHouse scratch table")));
	return psprintf("%08x", r);
}

/*
 * ch_new_action
 *		A new action, in part->cxt, at the current nesting level, with
 *		the names of its scratch tables: _ctas_fed_stage_<sysid>_<xid>_<n>_
 *		<token>, and _ctas_fed_{old,new,drop}_<sysid>_<xid>_<n>_<token>_
 *		<target> with a token of their own (the staging table can be seen
 *		in system.tables during the load; the others cannot be guessed
 *		from it).  Written to the durable record before it returns.
 */
static ChAction *
ch_new_action(CtasParticipant *part, ChXact *xs, ChActionKind kind,
			  const char *db, const char *table)
{
	MemoryContext old = MemoryContextSwitchTo(part->cxt);
	ChAction   *a = palloc0(sizeof(ChAction));
	int			serial = CtasScratchSerial();

	a->kind = kind;
	a->db = pstrdup(db);
	a->table = pstrdup(table);
	a->level = GetCurrentTransactionNestLevel();
	a->state = CH_ACTION_STAGING;
	/* names of the same action share its <sysid>_<xid>_<n> */
	if (kind != CH_DROP)
		a->stage = CtasScratchName("stage", serial, ch_token());
	if (kind == CH_REPLACE)
		a->old = CtasScratchName("old", serial,
								 psprintf("%s_%s", ch_token(), table));
	else if (kind == CH_CREATE)
		a->marker = CtasScratchName("new", serial,
									psprintf("%s_%s", ch_token(), table));
	else if (kind == CH_DROP)
		a->old = CtasScratchName("drop", serial,
								 psprintf("%s_%s", ch_token(), table));
	xs->actions = lappend(xs->actions, a);
	MemoryContextSwitchTo(old);

	/* durable before the action's first remote effect */
	CtasChRecordWrite(part, xs);
	return a;
}

static void ch_streaming_count(void *arg);
static void ch_insert_sql(ChLoad *cl);
static void ch_stream_step(ChLoad *cl, bool finish);

static void
ch_stream_open(ChLoad *cl)
{
	CtasLoad   *load = cl->load;

	/*
	 * Each stream (one per block in streaming mode) lives in a context of
	 * its own, deleted when it is done: its 1 MB buffer and curl handles
	 * do not pile up over the blocks of a long load.
	 */
	cl->stream_cxt = AllocSetContextCreate(load->cxt, "ctas_fed ClickHouse stream",
										   ALLOCSET_DEFAULT_SIZES);
	cl->stream = CtasHttpStreamOpen(cl->http, cl->insert_sql, "insert rows",
									cl->stream_cxt);
	cl->block_rows = 0;
	if (cl->streaming)
		CtasHttpStreamOnFailure(cl->stream, ch_streaming_count, cl);
	if (cl->xs)
	{
		ChXact	   *xs = cl->xs;

		CtasHttpStreamWatch(cl->stream, &xs->stream);
		xs->stream_qid = MemoryContextStrdup(GetMemoryChunkContext(xs),
											 CtasHttpStreamQueryId(cl->stream));
		xs->stream_level = GetCurrentTransactionNestLevel();
	}
}

static void
ch_stream_done(ChLoad *cl)
{
	CtasHttpStreamFinish(cl->stream);
	cl->stream = NULL;
	if (cl->xs)
	{
		cl->xs->stream = NULL;
		if (cl->xs->stream_qid)
			pfree(cl->xs->stream_qid);
		cl->xs->stream_qid = NULL;
	}
	MemoryContextDelete(cl->stream_cxt);
	cl->stream_cxt = NULL;
}

/* engine name of the table a load creates: its option's, or MergeTree */
static char *
ch_engine_name(CtasLoad *load)
{
	const ChOptions *o = CtasChOptions(load);

	return CtasChEngineName(o->engine ? o->engine : "MergeTree");
}

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

	if (load->part)
	{
		cl->xs = CtasChXact(load->part);
		cl->http = cl->xs->http;
	}
	else
	{
		cl->http = CtasHttpCreate(load->catalog, load->cxt);
		CtasChCheckVersion(cl->http);
	}

	/* the name, before anything moves */
	if (CtasIsScratchName(table))
		ereport(ERROR,
				(errcode(ERRCODE_RESERVED_NAME),
				 errmsg("table name \"%s\" is reserved", table),
				 errdetail("Names beginning with \"%s\" are kept for the scratch tables of ctas_fed.",
						   CTAS_SCRATCH_PREFIX)));
	return ch_logical_exists(cl->http, cl->xs, db, table, &cl->phys);
}

/*
 * ch_create_table
 *		create_table of the writer: create the staging table (atomic) or the
 *		target (streaming) - for if_exists 'append' a copy of the existing
 *		table, or nothing when streaming - and open the INSERT.  Always
 *		true: a table created meanwhile by someone else makes the RENAME of
 *		pre-commit fail, not this.
 */
static bool
ch_create_table(CtasLoad *load, bool exists)
{
	ChLoad	   *cl = (ChLoad *) load->private;
	const char *db = load->schema;
	const char *table = load->table;
	const char *phys = cl->phys;
	ChActionKind kind = CH_CREATE;
	char	  **types;
	int			i;

	if (exists)
	{
		Assert(load->opts.if_exists == CTAS_IF_EXISTS_REPLACE ||
			   load->opts.if_exists == CTAS_IF_EXISTS_APPEND);
		kind = load->opts.if_exists == CTAS_IF_EXISTS_REPLACE ?
			CH_REPLACE : CH_APPEND;
	}

	/* 1. the remote types: the target's when appending, else ours */
	types = palloc(sizeof(char *) * load->ncolumns);
	if (kind == CH_APPEND)
	{
		char	   *body;
		List	   *rows;
		int			nf;
		ListCell   *lc;

		body = CtasHttpQuery(cl->http,
							 psprintf("SELECT name, type FROM system.columns WHERE database = %s AND table = %s",
									  CtasChLit(db), CtasChLit(phys)),
							 "read the columns of the target table");
		rows = CtasChTsv(body, &nf);
		for (i = 0; i < load->ncolumns; i++)
		{
			types[i] = NULL;
			foreach(lc, rows)
			{
				char	  **f = lfirst(lc);

				if (nf == 2 && f[0] && strcmp(f[0], load->columns[i].name) == 0)
					types[i] = f[1];
			}
			if (types[i] == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("column \"%s\" does not exist in table \"%s\" of catalog \"%s\"",
								load->columns[i].name, CtasChDisplay(db, table),
								load->catalog->name),
						 errdetail("Rows are appended by column name.")));
		}
	}
	else
	{
		for (i = 0; i < load->ncolumns; i++)
			types[i] = load->columns[i].remote_type;
	}
	cl->ncols = load->ncolumns;
	cl->types = types;
	cl->cols = CtasChSetupColumns(load, types);

	/* 2. the table the rows go into */
	if (cl->streaming)
	{
		cl->insert_table = pstrdup(table);
		if (kind == CH_CREATE)
		{
			CtasHttpQuery(cl->http, CtasChCreateSql(load, cl->cols, db, table),
						  "create the table");
			cl->engine = ch_engine_name(load);
		}
		else
		{
			cl->count_before = CtasChParseCount(cl->http,
											  CtasHttpQuery(cl->http,
															psprintf("SELECT count() FROM %s", CtasChQname(db, table)),
															"count the rows of the target table"),
											  "SELECT count()");
		}
	}
	else
	{
		ChAction   *a = ch_new_action(load->part, cl->xs, kind, db, table);

		cl->action = a;
		cl->insert_table = pstrdup(a->stage);
		/* the action is recorded first: abort drops the stage if needed */
		if (kind == CH_APPEND)
		{
			char	   *engine = CtasChRemoteEngine(cl->http, db, phys);
			char	   *create;

			a->source = MemoryContextStrdup(load->part->cxt, phys);

			/*
			 * A copy of a Buffer, Distributed, Merge, View ... table would
			 * write to (and read from) the underlying data at once: no
			 * staging possible.
			 */
			if (CtasChCountCheckMode(engine) == 0 &&
				!(strncmp(engine, "Replicated", 10) == 0 &&
				  CtasChIsMergetree(engine)))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot append atomically to %s, a table of engine %s",
								CtasChDisplay(db, table), engine),
						 errhint("Append to the table that holds the rows, or use atomic = false.")));
			if (strncmp(engine, "Replicated", 10) == 0)
			{
				/* a copy would share the replica path: stage as MergeTree */
				create = psprintf("CREATE TABLE %s AS %s ENGINE = MergeTree ORDER BY tuple()",
								  CtasChQname(db, a->stage), CtasChQname(db, phys));
				cl->engine = pstrdup("MergeTree");
			}
			else
			{
				create = psprintf("CREATE TABLE %s AS %s",
								  CtasChQname(db, a->stage), CtasChQname(db, phys));
				cl->engine = engine;
			}
			CtasHttpQuery(cl->http, create, "create the staging table");
		}
		else
		{
			CtasHttpQuery(cl->http, CtasChCreateSql(load, cl->cols, db, a->stage),
						  "create the staging table");
			cl->engine = ch_engine_name(load);
		}
		if (CtasChCountCheckMode(cl->engine) == 2)
			CtasHttpQuery(cl->http,
						  psprintf("SYSTEM STOP MERGES %s", CtasChQname(db, a->stage)),
						  "stop merges on the staging table");
	}

	/* 3. the row stream */
	ch_insert_sql(cl);
	if (!load->skip_data)
		ch_stream_open(cl);
	return true;
}

/* cl->insert_sql: the INSERT of the load's columns into cl->insert_table */
static void
ch_insert_sql(ChLoad *cl)
{
	CtasLoad   *load = cl->load;
	StringInfoData sql;
	int			i;

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (",
					 CtasChQname(cl->db, cl->insert_table));
	for (i = 0; i < load->ncolumns; i++)
	{
		if (i > 0)
			appendStringInfoString(&sql, ", ");
		CtasChAppendIdent(&sql, load->columns[i].name);
	}
	appendStringInfoString(&sql, ") FORMAT RowBinary");
	cl->insert_sql = sql.data;
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

	Assert(!cl->streaming && cl->action != NULL);
	state = list_make2(makeString(cl->db), makeString(cl->insert_table));
	for (i = 0; i < cl->ncols; i++)
		state = lappend(state, list_make2(makeString(cl->types[i]),
										  makeBoolean(cl->cols[i].key)));
	if (cl->stream)
		ch_stream_step(cl, true);
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

	if (list_length(l) != load->ncolumns + 2)
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
	cl->http = CtasHttpCreate(load->catalog, load->cxt);
	CtasChCheckVersion(cl->http);
	ch_insert_sql(cl);
	ch_stream_open(cl);
}

/*
 * ch_streaming_count
 *		Streaming mode, after a failed INSERT: ask the server how many rows
 *		the table holds now (a dropped connection keeps what arrived), so
 *		that the error says what stays.  Never raises an ERROR.
 */
static void
ch_streaming_count(void *arg)
{
	ChLoad	   *cl = (ChLoad *) arg;
	char	   *body;

	if (CtasHttpTryQuery(cl->http,
						 psprintf("SELECT count() FROM %s",
								  CtasChQname(cl->db, cl->insert_table)),
						 "count the rows of the table", CTAS_HTTP_CLEANUP,
						 &body, NULL) && body != NULL)
	{
		uint64		n = strtou64(body, NULL, 10);

		cl->load->rows_committed = n >= cl->count_before ? n - cl->count_before : 0;
	}
}

/* Flush or finish the stream; in streaming mode, keep rows_committed true */
static void
ch_stream_step(ChLoad *cl, bool finish)
{
	if (finish)
		ch_stream_done(cl);
	else
		CtasHttpStreamFlush(cl->stream);
	if (cl->streaming)
		cl->load->rows_committed = cl->rows;
}

/*
 * ch_put_row
 *		put_row of the writer: encode one row into the stream's buffer.
 */
static void
ch_put_row(CtasLoad *load, TupleTableSlot *slot)
{
	ChLoad	   *cl = (ChLoad *) load->private;
	StringInfo	buf = CtasHttpStreamBuffer(cl->stream);
	int			before = buf->len;
	int			i;

	slot_getallattrs(slot);
	for (i = 0; i < cl->ncols; i++)
		CtasChPutValue(&cl->cols[i].enc, buf, slot->tts_values[i],
					 slot->tts_isnull[i]);
	load->bytes += buf->len - before;
	cl->rows++;
	cl->block_rows++;

	if (cl->streaming && cl->block_rows >= (uint64) load->opts.commit_every)
	{
		ch_stream_step(cl, true);
		ch_stream_open(cl);
	}
	else if (buf->len >= CTAS_HTTP_STREAM_CHUNK)
	{
		/* what the socket took is kept when the connection drops */
		ch_stream_step(cl, false);
	}
}

/*
 * ch_end_load
 *		end_load of the writer: finish the INSERT and, in atomic mode,
 *		check that the staging table holds exactly the rows sent.
 */
static void
ch_end_load(CtasLoad *load)
{
	ChLoad	   *cl = (ChLoad *) load->private;
	uint64		n;

	if (cl == NULL || load->skipped)
		return;
	if (cl->stream)
		ch_stream_step(cl, true);
	if (cl->streaming || cl->worker)
		return;
	/* a parallel load: the workers sent the rows, load->rows sums them */
	if (cl->exported)
		cl->rows = load->rows;

	if (CtasChCountCheckMode(cl->engine) != 0)
	{
		n = CtasChParseCount(cl->http,
						   CtasHttpQuery(cl->http,
										 psprintf("SELECT count() FROM %s",
												  CtasChQname(cl->db, cl->insert_table)),
										 "count the rows of the staging table"),
						   "SELECT count()");
		if (n != cl->rows)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("staging table of \"%s\" in catalog \"%s\" holds " UINT64_FORMAT " rows, but " UINT64_FORMAT " were sent",
							CtasChDisplay(cl->db, load->table), load->catalog->name,
							n, cl->rows)));
	}
	if (CtasChCountCheckMode(cl->engine) == 2)
		CtasHttpQuery(cl->http,
					  psprintf("SYSTEM START MERGES %s",
							   CtasChQname(cl->db, cl->insert_table)),
					  "start merges on the staging table");
	cl->action->state = CH_ACTION_LOADED;
	cl->action->rows = cl->rows;
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

	if (!ch_logical_exists(xs->http, xs, load->schema, load->table, &phys))
	{
		if (missing_ok)
		{
			ereport(NOTICE,
					(errmsg("table \"%s\" does not exist in catalog \"%s\", skipping",
							CtasChDisplay(load->schema, load->table),
							load->catalog->name)));
			return;
		}
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table \"%s\" does not exist in catalog \"%s\"",
						CtasChDisplay(load->schema, load->table),
						load->catalog->name)));
	}
	a = ch_new_action(load->part, xs, CH_DROP, load->schema, load->table);
	a->state = CH_ACTION_LOADED;
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
	ExplainPropertyText("Remote DDL",
						CtasChCreateSql(load, cols, load->schema, load->table), es);
}

static void
ch_list_tables(CtasCatalog *catalog, const char *schema,
			   void (*emit) (void *arg, const char *name, const char *kind),
			   void *arg)
{
	CtasHttp   *http = CtasHttpCreate(catalog, CurrentMemoryContext);
	const char *db = schema ? schema : CtasCatalogOption(catalog, "database");
	char	   *body;
	List	   *rows;
	int			nf;
	ListCell   *lc;

	if (db == NULL)
		db = "default";
	(void) ch_remote_exists(http, db, "");	/* ERROR for a missing database */
	body = CtasHttpQuery(http,
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
	CtasHttp   *http = CtasHttpCreate(catalog, CurrentMemoryContext);
	const char *db = schema ? schema : CtasCatalogOption(catalog, "database");
	char	   *body;
	List	   *rows;
	int			nf;
	ListCell   *lc;

	if (db == NULL)
		db = "default";
	if (!ch_remote_exists(http, db, table))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table \"%s\" does not exist in catalog \"%s\"",
						CtasChDisplay(db, table), catalog->name)));
	body = CtasHttpQuery(http,
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

/* type 'clickhouse': the HTTP interface */
static const CtasOption ch_server_options[] = {
	{"url", ForeignServerRelationId, CTAS_OPT_SERVICE_URL, 0, 0, NULL, false, true},
	{"database", ForeignServerRelationId, CTAS_OPT_STRING},
	{"connect_timeout", ForeignServerRelationId, CTAS_OPT_INT, 1, 3600},
	{"timeout", ForeignServerRelationId, CTAS_OPT_INT, 1, 86400},
	{NULL}
};

static const char *const ch_required_options[] = {"url", NULL};

const CtasTargetRoutine CtasClickHouseTarget = {
	.type_name = "clickhouse",
	.server_options = ch_server_options,
	.required_options = ch_required_options,
	.commit_order = CTAS_COMMIT_LAST_RESOURCE,
	.map_column = CtasChMapColumn,
	.statement_options = CtasChStatementOptions,
	.parse_option = CtasChParseOption,
	.check_options = CtasChCheckOptions,
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
