/*-------------------------------------------------------------------------
 *
 * parallel_dsm.h
 *		  The dynamic shared memory of a parallel load: the work units, the
 *		  per-table counters and the strings that describe each table, as
 *		  the leader (parallel.c) lays them out and the workers
 *		  (parallel_worker.c) read and update them.  Private to those two
 *		  files.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/parallel_dsm.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_PARALLEL_DSM_H
#define CTAS_PARALLEL_DSM_H

#include "port/atomics.h"
#include "storage/block.h"

#include "parallel.h"

/* key of the DSM table of contents; the strings follow (KEY_STRING) */
#define CTAS_PARALLEL_KEY_SHARED	UINT64CONST(0xC7A5FED000000001)

/*
 * In the DSM: the work units and what the workers have done.  The
 * ParallelTable array and then the ParallelUnit array follow it.
 */
typedef struct CtasParallelShared
{
	int			ntables;
	uint32		nunits;
	int			leader_pgprocno;	/* to wake the leader */
	uint32		max_waiting;	/* streams of loaded tables not settled yet
								 * from which a worker waits; 0: never */
	pg_atomic_uint32 next_unit;	/* next unit to claim */
	pg_atomic_uint32 finished;	/* workers that ended without error */
	pg_atomic_uint32 loaded_streams;	/* streams of the tables loaded */
	pg_atomic_uint32 settled_streams;	/* of them, settled by the leader */
} CtasParallelShared;

/*
 * In the DSM, one per table: what the workers have sent into it, and how
 * far they are.  The table is loaded when units_done reaches nunits (so
 * every stream that will ever be attached to it is) and as many streams
 * have ended as were attached.
 */
typedef struct ParallelTable
{
	Oid			serverid;
	uint32		nunits;			/* units of this table */
	pg_atomic_uint32 units_done;	/* units run to their end */
	pg_atomic_uint32 attached;	/* streams attached to the table */
	pg_atomic_uint32 detached;	/* of them, ended without error */
	pg_atomic_uint32 failed;	/* a worker's error was about this table */
	pg_atomic_uint64 rows;		/* rows sent, all workers */
	pg_atomic_uint64 bytes;		/* payload bytes sent, all workers */
} ParallelTable;

/* In the DSM: one unit of work, a block range of one table */
typedef struct ParallelUnit
{
	int			table;			/* index in the ParallelTable array */
	BlockNumber start;
	BlockNumber end;			/* InvalidBlockNumber: to the end */
} ParallelUnit;

/* The strings that describe one table of a parallel load */
enum
{
	SRC_QUERY,					/* nodeToString of the rewritten SELECT */
	SRC_LOAD,					/* serialize_load */
	SRC_TARGET,					/* parallel_export */
	SRC_TEXT,					/* text of the statement */
	SRC_SOURCE,					/* the source table for messages, or ""
								 * for the one table of a CTAS */
	SOURCE_NSTRINGS
};

/*
 * One table of a parallel load as a backend sees it: the strings in the
 * DSM (a worker) or the leader's own copies.
 */
typedef struct ParallelSource
{
	const char *str[SOURCE_NSTRINGS];
} ParallelSource;

/* the DSM key of string k of table i */
#define CTAS_PARALLEL_KEY_STRING(i, k) \
	(CTAS_PARALLEL_KEY_SHARED + 1 + (uint64) (i) * SOURCE_NSTRINGS + (k))


/* the ParallelTable array of shared */
static inline ParallelTable *
shared_tables(CtasParallelShared *shared)
{
	return (ParallelTable *) ((char *) shared +
							  MAXALIGN(sizeof(CtasParallelShared)));
}

/* the ParallelUnit array of shared */
static inline ParallelUnit *
shared_units(CtasParallelShared *shared)
{
	return (ParallelUnit *) ((char *) shared_tables(shared) +
							 MAXALIGN(sizeof(ParallelTable) *
									  shared->ntables));
}

/*
 * Called by CtasParallelRunUnits in the leader running the units itself,
 * each time it is about to take another table: it settles the tables
 * loaded so far (a worker waits for the leader to do so instead).
 */
typedef void (*CtasParallelSettle) (CtasParallelShared *shared, void *arg);

/* in parallel_worker.c */
extern void CtasParallelRunUnits(CtasParallelShared *shared,
								 ParallelSource *sources,
								 CtasParallelSettle settle, void *arg);

#endif							/* CTAS_PARALLEL_DSM_H */
