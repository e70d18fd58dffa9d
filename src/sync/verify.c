/*-------------------------------------------------------------------------
 *
 * verify.c
 *		  ctas_fed.verify_sync(target): compare the remote table of a
 *		  continuous sync with its query's result at one consistent source
 *		  point, without stopping the sync and without a lock that blocks a
 *		  writer (DESIGN.md section 1.7, "Verify and resync").
 *
 * The one consistent point.  A plain snapshot cannot be matched to a WAL
 * position (transactions become visible in ProcArray order, not in the
 * order of their commit records); the snapshot of a logical slot's
 * consistent point C can: it sees exactly the source transactions whose
 * commit record lies before C, which is what the initial copy relies on.
 * Only a process without a snapshot can build one, so the sync worker of
 * the job does the check, asked through the job's status entry
 * (sync/status.c), between two rounds of its stream:
 *
 *	1.	a REPEATABLE READ read-only transaction, an ephemeral slot (gone as
 *		soon as it is released; the transaction keeps the snapshot): the
 *		source as of C;
 *	2.	in that transaction, a peek at the stream's slot up to C, applied
 *		with every job's stop_at = C (sync/apply.c: no source transaction
 *		that commits at or after C), committed remotely: the remote now
 *		holds exactly the source transactions before C, the same set;
 *	3.	both sides hashed (below) and compared; the stream goes on after.
 *
 * The stream's changes wait during the check (the slot keeps their WAL);
 * no lock is taken on the source beyond the AccessShareLock of a read, so
 * writers go on.
 *
 * Canonical text.  Each side turns a row into the same text: per column,
 * "N" for NULL, else octet_length(v) || ':' || v, where v is the value's
 * text (the target's verify_local gives the local expression, under the
 * settings pinned below, matching what the target computes remotely);
 * the row text concatenates every column's, the key text the key
 * columns'.  kh = md5(key text) in lower-case hex; rh = the first 8 bytes
 * of md5(row text) as an unsigned 64-bit number.
 *
 * Bisection, as data-diff tools do, over buckets of the key hash rather
 * than key ranges (key order is not the same on both sides: collations,
 * byte order): at level L a bucket is the first 3 * L hex digits
 * of kh, and each side returns per bucket the rows' count and the sum of
 * their rh modulo 2^64 (a sum rather than a XOR, so that a duplicate row
 * shows), among the rows in the buckets that differed at level L - 1 (at
 * most VERIFY_MAX_PREFIXES of them).  Once the differing buckets hold at
 * most VERIFY_LIST_ROWS rows on either side (or at the last level), their
 * rows are listed on both sides, ordered by kh, and merged: the first
 * VERIFY_MAX_KEYS differing keys are reported with both versions.  Each
 * level is one scan of each side into at most 16 * 4096 buckets, so the
 * memory is bounded whatever the table's size; an equal table takes one
 * level, 10M rows with differences two levels and one listing.  The scans
 * are CPU-bound (two MD5s and the text output of every value of every
 * row): each value's text is computed once (local_inner), which also keeps
 * each side's scan in one process, without parallel query
 * (docs/performance.md has the numbers: CPU linear in the rows, memory
 * flat).
 *
 * The result is a row of ctas_fed.sync_checks and, for the metrics, the
 * job's status entry.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/verify.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/pg_lsn.h"
#include "utils/ruleutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "sync/sync_int.h"

/* rows of ctas_fed.sync_checks kept per sync (docs/sync-verify-resync.md) */
#define CTAS_SYNC_CHECKS_KEPT	100

/* hex digits of the key hash per level: 4096 buckets */
#define VERIFY_HEX			3
#define VERIFY_MAX_LEVELS	5
/* differing buckets followed into the next level */
#define VERIFY_MAX_PREFIXES	16
/* rows listed once the differing buckets hold at most this many */
#define VERIFY_LIST_ROWS	2000
/* differing keys reported */
#define VERIFY_MAX_KEYS		10

/* one result row of a step: (bucket, count, sum) or (kh, key, row) */
typedef struct VerifyRow
{
	char	   *a;
	char	   *b;
	char	   *c;
} VerifyRow;

typedef struct VerifyRows
{
	VerifyRow  *rows;
	int			n;
	int			size;
} VerifyRows;

/* what a check found */
typedef struct VerifyDiff
{
	char	   *key;
	char	   *source;			/* NULL: missing at the source */
	char	   *remote;			/* NULL: missing remotely */
} VerifyDiff;

static void
rows_add(VerifyRows *r, const char *a, const char *b, const char *c)
{
	if (r->n == r->size)
	{
		r->size = Max(64, r->size * 2);
		r->rows = r->rows ? repalloc(r->rows, sizeof(VerifyRow) * r->size) :
			palloc(sizeof(VerifyRow) * r->size);
	}
	r->rows[r->n].a = pstrdup(a ? a : "");
	r->rows[r->n].b = pstrdup(b ? b : "");
	r->rows[r->n].c = c ? pstrdup(c) : NULL;
	r->n++;
}

/* emit of verify_remote */
static void
remote_emit(void *arg, char **fields)
{
	rows_add((VerifyRows *) arg, fields[0], fields[1], fields[2]);
}

static int
row_cmp(const void *x, const void *y)
{
	return strcmp(((const VerifyRow *) x)->a, ((const VerifyRow *) y)->a);
}

/*
 * display
 *		A canonical text (pieces "N" or "len:value") as "(v1, v2, NULL)", or
 *		the one value of a one-column key.  Palloc'd.
 */
static char *
display(const char *canon, bool key)
{
	StringInfoData buf;
	const char *p = canon;
	int			n = 0;

	initStringInfo(&buf);
	while (*p)
	{
		if (n++ > 0)
			appendStringInfoString(&buf, ", ");
		if (*p == 'N')
		{
			appendStringInfoString(&buf, "NULL");
			p++;
			continue;
		}
		{
			char	   *end;
			long		len = strtol(p, &end, 10);

			if (*end != ':' || len < 0 || (long) strlen(end + 1) < len)
				return pstrdup(canon);	/* not ours: as it is */
			appendBinaryStringInfo(&buf, end + 1, (int) len);
			p = end + 1 + len;
		}
	}
	if (key && n == 1)
		return buf.data;
	return psprintf("(%s)", buf.data);
}

/*
 * in_list
 *		'1a2', '0ff', ... of prefixes, for an IN list, local and remote
 *		(verify_remote's buckets): NULL for NIL.  A bucket is lower-case hex
 *		digits only, its literal the same text in every dialect; the
 *		buckets a remote answered were checked so by both_steps.
 */
static char *
in_list(List *prefixes)
{
	StringInfoData buf;
	ListCell   *lc;

	if (prefixes == NIL)
		return NULL;
	initStringInfo(&buf);
	foreach(lc, prefixes)
		appendStringInfo(&buf, "%s'%s'", buf.len ? ", " : "",
						 (char *) lfirst(lc));
	return buf.data;
}

/*
 * key_columns
 *		The indexes of the job's key columns in its columns.
 */
static int *
key_columns(SyncJob *job)
{
	CtasSyncTarget *t = &job->target;
	int		   *keys = palloc(sizeof(int) * Max(t->nkeys, 1));
	int			i;
	int			k;

	for (k = 0; k < t->nkeys; k++)
	{
		for (i = 0; i < t->ncolumns; i++)
		{
			if (strcmp(t->columns[i], t->keys[k]) == 0)
				break;
		}
		if (i == t->ncolumns)
			elog(ERROR, "key column \"%s\" of sync " INT64_FORMAT " is not a column",
				 t->keys[k], job->id);
		keys[k] = i;
	}
	return keys;
}

/*
 * local_inner
 *		SELECT kh, kt, rt over the job's query (deparsed), its columns
 *		named c1, c2, ..., with the target's canonical expressions.  Each
 *		value's text (t1, t2, ...: NULL for NULL) is computed once, below an
 *		OFFSET 0 that keeps the planner from substituting its expression
 *		into each of its uses: the text output of a value (numeric,
 *		timestamptz) is most of a check's cost, and the pieces of the key
 *		stand in kh, kt and rt.
 */
static char *
local_inner(SyncJob *job, const int *keys)
{
	CtasSyncTarget *t = &job->target;
	StringInfoData row;
	StringInfoData key;
	StringInfoData cols;
	StringInfoData texts;
	char	  **piece = palloc(sizeof(char *) * Max(t->ncolumns, 1));
	int			i;
	int			k;

	initStringInfo(&row);
	initStringInfo(&key);
	initStringInfo(&cols);
	initStringInfo(&texts);
	for (i = 0; i < t->ncolumns; i++)
	{
		char	   *ref = psprintf("q.c%d", i + 1);
		char	   *v = job->apply->verify_local(t, i, ref);

		if (v == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("column \"%s\" of sync " INT64_FORMAT " cannot be verified",
							t->columns[i], job->id),
					 errdetail("Its remote type has no text form that the local value can be compared with.")));
		appendStringInfo(&texts, "%sCASE WHEN %s IS NULL THEN NULL ELSE %s END AS t%d",
						 i ? ", " : "", ref, v, i + 1);
		piece[i] = psprintf("CASE WHEN v.t%d IS NULL THEN 'N' "
							"ELSE octet_length(v.t%d)::text || ':' || v.t%d END",
							i + 1, i + 1, i + 1);
		appendStringInfo(&row, "%s%s", i ? " || " : "", piece[i]);
		appendStringInfo(&cols, "%sc%d", i ? ", " : "", i + 1);
	}
	for (k = 0; k < t->nkeys; k++)
		appendStringInfo(&key, "%s%s", k ? " || " : "", piece[keys[k]]);
	return psprintf("SELECT md5(%s) AS kh, %s AS kt, %s AS rt "
					"FROM (SELECT %s FROM (%s) q(%s) OFFSET 0) v",
					key.data, key.data, row.data, texts.data,
					pg_get_querydef(job->query, false), cols.data);
}

/*
 * local_step
 *		One step on the source, under the transaction's snapshot: as
 *		verify_remote (target.h).  Run as the job's owner, restricted, as
 *		the copy does, with the text output settings pinned.
 */
static void
local_step(SyncJob *job, const char *inner, int level, const char *buckets,
		   bool rows, VerifyRows *out)
{
	char	   *sql;
	uint64		i;
	Oid			save_userid;
	int			save_sec;
	int			nest;

	if (rows)
		sql = psprintf("SELECT kh, kt, rt FROM (%s) s WHERE left(kh, %d) IN (%s) "
					   "ORDER BY kh LIMIT %d",
					   inner, VERIFY_HEX * level, buckets,
					   VERIFY_LIST_ROWS * 5);
	else
		sql = psprintf("SELECT left(kh, %d), count(*)::text, "
					   "(((sum(('x' || left(md5(rt), 16))::bit(64)::int8) "
					   "%% 18446744073709551616) + 18446744073709551616) "
					   "%% 18446744073709551616)::text "
					   "FROM (%s) s %s GROUP BY 1",
					   VERIFY_HEX * level, inner,
					   buckets ? psprintf("WHERE left(kh, %d) IN (%s)",
										  VERIFY_HEX * (level - 1), buckets) : "");

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(job->owner, save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	nest = NewGUCNestLevel();
	(void) set_config_option("datestyle", "ISO, YMD", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("intervalstyle", "postgres", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("extra_float_digits", "1", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("bytea_output", "hex", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("timezone", "UTC", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not hash the source of sync " INT64_FORMAT, job->id);
	for (i = 0; i < SPI_processed; i++)
		rows_add(out,
				 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1),
				 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2),
				 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3));
	SPI_freetuptable(SPI_tuptable);
	AtEOXact_GUC(false, nest);
	SetUserIdAndSecContext(save_userid, save_sec);
}

/* milliseconds of the current check's steps on each side, for its LOG line */
static int64 verify_source_ms;
static int64 verify_remote_ms;

/*
 * both_steps
 *		One step on both sides, each sorted by its first field, over the
 *		buckets prefixes (NIL: all); keys as key_columns.  The remote's
 *		first fields must be buckets or key hashes: lower-case hex digits,
 *		so many (they go back into the next step's IN list).
 */
static void
both_steps(SyncJob *job, const char *inner, const int *keys, int level,
		   List *prefixes, bool rows, VerifyRows *src, VerifyRows *rem)
{
	char	   *buckets = in_list(prefixes);
	size_t		len = rows ? 32 : VERIFY_HEX * level;
	TimestampTz t0 = GetCurrentTimestamp();
	TimestampTz t1;
	int			i;

	memset(src, 0, sizeof(*src));
	memset(rem, 0, sizeof(*rem));
	local_step(job, inner, level, buckets, rows, src);
	t1 = GetCurrentTimestamp();
	job->apply->verify_remote(&job->target, keys, level, buckets, rows,
							  remote_emit, rem);
	verify_source_ms += (t1 - t0) / 1000;
	verify_remote_ms += (GetCurrentTimestamp() - t1) / 1000;
	for (i = 0; i < rem->n; i++)
	{
		if (strlen(rem->rows[i].a) != len ||
			strspn(rem->rows[i].a, "0123456789abcdef") != len)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("unexpected result from catalog \"%s\" while checking sync " INT64_FORMAT,
							job->target.catalog->name, job->id),
					 errdetail("A key hash or bucket is not %d lower-case hex digits.",
							   (int) len)));
	}
	if (src->n > 1)
		qsort(src->rows, src->n, sizeof(VerifyRow), row_cmp);
	if (rem->n > 1)
		qsort(rem->rows, rem->n, sizeof(VerifyRow), row_cmp);
}

/*
 * compare_job
 *		Bisect the job's source and remote table down to the differing
 *		keys (at most VERIFY_MAX_KEYS, into *diffs, allocated in cxt, which
 *		outlives the SPI connection); *rows is the number of source rows.
 *		In the check's transaction, connected to SPI.
 */
static void
compare_job(SyncJob *job, List **diffs, int64 *nrows, MemoryContext cxt)
{
	int		   *keys = key_columns(job);
	char	   *inner = local_inner(job, keys);
	List	   *prefixes = NIL;
	int			level;

	*diffs = NIL;
	*nrows = 0;
	verify_source_ms = verify_remote_ms = 0;
	for (level = 1; level <= VERIFY_MAX_LEVELS; level++)
	{
		VerifyRows src;
		VerifyRows rem;
		List	   *differing = NIL;
		int64		most = 0;
		int			i = 0;
		int			j = 0;

		CHECK_FOR_INTERRUPTS();
		both_steps(job, inner, keys, level, prefixes, false, &src, &rem);
		if (level == 1)
		{
			for (i = 0; i < src.n; i++)
				*nrows += strtoll(src.rows[i].b, NULL, 10);
			i = 0;
		}
		/* merge the buckets: one on one side only, or counts or sums differ */
		while (i < src.n || j < rem.n)
		{
			int			c = i >= src.n ? 1 : j >= rem.n ? -1 :
				strcmp(src.rows[i].a, rem.rows[j].a);
			int64		ns = c <= 0 ? strtoll(src.rows[i].b, NULL, 10) : 0;
			int64		nr = c >= 0 ? strtoll(rem.rows[j].b, NULL, 10) : 0;

			if (c != 0 || strcmp(src.rows[i].b, rem.rows[j].b) != 0 ||
				strcmp(src.rows[i].c, rem.rows[j].c) != 0)
			{
				if (list_length(differing) < VERIFY_MAX_PREFIXES)
				{
					differing = lappend(differing,
										c <= 0 ? src.rows[i].a : rem.rows[j].a);
					most += Max(ns, nr);
				}
			}
			if (c <= 0)
				i++;
			if (c >= 0)
				j++;
		}
		if (differing == NIL)
			return;
		prefixes = differing;
		if (most <= VERIFY_LIST_ROWS || level == VERIFY_MAX_LEVELS)
			break;
	}

	/* list the rows of the differing buckets on both sides, and merge */
	{
		VerifyRows src;
		VerifyRows rem;
		int			i = 0;
		int			j = 0;

		both_steps(job, inner, keys, Min(level, VERIFY_MAX_LEVELS), prefixes, true,
				   &src, &rem);
		while ((i < src.n || j < rem.n) &&
			   list_length(*diffs) < VERIFY_MAX_KEYS)
		{
			int			c = i >= src.n ? 1 : j >= rem.n ? -1 :
				strcmp(src.rows[i].a, rem.rows[j].a);

			if (c == 0)
				c = strcmp(src.rows[i].b, rem.rows[j].b);
			if (c != 0 || strcmp(src.rows[i].c, rem.rows[j].c) != 0)
			{
				MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
				VerifyDiff *d = palloc0(sizeof(VerifyDiff));

				d->key = display(c <= 0 ? src.rows[i].b : rem.rows[j].b, true);
				if (c <= 0)
					d->source = display(src.rows[i].c, false);
				if (c >= 0)
					d->remote = display(rem.rows[j].c, false);
				*diffs = lappend(*diffs, d);
				MemoryContextSwitchTo(oldcxt);
			}
			if (c <= 0)
				i++;
			if (c >= 0)
				j++;
		}
	}
}

/*
 * record_check
 *		The row of ctas_fed.sync_checks of a check, in a transaction of its
 *		own.  Returns its check_id.
 */
static int64
record_check(SyncJob *job, XLogRecPtr point, List *diffs, int64 nrows,
			 TimestampTz started)
{
	StringInfoData json;
	ListCell   *lc;
	Oid			types[6] = {INT8OID, PG_LSNOID, TEXTOID, INT8OID, INT8OID,
	TEXTOID};
	Datum		values[6];
	int64		id;
	bool		isnull;

	initStringInfo(&json);
	appendStringInfoChar(&json, '[');
	foreach(lc, diffs)
	{
		VerifyDiff *d = lfirst(lc);

		appendStringInfoString(&json, json.len > 1 ? ", {\"key\": " : "{\"key\": ");
		escape_json(&json, d->key);
		appendStringInfoString(&json, ", \"source\": ");
		if (d->source)
			escape_json(&json, d->source);
		else
			appendStringInfoString(&json, "null");
		appendStringInfoString(&json, ", \"remote\": ");
		if (d->remote)
			escape_json(&json, d->remote);
		else
			appendStringInfoString(&json, "null");
		appendStringInfoChar(&json, '}');
	}
	appendStringInfoChar(&json, ']');

	values[0] = Int64GetDatum(job->id);
	values[1] = LSNGetDatum(point);
	values[2] = CStringGetTextDatum(diffs == NIL ? "equal" : "different");
	values[3] = Int64GetDatum(nrows);
	values[4] = Int64GetDatum((GetCurrentTimestamp() - started) / 1000);
	values[5] = CStringGetTextDatum(json.data);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute_with_args("INSERT INTO ctas_fed.sync_checks "
							  "(sync_id, consistent_lsn, result, source_rows, "
							  "duration_ms, differences) "
							  "VALUES ($1, $2, $3, $4, $5, $6::jsonb) "
							  "RETURNING check_id",
							  6, types, values, NULL, false, 1) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not record the check of sync " INT64_FORMAT, job->id);
	id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
									 SPI_tuptable->tupdesc, 1, &isnull));
	/* the last CTAS_SYNC_CHECKS_KEPT checks of the sync are kept */
	if (SPI_execute_with_args("DELETE FROM ctas_fed.sync_checks "
							  "WHERE sync_id = $1 AND check_id <= "
							  "(SELECT check_id FROM ctas_fed.sync_checks "
							  "WHERE sync_id = $1 ORDER BY check_id DESC "
							  "OFFSET " CppAsString2(CTAS_SYNC_CHECKS_KEPT) " LIMIT 1)",
							  1, types, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not trim the checks of sync " INT64_FORMAT, job->id);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	return id;
}

/*
 * CtasSyncVerifyIfAsked
 *		In the sync worker, between two rounds of its stream (jobs, their
 *		targets open), outside a transaction: the check that verify_sync()
 *		asked of one of the jobs, if any (see the head of this file).  Can
 *		ERROR (the worker then ends and is started again; the caller sees
 *		it go).
 */
void
CtasSyncVerifyIfAsked(List *jobs)
{
	uint64		ticket;
	int64		id = CtasSyncStatusVerifyWanted(&ticket);
	SyncJob    *job = NULL;
	SyncJob    *first;
	XLogRecPtr	point;
	TimestampTz started = GetCurrentTimestamp();
	SyncPeekResult peek;
	Portal		portal;
	Datum		args[2];
	List	   *diffs;
	int64		nrows;
	int64		check;
	MemoryContext cxt;
	ListCell   *lc;

	if (id == 0)
		return;
	foreach(lc, jobs)
	{
		if (((SyncJob *) lfirst(lc))->id == id)
			job = lfirst(lc);
	}
	if (job == NULL)
	{
		CtasSyncStatusVerified(id, ticket, 0, -1);
		return;
	}
	first = linitial(jobs);
	CtasSyncCurrentJob = job;

	/* 1. the source as of the consistent point of an ephemeral slot */
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	point = CtasSyncSlotSnapshot(psprintf("ctas_fed_verify_%u_" INT64_FORMAT,
										  MyDatabaseId, job->stream_id),
								 false);

	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();

	/* 2. the remote up to the same point: every job of the stream */
	foreach(lc, jobs)
		((SyncJob *) lfirst(lc))->stop_at = point;
	args[0] = DirectFunctionCall1(namein, CStringGetDatum(first->slot_name));
	args[1] = LSNGetDatum(point);
	portal = SPI_cursor_open_with_args(NULL,
									   psprintf("SELECT lsn, data FROM "
												"pg_catalog.pg_logical_slot_peek_binary_changes($1, $2, NULL, "
												"'proto_version', '1', 'publication_names', %s)",
												quote_literal_cstr(quote_identifier(first->publication))),
									   2, (Oid[]) {NAMEOID, PG_LSNOID}, args,
									   NULL, true, 0);
	CtasSyncApplyPeek(jobs, portal, &peek);
	SPI_cursor_close(portal);
	if (peek.redo)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the check of sync " INT64_FORMAT " met a schema change of its source",
						job->id),
				 errhint("Run ctas_fed.verify_sync() again.")));

	/* 3. compare; the differences outlive the transaction */
	cxt = AllocSetContextCreate(TopMemoryContext, "ctas_fed sync verify",
								ALLOCSET_SMALL_SIZES);
	compare_job(job, &diffs, &nrows, cxt);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();

	check = record_check(job, point, diffs, nrows, started);
	CtasSyncStatusVerified(id, ticket, check, list_length(diffs));
	ereport(LOG,
			(errmsg("ctas_fed sync " INT64_FORMAT ": checked " INT64_FORMAT " rows at %X/%X in %ld ms (scans: " INT64_FORMAT " ms source, " INT64_FORMAT " ms remote): %s",
					job->id, nrows, LSN_FORMAT_ARGS(point),
					(long) ((GetCurrentTimestamp() - started) / 1000),
					verify_source_ms, verify_remote_ms,
					diffs == NIL ? "equal" : "different")));
	MemoryContextDelete(cxt);
}

PG_FUNCTION_INFO_V1(ctas_fed_verify_sync);

/*
 * ctas_fed_verify_sync
 *		ctas_fed.verify_sync(target text) RETURNS SETOF (result, key,
 *		source_row, remote_row): ask the worker of the streaming sync into
 *		catalog.schema.table for a check, wait for its answer (cancel and
 *		statement_timeout apply), and return it: one row "equal", or a row
 *		"different" per differing key (at most 10) with both versions (NULL
 *		where the row is missing).  Who may stop the sync may verify it.
 */
Datum
ctas_fed_verify_sync(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *target = PG_GETARG_TEXT_PP(0);
	int64		stream_id;
	CtasSyncState state;
	int64		id;
	uint64		ticket;
	pid_t		pid;
	pid_t		now_pid;
	int64		check = 0;
	CtasSyncSpiAs as;
	Datum		args[1];
	uint64		i;

	id = CtasSyncFindRunning(target, "verify", false, &stream_id, &state);
	if (state != CTAS_SYNC_STREAMING ||
		!CtasSyncStatusAskVerify(id, &ticket, &pid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the sync into \"%s\" is not streaming",
						text_to_cstring(target)),
				 errdetail("Its state is \"%s\"; its worker checks it once it streams.",
						   CtasSyncStateName(state))));
	for (;;)
	{
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (CtasSyncStatusVerifyDone(id, ticket, &check, &now_pid))
			break;
		if (now_pid != pid)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the worker of the sync into \"%s\" ended before its check",
							text_to_cstring(target)),
					 errhint("See the error of the job in ctas_fed.jobs, and try again.")));
	}
	if (check == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the sync into \"%s\" stopped before its check",
						text_to_cstring(target))));

	/* the answer, committed by the worker after this statement began */
	InitMaterializedSRF(fcinfo, 0);
	args[0] = Int64GetDatum(check);
	CtasSyncAsOwnerBegin(&as);
	if (SPI_execute_snapshot(SPI_prepare("SELECT c.result, d->>'key', "
										 "d->>'source', d->>'remote' "
										 "FROM ctas_fed.sync_checks c "
										 "LEFT JOIN LATERAL jsonb_array_elements(c.differences) d ON true "
										 "WHERE c.check_id = $1",
										 1, (Oid[]) {INT8OID}),
							 args, NULL, GetLatestSnapshot(), InvalidSnapshot,
							 true, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the check of sync " INT64_FORMAT, id);
	for (i = 0; i < SPI_processed; i++)
	{
		Datum		values[4];
		bool		nulls[4];
		int			c;

		for (c = 0; c < 4; c++)
			values[c] = SPI_getbinval(SPI_tuptable->vals[i],
									  SPI_tuptable->tupdesc, c + 1, &nulls[c]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values,
							 nulls);
	}
	CtasSyncSpiEndAs(&as);
	PG_RETURN_VOID();
}
