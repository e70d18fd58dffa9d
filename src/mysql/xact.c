/*-------------------------------------------------------------------------
 *
 * xact.c
 *		  The transaction steps of the MySQL target and its durable records.
 *
 * A participant (one user mapping in one local transaction) holds up to
 * two sessions: "conn", in autocommit, for DDL and the staging tables
 * (MySQL commits DDL by itself, and allows none inside XA), and "xa_conn",
 * the XA transaction that carries appended rows.  A parallel append has
 * one more XA branch per worker, prepared by the worker at the end of its
 * stream (writer.c); its append action names their gids, and they are
 * committed after the local commit and rolled back on abort with the rest
 * (CtasMySettleBranches).
 *
 *	pre_commit	(commit order "last resource") XA END + XA PREPARE of the
 *				appends, then one multi-pair RENAME TABLE that publishes
 *				every create, replace and drop of the transaction at once:
 *				create: stage -> target, marker -> old; replace: target ->
 *				old, stage -> target; drop: target -> old.  MySQL applies
 *				all pairs or none.
 *	post_commit	XA COMMIT (of the workers' branches too); the "old" tables
 *				are dropped.
 *	abort		XA ROLLBACK (or the session closed, which rolls back an
 *				unprepared branch); staging tables dropped; after a sent
 *				RENAME, what to revert is read from the server: "old"
 *				exists iff the rename took effect.
 *	subxact		savepoints of the XA session follow the local ones; the
 *				actions of a rolled-back subtransaction (never published)
 *				are undone, the branches of its parallel appends rolled
 *				back (if that fails, they stay the transaction's, whose
 *				commit is then refused).
 *
 * The walks over the actions at post_commit, abort and subxact, and the
 * record's lifetime, are staged.c's, shared with every target that stages
 * its publication; this file supplies the SQL (my_staged_ops).
 *
 * Durable records (xrecord.c: written, locked, checksummed and removed as
 * for every target that stages its publication): before the first remote
 * effect of each action and before XA START, the participant's actions,
 * their table names and its XA gid are written to
 * pg_ctas_fed/my_<full xid>_<server>_<user mapping>.  The resolver
 * (resolve.c) acts on nothing else.  The header's magic is "ctas_fed
 * mysql", version 2, its gid the XA gid; then one line per action:
 *		<kind>	<db>	<table>	<stage>	<marker>	<old>	<branches>	<n>
 * where a parallel append names the gids of its workers' XA branches:
 * <branches><i> for i in 0..n (gid.c, CtasGidMakeWorker).  Version 1
 * (written before parallel appends) has no last two fields.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/mysql/xact.c
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
#include "utils/timestamp.h"

#include "gid.h"
#include "mysql_target.h"
#include "xrecord.h"

/* MySQL's "unknown XID" (XAER_NOTA), "the XID already exists" (XAER_DUPID) */
#define MY_ER_XAER_NOTA		1397
#define MY_ER_XAER_DUPID	1440

/* how long the branches of parallel workers are waited for, in ms */
#define MY_BRANCH_WAIT_MS	30000

/* by MyActionKind */
const char *const CtasMyActionNames[MY_APPEND + 1] = {
	"create", "replace", "drop", "append"
};

/* ------------------------------------------------------------------------
 * Durable records
 * ------------------------------------------------------------------------
 */

/*
 * CtasMyRecordWrite
 *		Write the durable record of part with the actions and XA gid of xs
 *		as they are now (xrecord.c).  ERROR on an I/O failure, before the
 *		remote effect it is written for.
 */
void
CtasMyRecordWrite(CtasParticipant *part, MyXact *xs)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	CtasRecordHeader(&buf, MY_RECORD_MAGIC, MY_RECORD_VERSION,
					 part->serverid, part->umid, xs->xa_gid);
	foreach(lc, xs->staged.actions)
	{
		MyAction   *a = lfirst(lc);

		CtasRecordField(&buf, CtasMyActionNames[a->kind], false);
		CtasRecordField(&buf, a->base.db, false);
		CtasRecordField(&buf, a->base.table, false);
		CtasRecordField(&buf, a->base.stage, false);
		CtasRecordField(&buf, a->base.marker, false);
		CtasRecordField(&buf, a->base.old, false);
		CtasRecordField(&buf, a->branches, false);
		CtasRecordField(&buf, a->branches ? psprintf("%d", a->nbranches) : NULL,
						true);
	}
	CtasRecordWrite(xs->staged.record_path, &xs->staged.record_fd, MY_RECORD_PREFIX,
					part->serverid, part->umid, &buf);
	pfree(buf.data);
}

/* ------------------------------------------------------------------------
 * Transaction state
 * ------------------------------------------------------------------------
 */

/* The transaction state of part, with its session, created on first use */
MyXact *
CtasMyXact(CtasParticipant *part)
{
	MyXact	   *xs = (MyXact *) part->private;

	if (xs == NULL)
	{
		xs = MemoryContextAllocZero(part->cxt, sizeof(MyXact));
		CtasStagedInit(&xs->staged, part->cxt);
		part->private = xs;
	}
	if (xs->conn == NULL || CtasMyBroken(xs->conn))
		xs->conn = CtasMyConnect(part->catalog, part->cxt, false);
	return xs;
}

/*
 * CtasMyNewAction
 *		A new action at the current nesting level, with its scratch names
 *		(at most 64 characters, MySQL's limit: no target name in them),
 *		written to the durable record before it returns.
 */
MyAction *
CtasMyNewAction(CtasParticipant *part, MyXact *xs, MyActionKind kind,
				const char *db, const char *table)
{
	MyAction   *a;
	int			serial = CtasScratchSerial();
	MemoryContext old;

	a = (MyAction *) CtasStagedNewAction(&xs->staged, part->cxt,
										 sizeof(MyAction), db, table);
	old = MemoryContextSwitchTo(part->cxt);
	a->kind = kind;
	if (kind == MY_CREATE || kind == MY_REPLACE)
		a->base.stage = CtasScratchName("stage", serial, CtasStagedToken());
	if (kind == MY_CREATE)
		a->base.marker = CtasScratchName("new", serial, CtasStagedToken());
	if (kind != MY_APPEND)
		a->base.old = CtasScratchName("old", serial, CtasStagedToken());
	MemoryContextSwitchTo(old);

	CtasMyRecordWrite(part, xs);
	return a;
}

/*
 * CtasMyXaBegin
 *		The XA session of the transaction, with XA START done and one
 *		savepoint per open subtransaction level.  The gid
 *		(CtasGidMake) is recorded durably before XA START.  ERROR on
 *		failure.
 */
MyConn *
CtasMyXaBegin(CtasParticipant *part, MyXact *xs)
{
	int			level = GetCurrentTransactionNestLevel();

	if (xs->xa_state == MY_XA_NONE)
	{
		xs->xa_gid = MemoryContextStrdup(part->cxt, CtasGidMake(part->serial));
		CtasMyRecordWrite(part, xs);
		xs->xa_conn = CtasMyConnect(part->catalog, part->cxt, false);
		CtasMyExec(xs->xa_conn,
				   psprintf("XA START %s", CtasMyLiteral(xs->xa_gid)),
				   "start the XA transaction");
		xs->xa_state = MY_XA_ACTIVE;
		xs->xa_depth = 1;
		part->gid = xs->xa_gid;
	}
	if (CtasMyBroken(xs->xa_conn))
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("the XA transaction on MySQL catalog \"%s\" was lost",
						part->catalog->name),
				 errdetail("Its session broke earlier in this transaction; the server rolled it back.")));
	while (xs->xa_depth < level)
	{
		xs->xa_depth++;
		CtasMyExec(xs->xa_conn, psprintf("SAVEPOINT s%d", xs->xa_depth),
				   "set a savepoint");
	}
	return xs->xa_conn;
}

/* ------------------------------------------------------------------------
 * Cleanup helpers
 * ------------------------------------------------------------------------
 */

/*
 * CtasMyCleanup
 *		Run sql on a commit/abort/resolve path: WARNING,
 *		CtasStagedCleanupFailed and false on failure.
 */
bool
CtasMyCleanup(MyConn *conn, const char *sql, const char *what,
			  const char *object)
{
	char	   *detail;

	if (conn != NULL &&
		CtasMyTryQuery(conn, sql, what, MY_Q_CLEANUP, NULL, &detail, NULL))
		return true;
	CtasStagedCleanupFailed = true;
	ereport(WARNING,
			(errcode(ERRCODE_FDW_ERROR),
			 errmsg("could not %s \"%s\" on MySQL catalog \"%s\"",
					what, object, conn ? CtasMyCatalogName(conn) : "?"),
			 errdetail_internal("%s", conn && detail ? detail : "no connection"),
			 errhint("ctas_fed.resolve_in_doubt() cleans up what this leaves behind.")));
	return false;
}

static bool
my_drop(MyConn *conn, const char *db, const char *table, const char *what)
{
	return CtasMyCleanup(conn,
						 psprintf("DROP TABLE IF EXISTS %s", CtasMyQname(db, table)),
						 what, CtasMyDisplay(db, table));
}

/*
 * my_exist
 *		Which of names[0..n-1] (NULL skipped) exist in db: exists[i].
 *		false (WARNING) when the server cannot be asked.
 */
static bool
my_exist(MyConn *conn, const char *db, const char **names, int n,
		 bool *exists)
{
	StringInfoData sql;
	List	   *rows;
	ListCell   *lc;
	char	   *detail;
	int			i;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_name IN (''",
					 CtasMyLiteral(db));
	for (i = 0; i < n; i++)
	{
		exists[i] = false;
		if (names[i])
			appendStringInfo(&sql, ", %s", CtasMyLiteral(names[i]));
	}
	appendStringInfoChar(&sql, ')');
	if (conn == NULL ||
		!CtasMyTryQuery(conn, sql.data, "check the tables", MY_Q_CLEANUP,
						&rows, &detail, NULL))
	{
		CtasStagedCleanupFailed = true;
		ereport(WARNING,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not check the tables of database \"%s\" on MySQL catalog \"%s\"",
						db, conn ? CtasMyCatalogName(conn) : "?"),
				 errdetail_internal("%s", conn && detail ? detail : "no connection")));
		return false;
	}
	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		for (i = 0; i < n; i++)
			if (f[0] && names[i] && strcmp(f[0], names[i]) == 0)
				exists[i] = true;
	}
	return true;
}

/*
 * CtasMyUndoChecked
 *		Undo create, replace or drop action a from what the server shows:
 *		"old" exists iff the publishing RENAME took effect (it is atomic).
 *		Then the rename is reverted in one statement, and the scratch tables
 *		are dropped.  Repeatable after a failure or a crash.  false, with a
 *		WARNING and *why, when something is left.
 */
bool
CtasMyUndoChecked(MyConn *conn, MyAction *a, char **why)
{
	const char *names[4] = {a->base.table, a->base.stage, a->base.marker, a->base.old};
	bool		ex[4];
	char	   *sql = NULL;

	*why = NULL;
	if (a->kind == MY_APPEND)
		return true;
	if (!my_exist(conn, a->base.db, names, 4, ex))
	{
		*why = psprintf("could not check the tables of \"%s\"",
						CtasMyDisplay(a->base.db, a->base.table));
		return false;
	}
	if (ex[3])
	{
		/* published: take it back */
		if (a->kind == MY_DROP)
		{
			if (!ex[0])
				sql = psprintf("RENAME TABLE %s TO %s",
							   CtasMyQname(a->base.db, a->base.old), CtasMyQname(a->base.db, a->base.table));
		}
		else if (ex[0] && !ex[1])
		{
			if (a->kind == MY_CREATE)
				sql = psprintf("RENAME TABLE %s TO %s, %s TO %s",
							   CtasMyQname(a->base.db, a->base.table), CtasMyQname(a->base.db, a->base.stage),
							   CtasMyQname(a->base.db, a->base.old), CtasMyQname(a->base.db, a->base.marker));
			else
				sql = psprintf("RENAME TABLE %s TO %s, %s TO %s",
							   CtasMyQname(a->base.db, a->base.table), CtasMyQname(a->base.db, a->base.stage),
							   CtasMyQname(a->base.db, a->base.old), CtasMyQname(a->base.db, a->base.table));
		}
		if (sql == NULL)
		{
			*why = psprintf("table \"%s\" changed after it was published; \"%s\" was left",
							CtasMyDisplay(a->base.db, a->base.table), CtasMyDisplay(a->base.db, a->base.old));
			CtasStagedCleanupFailed = true;
			ereport(WARNING,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("could not take back table \"%s\" of MySQL catalog \"%s\"",
							CtasMyDisplay(a->base.db, a->base.table), CtasMyCatalogName(conn)),
					 errdetail("The table changed after it was published; \"%s\" is kept.",
							   CtasMyDisplay(a->base.db, a->base.old))));
			return false;
		}
		if (!CtasMyCleanup(conn, sql, "take back the publication of",
						   CtasMyDisplay(a->base.db, a->base.table)))
		{
			*why = psprintf("could not take back \"%s\"", CtasMyDisplay(a->base.db, a->base.table));
			return false;
		}
		if (a->kind == MY_DROP)
			return true;
	}
	if (a->base.stage && !my_drop(conn, a->base.db, a->base.stage, "drop the staging table"))
	{
		*why = pstrdup("could not drop the staging table");
		return false;
	}
	if (a->base.marker && !my_drop(conn, a->base.db, a->base.marker, "drop the commit marker"))
	{
		*why = pstrdup("could not drop the commit marker");
		return false;
	}
	return true;
}

/*
 * A live session for a commit or abort path: xs->conn, or a new one in cxt.
 * Sessions of the transaction that broke in the middle of a statement are
 * ended first (their statements hold locks on what is to be undone).
 */
static MyConn *
my_cleanup_conn(CtasParticipant *part, MyXact *xs, MemoryContext cxt)
{
	MyConn	   *conn = xs->conn;

	if (conn == NULL || CtasMyBroken(conn))
		conn = CtasMyConnect(part->catalog, cxt, true);
	CtasMyKill(xs->conn, conn);
	CtasMyKill(xs->xa_conn, conn);
	return conn;
}

/* ------------------------------------------------------------------------
 * The XA branches of parallel workers
 * ------------------------------------------------------------------------
 */

/* the prepared branches whose gid starts with prefix, or false (*why) */
static bool
my_prepared_branches(MyConn *conn, const char *prefix, List **gids,
					 char **why)
{
	List	   *rows;
	ListCell   *lc;
	char	   *detail;

	*gids = NIL;
	if (!CtasMyTryQuery(conn, "XA RECOVER", "list XA transactions",
						MY_Q_CLEANUP, &rows, &detail, NULL))
	{
		*why = psprintf("could not list the XA transactions: %s",
						detail ? detail : "no answer");
		return false;
	}
	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		/* formatID, gtrid_length, bqual_length, data */
		if (f[2] && strcmp(f[2], "0") == 0 && f[3] &&
			strncmp(f[3], prefix, strlen(prefix)) == 0)
			*gids = lappend(*gids, pstrdup(f[3]));
	}
	return true;
}

/*
 * my_branch_rollback
 *		Make sure the branch gid is not, and will never be, prepared: XA
 *		ROLLBACK if it is prepared; else take the gid ourselves (XA START,
 *		XA END, XA ROLLBACK of an empty branch), which no session can then
 *		go on to prepare: a worker prepares only a branch that its XA START
 *		took before.  A gid that another session holds (the branch of a
 *		worker that was terminated, whose session the server has not yet
 *		ended; or a prepared branch still attached to it) is retried until
 *		deadline.  false, with *why, when it could not be settled.
 */
static bool
my_branch_rollback(MyConn *conn, const char *gid, TimestampTz deadline,
				   char **why)
{
	const char *lit = CtasMyLiteral(gid);

	for (;;)
	{
		unsigned int err = 0;
		char	   *detail = NULL;

		if (CtasMyTryQuery(conn, psprintf("XA ROLLBACK %s", lit),
						   "roll back an XA branch", MY_Q_CLEANUP, NULL,
						   &detail, &err))
			return true;
		if (err == MY_ER_XAER_NOTA)
		{
			if (CtasMyTryQuery(conn, psprintf("XA START %s", lit),
							   "take an XA branch", MY_Q_CLEANUP, NULL,
							   &detail, &err))
			{
				if (CtasMyTryQuery(conn, psprintf("XA END %s", lit),
								   "take an XA branch", MY_Q_CLEANUP, NULL,
								   &detail, &err) &&
					CtasMyTryQuery(conn, psprintf("XA ROLLBACK %s", lit),
								   "take an XA branch", MY_Q_CLEANUP, NULL,
								   &detail, &err))
					return true;
			}
			else if (err == MY_ER_XAER_DUPID &&
					 GetCurrentTimestamp() < deadline)
			{
				/* another session holds it: wait for it to end */
				pg_usleep(20000L);
				continue;
			}
		}
		*why = psprintf("could not roll back XA branch \"%s\": %s", gid,
						detail ? detail : "another session holds it");
		return false;
	}
}

/*
 * CtasMySettleBranches
 *		Commit or roll back the XA branches of the workers of a parallel
 *		append, gids prefix<i> for i in 0..nmax, on conn (autocommit, no XA
 *		transaction of its own).  Commit: every prepared one that XA
 *		RECOVER lists; a branch still attached to its worker's session
 *		(which the server ends a little after the worker closed it: XAER_NOTA
 *		then) is retried.  Roll back: every gid, whether prepared or not
 *		(my_branch_rollback), so that none can show up later.  Repeatable.
 *		false, with *why, when something is left (the caller warns).
 */
bool
CtasMySettleBranches(MyConn *conn, const char *prefix, int nmax, bool commit,
					 char **why)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   MY_BRANCH_WAIT_MS);
	int			i;

	*why = NULL;
	if (conn == NULL)
	{
		*why = pstrdup("no connection");
		return false;
	}
	if (!commit)
	{
		for (i = 0; i <= nmax; i++)
			if (!my_branch_rollback(conn, psprintf("%s%d", prefix, i),
									deadline, why))
				return false;
		return true;
	}
	for (;;)
	{
		List	   *gids;
		ListCell   *lc;
		bool		attached = false;

		if (!my_prepared_branches(conn, prefix, &gids, why))
			return false;
		foreach(lc, gids)
		{
			char	   *gid = lfirst(lc);
			unsigned int err = 0;
			char	   *detail = NULL;

			if (CtasMyTryQuery(conn, psprintf("XA COMMIT %s", CtasMyLiteral(gid)),
							   "commit an XA branch", MY_Q_CLEANUP, NULL,
							   &detail, &err))
				continue;
			if (err != MY_ER_XAER_NOTA)
			{
				*why = psprintf("could not commit XA branch \"%s\": %s", gid,
								detail ? detail : "no answer");
				return false;
			}
			attached = true;
		}
		if (!attached)
			return true;
		if (GetCurrentTimestamp() >= deadline)
		{
			*why = psprintf("XA branches \"%s*\" are still held by their sessions",
							prefix);
			return false;
		}
		pg_usleep(20000L);
	}
}

/* settle the branches of action a, with a WARNING on failure */
static bool
my_settle_action(MyConn *conn, CtasParticipant *part, MyAction *a,
				 bool commit)
{
	char	   *why;

	if (a->branches == NULL)
		return true;
	if (CtasMySettleBranches(conn, a->branches, a->nbranches, commit, &why))
		return true;
	CtasStagedCleanupFailed = true;
	ereport(WARNING,
			(errcode(ERRCODE_FDW_ERROR),
			 errmsg("could not %s the XA branches of the parallel workers that appended to \"%s\" on MySQL catalog \"%s\"",
					commit ? "commit" : "roll back",
					CtasMyDisplay(a->base.db, a->base.table), part->catalog->name),
			 errdetail_internal("%s", why ? why : ""),
			 errhint("ctas_fed.resolve_in_doubt() finishes them.")));
	return false;
}

/* ------------------------------------------------------------------------
 * Transaction events
 * ------------------------------------------------------------------------
 */

/*
 * CtasMyPreCommit
 *		pre_commit of the writer: XA PREPARE, then one RENAME that publishes
 *		every other action.  An ERROR aborts the local transaction and
 *		CtasMyAbort undoes.
 */
void
CtasMyPreCommit(CtasParticipant *part)
{
	MyXact	   *xs = (MyXact *) part->private;
	StringInfoData sql;
	ListCell   *lc;
	bool		any = false;

	if (xs == NULL)
		return;
	if (xs->doomed)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("cannot commit a transaction whose rolled-back savepoint left XA branches on MySQL catalog \"%s\"",
						part->catalog->name),
				 errdetail_internal("%s", xs->doomed)));
	if (xs->xa_state == MY_XA_ACTIVE)
	{
		if (CtasMyBroken(xs->xa_conn))
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("the XA transaction on MySQL catalog \"%s\" was lost",
							part->catalog->name)));
		xs->xa_state = MY_XA_PREPARING;
		CtasMyExec(xs->xa_conn, psprintf("XA END %s", CtasMyLiteral(xs->xa_gid)),
				   "end the XA transaction");
		CtasMyExec(xs->xa_conn, psprintf("XA PREPARE %s", CtasMyLiteral(xs->xa_gid)),
				   "prepare the XA transaction");
		xs->xa_state = MY_XA_PREPARED;
		part->gid = xs->xa_gid;
	}

	initStringInfo(&sql);
	appendStringInfoString(&sql, "RENAME TABLE ");
	foreach(lc, xs->staged.actions)
	{
		MyAction   *a = lfirst(lc);
		const char *sep = any ? ", " : "";

		if (a->kind == MY_APPEND)
			continue;
		if (a->base.state != CTAS_STAGED_LOADED)
			elog(ERROR, "MySQL staging table \"%s\" was never completed",
				 a->base.stage ? a->base.stage : a->base.table);
		switch (a->kind)
		{
			case MY_CREATE:
				appendStringInfo(&sql, "%s%s TO %s, %s TO %s", sep,
								 CtasMyQname(a->base.db, a->base.stage), CtasMyQname(a->base.db, a->base.table),
								 CtasMyQname(a->base.db, a->base.marker), CtasMyQname(a->base.db, a->base.old));
				break;
			case MY_REPLACE:
				appendStringInfo(&sql, "%s%s TO %s, %s TO %s", sep,
								 CtasMyQname(a->base.db, a->base.table), CtasMyQname(a->base.db, a->base.old),
								 CtasMyQname(a->base.db, a->base.stage), CtasMyQname(a->base.db, a->base.table));
				break;
			case MY_DROP:
				appendStringInfo(&sql, "%s%s TO %s", sep,
								 CtasMyQname(a->base.db, a->base.table), CtasMyQname(a->base.db, a->base.old));
				break;
			case MY_APPEND:
				break;
		}
		any = true;
	}
	/* the job's gid: the XA branch, else the first name to look for */
	foreach(lc, xs->staged.actions)
	{
		MyAction   *a = lfirst(lc);

		if (part->gid == NULL && (a->branches || a->base.old))
			part->gid = MemoryContextStrdup(part->cxt,
											a->branches ? a->branches : a->base.old);
	}
	if (!any)
		return;
	foreach(lc, xs->staged.actions)
	{
		MyAction   *a = lfirst(lc);

		if (a->kind != MY_APPEND)
			a->base.state = CTAS_STAGED_PUBLISHING;
	}
	CtasMyExec(xs->conn, sql.data, "publish the tables");
	foreach(lc, xs->staged.actions)
	{
		MyAction   *a = lfirst(lc);

		if (a->kind != MY_APPEND)
			a->base.state = CTAS_STAGED_PUBLISHED;
	}
}

/*
 * my_xa_finish
 *		XA COMMIT or XA ROLLBACK of the prepared (or preparing) branch,
 *		on its session or, if that is gone, on a new one.  Unknown XID on
 *		a new session: it is finished unless it was prepared (then a
 *		session the server has not yet noticed may still hold it: the
 *		resolver looks again).  false, with a WARNING, when in doubt.
 */
static bool
my_xa_finish(CtasParticipant *part, MyXact *xs, bool commit,
			 MemoryContext cxt)
{
	char	   *sql = psprintf("XA %s %s", commit ? "COMMIT" : "ROLLBACK",
							   CtasMyLiteral(xs->xa_gid));
	MyConn	   *c;
	unsigned int err;
	char	   *detail;

	if (xs->xa_conn && !CtasMyBroken(xs->xa_conn) &&
		CtasMyTryQuery(xs->xa_conn, sql, "finish the XA transaction",
					   MY_Q_CLEANUP, NULL, NULL, NULL))
		return true;
	c = CtasMyConnect(part->catalog, cxt, true);
	/* a session the server still runs would keep the branch to itself */
	CtasMyKill(xs->xa_conn, c);
	CtasMyClose(xs->xa_conn);
	if (c == NULL)
		return false;
	if (CtasMyTryQuery(c, sql, "finish the XA transaction", MY_Q_CLEANUP,
					   NULL, &detail, &err))
		return true;
	if (err == MY_ER_XAER_NOTA && xs->xa_state == MY_XA_ACTIVE)
		return true;
	ereport(WARNING,
			(errcode(ERRCODE_FDW_ERROR),
			 errmsg("could not %s XA transaction \"%s\" on MySQL catalog \"%s\"",
					commit ? "commit" : "roll back", xs->xa_gid, part->catalog->name),
			 errdetail_internal("%s", detail ? detail : ""),
			 errhint("ctas_fed.resolve_in_doubt() finishes it.")));
	return false;
}

/*
 * What the walks of staged.c over the actions use (the arg of
 * my_staged_ops): the session, made when first needed.
 */
typedef struct MyWalk
{
	MyXact	   *xs;
	MyConn	   *conn;			/* or NULL, until my_walk_conn */
	MemoryContext cxt;			/* the walk's short-lived context */
	int			level;			/* subxact: the level rolled back */
} MyWalk;

static MyConn *
my_walk_conn(CtasParticipant *part, MyWalk *w)
{
	if (w->conn == NULL)
		w->conn = my_cleanup_conn(part, w->xs, w->cxt);
	return w->conn;
}

/*
 * my_begin
 *		Before the walk of post_commit (commit) or abort: XA COMMIT, or XA
 *		ROLLBACK (or the session closed, which rolls back an unprepared
 *		branch); then the session the walk uses.
 */
static void *
my_begin(CtasParticipant *part, bool commit)
{
	MyXact	   *xs = (MyXact *) part->private;
	MyWalk	   *w = palloc0(sizeof(MyWalk));

	w->xs = xs;
	w->cxt = CurrentMemoryContext;
	if (commit)
	{
		if (xs->xa_state == MY_XA_PREPARED &&
			!my_xa_finish(part, xs, true, w->cxt))
		{
			CtasStagedCleanupFailed = true;
			part->in_doubt = true;
		}
	}
	else
	{
		if (xs->xa_state == MY_XA_ACTIVE)
		{
			/* an unprepared branch dies with its session */
			if (CtasMyBroken(xs->xa_conn))
				(void) my_cleanup_conn(part, xs, w->cxt);
			CtasMyClose(xs->xa_conn);
			xs->xa_conn = NULL;
		}
		else if (xs->xa_state != MY_XA_NONE &&
				 !my_xa_finish(part, xs, false, w->cxt))
		{
			CtasStagedCleanupFailed = true;
			part->in_doubt = true;
		}
		xs->xa_state = MY_XA_NONE;
		if (xs->staged.actions == NIL)
			return w;
	}
	(void) my_walk_conn(part, w);
	return w;
}

/* after the local commit: the workers' branches, then the "old" tables */
static void
my_finish(CtasParticipant *part, void *arg, CtasStagedAction *base)
{
	MyWalk	   *w = (MyWalk *) arg;
	MyAction   *a = (MyAction *) base;

	if (a->branches && !my_settle_action(w->conn, part, a, true))
		part->in_doubt = true;
	if (a->base.state == CTAS_STAGED_PUBLISHED && a->base.old &&
		!my_drop(w->conn, a->base.db, a->base.old, "drop the old table"))
		CtasStagedCleanupFailed = true;
}

/* undo one action whatever stage it reached; WARNINGs only */
static void
my_undo_action(CtasParticipant *part, MyConn *conn, MyAction *a)
{
	char	   *why;

	if (a->branches && !my_settle_action(conn, part, a, false))
		part->in_doubt = true;
	switch (a->base.state)
	{
		case CTAS_STAGED_STAGING:
		case CTAS_STAGED_LOADED:
			if (a->base.stage)
				my_drop(conn, a->base.db, a->base.stage, "drop the staging table");
			if (a->base.marker)
				my_drop(conn, a->base.db, a->base.marker, "drop the commit marker");
			break;
		case CTAS_STAGED_PUBLISHING:
		case CTAS_STAGED_PUBLISHED:
			if (!CtasMyUndoChecked(conn, a, &why))
				part->in_doubt = true;
			break;
	}
}

/*
 * my_undo
 *		undo of the walks: on abort, every action; on the rollback of a
 *		subtransaction, its actions but the appends without branches
 *		(their rows go with the XA savepoint).  The branches of a parallel
 *		append that cannot be rolled back are kept, moved to the parent
 *		level, so that the abort of the transaction (or the resolver)
 *		rolls them back; the commit is refused (xs->doomed).
 */
static void
my_undo(CtasParticipant *part, void *arg, CtasStagedAction *base,
		bool subxact)
{
	MyWalk	   *w = (MyWalk *) arg;
	MyAction   *a = (MyAction *) base;

	if (!subxact)
	{
		my_undo_action(part, w->conn, a);
		return;
	}
	if (a->kind == MY_APPEND && a->branches == NULL)
		return;
	if (a->kind != MY_APPEND)
		my_undo_action(part, my_walk_conn(part, w), a);
	else if (!my_settle_action(my_walk_conn(part, w), part, a, false))
	{
		a->base.level = w->level - 1;
		w->xs->doomed = MemoryContextStrdup(part->cxt,
											psprintf("The XA branches \"%s*\" of a parallel append to \"%s\" could not be rolled back.",
													 a->branches, CtasMyDisplay(a->base.db, a->base.table)));
	}
}

/*
 * my_subxact
 *		The end of a subtransaction, before its actions are walked: the
 *		savepoints of the XA session follow (a broken session stays
 *		broken: pre_commit then fails).
 */
static void *
my_subxact(CtasParticipant *part, SubXactEvent event, int level,
		   bool trouble)
{
	MyXact	   *xs = (MyXact *) part->private;
	MyWalk	   *w;

	if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
	{
		if (xs->xa_depth >= level)
			xs->xa_depth = level - 1;
		return NULL;
	}
	if (trouble)
		return NULL;
	w = palloc0(sizeof(MyWalk));
	w->xs = xs;
	w->cxt = CurrentMemoryContext;
	w->level = level;
	if (xs->xa_state == MY_XA_ACTIVE && xs->xa_depth >= level)
	{
		if (!CtasMyBroken(xs->xa_conn) &&
			!CtasMyTryQuery(xs->xa_conn,
							psprintf("ROLLBACK TO SAVEPOINT s%d", level),
							"roll back to a savepoint", MY_Q_CLEANUP,
							NULL, NULL, NULL))
			CtasMyClose(xs->xa_conn);
		xs->xa_depth = level - 1;
	}
	return w;
}

/* The MySQL target's side of a staged publication (staged.c) */
static const CtasStagedOps my_staged_ops = {
	.begin = my_begin,
	.finish = my_finish,
	.undo = my_undo,
	.subxact = my_subxact,
};

/*
 * CtasMyPostCommit
 *		post_commit of the writer: XA COMMIT, then drop what was moved away.
 *		Never an ERROR; what fails stays in the record for the resolver.
 */
void
CtasMyPostCommit(CtasParticipant *part)
{
	MyXact	   *xs = (MyXact *) part->private;

	if (xs != NULL)
		CtasStagedEnd(part, &xs->staged, &my_staged_ops, true);
}

/*
 * CtasMyAbort
 *		abort of the writer: roll the XA branch back, undo every action in
 *		reverse order.  Never an ERROR.
 */
void
CtasMyAbort(CtasParticipant *part)
{
	MyXact	   *xs = (MyXact *) part->private;

	if (xs != NULL)
		CtasStagedEnd(part, &xs->staged, &my_staged_ops, false);
}

/*
 * CtasMySubxact
 *		subxact of the writer: a committed subtransaction hands its actions
 *		to the parent; an aborted one rolls the XA session back to its
 *		savepoint and undoes its actions (never published yet).  Never an
 *		ERROR.
 */
void
CtasMySubxact(CtasParticipant *part, SubXactEvent event, int level)
{
	MyXact	   *xs = (MyXact *) part->private;

	if (xs != NULL)
		CtasStagedSubxact(part, &xs->staged, &my_staged_ops, event, level);
}
