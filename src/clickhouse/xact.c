/*-------------------------------------------------------------------------
 *
 * xact.c
 *		  The transaction steps of the ClickHouse target (its durable
 *		  records: record.c).
 *
 *	pre_commit	after every two-phase participant has prepared (commit
 *				order 1, "last resource"): a marker
 *				_ctas_fed_new_..._<target> is created, then RENAME TABLE
 *				stage TO target.  if_exists 'replace': target
 *				is renamed to _ctas_fed_old_..._<target> first; 'append':
 *				the staged parts are attached to the target (or inserted,
 *				for engines without partitions); DROP TABLE renames the
 *				table to _ctas_fed_drop_..._<target>.
 *	post_commit	the renamed-away tables, markers and appended stages are
 *				dropped.
 *	abort		everything is undone in reverse order: a running INSERT is
 *				killed, renames are reverted, staging tables dropped.  Once
 *				publication has begun, what to revert is read from
 *				system.tables, not assumed (a reply may have been lost).
 *				Failures are WARNINGs; resolve (ctas_fed.resolve_in_doubt)
 *				finishes the job later from the durable record.
 *
 * On a cluster catalog (cluster.c) every action is on one shard
 * (ChAction.shard, its client from CtasChActionHttp): the steps above run
 * for every shard's actions in turn, and one record holds them all, so
 * that the shards are finished or undone as a set.  The fault point
 * ch_after_shard_<n> (tests) stops pre-commit once shard n is published.
 *
 * Durable records: before the first remote effect of each action, the
 * participant's actions and every table name they use are written to a
 * file in the data directory (record.c), removed when the transaction is
 * finished or undone.
 *
 * The walks over the actions at post-commit, abort and the rollback of a
 * savepoint, and the record's lifetime, are staged.c's, shared with every
 * target that stages its publication; this file supplies the SQL
 * (ch_staged_ops).  Each action of the transaction (create, replace,
 * append, drop) is one ChAction in the participant's list, in the order of the statements; the
 * list is also this transaction's view of which tables exist, so that a
 * table created earlier in the same transaction counts as existing.  An
 * action remembers the subtransaction nesting level that created it:
 * ROLLBACK TO SAVEPOINT undoes the actions of that level and deeper, and
 * a released savepoint hands its actions to the parent.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/xact.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/file.h>

#include "access/transam.h"
#include "access/xact.h"
#include "common/file_perm.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/memutils.h"

#include "clickhouse.h"
#include "guc.h"

/* ------------------------------------------------------------------------
 * Server version and transaction state
 * ------------------------------------------------------------------------
 */

/*
 * CtasChCheckVersion
 *		Read the server version (once per client) and choose features from
 *		it.  Servers older than the oldest we know to work are refused:
 *		18.14 has the RowBinary, Decimal, KILL QUERY ... SYNC and ATTACH
 *		PARTITION ... FROM we rely on.  Before 19.1, LowCardinality columns
 *		need allow_experimental_low_cardinality_type (later servers reject
 *		that setting as unknown).
 *
 * XXX: 18.16 has neither EXCHANGE TABLES nor DateTime64 nor Atomic
 * databases; a newer server could get an atomic swap for 'replace' and
 * exact timestamps, chosen here, once tests run against one.
 */
void
CtasChCheckVersion(CtasChHttp *http)
{
	const CtasChHttpVersion *v;
	bool		known = CtasChHttpServerVersionKnown(http);

	v = CtasChHttpServerVersion(http);
	if (known)
		return;
	if (!CtasChHttpVersionAtLeast(http, 18, 14))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("ClickHouse catalog \"%s\" runs version %s, but ctas_fed needs 18.14 or later",
						CtasChHttpCatalogName(http), v->text)));
	if (!CtasChHttpVersionAtLeast(http, 19, 1))
		CtasChHttpAddSetting(http, "allow_experimental_low_cardinality_type", "1");
}

/* The transaction state of part, created on first use */
ChXact *
CtasChXact(CtasParticipant *part)
{
	ChXact	   *xs = (ChXact *) part->private;

	if (xs == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(part->cxt);

		xs = palloc0(sizeof(ChXact));
		xs->http = CtasChHttpCreate(part->catalog, part->cxt);
		xs->cluster = CtasChClusterOpen(part->catalog, part->cxt);
		CtasStagedInit(&xs->staged, part->cxt);
		part->private = xs;
		MemoryContextSwitchTo(old);
	}
	CtasChCheckVersion(xs->http);
	return xs;
}

/*
 * CtasChActionHttp
 *		The client of the server action a is on: a shard of the cluster, or
 *		the catalog's url.  Never an ERROR.
 */
CtasChHttp *
CtasChActionHttp(ChXact *xs, ChAction *a)
{
	if (a->shard > 0 && xs->cluster && a->shard <= xs->cluster->nshards)
		return xs->cluster->http[a->shard - 1];
	Assert(a->shard == 0);
	return xs->http;
}

/*
 * ch_cleanup_query
 *		Run sql on a commit/abort/resolve path; WARNING, CtasStagedCleanupFailed
 *		and false on failure.  The answer goes to *result if result is not
 *		NULL.
 */
static bool
ch_cleanup_query_result(CtasChHttp *http, const char *sql, const char *what,
						const char *object, char **result)
{
	char	   *answer;
	char	   *detail;

	if (CtasChHttpTryQuery(http, sql, what, CTAS_HTTP_CLEANUP, &answer, &detail))
	{
		if (result)
			*result = answer;
		return true;
	}
	CtasStagedCleanupFailed = true;
	ereport(WARNING,
			(errcode(ERRCODE_FDW_ERROR),
			 errmsg("could not %s \"%s\" on ClickHouse catalog \"%s\"",
					what, object, CtasChHttpCatalogName(http)),
			 errdetail_internal("%s", detail ? detail : ""),
			 errhint("ctas_fed.resolve_in_doubt() cleans up what this leaves behind.")));
	return false;
}

static bool
ch_cleanup_query(CtasChHttp *http, const char *sql, const char *what,
				 const char *object)
{
	return ch_cleanup_query_result(http, sql, what, object, NULL);
}

bool
CtasChCleanupDrop(CtasChHttp *http, const char *db, const char *table,
				const char *what)
{
	return ch_cleanup_query(http,
							psprintf("DROP TABLE IF EXISTS %s", CtasChQname(db, table)),
							what, CtasChDisplay(db, table));
}

/*
 * ch_tables_exist
 *		Which of the tables names[0..n-1] (NULL entries skipped) of db exist
 *		on the server now: exists[i].  One round trip; false (with a
 *		WARNING) when the server cannot be asked.
 */
static bool
ch_tables_exist(CtasChHttp *http, const char *db, const char **names, int n,
				bool *exists)
{
	StringInfoData sql;
	char	   *body;
	List	   *rows;
	int			nf;
	ListCell   *lc;
	int			i;
	bool		any = false;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT name FROM system.tables WHERE database = %s AND name IN (",
					 CtasChLit(db));
	for (i = 0; i < n; i++)
	{
		exists[i] = false;
		if (names[i] == NULL)
			continue;
		if (any)
			appendStringInfoString(&sql, ", ");
		CtasChAppendLiteral(&sql, names[i]);
		any = true;
	}
	appendStringInfoChar(&sql, ')');
	if (!any)
		return true;
	if (!ch_cleanup_query_result(http, sql.data,
								 "check the tables of the transaction in database",
								 db, &body))
		return false;
	rows = CtasChTsv(body, &nf);
	if (rows != NIL && nf != 1)
	{
		CtasStagedCleanupFailed = true;
		ereport(WARNING,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("unexpected answer from ClickHouse catalog \"%s\" to a list of tables",
						CtasChHttpCatalogName(http))));
		return false;
	}
	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		for (i = 0; i < n; i++)
		{
			if (f[0] && names[i] && strcmp(f[0], names[i]) == 0)
				exists[i] = true;
		}
	}
	return true;
}

static char *ch_rename_sql(const char *db, const char *from,
						   const char *to);

/*
 * CtasChUndoChecked
 *		Undo action a (CREATE, REPLACE or DROP) of an aborted transaction
 *		from what the server shows, not from what we believe we did: after
 *		a lost reply, or in the resolver after a crash, a rename may or may
 *		not have happened.  The names are the transaction's own (no one
 *		else makes tables called so), and each one's presence tells how
 *		far publication got:
 *
 *		- the marker (CREATE) or the old table (REPLACE) exists and the
 *		  staging table does not: the staging table was renamed to the
 *		  target, which is taken back;
 *		- the old table exists and the target does not: it is put back;
 *		- then the marker and the staging table are dropped.
 *
 *		Every step can be repeated after a failure or a crash.  Returns
 *		false, with a WARNING and *why set, when something is left.
 */
bool
CtasChUndoChecked(CtasChHttp *http, ChAction *a, char **why)
{
	const char *names[4];
	bool		ex[4];
	bool		target_ex,
				stage_ex,
				old_ex,
				marker_ex;

	*why = NULL;
	names[0] = a->base.table;
	names[1] = a->kind == CH_DROP ? NULL : a->base.stage;
	names[2] = a->base.old;
	names[3] = a->base.marker;
	if (!ch_tables_exist(http, a->base.db, names, 4, ex))
	{
		*why = psprintf("could not check the tables of \"%s\"",
						CtasChDisplay(a->base.db, a->base.table));
		return false;
	}
	target_ex = ex[0];
	stage_ex = ex[1];
	old_ex = ex[2];
	marker_ex = ex[3];

	/* take back the published table */
	if (a->kind != CH_DROP && (marker_ex || old_ex) && !stage_ex && target_ex)
	{
		if (!ch_cleanup_query(http, ch_rename_sql(a->base.db, a->base.table, a->base.stage),
							  "take back the published table",
							  CtasChDisplay(a->base.db, a->base.table)))
		{
			*why = psprintf("could not take back table \"%s\"",
							CtasChDisplay(a->base.db, a->base.table));
			return false;
		}
		target_ex = false;
		stage_ex = true;
	}
	/* put back the replaced or dropped table */
	if (old_ex)
	{
		if (target_ex)
		{
			*why = psprintf("table \"%s\" exists again; \"%s\" was left",
							CtasChDisplay(a->base.db, a->base.table),
							CtasChDisplay(a->base.db, a->base.old));
			ereport(WARNING,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("could not restore table \"%s\" of ClickHouse catalog \"%s\"",
							CtasChDisplay(a->base.db, a->base.table), CtasChHttpCatalogName(http)),
					 errdetail("A table of that name exists again; the original is kept as \"%s\".",
							   CtasChDisplay(a->base.db, a->base.old))));
			return false;
		}
		if (!ch_cleanup_query(http, ch_rename_sql(a->base.db, a->base.old, a->base.table),
							  "restore the replaced table",
							  CtasChDisplay(a->base.db, a->base.old)))
		{
			*why = psprintf("could not restore table \"%s\"",
							CtasChDisplay(a->base.db, a->base.table));
			return false;
		}
	}
	/* the marker before the staging table: see the resolver */
	if (marker_ex &&
		!CtasChCleanupDrop(http, a->base.db, a->base.marker, "drop the commit marker"))
	{
		*why = pstrdup("could not drop the commit marker");
		return false;
	}
	if (stage_ex &&
		!CtasChCleanupDrop(http, a->base.db, a->base.stage, "drop the staging table"))
	{
		*why = pstrdup("could not drop the staging table");
		return false;
	}
	return true;
}

static char *
ch_rename_sql(const char *db, const char *from, const char *to)
{
	return psprintf("RENAME TABLE %s TO %s", CtasChQname(db, from),
					CtasChQname(db, to));
}

/*
 * ch_append_step
 *		Run one step of moving the staged rows into the target (an ATTACH
 *		PARTITION or an INSERT ... SELECT) that adds rows rows to it.  The
 *		statement is sent once.  When it fails, the server may still have
 *		run it (a reply lost after the work): with *count >= 0, the row
 *		count the target must have before the step, the target is counted
 *		again to find out.  If the rows arrived, that is success; if not,
 *		or if the count says neither, ERROR.  *count is advanced by rows.
 */
static void
ch_append_step(CtasChHttp *http, ChAction *a, const char *sql, const char *what,
			   uint64 rows, int64 *count, int64 before)
{
	char	   *result;
	char	   *detail;
	char	   *body;
	uint64		now = 0;
	bool		counted = false;

	a->base.state = CTAS_STAGED_PUBLISHING;
	if (CtasChHttpTryQuery(http, sql, what, 0, &result, &detail))
	{
		if (*count >= 0)
			*count += rows;
		return;
	}
	if (*count >= 0 &&
		CtasChHttpTryQuery(http,
						   psprintf("SELECT count() FROM %s", CtasChQname(a->base.db, a->base.table)),
						   "count the rows of the target table", 0, &body, NULL))
	{
		now = CtasChParseCount(http, body, "SELECT count()");
		counted = true;
		if (now == (uint64) *count + rows)
		{
			ereport(LOG,
					(errmsg("ctas_fed: the answer to a ClickHouse request was lost, but the rows arrived in table \"%s\" of catalog \"%s\"",
							CtasChDisplay(a->base.db, a->base.table), CtasChHttpCatalogName(http)),
					 errdetail_internal("%s", detail ? detail : "")));
			*count += rows;
			return;
		}
		if (now == (uint64) *count && *count == before)
			a->base.state = CTAS_STAGED_LOADED;	/* nothing of ours arrived */
	}
	ereport(ERROR,
			(errcode(ERRCODE_FDW_ERROR),
			 errmsg("could not %s on ClickHouse catalog \"%s\"",
					what, CtasChHttpCatalogName(http)),
			 errdetail_internal("%s", detail ? detail : ""),
			 counted && now != (uint64) *count ?
			 errhint("Table \"%s\" holds " UINT64_FORMAT " rows; " INT64_FORMAT " were expected without the step and " UINT64_FORMAT " with it.",
					 CtasChDisplay(a->base.db, a->base.table), now, *count,
					 (uint64) *count + rows) : 0));
}

/*
 * ch_append_move
 *		Move the staged rows into the target: the stage's parts are
 *		attached partition by partition (MergeTree engines: each attach is
 *		atomic, and no row is copied), else INSERT ... SELECT.  Each
 *		statement is sent once (ch_append_step); for targets whose rows
 *		can be counted exactly, a lost reply is settled from the target's
 *		row count, which assumes that no one else writes to the target
 *		during the commit.
 */
static void
ch_append_move(CtasChHttp *http, ChAction *a)
{
	char	   *engine = CtasChRemoteEngine(http, a->base.db, a->base.stage);
	char	   *target_engine = CtasChRemoteEngine(http, a->base.db, a->base.table);
	int64		count = -1;
	int64		before;

	if (CtasChCountCheckMode(target_engine) == 1)
		count = (int64) CtasChParseCount(http,
									   CtasChHttpQuery(http,
													   psprintf("SELECT count() FROM %s",
																CtasChQname(a->base.db, a->base.table)),
													   "count the rows of the target table"),
									   "SELECT count()");
	before = count;

	if (CtasChIsMergetree(engine) && strcmp(engine, target_engine) == 0 &&
		strncmp(engine, "Replicated", 10) != 0)
	{
		char	   *body;
		List	   *rows;
		int			nf;
		ListCell   *lc;

		body = CtasChHttpQuery(http,
							   psprintf("SELECT partition_id, sum(rows) FROM system.parts WHERE database = %s AND table = %s AND active GROUP BY partition_id ORDER BY partition_id",
										CtasChLit(a->base.db), CtasChLit(a->base.stage)),
							   "list the partitions of the staging table");
		rows = CtasChTsv(body, &nf);
		foreach(lc, rows)
		{
			char	  **f = lfirst(lc);

			if (nf != 2 || f[0] == NULL || f[1] == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_ERROR),
						 errmsg("unexpected answer from ClickHouse catalog \"%s\" to a list of partitions",
								CtasChHttpCatalogName(http))));
			ch_append_step(http, a,
						   psprintf("ALTER TABLE %s ATTACH PARTITION ID %s FROM %s",
									CtasChQname(a->base.db, a->base.table), CtasChLit(f[0]),
									CtasChQname(a->base.db, a->base.stage)),
						   "attach the staged rows to the target table",
						   CtasChParseCount(http, f[1], "a list of partitions"),
						   &count, before);
		}
	}
	else
		ch_append_step(http, a,
					   psprintf("INSERT INTO %s SELECT * FROM %s",
								CtasChQname(a->base.db, a->base.table),
								CtasChQname(a->base.db, a->base.stage)),
					   "insert the staged rows into the target table",
					   a->rows, &count, before);
}

/*
 * CtasChPreCommit
 *		pre_commit of the writer: publish every action, in statement order.
 *		Runs after all two-phase participants have prepared.  An ERROR here
 *		aborts the local transaction, and CtasChAbort undoes what was done.
 *
 * XXX: appends are published in statement order, interleaved with the
 * renames; moving them after every rename (and every other participant)
 * would narrow the window in which a later failure leaves appended rows.
 */
void
CtasChPreCommit(CtasParticipant *part)
{
	ChXact	   *xs = (ChXact *) part->private;
	ListCell   *lc;
	int			i;

	if (xs == NULL)
		return;
	for (i = 0; i <= CH_MAX_SHARDS; i++)
	{
		if (xs->stream[i])
			elog(ERROR, "ClickHouse INSERT still open at commit");
	}

	/*
	 * Every action is in the durable record already (ch_new_action in writer.c), and
	 * resolve decides it by this transaction's outcome; xact.c made the
	 * xid durable when the transaction joined (CtasJoinTransaction).
	 */
	/* for ctas_fed.jobs: the object resolve reports on, and no 2PC */
	if (xs->staged.actions != NIL)
	{
		part->gid = MemoryContextStrdup(part->cxt, CtasChRecordGid(xs));
		part->one_phase = true;
	}

	foreach(lc, xs->staged.actions)
	{
		ChAction   *a = lfirst(lc);
		CtasChHttp *http = CtasChActionHttp(xs, a);

		if (a->base.state != CTAS_STAGED_LOADED)
			elog(ERROR, "ClickHouse staging table \"%s\" was never completed",
				 a->base.stage);

		/*
		 * From the first request on, the outcome may be unknown (a lost
		 * reply): undo then asks the server what happened.  An append is
		 * publishing from its first step on (ch_append_step).
		 */
		if (a->kind != CH_APPEND)
			a->base.state = CTAS_STAGED_PUBLISHING;
		switch (a->kind)
		{
			case CH_CREATE:
				/*
				 * The marker outlives a crash between the rename and the
				 * local commit record: resolve then finds it and, the local
				 * transaction having aborted, drops the published table.
				 */
				CtasChHttpQuery(http,
								psprintf("CREATE TABLE %s (x UInt8) ENGINE = TinyLog",
										 CtasChQname(a->base.db, a->base.marker)),
								"record the publication");
				CtasChHttpQuery(http, ch_rename_sql(a->base.db, a->base.stage, a->base.table),
								"publish the new table");
				break;
			case CH_REPLACE:
				CtasChHttpQuery(http, ch_rename_sql(a->base.db, a->base.table, a->base.old),
								"move the replaced table away");
				CtasChHttpQuery(http, ch_rename_sql(a->base.db, a->base.stage, a->base.table),
								"publish the new table");
				break;
			case CH_APPEND:
				ch_append_move(http, a);
				break;
			case CH_DROP:
				CtasChHttpQuery(http, ch_rename_sql(a->base.db, a->base.table, a->base.old),
								"drop the table");
				break;
		}
		if (a->base.state == CTAS_STAGED_PUBLISHING)
			a->base.state = CTAS_STAGED_PUBLISHED;

		/* tests: a crash between the shards of a cluster */
		if (a->shard > 0 &&
			(lnext(xs->staged.actions, lc) == NULL ||
			 ((ChAction *) lfirst(lnext(xs->staged.actions, lc)))->shard != a->shard))
			CtasFaultPointWait(psprintf("ch_after_shard_%d", a->shard));
	}
}

/*
 * ch_finish
 *		finish of the staged publication (CtasChPostCommit): drop what was
 *		moved away.  WARNINGs only; what is left stays in the record, from
 *		which resolve drops the leftovers.
 */
static void
ch_finish(CtasParticipant *part, void *arg, CtasStagedAction *base)
{
	ChXact	   *xs = (ChXact *) part->private;
	ChAction   *a = (ChAction *) base;

	switch (a->base.state)
	{
		case CTAS_STAGED_PUBLISHED:
			/*
			 * Left remotely: the replaced or dropped table under its
			 * scratch name, the commit marker of a created table, or the
			 * staging table of an append.
			 */
			if (a->kind == CH_REPLACE || a->kind == CH_DROP)
				CtasChCleanupDrop(CtasChActionHttp(xs, a), a->base.db, a->base.old, "drop the old table");
			else if (a->kind == CH_CREATE)
				CtasChCleanupDrop(CtasChActionHttp(xs, a), a->base.db, a->base.marker, "drop the commit marker");
			else
				CtasChCleanupDrop(CtasChActionHttp(xs, a), a->base.db, a->base.stage, "drop the staging table");
			break;
		case CTAS_STAGED_LOADED:
			/* an append with no rows to move: its staging table is left */
			if (a->kind == CH_APPEND)
				CtasChCleanupDrop(CtasChActionHttp(xs, a), a->base.db, a->base.stage, "drop the staging table");
			break;
		case CTAS_STAGED_STAGING:
		case CTAS_STAGED_PUBLISHING:
			/* pre_commit got past these or failed: cannot happen */
			break;
	}
}

/*
 * ch_undo
 *		Undo one action, whatever stage it reached.  Before publication the
 *		state says what exists; from the first request of publication on
 *		the server is asked (CtasChUndoChecked).  WARNINGs only; what is
 *		left stays in the durable record.
 */
static void
ch_undo(CtasParticipant *part, void *arg, CtasStagedAction *base,
		bool subxact)
{
	ChXact	   *xs = (ChXact *) part->private;
	ChAction   *a = (ChAction *) base;
	CtasChHttp *http = CtasChActionHttp(xs, a);
	char	   *why;

	switch (a->base.state)
	{
		case CTAS_STAGED_STAGING:
		case CTAS_STAGED_LOADED:
			/* left remotely: the staging table, if any (none for a drop) */
			if (a->kind != CH_DROP)
				CtasChCleanupDrop(http, a->base.db, a->base.stage, "drop the staging table");
			break;
		case CTAS_STAGED_PUBLISHING:
		case CTAS_STAGED_PUBLISHED:
			if (a->kind == CH_APPEND)
			{
				/*
				 * Left remotely: the rows moved into the target, which
				 * ClickHouse cannot take back, and the staging table.
				 */
				ereport(WARNING,
						(errcode(ERRCODE_FDW_ERROR),
						 errmsg("rows appended to table \"%s\" of ClickHouse catalog \"%s\" stay there",
								CtasChDisplay(a->base.db, a->base.table), CtasChHttpCatalogName(http)),
						 errdetail("The transaction failed after the rows were moved into the table; ClickHouse cannot take them back.")));
				CtasChCleanupDrop(http, a->base.db, a->base.stage, "drop the staging table");
			}
			else if (!CtasChUndoChecked(http, a, &why))
			{
				/*
				 * Left remotely: anything from the staging table to the
				 * whole publication; the server says which, and what
				 * could not be undone is the resolver's.
				 */
				part->in_doubt = true;
			}
			break;
	}
}

/* Stop the open INSERTs, if any, on every shard (abort paths) */
static void
ch_kill_stream(ChXact *xs)
{
	int			i;

	for (i = 0; i <= CH_MAX_SHARDS; i++)
	{
		if (xs->stream[i])
			CtasChHttpStreamClose(xs->stream[i]);	/* kills, clears the slot */
		else if (xs->stream_qid[i])
			CtasChHttpKillQuery(i == 0 || xs->cluster == NULL ||
								i > xs->cluster->nshards ?
								xs->http : xs->cluster->http[i - 1],
								xs->stream_qid[i]);
		xs->stream[i] = NULL;
		xs->stream_qid[i] = NULL;
	}
}

/* Forget the open INSERTs without touching them (error recursion) */
static void
ch_unwatch_streams(ChXact *xs)
{
	int			i;

	for (i = 0; i <= CH_MAX_SHARDS; i++)
	{
		if (xs->stream[i])
			CtasChHttpStreamUnwatch(xs->stream[i]);
		xs->stream[i] = NULL;
	}
}

/* Is an INSERT open or unfinished on any shard? */
static bool
ch_any_stream(ChXact *xs)
{
	int			i;

	for (i = 0; i <= CH_MAX_SHARDS; i++)
	{
		if (xs->stream[i] || xs->stream_qid[i])
			return true;
	}
	return false;
}

/* abort: the INSERTs still open are stopped before the actions are undone */
static void *
ch_begin(CtasParticipant *part, bool commit)
{
	if (!commit)
		ch_kill_stream((ChXact *) part->private);
	return NULL;
}

/*
 * ch_subxact
 *		The end of a subtransaction, before its actions are walked: a
 *		committed one hands its INSERT to the parent, a rolled-back one
 *		stops it (or, in error recursion, forgets it untouched).
 */
static void *
ch_subxact(CtasParticipant *part, SubXactEvent event, int level,
		   bool trouble)
{
	ChXact	   *xs = (ChXact *) part->private;

	if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
	{
		if (ch_any_stream(xs) && xs->stream_level >= level)
			xs->stream_level = level - 1;
	}
	else if (trouble)
	{
		if (xs->stream_level >= level)
			ch_unwatch_streams(xs);
	}
	else if (ch_any_stream(xs) && xs->stream_level >= level)
		ch_kill_stream(xs);
	return NULL;
}

/* The ClickHouse target's side of a staged publication (staged.c) */
static const CtasStagedOps ch_staged_ops = {
	.begin = ch_begin,
	.finish = ch_finish,
	.undo = ch_undo,
	.subxact = ch_subxact,
};

/*
 * CtasChPostCommit
 *		post_commit of the writer: drop what was moved away (ch_finish).
 *		Never an ERROR: failures are WARNINGs, and the durable record then
 *		stays, from which resolve drops the leftovers.  The record goes
 *		once everything is dropped.
 */
void
CtasChPostCommit(CtasParticipant *part)
{
	ChXact	   *xs = (ChXact *) part->private;

	if (xs != NULL)
		CtasStagedEnd(part, &xs->staged, &ch_staged_ops, true);
}

/*
 * CtasChAbort
 *		abort of the writer: stop a running INSERT, then undo every action
 *		in reverse order.  Never an ERROR.
 */
void
CtasChAbort(CtasParticipant *part)
{
	ChXact	   *xs = (ChXact *) part->private;

	if (xs == NULL)
		return;
	if (in_error_recursion_trouble())
	{
		/* the streams must not touch xs, which goes away now */
		ch_unwatch_streams(xs);
		return;					/* resolve will clean up */
	}
	CtasStagedEnd(part, &xs->staged, &ch_staged_ops, false);
}

/*
 * CtasChSubxact
 *		subxact of the writer.  Commit of a subtransaction hands its actions
 *		to the parent level; abort (ROLLBACK TO SAVEPOINT, or an error in a
 *		subtransaction) stops its INSERT and undoes the actions of that
 *		level and deeper, which are never published yet (staged.c).  Never
 *		an ERROR.
 */
void
CtasChSubxact(CtasParticipant *part, SubXactEvent event, int level)
{
	ChXact	   *xs = (ChXact *) part->private;

	if (xs != NULL)
		CtasStagedSubxact(part, &xs->staged, &ch_staged_ops, event, level);
}
