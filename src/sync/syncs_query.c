/*-------------------------------------------------------------------------
 *
 * syncs_query.c
 *		  The statements on ctas_fed.syncs, each in a function named after
 *		  what it does, as a catalog's accessors are: the statement time's
 *		  (a new row, its stream, stop_sync, the checks of other commands)
 *		  and the worker's bookkeeping of streams (merge, resync).  With
 *		  sync/syncs.c (the job loaded, its state recorded), the one module
 *		  whose SQL names that table.
 *
 * Two kinds of accessor:
 *
 *	as the owner	the statement time's (CtasSyncTableOwner's user, passed
 *					by the caller): each connects to SPI as that user, with
 *					search_path pinned (CtasSyncRunAs, CtasSyncSpiBeginAs),
 *					in the current transaction, and disconnects
 *	connected		the worker's: in a transaction of the caller's already
 *					connected to SPI, as the worker's user
 *
 * Each reads or writes as the statement it replaced did: the same text,
 * the same locks (FOR UPDATE), the same snapshot (a statement of its own
 * in the caller's transaction), the same errors.  The state names in the
 * SQL come from the table of sync/syncs.c (CtasSyncStateName,
 * CTAS_SYNC_RUNNING_SQL).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/syncs_query.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "sync/sync_int.h"

/*
 * CtasSyncRunAs
 *		SPI statement sql with args, as user userid, in the current
 *		transaction.  Returns SPI_processed; a one-column one-row result is
 *		stored in *result if result is not NULL.  ereport(ERROR) on failure.
 */
uint64
CtasSyncRunAs(Oid userid, const char *sql, int nargs, Oid *argtypes,
			  Datum *values, Datum *result)
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

/*
 * CtasSyncTableOwner
 *		The owner of ctas_fed.syncs: who may write the job records; its oid
 *		in *relid.  When the table (or schema ctas_fed) is missing: ERROR,
 *		or with missing_ok InvalidOid.
 */
Oid
CtasSyncTableOwner(bool missing_ok, Oid *relid)
{
	Oid			nsp = get_namespace_oid("ctas_fed", missing_ok);
	HeapTuple	tup;
	Oid			owner;

	*relid = OidIsValid(nsp) ? get_relname_relid("syncs", nsp) : InvalidOid;
	if (!OidIsValid(*relid))
	{
		if (missing_ok)
			return InvalidOid;
		elog(ERROR, "table ctas_fed.syncs is missing");
	}
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(*relid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", *relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * CtasSyncHasStreams
 *		Whether ctas_fed.syncs (oid relid) has column stream_name: not
 *		before ALTER EXTENSION ctas_fed UPDATE to 0.3.
 */
bool
CtasSyncHasStreams(Oid relid)
{
	return get_attnum(relid, "stream_name") != InvalidAttrNumber;
}

/*
 * CtasSyncNextId
 *		A new sync_id, as user owner.
 */
int64
CtasSyncNextId(Oid owner)
{
	Datum		id;

	CtasSyncRunAs(owner, "SELECT pg_catalog.nextval('ctas_fed.syncs_sync_id_seq')",
				  0, NULL, NULL, &id);
	return DatumGetInt64(id);
}

/*
 * CtasSyncStreamRunsBesides
 *		Whether stream stream_id has a running job other than sync_id, read
 *		by a statement of its own (a fresh snapshot in READ COMMITTED), as
 *		user owner.
 */
bool
CtasSyncStreamRunsBesides(Oid owner, int64 stream_id, int64 sync_id)
{
	Oid			argtypes[2] = {INT8OID, INT8OID};
	Datum		args[2];
	Datum		result = BoolGetDatum(false);

	args[0] = Int64GetDatum(stream_id);
	args[1] = Int64GetDatum(sync_id);
	CtasSyncRunAs(owner,
				  "SELECT EXISTS (SELECT FROM ctas_fed.syncs WHERE stream_id = $1 "
				  "AND sync_id <> $2 AND state IN " CTAS_SYNC_RUNNING_SQL ")",
				  2, argtypes, args, &result);
	return DatumGetBool(result);
}

/*
 * CtasSyncFirstStreamNamed
 *		The oldest running stream of stream name stream (NULL: the default
 *		stream), as user owner, or 0 when none runs.  Locks nothing.
 */
int64
CtasSyncFirstStreamNamed(Oid owner, const char *stream)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	CtasSyncSpiAs as;
	int64		stream_id = 0;

	args[0] = stream ? CStringGetTextDatum(stream) : (Datum) 0;
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

		stream_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1,
												&isnull));
	}
	CtasSyncSpiEndAs(&as);
	return stream_id;
}

/*
 * CtasSyncStreamPublication
 *		The publication (and slot) of the oldest running stream of stream
 *		name stream (NULL: the default), as user owner, or NULL.  Locks
 *		nothing; allocates in the current memory context.
 */
char *
CtasSyncStreamPublication(Oid owner, const char *stream)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	CtasSyncSpiAs as;
	char	   *publication = NULL;
	MemoryContext outercxt = CurrentMemoryContext;

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
 * CtasSyncGroupStream
 *		The stream of a job of create_tables_as call group_id, as user
 *		owner, in *stream_id; false (*stream_id unchanged) when the call has
 *		no job yet.
 */
bool
CtasSyncGroupStream(Oid owner, int64 group_id, int64 *stream_id)
{
	Oid			grouptype[1] = {INT8OID};
	Datum		group[1];
	Datum		result;

	group[0] = Int64GetDatum(group_id);
	if (CtasSyncRunAs(owner,
					  "SELECT stream_id FROM ctas_fed.syncs WHERE job_group = $1 "
					  "LIMIT 1", 1, grouptype, group, &result) == 0)
		return false;
	*stream_id = DatumGetInt64(result);
	return true;
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
 * CtasSyncInsertRow
 *		Insert row, a new job, into ctas_fed.syncs, as user owner, in the
 *		current transaction; its publication and slot are both named
 *		row->name.  row->streams: the table has column stream_name (0.3).
 */
void
CtasSyncInsertRow(Oid owner, const CtasSyncRow *row)
{
	Oid			argtypes[16];
	Datum		values[16];

	argtypes[0] = INT8OID;
	values[0] = Int64GetDatum(row->sync_id);
	argtypes[1] = OIDOID;
	values[1] = ObjectIdGetDatum(row->owner);
	argtypes[2] = OIDOID;
	values[2] = ObjectIdGetDatum(row->server);
	argtypes[3] = TEXTOID;
	values[3] = CStringGetTextDatum(row->remote_schema);
	argtypes[4] = TEXTOID;
	values[4] = CStringGetTextDatum(row->remote_table);
	argtypes[5] = OIDOID;
	values[5] = ObjectIdGetDatum(row->source);
	argtypes[6] = TEXTOID;
	values[6] = CStringGetTextDatum(row->query);
	argtypes[7] = TEXTOID;
	values[7] = CStringGetTextDatum(row->query_tree);
	argtypes[8] = TEXTARRAYOID;
	values[8] = list_to_text_array(row->key_columns, false);
	argtypes[9] = TEXTARRAYOID;
	values[9] = list_to_text_array(row->source_key, true);
	argtypes[10] = TEXTARRAYOID;
	values[10] = list_to_text_array(row->source_attnums, true);
	argtypes[11] = TEXTARRAYOID;
	values[11] = list_to_text_array(row->source_columns, false);
	argtypes[12] = TEXTARRAYOID;
	values[12] = list_to_text_array(row->source_types, true);
	argtypes[13] = TEXTARRAYOID;
	values[13] = list_to_text_array(row->remote_columns, false);
	argtypes[14] = INT8OID;
	values[14] = Int64GetDatum(row->job_id);
	argtypes[15] = INT8OID;
	values[15] = Int64GetDatum(row->stream_id);

	CtasSyncRunAs(owner,
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
						   row->streams ? ", stream_name" : "",
						   row->job_group,
						   quote_literal_cstr(row->name),
						   quote_literal_cstr(row->name),
						   quote_literal_cstr(row->schema_changes),
						   row->whole_row ? "true" : "false",
						   row->streams ? ", " : "",
						   !row->streams ? "" : row->stream_name ?
						   quote_literal_cstr(row->stream_name) : "NULL"),
				  16, argtypes, values, NULL);
}

/*
 * CtasSyncLockRunningInto
 *		The running jobs into catalog serverid's schema.table, their rows
 *		locked (FOR UPDATE) against a concurrent stop, as user owner: an
 *		array of *n, allocated in the current memory context.
 */
CtasSyncRunning *
CtasSyncLockRunningInto(Oid owner, Oid serverid, const char *schema,
						const char *table, int *n)
{
	CtasSyncSpiAs as;
	Oid			argtypes[3] = {OIDOID, TEXTOID, TEXTOID};
	Datum		values[3];
	CtasSyncRunning *jobs;
	int			i;
	MemoryContext outercxt = CurrentMemoryContext;
	MemoryContext oldcxt;

	values[0] = ObjectIdGetDatum(serverid);
	values[1] = CStringGetTextDatum(schema);
	values[2] = CStringGetTextDatum(table);

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
	*n = (int) SPI_processed;
	jobs = palloc(sizeof(CtasSyncRunning) * Max(*n, 1));
	for (i = 0; i < *n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		jobs[i].sync_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		jobs[i].owner = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
		jobs[i].publication = SPI_getvalue(tup, desc, 3);
		jobs[i].source = DatumGetObjectId(SPI_getbinval(tup, desc, 4, &isnull));
		jobs[i].stream_id = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
	}
	MemoryContextSwitchTo(oldcxt);
	CtasSyncSpiEndAs(&as);
	return jobs;
}

/*
 * CtasSyncMarkStopped
 *		Mark job sync_id "stopped", as user owner, in the current
 *		transaction (stop_sync).
 */
void
CtasSyncMarkStopped(Oid owner, int64 sync_id)
{
	Oid			idtype[1] = {INT8OID};
	Datum		id[1];

	id[0] = Int64GetDatum(sync_id);
	CtasSyncRunAs(owner,
				  psprintf("UPDATE ctas_fed.syncs SET state = %s, error = NULL, "
						   "finished_at = pg_catalog.now() WHERE sync_id = $1",
						   CtasSyncStateLiteral(CTAS_SYNC_STOPPED)),
				  1, idtype, id, NULL);
}

/*
 * CtasSyncRunningStateInto
 *		The state of a running job into catalog serverid's schema.table, as
 *		user owner, or NULL when none runs.  Allocates in the current memory
 *		context.
 */
char *
CtasSyncRunningStateInto(Oid owner, Oid serverid, const char *schema,
						 const char *table)
{
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
	return state;
}

/*
 * CtasSyncFindBusy
 *		A job into catalog serverid (InvalidOid: any catalog) that runs or
 *		still has a replication slot, the running ones first, as user owner:
 *		its target as "catalog.schema.table" in *target and its state in
 *		*state, both in TopTransactionContext; false when there is none.
 */
bool
CtasSyncFindBusy(Oid owner, Oid serverid, char **target, char **state)
{
	CtasSyncSpiAs as;
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1];
	bool		found = false;

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

		*target = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		*state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		MemoryContextSwitchTo(oldcxt);
		found = true;
	}
	CtasSyncSpiEndAs(&as);
	return found;
}

/*
 * CtasSyncCountRunningOf
 *		How many syncs role runs in this database, the tables of one
 *		create_tables_as call counting as one, as user owner.
 */
int64
CtasSyncCountRunningOf(Oid owner, Oid role)
{
	CtasSyncSpiAs as;
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1];
	int64		count;
	bool		isnull;

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
	return count;
}

/*
 * CtasSyncIsPrimaryStream
 *		Whether stream_id is the oldest running default stream of the
 *		database (the one the others merge into, sync/merge.c); never
 *		before the update to 0.3.  In a transaction connected to SPI.
 */
bool
CtasSyncIsPrimaryStream(int64 stream_id)
{
	Datum		args[1];

	/* no stream_name before the update to 0.3: nothing to merge yet */
	CtasSyncSpiExec("SELECT FROM pg_catalog.pg_attribute "
					"WHERE attrelid = 'ctas_fed.syncs'::pg_catalog.regclass "
					"AND attname = 'stream_name' AND NOT attisdropped",
					0, NULL, NULL, true);
	if (SPI_processed == 0)
		return false;
	args[0] = Int64GetDatum(stream_id);
	CtasSyncSpiExec("SELECT FROM ctas_fed.syncs "
					"WHERE state IN " CTAS_SYNC_RUNNING_SQL " "
					"AND stream_id = $1 AND stream_name IS NULL "
					"AND NOT EXISTS (SELECT FROM ctas_fed.syncs o "
					"WHERE o.state IN " CTAS_SYNC_RUNNING_SQL " "
					"AND o.stream_name IS NULL AND o.stream_id < $1)",
					1, (Oid[]) {INT8OID}, args, true);
	return SPI_processed > 0;
}

/*
 * CtasSyncFindMergeable
 *		Another running default stream of this database than primary, all
 *		of whose jobs stream (sync/merge.c): its stream_id, publication and
 *		slot, the names in CtasSyncJobCxt; or false.  In a transaction
 *		connected to SPI.
 */
bool
CtasSyncFindMergeable(int64 primary, int64 *stream_id, char **publication,
					  char **slot_name)
{
	Datum		args[1];

	args[0] = Int64GetDatum(primary);
	CtasSyncSpiExec(psprintf("SELECT stream_id, min(publication), min(slot_name) "
							 "FROM ctas_fed.syncs WHERE stream_id <> $1 "
							 "AND state IN " CTAS_SYNC_RUNNING_SQL " "
							 "GROUP BY stream_id "
							 "HAVING bool_and(stream_name IS NULL) "
							 "AND bool_and(state = %s) "
							 "AND $1 < stream_id "
							 "ORDER BY stream_id LIMIT 1",
							 CtasSyncStateLiteral(CTAS_SYNC_STREAMING)),
					1, (Oid[]) {INT8OID}, args, true);
	if (SPI_processed == 0)
		return false;
	*stream_id = DatumGetInt64(CtasSyncSpiDatum(0, 1));
	*publication = MemoryContextStrdup(CtasSyncJobCxt, CtasSyncSpiText(0, 2));
	*slot_name = MemoryContextStrdup(CtasSyncJobCxt, CtasSyncSpiText(0, 3));
	return true;
}

/*
 * CtasSyncMoveStream
 *		The jobs of stream from become stream to's, with its publication
 *		and slot (sync/merge.c, step 5).  In a transaction connected to SPI,
 *		both streams locked.
 */
void
CtasSyncMoveStream(int64 from, int64 to, const char *publication,
				   const char *slot_name)
{
	Datum		args[4];

	args[0] = Int64GetDatum(from);
	args[1] = Int64GetDatum(to);
	args[2] = DirectFunctionCall1(namein, CStringGetDatum(publication));
	args[3] = DirectFunctionCall1(namein, CStringGetDatum(slot_name));
	CtasSyncSpiExec("UPDATE ctas_fed.syncs SET stream_id = $2, "
					"publication = $3, slot_name = $4 WHERE stream_id = $1",
					4, (Oid[]) {INT8OID, INT8OID, NAMEOID, NAMEOID}, args,
					false);
}

/*
 * CtasSyncMarkCopyAgain
 *		Mark the jobs of stream stream_id that stream and read source (all
 *		of them when source is InvalidOid) "copying", their error cleared,
 *		for the next worker to copy them again (sync/partition.c).  In a
 *		transaction connected to SPI.
 */
void
CtasSyncMarkCopyAgain(int64 stream_id, Oid source)
{
	Datum		args[2];

	args[0] = Int64GetDatum(stream_id);
	args[1] = ObjectIdGetDatum(source);
	if (SPI_execute_with_args(psprintf("UPDATE ctas_fed.syncs SET state = %s, "
									   "error = NULL WHERE stream_id = $1 "
									   "AND ($2 = 0 OR source = $2) "
									   "AND state = %s",
									   CtasSyncStateLiteral(CTAS_SYNC_COPYING),
									   CtasSyncStateLiteral(CTAS_SYNC_STREAMING)),
							  2, (Oid[]) {INT8OID, OIDOID}, args, NULL, false,
							  0) < 0)
		elog(ERROR, "could not mark stream " INT64_FORMAT " for a resync",
			 stream_id);
}

/*
 * CtasSyncListForTick
 *		Every row of ctas_fed.syncs, for the resolver's tick
 *		(sync/tick.c), in SPI_tuptable; returns SPI_processed.  Columns:
 *		1 sync_id, 2 state, 3 slot_name, 4 publication, 5 server, 6 owner,
 *		7 job_id, 8 remote_schema, 9 remote_table, 10 created_at,
 *		11 stream_id, 12 whether a job of the stream still runs, 13 whether
 *		the row is among the last stopped of its stream.  In a transaction
 *		connected to SPI.
 */
uint64
CtasSyncListForTick(void)
{
	if (SPI_execute(psprintf("SELECT sync_id, state, slot_name, publication, server, "
							 "owner, job_id, remote_schema, remote_table, created_at, "
							 "stream_id, "
							 "EXISTS (SELECT FROM ctas_fed.syncs o "
							 "WHERE o.stream_id = s.stream_id "
							 "AND o.state IN " CTAS_SYNC_RUNNING_SQL "), "
							 "coalesce(state = %s AND finished_at = "
							 "(SELECT max(o.finished_at) FROM ctas_fed.syncs o "
							 "WHERE o.stream_id = s.stream_id), false) "
							 "FROM ctas_fed.syncs s",
							 CtasSyncStateLiteral(CTAS_SYNC_STOPPED)),
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read ctas_fed.syncs");
	return SPI_processed;
}

/*
 * CtasSyncRecordStreamNote
 *		Record note as the error of the running jobs of stream stream_id:
 *		over any other error when replace, else only where there is none
 *		(the resolver's "no background worker is free" and "waiting for a
 *		sync worker", sync/tick.c).  In a transaction connected to SPI.
 */
void
CtasSyncRecordStreamNote(int64 stream_id, const char *note, bool replace)
{
	Datum		args[2];

	args[0] = Int64GetDatum(stream_id);
	args[1] = CStringGetTextDatum(note);
	if (SPI_execute_with_args(replace ?
							  "UPDATE ctas_fed.syncs SET error = $2 "
							  "WHERE stream_id = $1 "
							  "AND state IN " CTAS_SYNC_RUNNING_SQL " "
							  "AND error IS DISTINCT FROM $2" :
							  "UPDATE ctas_fed.syncs SET error = $2 "
							  "WHERE stream_id = $1 "
							  "AND state IN " CTAS_SYNC_RUNNING_SQL " "
							  "AND error IS NULL",
							  2, (Oid[]) {INT8OID, TEXTOID}, args, NULL,
							  false, 0) < 0)
		elog(ERROR, "could not record the error of sync " INT64_FORMAT,
			 stream_id);
}

/*
 * CtasSyncClearError
 *		The error of running job sync_id is over (its catalog is back).  In
 *		a transaction connected to SPI.
 */
void
CtasSyncClearError(int64 sync_id)
{
	Datum		id[1];

	id[0] = Int64GetDatum(sync_id);
	CtasSyncSpiExec("UPDATE ctas_fed.syncs SET error = NULL "
					"WHERE sync_id = $1 AND error IS NOT NULL "
					"AND state IN " CTAS_SYNC_RUNNING_SQL,
					1, (Oid[]) {INT8OID}, id, false);
}

/*
 * CtasSyncListRunningOfStream
 *		The running jobs of stream stream_id in SPI_tuptable (1 sync_id,
 *		2 whether it is copying); returns SPI_processed.  In a transaction
 *		connected to SPI.
 */
uint64
CtasSyncListRunningOfStream(int64 stream_id)
{
	Datum		args[1];

	args[0] = Int64GetDatum(stream_id);
	CtasSyncSpiExec(psprintf("SELECT sync_id, state = %s FROM ctas_fed.syncs "
							 "WHERE stream_id = $1 AND state IN " CTAS_SYNC_RUNNING_SQL,
							 CtasSyncStateLiteral(CTAS_SYNC_COPYING)),
					1, (Oid[]) {INT8OID}, args, true);
	return SPI_processed;
}

/*
 * CtasSyncAsOwnerBegin
 *		SPI as the owner of ctas_fed.syncs (the extension's owner), in the
 *		current transaction (CtasSyncSpiBeginAs): the table is not readable
 *		by PUBLIC.  CtasSyncSpiEndAs ends it.
 */
void
CtasSyncAsOwnerBegin(CtasSyncSpiAs *as)
{
	Oid			relid;

	CtasSyncSpiBeginAs(CtasSyncTableOwner(false, &relid), as);
}

/*
 * CtasSyncParseTarget
 *		The catalog (its server's oid), schema and table of a sync's target
 *		as a user writes it, catalog.schema.table; ERROR (42602) on any
 *		other form, or when there is no such catalog.
 */
void
CtasSyncParseTarget(text *target, Oid *serverid, char **schema, char **table)
{
	List	   *names = textToQualifiedNameList(target);

	if (list_length(names) != 3)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid sync target \"%s\"", text_to_cstring(target)),
				 errhint("Write the target as catalog.schema.table.")));
	*serverid = GetForeignServerByName(strVal(linitial(names)), false)->serverid;
	*schema = strVal(lsecond(names));
	*table = strVal(lthird(names));
}

/*
 * CtasSyncFindRunning
 *		The running sync (copying or streaming) into target
 *		(catalog.schema.table), locked FOR UPDATE in the current
 *		transaction when lock: its id, stream and state (palloc'd).  The
 *		current user must be allowed to stop it (its owner, a member of the
 *		owner's role, or a superuser), as stop_sync checks; verb names
 *		what is refused.  ERROR when there is none or it is not allowed.
 */
int64
CtasSyncFindRunning(text *target, const char *verb, bool lock,
					int64 *stream_id, CtasSyncState *state)
{
	CtasSyncSpiAs as;
	Oid			argtypes[3] = {OIDOID, TEXTOID, TEXTOID};
	Datum		values[3];
	Oid			serverid;
	char	   *schema;
	char	   *table;
	Oid			owner;
	int64		id;
	bool		isnull;

	CtasSyncParseTarget(target, &serverid, &schema, &table);
	values[0] = ObjectIdGetDatum(serverid);
	values[1] = CStringGetTextDatum(schema);
	values[2] = CStringGetTextDatum(table);

	CtasSyncAsOwnerBegin(&as);
	if (SPI_execute_with_args(psprintf("SELECT owner, stream_id, sync_id, state "
									   "FROM ctas_fed.syncs "
									   "WHERE server = $1 AND remote_schema = $2 "
									   "AND remote_table = $3 "
									   "AND state IN " CTAS_SYNC_RUNNING_SQL "%s",
									   lock ? " FOR UPDATE" : ""),
							  3, argtypes, values, NULL, !lock, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read ctas_fed.syncs");
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("there is no running sync into \"%s\"",
						text_to_cstring(target))));
	owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
										   SPI_tuptable->tupdesc, 1, &isnull));
	*stream_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 2,
											 &isnull));
	id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
									 SPI_tuptable->tupdesc, 3, &isnull));
	*state = CtasSyncStateFromName(SPI_getvalue(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 4));
	if (!has_privs_of_role(as.save_userid, owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be a member of role \"%s\" to %s its sync into \"%s\"",
						GetUserNameFromId(owner, false), verb,
						text_to_cstring(target))));
	CtasSyncSpiEndAs(&as);
	return id;
}

/*
 * CtasSyncMarkResync
 *		Mark running job sync_id "copying", its error cleared, for its
 *		worker to copy it again (resync()), in the caller's transaction, as
 *		the owner of ctas_fed.syncs.
 */
void
CtasSyncMarkResync(int64 sync_id)
{
	CtasSyncSpiAs as;
	Datum		values[1];

	values[0] = Int64GetDatum(sync_id);
	CtasSyncAsOwnerBegin(&as);
	if (SPI_execute_with_args(psprintf("UPDATE ctas_fed.syncs SET state = %s, "
									   "error = NULL WHERE sync_id = $1 "
									   "AND state IN " CTAS_SYNC_RUNNING_SQL,
									   CtasSyncStateLiteral(CTAS_SYNC_COPYING)),
							  1, (Oid[]) {INT8OID}, values, NULL, false,
							  0) != SPI_OK_UPDATE)
		elog(ERROR, "could not mark sync " INT64_FORMAT " for a resync",
			 sync_id);
	CtasSyncSpiEndAs(&as);
}

/*
 * CtasSyncStoreNames
 *		Store the source column names of job sync_id (names: a text[]).
 *		In a transaction connected to SPI.
 */
void
CtasSyncStoreNames(int64 sync_id, Datum names)
{
	Datum		values[2];

	values[0] = Int64GetDatum(sync_id);
	values[1] = names;
	if (SPI_execute_with_args("UPDATE ctas_fed.syncs SET source_columns = $2 "
							  "WHERE sync_id = $1", 2,
							  (Oid[]) {INT8OID, TEXTARRAYOID}, values, NULL,
							  false, 0) < 0)
		elog(ERROR, "could not store the column names of sync " INT64_FORMAT,
			 sync_id);
}

/*
 * CtasSyncStoreShape
 *		Store the shape of job sync_id: values[0..5] the source attnums
 *		(int2[]), their types (oid[]), the remote columns (text[]), the
 *		query's tree (text), the key columns (text[]) and their source
 *		attnums (int2[]).  In a transaction connected to SPI.
 */
void
CtasSyncStoreShape(int64 sync_id, const Datum *shape)
{
	Oid			types[7] = {INT8OID, INT2ARRAYOID, OIDARRAYOID, TEXTARRAYOID,
	TEXTOID, TEXTARRAYOID, INT2ARRAYOID};
	Datum		values[7];

	values[0] = Int64GetDatum(sync_id);
	memcpy(values + 1, shape, sizeof(Datum) * 6);
	if (SPI_execute_with_args("UPDATE ctas_fed.syncs SET source_attnums = $2, "
							  "source_types = $3, remote_columns = $4, "
							  "query_tree = $5, key_columns = $6, "
							  "source_key = $7 "
							  "WHERE sync_id = $1", 7, types, values, NULL,
							  false, 0) < 0)
		elog(ERROR, "could not store the columns of sync " INT64_FORMAT,
			 sync_id);
}
