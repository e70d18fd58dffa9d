/*-------------------------------------------------------------------------
 *
 * clickhouse.h
 *		  Private declarations of the ClickHouse target (src/clickhouse/).
 *
 * The target is split by concern; the extern blocks below, headed by the
 * file that defines them, are its map:
 *
 *	client.c	the HTTP protocol of ClickHouse over src/http/curl.c; quoting;
 *				the clients of a cluster's shards
 *	answer.c	the answers: exceptions, their SQLSTATE, safe remote text,
 *				the errors of a failed request
 *	types.c		ClickHouse type names and the type map
 *	ddl.c		quoted names, small results, table options, CREATE TABLE
 *	rowbinary.c	the RowBinary encoder
 *	stage.c		the steps of a load on one server: actions, staging
 *				tables, the INSERT stream, the count
 *	writer.c	begin_load, create_table, put_row, end_load, DROP TABLE,
 *				EXPLAIN, listing, and the routine CtasClickHouseTarget
 *	cluster.c	cluster catalogs: shards, the sharding key, routing, the
 *				per-shard and Distributed tables of a load
 *	xact.c		pre_commit, post_commit, abort, subxact
 *	record.c	the durable records of the transactions
 *	resolve.c	recovery from the durable records
 *	sync.c		continuous sync: the apply side (CtasChSyncApply)
 *	sync_rows.c	continuous sync: a transaction's kept changes, the rows
 *				written
 *	verify.c	continuous sync: verify_sync()
 *
 * At most once: every request that changes something is sent once (client.c
 * never lets libcurl resend it); after a failure whose outcome is unknown
 * the server is asked what happened (system.tables, row counts).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/clickhouse.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_CLICKHOUSE_H
#define CTAS_CLICKHOUSE_H

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "executor/tuptable.h"
#include "port/pg_crc32c.h"
#include "utils/tuplesort.h"

#include "http/curl.h"
#include "staged.h"
#include "target.h"

/* ClickHouse HTTP client (client.c) */
typedef struct CtasChHttp CtasChHttp;
typedef struct CtasChHttpStream CtasChHttpStream;

/* Flags of CtasChHttpTryQuery */
#define CTAS_HTTP_CLEANUP		0x0001	/* commit/abort path: short deadline,
										 * never aborted by an interrupt */
#define CTAS_HTTP_MISSING_OK	0x0002	/* report "unknown table/database"
										 * as success with a NULL result */

/* Server version, read once per client */
typedef struct CtasChHttpVersion
{
	int			major;
	int			minor;
	int			patch;
	const char *text;			/* as the server printed it */
} CtasChHttpVersion;

/* the client's state (client.c; its answers are read by answer.c) */
struct CtasChHttp
{
	MemoryContext cxt;
	char	   *catalog;		/* catalog name, for messages */
	char	   *base_url;		/* scheme://host[:port], no slash */
	char	   *user;			/* or NULL */
	char	   *password;		/* or NULL; never printed */
	long		connect_timeout_ms;
	long		timeout_ms;		/* inactivity limit */
	int			timeout_s;		/* the same, for messages */
	CtasCurl   *xfer;			/* reused for queries, or NULL */
	CtasChHttpVersion *version;	/* read once, or NULL */
	char	   *settings;		/* "&name=value..." on every URL, or NULL */
	char		inflight[96];	/* query_id of the query on xfer, or "" */
	bool		unresponsive;	/* a request or KILL QUERY got no answer */
};

#define CH_MAX_REMOTE_TEXT			1000	/* bytes of remote text shown */
#define CH_MAX_SQL_TEXT				300 /* bytes of SQL in a context */

/* A failed request, described for an ereport */
typedef struct ChFailure
{
	int			sqlstate;
	char	   *detail;
	long		not_clickhouse; /* HTTP status of a foreign response, or 0 */
} ChFailure;

/* in writer.c: the routine, listed in targets.c */
extern const CtasTargetRoutine CtasClickHouseTarget;

/* in sync.c: continuous sync */
extern const CtasSyncApply CtasChSyncApply;

/* in verify.c: resync of a continuous sync */
extern char *CtasChSyncVerifyLocal(CtasSyncTarget *t, int col,
								   const char *expr);
extern void CtasChSyncVerifyRemote(CtasSyncTarget *t, const int *keys,
								   int level, const char *buckets, bool rows,
								   void (*emit) (void *arg, char **fields),
								   void *arg);

/* in answer.c */
extern bool CtasChCheckResponse(CtasChHttp *http, CtasCurl *t,
								CtasCurlResult rr, ChFailure *f,
								bool *missing);
extern char *CtasChSanitize(const char *s, size_t len, size_t cap);
extern void CtasChRaise(CtasChHttp *http, const char *what, const char *sql,
						ChFailure *f) pg_attribute_noreturn();
extern void CtasChAfterInterrupt(CtasChHttp *http, const char *what,
								 const char *sql) pg_attribute_noreturn();

/* in client.c */
extern const CtasOption CtasChServerOptions[];
extern CtasChHttp *CtasChHttpCreate(const CtasCatalog *catalog,
									MemoryContext cxt);
extern CtasChHttp *CtasChHttpCreateShard(const CtasCatalog *catalog,
										 const char *url, int shard,
										 MemoryContext cxt);
extern struct ChCluster *CtasChClusterOpen(const CtasCatalog *catalog,
										   MemoryContext cxt);
extern const char *CtasChHttpCatalogName(CtasChHttp *http);
extern const CtasChHttpVersion *CtasChHttpServerVersion(CtasChHttp *http);
extern bool CtasChHttpServerVersionKnown(CtasChHttp *http);
extern bool CtasChHttpVersionAtLeast(CtasChHttp *http, int major, int minor);
extern void CtasChHttpAddSetting(CtasChHttp *http, const char *name,
								 const char *value);
extern char *CtasChHttpQuery(CtasChHttp *http, const char *sql,
							 const char *what);
extern void CtasChHttpInsert(CtasChHttp *http, const char *sql,
							 const char *data, size_t len, const char *what);
extern bool CtasChHttpTryQuery(CtasChHttp *http, const char *sql,
							   const char *what, int flags,
							   char **result, char **errdetail);
extern void CtasChHttpKillQuery(CtasChHttp *http, const char *query_id);
extern void CtasChAppendIdent(StringInfo buf, const char *s);
extern void CtasChAppendLiteral(StringInfo buf, const char *s);

extern CtasChHttpStream *CtasChHttpStreamOpen(CtasChHttp *http, const char *sql,
											  const char *what,
											  MemoryContext cxt);
extern void CtasChHttpStreamWatch(CtasChHttpStream *stream,
								CtasChHttpStream **slot);
extern void CtasChHttpStreamUnwatch(CtasChHttpStream *stream);
extern void CtasChHttpStreamOnFailure(CtasChHttpStream *stream,
									  void (*cb) (void *arg), void *arg);
extern StringInfo CtasChHttpStreamBuffer(CtasChHttpStream *stream);
extern void CtasChHttpStreamFlush(CtasChHttpStream *stream);
extern void CtasChHttpStreamFinish(CtasChHttpStream *stream);
extern void CtasChHttpStreamClose(CtasChHttpStream *stream);
extern const char *CtasChHttpStreamQueryId(CtasChHttpStream *stream);

/* Size at which CtasChHttpStreamFlush hands the buffer to the socket */
#define CTAS_HTTP_STREAM_CHUNK	(1024 * 1024)

/* ClickHouse types we can write */
typedef enum ChKind
{
	CHK_INT8,
	CHK_INT16,
	CHK_INT32,
	CHK_INT64,
	CHK_UINT8,
	CHK_UINT16,
	CHK_UINT32,
	CHK_UINT64,
	CHK_FLOAT32,
	CHK_FLOAT64,
	CHK_DECIMAL,
	CHK_STRING,
	CHK_FIXEDSTRING,
	CHK_DATE,
	CHK_DATETIME,
	CHK_UUID,
	CHK_ENUM8,
	CHK_ENUM16,
	CHK_ARRAY
} ChKind;

/* A parsed ClickHouse type */
typedef struct ChType
{
	ChKind		kind;
	bool		nullable;		/* Nullable(...) */
	bool		lowcard;		/* LowCardinality(...): same wire format */
	int			precision;		/* Decimal */
	int			scale;			/* Decimal */
	int			length;			/* FixedString */
	char	   *tz;				/* DateTime('tz'), or NULL */
	int			nenum;			/* Enum8/16 */
	char	  **enum_names;
	int		   *enum_values;
	struct ChType *elem;		/* Array */
} ChType;

/* What a local value is, for the encoders */
typedef enum ChSrc
{
	SRC_INT2,
	SRC_INT4,
	SRC_INT8,
	SRC_FLOAT4,
	SRC_FLOAT8,
	SRC_NUMERIC,
	SRC_BOOL,
	SRC_TEXT,					/* text, varchar, bpchar */
	SRC_NAME,
	SRC_BYTEA,
	SRC_DATE,
	SRC_TIMESTAMP,				/* timestamp and timestamptz */
	SRC_UUID,
	SRC_ARRAY,
	SRC_OTHER					/* anything else: its text output */
} ChSrc;

struct ChColumn;

/* How one value (a column, or an array element) is encoded */
typedef struct ChEnc
{
	ChType	   *type;
	ChSrc		src;
	Oid			typid;			/* local type (domains stripped) */
	FmgrInfo	out;			/* its output function */
	bool		via_text;		/* convert through text first */
	FmgrInfo	in;				/* input function of the canonical type */
	Oid			in_ioparam;
	ChSrc		in_src;
	struct ChEnc *elem;			/* Array */
	int16		elmlen;
	bool		elmbyval;
	char		elmalign;
	struct ChColumn *col;
} ChEnc;

typedef struct ChColumn
{
	const char *name;
	bool		key;			/* sorting, partition or primary key */
	bool		frac_notice;	/* NOTICE about fractional seconds given */
	bool		time_notice;	/* NOTICE about a dropped time of day given */
	ChEnc		enc;
} ChColumn;

/* What one statement did to the catalog in this transaction */
typedef enum ChActionKind
{
	CH_CREATE,					/* stage renamed to target at commit */
	CH_REPLACE,					/* target renamed away, stage renamed in */
	CH_APPEND,					/* stage's rows moved into target */
	CH_DROP						/* target renamed away, dropped after */
} ChActionKind;

/*
 * One action (staged.h: base, first, holds its names, level and state;
 * stage is NULL for CH_DROP, old is set for replace and drop, marker for
 * create, see CtasChPreCommit).  An append with no rows to move stays
 * CTAS_STAGED_LOADED at pre-commit.
 */
typedef struct ChAction
{
	CtasStagedAction base;		/* first */
	ChActionKind kind;
	char	   *source;			/* append: table the stage copies */
	int			shard;			/* cluster: shard (from 1) it is on; 0: the
								 * server of the catalog's url */
	uint64		rows;
} ChAction;

/* Most shards a cluster catalog may have */
#define CH_MAX_SHARDS		64

/*
 * The cluster of a catalog with the server options cluster and
 * shard_urls (cluster.c), in part->cxt (or the resolver's context).
 */
typedef struct ChCluster
{
	char	   *name;			/* of remote_servers */
	int			nshards;
	char	  **urls;			/* [nshards], shard_num order */
	CtasChHttp **http;			/* [nshards] */
	int			nslots;			/* sum of the shards' weights */
	int		   *slot_shard;		/* [nslots]: slot -> shard, from 1 */
	bool		checked;		/* against system.clusters */
} ChCluster;

/* Per transaction and user mapping: part->private */
typedef struct ChXact
{
	CtasChHttp *http;			/* in part->cxt */
	ChCluster  *cluster;		/* cluster catalog, or NULL */
	CtasStaged	staged;			/* ChAction *, and the durable record */
	/* open INSERTs, watched, by shard (0: url); or NULL */
	CtasChHttpStream *stream[CH_MAX_SHARDS + 1];
	char	   *stream_qid[CH_MAX_SHARDS + 1];	/* until they are closed */
	int			stream_level;
} ChXact;

/* A sharding expression ctas_fed can compute (cluster.c) */
typedef enum ChShardFunc
{
	CH_SHARD_RAND,				/* rand() */
	CH_SHARD_VALUE,				/* an integer column */
	CH_SHARD_INTHASH64,			/* intHash64(column) */
	CH_SHARD_CITYHASH64			/* cityHash64(column) */
} ChShardFunc;

typedef struct ChShardKey
{
	ChShardFunc func;
	char	   *column;			/* NULL for rand() */
} ChShardKey;

/* Per statement: load->private */
typedef struct ChLoad
{
	CtasChHttp *http;
	int			shard;			/* cluster: this shard's part of the load,
								 * from 1; 0 otherwise */
	ChXact	   *xs;				/* NULL in streaming mode */
	ChAction   *action;			/* atomic mode */
	bool		streaming;
	char	   *db;
	char	   *phys;			/* holds the target's definition now */
	char	   *insert_table;	/* where the rows go */
	char	   *insert_sql;
	char	   *engine;			/* engine name of insert_table */
	int			ncols;
	ChColumn   *cols;
	char	  **types;			/* ClickHouse type of each column */
	CtasChHttpStream *stream;
	MemoryContext stream_cxt;	/* owns stream; deleted when it is done */
	bool		exported;		/* leader of a parallel load: rows come
								 * from the workers, load->rows counts them */
	bool		worker;			/* a parallel worker's stream (attach) */
	uint64		rows;			/* rows encoded */
	uint64		block_rows;		/* streaming: rows in the open INSERT */
	uint64		count_before;	/* streaming append: rows already there */
	CtasLoad   *load;

	/* a load into a cluster catalog (cluster.c) */
	ChCluster  *cluster;		/* or NULL */
	struct ChLoad **shards;		/* [nshards]: each shard's part */
	char	   *local;			/* name of the shards' local tables */
	ChShardKey	key;
	int			key_col;		/* index of key.column, or -1 */
	StringInfoData key_buf;		/* the key's encoding, for routing */
	bool	   *shard_exists;	/* [nshards]: target exists there */
	uint64		bytes;			/* a shard's part: bytes encoded */
	int			job_shard;		/* a shard's part: its entry in
								 * ctas_fed.job_shards, or -1 */
	uint64		rows_reported;	/* a worker's shard part: rows and bytes */
	uint64		bytes_reported; /* added to job_shard so far */
	int64		job_id;			/* a parallel worker: the leader's job */
} ChLoad;

/*
 * The statement options of a ClickHouse table (load->opts.target_opts, set
 * by CtasChParseOption; read through CtasChOptions).  The texts are
 * ClickHouse expressions, checked by CtasChCheckOptions.
 */
typedef struct ChOptions
{
	char	   *engine;			/* ENGINE = ..., or NULL for MergeTree */
	char	   *order_by;
	char	   *partition_by;
	char	   *settings;
	char	   *sharding_key;	/* cluster: the Distributed table's key */
	char	   *local_table;	/* cluster: pattern of the local tables */
} ChOptions;

/*
 * CtasChOptions
 *		The ClickHouse options of a load; all NULL when the statement gave
 *		none.  Never NULL, never an ERROR.  Inline: every file of the
 *		target reads them, and none should call another just for this.
 */
static inline const ChOptions *
CtasChOptions(CtasLoad *load)
{
	static const ChOptions none;

	if (load->opts.target_opts == NULL)
		return &none;
	return (const ChOptions *) load->opts.target_opts;
}

/* Date and DateTime range of ClickHouse 18.16 (its date tables end 2105) */
#define CH_MAX_DATE_YEAR	2105

/* Deepest nesting of type constructors (Array, Nullable...) we parse */
#define CH_MAX_TYPE_DEPTH	32

/*
 * Deepest nesting of brackets in a table option: ClickHouse 18.16 parses
 * recursively without a depth limit, and a few hundred levels crash the
 * server (a stack overflow, every query of every user lost).
 */
#define CH_MAX_EXPR_DEPTH	32

/* Durable records of a transaction (record.c, read by resolve.c) */
#define CH_RECORD_DIR		"pg_ctas_fed"	/* CTAS_RECORD_DIR of xrecord.h */
#define CH_RECORD_PREFIX	"ch_"
#define CH_RECORD_MAGIC		"ctas_fed clickhouse"
#define CH_RECORD_VERSION	"2"	/* "1": no shard field */
#define CH_RECORD_MAX_SIZE	(64 * 1024 * 1024)

/* in types.c */
extern void CtasChSkipWs(const char **p);
extern char *CtasChParseString(const char **p);
extern ChType *CtasChParseType(const char *text, bool *too_deep);
extern void CtasChAppendType(StringInfo buf, const ChType *t);
extern char *CtasChTypeText(const ChType *t);
extern bool CtasChIsKey(CtasLoad *load, const CtasColumn *col);
extern void CtasChMapColumn(CtasLoad *load, CtasColumn *col);
extern char *CtasChSyncColumnType(Oid typid, int32 typmod,
								  const char *colname);

/* in ddl.c */
extern char *CtasChQname(const char *db, const char *table);
extern char *CtasChLit(const char *s);
extern char *CtasChDisplay(const char *db, const char *table);
extern List *CtasChTsv(const char *body, int *nfields);
extern uint64 CtasChParseCount(CtasChHttp *http, const char *body,
							   const char *what);
extern const char *const CtasChStatementOptions[];
extern bool CtasChParseOption(CtasLoad *load, DefElem *def);
extern void CtasChCheckOptions(CtasLoad *load);
extern char *CtasChEngineName(const char *engine);
extern bool CtasChIsMergetree(const char *engine_name);
extern char *CtasChRemoteEngine(CtasChHttp *http, const char *db,
								const char *table);
extern int	CtasChCountCheckMode(const char *engine);
extern char *CtasChCreateSql(CtasLoad *load, ChColumn *cols, const char *db,
							 const char *name);

/* in stage.c */
extern bool CtasChRemoteExists(CtasChHttp *http, const char *db,
							   const char *table);
extern char *CtasChLoadEngine(CtasLoad *load);
extern bool CtasChLogicalExists(CtasChHttp *http, ChXact *xs, int shard,
								const char *db, const char *table,
								char **phys);
extern ChAction *CtasChNewAction(CtasParticipant *part, ChXact *xs,
								 ChActionKind kind, int shard,
								 const char *db, const char *table);
extern char **CtasChTargetTypes(ChLoad *cl, ChActionKind kind);
extern void CtasChStage(ChLoad *cl, ChActionKind kind);
extern void CtasChStageCheck(ChLoad *cl);
extern void CtasChInsertSql(ChLoad *cl);
extern void CtasChStreamOpen(ChLoad *cl);
extern void CtasChStreamStep(ChLoad *cl, bool finish);

/* in cluster.c */
extern void CtasChClusterCheck(ChCluster *c, CtasChHttp *http);
extern void CtasChClusterCheckOptions(CtasLoad *load);
extern bool CtasChClusterBeginLoad(ChLoad *cl);
extern void CtasChClusterCreateTable(ChLoad *cl, bool exists);
extern void CtasChClusterPutRow(ChLoad *cl, TupleTableSlot *slot);
extern void CtasChClusterEndLoad(ChLoad *cl);
extern List *CtasChClusterExport(ChLoad *cl, List *state);
extern void CtasChClusterAttach(ChLoad *cl, List *l);
extern char *CtasChClusterSyncTable(ChCluster *c, CtasChHttp *http,
									const char *db, const char *name,
									int nkeys, char **keys, ChShardKey *key,
									int *key_k);
extern bool CtasChClusterDrop(CtasLoad *load);
extern void CtasChClusterExplain(CtasLoad *load, ExplainState *es);

/* in shardkey.c */
extern void CtasChParseShardKey(const char *text, ChShardKey *key);
extern char *CtasChShardKeySql(const ChShardKey *key);
extern bool CtasChKeyTypeOk(ChShardFunc func, const char *text);
extern int	CtasChShardOf(ChCluster *c, const ChShardKey *key,
						  ChColumn *col, StringInfo kb, Datum v,
						  bool isnull);

/* in cityhash.c */
extern uint64 CtasChHash128to64(uint64 low, uint64 high);
extern uint64 CtasChCityHash64(const char *data, size_t len);
extern uint64 CtasChIntHash64(uint64 x);

/* in rowbinary.c */
extern ChColumn *CtasChSetupColumns(CtasLoad *load, char **types);

/*
 * in sync_keep.c: unchanged values of a sync taken from the remote row.  A
 * row being completed: each column's RowBinary bytes, missing where the
 * change did not carry the value.
 */
typedef struct ChKeptRow
{
	char	   *keyraw;			/* CtasChSyncKeyText */
	StringInfoData *segs;		/* per column */
	bool	   *missing;
} ChKeptRow;
extern bool CtasChSyncCanKeep(CtasSyncTarget *t, ChColumn *cols,
							  ChColumn *keycols, int col);
extern char *CtasChSyncKeyText(CtasSyncTarget *t, ChColumn *keycols,
							   Datum *values, const int *keypos);
extern void CtasChSyncFetchKept(CtasChHttp *http, CtasSyncTarget *t,
								const char *qtable, ChColumn *cols,
								List *rows);
extern void CtasChPutValue(ChEnc *e, StringInfo buf, Datum v, bool isnull);

/*
 * in sync.c: the state of a synced table (one per shard of a cluster
 * catalog), opened there and written by sync_rows.c.
 */
/*
 * The columns of a kept change in the tuplesort: the key (RowBinary), minus
 * its sequence number in the transaction (so that the ascending sort puts
 * the last change of a key first), whether it deletes the key, the row
 * (all columns, RowBinary; NULL for a delete)
 */
#define CHANGE_KEY		1
#define CHANGE_SEQ		2
#define CHANGE_DELETED	3
#define CHANGE_ROW		4
#define CHANGE_KEYTEXT	5		/* a row with unchanged values: its key as
								 * text (sync_keep.c), else NULL */
#define CHANGE_NATTS	5

typedef struct ChSyncState
{
	CtasChHttp   *http;
	char	   *qtable;			/* `db`.`table` */
	char	   *progress;		/* `db`.`_ctas_fed_sync_progress` */
	ChColumn   *cols;			/* encoders of the query's columns */
	ChColumn   *keycols;		/* encoders of the key columns */
	char	   *insert_sql;		/* INSERT of all columns */
	char	   *delete_sql;		/* INSERT of the key columns */
	char	   *truncate_head;	/* INSERT ... SELECT keys, before the version */
	char	   *truncate_tail;	/* after it */
	StringInfoData rows;		/* RowBinary rows, not sent yet */
	CtasChHttpStream *stream;	/* the INSERT of rows streamed once they
								 * passed a chunk, or NULL */
	MemoryContext stream_cxt;
	StringInfoData deletes;		/* RowBinary delete rows, not sent yet */
	int		   *keypos;			/* place of each key among the columns */
	uint64		lsn;			/* change_lsn of the kept changes */
	Tuplesortstate *changes;	/* the kept changes, or NULL for none */
	int64		nchanges;		/* put into it */
	TupleDesc	change_desc;	/* of a kept change */
	TupleTableSlot *change_slot;	/* virtual, to put a change */
	TupleTableSlot *sorted_slot;	/* minimal, to read one back */
	bool		truncated;		/* a TRUNCATE at lsn is due */
	MemoryContext txn_cxt;		/* the tuplesort */
	MemoryContext change_cxt;	/* one change, reset after each */
	StringInfoData lastkey;		/* the key last written */
	StringInfoData rowbuf;		/* one encoded row */
	StringInfoData keybuf;		/* one encoded key */
	StringInfoData colbuf;		/* one encoded value */
	bool	   *gone;			/* per column: not in the remote table (a
								 * followed DROP COLUMN whose new columns
								 * were not stored yet): not written */
	char	   *keytext;		/* of the row in rowbuf, if it has unchanged
								 * values (sync_keep.c) */
	char	   *rebuilding;		/* the table a rebuild fills (sync.c), or
								 * NULL */
	ChKeptRow  *held;			/* the last change of a key being completed
								 * from its earlier ones, or NULL */
	List	   *kept;			/* rows to complete from the remote */
	MemoryContext keep_cxt;		/* held and kept */
	MemoryContext cxt;

	/* a cluster catalog: the state of each shard's local table */
	ChCluster  *cluster;		/* or NULL */
	struct ChSyncState **shards;	/* [nshards] */
	ChShardKey	key;			/* of the Distributed table */
	int			key_k;			/* the key column it reads, in keys */
	StringInfoData route_buf;
} ChSyncState;

/* in sync_alter.c: the encoders and the INSERT of a synced table's columns */
extern ChColumn *CtasChSyncEncoders(CtasSyncTarget *t, ChSyncState *st, int n,
									char **names, Oid *types, bool *gone);
extern char *CtasChSyncInsertSql(ChSyncState *st, int n, char **names,
								 const bool *gone);

/* in sync_alter.c: schema changes, rebuilds (see there) */
extern char *CtasChSyncAlter(CtasSyncTarget *t, const CtasSyncAlter *changes,
							 int nchanges);
extern void CtasChSyncRebuild(CtasSyncTarget *t);
extern void CtasChSyncRebuilt(CtasSyncTarget *t);
extern void CtasChSyncSettle(CtasSyncTarget *t, CtasChHttp *http);

/* in sync_rows.c: the kept changes of a transaction and the rows written */
extern void CtasChSyncStreamRow(ChSyncState *st, const char *row, int len,
								uint64 version);
extern void CtasChSyncSendPending(ChSyncState *st);
extern void CtasChSyncSendTruncate(CtasSyncTarget *t, ChSyncState *st,
								   uint64 version);
extern void CtasChSyncForgetChanges(ChSyncState *st);
extern void CtasChSyncWriteChanges(CtasSyncTarget *t, ChSyncState *st);
extern void CtasChSyncSwitchTransaction(CtasSyncTarget *t, ChSyncState *st);
extern void CtasChSyncKeepChange(ChSyncState *st, bool deleted);
extern void CtasChSyncEncodeRow(CtasSyncTarget *t, ChSyncState *st,
								Datum *values, bool *nulls);
extern void CtasChSyncEncodeSegments(CtasSyncTarget *t, ChSyncState *st,
									 Datum *values, bool *nulls,
									 const bool *unchanged);

/* in record.c */
extern const char *const CtasChActionNames[CH_DROP + 1];
extern char *CtasChRecordGid(ChXact *xs);
extern void CtasChRecordWrite(CtasParticipant *part, ChXact *xs);

/* in xact.c */
extern void CtasChCheckVersion(CtasChHttp *http);
extern ChXact *CtasChXact(CtasParticipant *part);
extern CtasChHttp *CtasChActionHttp(ChXact *xs, ChAction *a);
extern bool CtasChCleanupDrop(CtasChHttp *http, const char *db,
							  const char *table, const char *what);
extern bool CtasChUndoChecked(CtasChHttp *http, ChAction *a, char **why);
extern void CtasChPreCommit(CtasParticipant *part);
extern void CtasChPostCommit(CtasParticipant *part);
extern void CtasChAbort(CtasParticipant *part);
extern void CtasChSubxact(CtasParticipant *part, SubXactEvent event,
						  int level);

/* in resolve.c */
extern void CtasChResolve(CtasCatalog *catalog,
						  void (*emit) (void *arg, const char *object,
										const char *action),
						  void *arg);

#endif							/* CTAS_CLICKHOUSE_H */
