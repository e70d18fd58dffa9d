/*-------------------------------------------------------------------------
 *
 * jobs_int.h
 *		  What the job registry (jobs.c) and its file (jobs_file.c) share:
 *		  the registry in shared memory.  Private to those two files.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/jobs_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_JOBS_INT_H
#define CTAS_JOBS_INT_H

#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lwlock.h"

#include "guc.h"
#include "jobs.h"

#define JOBS_FILE		PGSTAT_STAT_PERMANENT_DIRECTORY "/ctas_fed_jobs.stat"
#define JOBS_FILE_TMP	JOBS_FILE ".tmp"
#define JOBS_MAGIC		0x43544a46	/* "CTJF" */
#define JOBS_VERSION	2
#define MAX_CATALOG_STATS	64

/*
 * The file reserves job ids ahead, as a sequence logs values ahead: its
 * header holds the next id plus JOBS_ID_RESERVE, and a restart continues
 * from there, so that a job that started after the last save and was lost
 * with a crash never gives its id (which its webhook events may already
 * carry) to another job.  No id at or above what the file reserves is
 * handed out: a backend that would take one (the first job after a start,
 * or half the reserve used between two saves) asks the launcher for a save
 * and waits for it (jobs_reserve_ids).
 */
#define JOBS_ID_RESERVE	1000
/* how long a backend waits for the launcher to reserve ids, in ms */
#define JOBS_ID_WAIT_MS	10000
#define EVENT_QUEUE_SIZE	256

typedef struct JobsShared
{
	LWLock	   *lock;
	int64		next_job_id;
	int64		ids_reserved;	/* ids below it are reserved on disk */
	bool		save_failed;	/* the last CtasJobsSave failed */
	uint64		change_count;	/* bumped on every change to persist */
	int			history_head;	/* next history slot to write */
	int			history_count;
	int			ncatalogs;
	CtasCatalogStats catalogs[MAX_CATALOG_STATS];
	uint64		events_written;
	uint64		events_read;
	uint64		events_dropped;
	Latch	   *worker_latch;	/* the launcher: registry on disk */
	Latch	   *notifier_latch;	/* webhooks, Pushgateway */
	CtasJobEvent events[EVENT_QUEUE_SIZE];
	CtasJob		jobs[FLEXIBLE_ARRAY_MEMBER];	/* running, then history */
} JobsShared;

#define RUNNING(i)	(&CtasJobsShared->jobs[(i)])
#define HISTORY(i)	(&CtasJobsShared->jobs[CtasMaxJobs + (i)])

/* in jobs.c */
extern JobsShared *CtasJobsShared;
extern Size CtasJobsShmemSize(void);
extern void CtasJobsAddToHistory(const CtasJob *job);

#endif							/* CTAS_JOBS_INT_H */
