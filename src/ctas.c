/*-------------------------------------------------------------------------
 *
 * ctas.c
 *		  Run a federated CREATE TABLE AS, SELECT INTO, EXPLAIN of one, or
 *		  DROP TABLE of a catalog table: plan the query, derive the remote
 *		  columns from its result type, and stream its rows into the
 *		  target's writer through a DestReceiver.
 *
 * Order of work for CREATE TABLE catalog.schema.table AS ...:
 *	1. catalog descriptor: USAGE, user mapping (catalog.c);
 *	2. statement options parsed and checked, columns derived from the
 *	   query's result type and mapped by the target - all before any remote
 *	   work, so a bad option or type costs nothing remotely;
 *	3. atomic loads join the local transaction (xact.c);
 *	4. begin_load says whether the table exists; the if_exists policy
 *	   (error, skip, replace, append) is applied here, the same for every
 *	   target; create_table makes the table the rows go into;
 *	5. the executor pushes each row to put_row through a DestReceiver, one
 *	   short-lived memory context reset per row - or, WITH (parallel = N),
 *	   parallel workers do, each through its own stream (parallel.c);
 *	6. end_load; the command tag is SELECT <rows>.
 * Steps 1 and 2 are ctas_prepare.c's (CtasPrepareLoad); the rest is here.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 * Portions Copyright (c) 1996-2022, PostgreSQL Global Development Group
 *
 * IDENTIFICATION
 *		  src/ctas.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "commands/prepare.h"
#include "executor/executor.h"
#include "executor/tstoreReceiver.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_node.h"
#include "rewrite/rewriteHandler.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "catalog/namespace.h"
#include "utils/builtins.h"
#include "utils/varlena.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "ctas.h"
#include "gid.h"
#include "guc.h"
#include "parallel.h"
#include "sync/sync.h"
#include "targets.h"
#include "typemap.h"
#include "xact.h"

/* The DestReceiver that hands rows to the writer */
typedef struct CtasDest
{
	DestReceiver pub;
	CtasLoad   *load;
	TimestampTz started;		/* for progress NOTICEs */
	TimestampTz last_notice;
} CtasDest;

/* rows between two publications of a running job's counters */
#define PROGRESS_EVERY_ROWS	1000

static void start_load(CtasLoad *load);
static void finish_load(CtasLoad *load);
static DestReceiver *create_dest(CtasLoad *load);
static void load_error_context(void *arg);
static void explain_load(CtasLoad *load, Query *query, ExplainState *es,
						 const char *queryString, ParamListInfo params,
						 QueryEnvironment *queryEnv);
static void report_table_exists(CtasLoad *load, int elevel,
								bool concurrently);
static void start_job(CtasLoad *load, const char *mode);
static void ctas_fail_job(CtasLoad *load);
static void run_load(CtasLoad *load, ParseState *pstate, Query *query,
					 ParamListInfo params, QueryEnvironment *queryEnv);

/* seconds since *start */
static double
elapsed_seconds(instr_time *start)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, *start);
	return INSTR_TIME_GET_DOUBLE(now);
}

/*
 * load_error_context
 *		errcontext of a running load: which table, and for a streaming load
 *		how many rows the remote has committed (they stay there).
 */
static void
load_error_context(void *arg)
{
	CtasLoad   *load = (CtasLoad *) arg;

	if (load->part == NULL)
		errcontext("streaming load into %s.%s.%s: " UINT64_FORMAT " rows were committed in the remote table and stay there",
				   load->catalog->name, load->schema, load->table,
				   load->rows_committed);
	else
		errcontext("load into %s.%s.%s after " UINT64_FORMAT " rows",
				   load->catalog->name, load->schema, load->table,
				   load->rows);
}

/*
 * start_load
 *		Join the transaction (atomic loads), start the remote side and apply
 *		the if_exists policy to what it finds: ERROR (if_exists 'error'),
 *		NOTICE and load->skipped (IF NOT EXISTS), or the target replaces,
 *		appends or creates.  Memory in load->cxt.
 */
static void
start_load(CtasLoad *load)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(load->cxt);
	bool		exists;

	if (load->opts.atomic)
		load->part = CtasJoinTransaction(load->catalog);
	start_job(load, load->opts.atomic ? "atomic" : "streaming");

	/* the if_exists policy, the same for every target */
	exists = load->routine->begin_load(load);
	if (exists)
	{
		switch (load->opts.if_exists)
		{
			case CTAS_IF_EXISTS_ERROR:
				report_table_exists(load, ERROR, false);
				break;
			case CTAS_IF_EXISTS_SKIP:
				report_table_exists(load, NOTICE, false);
				load->skipped = true;
				MemoryContextSwitchTo(oldcxt);
				return;
			case CTAS_IF_EXISTS_REPLACE:
			case CTAS_IF_EXISTS_APPEND:
				break;
		}
	}
	if (!load->routine->create_table(load, exists))
		report_table_exists(load, ERROR, true);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * report_table_exists
 *		The one "already exists" message of every target: an ERROR, or the
 *		NOTICE of IF NOT EXISTS (elevel NOTICE).  concurrently: another
 *		transaction created the table after begin_load looked.
 */
static void
report_table_exists(CtasLoad *load, int elevel, bool concurrently)
{
	if (elevel < ERROR)
		ereport(elevel,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("relation \"%s.%s\" already exists in catalog \"%s\", skipping",
						load->schema, load->table, load->catalog->name)));
	else
		ereport(elevel,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("relation \"%s.%s\" already exists in catalog \"%s\"",
						load->schema, load->table, load->catalog->name),
				 concurrently ?
				 errdetail("Another transaction created it concurrently.") : 0,
				 errhint("Use IF NOT EXISTS, or the option if_exists 'replace' or 'append'.")));
}

/*
 * start_job
 *		Register the load in ctas_fed.jobs; an atomic one moves on with its
 *		transaction.
 */
static void
start_job(CtasLoad *load, const char *mode)
{
	load->job = CtasJobStart(load->catalog,
							 psprintf("%s.%s", quote_identifier(load->schema),
									  quote_identifier(load->table)),
							 mode,
							 load->catalog->notify_url ? load->catalog->notify_url :
							 CtasNotifyUrl);
	if (load->group_id != 0)
		CtasJobSetGroup(load->job, load->group_id);
	if (load->part)
		CtasXactAddJob(load->part, load->job);
}

/*
 * ctas_fail_job
 *		In a PG_CATCH block: mark the load's job failed with the message of
 *		the error being handled, and its rows: those sent (atomic; they are
 *		rolled back) or those committed (streaming; they stay).
 */
static void
ctas_fail_job(CtasLoad *load)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(load->cxt);
	ErrorData  *edata = CopyErrorData();

	MemoryContextSwitchTo(oldcxt);

	/*
	 * A failed streaming load records what stays in the remote table, the
	 * number its error context reports: load->rows does not count yet the
	 * row whose put_row committed a batch and then failed.
	 */
	CtasJobProgress(load->job,
					load->opts.atomic ? load->rows : load->rows_committed,
					load->bytes);
	CtasJobSetState(load->job, CTAS_JOB_FAILED, edata->message);
	FreeErrorData(edata);
}

/*
 * ctas_job_loaded
 *		After a load's rows are all sent and checked: the job's counters,
 *		and its end when nothing is left for the commit (streaming, or IF
 *		NOT EXISTS found the table).
 */
static void
ctas_job_loaded(CtasLoad *load)
{
	CtasJobProgress(load->job, load->rows, load->bytes);
	if (!load->opts.atomic || load->skipped)
		CtasJobSetState(load->job, CTAS_JOB_COMMITTED, NULL);
}

/*
 * finish_load
 *		Let the target close the row stream and check what arrived, unless
 *		IF NOT EXISTS skipped the load.  ERROR when the check fails.
 */
static void
finish_load(CtasLoad *load)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(load->cxt);

	if (!load->skipped)
		load->routine->end_load(load);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * CtasExecCreateTableAs
 *		Run CREATE TABLE catalog.schema.table AS ... (or SELECT INTO) and set
 *		the command tag to SELECT <rows>.
 */
void
CtasExecCreateTableAs(ParseState *pstate, CreateTableAsStmt *stmt,
					  Oid serverid, ParamListInfo params,
					  QueryEnvironment *queryEnv, QueryCompletion *qc)
{
	CtasLoad   *load;

	PreventCommandIfReadOnly("CREATE TABLE AS");

	load = CtasPrepareLoad(serverid, stmt);
	CtasRunLoad(load, pstate, castNode(Query, stmt->query), params,
				queryEnv);

	if (qc)
		SetQueryCompletion(qc, CMDTAG_SELECT, load->rows);
	MemoryContextDelete(load->cxt);
}

/*
 * CtasRunLoad
 *		Run a load made by CtasPrepareLoad from the query of its statement:
 *		join the transaction, create the remote table, stream the rows, and
 *		record the outcome in the load's job.  load->rows says how many rows
 *		were written; the caller deletes load->cxt.  ERROR (the job marked
 *		failed) when any of it fails.
 */
void
CtasRunLoad(CtasLoad *load, ParseState *pstate, Query *query,
			ParamListInfo params, QueryEnvironment *queryEnv)
{
	PG_TRY();
	{
		ErrorContextCallback errcallback;

		start_load(load);

		errcallback.callback = load_error_context;
		errcallback.arg = load;
		errcallback.previous = error_context_stack;
		error_context_stack = &errcallback;

		if (!load->skipped && !load->skip_data)
			run_load(load, pstate, query, params, queryEnv);
		finish_load(load);
		if (load->sync && !load->skipped)
			CtasSyncCreate(load);

		error_context_stack = errcallback.previous;
	}
	PG_CATCH();
	{
		ctas_fail_job(load);
		PG_RE_THROW();
	}
	PG_END_TRY();

	ctas_job_loaded(load);
}

/*
 * CtasBeginLoad
 *		The first half of CtasRunLoad, for a caller that has the rows moved
 *		by other means (multi.c: one set of parallel workers for many
 *		tables, parallel.c): join the transaction
 *		and create the remote table, with the row stream open.  Returns
 *		false when there are no rows to load (IF NOT EXISTS found the table,
 *		or WITH NO DATA); CtasEndLoad must follow either way.  ERROR (the
 *		job marked failed) when any of it fails.
 */
bool
CtasBeginLoad(CtasLoad *load)
{
	PG_TRY();
	{
		start_load(load);
	}
	PG_CATCH();
	{
		ctas_fail_job(load);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return !load->skipped && !load->skip_data;
}

/*
 * CtasEndLoad
 *		The second half: end_load, once load->rows and load->bytes hold what
 *		was sent, and the job's counters.  ERROR (the job marked failed) when
 *		the target's check fails.
 */
void
CtasEndLoad(CtasLoad *load)
{
	PG_TRY();
	{
		ErrorContextCallback errcallback;

		errcallback.callback = load_error_context;
		errcallback.arg = load;
		errcallback.previous = error_context_stack;
		error_context_stack = &errcallback;
		finish_load(load);
		error_context_stack = errcallback.previous;
	}
	PG_CATCH();
	{
		ctas_fail_job(load);
		PG_RE_THROW();
	}
	PG_END_TRY();

	ctas_job_loaded(load);
}

/*
 * CtasFailLoad
 *		In a PG_CATCH block of a caller of CtasBeginLoad: mark the load's job
 *		failed with the message of the error being handled.
 */
void
CtasFailLoad(CtasLoad *load)
{
	ctas_fail_job(load);
}

/*
 * run_load
 *		Execute the query of a CTAS (a SELECT, or EXECUTE of a prepared
 *		one) into the load's DestReceiver.
 */
static void
run_load(CtasLoad *load, ParseState *pstate, Query *query,
		 ParamListInfo params, QueryEnvironment *queryEnv)
{
	DestReceiver *dest = create_dest(load);

	if (query->commandType == CMD_UTILITY &&
		IsA(query->utilityStmt, ExecuteStmt))
	{
		if (load->opts.parallel > 0)
			CtasParallelLoad(load, NULL, pstate->p_sourcetext, params);
		ExecuteQuery(pstate, (ExecuteStmt *) query->utilityStmt, NULL,
					 params, dest, NULL);
	}
	else
	{
		List	   *rewritten;
		PlannedStmt *plan;
		QueryDesc  *queryDesc;

		rewritten = QueryRewrite(copyObject(query));
		if (list_length(rewritten) != 1)
			elog(ERROR, "unexpected rewrite result for CREATE TABLE AS SELECT");
		query = linitial_node(Query, rewritten);
		Assert(query->commandType == CMD_SELECT);

		/* WITH (parallel = N): the workers load, or one NOTICE says why not */
		if (load->opts.parallel > 0 &&
			CtasParallelLoad(load, query, pstate->p_sourcetext, params))
			return;

		plan = pg_plan_query(query, pstate->p_sourcetext,
							 CURSOR_OPT_PARALLEL_OK, params);

		PushCopiedSnapshot(GetActiveSnapshot());
		UpdateActiveSnapshotCommandId();
		queryDesc = CreateQueryDesc(plan, pstate->p_sourcetext,
									GetActiveSnapshot(), InvalidSnapshot,
									dest, params, queryEnv, 0);
		ExecutorStart(queryDesc, 0);
		ExecutorRun(queryDesc, ForwardScanDirection, 0L, true);
		ExecutorFinish(queryDesc);
		ExecutorEnd(queryDesc);
		FreeQueryDesc(queryDesc);
		PopActiveSnapshot();
	}
}

/*
 * plan_for_explain
 *		Plan query the way EXPLAIN does, measuring planning time and buffer
 *		usage.
 */
static PlannedStmt *
plan_for_explain(Query *query, int cursorOptions, ExplainState *es,
				 const char *queryString, ParamListInfo params,
				 instr_time *planduration, BufferUsage *bufusage)
{
	PlannedStmt *plan;
	instr_time	planstart;
	BufferUsage bufusage_start;

	if (es->buffers)
		bufusage_start = pgBufferUsage;
	INSTR_TIME_SET_CURRENT(planstart);
	plan = pg_plan_query(query, queryString, cursorOptions, params);
	INSTR_TIME_SET_CURRENT(*planduration);
	INSTR_TIME_SUBTRACT(*planduration, planstart);
	if (es->buffers)
	{
		memset(bufusage, 0, sizeof(BufferUsage));
		BufferUsageAccumDiff(bufusage, &pgBufferUsage, &bufusage_start);
	}
	return plan;
}

/*
 * CtasStandardExplainOneQuery
 *		What PostgreSQL's ExplainOneQuery does when no hook is set; used by
 *		the temporary hook of utility.c for any query that is not ours.
 */
void
CtasStandardExplainOneQuery(Query *query, int cursorOptions,
							IntoClause *into, ExplainState *es,
							const char *queryString, ParamListInfo params,
							QueryEnvironment *queryEnv)
{
	PlannedStmt *plan;
	instr_time	planduration;
	BufferUsage bufusage;

	plan = plan_for_explain(query, cursorOptions, es, queryString, params,
							&planduration, &bufusage);
	ExplainOnePlan(plan, into, es, queryString, params, queryEnv,
				   &planduration, es->buffers ? &bufusage : NULL);
}

/*
 * CtasExplainLoad
 *		EXPLAIN [ANALYZE] of a federated CTAS, called from the
 *		ExplainOneQuery hook with the rewritten SELECT.  Without ANALYZE, the
 *		plan and the target's description; with it, the load runs exactly
 *		as the CTAS would (atomically), with instrumentation.
 */
static void
explain_load(CtasLoad *load, Query *query, ExplainState *es,
			 const char *queryString, ParamListInfo params,
			 QueryEnvironment *queryEnv)
{
	PlannedStmt *plan;
	instr_time	planduration;
	BufferUsage bufusage;

	if (es->analyze && load->sync)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("EXPLAIN ANALYZE of a CREATE TABLE AS with the option \"sync\" is not supported"),
				 errhint("Use EXPLAIN without ANALYZE to see the plan of the query.")));

	plan = plan_for_explain(query, CURSOR_OPT_PARALLEL_OK, es, queryString,
							params, &planduration, &bufusage);

	if (!es->analyze || load->skip_data)
	{
		bool		analyze = es->analyze;

		if (analyze)
		{
			PreventCommandIfReadOnly("CREATE TABLE AS");
			start_load(load);
			finish_load(load);
		}
		es->analyze = false;
		ExplainOnePlan(plan, NULL, es, queryString, params, queryEnv,
					   &planduration, es->buffers ? &bufusage : NULL);
		es->analyze = analyze;
	}
	else
	{
		int			instrument_option = 0;
		instr_time	starttime;
		double		totaltime = 0;
		QueryDesc  *queryDesc;
		DestReceiver *dest;

		PreventCommandIfReadOnly("CREATE TABLE AS");
		start_load(load);
		dest = create_dest(load);

		if (es->timing)
			instrument_option |= INSTRUMENT_TIMER;
		else
			instrument_option |= INSTRUMENT_ROWS;
		if (es->buffers)
			instrument_option |= INSTRUMENT_BUFFERS;
		if (es->wal)
			instrument_option |= INSTRUMENT_WAL;

		INSTR_TIME_SET_CURRENT(starttime);
		PushCopiedSnapshot(GetActiveSnapshot());
		UpdateActiveSnapshotCommandId();
		queryDesc = CreateQueryDesc(plan, queryString, GetActiveSnapshot(),
									InvalidSnapshot, dest, params, queryEnv,
									instrument_option);
		ExecutorStart(queryDesc, 0);
		if (!load->skipped)
			ExecutorRun(queryDesc, ForwardScanDirection, 0L, true);
		ExecutorFinish(queryDesc);
		finish_load(load);
		totaltime += elapsed_seconds(&starttime);

		ExplainOpenGroup("Query", NULL, true, es);
		ExplainPrintPlan(es, queryDesc);
		if (es->summary)
			ExplainPropertyFloat("Planning Time", "ms",
								 1000.0 * INSTR_TIME_GET_DOUBLE(planduration),
								 3, es);
		ExplainPrintTriggers(es, queryDesc);
		ExplainPrintJITSummary(es, queryDesc);

		INSTR_TIME_SET_CURRENT(starttime);
		ExecutorEnd(queryDesc);
		FreeQueryDesc(queryDesc);
		PopActiveSnapshot();
		CommandCounterIncrement();
		totaltime += elapsed_seconds(&starttime);
		if (es->summary)
			ExplainPropertyFloat("Execution Time", "ms", 1000.0 * totaltime,
								 3, es);
		ExplainCloseGroup("Query", NULL, true, es);
	}

	ExplainOpenGroup("Federated Target", NULL, true, es);
	load->routine->explain(load, es);
	if (load->sync)
		CtasSyncExplain(load, es);
	if (load->opts.parallel > 0)
		CtasParallelExplain(load, query, params, es);
	if (es->analyze)
	{
		ExplainPropertyText("Remote Result", load->skipped ?
							"skipped: the table exists" : "loaded", es);
		ExplainPropertyUInteger("Rows Sent", NULL, load->rows, es);
		ExplainPropertyUInteger("Bytes Sent", NULL, load->bytes, es);
	}
	ExplainCloseGroup("Federated Target", NULL, true, es);
}

void
CtasExplainLoad(CtasLoad *load, Query *query, ExplainState *es,
				const char *queryString, ParamListInfo params,
				QueryEnvironment *queryEnv)
{
	PG_TRY();
	{
		explain_load(load, query, es, queryString, params, queryEnv);
	}
	PG_CATCH();
	{
		ctas_fail_job(load);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (es->analyze)
	{
		CtasJobProgress(load->job, load->rows, load->bytes);
		if (!load->opts.atomic || load->skipped)
			CtasJobSetState(load->job, CTAS_JOB_COMMITTED, NULL);
	}
}

/*
 * CtasExecDrop
 *		DROP TABLE [IF EXISTS] catalog.schema.table, in the local
 *		transaction with the same atomicity as a CTAS.
 */
void
CtasExecDrop(Oid serverid, List *names, bool missing_ok)
{
	RangeVar   *rel = makeRangeVarFromNameList(names);
	CtasLoad   *load;

	PreventCommandIfReadOnly("DROP TABLE");
	load = CtasNewLoad(serverid, rel, NIL);
	load->part = CtasJoinTransaction(load->catalog);
	start_job(load, "drop");
	PG_TRY();
	{
		load->routine->drop_table(load, missing_ok);
		/* a synced table: stop its sync, atomically with the DROP */
		(void) CtasSyncStop(serverid, load->schema, load->table);
	}
	PG_CATCH();
	{
		ctas_fail_job(load);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextDelete(load->cxt);
}

/* DestReceiver callbacks */

static void ctas_report_progress(CtasDest *dest);

static bool
ctas_dest_receive(TupleTableSlot *slot, DestReceiver *self)
{
	CtasDest   *dest = (CtasDest *) self;
	CtasLoad   *load = dest->load;

	CtasLoadPutRow(load, slot);

	if (load->rows % PROGRESS_EVERY_ROWS == 0)
	{
		CtasJobProgress(load->job, load->rows, load->bytes);
		if (CtasProgress)
			ctas_report_progress(dest);
	}
	return true;
}

/*
 * ctas_report_progress
 *		NOTICE with rows, bytes and rate, every ctas_fed.progress_interval
 *		seconds.
 */
static void
ctas_report_progress(CtasDest *dest)
{
	CtasLoad   *load = dest->load;
	TimestampTz now = GetCurrentTimestamp();
	double		secs;

	if (!TimestampDifferenceExceeds(dest->last_notice, now,
									CtasProgressInterval * 1000))
		return;
	dest->last_notice = now;
	secs = (double) (now - dest->started) / USECS_PER_SEC;
	ereport(NOTICE,
			(errmsg("loading into %s.%s.%s: " UINT64_FORMAT " rows, " UINT64_FORMAT " bytes, %.0f rows/s",
					load->catalog->name, load->schema, load->table,
					load->rows, load->bytes,
					secs > 0 ? load->rows / secs : 0.0)));
}

static void
ctas_dest_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	CtasLoad   *load = ((CtasDest *) self)->load;
	int			natts = 0;
	int			i;

	for (i = 0; i < typeinfo->natts; i++)
	{
		if (!TupleDescAttr(typeinfo, i)->attisdropped)
			natts++;
	}
	/* the columns were derived from the same query before it ran */
	if (natts != load->ncolumns)
		elog(ERROR, "query returned %d columns, expected %d",
			 natts, load->ncolumns);
}

static void
ctas_dest_shutdown(DestReceiver *self)
{
}

static void
ctas_dest_destroy(DestReceiver *self)
{
	pfree(self);
}

static DestReceiver *
create_dest(CtasLoad *load)
{
	CtasDest   *self = MemoryContextAllocZero(load->cxt, sizeof(CtasDest));

	self->pub.receiveSlot = ctas_dest_receive;
	self->pub.rStartup = ctas_dest_startup;
	self->pub.rShutdown = ctas_dest_shutdown;
	self->pub.rDestroy = ctas_dest_destroy;
	self->pub.mydest = DestNone;
	self->load = load;
	self->started = GetCurrentTimestamp();
	self->last_notice = self->started;
	return (DestReceiver *) self;
}
