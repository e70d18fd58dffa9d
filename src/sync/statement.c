/*-------------------------------------------------------------------------
 *
 * statement.c
 *		  Continuous sync at statement time: CREATE TABLE cat.schema.t
 *		  WITH (sync = 'continuous') AS SELECT ...
 *
 * The statement's own transaction does everything that must be atomic with
 * it, and nothing that cannot be:
 *
 *	CtasSyncCheck	before any remote work (sync/check.c): the user, the
 *					query and the server can keep a sync; the remote key is
 *					the source's identity, projected as plain columns; the
 *					load is made "WITH NO DATA" (the sync worker copies the
 *					rows)
 *	(ctas.c)		the remote table is created as for any atomic CTAS: in
 *					the remote transaction, prepared at pre-commit and
 *					committed after the local commit (xact.c)
 *	CtasSyncCreate	after the remote CREATE TABLE: a publication FOR TABLE
 *					the source and a row of ctas_fed.syncs, both
 *					transactional, so that ROLLBACK (or ROLLBACK TO SAVEPOINT)
 *					leaves none of them
 *
 * One decoding stream per database carries its syncs (DESIGN.md 1.7,
 * "Scale"): a new sync joins the running stream of its name (the option
 * stream; without it the database's default stream, shared by the syncs
 * into every catalog), as a table joins PostgreSQL's apply worker: its
 * table is added to the stream's publication and its row, state "copying",
 * names the stream (stream_id, the sync_id of the stream's first job) and
 * the stream's publication and slot, both in the statement's transaction;
 * the stream's worker then copies the table under a snapshot of its own
 * and streams it with the others (sync/worker.c, "Joining").  The jobs of
 * one create_tables_as call join one stream.  When no stream of that name
 * runs, the sync makes one: the publication FOR TABLE its source.
 *
 * A stream is locked (CtasSyncLockStream) by a sync that joins it, by the
 * stop of one of its jobs and by the failure of one, each of which then
 * reads afresh whether the stream still runs: a join never adds its table
 * to a publication that the stop of the stream's last job drops, and a stop
 * never drops the publication of a stream that a sync joined meanwhile.
 *
 * The replication slot cannot be created here: creating a logical slot
 * waits for every transaction that has an xid, the statement's own
 * included (notes/logical-decoding-pg15.md).  The sync worker creates it
 * after commit, with the snapshot its initial copy uses (sync/worker.c).
 *
 * CtasSyncStop (ctas_fed.stop_sync(), and DROP TABLE of a synced table
 * through ctas.c) takes the job's table out of the stream's publication,
 * or drops the publication when no other job of the stream runs (read under
 * the stream's lock), and marks the job "stopped", in the caller's
 * transaction; after commit the worker
 * leaves the job, or ends with the stream's last one, and the resolver
 * then drops the slot (sync/worker.c).
 *
 * The row of ctas_fed.syncs is the durable record of the job: everything a
 * worker needs to rebuild it (the owner, the catalog, the remote table, the
 * query as a node tree, the key, the names of the publication and slot) and
 * its state.  Only the extension's owner may write that table; the row is
 * inserted with the owner's identity, the publication with the caller's,
 * so that only the owner of the source table can sync it, and then given
 * to the extension's owner, so that only the job changes it.
 *
 * CtasSyncCheckTarget keeps other loads off a synced table: a CTAS that
 * would replace it or add rows to it is refused while its sync runs.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/statement.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xlog.h"
#include "catalog/catalog.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_publication.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "commands/extension.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "replication/slot.h"
#include "storage/lmgr.h"
#include "storage/lwlock.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "guc.h"
#include "jobs.h"
#include "sync/sync.h"
#include "sync/sync_int.h"
#include "workers/workers.h"

/*
 * is_whole_row
 *		Whether the query takes the source's rows whole: every live column
 *		of rel, as a plain column, in attnum order, under its own name on
 *		the remote (SELECT *, create_tables_as).  Such a sync would follow
 *		a column added or renamed on the remote (docs/sync-schema-changes.md);
 *		another query ignores a column it does not read.
 */
static bool
is_whole_row(CtasSync *sync, Relation rel, CtasLoad *load)
{
	TupleDesc	desc = RelationGetDescr(rel);
	ListCell   *lc;
	int			n = 0;
	int			a = 0;

	foreach(lc, sync->query->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		Form_pg_attribute att = NULL;

		if (tle->resjunk)
			continue;
		while (a < desc->natts &&
			   (TupleDescAttr(desc, a)->attisdropped ||
				TupleDescAttr(desc, a)->attgenerated))
			a++;
		if (a < desc->natts)
			att = TupleDescAttr(desc, a++);
		if (att == NULL || !IsA(tle->expr, Var) ||
			((Var *) tle->expr)->varattno != att->attnum ||
			n >= sync->ncolumns ||
			strcmp(load->columns[n].name, NameStr(att->attname)) != 0)
			return false;
		n++;
	}
	while (a < desc->natts &&
		   (TupleDescAttr(desc, a)->attisdropped ||
			TupleDescAttr(desc, a)->attgenerated))
		a++;
	return a == desc->natts;
}

/*
 * is_published
 *		Whether table relid is in publication, as user owner.
 */
static bool
is_published(Oid owner, const char *publication, Oid relid)
{
	Oid			argtypes[2] = {NAMEOID, OIDOID};
	Datum		args[2];

	args[0] = DirectFunctionCall1(namein, CStringGetDatum(publication));
	args[1] = ObjectIdGetDatum(relid);
	return CtasSyncRunAs(owner,
						 "SELECT FROM pg_catalog.pg_publication_rel pr "
						 "JOIN pg_catalog.pg_publication p ON p.oid = pr.prpubid "
						 "WHERE p.pubname = $1 AND pr.prrelid = $2",
						 2, argtypes, args, NULL) > 0;
}

/*
 * find_stream
 *		The running stream that a new sync of stream name stream (NULL: the
 *		default stream of the database) joins, locked (CtasSyncLockStream),
 *		or 0 when none runs.  The oldest of them when there are several
 *		(default streams made before version 0.3, one per CTAS).  In a
 *		transaction snapshot (REPEATABLE READ) the stream may have stopped
 *		meanwhile: such a sync makes a stream of its own.  Can ERROR.
 */
static int64
find_stream(Oid owner, const char *stream)
{
	int			tries;

	for (tries = 0; tries < 3; tries++)
	{
		int64		stream_id = CtasSyncFirstStreamNamed(owner, stream);

		if (stream_id == 0 || IsolationUsesXactSnapshot())
			return 0;
		CtasSyncLockStream(stream_id);
		if (CtasSyncStreamRunsBesides(owner, stream_id, 0))
			return stream_id;
	}
	return 0;
}

/*
 * CtasSyncCreate
 *		After the remote CREATE TABLE of a sync CTAS, in the statement's
 *		transaction: the publication of the source table (created with the
 *		caller's privileges: only the owner of the table may publish it;
 *		then given to the extension's owner, so that the caller cannot
 *		change it) and the job's row in ctas_fed.syncs (with the extension
 *		owner's).  Both roll back with the transaction.  The resolver of the
 *		database starts the sync worker once the row is committed.
 *		ereport(ERROR) on failure.
 */
void
CtasSyncCreate(CtasLoad *load)
{
	CtasSync   *sync = load->sync;
	Oid			syncs_relid;
	Oid			owner = CtasSyncTableOwner(false, &syncs_relid);
	int64		id;
	int64		stream_id;
	char	   *name;
	char	   *relname;
	Relation	rel;
	CtasSyncRow row;
	bool		streams;
	List	   *colnames = NIL;
	List	   *coltypes = NIL;
	List	   *remote_columns = NIL;
	ListCell   *lc;
	int			i;

	id = CtasSyncNextId(owner);

	/* a table of a create_tables_as call joins the call's stream */
	stream_id = id;
	if (load->group_id != 0 &&
		!CtasSyncGroupStream(owner, load->group_id, &stream_id))
		stream_id = id;
	/*
	 * Any other the running stream of its name, if there is one; before
	 * ALTER EXTENSION ctas_fed UPDATE to 0.3 (no stream_name yet), a stream
	 * of its own, as in 0.2.
	 */
	streams = CtasSyncHasStreams(syncs_relid);
	if (!streams && load->opts.stream != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("option \"stream\" needs version 0.3 of extension \"ctas_fed\""),
				 errhint("ALTER EXTENSION ctas_fed UPDATE.")));
	if (streams && stream_id == id)
	{
		int64		running = find_stream(owner, load->opts.stream);

		if (running != 0)
			stream_id = running;
	}
	name = psprintf("%s%u_" INT64_FORMAT, CTAS_SYNC_PREFIX, MyDatabaseId,
					stream_id);

	/*
	 * The name of the publication and the slot of a new stream.  Anyone who
	 * may create a publication (or a slot) can take the next names first:
	 * skip the names in use rather than fail, or drop someone else's slot
	 * later.
	 */
	while (stream_id == id &&
		   (OidIsValid(get_publication_oid(name, true)) ||
			SearchNamedReplicationSlot(name, true) != NULL))
	{
		CHECK_FOR_INTERRUPTS();
		id = CtasSyncNextId(owner);
		stream_id = id;
		name = psprintf("%s%u_" INT64_FORMAT, CTAS_SYNC_PREFIX, MyDatabaseId,
						id);
	}

	rel = relation_open(sync->relid, AccessShareLock);
	relname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										 RelationGetRelationName(rel));
	if (stream_id == id)
	{
		CtasSyncRunAs(GetUserId(),
			   psprintf("CREATE PUBLICATION %s FOR TABLE ONLY %s%s",
						quote_identifier(name), relname,
						CtasSyncPartitionPublication(name, sync->relid,
													 false)),
			   0, NULL, NULL, NULL);

		/*
		 * The publication is then the job's: its creator could otherwise
		 * ALTER it to publish inserts only (the remote table would silently
		 * keep deleted rows), or drop or rename it (the worker would retry
		 * for ever while its slot holds WAL).
		 */
		CtasSyncRunAs(owner,
			   psprintf("ALTER PUBLICATION %s OWNER TO %s",
						quote_identifier(name),
						quote_identifier(GetUserNameFromId(owner, false))),
			   0, NULL, NULL, NULL);
	}
	else
	{
		char	   *via_root;

		/*
		 * The stream's publication is the extension owner's already: the
		 * caller must own the table, as to publish it himself.
		 */
		if (!pg_class_ownercheck(sync->relid, GetUserId()))
			aclcheck_error(ACLCHECK_NOT_OWNER,
						   get_relkind_objtype(get_rel_relkind(sync->relid)),
						   RelationGetRelationName(rel));
		via_root = CtasSyncPartitionPublication(name, sync->relid, true);
		/* another sync of the stream may read the table already */
		if (!is_published(owner, name, sync->relid))
			CtasSyncRunAs(owner,
				   psprintf("ALTER PUBLICATION %s ADD TABLE ONLY %s",
							quote_identifier(name), relname),
				   0, NULL, NULL, NULL);
		if (via_root != NULL)
			CtasSyncRunAs(owner, via_root, 0, NULL, NULL, NULL);
	}

	/* the names and types the query reads, to detect DDL on them */
	foreach(lc, sync->attnums)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel),
											  lfirst_int(lc) - 1);

		colnames = lappend(colnames, makeString(NameStr(att->attname)));
		coltypes = lappend_int(coltypes, (int) att->atttypid);
	}
	row.whole_row = is_whole_row(sync, rel, load);
	relation_close(rel, AccessShareLock);
	for (i = 0; i < sync->ncolumns; i++)
		remote_columns = lappend(remote_columns,
								 makeString(load->columns[i].name));

	row.sync_id = id;
	row.owner = GetUserId();
	row.server = load->catalog->serverid;
	row.remote_schema = load->schema;
	row.remote_table = load->table;
	row.source = sync->relid;
	row.query = pg_get_querydef(copyObject(sync->query), false);
	row.query_tree = nodeToString(sync->query);
	row.key_columns = sync->key_names;
	row.source_key = sync->key_attnums;
	row.source_attnums = sync->attnums;
	row.source_columns = colnames;
	row.source_types = coltypes;
	row.remote_columns = remote_columns;
	row.job_id = load->job.id;
	row.stream_id = stream_id;
	row.job_group = load->group_id;
	row.name = name;
	row.schema_changes = load->opts.schema_changes ?
		load->opts.schema_changes : "follow";
	row.streams = streams;
	row.stream_name = load->opts.stream;
	CtasSyncInsertRow(owner, &row);

	/* the resolver starts the job's worker as soon as this commits */
	CtasResolverNudgeAtCommit();
}

/*
 * running_stream
 *		For EXPLAIN: the publication (and slot) of the running stream that a
 *		sync of stream name stream (NULL: the default) would join now, or
 *		NULL (none, or version 0.2).  Reads without locking anything.
 */
static char *
running_stream(const char *stream)
{
	Oid			syncs_relid;
	Oid			owner = CtasSyncTableOwner(false, &syncs_relid);

	if (!CtasSyncHasStreams(syncs_relid))
		return NULL;
	return CtasSyncStreamPublication(owner, stream);
}

/*
 * CtasSyncExplain
 *		EXPLAIN of a sync CTAS, after the target's own properties: the key,
 *		and what the statement (publication) and then the sync worker
 *		(slot, initial copy) will make, or the running stream it would
 *		join.  No effect anywhere: the names end
 *		with the job's sync_id, given only when the statement runs.
 *		Allocates in the current memory context; ERRORs only when
 *		ctas_fed.syncs cannot be read.
 */
void
CtasSyncExplain(CtasLoad *load, ExplainState *es)
{
	CtasSync   *sync = load->sync;
	char	   *nspname;
	char	   *source;
	char	   *name;
	char	   *running;
	List	   *keys = NIL;
	ListCell   *lc;

	nspname = get_namespace_name(get_rel_namespace(sync->relid));
	source = quote_qualified_identifier(nspname, get_rel_name(sync->relid));
	name = psprintf("%s%u_<sync_id>", CTAS_SYNC_PREFIX, MyDatabaseId);
	foreach(lc, sync->key_names)
		keys = lappend(keys, (char *) quote_identifier(strVal(lfirst(lc))));

	running = running_stream(load->opts.stream);

	ExplainPropertyText("Sync", "continuous", es);
	ExplainPropertyText("Sync Source", source, es);
	ExplainPropertyList("Sync Key", keys, es);
	if (running != NULL)
	{
		/* it would join the running stream of its name */
		ExplainPropertyText("Sync Publication",
							psprintf("ALTER PUBLICATION %s ADD TABLE ONLY %s",
									 quote_identifier(running), source), es);
		ExplainPropertyText("Sync Slot",
							psprintf("%s (pgoutput), of the running stream",
									 running), es);
	}
	else
	{
		ExplainPropertyText("Sync Publication",
							psprintf("CREATE PUBLICATION %s FOR TABLE ONLY %s%s",
									 name, source,
									 CtasSyncPartitionPublication(name, sync->relid,
																  false)), es);
		ExplainPropertyText("Sync Slot",
							psprintf("%s (pgoutput), created by the sync worker after commit",
									 name), es);
	}
	ExplainPropertyText("Sync Schema Changes",
						load->opts.schema_changes ?
						load->opts.schema_changes : "follow", es);
	ExplainPropertyText("Sync Initial Copy",
						running != NULL ?
						"by the sync worker, under the snapshot of a temporary slot's consistent point, then streaming from that point in the running stream" :
						"by the sync worker, under the snapshot of the slot's consistent point, then streaming from that point",
						es);
}

/*
 * CtasSyncStop
 *		Stop the running syncs into catalog serverid's schema.table, in the
 *		current transaction: take their tables out of their streams'
 *		publications, or drop a publication when no other job of its stream
 *		runs (as the extension's owner, whose they are), and mark them "stopped".  After commit
 *		their workers leave them at their next round, and the resolver
 *		drops the slot of a stream that has no running job left
 *		(sync/worker.c).  Returns whether there was any.  ereport(ERROR)
 *		when the current user is not the owner of one.
 */
bool
CtasSyncStop(Oid serverid, const char *schema, const char *table)
{
	Oid			syncs_relid;
	Oid			owner = CtasSyncTableOwner(false, &syncs_relid);
	CtasSyncRunning *jobs;
	int			n;
	int			i;

	/* the running syncs into that table, locked against a concurrent stop */
	jobs = CtasSyncLockRunningInto(owner, serverid, schema, table, &n);

	for (i = 0; i < n; i++)
	{
		if (!has_privs_of_role(GetUserId(), jobs[i].owner))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("must be a member of role \"%s\" to stop its sync into \"%s.%s\"",
							GetUserNameFromId(jobs[i].owner, false), schema, table)));
		/*
		 * The publication is the stream's (CtasSyncCreate): dropped with its
		 * last running job, else the job's table leaves it.  Whether other
		 * jobs run is read under the stream's lock, after any sync joining
		 * it committed (find_stream); a transaction snapshot may not see
		 * that one, and leaves the drop to the resolver (sync/tick.c).
		 */
		CtasSyncLockStream(jobs[i].stream_id);
		if (IsolationUsesXactSnapshot() ||
			CtasSyncStreamRunsBesides(owner, jobs[i].stream_id,
									  jobs[i].sync_id))
			CtasSyncUnpublish(jobs[i].publication, jobs[i].source, owner,
							  jobs[i].sync_id);
		else
			CtasSyncRunAs(owner,
						  psprintf("DROP PUBLICATION IF EXISTS %s",
								   quote_identifier(jobs[i].publication)),
						  0, NULL, NULL, NULL);
		CtasSyncMarkStopped(owner, jobs[i].sync_id);
	}
	return n > 0;
}

PG_FUNCTION_INFO_V1(ctas_fed_stop_sync);

/*
 * ctas_fed_stop_sync
 *		ctas_fed.stop_sync(target text): stop the sync into
 *		catalog.schema.table.  ERROR when there is none.
 */
Datum
ctas_fed_stop_sync(PG_FUNCTION_ARGS)
{
	text	   *target = PG_GETARG_TEXT_PP(0);
	Oid			serverid;
	char	   *schema;
	char	   *table;

	CtasSyncParseTarget(target, &serverid, &schema, &table);
	/* none running: a failed one is stopped too (sync/syncs.c) */
	if (!CtasSyncStop(serverid, schema, table) &&
		!CtasSyncStopFailed(serverid, schema, table))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("there is no running sync into \"%s\"",
						text_to_cstring(target))));
	PG_RETURN_VOID();
}

/*
 * CtasSyncCheckTarget
 *		Before a CTAS with if_exists 'replace' or 'append' into catalog
 *		serverid's schema.table: ERROR (55006) while a sync runs into that
 *		table, which holds the rows of the sync's query and nothing else.
 */
void
CtasSyncCheckTarget(Oid serverid, const char *schema, const char *table)
{
	Oid			syncs_relid;
	Oid			owner = CtasSyncTableOwner(false, &syncs_relid);
	char	   *state = CtasSyncRunningStateInto(owner, serverid, schema,
												 table);

	if (state != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("continuous sync into \"%s.%s.%s\" is %s",
						GetForeignServer(serverid)->servername, schema, table,
						state),
				 errdetail("A synced table holds the rows of its query: another CREATE TABLE AS may not replace it or add rows to it."),
				 errhint("Stop the sync with ctas_fed.stop_sync() first.")));
}

/*
 * CtasSyncCheckIdle
 *		Before DROP SERVER of catalog serverid, or DROP EXTENSION (or
 *		FOREIGN DATA WRAPPER) ctas_fed (serverid InvalidOid: any catalog):
 *		ERROR (55006) while a sync job runs into it, or still has a
 *		replication slot, which nothing could drop after the drop.  Nothing
 *		when the extension is not installed in this database.
 */
void
CtasSyncCheckIdle(Oid serverid)
{
	Oid			syncs_relid;
	Oid			owner = CtasSyncTableOwner(true, &syncs_relid);
	char	   *target = NULL;
	char	   *state = NULL;

	if (!OidIsValid(syncs_relid))
		return;
	(void) CtasSyncFindBusy(owner, serverid, &target, &state);

	if (target != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("continuous sync into \"%s\" is %s",
						target, state),
				 CtasSyncStateRuns(CtasSyncStateFromName(state)) ?
				 errhint("Stop it with ctas_fed.stop_sync(), then try again.") :
				 errhint("Its replication slot is being dropped: try again in a moment.")));
}

/* lock tag field4 of the per-role sync count (see CtasSyncCheckRoleQuota) */
#define CTAS_LOCKTAG_SYNC_QUOTA	0xCF03

/*
 * CtasSyncCheckRoleQuota
 *		ctas_fed.max_syncs_per_role: a non-superuser may have at most that
 *		many continuous syncs running (copying or streaming) in this
 *		database, since each costs its decoding and apply for as long as it
 *		runs; a CTAS counts as one, and so do the tables of one
 *		create_tables_as call; -1 is no limit, 0 lets only
 *		superusers create syncs.  The count is serialized per role and
 *		database by a lock held until the end of the transaction, so that
 *		two sessions of one role cannot both take the last place (in READ
 *		COMMITTED, where the count sees what the other committed).
 *		ereport(ERROR) when the role is at its limit.
 */
void
CtasSyncCheckRoleQuota(void)
{
	Oid			role = GetUserId();
	Oid			syncs_relid;
	Oid			owner;
	int64		count;
	LOCKTAG		tag;

	if (CtasMaxSyncsPerRole < 0 || superuser())
		return;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, role, 0, CTAS_LOCKTAG_SYNC_QUOTA);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);

	owner = CtasSyncTableOwner(false, &syncs_relid);
	count = CtasSyncCountRunningOf(owner, role);

	if (count >= CtasMaxSyncsPerRole)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many continuous syncs for role \"%s\"",
						GetUserNameFromId(role, false)),
				 CtasMaxSyncsPerRole == 0 ?
				 errdetail("Only superusers may create continuous syncs while \"ctas_fed.max_syncs_per_role\" is 0.") :
				 errdetail_plural("The role has " INT64_FORMAT " continuous sync running in this database, the limit of \"ctas_fed.max_syncs_per_role\".",
								  "The role has " INT64_FORMAT " continuous syncs running in this database, the limit of \"ctas_fed.max_syncs_per_role\".",
								  count, count),
				 errhint("Stop a sync with ctas_fed.stop_sync(), or ask a superuser to raise the setting \"ctas_fed.max_syncs_per_role\".")));
}
