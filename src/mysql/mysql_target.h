/*-------------------------------------------------------------------------
 *
 * mysql_target.h
 *		  Private declarations of the MariaDB / MySQL target (src/mysql/).
 *
 * The target is split by concern; the extern blocks below, headed by the
 * file that defines them, are its map:
 *
 *	conn.c		libmariadb connections: connect and query through the
 *				non-blocking API with latch waits, the local-infile handler
 *				that serves only our own row stream, quoting, errors
 *	types.c		the type map and the encoder of LOAD DATA text
 *	writer.c	begin_load, create_table, put_row, end_load, DROP TABLE,
 *				EXPLAIN, listing, and the routine CtasMysqlTarget
 *	xact.c		pre_commit, post_commit, abort, subxact; durable records
 *	resolve.c	recovery from the durable records
 *	sync.c		continuous sync into MySQL: the target's CtasSyncApply
 *	verify.c	verify_sync's two sides for a sync into MySQL
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/mysql/mysql_target.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_MYSQL_TARGET_H
#define CTAS_MYSQL_TARGET_H

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "port/pg_crc32c.h"

#include "syncbatch.h"
#include "staged.h"
#include "target.h"

/* A connection to a MySQL catalog (conn.c); the MYSQL handle is private */
typedef struct MyConn MyConn;

/* Flags of CtasMyTryQuery */
#define MY_Q_CLEANUP	0x0001	/* commit/abort path: short deadline, never
								 * ended by an interrupt */

/* Size of one LOAD DATA statement's stream: bounded memory */
#define MY_CHUNK_BYTES	(4 * 1024 * 1024)

/* What a local value is, for the encoder (types.c) */
typedef enum MySrc
{
	MYS_INT,					/* int2, int4, int8: text output */
	MYS_FLOAT4,
	MYS_FLOAT8,
	MYS_NUMERIC,
	MYS_BOOL,
	MYS_TEXT,					/* text, varchar, bpchar, name, enum, uuid */
	MYS_BYTEA,
	MYS_DATE,
	MYS_TIMESTAMP,
	MYS_TIMESTAMPTZ,			/* written in UTC */
	MYS_TIME,
	MYS_JSON,					/* json, jsonb */
	MYS_ARRAY					/* written as JSON */
} MySrc;

/* One column as the encoder sees it */
typedef struct MyColumn
{
	const char *name;
	MySrc		src;
	FmgrInfo   *out;			/* output function of the local type */
	int			numeric_int;	/* MYS_NUMERIC: digits allowed before the
								 * point, or -1 */
	int			numeric_scale;	/* and after it */
} MyColumn;

/* What one statement did to the catalog in this transaction */
typedef enum MyActionKind
{
	MY_CREATE,					/* stage renamed to target at commit */
	MY_REPLACE,					/* target and stage swapped at commit */
	MY_DROP,					/* target renamed away, dropped after */
	MY_APPEND					/* rows in the XA transaction */
} MyActionKind;

/*
 * One action.  Publication is one atomic multi-pair RENAME that always
 * moves a table to "old": for create the marker (made with the staging
 * table), for replace and drop the target.  So "old exists" means
 * "published", whatever reply was lost.
 */
typedef struct MyAction
{
	CtasStagedAction base;		/* first (staged.h); stage: create and
								 * replace; marker: create, renamed to old;
								 * old: the name after publication */
	MyActionKind kind;
	char	   *branches;		/* parallel append: what the gids of the
								 * workers' XA branches begin with */
	int			nbranches;		/* and the highest branch number */
} MyAction;

/* State of the XA transaction of a participant */
typedef enum MyXaState
{
	MY_XA_NONE,					/* not started */
	MY_XA_ACTIVE,				/* XA START sent */
	MY_XA_PREPARING,			/* XA END / PREPARE sent: outcome unknown */
	MY_XA_PREPARED
} MyXaState;

/* Per transaction and user mapping: part->private */
typedef struct MyXact
{
	MyConn	   *conn;			/* DDL and staging loads (autocommit) */
	MyConn	   *xa_conn;		/* the XA transaction, or NULL */
	char	   *xa_gid;
	MyXaState	xa_state;
	int			xa_depth;		/* savepoints s2..s<depth> exist */
	CtasStaged	staged;			/* MyAction *, and the durable record */
	char	   *doomed;			/* why the transaction cannot commit (the
								 * branches of a rolled-back savepoint are
								 * left), or NULL */
} MyXact;

/* Per statement: load->private */
typedef struct MyLoad
{
	CtasLoad   *load;
	MyConn	   *conn;			/* where the rows go */
	MyXact	   *xs;				/* NULL unless atomic */
	MyAction   *action;
	bool		streaming;
	char	   *db;
	char	   *phys;			/* holds the target's definition now */
	char	   *into;			/* table the rows go into */
	char	   *load_sql;		/* LOAD DATA ... (columns) */
	MyColumn   *cols;
	StringInfoData bufs[2];		/* chunks: one being filled, one that the
								 * server may be reading */
	int			cur;			/* the one being filled */
	uint64		chunk_rows;		/* rows in it */
	bool		inflight;		/* the other one is being loaded */
	uint64		inflight_rows;
	uint64		block_rows;		/* streaming: rows since the last COMMIT */
	uint64		sent;			/* rows the server took */
	bool		parallel;		/* leader of a parallel load: the workers
								 * load into */
	uint64		base_rows;		/* rows into held before the workers' */
	bool		xa_later;		/* append: XA START before the first chunk
								 * (a branch without rows cannot commit) */
	char	   *gid;			/* parallel worker of an append: its branch */
	bool		xa_started;		/* and XA START was sent */
} MyLoad;

/* Durable records (xact.c, read by resolve.c) */
#define MY_RECORD_DIR		"pg_ctas_fed"	/* CTAS_RECORD_DIR of xrecord.h */
#define MY_RECORD_PREFIX	"my_"
#define MY_RECORD_MAGIC		"ctas_fed mysql"
#define MY_RECORD_VERSION	"2"	/* "1": actions without branches */
#define MY_RECORD_MAX_SIZE	(16 * 1024 * 1024)

/* in conn.c */
extern const CtasOption CtasMyServerOptions[];
extern MyConn *CtasMyConnect(const CtasCatalog *catalog, MemoryContext cxt,
							 bool cleanup);
extern void CtasMyClose(MyConn *conn);
extern const char *CtasMyCatalogName(MyConn *conn);
extern void CtasMyExec(MyConn *conn, const char *sql, const char *what);
extern List *CtasMyQuery(MyConn *conn, const char *sql, const char *what,
						 int *nfields);
extern bool CtasMyTryQuery(MyConn *conn, const char *sql, const char *what,
						   int flags, List **rows, char **detail,
						   unsigned int *errnum);
extern void CtasMyLoadStart(MyConn *conn, const char *sql,
							const char *data, size_t len);
extern void CtasMyLoadPoll(MyConn *conn);
extern uint64 CtasMyLoadFinish(MyConn *conn, unsigned int *warnings);
extern char *CtasMyFirstWarning(MyConn *conn);
extern bool CtasMyBroken(MyConn *conn);
extern void CtasMyKill(MyConn *victim, MyConn *via);
extern char *CtasMyQuoteIdent(const char *s);
extern char *CtasMyQname(const char *db, const char *table);
extern char *CtasMyLiteral(const char *s);
extern char *CtasMyDisplay(const char *db, const char *table);

/* in types.c */
extern void CtasMyMapColumn(CtasLoad *load, CtasColumn *col);
extern char *CtasMyColumnType(CtasLoad *load, CtasColumn *col);
extern MyColumn *CtasMySetupColumns(CtasLoad *load);
extern MyColumn *CtasMySyncColumns(int n, char **names, Oid *types);
extern char *CtasMyLoadSql(const char *qualified, MyColumn *cols, int n,
						   const char *extra, bool own_table);
extern void CtasMyPutValue(MyColumn *c, StringInfo buf, Datum v,
						   bool isnull);
extern char *CtasMyCreateSql(CtasLoad *load, const char *db,
							 const char *table);

/* in xact.c */
extern const char *const CtasMyActionNames[MY_APPEND + 1];
extern MyXact *CtasMyXact(CtasParticipant *part);
extern MyAction *CtasMyNewAction(CtasParticipant *part, MyXact *xs,
								 MyActionKind kind, const char *db,
								 const char *table);
extern void CtasMyRecordWrite(CtasParticipant *part, MyXact *xs);
extern MyConn *CtasMyXaBegin(CtasParticipant *part, MyXact *xs);
extern bool CtasMyCleanup(MyConn *conn, const char *sql, const char *what,
						  const char *object);
extern bool CtasMyUndoChecked(MyConn *conn, MyAction *a, char **why);
extern bool CtasMySettleBranches(MyConn *conn, const char *prefix, int nmax,
								 bool commit, char **why);
extern void CtasMyPreCommit(CtasParticipant *part);
extern void CtasMyPostCommit(CtasParticipant *part);
extern void CtasMyAbort(CtasParticipant *part);
extern void CtasMySubxact(CtasParticipant *part, SubXactEvent event,
						  int level);

/* in resolve.c */
extern List *CtasMyRecordParse(char *data, size_t len, const char **why);
extern void CtasMyResolve(CtasCatalog *catalog,
						  void (*emit) (void *arg, const char *object,
										const char *action),
						  void *arg);

/* in sync.c */
extern const CtasSyncApply CtasMySyncApply;

/* in verify.c */
extern char *CtasMySyncVerifyLocal(CtasSyncTarget *t, int col,
								   const char *expr);
extern void CtasMySyncVerifyRemote(CtasSyncTarget *t, const int *keys,
								   int level, const char *buckets, bool rows,
								   void (*emit) (void *arg, char **fields),
								   void *arg);

/* in writer.c: the routine, listed in targets.c */
extern const CtasTargetRoutine CtasMysqlTarget;

#endif							/* CTAS_MYSQL_TARGET_H */
