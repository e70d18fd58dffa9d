/*-------------------------------------------------------------------------
 *
 * parallel.c
 *		  WITH (parallel = N) on a federated CTAS, and {"parallel": N} of
 *		  create_tables_as: N parallel workers read the source under the
 *		  leader's snapshot, and each writes through remote connections of
 *		  its own into what the leader's create_table made.  One table is
 *		  split by block ranges; many tables are handed out whole.
 *
 * This file holds the leader's side: eligibility, the plan of the units,
 * the ParallelContext and its DSM (laid out as parallel_dsm.h says), the
 * wait for the workers and EXPLAIN.  parallel_worker.c holds the workers'
 * side: CtasParallelMain, the units' run into the target, and the
 * DestReceiver that counts what is sent.
 *
 * Protocol (leader, from ctas.c once create_table has run, or from
 * multi.c once the create_table of every table has):
 *	1. eligibility: one plain heap table, a projection and a filter,
 *	   nothing volatile or parallel-unsafe, no parameters, an atomic load,
 *	   a target with parallel_export.  Anything else loads serially after
 *	   one NOTICE saying why (and EXPLAIN says the same).
 *	2. parallel_export of each table: the target's state for the workers,
 *	   and the end of the leader's own row stream into it.
 *	3. units of work, the tables' blocks read now: for one table, chunks
 *	   of consecutive blocks (about CHUNKS_PER_WORKER per worker), the
 *	   last with no upper bound; for many, the tables from the biggest
 *	   down, each one unit, but for a table bigger than one worker's share
 *	   of all the blocks, cut in chunks as one table would be.  Every tuple
 *	   our snapshot sees existed when it was taken, so lies below the block
 *	   count read after it, and the statement's lock keeps VACUUM FULL and
 *	   CLUSTER away.
 *	4. one ParallelContext (access/parallel.h) with the units and, per
 *	   table, the query, the load, the target state and counters in its
 *	   DSM; the workers get the leader's snapshot, transaction, user and
 *	   settings from it.  Each worker claims units from an atomic counter;
 *	   at its first unit of a table it attaches to that table's target
 *	   (parallel_attach: its own connection and stream), at its first unit
 *	   of another table (or when none is left) it ends that stream
 *	   (end_load).  A unit runs the query, with ctid >= '(b,0)' AND ctid <
 *	   '(e,0)' added for a block range (a TID Range Scan), and the worker
 *	   adds its rows and bytes to the table's counters every
 *	   PUBLISH_EVERY_ROWS rows.
 *	5. the leader waits in an interruptible latch loop, publishing each
 *	   table's counters to its job (ctas_fed.jobs) as the workers go.  A
 *	   worker's ERROR is raised in the leader by HandleParallelMessages,
 *	   with the worker's context; cancel and statement_timeout stop the
 *	   leader, and the abort of its transaction (or subtransaction)
 *	   terminates and waits for every worker (AtEOXact_Parallel) before
 *	   xact.c's abort callbacks undo the remote work.
 *	6. each load->rows and load->bytes are the sums, load->streams the
 *	   streams that ended without error (the target checks what it received
 *	   against them: rows lost on the way are an error); the fault point
 *	   "after_workers" (ctas_fed.fault_point, tests only) is here, after
 *	   every stream has ended; end_load of each table and the commit
 *	   protocol then run in the leader exactly as for a serial load.
 *
 * Workers do nothing locally but read: no job, no participant, no xid, no
 * durable record.  What the transaction must undo or resolve is named after
 * the leader's transaction: a staging table the target already undoes and
 * resolves (with its durable record), or a scratch table and the workers'
 * remote transactions, prepared under gids the leader's transaction owns
 * (gid.c), so that the target's resolver knows whose they are.  The
 * target's end_load, abort and resolver deal with them as with the rest of
 * the transaction.  Units are claimed in order and a table's units are
 * consecutive, so a worker has at most one stream per table: a PostgreSQL
 * worker gid names the table's load and the worker, and end_load of each
 * table settles exactly its own.  When fewer workers start than asked for
 * (max_worker_processes, max_parallel_workers), a NOTICE says so; when
 * none does, the leader runs the units itself.
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
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "pgstat.h"
#include "rewrite/rewriteHandler.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "jobs.h"
#include "parallel_dsm.h"

/* chunks per worker: enough that the workers finish close together */
#define CHUNKS_PER_WORKER	8

/* how often the leader publishes the counters to the job, in ms */
#define LEADER_POLL_MS		100

/* ranges EXPLAIN lists before it abbreviates */
#define EXPLAIN_MAX_RANGES	16

/* One table of a CtasParallelSet */
typedef struct ParallelEntry
{
	CtasLoad   *load;
	Oid			relid;
	BlockNumber nblocks;		/* read when the set runs */
	ParallelSource src;
	bool		failed;			/* a worker's error was about it */
	bool		ended;			/* handed to loaded */
} ParallelEntry;

/* Tables loaded by one ParallelContext (parallel.h) */
struct CtasParallelSet
{
	int			nworkers;
	List	   *entries;		/* ParallelEntry */
	CtasParallelLoaded loaded;	/* NULL: the caller ends the one load */
	void	   *loaded_arg;
};

static const char *parallel_ineligible(CtasLoad *load, Query *query,
									   ParamListInfo params, Oid *relid);
static void plan_split(Oid relid, int nworkers, BlockNumber *chunk_blocks,
					   uint32 *nchunks);
static ParallelUnit *plan_units(CtasParallelSet *set, uint32 *nunits);
static void run_set(CtasParallelSet *set);
static void parallel_report_progress(CtasParallelSet *set, int nworkers,
									 TimestampTz started, TimestampTz *last_notice);
static void wait_for_workers(ParallelContext *pcxt,
							 CtasParallelShared *shared,
							 CtasParallelSet *set);
static char *serialize_load(CtasLoad *load);
/* the size of a CtasParallelShared with its arrays */
static Size
shared_size(int ntables, uint32 nunits)
{
	return add_size(add_size(MAXALIGN(sizeof(CtasParallelShared)),
							 MAXALIGN(mul_size(sizeof(ParallelTable),
											   ntables))),
					mul_size(sizeof(ParallelUnit), nunits));
}


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

/* ------------------------------------------------------------------------
 * Leader
 * ------------------------------------------------------------------------
 */

/*
 * CtasParallelIneligible
 *		For a caller that loads many tables in one set (multi.c): NULL when
 *		the load of query (the analyzed SELECT of its statement) can be a
 *		table of a CtasParallelSet, with the rewritten SELECT in *rewritten
 *		(palloc'd in the current context); else why not, as a phrase.  No
 *		NOTICE, no remote work.
 */
const char *
CtasParallelIneligible(CtasLoad *load, Query *query, Query **rewritten)
{
	List	   *l = QueryRewrite(copyObject(query));
	Oid			relid;

	if (list_length(l) != 1)
		return "the query is not a single SELECT";
	*rewritten = linitial_node(Query, l);
	return parallel_ineligible(load, *rewritten, NULL, &relid);
}

/*
 * CtasParallelSetCreate
 *		An empty set of tables for nworkers parallel workers, in the
 *		current memory context.  loaded(load, arg) is called in the leader
 *		for each table as soon as its workers are done with it (its rows
 *		and bytes set), while they load the others: it runs end_load, so
 *		that a PostgreSQL table's worker transactions do not stay prepared
 *		until every table is loaded.  It may ERROR.
 */
CtasParallelSet *
CtasParallelSetCreate(int nworkers, CtasParallelLoaded loaded, void *arg)
{
	CtasParallelSet *set = palloc0(sizeof(CtasParallelSet));

	set->nworkers = nworkers;
	set->loaded = loaded;
	set->loaded_arg = arg;
	return set;
}

/*
 * set_add
 *		Add the load of relid to set: its strings for the workers, and the
 *		end of the leader's own row stream (parallel_export).  ERROR as
 *		parallel_export.
 */
static void
set_add(CtasParallelSet *set, CtasLoad *load, Oid relid, Query *query,
		const char *sourcetext, const char *source)
{
	ParallelEntry *e = palloc0(sizeof(ParallelEntry));

	e->load = load;
	e->relid = relid;
	e->src.str[SRC_QUERY] = nodeToString(query);
	e->src.str[SRC_LOAD] = serialize_load(load);
	e->src.str[SRC_TEXT] = sourcetext ? sourcetext : "";
	e->src.str[SRC_SOURCE] = source;
	e->src.str[SRC_TARGET] = load->routine->parallel_export(load);
	set->entries = lappend(set->entries, e);
}

/*
 * CtasParallelSetAdd
 *		Add to set the load of rewritten (from CtasParallelIneligible, which
 *		said yes), just after CtasBeginLoad created its table: this ends
 *		the leader's row stream, so that the next table's can open.  source
 *		names the table in messages.  ERROR as parallel_export.
 */
void
CtasParallelSetAdd(CtasParallelSet *set, CtasLoad *load, Query *rewritten,
				   const char *sourcetext, const char *source)
{
	Oid			relid = InvalidOid;
	const char *why = parallel_ineligible(load, rewritten, NULL, &relid);

	if (why != NULL)
		elog(ERROR, "load of %s cannot be parallel: %s", source, why);
	set_add(set, load, relid, rewritten, sourcetext, source);
}

/*
 * CtasParallelSetRun
 *		Load every table of set with its workers: set->nworkers of them
 *		claim the units (whole tables, or block ranges of a table bigger
 *		than one worker's share) until none is left.  Each table goes to
 *		the set's loaded callback once it is loaded, with its rows and bytes
 *		set (its job has them).  ERROR when a worker fails (its error; then
 *		CtasParallelSetFailed says which table it was about), when loaded
 *		does, or when the statement is cancelled.
 */
void
CtasParallelSetRun(CtasParallelSet *set)
{
	if (set->entries != NIL)
		run_set(set);
}

/*
 * CtasParallelSetFailed
 *		After CtasParallelSetRun failed: whether a worker's error was about
 *		load.
 */
bool
CtasParallelSetFailed(CtasParallelSet *set, CtasLoad *load)
{
	ListCell   *lc;

	foreach(lc, set->entries)
	{
		ParallelEntry *e = lfirst(lc);

		if (e->load == load)
			return e->failed;
	}
	return false;
}

/* qsort_arg comparator of table indexes: most blocks first, then in order */
static int
entry_size_cmp(const void *a, const void *b, void *arg)
{
	ParallelEntry **entries = (ParallelEntry **) arg;
	int			ia = *(const int *) a;
	int			ib = *(const int *) b;

	if (entries[ia]->nblocks != entries[ib]->nblocks)
		return entries[ia]->nblocks > entries[ib]->nblocks ? -1 : 1;
	return ia - ib;
}

/*
 * plan_units
 *		The units of work of set, in the order the workers claim them
 *		(palloc'd).  One table: its chunks (plan_split).  Many: the tables
 *		from the biggest down, each one unit, but for a table of more blocks
 *		than one worker's share of all the blocks, which is cut into chunks
 *		of the size one table would get, so that it does not load alone
 *		after the others are done.  Sizes are read now, as plan_split does.
 */
static ParallelUnit *
plan_units(CtasParallelSet *set, uint32 *nunits)
{
	int			ntables = list_length(set->entries);
	ParallelEntry **entries = palloc(sizeof(ParallelEntry *) * ntables);
	int		   *order = palloc(sizeof(int) * ntables);
	ParallelUnit *units;
	uint64		total = 0;
	uint64		share;
	uint64		chunk;
	uint64		want = (uint64) set->nworkers * CHUNKS_PER_WORKER;
	uint32		n = 0;
	StringInfoData plan;
	int			i;

	for (i = 0; i < ntables; i++)
	{
		Relation	rel;

		entries[i] = list_nth(set->entries, i);
		rel = table_open(entries[i]->relid, NoLock);
		entries[i]->nblocks = RelationGetNumberOfBlocks(rel);
		table_close(rel, NoLock);
		total += entries[i]->nblocks;
		order[i] = i;
	}

	if (ntables == 1)
	{
		BlockNumber chunk_blocks;
		uint32		nchunks;

		plan_split(entries[0]->relid, set->nworkers, &chunk_blocks, &nchunks);
		units = palloc(sizeof(ParallelUnit) * nchunks);
		for (n = 0; n < nchunks; n++)
		{
			units[n].table = 0;
			units[n].start = n * chunk_blocks;
			units[n].end = n == nchunks - 1 ? InvalidBlockNumber :
				(n + 1) * chunk_blocks;
		}
		*nunits = nchunks;
		return units;
	}

	qsort_arg(order, ntables, sizeof(int), entry_size_cmp, entries);
	share = total / set->nworkers;
	chunk = Max((total + want - 1) / want, 1);

	/* a cut table has at most nblocks / chunk + 1 units: want + ntables */
	units = palloc(sizeof(ParallelUnit) * (want + ntables));
	initStringInfo(&plan);
	for (i = 0; i < ntables; i++)
	{
		int			t = order[i];
		BlockNumber nblocks = entries[t]->nblocks;
		BlockNumber start;
		uint32		first = n;

		if (set->nworkers < 2 || nblocks <= share || nblocks <= chunk)
		{
			units[n].table = t;
			units[n].start = 0;
			units[n].end = InvalidBlockNumber;
			n++;
		}
		else
		{
			for (start = 0; start < nblocks; start += chunk)
			{
				units[n].table = t;
				units[n].start = start;
				units[n].end = start + chunk >= nblocks ?
					InvalidBlockNumber : start + chunk;
				n++;
			}
		}
		appendStringInfo(&plan, "%s%s (%u blocks", i > 0 ? ", " : "",
						 entries[t]->src.str[SRC_SOURCE], nblocks);
		if (n - first > 1)
			appendStringInfo(&plan, ", %u ranges", n - first);
		appendStringInfoChar(&plan, ')');
	}
	ereport(DEBUG1,
			(errmsg_internal("parallel load of %d tables with %d workers, in this order: %s",
							 ntables, set->nworkers, plan.data)));
	*nunits = n;
	return units;
}

/* the split and zero counters of set into shared */
static void
init_shared(CtasParallelShared *shared, CtasParallelSet *set,
			ParallelUnit *units, uint32 nunits)
{
	ParallelTable *tables;
	ListCell   *lc;
	uint32		i;

	shared->ntables = list_length(set->entries);
	shared->nunits = nunits;
	shared->leader_pgprocno = MyProc->pgprocno;
	shared->max_waiting = set->loaded ? set->nworkers : 0;
	pg_atomic_init_u32(&shared->next_unit, 0);
	pg_atomic_init_u32(&shared->finished, 0);
	pg_atomic_init_u32(&shared->loaded_streams, 0);
	pg_atomic_init_u32(&shared->settled_streams, 0);
	tables = shared_tables(shared);
	foreach(lc, set->entries)
	{
		ParallelEntry *e = lfirst(lc);
		ParallelTable *t = &tables[foreach_current_index(lc)];

		t->serverid = e->load->catalog->serverid;
		t->nunits = 0;
		pg_atomic_init_u32(&t->units_done, 0);
		pg_atomic_init_u32(&t->attached, 0);
		pg_atomic_init_u32(&t->detached, 0);
		pg_atomic_init_u32(&t->failed, 0);
		pg_atomic_init_u64(&t->rows, 0);
		pg_atomic_init_u64(&t->bytes, 0);
	}
	for (i = 0; i < nunits; i++)
		tables[units[i].table].nunits++;
	memcpy(shared_units(shared), units, sizeof(ParallelUnit) * nunits);
}

/*
 * collect
 *		The counters of shared into the loads of set and their jobs; with
 *		failed, also which tables a worker's error was about.
 */
static void
collect(CtasParallelSet *set, CtasParallelShared *shared, bool failed)
{
	ParallelTable *tables = shared_tables(shared);
	ListCell   *lc;

	foreach(lc, set->entries)
	{
		ParallelEntry *e = lfirst(lc);
		ParallelTable *t = &tables[foreach_current_index(lc)];

		if (failed)
		{
			e->failed = pg_atomic_read_u32(&t->failed) != 0;
			continue;
		}
		e->load->rows = pg_atomic_read_u64(&t->rows);
		e->load->bytes = pg_atomic_read_u64(&t->bytes);
		e->load->streams = pg_atomic_read_u32(&t->detached);
		CtasJobProgress(e->load->job, e->load->rows, e->load->bytes);
	}
}

/*
 * end_loaded
 *		Hand to set->loaded the tables that the workers are done with, per
 *		shared (their final counters then), or every table not handed yet
 *		when shared is NULL (their counters collected already).  ERROR as
 *		loaded.
 */
static void
end_loaded(CtasParallelSet *set, CtasParallelShared *shared)
{
	ListCell   *lc;

	if (set->loaded == NULL)
		return;
	foreach(lc, set->entries)
	{
		ParallelEntry *e = lfirst(lc);
		ParallelTable *t = NULL;

		if (e->ended)
			continue;
		if (shared != NULL)
		{
			t = &shared_tables(shared)[foreach_current_index(lc)];

			/* units_done first: then every stream is counted in attached */
			if (pg_atomic_read_u32(&t->units_done) < t->nunits)
				continue;
			pg_read_barrier();
			if (pg_atomic_read_u32(&t->detached) <
				pg_atomic_read_u32(&t->attached))
				continue;
			pg_read_barrier();
			e->load->rows = pg_atomic_read_u64(&t->rows);
			e->load->bytes = pg_atomic_read_u64(&t->bytes);
			e->load->streams = pg_atomic_read_u32(&t->detached);
		}
		e->ended = true;
		set->loaded(e->load, set->loaded_arg);
		if (t != NULL)
			pg_atomic_fetch_add_u32(&shared->settled_streams,
									pg_atomic_read_u32(&t->attached));
	}
}

/* CtasParallelSettle of the leader running the units itself */
static void
settle_loaded(CtasParallelShared *shared, void *arg)
{
	end_loaded((CtasParallelSet *) arg, shared);
}

/*
 * set_name
 *		What set loads, for messages: catalog.schema.table of its one
 *		table, or how many tables of which catalog (palloc'd).
 */
static char *
set_name(CtasParallelSet *set)
{
	CtasLoad   *load = ((ParallelEntry *) linitial(set->entries))->load;

	if (list_length(set->entries) == 1)
		return psprintf("%s.%s.%s", load->catalog->name, load->schema,
						load->table);
	return psprintf("%d tables of catalog \"%s\"",
					list_length(set->entries), load->catalog->name);
}

/*
 * run_set
 *		CtasParallelSetRun, and the load of one table (CtasParallelLoad): a
 *		ParallelContext whose DSM holds the units, per table its counters,
 *		query, load and target state, and the workers of it; or, when none
 *		could be started, the leader runs the units itself.  The fault
 *		point "after_workers" is at the end, once every stream has ended.
 */
static void
run_set(CtasParallelSet *set)
{
	int			ntables = list_length(set->entries);
	ParallelSource *sources = palloc(sizeof(ParallelSource) * ntables);
	ParallelUnit *units;
	uint32		nunits;
	Size		size;
	ParallelContext *pcxt;
	CtasParallelShared *shared;
	int			nlaunched;
	ListCell   *lc;
	int			i;
	int			k;

	units = plan_units(set, &nunits);
	size = shared_size(ntables, nunits);
	foreach(lc, set->entries)
	{
		ParallelEntry *e = lfirst(lc);

		sources[foreach_current_index(lc)] = e->src;
	}

	/* the snapshot of the query, as run_load would take it */
	PushCopiedSnapshot(GetActiveSnapshot());
	UpdateActiveSnapshotCommandId();

	EnterParallelMode();
	pcxt = CreateParallelContext("ctas_fed", "CtasParallelMain",
								 set->nworkers);
	shm_toc_estimate_chunk(&pcxt->estimator, size);
	for (i = 0; i < ntables; i++)
		for (k = 0; k < SOURCE_NSTRINGS; k++)
			shm_toc_estimate_chunk(&pcxt->estimator,
								   strlen(sources[i].str[k]) + 1);
	shm_toc_estimate_keys(&pcxt->estimator, 1 + ntables * SOURCE_NSTRINGS);
	InitializeParallelDSM(pcxt);

	shared = shm_toc_allocate(pcxt->toc, size);
	init_shared(shared, set, units, nunits);
	shm_toc_insert(pcxt->toc, CTAS_PARALLEL_KEY_SHARED, shared);
	for (i = 0; i < ntables; i++)
	{
		for (k = 0; k < SOURCE_NSTRINGS; k++)
		{
			char	   *space;

			space = shm_toc_allocate(pcxt->toc, strlen(sources[i].str[k]) + 1);
			strcpy(space, sources[i].str[k]);
			shm_toc_insert(pcxt->toc, CTAS_PARALLEL_KEY_STRING(i, k), space);
		}
	}

	LaunchParallelWorkers(pcxt);
	nlaunched = pcxt->nworkers_launched;
	if (nlaunched > 0 && nlaunched < set->nworkers)
		ereport(NOTICE,
				(errmsg("loading %s with %d parallel workers instead of %d",
						set_name(set), nlaunched, set->nworkers),
				 errhint("Raise \"max_worker_processes\" or \"max_parallel_workers\", or ask for fewer workers.")));
	PG_TRY();
	{
		if (nlaunched > 0)
			wait_for_workers(pcxt, shared, set);
	}
	PG_CATCH();
	{
		collect(set, shared, true);
		PG_RE_THROW();
	}
	PG_END_TRY();
	DestroyParallelContext(pcxt);
	ExitParallelMode();

	if (nlaunched == 0)
	{
		/* the leader runs every unit itself, through streams of its own */
		CtasParallelShared *local = palloc(size);

		ereport(NOTICE,
				(errmsg("loading %s in the leader: no parallel worker could be started",
						set_name(set)),
				 errhint("Raise \"max_worker_processes\" or \"max_parallel_workers\".")));
		init_shared(local, set, units, nunits);
		PG_TRY();
		{
			CtasParallelRunUnits(local, sources, settle_loaded, set);
		}
		PG_CATCH();
		{
			collect(set, local, true);
			PG_RE_THROW();
		}
		PG_END_TRY();
		collect(set, local, false);
	}
	PopActiveSnapshot();

	/* every stream has ended (a worker's may be prepared): tests stop here */
	CtasFaultPointWait("after_workers");
	CHECK_FOR_INTERRUPTS();

	/* the tables that were not handed to loaded while the workers ran */
	end_loaded(set, NULL);
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
	CtasParallelSet *set;

	why = parallel_ineligible(load, query, params, &relid);
	if (why != NULL)
	{
		ereport(NOTICE,
				(errmsg("loading %s.%s.%s serially: %s",
						load->catalog->name, load->schema, load->table, why)));
		return false;
	}
	set = CtasParallelSetCreate(load->opts.parallel, NULL, NULL);
	set_add(set, load, relid, query, sourcetext, "");
	run_set(set);
	return true;
}

/*
 * wait_for_workers
 *		Wait until every launched worker has run out of units, publishing
 *		their counters to the loads of set and their jobs meanwhile.
 *		Interruptible: a worker's ERROR, cancel and statement_timeout are
 *		raised here.
 */
static void
wait_for_workers(ParallelContext *pcxt, CtasParallelShared *shared,
				 CtasParallelSet *set)
{
	TimestampTz started = GetCurrentTimestamp();
	TimestampTz last_notice = started;

	for (;;)
	{
		uint32		stopped = 0;
		int			i;

		CHECK_FOR_INTERRUPTS();
		collect(set, shared, false);
		end_loaded(set, shared);
		if (CtasProgress)
			parallel_report_progress(set, pcxt->nworkers_launched, started,
									 &last_notice);

		if (pg_atomic_read_u32(&shared->finished) >= pcxt->nworkers_launched)
			break;
		/*
		 * One that stopped without finishing: WaitFor... below says why.  A
		 * worker counts itself finished before it stops, so finished is read
		 * after the workers: the others may be waiting for this loop to
		 * settle their tables (wait_for_leader).
		 */
		for (i = 0; i < pcxt->nworkers_launched; i++)
		{
			pid_t		pid;

			if (pcxt->worker[i].bgwhandle &&
				GetBackgroundWorkerPid(pcxt->worker[i].bgwhandle, &pid) ==
				BGWH_STOPPED)
				stopped++;
		}
		pg_read_barrier();
		if (stopped > pg_atomic_read_u32(&shared->finished))
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 LEADER_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	WaitForParallelWorkersToFinish(pcxt);
	if (pg_atomic_read_u32(&shared->finished) < pcxt->nworkers_launched)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("a parallel worker of the load into %s exited without finishing",
						set_name(set))));
	collect(set, shared, false);
}

/*
 * parallel_report_progress
 *		ctas_fed.progress: a NOTICE with the rows and bytes of all workers
 *		(in all the tables of set) every ctas_fed.progress_interval seconds.
 */
static void
parallel_report_progress(CtasParallelSet *set, int nworkers, TimestampTz started,
						 TimestampTz *last_notice)
{
	TimestampTz now = GetCurrentTimestamp();
	uint64		rows = 0;
	uint64		bytes = 0;
	double		secs;
	ListCell   *lc;

	if (!TimestampDifferenceExceeds(*last_notice, now,
									CtasProgressInterval * 1000))
		return;
	*last_notice = now;
	foreach(lc, set->entries)
	{
		ParallelEntry *e = lfirst(lc);

		rows += e->load->rows;
		bytes += e->load->bytes;
	}
	secs = (double) (now - started) / USECS_PER_SEC;
	ereport(NOTICE,
			(errmsg("loading into %s with %d parallel workers: " UINT64_FORMAT " rows, " UINT64_FORMAT " bytes, %.0f rows/s",
					set_name(set), nworkers, rows, bytes,
					secs > 0 ? rows / secs : 0.0)));
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

