/*-------------------------------------------------------------------------
 *
 * apply.c
 *		  The apply side of a sync worker: the pgoutput messages of one peek
 *		  at the slot of its stream, read through an SPI cursor in chunks,
 *		  routed by relation to the jobs of the stream and turned into
 *		  upserts and deletes by key, one remote transaction per job
 *		  (sync/worker.c describes the jobs, streams and phases).  What one
 *		  job makes of one message (the query's expressions, the check of
 *		  a Relation message, the source row and key of a tuple message)
 *		  is in sync/message.c.
 *
 * Memory is bounded however large a source transaction is.  The peek
 * function (pg_logical_slot_peek_binary_changes) decodes the WAL as any
 * logical decoding does, holding at most logical_decoding_work_mem of
 * changes and spilling a larger transaction to disk, and returns its rows
 * in a tuplestore, which spills past work_mem; the worker fetches them
 * SYNC_FETCH_ROWS at a time and applies each chunk before the next one, so
 * that only one chunk of messages is in the worker's memory at once.  A
 * target keeps no more than a bounded batch either (each target's sync.c
 * says how: a queue of statements sent whenever it is long, or a
 * tuplesort of the changes of a source transaction that spills past
 * work_mem).
 *
 * State that spans chunks lives in a SyncApplyState per job: the source
 * transaction being read, whether the job applied it before, whether the
 * job's remote transaction is open, the end lsn of the last source
 * transaction read in full.  A job's remote transaction begins at the
 * first change routed to it and commits once, at the end of the peek,
 * with that end lsn; a job that got no change in the peek has no remote
 * transaction.  Begin and commit messages go to every job, each deciding
 * by its own applied lsn whether the source transaction is new to it.
 *
 * Pipelining.  With a target that can commit in the background
 * (CtasSyncApply.commit_send, the PostgreSQL target), a job's remote
 * transaction is also committed at the end of a source transaction once it
 * holds SYNC_PIPELINE_CHANGES changes, and at the end of
 * the peek: the batch, the progress row and COMMIT are sent, and the
 * worker goes on (reading the rest of the peek, advancing the slot,
 * peeking again and building the next batch) while the remote applies
 * them.  The job waits for that commit before it sends its next one, and
 * whenever the worker needs what the remote holds (a reading that stops
 * at job->stop_at: a verify, a second reading).  job->applied is what the
 * remote confirmed; while a commit is in flight the job skips the source
 * transactions up to its lsn (job->sent_lsn) when the next peek returns
 * them again: the slot goes only as far as what every job has confirmed
 * (before the first source transaction of a commit in flight).
 * So the exactly-once argument is unchanged: each remote transaction holds
 * whole source transactions and stores the end of its last one with them;
 * the slot never passes a source transaction whose remote commit is not
 * confirmed; after an error the worker starts again from the lsn stored
 * remotely, whatever became of a commit in flight.  A job with unchanged
 * TOAST values read from the source and not proven yet (sync/toast.c)
 * does not commit before the end of the peek.
 *
 * A DDL on the source shows in the logical message of the extension's
 * event trigger (sync/ddl.c), and one that changes a column the query
 * reads also in a Relation message of the source; either may come in the
 * middle of a source transaction, after some of its changes were given to
 * the target.  A whole-row sync may follow it on its remote table, at that
 * place (follow_schema_change, sync/follow.c).  Otherwise the job fails,
 * but the remote must keep exactly the source transactions that committed
 * before that one, and nothing of it.  When none of the transaction's
 * changes reached the target yet (the usual case: a DDL in a transaction
 * of its own shows at the next transaction's first change), the remote
 * transaction commits what came before and the job fails at once.
 * Otherwise the targets of the stream are closed, which rolls back their
 * remote transactions (a target without transactions writes nothing of a
 * source transaction before its end), job->stop_at is set to that transaction's commit lsn and the peek
 * is read again (the slot was not advanced, so it returns the same
 * messages): this time no transaction from stop_at on is applied, the
 * remote transaction commits the ones before, and the job fails when the
 * message comes again.  In a stream of many jobs, only the jobs
 * of the table with the DDL are held back; the failure of one ends the
 * worker after that job's commit, the remote transactions of the others
 * roll back, and the worker started again for them applies those source
 * transactions to them once more (sync/worker.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/apply.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/executor.h"
#include "executor/spi.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "replication/logicalproto.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "sync/sync_int.h"

/* rows of the peek fetched from its cursor at once */
#define SYNC_FETCH_ROWS		1000
/* a job's remote transaction commits once it holds this many changes */
#define SYNC_PIPELINE_CHANGES	5000
/* a peek of fewer rows is followed by the next one this much later, ms */
#define SYNC_PACE_ROWS		10000
#define SYNC_PACE_MS		100

/* the job the worker works for when an error comes */
SyncJob    *CtasSyncCurrentJob = NULL;

/* What the reading of one peek carries from chunk to chunk, for one job */
typedef struct SyncApplyState
{
	SyncJob    *job;
	SyncEval   *ev;
	Oid			relid;			/* job->relid */
	bool		began;			/* the remote transaction is open */
	bool		skipping;		/* the source transaction being read was
								 * applied before */
	bool		held;			/* job->stop_at reached: apply no more */
	XLogRecPtr	xact_lsn;		/* commit lsn of that transaction */
	uint64		xact_changes;	/* its changes given to the target */
	uint64		changes;		/* changes given to the target in all */
	uint64		sent_changes;	/* of them, in remote commits sent */
	XLogRecPtr	batch_start;	/* last_end when the remote transaction
								 * began (Pipelining) */
	XLogRecPtr	last_end;		/* end lsn of the last source transaction
								 * read in full (applied or skipped) */
	TransactionId xid;			/* of the source transaction being read */
	SyncToast  *toast;			/* unchanged TOAST values (sync/toast.c) */
} SyncApplyState;

/* The reading of one peek: every job of the stream */
typedef struct SyncPeekState
{
	int			njobs;
	SyncApplyState *jobs;
	Oid			save_userid;	/* the worker's own identity */
	int			save_sec;
	bool		redo;			/* read the peek again (see above) */
	MemoryContext cxt;			/* of the whole peek */
} SyncPeekState;

static void
apply_update(SyncApplyState *st, LogicalRepTupleData *tup,
			 LogicalRepTupleData *old, char **oldkeys)
{
	SyncJob    *job = st->job;
	SyncEval   *ev = st->ev;
	const bool *mask = NULL;
	bool		key_changed;

	CtasSyncTupleKeys(job, tup, old, ev->keys);
	key_changed = !CtasSyncSameKeys(job, oldkeys, ev->keys);
	CtasSyncToastCheck(st->toast, job, tup, oldkeys, ev->keys);
	if (key_changed)
		CtasSyncDeleteKey(job, ev, oldkeys);
	if (CtasSyncFillSlot(job, ev, tup, old,
						 CtasSyncToastUnchanged(st->toast)) > 0)
		mask = CtasSyncToastResolve(st->toast, job, ev, key_changed, st->xid);
	if (CtasSyncEvaluate(ev, ev->slot))
		job->apply->upsert(&job->target, ev->values, ev->nulls, mask);
	else
		CtasSyncDeleteKey(job, ev, ev->keys);
}

/*
 * CtasSyncApplyWait
 *		Wait for the remote commit of job still in flight (Pipelining), if
 *		any: job->applied moves to it once confirmed.  A target closed
 *		meanwhile forgets it (whether it committed is read from the remote
 *		when the target is open again).  Can ERROR; the commit is then no
 *		longer in flight, and job->applied stays what was confirmed.
 */
void
CtasSyncApplyWait(SyncJob *job)
{
	if (!job->commit_pending)
		return;
	if (!job->open)
	{
		job->commit_pending = false;
		return;
	}
	CtasSyncCurrentJob = job;
	PG_TRY();
	{
		job->apply->commit_wait(&job->target);
	}
	PG_CATCH();
	{
		job->commit_pending = false;
		PG_RE_THROW();
	}
	PG_END_TRY();
	job->commit_pending = false;
	job->applied = job->sent_lsn;
	CtasSyncStatusUse(job->id);
	CtasSyncStatusReport(job->pending_changes, job->pending_changes, 0);
}

/*
 * finish_remote
 *		Commit the remote transaction, if one is open, with the end lsn of
 *		the last source transaction read in full.  With wait false and a
 *		target that pipelines (commit_send), return once it is sent: the
 *		job's next commit, or CtasSyncApplyWait, waits for it.  Can ERROR.
 */
static void
finish_remote(SyncApplyState *st, bool wait)
{
	SyncJob    *job = st->job;
	uint64		changes = st->changes - st->sent_changes;

	CtasSyncCurrentJob = job;
	CtasSyncApplyWait(job);
	if (st->began && st->last_end != InvalidXLogRecPtr)
	{
		st->sent_changes = st->changes;
		if (job->apply->commit_send != NULL)
		{
			job->apply->commit_send(&job->target, st->last_end);
			job->sent_lsn = st->last_end;
			job->commit_pending = true;
			job->pending_safe = st->batch_start;
			job->pending_changes = changes;
			if (wait)
				CtasSyncApplyWait(job);
		}
		else
		{
			job->apply->commit(&job->target, st->last_end);
			job->applied = st->last_end;
			CtasSyncStatusUse(job->id);
			CtasSyncStatusReport(changes, changes, 0);
		}
	}
	st->began = false;
}

/*
 * pipeline_commit
 *		At the end of a source transaction: a job whose remote transaction
 *		holds SYNC_PIPELINE_CHANGES changes or more is committed in the
 *		background (Pipelining), unless unchanged TOAST values it read from
 *		the source are not proven yet.  Can ERROR.
 */
static void
pipeline_commit(SyncApplyState *st)
{
	if (st->job->apply->commit_send == NULL || !st->began || st->held ||
		st->changes - st->sent_changes < SYNC_PIPELINE_CHANGES ||
		CtasSyncToastPending(st->toast))
		return;
	finish_remote(st, false);
}

/*
 * relation_message
 *		A Relation message of the source table.  When it shows a DDL the
 *		sync cannot follow: ask for the peek to be read again if the target
 *		holds part of the current source transaction, else commit what came
 *		before it and fail the job (ERROR).
 */
static void
relation_message(SyncPeekState *peek, SyncApplyState *st,
				 LogicalRepRelation *rel)
{
	int			bad;

	if (CtasSyncRelationOk(st->job, rel, &bad))
		return;

	/*
	 * A transaction the job skips, from before a copy that took newer
	 * columns (sync/reshape.c): nothing of it is applied; the table's next
	 * Relation message, which pgoutput sends after the DDL, sets the places.
	 */
	if (st->skipping)
	{
		int			i;

		for (i = 0; i < st->job->ncols; i++)
			st->job->msgcol[i] = -1;
		return;
	}
	/* after a followed change: as in schema_change_message */
	if (st->job->reshaped)
		CtasSyncCheckRelationMessage(st->job, rel);
	if (st->xact_changes > 0)
	{
		st->job->stop_at = st->xact_lsn;
		peek->redo = true;
		return;
	}
	finish_remote(st, true);
	CtasSyncCheckRelationMessage(st->job, rel);
}

static bool job_change(SyncPeekState *peek, SyncApplyState *st, Oid relid);

/*
 * attached_row
 *		A row of a table attached as a partition of the job's source, as
 *		the text of each column the job reads (NULL: null), made under the
 *		worker's settings by the event trigger (sync/partition.c): upserted
 *		when the query's WHERE takes it, as the row of an INSERT.
 */
static void
attached_row(SyncApplyState *st, char **values)
{
	SyncJob    *job = st->job;
	SyncEval   *ev = st->ev;
	TupleTableSlot *slot = ev->slot;
	int			i;
	int			k;

	for (k = 0; k < job->target.nkeys; k++)
		ev->keys[k] = values[job->keycol[k]];
	CtasSyncToastCheck(st->toast, job, NULL, NULL, ev->keys);
	ExecClearTuple(slot);
	memset(slot->tts_isnull, true,
		   sizeof(bool) * slot->tts_tupleDescriptor->natts);
	for (i = 0; i < job->ncols; i++)
	{
		int			a = job->attnums[i] - 1;

		if (values[i] == NULL)
			continue;
		slot->tts_values[a] = InputFunctionCall(&job->infuncs[i], values[i],
												job->ioparams[i], -1);
		slot->tts_isnull[a] = false;
	}
	ExecStoreVirtualTuple(slot);
	if (CtasSyncEvaluate(ev, slot))
		job->apply->upsert(&job->target, ev->values, ev->nulls, NULL);
}

/*
 * follow_schema_change
 *		A schema change that the whole-row sync of st follows on its remote
 *		table (sync/follow.c): in its remote transaction, begun here if need
 *		be, then with the query's expressions built anew for its columns.
 *		A job skipping the transaction (applied before) takes the columns
 *		only.  A target without transactions writes a source transaction
 *		at its end: a change after some of the transaction's rows would
 *		come before them, so that is refused (also in the second reading,
 *		which holds the job back from that transaction).  Returns NULL, or
 *		why it cannot be followed.
 */
static char *
follow_schema_change(SyncPeekState *peek, SyncApplyState *st)
{
	SyncJob    *job = st->job;
	MemoryContext oldcxt;
	char	   *reason;

	if (!st->skipping && !job->apply->transactional &&
		(st->xact_changes > 0 || st->held))
	{
		job->follow = NULL;
		return psprintf("a schema change of the source of sync " INT64_FORMAT " came after changes of the same source transaction, which a catalog without transactions cannot keep apart",
						job->id);
	}
	/* a transaction the job is held back from: it fails there */
	if (st->held)
	{
		job->follow = NULL;
		return psprintf("a schema change of the source of sync " INT64_FORMAT " in a source transaction that also makes one it cannot follow",
						job->id);
	}
	if (!st->skipping && !st->began)
	{
		job->apply->begin(&job->target);
		st->began = true;
	}
	reason = CtasSyncSchemaFollow(job, !st->skipping);
	if (reason != NULL)
		return reason;
	/*
	 * Taken without the remote (done when the transaction was applied,
	 * before the columns were stored): the target, which holds no batch
	 * yet, opens again for the new columns.
	 */
	if (st->skipping)
	{
		oldcxt = MemoryContextSwitchTo(GetMemoryChunkContext(job));
		job->apply->close(&job->target);
		job->apply->open(&job->target);
		MemoryContextSwitchTo(oldcxt);
	}
	/* the old ones may hold the message being read: freed with the peek */
	oldcxt = MemoryContextSwitchTo(peek->cxt);
	st->ev = CtasSyncBuildEval(job);
	if (st->toast != NULL)
		CtasSyncToastEnd(st->toast);
	st->toast = CtasSyncToastBegin(job);
	MemoryContextSwitchTo(oldcxt);
	return NULL;
}

/*
 * schema_change_message
 *		A logical message of the event trigger (sync/ddl.c), at its place
 *		in the source transaction: for each job of its table, a DDL it
 *		follows goes on; one it cannot fails the job as a Relation message
 *		of such a DDL does (relation_message): after the source
 *		transactions committed before this one, and nothing of this one.
 *		A job skipping the transaction (applied before) only takes the
 *		names of a rename again.
 */
static void
schema_change_message(SyncPeekState *peek, StringInfo msg)
{
	const char *prefix;
	const char *content;
	bool		transactional;
	int			len;
	int			j;

	transactional = pq_getmsgint(msg, 1) & 1;
	(void) pq_getmsgint64(msg);		/* lsn of the message */
	prefix = pq_getmsgstring(msg);
	len = pq_getmsgint(msg, 4);
	content = pq_getmsgbytes(msg, len);
	/* ours are transactional: another one has no place among the changes */
	if (strcmp(prefix, "ctas_fed") != 0 || !transactional)
		return;

	for (j = 0; j < peek->njobs && !peek->redo; j++)
	{
		SyncApplyState *st = &peek->jobs[j];
		bool		mine;
		char	   *reason;

		CtasSyncCurrentJob = st->job;
		reason = CtasSyncSchemaChange(st->job, content, len, &mine);
		if (mine && reason == NULL && st->job->follow != NULL)
			reason = follow_schema_change(peek, st);

		/*
		 * A transaction applied before: its DDL was followed then (a job
		 * fails at one it cannot follow), and a rename is taken again, in
		 * case the names stored after that remote commit were lost.
		 */
		if (!mine || st->skipping)
			continue;
		if (reason == NULL)
		{
			ListCell   *lc;

			/*
			 * The rows of a partition detached or dropped leave, those of
			 * one attached join (sync/partition.c).
			 */
			if ((CtasSyncPartitionDeletes != NIL ||
				 CtasSyncPartitionInserts != NIL) &&
				job_change(peek, st, st->relid))
			{
				foreach(lc, CtasSyncPartitionDeletes)
				{
					CtasSyncToastCheck(st->toast, st->job, NULL, lfirst(lc),
									   NULL);
					CtasSyncDeleteKey(st->job, st->ev, lfirst(lc));
				}
				foreach(lc, CtasSyncPartitionInserts)
					attached_row(st, lfirst(lc));
			}
			ereport(LOG,
					(errmsg("ctas_fed sync " INT64_FORMAT ": followed a schema change of its source in the transaction committed at %X/%X",
							st->job->id, LSN_FORMAT_ARGS(st->xact_lsn))));
			continue;
		}
		/*
		 * After a change followed in this reading (in the source
		 * transaction, or one before it): nothing of the reading is
		 * committed, the remote keeps what it had.
		 */
		if (st->job->reshaped)
		{
			st->job->schema_failed_at = st->xact_lsn;
			SYNC_FAIL(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					  errmsg_internal("%s", reason),
					  errdetail("The remote table keeps the source transactions it had applied before the worker read the stream this time."),
					  errhint("Stop the sync with ctas_fed.stop_sync() and create it again (docs/sync-schema-changes.md)."));
		}
		if (st->xact_changes > 0)
		{
			st->job->stop_at = st->xact_lsn;
			peek->redo = true;
			CtasSyncResyncWanted = false;
			return;
		}
		finish_remote(st, true);
		if (CtasSyncResyncWanted)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg_internal("%s", reason),
					 errdetail("The stream is copied again under a new snapshot (docs/sync.md, \"Partitioned sources\").")));
		st->job->schema_failed_at = st->xact_lsn;
		SYNC_FAIL(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				  errmsg_internal("%s", reason),
				  errdetail("The remote table keeps the changes of the source transactions that committed before the one of the schema change."),
				  errhint("Stop the sync with ctas_fed.stop_sync() and create it again (docs/sync-schema-changes.md)."));
	}
	/* a resync asked for by a job that skipped the transaction: none */
	CtasSyncResyncWanted = false;
}

/*
 * job_change
 *		Whether a change of table relid goes to the job of st: its table,
 *		and a source transaction it has not applied, nor is held back from.
 *		If so, the job becomes the current one, acting as its owner, and
 *		its remote transaction is begun if it is not yet.
 */
static bool
job_change(SyncPeekState *peek, SyncApplyState *st, Oid relid)
{
	SyncJob    *job = st->job;

	if (st->relid != relid || st->skipping || st->held)
		return false;
	CtasSyncCurrentJob = job;
	/* as for REFRESH MATERIALIZED VIEW: the owner's code, restricted */
	SetUserIdAndSecContext(job->owner,
						   peek->save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (!st->began)
	{
		job->apply->begin(&job->target);
		st->began = true;
		st->batch_start = st->last_end;
	}
	st->changes++;
	st->xact_changes++;
	return true;
}

/*
 * apply_message
 *		Apply the pgoutput message of row i of SPI_tuptable, in per-tuple
 *		memory, to the jobs it concerns: begin and commit to all, a
 *		relation and its changes to the jobs of that table.  Can ERROR.
 */
static void
apply_message(SyncPeekState *peek, uint64 i)
{
	StringInfoData msg;
	char		action = CtasSyncPeekedMessage(i, &msg);
	int			j;

	switch (action)
	{
		case LOGICAL_REP_MSG_BEGIN:
			{
				LogicalRepBeginData begin;

				logicalrep_read_begin(&msg, &begin);
				for (j = 0; j < peek->njobs; j++)
				{
					SyncApplyState *st = &peek->jobs[j];
					SyncJob    *job = st->job;

					st->xact_lsn = begin.final_lsn;
					st->xid = begin.xid;
					st->xact_changes = 0;
					if (job->stop_at != InvalidXLogRecPtr &&
						begin.final_lsn >= job->stop_at)
						st->held = true;
					/*
					 * Applied before iff its commit record begins before
					 * the end of the last applied one's: one committed
					 * right after it begins exactly there, and is new
					 * (docs/sync-exactly-once.md).
					 */
					st->skipping = begin.final_lsn <
						(job->commit_pending ? job->sent_lsn : job->applied);
					job->target.change_lsn = begin.final_lsn;
				}
				break;
			}
		case LOGICAL_REP_MSG_COMMIT:
			{
				LogicalRepCommitData commit;

				logicalrep_read_commit(&msg, &commit);
				for (j = 0; j < peek->njobs; j++)
				{
					SyncApplyState *st = &peek->jobs[j];

					if (st->held)
						continue;
					CtasSyncToastEndXact(st->toast, st->xid);
					st->last_end = commit.end_lsn;
					st->skipping = false;
					pipeline_commit(st);
				}
				break;
			}
		case LOGICAL_REP_MSG_RELATION:
			{
				LogicalRepRelation *rel = logicalrep_read_rel(&msg);

				for (j = 0; j < peek->njobs && !peek->redo; j++)
				{
					if (rel->remoteid != peek->jobs[j].relid)
						continue;
					CtasSyncCurrentJob = peek->jobs[j].job;
					relation_message(peek, &peek->jobs[j], rel);
				}
				break;
			}
		case LOGICAL_REP_MSG_INSERT:
			{
				LogicalRepTupleData newtup;
				Oid			relid = logicalrep_read_insert(&msg, &newtup);

				for (j = 0; j < peek->njobs; j++)
				{
					SyncApplyState *st = &peek->jobs[j];
					SyncJob    *job = st->job;
					SyncEval   *ev = st->ev;

					if (!job_change(peek, st, relid))
						continue;
					CtasSyncTupleKeys(job, &newtup, NULL, ev->keys);
					CtasSyncToastCheck(st->toast, job, NULL, NULL, ev->keys);
					CtasSyncFillSlot(job, ev, &newtup, NULL, NULL);
					if (CtasSyncEvaluate(ev, ev->slot))
						job->apply->upsert(&job->target, ev->values, ev->nulls, NULL);
				}
				break;
			}
		case LOGICAL_REP_MSG_UPDATE:
			{
				LogicalRepTupleData oldtup;
				LogicalRepTupleData newtup;
				bool		has_old;
				Oid			relid = logicalrep_read_update(&msg, &has_old,
														   &oldtup, &newtup);

				for (j = 0; j < peek->njobs; j++)
				{
					SyncApplyState *st = &peek->jobs[j];
					SyncJob    *job = st->job;
					SyncEval   *ev = st->ev;
					int			k;

					if (!job_change(peek, st, relid))
						continue;
					CtasSyncTupleKeys(job, has_old ? &oldtup : &newtup,
							   has_old ? &oldtup : NULL, ev->keys);
					for (k = 0; k < job->target.nkeys; k++)
						ev->oldkeys[k] = ev->keys[k];
					apply_update(st, &newtup, has_old ? &oldtup : NULL,
								 ev->oldkeys);
				}
				break;
			}
		case LOGICAL_REP_MSG_DELETE:
			{
				LogicalRepTupleData oldtup;
				Oid			relid = logicalrep_read_delete(&msg, &oldtup);

				for (j = 0; j < peek->njobs; j++)
				{
					SyncApplyState *st = &peek->jobs[j];
					SyncJob    *job = st->job;

					if (!job_change(peek, st, relid))
						continue;
					CtasSyncTupleKeys(job, &oldtup, NULL, st->ev->keys);
					CtasSyncToastCheck(st->toast, job, NULL, st->ev->keys,
									   NULL);
					CtasSyncDeleteKey(job, st->ev, st->ev->keys);
				}
				break;
			}
		case LOGICAL_REP_MSG_TRUNCATE:
			{
				bool		cascade;
				bool		restart_seqs;
				List	   *relids;

				relids = logicalrep_read_truncate(&msg, &cascade,
												  &restart_seqs);
				for (j = 0; j < peek->njobs; j++)
				{
					SyncApplyState *st = &peek->jobs[j];

					if (list_member_oid(relids, st->relid) &&
						job_change(peek, st, st->relid))
					{
						CtasSyncToastCheck(st->toast, st->job, NULL, NULL,
										   NULL);
						st->job->apply->truncate(&st->job->target);
					}
				}
				break;
			}
		case LOGICAL_REP_MSG_MESSAGE:
			schema_change_message(peek, &msg);
			break;
		default:
			/* types, origins: nothing to apply */
			break;
	}
	SetUserIdAndSecContext(peek->save_userid, peek->save_sec);
}

/*
 * CtasSyncPacePeek
 *		In the sync worker, after a peek that returned nrows rows (not 0)
 *		and began at peek_at: a small one (fewer than SYNC_PACE_ROWS) is
 *		followed by the next one no sooner than SYNC_PACE_MS after it
 *		began.  Each peek costs the worker a fixed amount (a transaction,
 *		its statements planned again, the decoding set up and torn down
 *		with every cache of the backend) whatever it brings: peeking
 *		again at once after each few changes made the worker spend several
 *		times the CPU of PostgreSQL's walsender per change under a steady
 *		load (docs/sync-performance.md), for less lag than the pace adds.
 *		A backlog is read in full peeks, not paced.  Interruptible.
 */
void
CtasSyncPacePeek(uint64 nrows, TimestampTz peek_at)
{
	long		wait_ms;

	if (nrows == 0 || nrows >= SYNC_PACE_ROWS)
		return;
	wait_ms = SYNC_PACE_MS -
		(long) ((GetCurrentTimestamp() - peek_at) / 1000);
	if (wait_ms <= 0)
		return;
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 wait_ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * CtasSyncApplyPeek
 *		Read the peek whose cursor is portal (lsn, data), SYNC_FETCH_ROWS
 *		rows at a time, and apply to each job of jobs (SyncJob pointers, the
 *		jobs of one stream) every source transaction of its table whose
 *		commit lies at or after job->applied (and before job->stop_at, when
 *		set), in one remote transaction per job, committed at the end.  The
 *		rows are fetched as the caller's user, the query's expressions run
 *		as the job's owner in a security-restricted operation.  What was
 *		read goes into *result.  A DDL that the sync cannot follow fails
 *		its job (ERROR) after the transactions committed before it are
 *		applied, or asks for a second reading (result->redo), see the head
 *		of this file.  Called in a transaction, connected to SPI; the
 *		query's expressions are ready in an EState of the current memory
 *		context while it runs.  Can ERROR; the caller then closes the
 *		targets, which rolls back the remote transactions not committed.
 */
void
CtasSyncApplyPeek(List *jobs, Portal portal, SyncPeekResult *result)
{
	SyncPeekState peek;
	ListCell   *lc;
	char	 ***names;
	int			j;
	bool		committed = false;
	XLogRecPtr	safe;

	memset(&peek, 0, sizeof(peek));
	peek.cxt = CurrentMemoryContext;
	peek.njobs = list_length(jobs);
	peek.jobs = palloc0(sizeof(SyncApplyState) * Max(peek.njobs, 1));
	j = 0;
	foreach(lc, jobs)
	{
		peek.jobs[j].job = (SyncJob *) lfirst(lc);
		peek.jobs[j].relid = peek.jobs[j].job->relid;
		j++;
	}
	memset(result, 0, sizeof(*result));
	GetUserIdAndSecContext(&peek.save_userid, &peek.save_sec);

	/* a second reading starts from the names the first one started from */
	names = palloc(sizeof(char **) * Max(peek.njobs, 1));
	for (j = 0; j < peek.njobs; j++)
	{
		SyncJob    *job = peek.jobs[j].job;

		names[j] = palloc(sizeof(char *) * Max(job->ncols, 1));
		memcpy(names[j], job->attnames, sizeof(char *) * job->ncols);
	}

	while (!peek.redo)
	{
		uint64		n;
		uint64		i;
		MemoryContext tuplecxt;
		int			gucnest;

		SPI_cursor_fetch(portal, true, SYNC_FETCH_ROWS);
		n = SPI_processed;
		if (n == 0)
			break;
		result->nrows += n;
		for (j = 0; j < peek.njobs; j++)
		{
			if (peek.jobs[j].ev == NULL)
			{
				peek.jobs[j].ev = CtasSyncBuildEval(peek.jobs[j].job);
				peek.jobs[j].toast = CtasSyncToastBegin(peek.jobs[j].job);
			}
		}
		/* the messages are read in the first job's per-tuple memory */
		tuplecxt = peek.jobs[0].ev->econtext->ecxt_per_tuple_memory;

		/* settings the owner's code changes end with the chunk (see above) */
		gucnest = NewGUCNestLevel();
		for (i = 0; i < n && !peek.redo; i++)
		{
			MemoryContext oldcxt;

			CHECK_FOR_INTERRUPTS();
			oldcxt = MemoryContextSwitchTo(tuplecxt);
			apply_message(&peek, i);
			MemoryContextSwitchTo(oldcxt);
			for (j = 0; j < peek.njobs; j++)
				ResetExprContext(peek.jobs[j].ev->econtext);
		}
		AtEOXact_GUC(false, gucnest);
		SPI_freetuptable(SPI_tuptable);
	}
	/* unchanged TOAST values not proven yet: read again (sync/toast.c) */
	for (j = 0; j < peek.njobs && !peek.redo; j++)
	{
		CtasSyncCurrentJob = peek.jobs[j].job;
		if (CtasSyncToastFinish(peek.jobs[j].toast, peek.jobs[j].job))
			peek.redo = true;
	}
	for (j = 0; j < peek.njobs; j++)
	{
		if (peek.jobs[j].ev != NULL)
			CtasSyncFreeEval(peek.jobs[j].ev);
		if (peek.jobs[j].toast != NULL)
			CtasSyncToastEnd(peek.jobs[j].toast);
	}

	if (peek.redo)
	{
		for (j = 0; j < peek.njobs; j++)
		{
			SyncJob    *job = peek.jobs[j].job;

			/* what was committed before stays: applied is right after */
			CtasSyncApplyWait(job);
			/* columns followed in the first reading: as they were */
			CtasSyncSchemaUndo(job);
			memcpy(job->attnames, names[j], sizeof(char *) * job->ncols);
			job->names_changed = false;
			if (job->stop_at != InvalidXLogRecPtr)
				ereport(LOG,
						(errmsg("ctas_fed sync " INT64_FORMAT ": a DDL in the source transaction committed at %X/%X, reading again the transactions before it",
								job->id, LSN_FORMAT_ARGS(job->stop_at))));
		}
		result->redo = true;
		return;
	}
	/*
	 * The slot may go as far as every job has read: a job held back at its
	 * stop_at has read less than the others, and one whose last remote
	 * commit is in flight only as far as before that commit's first source
	 * transaction (Invalid: the first of the peek, so not at all); the next
	 * peek returns its transactions again, and the job skips them.
	 */
	for (j = 0; j < peek.njobs; j++)
	{
		SyncApplyState *st = &peek.jobs[j];

		/* tests: a crash after some jobs of the stream committed */
		if (committed && st->began)
			CtasFaultPointWait("sync_between_commits");
		committed |= st->began && st->last_end != InvalidXLogRecPtr;
		/*
		 * Left in flight while a backlog is read (a full peek of
		 * SYNC_PACE_ROWS or more: the next one follows at once, and
		 * returns the transactions of this commit again, which costs less
		 * than the wait), unless what follows must come after it (renames
		 * or new columns stored), or the reading stopped at stop_at (a
		 * verify compares the remote next).
		 */
		finish_remote(st, result->nrows < (uint64) CtasSyncPeekChanges ||
					  result->nrows < SYNC_PACE_ROWS ||
					  st->job->names_changed || st->job->reshaped ||
					  st->job->stop_at != InvalidXLogRecPtr);
		/* tests: a crash between the remote commit and the new columns' */
		if (st->job->reshaped)
			CtasFaultPointWait("sync_schema_unsaved");
		/* renames followed: stored after the remote commit */
		if (st->job->names_changed)
			CtasSyncSaveNames(st->job);
		/* read again, and the DDL did not show: nothing to hold back */
		st->job->stop_at = InvalidXLogRecPtr;
		safe = st->job->commit_pending ? st->job->pending_safe : st->last_end;
		if (j == 0 || safe < result->last_end)
			result->last_end = safe;
	}
	pfree(peek.jobs);
}
