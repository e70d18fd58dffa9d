
# Copyright (c) 2026, ctas_fed developers

# Faults of a CTAS into a ClickHouse cluster catalog (issue 20), two real
# shards, shard 2 behind the fault proxy of test/lib/faultproxy.pl: a shard
# down at the start, a shard killed mid-load, a lost reply to one shard's
# RENAME, a local crash between the shards' renames, a stalled shard.
# After each, the invariant (check_invariant, with the resolver): the
# table, through the Distributed table and on each shard's local table,
# has exactly the rows committed (or what it had before), no _ctas_fed_
# table on any shard, no query of ours running, no durable record.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use CtasFed::Test;

my @sh    = start_clickhouse_cluster(2);
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $fp    = start_fault_proxy($sh[1]{http_port});

clickhouse_cluster_catalog($local, \@sh,
	shard_urls => [ $sh[0]{url}, 'http://127.0.0.1:' . $fp->port ],
	options => { connect_timeout => 2, timeout => 5 });
$local->safe_psql('postgres', q{
	CREATE TABLE src AS SELECT g AS id, md5(g::text) AS label FROM generate_series(1, 3000) g;
});
my $all = sql_digest($local, 'postgres', 'SELECT id, label FROM src');
my $old = sql_digest($local, 'postgres', 'SELECT id, label FROM src WHERE id <= 10');

sub records
{
	return $local->safe_psql('postgres',
		q{SELECT count(*) FROM pg_ls_dir('pg_ctas_fed', true, false) f WHERE f LIKE 'ch\_%'}) + 0;
}

# the invariant on table dw.$t: through the Distributed table of each
# shard, the shards' local tables together, no scratch table, no record
sub invariant
{
	my ($name, $t, $committed, $expect, $before) = @_;
	my $ok = check_invariant(
		name       => $name,
		node       => $local,
		committed  => $committed,
		resolve    => 1,
		timeout    => 60,
		clickhouse => \@sh,
		targets    => [
			map { { ch => $_, table => "dw.$t", expect => $expect, before => $before } } @sh
		]);
	my @locals = map { ch_digest($_, "dw.${t}_local") } @sh;
	if (($before // 'absent') eq 'absent' && !$committed)
	{
		is("@locals", 'absent absent', "$name: no local table on any shard");
	}
	else
	{
		my @n = map { $_->query("SELECT count() FROM dw.${t}_local") + 0 } @sh;
		my ($want) = ($committed ? $expect : $before) =~ /^(\d+):/;
		is($n[0] + $n[1], $want, "$name: the shards' local tables hold the rows once (@n)");
	}
	is(records(), 0, "$name: no durable record left");
	return $ok;
}

sub stage_on
{
	my ($ch) = @_;
	return $ch->query(
		"SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_stage_')") + 0;
}

# --- 1. shard 2 down when the statement starts: nothing anywhere

$sh[1]->crash;
my ($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.down WITH (primary_key = 'id') AS SELECT id, label FROM src});
isnt($rc, 0, 'shard down: the statement fails');
like($err, qr/ring \(shard 2\)/, 'shard down: the error names the shard');
$sh[1]->restart;
invariant('shard down', 'down', 0);

# --- 2. shard 2 killed mid-load: the statement fails, shard 1 is undone at
# once, shard 2's staging table is dropped by the resolver once it is back

my ($h, $hout, $herr) = start_psql($local,
	q{CREATE TABLE ring.dw.killed WITH (primary_key = 'id')
	  AS SELECT id, label FROM src, LATERAL (SELECT pg_sleep(0.002) WHERE src.id > 0) s});
ok(wait_until(30, sub { stage_on($sh[1]) > 0 }),
	'killed: the load has a staging table on shard 2');
$sh[1]->crash;
$h->finish;
like($$herr, qr/ERROR/, 'killed: the statement fails');
is(stage_on($sh[0]), 0, 'killed: shard 1 is undone at once');
$sh[1]->restart;
invariant('killed mid-load', 'killed', 0);

# --- 3. the reply to shard 2's RENAME is lost: the statement fails, and
# what was published on both shards is taken back (replace: the old table
# comes back)

$local->safe_psql('postgres',
	q{CREATE TABLE ring.dw.lost WITH (primary_key = 'id') AS SELECT id, label FROM src WHERE id <= 10});
my $id = $fp->set_rule(match => 'RENAME TABLE `dw`.`_ctas_fed_stage_', action => 'lose_reply');
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.lost WITH (primary_key = 'id', if_exists = 'replace') AS SELECT id, label FROM src});
ok($fp->wait_hit($id, 1, 5), 'lost reply: the reply to shard 2\'s RENAME was lost');
$fp->clear;
isnt($rc, 0, 'lost reply: the statement fails');
invariant('lost reply to a RENAME', 'lost', 0, undef, $old);

# the same on a create
$id = $fp->set_rule(match => 'RENAME TABLE `dw`.`_ctas_fed_stage_', action => 'lose_reply',
	skip => 1);
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.lost2 WITH (primary_key = 'id') AS SELECT id, label FROM src});
ok($fp->wait_hit($id, 1, 5), 'lost reply (create): the reply to the Distributed table\'s RENAME was lost');
$fp->clear;
isnt($rc, 0, 'lost reply (create): the statement fails');
invariant('lost reply to a RENAME (create)', 'lost2', 0);

# --- 4. a local crash between the shards' renames: shard 1 published,
# shard 2 not; the local transaction never committed, so the resolver
# undoes shard 1 (the old table comes back) and cleans shard 2

$local->safe_psql('postgres',
	q{CREATE TABLE ring.dw.crash WITH (primary_key = 'id') AS SELECT id, label FROM src WHERE id <= 10});
my $offset = -s $local->logfile;
($h, $hout, $herr) = start_psql($local,
	q{SET ctas_fed.fault_point = 'ch_after_shard_1';
	  CREATE TABLE ring.dw.crash WITH (primary_key = 'id', if_exists = 'replace') AS SELECT id, label FROM src});
$local->wait_for_log(qr/stopped at fault point "ch_after_shard_1"/, $offset);
ok(($sh[0]->query('SELECT count() FROM dw.crash_local') + 0) > 10,
	'crash: shard 1 has published the new rows');
$local->stop('immediate');
$h->finish;
$local->start;
invariant('local crash between the shards', 'crash', 0, undef, $old);

# and after the commit record: the resolver finishes, both shards have the
# new rows
$offset = -s $local->logfile;
($h, $hout, $herr) = start_psql($local,
	q{SET ctas_fed.fault_point = 'after_commit_record';
	  CREATE TABLE ring.dw.crash WITH (primary_key = 'id', if_exists = 'replace') AS SELECT id, label FROM src});
$local->wait_for_log(qr/stopped at fault point "after_commit_record"/, $offset);
$local->stop('immediate');
$h->finish;
$local->start;
invariant('local crash after commit', 'crash', 1, $all);

# --- 5. shard 2 stalls during the load: the statement fails by the
# catalog's timeout, nothing is left

$id = $fp->set_rule(match => 'INSERT INTO', action => 'stall', dir => 'both');
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.stall WITH (primary_key = 'id') AS SELECT id, label FROM src, generate_series(1, 200) x});
ok($fp->hits($id) >= 1, 'stall: shard 2\'s INSERT was held');
$fp->clear;
isnt($rc, 0, 'stall: the statement fails');
like($err, qr/time|ring \(shard 2\)/, 'stall: by the timeout, naming the shard');
invariant('stalled shard', 'stall', 0);

# --- 6. the session still works, and a table created now is whole

($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.after WITH (primary_key = 'id') AS SELECT id, label FROM src});
is($rc, 0, 'after the faults: a CTAS works') or diag($err);
invariant('after the faults', 'after', 1, $all);

done_testing();
