/*-------------------------------------------------------------------------
 *
 * parallel.c
 *		  WITH (parallel = N) on a federated CTAS: N parallel workers read
 *		  disjoint block ranges of the one table of the query, under the
 *		  leader's snapshot, and each writes through a remote connection of
 *		  its own into what the leader's create_table made.
 *
 * Protocol (leader, from ctas.c once create_table has run):
 *	1. eligibility: one plain heap table, a projection and a filter,
 *	   nothing volatile or parallel-unsafe, no parameters, an atomic load,
 *	   a target with parallel_export.  Anything else loads serially after
 *	   one NOTICE saying why (and EXPLAIN says the same).
 *	2. split: the table's blocks, read now, in chunks of consecutive
 *	   blocks (about CHUNKS_PER_WORKER per worker); the last chunk has no
 *	   upper bound.  Every tuple our snapshot sees existed when it was
 *	   taken, so lies below the block count read after it, and the
 *	   statement's lock keeps VACUUM FULL and CLUSTER away.
 *	3. parallel_export: the target's state for the workers, and the end of
 *	   the leader's own row stream.
 *	4. a ParallelContext (access/parallel.h) with the query, the load and
 *	   the target state in its DSM; the workers get the leader's snapshot,
 *	   transaction, user and settings from it.  Each worker attaches to the
 *	   target (parallel_attach: its own connection and stream), claims
 *	   chunks from an atomic counter, runs the query with ctid >= '(b,0)'
 *	   AND ctid < '(e,0)' added (a TID Range Scan), and adds its rows and
 *	   bytes to counters in the DSM every PUBLISH_EVERY_ROWS rows.
 *	5. the leader waits in an interruptible latch loop, publishing the sum
 *	   of the counters to the job (ctas_fed.jobs) as the workers go.  A
 *	   worker's ERROR is raised in the leader by HandleParallelMessages,
 *	   with the worker's context; cancel and statement_timeout stop the
 *	   leader, and the abort of its transaction (or subtransaction)
 *	   terminates and waits for every worker (AtEOXact_Parallel) before
 *	   xact.c's abort callbacks undo the remote work.
 *	6. load->rows and load->bytes are the sums; the fault point
 *	   "after_workers" (ctas_fed.fault_point, tests only) is here, after
 *	   every stream has ended; end_load and the commit protocol then run in
 *	   the leader exactly as for a serial load.
 *
 * Workers do nothing locally but read: no job, no participant, no xid, no
 * durable record.  What the transaction must undo or resolve is named after
 * the leader's transaction: a staging table the target already undoes and
 * resolves (with its durable record), or a scratch table and the workers'
 * remote transactions, prepared under gids the leader's transaction owns
 * (gid.c), so that the target's resolver knows whose they are.  The
 * target's end_load, abort and resolver deal with them as with the rest of
 * the transaction.  When fewer workers start than
 * asked for (max_worker_processes, max_parallel_workers), a NOTICE says
 * so; when none does, the leader runs the chunks itself.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/parallel.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/table.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "storage/bufmgr.h"
#include "storage/itemptr.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "jobs.h"
#include "parallel.h"
#include "xact.h"

/* keys of the DSM table of contents */
#define CTAS_PARALLEL_KEY_SHARED	UINT64CONST(0xC7A5FED000000001)
#define CTAS_PARALLEL_KEY_QUERY		UINT64CONST(0xC7A5FED000000002)
#define CTAS_PARALLEL_KEY_LOAD		UINT64CONST(0xC7A5FED000000003)
#define CTAS_PARALLEL_KEY_TARGET	UINT64CONST(0xC7A5FED000000004)
#define CTAS_PARALLEL_KEY_SOURCE	UINT64CONST(0xC7A5FED000000005)

/* chunks per worker: enough that the workers finish close together */
#define CHUNKS_PER_WORKER	8

/* rows between two additions of a worker's counters to the DSM */
#define PUBLISH_EVERY_ROWS	1000

/* how often the leader publishes the counters to the job, in ms */
#define LEADER_POLL_MS		100

/* ranges EXPLAIN lists before it abbreviates */
#define EXPLAIN_MAX_RANGES	16

/* In the DSM: the split, and what the workers have done */
typedef struct CtasParallelShared
{
	Oid			serverid;
	BlockNumber chunk_blocks;	/* blocks per chunk */
	uint32		nchunks;		/* the last one is open-ended */
	pg_atomic_uint32 next_chunk;	/* next chunk to claim */
	pg_atomic_uint32 finished;	/* workers that ended without error */
	pg_atomic_uint64 rows;		/* rows sent, all workers */
	pg_atomic_uint64 bytes;		/* payload bytes sent, all workers */
} CtasParallelShared;

/* The DestReceiver of a worker: rows to put_row, counters to the DSM */
typedef struct ParallelDest
{
	DestReceiver pub;
	CtasLoad   *load;
	CtasParallelShared *shared;
	uint64		published_rows;
	uint64		published_bytes;
} ParallelDest;

/* errcontext of a worker's chunk */
typedef struct ChunkContext
{
	CtasLoad   *load;
	BlockNumber start;			/* InvalidBlockNumber: after the chunks */
	BlockNumber end;			/* InvalidBlockNumber: to the end */
} ChunkContext;

static const char *parallel_ineligible(CtasLoad *load, Query *query,
									   ParamListInfo params, Oid *relid);
static void plan_split(Oid relid, int nworkers, BlockNumber *chunk_blocks,
					   uint32 *nchunks);
static void run_chunks(CtasParallelShared *shared, CtasLoad *load,
					   Query *query, const char *sourcetext);
static void publish(ParallelDest *dest);
static void report_progress(CtasLoad *load, int nworkers,
							TimestampTz started, TimestampTz *last_notice);
static void wait_for_workers(ParallelContext *pcxt, CtasParallelShared *shared,
							 CtasLoad *load);
static char *serialize_load(CtasLoad *load);
static CtasLoad *attach_load(Oid serverid, const char *desc,
							 const char *state);

/* ------------------------------------------------------------------------
 * Eligibility and split
 * ------------------------------------------------------------------------
 */

/*
 * parallel_ineligible
 *		NULL when the load can be split by blocks of one table (*relid is
 *		set), else why not, as a phrase for a NOTICE or EXPLAIN (palloc'd
 *		or constant).  query is the rewritten SELECT, or NULL for EXECUTE.
 *		Takes no lock the statement does not already hold.
 */
static const char *
parallel_ineligible(CtasLoad *load, Query *query, ParamListInfo params,
					Oid *relid)
{
	RangeTblEntry *rte;
	Relation	rel;
	const char *why = NULL;

	if (load->routine->parallel_export == NULL ||
		load->routine->parallel_attach == NULL)
		return psprintf("catalogs of type \"%s\" are loaded through one connection",
						load->routine->type_name);
	if (!load->opts.atomic)
		return "a streaming load (atomic = false) runs serially";
	if (query == NULL)
		return "the query is the EXECUTE of a prepared statement";
	if (params != NULL && params->numParams > 0)
		return "the query has parameters";
	if (IsInParallelMode())
		return "the statement already runs in parallel mode";
	if (query->commandType != CMD_SELECT || query->utilityStmt != NULL ||
		query->setOperations != NULL)
		return "the query is not a single SELECT";
	if (query->cteList != NIL)
		return "the query has a WITH clause";
	if (query->hasAggs || query->groupClause != NIL ||
		query->groupingSets != NIL || query->havingQual != NULL)
		return "the query aggregates";
	if (query->hasWindowFuncs)
		return "the query has window functions";
	if (query->hasTargetSRFs)
		return "the query has set-returning functions";
	if (query->hasSubLinks)
		return "the query has subqueries";
	if (query->distinctClause != NIL)
		return "the query has DISTINCT";
	if (query->sortClause != NIL)
		return "the query has ORDER BY";
	if (query->limitCount != NULL || query->limitOffset != NULL)
		return "the query has LIMIT or OFFSET";
	if (query->rowMarks != NIL || query->hasForUpdate)
		return "the query locks rows";
	if (list_length(query->rtable) != 1 ||
		list_length(query->jointree->fromlist) != 1 ||
		!IsA(linitial(query->jointree->fromlist), RangeTblRef))
		return "the query does not read exactly one table";
	rte = linitial_node(RangeTblEntry, query->rtable);
	if (rte->rtekind != RTE_RELATION ||
		(rte->relkind != RELKIND_RELATION && rte->relkind != RELKIND_MATVIEW))
		return "the query does not read a plain table";
	if (rte->tablesample != NULL)
		return "the query has TABLESAMPLE";
	if (contain_volatile_functions((Node *) query))
		return "the query calls volatile functions";
	if (max_parallel_hazard(query) != PROPARALLEL_SAFE)
		return "the query calls functions that are not parallel safe";

	rel = table_open(rte->relid, NoLock);
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
		why = psprintf("table \"%s\" is temporary",
					   RelationGetRelationName(rel));
	else if (rel->rd_rel->relam != HEAP_TABLE_AM_OID)
		why = psprintf("table \"%s\" does not use the heap access method",
					   RelationGetRelationName(rel));
	else if (rte->inh && has_subclass(rte->relid))
		why = psprintf("table \"%s\" has inheritance children",
					   RelationGetRelationName(rel));
	table_close(rel, NoLock);
	*relid = rte->relid;
	return why;
}

/*
 * plan_split
 *		Chunks of consecutive blocks of relid for nworkers workers: about
 *		CHUNKS_PER_WORKER each, at least one block each.
 */
static void
plan_split(Oid relid, int nworkers, BlockNumber *chunk_blocks,
		   uint32 *nchunks)
{
	Relation	rel = table_open(relid, NoLock);
	BlockNumber nblocks = RelationGetNumberOfBlocks(rel);
	uint64		want = (uint64) nworkers * CHUNKS_PER_WORKER;

	table_close(rel, NoLock);
	if (nblocks == 0)
	{
		*chunk_blocks = 1;
		*nchunks = 1;
		return;
	}
	if (want > nblocks)
		want = nblocks;
	*chunk_blocks = (nblocks + want - 1) / want;
	*nchunks = (nblocks + *chunk_blocks - 1) / *chunk_blocks;
}

/*
 * add_block_range
 *		AND ctid >= '(start,0)' [AND ctid < '(end,0)'] to the WHERE clause of
 *		query (modified in place; memory in the current context).
 */
static void
add_block_range(Query *query, BlockNumber start, BlockNumber end)
{
	RangeTblRef *rtr = linitial_node(RangeTblRef, query->jointree->fromlist);
	List	   *quals = NIL;
	BlockNumber bounds[2] = {start, end};
	Oid			ops[2] = {TIDGreaterEqOperator, TIDLessOperator};
	int			i;

	for (i = 0; i < 2; i++)
	{
		ItemPointer tid;
		OpExpr	   *op;

		if (bounds[i] == InvalidBlockNumber)
			continue;
		tid = palloc(sizeof(ItemPointerData));
		ItemPointerSet(tid, bounds[i], 0);
		op = (OpExpr *) make_opclause(ops[i], BOOLOID, false,
									  (Expr *) makeVar(rtr->rtindex,
													   SelfItemPointerAttributeNumber,
													   TIDOID, -1, InvalidOid, 0),
									  (Expr *) makeConst(TIDOID, -1, InvalidOid,
														 sizeof(ItemPointerData),
														 PointerGetDatum(tid),
														 false, false),
									  InvalidOid, InvalidOid);
		op->opfuncid = get_opcode(ops[i]);
		quals = lappend(quals, op);
	}
	if (query->jointree->quals)
		quals = lappend(quals, query->jointree->quals);
	query->jointree->quals = (Node *) make_andclause(quals);
}

/* ------------------------------------------------------------------------
 * Leader
 * ------------------------------------------------------------------------
 */

/* the split and zero counters into shared */
static void
init_shared(CtasParallelShared *shared, Oid serverid,
			BlockNumber chunk_blocks, uint32 nchunks)
{
	shared->serverid = serverid;
	shared->chunk_blocks = chunk_blocks;
	shared->nchunks = nchunks;
	pg_atomic_init_u32(&shared->next_chunk, 0);
	pg_atomic_init_u32(&shared->finished, 0);
	pg_atomic_init_u64(&shared->rows, 0);
	pg_atomic_init_u64(&shared->bytes, 0);
}

/* a copy of s in the DSM of pcxt, under key */
static void
put_string(ParallelContext *pcxt, uint64 key, const char *s)
{
	char	   *space = shm_toc_allocate(pcxt->toc, strlen(s) + 1);

	strcpy(space, s);
	shm_toc_insert(pcxt->toc, key, space);
}

/*
 * CtasParallelLoad
 *		Load the rows of query (the rewritten SELECT of the CTAS, or NULL
 *		for EXECUTE) with load->opts.parallel workers, after create_table.
 *		Returns false, after one NOTICE saying why, when the load cannot be
 *		split: the caller then loads serially.  Else load->rows and
 *		load->bytes are set and the caller goes on with end_load.  ERROR
 *		when a worker fails (its error) or the statement is cancelled.
 */
bool
CtasParallelLoad(CtasLoad *load, Query *query, const char *sourcetext,
				 ParamListInfo params)
{
	const char *why;
	Oid			relid = InvalidOid;
	BlockNumber chunk_blocks;
	uint32		nchunks;
	char	   *query_str;
	char	   *load_str;
	char	   *target_str;
	ParallelContext *pcxt;
	CtasParallelShared *shared;
	int			nlaunched;

	why = parallel_ineligible(load, query, params, &relid);
	if (why != NULL)
	{
		ereport(NOTICE,
				(errmsg("loading %s.%s.%s serially: %s",
						load->catalog->name, load->schema, load->table, why)));
		return false;
	}
	plan_split(relid, load->opts.parallel, &chunk_blocks, &nchunks);

	query_str = nodeToString(query);
	load_str = serialize_load(load);
	target_str = load->routine->parallel_export(load);
	if (sourcetext == NULL)
		sourcetext = "";

	/* the snapshot of the query, as run_load would take it */
	PushCopiedSnapshot(GetActiveSnapshot());
	UpdateActiveSnapshotCommandId();

	EnterParallelMode();
	pcxt = CreateParallelContext("ctas_fed", "CtasParallelMain",
								 load->opts.parallel);
	shm_toc_estimate_chunk(&pcxt->estimator, sizeof(CtasParallelShared));
	shm_toc_estimate_chunk(&pcxt->estimator, strlen(query_str) + 1);
	shm_toc_estimate_chunk(&pcxt->estimator, strlen(load_str) + 1);
	shm_toc_estimate_chunk(&pcxt->estimator, strlen(target_str) + 1);
	shm_toc_estimate_chunk(&pcxt->estimator, strlen(sourcetext) + 1);
	shm_toc_estimate_keys(&pcxt->estimator, 5);
	InitializeParallelDSM(pcxt);

	shared = shm_toc_allocate(pcxt->toc, sizeof(CtasParallelShared));
	init_shared(shared, load->catalog->serverid, chunk_blocks, nchunks);
	shm_toc_insert(pcxt->toc, CTAS_PARALLEL_KEY_SHARED, shared);
	put_string(pcxt, CTAS_PARALLEL_KEY_QUERY, query_str);
	put_string(pcxt, CTAS_PARALLEL_KEY_LOAD, load_str);
	put_string(pcxt, CTAS_PARALLEL_KEY_TARGET, target_str);
	put_string(pcxt, CTAS_PARALLEL_KEY_SOURCE, sourcetext);

	LaunchParallelWorkers(pcxt);
	nlaunched = pcxt->nworkers_launched;
	if (nlaunched > 0 && nlaunched < load->opts.parallel)
		ereport(NOTICE,
				(errmsg("loading %s.%s.%s with %d parallel workers instead of %d",
						load->catalog->name, load->schema, load->table,
						nlaunched, load->opts.parallel),
				 errhint("Raise \"max_worker_processes\" or \"max_parallel_workers\", or ask for fewer workers.")));
	if (nlaunched > 0)
		wait_for_workers(pcxt, shared, load);
	DestroyParallelContext(pcxt);
	ExitParallelMode();

	if (nlaunched == 0)
	{
		/* the leader runs every chunk itself, through a stream of its own */
		CtasParallelShared local;
		CtasLoad   *own;

		ereport(NOTICE,
				(errmsg("loading %s.%s.%s in the leader: no parallel worker could be started",
						load->catalog->name, load->schema, load->table),
				 errhint("Raise \"max_worker_processes\" or \"max_parallel_workers\".")));
		init_shared(&local, load->catalog->serverid, chunk_blocks, nchunks);
		own = attach_load(local.serverid, load_str, target_str);
		run_chunks(&local, own, query, sourcetext);
		MemoryContextDelete(own->cxt);
		load->rows = pg_atomic_read_u64(&local.rows);
		load->bytes = pg_atomic_read_u64(&local.bytes);
	}
	PopActiveSnapshot();
	CtasJobProgress(load->job, load->rows, load->bytes);

	/* every stream has ended (a worker's may be prepared): tests stop here */
	CtasXactFaultPoint("after_workers");
	CHECK_FOR_INTERRUPTS();
	return true;
}

/*
 * wait_for_workers
 *		Wait until every launched worker has finished its chunks, publishing
 *		their counters to load and its job meanwhile.  Interruptible: a
 *		worker's ERROR, cancel and statement_timeout are raised here.
 */
static void
wait_for_workers(ParallelContext *pcxt, CtasParallelShared *shared,
				 CtasLoad *load)
{
	TimestampTz started = GetCurrentTimestamp();
	TimestampTz last_notice = started;

	for (;;)
	{
		bool		stopped = false;
		int			i;

		CHECK_FOR_INTERRUPTS();
		load->rows = pg_atomic_read_u64(&shared->rows);
		load->bytes = pg_atomic_read_u64(&shared->bytes);
		CtasJobProgress(load->job, load->rows, load->bytes);
		if (CtasProgress)
			report_progress(load, pcxt->nworkers_launched, started,
							&last_notice);

		if (pg_atomic_read_u32(&shared->finished) >= pcxt->nworkers_launched)
			break;
		/* one that stopped without finishing: WaitFor... below says why */
		for (i = 0; i < pcxt->nworkers_launched; i++)
		{
			pid_t		pid;

			if (pcxt->worker[i].bgwhandle &&
				GetBackgroundWorkerPid(pcxt->worker[i].bgwhandle, &pid) ==
				BGWH_STOPPED)
				stopped = true;
		}
		if (stopped)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 LEADER_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	WaitForParallelWorkersToFinish(pcxt);
	if (pg_atomic_read_u32(&shared->finished) < pcxt->nworkers_launched)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("a parallel worker of the load into %s.%s.%s exited without finishing",
						load->catalog->name, load->schema, load->table)));
	load->rows = pg_atomic_read_u64(&shared->rows);
	load->bytes = pg_atomic_read_u64(&shared->bytes);
}

/*
 * report_progress
 *		ctas_fed.progress: a NOTICE with the rows and bytes of all workers
 *		every ctas_fed.progress_interval seconds.
 */
static void
report_progress(CtasLoad *load, int nworkers, TimestampTz started,
				TimestampTz *last_notice)
{
	TimestampTz now = GetCurrentTimestamp();
	double		secs;

	if (!TimestampDifferenceExceeds(*last_notice, now,
									CtasProgressInterval * 1000))
		return;
	*last_notice = now;
	secs = (double) (now - started) / USECS_PER_SEC;
	ereport(NOTICE,
			(errmsg("loading into %s.%s.%s with %d parallel workers: " UINT64_FORMAT " rows, " UINT64_FORMAT " bytes, %.0f rows/s",
					load->catalog->name, load->schema, load->table, nworkers,
					load->rows, load->bytes,
					secs > 0 ? load->rows / secs : 0.0)));
}

/*
 * CtasParallelExplain
 *		EXPLAIN of a load with parallel = N: the workers and the planned
 *		block ranges, or why it would load serially (EXPLAIN ANALYZE runs
 *		the load serially, instrumented).  No remote work.
 */
void
CtasParallelExplain(CtasLoad *load, Query *query, ParamListInfo params,
					ExplainState *es)
{
	const char *why;
	Oid			relid = InvalidOid;
	BlockNumber chunk_blocks;
	uint32		nchunks;
	StringInfoData buf;
	uint32		i;

	why = es->analyze ? "EXPLAIN ANALYZE loads serially" :
		parallel_ineligible(load, query, params, &relid);
	if (why != NULL)
	{
		ExplainPropertyText("Parallel", psprintf("no: %s", why), es);
		return;
	}
	plan_split(relid, load->opts.parallel, &chunk_blocks, &nchunks);
	ExplainPropertyText("Parallel",
						psprintf("%d workers, %u chunks of %u blocks",
								 load->opts.parallel, nchunks, chunk_blocks),
						es);
	initStringInfo(&buf);
	for (i = 0; i < nchunks; i++)
	{
		if (i == EXPLAIN_MAX_RANGES - 1 && nchunks > EXPLAIN_MAX_RANGES)
		{
			appendStringInfo(&buf, " ... [%u,end)",
							 (nchunks - 1) * chunk_blocks);
			break;
		}
		if (i == nchunks - 1)
			appendStringInfo(&buf, "%s[%u,end)", i ? " " : "",
							 i * chunk_blocks);
		else
			appendStringInfo(&buf, "%s[%u,%u)", i ? " " : "",
							 i * chunk_blocks, (i + 1) * chunk_blocks);
	}
	ExplainPropertyText("Block Ranges", buf.data, es);
}

/*
 * serialize_load
 *		What a worker needs of the load besides the target's state: schema,
 *		table and the columns (name, type, typmod, remote type, key, binary
 *		output), as
 *		the text of a List (palloc'd).
 */
static char *
serialize_load(CtasLoad *load)
{
	List	   *l = list_make2(makeString(load->schema),
							   makeString(load->table));
	int			i;

	for (i = 0; i < load->ncolumns; i++)
	{
		CtasColumn *c = &load->columns[i];

		List	   *f = list_make5(makeString(c->name),
									   makeInteger((int) c->typid),
									   makeInteger(c->typmod),
									   makeString(c->remote_type),
									   makeBoolean(c->is_key));

		l = lappend(l, lappend(f, makeBoolean(c->binary_ok)));
	}
	return nodeToString(l);
}

/* ------------------------------------------------------------------------
 * Worker
 * ------------------------------------------------------------------------
 */

/*
 * attach_load
 *		A load for a worker (or the leader running the chunks itself) from
 *		serialize_load's desc, attached to the target with state.  Memory
 *		in a context of its own under the current one.  ERROR as
 *		parallel_attach.
 */
static CtasLoad *
attach_load(Oid serverid, const char *desc, const char *state)
{
	MemoryContext cxt;
	MemoryContext oldcxt;
	CtasLoad   *load;
	List	   *l;
	ListCell   *lc;
	int			n = 0;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "ctas_fed parallel load",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	load = palloc0(sizeof(CtasLoad));
	load->cxt = cxt;
	load->row_cxt = AllocSetContextCreate(cxt, "ctas_fed row",
										  ALLOCSET_DEFAULT_SIZES);
	load->catalog = CtasGetCatalog(serverid, GetUserId(), true, true);
	load->routine = CtasCatalogRoutine(load->catalog);
	load->opts.atomic = true;
	load->job.slot = -1;

	l = (List *) stringToNode(desc);
	load->schema = strVal(linitial(l));
	load->table = strVal(lsecond(l));
	load->columns = palloc0(sizeof(CtasColumn) * list_length(l));
	for_each_from(lc, l, 2)
	{
		List	   *f = lfirst(lc);
		CtasColumn *c = &load->columns[n++];
		Oid			func;
		bool		isvarlena;

		c->name = strVal(linitial(f));
		c->typid = (Oid) intVal(lsecond(f));
		c->typmod = intVal(lthird(f));
		c->remote_type = strVal(lfourth(f));
		c->is_key = boolVal(list_nth(f, 4));
		c->overridden = true;
		c->basetypmod = c->typmod;
		c->basetypid = getBaseTypeAndTypmod(c->typid, &c->basetypmod);
		c->binary_ok = boolVal(list_nth(f, 5));
		getTypeOutputInfo(c->typid, &func, &isvarlena);
		fmgr_info_cxt(func, &c->out_func, cxt);
		if (c->binary_ok)
		{
			getTypeBinaryOutputInfo(c->typid, &func, &isvarlena);
			fmgr_info_cxt(func, &c->send_func, cxt);
		}
	}
	load->ncolumns = n;
	load->routine->parallel_attach(load, state);
	MemoryContextSwitchTo(oldcxt);
	return load;
}

static void
chunk_error_context(void *arg)
{
	ChunkContext *cc = (ChunkContext *) arg;

	if (cc->start == InvalidBlockNumber)
		errcontext("parallel load into %s.%s.%s, end of a worker's stream",
				   cc->load->catalog->name, cc->load->schema,
				   cc->load->table);
	else if (cc->end == InvalidBlockNumber)
		errcontext("parallel load into %s.%s.%s, blocks %u to the end",
				   cc->load->catalog->name, cc->load->schema,
				   cc->load->table, cc->start);
	else
		errcontext("parallel load into %s.%s.%s, blocks %u to %u",
				   cc->load->catalog->name, cc->load->schema,
				   cc->load->table, cc->start, cc->end - 1);
}

static bool
parallel_dest_receive(TupleTableSlot *slot, DestReceiver *self)
{
	ParallelDest *dest = (ParallelDest *) self;
	CtasLoad   *load = dest->load;

	CtasLoadPutRow(load, slot);
	if (load->rows - dest->published_rows >= PUBLISH_EVERY_ROWS)
		publish(dest);
	return true;
}

/* add what the worker sent since the last time to the DSM's counters */
static void
publish(ParallelDest *dest)
{
	CtasLoad   *load = dest->load;

	pg_atomic_fetch_add_u64(&dest->shared->rows,
							load->rows - dest->published_rows);
	pg_atomic_fetch_add_u64(&dest->shared->bytes,
							load->bytes - dest->published_bytes);
	dest->published_rows = load->rows;
	dest->published_bytes = load->bytes;
}

static void
parallel_dest_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
parallel_dest_shutdown(DestReceiver *self)
{
}

static void
parallel_dest_destroy(DestReceiver *self)
{
}

/*
 * run_chunks
 *		Claim chunks until none is left and load each: plan the query with
 *		the chunk's block range (a TID Range Scan), run it into the load.
 *		Then close the load's stream (end_load) and publish the counters.
 *		The active snapshot is the leader's.  ERROR with the chunk's
 *		context when anything fails.
 */
static void
run_chunks(CtasParallelShared *shared, CtasLoad *load, Query *query,
		   const char *sourcetext)
{
	ParallelDest dest;
	MemoryContext chunk_cxt;
	ErrorContextCallback errcallback;
	ChunkContext cc;

	memset(&dest, 0, sizeof(dest));
	dest.pub.receiveSlot = parallel_dest_receive;
	dest.pub.rStartup = parallel_dest_startup;
	dest.pub.rShutdown = parallel_dest_shutdown;
	dest.pub.rDestroy = parallel_dest_destroy;
	dest.pub.mydest = DestNone;
	dest.load = load;
	dest.shared = shared;

	chunk_cxt = AllocSetContextCreate(CurrentMemoryContext,
									  "ctas_fed parallel chunk",
									  ALLOCSET_DEFAULT_SIZES);
	cc.load = load;
	errcallback.callback = chunk_error_context;
	errcallback.arg = &cc;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	for (;;)
	{
		uint32		i = pg_atomic_fetch_add_u32(&shared->next_chunk, 1);
		MemoryContext oldcxt;
		Query	   *q;
		PlannedStmt *plan;
		QueryDesc  *qd;

		if (i >= shared->nchunks)
			break;
		cc.start = i * shared->chunk_blocks;
		cc.end = i == shared->nchunks - 1 ? InvalidBlockNumber :
			cc.start + shared->chunk_blocks;

		oldcxt = MemoryContextSwitchTo(chunk_cxt);
		q = copyObject(query);
		add_block_range(q, cc.start, cc.end);
		plan = pg_plan_query(q, sourcetext, 0, NULL);
		qd = CreateQueryDesc(plan, sourcetext, GetActiveSnapshot(),
							 InvalidSnapshot, (DestReceiver *) &dest, NULL,
							 NULL, 0);
		ExecutorStart(qd, 0);
		ExecutorRun(qd, ForwardScanDirection, 0L, true);
		ExecutorFinish(qd);
		ExecutorEnd(qd);
		FreeQueryDesc(qd);
		MemoryContextSwitchTo(oldcxt);
		MemoryContextReset(chunk_cxt);
		CHECK_FOR_INTERRUPTS();
	}

	/* what a remote refuses may show only when the stream ends */
	cc.start = InvalidBlockNumber;
	load->routine->end_load(load);
	error_context_stack = errcallback.previous;
	publish(&dest);
	MemoryContextDelete(chunk_cxt);
}

/*
 * CtasParallelMain
 *		Entry point of a parallel worker of a load (CreateParallelContext):
 *		attach to the target and load chunks until none is left.  ERROR
 *		goes to the leader.
 */
void
CtasParallelMain(dsm_segment *seg, shm_toc *toc)
{
	CtasParallelShared *shared;
	char	   *sourcetext;
	Query	   *query;
	CtasLoad   *load;

	shared = shm_toc_lookup(toc, CTAS_PARALLEL_KEY_SHARED, false);
	sourcetext = shm_toc_lookup(toc, CTAS_PARALLEL_KEY_SOURCE, false);
	debug_query_string = sourcetext;
	pgstat_report_activity(STATE_RUNNING, sourcetext);
	query = (Query *) stringToNode(shm_toc_lookup(toc, CTAS_PARALLEL_KEY_QUERY,
												  false));
	load = attach_load(shared->serverid,
					   shm_toc_lookup(toc, CTAS_PARALLEL_KEY_LOAD, false),
					   shm_toc_lookup(toc, CTAS_PARALLEL_KEY_TARGET, false));
	run_chunks(shared, load, query, sourcetext);
	pg_atomic_fetch_add_u32(&shared->finished, 1);
	MemoryContextDelete(load->cxt);
}
