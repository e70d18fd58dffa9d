/*-------------------------------------------------------------------------
 *
 * guc.h
 *		  The settings of ctas_fed and the check that the library was
 *		  preloaded (guc.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/guc.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_GUC_H
#define CTAS_GUC_H

extern bool CtasPreloaded;
extern int	CtasMaxJobs;
extern int	CtasHistorySize;
extern int	CtasResolverNaptime;
extern int	CtasResolveTimeout;
extern char *CtasNotifyUrl;
extern char *CtasPushgatewayUrl;
extern bool CtasProgress;
extern int	CtasProgressInterval;
extern char *CtasFaultPoint;
extern void CtasFaultPointWait(const char *name);
extern bool CtasFaultPointOn(const char *name);
extern int	CtasMaxSyncsPerRole;
extern int	CtasSyncPeekChanges;
extern int	CtasMaxSyncWorkers;
extern void CtasDefineSettings(void);
extern void CtasCheckPreloaded(void);

#endif							/* CTAS_GUC_H */
