/*-------------------------------------------------------------------------
 *
 * xact.h
 *		  The participants of the local transaction (xact.c): what the
 *		  statement layer asks of the one transaction callback of ctas_fed.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/xact.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_XACT_H
#define CTAS_XACT_H

#include "target.h"

/* in xact.c */
extern void CtasXactInit(void);
extern CtasParticipant *CtasJoinTransaction(CtasCatalog *catalog);
extern void CtasXactAddJob(CtasParticipant *part, CtasJobRef job);

#endif							/* CTAS_XACT_H */
