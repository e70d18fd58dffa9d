/*-------------------------------------------------------------------------
 *
 * writer.c
 *		  The writer for catalogs of type 'postgres': CREATE TABLE and COPY
 *		  over libpq in a remote transaction that is prepared at local
 *		  pre-commit and committed after the local commit.
 *
 * Protocol of an atomic load (one remote transaction per local transaction
 * and user mapping, see xact.c):
 *
 *	first use		(xact.c) BEGIN, then SAVEPOINT s2..sN up to the local
 *					nesting level
 *	begin_load		does the table exist?
 *	create_table	[DROP TABLE] CREATE TABLE (or append to the table),
 *					COPY ... FROM STDIN (binary when every column allows)
 *	put_row			encode into a 64 kB buffer, hand it to libpq with
 *					back-pressure
 *	end_load		end the COPY, compare row counts, [ADD PRIMARY KEY]
 *	pre_commit, post_commit, abort, subxact
 *					the transaction steps: xact.c
 *
 * A streaming load (atomic = false, load->part == NULL) uses a connection
 * of its own in autocommit mode: the table is committed first, then every
 * commit_every rows are one COPY, committed on its own.
 *
 * A parallel load (src/parallel.c; the remote steps in parallel.c of this
 * folder) cannot have its workers write into the remote transaction, whose
 * table they cannot see.  Every worker has a remote transaction of its own,
 * prepared under a gid that the leader's transaction owns
 * (ctas_fed_<sysid>_<xid>_<participant>_<load>_<n>, gid.c):
 *	parallel_export	the leader ends its (empty) COPY and creates a scratch
 *					table _ctas_fed_par_<sysid>_<xid>_<load> with the
 *					table's columns, committed at once on its side
 *					connection (one per transaction, autocommit)
 *	parallel_attach	each worker: BEGIN and COPY into it over a connection
 *					of its own
 *	end_load		each worker: end the COPY, PREPARE TRANSACTION under
 *					its gid; then the leader, once every worker is done:
 *					COMMIT PREPARED of the load's worker gids on the side
 *					connection (their locks on the scratch table go, their
 *					rows become visible), then the remote transaction takes
 *					the rows: the scratch table replaces the new, empty
 *					table (DROP, RENAME), or for 'append' its rows are
 *					inserted and it is dropped
 *	pre_commit, post_commit
 *					as for a serial load: PREPARE, COMMIT PREPARED
 *	abort, subxact abort
 *					ROLLBACK PREPARED of the worker gids of the loads of
 *					the (sub)transaction not yet committed by their
 *					end_load, then (at the end of the transaction) DROP
 *					TABLE IF EXISTS of every scratch table of it (a no-op
 *					once it was renamed and committed)
 * Why this order, and what a crash at each step leaves: parallel.c.
 *
 * The SQL text of CREATE TABLE, ADD PRIMARY KEY and COPY is built in
 * deparse.c; this file runs it.  The remote transaction (its start, the
 * transaction steps and their state enum) is xact.c's.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/postgres/writer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "catalog/pg_foreign_server.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "gid.h"
#include "postgres_target.h"

/* bytes of COPY data collected before they are handed to libpq */
#define COPY_BUFFER_SIZE	(64 * 1024)

/* Per-statement state (load->private) */
typedef struct PgLoadState
{
	PGconn	   *conn;
	CtasConn   *entry;			/* NULL when streaming */
	bool		binary;
	char	   *qualified;		/* "schema"."table" */
	char	   *copy_sql;
	StringInfoData buf;
	uint64		chunk_rows;		/* streaming: rows in the open COPY */
	bool		created;		/* create_table made the table */
	char	   *scratch;		/* parallel leader: the workers' table */
	CtasPgWorkerGids *workers;	/* parallel leader: their gids, or NULL */
	bool		worker;			/* a parallel worker's COPY */
	char	   *gid;			/* a worker's gid, NULL: one phase */
} PgLoadState;

static void pg_map_column(CtasLoad *load, CtasColumn *col);
static void pg_explain(CtasLoad *load, ExplainState *es);
static bool pg_begin_load(CtasLoad *load);
static bool pg_create_table(CtasLoad *load, bool exists);
static void pg_put_row(CtasLoad *load, TupleTableSlot *slot);
static void pg_end_load(CtasLoad *load);
static void pg_drop_table(CtasLoad *load, bool missing_ok);
static char *pg_parallel_export(CtasLoad *load);
static void pg_parallel_attach(CtasLoad *load, const char *state);
static void pg_list_tables(CtasCatalog *catalog, const char *schema,
						   void (*emit) (void *arg, const char *name,
										 const char *kind),
						   void *arg);
static void pg_list_columns(CtasCatalog *catalog, const char *schema,
							const char *table,
							void (*emit) (void *arg, const char *name,
										  const char *type, bool nullable),
							void *arg);

const CtasTargetRoutine CtasPostgresTarget = {
	.type_name = "postgres",
	.server_options = CtasPgServerOptions,
	.commit_order = CTAS_COMMIT_PREPARE,
	.map_column = pg_map_column,
	.explain = pg_explain,
	.begin_load = pg_begin_load,
	.create_table = pg_create_table,
	.put_row = pg_put_row,
	.end_load = pg_end_load,
	.parallel_export = pg_parallel_export,
	.parallel_attach = pg_parallel_attach,
	.drop_table = pg_drop_table,
	.pre_commit = CtasPgPreCommit,
	.post_commit = CtasPgPostCommit,
	.abort = CtasPgAbort,
	.subxact = CtasPgSubxact,
	.list_tables = pg_list_tables,
	.list_columns = pg_list_columns,
	.resolve = CtasPgResolve,
	.sync = &CtasPgSyncApply,
};

/*
 * pg_map_column
 *		Same type and modifier for built-in types; text for the rest.
 */
static void
pg_map_column(CtasLoad *load, CtasColumn *col)
{
	bool		same_type;

	/* money's text and binary forms depend on lc_monetary */
	if (col->basetypid == CASHOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of type money cannot be copied exactly to catalog \"%s\"",
						col->name, load->catalog->name),
				 errhint("Cast the column to numeric in the query.")));

	col->remote_type = CtasPostgresRemoteType(col->basetypid,
											  col->basetypmod, &same_type);
	col->binary_ok = same_type;
	if (!same_type)
		ereport(NOTICE,
				(errmsg("column \"%s\" of type %s is created as %s in catalog \"%s\"",
						col->name, format_type_be(col->typid),
						col->remote_type, load->catalog->name),
				 errhint("Use the column_types option to choose another remote type.")));
}

static bool
use_binary(CtasLoad *load)
{
	int			i;

	for (i = 0; i < load->ncolumns; i++)
	{
		if (!load->columns[i].binary_ok)
			return false;
	}
	return true;
}

/*
 * pg_explain
 *		Target, DDL, load and commit of the load, and with VERBOSE the
 *		remote's version.  The remote DDL depends on that version
 *		(CtasPgAdaptColumns), so EXPLAIN connects (the cached connection;
 *		nothing runs there but a catalog query for an older remote), unless
 *		the load did already (ANALYZE).  A catalog that cannot be reached
 *		gets the DDL of a remote of our version, as EXPLAIN needs no
 *		remote.
 */
static void
pg_explain(CtasLoad *load, ExplainState *es)
{
	char	   *pk = CtasPgPrimaryKeySql(load);
	char	   *qualified = CtasPgQualifiedName(load);
	CtasConn   *entry = CtasPgTryGetConnection(load->catalog);

	if (entry != NULL && load->private == NULL)
		CtasPgAdaptColumns(load, entry->conn);
	ExplainPropertyText("Target", psprintf("catalog \"%s\" (postgres): %s",
										   load->catalog->name, qualified),
						es);
	if (es->verbose)
		ExplainPropertyText("Remote Server", entry ?
							CtasPgRemoteVersion(entry->conn) :
							"not reachable", es);
	ExplainPropertyText("Remote DDL", CtasPgCreateTableSql(load, qualified),
						es);
	if (pk)
		ExplainPropertyText("Remote Key", pk, es);
	if (pk && load->sync)		/* postgres/sync.c: with the copy */
		ExplainPropertyText("Remote Key Built",
							"by the sync worker, after the rows of the initial copy, in their remote transaction", es);
	if (!load->skip_data)
		ExplainPropertyText("Remote Load",
							CtasPgCopySql(load, qualified, use_binary(load)),
							es);
	ExplainPropertyText("Remote Commit",
						!load->opts.atomic ?
						psprintf("streaming, every " INT64_FORMAT " rows",
								 load->opts.commit_every) :
						psprintf("two-phase (two_phase %s)",
								 CtasPgTwoPhaseSetting(load->catalog)), es);
}

/*
 * remote_table_exists
 *		Does schema.table exist (any kind of relation) on conn?
 */
static bool
remote_table_exists(PGconn *conn, CtasCatalog *catalog, const char *schema,
					const char *table)
{
	char	   *sql;
	PGresult   *res;
	bool		exists;

	sql = psprintf("SELECT 1 FROM pg_catalog.pg_class c "
				   "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
				   "WHERE n.nspname = %s AND c.relname = %s",
				   quote_literal_cstr(schema), quote_literal_cstr(table));
	res = CtasPgQuery(conn, catalog, sql);
	exists = PQntuples(res) > 0;
	PQclear(res);
	return exists;
}

/* close a streaming load's own connection, whatever happens */
static void
close_stream_callback(void *arg)
{
	PgLoadState *ls = (PgLoadState *) arg;

	CtasPgCloseFresh(ls->conn);
	ls->conn = NULL;
}

/*
 * start_copy
 *		Send the COPY command and wait until the remote asks for data.
 */
static void
start_copy(CtasLoad *load, PgLoadState *ls)
{
	PGresult   *res;

	if (!PQsendQuery(ls->conn, ls->copy_sql))
		CtasPgReportError(ERROR, NULL, ls->conn, load->catalog, ls->copy_sql);
	res = CtasPgGetResult(ls->conn, 0, NULL);
	if (res == NULL || PQresultStatus(res) != PGRES_COPY_IN)
	{
		PGresult   *next;

		/* drain, so the connection is idle again */
		while ((next = CtasPgGetResult(ls->conn, 0, NULL)) != NULL)
			PQclear(next);
		CtasPgReportError(ERROR, res, ls->conn, load->catalog, ls->copy_sql);
	}
	PQclear(res);
	if (ls->entry)
		ls->entry->in_copy = true;

	resetStringInfo(&ls->buf);
	CtasPgCopyHeader(&ls->buf, ls->binary);
	ls->chunk_rows = 0;
}

/*
 * finish_copy
 *		Send what is buffered, end the COPY and check the row count the
 *		remote reports against the rows sent.  A parallel load's check of
 *		its rows rests on this one in each worker (CtasPgTakeScratch).
 */
static void
finish_copy(CtasLoad *load, PgLoadState *ls)
{
	uint64		rows;

	CtasPgCopyTrailer(&ls->buf, ls->binary);
	if (ls->buf.len > 0)
		CtasPgPutCopyData(ls->conn, load->catalog, ls->buf.data, ls->buf.len);
	resetStringInfo(&ls->buf);

	rows = CtasPgEndCopy(ls->conn, load->catalog, ls->copy_sql);
	if (ls->entry)
		ls->entry->in_copy = false;
	if (rows != ls->chunk_rows)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("catalog \"%s\" received " UINT64_FORMAT " rows, but " UINT64_FORMAT " were sent",
						load->catalog->name, rows, ls->chunk_rows)));
}

/*
 * create_remote_table
 *		Run the CREATE TABLE of the load.  When another session created the
 *		same table concurrently, the remote reports a unique violation on
 *		its catalog (pg_type or pg_class), not 42P07: return false, for the
 *		caller to report the "already exists" it is.  ERROR on any other
 *		failure.
 */
static bool
create_remote_table(CtasLoad *load, PgLoadState *ls)
{
	char	   *sql = CtasPgCreateTableSql(load, ls->qualified);
	PGresult   *res = CtasPgRun(ls->conn, load->catalog, sql);

	if (res != NULL && PQresultStatus(res) == PGRES_COMMAND_OK &&
		PQstatus(ls->conn) == CONNECTION_OK)
	{
		PQclear(res);
		return true;
	}
	if (res != NULL)
	{
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		const char *constraint = PQresultErrorField(res,
													PG_DIAG_CONSTRAINT_NAME);

		if (state && strcmp(state, "23505") == 0 && constraint &&
			(strcmp(constraint, "pg_type_typname_nsp_index") == 0 ||
			 strcmp(constraint, "pg_class_relname_nsp_index") == 0))
		{
			PQclear(res);
			return false;
		}
	}
	CtasPgReportError(ERROR, res, ls->conn, load->catalog, sql);
	return false;				/* keep compiler quiet */
}

/*
 * pg_begin_load
 *		Set up the load's connection: the participant's, or for a streaming
 *		load one of its own, closed with load->cxt.  Returns whether the
 *		table exists, as the remote transaction sees it.
 */
static bool
pg_begin_load(CtasLoad *load)
{
	PgLoadState *ls;

	ls = palloc0(sizeof(PgLoadState));
	load->private = ls;
	ls->qualified = CtasPgQualifiedName(load);
	initStringInfo(&ls->buf);

	if (load->part != NULL)
	{
		PgXactState *st = CtasPgXactState(load->part);

		ls->entry = st->entry;
		ls->conn = st->entry->conn;
	}
	else
	{
		MemoryContextCallback *cb;

		ls->conn = CtasPgConnectFresh(load->catalog);
		cb = palloc(sizeof(MemoryContextCallback));
		cb->func = close_stream_callback;
		cb->arg = ls;
		MemoryContextRegisterResetCallback(load->cxt, cb);
	}

	/* the remote may be older than us: types it lacks become text */
	CtasPgAdaptColumns(load, ls->conn);
	return remote_table_exists(ls->conn, load->catalog, load->schema,
							   load->table);
}

/*
 * pg_create_table
 *		Create the table (DROP TABLE first for if_exists 'replace'), or use
 *		the existing one for 'append', and open the COPY.  false when
 *		another transaction created the table concurrently.
 */
static bool
pg_create_table(CtasLoad *load, bool exists)
{
	PgLoadState *ls = (PgLoadState *) load->private;
	bool		create = true;

	if (exists)
	{
		Assert(load->opts.if_exists == CTAS_IF_EXISTS_REPLACE ||
			   load->opts.if_exists == CTAS_IF_EXISTS_APPEND);
		if (load->opts.if_exists == CTAS_IF_EXISTS_REPLACE)
			CtasPgExec(ls->conn, load->catalog,
					   psprintf("DROP TABLE %s", ls->qualified));
		else
			create = false;
	}

	if (create && !create_remote_table(load, ls))
		return false;
	ls->created = create;

	if (load->skip_data)
		return true;

	/* an existing table's column types may differ: let the remote parse */
	ls->binary = create && use_binary(load);
	ls->copy_sql = CtasPgCopySql(load, ls->qualified, ls->binary);
	load->format = ls->binary ? "binary" : "text";
	ereport(DEBUG1,
			(errmsg_internal("COPY into catalog \"%s\" uses the %s format",
							 load->catalog->name, load->format)));
	start_copy(load, ls);
	return true;
}

/*
 * pg_put_row
 *		Encode one row in the COPY format chosen and pass full buffers on.
 *		Memory: values are converted in load->row_cxt (reset by the caller);
 *		the buffer is reused.
 */
static void
pg_put_row(CtasLoad *load, TupleTableSlot *slot)
{
	PgLoadState *ls = (PgLoadState *) load->private;
	int			start = ls->buf.len;
	int			nestlevel;
	int			i;

	slot_getallattrs(slot);

	nestlevel = CtasPgCopyRowStart(&ls->buf, ls->binary, load->ncolumns);
	for (i = 0; i < load->ncolumns; i++)
		CtasPgCopyField(&ls->buf, ls->binary, i,
						ls->binary ? &load->columns[i].send_func :
						&load->columns[i].out_func,
						slot->tts_values[i], slot->tts_isnull[i]);
	CtasPgCopyRowEnd(&ls->buf, ls->binary, nestlevel);
	load->bytes += ls->buf.len - start;
	ls->chunk_rows++;

	if (ls->buf.len >= COPY_BUFFER_SIZE)
	{
		CtasPgPutCopyData(ls->conn, load->catalog, ls->buf.data, ls->buf.len);
		resetStringInfo(&ls->buf);
	}

	/* streaming: every commit_every rows are one committed COPY */
	if (load->part == NULL && !ls->worker &&
		ls->chunk_rows >= load->opts.commit_every)
	{
		finish_copy(load, ls);
		load->rows_committed += ls->chunk_rows;
		start_copy(load, ls);
	}
}

/*
 * pg_end_load
 *		End the COPY, add the primary key.
 */
static void
pg_end_load(CtasLoad *load)
{
	PgLoadState *ls = (PgLoadState *) load->private;
	char	   *pk;

	if (load->skipped)
		return;
	if (ls->worker)
	{
		/* a parallel worker: prepared (or committed) on its own connection */
		finish_copy(load, ls);
		if (ls->gid)
			CtasPgExec(ls->conn, load->catalog,
					   psprintf("PREPARE TRANSACTION %s",
								quote_literal_cstr(ls->gid)));
		CtasPgCloseFresh(ls->conn);
		ls->conn = NULL;
		return;
	}
	if (ls->scratch)
	{
		PgXactState *st = (PgXactState *) load->part->private;
		int			committed = -1;

		/* the workers' rows first, their locks on the scratch table go */
		if (ls->workers)
		{
			committed = CtasPgCommitWorkers(load->catalog, st->side,
											ls->workers->prefix);
			st->workers = list_delete_ptr(st->workers, ls->workers);
			ls->workers = NULL;
		}
		CtasPgTakeScratch(load, ls->conn, ls->scratch, ls->qualified,
						  ls->created, committed);
	}
	else if (!load->skip_data)
	{
		finish_copy(load, ls);
		if (load->part == NULL)
			load->rows_committed += ls->chunk_rows;
	}

	/*
	 * The key of a table this load created; an existing one keeps its own.
	 * A synced table gets its key from the initial copy (sync/statement.c).
	 */
	pk = CtasPgPrimaryKeySql(load);
	if (pk && ls->created && load->sync == NULL)
		CtasPgExec(ls->conn, load->catalog, pk);

	if (load->part == NULL)
	{
		CtasPgCloseFresh(ls->conn);
		ls->conn = NULL;
	}
}

/*
 * pg_parallel_export
 *		parallel_export of the writer: end the leader's empty COPY, create
 *		the scratch table the workers load (recorded first, so that abort
 *		drops it) on the transaction's side connection, committed at once,
 *		and record the prefix of the workers' gids (two-phase), so that
 *		abort rolls back whatever they prepared.  Returns the table's name,
 *		the COPY format, the participant's serial (0: the workers commit in
 *		one phase) and the load's number as the text of a List.
 */
static char *
pg_parallel_export(CtasLoad *load)
{
	PgLoadState *ls = (PgLoadState *) load->private;
	PgXactState *st = CtasPgXactState(load->part);
	int			serial = CtasScratchSerial();
	char	   *name = CtasScratchName("par", serial, NULL);
	MemoryContext oldcxt;

	finish_copy(load, ls);
	ls->scratch = psprintf("%s.%s", quote_identifier(load->schema),
						   quote_identifier(name));
	/* the list lives as long as the transaction, not the statement */
	oldcxt = MemoryContextSwitchTo(load->part->cxt);
	st->scratch = lappend(st->scratch, pstrdup(ls->scratch));
	MemoryContextSwitchTo(oldcxt);
	if (st->side == NULL)
		st->side = CtasPgConnectFresh(load->catalog);
	CtasPgExec(st->side, load->catalog,
			   CtasPgCreateTableSql(load, ls->scratch));
	if (st->two_phase)
	{
		oldcxt = MemoryContextSwitchTo(load->part->cxt);
		ls->workers = palloc(sizeof(CtasPgWorkerGids));
		ls->workers->prefix = CtasGidMakeWorker(load->part->serial, serial,
												-1);
		ls->workers->scratch = pstrdup(ls->scratch);
		ls->workers->level = GetCurrentTransactionNestLevel();
		st->workers = lappend(st->workers, ls->workers);
		MemoryContextSwitchTo(oldcxt);
	}
	return nodeToString(list_make4(makeString(ls->scratch),
								   makeBoolean(ls->binary),
								   makeInteger(st->two_phase ?
											   load->part->serial : 0),
								   makeInteger(serial)));
}

/*
 * pg_parallel_attach
 *		parallel_attach of the writer, in a parallel worker (or the leader
 *		when none started): a connection of its own (closed with load->cxt,
 *		which rolls back what is not prepared), BEGIN when two-phase, and a
 *		COPY into the scratch table.  end_load prepares it under the gid of
 *		this stream (CtasGidMakeWorker, with ParallelWorkerNumber + 1).
 */
static void
pg_parallel_attach(CtasLoad *load, const char *state)
{
	PgLoadState *ls = palloc0(sizeof(PgLoadState));
	List	   *l = (List *) stringToNode(state);
	MemoryContextCallback *cb;

	load->private = ls;
	ls->worker = true;
	ls->qualified = strVal(linitial(l));
	ls->binary = boolVal(lsecond(l));
	if (intVal(lthird(l)) > 0)
		ls->gid = CtasGidMakeWorker(intVal(lthird(l)), intVal(lfourth(l)),
									ParallelWorkerNumber + 1);
	load->format = ls->binary ? "binary" : "text";
	initStringInfo(&ls->buf);
	ls->conn = CtasPgConnectFresh(load->catalog);
	cb = palloc(sizeof(MemoryContextCallback));
	cb->func = close_stream_callback;
	cb->arg = ls;
	MemoryContextRegisterResetCallback(load->cxt, cb);
	ls->copy_sql = CtasPgCopySql(load, ls->qualified, ls->binary);
	if (ls->gid)
		CtasPgExec(ls->conn, load->catalog, "BEGIN");
	start_copy(load, ls);
}

/*
 * pg_drop_table
 *		DROP TABLE in the remote transaction.
 */
static void
pg_drop_table(CtasLoad *load, bool missing_ok)
{
	PgXactState *st = CtasPgXactState(load->part);

	CtasPgExec(st->entry->conn, load->catalog,
			   psprintf("DROP TABLE %s%s", missing_ok ? "IF EXISTS " : "",
						CtasPgQualifiedName(load)));
}

/*
 * list_query
 *		Run a catalog query on a connection of its own (never the one of a
 *		remote transaction, whose savepoints it would not respect) and hand
 *		each row to emit_row.  The connection and the result are released
 *		on every path.
 */
static void
list_query(CtasCatalog *catalog, const char *sql,
		   void (*emit_row) (PGresult *res, int row, void *arg), void *arg)
{
	PGconn	   *volatile conn = CtasPgConnectFresh(catalog);
	PGresult   *volatile res = NULL;

	PG_TRY();
	{
		int			i;

		res = CtasPgQuery(conn, catalog, sql);
		for (i = 0; i < PQntuples(res); i++)
			emit_row(res, i, arg);
	}
	PG_FINALLY();
	{
		if (res)
			PQclear(res);
		CtasPgCloseFresh(conn);
	}
	PG_END_TRY();
}

typedef struct ListArg
{
	void		(*emit_table) (void *arg, const char *name, const char *kind);
	void		(*emit_column) (void *arg, const char *name, const char *type,
								bool nullable);
	void	   *arg;
	int			rows;
} ListArg;

static void
table_row(PGresult *res, int row, void *arg)
{
	ListArg    *la = (ListArg *) arg;

	la->emit_table(la->arg, PQgetvalue(res, row, 0), PQgetvalue(res, row, 1));
}

static void
column_row(PGresult *res, int row, void *arg)
{
	ListArg    *la = (ListArg *) arg;

	la->emit_column(la->arg, PQgetvalue(res, row, 0), PQgetvalue(res, row, 1),
					strcmp(PQgetvalue(res, row, 2), "t") == 0);
	la->rows++;
}

/*
 * pg_list_tables
 *		Relations of schema on the catalog, with their kind.
 */
static void
pg_list_tables(CtasCatalog *catalog, const char *schema,
			   void (*emit) (void *arg, const char *name, const char *kind),
			   void *arg)
{
	ListArg		la = {emit, NULL, arg, 0};

	list_query(catalog,
			   psprintf("SELECT c.relname, CASE c.relkind "
						"WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' "
						"WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' "
						"WHEN 'f' THEN 'foreign table' END "
						"FROM pg_catalog.pg_class c "
						"JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
						"WHERE n.nspname = %s AND c.relkind IN ('r','p','v','m','f') "
						"ORDER BY 1",
						quote_literal_cstr(schema)),
			   table_row, &la);
}

/*
 * pg_list_columns
 *		Columns of schema.table on the catalog.  ERROR when there is no such
 *		table.
 */
static void
pg_list_columns(CtasCatalog *catalog, const char *schema, const char *table,
				void (*emit) (void *arg, const char *name, const char *type,
							  bool nullable),
				void *arg)
{
	ListArg		la = {NULL, emit, arg, 0};

	list_query(catalog,
			   psprintf("SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), "
						"NOT a.attnotnull "
						"FROM pg_catalog.pg_attribute a "
						"JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
						"JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
						"WHERE n.nspname = %s AND c.relname = %s "
						"AND a.attnum > 0 AND NOT a.attisdropped "
						"ORDER BY a.attnum",
						quote_literal_cstr(schema),
						quote_literal_cstr(table)),
			   column_row, &la);
	if (la.rows == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"%s.%s\" does not exist in catalog \"%s\"",
						schema, table, catalog->name)));
}
