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
