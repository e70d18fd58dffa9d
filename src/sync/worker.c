/*-------------------------------------------------------------------------
 *
 * worker.c
 *		  The sync worker of a continuous sync: one dynamic background
 *		  worker per decoding stream of ctas_fed.syncs, started by the
 *		  resolver of its database (CtasSyncTick), which also drops the
 *		  replication slot of a stream once none of its jobs runs.
 *
 * A stream is one publication and one replication slot, and the jobs that
 * read them: every sync of the database into every catalog (the default
 * stream), or those that named one stream (the option stream), so that the
 * WAL is decoded once for all of them (sync/statement.c says how a sync
 * joins).  Each job keeps its own remote transactions, applied lsn and
 * state; the worker runs them together:
 *
 *	copying		a new stream: the slot is created and every job's table is
 *				copied under its snapshot, each in its own remote
 *				transaction that stores the consistent point as that job's
 *				applied lsn; a copy interrupted by anything copies every
 *				job of the stream again with a new slot (sync/join.c).
 *	joining		a job "copying" in a stream that streams (a sync that
 *				joined it, or a resync of one job): held out of the stream,
 *				the slot held, while a copy worker of its own copies it
 *				under a temporary slot of its own and the stream goes on;
 *				then taken in (sync/join.c, sync/joincopy.c).
 *	streaming	rounds of one peek with the stream's publication; each
 *				change goes to the jobs of its table (sync/apply.c), each
 *				job applies in a remote transaction of its own, all
 *				committed at the end of the peek; the slot is advanced only
 *				after that.  A job skips the source transactions below its
 *				own applied lsn, so a crash between two of those commits
 *				still applies each transaction once per table.
 *
 * Merging.  The worker of the oldest default stream of the database takes
 * the other default streams (of syncs made before version 0.3, one per
 * CTAS) into its own between two rounds, without a copy again
 * (sync/merge.c).
 *
 * A job that is stopped leaves the stream (its table leaves the
 * publication in the stopping transaction, sync/statement.c) and the worker
 * goes on with the others; one that fails for good while the stream
 * streams (a schema change it cannot follow, its source dropped, a right
 * its owner lost: SYNC_FAIL) leaves it too, in the same process
 * (CtasSyncCatchJobError, sync/join.c): the local transaction is aborted,
 * the round read again by the others from their own applied lsns, the job
 * recorded as failed and its table taken out of the publication, and the
 * slot advanced by the others alone.  Only a failure during the copy of a
 * new stream still ends the worker, which the resolver starts again for
 * the others.  The slot and the publication go with the stream's last
 * job.
 *
 * A catalog that is down holds back only its own jobs.  Every call of a
 * job's target that reaches the remote runs under guard_routine, which
 * names the job in CtasSyncInTarget; an error raised there that does not
 * fail the job for good (remote unreachable, a remote error) is caught by
 * the streaming loop (CtasSyncCatchJobError, sync/join.c, with the rest of
 * what a job does to enter, leave and come back to the stream): the local
 * transaction is aborted, the remote transactions the jobs did not commit
 * roll back, the job (and, when the catalog is unreachable, the stream's
 * other jobs into it) is held out of the stream with its error recorded,
 * and the round is read again by the others, each from its own applied lsn.
 * While a job is held the slot is advanced no further than its applied lsn
 * (CtasSyncHeldPosition), the oldest position still needed; after
 * CTAS_SYNC_RESTART_SECS it comes back and catches up from there, the peeks
 * reading again from the slot's position what the others skip (a full peek
 * that gave them nothing new is read further the next time: XXX a long
 * outage of one catalog makes every peek read again the WAL it holds back).
 * When every job of the stream is held, the worker ends, and the resolver
 * starts it again after CTAS_SYNC_RESTART_SECS, as after any other error: a
 * new worker reads every job anew and checks the slot (sync/resync.c).
 *
 * In the streaming phase the slot's changes are peeked at through SQL
 * (pg_logical_slot_peek_binary_changes, proto_version 1, the stream's
 * publication), the pgoutput messages parsed with logicalrep_read_*, the
 * query's WHERE and select list evaluated on each new row, and applied by
 * key: a row in the WHERE is upserted, a row that is not (or no longer) is
 * deleted, a changed key deletes the old one, TRUNCATE deletes all.  Each
 * job's remote transaction stores the end lsn of its last source
 * transaction with the rows; after the COMMITs the slot is advanced.
 *
 * The worker connects as the bootstrap superuser, which the slot functions
 * need, but reads the source and evaluates the query's expressions as the
 * job's owner, in a security-restricted operation as REFRESH MATERIALIZED
 * VIEW does (an "immutable" function is still the owner's code), and
 * reaches the catalog with the owner's user mapping under the usual
 * password rules.
 *
 * Errors that cannot heal (a DDL that changed a column the query reads, the
 * source dropped, an unchanged TOAST value the worker cannot rebuild) mark
 * the job "failed"; its table leaves the publication, so that the stream
 * holds no WAL for it (docs/sync.md).
 *
 * While the source has nothing for the job, the slot is still advanced
 * over the WAL that empty peeks read whole, to a record boundary (at most
 * every SYNC_IDLE_ADVANCE_MS), so that an idle sync holds no WAL either; a
 * peek is skipped while no WAL at all was flushed since the last empty
 * one.
 *
 * What the workers report (rows, changes, the time they were last caught
 * up) lives in a small shared-memory table, read by ctas_fed.sync_status()
 * for the jobs view and by the metrics, which the notifier also pushes
 * without a database connection.  State changes go to the webhook through
 * the registry's event queue (CtasJobsQueueEvent).
 *
 * The apply side of the streaming phase is sync/apply.c.  A peek returns
 * whole source transactions, however large: its rows are read through a
 * cursor and applied a chunk at a time there, so that the worker's memory
 * stays bounded.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogutils.h"
#include "catalog/pg_class.h"
#include "catalog/pg_publication.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/logical.h"
#include "replication/logicalproto.h"
#include "replication/slot.h"
#include "replication/snapbuild.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "sync/sync_int.h"
#include "targets.h"
#include "workers/workers.h"

/* sleep when the slot had nothing new, ms */
#define SYNC_IDLE_MS		100
/* look for default streams to merge into this one this often, ms */
#define SYNC_MERGE_MS		5000
/* advance the slot over WAL without our changes at most this often, ms */
#define SYNC_IDLE_ADVANCE_MS	1000

PGDLLEXPORT void ctas_fed_sync_main(Datum main_arg);

/* the jobs that stream (do_stream), for the worker's error exit */
static List *stream_jobs = NIL;

/* the worker yielded its stream to one that waits for the pool */
static bool stream_yielded = false;

/* What the rounds of the streaming loop carry from one to the next */
typedef struct StreamLoop
{
	int64		stream_id;
	char	   *slot_name;
	char	   *peek_sql;
	TimestampTz last_idle_advance;
	XLogRecPtr	idle_flush;		/* flush position at the last peek that
								 * brought nothing new */
	XLogRecPtr	idle_safe;
	int			peek_limit;		/* rows of the next peek, 0: the setting */
	List	   *joining;		/* sync_ids copied, to take in after the
								 * round */
	bool		done;			/* no job left */
} StreamLoop;

/*
 * stream_round
 *		One round of the streaming loop: leave the jobs that stopped, open
 *		the targets not open (of jobs back from a retry, or closed by an
 *		error), one peek applied to every job, the slot advanced as far as
 *		every job (held ones too) has applied.  Returns whether the worker
 *		should sleep before the next round.  Can ERROR.
 */
static bool
stream_round(StreamLoop *sl, List **jobs)
{
	Oid			types[2] = {NAMEOID, INT4OID};
	Datum		args[2];
	int			peek_changes = sl->peek_limit > 0 ? sl->peek_limit :
		CtasSyncPeekChanges;
	XLogRecPtr	flush;
	XLogRecPtr	insert;
	XLogRecPtr	advance_to = InvalidXLogRecPtr;
	XLogRecPtr	confirmed;
	XLogRecPtr	hold;
	bool		idle;
	bool		sleep;
	Portal		portal;
	SyncPeekResult peek = {0};
	TimestampTz peek_at;
	uint64		nrows = 0;
	uint64		applied_before = 0;
	uint64		applied_after = 0;
	ListCell   *lc;

	/* a check that ctas_fed.verify_sync() asked for (sync/verify.c) */
	if (*jobs != NIL)
		CtasSyncVerifyIfAsked(*jobs);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());

	/*
	 * stopped (stop_sync, DROP TABLE) or gone: leave; joining: the slot
	 * held from now on; copied: taken in after the round
	 */
	sl->joining = CtasSyncLeaveStopped(sl->stream_id, sl->slot_name, jobs);
	if (*jobs == NIL)
	{
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		/*
		 * None left, or all held by errors of their catalogs: end (the
		 * resolver starts the worker again, which reads every job anew);
		 * jobs copied: take them in; jobs joining: wait for their copies.
		 */
		sl->done = sl->joining == NIL && !CtasSyncCopiesPending();
		return sl->joining == NIL;
	}
	foreach(lc, *jobs)
		CtasSyncCheckSource(lfirst(lc), false);
	foreach(lc, *jobs)
	{
		SyncJob    *job = lfirst(lc);

		if (!job->open)
		{
			CtasSyncOpenTarget(job);
			/* back after a retry: its error is over */
			CtasSyncClearError(job->id);
		}
		applied_before += job->applied;
	}

	insert = GetXLogInsertRecPtr();
	flush = GetFlushRecPtr(NULL);
	peek_at = GetCurrentTimestamp();
	args[0] = DirectFunctionCall1(namein, CStringGetDatum(sl->slot_name));
	if (flush == sl->idle_flush)
		idle = true;			/* no WAL since the last empty peek */
	else
	{
		/*
		 * Every call of a decoding function logs "starting logical
		 * decoding" at LOG: not ten times a second in the server log.
		 */
		(void) set_config_option("log_min_messages", "warning",
								 PGC_SUSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
		args[1] = Int32GetDatum(peek_changes);
		portal = SPI_cursor_open_with_args(NULL, sl->peek_sql, 2, types, args,
										   NULL, true, 0);
		CtasSyncInPeek = true;
		CtasSyncApplyPeek(*jobs, portal, &peek);
		SPI_cursor_close(portal);
		nrows = peek.nrows;
		idle = nrows == 0;
		if (peek.redo)
		{
			/* roll the remote transactions back, then read again */
			foreach(lc, *jobs)
			{
				SyncJob    *job = lfirst(lc);

				CtasSyncCurrentJob = job;
				if (job->open)
					job->apply->close(&job->target);
				job->open = false;
				CtasSyncOpenTarget(job);
			}
		}
		/* the remote transactions are committed, or rolled back */
		CtasSyncInPeek = false;
		if (!peek.redo && idle)
		{
			sl->idle_flush = flush;

			/*
			 * The slot may be advanced over WAL that this empty peek read
			 * whole, but only to a record boundary: a commit record cut by
			 * the flush position would be skipped for good.  An insert
			 * position taken before an earlier peek is such a boundary, and
			 * this peek read up to it when it was flushed before the peek
			 * began.
			 */
			if (sl->idle_safe != InvalidXLogRecPtr && sl->idle_safe <= flush &&
				TimestampDifferenceExceeds(sl->last_idle_advance, peek_at,
										   SYNC_IDLE_ADVANCE_MS))
			{
				advance_to = sl->idle_safe;
				sl->last_idle_advance = peek_at;
			}
			sl->idle_safe = insert;
		}
		else if (!peek.redo)
		{
			sl->idle_safe = InvalidXLogRecPtr;
			advance_to = peek.last_end;
		}
	}
	foreach(lc, *jobs)
		applied_after += ((SyncJob *) lfirst(lc))->applied;

	/*
	 * Only after the remote COMMITs: what they hold may be confirmed. The
	 * slot goes to the end lsn of the last source transaction read (its
	 * commit record's end): the decoder returns again every transaction
	 * whose commit record begins at or after the slot's confirmed position,
	 * and a transaction whose commit record begins exactly at that end is
	 * one not yet applied (docs/sync-exactly-once.md).  A held job keeps
	 * it at its own applied lsn.
	 */
	confirmed = CtasSyncSlotConfirmed(sl->slot_name);
	hold = CtasSyncHeldPosition(confirmed);
	if (hold != InvalidXLogRecPtr && advance_to > hold)
		advance_to = hold;
	if (advance_to != InvalidXLogRecPtr && advance_to > confirmed)
	{
		/* tests: a crash between the remote commits and the advance */
		if (!idle)
			CtasFaultPointWait("sync_before_advance");
		args[1] = LSNGetDatum(advance_to);
		CtasSyncSpiExec("SELECT pg_catalog.pg_replication_slot_advance($1, $2)",
				 2, (Oid[]) {NAMEOID, PG_LSNOID}, args, false);
		/* branch speed: restart_lsn kept near (sync/status.c) */
		CtasSyncKeepRestartNear(sl->slot_name);
	}

	/* a peek that read to the end: all before it is applied */
	if (idle || (nrows < (uint64) peek_changes && !peek.redo))
	{
		foreach(lc, *jobs)
		{
			CtasSyncStatusUse(((SyncJob *) lfirst(lc))->id);
			CtasSyncStatusReport(0, 0, peek_at);
		}
	}

	/*
	 * While a held job keeps the slot back, each peek reads again from its
	 * position what the other jobs applied already.  A full peek that gave
	 * them nothing new is read further the next time; one that read to the
	 * end is not read again before new WAL comes.
	 */
	sleep = idle;
	if (CtasSyncHeldJobs == NIL)
		sl->peek_limit = 0;
	else if (!idle && !peek.redo && applied_after == applied_before)
	{
		if (nrows >= (uint64) peek_changes)
			sl->peek_limit = peek_changes < INT_MAX / 4 ?
				peek_changes * 4 : INT_MAX;
		else
		{
			sl->idle_flush = flush;
			sleep = true;
		}
	}

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	/* branch speed: small peeks paced (sync/apply.c) */
	if (!sleep && !peek.redo)
		CtasSyncPacePeek(nrows, peek_at);
	return sleep;
}

/*
 * do_stream
 *		The streaming phase of the jobs of a stream (a List of SyncJob in
 *		CtasSyncJobCxt, updated as jobs leave, join and are held), until none is
 *		left: rounds of stream_round, the joins between them.  An error of
 *		one job's catalog holds that job, one that fails a job for good takes
 *		it out of the stream (CtasSyncCatchJobError), and the stream goes on;
 *		any other ends the worker.
 */
static void
do_stream(List **jobs)
{
	SyncJob    *first = linitial(*jobs);
	StreamLoop *sl = palloc0(sizeof(StreamLoop));
	char	   *pubs = pstrdup(quote_identifier(first->publication));
	TimestampTz slice_start = GetCurrentTimestamp();
	TimestampTz merge_at = 0;

	sl->stream_id = first->stream_id;
	sl->slot_name = first->slot_name;

	/*
	 * $2: ctas_fed.sync_peek_changes, read at each peek; a peek never splits
	 * a transaction
	 */
	sl->peek_sql = psprintf("SELECT lsn, data FROM "
							"pg_catalog.pg_logical_slot_peek_binary_changes($1, NULL, $2, "
							"'proto_version', '1', 'publication_names', %s, "
							"'messages', 'true')",
							quote_literal_cstr(pubs));

	/*
	 * The sources are checked by each round (stream_round), where a job
	 * that fails leaves the stream alone; the columns are not checked
	 * against the catalog: the WAL still to read may have been written
	 * before a DDL that the catalog shows, and the changes committed before
	 * it are applied before the job meets it (sync/ddl.c, Relation messages
	 * in sync/apply.c).  The targets are opened by the first round, each
	 * job's error its own.
	 */
	for (;;)
	{
		volatile bool sleep = false;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		CtasSyncInTarget = NULL;
		PG_TRY();
		{
			if (CtasSyncRejoinHeld(jobs))
				sl->idle_flush = InvalidXLogRecPtr;
			sleep = stream_round(sl, jobs);
			if (sl->joining != NIL)
			{
				CtasSyncJoinCopied(sl->joining, jobs);
				list_free_deep(sl->joining);
				sl->joining = NIL;
				sl->idle_flush = InvalidXLogRecPtr;
				sleep = false;
			}
			/* the copies of the jobs joining (sync/joincopy.c) */
			if (!sl->done && CtasSyncCopiesPending())
			{
				int			before = list_length(*jobs);

				CtasSyncStartCopies(jobs);
				if (list_length(*jobs) != before)
					sl->idle_flush = InvalidXLogRecPtr;
			}
		}
		PG_CATCH();
		{
			if (!CtasSyncCatchJobError(jobs))
				PG_RE_THROW();
			sl->idle_flush = InvalidXLogRecPtr;
			sleep = *jobs == NIL;
		}
		PG_END_TRY();
		if (sl->done)
			return;
		pgstat_report_stat(false);

		/*
		 * Other default streams of the database (of syncs made before 0.3)
		 * merge into the oldest, between two of its rounds (sync/merge.c);
		 * looked for about every SYNC_MERGE_MS.
		 */
		if (TimestampDifferenceExceeds(merge_at, GetCurrentTimestamp(),
									   SYNC_MERGE_MS))
		{
			merge_at = GetCurrentTimestamp();
			if (CtasSyncMergeStreams(sl->stream_id, first->publication,
									 sl->slot_name, jobs))
			{
				sl->idle_flush = InvalidXLogRecPtr;
				merge_at = 0;	/* another one may follow */
			}
		}

		/* a time slice served, and a stream waits for the pool: yield */
		if (TimestampDifferenceExceeds(slice_start, GetCurrentTimestamp(),
									   CTAS_SYNC_SLICE_MS))
		{
			slice_start = GetCurrentTimestamp();
			if (CtasSyncPoolWaited())
			{
				ereport(LOG,
						(errmsg("ctas_fed sync " INT64_FORMAT ": yielding to a stream that waits for a sync worker",
								sl->stream_id)));
				stream_yielded = true;
				return;
			}
		}

		if (sleep)
		{
			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 SYNC_IDLE_MS, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
}

/*
 * close_targets
 *		Close the open targets of jobs, which rolls back what they did not
 *		commit; never ERROR.
 */
static void
close_targets(List *jobs)
{
	ListCell   *lc;

	foreach(lc, jobs)
	{
		SyncJob    *job = lfirst(lc);

		if (job->open)
		{
			job->apply->close(&job->target);
			job->open = false;
		}
	}
}

/*
 * ctas_fed_sync_main
 *		Entry point of a sync worker: main_arg is the stream's id, bgw_extra
 *		its database.
 */
void
ctas_fed_sync_main(Datum main_arg)
{
	int64		stream_id = DatumGetInt64(main_arg);
	LOCKTAG		tag;

	CtasSyncWorkerConnect(psprintf("ctas_fed sync " INT64_FORMAT, stream_id));

	CtasSyncJobCxt = AllocSetContextCreate(TopMemoryContext, "ctas_fed sync job",
									ALLOCSET_DEFAULT_SIZES);

#ifdef M_MMAP_THRESHOLD

	/*
	 * A worker lives for months, and a target's client library may malloc
	 * and free a large buffer per large batch (an HTTP transfer's upload
	 * buffer, 1 MB, for a table whose rows in the batch pass 1 MB).  glibc
	 * raises its mmap threshold to the size of the first such buffer
	 * freed, after which they come from the heap between palloc's blocks
	 * and fragment it.  A fixed threshold keeps them mmap'd.
	 */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif

	/* one worker per stream: a session lock that goes with the process */
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (stream_id >> 32),
						 (uint32) stream_id, CTAS_LOCKTAG_SYNC);
	if (LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		proc_exit(0);
	/* a slot of the pool of ctas_fed.max_sync_workers (sync/tick.c) */
	if (CtasSyncPoolTake() < 0)
	{
		ereport(DEBUG1,
				(errmsg_internal("ctas_fed sync " INT64_FORMAT ": no slot of the pool is free",
								 stream_id)));
		proc_exit(0);
	}

	PG_TRY();
	{
		List	   *loaded;
		List	   *streaming = NIL;
		bool		copying = false;
		char	   *lost;
		ListCell   *lc;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		loaded = CtasSyncLoadStream(stream_id);
		stream_jobs = loaded;
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		foreach(lc, loaded)
		{
			SyncJob    *job = lfirst(lc);

			if (!CtasSyncStatusAttach(job->id))
				proc_exit(0);	/* its database is being dropped */
			CtasSyncStatusLabels(job->target.catalog->name, job->target.schema,
								 job->target.table, job->slot_name);
			if (job->state == CTAS_SYNC_COPYING)
				copying = true;
			else
				streaming = lappend(streaming, job);
		}

		/*
		 * Jobs to copy in a stream that streams: they join it, each
		 * copied by a copy worker under a temporary slot of its own (held
		 * by do_stream's first round, sync/joincopy.c).  Otherwise (a new stream, or one whose first copy was
		 * interrupted, or whose slot is gone) all are copied under the
		 * stream's new slot.
		 */
		if (copying && streaming != NIL &&
			SearchNamedReplicationSlot(((SyncJob *) linitial(loaded))->slot_name,
									   true) != NULL)
		{
			loaded = streaming;
			copying = false;
		}
		stream_jobs = loaded;

		/* a lost slot: copy again (sync/resync.c) */
		if (!copying && loaded != NIL &&
			(lost = CtasSyncResyncIfLost(loaded)) != NULL)
		{
			foreach(lc, loaded)
				CtasSyncJobEventNamed(lfirst(lc), "resyncing", lost);
			copying = true;
		}
		/* a job to copy copies them all, under one new slot */
		if (copying)
		{
			XLogRecPtr	consistent = CtasSyncDoCopy(loaded);

			foreach(lc, loaded)
			{
				SyncJob    *job = lfirst(lc);

				CtasSyncSetState(job->id, CTAS_SYNC_STREAMING, NULL, consistent);
				job->state = CTAS_SYNC_STREAMING;
				CtasSyncJobEvent(job, CTAS_SYNC_STREAMING, NULL);
			}
		}
		if (loaded != NIL)
		{
			CtasSyncSetStreamError(stream_id, NULL);
			stream_jobs = loaded;
			do_stream(&stream_jobs);
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		SyncJob    *failed = CtasSyncFailed ? CtasSyncCurrentJob : NULL;
		int64		failed_id = failed ? failed->id : CtasSyncLoadingId;
		bool		others = false;
		ListCell   *lc;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(CtasSyncJobCxt);
		edata = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
		close_targets(stream_jobs);
		RESUME_INTERRUPTS();

		/*
		 * An error that cannot heal fails its job alone; the resolver starts
		 * the worker again for the others.  Any other error is the
		 * stream's: its jobs are tried again.
		 */
		/* a partition attached, detached or dropped (sync/partition.c) */
		if (CtasSyncResyncWanted && !CtasSyncFailed)
		{
			/* the jobs of the source whose partition changed */
			Oid			source = CtasSyncCurrentJob ?
				CtasSyncCurrentJob->relid : InvalidOid;

			CtasSyncPartitionResync(stream_id, source, edata->message);
			foreach(lc, stream_jobs)
			{
				SyncJob    *job = lfirst(lc);

				if (!OidIsValid(source) || job->relid == source)
					CtasSyncJobEventNamed(job, "resyncing", edata->message);
			}
		}
		else if (CtasSyncFailed && failed_id != 0)
		{
			CtasSyncFailJob(failed_id, edata->message);
			/* a schema change it could not follow: recorded (sync/follow.c) */
			if (failed != NULL && failed->schema_failed_at != InvalidXLogRecPtr)
				CtasSyncRecordSchemaFailure(failed, edata->message);
			if (failed != NULL)
				CtasSyncJobEvent(failed, CTAS_SYNC_FAILED, edata->message);
			foreach(lc, stream_jobs)
				others |= ((SyncJob *) lfirst(lc))->id != failed_id;
			others |= CtasSyncHeldJobs != NIL;
		}
		else
			CtasSyncSetStreamError(stream_id, edata->message);
		proc_exit(CtasSyncFailed && !others ? 0 : 1);
	}
	PG_END_TRY();

	close_targets(stream_jobs);

	/*
	 * Jobs held by their catalogs, or a stream that yielded to another:
	 * the stream goes on in a later worker, which keeps the jobs' status
	 * entries (sync/status.c) only after an exit that is not 0.
	 */
	proc_exit(CtasSyncHeldJobs != NIL || stream_yielded ? 1 : 0);
}
