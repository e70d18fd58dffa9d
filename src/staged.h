/*-------------------------------------------------------------------------
 *
 * staged.h
 *	  Staged publication (staged.c), for the targets that cannot prepare:
 *	  the actions of a participant, their states and savepoint levels,
 *	  their durable record, and the commit, abort and rollback walks over
 *	  them.  The target supplies its SQL through CtasStagedOps.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/staged.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_STAGED_H
#define CTAS_STAGED_H

#include "access/xact.h"
#include "nodes/pg_list.h"

#include "target.h"

/*
 * How far one action got, as Citus's RemoteTransactionState: what the
 * server holds of it, on which the target's undo and finish switch.
 */
typedef enum CtasStagedState
{
	CTAS_STAGED_STAGING,		/* recorded; the staging table is being
								 * created and loaded */
	CTAS_STAGED_LOADED,			/* end_load checked the staging table (a
								 * drop: recorded); nothing is published */
	CTAS_STAGED_PUBLISHING,		/* pre_commit sent a request that changes
								 * the target: what took effect is unknown
								 * until the server is asked */
	CTAS_STAGED_PUBLISHED		/* pre_commit published it */
} CtasStagedState;

/*
 * What every action of a staged publication has: the first member (base)
 * of the target's action, as TableScanDescData is of a table AM's scan.
 * Names are in the participant's context; NULL when the action has none.
 */
typedef struct CtasStagedAction
{
	char	   *db;
	char	   *table;			/* the target */
	char	   *stage;			/* the staging table */
	char	   *marker;			/* create: the commit marker */
	char	   *old;			/* where the target goes when published */
	int			level;			/* subtransaction nesting level */
	CtasStagedState state;
} CtasStagedAction;

/*
 * A participant's staged publication: a member of the target's
 * per-transaction state (part->private).
 */
typedef struct CtasStaged
{
	List	   *actions;		/* the target's actions, oldest first, each
								 * beginning with a CtasStagedAction */
	char		record_path[MAXPGPATH]; /* durable record, or "" */
	int			record_fd;		/* open on it, flock'd; or -1 */
} CtasStaged;

/*
 * What a target supplies: its SQL, run on one action at a time.  Each
 * callback is given the arg its begin returned.  None may raise an ERROR:
 * a failure is a WARNING, and sets CtasStagedCleanupFailed (or
 * part->in_doubt) so that the record stays for the resolver.
 */
typedef struct CtasStagedOps
{
	/*
	 * Before the actions are walked at commit (commit true) or abort: the
	 * target's own steps (kill a running load, finish its remote
	 * transaction), and the session the walk uses, returned as arg.  Runs
	 * in a short-lived context.  May be NULL.
	 */
	void	   *(*begin) (CtasParticipant *part, bool commit);

	/* after the local commit: drop what publication moved away */
	void		(*finish) (CtasParticipant *part, void *arg,
						   CtasStagedAction *a);

	/*
	 * abort, or the rollback of the subtransaction that made a: undo a,
	 * whatever state it reached.  A rollback keeps an action that the
	 * callback moves to a lower level.
	 */
	void		(*undo) (CtasParticipant *part, void *arg, CtasStagedAction *a,
						 bool subxact);

	/*
	 * The end of the subtransaction at level (event PRE_COMMIT_SUB or
	 * ABORT_SUB), before its actions are walked: the target's own steps
	 * (hand its open work to the parent, or roll its remote work back to
	 * the savepoint); on abort, in a short-lived context, returning the
	 * arg of undo.  In error recursion (trouble) nothing is walked, and
	 * the callback touches no server.  May be NULL.
	 */
	void	   *(*subxact) (CtasParticipant *part, SubXactEvent event,
							int level, bool trouble);
} CtasStagedOps;

/* Did a cleanup step fail since CtasStagedEnd (or the resolver) cleared it? */
extern bool CtasStagedCleanupFailed;

/* in staged.c */
extern void CtasStagedInit(CtasStaged *st, MemoryContext cxt);
extern CtasStagedAction *CtasStagedNewAction(CtasStaged *st,
											 MemoryContext cxt, Size size,
											 const char *db,
											 const char *table);
extern char *CtasStagedToken(void);
extern void CtasStagedRelease(CtasStaged *st);
extern void CtasStagedRemove(CtasStaged *st);
extern void CtasStagedDropMissing(CtasLoad *load, bool missing_ok,
								  const char *display);
extern void CtasStagedEnd(CtasParticipant *part, CtasStaged *st,
						  const CtasStagedOps *ops, bool commit);
extern void CtasStagedSubxact(CtasParticipant *part, CtasStaged *st,
							  const CtasStagedOps *ops, SubXactEvent event,
							  int level);

#endif							/* CTAS_STAGED_H */
