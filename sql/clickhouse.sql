--
-- CREATE TABLE AS into a ClickHouse catalog, as far as EXPLAIN shows it: the
-- type map, the table options and their errors.  EXPLAIN without ANALYZE
-- does no remote work, so the catalog points at a closed port: a statement
-- that tried to reach it would fail with "could not read the server version".
--
CREATE EXTENSION IF NOT EXISTS ctas_fed;
CREATE SERVER ch_closed FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url 'http://127.0.0.1:1', connect_timeout '1');
CREATE USER MAPPING FOR CURRENT_USER SERVER ch_closed
  OPTIONS (user 'default', password 'secret');
-- a ctas_fed job record per statement would show in ctas_fed.jobs: count them
SELECT count(*) AS jobs_before FROM ctas_fed.jobs \gset

CREATE DOMAIN ch_posint AS integer CHECK (VALUE > 0);
CREATE TYPE ch_mood AS ENUM ('sad', 'happy');
CREATE TYPE ch_pair AS (a int, b text);

-- every row of the README's type map, from a real table (VALUES would drop
-- the modifiers of numeric(10,3), varchar(5) and char(3))
CREATE TABLE ch_src (i2 int2, i4 int4, i8 int8, f4 float4, f8 float8,
  n_ps numeric(10,3), n_neg numeric(5,-2), n_38 numeric(38,38), n numeric,
  bo bool, t text, vc varchar(5), ch char(3), nm name, c1 "char", b bytea,
  d date, ts timestamp, tstz timestamptz, u uuid, j json, jb jsonb,
  ia int[], ta text[], na numeric(12,2)[], da date[], ua uuid[], ba bool[],
  dom ch_posint, e ch_mood, iv interval, ip inet, r int4range, tm time,
  ea ch_mood[]);

EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.all_types AS SELECT * FROM ch_src;
-- the same, in a structured format
EXPLAIN (COSTS OFF, FORMAT JSON)
  CREATE TABLE ch_closed.db.one AS SELECT i4, t FROM ch_src;

-- types that cannot map: an error naming the column, with a hint
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t AS SELECT ROW(1, 'x')::ch_pair AS p;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t AS SELECT 1.5::numeric(39,2) AS n;
-- ... and with the hint followed
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (column_types = 'p String, n Decimal(38, 2)')
  AS SELECT ROW(1, 'x')::ch_pair AS p, 1.5::numeric(39,2) AS n;
-- record and other pseudo-types: PostgreSQL's own error, as for a local
-- table, and column_types does not help
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t AS SELECT ROW(1, 'x') AS r;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t WITH (column_types = 'r String')
  AS SELECT ROW(1, 'x') AS r;

-- table options: the defaults, then each option
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'ReplacingMergeTree(ver)', order_by = '(id, ver)',
        partition_by = 'toYYYYMM(d)', settings = 'index_granularity = 1024, merge_with_ttl_timeout = 3600')
  AS SELECT 1 AS id, 2::bigint AS ver, '2020-01-01'::date AS d, 'x'::text AS label;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t WITH (primary_key = 'id, "Key"')
  AS SELECT 1 AS id, 'k'::text AS "Key", 'v'::text AS v;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (primary_key = 'id', order_by = '(id, d)', partition_by = 'd')
  AS SELECT 1 AS id, '2020-01-01'::date AS d, 2 AS v;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t WITH (engine = 'Memory')
  AS SELECT 1 AS id;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t WITH (engine = 'TinyLog')
  AS SELECT 1 AS id;
-- the other engines of the whitelist, with column names as arguments
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'SummingMergeTree(v)', order_by = 'id')
  AS SELECT 1 AS id, 2 AS v;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'AggregatingMergeTree', order_by = 'id')
  AS SELECT 1 AS id;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'CollapsingMergeTree(sign)', order_by = 'id')
  AS SELECT 1 AS id, 1::int2 AS sign;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'VersionedCollapsingMergeTree(sign, ver)', order_by = 'id')
  AS SELECT 1 AS id, 1::int2 AS sign, 1 AS ver;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t WITH (engine = 'Log')
  AS SELECT 1 AS id;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t WITH (engine = 'StripeLog')
  AS SELECT 1 AS id;
-- settings: index_granularity at both bounds, and a quoted value
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (settings = 'index_granularity = 1') AS SELECT 1 AS id;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (settings = 'index_granularity=16777216, some_text = ''a\''b''')
  AS SELECT 1 AS id;
-- brackets nested exactly 32 deep are accepted
SELECT format('%s a %s', repeat('(', 32), repeat(')', 32)) AS deep32 \gset
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (order_by = :'deep32') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (atomic = false, commit_every = 500, if_exists = 'append') AS SELECT 1 AS id;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t WITH (if_exists = 'replace') AS SELECT 1 AS id;
EXPLAIN (COSTS OFF) CREATE TABLE IF NOT EXISTS ch_closed.db.t AS SELECT 1 AS id;
-- names that need quoting
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed."my db"."t`x" AS SELECT 1 AS "a`b\c", 2 AS "Mixed Case";

-- column_types overrides, every supported type
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (column_types = 'i8 Int8, i16 Int16, i32 Int32, i64 Int64, u8 UInt8, u16 UInt16, u32 UInt32, u64 UInt64, f32 Float32, f64 Float64, dec Decimal(18,4), d32 Decimal32(2), d64 Decimal64(4), d128 Decimal128(10), s String, fs FixedString(8), d Date, dt DateTime, dtz DateTime(''Europe/Berlin''), u UUID, e8 Enum8(''a'' = 1, ''b'' = 2), e16 Enum16(''x'' = -1000), n Nullable(Int32), lc LowCardinality(String), lcn LowCardinality(Nullable(String)), a Array(Nullable(Int32)), an Array(Int32)')
  AS SELECT 1 AS i8, 1 AS i16, 1 AS i32, 1 AS i64, 1 AS u8, 1 AS u16, 1 AS u32,
    1 AS u64, 1.5 AS f32, 1.5 AS f64, 1.5 AS dec, 1.5 AS d32, 1.5 AS d64,
    1.5 AS d128, 'x' AS s, 'x' AS fs, current_date AS d, now() AS dt,
    now() AS dtz, gen_random_uuid() AS u, 'a' AS e8, 'x' AS e16, 1 AS n,
    'x' AS lc, 'x' AS lcn, ARRAY[1] AS a, ARRAY[1] AS an;
-- an override of a key column is used as written
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (primary_key = 'id', column_types = 'id UInt32')
  AS SELECT 1 AS id;

-- column_types errors
-- nested too deeply (33 levels)
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (column_types = 'a Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Array(Int32)))))))))))))))))))))))))))))))))')
  AS SELECT ARRAY[1] AS a;
-- unknown type
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (column_types = 'a Int256') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (column_types = 'a Tuple(Int32, String)') AS SELECT 1 AS a;
-- Array of the wrong depth
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (column_types = 'a Array(Array(Int32))') AS SELECT ARRAY[1] AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (column_types = 'a Array(Int32)') AS SELECT 1 AS a;
-- a column that is not in the query
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (column_types = 'nope Int32') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (primary_key = 'nope') AS SELECT 1 AS a;

-- refused table options (README, ClickHouse errors): subquery, IN,
-- dictionaries, joins, nesting, engines that reach other tables, settings
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (partition_by = 'toUInt8((SELECT secret FROM db.other))') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (order_by = 'a IN db.other') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (order_by = 'dictGetString(''d'', ''v'', toUInt64(a))') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (order_by = 'joinGet(''db.j'', ''v'', a)') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (order_by = 'a; DROP TABLE db.x') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (order_by = 'a -- comment') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (order_by = '(a') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (order_by = ' ') AS SELECT 1 AS a;
SELECT format('(%s%s)', repeat('(', 33), repeat(')', 33)) AS deep \gset
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (order_by = :'deep') AS SELECT 1 AS a;
-- 33 deep: refused in every option that is an expression
SELECT format('%s a %s', repeat('(', 33), repeat(')', 33)) AS deep33 \gset
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (partition_by = :'deep33') AS SELECT 1 AS a;
SELECT 'ReplacingMergeTree' || :'deep33' AS deep33engine \gset
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = :'deep33engine') AS SELECT 1 AS a;
-- a subquery, IN or a reaching function in the other options
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (order_by = '(select max(a) from db.other)') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'ReplacingMergeTree((SELECT 1))') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (partition_by = 'a GLOBAL IN db.other') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (partition_by = 'notIn(a, db.other)') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (partition_by = 'hasColumnInTable(''db'', ''other'', ''c'')') AS SELECT 1 AS a;
-- a quoted word is a name, not a keyword
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (order_by = '`select`') AS SELECT 1 AS "select";
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'Buffer(db, t, 16, 10, 100, 10000, 1000000, 10000000, 100000000)') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'Distributed(c, db, t)') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'ReplicatedMergeTree(''/p'', ''r'')') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'Merge(db, other)') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'File(CSV)') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'URL(''http://127.0.0.1:1/'', CSV)') AS SELECT 1 AS a;
-- the engine name is case sensitive, and a string argument is refused
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'mergetree') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'MergeTree(''x'')') AS SELECT 1 AS a;
-- the old MergeTree(date, key, granularity) syntax: ClickHouse refuses it
-- once ORDER BY follows, so the key belongs in order_by
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'MergeTree(d, (a, d), 8192)') AS SELECT 1 AS a, current_date AS d;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (engine = 'ReplacingMergeTree(a, (a))') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (settings = 'index_granularity = 0') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (settings = 'index_granularity = 4294967296') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (settings = 'index_granularity') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (settings = 'index_granularity = 16777217') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (settings = 'index_granularity = 1.5') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (settings = 'index_granularity = -1') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (settings = 'index_granularity = 8192 merge_with_ttl_timeout = 1') AS SELECT 1 AS a;
-- options of the statement, not of ClickHouse
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (atomic = false, if_exists = 'replace') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (if_exists = 'sometimes') AS SELECT 1 AS a;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t
  WITH (fillfactor = 50) AS SELECT 1 AS a;
-- reserved table names
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db._ctas_fed_x AS SELECT 1 AS a;
-- EXPLAIN needs the user mapping that the statement would use
CREATE ROLE regress_ch_nomap;
GRANT USAGE ON FOREIGN SERVER ch_closed TO regress_ch_nomap;
SET ROLE regress_ch_nomap;
EXPLAIN (COSTS OFF) CREATE TABLE ch_closed.db.t AS SELECT 1 AS a;
RESET ROLE;

-- nothing was contacted: the same statement without EXPLAIN fails to
-- connect, and no statement above left a job
SELECT count(*) - :jobs_before AS new_jobs FROM ctas_fed.jobs;
\set VERBOSITY terse
CREATE TABLE ch_closed.db.t AS SELECT 1 AS a;
\set VERBOSITY default

DROP TABLE ch_src;
DROP TYPE ch_pair, ch_mood;
DROP DOMAIN ch_posint;
DROP USER MAPPING FOR CURRENT_USER SERVER ch_closed;
REVOKE USAGE ON FOREIGN SERVER ch_closed FROM regress_ch_nomap;
DROP ROLE regress_ch_nomap;
DROP SERVER ch_closed;
