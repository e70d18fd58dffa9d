--
-- CREATE TABLE AS into a MySQL catalog, as far as EXPLAIN shows it: the type
-- map, column_types, primary_key and their errors.  EXPLAIN without ANALYZE
-- does no remote work, so the catalog points at a closed port.
--
CREATE EXTENSION IF NOT EXISTS ctas_fed;
CREATE SERVER my_closed FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'mysql', host '127.0.0.1', port '1', connect_timeout '1');
CREATE USER MAPPING FOR CURRENT_USER SERVER my_closed
  OPTIONS (user 'loader', password 'secret');

-- options: unknown ones get the valid ones in the hint
CREATE SERVER my_bad FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'mysql', host '127.0.0.1', url 'http://x');
CREATE SERVER my_bad FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'mysql', host '127.0.0.1', ssl_mode 'sometimes');
CREATE SERVER my_bad FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'mysql', host '127.0.0.1', connect_timeout '0');
CREATE SERVER my_bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql');

CREATE DOMAIN my_posint AS integer CHECK (VALUE > 0);
CREATE TYPE my_mood AS ENUM ('sad', 'happy');

-- every row of the type map of docs/mysql.md, from a real table
CREATE TABLE my_src (i2 int2, i4 int4, i8 int8, f4 float4, f8 float8,
  n_ps numeric(10,3), n numeric, bo bool, t text, vc varchar(5),
  vbig varchar(20000), ch char(3), nm name, b bytea, d date, ts timestamp,
  tstz timestamptz, tm time, u uuid, j json, jb jsonb, ia int[],
  dom my_posint, e my_mood);

EXPLAIN (COSTS OFF) CREATE TABLE my_closed.db.all_types AS SELECT * FROM my_src;
-- keys are bounded, and NOT NULL
EXPLAIN (COSTS OFF) CREATE TABLE my_closed.db.keyed
  WITH (primary_key = 't, b') AS SELECT t, b, i4 FROM my_src;
-- append uses XA; atomic = false commits every commit_every rows
EXPLAIN (COSTS OFF) CREATE TABLE my_closed.db.app
  WITH (if_exists = 'append') AS SELECT i4 FROM my_src;
EXPLAIN (COSTS OFF) CREATE TABLE my_closed.db.st
  WITH (atomic = false, commit_every = 500) AS SELECT i4 FROM my_src;

-- types that cannot map: an error naming the column, with a hint
EXPLAIN (COSTS OFF) CREATE TABLE my_closed.db.t AS SELECT '1 day'::interval AS iv;
EXPLAIN (COSTS OFF) CREATE TABLE my_closed.db.t AS SELECT 1.5::numeric(66,2) AS n;
EXPLAIN (COSTS OFF) CREATE TABLE my_closed.db.t AS SELECT 1.5::numeric(40,31) AS n;
-- ... and with the hint followed: parsed and rebuilt
EXPLAIN (COSTS OFF) CREATE TABLE my_closed.db.t
  WITH (column_types = 'iv varchar ( 40 ), n double, u bigint unsigned')
  AS SELECT '1 day'::interval::text AS iv, 1.5::numeric(66,2) AS n, 1 AS u;
-- an override is a type, never SQL
EXPLAIN (COSTS OFF) CREATE TABLE my_closed.db.t
  WITH (column_types = 'n INT) ENGINE = MEMORY; --')
  AS SELECT 1 AS n;
EXPLAIN (COSTS OFF) CREATE TABLE my_closed.db.t
  WITH (column_types = 'n ENUM(''a'')') AS SELECT 1 AS n;

-- not for MySQL catalogs
EXPLAIN (COSTS OFF) CREATE TABLE my_closed.db.t WITH (engine = 'MergeTree') AS SELECT 1 AS n;

-- the closed port: a statement that reaches for the server says so
\set VERBOSITY terse
CREATE TABLE my_closed.db.t AS SELECT 1 AS n;
\set VERBOSITY default

DROP TABLE my_src;
DROP TYPE my_mood;
DROP DOMAIN my_posint;
DROP SERVER my_closed CASCADE;
