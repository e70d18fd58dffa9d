/* ctas_fed--0.1.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION ctas_fed" to load this file. \quit

CREATE FUNCTION @extschema@.ctas_fed_handler()
RETURNS fdw_handler
AS 'MODULE_PATHNAME', 'ctas_fed_handler'
LANGUAGE C STRICT;

CREATE FUNCTION @extschema@.ctas_fed_validator(text[], oid)
RETURNS void
AS 'MODULE_PATHNAME', 'ctas_fed_validator'
LANGUAGE C STRICT;

-- Creating the wrapper runs the validator, which fails with a hint when the
-- library was not loaded through shared_preload_libraries.
CREATE FOREIGN DATA WRAPPER ctas_fed
  HANDLER @extschema@.ctas_fed_handler
  VALIDATOR @extschema@.ctas_fed_validator;

COMMENT ON FOREIGN DATA WRAPPER ctas_fed
  IS 'external catalogs written by CREATE TABLE catalog.schema.table AS';

CREATE FUNCTION @extschema@.catalog_descriptor(name text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'ctas_fed_catalog_descriptor'
LANGUAGE C STRICT STABLE;

COMMENT ON FUNCTION @extschema@.catalog_descriptor(text)
  IS 'name, type and options of a catalog as JSON, without secrets';

CREATE FUNCTION @extschema@.register_catalog(name text, type text,
                                             options jsonb DEFAULT '{}')
RETURNS oid
AS 'MODULE_PATHNAME', 'ctas_fed_register_catalog'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION @extschema@.register_catalog(text, text, jsonb)
  IS 'create the foreign server of a catalog from a descriptor';

CREATE VIEW @extschema@.catalogs AS
  SELECT s.srvname AS name,
         d.descriptor OPERATOR(pg_catalog.->>) 'type' AS type,
         pg_catalog.pg_get_userbyid(s.srvowner) AS owner,
         d.descriptor OPERATOR(pg_catalog.->) 'options' AS options
    FROM pg_catalog.pg_foreign_server s
    JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid = s.srvfdw
   CROSS JOIN LATERAL
         @extschema@.catalog_descriptor(s.srvname::pg_catalog.text)
           AS d(descriptor)
   WHERE w.fdwname = 'ctas_fed';

COMMENT ON VIEW @extschema@.catalogs
  IS 'catalogs (ctas_fed servers) with their options, without secrets';

GRANT USAGE ON SCHEMA @extschema@ TO PUBLIC;
GRANT SELECT ON @extschema@.catalogs TO PUBLIC;

CREATE FUNCTION @extschema@.remote_tables(catalog name, schema text,
                                          OUT name text, OUT kind text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ctas_fed_remote_tables'
LANGUAGE C STRICT VOLATILE;

COMMENT ON FUNCTION @extschema@.remote_tables(name, text)
  IS 'tables of a schema (ClickHouse: database) of a catalog';

CREATE FUNCTION @extschema@.remote_columns(catalog name, schema text,
                                           "table" text,
                                           OUT name text, OUT type text,
                                           OUT nullable boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ctas_fed_remote_columns'
LANGUAGE C STRICT VOLATILE;

COMMENT ON FUNCTION @extschema@.remote_columns(name, text, text)
  IS 'columns of a table of a catalog, with their remote types';

CREATE FUNCTION @extschema@.resolve_in_doubt(catalog name DEFAULT NULL,
                                             OUT catalog name,
                                             OUT object text,
                                             OUT action text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ctas_fed_resolve_in_doubt'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

COMMENT ON FUNCTION @extschema@.resolve_in_doubt(name)
  IS 'commit or roll back what this cluster left in doubt in catalogs';

REVOKE ALL ON FUNCTION @extschema@.resolve_in_doubt(name) FROM PUBLIC;

CREATE FUNCTION @extschema@.create_tables_as(catalog name,
                                             remote_schema text,
                                             tables regclass[] DEFAULT NULL,
                                             source_schema name DEFAULT NULL,
                                             options jsonb DEFAULT '{}')
RETURNS TABLE (source regclass, target text, rows bigint)
AS 'MODULE_PATHNAME', 'ctas_fed_create_tables_as'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

COMMENT ON FUNCTION @extschema@.create_tables_as(name, text, regclass[], name, jsonb)
  IS 'copy many tables into a catalog in one call, atomically with the transaction';

CREATE FUNCTION @extschema@.jobs(
    OUT job_id bigint, OUT catalog text, OUT target text, OUT mode text,
    OUT state text, OUT rows bigint, OUT bytes bigint,
    OUT started_at timestamptz, OUT finished_at timestamptz,
    OUT error text, OUT pid integer, OUT local_xid xid8, OUT gid text,
    OUT group_id bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ctas_fed_jobs'
LANGUAGE C STRICT VOLATILE;


CREATE FUNCTION @extschema@.metrics()
RETURNS text
AS 'MODULE_PATHNAME', 'ctas_fed_metrics'
LANGUAGE C STRICT VOLATILE;

COMMENT ON FUNCTION @extschema@.metrics()
  IS 'the job registry in the Prometheus text exposition format';

-- Continuous sync jobs (CREATE TABLE ... WITH (sync = 'continuous')): one
-- row per job, written by the statement's transaction and by the sync
-- worker; everything a worker needs to rebuild the job after a restart.
CREATE TABLE @extschema@.syncs (
    sync_id        bigserial PRIMARY KEY,
    job_id         bigint NOT NULL,        -- of the CTAS in ctas_fed.jobs
    owner          oid NOT NULL,           -- local user whose job it is
    server         oid NOT NULL,           -- the catalog
    remote_schema  text NOT NULL,
    remote_table   text NOT NULL,
    source         oid NOT NULL,           -- the one source table
    query          text NOT NULL,          -- the query, for people
    query_tree     text NOT NULL,          -- the query, for the worker
    key_columns    text[] NOT NULL,        -- remote key columns
    source_key     int2[] NOT NULL,        -- their source columns
    source_attnums int2[] NOT NULL,        -- source columns the query reads
    source_columns text[] NOT NULL,        -- their names and types when
    source_types   oid[] NOT NULL,         -- the job was made
    remote_columns text[] NOT NULL,        -- remote column names, in order
    stream_id      bigint NOT NULL,        -- the decoding stream: the
                                           -- sync_id of its first job
    job_group      bigint,                 -- create_tables_as call, or NULL
    publication    name NOT NULL,          -- of the stream
    slot_name      name NOT NULL,          -- of the stream
    state          text NOT NULL DEFAULT 'copying'
                   CHECK (state IN ('copying', 'streaming', 'stopped',
                                    'failed')),
    applied_lsn    pg_lsn,
    error          text,
    created_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
    finished_at    timestamptz             -- stopped or failed
);

COMMENT ON TABLE @extschema@.syncs
  IS 'continuous sync jobs: source, target, key, publication, slot, state';

CREATE INDEX syncs_stream_id ON @extschema@.syncs (stream_id);

REVOKE ALL ON @extschema@.syncs FROM PUBLIC;

CREATE FUNCTION @extschema@.stop_sync(target text)
RETURNS void
AS 'MODULE_PATHNAME', 'ctas_fed_stop_sync'
LANGUAGE C STRICT VOLATILE;

COMMENT ON FUNCTION @extschema@.stop_sync(text)
  IS 'stop the continuous sync into catalog.schema.table and release its slot';

CREATE FUNCTION @extschema@.sync_status(OUT sync_id bigint, OUT pid integer,
                                        OUT rows bigint, OUT changes bigint,
                                        OUT caught_up_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ctas_fed_sync_status'
LANGUAGE C STRICT VOLATILE;

COMMENT ON FUNCTION @extschema@.sync_status()
  IS 'running sync workers of this database and their counters';

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
    OUT lag_bytes bigint, OUT lag_seconds double precision, OUT owner oid)
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
         s.owner
    FROM @extschema@.syncs s
    LEFT JOIN pg_foreign_server srv ON srv.oid = s.server
    LEFT JOIN pg_replication_slots r ON r.slot_name = s.slot_name
    LEFT JOIN @extschema@.sync_status() st ON st.sync_id = s.sync_id
$$;

CREATE VIEW @extschema@.jobs AS
  SELECT j.*, NULL::bigint AS lag_bytes, NULL::double precision AS lag_seconds
    FROM @extschema@.jobs() j
   WHERE NOT EXISTS (SELECT FROM @extschema@.syncs s WHERE s.job_id = j.job_id)
  UNION ALL
  SELECT y.job_id, y.catalog, y.target, y.mode, y.state, y.rows, y.bytes,
         y.started_at, y.finished_at,
         CASE WHEN y.error IS NULL
                OR pg_catalog.pg_has_role(y.owner, 'USAGE')
                OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE')
              THEN y.error ELSE '<insufficient privilege>' END,
         y.pid, y.local_xid, y.gid, NULL::bigint, y.lag_bytes, y.lag_seconds
    FROM @extschema@.sync_jobs() y
  ORDER BY job_id;

COMMENT ON VIEW @extschema@.jobs
  IS 'federated CTAS, DROP, streaming and sync jobs: running ones and a bounded history';

GRANT SELECT ON @extschema@.jobs TO PUBLIC;
