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
 *				(commit_order 0), then last-resource targets publish
 *				(commit_order 1).  An error here aborts the whole local
 *				transaction, and every participant's abort undoes its work.
 *	COMMIT		finish: COMMIT PREPARED, drop replaced tables.  Never an
 *				error: a failure is a WARNING and the leftover is resolved
 *				later from durable local evidence.
 *	ABORT		undo: ROLLBACK [PREPARED], drop staging tables, undo renames.
 *				Never an error.
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

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"

#include "target.h"

static List *participants = NIL;
static int	scratch_counter = 0;

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
	(void) GetTopTransactionId();
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
 * CtasMakeGid
 *		The global transaction id of part's remote transaction:
 *		ctas_fed_<system identifier>_<full local xid>_<serial>.  It names
 *		this cluster, so that the resolver touches only its own prepared
 *		transactions, and the local transaction, whose commit status decides
 *		the outcome.  Palloc'd in part->cxt.
 */
char *
CtasMakeGid(CtasParticipant *part)
{
	FullTransactionId fxid = GetTopFullTransactionId();

	return MemoryContextStrdup(part->cxt,
							   psprintf("%s" UINT64_FORMAT "_%d",
										CtasGidPrefix(),
										U64FromFullTransactionId(fxid),
										part->serial));
}

/*
 * CtasGidPrefix
 *		"ctas_fed_<system identifier>_": what every gid of this cluster
 *		starts with.  Static storage.
 */
const char *
CtasGidPrefix(void)
{
	static char prefix[64];

	if (prefix[0] == '\0')
		snprintf(prefix, sizeof(prefix), "ctas_fed_" UINT64_FORMAT "_",
				 GetSystemIdentifier());
	return prefix;
}

/*
 * CtasScratchName
 *		A name for a remote object that only this transaction uses:
 *		_ctas_fed_<kind>_<system identifier>_<full local xid>_<n>.  kind is
 *		"stage" for staging tables, "old" for tables being replaced.  The
 *		resolver finds leftovers by this shape.  Palloc'd in the current
 *		memory context.
 */
char *
CtasScratchName(const char *kind)
{
	FullTransactionId fxid = GetTopFullTransactionId();

	return psprintf("_ctas_fed_%s_" UINT64_FORMAT "_" UINT64_FORMAT "_%d",
					kind, GetSystemIdentifier(),
					U64FromFullTransactionId(fxid), ++scratch_counter);
}

static void
forget_participants(void)
{
	/* the memory goes with TopTransactionContext */
	participants = NIL;
	scratch_counter = 0;
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
			for (order = 0; order <= 1; order++)
			{
				foreach(lc, participants)
				{
					CtasParticipant *part = lfirst(lc);

					if (part->routine->commit_order != order)
						continue;
					part->routine->pre_commit(part);
					part->prepared = true;
				}
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
			foreach(lc, participants)
			{
				CtasParticipant *part = lfirst(lc);

				part->routine->post_commit(part);
			}
			forget_participants();
			break;

		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_ABORT:
			foreach(lc, participants)
			{
				CtasParticipant *part = lfirst(lc);

				part->routine->abort(part);
			}
			forget_participants();
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

		part->routine->subxact(part, event, level);
	}
}
