--
-- CREATE TABLE AS into a PostgreSQL catalog (loopback: another database of
-- this instance).  The remote side is checked through dblink.
--
CREATE EXTENSION IF NOT EXISTS ctas_fed;
CREATE EXTENSION dblink;
CREATE DATABASE ctas_remote;
CREATE DATABASE ctas_remote2;
SELECT current_setting('unix_socket_directories') AS sockdir,
       current_setting('port') AS port \gset
-- dblink sessions that render values like the local digest function does
-- (pg_regress's PGTZ and PGDATESTYLE reach libpq through the environment)
SELECT dblink_connect('remote', format('host=%s port=%s dbname=ctas_remote', :'sockdir', :'port'));
SELECT dblink_connect('remote2', format('host=%s port=%s dbname=ctas_remote2', :'sockdir', :'port'));
SELECT dblink_exec(c, $$SET timezone = 'UTC'; SET datestyle = 'ISO';
  SET intervalstyle = 'postgres'; SET extra_float_digits = 3$$)
  FROM unnest(ARRAY['remote', 'remote2']) c;
\set remote remote
\set remote2 remote2
CREATE SERVER loop FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host :'sockdir', port :'port', dbname 'ctas_remote');
CREATE USER MAPPING FOR CURRENT_USER SERVER loop;
CREATE SERVER loop2 FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host :'sockdir', port :'port', dbname 'ctas_remote2');
CREATE USER MAPPING FOR CURRENT_USER SERVER loop2;

-- what the remote side holds
CREATE FUNCTION remote_tables(conn text) RETURNS SETOF text LANGUAGE sql AS $$
  SELECT t FROM dblink(conn, $q$SELECT relname::text FROM pg_class
     WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'
     ORDER BY 1$q$) AS r(t text) $$;
CREATE FUNCTION remote_prepared(conn text) RETURNS bigint LANGUAGE sql AS $$
  SELECT n FROM dblink(conn, 'SELECT count(*) FROM pg_prepared_xacts') AS r(n bigint) $$;
CREATE FUNCTION remote_digest(conn text, tbl text) RETURNS text LANGUAGE sql AS $$
  SELECT d FROM dblink(conn, format(
    'SELECT count(*) || '' rows, '' || coalesce(md5(string_agg(t::text, ''|'' ORDER BY t::text)), ''-'') FROM %s t', tbl))
    AS r(d text) $$;
CREATE FUNCTION local_digest(tbl regclass) RETURNS text LANGUAGE plpgsql
  SET timezone = 'UTC' SET datestyle = 'ISO' SET intervalstyle = 'postgres'
  SET extra_float_digits = 3 AS $$
DECLARE d text;
BEGIN
  EXECUTE format('SELECT count(*) || '' rows, '' || coalesce(md5(string_agg(t::text, ''|'' ORDER BY t::text)), ''-'') FROM %s t', tbl) INTO d;
  RETURN d;
END $$;

CREATE TABLE src AS
  SELECT g AS id, 'row ' || g AS label, g * 1.25 AS amount,
         timestamptz '2024-01-01 00:00:00+00' + g * interval '1 hour' AS ts,
         (g % 3 = 0) AS flag
    FROM generate_series(1, 1000) g;

-- CREATE TABLE AS: rows and content arrive, command tag is SELECT n
CREATE TABLE loop.public.t_basic AS SELECT * FROM src;
SELECT remote_digest(:'remote', 't_basic') = local_digest('src') AS same_rows;
SELECT * FROM ctas_fed.remote_columns('loop', 'public', 't_basic');

-- column names, SELECT INTO, AS EXECUTE, WITH NO DATA
CREATE TABLE loop.public.t_names (a, b) AS SELECT id, label FROM src WHERE id <= 3;
SELECT * FROM ctas_fed.remote_columns('loop', 'public', 't_names');
SELECT id, label INTO loop.public.t_into FROM src WHERE id <= 10;
SELECT remote_digest(:'remote', 't_into');
PREPARE q(int) AS SELECT id, amount FROM src WHERE id <= $1;
CREATE TABLE loop.public.t_exec AS EXECUTE q(5);
SELECT remote_digest(:'remote', 't_exec');
CREATE TABLE loop.public.t_nodata AS SELECT * FROM src WITH NO DATA;
SELECT remote_digest(:'remote', 't_nodata');
DEALLOCATE q;

-- IF NOT EXISTS skips; an existing table is an error before any data moves
CREATE TABLE IF NOT EXISTS loop.public.t_into AS SELECT 1 AS x;
CREATE TABLE loop.public.t_into AS SELECT 1 AS x;
SELECT remote_digest(:'remote', 't_into');

-- if_exists: replace and append happen in the remote transaction
CREATE TABLE loop.public.t_into WITH (if_exists = 'replace') AS
  SELECT id, label FROM src WHERE id <= 2;
SELECT remote_digest(:'remote', 't_into');
CREATE TABLE loop.public.t_into WITH (if_exists = 'append') AS
  SELECT id, label FROM src WHERE id BETWEEN 3 AND 5;
SELECT remote_digest(:'remote', 't_into');
BEGIN;
CREATE TABLE loop.public.t_into WITH (if_exists = 'replace') AS SELECT 42 AS answer;
ROLLBACK;
SELECT remote_digest(:'remote', 't_into');

-- primary_key and column_types
CREATE TABLE loop.public.t_key
  WITH (primary_key = 'id', column_types = 'amount numeric(12,2), label varchar(20)')
  AS SELECT id, label, amount FROM src WHERE id <= 4;
SELECT * FROM ctas_fed.remote_columns('loop', 'public', 't_key');
SELECT * FROM dblink(:'remote', $$SELECT conname, contype FROM pg_constraint
  WHERE conrelid = 'public.t_key'::regclass$$) AS c(conname name, contype "char");
-- if_exists 'append' that finds no table creates it, with its key; an
-- append into an existing table keeps the table's own key (id, not label)
CREATE TABLE loop.public.t_key_append WITH (if_exists = 'append', primary_key = 'id')
  AS SELECT id, label FROM src WHERE id <= 2;
CREATE TABLE loop.public.t_key_append WITH (if_exists = 'append', primary_key = 'label')
  AS SELECT id, label FROM src WHERE id = 3;
SELECT * FROM dblink(:'remote', $$SELECT conname, contype, pg_get_constraintdef(oid)
  FROM pg_constraint WHERE conrelid = 'public.t_key_append'::regclass$$)
  AS c(conname name, contype "char", def text);
SELECT remote_digest(:'remote', 't_key_append');

-- ROLLBACK leaves nothing behind: no table, no prepared transaction
BEGIN;
CREATE TABLE loop.public.t_rollback AS SELECT * FROM src;
ROLLBACK;
SELECT 't_rollback' IN (SELECT remote_tables(:'remote')) AS exists,
       remote_prepared(:'remote') AS prepared;

-- an error at row 500 of the query leaves nothing behind
CREATE TABLE loop.public.t_error AS SELECT id, 1 / (id - 500) AS x FROM src;
SELECT 't_error' IN (SELECT remote_tables(:'remote')) AS exists,
       remote_prepared(:'remote') AS prepared;

-- savepoints map to remote savepoints
BEGIN;
CREATE TABLE loop.public.t_sp1 AS SELECT 1 AS a;
SAVEPOINT s;
CREATE TABLE loop.public.t_sp2 AS SELECT 2 AS a;
ROLLBACK TO SAVEPOINT s;
CREATE TABLE loop.public.t_sp3 AS SELECT 3 AS a;
SAVEPOINT s2;
CREATE TABLE loop.public.t_sp4 AS SELECT id, 1 / (id - 5) AS x FROM src;
ROLLBACK TO SAVEPOINT s2;
RELEASE SAVEPOINT s;
COMMIT;
SELECT t FROM remote_tables(:'remote') t WHERE t LIKE 't_sp%';
-- an error trapped by PL/pgSQL rolls back its subtransaction only
DO $$
BEGIN
  BEGIN
    CREATE TABLE loop.public.t_plpgsql_bad AS SELECT id, 1 / (id - 7) FROM src;
  EXCEPTION WHEN division_by_zero THEN
    RAISE NOTICE 'caught %', SQLERRM;
  END;
  CREATE TABLE loop.public.t_plpgsql_good AS SELECT 1 AS ok;
END $$;
SELECT t FROM remote_tables(:'remote') t WHERE t LIKE 't_plpgsql%';

-- several catalogs in one transaction: all or nothing
BEGIN;
CREATE TABLE loop.public.t_multi AS SELECT 1 AS a;
CREATE TABLE loop2.public.t_multi AS SELECT 2 AS a;
COMMIT;
SELECT remote_digest(:'remote', 't_multi'), remote_digest(:'remote2', 't_multi');
BEGIN;
CREATE TABLE loop.public.t_multi_fail AS SELECT 1 AS a;
CREATE TABLE loop2.public.t_multi AS SELECT 3 AS a;  -- exists: fails
COMMIT;
SELECT 't_multi_fail' IN (SELECT remote_tables(:'remote')) AS exists,
       remote_digest(:'remote2', 't_multi'),
       remote_prepared(:'remote') + remote_prepared(:'remote2') AS prepared;

-- a local PREPARE TRANSACTION after federated work is refused
BEGIN;
CREATE TABLE loop.public.t_2pc AS SELECT 1 AS a;
PREPARE TRANSACTION 'local_gid';
SELECT 't_2pc' IN (SELECT remote_tables(:'remote')) AS exists,
       remote_prepared(:'remote') AS prepared;

-- DROP TABLE is transactional too
BEGIN;
DROP TABLE loop.public.t_names;
ROLLBACK;
SELECT 't_names' IN (SELECT remote_tables(:'remote')) AS exists;
DROP TABLE loop.public.t_names, loop.public.t_nodata;
SELECT t FROM remote_tables(:'remote') t WHERE t IN ('t_names', 't_nodata');
DROP TABLE loop.public.t_names;
DROP TABLE IF EXISTS loop.public.t_names;
DROP TABLE loop.public.t_basic, src;

-- streaming mode: the table and every committed batch stay on failure
CREATE TABLE loop.public.t_stream WITH (atomic = false, commit_every = 100) AS
  SELECT id, 1 / (id - 250) AS x FROM (SELECT id FROM src ORDER BY id OFFSET 0) s;
SELECT remote_digest(:'remote', 't_stream') LIKE '200 rows%' AS kept_two_batches;
CREATE TABLE loop.public.t_stream2 WITH (atomic = false, commit_every = 300) AS
  SELECT * FROM src;
SELECT remote_digest(:'remote', 't_stream2') = local_digest('src') AS same_rows;

-- EXPLAIN shows the target and remote DDL, and does nothing remotely
EXPLAIN (COSTS OFF) CREATE TABLE loop.public.t_explain WITH (primary_key = 'id')
  AS SELECT id, label FROM src WHERE id < 10;
SELECT 't_explain' IN (SELECT remote_tables(:'remote')) AS exists;
EXPLAIN (COSTS OFF, FORMAT JSON) CREATE TABLE loop.public.t_explain AS SELECT id FROM src;
-- EXPLAIN ANALYZE runs it, atomically
BEGIN;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  CREATE TABLE loop.public.t_explain AS SELECT id, label FROM src WHERE id < 10;
ROLLBACK;
SELECT 't_explain' IN (SELECT remote_tables(:'remote')) AS exists;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  CREATE TABLE loop.public.t_explain AS SELECT id, label FROM src WHERE id < 10;
SELECT remote_digest(:'remote', 't_explain');

-- EXPLAIN from a cached plan (PL/pgSQL) over a view, twice
CREATE VIEW src_view AS SELECT id, label FROM src WHERE id <= 3;
CREATE FUNCTION explain_twice() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR i IN 1..2 LOOP
    FOR r IN EXPLAIN (COSTS OFF) CREATE TABLE loop2.public.t_ex AS SELECT * FROM src_view LOOP
      RETURN NEXT r."QUERY PLAN";
    END LOOP;
  END LOOP;
END $$;
SELECT * FROM explain_twice();
DROP FUNCTION explain_twice();
DROP VIEW src_view;

-- the wire format used is visible
SET client_min_messages = debug1;
CREATE TABLE loop.public.t_fmt AS SELECT 1 AS a;
RESET client_min_messages;

-- statements that keep PostgreSQL's own meaning
CREATE TABLE contrib_regression.public.t_local AS SELECT 1 AS a;
SELECT * FROM t_local;
DROP TABLE contrib_regression.public.t_local;
CREATE TABLE nosuchcatalog.public.t AS SELECT 1 AS a;
DROP TABLE nosuchcatalog.public.t;

-- refused before any remote work
CREATE TABLE loop.public.t_bad WITH (fillfactor = 70) AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (if_exists = 'overwrite') AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (commit_every = 0) AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (atomic = 'maybe') AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (engine = 'MergeTree') AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (sync = 'continuous', parallel = 2) AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (primary_key = 'nosuch') AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (column_types = 'nosuch int') AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (column_types = 'a') AS SELECT 1 AS a;
CREATE TABLE IF NOT EXISTS loop.public.t_bad WITH (if_exists = 'append') AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad (a, b) AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad (a, a) AS SELECT 1, 2;
CREATE TEMP TABLE loop.public.t_bad AS SELECT 1 AS a;
CREATE UNLOGGED TABLE loop.public.t_bad AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad ON COMMIT DROP AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad TABLESPACE pg_default AS SELECT 1 AS a;
CREATE MATERIALIZED VIEW loop.public.t_bad AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad AS SELECT;
CREATE TABLE t_fmt_local (a int);
PREPARE ins AS INSERT INTO t_fmt_local VALUES (1);
CREATE TABLE loop.public.t_bad AS EXECUTE ins;
SELECT count(*) AS not_inserted FROM t_fmt_local;
-- column_types is one type name per column, never more SQL
CREATE TABLE loop.public.t_bad
  WITH (column_types = 'a int); DROP TABLE public.t_into; CREATE TABLE public.t_x (z int')
  AS SELECT 1 AS a;
SELECT 't_into' IN (SELECT remote_tables(:'remote')) AS t_into_still_there;
-- the remote type is rebuilt from the parse of column_types, never copied
EXPLAIN (COSTS OFF) CREATE TABLE loop.public.t_types
  WITH (column_types = 'a character varying(10), b timestamp(3) with time zone,
    c "numeric"(18, 2)[], d pg_catalog.int8, e interval second(2), f bit,
    g pg_catalog.varchar(''5''''); x'')')
  AS SELECT 'x' AS a, now() AS b, 1.0 AS c, 1 AS d, interval '1 s' AS e, B'1' AS f,
    'y' AS g;
-- comments, COLLATE, DEFAULT, constraints: not a type
CREATE TABLE loop.public.t_bad WITH (column_types = 'a int -- trailing') AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (column_types = 'a int /* x */') AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (column_types = 'a text COLLATE "C"') AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (column_types = 'a int DEFAULT 1') AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (column_types = 'a int NOT NULL') AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (column_types = 'a setof int') AS SELECT 1 AS a;
-- no control character in a remote name; _ctas_fed_ names are reserved
CREATE TABLE loop.public.t_bad AS SELECT 1 AS "a
b";
CREATE TABLE loop.public."t_bad	x" AS SELECT 1 AS a;
CREATE TABLE loop.public._ctas_fed_stage_1_2_3 AS SELECT 1 AS a;
DROP TABLE loop.public._CTAS_FED_old_1;
-- a streaming load cannot replace a table
CREATE TABLE loop.public.t_into WITH (atomic = false, if_exists = 'replace')
  AS SELECT 1 AS a;
SELECT 't_into' IN (SELECT remote_tables(:'remote')) AS t_into_still_there;
-- money depends on lc_monetary on each side: refused
CREATE TABLE loop.public.t_bad AS SELECT 12.34::money AS m;
CREATE TABLE loop.public.t_bad AS SELECT 12.34::money::numeric AS m;
DROP TABLE loop.public.t_bad;
DROP TABLE t_fmt_local;
SELECT 't_bad' IN (SELECT remote_tables(:'remote')) AS exists;

-- remote errors keep their SQLSTATE and name the remote command
\set VERBOSITY default
CREATE TABLE loop.nosuchschema.t_bad AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (column_types = 'a nosuchtype') AS SELECT 1 AS a;
CREATE TABLE loop.public.t_bad WITH (column_types = 'a int') AS SELECT 'x'::text AS a;
\set VERBOSITY terse
SELECT 't_bad' IN (SELECT remote_tables(:'remote')) AS exists,
       remote_prepared(:'remote') AS prepared;

-- connection cache: ALTER SERVER takes effect at the next statement
ALTER SERVER loop2 OPTIONS (SET dbname 'ctas_remote');
CREATE TABLE loop2.public.t_moved AS SELECT 1 AS a;
SELECT 't_moved' IN (SELECT remote_tables(:'remote')) AS moved;
ALTER SERVER loop2 OPTIONS (SET dbname 'ctas_remote2');

-- an unreachable catalog
CREATE SERVER nowhere FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '1', connect_timeout '2');
CREATE USER MAPPING FOR CURRENT_USER SERVER nowhere OPTIONS (user 'u', password 'pw_not_shown');
\set VERBOSITY default
CREATE TABLE nowhere.public.t AS SELECT 1 AS a;

-- privileges: USAGE, a user mapping, and a password that is really used
CREATE ROLE ctas_user LOGIN;
GRANT CREATE ON SCHEMA public TO ctas_user;
SET ROLE ctas_user;
CREATE TABLE loop.public.t_priv AS SELECT 1 AS a;
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER loop TO ctas_user;
SET ROLE ctas_user;
CREATE TABLE loop.public.t_priv AS SELECT 1 AS a;
RESET ROLE;
CREATE USER MAPPING FOR ctas_user SERVER loop OPTIONS (user 'ctas_user');
SET ROLE ctas_user;
CREATE TABLE loop.public.t_priv AS SELECT 1 AS a;
RESET ROLE;
ALTER USER MAPPING FOR ctas_user SERVER loop OPTIONS (ADD password 'pw_not_shown');
SET ROLE ctas_user;
-- the server trusts local connections: the password is not used, so refused
CREATE TABLE loop.public.t_priv AS SELECT 1 AS a;
RESET ROLE;
SELECT 't_priv' IN (SELECT remote_tables(:'remote')) AS exists;

-- type map: domains become their base type, enums become text
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE TABLE loop.public.t_types AS
  SELECT 1::posint AS d, 'happy'::mood AS m, 'pg_class'::regclass AS r;
SELECT * FROM ctas_fed.remote_columns('loop', 'public', 't_types');
SELECT remote_digest(:'remote', 't_types');

-- metadata errors
SELECT * FROM ctas_fed.remote_columns('loop', 'public', 'nosuch');
SELECT * FROM ctas_fed.remote_tables('nosuch', 'public');

-- manual resolution finds nothing to do
SELECT * FROM ctas_fed.resolve_in_doubt('loop');

-- clean up
REVOKE CREATE ON SCHEMA public FROM ctas_user;
DROP OWNED BY ctas_user;
DROP ROLE ctas_user;
DROP SERVER nowhere CASCADE;
