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

CREATE FUNCTION @extschema@.jobs(
    OUT job_id bigint, OUT catalog text, OUT target text, OUT mode text,
    OUT state text, OUT rows bigint, OUT bytes bigint,
    OUT started_at timestamptz, OUT finished_at timestamptz,
    OUT error text, OUT pid integer, OUT local_xid xid8, OUT gid text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ctas_fed_jobs'
LANGUAGE C STRICT VOLATILE;

CREATE VIEW @extschema@.jobs AS
  SELECT * FROM @extschema@.jobs() ORDER BY job_id;

COMMENT ON VIEW @extschema@.jobs
  IS 'federated CTAS, DROP and streaming jobs: running ones and a bounded history';

GRANT SELECT ON @extschema@.jobs TO PUBLIC;

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
    publication    name NOT NULL,
    slot_name      name NOT NULL,
    state          text NOT NULL DEFAULT 'copying'
                   CHECK (state IN ('copying', 'streaming', 'stopped',
                                    'failed')),
    applied_lsn    pg_lsn,
    error          text,
    created_at     timestamptz NOT NULL DEFAULT pg_catalog.now()
);

COMMENT ON TABLE @extschema@.syncs
  IS 'continuous sync jobs: source, target, key, publication, slot, state';

REVOKE ALL ON @extschema@.syncs FROM PUBLIC;

CREATE FUNCTION @extschema@.stop_sync(target text)
RETURNS void
AS 'MODULE_PATHNAME', 'ctas_fed_stop_sync'
LANGUAGE C STRICT VOLATILE;

COMMENT ON FUNCTION @extschema@.stop_sync(text)
  IS 'stop the continuous sync into catalog.schema.table and release its slot';
