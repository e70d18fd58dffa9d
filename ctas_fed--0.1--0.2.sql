/* ctas_fed--0.1--0.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION ctas_fed UPDATE TO '0.2'" to load this file. \quit

-- Version 0.2.  CREATE EXTENSION ctas_fed installs 0.1 and runs this script
-- (there is no separate ctas_fed--0.2.sql), so every object added in 0.2 is
-- defined once, here, whether a database is new or upgraded.

-- Resync of a continuous sync (src/sync/resync.c, docs/sync-verify-resync.md)
CREATE FUNCTION @extschema@.resync(target text)
RETURNS void
AS 'MODULE_PATHNAME', 'ctas_fed_resync'
LANGUAGE C STRICT VOLATILE;

COMMENT ON FUNCTION @extschema@.resync(text)
  IS 'copy the remote table of the continuous sync into catalog.schema.table again from a new snapshot, then stream on';

-- Verify of a continuous sync (src/sync/verify.c, docs/sync-verify-resync.md):
-- one row per check that ctas_fed.verify_sync() asked a sync worker for
CREATE TABLE @extschema@.sync_checks (
    check_id       bigserial PRIMARY KEY,
    sync_id        bigint NOT NULL,        -- ctas_fed.syncs.sync_id
    checked_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
    consistent_lsn pg_lsn NOT NULL,        -- the source point compared
    result         text NOT NULL,          -- 'equal' or 'different'
    source_rows    bigint NOT NULL,        -- rows of the query's result
    duration_ms    bigint NOT NULL,
    differences    jsonb NOT NULL          -- [{"key", "source", "remote"}], at most 10
);

COMMENT ON TABLE @extschema@.sync_checks
  IS 'results of ctas_fed.verify_sync(): remote table against the query at one source point';

CREATE INDEX sync_checks_sync_id ON @extschema@.sync_checks (sync_id);

REVOKE ALL ON @extschema@.sync_checks FROM PUBLIC;

CREATE FUNCTION @extschema@.verify_sync(target text,
    OUT result text, OUT key text, OUT source_row text, OUT remote_row text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ctas_fed_verify_sync'
LANGUAGE C STRICT VOLATILE;

COMMENT ON FUNCTION @extschema@.verify_sync(text)
  IS 'compare the remote table of the continuous sync into catalog.schema.table with its query at one source point: equal, or the first differing keys with both versions';

-- Schema changes of synced sources in WAL order (docs/sync-schema-changes.md):
-- the policy of each sync, whether its query takes the rows whole, and the
-- event trigger that writes a transactional logical message (prefix
-- 'ctas_fed') in the transaction of each DDL on a synced source table, so
-- that its worker meets the DDL between the changes before and after it.
-- ENABLE ALWAYS: it fires under session_replication_role = replica too.
ALTER TABLE @extschema@.syncs
  ADD COLUMN schema_changes text NOT NULL DEFAULT 'follow'
      CHECK (schema_changes IN ('follow', 'fail')),
  ADD COLUMN whole_row boolean NOT NULL DEFAULT false;

CREATE FUNCTION @extschema@.schema_change_trigger()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'ctas_fed_schema_change_trigger'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.schema_change_trigger()
  IS 'writes a logical message describing each DDL on a synced source table';

CREATE EVENT TRIGGER ctas_fed_schema_changes ON ddl_command_end
  EXECUTE FUNCTION @extschema@.schema_change_trigger();

ALTER EVENT TRIGGER ctas_fed_schema_changes ENABLE ALWAYS;

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
