/*-------------------------------------------------------------------------
 *
 * workers_int.h
 *		  What the launcher (launcher.c) and the resolvers (resolver.c)
 *		  share: the resolver slots in shared memory.  Private to
 *		  src/workers/.
 *
 * Locking: CtasResolvers->lock protects every field of every slot and
 * launcher_latch/rescan; a slot's dboid changes only under it exclusively.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/workers/workers_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_WORKERS_INT_H
#define CTAS_WORKERS_INT_H

#include "datatype/timestamp.h"
#include "storage/latch.h"
#include "storage/lwlock.h"

#include "workers/workers.h"

#define RESOLVER_RESTART_SECS	5	/* after a resolver failed */

/* One database's resolver, in shared memory */
typedef struct ResolverSlot
{
	Oid			dboid;			/* InvalidOid: the slot is free */
	pid_t		pid;			/* the running resolver, or 0 */
	Latch	   *latch;			/* its latch while it runs */
	bool		wake;			/* resolve now: work was left in doubt */
	bool		wanted;			/* the extension is in use: start it */
	bool		no_extension;	/* its last start found no extension */
	TimestampTz paused_until;	/* not started again before */
} ResolverSlot;

typedef struct ResolverShared
{
	LWLock	   *lock;
	Latch	   *launcher_latch;
	bool		rescan;			/* read pg_database again */
	int			nslots;
	ResolverSlot slots[FLEXIBLE_ARRAY_MEMBER];
} ResolverShared;

/* in resolver.c */
extern ResolverShared *CtasResolvers;
extern ResolverSlot *CtasResolverFindSlot(Oid dboid);
extern ResolverSlot *CtasResolverAddSlot(Oid dboid);

#endif							/* CTAS_WORKERS_INT_H */
