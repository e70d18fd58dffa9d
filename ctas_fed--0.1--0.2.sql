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
