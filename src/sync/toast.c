/*-------------------------------------------------------------------------
 *
 * toast.c
 *		  Unchanged TOAST values in the changes a sync applies, without
 *		  REPLICA IDENTITY FULL.
 *
 * An UPDATE that leaves a value stored out of line (TOAST, on disk) as it
 * was keeps its TOAST pointer, and logical decoding does not send the
 * value: pgoutput marks the column 'u' (unchanged) in the new tuple.
 * "Unchanged" is exact: heap_update keeps a pointer only for the very
 * value of the old row version (a value assigned anew, even an equal one,
 * is stored again, and then sent).  PostgreSQL's apply worker takes the
 * value from the local row it updates; the sync has no local row, so each
 * column the query reads that an UPDATE did not send is rebuilt, in this
 * order:
 *
 *	1.	from the old tuple, when the change has one that carries it
 *		(REPLICA IDENTITY FULL; a key column, whose old value PostgreSQL
 *		logs whenever it is stored out of line): sync/apply.c.
 *	2.	kept by the target: when the target says it can keep a remote
 *		value (CtasSyncApply.keeps_unchanged, and can_keep for the
 *		column: a target may keep only some, reading them from the
 *		remote row), the query has no WHERE, the
 *		key did not change and the column is only projected as it is, the
 *		remote row exists (the query takes every row) and holds the value
 *		as of the change before: upsert gets an unchanged mask.
 *	3.	read from the source table, now, when it provably holds the value
 *		the change had: a WHERE over the row (the row may be moving into
 *		it, and then has no remote row), an expression over the column, a
 *		changed key, or a target that keeps no value.
 *	4.	otherwise the job fails, saying why: a wrong value is never
 *		written.
 *
 * The proof of 3.  The worker waits for the source transaction X of the
 * change to be visible (its xid lock), then reads the row of the change's
 * key through the replica identity index under the latest snapshot, and
 * notes which transaction T made that row version (its xmin, or the top
 * transaction of that subtransaction).  The version is the last one of
 * the key as of the snapshot: the key is unique, and a version that a
 * committed transaction updated or deleted is not visible.  T is X or a
 * transaction that committed after X, so every change between the one
 * being applied and T's commit is in the stream after it, in order; the
 * value read equals the change's value if each of them that concerns the
 * key (as old or new key) is an UPDATE that keeps the key and leaves the
 * column unchanged ('u' again), up to T's commit message.  Until then the
 * key is remembered (by a 64-bit hash of its text: a collision can only
 * fail the job or read a peek again, never accept a value):
 *
 *	-	into a transactional target (CtasSyncApply.transactional: nothing
 *		of a peek is seen before its remote COMMIT, so only the last state
 *		of a row in it counts), a later change that sends a new value of the column, or
 *		deletes, inserts or moves the row, supersedes what was read: the
 *		key is forgotten, and the value read only ever lived in the
 *		remote transaction.  A row not found (a later change removed it,
 *		or moved its key) is remembered the same way and must be
 *		superseded.  T's commit is often past the end of the peek (T
 *		committed after the peek was taken): the peek is then rolled back
 *		and read again, up to SYNC_TOAST_REREADS times in a row.
 *	-	into a target that writes rows before the batch ends (one that
 *		writes a source transaction's rows at the next transaction), T
 *		must be X itself and every later change of X to the key must keep
 *		the value; anything else fails the job before X's rows are
 *		written.  A row changed again by a later transaction before the
 *		worker read it therefore fails such a job.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/toast.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/subtrans.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "storage/lmgr.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "sync/sync_int.h"

/* readings of a peek again for one unproven value before the job fails */
#define SYNC_TOAST_REREADS	3

/*
 * Set by SYNC_FAIL: the error in flight fails the job for good.  Defined
 * here, the lowest file of the sync that raises such errors, so that the
 * files above it (apply.c, worker.c) do not form a cycle with it.
 */
bool		CtasSyncFailed = false;

/*
 * Set when the schema change in flight asks for a copy again, not a
 * failure.  Here for the same reason (follow.c, ddl.c and partition.c set
 * it).
 */
bool		CtasSyncResyncWanted = false;

/* A key of X whose unchanged values were read from the source */
typedef struct SyncToastProof
{
	uint64		hash;			/* of the key's text */
	bool	   *cols;			/* per column the query reads: read so */
	TransactionId until;		/* the transaction that made the row
								 * version read */
} SyncToastProof;

/* What one job needs to rebuild unchanged values (one peek) */
struct SyncToast
{
	bool		has_where;
	int			noutputs;
	int		   *plain;			/* per output column: the column the query
								 * reads that it projects as it is, or -1 */
	bool	  **reads;			/* per output column: per column the query
								 * reads, whether its expression does */
	bool	   *unchanged;		/* per column the query reads: not sent by
								 * the change being applied */
	bool	   *mask;			/* per output column, for upsert */
	MemoryContext cxt;
	HTAB	   *proofs;			/* SyncToastProof by hash, in X; or NULL */
	MemoryContext proof_cxt;
};

/* index into job->attnums of attribute attno, or -1 */
static int
job_column(SyncJob *job, AttrNumber attno)
{
	int			i;

	for (i = 0; i < job->ncols; i++)
	{
		if (job->attnums[i] == attno)
			return i;
	}
	return -1;
}

/*
 * CtasSyncToastBegin
 *		What the query's select list reads, per output column, for the job;
 *		in a new memory context under the current one.  Can ERROR.
 */
SyncToast *
CtasSyncToastBegin(SyncJob *job)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "ctas_fed sync toast",
											  ALLOCSET_SMALL_SIZES);
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	SyncToast  *toast = palloc0(sizeof(SyncToast));
	ListCell   *lc;
	int			n = 0;

	toast->cxt = cxt;
	toast->has_where = job->query->jointree->quals != NULL;
	toast->noutputs = job->target.ncolumns;
	toast->plain = palloc(sizeof(int) * Max(toast->noutputs, 1));
	toast->reads = palloc0(sizeof(bool *) * Max(toast->noutputs, 1));
	toast->mask = palloc0(sizeof(bool) * Max(toast->noutputs, 1));
	toast->unchanged = palloc0(sizeof(bool) * Max(job->ncols, 1));
	foreach(lc, job->query->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		Bitmapset  *attrs = NULL;
		int			x = -1;

		if (tle->resjunk || n >= toast->noutputs)
			continue;
		toast->plain[n] = -1;
		if (IsA(tle->expr, Var) && ((Var *) tle->expr)->varattno > 0)
			toast->plain[n] = job_column(job, ((Var *) tle->expr)->varattno);
		toast->reads[n] = palloc0(sizeof(bool) * Max(job->ncols, 1));
		pull_varattnos((Node *) tle->expr, 1, &attrs);
		while ((x = bms_next_member(attrs, x)) >= 0)
		{
			AttrNumber	attno = x + FirstLowInvalidHeapAttributeNumber;
			int			i;

			/* a whole-row reference reads every column */
			for (i = 0; i < job->ncols; i++)
			{
				if (attno == 0 || job->attnums[i] == attno)
					toast->reads[n][i] = true;
			}
		}
		n++;
	}
	MemoryContextSwitchTo(oldcxt);
	return toast;
}

/* forget every key read from the source */
static void
forget(SyncToast *toast)
{
	if (toast->proofs == NULL)
		return;
	hash_destroy(toast->proofs);
	MemoryContextDelete(toast->proof_cxt);
	toast->proofs = NULL;
	toast->proof_cxt = NULL;
}

/* free what CtasSyncToastBegin made */
void
CtasSyncToastEnd(SyncToast *toast)
{
	forget(toast);
	MemoryContextDelete(toast->cxt);
}

/*
 * CtasSyncToastPending
 *		Whether values read from the source are not proven yet (toast may
 *		be NULL): the remote transaction must not commit before they are.
 */
bool
CtasSyncToastPending(SyncToast *toast)
{
	return toast != NULL && toast->proofs != NULL &&
		hash_get_num_entries(toast->proofs) > 0;
}

/* the array CtasSyncFillSlot marks the columns a change did not send in */
bool *
CtasSyncToastUnchanged(SyncToast *toast)
{
	return toast->unchanged;
}

/* a hash of a key given as text */
static uint64
key_hash(SyncJob *job, char **keys)
{
	uint64		h = 0;
	int			k;

	for (k = 0; k < job->target.nkeys; k++)
		h = hash_combine64(h, hash_bytes_extended((const unsigned char *) keys[k],
												  strlen(keys[k]) + 1, k));
	return h;
}

/* the name of the first column marked in cols, for a message */
static const char *
first_column(SyncJob *job, const bool *cols)
{
	int			i;

	for (i = 0; i < job->ncols; i++)
	{
		if (cols[i])
			return job->attnames[i];
	}
	return "?";
}

/* the job fails: the value of column cols[] cannot be proven */
static void
fail_unproven(SyncJob *job, const bool *cols, const char *why)
{
	SYNC_FAIL(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			  errmsg("sync " INT64_FORMAT " cannot rebuild the unchanged TOAST value of column \"%s\"",
					 job->id, first_column(job, cols)),
			  errdetail("An UPDATE of the source did not send the value, the query needs it, and %s.",
						why),
			  errhint("Set REPLICA IDENTITY FULL on the source table, then create the sync again."));
}

/*
 * read_source
 *		The columns marked in toast->unchanged of the source row of the key
 *		ev->keys into ev->slot (per-tuple memory, detoasted), read under
 *		the latest snapshot once X = xid is visible; the job fails unless
 *		the row version was made by X (see the head of this file).
 */
static TransactionId
read_source(SyncToast *toast, SyncJob *job, SyncEval *ev, TransactionId xid)
{
	Relation	rel;
	Relation	index;
	Oid			indexoid;
	ScanKeyData skey[INDEX_MAX_KEYS];
	Snapshot	snapshot;
	IndexScanDesc scan;
	TupleTableSlot *found;
	TransactionId xmin = InvalidTransactionId;
	bool		ok;
	int			nkeys = job->target.nkeys;
	int			k;
	int			i;

	/* X's commit record was decoded: wait until it left the proc array */
	if (TransactionIdIsValid(xid))
		XactLockTableWait(xid, NULL, NULL, XLTW_None);

	rel = table_open(job->relid, AccessShareLock);
	indexoid = RelationGetReplicaIndex(rel);
	if (!OidIsValid(indexoid))
		fail_unproven(job, toast->unchanged,
					  "the source table has no replica identity index to find the row by");
	index = index_open(indexoid, AccessShareLock);
	ok = index->rd_index->indnkeyatts == nkeys && nkeys <= INDEX_MAX_KEYS;
	for (k = 0; ok && k < nkeys; k++)
	{
		int			j = job->keycol[k];
		Oid			optype = index->rd_opcintype[k];
		Oid			op;

		if (index->rd_index->indkey.values[k] != job->attnums[j])
		{
			ok = false;
			break;
		}
		op = get_opfamily_member(index->rd_opfamily[k], optype, optype,
								 BTEqualStrategyNumber);
		if (!OidIsValid(op))
			elog(ERROR, "missing equality operator for type %u", optype);
		ScanKeyEntryInitialize(&skey[k], 0, k + 1, BTEqualStrategyNumber,
							   optype, index->rd_indcollation[k],
							   get_opcode(op),
							   InputFunctionCall(&job->infuncs[j], ev->keys[k],
												 job->ioparams[j], -1));
	}
	if (!ok)
		fail_unproven(job, toast->unchanged,
					  "the replica identity index of the source table is no longer the sync's key");

	snapshot = RegisterSnapshot(GetLatestSnapshot());
	found = table_slot_create(rel, NULL);
	scan = index_beginscan(rel, index, snapshot, nkeys, 0);
	index_rescan(scan, skey, nkeys, NULL, 0);
	ok = index_getnext_slot(scan, ForwardScanDirection, found);
	if (ok)
	{
		bool		isnull;

		xmin = DatumGetTransactionId(slot_getsysattr(found,
													 MinTransactionIdAttributeNumber,
													 &isnull));
		for (i = 0; i < job->ncols; i++)
		{
			AttrNumber	a = job->attnums[i];
			Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), a - 1);
			Datum		v;

			if (!toast->unchanged[i])
				continue;
			v = slot_getattr(found, a, &isnull);
			ev->slot->tts_isnull[a - 1] = isnull;
			if (isnull)
				continue;
			/* detoasted while the snapshot holds the TOAST rows */
			if (att->attlen == -1)
				v = PointerGetDatum(PG_DETOAST_DATUM_COPY(v));
			else
				v = datumCopy(v, att->attbyval, att->attlen);
			ev->slot->tts_values[a - 1] = v;
		}
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(found);
	UnregisterSnapshot(snapshot);
	index_close(index, NoLock);
	table_close(rel, NoLock);

	if (!ok)
		return InvalidTransactionId;

	/*
	 * The top transaction of a subtransaction is known for xids from
	 * TransactionXmin on (pg_subtrans is kept that far).
	 */
	if (xmin != xid && TransactionIdIsNormal(xmin) &&
		TransactionIdFollowsOrEquals(xmin, TransactionXmin))
		xmin = SubTransGetTopmostTransaction(xmin);
	return xmin;
}

/*
 * remember
 *		Remember, until X's commit, that the unchanged values of the key
 *		ev->keys were read from the source.
 */
static void
remember(SyncToast *toast, SyncJob *job, SyncEval *ev, TransactionId until)
{
	uint64		h = key_hash(job, ev->keys);
	SyncToastProof *p;
	bool		found;
	int			i;

	if (toast->proofs == NULL)
	{
		HASHCTL		ctl;

		toast->proof_cxt = AllocSetContextCreate(toast->cxt,
												 "ctas_fed sync toast proofs",
												 ALLOCSET_DEFAULT_SIZES);
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(SyncToastProof);
		ctl.hcxt = toast->proof_cxt;
		toast->proofs = hash_create("ctas_fed sync toast proofs", 256, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	p = hash_search(toast->proofs, &h, HASH_ENTER, &found);
	if (!found)
		p->cols = MemoryContextAllocZero(toast->proof_cxt,
										 sizeof(bool) * Max(job->ncols, 1));
	else if (p->until != until)
		fail_unproven(job, toast->unchanged,
					  "the source row was read twice with different versions");
	p->until = until;
	for (i = 0; i < job->ncols; i++)
		p->cols[i] |= toast->unchanged[i];
}

/*
 * CtasSyncToastResolve
 *		The change in ev->slot did not send the columns marked unchanged
 *		(CtasSyncFillSlot left them NULL).  Returns the unchanged mask for
 *		upsert when the target keeps those values; else reads them from the
 *		source into ev->slot and returns NULL; else the job fails (ERROR).
 *		xid is the change's source transaction.
 */
const bool *
CtasSyncToastResolve(SyncToast *toast, SyncJob *job, SyncEval *ev,
					 bool key_changed, TransactionId xid)
{
	bool		keep = job->apply->keeps_unchanged && !toast->has_where &&
		!key_changed;
	TransactionId made_by;
	int			n;
	int			i;

	for (n = 0; keep && n < toast->noutputs; n++)
	{
		toast->mask[n] = toast->plain[n] >= 0 &&
			toast->unchanged[toast->plain[n]];
		if (toast->mask[n] && job->apply->can_keep != NULL &&
			!job->apply->can_keep(&job->target, n))
			keep = false;
		for (i = 0; i < job->ncols && !toast->mask[n]; i++)
		{
			if (toast->unchanged[i] && toast->reads[n][i])
				keep = false;
		}
	}
	if (keep)
		return toast->mask;
	made_by = read_source(toast, job, ev, xid);
	if (made_by != xid && !job->apply->transactional)
		fail_unproven(job, toast->unchanged,
					  made_by == InvalidTransactionId ?
					  "the row is no longer in the source table" :
					  "the source row was changed again by a later transaction before the sync read it");
	remember(toast, job, ev, made_by);
	return NULL;
}

/*
 * CtasSyncToastCheck
 *		A later change that concerns a key whose unchanged values were read
 *		from the source: an UPDATE (newtup) from oldkeys to newkeys, an
 *		INSERT (newkeys only), a DELETE (oldkeys only) or a TRUNCATE
 *		(neither).  Into a transactional target, where only the last state
 *		of a row in the batch is ever seen, a change that writes the row
 *		anew or removes it supersedes what was read (forgotten); one that
 *		keeps the key and leaves a value unchanged again keeps it to prove.
 *		Into another target, any change but the latter fails the job.
 */
void
CtasSyncToastCheck(SyncToast *toast, SyncJob *job,
				   LogicalRepTupleData *newtup, char **oldkeys,
				   char **newkeys)
{
	bool		strict = !job->apply->transactional;
	SyncToastProof *p = NULL;
	uint64		h[2];
	bool		same;
	bool		left = false;
	int			n;
	int			i;

	if (toast == NULL || toast->proofs == NULL)
		return;
	if (oldkeys == NULL && newkeys == NULL)
	{
		HASH_SEQ_STATUS seq;

		hash_seq_init(&seq, toast->proofs);
		p = hash_seq_search(&seq);
		if (p != NULL)
			hash_seq_term(&seq);
		if (p != NULL && strict)
			fail_unproven(job, p->cols,
						  "a TRUNCATE removed the row read from the source before the transaction that made it committed");
		forget(toast);
		return;
	}
	h[0] = oldkeys ? key_hash(job, oldkeys) : 0;
	h[1] = newkeys ? key_hash(job, newkeys) : 0;
	same = newtup != NULL && oldkeys != NULL && newkeys != NULL && h[0] == h[1];
	for (n = 0; n < 2; n++)
	{
		if ((n == 0 && oldkeys == NULL) || (n == 1 && newkeys == NULL) ||
			(n == 1 && same))
			continue;
		p = hash_search(toast->proofs, &h[n], HASH_FIND, NULL);
		if (p == NULL)
			continue;
		if (!same)
		{
			if (strict)
				fail_unproven(job, p->cols,
							  "a later change deleted, inserted or moved the row read from the source");
			hash_search(toast->proofs, &h[n], HASH_REMOVE, NULL);
			continue;
		}
		for (i = 0; i < job->ncols; i++)
		{
			int			c = job->msgcol[i];

			if (!p->cols[i])
				continue;
			if (c >= 0 && c < newtup->ncols &&
				newtup->colstatus[c] == LOGICALREP_COLUMN_UNCHANGED)
				left = true;
			else if (strict)
				fail_unproven(job, p->cols,
							  "a later change sent a new value of the column read from the source");
			else
				p->cols[i] = false;
		}
		if (!left)
			hash_search(toast->proofs, &h[n], HASH_REMOVE, NULL);
	}
}

/*
 * CtasSyncToastEndXact
 *		The source transaction xid committed: the keys whose row version
 *		read it made are proven.
 */
void
CtasSyncToastEndXact(SyncToast *toast, TransactionId xid)
{
	HASH_SEQ_STATUS seq;
	SyncToastProof *p;

	if (toast == NULL || toast->proofs == NULL)
		return;
	hash_seq_init(&seq, toast->proofs);
	while ((p = hash_seq_search(&seq)) != NULL)
	{
		if (p->until == xid)
			hash_search(toast->proofs, &p->hash, HASH_REMOVE, NULL);
	}
	if (hash_get_num_entries(toast->proofs) == 0)
		forget(toast);
}

/*
 * CtasSyncToastFinish
 *		The end of a peek.  A row version read from the source whose
 *		transaction is not in the peek (it committed after the peek was
 *		taken) is not proven yet: returns true, and the caller rolls back
 *		the remote transactions and reads the peek again, which now goes on
 *		to that transaction (the slot was not advanced).  After
 *		SYNC_TOAST_REREADS such readings in a row the job fails instead.
 */
bool
CtasSyncToastFinish(SyncToast *toast, SyncJob *job)
{
	HASH_SEQ_STATUS seq;
	SyncToastProof *p;

	if (toast == NULL || toast->proofs == NULL ||
		hash_get_num_entries(toast->proofs) == 0)
	{
		job->toast_rereads = 0;
		return false;
	}
	hash_seq_init(&seq, toast->proofs);
	p = hash_seq_search(&seq);
	hash_seq_term(&seq);
	if (++job->toast_rereads > SYNC_TOAST_REREADS)
	{
		job->toast_rereads = 0;
		fail_unproven(job, p->cols,
					  "the transaction that made the source row version read was not found among the changes read (an UPDATE in a subtransaction, or a row that kept changing)");
	}
	ereport(LOG,
			(errmsg("ctas_fed sync " INT64_FORMAT ": a source row read for an unchanged TOAST value was changed by a transaction committed after the peek, reading again",
					job->id)));
	forget(toast);
	return true;
}
