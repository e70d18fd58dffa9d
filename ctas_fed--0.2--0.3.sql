/* ctas_fed--0.2--0.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION ctas_fed UPDATE TO '0.3'" to load this file. \quit

-- Version 0.3.  CREATE EXTENSION ctas_fed installs 0.1 and runs the update
-- scripts up to this one, so every object added in 0.3 is defined once,
-- here, whether a database is new or upgraded.

-- One decoding stream per database (src/sync/statement.c, docs/sync.md,
-- "Streams"): a new sync joins the running stream of its name, NULL being
-- the database's default stream shared by every sync that names none.  The
-- syncs made before 0.3 have a stream each, all of them default streams.
ALTER TABLE @extschema@.syncs
  ADD COLUMN stream_name text
      CHECK (stream_name ~ '^[a-z_][a-z0-9_]{0,31}$'
             AND stream_name <> 'default');

COMMENT ON COLUMN @extschema@.syncs.stream_name
  IS 'the stream option of the sync: NULL for the default stream of the database';

-- Schema changes that whole-row syncs followed on their remote tables, and
-- those at which a sync failed (src/sync/ddl.c,
-- docs/sync-schema-changes.md): one row per change, in the transaction
-- that stores the sync's new columns or its failure; the last 100 per sync
-- are kept
CREATE TABLE @extschema@.sync_schema_changes (
    change_id  bigserial PRIMARY KEY,
    sync_id    bigint NOT NULL,              -- ctas_fed.syncs.sync_id
    lsn        pg_lsn NOT NULL,              -- commit lsn of the DDL's transaction
    change     text NOT NULL,                -- e.g. ADD COLUMN note text, or
                                             -- why it could not be followed
    followed   boolean NOT NULL,             -- false: the sync failed at it
    recorded_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);

COMMENT ON TABLE @extschema@.sync_schema_changes
  IS 'schema changes of sources that continuous syncs followed on their remote tables';

CREATE INDEX sync_schema_changes_sync_id
  ON @extschema@.sync_schema_changes (sync_id);

REVOKE ALL ON @extschema@.sync_schema_changes FROM PUBLIC;

-- Rows per shard of the jobs into a ClickHouse cluster (src/jobshards.c,
-- docs/clickhouse-clusters.md): one row per shard of the recent jobs,
-- running ones included; saved with the job registry
CREATE FUNCTION @extschema@.job_shards(
    OUT job_id bigint, OUT shard integer, OUT rows bigint, OUT bytes bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ctas_fed_job_shards'
LANGUAGE C STRICT VOLATILE;

CREATE VIEW @extschema@.job_shards AS
  SELECT s.job_id, j.catalog, j.target, j.state, s.shard, s.rows, s.bytes
    FROM @extschema@.job_shards() s
    JOIN @extschema@.jobs() j ON j.job_id = s.job_id
  ORDER BY s.job_id, s.shard;

COMMENT ON VIEW @extschema@.job_shards
  IS 'rows and bytes per shard of the recent jobs into a ClickHouse cluster';

GRANT SELECT ON @extschema@.job_shards TO PUBLIC;

-- DROP TABLE of a partition of a synced partitioned table: the message is
-- written before the catalog forgets whose partition it was
-- (src/sync/partition.c)
CREATE FUNCTION @extschema@.partition_drop_trigger()
RETURNS event_trigger LANGUAGE C
AS 'MODULE_PATHNAME', 'ctas_fed_partition_drop_trigger';

COMMENT ON FUNCTION @extschema@.partition_drop_trigger()
  IS 'writes a logical message with the keys of a partition of a synced partitioned table that DROP TABLE drops';

CREATE EVENT TRIGGER ctas_fed_partition_drops ON ddl_command_start
  WHEN TAG IN ('DROP TABLE', 'DROP FOREIGN TABLE')
  EXECUTE FUNCTION @extschema@.partition_drop_trigger();

ALTER EVENT TRIGGER ctas_fed_partition_drops ENABLE ALWAYS;

-- WAL held and lag per stream (issue 22, item 4; docs/sync.md "Lag and WAL
-- held"): the jobs view gets wal_held_bytes (the WAL the stream's slot
-- holds: pg_current_wal_lsn() minus its restart_lsn) and
-- oldest_unapplied_seconds (the age, at most, of the oldest change of the
-- stream not applied yet: seconds since the stream last had applied
-- everything committed, the largest of its jobs').
DROP VIEW @extschema@.jobs;
DROP FUNCTION @extschema@.sync_jobs();

-- The sync jobs as rows of ctas_fed.jobs; SECURITY DEFINER because
-- ctas_fed.syncs is not readable by everybody.  It returns no query text,
-- and the error of a job only to a session whose user may act as the job's
-- owner or reads all statistics (session_user: inside SECURITY DEFINER
-- current_user is the extension's owner); the view masks it again for the
-- current role, as jobs() does.
CREATE FUNCTION @extschema@.sync_jobs(
    OUT job_id bigint, OUT catalog text, OUT target text, OUT mode text,
    OUT state text, OUT rows bigint, OUT bytes bigint,
    OUT started_at timestamptz, OUT finished_at timestamptz,
    OUT error text, OUT pid integer, OUT local_xid xid8, OUT gid text,
    OUT lag_bytes bigint, OUT lag_seconds double precision,
    OUT wal_held_bytes bigint, OUT oldest_unapplied_seconds double precision,
    OUT owner oid)
RETURNS SETOF record
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT s.job_id, srv.srvname::text,
         format('%I.%I', s.remote_schema, s.remote_table),
         'sync', s.state, st.rows, NULL::bigint, s.created_at,
         s.finished_at,
         CASE WHEN s.error IS NULL
                OR pg_has_role(session_user, s.owner, 'USAGE')
                OR pg_has_role(session_user, 'pg_read_all_stats', 'USAGE')
              THEN s.error ELSE '<insufficient privilege>' END,
         st.pid, NULL::xid8, s.slot_name::text,
         CASE WHEN s.state IN ('copying', 'streaming') THEN
           pg_wal_lsn_diff(pg_current_wal_lsn(), r.confirmed_flush_lsn)::bigint
         END,
         CASE WHEN s.state = 'streaming' THEN
           extract(epoch FROM clock_timestamp() - st.caught_up_at)::float8
         END,
         CASE WHEN s.state IN ('copying', 'streaming') THEN
           pg_wal_lsn_diff(pg_current_wal_lsn(), r.restart_lsn)::bigint
         END,
         CASE WHEN s.state = 'streaming' THEN
           max(extract(epoch FROM clock_timestamp() - st.caught_up_at)::float8)
             FILTER (WHERE s.state = 'streaming')
             OVER (PARTITION BY s.slot_name)
         END,
         s.owner
    FROM @extschema@.syncs s
    LEFT JOIN pg_foreign_server srv ON srv.oid = s.server
    LEFT JOIN pg_replication_slots r ON r.slot_name = s.slot_name
    LEFT JOIN @extschema@.sync_status() st ON st.sync_id = s.sync_id
$$;

CREATE VIEW @extschema@.jobs AS
  SELECT j.*, NULL::bigint AS lag_bytes, NULL::double precision AS lag_seconds,
         NULL::bigint AS wal_held_bytes,
         NULL::double precision AS oldest_unapplied_seconds
    FROM @extschema@.jobs() j
   WHERE NOT EXISTS (SELECT FROM @extschema@.syncs s WHERE s.job_id = j.job_id)
  UNION ALL
  SELECT y.job_id, y.catalog, y.target, y.mode, y.state, y.rows, y.bytes,
         y.started_at, y.finished_at,
         CASE WHEN y.error IS NULL
                OR pg_catalog.pg_has_role(y.owner, 'USAGE')
                OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE')
              THEN y.error ELSE '<insufficient privilege>' END,
         y.pid, y.local_xid, y.gid, NULL::bigint, y.lag_bytes, y.lag_seconds,
         y.wal_held_bytes, y.oldest_unapplied_seconds
    FROM @extschema@.sync_jobs() y
  ORDER BY job_id;

COMMENT ON VIEW @extschema@.jobs
  IS 'federated CTAS, DROP, streaming and sync jobs: running ones and a bounded history';

GRANT SELECT ON @extschema@.jobs TO PUBLIC;
