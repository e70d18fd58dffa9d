
# Copyright (c) 2026, ctas_fed developers

# CREATE TABLE AS into a real MariaDB server (type 'mysql'): the server and
# user mapping options, the type map (exact values both ways, errors that
# name the column), create / replace / append (XA) / IF NOT EXISTS / WITH
# NO DATA / column lists / SELECT INTO / EXECUTE, savepoints, ROLLBACK,
# streaming with commit_every, EXPLAIN, remote_tables / remote_columns,
# DROP TABLE, and what is not supported.  After each statement: no
# _ctas_fed_ table and no XA branch left.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $my    = start_mariadb();
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
mysql_catalog($local, $my);

sub psql_ok
{
	my ($sql, $name) = @_;
	my ($rc, $out, $err) = $local->psql('postgres', $sql);
	is($rc, 0, $name) or diag($err);
	return $out;
}

sub psql_fails
{
	my ($sql, $re, $name) = @_;
	my ($rc, $out, $err) = $local->psql('postgres', $sql);
	isnt($rc, 0, "$name: fails");
	like($err, $re, "$name: error");
	return $err;
}

# nothing of ours left on the server
sub clean
{
	my ($name) = @_;
	is($my->sql(q{SELECT count(*) FROM information_schema.tables WHERE table_name LIKE '\_ctas\_fed\_%'}),
		'0', "$name: no scratch table left");
	is($my->sql('XA RECOVER'), '', "$name: no XA branch left");
}

# --- options
psql_fails(q{CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql', host '127.0.0.1', hots 'x')},
	qr/invalid option "hots".*\n.*HINT:.*host/s, 'unknown option');
psql_fails(q{CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql', port '3306')},
	qr/host/, 'host is required');
psql_fails(q{CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql', host '127.0.0.1', port '99999')},
	qr/port/, 'port out of range');
psql_fails(q{CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql', host '127.0.0.1', password 'x')},
	qr/password/, 'no password on a server');
psql_fails(q{CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql', host '127.0.0.1', ssl_mode 'maybe')},
	qr/ssl_mode/, 'bad ssl_mode');

# --- a plain CTAS
psql_ok(q{CREATE TABLE shop.shop.t1 AS SELECT g AS id, 'row ' || g AS name FROM generate_series(1, 1000) g}, 'CTAS');
is($my->sql('SELECT count(*), sum(id), max(name) FROM shop.t1'), "1000\t500500\trow 999", 'all rows arrived');
clean('CTAS');


# --- the type map: every value exact, NULLs, special characters
$local->safe_psql('postgres', q{
CREATE TABLE src (id int, i2 int2, i8 int8, f4 float4, f8 float8,
  n numeric(20,5), nu numeric, b bool, t text, vc varchar(10), c char(3),
  by bytea, d date, ts timestamp, tz timestamptz, tm time, u uuid,
  j jsonb, arr int[]);
INSERT INTO src VALUES
 (1, -32768, 9223372036854775807, 0.1, 1.7976931348623157e308,
  -123456789012345.12345, 12345678901234567890.123456789, true,
  E'tab\there\nnew\\back ''q'' \u00e9 \U0001F600 \r', 'ten chars!', 'ab',
  '\x00090a0d5c27ff'::bytea, '1000-01-01', '9999-12-31 23:59:59.999999',
  '2020-01-01 00:00:00+05', '23:59:59.999999',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"b": [1, 2], "a": "x\ty"}',
  '{1,NULL,3}'),
 (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL),
 (3, 7, -1, -1.5, 0.1, 0, -0.000000000000000000000000000001, false, '',
  '', 'xyz', ''::bytea, '2024-02-29', '1970-01-01 00:00:00',
  '1970-01-01 00:00:00+00', '00:00:00', '00000000-0000-0000-0000-000000000000',
  '[]', '{}');
});
# DateStyle and extra_float_digits must not change what arrives
psql_ok(q{SET datestyle = 'SQL, DMY'; SET extra_float_digits = -15; SET timezone = 'Asia/Tokyo';
CREATE TABLE shop.shop.types AS SELECT * FROM src}, 'CTAS of every mapped type');
is($my->sql(q{SELECT id, i2, i8, f4, f8, n, nu, b, HEX(t), vc, c, HEX(`by`), d, ts, tz, tm, u, j, arr FROM shop.types ORDER BY id}),
	join("\n",
		join("\t", 1, -32768, '9223372036854775807', '0.1', '1.7976931348623157e308',
			'-123456789012345.12345', '12345678901234567890.' . '123456789' . ('0' x 21),
			1, uc(unpack('H*', "tab\there\nnew\x08ack 'q' \xc3\xa9 \xf0\x9f\x98\x80 \r")),
			'ten chars!', 'ab', '00090A0D5C27FF', '1000-01-01', '9999-12-31 23:59:59.999999',
			'2019-12-31 19:00:00.000000', '23:59:59.999999',
			'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": "x\\\\ty", "b": [1, 2]}', '[1,null,3]'),
		join("\t", 2, ('NULL') x 18),
		join("\t", 3, 7, -1, '-1.5', '0.1', '0.00000', '-0.000000000000000000000000000001', 0, '',
			'', 'xyz', '', '2024-02-29', '1970-01-01 00:00:00.000000',
			'1970-01-01 00:00:00.000000', '00:00:00.000000', '00000000-0000-0000-0000-000000000000',
			'[]', '[]')),
	'every value arrived exactly (timestamptz in UTC)');
is(psql_ok(q{SELECT string_agg(name || ' ' || type || ' ' || nullable, ', ') FROM ctas_fed.remote_columns('shop', 'shop', 'types')}, 'remote_columns'),
	join(', ', map { "$_ true" } 'id int(11)', 'i2 smallint(6)', 'i8 bigint(20)', 'f4 float',
		'f8 double', 'n decimal(20,5)', 'nu decimal(65,30)', 'b tinyint(1)', 't longtext',
		'vc varchar(10)', 'c char(3)', 'by longblob', 'd date', 'ts datetime(6)', 'tz datetime(6)',
		'tm time(6)', 'u char(36)', 'j longtext', 'arr longtext'),
	'the type map (remote_columns)');
clean('types');

# fractions of a second are sent as PostgreSQL prints them (none for a
# whole second, no trailing zeros): the server reads them as the same time
psql_ok(q{CREATE TABLE shop.shop.frac AS SELECT '2021-06-01 12:00:00.5'::timestamp AS ts,
  '2021-06-01 12:00:00.00012+00'::timestamptz AS tz, '10:00:00.25'::time AS tm,
  '10:00:01'::time AS tw, '1999-12-31 23:59:59.999999'::timestamp AS tx}, 'CTAS of fractions');
is($my->sql('SELECT ts, tz, tm, tw, tx FROM shop.frac'),
	"2021-06-01 12:00:00.500000\t2021-06-01 12:00:00.000120\t10:00:00.250000\t10:00:01.000000\t1999-12-31 23:59:59.999999",
	'fractions of a second exact');
$my->sql('DROP TABLE shop.frac');

# a table ctas_fed made is loaded as CHARACTER SET binary (its columns are
# utf8mb4); an append into a table of the user's stays utf8mb4, which the
# server converts to each column's charset: U+00E9 is one byte in latin1
$my->sql('CREATE TABLE shop.l1 (s VARCHAR(20)) DEFAULT CHARSET = latin1');
psql_ok(q{CREATE TABLE shop.shop.l1 WITH (if_exists = 'append') AS SELECT E'x\u00e9' AS s}, 'append (XA) into a latin1 table');
psql_ok(q{CREATE TABLE shop.shop.l1 WITH (if_exists = 'append', atomic = false) AS SELECT E'y\u00e9' AS s}, 'streaming append into a latin1 table');
is($my->sql('SELECT group_concat(HEX(s) ORDER BY s) FROM shop.l1'), '78E9,79E9', 'converted to latin1, not stored as UTF-8 bytes');
$my->sql('DROP TABLE shop.l1');
clean('charsets');

# --- values MySQL cannot hold: errors naming the column and the value
psql_fails(q{CREATE TABLE shop.shop.e AS SELECT 'NaN'::float8 AS fx}, qr/value "NaN" of column "fx"/, 'NaN');
psql_fails(q{CREATE TABLE shop.shop.e AS SELECT 'infinity'::timestamptz AS tsx}, qr/value "infinity" of column "tsx"/, 'infinity');
psql_fails(q{CREATE TABLE shop.shop.e AS SELECT '0999-12-31'::date AS dx}, qr/value "0999-12-31" of column "dx".*years 1000 to 9999/s, 'date before 1000');
psql_fails(q{CREATE TABLE shop.shop.e AS SELECT 'NaN'::numeric(5,2) AS nx}, qr/column "nx"/, 'numeric NaN');
psql_fails(q{CREATE TABLE shop.shop.e AS SELECT 1e40::numeric AS nx}, qr/value "1\d+" of column "nx".*DECIMAL\(65,30\)/s, 'unconstrained numeric too large');
psql_fails(q{CREATE TABLE shop.shop.e AS SELECT 1::numeric(70,2) AS nx}, qr/column "nx" of type numeric\(70,2\) cannot be mapped/, 'numeric(70,2)');
psql_fails(q{CREATE TABLE shop.shop.e AS SELECT '1 day'::interval AS ix}, qr/column "ix" of type interval cannot be mapped.*HINT:.*column_types/s, 'interval');
# the server's own check, through the warnings LOAD DATA LOCAL gives
psql_fails(q{CREATE TABLE shop.shop.e WITH (column_types = 'v VARCHAR(2)') AS SELECT 'abc' AS v},
	qr/did not take the rows sent to "shop.e" exactly.*\n.*DETAIL:.*took 1 of 1 rows with 1 warning.*Data truncated for column 'v'/s, 'a value the override truncates');
psql_fails(q{CREATE TABLE shop.shop.e WITH (column_types = 'v INT; DROP TABLE x') AS SELECT 1 AS v},
	qr/invalid MySQL type "INT; DROP TABLE x" for column "v"/, 'override is parsed, never spliced');
psql_ok(q{CREATE TABLE shop.shop.ov WITH (column_types = 'v decimal ( 10 , 2 ) , w bigint unsigned', primary_key = 'k') AS SELECT 1.5 AS v, 7 AS w, 'key' AS k}, 'override rebuilt');
is($my->sql(q{SELECT column_name, column_type, is_nullable, column_key FROM information_schema.columns WHERE table_schema = 'shop' AND table_name = 'ov' ORDER BY ordinal_position}),
	"v\tdecimal(10,2)\tYES\t\nw\tbigint(20) unsigned\tYES\t\nk\tvarchar(768)\tNO\tPRI", 'overrides and primary key');
clean('errors');

# --- EXPLAIN: the remote DDL and load, no remote effect
my $explain = psql_ok(q{EXPLAIN (COSTS OFF) CREATE TABLE shop.shop.ex WITH (primary_key = 'id') AS SELECT id, by FROM src}, 'EXPLAIN');
like($explain, qr/Remote DDL: CREATE TABLE `shop`.`ex` \(`id` INT NOT NULL, `by` LONGBLOB, PRIMARY KEY \(`id`\)\) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin/, 'EXPLAIN shows the DDL');
like($explain, qr/Remote Load: LOAD DATA LOCAL INFILE '<stream>' INTO TABLE `shop`.`ex`.*\(`id`, \@v1\) SET `by` = UNHEX\(\@v1\)/, 'and the load');
is($my->sql(q{SELECT count(*) FROM information_schema.tables WHERE table_name = 'ex'}), '0', 'EXPLAIN made nothing');

# --- IF NOT EXISTS, if_exists, WITH NO DATA, column list, SELECT INTO, EXECUTE
psql_fails(q{CREATE TABLE shop.shop.t1 AS SELECT 1 AS id}, qr/already exists/, 'existing table');
my ($rc, $out, $err) = $local->psql('postgres', q{CREATE TABLE IF NOT EXISTS shop.shop.t1 AS SELECT 1 AS id});
like($err, qr/NOTICE:.*already exists.*skipping/, 'IF NOT EXISTS skips');
psql_ok(q{CREATE TABLE shop.shop.t1 WITH (if_exists = 'replace') AS SELECT g AS id, 'new' AS name FROM generate_series(1, 10) g}, 'replace');
is($my->sql('SELECT count(*), min(name) FROM shop.t1'), "10\tnew", 'replaced');
psql_ok(q{CREATE TABLE shop.shop.t1 WITH (if_exists = 'append') AS SELECT g AS id, 'app' AS name FROM generate_series(11, 15) g}, 'append (XA)');
is($my->sql('SELECT count(*), max(name) FROM shop.t1'), "15\tnew", 'appended');
psql_ok(q{CREATE TABLE shop.shop.nodata AS SELECT * FROM src WITH NO DATA}, 'WITH NO DATA');
is($my->sql('SELECT count(*) FROM shop.nodata'), '0', 'table without rows');
psql_ok(q{CREATE TABLE shop.shop.cols (x, y) AS SELECT 1, 'a'}, 'column list');
is($my->sql('SELECT x, y FROM shop.cols'), "1\ta", 'columns named');
psql_ok(q{SELECT id INTO shop.shop.into1 FROM src}, 'SELECT INTO');
is($my->sql('SELECT count(*) FROM shop.into1'), '3', 'SELECT INTO rows');
psql_ok(q{PREPARE q(int) AS SELECT g FROM generate_series(1, $1) g; CREATE TABLE shop.shop.exe AS EXECUTE q(42)}, 'EXECUTE');
is($my->sql('SELECT count(*) FROM shop.exe'), '42', 'EXECUTE rows');
psql_fails(q{CREATE TABLE shop.nosuchdb.t AS SELECT 1 AS a}, qr/database "nosuchdb" does not exist in MySQL catalog "shop"/, 'missing database');
clean('statements');

# --- ROLLBACK, savepoints, DROP TABLE
psql_ok(q{BEGIN;
CREATE TABLE shop.shop.rb AS SELECT 1 AS a;
CREATE TABLE shop.shop.t1 WITH (if_exists = 'append') AS SELECT 99 AS id, 'rb' AS name;
DROP TABLE shop.shop.cols;
ROLLBACK;}, 'a rolled-back transaction');
is($my->sql(q{SELECT count(*) FROM information_schema.tables WHERE table_name IN ('rb', 'cols')}), '1', 'nothing created, nothing dropped');
is($my->sql('SELECT count(*) FROM shop.t1'), '15', 'nothing appended');
clean('rollback');

psql_ok(q{BEGIN;
CREATE TABLE shop.shop.sp1 AS SELECT 1 AS a;
CREATE TABLE shop.shop.t1 WITH (if_exists = 'append') AS SELECT 16 AS id, 'kept' AS name;
SAVEPOINT s;
CREATE TABLE shop.shop.sp2 AS SELECT 2 AS a;
CREATE TABLE shop.shop.t1 WITH (if_exists = 'append') AS SELECT 17 AS id, 'undone' AS name;
DROP TABLE shop.shop.exe;
ROLLBACK TO SAVEPOINT s;
SAVEPOINT s2;
CREATE TABLE shop.shop.t1 WITH (if_exists = 'append') AS SELECT 18 AS id, 'released' AS name;
RELEASE SAVEPOINT s2;
COMMIT;}, 'savepoints');
is($my->sql(q{SELECT group_concat(table_name ORDER BY table_name) FROM information_schema.tables WHERE table_name IN ('sp1', 'sp2', 'exe')}), 'exe,sp1', 'the savepoint took back its CREATE and DROP');
is($my->sql(q{SELECT group_concat(id ORDER BY id) FROM shop.t1 WHERE id > 15}), '16,18', 'and its append, not the others');
clean('savepoints');

psql_ok(q{BEGIN; CREATE TABLE shop.shop.cd AS SELECT 1 AS a; CREATE TABLE shop.shop.cd WITH (if_exists = 'append') AS SELECT 2 AS a; DROP TABLE shop.shop.sp1; COMMIT}, 'create, append and drop in one transaction');
is($my->sql('SELECT group_concat(a ORDER BY a) FROM shop.cd'), '1,2', 'append into the table created in the transaction');
psql_fails(q{BEGIN; CREATE TABLE shop.shop.cd WITH (if_exists = 'append') AS SELECT 3 AS a; DROP TABLE shop.shop.cd; COMMIT}, qr/after appending to it in the same transaction/, 'no DDL after an append');
psql_ok(q{DROP TABLE shop.shop.cd; DROP TABLE IF EXISTS shop.shop.cd}, 'DROP TABLE [IF EXISTS]');
is($my->sql(q{SELECT count(*) FROM information_schema.tables WHERE table_name IN ('cd', 'sp1')}), '0', 'dropped');
clean('drop');

# --- streaming: committed every commit_every rows, what is committed stays
psql_fails(q{CREATE TABLE shop.shop.st WITH (atomic = false, commit_every = 100) AS SELECT g, 1 / (250 - g) AS x FROM generate_series(1, 300) g},
	qr/division by zero.*200 rows were committed/s, 'streaming load fails at row 250');
is($my->sql('SELECT count(*), max(g) FROM shop.st'), "200\t200", 'two batches stay');
psql_ok(q{CREATE TABLE shop.shop.st WITH (atomic = false, if_exists = 'append', commit_every = 1000) AS SELECT g, 0 AS x FROM generate_series(201, 5000) g}, 'streaming append');
is($my->sql('SELECT count(*), max(g) FROM shop.st'), "5000\t5000", 'streaming append rows');
is(psql_ok(q{SELECT state || ' ' || rows FROM ctas_fed.jobs WHERE target LIKE '%st' ORDER BY job_id}, 'jobs'),
	"failed 200\ncommitted 4800", 'jobs of the streaming loads');
clean('streaming');

# --- remote_tables
is(psql_ok(q{SELECT string_agg(name, ',' ORDER BY name) FROM ctas_fed.remote_tables('shop', 'shop')}, 'remote_tables'),
	'cols,exe,into1,nodata,ov,st,t1,types', 'remote_tables');
clean('end');

done_testing();
