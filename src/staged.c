/*-------------------------------------------------------------------------
 *
 * staged.c
 *		  Staged publication, for the targets that cannot prepare: each
 *		  action of the transaction (create, replace, append, drop) loads a
 *		  staging table under a scratch name, is recorded durably before its
 *		  first remote effect, is published at pre-commit (by rename: the
 *		  target's SQL), has what publication moved away dropped after the
 *		  local commit, and is undone on abort, or by the resolver from its
 *		  record after a crash.
 *
 *	new action	CtasStagedNewAction: in the participant's context, at the
 *				current subtransaction level, state STAGING; the target
 *				names its scratch tables (CtasStagedToken) and writes the
 *				record (xrecord.c) before it returns.
 *	pre_commit	the target's: LOADED -> PUBLISHING -> PUBLISHED.
 *	post_commit	CtasStagedEnd(commit): ops->begin, ops->finish of every
 *				action in statement order; the record goes unless a step
 *				failed.
 *	abort		CtasStagedEnd(abort): ops->begin, ops->undo of every action
 *				in reverse order; the record goes unless a step failed or
 *				the outcome is in doubt.
 *	subxact		CtasStagedSubxact: ops->subxact, then a committed
 *				subtransaction hands its actions to the parent level; a
 *				rolled-back one undoes its actions (never published yet) in
 *				reverse order and forgets them, but for those ops->undo
 *				moved to a lower level.
 *
 * Never a step that can fail at commit, abort or rollback: the callbacks
 * warn, and set CtasStagedCleanupFailed or part->in_doubt.  The target's
 * action begins with a CtasStagedAction (its member "base"), which is all
 * this file reads of it.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/staged.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "staged.h"
#include "xrecord.h"

bool		CtasStagedCleanupFailed = false;

/* close the record's descriptor (drops its lock); a reset callback */
static void
staged_release_callback(void *arg)
{
	CtasStagedRelease((CtasStaged *) arg);
}

/*
 * CtasStagedInit
 *		Make st empty, with no record, and close its record (if any) when
 *		cxt, the context st lives in, is reset or deleted.
 */
void
CtasStagedInit(CtasStaged *st, MemoryContext cxt)
{
	MemoryContextCallback *cb;

	st->actions = NIL;
	st->record_path[0] = '\0';
	st->record_fd = -1;
	cb = MemoryContextAlloc(cxt, sizeof(MemoryContextCallback));
	cb->func = staged_release_callback;
	cb->arg = st;
	MemoryContextRegisterResetCallback(cxt, cb);
}

/*
 * CtasStagedNewAction
 *		A new action of size bytes (the target's struct, beginning with a
 *		CtasStagedAction), zeroed, in cxt, on db.table, at the current
 *		nesting level, state STAGING, appended to st's actions.  The caller
 *		names its scratch tables, then writes the record.
 */
CtasStagedAction *
CtasStagedNewAction(CtasStaged *st, MemoryContext cxt, Size size,
					const char *db, const char *table)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	CtasStagedAction *a;

	Assert(size >= sizeof(CtasStagedAction));
	a = palloc0(size);
	a->db = pstrdup(db);
	a->table = pstrdup(table);
	a->level = GetCurrentTransactionNestLevel();
	a->state = CTAS_STAGED_STAGING;
	st->actions = lappend(st->actions, a);
	MemoryContextSwitchTo(old);
	return a;
}

/*
 * CtasStagedToken
 *		Eight random hex digits, for the names of scratch tables.  The rest
 *		of such a name (system identifier, xid, counter) can be guessed,
 *		and anyone who may create tables in the target database could
 *		create it first: our CREATE or RENAME would then fail, and undo
 *		would take the planted table for ours.  Palloc'd.
 */
char *
CtasStagedToken(void)
{
	uint32		r;

	if (!pg_strong_random(&r, sizeof(r)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random name for a scratch table")));
	return psprintf("%08x", r);
}

/* Close the record's descriptor, which drops its lock; never fails */
void
CtasStagedRelease(CtasStaged *st)
{
	CtasRecordClose(&st->record_fd);
}

/*
 * CtasStagedRemove
 *		The transaction is finished or undone: remove its record.  A
 *		failure is a WARNING (the resolver then finds nothing left to do).
 */
void
CtasStagedRemove(CtasStaged *st)
{
	CtasRecordRemove(st->record_path, &st->record_fd);
}

/*
 * CtasStagedDropMissing
 *		drop_table of a table that does not exist as this transaction sees
 *		it (display: its name as messages show it): a NOTICE with
 *		missing_ok (DROP TABLE IF EXISTS; the caller returns), else ERROR.
 */
void
CtasStagedDropMissing(CtasLoad *load, bool missing_ok, const char *display)
{
	if (missing_ok)
	{
		ereport(NOTICE,
				(errmsg("table \"%s\" does not exist in catalog \"%s\", skipping",
						display, load->catalog->name)));
		return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_TABLE),
			 errmsg("table \"%s\" does not exist in catalog \"%s\"",
					display, load->catalog->name)));
}

/*
 * CtasStagedEnd
 *		post_commit (commit) or abort of a staged publication: ops->begin,
 *		then ops->finish of every action in order, or ops->undo of every
 *		action in reverse order (and the actions are forgotten).  The
 *		record is removed when nothing failed (on abort: and nothing is in
 *		doubt), else kept for the resolver; its lock goes either way.
 *		Never an ERROR; nothing at all in error recursion (the resolver
 *		cleans up).
 */
void
CtasStagedEnd(CtasParticipant *part, CtasStaged *st,
			  const CtasStagedOps *ops, bool commit)
{
	MemoryContext cxt;
	MemoryContext old;
	void	   *arg = NULL;
	ListCell   *lc;
	int			i;

	if (in_error_recursion_trouble())
		return;
	if (commit)
		cxt = AllocSetContextCreate(part->cxt, "ctas_fed staged commit",
									ALLOCSET_SMALL_SIZES);
	else
		cxt = AllocSetContextCreate(part->cxt, "ctas_fed staged abort",
									ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	CtasStagedCleanupFailed = false;
	if (ops->begin)
		arg = ops->begin(part, commit);
	if (commit)
	{
		foreach(lc, st->actions)
			ops->finish(part, arg, lfirst(lc));
	}
	else
	{
		for (i = list_length(st->actions) - 1; i >= 0; i--)
			ops->undo(part, arg, list_nth(st->actions, i), false);
		st->actions = NIL;
	}
	/* what failed stays in the record, for the resolver */
	if (!CtasStagedCleanupFailed && (commit || !part->in_doubt))
		CtasStagedRemove(st);
	CtasStagedRelease(st);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/*
 * CtasStagedSubxact
 *		subxact of a staged publication.  Commit hands the actions of the
 *		level and deeper to the parent; abort (ROLLBACK TO SAVEPOINT, or an
 *		error in a subtransaction) undoes them in reverse order (ops->undo)
 *		and forgets them, but for those the callback moved to a lower
 *		level.  ops->subxact runs first, for the target's own steps.  Never
 *		an ERROR.
 *
 * The durable record goes on naming the undone actions until its next
 * version: they are its newest ones, their tables are gone, and neither
 * undo nor finish finds anything of theirs to act on.
 */
void
CtasStagedSubxact(CtasParticipant *part, CtasStaged *st,
				  const CtasStagedOps *ops, SubXactEvent event, int level)
{
	List	   *keep = NIL;
	MemoryContext cxt;
	MemoryContext old;
	void	   *arg = NULL;
	ListCell   *lc;
	int			i;

	if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
	{
		foreach(lc, st->actions)
		{
			CtasStagedAction *a = lfirst(lc);

			if (a->level >= level)
				a->level = level - 1;
		}
		if (ops->subxact)
			(void) ops->subxact(part, event, level, false);
		return;
	}
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	if (in_error_recursion_trouble())
	{
		if (ops->subxact)
			(void) ops->subxact(part, event, level, true);
		return;
	}
	cxt = AllocSetContextCreate(part->cxt, "ctas_fed staged rollback",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	if (ops->subxact)
		arg = ops->subxact(part, event, level, false);
	for (i = list_length(st->actions) - 1; i >= 0; i--)
	{
		CtasStagedAction *a = list_nth(st->actions, i);

		if (a->level >= level)
			ops->undo(part, arg, a, true);
	}
	MemoryContextSwitchTo(part->cxt);
	foreach(lc, st->actions)
	{
		CtasStagedAction *a = lfirst(lc);

		if (a->level < level)
			keep = lappend(keep, a);
	}
	st->actions = keep;
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}
