/*-------------------------------------------------------------------------
 *
 * metrics.c
 *		  What the job registry shows: the ctas_fed.jobs view, the
 *		  Prometheus text exposition of ctas_fed.metrics() (also pushed to a
 *		  Pushgateway by the worker), and the JSON body of status webhooks.
 *
 * Nothing here holds a secret: jobs never record credentials, and error
 * texts are ctas_fed's own messages, which never print one.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/metrics.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/xid8.h"

#include "guc.h"
#include "jobs.h"
#include "jobshards.h"
#include "metrics.h"
#include "sync/sync.h"

PG_FUNCTION_INFO_V1(ctas_fed_jobs);
PG_FUNCTION_INFO_V1(ctas_fed_metrics);
PG_FUNCTION_INFO_V1(ctas_fed_job_shards);

#define JOBS_COLS	14

/*
 * ctas_fed.jobs() - the rows of the ctas_fed.jobs view: running jobs, then
 * the history, oldest first.
 */
Datum
ctas_fed_jobs(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CtasJobsSnapshotData *snap;
	int			i;

	bool		see_all;

	CtasCheckPreloaded();
	InitMaterializedSRF(fcinfo, 0);
	snap = CtasJobsSnapshot();

	/*
	 * Error texts can quote row values: as pg_stat_activity does with query
	 * texts, only the job's user and pg_read_all_stats see them.
	 */
	see_all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);

	for (i = 0; i < snap->njobs; i++)
	{
		CtasJob    *job = &snap->jobs[i];
		Datum		values[JOBS_COLS];
		bool		nulls[JOBS_COLS];

		memset(nulls, 0, sizeof(nulls));
		values[0] = Int64GetDatum(job->job_id);
		values[1] = CStringGetTextDatum(job->catalog);
		values[2] = CStringGetTextDatum(job->target);
		values[3] = CStringGetTextDatum(job->mode);
		values[4] = CStringGetTextDatum(CtasJobStateName(job->state));
		values[5] = Int64GetDatum((int64) pg_atomic_read_u64(&job->rows));
		values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&job->bytes));
		values[7] = TimestampTzGetDatum(job->started_at);
		values[8] = TimestampTzGetDatum(job->finished_at);
		nulls[8] = job->finished_at == 0;
		if (see_all || job->userid == GetUserId())
			values[9] = CStringGetTextDatum(job->error);
		else
			values[9] = CStringGetTextDatum("<insufficient privilege>");
		nulls[9] = job->error[0] == '\0';
		values[10] = Int32GetDatum(job->pid);
		values[11] = FullTransactionIdGetDatum(FullTransactionIdFromU64(job->fxid));
		nulls[11] = job->fxid == 0;
		values[12] = CStringGetTextDatum(job->gid);
		nulls[12] = job->gid[0] == '\0';
		values[13] = Int64GetDatum(job->group_id);
		nulls[13] = job->group_id == 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* a Prometheus label value: backslash, double quote and newline escaped */
static void
append_label(StringInfo buf, const char *value)
{
	const char *p;

	for (p = value; *p; p++)
	{
		if (*p == '\\' || *p == '"')
			appendStringInfoChar(buf, '\\');
		if (*p == '\n')
			appendStringInfoString(buf, "\\n");
		else
			appendStringInfoChar(buf, *p);
	}
}

static void append_sync_metrics(StringInfo buf);
static void append_stream_metrics(StringInfo buf, const CtasSyncMetric *m,
								  int n);

static void
header(StringInfo buf, const char *name, const char *type, const char *help)
{
	appendStringInfo(buf, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * ctas_fed.job_shards() - the rows of the ctas_fed.job_shards view: one row
 * per shard of the recent jobs into a sharded target, oldest first.
 */
Datum
ctas_fed_job_shards(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CtasJobShard *e;
	CtasShardStats *stats;
	int			n;
	int			nstats;
	int			i;

	CtasCheckPreloaded();
	InitMaterializedSRF(fcinfo, 0);
	e = CtasJobShardsSnapshot(&n, &stats, &nstats);
	for (i = 0; i < n; i++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		values[0] = Int64GetDatum(e[i].job_id);
		values[1] = Int32GetDatum(e[i].shard);
		values[2] = Int64GetDatum((int64) pg_atomic_read_u64(&e[i].rows));
		values[3] = Int64GetDatum((int64) pg_atomic_read_u64(&e[i].bytes));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* rows and bytes of committed jobs by catalog and shard (jobshards.c) */
static void
append_shard_metrics(StringInfo buf)
{
	CtasShardStats *st;
	int			nstats;
	int			n;
	int			i;

	(void) CtasJobShardsSnapshot(&n, &st, &nstats);
	header(buf, "ctas_fed_shard_rows_total", "counter",
		   "Rows of committed jobs into a sharded target, by catalog and shard.");
	for (i = 0; i < nstats; i++)
	{
		appendStringInfoString(buf, "ctas_fed_shard_rows_total{catalog=\"");
		append_label(buf, st[i].catalog);
		appendStringInfo(buf, "\",shard=\"%d\"} " UINT64_FORMAT "\n",
						 st[i].shard, st[i].rows);
	}
	header(buf, "ctas_fed_shard_bytes_total", "counter",
		   "Payload bytes of committed jobs into a sharded target, by catalog and shard.");
	for (i = 0; i < nstats; i++)
	{
		appendStringInfoString(buf, "ctas_fed_shard_bytes_total{catalog=\"");
		append_label(buf, st[i].catalog);
		appendStringInfo(buf, "\",shard=\"%d\"} " UINT64_FORMAT "\n",
						 st[i].shard, st[i].bytes);
	}
}

/*
 * CtasMetricsText
 *		The registry in the Prometheus text exposition format.  Palloc'd.
 */
char *
CtasMetricsText(void)
{
	CtasJobsSnapshotData *snap = CtasJobsSnapshot();
	StringInfoData buf;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz oldest = 0;
	int			in_doubt = 0;
	int			i;
	int			s;
	int			b;

	initStringInfo(&buf);

	header(&buf, "ctas_fed_jobs", "gauge",
		   "Jobs in the registry (running ones and the history), by catalog and state.");
	for (i = 0; i < snap->ncatalogs; i++)
	{
		for (s = 0; s < CTAS_JOB_NSTATES; s++)
		{
			int			n = 0;
			int			j;

			for (j = 0; j < snap->njobs; j++)
			{
				if (snap->jobs[j].state == (CtasJobState) s &&
					strcmp(snap->jobs[j].catalog, snap->catalogs[i].catalog) == 0)
					n++;
			}
			appendStringInfoString(&buf, "ctas_fed_jobs{catalog=\"");
			append_label(&buf, snap->catalogs[i].catalog);
			appendStringInfo(&buf, "\",state=\"%s\"} %d\n",
							 CtasJobStateName((CtasJobState) s), n);
		}
	}

	header(&buf, "ctas_fed_jobs_ended_total", "counter",
		   "Jobs that ended, by catalog and final state.");
	for (i = 0; i < snap->ncatalogs; i++)
	{
		for (s = CTAS_JOB_COMMITTED; s <= CTAS_JOB_FAILED; s++)
		{
			appendStringInfoString(&buf, "ctas_fed_jobs_ended_total{catalog=\"");
			append_label(&buf, snap->catalogs[i].catalog);
			appendStringInfo(&buf, "\",state=\"%s\"} " UINT64_FORMAT "\n",
							 CtasJobStateName((CtasJobState) s),
							 snap->catalogs[i].jobs[s]);
		}
	}

	header(&buf, "ctas_fed_rows_total", "counter",
		   "Rows of committed jobs, by catalog.");
	for (i = 0; i < snap->ncatalogs; i++)
	{
		appendStringInfoString(&buf, "ctas_fed_rows_total{catalog=\"");
		append_label(&buf, snap->catalogs[i].catalog);
		appendStringInfo(&buf, "\"} " UINT64_FORMAT "\n", snap->catalogs[i].rows);
	}

	header(&buf, "ctas_fed_bytes_total", "counter",
		   "Payload bytes of committed jobs, by catalog.");
	for (i = 0; i < snap->ncatalogs; i++)
	{
		appendStringInfoString(&buf, "ctas_fed_bytes_total{catalog=\"");
		append_label(&buf, snap->catalogs[i].catalog);
		appendStringInfo(&buf, "\"} " UINT64_FORMAT "\n", snap->catalogs[i].bytes);
	}

	append_shard_metrics(&buf);

	header(&buf, "ctas_fed_job_duration_seconds", "histogram",
		   "Duration of jobs that ended, by catalog.");
	for (i = 0; i < snap->ncatalogs; i++)
	{
		CtasCatalogStats *st = &snap->catalogs[i];

		for (b = 0; b < CTAS_DURATION_BUCKETS; b++)
		{
			appendStringInfoString(&buf, "ctas_fed_job_duration_seconds_bucket{catalog=\"");
			append_label(&buf, st->catalog);
			appendStringInfo(&buf, "\",le=\"%g\"} " UINT64_FORMAT "\n",
							 CtasDurationBuckets[b], st->duration_buckets[b]);
		}
		appendStringInfoString(&buf, "ctas_fed_job_duration_seconds_bucket{catalog=\"");
		append_label(&buf, st->catalog);
		appendStringInfo(&buf, "\",le=\"+Inf\"} " UINT64_FORMAT "\n", st->duration_count);
		appendStringInfoString(&buf, "ctas_fed_job_duration_seconds_sum{catalog=\"");
		append_label(&buf, st->catalog);
		appendStringInfo(&buf, "\"} %.6f\n", st->duration_sum);
		appendStringInfoString(&buf, "ctas_fed_job_duration_seconds_count{catalog=\"");
		append_label(&buf, st->catalog);
		appendStringInfo(&buf, "\"} " UINT64_FORMAT "\n", st->duration_count);
	}

	for (i = 0; i < snap->njobs; i++)
	{
		if (snap->jobs[i].state != CTAS_JOB_IN_DOUBT)
			continue;
		in_doubt++;
		if (oldest == 0 || snap->jobs[i].started_at < oldest)
			oldest = snap->jobs[i].started_at;
	}
	header(&buf, "ctas_fed_in_doubt", "gauge",
		   "Jobs whose remote outcome is not decided yet.");
	appendStringInfo(&buf, "ctas_fed_in_doubt %d\n", in_doubt);
	header(&buf, "ctas_fed_oldest_in_doubt_age_seconds", "gauge",
		   "Age of the oldest job in doubt (0 when there is none).");
	appendStringInfo(&buf, "ctas_fed_oldest_in_doubt_age_seconds %.3f\n",
					 oldest ? (double) (now - oldest) / USECS_PER_SEC : 0.0);
	header(&buf, "ctas_fed_webhook_events_dropped_total", "counter",
		   "Status events dropped because the webhook queue was full.");
	appendStringInfo(&buf, "ctas_fed_webhook_events_dropped_total " UINT64_FORMAT "\n",
					 snap->events_dropped);
	append_sync_metrics(&buf);
	return buf.data;
}

/* one sample of a sync metric, labelled by catalog and target */
static void
sync_sample(StringInfo buf, const char *name, const CtasSyncMetric *m)
{
	appendStringInfo(buf, "%s{catalog=\"", name);
	append_label(buf, m->catalog);
	appendStringInfoString(buf, "\",target=\"");
	append_label(buf, m->target);
	appendStringInfoString(buf, "\"} ");
}

/*
 * append_stream_metrics
 *		Per decoding stream (its slot; the n entries of m are its jobs, in
 *		any order): the WAL its slot holds and the age, at most, of its
 *		oldest change not applied yet, the largest lag_seconds of its jobs.
 */
static void
append_stream_metrics(StringInfo buf, const CtasSyncMetric *m, int n)
{
	int			i;
	int			k;

	header(buf, "ctas_fed_sync_wal_held_bytes", "gauge",
		   "WAL the replication slot of a sync stream holds (the current WAL position minus its restart_lsn).");
	for (i = 0; i < n; i++)
	{
		bool		seen = false;

		for (k = 0; k < i && !seen; k++)
			seen = strcmp(m[k].slot_name, m[i].slot_name) == 0;
		if (seen || m[i].wal_held_bytes < 0)
			continue;
		appendStringInfoString(buf, "ctas_fed_sync_wal_held_bytes{slot=\"");
		append_label(buf, m[i].slot_name);
		appendStringInfo(buf, "\"} %.0f\n", m[i].wal_held_bytes);
	}
	header(buf, "ctas_fed_sync_oldest_unapplied_seconds", "gauge",
		   "Age, at most, of the oldest source change a sync stream has not applied: seconds since it last had applied everything committed.");
	for (i = 0; i < n; i++)
	{
		bool		seen = false;
		double		oldest = m[i].lag_seconds;

		for (k = 0; k < n; k++)
		{
			if (strcmp(m[k].slot_name, m[i].slot_name) != 0)
				continue;
			if (k < i)
				seen = true;
			oldest = Max(oldest, m[k].lag_seconds);
		}
		if (seen || oldest < 0)
			continue;
		appendStringInfoString(buf, "ctas_fed_sync_oldest_unapplied_seconds{slot=\"");
		append_label(buf, m[i].slot_name);
		appendStringInfo(buf, "\"} %.3f\n", oldest);
	}
}

/*
 * append_sync_metrics
 *		The running continuous syncs (sync/worker.c): lag and changes.
 */
static void
append_sync_metrics(StringInfo buf)
{
	CtasSyncMetric *m;
	int			n = CtasSyncMetricsSnapshot(&m);
	int			i;

	header(buf, "ctas_fed_sync_lag_bytes", "gauge",
		   "WAL that the slot of a running sync still holds.");
	for (i = 0; i < n; i++)
	{
		if (m[i].lag_bytes < 0)
			continue;
		sync_sample(buf, "ctas_fed_sync_lag_bytes", &m[i]);
		appendStringInfo(buf, "%.0f\n", m[i].lag_bytes);
	}
	header(buf, "ctas_fed_sync_lag_seconds", "gauge",
		   "Seconds since a streaming sync last had applied everything committed on the source.");
	for (i = 0; i < n; i++)
	{
		if (m[i].lag_seconds < 0)
			continue;
		sync_sample(buf, "ctas_fed_sync_lag_seconds", &m[i]);
		appendStringInfo(buf, "%.3f\n", m[i].lag_seconds);
	}
	append_stream_metrics(buf, m, n);
	header(buf, "ctas_fed_sync_changes_total", "counter",
		   "Source changes a sync worker applied since it started.");
	for (i = 0; i < n; i++)
	{
		sync_sample(buf, "ctas_fed_sync_changes_total", &m[i]);
		appendStringInfo(buf, UINT64_FORMAT "\n", m[i].changes);
	}
	header(buf, "ctas_fed_sync_resyncs_total", "counter",
		   "Resyncs (the remote table copied again from a new snapshot) a sync worker ran since it started.");
	for (i = 0; i < n; i++)
	{
		sync_sample(buf, "ctas_fed_sync_resyncs_total", &m[i]);
		appendStringInfo(buf, UINT64_FORMAT "\n", m[i].resyncs);
	}
	header(buf, "ctas_fed_sync_verify_differences", "gauge",
		   "Keys that the last ctas_fed.verify_sync() of a sync found differing (at most 10).");
	for (i = 0; i < n; i++)
	{
		if (m[i].verify_differences < 0)
			continue;
		sync_sample(buf, "ctas_fed_sync_verify_differences", &m[i]);
		appendStringInfo(buf, INT64_FORMAT "\n", m[i].verify_differences);
	}
	header(buf, "ctas_fed_sync_verified_timestamp_seconds", "gauge",
		   "Unix time of the last ctas_fed.verify_sync() of a sync.");
	for (i = 0; i < n; i++)
	{
		if (m[i].verify_differences < 0)
			continue;
		sync_sample(buf, "ctas_fed_sync_verified_timestamp_seconds", &m[i]);
		appendStringInfo(buf, "%.3f\n", m[i].verified_at);
	}
}

/*
 * ctas_fed.metrics() RETURNS text
 */
Datum
ctas_fed_metrics(PG_FUNCTION_ARGS)
{
	CtasCheckPreloaded();
	PG_RETURN_TEXT_P(cstring_to_text(CtasMetricsText()));
}

static void
append_json_time(StringInfo buf, const char *key, TimestampTz t)
{
	appendStringInfo(buf, ", \"%s\": ", key);
	if (t == 0)
		appendStringInfoString(buf, "null");
	else
		escape_json(buf, timestamptz_to_str(t));
}

/*
 * CtasJobEventJson
 *		The webhook body of one status event.  Palloc'd.
 */
char *
CtasJobEventJson(const CtasJobEvent *ev)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"job_id\": " INT64_FORMAT ", \"catalog\": ",
					 ev->job_id);
	escape_json(&buf, ev->catalog);
	appendStringInfoString(&buf, ", \"target\": ");
	escape_json(&buf, ev->target);
	appendStringInfoString(&buf, ", \"mode\": ");
	escape_json(&buf, ev->mode);
	appendStringInfoString(&buf, ", \"state\": ");
	escape_json(&buf, ev->state_name[0] ? ev->state_name :
				CtasJobStateName(ev->state));
	appendStringInfo(&buf, ", \"rows\": " UINT64_FORMAT ", \"bytes\": " UINT64_FORMAT,
					 ev->rows, ev->bytes);
	appendStringInfoString(&buf, ", \"error\": ");
	if (ev->error[0])
		escape_json(&buf, ev->error);
	else
		appendStringInfoString(&buf, "null");
	append_json_time(&buf, "started_at", ev->started_at);
	append_json_time(&buf, "finished_at", ev->finished_at);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}
