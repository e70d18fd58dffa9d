/*-------------------------------------------------------------------------
 *
 * stage.c
 *		  The steps of a load shared by a load into one server (writer.c)
 *		  and into the shards of a cluster (cluster.c): the actions of the
 *		  transaction and their durable record, staging tables, the row
 *		  stream of an INSERT, and the check of what arrived.
 *
 * Each step works on one ChLoad, that is one server: the catalog's url,
 * or one shard of a cluster catalog (ChLoad.shard), whose actions carry
 * the shard so that commit, abort and the resolver reach the right server.
 * Names of scratch tables are random (ch_token): a table a user created
 * under such a name is never taken for ours.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/stage.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "clickhouse.h"
#include "gid.h"

static void ch_streaming_count(void *arg);

/*
 * CtasChRemoteExists
 *		Does db.table exist on the server?  ERROR when the database does not
 *		exist.  One round trip.
 */
bool
CtasChRemoteExists(CtasChHttp *http, const char *db, const char *table)
{
	char	   *sql;
	char	   *body;
	List	   *rows;
	int			nf;
	char	  **f;

	sql = psprintf("SELECT (SELECT count() FROM system.databases WHERE name = %s), "
				   "(SELECT count() FROM system.tables WHERE database = %s AND name = %s)",
				   CtasChLit(db), CtasChLit(db), CtasChLit(table));
	body = CtasChHttpQuery(http, sql, "check the target table");
	rows = CtasChTsv(body, &nf);
	if (list_length(rows) != 1 || nf != 2)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("unexpected answer from ClickHouse catalog \"%s\" to a table check",
						CtasChHttpCatalogName(http))));
	f = linitial(rows);
	if (strcmp(f[0], "0") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_SCHEMA_NAME),
				 errmsg("database \"%s\" does not exist in ClickHouse catalog \"%s\"",
						db, CtasChHttpCatalogName(http))));
	return strcmp(f[1], "0") != 0;
}

/*
 * CtasChLogicalExists
 *		Does db.table exist on shard (0: the catalog's url) as this
 *		transaction sees it: the latest action of this transaction on it
 *		decides, else the server http talks to.  *phys is the table that
 *		holds its current definition (a staging table when the table was
 *		created in this transaction).
 */
bool
CtasChLogicalExists(CtasChHttp *http, ChXact *xs, int shard, const char *db,
					const char *table, char **phys)
{
	ListCell   *lc;
	ChAction   *last = NULL;

	*phys = pstrdup(table);
	if (xs)
	{
		foreach(lc, xs->staged.actions)
		{
			ChAction   *a = lfirst(lc);

			if (a->shard == shard && strcmp(a->base.db, db) == 0 &&
				strcmp(a->base.table, table) == 0)
				last = a;
		}
	}
	if (last == NULL)
		return CtasChRemoteExists(http, db, table);
	switch (last->kind)
	{
		case CH_CREATE:
		case CH_REPLACE:
			*phys = pstrdup(last->base.stage);
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
 * CtasChNewAction
 *		A new action on shard (0: the catalog's url), in part->cxt, at the
 *		current nesting level, with
 *		the names of its scratch tables: _ctas_fed_stage_<sysid>_<xid>_<n>_
 *		<token>, and _ctas_fed_{old,new,drop}_<sysid>_<xid>_<n>_<token>_
 *		<target> with a token of their own (the staging table can be seen
 *		in system.tables during the load; the others cannot be guessed
 *		from it).  Written to the durable record before it returns.
 */
ChAction *
CtasChNewAction(CtasParticipant *part, ChXact *xs, ChActionKind kind,
				int shard, const char *db, const char *table)
{
	ChAction   *a;
	int			serial = CtasScratchSerial();
	MemoryContext old;

	a = (ChAction *) CtasStagedNewAction(&xs->staged, part->cxt,
										 sizeof(ChAction), db, table);
	old = MemoryContextSwitchTo(part->cxt);
	a->kind = kind;
	a->shard = shard;
	/* names of the same action share its <sysid>_<xid>_<n> */
	if (kind != CH_DROP)
		a->base.stage = CtasScratchName("stage", serial, CtasStagedToken());
	if (kind == CH_REPLACE)
		a->base.old = CtasScratchName("old", serial,
								 psprintf("%s_%s", CtasStagedToken(), table));
	else if (kind == CH_CREATE)
		a->base.marker = CtasScratchName("new", serial,
									psprintf("%s_%s", CtasStagedToken(), table));
	else if (kind == CH_DROP)
		a->base.old = CtasScratchName("drop", serial,
								 psprintf("%s_%s", CtasStagedToken(), table));
	MemoryContextSwitchTo(old);

	/* durable before the action's first remote effect */
	CtasChRecordWrite(part, xs);
	return a;
}


/*
 * CtasChStreamOpen
 *		Open the INSERT of cl (cl->insert_sql) on its server, watched by the
 *		transaction's slot of cl's shard.  ERROR when it cannot start.
 */
void
CtasChStreamOpen(ChLoad *cl)
{
	CtasLoad   *load = cl->load;

	/*
	 * Each stream (one per block in streaming mode) lives in a context of
	 * its own, deleted when it is done: its 1 MB buffer and curl handles
	 * do not pile up over the blocks of a long load.
	 */
	cl->stream_cxt = AllocSetContextCreate(load->cxt, "ctas_fed ClickHouse stream",
										   ALLOCSET_DEFAULT_SIZES);
	cl->stream = CtasChHttpStreamOpen(cl->http, cl->insert_sql, "insert rows",
									  cl->stream_cxt);
	cl->block_rows = 0;
	if (cl->streaming)
		CtasChHttpStreamOnFailure(cl->stream, ch_streaming_count, cl);
	if (cl->xs)
	{
		ChXact	   *xs = cl->xs;

		CtasChHttpStreamWatch(cl->stream, &xs->stream[cl->shard]);
		xs->stream_qid[cl->shard] =
			MemoryContextStrdup(GetMemoryChunkContext(xs),
								CtasChHttpStreamQueryId(cl->stream));
		xs->stream_level = GetCurrentTransactionNestLevel();
	}
}

static void
ch_stream_done(ChLoad *cl)
{
	CtasChHttpStreamFinish(cl->stream);
	cl->stream = NULL;
	if (cl->xs)
	{
		cl->xs->stream[cl->shard] = NULL;
		if (cl->xs->stream_qid[cl->shard])
			pfree(cl->xs->stream_qid[cl->shard]);
		cl->xs->stream_qid[cl->shard] = NULL;
	}
	MemoryContextDelete(cl->stream_cxt);
	cl->stream_cxt = NULL;
}

/* engine name of the table a load creates: its option's, or MergeTree */
char *
CtasChLoadEngine(CtasLoad *load)
{
	const ChOptions *o = CtasChOptions(load);

	return CtasChEngineName(o->engine ? o->engine : "MergeTree");
}


/*
 * CtasChTargetTypes
 *		The remote type of each column of cl's load: when appending (kind
 *		CH_APPEND), the types of the existing table cl->phys on cl's
 *		server, else the mapped ones.  ERROR naming a column the table
 *		lacks.  Palloc'd.
 */
char	  **
CtasChTargetTypes(ChLoad *cl, ChActionKind kind)
{
	CtasLoad   *load = cl->load;
	char	  **types = palloc(sizeof(char *) * load->ncolumns);
	int			i;

	if (kind == CH_APPEND)
	{
		char	   *body;
		List	   *rows;
		int			nf;
		ListCell   *lc;

		body = CtasChHttpQuery(cl->http,
							   psprintf("SELECT name, type FROM system.columns WHERE database = %s AND table = %s",
										CtasChLit(cl->db), CtasChLit(cl->phys)),
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
								load->columns[i].name,
								CtasChDisplay(cl->db, cl->phys),
								CtasChHttpCatalogName(cl->http)),
						 errdetail("Rows are appended by column name.")));
		}
	}
	else
	{
		for (i = 0; i < load->ncolumns; i++)
			types[i] = load->columns[i].remote_type;
	}
	return types;
}

/*
 * CtasChStage
 *		Atomic mode: record an action of kind on cl's shard for the load's
 *		target (cl->phys holding its current definition), and create its
 *		staging table on cl's server - for 'append' a copy of the existing
 *		table - with merges stopped where they would fold rows before the
 *		count.  Sets cl->action, cl->insert_table and cl->engine.  ERROR
 *		on failure; the action is recorded first, so abort drops the stage.
 */
void
CtasChStage(ChLoad *cl, ChActionKind kind)
{
	CtasLoad   *load = cl->load;
	const char *db = cl->db;
	const char *phys = cl->phys;
	ChAction   *a;

	a = CtasChNewAction(load->part, cl->xs, kind, cl->shard, db,
						cl->cluster ? cl->local : load->table);
	cl->action = a;
	cl->insert_table = pstrdup(a->base.stage);
	if (kind == CH_APPEND)
	{
		char	   *engine = CtasChRemoteEngine(cl->http, db, phys);
		char	   *create;

		a->source = MemoryContextStrdup(load->part->cxt, phys);

		/*
		 * A copy of a Buffer, Distributed, Merge, View ... table would
		 * write to (and read from) the underlying data at once: no staging
		 * possible.
		 */
		if (CtasChCountCheckMode(engine) == 0 &&
			!(strncmp(engine, "Replicated", 10) == 0 &&
			  CtasChIsMergetree(engine)))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot append atomically to %s, a table of engine %s",
							CtasChDisplay(db, a->base.table), engine),
					 errhint("Append to the table that holds the rows, or use atomic = false.")));
		if (strncmp(engine, "Replicated", 10) == 0)
		{
			/* a copy would share the replica path: stage as MergeTree */
			create = psprintf("CREATE TABLE %s AS %s ENGINE = MergeTree ORDER BY tuple()",
							  CtasChQname(db, a->base.stage), CtasChQname(db, phys));
			cl->engine = pstrdup("MergeTree");
		}
		else
		{
			create = psprintf("CREATE TABLE %s AS %s",
							  CtasChQname(db, a->base.stage), CtasChQname(db, phys));
			cl->engine = engine;
		}
		CtasChHttpQuery(cl->http, create, "create the staging table");
	}
	else
	{
		CtasChHttpQuery(cl->http, CtasChCreateSql(load, cl->cols, db, a->base.stage),
						"create the staging table");
		cl->engine = CtasChLoadEngine(load);
	}
	if (CtasChCountCheckMode(cl->engine) == 2)
		CtasChHttpQuery(cl->http,
						psprintf("SYSTEM STOP MERGES %s", CtasChQname(db, a->base.stage)),
						"stop merges on the staging table");
}


/* cl->insert_sql: the INSERT of the load's columns into cl->insert_table */
void
CtasChInsertSql(ChLoad *cl)
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

	if (CtasChHttpTryQuery(cl->http,
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
void
CtasChStreamStep(ChLoad *cl, bool finish)
{
	if (finish)
		ch_stream_done(cl);
	else
		CtasChHttpStreamFlush(cl->stream);
	if (cl->streaming)
		cl->load->rows_committed = cl->rows;
}


/*
 * CtasChStageCheck
 *		After the INSERT into cl's staging table has ended: the table must
 *		hold exactly the cl->rows sent (for engines whose rows can be
 *		counted), merges start again, and the action is LOADED.  ERROR
 *		otherwise.
 */
void
CtasChStageCheck(ChLoad *cl)
{
	uint64		n;

	if (CtasChCountCheckMode(cl->engine) != 0)
	{
		n = CtasChParseCount(cl->http,
						   CtasChHttpQuery(cl->http,
										   psprintf("SELECT count() FROM %s",
													CtasChQname(cl->db, cl->insert_table)),
										   "count the rows of the staging table"),
						   "SELECT count()");
		if (n != cl->rows)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("staging table of \"%s\" in catalog \"%s\" holds " UINT64_FORMAT " rows, but " UINT64_FORMAT " were sent",
							CtasChDisplay(cl->db, cl->action->base.table),
							CtasChHttpCatalogName(cl->http), n, cl->rows)));
	}
	if (CtasChCountCheckMode(cl->engine) == 2)
		CtasChHttpQuery(cl->http,
						psprintf("SYSTEM START MERGES %s",
								 CtasChQname(cl->db, cl->insert_table)),
						"start merges on the staging table");
	cl->action->base.state = CTAS_STAGED_LOADED;
	cl->action->rows = cl->rows;
}

