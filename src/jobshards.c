/*-------------------------------------------------------------------------
 *
 * jobshards.c
 *		  Rows per shard of the jobs into a sharded target (a cluster of
 *		  shards): the ctas_fed.job_shards view and the per-shard metrics.
 *
 * A job that writes to several shards registers one entry per shard
 * (CtasJobShardStart) and publishes that shard's rows and bytes
 * (CtasJobShardProgress) while it runs; only the owner writes them, so, as
 * in jobs.c, no lock is taken for progress.  The entries live in a ring in
 * shared memory of CTAS_JOB_SHARD_ENTRIES entries, shared by every job: the
 * oldest entries are overwritten, so the view shows the shards of the
 * recent jobs (running ones and the history), like ctas_fed.jobs.  The ring
 * is kept in memory only: a server restart empties it.
 *
 * When a job commits, jobs.c (count_finished) calls CtasJobShardsCommitted,
 * which adds its entries to the cumulative counters of (catalog, shard),
 * the metrics ctas_fed_shard_rows_total and ctas_fed_shard_bytes_total (as
 * ctas_fed_rows_total counts what reached the catalog for good).
 *
 * Lock order: the jobs lock (jobs.c) before this module's lock; nothing
 * here takes the jobs lock.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/jobshards.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "jobs.h"

typedef struct JobShardsShared
{
	LWLock	   *lock;
	int			next;			/* the ring's next entry */
	int			nstats;
	CtasShardStats stats[CTAS_SHARD_STATS];
	CtasJobShard entries[CTAS_JOB_SHARD_ENTRIES];
} JobShardsShared;

static JobShardsShared *shards = NULL;

/*
 * CtasJobShardsShmemRequest
 *		Called from the shmem_request_hook (by CtasJobsShmemRequest).
 */
void
CtasJobShardsShmemRequest(void)
{
	RequestAddinShmemSpace(sizeof(JobShardsShared));
	RequestNamedLWLockTranche("ctas_fed shards", 1);
}

/*
 * CtasJobShardsShmemStartup
 *		Called from the shmem_startup_hook (by CtasJobsShmemStartup), with
 *		AddinShmemInitLock held.
 */
void
CtasJobShardsShmemStartup(void)
{
	bool		found;

	shards = ShmemInitStruct("ctas_fed job shards", sizeof(JobShardsShared),
							 &found);
	if (!found)
	{
		int			i;

		memset(shards, 0, sizeof(JobShardsShared));
		shards->lock = &(GetNamedLWLockTranche("ctas_fed shards"))->lock;
		for (i = 0; i < CTAS_JOB_SHARD_ENTRIES; i++)
		{
			pg_atomic_init_u64(&shards->entries[i].rows, 0);
			pg_atomic_init_u64(&shards->entries[i].bytes, 0);
		}
	}
}

/*
 * CtasJobShardStart
 *		Register shard (from 1) of job ref, of catalog, with no rows yet;
 *		returns the handle to publish its progress with, or -1 when the job
 *		is not tracked.  Never an ERROR.
 */
int
CtasJobShardStart(CtasJobRef ref, const char *catalog, int shard)
{
	CtasJobShard *e;
	int			i;

	if (shards == NULL || ref.slot < 0)
		return -1;
	LWLockAcquire(shards->lock, LW_EXCLUSIVE);
	i = shards->next;
	shards->next = (i + 1) % CTAS_JOB_SHARD_ENTRIES;
	e = &shards->entries[i];
	e->job_id = ref.id;
	e->shard = shard;
	strlcpy(e->catalog, catalog, sizeof(e->catalog));
	pg_atomic_write_u64(&e->rows, 0);
	pg_atomic_write_u64(&e->bytes, 0);
	LWLockRelease(shards->lock);
	return i;
}

/*
 * CtasJobShardProgress
 *		Publish the rows and bytes of the shard entry handle of job ref.
 *		No lock: only the owner writes them; an entry the ring has reused
 *		since is left alone.
 */
void
CtasJobShardProgress(CtasJobRef ref, int handle, uint64 rows, uint64 bytes)
{
	CtasJobShard *e;

	if (shards == NULL || handle < 0 || handle >= CTAS_JOB_SHARD_ENTRIES)
		return;
	e = &shards->entries[handle];
	if (e->job_id != ref.id)
		return;
	pg_atomic_write_u64(&e->rows, rows);
	pg_atomic_write_u64(&e->bytes, bytes);
}

/*
 * CtasJobShardsCommitted
 *		Add the shard entries of job job_id (of catalog) that committed to
 *		the cumulative counters of their catalog and shard.  Called by
 *		jobs.c with the jobs lock held; never an ERROR.
 */
void
CtasJobShardsCommitted(int64 job_id, const char *catalog)
{
	int			i;

	if (shards == NULL)
		return;
	LWLockAcquire(shards->lock, LW_EXCLUSIVE);
	for (i = 0; i < CTAS_JOB_SHARD_ENTRIES; i++)
	{
		CtasJobShard *e = &shards->entries[i];
		CtasShardStats *st = NULL;
		int			s;

		if (e->job_id != job_id || job_id == 0)
			continue;
		for (s = 0; s < shards->nstats; s++)
		{
			if (shards->stats[s].shard == e->shard &&
				strcmp(shards->stats[s].catalog, catalog) == 0)
			{
				st = &shards->stats[s];
				break;
			}
		}
		if (st == NULL && shards->nstats < CTAS_SHARD_STATS)
		{
			st = &shards->stats[shards->nstats++];
			strlcpy(st->catalog, catalog, sizeof(st->catalog));
			st->shard = e->shard;
		}
		if (st == NULL)
			continue;			/* full: the metrics lose this pair */
		st->rows += pg_atomic_read_u64(&e->rows);
		st->bytes += pg_atomic_read_u64(&e->bytes);
	}
	LWLockRelease(shards->lock);
}

/*
 * CtasJobShardsSnapshot
 *		A copy of the entries in use, oldest first (*nentries of them), and
 *		of the cumulative counters (*nstats), palloc'd.
 */
CtasJobShard *
CtasJobShardsSnapshot(int *nentries, CtasShardStats **stats, int *nstats)
{
	CtasJobShard *out = palloc(sizeof(CtasJobShard) * CTAS_JOB_SHARD_ENTRIES);
	int			n = 0;
	int			k;

	*nentries = 0;
	*stats = palloc(sizeof(CtasShardStats) * CTAS_SHARD_STATS);
	*nstats = 0;
	if (shards == NULL)
		return out;
	LWLockAcquire(shards->lock, LW_SHARED);
	for (k = 0; k < CTAS_JOB_SHARD_ENTRIES; k++)
	{
		CtasJobShard *e = &shards->entries[(shards->next + k) %
										   CTAS_JOB_SHARD_ENTRIES];

		if (e->job_id == 0)
			continue;
		memcpy(&out[n++], e, sizeof(CtasJobShard));
	}
	memcpy(*stats, shards->stats, sizeof(CtasShardStats) * shards->nstats);
	*nstats = shards->nstats;
	LWLockRelease(shards->lock);
	*nentries = n;
	return out;
}
