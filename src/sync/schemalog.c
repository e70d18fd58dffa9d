/*-------------------------------------------------------------------------
 *
 * schemalog.c
 *		  The record of the schema changes a sync followed
 *		  (docs/sync-schema-changes.md): the job's new shape stored with it,
 *		  each change a row of ctas_fed.sync_schema_changes and a webhook
 *		  event schema_change, once, also when the DDL's transaction is
 *		  read again after a restart; and the change a job failed at.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/schemalog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"

#include "catalog.h"
#include "guc.h"
#include "jobs.h"
#include "sync/sync_int.h"

/* rows of ctas_fed.sync_schema_changes kept per sync */
#define CTAS_SYNC_SCHEMA_CHANGES_KEPT	100

/* an array of n Datums of type typid (int2, oid or text) */
static Datum
datum_array(Datum *elems, int n, Oid typid)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;

	get_typlenbyvalalign(typid, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_array(elems, n, typid, typlen, typbyval,
										   typalign));
}

/*
 * queue_schema_event
 *		The webhook event "schema_change" of a change that job followed, its
 *		text in the event's error field, if the job's catalog (or
 *		ctas_fed.notify_url) names a webhook; sent as the events of the
 *		job's states are (sync/worker.c), by the notifier.
 */
static void
queue_schema_event(SyncJob *job, const char *change)
{
	const CtasCatalog *catalog = job->target.catalog;
	const char *url = catalog->notify_url ? catalog->notify_url : CtasNotifyUrl;
	CtasJobEvent ev;

	if (url == NULL || url[0] == '\0')
		return;
	memset(&ev, 0, sizeof(ev));
	ev.job_id = job->job_id;
	ev.started_at = job->created_at;
	strlcpy(ev.mode, "sync", sizeof(ev.mode));
	strlcpy(ev.state_name, "schema_change", sizeof(ev.state_name));
	strlcpy(ev.error, change, sizeof(ev.error));
	strlcpy(ev.catalog, catalog->name, sizeof(ev.catalog));
	snprintf(ev.target, sizeof(ev.target), "%s.%s",
			 quote_identifier(job->target.schema),
			 quote_identifier(job->target.table));
	strlcpy(ev.notify_url, url, sizeof(ev.notify_url));
	ev.notify_trusted = !(catalog->notify_url_limited &&
						  url == catalog->notify_url);
	CtasJobsQueueEvent(&ev);
}

/*
 * last_recorded_lsn
 *		The lsn of the last change recorded as followed for sync id, or
 *		InvalidXLogRecPtr.  Connected to SPI.
 */
static XLogRecPtr
last_recorded_lsn(int64 id)
{
	bool		isnull;
	Datum		d;

	if (SPI_execute_with_args("SELECT max(lsn) FROM ctas_fed.sync_schema_changes "
							  "WHERE sync_id = $1 AND followed",
							  1, (Oid[]) {INT8OID},
							  (Datum[]) {Int64GetDatum(id)},
							  NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the schema changes of sync " INT64_FORMAT,
			 id);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? InvalidXLogRecPtr : DatumGetLSN(d);
}

/*
 * CtasSyncSaveShape
 *		Store the columns a whole-row sync has after the schema changes it
 *		followed (CtasSyncSchemaFollow) in its ctas_fed.syncs row, record
 *		each change in ctas_fed.sync_schema_changes and queue its webhook
 *		event (schema_change), in the current transaction, connected to
 *		SPI.
 */
void
CtasSyncSaveShape(SyncJob *job)
{
	Datum		shape[6];
	Datum	   *elems = palloc(sizeof(Datum) * Max(job->ncols, 1));
	Datum	   *oids = palloc(sizeof(Datum) * Max(job->ncols, 1));
	Datum	   *keys = palloc(sizeof(Datum) * Max(job->target.nkeys, 1));
	XLogRecPtr	last;
	ListCell   *lc;
	int			i;

	for (i = 0; i < job->ncols; i++)
	{
		elems[i] = Int16GetDatum(job->attnums[i]);
		oids[i] = ObjectIdGetDatum(job->atttypes[i]);
	}
	for (i = 0; i < job->target.nkeys; i++)
		keys[i] = CStringGetTextDatum(job->target.keys[i]);
	shape[0] = datum_array(elems, job->ncols, INT2OID);
	shape[1] = datum_array(oids, job->ncols, OIDOID);
	/* the remote columns: as many as the query's result, not its sources */
	elems = palloc(sizeof(Datum) * Max(job->target.ncolumns, 1));
	for (i = 0; i < job->target.ncolumns; i++)
		elems[i] = CStringGetTextDatum(job->target.columns[i]);
	shape[2] = datum_array(elems, job->target.ncolumns, TEXTOID);
	shape[3] = CStringGetTextDatum(nodeToString(job->query));
	shape[4] = datum_array(keys, job->target.nkeys, TEXTOID);
	/* their source columns: a new key (CtasSyncPlanRekey) moves them */
	keys = palloc(sizeof(Datum) * Max(job->target.nkeys, 1));
	for (i = 0; i < job->target.nkeys; i++)
		keys[i] = Int16GetDatum(job->attnums[job->keycol[i]]);
	shape[5] = datum_array(keys, job->target.nkeys, INT2OID);
	CtasSyncStoreShape(job->id, shape);

	/*
	 * Idempotent: a DDL's transaction read again after a restart (the
	 * slot's position is made durable only at a checkpoint, so an
	 * immediate stop can lose it) is skipped as applied, and the job takes
	 * the shape of each message again, from the shape it stored after the
	 * last of them: changes at an lsn up to that of the last change
	 * recorded were recorded (and sent) then, or are the replay of a shape
	 * the job had before it.  The shape and the records are stored in one
	 * transaction: a crash before it leaves none of them recorded.
	 */
	last = last_recorded_lsn(job->id);
	foreach(lc, job->schema_log)
	{
		char	   *entry = lfirst(lc);
		char	   *change = strchr(entry, ' ') + 1;
		Oid			ltypes[3] = {INT8OID, TEXTOID, TEXTOID};
		Datum		lvalues[3];

		if (DatumGetLSN(DirectFunctionCall1(pg_lsn_in,
											CStringGetDatum(pnstrdup(entry, change - 1 - entry)))) <= last)
			continue;			/* recorded and sent before a restart */
		lvalues[0] = Int64GetDatum(job->id);
		lvalues[1] = CStringGetTextDatum(pnstrdup(entry, change - 1 - entry));
		lvalues[2] = CStringGetTextDatum(change);
		if (SPI_execute_with_args("INSERT INTO ctas_fed.sync_schema_changes "
								  "(sync_id, lsn, change, followed) "
								  "VALUES ($1, $2::pg_catalog.pg_lsn, $3, true)",
								  3, ltypes, lvalues, NULL, false, 0) < 0)
			elog(ERROR, "could not record a schema change of sync " INT64_FORMAT,
				 job->id);
		queue_schema_event(job, change);
	}
	list_free_deep(job->schema_log);
	job->schema_log = NIL;
	job->reshaped = false;
	/* rows recorded: at most CTAS_SYNC_SCHEMA_CHANGES_KEPT per sync */
	if (SPI_execute_with_args("DELETE FROM ctas_fed.sync_schema_changes "
							  "WHERE sync_id = $1 AND change_id <= "
							  "(SELECT change_id FROM ctas_fed.sync_schema_changes "
							  "WHERE sync_id = $1 ORDER BY change_id DESC "
							  "OFFSET " CppAsString2(CTAS_SYNC_SCHEMA_CHANGES_KEPT) " LIMIT 1)",
							  1, (Oid[]) {INT8OID},
							  (Datum[]) {Int64GetDatum(job->id)}, NULL, false,
							  0) < 0)
		elog(ERROR, "could not trim the schema changes of sync " INT64_FORMAT,
			 job->id);
}

/*
 * CtasSyncRecordSchemaFailure
 *		The schema change at which job failed (job->schema_failed_at, set by
 *		sync/apply.c) as a row of ctas_fed.sync_schema_changes, with error,
 *		the reason, in a transaction of its own: the worker's, after the
 *		job's failure is recorded.
 */
void
CtasSyncRecordSchemaFailure(SyncJob *job, const char *error)
{
	Oid			types[3] = {INT8OID, PG_LSNOID, TEXTOID};
	Datum		values[3];

	values[0] = Int64GetDatum(job->id);
	values[1] = LSNGetDatum(job->schema_failed_at);
	values[2] = CStringGetTextDatum(error);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute_with_args("INSERT INTO ctas_fed.sync_schema_changes "
							  "(sync_id, lsn, change, followed) "
							  "VALUES ($1, $2, $3, false)",
							  3, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record the schema change sync " INT64_FORMAT " failed at",
			 job->id);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}
