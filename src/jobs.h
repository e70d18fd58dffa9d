/*-------------------------------------------------------------------------
 *
 * jobs.h
 *		  The shared-memory job registry (jobs.c) and its file (jobs_file.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/jobs.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_JOBS_H
#define CTAS_JOBS_H

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "port/atomics.h"
#include "storage/latch.h"

#include "catalog.h"

typedef enum CtasJobState
{
	CTAS_JOB_RUNNING,
	CTAS_JOB_PREPARED,
	CTAS_JOB_COMMITTED,
	CTAS_JOB_ABORTED,
	CTAS_JOB_FAILED,
	CTAS_JOB_IN_DOUBT
} CtasJobState;

#define CTAS_JOB_NSTATES		6
#define CTAS_DURATION_BUCKETS	10

/* One job, running or in the history */
typedef struct CtasJob
{
	bool		in_use;
	bool		notify_trusted; /* notify_url is exempt from
								 * ctas_fed.allowed_hosts; in what was
								 * padding, so the history file keeps its
								 * layout, and false (checked) in older
								 * files */
	int64		job_id;
	char		catalog[NAMEDATALEN];
	char		target[3 * NAMEDATALEN + 8];
	char		mode[16];		/* atomic, streaming, drop */
	CtasJobState state;
	int			pid;
	Oid			dbid;
	Oid			userid;
	Oid			serverid;
	Oid			umid;
	uint64		fxid;			/* local transaction */
	char		gid[200];		/* remote gid or staging table */
	char		notify_url[512];
	char		error[512];
	pg_atomic_uint64 rows;		/* written by the owner only */
	pg_atomic_uint64 bytes;
	TimestampTz started_at;
	TimestampTz finished_at;
	int			encoding;		/* of the strings: the job's database's */
	int64		group_id;		/* create_tables_as call, or 0 */
} CtasJob;

/* A backend's handle on its running job */
typedef struct CtasJobRef
{
	int			slot;			/* -1: not tracked */
	int64		id;
} CtasJobRef;

/* A state change queued for the webhook */
typedef struct CtasJobEvent
{
	int64		job_id;
	char		catalog[NAMEDATALEN];
	char		target[3 * NAMEDATALEN + 8];
	char		mode[16];
	CtasJobState state;
	char		state_name[16];	/* when set, shown instead of state (the
								 * states of sync jobs) */
	uint64		rows;
	uint64		bytes;
	char		error[512];
	char		notify_url[512];
	bool		notify_trusted; /* as in CtasJob */
	TimestampTz started_at;
	TimestampTz finished_at;
} CtasJobEvent;

/* Cumulative counters of one catalog, for the metrics */
typedef struct CtasCatalogStats
{
	char		catalog[NAMEDATALEN];
	uint64		jobs[CTAS_JOB_NSTATES];	/* ended jobs by final state */
	uint64		rows;
	uint64		bytes;
	uint64		duration_buckets[CTAS_DURATION_BUCKETS];
	uint64		duration_count;
	double		duration_sum;
} CtasCatalogStats;

/* One shard of a job into a sharded target (jobshards.c) */
typedef struct CtasJobShard
{
	int64		job_id;			/* 0: free */
	int			shard;			/* from 1 */
	char		catalog[NAMEDATALEN];
	pg_atomic_uint64 rows;		/* written by the owner only */
	pg_atomic_uint64 bytes;
} CtasJobShard;

/* Cumulative counters of one shard of a catalog, from committed jobs */
typedef struct CtasShardStats
{
	char		catalog[NAMEDATALEN];
	int			shard;
	uint64		rows;
	uint64		bytes;
} CtasShardStats;

#define CTAS_JOB_SHARD_ENTRIES	1024
#define CTAS_SHARD_STATS		256

typedef struct CtasJobsSnapshotData
{
	CtasJob    *jobs;
	int			njobs;
	CtasCatalogStats catalogs[64];
	int			ncatalogs;
	uint64		change_count;
	uint64		events_dropped;
} CtasJobsSnapshotData;

/*
 * How the registry asks for the resolver of a database: with now, a job was
 * left in doubt and should be resolved at once; without, the database uses
 * ctas_fed, so its resolver must be running.  Set by workers/launcher.c, a layer
 * above, so that the registry never calls up; NULL (nothing to wake) until
 * the worker code registers.
 */
typedef void (*CtasResolverWakeFunc) (Oid dboid, bool now);

/* in jobs.c */
extern CtasResolverWakeFunc CtasJobsResolverWake;
extern const double CtasDurationBuckets[CTAS_DURATION_BUCKETS];
extern void CtasJobsShmemRequest(void);
extern const char *CtasJobStateName(CtasJobState state);
extern CtasJobRef CtasJobStart(const CtasCatalog *catalog, const char *target,
							   const char *mode, const char *notify_url);
extern void CtasJobProgress(CtasJobRef ref, uint64 rows, uint64 bytes);
extern void CtasJobSetGid(CtasJobRef ref, const char *gid);
extern int64 CtasJobNewGroup(void);
extern void CtasJobSetGroup(CtasJobRef ref, int64 group_id);
extern void CtasJobSetState(CtasJobRef ref, CtasJobState state,
							const char *error);
extern bool CtasJobsNextEvent(CtasJobEvent *ev);
extern void CtasJobsQueueEvent(const CtasJobEvent *ev);
extern CtasJobsSnapshotData *CtasJobsSnapshot(void);
extern bool CtasJobsResolveHistory(int64 job_id, CtasJobState state,
								   const char *note);
extern bool CtasJobsGidIsLive(const char *gid);
extern void CtasJobsResolveGid(const char *gid, CtasJobState state);
extern void CtasJobsCounters(uint64 *change_count, uint64 *ended);
extern void CtasJobsSetLatch(Latch *latch, bool notifier);

/* in jobs_file.c */
extern void CtasJobsShmemStartup(void);
extern uint64 CtasJobsSave(void);

#endif							/* CTAS_JOBS_H */
