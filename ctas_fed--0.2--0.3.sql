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
