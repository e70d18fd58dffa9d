/*-------------------------------------------------------------------------
 *
 * sync_int.h
 *		  What the sync worker (sync/worker.c) and its apply side
 *		  (sync/apply.c) share: the job as the worker runs it, the query's
 *		  expressions, and the reading of one peek at the slot.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/sync_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_SYNC_INT_H
#define CTAS_SYNC_INT_H

#include "access/xlogdefs.h"
#include "executor/execdesc.h"
#include "nodes/execnodes.h"
#include "replication/logicalproto.h"
#include "utils/portal.h"

#include "sync/sync.h"

/*
 * The state of a continuous sync job (column ctas_fed.syncs.state); its
 * names are in the table of sync/syncs.c and in the column's CHECK.
 */
typedef enum CtasSyncState
{
	CTAS_SYNC_COPYING,
	CTAS_SYNC_STREAMING,
	CTAS_SYNC_STOPPED,
	CTAS_SYNC_FAILED
} CtasSyncState;

/*
 * SQL list of the names of the running states (CTAS_SYNC_COPYING and
 * CTAS_SYNC_STREAMING): must list exactly those names of the table in
 * sync/syncs.c.
 */
#define CTAS_SYNC_RUNNING_SQL "('copying', 'streaming')"

/* whether state is a running one (copying or streaming) */
#define CtasSyncStateRuns(state) \
	((state) == CTAS_SYNC_COPYING || (state) == CTAS_SYNC_STREAMING)

/* One job, as the worker runs it (job_cxt) */
typedef struct SyncJob
{
	int64		id;
	int64		stream_id;		/* the stream it is decoded in */
	int64		job_id;			/* in ctas_fed.jobs */
	TimestampTz created_at;
	Oid			owner;
	Oid			relid;
	Query	   *query;
	char	   *publication;	/* of the stream */
	char	   *slot_name;		/* of the stream */
	CtasSyncState state;
	int			ncols;			/* source columns the query reads */
	AttrNumber *attnums;
	char	  **attnames;		/* their names and types at creation */
	Oid		   *atttypes;
	FmgrInfo   *infuncs;
	Oid		   *ioparams;
	int		   *msgcol;			/* their place in the last Relation
								 * message, -1 before one */
	int		   *keycol;			/* index into attnums of each key column */
	TupleDesc	tupdesc;		/* of the source */
	const CtasSyncApply *apply;
	CtasSyncTarget target;
	bool		open;			/* target->open done */
	XLogRecPtr	applied;		/* from the remote */
	XLogRecPtr	stop_at;		/* valid: apply no source transaction that
								 * commits at or after it (sync/apply.c) */
	int			toast_rereads;	/* peeks read again in a row for an
								 * unchanged TOAST value (sync/toast.c) */

	bool		fail_on_ddl;	/* schema_changes = 'fail' */
	bool		whole_row;		/* the query takes the rows whole */
	bool		names_changed;	/* attnames follow a rename not stored yet */

	/* schema changes a whole-row sync follows (sync/ddl.c) */
	struct SyncFollow *follow;	/* what the last message asks, or NULL */
	bool		reshaped;		/* columns changed since the last save */
	struct SyncShape *before;	/* the columns before, while reshaped */
	CtasSyncAlter *recopy;		/* the remote table's changes at the copy
								 * under way (sync/reshape.c,
								 * CtasSyncReshapeForCopy), or NULL */
	int			nrecopy;
	List	   *schema_log;		/* followed changes not recorded yet
								 * (char *, in job_cxt) */
	XLogRecPtr	schema_failed_at;	/* valid: the job fails at the schema
									 * change of the source transaction
									 * committed there */

	/* branch speed: a remote commit in flight (sync/apply.c, Pipelining) */
	bool		commit_pending; /* sent, not confirmed (applied is) */
	XLogRecPtr	sent_lsn;		/* its lsn */
	XLogRecPtr	pending_safe;	/* the slot may go this far while it is */
	uint64		pending_changes;	/* changes it holds */
} SyncJob;

/* The query's expressions, ready to run (per transaction) */
typedef struct SyncEval
{
	EState	   *estate;
	ExprContext *econtext;
	ExprState  *qual;			/* NULL: no WHERE */
	int			nexprs;
	ExprState **exprs;
	TupleTableSlot *slot;		/* virtual, source row type */
	Datum	   *values;			/* one row's remote values */
	bool	   *nulls;
	char	  **keys;			/* a key as text, as pgoutput sent it */
	char	  **oldkeys;
	Datum	   *keyvals;		/* a key as Datums, for delete */
} SyncEval;


/*
 * What one peek at the slot gave (CtasSyncApplyPeek).  The slot may be
 * advanced to last_end once the remote transactions committed.
 */
typedef struct SyncPeekResult
{
	uint64		nrows;			/* rows (pgoutput messages) read */
	XLogRecPtr	last_end;		/* end lsn of the last source transaction
								 * applied or skipped, or invalid */
	bool		redo;			/* a remote transaction was given part of
								 * a source transaction that its job cannot
								 * apply: close the targets, peek again */
} SyncPeekResult;

/* the error in flight is permanent: the job fails (sync/toast.c) */
extern bool CtasSyncFailed;

/* the job of the stream that the worker works for when an error comes */
extern SyncJob *CtasSyncCurrentJob;

/* ereport(ERROR) that fails the job for good */
#define SYNC_FAIL(...) \
	do { CtasSyncFailed = true; ereport(ERROR, __VA_ARGS__); } while (0)

/* in sync/toast.c */
typedef struct SyncToast SyncToast;
extern SyncToast *CtasSyncToastBegin(SyncJob *job);
extern bool *CtasSyncToastUnchanged(SyncToast *toast);
extern const bool *CtasSyncToastResolve(SyncToast *toast, SyncJob *job,
										SyncEval *ev, bool key_changed,
										TransactionId xid);
extern void CtasSyncToastCheck(SyncToast *toast, SyncJob *job,
							   LogicalRepTupleData *newtup, char **oldkeys,
							   char **newkeys);
extern void CtasSyncToastEndXact(SyncToast *toast, TransactionId xid);
extern bool CtasSyncToastFinish(SyncToast *toast, SyncJob *job);
extern bool CtasSyncToastPending(SyncToast *toast);
extern void CtasSyncToastEnd(SyncToast *toast);

/* in sync/message.c */
extern SyncEval *CtasSyncBuildEval(SyncJob *job);
extern void CtasSyncFreeEval(SyncEval *ev);
extern bool CtasSyncEvaluate(SyncEval *ev, TupleTableSlot *slot);
extern bool CtasSyncRelationOk(SyncJob *job, LogicalRepRelation *rel,
							   int *bad);
extern void CtasSyncCheckRelationMessage(SyncJob *job,
										 LogicalRepRelation *rel);
extern char CtasSyncPeekedMessage(uint64 i, StringInfo msg);
extern int	CtasSyncFillSlot(SyncJob *job, SyncEval *ev,
							 LogicalRepTupleData *tup,
							 LogicalRepTupleData *old, bool *unchanged);
extern void CtasSyncTupleKeys(SyncJob *job, LogicalRepTupleData *tup,
							  LogicalRepTupleData *old, char **keys);
extern void CtasSyncDeleteKey(SyncJob *job, SyncEval *ev, char **keys);
extern bool CtasSyncSameKeys(SyncJob *job, char **a, char **b);

/* in sync/apply.c */
extern void CtasSyncApplyPeek(List *jobs, Portal portal,
							  SyncPeekResult *result);
extern void CtasSyncApplyWait(SyncJob *job);
extern void CtasSyncPacePeek(uint64 nrows, TimestampTz peek_at);

/* in sync/partition.c */
extern const char *const CtasSyncTextSettings[][2];
extern const int CtasSyncNTextSettings;
extern bool CtasSyncResyncWanted;
extern List *CtasSyncPartitionDeletes;
extern List *CtasSyncPartitionInserts;
extern bool CtasSyncPartitionTriggerOn(Oid relid);
extern void CtasSyncPartitionLock(List *jobs);
extern void CtasSyncPartitionCopy(SyncJob *job, Relation rel, bool parallel,
								  void (*row) (TupleTableSlot *slot, void *arg),
								  void *arg);
extern char *CtasSyncPartitionChange(SyncJob *job, List *lines,
									 const char *command);
extern void CtasSyncPartitionResync(int64 stream_id, Oid source,
									const char *why);
extern char CtasSyncPartitionIdentity(Relation leaf, Oid root,
									  AttrNumber **attnums, int *n);

/* in sync/partition_ddl.c */
struct CollectedCommand;
extern void CtasSyncPartitionLines(StringInfo buf, Oid source, Oid objid,
								   struct CollectedCommand *cmd);

/*
 * A job held out of the stream (sync/join.c), in CtasSyncJobCxt: after a
 * transient error of its catalog (CtasSyncCatchJobError), until retry_at;
 * or joining: "copying", its join copy run by a copy worker
 * (sync/joincopy.c) or waiting for one until retry_at, the stream's slot
 * held at hold_at meanwhile.
 */
struct BackgroundWorkerHandle;
typedef struct HeldJob
{
	int64		id;				/* sync_id */
	SyncJob    *job;			/* NULL: joining, not loaded here */
	TimestampTz retry_at;
	bool		copying;		/* joining: its copy is to be done */
	XLogRecPtr	hold_at;		/* joining: the slot's confirmed position
								 * when the stream first saw it copying */
	struct BackgroundWorkerHandle *copier;	/* its copy worker, or NULL */
} HeldJob;

/* in sync/join.c: jobs entering, leaving and held out of their stream */
extern bool CtasSyncInPeek;
extern List *CtasSyncHeldJobs;
extern void CtasSyncCheckSource(SyncJob *job, bool columns);
extern XLogRecPtr CtasSyncDoCopy(List *jobs);
extern List *CtasSyncLeaveStopped(int64 stream_id, const char *slot_name,
								  List **jobs);
extern bool CtasSyncCatchJobError(List **jobs);
extern bool CtasSyncRejoinHeld(List **jobs);
extern XLogRecPtr CtasSyncHeldPosition(XLogRecPtr confirmed);
extern bool CtasSyncCopiesPending(void);
extern void CtasSyncJoinCopy(SyncJob *job);

/*
 * in sync/joincopy.c: the copy worker of a join, and its launch.  At most
 * CTAS_SYNC_COPY_WORKERS copy workers per stream at once, outside the pool
 * of ctas_fed.max_sync_workers (as max_sync_workers_per_subscription
 * bounds PostgreSQL's tablesync workers apart from the apply workers).
 */
#define CTAS_SYNC_COPY_WORKERS	2

/*
 * in sync/partcopy.c: the copy of a partitioned source by parallel workers
 * of PostgreSQL, at most CTAS_SYNC_PARTITION_READERS per copy (so at most
 * CTAS_SYNC_COPY_WORKERS times as many per stream), each reading whole
 * partitions; also bounded by max_parallel_workers_per_gather (0: none)
 * and max_parallel_workers.
 */
#define CTAS_SYNC_PARTITION_READERS	2
extern void CtasSyncPartitionScan(Oid relid, TupleDesc rootdesc,
								  TupleTableSlot *rootslot,
								  void (*row) (TupleTableSlot *slot, void *arg),
								  void *arg);
extern bool CtasSyncPartitionCopyParallel(Relation rel, List *leaves,
										  void (*row) (TupleTableSlot *slot, void *arg),
										  void *arg);
/* field4 of the advisory lock tag held by whoever copies a job */
#define CTAS_LOCKTAG_JOIN_COPY	0xCF07
extern SyncJob *CtasSyncLoadJobAlone(int64 id);
extern void CtasSyncJoinCopied(List *ids, List **jobs);
extern void CtasSyncStartCopies(List **jobs);
extern void CtasSyncWorkerConnect(const char *appname);

/* in sync/statement.c */
extern void CtasSyncCheckRoleQuota(void);

/* in sync/resync.c */
extern char *CtasSyncResyncIfLost(List *jobs);
extern bool CtasSyncCopyStart(SyncJob *job);

extern void CtasSyncCopyEnd(SyncJob *job, bool rebuilding);

/* in sync/reshape.c */
extern void CtasSyncReshapeForCopy(SyncJob *job, XLogRecPtr consistent);
extern void CtasSyncReshapeSave(SyncJob *job);

/* in sync/verify.c */
extern void CtasSyncVerifyIfAsked(List *jobs);

/* in sync/ddl.c */
extern bool CtasSyncReadsInExpression(Query *query, AttrNumber attnum);
extern char *CtasSyncSchemaChange(SyncJob *job, const char *content, int len,
								  bool *mine);
extern void CtasSyncSaveNames(SyncJob *job);
extern bool CtasSyncSchemaTriggerOn(void);
extern List *CtasSyncDescribeTable(Oid relid);
extern char *CtasSyncIdentityReason(SyncJob *job, List *lines,
									const char *command, bool recopy);

/* in sync/follow.c */
extern char *CtasSyncWholeRowChange(SyncJob *job, List *lines,
									const char *command, const char *table,
									bool recopy);
extern CtasSyncAlter *CtasSyncPlannedChanges(SyncJob *job, int *n);
extern char *CtasSyncPlanRekey(SyncJob *job, List *lines,
							   const AttrNumber *ids, int nids,
							   const char *command, bool recopy);
extern int32 CtasSyncReadTypmod(Query *query, AttrNumber attnum);
extern char *CtasSyncSchemaFollow(SyncJob *job, bool remote);
extern void CtasSyncSchemaUndo(SyncJob *job);

/* in sync/schemalog.c */
extern void CtasSyncSaveShape(SyncJob *job);
extern void CtasSyncRecordSchemaFailure(SyncJob *job, const char *error);

/*
 * A worker that ended with an error is started again after this (sync/tick.c),
 * and a job held out of its stream by an error of its catalog is tried
 * again after it too (sync/worker.c).
 */
#define CTAS_SYNC_RESTART_SECS	5

/* field4 of the advisory lock tag that makes a worker its stream's only one */
#define CTAS_LOCKTAG_SYNC	0xCF02

/* field4 of the advisory lock tag of a stream (CtasSyncLockStream) */
#define CTAS_LOCKTAG_STREAM	0xCF04

/*
 * The pool of sync workers (ctas_fed.max_sync_workers), cluster-wide:
 * pool slot i is the advisory lock (database 0, i, CTAS_LOCKTAG_POOL) that
 * a running sync worker holds for its life; a resolver with a stream that
 * waits for a slot holds CTAS_LOCKTAG_POOL_WAIT in share mode, which tells
 * the running workers to yield after their time slice (sync/tick.c).
 */
#define CTAS_LOCKTAG_POOL		0xCF05
#define CTAS_LOCKTAG_POOL_WAIT	0xCF06
/* a sync worker serves its stream this long before it yields to a waiter */
#define CTAS_SYNC_SLICE_MS		10000

/* in sync/syncs.c: the pool */
extern int	CtasSyncPoolTake(void);
extern int	CtasSyncPoolFreeSlots(void);
extern bool CtasSyncPoolWaited(void);
extern void CtasSyncPoolWait(bool wait);

/* in sync/syncs.c: SPI as another user, search_path pg_catalog and pg_temp */
typedef struct CtasSyncSpiAs
{
	Oid			save_userid;
	int			save_sec;
	int			nestlevel;
} CtasSyncSpiAs;
extern void CtasSyncSpiBeginAs(Oid userid, CtasSyncSpiAs *as);
extern void CtasSyncSpiEndAs(CtasSyncSpiAs *as);

/* in sync/syncs.c: the job records, webhook events */
extern TupleDesc CtasSyncRecordedTupdesc(SyncJob *job);
extern MemoryContext CtasSyncJobCxt;
extern int64 CtasSyncLoadingId;
extern SyncJob *CtasSyncInTarget;
extern void CtasSyncSpiExec(const char *sql, int nargs, Oid *types,
							Datum *values, bool ro);
extern char *CtasSyncSpiText(int row, int col);
extern Datum CtasSyncSpiDatum(int row, int col);
extern void CtasSyncQueueEvent(int64 job_id, const CtasCatalog *catalog,
							   const char *schema, const char *table,
							   const char *state, uint64 rows,
							   const char *error, TimestampTz started_at);
extern void CtasSyncJobEvent(SyncJob *job, CtasSyncState state,
							 const char *error);
extern void CtasSyncJobEventNamed(SyncJob *job, const char *event,
								  const char *error);
extern SyncJob *CtasSyncLoadJob(int64 id);
extern List *CtasSyncLoadStream(int64 stream_id);
extern const char *CtasSyncStateName(CtasSyncState state);
extern const char *CtasSyncStateLiteral(CtasSyncState state);
extern CtasSyncState CtasSyncStateFromName(const char *name);
extern void CtasSyncSetState(int64 id, CtasSyncState state, const char *error,
							 XLogRecPtr lsn);
extern void CtasSyncSetError(int64 id, const char *error);
extern void CtasSyncSetStreamError(int64 stream_id, const char *error);
extern void CtasSyncLockStream(int64 stream_id);
extern void CtasSyncFailJob(int64 id, const char *error);
extern bool CtasSyncStopFailed(Oid serverid, const char *schema,
							   const char *table);
extern void CtasSyncOpenTarget(SyncJob *job);

/*
 * in sync/syncs_query.c: the statements on ctas_fed.syncs.  The ones that
 * take owner (CtasSyncTableOwner) run as that user, each connecting to SPI
 * itself (CtasSyncRunAs); the others in a transaction of the caller's
 * connected to SPI.
 */

/* a new job's row (CtasSyncInsertRow) */
typedef struct CtasSyncRow
{
	int64		sync_id;
	Oid			owner;			/* the user whose sync it is */
	Oid			server;
	const char *remote_schema;
	const char *remote_table;
	Oid			source;
	const char *query;			/* as text */
	const char *query_tree;		/* as a node tree */
	List	   *key_columns;	/* remote key column names (String) */
	List	   *source_key;		/* their source attnums (int) */
	List	   *source_attnums; /* source columns the query reads (int) */
	List	   *source_columns; /* their names (String) */
	List	   *source_types;	/* and types (int, type oids) */
	List	   *remote_columns; /* (String) */
	int64		job_id;
	int64		stream_id;
	int64		job_group;		/* 0: none */
	const char *name;			/* of the stream's publication and slot */
	const char *schema_changes;
	bool		whole_row;
	bool		streams;		/* the table has stream_name (0.3) */
	const char *stream_name;	/* NULL: the default stream */
} CtasSyncRow;

/* a running job, as stop_sync reads it (CtasSyncLockRunningInto) */
typedef struct CtasSyncRunning
{
	int64		sync_id;
	Oid			owner;
	char	   *publication;
	Oid			source;
	int64		stream_id;
} CtasSyncRunning;

extern uint64 CtasSyncRunAs(Oid userid, const char *sql, int nargs,
							Oid *argtypes, Datum *values, Datum *result);
extern Oid	CtasSyncTableOwner(bool missing_ok, Oid *relid);
extern bool CtasSyncHasStreams(Oid relid);
extern int64 CtasSyncNextId(Oid owner);
extern bool CtasSyncStreamRunsBesides(Oid owner, int64 stream_id,
									  int64 sync_id);
extern int64 CtasSyncFirstStreamNamed(Oid owner, const char *stream);
extern char *CtasSyncStreamPublication(Oid owner, const char *stream);
extern bool CtasSyncGroupStream(Oid owner, int64 group_id, int64 *stream_id);
extern void CtasSyncInsertRow(Oid owner, const CtasSyncRow *row);
extern CtasSyncRunning *CtasSyncLockRunningInto(Oid owner, Oid serverid,
												const char *schema,
												const char *table, int *n);
extern void CtasSyncMarkStopped(Oid owner, int64 sync_id);
extern char *CtasSyncRunningStateInto(Oid owner, Oid serverid,
									  const char *schema, const char *table);
extern bool CtasSyncFindBusy(Oid owner, Oid serverid, char **target,
							 char **state);
extern int64 CtasSyncCountRunningOf(Oid owner, Oid role);
extern bool CtasSyncIsPrimaryStream(int64 stream_id);
extern bool CtasSyncFindMergeable(int64 primary, int64 *stream_id,
								  char **publication, char **slot_name);
extern void CtasSyncMoveStream(int64 from, int64 to, const char *publication,
							   const char *slot_name);
extern void CtasSyncMarkCopyAgain(int64 stream_id, Oid source);
extern uint64 CtasSyncListForTick(void);
extern void CtasSyncRecordStreamNote(int64 stream_id, const char *note,
									 bool replace);
extern void CtasSyncClearError(int64 sync_id);
extern uint64 CtasSyncListRunningOfStream(int64 stream_id);
extern void CtasSyncAsOwnerBegin(CtasSyncSpiAs *as);
extern void CtasSyncParseTarget(text *target, Oid *serverid, char **schema,
								char **table);
extern int64 CtasSyncFindRunning(text *target, const char *verb, bool lock,
								 int64 *stream_id, CtasSyncState *state);
extern void CtasSyncMarkResync(int64 sync_id);
extern void CtasSyncStoreNames(int64 sync_id, Datum names);
extern void CtasSyncStoreShape(int64 sync_id, const Datum *shape);

/* in sync/merge.c */
extern bool CtasSyncMergeStreams(int64 primary, const char *publication,
								 const char *slot_name, List **jobs);

/* in sync/slot.c */
extern XLogRecPtr CtasSyncSlotSnapshot(const char *name, bool keep);
extern XLogRecPtr CtasSyncSlotConfirmed(const char *slot_name);
extern bool CtasSyncLockCopy(int64 id, bool wait);
extern void CtasSyncUnlockCopy(int64 id);

#endif							/* CTAS_SYNC_INT_H */
