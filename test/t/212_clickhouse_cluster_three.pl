
# Copyright (c) 2026, ctas_fed developers

# A ClickHouse cluster of three shards with weights 2, 1, 1 (issue 20):
# the routing follows the weights exactly as the Distributed engine does
# (proved by inserting the same rows through the Distributed table);
# names that need quoting; a local_table pattern that append and DROP
# TABLE find again from the Distributed table; a local crash between the
# renames of shard 2 and shard 3, and a lost reply to shard 3's RENAME of
# the Distributed table, with the invariant after each; a table that only
# looks like one of our scratch tables is never touched by the resolver.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my @sh    = start_clickhouse_cluster(3, weights => [ 2, 1, 1 ], name => 'trio');
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $fp    = start_fault_proxy($sh[2]{http_port});

clickhouse_cluster_catalog($local, \@sh, name => 'tri',
	shard_urls => [ $sh[0]{url}, $sh[1]{url}, 'http://127.0.0.1:' . $fp->port ],
	options => { connect_timeout => 2, timeout => 10 });
$local->safe_psql('postgres', q{
	CREATE TABLE src AS SELECT g AS id, md5(g::text) AS label FROM generate_series(-1000, 2999) g;
});
my $all = sql_digest($local, 'postgres', 'SELECT id, label FROM src');
my $few = sql_digest($local, 'postgres', 'SELECT id, label FROM src WHERE id < 0');

sub each_shard
{
	my ($sql) = @_;
	return map { my $r = $_->query($sql); chomp $r; $r } @sh;
}

sub records
{
	return $local->safe_psql('postgres',
		q{SELECT count(*) FROM pg_ls_dir('pg_ctas_fed', true, false) f WHERE f LIKE 'ch\_%'}) + 0;
}

# --- 1. weights: shard 1 gets half the rows, and Distributed agrees

my ($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE tri.dw.w WITH (primary_key = 'id') AS SELECT id, label FROM src});
is($rc, 0, 'CTAS into three shards') or diag($err);
my @n = each_shard('SELECT count() FROM dw.w_local');
ok($n[0] > 1700 && $n[0] < 2300 && $n[1] > 700 && $n[2] > 700 && $n[0] + $n[1] + $n[2] == 4000,
	"weights 2, 1, 1: shard 1 has about half the rows (@n)");
my $rows = $local->safe_psql('postgres', 'COPY (SELECT id, label FROM src) TO STDOUT');
$sh[1]->query('INSERT INTO dw.w (id, label) FORMAT TabSeparated',
	data => "$rows\n", params => { insert_distributed_sync => 1 });
is(join(',', each_shard('SELECT count() FROM (SELECT id, count() AS c FROM dw.w_local GROUP BY id HAVING c != 2)')),
	'0,0,0', 'weights: rows inserted through the Distributed table land on the shard the load chose');
is(join('+', each_shard('SELECT uniqExact(id) FROM dw.w_local')), join('+', @n),
	'weights: each id on one shard only');

# --- 2. names that need quoting, a local_table pattern, append, DROP

($rc, $out, $err) = $local->psql('postgres',
	q~CREATE TABLE tri.dw."it's `odd" WITH (primary_key = 'id', local_table = 'l\{table}')
	  AS SELECT id, label FROM src WHERE id < 0~);
is($rc, 0, 'a table name with a quote and a backquote, and a local_table pattern') or diag($err);
is(join(',', each_shard("SELECT count() FROM system.tables WHERE database = 'dw' AND name IN ('it\\'s `odd', 'l\\\\it\\'s `odd')")),
	'2,2,2', 'every shard has both tables, with the names asked for');
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE tri.dw."it's `odd" WITH (if_exists = 'append') AS SELECT id, label FROM src WHERE id >= 0});
is($rc, 0, 'append finds the local tables and the key from the Distributed table') or diag($err);
is(ch_digest($sh[2], "dw.`it's \\`odd`"), $all, 'append: every row once, through the Distributed table');
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE tri.dw."it's `odd" WITH (if_exists = 'append', local_table = 'other_{table}') AS SELECT id, label FROM src});
like($err, qr/local table "other_it's `odd" differs from "l\\it's `odd"/,
	'append with another local_table is refused');
($rc, $out, $err) = $local->psql('postgres', q{DROP TABLE tri.dw."it's `odd"});
is($rc, 0, 'DROP TABLE') or diag($err);
is(join(',', each_shard("SELECT count() FROM system.tables WHERE database = 'dw' AND name LIKE '%odd'")),
	'0,0,0', 'DROP TABLE drops the Distributed and the local table it reads, on every shard');

# --- 3. a local crash between shard 2's and shard 3's renames

$local->safe_psql('postgres',
	q{CREATE TABLE tri.dw.c WITH (primary_key = 'id') AS SELECT id, label FROM src WHERE id < 0});
my $offset = -s $local->logfile;
my ($h) = start_psql($local,
	q{SET ctas_fed.fault_point = 'ch_after_shard_2';
	  CREATE TABLE tri.dw.c WITH (primary_key = 'id', if_exists = 'replace') AS SELECT id, label FROM src});
$local->wait_for_log(qr/stopped at fault point "ch_after_shard_2"/, $offset);
my $sysid = $local->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
$local->stop('immediate');
$h->finish;
# someone's table that looks like one of ours, on shard 3, before the
# resolver runs
$sh[2]->query("CREATE TABLE dw._ctas_fed_stage_${sysid}_1_1_deadbeef (x UInt8) ENGINE = TinyLog");
$local->start;
ok(wait_until(60, sub {
	$local->psql('postgres', q{SELECT count(*) FROM ctas_fed.resolve_in_doubt('tri')});
	records() == 0 }), 'crash between shards 2 and 3: the resolver settles the transaction');
is($sh[2]->query("EXISTS TABLE dw._ctas_fed_stage_${sysid}_1_1_deadbeef"), "1\n",
	'a table no record names is left alone, whatever its name');
$sh[2]->query("DROP TABLE dw._ctas_fed_stage_${sysid}_1_1_deadbeef");
check_invariant(
	name       => 'crash between shards 2 and 3',
	node       => $local,
	committed  => 0,
	resolve    => 1,
	clickhouse => \@sh,
	targets    => [ map { { ch => $_, table => 'dw.c', before => $few } } @sh ]);
my @c = each_shard('SELECT count() FROM dw.c_local');
is($c[0] + $c[1] + $c[2], 1000, "crash: the old local tables are back, the rows once (@c)");
is(records(), 0, 'crash: no durable record left');

# --- 4. the reply to shard 3's RENAME of the Distributed table is lost

my $id = $fp->set_rule(match => 'RENAME TABLE `dw`.`_ctas_fed_stage_', action => 'lose_reply',
	skip => 1);
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE tri.dw.l WITH (primary_key = 'id') AS SELECT id, label FROM src});
ok($fp->wait_hit($id, 1, 5), 'lost reply: the reply to shard 3\'s second RENAME was lost');
$fp->clear;
isnt($rc, 0, 'lost reply: the statement fails');
check_invariant(
	name       => 'lost reply to shard 3',
	node       => $local,
	committed  => 0,
	resolve    => 1,
	clickhouse => \@sh,
	targets    => [ map { { ch => $_, table => 'dw.l' } } @sh ]);
is(join(',', each_shard("SELECT count() FROM system.tables WHERE database = 'dw' AND name = 'l_local'")),
	'0,0,0', 'lost reply: no local table on any shard');
is(records(), 0, 'lost reply: no durable record left');

# --- 5. and then a whole load

($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE tri.dw.l WITH (primary_key = 'id') AS SELECT id, label FROM src});
is($rc, 0, 'after the faults: a CTAS works') or diag($err);
is(ch_digest($sh[2], 'dw.l'), $all, 'after the faults: every row through shard 3\'s Distributed table');

done_testing();
