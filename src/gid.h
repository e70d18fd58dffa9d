/*-------------------------------------------------------------------------
 *
 * gid.h
 *		  Names that carry the local transaction (gid.c): the gids of remote
 *		  prepared transactions, the names of scratch tables, and the commit
 *		  status of a local transaction that such a name points at.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/gid.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_GID_H
#define CTAS_GID_H

/* what the name of every scratch table begins with */
#define CTAS_SCRATCH_PREFIX		"_ctas_fed_"

/* Commit status of a local transaction, from the commit log */
typedef enum CtasXactStatus
{
	CTAS_XACT_IN_PROGRESS,		/* running, or ours */
	CTAS_XACT_COMMITTED,
	CTAS_XACT_ABORTED,			/* also: crashed before its commit record */
	CTAS_XACT_UNKNOWN			/* in the future, or older than the commit
								 * log */
} CtasXactStatus;

/* in gid.c */
extern const char *CtasGidPrefix(void);
extern char *CtasGidMake(int serial);
extern char *CtasGidMakeWorker(int serial, int load, int n);
extern bool CtasGidParse(const char *gid, uint64 *fxid, int *serial);
extern int	CtasScratchSerial(void);
extern char *CtasScratchName(const char *kind, int serial, const char *tail);
extern bool CtasIsScratchName(const char *name);
extern char *CtasScratchPrefix(const char *kind);
extern bool CtasScratchParse(const char *name, const char *kind,
							 uint64 *fxid);
extern CtasXactStatus CtasLocalXactStatus(uint64 fxid);

#endif							/* CTAS_GID_H */
