/* ctas_fed--0.1--0.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION ctas_fed UPDATE TO '0.2'" to load this file. \quit

-- Version 0.2.  CREATE EXTENSION ctas_fed installs 0.1 and runs this script
-- (there is no separate ctas_fed--0.2.sql), so every object added in 0.2 is
-- defined once, here, whether a database is new or upgraded.

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
