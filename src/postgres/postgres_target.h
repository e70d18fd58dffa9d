/*-------------------------------------------------------------------------
 *
 * postgres_target.h
 *		  Private declarations of the PostgreSQL target (src/postgres/).
 *
 * The extern blocks below, headed by the file that defines them, are the
 * target's module map:
 *
 *	connection.c	libpq connections: cache, connecting without blocking,
 *					remote notices, password rules
 *	exec.c			SQL and COPY on a connection: interruptible waits,
 *					results, remote errors, cancel, COPY with back-pressure
 *	typemap.c		PostgreSQL -> PostgreSQL type map (adapted to the
 *					remote's version), COPY text encoding
 *	deparse.c		the SQL text of a load: CREATE TABLE, ADD PRIMARY KEY,
 *					COPY, the remote types of column_types
 *	writer.c		the writer: load, DROP, EXPLAIN, listing; the routine
 *					CtasPostgresTarget
 *	xact.c			the remote transaction: BEGIN and savepoints, then the
 *					transaction steps (PREPARE, COMMIT PREPARED, ROLLBACK)
 *	parallel.c		parallel loads: the scratch table the workers load,
 *					the workers' prepared transactions
 *	resolve.c		recovery of prepared transactions
 *	sync.c			continuous sync: the apply side (CtasPgSyncApply)
 *	sync_batch.c	continuous sync: the statement queue, the batch of net
 *					changes applied as sets
 *	verify.c		continuous sync: the remote side of verify_sync()
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/postgres/postgres_target.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_POSTGRES_TARGET_H
#define CTAS_POSTGRES_TARGET_H

#include "libpq-fe.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "syncbatch.h"
#include "target.h"

/* how long the commit and abort paths wait for the remote, in ms */
#define CLEANUP_TIMEOUT_MS	30000

/* A cached connection, one per user mapping */
typedef struct CtasConn
{
	Oid			umid;			/* hash key: user mapping OID */
	PGconn	   *conn;			/* NULL when not connected */
	int			xact_depth;		/* 0: no remote transaction, 1: main, n>1:
								 * savepoint s<n> open */
	bool		in_copy;		/* a COPY FROM STDIN is open */
	bool		broken;			/* close at the next transaction start */
	bool		invalidated;	/* server or mapping changed */
	uint32		server_hashvalue;
	uint32		mapping_hashvalue;
	int			remote_version; /* PQserverVersion */
	int			max_prepared;	/* remote max_prepared_transactions, -1 */
} CtasConn;

/*
 * The worker gids of a parallel load (CtasGidMakeWorker), from the export
 * until its end_load commits them; the abort of the (sub)transaction of
 * level rolls them back.
 */
typedef struct CtasPgWorkerGids
{
	char	   *prefix;			/* CtasGidMakeWorker(serial, load, -1) */
	char	   *scratch;		/* the scratch table they load (qualified) */
	int			level;			/* local nesting level of the load */
} CtasPgWorkerGids;

/* in writer.c: the routine, listed in targets.c */
extern const CtasTargetRoutine CtasPostgresTarget;

/*
 * How far the remote transaction of a participant got, as Citus's
 * RemoteTransactionState.  pg_pre_commit, pg_post_commit, pg_abort and
 * pg_subxact move it; pg_abort and pg_post_commit are switches over it.
 */
typedef enum PgXactProgress
{
	PG_XACT_STARTED,			/* BEGIN done: the remote transaction is open */
	PG_XACT_PREPARING,			/* PREPARE TRANSACTION sent, no reply yet */
	PG_XACT_PREPARED,			/* PREPARE TRANSACTION done */
	PG_XACT_COMMITTING,			/* one-phase COMMIT sent, no reply yet */
	PG_XACT_COMMITTED,			/* one-phase COMMIT done */
	PG_XACT_LOST				/* a savepoint could not be rolled back: the
								 * connection was closed, which rolled back
								 * the remote transaction */
} PgXactProgress;

/* Per-transaction state of a participant (part->private) */
typedef struct PgXactState
{
	CtasConn   *entry;
	bool		two_phase;		/* the mode: PREPARE, or COMMIT in one phase */
	PgXactProgress progress;
	char	   *gid;			/* set at PREPARING */
	List	   *scratch;		/* qualified scratch tables of parallel
								 * loads, in part->cxt */
	PGconn	   *side;			/* parallel loads: the leader's autocommit
								 * connection for scratch tables and
								 * worker gids, closed at the end */
	List	   *workers;		/* CtasPgWorkerGids not settled yet */
} PgXactState;

/* in connection.c */
extern const CtasOption CtasPgServerOptions[];
extern CtasConn *CtasPgGetConnection(CtasCatalog *catalog);
extern CtasConn *CtasPgTryGetConnection(CtasCatalog *catalog);
extern void CtasPgDisconnect(CtasConn *entry);
extern bool CtasPgBrokenAtStart(CtasConn *entry, CtasCatalog *catalog);
extern PGconn *CtasPgConnectFresh(CtasCatalog *catalog);
extern void CtasPgCloseFresh(PGconn *conn);

/* in exec.c */
extern bool CtasPgWaitSocket(PGconn *conn, int events, TimestampTz deadline,
							 bool interruptible);
extern PGresult *CtasPgGetResult(PGconn *conn, TimestampTz deadline,
								 bool *timed_out);
extern void CtasPgReportError(int elevel, PGresult *res, PGconn *conn,
							  CtasCatalog *catalog, const char *sql);
extern void CtasPgExec(PGconn *conn, CtasCatalog *catalog, const char *sql);
extern PGresult *CtasPgRun(PGconn *conn, CtasCatalog *catalog, const char *sql);
extern PGresult *CtasPgQuery(PGconn *conn, CtasCatalog *catalog,
							 const char *sql);
extern bool CtasPgExecBounded(PGconn *conn, const char *sql, int timeout_ms,
							  char **errmsg_out);
extern bool CtasPgCancel(PGconn *conn, bool in_copy, int timeout_ms);
extern void CtasPgPutCopyData(PGconn *conn, CtasCatalog *catalog,
							  const char *data, int len);
extern uint64 CtasPgEndCopy(PGconn *conn, CtasCatalog *catalog,
							const char *sql);

/* in parallel.c */
extern void CtasPgTakeScratch(CtasLoad *load, PGconn *conn,
							  const char *scratch, const char *qualified,
							  bool created, int committed);
extern void CtasPgDropScratch(CtasCatalog *catalog, PGconn *conn,
							  List **scratch);
extern int	CtasPgCommitWorkers(CtasCatalog *catalog, PGconn *conn,
								const char *prefix);
extern bool CtasPgRollbackWorkers(CtasCatalog *catalog, PGconn *conn,
								  List **pending, int level);
extern void CtasPgSubCommitWorkers(List *pending, int level);

/* in copy.c */
extern void CtasPgCopyHeader(StringInfo buf, bool binary);
extern void CtasPgCopyTrailer(StringInfo buf, bool binary);
extern int	CtasPgCopyRowStart(StringInfo buf, bool binary, int ncolumns);
extern void CtasPgCopyField(StringInfo buf, bool binary, int i,
							FmgrInfo *func, Datum value, bool isnull);
extern void CtasPgCopyRowEnd(StringInfo buf, bool binary, int nestlevel);

/* in typemap.c */
extern void CtasPgAppendCopyText(StringInfo buf, const char *s);
extern char *CtasPostgresRemoteType(Oid typid, int32 typmod, bool *same_type);
extern char *CtasPgRemoteVersion(PGconn *conn);
extern void CtasPgAdaptColumns(CtasLoad *load, PGconn *conn);
extern bool CtasPgBinarySafe(Oid typid, int version);
extern int	CtasPgBeginTextOutput(void);
extern void CtasEndTextOutput(int nestlevel);

/* in deparse.c */
extern char *CtasPgQualifiedName(CtasLoad *load);
extern char *CtasPgCreateTableSql(CtasLoad *load, const char *qualified);
extern char *CtasPgPrimaryKeySql(CtasLoad *load);
extern char *CtasPgCopySql(CtasLoad *load, const char *qualified,
						   bool binary);

/* in sync.c */
extern const CtasSyncApply CtasPgSyncApply;

/* in pipeline.c */
extern void CtasPgPipelineSend(PGconn *conn, CtasCatalog *catalog,
							   List *statements);
extern void CtasPgPipelineFinish(PGconn *conn, CtasCatalog *catalog,
								 List *statements);

/* in sync_sql.c: the statements of a sync's apply, see there */
typedef struct CtasPgSyncSql
{
	char	   *column_list;	/* "a", "b", ... */
	char	   *copy;			/* COPY of the initial copy */
	char	   *batch_create;	/* CREATE TEMP TABLE of the batch table */
	char	   *batch_copy;		/* COPY into it: columns, kind, order,
								 * unchanged */
	const char *batch_truncate; /* TRUNCATE it */
	char	   *batch_source;	/* the batch as the statements read it */
	char	   *apply_delete;	/* DELETE ... USING, kind 'd' */
	char	   *apply_upsert;	/* INSERT ... ON CONFLICT, kind 'u' */
	char	   *apply_unchanged;	/* UPDATE, kind 'm'; NULL: all keys */
	char	   *count_unchanged;	/* rows of kind 'm' that have their row */
} CtasPgSyncSql;
extern void CtasPgSyncBuildSql(CtasPgSyncSql *sql, CtasSyncTarget *t,
							   const char *qualified, bool binary);

/*
 * in sync.c: the state of a synced table, opened there and filled and
 * sent by sync_batch.c
 */
/* bytes of COPY data collected before they are handed to libpq */
#define COPY_CHUNK			(64 * 1024)

/* the batch table's columns after the remote table's (sync_sql.c) */
#define BATCH_EXTRA		3

typedef struct PgSyncState
{
	PGconn	   *conn;
	char	   *qualified;		/* "schema"."table" */
	char	   *progress;		/* "schema"._ctas_fed_sync_progress */
	List	   *queue;			/* SQL strings not sent yet */
	MemoryContext cxt;			/* the queue; reset after each send */
	bool		pending;		/* a pipeline sent, its results not read */
	List	   *sent;			/* its statements, in sent_cxt */
	MemoryContext sent_cxt;
	FmgrInfo   *out;			/* output function of each column */
	FmgrInfo   *send;			/* send function of each column, if binary */
	FmgrInfo	extra_out[BATCH_EXTRA]; /* of kind, order, unchanged */
	FmgrInfo	extra_send[BATCH_EXTRA];
	CtasPgSyncSql sql;			/* the statements (sync_sql.c) */
	bool		binary;			/* the remote has the local types */
	bool		has_key;		/* the remote table has its primary key */
	char	   *missing;		/* a column of t the remote table lacks (a
								 * followed DROP COLUMN whose new columns
								 * were not stored yet: nothing is written
								 * until they are), or NULL */
	bool		in_copy;		/* the initial copy's COPY is open */
	uint64		copy_rows;
	StringInfoData copy_buf;	/* COPY data not handed to libpq yet */
	CtasSyncBatch batch;		/* the net change per key (syncbatch.c) */
} PgSyncState;

/* in sync_batch.c: the queue of statements, the batch applied */
extern void CtasPgSyncEnqueue(CtasSyncTarget *t, char *sql);
extern void CtasPgSyncFinishPending(CtasSyncTarget *t);
extern void CtasPgSyncSendQueue(CtasSyncTarget *t);
extern void CtasPgSyncSendQueueAsync(CtasSyncTarget *t);
extern void CtasPgSyncEnqueueAndMaybeSend(CtasSyncTarget *t, char *sql);
extern void CtasPgSyncStartCopy(CtasSyncTarget *t, const char *sql);
extern void CtasPgSyncBatchBound(CtasSyncTarget *t);
extern void CtasPgSyncApplyBatch(CtasSyncTarget *t);

/* in verify.c: verify of a continuous sync */
extern char *CtasPgSyncVerifyLocal(CtasSyncTarget *t, int col,
								   const char *expr);
extern void CtasPgSyncVerifyRemote(CtasSyncTarget *t, const int *keys,
								   int level, const char *buckets, bool rows,
								   void (*emit) (void *arg, char **fields),
								   void *arg);

/* in resolve.c */
extern void CtasPgResolve(CtasCatalog *catalog,
						  void (*emit) (void *arg, const char *object,
										const char *action),
						  void *arg);

/* in xact.c */
extern const char *CtasPgTwoPhaseSetting(CtasCatalog *catalog);
extern PgXactState *CtasPgXactState(CtasParticipant *part);
extern void CtasPgPreCommit(CtasParticipant *part);
extern void CtasPgPostCommit(CtasParticipant *part);
extern void CtasPgAbort(CtasParticipant *part);
extern void CtasPgSubxact(CtasParticipant *part, SubXactEvent event,
						  int level);

#endif							/* CTAS_POSTGRES_TARGET_H */
