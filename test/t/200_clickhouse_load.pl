
# Copyright (c) 2026, ctas_fed developers

# CREATE TABLE AS into a real ClickHouse server: every row arrives exactly
# (each value compared between PostgreSQL and ClickHouse, special
# characters included), the type map of the README (remote_columns), the
# documented losses and the errors of the type map, column_types, the table
# options, IF NOT EXISTS / if_exists replace and append, WITH NO DATA,
# SELECT INTO, EXPLAIN [ANALYZE], DROP TABLE, remote_tables and
# remote_columns.  After each statement: no _ctas_fed_ table left.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

use CtasFed::Test;

my $ch    = start_clickhouse();
# the worker's own resolver would race the assertions on leftovers
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $chpw  = $ch->{password};
my $churl = $ch->{url};

clickhouse_catalog($local, $ch);
# the log from here on: the set-up above logged its own statements
my $log_start = -s $local->logfile;

# --- helpers (no assertions)

# rows of a TabSeparated text (PostgreSQL COPY or ClickHouse), unescaped;
# NULL becomes undef
sub tsv_rows
{
	my ($text) = @_;
	my %esc = (
		b => "\b", f => "\f", n => "\n", r => "\r", t => "\t",
		v => "\x0b", 0 => "\0");
	my @rows;
	foreach my $line (split /\n/, $text, -1)
	{
		next if $line eq '';
		my @f = map {
			my $v = $_;
			if ($v eq '\N') { undef }
			else { $v =~ s/\\(.)/exists $esc{$1} ? $esc{$1} : $1/ges; $v }
		} split /\t/, $line, -1;
		push @rows, \@f;
	}
	return \@rows;
}

sub norm_float
{
	my ($v, $kind) = @_;
	return 'NULL' unless defined $v;
	my $l = lc $v;
	return 'nan' if $l eq 'nan' || $l eq '-nan';
	return 'inf' if $l eq 'inf' || $l eq 'infinity' || $l eq '+inf';
	return '-inf' if $l eq '-inf' || $l eq '-infinity';
	return unpack('H*', pack($kind eq 'f4' ? 'f' : 'd', $v));
}

sub norm_dec
{
	my ($v) = @_;
	return 'NULL' unless defined $v;
	$v =~ s/(\.\d*?)0+$/$1/;
	$v =~ s/\.$//;
	$v = '0' if $v eq '-0';
	return $v;
}

# Compare rows of PostgreSQL and ClickHouse; kinds: s (exact), f4, f8, dec.
# Returns '' when equal, else a description of the first difference.
sub compare_rows
{
	my ($pg, $chr, @kinds) = @_;
	return "row count: PostgreSQL " . scalar(@$pg) . ", ClickHouse " . scalar(@$chr)
	  if @$pg != @$chr;
	for my $i (0 .. $#$pg)
	{
		for my $j (0 .. $#kinds)
		{
			my ($a, $b) = ($pg->[$i][$j], $chr->[$i][$j]);
			my $k = $kinds[$j];
			if ($k eq 'f4' || $k eq 'f8')
			{
				($a, $b) = (norm_float($a, $k), norm_float($b, $k));
			}
			elsif ($k eq 'dec')
			{
				($a, $b) = (norm_dec($a), norm_dec($b));
			}
			$a //= 'NULL';
			$b //= 'NULL';
			return "row $i column $j: PostgreSQL '$a', ClickHouse '$b'"
			  if $a ne $b;
		}
	}
	return '';
}

sub scratch_tables
{
	return $ch->query(
		"SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_')");
}

sub ch_exists
{
	my ($db, $t) = @_;
	return $ch->query("EXISTS TABLE $db.$t") + 0;
}

sub psql_err
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $local->psql('postgres', $sql);
	return ($ret, $out, $err);
}

# --- the source: every type of the map, special strings, NULLs
$local->safe_psql('postgres', q{
CREATE TABLE src AS
SELECT g AS id,
       (g % 30000)::int2 AS i2,
       (g * 7919) AS i4,
       g::int8 * 1000000007 AS i8,
       (g / 7.0)::float4 AS f4,
       CASE g % 1000 WHEN 1 THEN 'NaN'::float8 WHEN 2 THEN 'Infinity'
            WHEN 3 THEN '-Infinity' WHEN 4 THEN '-0' ELSE g / 3.0::float8 END AS f8,
       (g * 1.01)::numeric(14,2) AS amount,
       round(g / 7.0, 10) AS ratio,
       CASE WHEN g % 5 = 0 THEN NULL ELSE g % 2 = 0 END AS flag,
       CASE g % 13
         WHEN 0 THEN NULL WHEN 1 THEN '' WHEN 2 THEN E'tab\there'
         WHEN 3 THEN E'new\nline' WHEN 4 THEN E'back\\\\slash' WHEN 5 THEN '\N'
         WHEN 6 THEN 'quote''s "dq"' WHEN 7 THEN 'ünïcødé 日本語 😀'
         WHEN 8 THEN E'cr\rlf\n' WHEN 9 THEN E'\x01ctl\x1f' WHEN 10 THEN ' pad '
         WHEN 11 THEN E'\\\\N' ELSE 'plain ' || g END AS label,
       date '2000-01-01' + g AS d,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second' AS ts,
       timestamp '1999-12-31 23:00:00' + g * interval '1 minute' AS tsl,
       md5(g::text)::uuid AS u,
       decode(md5(g::text), 'hex') || '\x000a09ff5c'::bytea AS b,
       ARRAY[g, NULL, g + 1] AS arr,
       ARRAY['a' || g, NULL, E'q''t\t\\\\', ''] AS tarr,
       jsonb_build_object('g', g, 's', E'x\ty') AS doc,
       ('v' || g)::varchar(12) AS vc,
       'c'::char(3) AS ch
  FROM generate_series(1, 20000) g;
});

# psql without -q: the command tag is printed
my ($ret, $out, $err) = psql_verbose($local,
	'CREATE TABLE lake.dw.all_types AS SELECT * FROM src');
is($ret, 0, 'CTAS of every mapped type') or diag $err;
is($out, 'SELECT 20000', 'the command tag is "SELECT 20000"');
is($ch->query('SELECT count() FROM dw.all_types'), "20000\n",
	'20000 rows in ClickHouse');
is(scratch_tables(), "0\n", 'no staging table left after the CTAS');

# the type map, as ClickHouse reports it
is( $local->safe_psql('postgres',
		q{SELECT string_agg(name || ' ' || type || ' ' || nullable, E'\n') FROM ctas_fed.remote_columns('lake', 'dw', 'all_types')}),
	join("\n",
		'id Nullable(Int32) true',
		'i2 Nullable(Int16) true',
		'i4 Nullable(Int32) true',
		'i8 Nullable(Int64) true',
		'f4 Nullable(Float32) true',
		'f8 Nullable(Float64) true',
		'amount Nullable(Decimal(14, 2)) true',
		'ratio Nullable(Decimal(38, 18)) true',
		'flag Nullable(UInt8) true',
		'label Nullable(String) true',
		'd Nullable(Date) true',
		"ts Nullable(DateTime('UTC')) true",
		"tsl Nullable(DateTime('UTC')) true",
		'u Nullable(UUID) true',
		'b Nullable(String) true',
		'arr Array(Nullable(Int32)) false',
		'tarr Array(Nullable(String)) false',
		'doc Nullable(String) true',
		'vc Nullable(String) true',
		'ch Nullable(String) true'),
	'remote_columns shows the type map');

# every value, compared
my $pg_text = $local->safe_psql('postgres', q{
SET timezone = 'Asia/Tokyo';
COPY (SELECT id, i2, i4, i8, f4, f8, amount, ratio, flag::int, label,
             d::text, to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),
             to_char(tsl, 'YYYY-MM-DD HH24:MI:SS'), u::text,
             upper(encode(b, 'hex')), array_to_string(arr, ',', 'NULL'),
             array_to_string(tarr, '|', 'NULL'), doc::text, vc, ch
        FROM src ORDER BY id) TO STDOUT});
my $ch_text = $ch->query(q{
SELECT id, i2, i4, i8, f4, f8, amount, ratio, flag, label,
       toString(d), toString(ts), toString(tsl), toString(u), hex(b),
       arrayStringConcat(arrayMap(x -> ifNull(toString(x), 'NULL'), arr), ','),
       arrayStringConcat(arrayMap(x -> ifNull(x, 'NULL'), tarr), '|'),
       doc, vc, ch
  FROM dw.all_types ORDER BY id FORMAT TabSeparated});
is( compare_rows(
		tsv_rows($pg_text), tsv_rows($ch_text),
		qw(s s s s f4 f8 dec dec s s s s s s s s s s s s)),
	'',
	'every value of every row arrives exactly');

# --- documented loss: fractional seconds, one NOTICE per column
($ret, $out, $err) = psql_err(q{
CREATE TABLE lake.dw.frac AS
SELECT g AS id, timestamptz '2024-01-01 00:00:00.5+00' + g * interval '1 ms' AS t1,
       timestamp '2024-01-01 00:00:00.25' AS t2, timestamp '2024-01-01 00:00:01' AS t3
  FROM generate_series(1, 1000) g});
is($ret, 0, 'CTAS with fractional seconds succeeds') or diag $err;
my @notices = $err =~ /NOTICE:  fractional seconds of column "(\w+)" are dropped/g;
is(join(',', @notices), 't1,t2', 'one NOTICE per column whose fractional seconds are dropped');
is($ch->query('SELECT toString(min(t1)), toString(max(t2)) FROM dw.frac'),
	"2024-01-01 00:00:00\t2024-01-01 00:00:00\n",
	'fractional seconds are truncated, not rounded');

# --- the type map refuses what cannot arrive exactly
sub fails_like
{
	my ($sql, $re, $name) = @_;
	my ($r, $o, $e) = psql_err($sql);
	isnt($r, 0, "$name: fails");
	like($e, $re, "$name: error message");
	is(scratch_tables(), "0\n", "$name: no staging table left");
}

fails_like(q{CREATE TABLE lake.dw.e1 AS SELECT 1 AS id, date '1969-12-31' AS d},
	qr/ERROR:  value "1969-12-31" of column "d" does not fit ClickHouse type Nullable\(Date\)/,
	'date before 1970');
fails_like(q{CREATE TABLE lake.dw.e1 AS SELECT 1 AS id, date '2106-01-01' AS d},
	qr/value "2106-01-01" of column "d" does not fit/, 'date after 2105');
fails_like(q{CREATE TABLE lake.dw.e1 AS SELECT timestamp '1960-05-01 10:00' AS t},
	qr/value "1960-05-01 10:00:00" of column "t" does not fit ClickHouse type Nullable\(DateTime\('UTC'\)\)/,
	'timestamp before 1970');
fails_like(q{CREATE TABLE lake.dw.e1 AS SELECT 'infinity'::timestamptz AS t},
	qr/value "infinity" of column "t" does not fit/, 'infinite timestamp');
fails_like(q{CREATE TABLE lake.dw.e1 AS SELECT 1e30::numeric AS n},
	qr/value "1000000000000000000000000000000" of column "n" does not fit ClickHouse type Nullable\(Decimal\(38, 18\)\)/,
	'numeric overflow of Decimal(38, 18)');
fails_like(q{CREATE TABLE lake.dw.e1 WITH (column_types = 'n Decimal(5,2)') AS SELECT 1.005::numeric AS n},
	qr/value "1.005" of column "n" does not fit ClickHouse type Decimal\(5, 2\)/,
	'numeric that would be rounded');
fails_like(q{CREATE TABLE lake.dw.e1 AS SELECT 'NaN'::numeric AS n},
	qr/value "NaN" of column "n" does not fit/, 'numeric NaN');
fails_like(q{CREATE TABLE lake.dw.e1 WITH (order_by = 'id') AS SELECT NULL::int AS id},
	qr/null value in column "id" cannot be written to ClickHouse type Int32/,
	'NULL in a sorting key column');
fails_like(q{CREATE TABLE lake.dw.e1 AS SELECT NULL::int[] AS a},
	qr/null value in column "a"/, 'NULL array');
fails_like(q{CREATE TABLE lake.dw.e1 AS SELECT '{{1,2},{3,4}}'::int[] AS a},
	qr/value "\{\{1,2\},\{3,4\}\}" of column "a" does not fit/, 'two-dimensional array');
fails_like(q{CREATE TABLE lake.dw.e1 WITH (column_types = 'x Int8') AS SELECT 300 AS x},
	qr/value "300" of column "x" does not fit ClickHouse type Int8/, 'integer overflow');
fails_like(q{CREATE TABLE lake.dw.e1 WITH (column_types = 'x UInt32') AS SELECT -1 AS x},
	qr/value "-1" of column "x" does not fit ClickHouse type UInt32/, 'negative into unsigned');
fails_like(q{CREATE TABLE lake.dw.e1 WITH (column_types = 'x FixedString(2)') AS SELECT 'abc' AS x},
	qr/value "abc" of column "x" does not fit ClickHouse type FixedString\(2\)/,
	'too long for FixedString');
fails_like(q{CREATE TABLE lake.dw.e1 WITH (column_types = 'x Enum8(''a'' = 1)') AS SELECT 'b' AS x},
	qr/value "b" of column "x" does not fit ClickHouse type Enum8\('a' = 1\)/,
	'not an enum name');
fails_like(q{CREATE TABLE lake.dw.e1 WITH (column_types = 'x Int32') AS SELECT 'abc' AS x},
	qr/invalid input syntax for type numeric: "abc"/, 'text that is no number');

$local->safe_psql('postgres', 'CREATE TYPE pair AS (a int, b text)');
($ret, $out, $err) = psql_err(q{CREATE TABLE lake.dw.e2 AS SELECT (1, 'x')::pair AS p});
isnt($ret, 0, 'a composite type does not map');
like($err, qr/ERROR:  column "p" of type pair cannot be mapped to a ClickHouse type/,
	'the error names the column and the type');
like($err, qr/HINT:  Choose the remote type with WITH \(column_types = 'p String'\)/,
	'the hint suggests column_types');
is(ch_exists('dw', 'e2'), 0, 'nothing was created');
fails_like(q{CREATE TABLE lake.dw.e2 WITH (column_types = 'p Nested(a Int32)') AS SELECT 1 AS p},
	qr/ClickHouse type "Nested\(a Int32\)" of column "p" is not supported/,
	'unsupported ClickHouse type in column_types');

# --- column_types overrides
($ret, $out, $err) = psql_err(q{
CREATE TABLE lake.dw.ovr
  WITH (column_types = 'p String, amount Decimal(18,4), n Float64, ts DateTime, d DateTime(''Europe/Berlin''), s LowCardinality(String), u UInt64, e Enum8(''x'' = 1, ''y'' = 2), big UInt64, f FixedString(3), t Date, i Int32')
  AS SELECT (1, E'a\tb')::pair AS p, 12.34::numeric(10,2) AS amount, 1.5::numeric AS n,
            timestamptz '2024-05-06 07:08:09+02' AS ts, date '2024-05-06' AS d,
            'low' AS s, 42 AS u, 'y' AS e, 18446744073709551615::numeric AS big,
            'ab' AS f, timestamp '2024-05-06 23:59:59' AS t, '17' AS i});
is($ret, 0, 'column_types overrides every kind of column') or diag $err;
like($err, qr/NOTICE:  the time of day of column "t" is dropped/, 'NOTICE for a timestamp into Date');
is( $ch->query(q{SELECT p, toString(amount), n, toString(ts, 'UTC'), toString(d, 'UTC'), s, u, e, big, hex(f), toString(t), i FROM dw.ovr FORMAT TabSeparated}),
	"(1,\"a\\tb\")\t12.3400\t1.5\t2024-05-06 05:08:09\t2024-05-06 00:00:00\tlow\t42\ty\t18446744073709551615\t616200\t2024-05-06\t17\n",
	'overridden columns hold the values');
is( $local->safe_psql('postgres',
		q{SELECT string_agg(type, ', ') FROM ctas_fed.remote_columns('lake', 'dw', 'ovr')}),
	"String, Decimal(18, 4), Float64, DateTime, DateTime('Europe/Berlin'), LowCardinality(String), UInt64, Enum8('x' = 1, 'y' = 2), UInt64, FixedString(3), Date, Int32",
	'with exactly the types given');

# --- table options
($ret, $out, $err) = psql_err(q{
CREATE TABLE lake.dw.opts
  WITH (engine = 'ReplacingMergeTree', order_by = '(k, id)', partition_by = 'toYYYYMM(d)',
        primary_key = 'k', settings = 'index_granularity = 1024')
  AS SELECT g AS id, g % 3 AS k, date '2024-01-01' + g AS d, 'x' || g AS s
       FROM generate_series(1, 100) g});
is($ret, 0, 'CTAS with engine, order_by, partition_by, primary_key, settings') or diag $err;
like( $ch->query('SHOW CREATE TABLE dw.opts'),
	qr/ENGINE = ReplacingMergeTree PARTITION BY toYYYYMM\(d\) PRIMARY KEY k ORDER BY \(k, id\) SETTINGS index_granularity = 1024/,
	'the options are the table definition');
like($ch->query('SHOW CREATE TABLE dw.opts'), qr/id Int32,  k Int32,  d Date,  s Nullable\(String\)/,
	'key columns are not Nullable, the others are');
is($ch->query('SELECT count() FROM dw.opts'), "100\n", 'all rows');

# duplicate sort keys into a ReplacingMergeTree, merges stopped: every row
# sent is counted, and only a merge may fold them afterwards
$ch->query('SYSTEM STOP MERGES');
($ret, $out, $err) = psql_verbose($local, q{
CREATE TABLE lake.dw.dups WITH (engine = 'ReplacingMergeTree', order_by = 'k')
  AS SELECT g % 10 AS k, g AS v FROM generate_series(1, 1000) g});
is($out, 'SELECT 1000', 'CTAS of 1000 rows with 10 distinct sort keys') or diag $err;
is($ch->query('SELECT count(), uniqExact(k), sum(v) FROM dw.dups'), "1000\t10\t500500\n",
	'every row arrives, duplicate keys included (merges stopped)');
$ch->query('SYSTEM START MERGES');
$ch->query('OPTIMIZE TABLE dw.dups FINAL');
is($ch->query('SELECT count() FROM dw.dups'), "10\n",
	'a merge folds them (so the count above could fail)');

fails_like(q{CREATE TABLE lake.dw.e3 WITH (engine = 'NoSuchEngine') AS SELECT 1 AS a},
	qr/invalid value for option "engine": "NoSuchEngine".*\nDETAIL:  A table created by ctas_fed must use one of the engines MergeTree/s,
	'unknown engine: refused before any remote work');
fails_like(q{CREATE TABLE lake.dw.e3 WITH (engine = 'Buffer(dw, opts, 16, 10, 100, 10000, 1000000, 10000000, 100000000)') AS SELECT 1 AS k},
	qr/invalid value for option "engine"/, 'an engine that writes into another table is refused');
fails_like(q{CREATE TABLE lake.dw.e3 WITH (engine = 'MergeTree(''/x'')') AS SELECT 1 AS k},
	qr/invalid value for option "engine"/, 'engine arguments are column names and numbers only');
fails_like(q{CREATE TABLE lake.dw.e3 WITH (settings = 'index_granularity = 8192, x = (SELECT 1)') AS SELECT 1 AS k},
	qr/invalid value for option "settings"/, 'settings are name = value pairs');
fails_like(q{CREATE TABLE lake.dw.e3 WITH (order_by = 'nosuchcol') AS SELECT 1 AS a},
	qr/ClickHouse error 47: Unknown identifier: nosuchcol/, 'bad order_by');
fails_like(q{CREATE TABLE lake.dw.e3 WITH (order_by = 'a; DROP TABLE dw.opts') AS SELECT 1 AS a},
	qr/invalid value for option "order_by".*\nDETAIL:  The value contains a semicolon/s,
	'a semicolon in a table option is refused');
fails_like(q{CREATE TABLE lake.dw.e3 WITH (partition_by = 'a) ENGINE = Memory --') AS SELECT 1 AS a},
	qr/invalid value for option "partition_by"/, 'an unbalanced table option is refused');
is(ch_exists('dw', 'opts'), 1, 'nothing was injected');

# --- overrides into narrower floating types: exact or an error naming the value
fails_like(q{CREATE TABLE lake.dw.f32 WITH (column_types = 'x Float32') AS SELECT 0.1::float8 AS x},
	qr/value "0.1" of column "x" does not fit ClickHouse type (Nullable\()?Float32.*\nDETAIL:  The value cannot be represented exactly in Float32/s,
	'float8 -> Float32 that would round is an error');
fails_like(q{CREATE TABLE lake.dw.f64 WITH (column_types = 'x Float64') AS SELECT 9007199254740993::int8 AS x},
	qr/value "9007199254740993" of column "x" does not fit ClickHouse type (Nullable\()?Float64/,
	'int8 beyond 2^53 -> Float64 is an error');
$local->safe_psql('postgres', q{CREATE TABLE lake.dw.f32ok WITH (column_types = 'x Float32') AS SELECT x::float8 FROM (VALUES (0.5), (-2.25), ('Infinity'), ('NaN')) v(x)});
is($ch->query('SELECT count() FROM dw.f32ok'), "4\n", 'values Float32 holds exactly arrive');
is(ch_exists('dw', 'f32'), 0, 'nothing is left of the refused load');

# --- identifiers that need quoting on both sides
($ret, $out, $err) = psql_err(q{CREATE TABLE lake.dw."we`ird\\name" AS SELECT 1 AS "a b", 'x' AS "c`d"});
is($ret, 0, 'table and column names with backquotes and backslashes') or diag $err;
is($ch->query("SELECT `a b`, `c\\`d` FROM dw.`we\\`ird\\\\name`"), "1\tx\n",
	'they arrive as written');

# --- the name is checked first
($ret, $out, $err) = psql_err("\\set VERBOSITY verbose\nCREATE TABLE lake.dw.all_types AS SELECT 1 AS id");
isnt($ret, 0, 'CTAS onto an existing table fails');
like($err, qr/ERROR:  42P07: relation "dw.all_types" already exists in catalog "lake"/,
	'with the error of every target (42P07)');
like($err, qr/HINT:  Use IF NOT EXISTS, or the option if_exists 'replace' or 'append'\./,
	'and its hint');
is($ch->query('SELECT count() FROM dw.all_types'), "20000\n", 'the table is untouched');

($ret, $out, $err) = psql_err('CREATE TABLE IF NOT EXISTS lake.dw.all_types AS SELECT 1 AS id');
is($ret, 0, 'IF NOT EXISTS on an existing table succeeds');
like($err, qr/NOTICE:  relation "dw.all_types" already exists in catalog "lake", skipping/, 'with a NOTICE');
is($ch->query('SELECT count() FROM dw.all_types'), "20000\n", 'and leaves the table alone');

# --- replace and append
$local->safe_psql('postgres',
	q{CREATE TABLE lake.dw.ra AS SELECT g AS id, 'old' AS s FROM generate_series(1, 10) g});
($ret, $out, $err) = psql_err(
	q{CREATE TABLE lake.dw.ra WITH (if_exists = 'replace', order_by = 'id') AS SELECT g AS id, 'new' AS s FROM generate_series(1, 5) g});
is($ret, 0, "if_exists 'replace'") or diag $err;
is($ch->query('SELECT count(), min(s), max(s) FROM dw.ra'), "5\tnew\tnew\n", 'the table was replaced');
like($ch->query('SHOW CREATE TABLE dw.ra'), qr/ORDER BY id/, 'with the new definition');
is(scratch_tables(), "0\n", 'the old table is gone');

($ret, $out, $err) = psql_err(
	q{CREATE TABLE lake.dw.ra WITH (if_exists = 'append') AS SELECT g + 100 AS id, 'app' AS s FROM generate_series(1, 7) g});
is($ret, 0, "if_exists 'append'") or diag $err;
is($ch->query("SELECT count(), countIf(s = 'app') FROM dw.ra"), "12\t7\n", 'the rows were appended');
is(scratch_tables(), "0\n", 'no staging table left');

($ret, $out, $err) = psql_err(
	q{CREATE TABLE lake.dw.ra WITH (if_exists = 'append') AS SELECT 1 AS id, 'x' AS nosuch});
isnt($ret, 0, 'append with a column the table lacks fails');
like($err, qr/column "nosuch" does not exist in table "dw.ra" of catalog "lake"/, 'naming the column');

($ret, $out, $err) = psql_err(
	q{CREATE TABLE lake.dw.ra WITH (if_exists = 'append') AS SELECT NULL::int AS id, 'x' AS s});
isnt($ret, 0, 'append of NULL into a non-Nullable column fails');
like($err, qr/null value in column "id" cannot be written to ClickHouse type Int32/, 'naming the column');
is($ch->query('SELECT count() FROM dw.ra'), "12\n", 'nothing was appended');

# append to a partitioned MergeTree table: parts are attached
$local->safe_psql('postgres',
	q{CREATE TABLE lake.dw.parted WITH (partition_by = 'toYYYYMM(d)', order_by = 'd') AS SELECT date '2024-01-01' + g AS d, g AS v FROM generate_series(0, 59) g});
$local->safe_psql('postgres',
	q{CREATE TABLE lake.dw.parted WITH (if_exists = 'append') AS SELECT date '2024-02-15' + g AS d, g AS v FROM generate_series(0, 59) g});
is($ch->query('SELECT count(), sum(v) FROM dw.parted'), "120\t3540\n",
	'append into a partitioned table');

# several statements on one table in one transaction
$local->safe_psql('postgres', q{
BEGIN;
CREATE TABLE lake.dw.multi AS SELECT 1 AS id;
CREATE TABLE lake.dw.multi WITH (if_exists = 'append') AS SELECT 2 AS id;
CREATE TABLE lake.dw.multi WITH (if_exists = 'append') AS SELECT 3 AS id;
COMMIT;
});
is($ch->query('SELECT groupArray(id) FROM (SELECT id FROM dw.multi ORDER BY id)'), "[1,2,3]\n",
	'create then append twice in one transaction');
($ret, $out, $err) = psql_err(q{
BEGIN;
CREATE TABLE lake.dw.multi2 AS SELECT 1 AS id;
CREATE TABLE lake.dw.multi2 AS SELECT 2 AS id;
COMMIT;});
like($err, qr/relation "dw.multi2" already exists in catalog "lake"/,
	'a table created earlier in the transaction counts as existing');
is(ch_exists('dw', 'multi2'), 0, 'and the transaction left nothing');
$local->safe_psql('postgres', q{
BEGIN;
CREATE TABLE lake.dw.multi3 AS SELECT 1 AS id;
DROP TABLE lake.dw.multi3;
CREATE TABLE lake.dw.multi3 AS SELECT 3 AS id;
COMMIT;
});
is($ch->query('SELECT groupArray(id) FROM dw.multi3'), "[3]\n", 'create, drop, create in one transaction');
is(scratch_tables(), "0\n", 'no scratch table left');

# --- WITH NO DATA, SELECT INTO, AS EXECUTE
$local->safe_psql('postgres', 'CREATE TABLE lake.dw.nodata AS SELECT * FROM src WITH NO DATA');
is($ch->query('SELECT count() FROM dw.nodata'), "0\n", 'WITH NO DATA creates an empty table');
like($ch->query('SHOW CREATE TABLE dw.nodata'), qr/label Nullable\(String\)/, 'with the columns');
$local->safe_psql('postgres', 'SELECT id, label INTO lake.dw.selinto FROM src WHERE id <= 100');
is($ch->query('SELECT count() FROM dw.selinto'), "100\n", 'SELECT INTO');
$local->safe_psql('postgres', q{
PREPARE q(int) AS SELECT id FROM src WHERE id <= $1;
CREATE TABLE lake.dw.exec AS EXECUTE q(42);});
is($ch->query('SELECT count() FROM dw.exec'), "42\n", 'CREATE TABLE AS EXECUTE');

# --- EXPLAIN
($ret, $out, $err) = psql_err(q{EXPLAIN CREATE TABLE lake.dw.expl WITH (order_by = 'id') AS SELECT id, label FROM src});
is($ret, 0, 'EXPLAIN') or diag $err;
like($out, qr/Format: RowBinary/, 'EXPLAIN shows the format');
like($out, qr/Remote DDL: CREATE TABLE `dw`.`expl` \(`id` Int32, `label` Nullable\(String\)\) ENGINE = MergeTree ORDER BY id/,
	'EXPLAIN shows the ClickHouse DDL');
is(ch_exists('dw', 'expl'), 0, 'EXPLAIN creates nothing');
is(scratch_tables(), "0\n", 'not even a staging table');
($ret, $out, $err) = psql_err(q{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) CREATE TABLE lake.dw.expl AS SELECT id FROM src});
is($ret, 0, 'EXPLAIN ANALYZE') or diag $err;
like($out, qr/Rows Sent: 20000/, 'EXPLAIN ANALYZE reports the rows sent');
is($ch->query('SELECT count() FROM dw.expl'), "20000\n", 'EXPLAIN ANALYZE runs the load');

# --- DROP TABLE
$local->safe_psql('postgres', 'BEGIN; DROP TABLE lake.dw.expl; ROLLBACK;');
is(ch_exists('dw', 'expl'), 1, 'DROP TABLE rolled back: the table is back');
is($ch->query('SELECT count() FROM dw.expl'), "20000\n", 'with its rows');
$local->safe_psql('postgres', 'DROP TABLE lake.dw.expl');
is(ch_exists('dw', 'expl'), 0, 'DROP TABLE');
($ret, $out, $err) = psql_err('DROP TABLE lake.dw.expl');
like($err, qr/ERROR:  table "dw.expl" does not exist in catalog "lake"/, 'DROP TABLE of a missing table');
($ret, $out, $err) = psql_err('DROP TABLE IF EXISTS lake.dw.expl');
is($ret, 0, 'DROP TABLE IF EXISTS of a missing table');
like($err, qr/NOTICE:  table "dw.expl" does not exist in catalog "lake", skipping/, 'with a NOTICE');
is(scratch_tables(), "0\n", 'no scratch table left');

# --- remote_tables
like( $local->safe_psql('postgres',
		q{SELECT string_agg(name || ':' || kind, ',' ORDER BY name) FROM ctas_fed.remote_tables('lake', 'dw')}),
	qr/all_types:MergeTree,.*opts:ReplacingMergeTree/, 'remote_tables lists the tables and engines');
($ret, $out, $err) = psql_err(q{SELECT * FROM ctas_fed.remote_tables('lake', 'nodb')});
like($err, qr/database "nodb" does not exist in ClickHouse catalog "lake"/, 'remote_tables of a missing database');
($ret, $out, $err) = psql_err(q{SELECT * FROM ctas_fed.remote_columns('lake', 'dw', 'nosuch')});
like($err, qr/table "dw.nosuch" does not exist in catalog "lake"/, 'remote_columns of a missing table');

# --- the scratch-table matrix: a dropped table whose name exists again
# A transaction drops dw.again and the local server crashes after its
# renames, before its commit record: the table now sits under a scratch
# name and the transaction aborted.  While the local server is down,
# someone creates dw.again again.  The resolver must leave both tables
# alone and say so; once the name is free, it puts the dropped table back.
$local->safe_psql('postgres',
	q{CREATE TABLE lake.dw.again AS SELECT 'dropped by an aborted transaction' AS v});
{
	my ($in, $out, $err) = ('', '', '');
	my $offset = -s $local->logfile;
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $local->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	$in .= "SET ctas_fed.fault_point = 'after_rename';\nBEGIN;\nDROP TABLE lake.dw.again;\nCOMMIT;\n";
	$h->pump while $h->pumpable && $in ne '';
	$local->wait_for_log(qr/stopped at fault point "after_rename"/, $offset);
	is(ch_exists('dw', 'again'), 0, 'after the rename, the dropped table is gone');
	$local->stop('immediate');
	$h->finish;
}
$ch->query('CREATE TABLE dw.again (v String) ENGINE = MergeTree ORDER BY tuple()');
$ch->query(q{INSERT INTO dw.again VALUES ('made by someone else')});
$local->start;
like( $local->safe_psql('postgres',
		q{SELECT string_agg(action, E'\n') FROM ctas_fed.resolve_in_doubt('lake') WHERE action <> 'rolled back'}),
	qr/^left: table "dw.again" exists again; "dw._ctas_fed_\w+" was left$/,
	'a table dropped by an aborted transaction whose name exists again: left and reported');
is($ch->query('SELECT v FROM dw.again'), "made by someone else\n",
	'the table that exists again is untouched');
is(scratch_tables(), "1\n", 'the dropped table is left under its scratch name');
# once the name is free, the resolver (woken by the job in doubt, or asked)
# renames the dropped table back
$ch->query('DROP TABLE dw.again');
ok( wait_until(30, sub {
			$local->safe_psql('postgres',
				q{SELECT count(*) FROM ctas_fed.resolve_in_doubt('lake')});
			scratch_tables() eq "0\n";
		}),
	'once the name is free, the resolver puts the dropped table back');
is($ch->query('SELECT v FROM dw.again'), "dropped by an aborted transaction\n",
	'the dropped table is back, with its content');
$local->safe_psql('postgres', 'DROP TABLE lake.dw.again');

# --- no password in errors, the server log or ctas_fed.jobs
my $badpw = 'Bad-ch-pw-honest-3e8a';
$local->safe_psql('postgres', qq{
SET log_statement = 'none';
CREATE SERVER badlake FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url '$churl');
CREATE USER MAPPING FOR PUBLIC SERVER badlake OPTIONS (user 'default', password '$badpw');
});
($ret, $out, $err) = psql_verbose($local, 'CREATE TABLE badlake.dw.nope AS SELECT 1 AS a');
like($err, qr/^ERROR:  28P01: .*\n(?:.*\n)*DETAIL:  HTTP status 401, ClickHouse error 193: Wrong password for user default/m,
	'a wrong ClickHouse password: 28P01 with the server\'s answer');
my $seen_text = $err . $local->safe_psql('postgres',
	q{SELECT string_agg(j::text, E'\n') FROM ctas_fed.jobs j});
my $log_text = slurp_file($local->logfile, $log_start);
like($log_text, qr/Wrong password for user default/, 'the error is in the server log');
foreach my $secret ($chpw, $badpw)
{
	unlike($seen_text, qr/\Q$secret\E/, 'no ClickHouse password in the error or the jobs');
	unlike($log_text, qr/\Q$secret\E/, 'no ClickHouse password in the server log');
}

# --- nothing of ours is left running or staged
is($ch->query("SELECT count() FROM system.processes WHERE startsWith(query_id, 'ctas_fed_')"),
	"0\n", 'no query of ours is running');
is(scratch_tables(), "0\n", 'no scratch table at the end');

$local->stop;
$ch->stop;
done_testing();
