/*-------------------------------------------------------------------------
 *
 * resolve.c
 *		  Recovery of the PostgreSQL target: the prepared transactions and
 *		  scratch tables that a failed COMMIT PREPARED or a crash left on a
 *		  catalog.
 *
 * A remote transaction prepared by ctas_fed carries a gid naming the local
 * transaction (CtasGidMake, gid.c).  The resolver decides each one from the
 * commit status of that local transaction, durable evidence in the commit
 * log, as Citus's recovery does: committed -> COMMIT PREPARED, aborted ->
 * ROLLBACK PREPARED, in progress or unknown -> left alone.  A gid whose
 * backend is still finishing it (CtasJobsGidIsLive) is left alone too.
 * The workers of a parallel load prepare under gids of the same shape with
 * _<load>_<n> added (CtasGidMakeWorker), decided the same way; since their
 * leader commits them before its own PREPARE (parallel.c), one that is left
 * belongs to a transaction that did not commit.  Then, once the prepared
 * transactions that lock them are gone, the scratch tables of parallel
 * loads (parallel.c), whose names carry the local transaction as well, are
 * dropped once it is over.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/postgres/resolve.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "gid.h"
#include "postgres_target.h"

static void resolve_scratch(CtasCatalog *catalog,
							void (*emit) (void *arg, const char *object,
										  const char *action),
							void *arg);

/*
 * CtasPgResolve
 *		Decide every prepared transaction of this cluster on the catalog's
 *		database from the commit status of the local transaction its gid
 *		names: committed -> COMMIT PREPARED, aborted -> ROLLBACK PREPARED,
 *		in progress or unknown -> left alone and reported.
 */
void
CtasPgResolve(CtasCatalog *catalog,
			  void (*emit) (void *arg, const char *object, const char *action),
			  void *arg)
{
	PGconn	   *volatile conn = CtasPgConnectFresh(catalog);

	PG_TRY();
	{
		const char *prefix = CtasGidPrefix();
		PGresult   *res;
		int			i;
		List	   *gids = NIL;
		ListCell   *lc;

		res = CtasPgQuery(conn, catalog,
						  psprintf("SELECT gid FROM pg_catalog.pg_prepared_xacts "
								   "WHERE database = pg_catalog.current_database() "
								   "AND pg_catalog.starts_with(gid, %s) "
								   "AND (owner = current_user OR (SELECT rolsuper FROM pg_catalog.pg_roles "
								   "WHERE rolname = current_user)) ORDER BY prepared",
								   quote_literal_cstr(prefix)));
		for (i = 0; i < PQntuples(res); i++)
			gids = lappend(gids, pstrdup(PQgetvalue(res, i, 0)));
		PQclear(res);

		foreach(lc, gids)
		{
			char	   *gid = lfirst(lc);
			uint64		fxid;
			int			serial;
			bool		commit;
			char	   *msg;

			if (!CtasGidParse(gid, &fxid, &serial))
			{
				emit(arg, gid, "skipped: not a gid of ctas_fed");
				continue;
			}
			if (CtasJobsGidIsLive(gid))
			{
				emit(arg, gid, "left: its backend is finishing it");
				continue;
			}
			switch (CtasLocalXactStatus(fxid))
			{
				case CTAS_XACT_UNKNOWN:
					emit(arg, gid, "left: local transaction status unknown");
					continue;
				case CTAS_XACT_IN_PROGRESS:
					emit(arg, gid, "left: local transaction in progress");
					continue;
				case CTAS_XACT_COMMITTED:
					commit = true;
					break;
				case CTAS_XACT_ABORTED:
					commit = false;
					break;
				default:
					elog(ERROR, "unexpected local transaction status");
			}
			if (CtasPgExecBounded(conn,
								  psprintf("%s PREPARED %s",
										   commit ? "COMMIT" : "ROLLBACK",
										   quote_literal_cstr(gid)),
								  CLEANUP_TIMEOUT_MS, &msg))
				emit(arg, gid, commit ? "committed" : "rolled back");
			else
				emit(arg, gid, psprintf("failed to %s: %s",
										commit ? "commit" : "roll back",
										msg));
		}
	}
	PG_FINALLY();
	{
		CtasPgCloseFresh(conn);
	}
	PG_END_TRY();

	/* after the gids: a rolled back transaction gives its scratch back */
	resolve_scratch(catalog, emit, arg);
}

/*
 * resolve_scratch
 *		Drop the scratch tables of parallel loads (writer.c) of this cluster
 *		whose local transaction is over: committed, it renamed the table it
 *		took (the name is gone) or rolled back to a savepoint; aborted, the
 *		table is garbage.  Tables of a transaction in progress or unknown
 *		are left and reported.
 */
static void
resolve_scratch(CtasCatalog *catalog,
				void (*emit) (void *arg, const char *object, const char *action),
				void *arg)
{
	PGconn	   *volatile conn = CtasPgConnectFresh(catalog);

	PG_TRY();
	{
		PGresult   *res;
		List	   *names = NIL;
		ListCell   *lc;
		int			i;

		res = CtasPgQuery(conn, catalog,
						  psprintf("SELECT n.nspname, c.relname FROM pg_catalog.pg_class c "
								   "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
								   "WHERE c.relkind = 'r' AND pg_catalog.starts_with(c.relname, %s) "
								   "AND pg_catalog.pg_has_role(c.relowner, 'USAGE') "
								   "ORDER BY 1, 2",
								   quote_literal_cstr(CtasScratchPrefix("par"))));
		for (i = 0; i < PQntuples(res); i++)
			names = lappend(names, list_make2(pstrdup(PQgetvalue(res, i, 0)),
											  pstrdup(PQgetvalue(res, i, 1))));
		PQclear(res);

		foreach(lc, names)
		{
			List	   *pair = lfirst(lc);
			char	   *qualified = psprintf("%s.%s",
											 quote_identifier(linitial(pair)),
											 quote_identifier(lsecond(pair)));
			uint64		fxid;
			char	   *msg;

			if (!CtasScratchParse(lsecond(pair), "par", &fxid))
				continue;
			switch (CtasLocalXactStatus(fxid))
			{
				case CTAS_XACT_UNKNOWN:
					emit(arg, qualified, "left: local transaction status unknown");
					continue;
				case CTAS_XACT_IN_PROGRESS:
					emit(arg, qualified, "left: local transaction in progress");
					continue;
				case CTAS_XACT_COMMITTED:
				case CTAS_XACT_ABORTED:
					break;
			}
			if (CtasPgExecBounded(conn,
								  psprintf("DROP TABLE IF EXISTS %s", qualified),
								  CLEANUP_TIMEOUT_MS, &msg))
				emit(arg, qualified, "dropped");
			else
				emit(arg, qualified, psprintf("failed to drop: %s", msg));
		}
	}
	PG_FINALLY();
	{
		CtasPgCloseFresh(conn);
	}
	PG_END_TRY();
}
