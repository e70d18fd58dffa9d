
# Copyright (c) 2026, ctas_fed developers

# ctas_fed.create_tables_as(): a schema of tables of every mapped type,
# NULLs and hostile values included, into a PostgreSQL and a ClickHouse
# catalog in ONE transaction, each table's content fingerprinted on both
# sides; ROLLBACK, a table that fails (if_exists error, a value the target
# refuses) and a missing SELECT privilege leave nothing; renames, per-table
# options, the source's primary key, argument errors, and the job group in
# ctas_fed.jobs.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch = start_clickhouse();
# the worker's own resolver would race the assertions on leftovers
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $rport = $remote->port;

clickhouse_catalog($local, $ch);
$ch->query('CREATE DATABASE r2');
$remote->safe_psql('dw', 'CREATE SCHEMA r2 AUTHORIZATION loader');

$local->safe_psql('postgres', qq{
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE SCHEMA src;

-- numbers, with NULLs
CREATE TABLE src.nums (
  id int PRIMARY KEY, i2 int2, i8 int8, f4 float4, f8 float8,
  amount numeric(14,2), flag bool);
INSERT INTO src.nums
SELECT g, (g % 30000)::int2, g::int8 * 1000000007, g * 0.5, g * 0.25,
       (g * 1.01)::numeric(14,2),
       CASE WHEN g % 5 = 0 THEN NULL ELSE g % 2 = 0 END
  FROM generate_series(1, 3000) g;
UPDATE src.nums SET i2 = NULL, i8 = NULL, f4 = NULL, f8 = NULL, amount = NULL
 WHERE id % 7 = 0;

-- text, with hostile values
CREATE TABLE src.texts (
  id int PRIMARY KEY, label text, vc varchar(12), doc jsonb, u uuid,
  b bytea);
INSERT INTO src.texts
SELECT g,
       CASE g % 13
         WHEN 0 THEN NULL WHEN 1 THEN '' WHEN 2 THEN E'tab\\there'
         WHEN 3 THEN E'new\\nline' WHEN 4 THEN E'back\\\\\\\\slash' WHEN 5 THEN '\\N'
         WHEN 6 THEN 'quote''s "dq" `bq`' WHEN 7 THEN 'ünïcødé 日本語 😀'
         WHEN 8 THEN E'cr\\rlf\\n' WHEN 9 THEN E'\\x01ctl\\x1f' WHEN 10 THEN ' pad '
         WHEN 11 THEN E'\\\\\\\\N' ELSE 'plain ' || g END,
       CASE WHEN g % 11 = 0 THEN NULL ELSE ('v' || g)::varchar(12) END,
       CASE WHEN g % 9 = 0 THEN NULL
            ELSE jsonb_build_object('g', g, 's', E'x\\ty''') END,
       CASE WHEN g % 8 = 0 THEN NULL ELSE md5(g::text)::uuid END,
       CASE WHEN g % 6 = 0 THEN NULL
            ELSE decode(md5(g::text), 'hex') || '\\x000a09ff5c'::bytea END
  FROM generate_series(1, 3000) g;

-- dates, times and arrays
CREATE TABLE src.times (
  id int PRIMARY KEY, d date, ts timestamptz, tsl timestamp, arr int[],
  tarr text[]);
INSERT INTO src.times
SELECT g,
       CASE WHEN g % 10 = 0 THEN NULL ELSE date '2000-01-01' + g END,
       CASE WHEN g % 10 = 1 THEN NULL
            ELSE timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second' END,
       CASE WHEN g % 10 = 2 THEN NULL
            ELSE timestamp '1999-12-31 23:00:00' + g * interval '1 minute' END,
       ARRAY[g, NULL, g + 1],
       ARRAY['a' || g, NULL, E'q''t\\t\\\\', '']
  FROM generate_series(1, 3000) g;

-- a partitioned table: its partitions are not tables of their own here
CREATE TABLE src.parted (id int, region text, v int, PRIMARY KEY (id, region))
  PARTITION BY LIST (region);
CREATE TABLE src.parted_eu PARTITION OF src.parted FOR VALUES IN ('eu');
CREATE TABLE src.parted_us PARTITION OF src.parted FOR VALUES IN ('us');
INSERT INTO src.parted
SELECT g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, g * 3
  FROM generate_series(1, 1000) g;

-- a quoted name, no primary key, a dropped column
CREATE TABLE src."Mixed Case" (n int, gone int, "Odd Col" text);
ALTER TABLE src."Mixed Case" DROP COLUMN gone;
INSERT INTO src."Mixed Case"
SELECT g, CASE WHEN g % 3 = 0 THEN NULL ELSE E'odd\\t' || g END
  FROM generate_series(1, 500) g;

-- not tables: left out of a schema's copy
CREATE VIEW src.a_view AS SELECT 1 AS x;
CREATE SEQUENCE src.a_seq;

CREATE SCHEMA empty;
});

# --- helpers (no assertions)

# digest of the rows of a PostgreSQL query, comparable between clusters
sub pg_rows
{
	my ($node, $db, $select) = @_;
	return sql_digest($node, $db, $select);
}

# digest of the rows of a ClickHouse query, in the same form as sql_digest
sub ch_rows
{
	my ($select) = @_;
	my @rows = grep { $_ ne '' } split /\n/,
	  $ch->query("$select FORMAT TabSeparated");
	@rows = sort @rows;
	return scalar(@rows) . ':' . Digest::MD5::md5_hex(join("\n", @rows));
}

# The same rows rendered the same way by PostgreSQL (source) and ClickHouse
# (target): strings as md5, so that no escaping rule differs.
my %fingerprint = (
	nums => [
		q{SELECT id, i2, i8, f4, f8, (amount * 100)::int8, flag::int FROM src.nums},
		q{SELECT id, i2, i8, f4, f8, toInt64(amount * 100), flag FROM r.nums}
	],
	texts => [
		q{SELECT id, md5(label), md5(vc), md5(doc::text), u, encode(b, 'hex')
		    FROM src.texts},
		q{SELECT id, lower(hex(MD5(label))), lower(hex(MD5(vc))),
		         lower(hex(MD5(doc))), u, lower(hex(b)) FROM r.texts}
	],
	times => [
		q{SELECT id, d, to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),
		         to_char(tsl, 'YYYY-MM-DD HH24:MI:SS'),
		         array_to_string(arr, ',', 'NULL'),
		         md5(array_to_string(tarr, '|', 'NULL')) FROM src.times},
		q{SELECT id, d, ts, tsl,
		         arrayStringConcat(arrayMap(x -> ifNull(toString(x), 'NULL'), arr), ','),
		         lower(hex(MD5(arrayStringConcat(arrayMap(x -> ifNull(x, 'NULL'), tarr), '|'))))
		    FROM r.times}
	],
	parted => [
		q{SELECT id, md5(region), v FROM src.parted},
		q{SELECT id, lower(hex(MD5(region))), v FROM r.parted}
	],
	'Mixed Case' => [
		q{SELECT n, md5("Odd Col") FROM src."Mixed Case"},
		q{SELECT n, lower(hex(MD5(`Odd Col`))) FROM r.`Mixed Case`}
	],
);
my @all_tables = ('Mixed Case', qw(nums parted texts times));

# digest of the whole table, the same on two PostgreSQL clusters
sub pg_table
{
	my ($node, $db, $table) = @_;
	return pg_rows($node, $db, "SELECT t::text FROM $table t");
}

sub pg_quote
{
	my ($name) = @_;
	return $name =~ /^[a-z_]+$/ ? $name : qq{"$name"};
}

sub jobs_count
{
	return $local->safe_psql('postgres', 'SELECT count(*) FROM ctas_fed.jobs');
}

# --- one transaction, two catalogs, a whole schema each
my ($ret, $out, $err) = $local->psql('postgres', q{
SET timezone = 'Asia/Tokyo';
BEGIN;
SELECT 'wh', source, target, rows
  FROM ctas_fed.create_tables_as('wh', 'public', source_schema => 'src');
SELECT 'lake', source, target, rows
  FROM ctas_fed.create_tables_as('lake', 'dw', source_schema => 'src');
COMMIT;});
is($ret, 0, 'a schema into two catalogs in one transaction') or diag $err;
is($out, join("\n",
		'wh|src."Mixed Case"|public."Mixed Case"|500',
		'wh|src.nums|public.nums|3000',
		'wh|src.parted|public.parted|1000',
		'wh|src.texts|public.texts|3000',
		'wh|src.times|public.times|3000',
		'lake|src."Mixed Case"|dw."Mixed Case"|500',
		'lake|src.nums|dw.nums|3000',
		'lake|src.parted|dw.parted|1000',
		'lake|src.texts|dw.texts|3000',
		'lake|src.times|dw.times|3000'),
	'one row per table of the schema, in name order; partitions, views and sequences left out');

foreach my $t (@all_tables)
{
	my $q = pg_quote($t);
	is(pg_table($remote, 'dw', "public.$q"), pg_table($local, 'postgres', "src.$q"),
		"PostgreSQL catalog: table $t has exactly the rows of the source");
	my ($pgq, $chq) = @{ $fingerprint{$t} };
	$chq =~ s/\br\./dw./g;
	my $want = pg_rows($local, 'postgres', $pgq);
	like($want, qr/^[1-9]\d*:/, "source $t has rows");
	is(ch_rows($chq), $want,
		"ClickHouse catalog: table $t has exactly the rows of the source");
}

# the remote definitions follow the sources
is( $remote->safe_psql('dw', q{
SELECT string_agg(conrelid::regclass || ' ' || pg_get_constraintdef(oid), ', '
                  ORDER BY conrelid::regclass::text)
  FROM pg_constraint WHERE contype = 'p' AND connamespace = 'public'::regnamespace}),
	'nums PRIMARY KEY (id), parted PRIMARY KEY (id, region), texts PRIMARY KEY (id), times PRIMARY KEY (id)',
	'PostgreSQL catalog: the primary keys of the sources, none for a table without one');
is( $remote->safe_psql('dw', q{
SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
  FROM pg_attribute WHERE attrelid = 'public.nums'::regclass AND attnum > 0}),
	'id integer, i2 smallint, i8 bigint, f4 real, f8 double precision, amount numeric(14,2), flag boolean',
	'PostgreSQL catalog: the columns and types of the source');
is( $local->safe_psql('postgres', q{
SELECT string_agg(name || ' ' || type, ', ')
  FROM ctas_fed.remote_columns('lake', 'dw', 'parted')}),
	'id Int32, region String, v Nullable(Int32)',
	'ClickHouse catalog: key columns of the source are not Nullable');
like($ch->query('SHOW CREATE TABLE dw.parted'),
	qr/ORDER BY \(id, region\)/,
	'ClickHouse catalog: the sorting key is the primary key of the source');
like($ch->query('SHOW CREATE TABLE dw.`Mixed Case`'),
	qr/ORDER BY tuple\(\)/,
	'ClickHouse catalog: a table without a primary key has no sorting key');

# the jobs: one per table, one group per call
is( $local->safe_psql('postgres', q{
SELECT catalog || ' ' || count(*) || ' ' || count(DISTINCT group_id) || ' '
       || string_agg(DISTINCT state, ',')
  FROM ctas_fed.jobs WHERE group_id IS NOT NULL
 GROUP BY catalog ORDER BY catalog}),
	"lake 5 1 committed\nwh 5 1 committed",
	'one committed job per table, the jobs of each call in one group');
is( $local->safe_psql('postgres', q{
SELECT count(DISTINCT group_id) FROM ctas_fed.jobs}),
	'2', 'the two calls have different groups');
$local->safe_psql('postgres',
	'CREATE TABLE wh.public.plain AS SELECT 1 AS x');
is( $local->safe_psql('postgres', q{
SELECT group_id IS NULL FROM ctas_fed.jobs WHERE target = 'public.plain'}),
	't', 'a plain CTAS has no group');

check_invariant(
	node      => $local,
	name      => 'after the commit',
	committed => 1,
	targets   => [],
	pg_remotes => [$remote],
	clickhouse => [$ch]);

# --- ROLLBACK leaves nothing, in either catalog
my $jobs_before = jobs_count();
($ret, $out, $err) = $local->psql('postgres', q{
BEGIN;
SELECT count(*) FROM ctas_fed.create_tables_as('wh', 'r2', source_schema => 'src');
SELECT count(*) FROM ctas_fed.create_tables_as('lake', 'r2', source_schema => 'src');
ROLLBACK;});
is($ret, 0, 'two calls, then ROLLBACK') or diag $err;
is($out, "5\n5", 'both calls loaded five tables before the rollback');
check_invariant(
	node    => $local,
	name    => 'after ROLLBACK',
	targets => [
		(map { { pg => $remote, dbname => 'dw', table => 'r2.' . pg_quote($_) } } @all_tables),
		(map { { ch => $ch, table => "r2.`$_`" } } @all_tables)
	]);
is( $local->safe_psql('postgres', qq{
SELECT count(*) || ' ' || string_agg(DISTINCT state, ',') FROM ctas_fed.jobs
 WHERE target LIKE 'r2.%'}),
	'10 aborted', 'the ten jobs of the rolled back calls are aborted');

# --- ROLLBACK TO SAVEPOINT undoes the calls made inside the savepoint only
($ret, $out, $err) = $local->psql('postgres', q{
BEGIN;
SELECT target FROM ctas_fed.create_tables_as('wh', 'r2', tables => '{src.parted}');
SAVEPOINT s;
SELECT target FROM ctas_fed.create_tables_as('lake', 'r2', tables => '{src.nums}');
SELECT target FROM ctas_fed.create_tables_as('wh', 'r2', tables => '{src.texts}');
ROLLBACK TO SAVEPOINT s;
COMMIT;});
is($ret, 0, 'calls inside and outside a savepoint') or diag $err;
check_invariant(
	node    => $local,
	name    => 'after ROLLBACK TO SAVEPOINT',
	targets => [
		{ ch => $ch, table => 'r2.nums' },
		{ pg => $remote, dbname => 'dw', table => 'r2.texts' }
	]);
is(pg_table($remote, 'dw', 'r2.parted'), pg_table($local, 'postgres', 'src.parted'),
	'the call made before the savepoint is committed');
$remote->safe_psql('dw', 'DROP TABLE r2.parted');

($ret, $out, $err) = psql_verbose($local, q{
BEGIN READ ONLY;
SELECT * FROM ctas_fed.create_tables_as('wh', 'r2', tables => '{src.nums}')});
like($err, qr/ERROR:  25006: cannot execute ctas_fed.create_tables_as\(\) in a read-only transaction/,
	'a read-only transaction cannot call it');

# --- one failing table fails them all: if_exists error on an existing table
$remote->safe_psql('dw', 'CREATE TABLE r2.times (x int)');
($ret, $out, $err) = $local->psql('postgres', q{
BEGIN;
SELECT count(*) FROM ctas_fed.create_tables_as('lake', 'r2', source_schema => 'src');
SELECT count(*) FROM ctas_fed.create_tables_as('wh', 'r2',
    tables => ARRAY['src.nums', 'src.times', 'src.texts']::regclass[]);
COMMIT;});
isnt($ret, 0, 'a table that exists remotely fails the call');
like($err, qr/ERROR:  relation "r2\.times" already exists in catalog "wh"/,
	'the error says which remote table exists');
like($err, qr/CONTEXT:  .*table src\.times/s, 'the error context names the source table');
check_invariant(
	node    => $local,
	name    => 'after a failing table',
	targets => [
		{ pg => $remote, dbname => 'dw', table => 'r2.nums' },
		{ pg => $remote, dbname => 'dw', table => 'r2.texts' },
		(map { { ch => $ch, table => "r2.`$_`" } } @all_tables)
	]);
is($remote->safe_psql('dw', 'SELECT count(*) FROM r2.times'), '0',
	'the existing remote table is untouched');
$remote->safe_psql('dw', 'DROP TABLE r2.times');

# --- one failing table: a value the target refuses, after a good table
$local->safe_psql('postgres', q{
CREATE SCHEMA bad;
CREATE TABLE bad.a_good AS SELECT g AS id FROM generate_series(1, 100) g;
CREATE TABLE bad.b_early AS SELECT 1 AS id, date '1969-12-31' AS d;
});
($ret, $out, $err) = $local->psql('postgres', q{
SELECT * FROM ctas_fed.create_tables_as('lake', 'r2', source_schema => 'bad')});
isnt($ret, 0, 'a value ClickHouse cannot hold fails the call');
like($err, qr/value "1969-12-31" of column "d" does not fit/,
	'with the error of the type map');
like($err, qr/CONTEXT:  .*table bad\.b_early/s, 'naming the source table');
check_invariant(
	node    => $local,
	name    => 'after a refused value',
	targets => [
		{ ch => $ch, table => 'r2.a_good' },
		{ ch => $ch, table => 'r2.b_early' }
	]);
is( $local->safe_psql('postgres', q{
SELECT string_agg(target || ' ' || state, ', ' ORDER BY job_id) FROM ctas_fed.jobs
 WHERE target IN ('r2.a_good', 'r2.b_early')}),
	'r2.a_good aborted, r2.b_early failed',
	'the loaded table is aborted, the failing one failed');

# --- a non-superuser without SELECT on one table: nothing starts
$local->safe_psql('postgres', q{
CREATE ROLE analyst LOGIN;
GRANT USAGE ON FOREIGN SERVER wh TO analyst;
GRANT USAGE ON SCHEMA src TO analyst;
GRANT SELECT ON src.nums, src.texts, src.parted, src."Mixed Case" TO analyst;
});
$jobs_before = jobs_count();
($ret, $out, $err) = $local->psql('postgres', q{
SET ROLE analyst;
SELECT * FROM ctas_fed.create_tables_as('wh', 'r2', source_schema => 'src')});
isnt($ret, 0, 'a table the user may not read fails the call');
like($err, qr/ERROR:  permission denied for table times/, 'with the error of the query');
like($err, qr/CONTEXT:  .*table src\.times/s, 'naming the table');
is(jobs_count(), $jobs_before, 'no job started: privileges are checked before any remote work');
is( $remote->safe_psql('dw',
		q{SELECT count(*) FROM pg_tables WHERE schemaname = 'r2'}),
	'0', 'no remote table');
($ret, $out, $err) = $local->psql('postgres', q{
SET ROLE analyst;
SELECT * FROM ctas_fed.create_tables_as('lake', 'r2', tables => '{src.nums}')});
like($err, qr/permission denied for foreign server lake/,
	'USAGE on the catalog is required');
($ret, $out, $err) = $local->psql('postgres', q{
SET ROLE analyst;
SELECT source, target, rows
  FROM ctas_fed.create_tables_as('wh', 'r2', tables => '{src.nums, src.parted}')});
is($ret, 0, 'the non-superuser copies the tables it may read') or diag $err;
is($out, "src.nums|r2.nums|3000\nsrc.parted|r2.parted|1000", 'and gets one row per table');
is(pg_table($remote, 'dw', 'r2.nums'), pg_table($local, 'postgres', 'src.nums'),
	'rows of the non-superuser arrive');
$remote->safe_psql('dw', 'DROP TABLE r2.nums, r2.parted');

# --- renames and per-table options
($ret, $out, $err) = $local->psql('postgres', q{
SELECT source, target, rows FROM ctas_fed.create_tables_as('wh', 'r2',
    tables => ARRAY['src.nums', 'src."Mixed Case"']::regclass[],
    options => '{"rename": {"src.nums": "nums_copy", "src.\"Mixed Case\"": "mixed"},
                 "column_types": {"src.nums": "i2 integer"},
                 "primary_key": {"src.nums": null}}')});
is($ret, 0, 'renames and per-table options') or diag $err;
is($out, "src.nums|r2.nums_copy|3000\nsrc.\"Mixed Case\"|r2.mixed|500",
	'the targets carry the new names');
is( $remote->safe_psql('dw', q{
SELECT format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = 'r2.nums_copy'::regclass AND attname = 'i2'}),
	'integer', 'column_types of one table applies to it');
is( $remote->safe_psql('dw', q{
SELECT count(*) FROM pg_constraint WHERE conrelid = 'r2.nums_copy'::regclass}),
	'0', 'primary_key null: no primary key');
is(pg_table($remote, 'dw', 'r2.mixed'), pg_table($local, 'postgres', 'src."Mixed Case"'),
	'the renamed table has the rows of its source');

($ret, $out, $err) = $local->psql('postgres', q{
SELECT source, target FROM ctas_fed.create_tables_as('lake', 'r2',
    tables => '{src.nums}',
    options => '{"column_types": "i2 Nullable(Int64), amount Nullable(Float64)",
                 "if_exists": "replace", "order_by": "(id, intHash32(id))"}')});
is($ret, 0, 'options for every table, ClickHouse table options') or diag $err;
is( $local->safe_psql('postgres', q{
SELECT string_agg(name || ' ' || type, ', ')
  FROM ctas_fed.remote_columns('lake', 'r2', 'nums') WHERE name IN ('id', 'i2', 'amount')}),
	'id Int32, i2 Nullable(Int64), amount Nullable(Float64)',
	'column_types as a string applies to every table');
like($ch->query('SHOW CREATE TABLE r2.nums'), qr/ORDER BY \(id, intHash32\(id\)\)/,
	'order_by given replaces the sorting key from the primary key');

# options as JSON numbers and booleans: a streaming load, in batches
($ret, $out, $err) = $local->psql('postgres', q{
SELECT source, target, rows FROM ctas_fed.create_tables_as('wh', 'r2',
    tables => ARRAY['src."Mixed Case"']::regclass[],
    options => '{"atomic": false, "commit_every": 100, "primary_key": "n"}')});
is($ret, 0, 'JSON booleans and numbers as option values') or diag $err;
is($out, 'src."Mixed Case"|r2."Mixed Case"|500', 'the streaming load reports its rows');
is( $local->safe_psql('postgres', q{
SELECT mode || ' ' || state || ' ' || (group_id IS NOT NULL) FROM ctas_fed.jobs
 WHERE target = 'r2."Mixed Case"' ORDER BY job_id DESC LIMIT 1}),
	'streaming committed true', 'the job is a committed streaming load of a group');
is(pg_table($remote, 'dw', 'r2."Mixed Case"'), pg_table($local, 'postgres', 'src."Mixed Case"'),
	'the streamed table has the rows of its source');
is( $remote->safe_psql('dw', q{
SELECT pg_get_constraintdef(oid) FROM pg_constraint
 WHERE conrelid = 'r2."Mixed Case"'::regclass AND contype = 'p'}),
	'PRIMARY KEY (n)', 'primary_key given where the source has none');

# --- errors of the arguments: before any remote work
$jobs_before = jobs_count();
sub call_fails
{
	my ($args, $re, $name) = @_;
	my ($r, $o, $e) = psql_verbose($local,
		"SELECT * FROM ctas_fed.create_tables_as($args)");
	isnt($r, 0, "$name: fails");
	like($e, $re, "$name: error");
}
call_fails(q{'wh', 'r2'},
	qr/ERROR:  22023: exactly one of "tables" and "source_schema" must be given/,
	'neither tables nor a schema');
call_fails(q{'wh', 'r2', '{src.nums}', 'src'},
	qr/ERROR:  22023: exactly one of "tables" and "source_schema" must be given/,
	'both tables and a schema');
call_fails(q{'wh', 'r2', source_schema => 'empty'},
	qr/ERROR:  22023: schema "empty" has no tables/, 'an empty schema');
call_fails(q{'wh', 'r2', source_schema => 'nosuch'},
	qr/ERROR:  3F000: schema "nosuch" does not exist/, 'a missing schema');
call_fails(q{'wh', NULL, '{src.nums}'},
	qr/ERROR:  22004: "remote_schema" must not be null/, 'a null remote schema');
call_fails(q{'wh', 'r2', '{src.nums, NULL}'},
	qr/ERROR:  22004: "tables" must not contain nulls/, 'a null table');
call_fails(q{'wh', 'r2', '{}'},
	qr/ERROR:  22023: "tables" is empty/, 'an empty array');
call_fails(q{'wh', 'r2', '{src.nums, src.nums}'},
	qr/ERROR:  22023: table src.nums is listed more than once/, 'a table listed twice');
call_fails(q{'nowhere', 'r2', '{src.nums}'},
	qr/ERROR:  42704: catalog "nowhere" does not exist/, 'a missing catalog');
call_fails(q{'wh', 'r2', '{src.nums}', options => '{"workers": 2}'},
	qr/ERROR:  22023: unrecognized option "workers" for CREATE TABLE AS into a catalog/,
	'an option CREATE TABLE AS does not know');
call_fails(q{'wh', 'r2', '{src.nums}', options => '{"if_exists": "sometimes"}'},
	qr/ERROR:  22023: invalid value for option "if_exists": "sometimes"/,
	'a bad option value');
call_fails(q{'lake', 'r2', '{src.nums}', options => '{"column_types": {"src.texts": "label String"}}'},
	qr/ERROR:  22023: table "src.texts" named in option "column_types" is not one of the tables of the call/,
	'a per-table option for a table not in the call');
call_fails(q{'wh', 'r2', '{src.nums, src.texts}', options => '{"rename": {"src.texts": "nums"}}'},
	qr/ERROR:  42P07: tables src.nums and src.texts would both be created as "nums"/,
	'two tables renamed to one name');
call_fails(q{'wh', 'r2', '{src.nums}', options => '[1]'},
	qr/ERROR:  22023: "options" must be a JSON object/, 'options not an object');
call_fails(q{'wh', 'r2', '{src.a_seq}'},
	qr/ERROR:  42809: "src.a_seq" is not a table, view or foreign table/, 'a sequence');
is(jobs_count(), $jobs_before, 'no job started by any of them');

check_invariant(
	node       => $local,
	name       => 'at the end',
	committed  => 1,
	pg_remotes => [$remote],
	clickhouse => [$ch]);

$local->stop;
$remote->stop;
done_testing();
