/*-------------------------------------------------------------------------
 *
 * xact.c
 *		  The participants of the local transaction and the one transaction
 *		  callback and one subtransaction callback of ctas_fed.
 *
 * Every catalog (more exactly: every user mapping) written by an atomic
 * federated statement joins the local transaction as a participant.  The
 * callbacks here drive all of them, in the way of Citus and postgres_fdw:
 *
 *	PRE_COMMIT	everything that can fail: two-phase targets PREPARE
 *				(CTAS_COMMIT_PREPARE), then targets that cannot prepare
 *				publish (CTAS_COMMIT_LAST_RESOURCE).  An error here aborts
 *				the whole local transaction, and every participant's abort
 *				undoes its work.
 *	COMMIT		finish: COMMIT PREPARED, drop replaced tables.  Never an
 *				error: a failure is a WARNING and the leftover is resolved
 *				later from durable local evidence.
 *	ABORT		undo: ROLLBACK [PREPARED], drop what a target made for
 *				this transaction only, undo what it published.  Never an
 *				error.
 *	PRE_PREPARE a local PREPARE TRANSACTION after federated work is refused.
 *
 * Joining a participant assigns the local transaction an xid and forces a
 * synchronous commit, so that the outcome of the local transaction whose
 * id a gid carries is durable evidence for the resolver.
 *
 * Invariant: "participants" is non-NIL only inside a transaction that
 * joined a catalog; it lives in TopTransactionContext and is forgotten at
 * the end of every top-level transaction.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/xact.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "nodes/pg_list.h"
#include "replication/message.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "targets.h"
#include "xact.h"

/*
 * The fault point (ctas_fed.fault_point) after each round of pre-commit.
 * "after_rename" is the name tests know for the point after the targets
 * that cannot prepare have published.
 */
static const char *const pre_commit_fault_points[CTAS_COMMIT_ORDERS] = {
	"after_prepare",			/* CTAS_COMMIT_PREPARE */
	"after_rename"				/* CTAS_COMMIT_LAST_RESOURCE */
};

static List *participants = NIL;

/* a job of a participant, with the nesting level that did it */
typedef struct XactJob
{
	CtasJobRef	ref;
	int			level;
} XactJob;

static void ctas_xact_callback(XactEvent event, void *arg);
static void ctas_subxact_callback(SubXactEvent event,
								  SubTransactionId mySubid,
								  SubTransactionId parentSubid, void *arg);
static void forget_participants(void);

/*
 * CtasXactInit
 *		Register the callbacks; called once from _PG_init.
 */
void
CtasXactInit(void)
{
	RegisterXactCallback(ctas_xact_callback, NULL);
	RegisterSubXactCallback(ctas_subxact_callback, NULL);
}

/*
 * burn_xid
 *		Give the top-level transaction an xid and make that xid durable
 *		before any remote effect.
 *
 * Gids and staging names carry the local xid, and the resolver decides
 * from that xid's commit status.  An xid that was assigned but never
 * written to WAL is handed out again after a crash: a later transaction
 * could then commit under the id of a crashed one, and its remote leftovers
 * would be committed instead of rolled back.  A small transactional WAL
 * message, flushed, carries the xid; crash recovery replays it and moves
 * the next xid past it, so after a crash the xid is simply "aborted".
 * Once per transaction.
 */
static void
burn_xid(void)
{
	static const char msg[] = "joined";
	XLogRecPtr	lsn;

	if (participants != NIL)
		return;
	(void) GetTopTransactionId();
	lsn = LogLogicalMessage("ctas_fed", msg, sizeof(msg) - 1, true);
	XLogFlush(lsn);
}

/*
 * CtasJoinTransaction
 *		The participant of the current transaction for catalog's user
 *		mapping, created on first use.  Assigns the local transaction an xid
 *		and makes its commit synchronous.  The participant and its copy of
 *		the catalog live in TopTransactionContext.
 */
CtasParticipant *
CtasJoinTransaction(CtasCatalog *catalog)
{
	CtasParticipant *part;
	MemoryContext oldcxt;
	ListCell   *lc;

	if (IsInParallelMode())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot write to a catalog during a parallel operation")));

	foreach(lc, participants)
	{
		part = (CtasParticipant *) lfirst(lc);
		if (part->serverid == catalog->serverid && part->umid == catalog->umid)
			return part;
	}

	/* durable evidence of the outcome for the resolver */
	burn_xid();
	ForceSyncCommit();

	oldcxt = MemoryContextSwitchTo(TopTransactionContext);
	part = palloc0(sizeof(CtasParticipant));
	part->serverid = catalog->serverid;
	part->umid = catalog->umid;
	part->cxt = AllocSetContextCreate(TopTransactionContext,
									  "ctas_fed participant",
									  ALLOCSET_SMALL_SIZES);
	MemoryContextSwitchTo(part->cxt);
	part->catalog = palloc(sizeof(CtasCatalog));
	memcpy(part->catalog, catalog, sizeof(CtasCatalog));
	part->catalog->name = pstrdup(catalog->name);
	part->catalog->type_name = pstrdup(catalog->type_name);
	part->catalog->server_options = copyObject(catalog->server_options);
	part->catalog->user_options = copyObject(catalog->user_options);
	if (catalog->notify_url)
		part->catalog->notify_url = pstrdup(catalog->notify_url);
	part->routine = CtasCatalogRoutine(catalog);
	part->serial = list_length(participants) + 1;

	MemoryContextSwitchTo(TopTransactionContext);
	participants = lappend(participants, part);
	MemoryContextSwitchTo(oldcxt);

	return part;
}

/*
 * CtasXactAddJob
 *		Let the transaction move job through prepared, committed, aborted
 *		with part.
 */
void
CtasXactAddJob(CtasParticipant *part, CtasJobRef job)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(part->cxt);
	XactJob    *xj = palloc(sizeof(XactJob));

	xj->ref = job;
	xj->level = GetCurrentTransactionNestLevel();
	part->jobs = lappend(part->jobs, xj);
	MemoryContextSwitchTo(oldcxt);
}

static void
set_jobs_state(CtasParticipant *part, CtasJobState state)
{
	ListCell   *lc;

	foreach(lc, part->jobs)
	{
		XactJob    *xj = lfirst(lc);

		/* an in-doubt job is settled later by its gid */
		if (state == CTAS_JOB_PREPARED ||
			(state == CTAS_JOB_IN_DOUBT && part->gid))
		{
			if (part->gid)
				CtasJobSetGid(xj->ref, part->gid);
			else if (part->one_phase)
				CtasJobSetGid(xj->ref, "(one-phase commit)");
		}
		CtasJobSetState(xj->ref, state, NULL);
	}
}

static void
forget_participants(void)
{
	/* the memory goes with TopTransactionContext */
	participants = NIL;
}

/*
 * end_participants
 *		After the local commit or abort: let every participant finish or
 *		undo (never an error), and record the outcome of its jobs.  The list
 *		is detached first, so that a failure cannot make us walk it twice.
 */
static void
end_participants(bool commit)
{
	List	   *parts = participants;
	ListCell   *lc;

	forget_participants();
	foreach(lc, parts)
	{
		CtasParticipant *part = lfirst(lc);

		if (commit)
			part->routine->post_commit(part);
		else
			part->routine->abort(part);
		set_jobs_state(part, part->in_doubt ? CTAS_JOB_IN_DOUBT :
					   commit ? CTAS_JOB_COMMITTED : CTAS_JOB_ABORTED);
	}
}

/*
 * ctas_xact_callback
 *		The transaction callback of ctas_fed; see the file header.
 */
static void
ctas_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;
	int			order;

	if (participants == NIL)
		return;

	switch (event)
	{
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_COMMIT:
			for (order = 0; order < CTAS_COMMIT_ORDERS; order++)
			{
				foreach(lc, participants)
				{
					CtasParticipant *part = lfirst(lc);

					if (part->routine->commit_order != order)
						continue;
					part->routine->pre_commit(part);
					part->prepared = true;
					set_jobs_state(part, CTAS_JOB_PREPARED);
				}
				CtasFaultPointWait(pre_commit_fault_points[order]);
			}
			break;

		case XACT_EVENT_PRE_PREPARE:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot PREPARE a transaction that has written to an external catalog"),
					 errhint("Commit or roll back the transaction instead.")));
			break;

		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_COMMIT:
			/* the local commit record is durable here */
			CtasFaultPointWait("after_commit_record");
			end_participants(true);
			break;

		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_ABORT:
			end_participants(false);
			break;

		case XACT_EVENT_PREPARE:
			/* refused at PRE_PREPARE; nothing can get here */
			forget_participants();
			break;
	}
}

/*
 * ctas_subxact_callback
 *		Hand subtransaction commit and abort to every participant, with the
 *		nesting level that ends.
 */
static void
ctas_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;
	int			level;

	if (participants == NIL)
		return;
	if (event != SUBXACT_EVENT_PRE_COMMIT_SUB &&
		event != SUBXACT_EVENT_ABORT_SUB)
		return;

	level = GetCurrentTransactionNestLevel();
	foreach(lc, participants)
	{
		CtasParticipant *part = lfirst(lc);
		ListCell   *jc;

		part->routine->subxact(part, event, level);

		/* jobs of the ending level: aborted, or now the parent's */
		foreach(jc, part->jobs)
		{
			XactJob    *xj = lfirst(jc);

			if (xj->level < level)
				continue;
			if (event == SUBXACT_EVENT_ABORT_SUB)
				CtasJobSetState(xj->ref, CTAS_JOB_ABORTED, NULL);
			else
				xj->level = level - 1;
		}
	}
}
