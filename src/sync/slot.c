/*-------------------------------------------------------------------------
 *
 * slot.c
 *		  The replication slots of continuous sync as the workers use them:
 *		  a slot made with the snapshot of its consistent point (the copy of
 *		  a new stream, a join, a merge of streams), a slot's confirmed
 *		  position, and the lock whoever copies a job holds.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/slot.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogutils.h"
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

#include "sync/sync_int.h"

/*
 * CtasSyncSlotSnapshot
 *		In a transaction just started, that has done nothing yet: create
 *		the logical replication slot name (pgoutput) and make the snapshot
 *		of its consistent point the transaction's, exactly as walsender's
 *		CREATE_REPLICATION_SLOT ... (SNAPSHOT 'use') does; the transaction
 *		becomes REPEATABLE READ and read-only.  keep: the slot is made
 *		persistent, the stream's; otherwise it is dropped at once (a join,
 *		which needs only the consistent point and the snapshot: the
 *		transaction's xmin, set here, keeps the rows the snapshot sees).
 *		Returns the consistent point.  Can ERROR; the caller's abort then
 *		releases (and so drops) the slot.
 */
XLogRecPtr
CtasSyncSlotSnapshot(const char *name, bool keep)
{
	LogicalDecodingContext *ctx;
	Snapshot	snap;
	XLogRecPtr	consistent;

	XactIsoLevel = XACT_REPEATABLE_READ;
	XactReadOnly = true;

	CheckLogicalDecodingRequirements();
	ReplicationSlotCreate(name, true, RS_EPHEMERAL, false);
	ctx = CreateInitDecodingContext("pgoutput", NIL, true, InvalidXLogRecPtr,
									XL_ROUTINE(.page_read = read_local_xlog_page,
											   .segment_open = wal_segment_open,
											   .segment_close = wal_segment_close),
									NULL, NULL, NULL);
	DecodingContextFindStartpoint(ctx);
	snap = SnapBuildInitialSnapshot(ctx->snapshot_builder);
	RestoreTransactionSnapshot(snap, MyProc);
	consistent = MyReplicationSlot->data.confirmed_flush;
	FreeDecodingContext(ctx);
	if (keep)
		ReplicationSlotPersist();
	/* an ephemeral slot is dropped when released */
	ReplicationSlotRelease();
	return consistent;
}

/* the slot's confirmed_flush_lsn */
XLogRecPtr
CtasSyncSlotConfirmed(const char *slot_name)
{
	ReplicationSlot *s;
	XLogRecPtr	lsn = InvalidXLogRecPtr;

	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	s = SearchNamedReplicationSlot(slot_name, false);
	if (s != NULL)
	{
		SpinLockAcquire(&s->mutex);
		lsn = s->data.confirmed_flush;
		SpinLockRelease(&s->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);
	return lsn;
}

/* the lock tag of job id's copy */
static void
copy_lock_tag(LOCKTAG *tag, int64 id)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (id >> 32),
						 (uint32) id, CTAS_LOCKTAG_JOIN_COPY);
}

/*
 * CtasSyncLockCopy
 *		Take job id's copy lock, a session lock (wait: wait for it); false
 *		when it is taken and not wait.
 */
bool
CtasSyncLockCopy(int64 id, bool wait)
{
	LOCKTAG		tag;

	copy_lock_tag(&tag, id);
	return LockAcquire(&tag, ExclusiveLock, true, !wait) !=
		LOCKACQUIRE_NOT_AVAIL;
}

/* CtasSyncUnlockCopy: release job id's copy lock */
void
CtasSyncUnlockCopy(int64 id)
{
	LOCKTAG		tag;

	copy_lock_tag(&tag, id);
	LockRelease(&tag, ExclusiveLock, true);
}
