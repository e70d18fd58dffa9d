/*-------------------------------------------------------------------------
 *
 * target.h
 *		  The writer interface: what ctas.c and xact.c ask of a target.
 *
 * A target is one kind of external catalog.  Each one is a const
 * CtasTargetRoutine of function pointers in its own folder under src/,
 * listed in the one table of targets.c and reached through the catalog's
 * type (targets.h); no code outside a target's folder knows which kind it
 * is talking to, as FdwRoutine does for foreign-data wrappers.
 *
 * Two objects are shared with the target:
 *
 *	CtasLoad		one federated CTAS statement: target name, columns,
 *					statement options, counters.  Lives in the statement's
 *					memory context; the target hangs its own state on
 *					load->private.
 *	CtasParticipant one catalog (server + user mapping) taking part in the
 *					local transaction.  Owned by xact.c, which calls the
 *					target's transaction functions; the target keeps its
 *					per-transaction state on part->private (allocated in
 *					part->cxt, which lives until the end of the top-level
 *					transaction).
 *
 * Writers never register transaction callbacks themselves: xact.c has the
 * one transaction callback and the one subtransaction callback of the
 * extension, and calls each participant's pre_commit, post_commit, abort
 * and subxact in the order of the protocol.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/target.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_TARGET_H
#define CTAS_TARGET_H

#include "access/tupdesc.h"
#include "access/xact.h"
#include "commands/explain.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/parsenodes.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "catalog.h"
#include "jobs.h"

/* WITH (if_exists = ...) */
typedef enum CtasIfExists
{
	CTAS_IF_EXISTS_ERROR,
	CTAS_IF_EXISTS_REPLACE,
	CTAS_IF_EXISTS_APPEND,
	CTAS_IF_EXISTS_SKIP			/* CREATE TABLE IF NOT EXISTS */
} CtasIfExists;

/*
 * Statement options of a federated CTAS, parsed once (ctas.c).  The generic
 * ones, which every target takes, are fields; a target's own options (its
 * routine's statement_options) are parsed by its parse_option into a struct
 * of its own, hung on target_opts.
 */
typedef struct CtasOptions
{
	bool		atomic;			/* batch (true) or streaming semantics */
	CtasIfExists if_exists;
	int64		commit_every;	/* rows per remote commit, streaming only */
	char	   *column_types;	/* raw "col type, col type" overrides */
	List	   *primary_key;	/* column names (String nodes) */
	int			parallel;		/* background workers to load with, or 0 */
	void	   *target_opts;	/* the target's own options, or NULL */
	bool		sync;			/* sync = 'continuous' (sync/statement.c) */
	char	   *schema_changes; /* of a sync: "follow" (NULL) or "fail" */
	char	   *stream;			/* of a sync: its stream, NULL: the default */
} CtasOptions;

/*
 * The round of pre-commit in which a target's pre_commit runs: first every
 * participant that can prepare prepares, then the targets that cannot
 * prepare publish their work, as the "last resource" of the commit, once
 * the outcome no longer depends on anything that can fail.
 */
typedef enum CtasCommitOrder
{
	CTAS_COMMIT_PREPARE,		/* two-phase: prepares at pre-commit */
	CTAS_COMMIT_LAST_RESOURCE	/* cannot prepare: publishes last */
} CtasCommitOrder;

#define CTAS_COMMIT_ORDERS	(CTAS_COMMIT_LAST_RESOURCE + 1)

/* One column of the remote table */
typedef struct CtasColumn
{
	char	   *name;			/* remote column name */
	Oid			typid;			/* local type of the query's column */
	int32		typmod;
	Oid			basetypid;		/* typid with domains stripped */
	int32		basetypmod;
	char	   *remote_type;	/* remote type, as DDL text */
	bool		overridden;		/* remote_type came from column_types */
	bool		is_key;			/* in primary_key / sorting key */
	FmgrInfo	out_func;		/* text output of the local type */
	FmgrInfo	send_func;		/* binary output, when binary is used */
	bool		binary_ok;		/* may be sent in binary */
} CtasColumn;

typedef struct CtasParticipant CtasParticipant;
typedef struct CtasTargetRoutine CtasTargetRoutine;

/*
 * The remote table of a continuous sync, as the sync worker applies
 * changes to it (sync/worker.c).  Rows are Datums of the query's result
 * types, in the order of columns; keys are Datums of the key columns'
 * types, in the order of keys, never NULL.  The target keeps its
 * connection and batch on private.
 */
typedef struct CtasSyncTarget
{
	CtasCatalog *catalog;
	char	   *schema;
	char	   *table;
	char	   *job_key;		/* names the job in the remote progress */
	int			ncolumns;
	char	  **columns;		/* remote column names */
	Oid		   *types;			/* local type of each column */
	int			nkeys;
	char	  **keys;			/* remote key column names */
	Oid		   *key_types;		/* local type of each key column */
	uint64		change_lsn;		/* commit lsn of the source transaction
								 * being applied; during the initial copy,
								 * the slot's consistent point */
	void	   *private;
} CtasSyncTarget;

struct CtasLoad;

/*
 * A schema change of the source that a whole-row sync follows on its
 * remote table (sync/ddl.c, docs/sync-schema-changes.md).
 */
typedef enum CtasSyncAlterKind
{
	CTAS_SYNC_ADD_COLUMN,		/* column added after the others */
	CTAS_SYNC_DROP_COLUMN,
	CTAS_SYNC_RENAME_COLUMN,
	CTAS_SYNC_RETYPE_COLUMN,	/* a new type whose values keep their text */
	CTAS_SYNC_REKEY				/* the key is keys (a new replica identity) */
} CtasSyncAlterKind;

typedef struct CtasSyncAlter
{
	CtasSyncAlterKind kind;
	const char *column;			/* remote name of the column, before */
	const char *newname;		/* RENAME: its new name */
	Oid			typid;			/* ADD, RETYPE: the new local type */
	int32		typmod;
	Datum		value;			/* ADD: the value of every existing row */
	bool		isnull;
	/* REKEY: the remote key columns after it, and their local types */
	int			nkeys;
	char	  **keys;
	Oid		   *key_types;
	/* the remote table's columns after the change */
	int			ncolumns;
	char	  **columns;
	Oid		   *types;
} CtasSyncAlter;

/*
 * What a target does for a continuous sync.  One batch is one remote
 * transaction: begin, changes, commit, which also stores lsn, the end of
 * the last source transaction in the batch, atomically with the rows.
 * Every function may ereport(ERROR); the worker then closes and retries.
 */
typedef struct CtasSyncApply
{
	/*
	 * At statement time, after the columns are derived: what a synced
	 * table of this target needs beyond the query's columns (extra
	 * columns, table options), or NULL.  ERROR on options it cannot keep.
	 */
	void		(*prepare) (struct CtasLoad *load);
	void		(*open) (CtasSyncTarget *t);	/* connect, progress table */
	uint64		(*applied_lsn) (CtasSyncTarget *t); /* 0: nothing applied */
	void		(*begin) (CtasSyncTarget *t);
	/*
	 * unchanged: NULL, or per column true where the change did not carry
	 * the value (an unchanged TOAST value) and the remote keeps its own;
	 * values[i] is then not valid.  Given only to a target whose
	 * keeps_unchanged is true, only for a row that exists remotely with
	 * the same key (sync/apply.c); the target must ERROR rather than
	 * write something else.
	 */
	void		(*upsert) (CtasSyncTarget *t, Datum *values, bool *nulls,
						   const bool *unchanged);
	bool		keeps_unchanged;	/* upsert takes an unchanged mask */
	/* optional (NULL: every column): whether it keeps column col's value */
	bool		(*can_keep) (CtasSyncTarget *t, int col);
	bool		transactional;	/* nothing of a batch is visible before
								 * commit */
	/* a row of the initial copy, into the table truncate emptied */
	void		(*copy_row) (CtasSyncTarget *t, Datum *values, bool *nulls);
	void		(*delete) (CtasSyncTarget *t, Datum *keys);
	void		(*truncate) (CtasSyncTarget *t);
	void		(*commit) (CtasSyncTarget *t, uint64 lsn);
	void		(*close) (CtasSyncTarget *t);	/* never ERROR */

	/*
	 * Optional, both or neither (NULL: commit only).  commit_send does what
	 * commit does, but may return once the batch, the progress and the
	 * COMMIT are sent, before the remote has applied them; commit_wait
	 * waits for that remote transaction and ERRORs if it failed.  Between
	 * the two the worker reads and builds the next batch (begin, upsert,
	 * delete, truncate), which the target holds, or sends after waiting
	 * itself; the worker calls commit_wait before it relies on the commit
	 * (sync/apply.c, "Pipelining").
	 */
	void		(*commit_send) (CtasSyncTarget *t, uint64 lsn);
	void		(*commit_wait) (CtasSyncTarget *t);

	/*
	 * Optional members (NULL: not provided), see sync/resync.c.
	 *
	 * A copy into a table that already holds applied rows (a resync, by
	 * ctas_fed.resync() or after the slot was lost) must leave it readable
	 * until the copy replaces it.  When rebuild is NULL, the worker calls
	 * truncate as for a first copy: the target must then make the
	 * truncate and the copied rows visible together, at commit (a target
	 * with transactions: the truncate and the copy in one remote
	 * transaction).  Otherwise rebuild is called instead of truncate,
	 * after begin and before the copy_rows, and rebuilt after the copy's
	 * commit: together they leave the table holding exactly the copied
	 * rows, with readers seeing each key's old or new row meanwhile.
	 * rebuilt must be idempotent: the worker copies again after any
	 * failure until the job is streaming.
	 */
	void		(*rebuild) (CtasSyncTarget *t);
	void		(*rebuilt) (CtasSyncTarget *t);

	/*
	 * Optional (NULL: no schema change is followed).  Follow the changes
	 * of one schema change message, in order, on the remote table, in the
	 * batch begun by begin, after the changes given before and before
	 * those given after; then take the columns after the last as t's.
	 * Returns NULL, or, having done nothing, why the remote cannot follow
	 * them (the job then fails with it).  A transactional target does it
	 * in the remote transaction; another is called only when it holds no
	 * change of the current source transaction, must never let a reader
	 * see rows with a shape they do not have (its sync.c says how), and
	 * may be called again for the same changes after a crash before the
	 * batch's progress was stored: it must then find them done.
	 */
	char	   *(*alter) (CtasSyncTarget *t, const CtasSyncAlter *changes,
						  int nchanges);

	/*
	 * Verify (sync/verify.c, "Canonical text"), both or neither.  Both
	 * sides hash the same canonical text of each row, built from the text
	 * of each column's value.  verify_local returns the local SQL
	 * expression over expr (a value of column col's local type), evaluated
	 * under the settings verify pins, whose text equals what the target
	 * computes from the value it stored; NULL when the column cannot be
	 * compared.  verify_remote computes one step on the remote table as
	 * the local side does (level and rows as in sync/verify.c) and calls
	 * emit once per result row, its fields as text: with rows false
	 * (bucket, count, sum) per bucket of the rows whose key hash begins
	 * with one of buckets (NULL: all rows), else (key hash, key text, row
	 * text) of the rows whose bucket is one of buckets, ordered by key
	 * hash, at most 10000.  keys[0..t->nkeys - 1] are the key columns'
	 * indexes in t->columns; buckets is a list of SQL string literals
	 * ('1a2', '0ff': lower-case hex digits only, the same text in every
	 * dialect), ready for an IN ( ).  In the sync worker, the target open;
	 * both may ERROR.
	 */
	char	   *(*verify_local) (CtasSyncTarget *t, int col, const char *expr);
	void		(*verify_remote) (CtasSyncTarget *t, const int *keys, int level,
								  const char *buckets, bool rows,
								  void (*emit) (void *arg, char **fields),
								  void *arg);
} CtasSyncApply;

/* One federated CTAS statement */
typedef struct CtasLoad
{
	CtasCatalog *catalog;
	const CtasTargetRoutine *routine;
	CtasParticipant *part;		/* NULL for EXPLAIN without ANALYZE */
	char	   *schema;			/* remote schema, or what the target calls
								 * the namespace of its tables */
	char	   *table;			/* remote table */
	int			ncolumns;
	CtasColumn *columns;
	CtasOptions opts;
	bool		skip_data;		/* WITH NO DATA */
	bool		skipped;		/* IF NOT EXISTS found the table: no-op */
	uint64		rows;			/* rows written so far */
	uint64		bytes;			/* payload bytes sent so far */
	uint64		rows_committed; /* streaming: rows the remote has committed */
	uint32		streams;		/* parallel: the workers' streams into it,
								 * all ended without error (parallel.c) */
	CtasJobRef	job;			/* the job in ctas_fed.jobs */
	int64		group_id;		/* job group of a multi-table call, or 0 */
	const char *format;			/* wire format chosen, for EXPLAIN/DEBUG */
	MemoryContext cxt;			/* lives as long as the statement */
	MemoryContext row_cxt;		/* reset by the caller after every row */
	void	   *private;		/* target's state for this statement */
	struct CtasSync *sync;		/* sync = 'continuous': see sync.h */
} CtasLoad;

/* One catalog taking part in the local transaction (xact.c) */
struct CtasParticipant
{
	Oid			serverid;
	Oid			umid;			/* user mapping, the participant's key */
	CtasCatalog *catalog;		/* copy in cxt */
	const CtasTargetRoutine *routine;
	MemoryContext cxt;			/* until end of top-level transaction */
	int			serial;			/* distinguishes participants of one xact */
	bool		prepared;		/* pre_commit done */
	List	   *jobs;			/* the jobs of this participant (xact.c) */

	/* set by the target, read by xact.c for the jobs' records */
	char	   *gid;			/* remote gid or staging table, once known */
	bool		one_phase;		/* committed at pre-commit, in one phase */
	bool		in_doubt;		/* post_commit left the outcome to the
								 * resolver */
	void	   *private;		/* target's per-transaction state */
};

/*
 * The writer interface.  Unless noted, a function may ereport(ERROR); the
 * transaction machinery then calls abort for every participant.
 */
struct CtasTargetRoutine
{
	const char *type_name;		/* value of the server option "type" */

	/*
	 * Server and user mapping options of this type, beyond the generic
	 * ones (terminated by a NULL name), and the server options that must
	 * be set (NULL-terminated, or NULL for none).
	 */
	const CtasOption *server_options;
	const char *const *required_options;

	/* When pre_commit runs: see CtasCommitOrder */
	CtasCommitOrder commit_order;

	/*
	 * Fill in col->remote_type (and binary_ok) for one column from its
	 * local type, when column_types did not.  ereport(ERROR) naming the
	 * column when the type cannot be mapped.
	 */
	void		(*map_column) (CtasLoad *load, CtasColumn *col);

	/*
	 * Statement options of this target beyond the generic ones
	 * (NULL-terminated, or NULL for none), listed in the hint of an
	 * unrecognized option.  parse_option parses one WITH (...) item that is
	 * not a generic option: it returns false when the name is not one of
	 * the target's, else keeps the value on load->opts.target_opts
	 * (allocated in the current memory context, the load's) and returns
	 * true.  It may ereport(ERROR) for a bad value.  NULL when the target
	 * has no statement options.
	 */
	const char *const *statement_options;
	bool		(*parse_option) (CtasLoad *load, DefElem *def);

	/*
	 * Check the statement options, generic and the target's own, once all
	 * are parsed and the generic ones checked, before any remote work.
	 * NULL when there is nothing more to check.
	 */
	void		(*check_options) (CtasLoad *load);

	/* EXPLAIN: target, format and remote DDL, without remote effect */
	void		(*explain) (CtasLoad *load, ExplainState *es);

	/*
	 * Start the load (load->part is set when it is atomic): set up the
	 * target's state on load->private, and return whether the target table
	 * exists as this transaction sees it.  No remote change.  What to do
	 * about an existing table is decided by ctas.c (if_exists): error, or
	 * skip, or create_table.
	 */
	bool		(*begin_load) (CtasLoad *load);

	/*
	 * Make the table the rows go into and open the row stream unless
	 * skip_data.  exists is begin_load's answer: when true, replace the
	 * table or append to it, as load->opts.if_exists says; else create it.
	 * Returns false when the table cannot be created because another
	 * transaction created it meanwhile: the caller then raises the
	 * "already exists" error.
	 */
	bool		(*create_table) (CtasLoad *load, bool exists);

	/* Write one row; load->row_cxt is reset by the caller afterwards */
	void		(*put_row) (CtasLoad *load, TupleTableSlot *slot);

	/* Close the row stream and check what arrived */
	void		(*end_load) (CtasLoad *load);

	/*
	 * Parallel loads (parallel.c), NULL when the target cannot take rows
	 * from more than one backend.  In the leader, after create_table:
	 * parallel_export returns what a parallel worker needs to write into
	 * the table create_table made (a string in the current memory context)
	 * and closes the leader's own row stream: from then on the rows come
	 * from the workers, and load->rows is their sum when end_load runs.
	 * In a parallel worker (or in the leader when no worker could be
	 * started), parallel_attach sets up load->private from that string on
	 * a load that has only catalog, schema, table and columns, and opens a
	 * row stream of its own; put_row and end_load are then called as in a
	 * serial load, end_load only closing that stream.  Both may ERROR.
	 */
	char	   *(*parallel_export) (CtasLoad *load);
	void		(*parallel_attach) (CtasLoad *load, const char *state);

	/*
	 * DROP TABLE catalog.schema.table, in the transaction (load->part is
	 * set by the caller).
	 */
	void		(*drop_table) (CtasLoad *load, bool missing_ok);

	/* Transaction events, called by xact.c only */
	void		(*pre_commit) (CtasParticipant *part);
	void		(*post_commit) (CtasParticipant *part);	/* never ERROR */
	void		(*abort) (CtasParticipant *part);	/* never ERROR */
	void		(*subxact) (CtasParticipant *part, SubXactEvent event,
							int level);		/* ERROR only at commit */

	/*
	 * Metadata for remote_tables() / remote_columns(): append
	 * (name, type) rows to a tuplestore via the callback.
	 */
	void		(*list_tables) (CtasCatalog *catalog, const char *schema,
								void (*emit) (void *arg, const char *name,
											  const char *kind),
								void *arg);
	void		(*list_columns) (CtasCatalog *catalog, const char *schema,
								 const char *table,
								 void (*emit) (void *arg, const char *name,
											   const char *type,
											   bool nullable),
								 void *arg);

	/*
	 * Resolve what this cluster left in doubt on the catalog (prepared
	 * transactions, staging tables).  emit one row per action.
	 */
	void		(*resolve) (CtasCatalog *catalog,
							void (*emit) (void *arg, const char *object,
										  const char *action),
							void *arg);

	/* continuous sync, or NULL when the target cannot keep one */
	const CtasSyncApply *sync;
};

/*
 * CtasLoadPutRow
 *		Hand one row to the target in the load's per-row context, reset
 *		afterwards, and count it: what every DestReceiver of a load does
 *		(ctas.c for a serial load, parallel.c in each worker).
 */
static inline void
CtasLoadPutRow(CtasLoad *load, TupleTableSlot *slot)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(load->row_cxt);

	load->routine->put_row(load, slot);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(load->row_cxt);
	load->rows++;
}

#endif							/* CTAS_TARGET_H */
