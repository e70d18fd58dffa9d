/*-------------------------------------------------------------------------
 *
 * jobs_file.c
 *		  The file of the job registry (jobs.c): written by the launcher
 *		  shortly after every change and at shutdown, loaded by the
 *		  postmaster when shared memory is created, so that the history
 *		  survives a clean restart and a crash restart.
 *
 * The registry is created here too (CtasJobsShmemStartup), in the
 * postmaster, and filled from the file.  Jobs that were running when the
 * server went down come back as in_doubt,
 * for the resolver of their database to decide from the local
 * transaction's commit status.  Locking as in jobs.c.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/jobs_file.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "jobs.h"
#include "jobs_int.h"
#include "jobshards.h"

static void load_jobs_file(void);

/*
 * CtasJobsShmemStartup
 *		Called from the shmem_startup_hook: attach, or create and load the
 *		saved registry (in the postmaster).
 */
void
CtasJobsShmemStartup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	CtasJobsShared = ShmemInitStruct("ctas_fed jobs", CtasJobsShmemSize(), &found);
	if (!found)
	{
		int			i;

		memset(CtasJobsShared, 0, CtasJobsShmemSize());
		CtasJobsShared->lock = &(GetNamedLWLockTranche("ctas_fed"))->lock;
		CtasJobsShared->next_job_id = 1;
		CtasJobsShared->ids_reserved = 1;
		for (i = 0; i < CtasMaxJobs + CtasHistorySize; i++)
		{
			pg_atomic_init_u64(&CtasJobsShared->jobs[i].rows, 0);
			pg_atomic_init_u64(&CtasJobsShared->jobs[i].bytes, 0);
		}
		if (!IsUnderPostmaster)
			load_jobs_file();
	}
	CtasJobShardsShmemStartup();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * The registry file, written like the statistics files of pg_stat: a
 * header, then the jobs (history oldest first, running ones last) and the
 * catalog counters.  It is written to a temporary file, fsynced and
 * renamed, and loaded all or nothing: the header carries its own CRC-32C,
 * so that a damaged body still gives a trustworthy job id counter, and the
 * CRC-32C of the body.
 */
typedef struct JobsFileHeader
{
	uint32		magic;			/* JOBS_MAGIC */
	uint32		version;		/* JOBS_VERSION */
	uint32		job_size;		/* sizeof(CtasJob) */
	uint32		stats_size;		/* sizeof(CtasCatalogStats) */
	int32		njobs;
	int32		ncatalogs;
	int64		next_job_id;	/* JOBS_ID_RESERVE above the next id */
	pg_crc32c	body_crc;		/* of everything after the header */
	pg_crc32c	header_crc;		/* of the fields above */
} JobsFileHeader;

/*
 * job_is_live
 *		Was job running when it was saved?  The file holds the history
 *		first, then the live jobs, so that a reload keeps the order.
 */
static bool
job_is_live(const CtasJob *job)
{
	return job->state == CTAS_JOB_RUNNING || job->state == CTAS_JOB_PREPARED;
}

/*
 * CtasJobsSave
 *		Write the registry to JOBS_FILE (write, fsync, durable rename).
 *		Called by the worker.  Returns the change_count saved; LOG on
 *		failure (never ERROR: the worker must go on).  Allocates in the
 *		current memory context and frees it.
 */
uint64
CtasJobsSave(void)
{
	CtasJobsSnapshotData *snap = CtasJobsSnapshot();
	JobsFileHeader hdr;
	FILE	   *f = NULL;
	uint64		saved = 0;
	int			pass;
	int			i;

	/* the rows per shard first: a saved registry implies them */
	CtasJobShardsSave();
	LWLockAcquire(CtasJobsShared->lock, LW_SHARED);
	hdr.next_job_id = CtasJobsShared->next_job_id + JOBS_ID_RESERVE;
	LWLockRelease(CtasJobsShared->lock);

	hdr.magic = JOBS_MAGIC;
	hdr.version = JOBS_VERSION;
	hdr.job_size = sizeof(CtasJob);
	hdr.stats_size = sizeof(CtasCatalogStats);
	hdr.njobs = snap->njobs;
	hdr.ncatalogs = snap->ncatalogs;
	INIT_CRC32C(hdr.body_crc);
	for (pass = 0; pass < 2; pass++)
	{
		for (i = 0; i < snap->njobs; i++)
		{
			if (job_is_live(&snap->jobs[i]) == (pass == 1))
				COMP_CRC32C(hdr.body_crc, &snap->jobs[i], sizeof(CtasJob));
		}
	}
	COMP_CRC32C(hdr.body_crc, snap->catalogs,
				sizeof(CtasCatalogStats) * snap->ncatalogs);
	FIN_CRC32C(hdr.body_crc);
	INIT_CRC32C(hdr.header_crc);
	COMP_CRC32C(hdr.header_crc, &hdr, offsetof(JobsFileHeader, header_crc));
	FIN_CRC32C(hdr.header_crc);

	f = AllocateFile(JOBS_FILE_TMP, PG_BINARY_W);
	if (f == NULL)
		goto error;
	if (fwrite(&hdr, sizeof(hdr), 1, f) != 1)
		goto error;
	for (pass = 0; pass < 2; pass++)
	{
		for (i = 0; i < snap->njobs; i++)
		{
			if (job_is_live(&snap->jobs[i]) == (pass == 1) &&
				fwrite(&snap->jobs[i], sizeof(CtasJob), 1, f) != 1)
				goto error;
		}
	}
	if (fwrite(snap->catalogs, sizeof(CtasCatalogStats), snap->ncatalogs,
			   f) != (size_t) snap->ncatalogs)
		goto error;
	if (fflush(f) != 0 || pg_fsync(fileno(f)) != 0)
		goto error;
	if (FreeFile(f) != 0)
	{
		f = NULL;
		goto error;
	}
	f = NULL;
	if (durable_rename(JOBS_FILE_TMP, JOBS_FILE, LOG) != 0)
		goto error;
	saved = snap->change_count;
	LWLockAcquire(CtasJobsShared->lock, LW_EXCLUSIVE);
	CtasJobsShared->ids_reserved = Max(CtasJobsShared->ids_reserved, hdr.next_job_id);
	CtasJobsShared->save_failed = false;
	LWLockRelease(CtasJobsShared->lock);
	goto done;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", JOBS_FILE_TMP)));
	if (f)
		FreeFile(f);
	unlink(JOBS_FILE_TMP);
	LWLockAcquire(CtasJobsShared->lock, LW_EXCLUSIVE);
	CtasJobsShared->save_failed = true;
	LWLockRelease(CtasJobsShared->lock);
done:
	pfree(snap->jobs);
	pfree(snap);
	return saved;
}

/*
 * valid_string
 *		Is the buffer buf of size bytes a NUL-terminated string, valid in
 *		encoding (NULL: any bytes but NUL)?
 */
static bool
valid_string(const char *buf, size_t size, int encoding)
{
	const char *end = memchr(buf, '\0', size);

	if (end == NULL)
		return false;
	return encoding < 0 ||
		pg_verify_mbstr(encoding, buf, end - buf, true);
}

/*
 * valid_job
 *		Does job, read from the file, hold only what the server could have
 *		written?  Its id must be below next_job_id.
 */
static bool
valid_job(const CtasJob *job, int64 next_job_id)
{
	if (job->job_id < 1 || job->job_id >= next_job_id)
		return false;
	if (job->group_id < 0 || job->group_id >= next_job_id)
		return false;
	if ((unsigned int) job->state >= CTAS_JOB_NSTATES)
		return false;
	if (!PG_VALID_BE_ENCODING(job->encoding))
		return false;
	return valid_string(job->catalog, sizeof(job->catalog), job->encoding) &&
		valid_string(job->target, sizeof(job->target), job->encoding) &&
		valid_string(job->mode, sizeof(job->mode), job->encoding) &&
		valid_string(job->gid, sizeof(job->gid), job->encoding) &&
		valid_string(job->notify_url, sizeof(job->notify_url),
					 job->encoding) &&
		valid_string(job->error, sizeof(job->error), job->encoding);
}

/*
 * valid_stats
 *		The same for the counters of one catalog.  Its name comes from a job
 *		of any database, so only its termination can be checked.
 */
static bool
valid_stats(const CtasCatalogStats *st)
{
	return st->catalog[0] != '\0' &&
		valid_string(st->catalog, sizeof(st->catalog), -1) &&
		!isnan(st->duration_sum) && !isinf(st->duration_sum);
}

/*
 * reset_registry
 *		Forget what a damaged file left in the history and the counters.
 */
static void
reset_registry(void)
{
	int			i;

	for (i = 0; i < CtasHistorySize; i++)
	{
		CtasJob    *h = HISTORY(i);

		memset(h, 0, sizeof(CtasJob));
		pg_atomic_init_u64(&h->rows, 0);
		pg_atomic_init_u64(&h->bytes, 0);
	}
	CtasJobsShared->history_head = 0;
	CtasJobsShared->history_count = 0;
	memset(CtasJobsShared->catalogs, 0, sizeof(CtasJobsShared->catalogs));
	CtasJobsShared->ncatalogs = 0;
}

/*
 * load_jobs_file
 *		Fill freshly created shared memory from JOBS_FILE, in the
 *		postmaster.  Jobs that were running or prepared when it was written
 *		come back as in_doubt (failed for streaming loads).  A missing file
 *		is no error.  A damaged one (truncated, wrong size, checksum, a
 *		field the server could not have written) is ignored as a whole, with
 *		a LOG message: the history starts empty.  The job id counter stays
 *		above every id the file gave out: that of its header when the header
 *		is intact, else the current time in microseconds since 2000 (above
 *		any id unless jobs started faster than one a microsecond).  Never
 *		raises an error.
 */
static void
load_jobs_file(void)
{
	FILE	   *f;
	JobsFileHeader hdr;
	struct stat st;
	pg_crc32c	crc;
	char		detail[256];
	bool		header_ok = false;
	int			i;

	f = AllocateFile(JOBS_FILE, PG_BINARY_R);
	if (f == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", JOBS_FILE)));
		return;
	}

	detail[0] = '\0';
	if (fstat(fileno(f), &st) != 0)
	{
		snprintf(detail, sizeof(detail), "Could not stat the file: %m.");
		goto bad;
	}
	if (fread(&hdr, sizeof(hdr), 1, f) != 1)
	{
		snprintf(detail, sizeof(detail),
				 "The file is shorter than its header.");
		goto bad;
	}
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, &hdr, offsetof(JobsFileHeader, header_crc));
	FIN_CRC32C(crc);
	if (!EQ_CRC32C(crc, hdr.header_crc) || hdr.magic != JOBS_MAGIC)
	{
		snprintf(detail, sizeof(detail),
				 "The header's magic number or checksum is wrong.");
		goto bad;
	}
	if (hdr.version != JOBS_VERSION)
	{
		snprintf(detail, sizeof(detail),
				 "The file has format version %u, this server expects %u.",
				 hdr.version, JOBS_VERSION);
		goto bad;
	}
	if (hdr.job_size != sizeof(CtasJob) ||
		hdr.stats_size != sizeof(CtasCatalogStats))
	{
		snprintf(detail, sizeof(detail),
				 "The file's records have %u and %u bytes, this server's %zu and %zu.",
				 hdr.job_size, hdr.stats_size,
				 sizeof(CtasJob), sizeof(CtasCatalogStats));
		goto bad;
	}
	if (hdr.next_job_id < 1)
	{
		snprintf(detail, sizeof(detail),
				 "The header's next job id is " INT64_FORMAT ".",
				 hdr.next_job_id);
		goto bad;
	}
	header_ok = true;
	if (hdr.njobs < 0 || hdr.ncatalogs < 0 ||
		hdr.ncatalogs > MAX_CATALOG_STATS ||
		(uint64) st.st_size != sizeof(hdr) +
		(uint64) hdr.njobs * sizeof(CtasJob) +
		(uint64) hdr.ncatalogs * sizeof(CtasCatalogStats))
	{
		snprintf(detail, sizeof(detail),
				 "The file is %lld bytes long, its header announces %d jobs and %d catalogs.",
				 (long long) st.st_size, hdr.njobs, hdr.ncatalogs);
		goto bad;
	}

	/* the checksum of the whole body first, then its fields */
	INIT_CRC32C(crc);
	for (;;)
	{
		char		buf[8192];
		size_t		n = fread(buf, 1, sizeof(buf), f);

		if (n == 0)
			break;
		COMP_CRC32C(crc, buf, n);
	}
	FIN_CRC32C(crc);
	if (ferror(f) || fseek(f, sizeof(hdr), SEEK_SET) != 0)
	{
		snprintf(detail, sizeof(detail), "Could not read the file: %m.");
		goto bad;
	}
	if (!EQ_CRC32C(crc, hdr.body_crc))
	{
		snprintf(detail, sizeof(detail),
				 "The checksum of the jobs does not match the header.");
		goto bad;
	}

	for (i = 0; i < hdr.njobs; i++)
	{
		CtasJob		job;

		if (fread(&job, sizeof(CtasJob), 1, f) != 1)
		{
			snprintf(detail, sizeof(detail), "Could not read job %d.", i);
			goto bad;
		}
		if (!valid_job(&job, hdr.next_job_id))
		{
			snprintf(detail, sizeof(detail),
					 "Job %d holds a value the server cannot have written.",
					 i);
			goto bad;
		}
		if (job_is_live(&job))
		{
			/* a streaming load keeps what it committed: nothing to decide */
			job.state = strcmp(job.mode, "streaming") == 0 ?
				CTAS_JOB_FAILED : CTAS_JOB_IN_DOUBT;
			strlcpy(job.error, "the server stopped while the job was running",
					sizeof(job.error));
			job.notify_url[0] = '\0';
		}
		CtasJobsAddToHistory(&job);
	}
	if (fread(CtasJobsShared->catalogs, sizeof(CtasCatalogStats), hdr.ncatalogs,
			  f) != (size_t) hdr.ncatalogs)
	{
		snprintf(detail, sizeof(detail), "Could not read the counters.");
		goto bad;
	}
	for (i = 0; i < hdr.ncatalogs; i++)
	{
		if (!valid_stats(&CtasJobsShared->catalogs[i]))
		{
			snprintf(detail, sizeof(detail),
					 "The counters of catalog %d hold a value the server cannot have written.",
					 i);
			goto bad;
		}
	}
	CtasJobsShared->ncatalogs = hdr.ncatalogs;
	CtasJobsShared->next_job_id = hdr.next_job_id;
	CtasJobsShared->ids_reserved = hdr.next_job_id;
	FreeFile(f);
	return;

bad:
	FreeFile(f);
	reset_registry();
	CtasJobsShared->next_job_id = header_ok ? hdr.next_job_id :
		Max(GetCurrentTimestamp(), 1);
	CtasJobsShared->ids_reserved = CtasJobsShared->next_job_id;
	ereport(LOG,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("ctas_fed job history file \"%s\" is damaged, starting with an empty history",
					JOBS_FILE),
			 errdetail_internal("%s Job ids continue from " INT64_FORMAT ".",
								detail, CtasJobsShared->next_job_id)));
}
