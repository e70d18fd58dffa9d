/*-------------------------------------------------------------------------
 *
 * writer.c
 *		  The MySQL writer: CREATE TABLE AS into a MariaDB / MySQL catalog,
 *		  and the routine of the target.
 *
 *	begin_load	does the target exist, on the server or among what this
 *				transaction already did to it?  (ctas.c decides what
 *				follows from if_exists.)
 *	create_table
 *				create / replace: a staging table _ctas_fed_stage_<sysid>_
 *				<xid>_<n>_<random> with the mapped columns (and for create a
 *				commit marker), on the participant's autocommit session;
 *				append: the rows go straight into the target in the XA
 *				transaction of the participant (xact.c), started with the
 *				first chunk: MySQL cannot commit a branch that wrote nothing
 *				(XA PREPARE rolls a read-only branch back, and XA COMMIT then
 *				fails with XA_RBROLLBACK).
 *	put_row		the row is encoded into the chunk buffer; every 4 MB the
 *				chunk is sent by one LOAD DATA LOCAL INFILE whose "file" is
 *				served from memory (conn.c), while the next chunk is encoded
 *				into a second buffer: memory stays flat (two chunks).
 *	end_load	the last chunk is sent.  Every chunk is checked: the server
 *				must report exactly the rows sent and no warning (LOAD DATA
 *				LOCAL turns data errors into warnings).
 *
 * Streaming mode (atomic = false) creates the target first and loads it in
 * a session with autocommit off, committing every commit_every rows; what
 * is committed stays.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/mysql/writer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/explain.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "utils/memutils.h"

#include "gid.h"
#include "mysql_target.h"

/* ------------------------------------------------------------------------
 * Remote steps of a load
 * ------------------------------------------------------------------------
 */

/*
 * my_remote_exists
 *		Does db.table exist on the server?  ERROR when the database does not.
 */
static bool
my_remote_exists(MyConn *conn, const char *db, const char *table)
{
	List	   *rows;
	int			nf;
	char	  **f;

	rows = CtasMyQuery(conn,
					   psprintf("SELECT (SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s), "
								"(SELECT count(*) FROM information_schema.tables WHERE table_schema = %s AND table_name = %s)",
								CtasMyLiteral(db), CtasMyLiteral(db), CtasMyLiteral(table)),
					   "check the target table", &nf);
	if (list_length(rows) != 1 || nf != 2)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("unexpected answer from MySQL catalog \"%s\" to a table check",
						CtasMyCatalogName(conn))));
	f = linitial(rows);
	if (f[0] == NULL || strcmp(f[0], "0") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_SCHEMA_NAME),
				 errmsg("database \"%s\" does not exist in MySQL catalog \"%s\"",
						db, CtasMyCatalogName(conn))));
	return f[1] != NULL && strcmp(f[1], "0") != 0;
}

/* The latest action of this transaction on db.table, or NULL */
static MyAction *
my_last_action(MyXact *xs, const char *db, const char *table)
{
	ListCell   *lc;
	MyAction   *last = NULL;

	if (xs == NULL)
		return NULL;
	foreach(lc, xs->staged.actions)
	{
		MyAction   *a = lfirst(lc);

		if (strcmp(a->base.db, db) == 0 && strcmp(a->base.table, table) == 0)
			last = a;
	}
	return last;
}

/*
 * my_logical_exists
 *		Does db.table exist as this transaction sees it?  *phys is the table
 *		that holds its definition now (a staging table when it was created
 *		or replaced in this transaction).
 */
static bool
my_logical_exists(MyConn *conn, MyXact *xs, const char *db,
				  const char *table, char **phys)
{
	MyAction   *last = my_last_action(xs, db, table);

	*phys = pstrdup(table);
	if (last == NULL)
		return my_remote_exists(conn, db, table);
	switch (last->kind)
	{
		case MY_CREATE:
		case MY_REPLACE:
			*phys = pstrdup(last->base.stage);
			return true;
		case MY_APPEND:
			return true;
		case MY_DROP:
			return false;
	}
	return false;
}

/* no DDL on a table whose rows wait in this transaction's XA branch */
static void
my_check_not_appended(CtasLoad *load, MyXact *xs)
{
	MyAction   *last = my_last_action(xs, load->schema, load->table);

	if (last && last->kind == MY_APPEND)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot replace or drop table \"%s\" of MySQL catalog \"%s\" after appending to it in the same transaction",
						CtasMyDisplay(load->schema, load->table), load->catalog->name),
				 errdetail("The appended rows are held by an XA transaction until commit, and MySQL allows no DDL on them meanwhile.")));
}

/*
 * the LOAD DATA clauses after the file name, into db.into; own_table: a
 * table this load or its transaction created (CtasMyLoadSql)
 */
static char *
my_load_sql(CtasLoad *load, const char *db, const char *into,
			MyColumn *cols, bool own_table)
{
	return CtasMyLoadSql(CtasMyQname(db, into), cols, load->ncolumns, NULL,
						 own_table);
}

/* every column of the load must exist in db.table (appends go by name) */
static void
my_check_columns(MyLoad *ml, const char *db, const char *table)
{
	CtasLoad   *load = ml->load;
	List	   *rows;
	ListCell   *lc;
	int			i;

	rows = CtasMyQuery(ml->conn,
					   psprintf("SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
								CtasMyLiteral(db), CtasMyLiteral(table)),
					   "read the columns of the target table", NULL);
	for (i = 0; i < load->ncolumns; i++)
	{
		bool		found = false;

		foreach(lc, rows)
		{
			char	  **f = lfirst(lc);

			if (f[0] && pg_strcasecmp(f[0], load->columns[i].name) == 0)
				found = true;
		}
		if (!found)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" does not exist in table \"%s\" of catalog \"%s\"",
							load->columns[i].name, CtasMyDisplay(db, table),
							load->catalog->name),
					 errdetail("Rows are appended by column name.")));
	}
}

/*
 * my_finish_inflight
 *		Wait for the chunk the server is loading, and check that it took
 *		every row without a warning.  ERROR otherwise, with the first
 *		warning (which names the column and the row).
 */
static void
my_finish_inflight(MyLoad *ml)
{
	unsigned int warnings = 0;
	uint64		n;

	if (!ml->inflight)
		return;
	ml->inflight = false;
	n = CtasMyLoadFinish(ml->conn, &warnings);
	if (warnings > 0 || n != ml->inflight_rows)
	{
		char	   *w = warnings > 0 ? CtasMyFirstWarning(ml->conn) : NULL;

		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("MySQL catalog \"%s\" did not take the rows sent to \"%s\" exactly",
						ml->load->catalog->name,
						CtasMyDisplay(ml->db, ml->load->table)),
				 errdetail_internal("It took " UINT64_FORMAT " of " UINT64_FORMAT " rows with %u warning(s)%s%s.",
									n, ml->inflight_rows, warnings,
									w ? "; the first: " : "", w ? w : "")));
	}
	ml->sent += n;
}

/*
 * my_flush
 *		Hand the chunk being filled to the server as one LOAD DATA, once
 *		the previous one is done, and go on filling the other buffer while
 *		the server reads it: encoding and loading overlap, as the two
 *		processes of a pipe do.  Memory: two chunks.
 */
static void
my_flush(MyLoad *ml)
{
	StringInfo	buf = &ml->bufs[ml->cur];

	my_finish_inflight(ml);
	if (ml->chunk_rows == 0)
		return;
	if (ml->xa_later)
	{
		ml->conn = CtasMyXaBegin(ml->load->part, ml->xs);
		ml->xa_later = false;
	}
	if (ml->gid && !ml->xa_started)
	{
		CtasMyExec(ml->conn, psprintf("XA START %s", CtasMyLiteral(ml->gid)),
				   "start the XA branch of a parallel worker");
		ml->xa_started = true;
	}
	CtasMyLoadStart(ml->conn, ml->load_sql, buf->data, buf->len);
	ml->inflight = true;
	ml->inflight_rows = ml->chunk_rows;
	ml->chunk_rows = 0;
	ml->cur = 1 - ml->cur;
	resetStringInfo(&ml->bufs[ml->cur]);
}

/* streaming: commit what was sent */
static void
my_stream_commit(MyLoad *ml)
{
	my_flush(ml);
	my_finish_inflight(ml);
	CtasMyExec(ml->conn, "COMMIT", "commit the rows");
	ml->load->rows_committed = ml->sent;
	ml->block_rows = 0;
}

/* ------------------------------------------------------------------------
 * The writer
 * ------------------------------------------------------------------------
 */

static bool
my_begin_load(CtasLoad *load)
{
	MyLoad	   *ml = palloc0(sizeof(MyLoad));

	load->private = ml;
	load->format = "LOAD DATA LOCAL INFILE (text)";
	ml->load = load;
	ml->db = pstrdup(load->schema);
	ml->streaming = !load->opts.atomic;
	if (load->part)
	{
		ml->xs = CtasMyXact(load->part);
		ml->conn = ml->xs->conn;
	}
	else
		ml->conn = CtasMyConnect(load->catalog, load->cxt, false);
	return my_logical_exists(ml->conn, ml->xs, ml->db, load->table, &ml->phys);
}

static bool
my_create_table(CtasLoad *load, bool exists)
{
	MyLoad	   *ml = (MyLoad *) load->private;
	const char *db = ml->db;
	MyActionKind kind = MY_CREATE;
	bool		own_table = true;	/* into a table created by us */

	if (exists)
		kind = load->opts.if_exists == CTAS_IF_EXISTS_REPLACE ? MY_REPLACE : MY_APPEND;
	ml->cols = CtasMySetupColumns(load);

	if (ml->streaming)
	{
		if (kind == MY_REPLACE)
			CtasMyExec(ml->conn, psprintf("DROP TABLE %s", CtasMyQname(db, load->table)),
					   "drop the table to replace");
		if (kind != MY_APPEND)
			CtasMyExec(ml->conn, CtasMyCreateSql(load, db, load->table),
					   "create the table");
		else
		{
			my_check_columns(ml, db, load->table);
			own_table = false;
		}
		CtasMyExec(ml->conn, "SET autocommit = 0", "start the load");
		ml->into = pstrdup(load->table);
	}
	else if (kind == MY_APPEND)
	{
		MyAction   *last = my_last_action(ml->xs, db, load->table);

		if (last && (last->kind == MY_CREATE || last->kind == MY_REPLACE))
		{
			/* into this transaction's own staging table */
			if (last->base.level != GetCurrentTransactionNestLevel())
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot append to table \"%s\" of MySQL catalog \"%s\" in a savepoint of the transaction that created it",
								CtasMyDisplay(db, load->table), load->catalog->name)));
			ml->into = pstrdup(last->base.stage);
			last->base.state = CTAS_STAGED_STAGING;
			ml->action = last;
		}
		else
		{
			/* the XA transaction starts with the first chunk (my_flush) */
			ml->action = CtasMyNewAction(load->part, ml->xs, MY_APPEND, db,
										 load->table);
			ml->into = pstrdup(load->table);
			ml->xa_later = true;
			own_table = false;
		}
		my_check_columns(ml, db, ml->into);
	}
	else
	{
		MyAction   *a;

		my_check_not_appended(load, ml->xs);
		a = CtasMyNewAction(load->part, ml->xs, kind, db, load->table);
		ml->action = a;
		/* recorded first: abort drops what exists of it */
		CtasMyExec(ml->conn, CtasMyCreateSql(load, db, a->base.stage),
				   "create the staging table");
		if (a->base.marker)
			CtasMyExec(ml->conn,
					   psprintf("CREATE TABLE %s (x TINYINT) ENGINE = InnoDB",
								CtasMyQname(db, a->base.marker)),
					   "create the commit marker");
		ml->into = pstrdup(a->base.stage);
	}
	ml->load_sql = my_load_sql(load, db, ml->into, ml->cols, own_table);
	initStringInfo(&ml->bufs[0]);
	initStringInfo(&ml->bufs[1]);
	return true;
}

static void
my_put_row(CtasLoad *load, TupleTableSlot *slot)
{
	MyLoad	   *ml = (MyLoad *) load->private;
	StringInfo	buf = &ml->bufs[ml->cur];
	int			before = buf->len;
	int			i;

	slot_getallattrs(slot);
	for (i = 0; i < load->ncolumns; i++)
	{
		if (i > 0)
			appendStringInfoChar(buf, '\t');
		CtasMyPutValue(&ml->cols[i], buf, slot->tts_values[i],
					   slot->tts_isnull[i]);
	}
	appendStringInfoChar(buf, '\n');
	load->bytes += buf->len - before;
	ml->chunk_rows++;
	ml->block_rows++;
	if (ml->streaming && ml->block_rows >= (uint64) load->opts.commit_every)
		my_stream_commit(ml);
	else if (buf->len >= MY_CHUNK_BYTES)
		my_flush(ml);
	else if (ml->inflight && (ml->chunk_rows & 63) == 0)
		CtasMyLoadPoll(ml->conn);	/* keep the server fed */
}

static void my_parallel_check(MyLoad *ml);
static void my_parallel_check_branches(MyLoad *ml);

static void
my_end_load(CtasLoad *load)
{
	MyLoad	   *ml = (MyLoad *) load->private;

	if (ml == NULL || load->skipped || ml->load_sql == NULL)
		return;
	if (ml->streaming)
	{
		my_stream_commit(ml);
		return;
	}
	my_flush(ml);
	my_finish_inflight(ml);
	if (ml->xa_started)
	{
		/* a parallel worker of an append: its branch waits for the leader */
		CtasMyExec(ml->conn, psprintf("XA END %s", CtasMyLiteral(ml->gid)),
				   "end the XA branch of a parallel worker");
		CtasMyExec(ml->conn, psprintf("XA PREPARE %s", CtasMyLiteral(ml->gid)),
				   "prepare the XA branch of a parallel worker");
		ml->xa_started = false;
		CtasMyClose(ml->conn);
		ml->conn = NULL;
	}
	if (ml->parallel && ml->action && ml->action->branches)
		my_parallel_check_branches(ml);
	else if (ml->parallel)
		my_parallel_check(ml);
	if (ml->action)
		ml->action->base.state = CTAS_STAGED_LOADED;
}

/* ------------------------------------------------------------------------
 * Parallel loads
 *
 * Into a staging table (create, replace, or an append to this
 * transaction's own new table): each worker loads it through a connection
 * of its own in autocommit, its chunks checked as in a serial load; the
 * staging table is the leader's action, published, undone and resolved as
 * for a serial load, so a worker's rows are never visible under the
 * table's name unless the local transaction commits.
 *
 * An append to an existing table: no connection can join the XA branch of
 * another, so each worker has a branch of its own, under the gid
 * CtasGidMakeWorker(participant, load, worker number + 1) (gid.c), which
 * the leader's transaction owns:
 *	parallel_export	the leader records, durably, the prefix of those gids
 *					and the highest worker number on its append action;
 *	each worker		XA START with its first chunk (a branch without rows
 *					could not be committed: MySQL rolls back a read-only
 *					branch at XA PREPARE), LOAD DATA of its chunks, and at
 *					the end of its stream XA END + XA PREPARE, then closes
 *					its connection (the branch outlives it);
 *	end_load		the leader checks that the prepared branches are there;
 *	post_commit		the leader commits every branch after the local commit
 *					(xact.c, CtasMySettleBranches), abort rolls them all
 *					back, and so does the resolver from the local
 *					transaction's outcome (resolve.c).
 * A worker that the leader's abort terminated may have sent its XA PREPARE
 * without reading the answer: rolling back takes every gid of the load
 * that is not prepared (XA START of an empty branch, then XA ROLLBACK), so
 * that no branch can appear after the rollback.
 * ------------------------------------------------------------------------
 */

/* the rows in db.table now */
static uint64
my_count_rows(MyConn *conn, const char *db, const char *table)
{
	List	   *rows;
	char	  **f;

	rows = CtasMyQuery(conn, psprintf("SELECT COUNT(*) FROM %s",
									  CtasMyQname(db, table)),
					   "count the rows loaded", NULL);
	f = rows ? linitial(rows) : NULL;
	return (f && f[0]) ? strtou64(f[0], NULL, 10) : 0;
}

/*
 * my_parallel_check
 *		end_load in the leader of a parallel load: the staging table must
 *		hold every row the workers sent (each worker checked its own chunks;
 *		this catches a stream that never ended).
 */
static void
my_parallel_check(MyLoad *ml)
{
	uint64		have = my_count_rows(ml->conn, ml->db, ml->into);

	if (have != ml->base_rows + ml->load->rows)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("MySQL catalog \"%s\" holds " UINT64_FORMAT " rows of a parallel load into \"%s\", but " UINT64_FORMAT " were sent",
						ml->load->catalog->name, have - ml->base_rows,
						CtasMyDisplay(ml->db, ml->load->table),
						ml->load->rows),
				 errdetail("%u streams ended without error.", ml->load->streams)));
}

/*
 * my_parallel_export
 *		In the leader, after create_table: the table the workers load (a
 *		staging table, or the target of an append, whose workers' branch
 *		gids are then recorded first), the participant's serial and the
 *		load's number (0, 0 for a staging table).  The leader sends no rows
 *		itself.
 */
static char *
my_parallel_export(CtasLoad *load)
{
	MyLoad	   *ml = (MyLoad *) load->private;

	int			serial = 0;
	int			lserial = 0;

	Assert(ml->action != NULL);
	my_flush(ml);
	my_finish_inflight(ml);
	ml->parallel = true;
	if (ml->action->kind == MY_APPEND)
	{
		MyAction   *a = ml->action;

		/* recorded before any worker can start a branch */
		serial = load->part->serial;
		lserial = CtasScratchSerial();
		a->branches = MemoryContextStrdup(load->part->cxt,
										  CtasGidMakeWorker(serial, lserial, -1));
		a->nbranches = Max(load->opts.parallel, max_worker_processes);
		CtasMyRecordWrite(load->part, ml->xs);
	}
	/* appending to this transaction's staging table: the rows it holds */
	else if (load->opts.if_exists == CTAS_IF_EXISTS_APPEND)
		ml->base_rows = my_count_rows(ml->conn, ml->db, ml->into);
	return nodeToString(list_make3(makeString(ml->into), makeInteger(serial),
								   makeInteger(lserial)));
}

/*
 * my_parallel_check_branches
 *		end_load in the leader of a parallel append: the workers' branches
 *		are prepared.  Each worker checked its own chunks and prepared its
 *		branch before its stream ended without error; a stream without rows
 *		has no branch.  So there are no more branches than streams, and
 *		some iff rows were sent.
 */
static void
my_parallel_check_branches(MyLoad *ml)
{
	CtasLoad   *load = ml->load;
	const char *prefix = ml->action->branches;
	List	   *rows;
	ListCell   *lc;
	uint32		n = 0;

	rows = CtasMyQuery(ml->xs->conn, "XA RECOVER", "list the XA branches", NULL);
	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		if (f[2] && strcmp(f[2], "0") == 0 && f[3] &&
			strncmp(f[3], prefix, strlen(prefix)) == 0)
			n++;
	}
	if (n > load->streams || (n == 0) != (load->rows == 0))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("found %u prepared XA branches of parallel workers on MySQL catalog \"%s\" for " UINT64_FORMAT " rows in %u streams",
						n, load->catalog->name, load->rows, load->streams),
				 errdetail("Rows of table \"%s\" would be missing or doubled.",
						   CtasMyDisplay(ml->db, load->table))));
}

/*
 * my_parallel_attach
 *		In a parallel worker: a connection of its own, and a row stream into
 *		the staging table named by state, or for an append to an existing
 *		table, into the table in an XA branch of its own (gid of worker
 *		ParallelWorkerNumber + 1, 0 for the leader running the units).
 */
static void
my_parallel_attach(CtasLoad *load, const char *state)
{
	MyLoad	   *ml = palloc0(sizeof(MyLoad));
	List	   *l = (List *) stringToNode(state);

	load->private = ml;
	load->format = "LOAD DATA LOCAL INFILE (text)";
	ml->load = load;
	ml->db = pstrdup(load->schema);
	ml->into = pstrdup(strVal(linitial(l)));
	if (intVal(lsecond(l)) > 0)
		ml->gid = CtasGidMakeWorker(intVal(lsecond(l)), intVal(lthird(l)),
									ParallelWorkerNumber + 1);
	ml->conn = CtasMyConnect(load->catalog, load->cxt, false);
	ml->cols = CtasMySetupColumns(load);
	/* no gid: the leader's staging table */
	ml->load_sql = my_load_sql(load, ml->db, ml->into, ml->cols,
							   ml->gid == NULL);
	initStringInfo(&ml->bufs[0]);
	initStringInfo(&ml->bufs[1]);
}

static void
my_drop_table(CtasLoad *load, bool missing_ok)
{
	MyXact	   *xs;
	char	   *phys;
	MyAction   *a;

	Assert(load->part != NULL);
	xs = CtasMyXact(load->part);
	if (!my_logical_exists(xs->conn, xs, load->schema, load->table, &phys))
	{
		CtasStagedDropMissing(load, missing_ok,
							  CtasMyDisplay(load->schema, load->table));
		return;
	}
	my_check_not_appended(load, xs);
	a = CtasMyNewAction(load->part, xs, MY_DROP, load->schema, load->table);
	a->base.state = CTAS_STAGED_LOADED;
}

/* ------------------------------------------------------------------------
 * Options, EXPLAIN and metadata
 * ------------------------------------------------------------------------
 */


static void
my_explain(CtasLoad *load, ExplainState *es)
{
	const char *mode;
	MyColumn   *cols = CtasMySetupColumns(load);

	ExplainPropertyText("Catalog", load->catalog->name, es);
	ExplainPropertyText("Catalog Type", "mysql", es);
	ExplainPropertyText("Target", CtasMyQname(load->schema, load->table), es);
	if (!load->opts.atomic)
		mode = psprintf("streaming: table created first, COMMIT every " INT64_FORMAT " rows",
						load->opts.commit_every);
	else if (load->opts.if_exists == CTAS_IF_EXISTS_APPEND)
		mode = "atomic: XA transaction, XA PREPARE at pre-commit, XA COMMIT after commit (a new table: staging table and RENAME)";
	else
		mode = "atomic: staging table, one RENAME TABLE at pre-commit";
	ExplainPropertyText("Mode", mode, es);
	ExplainPropertyText("If Exists",
						load->opts.if_exists == CTAS_IF_EXISTS_REPLACE ? "replace" :
						load->opts.if_exists == CTAS_IF_EXISTS_APPEND ? "append" :
						load->opts.if_exists == CTAS_IF_EXISTS_SKIP ? "skip" : "error",
						es);
	ExplainPropertyText("Format", "LOAD DATA LOCAL INFILE (text)", es);
	ExplainPropertyText("Remote DDL",
						CtasMyCreateSql(load, load->schema, load->table), es);
	ExplainPropertyText("Remote Load",
						psprintf("LOAD DATA LOCAL INFILE '<stream>' %s",
								 my_load_sql(load, load->schema, load->table, cols,
											 load->opts.if_exists != CTAS_IF_EXISTS_APPEND)),
						es);
}

static void
my_list_tables(CtasCatalog *catalog, const char *schema,
			   void (*emit) (void *arg, const char *name, const char *kind),
			   void *arg)
{
	MyConn	   *conn = CtasMyConnect(catalog, CurrentMemoryContext, false);
	const char *db = schema ? schema : CtasCatalogOption(catalog, "database");
	List	   *rows;
	ListCell   *lc;

	if (db == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_SCHEMA_NAME),
				 errmsg("no MySQL database given for catalog \"%s\"", catalog->name),
				 errhint("Name the database, or set the server option \"database\".")));
	(void) my_remote_exists(conn, db, "");
	rows = CtasMyQuery(conn,
					   psprintf("SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = %s ORDER BY table_name",
								CtasMyLiteral(db)),
					   "list tables", NULL);
	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		if (f[0] && f[1])
			emit(arg, f[0], f[1]);
	}
	CtasMyClose(conn);
}

static void
my_list_columns(CtasCatalog *catalog, const char *schema, const char *table,
				void (*emit) (void *arg, const char *name, const char *type,
							  bool nullable),
				void *arg)
{
	MyConn	   *conn = CtasMyConnect(catalog, CurrentMemoryContext, false);
	const char *db = schema ? schema : CtasCatalogOption(catalog, "database");
	List	   *rows;
	ListCell   *lc;

	if (db == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_SCHEMA_NAME),
				 errmsg("no MySQL database given for catalog \"%s\"", catalog->name)));
	if (!my_remote_exists(conn, db, table))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table \"%s\" does not exist in catalog \"%s\"",
						CtasMyDisplay(db, table), catalog->name)));
	rows = CtasMyQuery(conn,
					   psprintf("SELECT column_name, column_type, is_nullable FROM information_schema.columns WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
								CtasMyLiteral(db), CtasMyLiteral(table)),
					   "list columns", NULL);
	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		if (f[0] && f[1])
			emit(arg, f[0], f[1], f[2] && strcmp(f[2], "YES") == 0);
	}
	CtasMyClose(conn);
}

/* ------------------------------------------------------------------------
 * The routine
 * ------------------------------------------------------------------------
 */

static const char *const my_required_options[] = {"host", NULL};

const CtasTargetRoutine CtasMysqlTarget = {
	.type_name = "mysql",
	.server_options = CtasMyServerOptions,
	.required_options = my_required_options,
	.commit_order = CTAS_COMMIT_LAST_RESOURCE,
	.map_column = CtasMyMapColumn,
	.explain = my_explain,
	.begin_load = my_begin_load,
	.create_table = my_create_table,
	.put_row = my_put_row,
	.end_load = my_end_load,
	.parallel_export = my_parallel_export,
	.parallel_attach = my_parallel_attach,
	.drop_table = my_drop_table,
	.pre_commit = CtasMyPreCommit,
	.post_commit = CtasMyPostCommit,
	.abort = CtasMyAbort,
	.subxact = CtasMySubxact,
	.list_tables = my_list_tables,
	.list_columns = my_list_columns,
	.resolve = CtasMyResolve,
	.sync = &CtasMySyncApply,
};
