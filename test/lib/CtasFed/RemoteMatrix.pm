
# Copyright (c) 2026, ctas_fed developers

=pod

=head1 NAME

CtasFed::RemoteMatrix - the PostgreSQL target against a remote of another
major version

=head1 SYNOPSIS

  use CtasFed::RemoteMatrix;
  run_remote_matrix(13);      # test/t/801_remote_pg13.pl

=head1 DESCRIPTION

The core of the PostgreSQL target, against one remote server of major
version $major (CtasFed::Test::new_versioned_remote_cluster, binaries from
F<test/pgversions.sh>), started once and used by every case:

=over

=item * EXPLAIN (VERBOSE) names the remote version, and the DDL is the
one for that version; a catalog that cannot be reached still has an
EXPLAIN;

=item * every type of the type map through the binary COPY format (the
types the remote has) and the text format (all of them, an enum forcing
it): digests of both sides, the remote column types, and the types the
remote lacks created as text with a NOTICE naming the column;

=item * if_exists replace and append;

=item * two-phase commit, and abort: a transaction whose second PREPARE
fails rolls back the first one (ROLLBACK PREPARED);

=item * a COMMIT PREPARED that never arrives, settled by
ctas_fed.resolve_in_doubt();

=item * a parallel load, ctas_fed.create_tables_as();

=item * a continuous sync whose source gets inserts, updates and deletes,
converging row for row, then stopped;

=item * attacks: a remote with max_prepared_transactions = 0 (two_phase
auto commits in one phase, two_phase on refuses), a remote role that does
not own the database (public schema: open before 15, closed from 15).

=back

Every case runs as a remote role that is not a superuser (loader, which
owns the database dw).  Every case asserts the remote state (check_invariant: no prepared
transaction of ours left).  The time of each run is printed with note().

=cut

package CtasFed::RemoteMatrix;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use CtasFed::Test;

our @EXPORT = qw(run_remote_matrix);

# name => [type, text of the edge value, text of an ordinary value, the
# first major version that has the type (undef: all)]
my @types = (
	[ i2   => 'int2',             q{'-32768'},               q{'7'} ],
	[ i4   => 'int4',             q{'-2147483648'},          q{'42'} ],
	[ i8   => 'int8',             q{'9223372036854775807'},  q{'-1'} ],
	[ f4   => 'float4',           q{'NaN'},                  q{'1.17549435e-38'} ],
	[ f8   => 'float8',           q{'-Infinity'},            q{'2.2250738585072014e-308'} ],
	[ num  => 'numeric',          q{'NaN'},                  q{'-123456789012345678901234567890.123456789'} ],
	[ nm   => 'numeric(10,3)',    q{'-1234567.891'},         q{'0.001'} ],
	[ t    => 'text',             q{E'tab\there\nnl\\\\bs \\\\N "q" ''s'''}, q{'ünïcødé 漢字 🐘'} ],
	[ vc   => 'varchar(5)',       q{''},                     q{'abcde'} ],
	[ ch   => 'char(3)',          q{''},                     q{'ab'} ],
	[ b    => 'bytea',            q{'\x'},                   q{'\x00ff5c0a09'} ],
	[ bo   => 'bool',             q{'t'},                    q{'f'} ],
	[ d    => 'date',             q{'-infinity'},            q{'4713-11-24 BC'} ],
	[ ts   => 'timestamp',        q{'infinity'},             q{'294276-12-31 23:59:59.999999'} ],
	[ tstz => 'timestamptz',      q{'-infinity'},            q{'2024-02-29 12:34:56.789012+05:30'} ],
	[ tm   => 'time',             q{'24:00:00'},             q{'23:59:59.999999'} ],
	[ ttz  => 'timetz',           q{'00:00:00+14'},          q{'12:00:00-12'} ],
	[ iv   => 'interval',         q{'-178000000 years'},     q{'1 year 2 mons 3 days 04:05:06.789'} ],
	[ u    => 'uuid',             q{'00000000-0000-0000-0000-000000000000'}, q{'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'} ],
	[ j    => 'json',             q{'{}'},                   q{'{"a": [1, 2.5, "x\"y", null]}'} ],
	[ jb   => 'jsonb',            q{'[]'},                   q{'{"ü": {"k": true}, "n": 1.000}'} ],
	[ jp   => 'jsonpath',         q{'$'},                    q{'$.a[*] ? (@ > 1)'} ],
	[ x    => 'xml',              q{'<a/>'},                 q{'<r a="1">t &amp; u</r>'} ],
	[ ip   => 'inet',             q{'::1'},                  q{'192.168.1.7/24'} ],
	[ ci   => 'cidr',             q{'10.0.0.0/8'},           q{'::ffff:1.2.3.0/120'} ],
	[ mac  => 'macaddr',          q{'08:00:2b:01:02:03'},    q{'ff:ff:ff:ff:ff:ff'} ],
	[ mac8 => 'macaddr8',         q{'08:00:2b:01:02:03:04:05'}, q{'00:00:00:00:00:00:00:00'} ],
	[ bt   => 'bit(3)',           q{'000'},                  q{'101'} ],
	[ vb   => 'varbit',           q{''},                     q{'1010101010101'} ],
	[ tsv  => 'tsvector',         q{''},                     q{'a:1A fat:2B,4C cat:5D'} ],
	[ tsq  => 'tsquery',          q{''},                     q{'fat & (rat | !cat)'} ],
	[ ir   => 'int4range',        q{'empty'},                q{'[1,10)'} ],
	[ nr   => 'numrange',         q{'(,)'},                  q{'[1.5,2.25]'} ],
	[ tr   => 'tstzrange',        q{'[-infinity,infinity]'}, q{'[2024-01-01 00:00+00,2024-01-02 00:00+00)'} ],
	[ dr   => 'daterange',        q{'empty'},                q{'[2000-01-01,2000-02-01)'} ],
	[ pt   => 'point',            q{'(0,0)'},                q{'(1.5,-2.25)'} ],
	[ bx   => 'box',              q{'(1,1),(0,0)'},          q{'(3,4),(1,2)'} ],
	[ ci2  => 'circle',           q{'<(0,0),1>'},            q{'<(1,2),3.5>'} ],
	[ pg   => 'polygon',          q{'((0,0),(1,1),(1,0))'},  q{'((0,0),(2,0),(2,2),(0,2))'} ],
	[ pa   => 'path',             q{'[(0,0),(1,1)]'},        q{'((0,0),(1,1),(2,0))'} ],
	[ ls   => 'lseg',             q{'[(0,0),(1,1)]'},        q{'[(1,2),(3,4)]'} ],
	[ lsn  => 'pg_lsn',           q{'0/0'},                  q{'FFFFFFFF/FFFFFFFF'} ],
	[ oi   => 'oid',              q{'0'},                    q{'4294967295'} ],
	[ nmn  => 'name',             q{''},                     q{'a name'} ],
	[ chr  => '"char"',           q{''},                     q{'x'} ],
	[ ia   => 'int4[]',           q{'{}'},                   q{'{{1,NULL},{3,4}}'} ],
	[ ta   => 'text[]',           q{'{}'},                   q{'{NULL,"","\\\\N","a,b","{x}"}'} ],
	[ na   => 'numeric[]',        q{'{}'},                   q{'[0:1]={1.5,NaN}'} ],
	[ jba  => 'jsonb[]',          q{'{}'},                   q{'{"{\"a\": 1}","[]"}'} ],
	[ ra   => 'int4range[]',      q{'{}'},                   q{'{"[1,2)",empty}'} ],
	[ dom  => 'posint',           q{'1'},                    q{'2147483647'} ],
	[ x8   => 'xid8',             q{'0'},                    q{'18446744073709551615'}, 13 ],
	[ snap => 'pg_snapshot',      q{'10:20:10,14,15'},       q{'1:1:'},                 13 ],
	[ mr   => 'int4multirange',   q{'{}'},                   q{'{[1,3),[5,7)}'},        14 ],
	[ nmr  => 'nummultirange',    q{'{}'},                   q{'{(,0],[1.5,2]}'},       14 ],
	[ mra  => 'datemultirange[]', q{'{}'},                   q{'{"{[2000-01-01,2000-01-03)}"}'}, 14 ],
);

# the columns that travel as text whatever the format of the rest: from
# which major version on they may go in binary (src/postgres/typemap.c,
# CtasPgBinarySafe)
my %binary_from = (tsq => 99, num => 14, nm => 14, na => 14, nr => 14);

# exit status, stdout and stderr of psql running $sql on $node
sub run_sql
{
	my ($node, $sql) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', $sql);
	return ($rc, $out, $err);
}

sub run_remote_matrix
{
	my ($major) = @_;
	my $started = time;

	my $local = new_cluster('local', conf => q{
wal_level = logical
max_wal_senders = 4
max_replication_slots = 4
max_worker_processes = 16
max_parallel_workers = 8
ctas_fed.resolver_naptime = 3600});
	my $remote = new_versioned_remote_cluster(
		$major,
		roles     => { loader => 'secret', visitor => 'secret' },
		databases => { dw => 'loader' });
	my $vnum = $remote->version_num;
	ok($vnum >= $major * 10000 && $vnum < ($major + 1) * 10000,
		"the remote runs PostgreSQL $major ($vnum)");
	note(sprintf('PostgreSQL %d: servers started after %.1f s', $major,
			time - $started));

	postgres_catalog($local, $remote);
	my $fp = start_fault_proxy($remote->port);
	postgres_catalog($local, undef, name => 'whfp', port => $fp->port,
		extension => 0);
	postgres_catalog($local, $remote, name => 'whvisitor', extension => 0,
		user => 'visitor');

	my @have = grep { !defined $_->[4] || $_->[4] <= $major } @types;
	my @lack = grep { defined $_->[4] && $_->[4] > $major } @types;
	my $cols = join(', ', map { "$_->[0] $_->[1]" } @types);
	my $row = sub {
		my ($id, $k) = @_;
		return "($id, " . join(', ', map { "$_->[$k]::$_->[1]" } @types) . ", 'ok')";
	};
	$local->safe_psql('postgres', qq{
CREATE DOMAIN posint AS int4 CHECK (VALUE > 0);
CREATE TYPE mood AS ENUM ('sad', 'ok');
CREATE TABLE types_src (id int PRIMARY KEY, $cols, e mood);
INSERT INTO types_src (id) VALUES (1);
INSERT INTO types_src VALUES } . $row->(2, 2) . ', ' . $row->(3, 3) . qq{;
CREATE TABLE big (id int, label text, n int8, f float8, d date);
INSERT INTO big SELECT g, CASE WHEN g % 13 = 0 THEN NULL ELSE E'l\\t' || g END,
  g::int8 * 1000000007, g * 0.25, date '2000-01-01' + g % 9000
  FROM generate_series(1, 60000) g;
ANALYZE big;
CREATE SCHEMA src;
CREATE TABLE src.a (id int PRIMARY KEY, v text);
INSERT INTO src.a SELECT g, 'a' || g FROM generate_series(1, 100) g;
CREATE TABLE src.b (k text, n numeric(8,2), ts timestamptz);
INSERT INTO src.b SELECT 'k' || g, g / 3.0, timestamptz '2024-01-01 00:00+00' + g * interval '1 h'
  FROM generate_series(1, 50) g;
CREATE TABLE s_src (id int PRIMARY KEY, v text, n numeric(12,2), jb jsonb, ia int[]);
INSERT INTO s_src SELECT g, 'v' || g, g * 1.5, jsonb_build_object('g', g), ARRAY[g, -g]
  FROM generate_series(1, 2000) g;
});
	my $sysid = $local->safe_psql('postgres',
		'SELECT system_identifier FROM pg_control_system()');

	# --- EXPLAIN (VERBOSE) names the remote version
	my $explain = $local->safe_psql('postgres',
		'EXPLAIN (VERBOSE, COSTS OFF) CREATE TABLE wh.public.x AS SELECT id, mr FROM types_src');
	like($explain, qr/^\s*Remote Server: PostgreSQL $major\.\d+$/m,
		'EXPLAIN: the remote version');
	like($explain,
		qr/Remote DDL: CREATE TABLE public\.x \(id integer, mr @{[ $major >= 14 ? 'int4multirange' : 'text' ]}\)/,
		'EXPLAIN: the remote DDL for this version');

	# EXPLAIN needs no remote: DDL as for our version
	postgres_catalog($local, undef, name => 'whdown', port => free_port(),
		extension => 0);
	$explain = $local->safe_psql('postgres',
		'EXPLAIN (VERBOSE, COSTS OFF) CREATE TABLE whdown.public.x AS SELECT id, mr FROM types_src');
	like($explain, qr/^\s*Remote Server: not reachable\n\s*Remote DDL: CREATE TABLE public\.x \(id integer, mr int4multirange\)$/m,
		'EXPLAIN of a catalog that cannot be reached');

	# --- every type: binary format (the types the remote has and takes in
	# binary); those it does not take in binary force the text format
	my $have_list = join(', ', 'id',
		map { $_->[0] } grep { ($binary_from{ $_->[0] } // 0) <= $major } @have);
	# load "SELECT $cols FROM types_src" into $table, in $fmt: stderr
	my $load = sub {
		my ($table, $cols, $fmt, $label) = @_;
		my ($r, $o, $e) = run_sql($local, qq{
SET client_min_messages = debug1;
CREATE TABLE wh.public.$table AS SELECT $cols FROM types_src;});
		is($r, 0, "$label: the load succeeds") or diag $e;
		like($e, qr/COPY into catalog "wh" uses the $fmt format/,
			"$label: the $fmt COPY format");
		is(pg_digest($remote, 'dw', "public.$table"),
			sql_digest($local, 'postgres', "SELECT $cols FROM types_src"),
			"$label: every value arrives exactly");
		return $e;
	};
	foreach my $c (sort keys %binary_from)
	{
		$load->("fmt_$c", "id, $c",
			$binary_from{$c} <= $major ? 'binary' : 'text', "column $c");
	}
	$load->('types_bin', $have_list, 'binary', 'binary');

	# --- every type: text format (an enum forces it); the types the remote
	# lacks are text there
	my $err = $load->('types_txt', '*', 'text', 'text');
	my %lacks = map { $_->[0] => 1 } @lack;
	my $want_types = join(', ',
		map {
			my ($n, $t) = split / /, $_, 2;
			$n eq 'e' ? 'e text'
			  : $lacks{$n} ? "$n " . ($t =~ /\[\]$/ ? 'text[]' : 'text')
			  : $_
		  } split(/\n/, $local->safe_psql('postgres', q{
SELECT attname || ' ' || format_type(CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END,
                                     CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END)
  FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
 WHERE attrelid = 'types_src'::regclass AND attnum > 0 ORDER BY attnum})));
	is($remote->safe_psql('dw', q{
SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
  FROM pg_attribute WHERE attrelid = 'public.types_txt'::regclass AND attnum > 0}),
		$want_types, 'text: the remote column types, text where the remote lacks one');
	foreach my $t (@lack)
	{
		like($err, qr/NOTICE:  column "$t->[0]" of type \Q$t->[1]\E is created as text(\[\])? in catalog "wh"\nDETAIL:  The remote server runs PostgreSQL $major\./,
			"text: a NOTICE names column $t->[0], which PostgreSQL $major lacks");
	}

	# --- numeric infinity: PostgreSQL 14 has it
	my ($rc, $out);
	($rc, $out, $err) = run_sql($local,
		q{CREATE TABLE wh.public.inf AS SELECT g AS id, CASE WHEN g = 2 THEN 'Infinity'::numeric END AS ninf FROM generate_series(1, 3) g});
	if ($major >= 14)
	{
		is($rc, 0, 'numeric Infinity arrives') or diag $err;
		is($remote->safe_psql('dw', 'SELECT ninf FROM public.inf WHERE id = 2'),
			'Infinity', 'numeric Infinity arrives exactly');
	}
	else
	{
		isnt($rc, 0, 'numeric Infinity: the load fails');
		like($err, qr/ninf.*Infinity|Infinity.*ninf/s,
			'numeric Infinity: the error names the column and the value')
		  or diag $err;
	}

	# --- replace and append
	($rc, $out, $err) = run_sql($local, q{
CREATE TABLE wh.public.ra AS SELECT id, v FROM src.a WHERE id <= 10;
CREATE TABLE wh.public.ra WITH (if_exists = 'replace') AS SELECT id, v FROM src.a WHERE id > 90;
CREATE TABLE wh.public.ra WITH (if_exists = 'append') AS SELECT id, v FROM src.a WHERE id <= 5;});
	is($rc, 0, 'replace, append') or diag $err;
	is(pg_digest($remote, 'dw', 'public.ra'),
		sql_digest($local, 'postgres', 'SELECT id, v FROM src.a WHERE id > 90 OR id <= 5'),
		'replace, append: the rows of the new table and the appended ones');

	# --- two-phase commit, and abort: the second PREPARE (through the proxy)
	# fails, the first prepared transaction is rolled back
	my $two = q{BEGIN;
CREATE TABLE wh.public.tp1 AS SELECT * FROM src.a;
CREATE TABLE whfp.public.tp2 AS SELECT * FROM src.a;
COMMIT;};
	($rc, $out, $err) = run_sql($local, $two);
	is($rc, 0, '2PC: two catalogs commit') or diag $err;
	check_invariant(
		name      => "PostgreSQL $major, 2PC commit",
		node      => $local,
		committed => 1,
		targets   => [
			map { { pg => $remote, dbname => 'dw', table => "public.$_",
				expect => sql_digest($local, 'postgres', 'SELECT * FROM src.a') } }
			  qw(tp1 tp2) ],
		jobs => [ [ 'wh', 'public.tp1', 'committed' ], [ 'whfp', 'public.tp2', 'committed' ] ]);
	$two =~ s/tp(\d)/ta$1/g;
	my $rule = $fp->set_rule(match => 'PREPARE TRANSACTION', action => 'drop_request');
	($rc, $out, $err) = run_sql($local, $two);
	isnt($rc, 0, '2PC abort: the commit fails when a PREPARE fails');
	ok($fp->hits($rule) >= 1, '2PC abort: the PREPARE was dropped');
	$fp->clear;
	check_invariant(
		name      => "PostgreSQL $major, 2PC abort",
		node      => $local,
		committed => 0,
		targets   => [ map { { pg => $remote, dbname => 'dw', table => "public.$_" } } qw(ta1 ta2) ],
		jobs      => [ [ 'wh', 'public.ta1', 'aborted' ] ],
		resolve   => 1);

	# --- a COMMIT PREPARED that never arrives: the resolver settles it
	$rule = $fp->set_rule(match => 'COMMIT PREPARED', action => 'drop_request');
	($rc, $out, $err) = run_sql($local,
		'CREATE TABLE whfp.public.lost AS SELECT * FROM src.a');
	is($rc, 0, 'lost COMMIT PREPARED: the local commit stands') or diag $err;
	like($err, qr/WARNING:  could not commit prepared transaction "ctas_fed_${sysid}_/,
		'lost COMMIT PREPARED: a WARNING names the gid');
	$fp->clear;
	check_invariant(
		name      => "PostgreSQL $major, lost COMMIT PREPARED",
		node      => $local,
		committed => 1,
		targets   => [ { pg => $remote, dbname => 'dw', table => 'public.lost',
			expect => sql_digest($local, 'postgres', 'SELECT * FROM src.a') } ],
		jobs      => [ [ 'whfp', 'public.lost', 'committed' ] ],
		resolve   => 1);

	# --- a parallel load
	($rc, $out, $err) = run_sql($local,
		q{CREATE TABLE wh.public.par WITH (parallel = 2, primary_key = 'id') AS SELECT * FROM big});
	is($rc, 0, 'parallel: the load succeeds') or diag $err;
	unlike($err, qr/NOTICE/, 'parallel: split as asked');
	is(pg_digest($remote, 'dw', 'public.par'),
		sql_digest($local, 'postgres', 'SELECT * FROM big'),
		'parallel: every row arrives exactly');
	is($remote->safe_psql('dw', q{
SELECT count(*) FROM pg_class WHERE starts_with(relname, '_ctas_fed_')}),
		'0', 'parallel: no scratch table left');

	# --- create_tables_as
	($rc, $out, $err) = run_sql($local, q{
SELECT count(*) FROM ctas_fed.create_tables_as('wh', 'public', source_schema => 'src')});
	is($rc, 0, 'create_tables_as succeeds') or diag $err;
	is(pg_digest($remote, 'dw', 'public.a'),
		sql_digest($local, 'postgres', 'SELECT * FROM src.a'), 'create_tables_as: table a');
	is(pg_digest($remote, 'dw', 'public.b'),
		sql_digest($local, 'postgres', 'SELECT * FROM src.b'), 'create_tables_as: table b');

	# --- a continuous sync: inserts, updates and deletes converge
	($rc, $out, $err) = run_sql($local,
		q{CREATE TABLE wh.public.s WITH (sync = 'continuous') AS SELECT * FROM s_src});
	is($rc, 0, 'sync: the statement succeeds') or diag $err;
	ok(wait_until(60, sub {
		$local->safe_psql('postgres',
			q{SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'}) eq '1' }),
		'sync: the copy ends, the stream begins');
	$local->safe_psql('postgres', q{
INSERT INTO s_src SELECT g, 'new' || g, g, '{"new": true}', '{}' FROM generate_series(2001, 2300) g;
UPDATE s_src SET v = v || '!', n = n + 1, ia = ia || 0 WHERE id % 7 = 0;
DELETE FROM s_src WHERE id % 11 = 0;
UPDATE s_src SET jb = NULL, ia = NULL WHERE id BETWEEN 100 AND 110;});
	my $want = sql_digest($local, 'postgres', 'SELECT * FROM s_src');
	ok(wait_until(60, sub { pg_digest($remote, 'dw', 'public.s') eq $want }),
		'sync: the remote converges to the source, row for row');
	is(pg_digest($remote, 'dw', 'public.s'), $want, 'sync: digests match');
	$local->safe_psql('postgres', q{SELECT ctas_fed.stop_sync('wh.public.s')});
	ok(wait_until(30, sub { $local->safe_psql('postgres',
		q{SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'}) eq '0' }),
		'sync: stopped, no slot left');

	# --- attack: a remote role that does not own the database.  The public
	# schema is open to every role before 15 and closed from 15 on.
	($rc, $out, $err) = run_sql($local,
		'CREATE TABLE whvisitor.public.v AS SELECT * FROM src.a');
	if ($major < 15)
	{
		is($rc, 0, 'a role that does not own the database creates in public (open before 15)')
		  or diag $err;
	}
	else
	{
		like($err, qr/ERROR:  permission denied for schema public/,
			'a role that does not own the database: permission denied for schema public');
	}

	# --- attack: max_prepared_transactions = 0
	$remote->restart(conf => 'max_prepared_transactions = 0');
	($rc, $out, $err) = run_sql($local,
		'CREATE TABLE wh.public.one AS SELECT * FROM src.a');
	is($rc, 0, 'max_prepared_transactions = 0, two_phase auto: the load commits in one phase')
	  or diag $err;
	is($local->safe_psql('postgres', q{
SELECT state FROM ctas_fed.jobs WHERE catalog = 'wh' AND target = 'public.one'}),
		'committed', 'max_prepared_transactions = 0: job committed');
	$local->safe_psql('postgres', q{ALTER SERVER wh OPTIONS (ADD two_phase 'on')});
	($rc, $out, $err) = run_sql($local,
		'CREATE TABLE wh.public.two AS SELECT * FROM src.a');
	like($err, qr/requires two-phase commit, but the remote server does not allow prepared transactions/,
		'max_prepared_transactions = 0, two_phase on: refused');
	check_invariant(
		name      => "PostgreSQL $major, max_prepared_transactions = 0",
		node      => $local,
		committed => 1,
		targets   => [ { pg => $remote, dbname => 'dw', table => 'public.one',
			expect => sql_digest($local, 'postgres', 'SELECT * FROM src.a') },
			{ pg => $remote, dbname => 'dw', table => 'public.two', expect => 'absent' } ]);

	$fp->stop;
	$local->stop;
	$remote->stop;
	note(sprintf('PostgreSQL %d: the matrix took %.1f s', $major, time - $started));
	return;
}

1;
