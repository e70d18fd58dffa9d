/*-------------------------------------------------------------------------
 *
 * jobshards.h
 *		  The per-shard counters of the jobs of cluster catalogs
 *		  (jobshards.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/jobshards.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_JOBSHARDS_H
#define CTAS_JOBSHARDS_H

#include "jobs.h"

/* in jobshards.c */
extern void CtasJobShardsShmemRequest(void);
extern void CtasJobShardsShmemStartup(void);
extern int	CtasJobShardStart(CtasJobRef ref, const char *catalog, int shard);
extern void CtasJobShardProgress(CtasJobRef ref, int handle, uint64 rows,
								 uint64 bytes);
extern void CtasJobShardAdd(int64 job_id, int handle, uint64 rows,
							uint64 bytes);
extern void CtasJobShardsCommitted(int64 job_id, const char *catalog);
extern void CtasJobShardsSave(void);
extern CtasJobShard *CtasJobShardsSnapshot(int *nentries,
										   CtasShardStats **stats,
										   int *nstats);

#endif							/* CTAS_JOBSHARDS_H */
