/*-------------------------------------------------------------------------
 *
 * merge.c
 *		  The default streams of a database merged into one: the syncs made
 *		  before version 0.3 of the extension each have a stream of their
 *		  own (one per CTAS, one per create_tables_as call); the worker of
 *		  the oldest default stream (the primary) takes the others into its
 *		  own, one at a time, without copying a table again and without
 *		  losing or repeating a change.
 *
 * Between two rounds of the primary stream (which is paused, its slot
 * confirmed at C), for another default stream whose jobs all stream:
 *
 *	1. its worker is stopped and kept from starting again (the primary
 *	   worker takes the other stream's worker lock);
 *	2. the other stream's tables are added to the primary publication, in a
 *	   transaction that commits at T;
 *	3. a temporary slot, made after T (CtasSyncSlotSnapshot), is consistent
 *	   at X only once every transaction that had an xid before it was made
 *	   has ended: a transaction that commits at or after X wrote nothing
 *	   before T, so pgoutput publishes all its changes of those tables in
 *	   the primary stream.  P = max(X, C);
 *	4. the other stream's jobs are brought, on their own slot, to every
 *	   source transaction that commits before P (a peek with upto_lsn P,
 *	   applied as a round is, each job skipping what it applied before);
 *	5. in one transaction the jobs are moved to the primary stream (its
 *	   stream_id, publication and slot) and the other publication is
 *	   dropped; then the other slot is dropped.
 *
 * The primary stream then reads from C: a moved job skips the source
 * transactions that commit before its applied lsn, which lies after every
 * transaction of its table that commits before P (step 4), and applies the
 * ones at or after P, each whole (step 3); between its applied lsn and P
 * none of its table's transactions commit.  Nothing is lost or applied
 * twice, and no table is copied again.  A failure at any step ends the
 * worker, and the merge starts over: the extra tables of the primary
 * publication are ignored meanwhile (no job of the primary stream reads
 * them).  XXX: a crash between step 5's commit and the drop of the other
 * slot leaves that slot, which no job names, holding WAL until it is
 * dropped by hand.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/merge.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "replication/slot.h"
#include "storage/lmgr.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "sync/sync_int.h"

/* the other stream to merge */
typedef struct MergeOther
{
	int64		stream_id;
	char	   *publication;
	char	   *slot_name;
} MergeOther;

/*
 * stop_other_worker
 *		Stop the worker of stream other and keep it from starting again: its
 *		lock, held by this process for its life (a session lock, released by
 *		release_other).  False when it could not be had within 30 s.
 */
static bool
stop_other_worker(int64 other, LOCKTAG *tag)
{
	int			i;

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (other >> 32),
						 (uint32) other, CTAS_LOCKTAG_SYNC);
	for (i = 0; i < 300; i++)
	{
		Datum		args[1];

		if (LockAcquire(tag, ExclusiveLock, true, true) != LOCKACQUIRE_NOT_AVAIL)
			return true;
		if (i % 10 == 0)
		{
			SetCurrentStatementStartTimestamp();
			StartTransactionCommand();
			SPI_connect();
			PushActiveSnapshot(GetTransactionSnapshot());
			args[0] = CStringGetTextDatum(psprintf("ctas_fed sync " INT64_FORMAT,
												   other));
			CtasSyncSpiExec("SELECT pg_catalog.pg_terminate_backend(pid) "
							"FROM pg_catalog.pg_stat_activity "
							"WHERE backend_type = 'ctas_fed sync' "
							"AND datid = (SELECT oid FROM pg_catalog.pg_database "
							"WHERE datname = pg_catalog.current_database()) "
							"AND application_name = $1",
							1, (Oid[]) {TEXTOID}, args, false);
			SPI_finish();
			PopActiveSnapshot();
			CommitTransactionCommand();
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return false;
}

/*
 * publish_other
 *		Step 2: the tables of the other stream's jobs into the primary
 *		publication, in a transaction of its own, under both streams' locks.
 */
static void
publish_other(List *other_jobs, const char *publication, int64 primary,
			  int64 other)
{
	ListCell   *lc;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	CtasSyncLockStream(Min(primary, other));
	CtasSyncLockStream(Max(primary, other));
	foreach(lc, other_jobs)
	{
		SyncJob    *job = lfirst(lc);
		Datum		args[2];
		char	   *relname = get_rel_name(job->relid);

		if (relname == NULL)
			continue;			/* dropped: the job fails in the stream */
		args[0] = DirectFunctionCall1(namein, CStringGetDatum(publication));
		args[1] = ObjectIdGetDatum(job->relid);
		CtasSyncSpiExec("SELECT FROM pg_catalog.pg_publication_rel pr "
						"JOIN pg_catalog.pg_publication p ON p.oid = pr.prpubid "
						"WHERE p.pubname = $1 AND pr.prrelid = $2",
						2, (Oid[]) {NAMEOID, OIDOID}, args, true);
		if (SPI_processed > 0)
			continue;
		CtasSyncSpiExec(psprintf("ALTER PUBLICATION %s ADD TABLE ONLY %s",
								 quote_identifier(publication),
								 quote_qualified_identifier(get_namespace_name(get_rel_namespace(job->relid)),
															relname)),
						0, NULL, NULL, false);
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * catch_up_other
 *		Step 4: apply to the other stream's jobs, from their own slot, every
 *		source transaction that commits before upto.
 */
static void
catch_up_other(List *other_jobs, MergeOther *other, XLogRecPtr upto)
{
	char	   *sql = psprintf("SELECT lsn, data FROM "
							   "pg_catalog.pg_logical_slot_peek_binary_changes($1, $2, NULL, "
							   "'proto_version', '1', 'publication_names', %s, "
							   "'messages', 'true')",
							   quote_literal_cstr(quote_identifier(other->publication)));

	for (;;)
	{
		SyncPeekResult peek = {0};
		Datum		args[2];
		Portal		portal;
		ListCell   *lc;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		foreach(lc, other_jobs)
			CtasSyncOpenTarget(lfirst(lc));
		(void) set_config_option("log_min_messages", "warning",
								 PGC_SUSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
		args[0] = DirectFunctionCall1(namein, CStringGetDatum(other->slot_name));
		args[1] = LSNGetDatum(upto);
		portal = SPI_cursor_open_with_args(NULL, sql, 2,
										   (Oid[]) {NAMEOID, PG_LSNOID},
										   args, NULL, true, 0);
		CtasSyncApplyPeek(other_jobs, portal, &peek);
		SPI_cursor_close(portal);
		/* branch speed: every remote commit confirmed (sync/apply.c) */
		foreach(lc, other_jobs)
			CtasSyncApplyWait(lfirst(lc));
		if (peek.redo)
		{
			/* roll back and read again (sync/apply.c) */
			foreach(lc, other_jobs)
			{
				SyncJob    *job = lfirst(lc);

				if (job->open)
					job->apply->close(&job->target);
				job->open = false;
			}
		}
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		if (!peek.redo)
			return;
	}
}

/*
 * move_other
 *		Step 5: the other stream's jobs become the primary stream's, and the
 *		other publication goes, in one transaction; then the other slot.
 */
static void
move_other(MergeOther *other, int64 primary, const char *publication,
		   const char *slot_name)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	CtasSyncLockStream(Min(primary, other->stream_id));
	CtasSyncLockStream(Max(primary, other->stream_id));
	CtasSyncMoveStream(other->stream_id, primary, publication, slot_name);
	CtasSyncSpiExec(psprintf("DROP PUBLICATION IF EXISTS %s",
							 quote_identifier(other->publication)),
					0, NULL, NULL, false);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();

	if (SearchNamedReplicationSlot(other->slot_name, true) != NULL)
	{
		StartTransactionCommand();
		ReplicationSlotDrop(other->slot_name, true);
		CommitTransactionCommand();
	}
}

/*
 * CtasSyncMergeStreams
 *		In the worker of stream primary, between two of its rounds (its
 *		slot slot_name confirmed where the rounds left it): when it is the
 *		oldest running default stream of the database, merge one other
 *		default stream into it (see the head of this file) and add that
 *		stream's jobs, streaming, to *jobs.  Returns whether it merged one.
 *		Outside a transaction.  Can ERROR; the worker then ends, and the
 *		merge starts over in the next one.
 */
bool
CtasSyncMergeStreams(int64 primary, const char *publication,
					 const char *slot_name, List **jobs)
{
	MergeOther	other;
	bool		found;
	List	   *other_jobs;
	LOCKTAG		tag;
	XLogRecPtr	consistent;
	XLogRecPtr	confirmed;
	XLogRecPtr	upto;
	char	   *tmp;
	ListCell   *lc;
	MemoryContext oldcxt;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	found = CtasSyncIsPrimaryStream(primary) &&
		CtasSyncFindMergeable(primary, &other.stream_id, &other.publication,
							  &other.slot_name);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	if (!found)
		return false;

	ereport(LOG,
			(errmsg("ctas_fed sync: merging stream " INT64_FORMAT " into stream " INT64_FORMAT,
					other.stream_id, primary)));

	/* 1. the other worker stopped, and kept from starting */
	if (!stop_other_worker(other.stream_id, &tag))
		return false;

	/* its jobs, as they are now */
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	CtasSyncCurrentJob = NULL;
	other_jobs = CtasSyncLoadStream(other.stream_id);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	foreach(lc, other_jobs)
	{
		SyncJob    *job = lfirst(lc);

		if (job->state != CTAS_SYNC_STREAMING)
		{
			LockRelease(&tag, ExclusiveLock, true);
			return false;		/* a resync began meanwhile: later */
		}
		if (CtasSyncStatusAttach(job->id))
			CtasSyncStatusLabels(job->target.catalog->name, job->target.schema,
								 job->target.table, slot_name);
	}

	/* 2. its tables in the primary publication, committed at T */
	publish_other(other_jobs, publication, primary, other.stream_id);

	/* 3. a point after every transaction that wrote before T */
	tmp = psprintf("%sm%u_" INT64_FORMAT, CTAS_SYNC_PREFIX, MyDatabaseId,
				   other.stream_id);
	if (SearchNamedReplicationSlot(tmp, true) != NULL)
	{
		StartTransactionCommand();
		ReplicationSlotDrop(tmp, true);
		CommitTransactionCommand();
	}
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	consistent = CtasSyncSlotSnapshot(tmp, false);
	CommitTransactionCommand();
	confirmed = CtasSyncSlotConfirmed(slot_name);
	upto = Max(consistent, confirmed);

	/* 4. the other jobs brought to every transaction committed before it */
	catch_up_other(other_jobs, &other, upto);

	/* 5. moved */
	move_other(&other, primary, publication, slot_name);
	LockRelease(&tag, ExclusiveLock, true);

	oldcxt = MemoryContextSwitchTo(CtasSyncJobCxt);
	foreach(lc, other_jobs)
	{
		SyncJob    *job = lfirst(lc);

		job->stream_id = primary;
		job->publication = pstrdup(publication);
		job->slot_name = pstrdup(slot_name);
		*jobs = lappend(*jobs, job);
	}
	MemoryContextSwitchTo(oldcxt);
	ereport(LOG,
			(errmsg("ctas_fed sync: merged stream " INT64_FORMAT " into stream " INT64_FORMAT " at %X/%X, %d jobs",
					other.stream_id, primary, LSN_FORMAT_ARGS(upto),
					list_length(other_jobs))));
	return true;
}
