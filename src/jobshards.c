/*-------------------------------------------------------------------------
 *
 * jobshards.c
 *		  Rows per shard of the jobs into a sharded target (a cluster of
 *		  shards): the ctas_fed.job_shards view and the per-shard metrics.
 *
 * A job that writes to several shards registers one entry per shard
 * (CtasJobShardStart) and publishes that shard's rows and bytes
 * (CtasJobShardProgress) while it runs; only the owner writes them, so, as
 * in jobs.c, no lock is taken for progress.  The parallel workers of a
 * load add what they sent (CtasJobShardAdd, atomic adds) to the leader's
 * entries while they run; the leader writes the exact counts once they are
 * done.  The entries live in a ring in
 * shared memory of CTAS_JOB_SHARD_ENTRIES entries, shared by every job: the
 * oldest entries are overwritten, so the view shows the shards of the
 * recent jobs (running ones and the history), like ctas_fed.jobs.  The
 * ring and the counters are saved with the job registry (CtasJobsSave
 * calls CtasJobShardsSave first) to JOB_SHARDS_FILE, and loaded back when
 * the server starts; a file that is damaged or of another layout is
 * ignored (LOG) and the view starts empty.
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

#include <sys/stat.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "jobs.h"
#include "jobshards.h"

typedef struct JobShardsShared
{
	LWLock	   *lock;
	int			next;			/* the ring's next entry */
	int			nstats;
	CtasShardStats stats[CTAS_SHARD_STATS];
	CtasJobShard entries[CTAS_JOB_SHARD_ENTRIES];
} JobShardsShared;

static JobShardsShared *shards = NULL;

#define JOB_SHARDS_FILE		PGSTAT_STAT_PERMANENT_DIRECTORY "/ctas_fed_job_shards.stat"
#define JOB_SHARDS_FILE_TMP	JOB_SHARDS_FILE ".tmp"
#define JOB_SHARDS_MAGIC	0x43544a53	/* "CTJS" */

/* The file: this header, the entries (oldest first), the counters */
typedef struct JobShardsFileHeader
{
	uint32		magic;
	uint32		entry_size;		/* sizeof(CtasJobShard) */
	uint32		stats_size;		/* sizeof(CtasShardStats) */
	int32		nentries;
	int32		nstats;
	pg_crc32c	crc;			/* of the fields above and the body */
} JobShardsFileHeader;

static void load_file(void);

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
		if (!IsUnderPostmaster)
			load_file();
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
 * CtasJobShardAdd
 *		A parallel worker of job job_id: add rows and bytes to the shard
 *		entry handle (atomic adds: several workers share it).  An entry the
 *		ring has reused since is left alone.
 */
void
CtasJobShardAdd(int64 job_id, int handle, uint64 rows, uint64 bytes)
{
	CtasJobShard *e;

	if (shards == NULL || handle < 0 || handle >= CTAS_JOB_SHARD_ENTRIES)
		return;
	e = &shards->entries[handle];
	if (e->job_id != job_id || job_id == 0)
		return;
	pg_atomic_fetch_add_u64(&e->rows, (int64) rows);
	pg_atomic_fetch_add_u64(&e->bytes, (int64) bytes);
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

/* the CRC-32C of a file's header fields and body */
static pg_crc32c
file_crc(const JobShardsFileHeader *hdr, const CtasJobShard *e,
		 const CtasShardStats *st)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, hdr, offsetof(JobShardsFileHeader, crc));
	COMP_CRC32C(crc, e, sizeof(CtasJobShard) * hdr->nentries);
	COMP_CRC32C(crc, st, sizeof(CtasShardStats) * hdr->nstats);
	FIN_CRC32C(crc);
	return crc;
}

/*
 * CtasJobShardsSave
 *		Write the entries and the counters to JOB_SHARDS_FILE (write,
 *		fsync, durable rename).  Called by the launcher through
 *		CtasJobsSave.  LOG on failure, never ERROR.
 */
void
CtasJobShardsSave(void)
{
	JobShardsFileHeader hdr;
	CtasJobShard *e;
	CtasShardStats *st;
	int			n;
	int			nst;
	FILE	   *f;
	bool		ok;

	if (shards == NULL)
		return;
	e = CtasJobShardsSnapshot(&n, &st, &nst);
	memset(&hdr, 0, sizeof(hdr));
	hdr.magic = JOB_SHARDS_MAGIC;
	hdr.entry_size = sizeof(CtasJobShard);
	hdr.stats_size = sizeof(CtasShardStats);
	hdr.nentries = n;
	hdr.nstats = nst;
	hdr.crc = file_crc(&hdr, e, st);
	f = AllocateFile(JOB_SHARDS_FILE_TMP, PG_BINARY_W);
	ok = f != NULL &&
		fwrite(&hdr, sizeof(hdr), 1, f) == 1 &&
		fwrite(e, sizeof(CtasJobShard), n, f) == (size_t) n &&
		fwrite(st, sizeof(CtasShardStats), nst, f) == (size_t) nst &&
		fflush(f) == 0 && pg_fsync(fileno(f)) == 0;
	if (f != NULL && FreeFile(f) != 0)
		ok = false;
	if (ok && durable_rename(JOB_SHARDS_FILE_TMP, JOB_SHARDS_FILE, LOG) != 0)
		ok = false;
	if (!ok)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", JOB_SHARDS_FILE_TMP)));
		unlink(JOB_SHARDS_FILE_TMP);
	}
	pfree(e);
	pfree(st);
}

/*
 * load_file
 *		In the postmaster, at startup: the entries and counters of
 *		JOB_SHARDS_FILE.  A missing file leaves them empty; a damaged one
 *		(size, checksum, a value the server cannot have written) too, with
 *		a LOG message.  Never an ERROR.
 */
static void
load_file(void)
{
	JobShardsFileHeader hdr;
	CtasJobShard *e = NULL;
	CtasShardStats *st = NULL;
	struct stat sb;
	FILE	   *f;
	bool		ok;
	int			i;

	f = AllocateFile(JOB_SHARDS_FILE, PG_BINARY_R);
	if (f == NULL)
		return;
	ok = fstat(fileno(f), &sb) == 0 &&
		fread(&hdr, sizeof(hdr), 1, f) == 1 &&
		hdr.magic == JOB_SHARDS_MAGIC &&
		hdr.entry_size == sizeof(CtasJobShard) &&
		hdr.stats_size == sizeof(CtasShardStats) &&
		hdr.nentries >= 0 && hdr.nentries <= CTAS_JOB_SHARD_ENTRIES &&
		hdr.nstats >= 0 && hdr.nstats <= CTAS_SHARD_STATS &&
		(uint64) sb.st_size == sizeof(hdr) +
		(uint64) hdr.nentries * sizeof(CtasJobShard) +
		(uint64) hdr.nstats * sizeof(CtasShardStats);
	if (ok)
	{
		e = palloc(sizeof(CtasJobShard) * Max(hdr.nentries, 1));
		st = palloc(sizeof(CtasShardStats) * Max(hdr.nstats, 1));
		ok = fread(e, sizeof(CtasJobShard), hdr.nentries, f) == (size_t) hdr.nentries &&
			fread(st, sizeof(CtasShardStats), hdr.nstats, f) == (size_t) hdr.nstats &&
			EQ_CRC32C(file_crc(&hdr, e, st), hdr.crc);
	}
	for (i = 0; ok && i < hdr.nentries; i++)
		ok = e[i].job_id > 0 && e[i].shard >= 1 &&
			memchr(e[i].catalog, '\0', NAMEDATALEN) != NULL;
	for (i = 0; ok && i < hdr.nstats; i++)
		ok = st[i].shard >= 1 &&
			memchr(st[i].catalog, '\0', NAMEDATALEN) != NULL;
	FreeFile(f);
	if (!ok)
	{
		ereport(LOG,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("ctas_fed job shards file \"%s\" is damaged or of another version, starting with no rows per shard",
						JOB_SHARDS_FILE)));
		return;
	}
	for (i = 0; i < hdr.nentries; i++)
	{
		CtasJobShard *d = &shards->entries[i];

		d->job_id = e[i].job_id;
		d->shard = e[i].shard;
		strlcpy(d->catalog, e[i].catalog, sizeof(d->catalog));
		pg_atomic_write_u64(&d->rows, pg_atomic_read_u64(&e[i].rows));
		pg_atomic_write_u64(&d->bytes, pg_atomic_read_u64(&e[i].bytes));
	}
	shards->next = hdr.nentries % CTAS_JOB_SHARD_ENTRIES;
	memcpy(shards->stats, st, sizeof(CtasShardStats) * hdr.nstats);
	shards->nstats = hdr.nstats;
	pfree(e);
	pfree(st);
}
