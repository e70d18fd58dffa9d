/*-------------------------------------------------------------------------
 *
 * xact.c
 *		  The transaction steps of the PostgreSQL target: the remote
 *		  transaction of a participant, prepared at local pre-commit and
 *		  committed after the local commit.
 *
 * Protocol (one remote transaction per local transaction and user mapping,
 * see src/xact.c; the load steps are writer.c's):
 *
 *	first use		BEGIN, then SAVEPOINT s2..sN up to the local nesting level
 *					(CtasPgXactState)
 *	pre_commit		PREPARE TRANSACTION '<gid>' (two_phase on/auto), or COMMIT
 *					(two_phase off, or auto against max_prepared_transactions
 *					= 0: one-phase, the window documented in README.md)
 *	post_commit		COMMIT PREPARED '<gid>'; failure is a WARNING naming the
 *					gid, left to ctas_fed.resolve_in_doubt()
 *	abort			cancel what runs, ROLLBACK [PREPARED]; a connection that
 *					cannot be cleaned up within ABORT_TIMEOUT_MS, or whose
 *					COPY data the remote stopped reading, is closed, which
 *					rolls back anything not prepared
 *	subxact			RELEASE / ROLLBACK TO SAVEPOINT s<level>
 *
 * A parallel load's worker gids are settled here too (abort, subxact
 * abort): see writer.c's header and parallel.c of this folder.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/postgres/xact.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "gid.h"
#include "postgres_target.h"

/*
 * How long an abort waits for a remote command or COPY to stop, and for the
 * ROLLBACK of a transaction that is not prepared, before it closes the
 * connection instead: closing rolls back all of it just as well, and a
 * remote that stopped reading must not hold a cancel for long.
 */
#define ABORT_TIMEOUT_MS	1000

/*
 * CtasPgTwoPhaseSetting
 *		The catalog's two_phase option: "auto" unless set.
 */
const char *
CtasPgTwoPhaseSetting(CtasCatalog *catalog)
{
	const char *v = CtasCatalogOption(catalog, "two_phase");

	return v ? v : "auto";
}

/*
 * begin_remote_xact
 *		Start the remote transaction on entry's connection: learn whether
 *		the remote allows prepared transactions (once per connection, unless
 *		two_phase is 'off'), then BEGIN.  ERROR when two_phase 'on' cannot
 *		be honored, or on any remote failure.
 */
static void
begin_remote_xact(CtasConn *entry, CtasCatalog *catalog, const char *setting)
{
	if (strcmp(setting, "off") != 0 && entry->max_prepared < 0)
	{
		PGresult   *res = CtasPgQuery(entry->conn, catalog,
									  "SHOW max_prepared_transactions");

		entry->max_prepared = atoi(PQgetvalue(res, 0, 0));
		PQclear(res);
	}
	if (strcmp(setting, "on") == 0 && entry->max_prepared == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("catalog \"%s\" requires two-phase commit, but the remote server does not allow prepared transactions",
						catalog->name),
				 errhint("Set max_prepared_transactions on the remote server, or set the option two_phase to 'auto' or 'off'.")));

	/*
	 * READ COMMITTED whatever the remote's default: a parallel load's
	 * INSERT ... SELECT from its scratch table (append) must see the rows
	 * the workers' transactions committed after this one began.
	 */
	CtasPgExec(entry->conn, catalog, "BEGIN ISOLATION LEVEL READ COMMITTED");
	entry->xact_depth = 1;
}

/*
 * CtasPgXactState
 *		The participant's remote transaction, started on first use: connect,
 *		decide two-phase or one-phase, BEGIN, and open savepoints up to the
 *		current local nesting level.  A cached connection that the remote
 *		closed while it was idle is replaced once (CtasPgBrokenAtStart).
 *		ERROR if the remote transaction was lost earlier in this local
 *		transaction.
 */
PgXactState *
CtasPgXactState(CtasParticipant *part)
{
	PgXactState *st = (PgXactState *) part->private;
	CtasCatalog *catalog = part->catalog;
	int			level = GetCurrentTransactionNestLevel();

	if (st == NULL)
	{
		MemoryContext cxt = CurrentMemoryContext;
		const char *setting = CtasPgTwoPhaseSetting(catalog);
		CtasConn   *entry = CtasPgGetConnection(catalog);
		bool		retry = false;

		PG_TRY();
		{
			begin_remote_xact(entry, catalog, setting);
		}
		PG_CATCH();
		{
			MemoryContext ecxt = MemoryContextSwitchTo(cxt);

			if (!CtasPgBrokenAtStart(entry, catalog))
			{
				MemoryContextSwitchTo(ecxt);
				PG_RE_THROW();
			}
			retry = true;
		}
		PG_END_TRY();

		/* the broken connection is closed: connect again and start over */
		if (retry)
		{
			entry = CtasPgGetConnection(catalog);
			begin_remote_xact(entry, catalog, setting);
		}

		st = MemoryContextAllocZero(part->cxt, sizeof(PgXactState));
		st->entry = entry;
		st->progress = PG_XACT_STARTED;
		st->two_phase = strcmp(setting, "off") != 0 && entry->max_prepared > 0;
		part->private = st;
		if (!st->two_phase)
			ereport(DEBUG1,
					(errmsg_internal("catalog \"%s\" commits in one phase",
									 catalog->name)));
	}

	if (st->progress == PG_XACT_LOST || st->entry->conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("the remote transaction on catalog \"%s\" was lost",
						catalog->name),
				 errhint("Roll back the transaction and try again.")));

	while (st->entry->xact_depth < level)
	{
		char		sql[64];

		snprintf(sql, sizeof(sql), "SAVEPOINT s%d", st->entry->xact_depth + 1);
		CtasPgExec(st->entry->conn, catalog, sql);
		st->entry->xact_depth++;
	}
	return st;
}

/*
 * CtasPgPreCommit
 *		PREPARE TRANSACTION, or COMMIT in one phase.
 */
void
CtasPgPreCommit(CtasParticipant *part)
{
	PgXactState *st = (PgXactState *) part->private;
	char	   *sql;

	if (st == NULL)
		return;
	if (st->progress == PG_XACT_LOST || st->entry->conn == NULL ||
		st->entry->in_copy)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("the remote transaction on catalog \"%s\" was lost",
						part->catalog->name)));

	/*
	 * PREPARE TRANSACTION (and COMMIT) of a failed remote transaction
	 * "succeed" by rolling it back: make sure it is healthy first.
	 */
	if (PQtransactionStatus(st->entry->conn) != PQTRANS_INTRANS)
		ereport(ERROR,
				(errcode(ERRCODE_IN_FAILED_SQL_TRANSACTION),
				 errmsg("the remote transaction on catalog \"%s\" has failed and cannot be committed",
						part->catalog->name)));

	if (st->two_phase)
	{
		st->gid = MemoryContextStrdup(part->cxt, CtasGidMake(part->serial));
		part->gid = st->gid;
		sql = psprintf("PREPARE TRANSACTION %s", quote_literal_cstr(st->gid));
		st->progress = PG_XACT_PREPARING;
		CtasPgExec(st->entry->conn, part->catalog, sql);
		st->progress = PG_XACT_PREPARED;
	}
	else
	{
		st->progress = PG_XACT_COMMITTING;
		CtasPgExec(st->entry->conn, part->catalog, "COMMIT");
		st->progress = PG_XACT_COMMITTED;
		part->one_phase = true;
	}
	st->entry->xact_depth = 0;
}

/*
 * CtasPgPostCommit
 *		Finish the remote transaction after the local commit: COMMIT
 *		PREPARED, bounded in time; never an error.
 */
void
CtasPgPostCommit(CtasParticipant *part)
{
	PgXactState *st = (PgXactState *) part->private;
	char	   *msg;

	if (st == NULL)
		return;
	switch (st->progress)
	{
		case PG_XACT_PREPARED:
			/* left remotely: the prepared transaction, until this */
			if (!CtasPgExecBounded(st->entry->conn,
								   psprintf("COMMIT PREPARED %s",
											quote_literal_cstr(st->gid)),
								   CLEANUP_TIMEOUT_MS, &msg))
			{
				ereport(WARNING,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not commit prepared transaction \"%s\" on catalog \"%s\"",
								st->gid, part->catalog->name),
						 errdetail_internal("%s", msg),
						 errhint("The local transaction committed; ctas_fed.resolve_in_doubt() commits the remote one once the catalog is reachable.")));
				st->entry->broken = true;
				part->in_doubt = true;
			}
			break;
		case PG_XACT_COMMITTED:
			/* committed in one phase at pre-commit: nothing is left */
			break;
		case PG_XACT_STARTED:
		case PG_XACT_PREPARING:
		case PG_XACT_COMMITTING:
		case PG_XACT_LOST:
			/* CtasPgPreCommit got past these or failed: cannot happen */
			break;
	}
	/* a parallel load rolled back to a savepoint left its scratch table */
	Assert(st->workers == NIL);
	if (st->scratch != NIL && !part->in_doubt)
		CtasPgDropScratch(part->catalog, st->entry->broken ? NULL :
						  st->entry->conn, &st->scratch);
	CtasPgCloseFresh(st->side);
	st->side = NULL;
}

/*
 * pg_abort_open
 *		Roll back the open remote transaction of entry (or the remains of
 *		one whose COMMIT or PREPARE failed), or close the connection when
 *		that cannot be done at once, which rolls it back just as well.
 *		Never an error.
 */
static void
pg_abort_open(CtasConn *entry)
{
	char	   *msg;

	if (entry->conn == NULL || entry->xact_depth == 0)
		return;

	/*
	 * Disconnecting rolls back as well as ROLLBACK does.  COPY data that
	 * libpq could not hand to the socket means that the remote stopped
	 * reading: close at once rather than wait.
	 */
	if (entry->in_copy && PQflush(entry->conn) != 0)
		entry->broken = true;
	else if ((entry->in_copy ||
			  PQtransactionStatus(entry->conn) == PQTRANS_ACTIVE) &&
			 !CtasPgCancel(entry->conn, entry->in_copy, ABORT_TIMEOUT_MS))
		entry->broken = true;
	else if (!CtasPgExecBounded(entry->conn, "ROLLBACK",
								ABORT_TIMEOUT_MS, &msg))
		entry->broken = true;
}

/*
 * CtasPgAbort
 *		Undo the remote transaction; never an error.
 */
void
CtasPgAbort(CtasParticipant *part)
{
	PgXactState *st = (PgXactState *) part->private;
	CtasConn   *entry;
	char	   *msg;
	bool		prepare_lost;

	if (st == NULL)
		return;
	entry = st->entry;

	/*
	 * PREPARE TRANSACTION was sent and the connection failed before its
	 * reply: the remote may hold the prepared transaction.  Left to the
	 * resolver, which rolls it back if it is there.
	 */
	prepare_lost = st->progress == PG_XACT_PREPARING &&
		(entry->conn == NULL || PQstatus(entry->conn) == CONNECTION_BAD);

	/*
	 * In error recursion trouble, do nothing that could fail again: closing
	 * the connection rolls back what was not prepared, and a prepared
	 * transaction is left to the resolver.
	 */
	if (in_error_recursion_trouble())
	{
		if (prepare_lost || st->progress == PG_XACT_PREPARED)
			part->in_doubt = true;
		CtasPgDisconnect(entry);
		CtasPgCloseFresh(st->side);
		st->side = NULL;
		return;
	}

	switch (st->progress)
	{
		case PG_XACT_PREPARED:
			/* left remotely: the prepared transaction */
			if (!CtasPgExecBounded(entry->conn,
								   psprintf("ROLLBACK PREPARED %s",
											quote_literal_cstr(st->gid)),
								   CLEANUP_TIMEOUT_MS, &msg))
			{
				ereport(WARNING,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not roll back prepared transaction \"%s\" on catalog \"%s\"",
								st->gid, part->catalog->name),
						 errdetail_internal("%s", msg),
						 errhint("ctas_fed.resolve_in_doubt() rolls it back once the catalog is reachable.")));
				entry->broken = true;
				part->in_doubt = true;
			}
			break;
		case PG_XACT_COMMITTED:
			/* left remotely: the committed work, which stays */
			ereport(WARNING,
					(errcode(ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN),
					 errmsg("the remote transaction on catalog \"%s\" was committed in one phase and is not rolled back",
							part->catalog->name),
					 errhint("Set max_prepared_transactions on the remote server so that two-phase commit can be used.")));
			break;
		case PG_XACT_PREPARING:
			/* left remotely: perhaps a prepared transaction, see above */
			if (prepare_lost)
				part->in_doubt = true;
			pg_abort_open(entry);
			break;
		case PG_XACT_STARTED:
		case PG_XACT_COMMITTING:
			/* left remotely: the open transaction, or what its COMMIT left */
			pg_abort_open(entry);
			break;
		case PG_XACT_LOST:
			/* nothing: closing the connection rolled it back */
			break;
	}

	/* closing the connection rolls back whatever was not prepared */
	if (entry->broken)
		CtasPgDisconnect(entry);
	entry->xact_depth = 0;
	entry->in_copy = false;

	/*
	 * The workers' prepared transactions, then the scratch tables they
	 * lock; what is left goes to the resolver.
	 */
	if (CtasPgRollbackWorkers(part->catalog, st->side, &st->workers, 1) &&
		st->scratch != NIL && !part->in_doubt)
		CtasPgDropScratch(part->catalog, st->entry->broken ? NULL :
						  st->entry->conn, &st->scratch);
	CtasPgCloseFresh(st->side);
	st->side = NULL;
}

/*
 * CtasPgSubxact
 *		Map local subtransaction end to the remote savepoint of that level.
 */
void
CtasPgSubxact(CtasParticipant *part, SubXactEvent event, int level)
{
	PgXactState *st = (PgXactState *) part->private;
	CtasConn   *entry;
	char	   *msg;

	if (st == NULL)
		return;
	/* the parallel loads of the level: their workers' gids */
	if (event == SUBXACT_EVENT_ABORT_SUB)
		(void) CtasPgRollbackWorkers(part->catalog, st->side, &st->workers,
									 level);
	else
		CtasPgSubCommitWorkers(st->workers, level);
	entry = st->entry;
	if (st->progress == PG_XACT_LOST || entry->conn == NULL ||
		entry->xact_depth < level)
		return;

	if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
	{
		CtasPgExec(entry->conn, part->catalog,
				   psprintf("RELEASE SAVEPOINT s%d", level));
	}
	else
	{
		bool		ok = true;

		/* as in CtasPgAbort: a remote that stopped reading is given up */
		if (entry->in_copy && PQflush(entry->conn) != 0)
			ok = false;
		else if (entry->in_copy ||
				 PQtransactionStatus(entry->conn) == PQTRANS_ACTIVE)
			ok = CtasPgCancel(entry->conn, entry->in_copy, ABORT_TIMEOUT_MS);
		entry->in_copy = false;
		if (ok)
			ok = CtasPgExecBounded(entry->conn,
								   psprintf("ROLLBACK TO SAVEPOINT s%d", level),
								   CLEANUP_TIMEOUT_MS, &msg) &&
				CtasPgExecBounded(entry->conn,
								  psprintf("RELEASE SAVEPOINT s%d", level),
								  CLEANUP_TIMEOUT_MS, &msg);
		if (!ok)
		{
			/* the whole remote transaction is gone; commit must fail */
			st->progress = PG_XACT_LOST;
			CtasPgDisconnect(entry);
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not roll back to a savepoint on catalog \"%s\"",
							part->catalog->name),
					 errdetail("The transaction can only be rolled back.")));
			return;
		}
	}
	entry->xact_depth = level - 1;
}
