
# Copyright (c) 2026, ctas_fed developers

# The WAL a sync stream holds and the age of its oldest unapplied change
# (issue 22, item 4): ctas_fed.jobs (wal_held_bytes,
# oldest_unapplied_seconds) and ctas_fed.metrics()
# (ctas_fed_sync_wal_held_bytes, ctas_fed_sync_oldest_unapplied_seconds,
# per slot) show plausible values that move: small while the stream keeps
# up, growing while its catalog is down and the source writes, small again
# after the catch-up.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $local = new_cluster('local', conf => "wal_level = logical\n");
postgres_catalog($local, $remote);

$local->safe_psql('postgres', q{
CREATE TABLE t (id bigint PRIMARY KEY, v text);
INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 1000) g;
CREATE TABLE wh.public.t WITH (sync = 'continuous') AS SELECT * FROM t;
});
ok( wait_until(120, sub {
		$local->safe_psql('postgres',
			"SELECT state FROM ctas_fed.jobs WHERE mode = 'sync'") eq 'streaming' }),
	'the sync streams');
my $slot = $local->safe_psql('postgres', 'SELECT slot_name FROM ctas_fed.syncs');

# (wal_held_bytes, oldest_unapplied_seconds) of the jobs view
sub view
{
	return split /\|/, $local->safe_psql('postgres', q{
SELECT coalesce(wal_held_bytes::text, 'null'), coalesce(oldest_unapplied_seconds::text, 'null')
  FROM ctas_fed.jobs WHERE mode = 'sync'});
}

# the same from the metrics, by slot
sub metrics
{
	my $m = $local->safe_psql('postgres', 'SELECT ctas_fed.metrics()');
	my ($held) = $m =~ /^ctas_fed_sync_wal_held_bytes\{slot="\Q$slot\E"\} (\S+)$/m;
	my ($oldest) = $m =~ /^ctas_fed_sync_oldest_unapplied_seconds\{slot="\Q$slot\E"\} (\S+)$/m;
	return ($held // 'missing', $oldest // 'missing');
}

sub caught_up
{
	my $want = $local->safe_psql('postgres', q{SELECT count(*) || ' ' || sum(id) FROM t});
	return $remote->safe_psql('dw', q{SELECT count(*) || ' ' || sum(id) FROM public.t}) eq $want;
}

# held WAL below 16 MB once a running_xacts record (CHECKPOINT) lets the
# slot's restart_lsn move to its confirmed position
sub small_again
{
	$local->safe_psql('postgres', 'CHECKPOINT');
	my ($held, $oldest) = view();
	my ($mheld, $moldest) = metrics();
	return $held ne 'null' && $held < 16 * 1024 * 1024 && $oldest < 5
	  && $mheld ne 'missing' && $mheld < 16 * 1024 * 1024 && $moldest < 5;
}

# 1. keeping up
$local->safe_psql('postgres', "UPDATE t SET v = v || '.' WHERE id <= 100");
ok(wait_until(60, \&caught_up), 'keeping up: the remote has the changes');
ok(wait_until(60, \&small_again), 'keeping up: WAL held and oldest unapplied small');
my ($held0, $oldest0) = view();
my ($mheld0, $moldest0) = metrics();
note "keeping up: view $held0 bytes, $oldest0 s; metrics $mheld0 bytes, $moldest0 s";
cmp_ok($held0, '>=', 0, 'keeping up: WAL held is a byte count');
cmp_ok($mheld0, '>=', 0, 'keeping up: the metric too');

# 2. the catalog down while the source writes: both grow
$remote->stop('fast');
my $lsn0 = $local->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
for my $i (1 .. 5)
{
	$local->safe_psql('postgres',
		"INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series($i * 100000, $i * 100000 + 9999) g");
}
my $written = $local->safe_psql('postgres',
	"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn0')");
sleep 3;
my ($held1, $oldest1) = view();
my ($mheld1, $moldest1) = metrics();
note "catalog down: $written bytes written; view $held1 bytes, $oldest1 s; metrics $mheld1 bytes, $moldest1 s";
cmp_ok($held1, '>=', $written, 'catalog down: the view shows the WAL held growing');
cmp_ok($mheld1, '>=', $written, 'catalog down: the metric too');
cmp_ok($oldest1, '>', 2.5, 'catalog down: the oldest unapplied change ages');
cmp_ok($moldest1, '>', 2.5, 'catalog down: the metric too');
cmp_ok($oldest1, '<', 600, 'catalog down: an age in seconds');

# 3. the catalog back: caught up, both small again
$remote->start;
ok(wait_until(120, \&caught_up), 'catalog back: the remote catches up');
ok(wait_until(60, \&small_again), 'catalog back: WAL held and oldest unapplied small again');
my ($held2, $oldest2) = view();
note "caught up: view $held2 bytes, $oldest2 s";

# 4. stopped: no stream, no row in the metrics
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.t')");
my ($held3, $oldest3) = view();
is("$held3 $oldest3", 'null null', 'stopped: no WAL held, no age');
ok(wait_until(30, sub { (metrics())[0] eq 'missing' }), 'stopped: not in the metrics');

$local->stop;
$remote->stop;
done_testing();
