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
 * run_as
 *		SPI statement sql with args, as user userid, in the current
 *		transaction.  Returns SPI_processed; a one-column one-row result is
 *		stored in *result if result is not NULL.  ereport(ERROR) on failure.
 */
static uint64
run_as(Oid userid, const char *sql, int nargs, Oid *argtypes, Datum *values,
	   Datum *result)
{
	CtasSyncSpiAs as;
	int			rc;
	uint64		processed;

	CtasSyncSpiBeginAs(userid, &as);
	rc = SPI_execute_with_args(sql, nargs, argtypes, values, NULL, false, 0);
	if (rc < 0)
		elog(ERROR, "SPI_execute_with_args failed: %s", SPI_result_code_string(rc));
	processed = SPI_processed;
	if (result != NULL && processed == 1)
	{
		bool		isnull;

		*result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
								1, &isnull);
	}
	CtasSyncSpiEndAs(&as);
	return processed;
}

/* owner of ctas_fed.syncs: who may write the job records */
static Oid
syncs_owner(Oid *relid)
{
	Oid			nsp = get_namespace_oid("ctas_fed", false);
	HeapTuple	tup;
	Oid			owner;

	*relid = get_relname_relid("syncs", nsp);
	if (!OidIsValid(*relid))
		elog(ERROR, "table ctas_fed.syncs is missing");
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(*relid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", *relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/* a list of ints or Strings as a text[] Datum */
static Datum
list_to_text_array(List *list, bool ints)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(list_length(list), 1));
	ListCell   *lc;
	int			n = 0;

	foreach(lc, list)
		elems[n++] = CStringGetTextDatum(ints ? psprintf("%d", lfirst_int(lc)) :
										 strVal(lfirst(lc)));
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false,
										   TYPALIGN_INT));
}

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
	return run_as(owner,
				  "SELECT FROM pg_catalog.pg_publication_rel pr "
				  "JOIN pg_catalog.pg_publication p ON p.oid = pr.prpubid "
				  "WHERE p.pubname = $1 AND pr.prrelid = $2",
				  2, argtypes, args, NULL) > 0;
}

/*
 * stream_runs_besides
 *		Whether stream stream_id has a running job other than sync_id, read
 *		by a statement of its own (a fresh snapshot in READ COMMITTED), as
 *		user owner.
 */
static bool
stream_runs_besides(Oid owner, int64 stream_id, int64 sync_id)
{
	Oid			argtypes[2] = {INT8OID, INT8OID};
	Datum		args[2];
	Datum		result = BoolGetDatum(false);

	args[0] = Int64GetDatum(stream_id);
	args[1] = Int64GetDatum(sync_id);
	run_as(owner,
		   "SELECT EXISTS (SELECT FROM ctas_fed.syncs WHERE stream_id = $1 "
		   "AND sync_id <> $2 AND state IN " CTAS_SYNC_RUNNING_SQL ")",
		   2, argtypes, args, &result);
	return DatumGetBool(result);
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
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	Datum		found;
	int			tries;

	args[0] = stream ? CStringGetTextDatum(stream) : (Datum) 0;
	for (tries = 0; tries < 3; tries++)
	{
		CtasSyncSpiAs as;
		int64		stream_id = 0;

		CtasSyncSpiBeginAs(owner, &as);
		if (SPI_execute_with_args("SELECT stream_id FROM ctas_fed.syncs "
								  "WHERE state IN " CTAS_SYNC_RUNNING_SQL " "
								  "AND stream_name IS NOT DISTINCT FROM $1 "
								  "ORDER BY stream_id LIMIT 1",
								  1, argtypes, args, stream ? NULL : "n",
								  true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not read ctas_fed.syncs");
		if (SPI_processed == 1)
		{
			bool		isnull;

			found = SPI_getbinval(SPI_tuptable->vals[0],
								  SPI_tuptable->tupdesc, 1, &isnull);
			stream_id = DatumGetInt64(found);
		}
		CtasSyncSpiEndAs(&as);
		if (stream_id == 0 || IsolationUsesXactSnapshot())
			return 0;
		CtasSyncLockStream(stream_id);
		if (stream_runs_besides(owner, stream_id, 0))
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
	Oid			owner = syncs_owner(&syncs_relid);
	Datum		id;
	Datum		stream_id;
	char	   *name;
	char	   *relname;
	Relation	rel;
	Oid			argtypes[16];
	Datum		values[16];
	bool		whole_row;
	bool		streams;
	List	   *colnames = NIL;
	List	   *coltypes = NIL;
	List	   *remote_columns = NIL;
	ListCell   *lc;
	int			i;

	run_as(owner, "SELECT pg_catalog.nextval('ctas_fed.syncs_sync_id_seq')",
		   0, NULL, NULL, &id);

	/* a table of a create_tables_as call joins the call's stream */
	stream_id = id;
	if (load->group_id != 0)
	{
		Oid			grouptype[1] = {INT8OID};
		Datum		group[1];

		group[0] = Int64GetDatum(load->group_id);
		if (run_as(owner,
				   "SELECT stream_id FROM ctas_fed.syncs WHERE job_group = $1 "
				   "LIMIT 1", 1, grouptype, group, &stream_id) == 0)
			stream_id = id;
	}
	/*
	 * Any other the running stream of its name, if there is one; before
	 * ALTER EXTENSION ctas_fed UPDATE to 0.3 (no stream_name yet), a stream
	 * of its own, as in 0.2.
	 */
	streams = get_attnum(syncs_relid, "stream_name") != InvalidAttrNumber;
	if (!streams && load->opts.stream != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("option \"stream\" needs version 0.3 of extension \"ctas_fed\""),
				 errhint("ALTER EXTENSION ctas_fed UPDATE.")));
	if (streams && DatumGetInt64(stream_id) == DatumGetInt64(id))
	{
		int64		running = find_stream(owner, load->opts.stream);

		if (running != 0)
			stream_id = Int64GetDatum(running);
	}
	name = psprintf("%s%u_" INT64_FORMAT, CTAS_SYNC_PREFIX, MyDatabaseId,
					DatumGetInt64(stream_id));

	/*
	 * The name of the publication and the slot of a new stream.  Anyone who
	 * may create a publication (or a slot) can take the next names first:
	 * skip the names in use rather than fail, or drop someone else's slot
	 * later.
	 */
	while (DatumGetInt64(stream_id) == DatumGetInt64(id) &&
		   (OidIsValid(get_publication_oid(name, true)) ||
			SearchNamedReplicationSlot(name, true) != NULL))
	{
		CHECK_FOR_INTERRUPTS();
		run_as(owner, "SELECT pg_catalog.nextval('ctas_fed.syncs_sync_id_seq')",
			   0, NULL, NULL, &id);
		stream_id = id;
		name = psprintf("%s%u_" INT64_FORMAT, CTAS_SYNC_PREFIX, MyDatabaseId,
						DatumGetInt64(id));
	}

	rel = relation_open(sync->relid, AccessShareLock);
	relname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										 RelationGetRelationName(rel));
	if (DatumGetInt64(stream_id) == DatumGetInt64(id))
	{
		run_as(GetUserId(),
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
		run_as(owner,
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
			run_as(owner,
				   psprintf("ALTER PUBLICATION %s ADD TABLE ONLY %s",
							quote_identifier(name), relname),
				   0, NULL, NULL, NULL);
		if (via_root != NULL)
			run_as(owner, via_root, 0, NULL, NULL, NULL);
	}

	/* the names and types the query reads, to detect DDL on them */
	foreach(lc, sync->attnums)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel),
											  lfirst_int(lc) - 1);

		colnames = lappend(colnames, makeString(NameStr(att->attname)));
		coltypes = lappend_int(coltypes, (int) att->atttypid);
	}
	whole_row = is_whole_row(sync, rel, load);
	relation_close(rel, AccessShareLock);
	for (i = 0; i < sync->ncolumns; i++)
		remote_columns = lappend(remote_columns,
								 makeString(load->columns[i].name));

	argtypes[0] = INT8OID;
	values[0] = id;
	argtypes[1] = OIDOID;
	values[1] = ObjectIdGetDatum(GetUserId());
	argtypes[2] = OIDOID;
	values[2] = ObjectIdGetDatum(load->catalog->serverid);
	argtypes[3] = TEXTOID;
	values[3] = CStringGetTextDatum(load->schema);
	argtypes[4] = TEXTOID;
	values[4] = CStringGetTextDatum(load->table);
	argtypes[5] = OIDOID;
	values[5] = ObjectIdGetDatum(sync->relid);
	argtypes[6] = TEXTOID;
	values[6] = CStringGetTextDatum(pg_get_querydef(copyObject(sync->query),
													false));
	argtypes[7] = TEXTOID;
	values[7] = CStringGetTextDatum(nodeToString(sync->query));
	argtypes[8] = TEXTARRAYOID;
	values[8] = list_to_text_array(sync->key_names, false);
	argtypes[9] = TEXTARRAYOID;
	values[9] = list_to_text_array(sync->key_attnums, true);
	argtypes[10] = TEXTARRAYOID;
	values[10] = list_to_text_array(sync->attnums, true);
	argtypes[11] = TEXTARRAYOID;
	values[11] = list_to_text_array(colnames, false);
	argtypes[12] = TEXTARRAYOID;
	values[12] = list_to_text_array(coltypes, true);
	argtypes[13] = TEXTARRAYOID;
	values[13] = list_to_text_array(remote_columns, false);
	argtypes[14] = INT8OID;
	values[14] = Int64GetDatum(load->job.id);
	argtypes[15] = INT8OID;
	values[15] = stream_id;

	run_as(owner,
		   psprintf("INSERT INTO ctas_fed.syncs (sync_id, owner, server, "
					"remote_schema, remote_table, source, query, query_tree, "
					"key_columns, source_key, source_attnums, source_columns, "
					"source_types, remote_columns, job_id, stream_id, "
					"job_group, publication, slot_name, schema_changes, "
					"whole_row%s) "
					"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
					"$10::pg_catalog.int2[], $11::pg_catalog.int2[], $12, "
					"$13::pg_catalog.oid[], $14, $15, $16, "
					"NULLIF(" INT64_FORMAT ", 0), %s, %s, %s, %s%s%s)",
					streams ? ", stream_name" : "",
					load->group_id,
					quote_literal_cstr(name), quote_literal_cstr(name),
					quote_literal_cstr(load->opts.schema_changes ?
									   load->opts.schema_changes : "follow"),
					whole_row ? "true" : "false",
					streams ? ", " : "",
					!streams ? "" : load->opts.stream ?
					quote_literal_cstr(load->opts.stream) : "NULL"),
		   16, argtypes, values, NULL);

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
	Oid			owner = syncs_owner(&syncs_relid);
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	CtasSyncSpiAs as;
	char	   *publication = NULL;
	MemoryContext outercxt = CurrentMemoryContext;

	if (get_attnum(syncs_relid, "stream_name") == InvalidAttrNumber)
		return NULL;
	args[0] = stream ? CStringGetTextDatum(stream) : (Datum) 0;
	CtasSyncSpiBeginAs(owner, &as);
	if (SPI_execute_with_args("SELECT publication FROM ctas_fed.syncs "
							  "WHERE state IN " CTAS_SYNC_RUNNING_SQL " "
							  "AND stream_name IS NOT DISTINCT FROM $1 "
							  "ORDER BY stream_id LIMIT 1",
							  1, argtypes, args, stream ? NULL : "n",
							  true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read ctas_fed.syncs");
	if (SPI_processed == 1)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(outercxt);

		publication = SPI_getvalue(SPI_tuptable->vals[0],
								   SPI_tuptable->tupdesc, 1);
		MemoryContextSwitchTo(oldcxt);
	}
	CtasSyncSpiEndAs(&as);
	return publication;
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
	Oid			owner = syncs_owner(&syncs_relid);
	CtasSyncSpiAs as;
	Oid			argtypes[3] = {OIDOID, TEXTOID, TEXTOID};
	Datum		values[3];
	int			n;
	int64	   *ids;
	Oid		   *owners;
	char	  **publications;
	Oid		   *sources;
	int64	   *streams;
	int			i;
	MemoryContext outercxt = CurrentMemoryContext;
	MemoryContext oldcxt;

	values[0] = ObjectIdGetDatum(serverid);
	values[1] = CStringGetTextDatum(schema);
	values[2] = CStringGetTextDatum(table);

	/* the running syncs into that table, locked against a concurrent stop */
	CtasSyncSpiBeginAs(owner, &as);
	if (SPI_execute_with_args("SELECT sync_id, owner, publication, source, "
							  "stream_id "
							  "FROM ctas_fed.syncs s WHERE server = $1 "
							  "AND remote_schema = $2 AND remote_table = $3 "
							  "AND state IN " CTAS_SYNC_RUNNING_SQL " "
							  "FOR UPDATE OF s",
							  3, argtypes, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read ctas_fed.syncs");
	/* what SPI_finish must not free */
	oldcxt = MemoryContextSwitchTo(outercxt);
	n = (int) SPI_processed;
	ids = palloc(sizeof(int64) * Max(n, 1));
	owners = palloc(sizeof(Oid) * Max(n, 1));
	publications = palloc(sizeof(char *) * Max(n, 1));
	sources = palloc(sizeof(Oid) * Max(n, 1));
	streams = palloc(sizeof(int64) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		ids[i] = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		owners[i] = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
		publications[i] = SPI_getvalue(tup, desc, 3);
		sources[i] = DatumGetObjectId(SPI_getbinval(tup, desc, 4, &isnull));
		streams[i] = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
	}
	MemoryContextSwitchTo(oldcxt);
	CtasSyncSpiEndAs(&as);

	for (i = 0; i < n; i++)
	{
		Oid			idtype[1] = {INT8OID};
		Datum		id[1];

		if (!has_privs_of_role(GetUserId(), owners[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("must be a member of role \"%s\" to stop its sync into \"%s.%s\"",
							GetUserNameFromId(owners[i], false), schema, table)));
		/*
		 * The publication is the stream's (CtasSyncCreate): dropped with its
		 * last running job, else the job's table leaves it.  Whether other
		 * jobs run is read under the stream's lock, after any sync joining
		 * it committed (find_stream); a transaction snapshot may not see
		 * that one, and leaves the drop to the resolver (sync/tick.c).
		 */
		CtasSyncLockStream(streams[i]);
		if (IsolationUsesXactSnapshot() ||
			stream_runs_besides(owner, streams[i], ids[i]))
			CtasSyncUnpublish(publications[i], sources[i], owner, ids[i]);
		else
			run_as(owner,
				   psprintf("DROP PUBLICATION IF EXISTS %s",
							quote_identifier(publications[i])),
				   0, NULL, NULL, NULL);
		id[0] = Int64GetDatum(ids[i]);
		run_as(owner,
			   "UPDATE ctas_fed.syncs SET state = 'stopped', error = NULL, "
			   "finished_at = pg_catalog.now() WHERE sync_id = $1",
			   1, idtype, id, NULL);
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
	List	   *names = textToQualifiedNameList(target);
	ForeignServer *server;

	if (list_length(names) != 3)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid sync target \"%s\"", text_to_cstring(target)),
				 errhint("Write the target as catalog.schema.table.")));
	server = GetForeignServerByName(strVal(linitial(names)), false);
	/* none running: a failed one is stopped too (sync/syncs.c) */
	if (!CtasSyncStop(server->serverid, strVal(lsecond(names)),
					  strVal(lthird(names))) &&
		!CtasSyncStopFailed(server->serverid, strVal(lsecond(names)),
							strVal(lthird(names))))
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
	Oid			owner = syncs_owner(&syncs_relid);
	CtasSyncSpiAs as;
	Oid			argtypes[3] = {OIDOID, TEXTOID, TEXTOID};
	Datum		values[3];
	char	   *state = NULL;
	MemoryContext outercxt = CurrentMemoryContext;

	values[0] = ObjectIdGetDatum(serverid);
	values[1] = CStringGetTextDatum(schema);
	values[2] = CStringGetTextDatum(table);

	CtasSyncSpiBeginAs(owner, &as);
	if (SPI_execute_with_args("SELECT state FROM ctas_fed.syncs "
							  "WHERE server = $1 AND remote_schema = $2 "
							  "AND remote_table = $3 "
							  "AND state IN " CTAS_SYNC_RUNNING_SQL " LIMIT 1",
							  3, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read ctas_fed.syncs");
	if (SPI_processed > 0)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(outercxt);

		state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		MemoryContextSwitchTo(oldcxt);
	}
	CtasSyncSpiEndAs(&as);

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
	Oid			nsp = get_namespace_oid("ctas_fed", true);
	Oid			syncs_relid;
	Oid			owner;
	CtasSyncSpiAs as;
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1];
	char	   *target = NULL;
	char	   *state = NULL;

	if (!OidIsValid(nsp) || !OidIsValid(get_relname_relid("syncs", nsp)))
		return;
	owner = syncs_owner(&syncs_relid);
	values[0] = ObjectIdGetDatum(serverid);

	CtasSyncSpiBeginAs(owner, &as);
	if (SPI_execute_with_args("SELECT srv.srvname || '.' || s.remote_schema || '.' || s.remote_table, s.state "
							  "FROM ctas_fed.syncs s "
							  "JOIN pg_catalog.pg_foreign_server srv ON srv.oid = s.server "
							  "WHERE ($1 = 0 OR s.server = $1) "
							  "AND (s.state IN " CTAS_SYNC_RUNNING_SQL " "
							  "OR EXISTS (SELECT FROM pg_catalog.pg_replication_slots r "
							  "WHERE r.slot_name = s.slot_name)) "
							  "ORDER BY s.state IN " CTAS_SYNC_RUNNING_SQL " DESC "
							  "LIMIT 1",
							  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read ctas_fed.syncs");
	if (SPI_processed > 0)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(TopTransactionContext);

		target = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		MemoryContextSwitchTo(oldcxt);
	}
	CtasSyncSpiEndAs(&as);

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
	CtasSyncSpiAs as;
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1];
	int64		count;
	bool		isnull;
	LOCKTAG		tag;

	if (CtasMaxSyncsPerRole < 0 || superuser())
		return;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, role, 0, CTAS_LOCKTAG_SYNC_QUOTA);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);

	owner = syncs_owner(&syncs_relid);
	values[0] = ObjectIdGetDatum(role);
	CtasSyncSpiBeginAs(owner, &as);
	if (SPI_execute_with_args("SELECT pg_catalog.count(DISTINCT "
							  "coalesce(job_group, -sync_id)) "
							  "FROM ctas_fed.syncs WHERE owner = $1 "
							  "AND state IN " CTAS_SYNC_RUNNING_SQL,
							  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read ctas_fed.syncs");
	count = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										SPI_tuptable->tupdesc, 1, &isnull));
	CtasSyncSpiEndAs(&as);

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
