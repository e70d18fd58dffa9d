/*-------------------------------------------------------------------------
 *
 * sync.h
 *		  Continuous sync: a federated CTAS whose remote table keeps
 *		  following its query (DESIGN.md section 1.7).
 *
 *	check.c		statement time, first: eligibility of the query, the key
 *	statement.c	statement time: the job's records (publication,
 *				ctas_fed.syncs row), stop_sync
 *	tick.c		the resolver's side: starts the stream workers, drops
 *				the slots and publications of ended streams
 *	worker.c	after commit: the sync worker of a stream (slot,
 *				decoding loop)
 *	join.c		a stream's initial copy, joins, stopped jobs leaving,
 *				jobs held by a down catalog
 *	syncs.c		the job records (ctas_fed.syncs) as the worker reads and
 *				writes them, webhook events, the guard on target calls
 *	syncs_query.c	the other statements on ctas_fed.syncs, one accessor
 *				each (with syncs.c the only SQL that names that table)
 *	slot.c		a slot made with its consistent point's snapshot, a
 *				slot's position
 *	merge.c		the default streams of a database merged into one
 *	apply.c		the apply side of the sync worker: the messages of one
 *				peek applied to the target
 *	message.c	one message for one job: the query's expressions, the
 *				source row and key
 *	toast.c		unchanged TOAST values rebuilt, or the job failed
 *	ddl.c		schema changes in WAL order: the event trigger's logical
 *				messages, met by the worker between the changes
 *	follow.c	the schema changes a whole-row sync follows remotely,
 *				and their record
 *	copy.c		the copy's plain columns
 *	resync.c	resync(): the copy again from a new snapshot
 *	verify.c	verify_sync(): the check, run by the worker
 *	status.c	the workers' shared status, jobs view, metrics
 * sync_int.h is what the files of the folder share.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/sync.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_SYNC_H
#define CTAS_SYNC_H

#include "nodes/parsenodes.h"

#include "target.h"

/* prefix of the names of our publications and replication slots */
#define CTAS_SYNC_PREFIX		"ctas_fed_sync_"

/*
 * What the eligibility check learnt about the query of a sync CTAS
 * (sync/statement.c); lives in the load's memory context.
 */
typedef struct CtasSync
{
	Oid			relid;			/* the one source table */
	Query	   *query;			/* the analyzed SELECT */
	List	   *key_names;		/* remote key column names (String) */
	List	   *key_attnums;	/* source attnums of the key (int), same
								 * order */
	List	   *attnums;		/* source columns the query reads (int) */
	int			ncolumns;		/* columns of the query's result: the
								 * first load->columns (a target may add
								 * its own after them) */
} CtasSync;

/* "schema"."table" of a sync's target, as the metrics label it */
#define CTAS_SYNC_TARGET_LEN	(2 * NAMEDATALEN + 8)

/* One running sync, for the metrics (sync/worker.c) */
typedef struct CtasSyncMetric
{
	char		catalog[NAMEDATALEN];
	char		target[CTAS_SYNC_TARGET_LEN];
	char		slot_name[NAMEDATALEN];
	double		lag_bytes;		/* -1: no slot */
	double		wal_held_bytes; /* from its restart_lsn; -1: no slot */
	double		lag_seconds;	/* -1: not streaming yet */
	uint64		changes;		/* since the worker started */
	uint64		resyncs;		/* since the worker started */
	int64		verify_differences; /* of its last check, -1: none */
	double		verified_at;	/* Unix time of that check */
} CtasSyncMetric;

/* in sync/check.c */
extern void CtasSyncCheck(CtasLoad *load, Query *query, List *colnames);

/* in sync/statement.c */
extern void CtasSyncCreate(CtasLoad *load);
extern void CtasSyncExplain(CtasLoad *load, ExplainState *es);
extern bool CtasSyncStop(Oid serverid, const char *schema, const char *table);
extern void CtasSyncCheckTarget(Oid serverid, const char *schema,
								const char *table);
extern void CtasSyncCheckIdle(Oid serverid);

/* in sync/tick.c */
extern void CtasSyncTick(void);

/* in sync/syncs.c */
extern void CtasSyncUnpublish(const char *publication, Oid relid,
							  Oid userid, int64 sync_id);

/* in sync/partition.c */
extern void CtasSyncPartitionCheck(Oid relid, List *key_attnums);
extern char *CtasSyncPartitionPublication(const char *name, Oid relid,
										  bool joining);

/* in sync/copy.c */
extern AttrNumber *CtasSyncPlainColumns(Query *query, int ncolumns);
extern void CtasSyncPlainRow(TupleTableSlot *slot, int ncolumns,
							 const AttrNumber *attnums, Datum *values,
							 bool *nulls);

/* in sync/status.c */
extern void CtasSyncShmemRequest(void);
extern void CtasSyncShmemStartup(void);
extern bool CtasSyncStatusAttach(int64 id);
extern void CtasSyncStatusUse(int64 id);
extern void CtasSyncStatusRelease(int64 id);
extern void CtasSyncStatusForget(int64 id);
extern void CtasSyncStatusReport(uint64 rows, uint64 changes,
								 TimestampTz caught_up_at);
extern void CtasSyncStatusLabels(const char *catalog, const char *schema,
								 const char *table, const char *slot_name);
extern uint64 CtasSyncStatusRows(void);
extern void CtasSyncStatusResynced(int64 id);
extern void CtasSyncStatusCopied(int64 id, uint64 rows);
extern bool CtasSyncStatusAskVerify(int64 id, uint64 *ticket, pid_t *pid);
extern bool CtasSyncStatusVerifyDone(int64 id, uint64 ticket, int64 *check,
									 pid_t *pid);
extern int64 CtasSyncStatusVerifyWanted(uint64 *ticket);
extern void CtasSyncStatusVerified(int64 id, uint64 ticket, int64 check,
								   int64 differences);
extern int	CtasSyncMetricsSnapshot(CtasSyncMetric **out);
extern void CtasSyncStopDatabase(Oid dboid);
extern void CtasSyncKeepRestartNear(const char *slot_name);

#endif							/* CTAS_SYNC_H */
