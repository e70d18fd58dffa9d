
# Copyright (c) 2026, ctas_fed developers

# Exactly once at the LSN boundaries (docs/sync-exactly-once.md), into both
# targets at once: one insert-only source table synced into PostgreSQL and
# into ClickHouse (two streams, stream = 'ch' for the second: two slots, two
# workers).  Several writer
# sessions hold overlapping transactions open and commit them one after
# the other, so that their commit records lie next to each other in the WAL
# (one's end lsn is the next one's commit lsn, which pg_walinspect shows);
# ctas_fed.sync_peek_changes = 1 makes every transaction boundary a peek
# boundary, and the workers are killed and the server crashed between the
# remote commit of one and the slot's advance (fault point
# sync_before_advance), so that each boundary is met after a peek, after a
# restart and after a crash; a stream of two jobs is crashed between the
# remote commits of its jobs (fault point sync_between_commits).  Every row is written once by the source, and
# each remote logs every write the sync makes into it (sync_write_log): the
# remote must hold every row, each written exactly once.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch = start_clickhouse();
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $local = new_cluster('local',
	conf => "wal_level = logical\nctas_fed.sync_peek_changes = 1");
postgres_catalog($local, $remote);
clickhouse_catalog($local, $ch);

$local->safe_psql('postgres', q{
CREATE EXTENSION pg_walinspect;
-- a per-change write log: every row inserted once, never changed
CREATE TABLE wlog (id bigint PRIMARY KEY, writer int, round int, note text);
CREATE TABLE wh.public.wlog WITH (sync = 'continuous') AS SELECT * FROM wlog;
CREATE TABLE lake.dw.wlog WITH (sync = 'continuous', stream = 'ch') AS SELECT * FROM wlog;
});

sub streaming
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'");
}

sub workers
{
	return $local->safe_psql('postgres',
		"SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
}

ok(wait_until(120, sub { streaming() eq '2' }), 'both syncs reach streaming');
sync_write_log($remote, 'wlog', 'id');
sync_write_log($ch, 'wlog', 'id');

# the source's rows, and each remote's as a reader sees them
sub source_rows
{
	return $local->safe_psql('postgres', q{SELECT count(*) || coalesce(sum(id)::text, '') FROM wlog});
}

sub pg_rows
{
	return $remote->safe_psql('dw', q{SELECT count(*) || coalesce(sum(id)::text, '') FROM public.wlog});
}

sub ch_rows
{
	my $r = $ch->query('SELECT count(), sum(id) FROM dw.wlog FINAL WHERE _deleted = 0 FORMAT TabSeparated');
	chomp $r;
	my ($n, $sum) = split /\t/, $r;
	return $n . ($n ? $sum : '');
}

sub caught_up
{
	my $want = source_rows();
	return pg_rows() eq $want && ch_rows() eq $want;
}

# K writer sessions
my $K = 4;
my @w = map { session_start($local, 'postgres') } 1 .. $K;
my $next = 0;

# One round: every writer opens a transaction and inserts rows into each
# table of @tables (default wlog), so that their transactions overlap, then
# each commits, one right after the other.
sub round
{
	my ($r, @tables) = @_;
	@tables = ('wlog') unless @tables;
	for my $i (0 .. $K - 1)
	{
		my $sql = 'BEGIN;';
		for my $t (@tables)
		{
			my $rows = join(', ',
				map { $next++; "($next, $i, $r, 'w$i r$r')" } 1 .. 1 + $i % 2);
			$sql .= " INSERT INTO $t VALUES $rows;";
		}
		my ($out, $err) = session_run($w[$i], $sql);
		die "writer $i: $err" if $err =~ /ERROR/;
	}
	for my $i (0 .. $K - 1)
	{
		my ($out, $err) = session_run($w[$i], 'COMMIT;');
		die "writer $i: $err" if $err =~ /ERROR/;
	}
	return;
}

# commit records of the window [from, to) that begin where another one
# ended: pairs of transactions committed next to each other in the WAL
sub adjacent_commits
{
	my ($from, $to) = @_;
	return $local->safe_psql('postgres', qq{
SELECT count(*) FROM (
  SELECT resource_manager = 'Transaction' AND record_type = 'COMMIT' AS is_commit,
         lag(resource_manager = 'Transaction' AND record_type = 'COMMIT')
           OVER (ORDER BY start_lsn) AS prev_commit,
         lag(end_lsn) OVER (ORDER BY start_lsn) AS prev_end, start_lsn
    FROM pg_get_wal_records_info('$from', '$to')) r
 WHERE is_commit AND prev_commit AND prev_end = start_lsn});
}

sub wal_lsn
{
	return $local->safe_psql('postgres', 'SELECT pg_current_wal_flush_lsn()');
}

# 1. peeks: with one transaction per peek, each one's commit lsn is the end
# lsn that the previous peek stored as applied
my $from = wal_lsn();
round($_) for 1 .. 8;
my $to = wal_lsn();
ok(wait_until(60, \&caught_up), 'peek boundaries: both remotes hold every row');
my $adjacent = adjacent_commits($from, $to);
cmp_ok($adjacent, '>=', 8,
	"peek boundaries: transactions committed next to each other in the WAL ($adjacent pairs)");
is(sync_writes($remote, 'wlog'), "$next $next 0",
	'peek boundaries, PostgreSQL: every row written exactly once');
is(sync_writes($ch, 'wlog'), "$next $next 0",
	'peek boundaries, ClickHouse: every row written exactly once');

# 2. restarts: the workers killed while the writers commit; the new ones
# read the applied lsn from the remotes
my $before = workers();
$local->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
round($_) for 9 .. 12;
ok(wait_until(60, sub { my $now = workers() // ''; $now =~ /^\d+,\d+$/ && $now ne $before }),
	'killed workers: two new workers');
round($_) for 13 .. 14;
ok(wait_until(60, \&caught_up), 'killed workers: both remotes hold every row');
is(sync_writes($remote, 'wlog'), "$next $next 0",
	'killed workers, PostgreSQL: every row written exactly once');
is(sync_writes($ch, 'wlog'), "$next $next 0",
	'killed workers, ClickHouse: every row written exactly once');

# 3. a crash between the remote commit and the slot's advance: each worker
# applies the first transaction of a round and stops before advancing the
# slot; after the crash the slot returns it again (and, as its position is
# saved at checkpoints only, maybe more before it), the remotes' applied lsn
# is its end, and the next transaction's commit lsn is that end.  That
# needs the round's commit records next to each other in the WAL, which
# another process's record (the background writer's running_xacts every
# 15 s, a sync worker's own when it lags, autovacuum) can split: the crash
# is tried again, with a new round, until one round had them adjacent (at
# most 3 tries); each try must be exact.
my ($adjacent_round, $crash_round) = (0, 15);
for my $try (1 .. 3)
{
	$local->safe_psql('postgres', q{
  ALTER SYSTEM SET ctas_fed.fault_point = 'sync_before_advance';
  SELECT pg_reload_conf();});
	sleep 1;    # the workers read the setting at their next peek
	my $log_offset = -s $local->logfile;
	$from = wal_lsn();
	round($crash_round);
	$to = wal_lsn();
	ok(wait_until(60, sub {
		my @hits = slurp_file($local->logfile, $log_offset) =~ /stopped at fault point "sync_before_advance"/g;
		@hits == 2 }), "crash round $crash_round: both workers stopped between the remote commit and the advance");
	$local->safe_psql('postgres', q{
  ALTER SYSTEM RESET ctas_fed.fault_point;});
	my $pairs = adjacent_commits($from, $to);
	is($remote->safe_psql('dw', "SELECT count(*) FROM public.wlog WHERE round = $crash_round"), '1',
		"crash round $crash_round: the PostgreSQL remote committed the first transaction only");
	$_->quit for @w;
	$local->stop('immediate');
	$local->start;
	@w = map { session_start($local, 'postgres') } 1 .. $K;
	round($crash_round + 1);
	ok(wait_until(90, \&caught_up), "crash round $crash_round: both remotes hold every row");
	is(sync_writes($remote, 'wlog'), "$next $next 0",
		"crash round $crash_round, PostgreSQL: every row written exactly once");
	is(sync_writes($ch, 'wlog'), "$next $next 0",
		"crash round $crash_round, ClickHouse: every row written exactly once");
	is(sync_writes_conflicts($ch, 'wlog'), 0,
		"crash round $crash_round, ClickHouse: no version written with two rows");
	if ($pairs == $K - 1)
	{
		$adjacent_round = $crash_round;
		last;
	}
	note "crash round $crash_round: $pairs of " . ($K - 1)
	  . " pairs of commits next to each other in the WAL; the crash again";
	$crash_round += 100;
}
ok($adjacent_round, "a crash round whose writers committed next to each other in the WAL ($adjacent_round)");

# 4. a stream of more jobs (create_tables_as of two tables joins the stream
# of wlog, into each remote), each with its own applied lsn:
# a crash after the first job's remote commit and before the second's; the
# worker started again skips, for each job, what that job applied
$local->safe_psql('postgres', q{
CREATE TABLE pa (id bigint PRIMARY KEY, writer int, round int, note text);
CREATE TABLE pb (id bigint PRIMARY KEY, writer int, round int, note text);
SELECT count(*) FROM ctas_fed.create_tables_as('wh', 'public',
  tables => ARRAY['pa', 'pb']::regclass[], options => '{"sync": "continuous"}');
SELECT count(*) FROM ctas_fed.create_tables_as('lake', 'dw',
  tables => ARRAY['pa', 'pb']::regclass[], options => '{"sync": "continuous", "stream": "ch"}');
});
ok(wait_until(120, sub { streaming() eq '6' }), 'two streams of two jobs reach streaming');
for my $t ('pa', 'pb')
{
	sync_write_log($remote, $t, 'id');
	sync_write_log($ch, $t, 'id');
}

sub stream_caught_up
{
	for my $t ('pa', 'pb')
	{
		my $want = $local->safe_psql('postgres',
			"SELECT count(*) || coalesce(sum(id)::text, '') FROM $t");
		return 0 unless $remote->safe_psql('dw',
			"SELECT count(*) || coalesce(sum(id)::text, '') FROM public.$t") eq $want;
		my $r = $ch->query("SELECT count(), sum(id) FROM dw.$t FINAL WHERE _deleted = 0 FORMAT TabSeparated");
		chomp $r;
		my ($n, $sum) = split /\t/, $r;
		return 0 unless $n . ($n ? $sum : '') eq $want;
	}
	return 1;
}

round($_, 'pa', 'pb') for 17 .. 18;
ok(wait_until(60, \&stream_caught_up), 'two jobs: both tables on both remotes hold every row');
$local->safe_psql('postgres', q{
  ALTER SYSTEM SET ctas_fed.fault_point = 'sync_between_commits';
  SELECT pg_reload_conf();});
sleep 1;
my $log_offset = -s $local->logfile;
round(19, 'pa', 'pb');
ok(wait_until(60, sub {
	my @hits = slurp_file($local->logfile, $log_offset) =~ /stopped at fault point "sync_between_commits"/g;
	@hits == 2 }), 'both two-job workers stopped between the commits of their jobs');
$local->safe_psql('postgres', 'ALTER SYSTEM RESET ctas_fed.fault_point');
is($remote->safe_psql('dw', q{
  SELECT (SELECT count(*) FROM public.pa WHERE round = 19) + (SELECT count(*) FROM public.pb WHERE round = 19)}),
	'1', 'PostgreSQL: one job committed the first transaction of the round, the other not');
$_->quit for @w;
$local->stop('immediate');
$local->start;
@w = map { session_start($local, 'postgres') } 1 .. $K;
round(20, 'pa', 'pb');
ok(wait_until(90, \&stream_caught_up), 'two jobs, crash between their commits: every row on both remotes');
for my $t ('pa', 'pb')
{
	my $n = $local->safe_psql('postgres', "SELECT count(*) FROM $t");
	is(sync_writes($remote, $t), "$n $n 0",
		"two jobs, crash between their commits, PostgreSQL: every row of $t written once");
	is(sync_writes($ch, $t), "$n $n 0",
		"two jobs, crash between their commits, ClickHouse: every row of $t written once");
}
$_->quit for @w;

# nothing left behind
$local->safe_psql('postgres', q{
  SELECT ctas_fed.stop_sync(t) FROM unnest(ARRAY['wh.public.wlog', 'lake.dw.wlog',
    'wh.public.pa', 'wh.public.pb', 'lake.dw.pa', 'lake.dw.pb']) AS t});
ok(wait_until(30, sub { $local->safe_psql('postgres',
	"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'") eq '0' }),
	'stopped: no slot left');

done_testing();
