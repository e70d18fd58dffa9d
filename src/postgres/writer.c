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
 *	first use		BEGIN, then SAVEPOINT s2..sN up to the local nesting level
 *	begin_load		does the table exist?
 *	create_table	[DROP TABLE] CREATE TABLE (or append to the table),
 *					COPY ... FROM STDIN (binary when every column allows)
 *	put_row			encode into a 64 kB buffer, hand it to libpq with
 *					back-pressure
 *	end_load		end the COPY, compare row counts, [ADD PRIMARY KEY]
 *	pre_commit		PREPARE TRANSACTION '<gid>' (two_phase on/auto), or COMMIT
 *					(two_phase off, or auto against max_prepared_transactions
 *					= 0: one-phase, the window documented in README.md)
 *	post_commit		COMMIT PREPARED '<gid>'; failure is a WARNING naming the
 *					gid, left to ctas_fed.resolve_in_doubt()
 *	abort			cancel what runs, ROLLBACK [PREPARED]; a connection that
 *					cannot be cleaned up within ABORT_TIMEOUT_MS, or whose
 *					COPY data the remote stopped reading, is closed, which
 *					rolls back anything not prepared
 *	subxact			RELEASE / ROLLBACK TO SAVEPOINT s<level>
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
 * deparse.c; this file runs it.
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

/*
 * How long an abort waits for a remote command or COPY to stop, and for the
 * ROLLBACK of a transaction that is not prepared, before it closes the
 * connection instead: closing rolls back all of it just as well, and a
 * remote that stopped reading must not hold a cancel for long.
 */
#define ABORT_TIMEOUT_MS	1000

/*
 * How far the remote transaction of a participant got, as Citus's
 * RemoteTransactionState.  pg_pre_commit, pg_post_commit, pg_abort and
 * pg_subxact move it; pg_abort and pg_post_commit are switches over it.
 */
typedef enum PgXactProgress
{
	PG_XACT_STARTED,			/* BEGIN done: the remote transaction is open */
	PG_XACT_PREPARING,			/* PREPARE TRANSACTION sent, no reply yet */
	PG_XACT_PREPARED,			/* PREPARE TRANSACTION done */
	PG_XACT_COMMITTING,			/* one-phase COMMIT sent, no reply yet */
	PG_XACT_COMMITTED,			/* one-phase COMMIT done */
	PG_XACT_LOST				/* a savepoint could not be rolled back: the
								 * connection was closed, which rolled back
								 * the remote transaction */
} PgXactProgress;

/* Per-transaction state of a participant (part->private) */
typedef struct PgXactState
{
	CtasConn   *entry;
	bool		two_phase;		/* the mode: PREPARE, or COMMIT in one phase */
	PgXactProgress progress;
	char	   *gid;			/* set at PREPARING */
	List	   *scratch;		/* qualified scratch tables of parallel
								 * loads, in part->cxt */
	PGconn	   *side;			/* parallel loads: the leader's autocommit
								 * connection for scratch tables and
								 * worker gids, closed at the end */
	List	   *workers;		/* CtasPgWorkerGids not settled yet */
} PgXactState;

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
static void pg_pre_commit(CtasParticipant *part);
static void pg_post_commit(CtasParticipant *part);
static void pg_abort(CtasParticipant *part);
static void pg_subxact(CtasParticipant *part, SubXactEvent event, int level);
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
	.pre_commit = pg_pre_commit,
	.post_commit = pg_post_commit,
	.abort = pg_abort,
	.subxact = pg_subxact,
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
 * two_phase_setting
 *		The catalog's two_phase option: "auto" unless set.
 */
static const char *
two_phase_setting(CtasCatalog *catalog)
{
	const char *v = CtasCatalogOption(catalog, "two_phase");

	return v ? v : "auto";
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
								 two_phase_setting(load->catalog)), es);
}

/*
 * begin_remote_xact
 *		Start the remote transaction on entry's connection: learn whether
 *		the remote allows prepared transactions (once per connection, unless
 *		two_phase is 'off'), then BEGIN.  ERROR when two_phase 'on' cannot
 *		be honored, or on any remote failure.
 */
static void
begin_remote_xact(CtasConn *entry, CtasCatalog *catalog, const char *setting)
{
	if (strcmp(setting, "off") != 0 && entry->max_prepared < 0)
	{
		PGresult   *res = CtasPgQuery(entry->conn, catalog,
									  "SHOW max_prepared_transactions");

		entry->max_prepared = atoi(PQgetvalue(res, 0, 0));
		PQclear(res);
	}
	if (strcmp(setting, "on") == 0 && entry->max_prepared == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("catalog \"%s\" requires two-phase commit, but the remote server does not allow prepared transactions",
						catalog->name),
				 errhint("Set max_prepared_transactions on the remote server, or set the option two_phase to 'auto' or 'off'.")));

	/*
	 * READ COMMITTED whatever the remote's default: a parallel load's
	 * INSERT ... SELECT from its scratch table (append) must see the rows
	 * the workers' transactions committed after this one began.
	 */
	CtasPgExec(entry->conn, catalog, "BEGIN ISOLATION LEVEL READ COMMITTED");
	entry->xact_depth = 1;
}

/*
 * xact_state
 *		The participant's remote transaction, started on first use: connect,
 *		decide two-phase or one-phase, BEGIN, and open savepoints up to the
 *		current local nesting level.  A cached connection that the remote
 *		closed while it was idle is replaced once (CtasPgBrokenAtStart).
 *		ERROR if the remote transaction was lost earlier in this local
 *		transaction.
 */
static PgXactState *
xact_state(CtasParticipant *part)
{
	PgXactState *st = (PgXactState *) part->private;
	CtasCatalog *catalog = part->catalog;
	int			level = GetCurrentTransactionNestLevel();

	if (st == NULL)
	{
		MemoryContext cxt = CurrentMemoryContext;
		const char *setting = two_phase_setting(catalog);
		CtasConn   *entry = CtasPgGetConnection(catalog);
		bool		retry = false;

		PG_TRY();
		{
			begin_remote_xact(entry, catalog, setting);
		}
		PG_CATCH();
		{
			MemoryContext ecxt = MemoryContextSwitchTo(cxt);

			if (!CtasPgBrokenAtStart(entry, catalog))
			{
				MemoryContextSwitchTo(ecxt);
				PG_RE_THROW();
			}
			retry = true;
		}
		PG_END_TRY();

		/* the broken connection is closed: connect again and start over */
		if (retry)
		{
			entry = CtasPgGetConnection(catalog);
			begin_remote_xact(entry, catalog, setting);
		}

		st = MemoryContextAllocZero(part->cxt, sizeof(PgXactState));
		st->entry = entry;
		st->progress = PG_XACT_STARTED;
		st->two_phase = strcmp(setting, "off") != 0 && entry->max_prepared > 0;
		part->private = st;
		if (!st->two_phase)
			ereport(DEBUG1,
					(errmsg_internal("catalog \"%s\" commits in one phase",
									 catalog->name)));
	}

	if (st->progress == PG_XACT_LOST || st->entry->conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("the remote transaction on catalog \"%s\" was lost",
						catalog->name),
				 errhint("Roll back the transaction and try again.")));

	while (st->entry->xact_depth < level)
	{
		char		sql[64];

		snprintf(sql, sizeof(sql), "SAVEPOINT s%d", st->entry->xact_depth + 1);
		CtasPgExec(st->entry->conn, catalog, sql);
		st->entry->xact_depth++;
	}
	return st;
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
		PgXactState *st = xact_state(load->part);

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
	PgXactState *st = xact_state(load->part);
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
	PgXactState *st = xact_state(load->part);

	CtasPgExec(st->entry->conn, load->catalog,
			   psprintf("DROP TABLE %s%s", missing_ok ? "IF EXISTS " : "",
						CtasPgQualifiedName(load)));
}

/*
 * pg_pre_commit
 *		PREPARE TRANSACTION, or COMMIT in one phase.
 */
static void
pg_pre_commit(CtasParticipant *part)
{
	PgXactState *st = (PgXactState *) part->private;
	char	   *sql;

	if (st == NULL)
		return;
	if (st->progress == PG_XACT_LOST || st->entry->conn == NULL ||
		st->entry->in_copy)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("the remote transaction on catalog \"%s\" was lost",
						part->catalog->name)));

	/*
	 * PREPARE TRANSACTION (and COMMIT) of a failed remote transaction
	 * "succeed" by rolling it back: make sure it is healthy first.
	 */
	if (PQtransactionStatus(st->entry->conn) != PQTRANS_INTRANS)
		ereport(ERROR,
				(errcode(ERRCODE_IN_FAILED_SQL_TRANSACTION),
				 errmsg("the remote transaction on catalog \"%s\" has failed and cannot be committed",
						part->catalog->name)));

	if (st->two_phase)
	{
		st->gid = MemoryContextStrdup(part->cxt, CtasGidMake(part->serial));
		part->gid = st->gid;
		sql = psprintf("PREPARE TRANSACTION %s", quote_literal_cstr(st->gid));
		st->progress = PG_XACT_PREPARING;
		CtasPgExec(st->entry->conn, part->catalog, sql);
		st->progress = PG_XACT_PREPARED;
	}
	else
	{
		st->progress = PG_XACT_COMMITTING;
		CtasPgExec(st->entry->conn, part->catalog, "COMMIT");
		st->progress = PG_XACT_COMMITTED;
		part->one_phase = true;
	}
	st->entry->xact_depth = 0;
}

/*
 * pg_post_commit
 *		Finish the remote transaction after the local commit: COMMIT
 *		PREPARED, bounded in time; never an error.
 */
static void
pg_post_commit(CtasParticipant *part)
{
	PgXactState *st = (PgXactState *) part->private;
	char	   *msg;

	if (st == NULL)
		return;
	switch (st->progress)
	{
		case PG_XACT_PREPARED:
			/* left remotely: the prepared transaction, until this */
			if (!CtasPgExecBounded(st->entry->conn,
								   psprintf("COMMIT PREPARED %s",
											quote_literal_cstr(st->gid)),
								   CLEANUP_TIMEOUT_MS, &msg))
			{
				ereport(WARNING,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not commit prepared transaction \"%s\" on catalog \"%s\"",
								st->gid, part->catalog->name),
						 errdetail_internal("%s", msg),
						 errhint("The local transaction committed; ctas_fed.resolve_in_doubt() commits the remote one once the catalog is reachable.")));
				st->entry->broken = true;
				part->in_doubt = true;
			}
			break;
		case PG_XACT_COMMITTED:
			/* committed in one phase at pre-commit: nothing is left */
			break;
		case PG_XACT_STARTED:
		case PG_XACT_PREPARING:
		case PG_XACT_COMMITTING:
		case PG_XACT_LOST:
			/* pg_pre_commit got past these or failed: cannot happen */
			break;
	}
	/* a parallel load rolled back to a savepoint left its scratch table */
	Assert(st->workers == NIL);
	if (st->scratch != NIL && !part->in_doubt)
		CtasPgDropScratch(part->catalog, st->entry->broken ? NULL :
						  st->entry->conn, &st->scratch);
	CtasPgCloseFresh(st->side);
	st->side = NULL;
}

/*
 * pg_abort_open
 *		Roll back the open remote transaction of entry (or the remains of
 *		one whose COMMIT or PREPARE failed), or close the connection when
 *		that cannot be done at once, which rolls it back just as well.
 *		Never an error.
 */
static void
pg_abort_open(CtasConn *entry)
{
	char	   *msg;

	if (entry->conn == NULL || entry->xact_depth == 0)
		return;

	/*
	 * Disconnecting rolls back as well as ROLLBACK does.  COPY data that
	 * libpq could not hand to the socket means that the remote stopped
	 * reading: close at once rather than wait.
	 */
	if (entry->in_copy && PQflush(entry->conn) != 0)
		entry->broken = true;
	else if ((entry->in_copy ||
			  PQtransactionStatus(entry->conn) == PQTRANS_ACTIVE) &&
			 !CtasPgCancel(entry->conn, entry->in_copy, ABORT_TIMEOUT_MS))
		entry->broken = true;
	else if (!CtasPgExecBounded(entry->conn, "ROLLBACK",
								ABORT_TIMEOUT_MS, &msg))
		entry->broken = true;
}

/*
 * pg_abort
 *		Undo the remote transaction; never an error.
 */
static void
pg_abort(CtasParticipant *part)
{
	PgXactState *st = (PgXactState *) part->private;
	CtasConn   *entry;
	char	   *msg;
	bool		prepare_lost;

	if (st == NULL)
		return;
	entry = st->entry;

	/*
	 * PREPARE TRANSACTION was sent and the connection failed before its
	 * reply: the remote may hold the prepared transaction.  Left to the
	 * resolver, which rolls it back if it is there.
	 */
	prepare_lost = st->progress == PG_XACT_PREPARING &&
		(entry->conn == NULL || PQstatus(entry->conn) == CONNECTION_BAD);

	/*
	 * In error recursion trouble, do nothing that could fail again: closing
	 * the connection rolls back what was not prepared, and a prepared
	 * transaction is left to the resolver.
	 */
	if (in_error_recursion_trouble())
	{
		if (prepare_lost || st->progress == PG_XACT_PREPARED)
			part->in_doubt = true;
		CtasPgDisconnect(entry);
		CtasPgCloseFresh(st->side);
		st->side = NULL;
		return;
	}

	switch (st->progress)
	{
		case PG_XACT_PREPARED:
			/* left remotely: the prepared transaction */
			if (!CtasPgExecBounded(entry->conn,
								   psprintf("ROLLBACK PREPARED %s",
											quote_literal_cstr(st->gid)),
								   CLEANUP_TIMEOUT_MS, &msg))
			{
				ereport(WARNING,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not roll back prepared transaction \"%s\" on catalog \"%s\"",
								st->gid, part->catalog->name),
						 errdetail_internal("%s", msg),
						 errhint("ctas_fed.resolve_in_doubt() rolls it back once the catalog is reachable.")));
				entry->broken = true;
				part->in_doubt = true;
			}
			break;
		case PG_XACT_COMMITTED:
			/* left remotely: the committed work, which stays */
			ereport(WARNING,
					(errcode(ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN),
					 errmsg("the remote transaction on catalog \"%s\" was committed in one phase and is not rolled back",
							part->catalog->name),
					 errhint("Set max_prepared_transactions on the remote server so that two-phase commit can be used.")));
			break;
		case PG_XACT_PREPARING:
			/* left remotely: perhaps a prepared transaction, see above */
			if (prepare_lost)
				part->in_doubt = true;
			pg_abort_open(entry);
			break;
		case PG_XACT_STARTED:
		case PG_XACT_COMMITTING:
			/* left remotely: the open transaction, or what its COMMIT left */
			pg_abort_open(entry);
			break;
		case PG_XACT_LOST:
			/* nothing: closing the connection rolled it back */
			break;
	}

	/* closing the connection rolls back whatever was not prepared */
	if (entry->broken)
		CtasPgDisconnect(entry);
	entry->xact_depth = 0;
	entry->in_copy = false;

	/*
	 * The workers' prepared transactions, then the scratch tables they
	 * lock; what is left goes to the resolver.
	 */
	if (CtasPgRollbackWorkers(part->catalog, st->side, &st->workers, 1) &&
		st->scratch != NIL && !part->in_doubt)
		CtasPgDropScratch(part->catalog, st->entry->broken ? NULL :
						  st->entry->conn, &st->scratch);
	CtasPgCloseFresh(st->side);
	st->side = NULL;
}

/*
 * pg_subxact
 *		Map local subtransaction end to the remote savepoint of that level.
 */
static void
pg_subxact(CtasParticipant *part, SubXactEvent event, int level)
{
	PgXactState *st = (PgXactState *) part->private;
	CtasConn   *entry;
	char	   *msg;

	if (st == NULL)
		return;
	/* the parallel loads of the level: their workers' gids */
	if (event == SUBXACT_EVENT_ABORT_SUB)
		(void) CtasPgRollbackWorkers(part->catalog, st->side, &st->workers,
									 level);
	else
		CtasPgSubCommitWorkers(st->workers, level);
	entry = st->entry;
	if (st->progress == PG_XACT_LOST || entry->conn == NULL ||
		entry->xact_depth < level)
		return;

	if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
	{
		CtasPgExec(entry->conn, part->catalog,
				   psprintf("RELEASE SAVEPOINT s%d", level));
	}
	else
	{
		bool		ok = true;

		/* as in pg_abort: a remote that stopped reading is given up */
		if (entry->in_copy && PQflush(entry->conn) != 0)
			ok = false;
		else if (entry->in_copy ||
				 PQtransactionStatus(entry->conn) == PQTRANS_ACTIVE)
			ok = CtasPgCancel(entry->conn, entry->in_copy, ABORT_TIMEOUT_MS);
		entry->in_copy = false;
		if (ok)
			ok = CtasPgExecBounded(entry->conn,
								   psprintf("ROLLBACK TO SAVEPOINT s%d", level),
								   CLEANUP_TIMEOUT_MS, &msg) &&
				CtasPgExecBounded(entry->conn,
								  psprintf("RELEASE SAVEPOINT s%d", level),
								  CLEANUP_TIMEOUT_MS, &msg);
		if (!ok)
		{
			/* the whole remote transaction is gone; commit must fail */
			st->progress = PG_XACT_LOST;
			CtasPgDisconnect(entry);
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not roll back to a savepoint on catalog \"%s\"",
							part->catalog->name),
					 errdetail("The transaction can only be rolled back.")));
			return;
		}
	}
	entry->xact_depth = level - 1;
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
