/*-------------------------------------------------------------------------
 *
 * parallel_worker.c
 *		  The worker side of a parallel load (parallel.c holds the leader
 *		  side and the protocol between the two): CtasParallelMain, the
 *		  entry point of a parallel worker, which claims units of work from
 *		  the DSM (parallel_dsm.h) until none is left; for each table it
 *		  attaches to the target (its own connection and stream), runs the
 *		  table's query over the unit's block range into a DestReceiver
 *		  that hands rows to the target and adds them to the table's
 *		  counters, and ends the stream when it moves on.  The leader runs
 *		  the same units through CtasParallelRunUnits when no worker could
 *		  be started.
 *
 * Workers do nothing locally but read: no job, no participant, no xid, no
 * durable record.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/parallel_worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "pgstat.h"
#include "storage/itemptr.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "guc.h"
#include "parallel_dsm.h"
#include "targets.h"

/* rows between two additions of a worker's counters to the DSM */
#define PUBLISH_EVERY_ROWS	1000

/* how often a worker waiting for the leader to settle tables looks, in ms */
#define WORKER_POLL_MS		10

/* The DestReceiver of a worker: rows to put_row, counters to the DSM */
typedef struct ParallelDest
{
	DestReceiver pub;
	CtasLoad   *load;
	ParallelTable *table;
	uint64		published_rows;
	uint64		published_bytes;
} ParallelDest;

/* errcontext of a worker's unit */
typedef struct UnitContext
{
	CtasLoad   *load;			/* NULL: attaching */
	const char *source;			/* "" for the load of a CTAS */
	BlockNumber start;			/* InvalidBlockNumber: after the units */
	BlockNumber end;			/* InvalidBlockNumber: to the end */
	bool		whole;			/* the unit is the whole table */
} UnitContext;

static void publish(ParallelDest *dest);
static CtasLoad *attach_load(Oid serverid, const char *desc,
							 const char *state);

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

/*
 * attach_load
 *		A load for a worker (or the leader running the units itself) from
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

/* errcontext of a worker's unit */
static void
unit_error_context(void *arg)
{
	UnitContext *uc = (UnitContext *) arg;
	CtasLoad   *load = uc->load;
	char	   *what;

	if (load == NULL)
	{
		if (uc->source[0] != '\0')
			errcontext("parallel load of %s", uc->source);
		return;
	}
	if (uc->source[0] != '\0')
		what = psprintf("parallel load of %s into %s.%s.%s", uc->source,
						load->catalog->name, load->schema, load->table);
	else
		what = psprintf("parallel load into %s.%s.%s",
						load->catalog->name, load->schema, load->table);
	if (uc->start == InvalidBlockNumber)
		errcontext("%s, end of a worker's stream", what);
	else if (uc->whole)
		errcontext("%s", what);
	else if (uc->end == InvalidBlockNumber)
		errcontext("%s, blocks %u to the end", what, uc->start);
	else
		errcontext("%s, blocks %u to %u", what, uc->start, uc->end - 1);
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

/* add what the worker sent since the last time to the table's counters */
static void
publish(ParallelDest *dest)
{
	CtasLoad   *load = dest->load;

	pg_atomic_fetch_add_u64(&dest->table->rows,
							load->rows - dest->published_rows);
	pg_atomic_fetch_add_u64(&dest->table->bytes,
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
 * begin_table
 *		Attach to the target of table number t (its own connection and
 *		stream), with the load in cxt, and point dest at it.  The query of
 *		the table, parsed in cxt, goes to *query.  ERROR as parallel_attach.
 */
static void
begin_table(CtasParallelShared *shared, ParallelSource *sources, int t,
			MemoryContext cxt, ParallelDest *dest, UnitContext *uc,
			Query **query)
{
	ParallelSource *src = &sources[t];
	ParallelTable *table = &shared_tables(shared)[t];
	MemoryContext oldcxt;
	CtasLoad   *load;

	uc->load = NULL;
	uc->source = src->str[SRC_SOURCE];
	if (IsParallelWorker())
	{
		debug_query_string = src->str[SRC_TEXT];
		pgstat_report_activity(STATE_RUNNING, src->str[SRC_TEXT]);
	}
	oldcxt = MemoryContextSwitchTo(cxt);
	*query = (Query *) stringToNode(src->str[SRC_QUERY]);
	load = attach_load(table->serverid, src->str[SRC_LOAD],
					   src->str[SRC_TARGET]);
	MemoryContextSwitchTo(oldcxt);

	if (uc->source[0] != '\0')
		ereport(DEBUG1,
				(errmsg_internal("parallel worker %d loads %s into %s.%s.%s",
								 ParallelWorkerNumber, uc->source,
								 load->catalog->name, load->schema,
								 load->table)));
	dest->load = load;
	dest->table = table;
	dest->published_rows = 0;
	dest->published_bytes = 0;
	uc->load = load;
	pg_atomic_fetch_add_u32(&table->attached, 1);

	/* attached, nothing sent yet: tests see who loads which table here */
	CtasFaultPointWait("parallel_table");
}

/*
 * wait_for_leader
 *		In a worker about to take another table: wait while the leader has
 *		shared->max_waiting streams or more of loaded tables to settle (a
 *		PostgreSQL worker's are prepared transactions, which the remote has
 *		a limited number of).  The leader settles them between two looks at
 *		the workers.  Interruptible.
 */
static void
wait_for_leader(CtasParallelShared *shared)
{
	for (;;)
	{
		uint32		settled = pg_atomic_read_u32(&shared->settled_streams);
		uint32		loaded = pg_atomic_read_u32(&shared->loaded_streams);

		/* settled may be ahead for a moment: the leader looks on its own */
		if (shared->max_waiting == 0 ||
			(int32) (loaded - settled) < (int32) shared->max_waiting)
			return;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 WORKER_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * end_table
 *		Close the stream of the table dest points at (end_load: a PostgreSQL
 *		worker prepares its remote transaction there), publish the counters
 *		and free the load (cxt, its connection with it).  ERROR when the
 *		target refuses what was sent.
 */
static void
end_table(CtasParallelShared *shared, MemoryContext cxt, ParallelDest *dest,
		  UnitContext *uc)
{
	ParallelTable *t = dest->table;
	uint32		detached;

	/* what a remote refuses may show only when the stream ends */
	uc->start = InvalidBlockNumber;
	dest->load->routine->end_load(dest->load);
	publish(dest);

	/*
	 * The last stream of the table (units_done read first, as the leader
	 * does): the leader has its streams to settle, wake it up.
	 */
	detached = pg_atomic_add_fetch_u32(&t->detached, 1);
	if (pg_atomic_read_u32(&t->units_done) == t->nunits &&
		detached == pg_atomic_read_u32(&t->attached))
	{
		pg_atomic_fetch_add_u32(&shared->loaded_streams, detached);
		if (IsParallelWorker())
			SetLatch(&ProcGlobal->allProcs[shared->leader_pgprocno].procLatch);
	}
	uc->load = NULL;
	dest->load = NULL;
	MemoryContextReset(cxt);
}

/*
 * CtasParallelRunUnits
 *		Claim units until none is left and load each: plan the table's
 *		query with the unit's block range (a TID Range Scan; none for a
 *		whole table), run it into that table's stream.  A backend attaches
 *		to a table when it claims its first unit of it and ends that stream
 *		when it claims a unit of another table, or none: units are handed
 *		out in order and a table's units are consecutive, so a backend has
 *		at most one stream per table, and one PostgreSQL gid per table.
 *		Before it takes another table, a worker (settle NULL) waits for the
 *		leader to settle the tables loaded (wait_for_leader); the leader
 *		running the units itself (no worker could be started) settles them
 *		itself, through settle(shared, arg).  The active snapshot is the leader's.  ERROR
 *		with the unit's context when anything fails; the table it was about
 *		is marked failed in shared.
 */
void
CtasParallelRunUnits(CtasParallelShared *shared, ParallelSource *sources,
					 CtasParallelSettle settle, void *arg)
{
	ParallelTable *tables = shared_tables(shared);
	ParallelUnit *units = shared_units(shared);
	ParallelDest dest;
	MemoryContext table_cxt;
	MemoryContext unit_cxt;
	ErrorContextCallback errcallback;
	UnitContext uc;
	Query	   *query = NULL;
	volatile int cur = -1;

	memset(&dest, 0, sizeof(dest));
	dest.pub.receiveSlot = parallel_dest_receive;
	dest.pub.rStartup = parallel_dest_startup;
	dest.pub.rShutdown = parallel_dest_shutdown;
	dest.pub.rDestroy = parallel_dest_destroy;
	dest.pub.mydest = DestNone;

	table_cxt = AllocSetContextCreate(CurrentMemoryContext,
									  "ctas_fed parallel table",
									  ALLOCSET_DEFAULT_SIZES);
	unit_cxt = AllocSetContextCreate(CurrentMemoryContext,
									 "ctas_fed parallel unit",
									 ALLOCSET_DEFAULT_SIZES);
	memset(&uc, 0, sizeof(uc));
	uc.source = "";
	errcallback.callback = unit_error_context;
	errcallback.arg = &uc;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	PG_TRY();
	{
		for (;;)
		{
			uint32		i = pg_atomic_fetch_add_u32(&shared->next_unit, 1);
			ParallelUnit *u;
			const char *sourcetext;
			MemoryContext oldcxt;
			Query	   *q;
			PlannedStmt *plan;
			QueryDesc  *qd;

			if (i >= shared->nunits)
				break;
			u = &units[i];
			if (u->table != cur)
			{
				if (cur >= 0)
					end_table(shared, table_cxt, &dest, &uc);
				if (settle != NULL)
					settle(shared, arg);
				else
					wait_for_leader(shared);
				cur = u->table;
				begin_table(shared, sources, cur, table_cxt, &dest, &uc,
							&query);
			}
			uc.start = u->start;
			uc.end = u->end;
			uc.whole = u->start == 0 && u->end == InvalidBlockNumber &&
				uc.source[0] != '\0';
			sourcetext = sources[cur].str[SRC_TEXT];

			oldcxt = MemoryContextSwitchTo(unit_cxt);
			q = copyObject(query);
			if (!uc.whole)
				add_block_range(q, u->start, u->end);
			plan = pg_plan_query(q, sourcetext, 0, NULL);
			qd = CreateQueryDesc(plan, sourcetext, GetActiveSnapshot(),
								 InvalidSnapshot, (DestReceiver *) &dest,
								 NULL, NULL, 0);
			ExecutorStart(qd, 0);
			ExecutorRun(qd, ForwardScanDirection, 0L, true);
			ExecutorFinish(qd);
			ExecutorEnd(qd);
			FreeQueryDesc(qd);
			MemoryContextSwitchTo(oldcxt);
			MemoryContextReset(unit_cxt);
			pg_atomic_fetch_add_u32(&tables[cur].units_done, 1);
			CHECK_FOR_INTERRUPTS();
		}
		if (cur >= 0)
			end_table(shared, table_cxt, &dest, &uc);
	}
	PG_CATCH();
	{
		if (cur >= 0)
			pg_atomic_write_u32(&tables[cur].failed, 1);
		PG_RE_THROW();
	}
	PG_END_TRY();
	error_context_stack = errcallback.previous;
	MemoryContextDelete(unit_cxt);
	MemoryContextDelete(table_cxt);
}

/*
 * CtasParallelMain
 *		Entry point of a parallel worker of a load (CreateParallelContext):
 *		load units until none is left.  ERROR goes to the leader.
 */
void
CtasParallelMain(dsm_segment *seg, shm_toc *toc)
{
	CtasParallelShared *shared;
	ParallelSource *sources;
	int			i;
	int			k;

	shared = shm_toc_lookup(toc, CTAS_PARALLEL_KEY_SHARED, false);
	sources = palloc(sizeof(ParallelSource) * shared->ntables);
	for (i = 0; i < shared->ntables; i++)
		for (k = 0; k < SOURCE_NSTRINGS; k++)
			sources[i].str[k] = shm_toc_lookup(toc,
											   CTAS_PARALLEL_KEY_STRING(i, k),
											   false);
	CtasParallelRunUnits(shared, sources, NULL, NULL);
	pg_atomic_fetch_add_u32(&shared->finished, 1);
}
