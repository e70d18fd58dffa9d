/*-------------------------------------------------------------------------
 *
 * partcopy.c
 *		  The copy of a partitioned source, partition by partition in
 *		  parallel (docs/sync.md, "Partitioned sources").
 *
 * The copy of a sync (sync/join.c copy_job) runs in one transaction whose
 * snapshot is that of the slot's consistent point, and writes into one
 * remote transaction that stores that point as the job's applied lsn.
 * For a partitioned source with two leaves or more, up to
 * CTAS_SYNC_PARTITION_READERS parallel workers of PostgreSQL
 * (access/parallel.h, counted in max_parallel_workers and
 * max_worker_processes) read the leaves:
 *
 *	snapshot	each worker runs under the leader's transaction and active
 *				snapshot (restored by ParallelWorkerMain): the one snapshot
 *				of the copy, so that the rows read are exactly those before
 *				the consistent point, whichever process reads them
 *	units		the leaves, the biggest first, claimed from an atomic
 *				counter; a worker scans a leaf, converts each row to the
 *				root's row type (CtasSyncPartitionScan)
 *				and sends it to the leader through its tuple queue
 *				(executor/tqueue.h, as Gather's workers do)
 *	writing		the leader alone writes: it takes the rows from the queues
 *				as they come and hands each to the copy's row function (the
 *				query's evaluation and the target's copy_row), into the one
 *				remote transaction of the copy, committed by the caller after
 *				the last row: the remote sees all the rows or none, as with
 *				a serial copy
 *	errors		a worker's ERROR (or FATAL: terminated) is raised in the
 *				leader by CHECK_FOR_INTERRUPTS (HandleParallelMessages); the
 *				abort of the leader's transaction terminates and waits for
 *				every worker (AtEOXact_Parallel) and rolls back the remote
 *				transaction; the job stays "copying" and its copy is done
 *				again, as for any error of a copy
 *
 * When no worker starts (no free slot, max_parallel_workers_per_gather 0)
 * the leader reads the leaves itself, one after the other.  Only a copy
 * that evaluates nothing (plain columns, no WHERE) reads in parallel: the
 * leader is in parallel mode while the workers run, where PostgreSQL 15
 * refuses a subtransaction (a PL/pgSQL EXCEPTION block) even in a function
 * marked PARALLEL SAFE, so such a query's copy would fail at every try
 * (sync/join.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/partcopy.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/tupconvert.h"
#include "executor/tqueue.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "optimizer/cost.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "guc.h"
#include "sync/sync_int.h"

PGDLLEXPORT void CtasSyncPartitionReaderMain(dsm_segment *seg, shm_toc *toc);

/* the bytes of one worker's tuple queue */
#define READER_QUEUE_SIZE	(256 * 1024)

/* keys of the DSM's table of contents */
#define PARTCOPY_KEY_SHARED	UINT64CONST(0xCF08000000000001)
#define PARTCOPY_KEY_QUEUES	UINT64CONST(0xCF08000000000002)

/* what the leader and its workers share */
typedef struct PartCopyShared
{
	Oid			root;
	int			nleaves;
	pg_atomic_uint32 next;		/* the next leaf to claim */
	pg_atomic_uint32 scanned;	/* leaves read to their end */
	Oid			leaves[FLEXIBLE_ARRAY_MEMBER];	/* the biggest first */
} PartCopyShared;

/* a leaf and its size */
typedef struct SizedLeaf
{
	Oid			relid;
	BlockNumber pages;
} SizedLeaf;

/* qsort: biggest first, so that the readers finish close together */
static int
by_size(const void *a, const void *b)
{
	BlockNumber pa = ((const SizedLeaf *) a)->pages;
	BlockNumber pb = ((const SizedLeaf *) b)->pages;

	return pa < pb ? 1 : (pa > pb ? -1 : 0);
}

/*
 * sort_leaves
 *		The n leaves of the list into out, biggest first.  The caller holds
 *		their locks (find_all_inheritors).
 */
static void
sort_leaves(List *leaves, Oid *out)
{
	int			n = list_length(leaves);
	SizedLeaf  *sized = palloc(sizeof(SizedLeaf) * Max(n, 1));
	ListCell   *lc;
	int			i = 0;

	foreach(lc, leaves)
	{
		Relation	r = table_open(lfirst_oid(lc), NoLock);

		sized[i].relid = RelationGetRelid(r);
		sized[i].pages = RelationGetNumberOfBlocks(r);
		table_close(r, NoLock);
		i++;
	}
	qsort(sized, n, sizeof(SizedLeaf), by_size);
	for (i = 0; i < n; i++)
		out[i] = sized[i].relid;
	pfree(sized);
}

/*
 * CtasSyncPartitionScan
 *		The rows of leaf relid under the active snapshot, each given to row
 *		(with arg) in rootslot (of the root's row type rootdesc), or in the
 *		leaf's own slot when its columns are the root's.  In the copy's
 *		process, or in a reader of a parallel copy.
 */
void
CtasSyncPartitionScan(Oid relid, TupleDesc rootdesc, TupleTableSlot *rootslot,
					  void (*row) (TupleTableSlot *slot, void *arg),
					  void *arg)
{
	Relation	leaf;
	TupleTableSlot *hslot;
	TableScanDesc scan;
	TupleConversionMap *map;

	leaf = table_open(relid, AccessShareLock);
	map = convert_tuples_by_name(RelationGetDescr(leaf), rootdesc);
	hslot = table_slot_create(leaf, NULL);
	scan = table_beginscan(leaf, GetActiveSnapshot(), 0, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, hslot))
	{
		CHECK_FOR_INTERRUPTS();
		row(map != NULL ?
			execute_attr_map_slot(map->attrMap, hslot, rootslot) : hslot,
			arg);
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(hslot);
	if (map != NULL)
		free_conversion_map(map);
	table_close(leaf, AccessShareLock);
}

/*
 * read_queues
 *		Take the rows from the tuple queues of the launched readers as they
 *		come, a burst from each in turn, each given to row (with arg) in
 *		slot, until every reader has detached.  A reader's ERROR is raised
 *		here, by CHECK_FOR_INTERRUPTS.
 */
static void
read_queues(TupleQueueReader **readers, int launched, TupleTableSlot *slot,
			void (*row) (TupleTableSlot *slot, void *arg), void *arg)
{
	bool	   *done = palloc0(sizeof(bool) * launched);
	int			live = launched;
	int			i;

	while (live > 0)
	{
		bool		got = false;

		for (i = 0; i < launched; i++)
		{
			int			n;

			for (n = 0; n < 1000 && !done[i]; n++)
			{
				MinimalTuple tup;
				bool		detached = false;

				CHECK_FOR_INTERRUPTS();
				tup = TupleQueueReaderNext(readers[i], true, &detached);
				if (detached)
				{
					done[i] = true;
					live--;
					break;
				}
				if (tup == NULL)
					break;
				got = true;
				ExecStoreMinimalTuple(tup, slot, false);
				row(slot, arg);
				ExecClearTuple(slot);
			}
		}
		if (!got && live > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, 0,
							 WAIT_EVENT_EXECUTE_GATHER);
			ResetLatch(MyLatch);
		}
	}
	pfree(done);
}

/*
 * CtasSyncPartitionCopyParallel
 *		The leaves (relids, locked by the caller) of the partitioned rel
 *		read by parallel workers under the transaction's snapshot, each row
 *		given to row (with arg) here, in the leader, in a slot of rel's row
 *		type, in the current memory context.  Returns false, having read
 *		nothing, when no worker could start.
 */
bool
CtasSyncPartitionCopyParallel(Relation rel, List *leaves,
							  void (*row) (TupleTableSlot *slot, void *arg),
							  void *arg)
{
	int			nleaves = list_length(leaves);
	int			nworkers = Min(Min(nleaves, CTAS_SYNC_PARTITION_READERS),
							   max_parallel_workers_per_gather);
	Size		size = add_size(offsetof(PartCopyShared, leaves),
								mul_size(sizeof(Oid), nleaves));
	ParallelContext *pcxt;
	PartCopyShared *shared;
	char	   *queues;
	shm_mq_handle **handles;
	TupleQueueReader **readers;
	TupleTableSlot *slot;
	int			launched;
	int			i;

	if (nworkers <= 0)
		return false;
	EnterParallelMode();
	pcxt = CreateParallelContext("ctas_fed", "CtasSyncPartitionReaderMain",
								 nworkers);
	shm_toc_estimate_chunk(&pcxt->estimator, size);
	shm_toc_estimate_chunk(&pcxt->estimator,
						   mul_size(READER_QUEUE_SIZE, nworkers));
	shm_toc_estimate_keys(&pcxt->estimator, 2);
	InitializeParallelDSM(pcxt);
	if (pcxt->nworkers == 0)
	{
		/* no dynamic shared memory segment */
		DestroyParallelContext(pcxt);
		ExitParallelMode();
		return false;
	}
	shared = shm_toc_allocate(pcxt->toc, size);
	shared->root = RelationGetRelid(rel);
	shared->nleaves = nleaves;
	pg_atomic_init_u32(&shared->next, 0);
	pg_atomic_init_u32(&shared->scanned, 0);
	sort_leaves(leaves, shared->leaves);
	shm_toc_insert(pcxt->toc, PARTCOPY_KEY_SHARED, shared);
	queues = shm_toc_allocate(pcxt->toc, mul_size(READER_QUEUE_SIZE, nworkers));
	shm_toc_insert(pcxt->toc, PARTCOPY_KEY_QUEUES, queues);
	handles = palloc(sizeof(shm_mq_handle *) * nworkers);
	for (i = 0; i < nworkers; i++)
	{
		shm_mq	   *mq = shm_mq_create(queues + (Size) i * READER_QUEUE_SIZE,
									   READER_QUEUE_SIZE);

		shm_mq_set_receiver(mq, MyProc);
		handles[i] = shm_mq_attach(mq, pcxt->seg, NULL);
	}

	LaunchParallelWorkers(pcxt);
	launched = pcxt->nworkers_launched;
	for (i = launched; i < nworkers; i++)
		shm_mq_detach(handles[i]);
	if (launched == 0)
	{
		DestroyParallelContext(pcxt);
		ExitParallelMode();
		return false;
	}
	ereport(LOG,
			(errmsg("ctas_fed: the %d partitions of \"%s\" are read by %d parallel workers",
					nleaves, RelationGetRelationName(rel), launched)));

	readers = palloc(sizeof(TupleQueueReader *) * launched);
	for (i = 0; i < launched; i++)
	{
		/* a worker that dies before it attaches is seen as detached */
		shm_mq_set_handle(handles[i], pcxt->worker[i].bgwhandle);
		readers[i] = CreateTupleQueueReader(handles[i]);
	}
	slot = MakeSingleTupleTableSlot(RelationGetDescr(rel),
									&TTSOpsMinimalTuple);
	read_queues(readers, launched, slot, row, arg);

	/* ERROR if a worker failed, or ended without saying it ended */
	WaitForParallelWorkersToFinish(pcxt);
	if (pg_atomic_read_u32(&shared->scanned) != (uint32) nleaves)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("the parallel copy of \"%s\" read %u of its %d partitions",
						RelationGetRelationName(rel),
						pg_atomic_read_u32(&shared->scanned), nleaves)));
	for (i = 0; i < launched; i++)
		DestroyTupleQueueReader(readers[i]);
	ExecDropSingleTupleTableSlot(slot);
	DestroyParallelContext(pcxt);
	ExitParallelMode();
	return true;
}

/* a row of a reader into its tuple queue */
static void
send_row(TupleTableSlot *slot, void *arg)
{
	DestReceiver *dest = arg;

	if (!dest->receiveSlot(slot, dest))
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("the leader of the partition copy is gone")));
}

/*
 * CtasSyncPartitionReaderMain
 *		Entry point of a parallel worker of a partition copy
 *		(CreateParallelContext): scan leaves until none is left, sending
 *		their rows, in the root's row type, to the leader.  ERROR goes to
 *		the leader.
 */
void
CtasSyncPartitionReaderMain(dsm_segment *seg, shm_toc *toc)
{
	PartCopyShared *shared = shm_toc_lookup(toc, PARTCOPY_KEY_SHARED, false);
	char	   *queues = shm_toc_lookup(toc, PARTCOPY_KEY_QUEUES, false);
	shm_mq	   *mq;
	shm_mq_handle *mqh;
	DestReceiver *dest;
	Relation	root;
	TupleDesc	rootdesc;
	TupleTableSlot *rootslot;

	mq = (shm_mq *) (queues + (Size) ParallelWorkerNumber * READER_QUEUE_SIZE);
	shm_mq_set_sender(mq, MyProc);
	mqh = shm_mq_attach(mq, seg, NULL);
	dest = CreateTupleQueueDestReceiver(mqh);
	root = table_open(shared->root, AccessShareLock);
	rootdesc = RelationGetDescr(root);
	rootslot = MakeSingleTupleTableSlot(rootdesc, &TTSOpsVirtual);
	dest->rStartup(dest, CMD_SELECT, rootdesc);
	for (;;)
	{
		uint32		i = pg_atomic_fetch_add_u32(&shared->next, 1);

		if (i >= (uint32) shared->nleaves)
			break;
		CtasSyncPartitionScan(shared->leaves[i], rootdesc, rootslot,
							  send_row, dest);
		pg_atomic_fetch_add_u32(&shared->scanned, 1);
		/* tests: a reader between two partitions */
		CtasFaultPointWait("sync_partition_read");
		CHECK_FOR_INTERRUPTS();
	}
	dest->rShutdown(dest);
	dest->rDestroy(dest);
	ExecDropSingleTupleTableSlot(rootslot);
	table_close(root, AccessShareLock);
}
