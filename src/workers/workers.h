/*-------------------------------------------------------------------------
 *
 * workers.h
 *		  The ctas_fed background workers (src/workers/): what the rest of
 *		  the extension calls of them.
 *
 *	launcher.c	one per cluster: saves the job history, starts a resolver
 *				per database that has the extension
 *	resolver.c	one per database: settles what crashes and failed commits
 *				left in doubt, ticks the database's continuous syncs; the
 *				resolver slots in shared memory and how backends wake them
 *	notifier.c	one per cluster: status webhooks, Pushgateway pushes
 *	bgworker.c	the one place that fills a BackgroundWorker
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/workers/workers.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_WORKERS_H
#define CTAS_WORKERS_H

#include "postmaster/bgworker.h"

/* in launcher.c */
extern void CtasLauncherRegister(void);

/* in resolver.c */
extern void CtasResolverShmemRequest(void);
extern void CtasResolverShmemStartup(void);
extern void CtasResolverWake(Oid dboid, bool now);
extern void CtasResolverWakeAtCommit(void);
extern void CtasResolverNudge(Oid dboid);
extern void CtasResolverNudgeAtCommit(void);
extern void CtasResolverStopDatabase(Oid dboid);
extern bool CtasResolverLock(bool wait);
extern void CtasResolverUnlock(void);
extern bool CtasResolveCatalog(Oid serverid, Oid userid, bool check_usage,
							   void (*emit) (void *arg, const char *object,
											 const char *action),
							   void *arg, Oid *umid, char **error);

/* in notifier.c */
extern void CtasNotifierRegister(void);

/* in bgworker.c */
extern void CtasBackgroundWorkerInit(BackgroundWorker *worker,
									 const char *function_name,
									 const char *type, bool database,
									 BgWorkerStartTime start_time,
									 int restart_time);

#endif							/* CTAS_WORKERS_H */
