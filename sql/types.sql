--
-- Values arrive exactly, through the binary and the text COPY format
-- (uses the catalog "loop" and the helper functions of postgres.sql)
--
SELECT current_setting('unix_socket_directories') AS sockdir,
       current_setting('port') AS port \gset
SELECT dblink_connect('remote', format('host=%s port=%s dbname=ctas_remote', :'sockdir', :'port'));
SELECT dblink_exec('remote', $$SET timezone = 'UTC'; SET datestyle = 'ISO';
  SET intervalstyle = 'postgres'; SET extra_float_digits = 3$$);
\set remote remote

-- a real table: VALUES would drop the modifiers of numeric(10,3),
-- varchar(5) and char(3) (its rows do not agree on them)
CREATE TABLE special (id int, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8,
  num numeric, t text, b bytea, bo bool, d date, ts timestamp, tstz timestamptz,
  iv interval, u uuid, j jsonb, ia int[], ta text[], nm numeric(10,3),
  vc varchar(5), ch char(3), ip inet, tm time);
INSERT INTO special
SELECT * FROM (VALUES
  (1, NULL::int2, NULL::int4, NULL::int8, NULL::float4, NULL::float8, NULL::numeric,
   NULL::text, NULL::bytea, NULL::bool, NULL::date, NULL::timestamp, NULL::timestamptz,
   NULL::interval, NULL::uuid, NULL::jsonb, NULL::int[], NULL::text[], NULL::numeric(10,3),
   NULL::varchar(5), NULL::char(3), NULL::inet, NULL::time),
  (2, '-32768'::int2, '-2147483648'::int4, '-9223372036854775808'::int8, 'NaN'::float4, 'Infinity'::float8, 'NaN'::numeric,
   '', '\x'::bytea, true, '-infinity'::date, 'infinity'::timestamp, '-infinity'::timestamptz,
   '-178000000 years'::interval, '00000000-0000-0000-0000-000000000000', '{}', '{}', '{}', 0,
   '', '', '::1', '24:00:00'),
  (3, '32767'::int2, '2147483647'::int4, '9223372036854775807'::int8, '-Infinity'::float4, '-0'::float8, 'Infinity'::numeric,
   E'tab\there\nnewline\\backslash \\N "quotes" ''single''', '\x00ff5c0a09'::bytea, false,
   '4713-11-24 BC', '294276-12-31 23:59:59.999999', '2024-02-29 12:34:56.789012+05:30',
   '1 year 2 mons 3 days 04:05:06.789', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
   '{"a": [1, 2.5, "x\"y", null], "ü": {"k": true}}', '{{1,NULL},{3,4}}', '{NULL,"","\\N","a,b","{x}"}',
   -1234567.891, 'abcde', 'ab', '192.168.1.0/24', '23:59:59.999999'),
  (4, 0::int2, 0, 0, 1.17549435e-38::float4, 2.2250738585072014e-308::float8, '-0.000000000000000000001'::numeric,
   'multi-byte: ünïcødé 漢字 🐘', repeat('\x01', 1)::bytea, NULL, '2000-01-01', '2000-01-01 00:00:00',
   '1999-12-31 23:59:59.5-08', '-1 days +00:00:01', 'ffffffff-ffff-ffff-ffff-ffffffffffff',
   '[1, "two", 3.000]', '[0:1]={10,20}', ARRAY[E'\t', E'\n', '\\', ' '],
   9999999.999, 'x', 'a  ', '10.0.0.1', '00:00:00'),
  (5, 1::int2, 1, 1, 3.4028235e38::float4, 1.7976931348623157e308::float8,
   '123456789012345678901234567890.123456789012345678901234567890'::numeric,
   repeat('long text ', 1000), decode(repeat('deadbeef', 500), 'hex'), true,
   '5874897-12-31', '1970-01-01 00:00:00.000001', '1970-01-01 00:00:00+00',
   '0', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', 'null', '{1,2,3}', '{"\""}',
   0.001, 'a\b', '\\N', '::ffff:1.2.3.4', '12:00')
) AS v(id, i2, i4, i8, f4, f8, num, t, b, bo, d, ts, tstz, iv, u, j, ia, ta, nm, vc, ch, ip, tm);

-- every column, compared as text on both sides, through the binary format
SET client_min_messages = debug1;
CREATE TABLE loop.public.special_bin AS SELECT * FROM special;
RESET client_min_messages;
SELECT remote_digest(:'remote', 'special_bin') = local_digest('special') AS same;
-- every column has the local type and modifier on the remote (format_type)
SELECT l.attname, l.type AS local_type, r.type AS remote_type
  FROM (SELECT attnum, attname, format_type(atttypid, atttypmod) AS type
          FROM pg_attribute WHERE attrelid = 'special'::regclass AND attnum > 0) l
  FULL JOIN dblink(:'remote', $$SELECT attnum, attname, format_type(atttypid, atttypmod)
          FROM pg_attribute WHERE attrelid = 'special_bin'::regclass AND attnum > 0$$)
       AS r(attnum int2, attname name, type text) USING (attnum)
 WHERE l.type IS DISTINCT FROM r.type OR l.attname IS DISTINCT FROM r.attname
    OR l.attname IN ('nm', 'vc', 'ch')
 ORDER BY attnum;

-- the same through the text format (one column forces it)
SET client_min_messages = debug1;
CREATE TABLE loop.public.special_txt
  WITH (column_types = 'vc varchar(5)') AS SELECT * FROM special;
RESET client_min_messages;
SELECT remote_digest(:'remote', 'special_txt') = local_digest('special') AS same;

-- column by column, so that a difference would be named
SELECT c.name,
       (SELECT d FROM dblink(:'remote', format('SELECT md5(string_agg(coalesce(%I::text, ''<null>''), ''|'' ORDER BY id)) FROM special_txt', c.name)) AS r(d text)) =
       (SELECT d FROM dblink(:'remote', format('SELECT md5(string_agg(coalesce(%I::text, ''<null>''), ''|'' ORDER BY id)) FROM special_bin', c.name)) AS r(d text))
       AS text_equals_binary
  FROM ctas_fed.remote_columns('loop', 'public', 'special_bin') c
 ORDER BY c.name;
SELECT * FROM ctas_fed.remote_columns('loop', 'public', 'special_bin');

-- the local session's DateStyle and extra_float_digits do not change values
SET datestyle = 'SQL, DMY';
SET extra_float_digits = 0;
SET intervalstyle = 'sql_standard';
CREATE TABLE loop.public.special_style
  WITH (column_types = 'vc varchar(5)') AS SELECT * FROM special;
RESET datestyle;
RESET extra_float_digits;
RESET intervalstyle;
SELECT remote_digest(:'remote', 'special_style') = local_digest('special') AS same;

DROP TABLE loop.public.special_bin, loop.public.special_txt, loop.public.special_style;
DROP TABLE special;
