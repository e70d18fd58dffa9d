/*-------------------------------------------------------------------------
 *
 * parallel.h
 *		  Parallel loads: WITH (parallel = N) on a federated CTAS, and
 *		  {"parallel": N} of create_tables_as (parallel.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/parallel.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_PARALLEL_H
#define CTAS_PARALLEL_H

#include "commands/explain.h"
#include "nodes/params.h"
#include "nodes/parsenodes.h"
#include "storage/dsm.h"
#include "storage/shm_toc.h"

#include "target.h"

/* the most workers one load may ask for */
#define CTAS_MAX_PARALLEL	64

/* tables loaded by one set of workers (create_tables_as) */
typedef struct CtasParallelSet CtasParallelSet;

/* called in the leader for each table of a set once it is loaded */
typedef void (*CtasParallelLoaded) (CtasLoad *load, void *arg);

/* in parallel.c */
extern const char *CtasParallelIneligible(CtasLoad *load, Query *query,
										  Query **rewritten);
extern CtasParallelSet *CtasParallelSetCreate(int nworkers,
											  CtasParallelLoaded loaded,
											  void *arg);
extern void CtasParallelSetAdd(CtasParallelSet *set, CtasLoad *load,
							   Query *rewritten, const char *sourcetext,
							   const char *source);
extern void CtasParallelSetRun(CtasParallelSet *set);
extern bool CtasParallelSetFailed(CtasParallelSet *set, CtasLoad *load);
extern bool CtasParallelLoad(CtasLoad *load, Query *query,
							 const char *sourcetext, ParamListInfo params);
extern void CtasParallelExplain(CtasLoad *load, Query *query,
								ParamListInfo params, ExplainState *es);
extern PGDLLEXPORT void CtasParallelMain(dsm_segment *seg, shm_toc *toc);

#endif							/* CTAS_PARALLEL_H */
