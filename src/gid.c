/*-------------------------------------------------------------------------
 *
 * gid.c
 *		  Building and parsing the names that carry the local transaction,
 *		  and the commit status of that transaction.
 *
 * Everything a federated statement leaves on a catalog is named after the
 * local transaction that did it, so that recovery can decide it from the
 * commit log, durable evidence, whatever happened to the backend:
 *
 *	gid			ctas_fed_<system identifier>_<full xid>_<serial>
 *				a remote prepared transaction; serial tells apart the
 *				participants of one local transaction
 *	worker gid	ctas_fed_<system identifier>_<full xid>_<serial>_<load>_<n>
 *				the remote transaction of stream n (0: the leader's own,
 *				1..: a parallel worker's) of parallel load <load> of
 *				participant <serial>; decided like a gid, by the local
 *				transaction
 *	scratch		_ctas_fed_<kind>_<system identifier>_<full xid>_<serial>
 *				[_<tail>]
 *				a remote table that only one local transaction uses (a
 *				staging table, a table being replaced or dropped, a commit
 *				marker); serial counts the scratch names of the transaction
 *
 * The system identifier makes the names of this cluster its own: the
 * resolver never touches what another cluster left on a shared catalog.
 * Names are built only here and parsed only here.
 *
 * This file is at the bottom of the module: it calls nothing of ctas_fed.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/gid.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <limits.h>

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "utils/builtins.h"

#include "gid.h"

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
 * CtasGidMake
 *		The gid of a remote transaction of the current top-level transaction:
 *		ctas_fed_<system identifier>_<full local xid>_<serial>.  It names
 *		this cluster, so that the resolver touches only its own prepared
 *		transactions, and the local transaction, whose commit status decides
 *		the outcome.  The transaction must have an xid.  Palloc'd in the
 *		current memory context.
 */
char *
CtasGidMake(int serial)
{
	FullTransactionId fxid = GetTopFullTransactionId();

	return psprintf("%s" UINT64_FORMAT "_%d", CtasGidPrefix(),
					U64FromFullTransactionId(fxid), serial);
}

/*
 * CtasGidMakeWorker
 *		The worker gid of stream n (0: the leader's own, 1..: parallel worker
 *		n - 1) of the parallel load numbered load (a CtasScratchSerial) of
 *		participant serial of the current top-level transaction: the gid of
 *		CtasGidMake(serial) followed by _<load>_<n>.  With n < 0, the prefix
 *		that every worker gid of that load starts with (up to and including
 *		the last "_").  Works in a parallel worker, which shares the
 *		leader's transaction.  Palloc'd in the current memory context.
 */
char *
CtasGidMakeWorker(int serial, int load, int n)
{
	char	   *prefix = psprintf("%s_%d_", CtasGidMake(serial), load);

	return n < 0 ? prefix : psprintf("%s%d", prefix, n);
}

/*
 * CtasGidParse
 *		Is gid one that CtasGidMake or CtasGidMakeWorker built on this
 *		cluster?  If so, set *fxid to the full id of its local transaction
 *		and *serial to its (participant) serial and return true.  Never an
 *		ERROR.
 */
bool
CtasGidParse(const char *gid, uint64 *fxid, int *serial)
{
	const char *prefix = CtasGidPrefix();
	size_t		len = strlen(prefix);
	const char *p;
	char	   *end;
	long		n;

	if (strncmp(gid, prefix, len) != 0)
		return false;
	p = gid + len;
	if (!isdigit((unsigned char) *p))
		return false;
	errno = 0;
	*fxid = strtou64(p, &end, 10);
	if (errno != 0 || *end != '_' || !isdigit((unsigned char) end[1]))
		return false;
	p = end + 1;
	n = strtol(p, &end, 10);
	if (errno != 0 || n > INT_MAX)
		return false;
	*serial = (int) n;

	/* a worker gid: _<load>_<n> follow */
	if (*end == '_' && isdigit((unsigned char) end[1]))
	{
		(void) strtol(end + 1, &end, 10);
		if (errno != 0 || *end != '_' || !isdigit((unsigned char) end[1]))
			return false;
		(void) strtol(end + 1, &end, 10);
		if (errno != 0)
			return false;
	}
	return *end == '\0';
}

/*
 * CtasScratchSerial
 *		The next serial number for the scratch names of the current top-level
 *		transaction: 1, 2, ... in each transaction.  The transaction must
 *		have an xid.
 */
int
CtasScratchSerial(void)
{
	static FullTransactionId last_fxid = {0};
	static int	counter = 0;
	FullTransactionId fxid = GetTopFullTransactionId();

	if (!FullTransactionIdEquals(fxid, last_fxid))
	{
		last_fxid = fxid;
		counter = 0;
	}
	return ++counter;
}

/*
 * CtasScratchName
 *		The name of a remote object that only the current top-level
 *		transaction uses: _ctas_fed_<kind>_<system identifier>_<full local
 *		xid>_<serial>, followed by _<tail> unless tail is NULL.  kind says
 *		what the object is for ("stage", "old", "new", "drop"); serial comes
 *		from CtasScratchSerial, and names that share it belong to one
 *		statement.  The transaction must have an xid.  Palloc'd in the
 *		current memory context.
 */
char *
CtasScratchName(const char *kind, int serial, const char *tail)
{
	FullTransactionId fxid = GetTopFullTransactionId();

	return psprintf(CTAS_SCRATCH_PREFIX "%s_" UINT64_FORMAT "_" UINT64_FORMAT "_%d%s%s",
					kind, GetSystemIdentifier(),
					U64FromFullTransactionId(fxid), serial,
					tail ? "_" : "", tail ? tail : "");
}

/*
 * CtasIsScratchName
 *		Does name have the shape of a scratch name (CTAS_SCRATCH_PREFIX, in
 *		any case)?  Such names are kept for ctas_fed: a user table may not
 *		take one.  Never an ERROR.
 */
bool
CtasIsScratchName(const char *name)
{
	return pg_strncasecmp(name, CTAS_SCRATCH_PREFIX,
						  strlen(CTAS_SCRATCH_PREFIX)) == 0;
}

/*
 * CtasLocalXactStatus
 *		Commit status of the local transaction fxid.  UNKNOWN for an id that
 *		is in the future (e.g. after a restore from an older backup) or so
 *		old that the commit log no longer has it.  The checks are those of
 *		pg_xact_status(), which raises an error for an id in the future
 *		instead.
 */
CtasXactStatus
CtasLocalXactStatus(uint64 fxid_u64)
{
	FullTransactionId fxid = FullTransactionIdFromU64(fxid_u64);
	FullTransactionId next = ReadNextFullTransactionId();
	TransactionId xid = XidFromFullTransactionId(fxid);
	CtasXactStatus status;

	if (!FullTransactionIdPrecedes(fxid, next) ||
		U64FromFullTransactionId(next) - fxid_u64 > (uint64) MaxTransactionId / 2 ||
		!TransactionIdIsNormal(xid))
		return CTAS_XACT_UNKNOWN;

	/* the commit log must still cover xid, and stay so while we look */
	LWLockAcquire(XactTruncationLock, LW_SHARED);
	if (TransactionIdPrecedes(xid, ShmemVariableCache->oldestClogXid))
		status = CTAS_XACT_UNKNOWN;
	else if (TransactionIdIsCurrentTransactionId(xid) ||
			 TransactionIdIsInProgress(xid))
		status = CTAS_XACT_IN_PROGRESS;
	else if (TransactionIdDidCommit(xid))
		status = CTAS_XACT_COMMITTED;
	else
		status = CTAS_XACT_ABORTED;
	LWLockRelease(XactTruncationLock);
	return status;
}

/*
 * CtasScratchPrefix
 *		What the scratch names of kind made by this cluster begin with:
 *		_ctas_fed_<kind>_<system identifier>_.  Palloc'd.
 */
char *
CtasScratchPrefix(const char *kind)
{
	return psprintf(CTAS_SCRATCH_PREFIX "%s_" UINT64_FORMAT "_",
					kind, GetSystemIdentifier());
}

/*
 * CtasScratchParse
 *		The full local xid in a scratch name of kind made by this cluster
 *		(CtasScratchName); false when name is not one.  Never an ERROR.
 */
bool
CtasScratchParse(const char *name, const char *kind, uint64 *fxid)
{
	char	   *prefix = CtasScratchPrefix(kind);
	size_t		len = strlen(prefix);
	char	   *end;

	if (strncmp(name, prefix, len) != 0 ||
		!isdigit((unsigned char) name[len]))
		return false;
	errno = 0;
	*fxid = strtou64(name + len, &end, 10);
	return errno == 0 && *end == '_' && isdigit((unsigned char) end[1]);
}
