
# Copyright (c) 2026, ctas_fed developers

# test/bench/sync_partcopy.pl - the copy of a partitioned source, serial
# against parallel (docs/performance.md, "Copy of a partitioned source"):
# a table of BENCH_ROWS rows (default 1,000,000) in 4 partitions, synced
# again and again into a PostgreSQL catalog (and ClickHouse with
# BENCH_PARTCOPY_CLICKHOUSE=1) by join copies of one running stream,
# BENCH_RUNS times each way (default 3), interleaved:
#
#   serial    max_parallel_workers = 0: no reader starts, the copy worker
#             reads the partitions one after the other
#   parallel  the default: 2 parallel readers (CTAS_SYNC_PARTITION_READERS)
#
#   seconds   from the statement to the job "streaming" (the copy worker's
#             start, its copy and the remote commit), and the copy's own
#             phases from its DEBUG1 line (log_min_messages = debug1): the
#             rows read and sent, and the remote commit (with the key)
#   CPU       local: the copy worker and its readers (they end with the
#             copy: the postmaster's reaped children); remote: the
#             server's processes (the copy's connection ends with the copy)
#
# Run as a TAP file through test/run.sh:
#
#   TAP_TESTS=test/bench/sync_partcopy.pl TAP_TIMEOUT=3600 SKIP_REGRESS=1 \
#     bash test/run.sh
#
# The results are printed as TAP notes and appended to BENCH_OUT (default
# /tmp/ctas_fed_sync_partcopy_bench.txt).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Time::HiRes qw(time usleep);

use CtasFed::Test;

my $rows = $ENV{BENCH_ROWS} // 1000000;
my $runs = $ENV{BENCH_RUNS} // 3;
my $out = $ENV{BENCH_OUT} // '/tmp/ctas_fed_sync_partcopy_bench.txt';
my $with_ch = $ENV{BENCH_PARTCOPY_CLICKHOUSE};

my $ch = $with_ch ? start_clickhouse() : undef;
my $local = new_cluster('local',
	conf => "wal_level = logical\nshared_buffers = 256MB\nmax_wal_size = 8GB\nmax_worker_processes = 16\nlog_min_messages = debug1");
my $remote = new_remote_cluster(
	'remote',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' },
	conf      => "shared_buffers = 256MB\nmax_wal_size = 8GB");
postgres_catalog($local, $remote);
clickhouse_catalog($local, $ch) if $ch;

$local->safe_psql('postgres', qq{
CREATE TABLE pt (id int8, p int NOT NULL, n numeric(12,2), t text, at timestamptz,
                 PRIMARY KEY (id, p)) PARTITION BY LIST (p);
CREATE TABLE pt_0 PARTITION OF pt FOR VALUES IN (0);
CREATE TABLE pt_1 PARTITION OF pt FOR VALUES IN (1);
CREATE TABLE pt_2 PARTITION OF pt FOR VALUES IN (2);
CREATE TABLE pt_3 PARTITION OF pt FOR VALUES IN (3);
INSERT INTO pt SELECT g, g % 4, g / 7.0, md5(g::text) || ' row ' || g,
                      timestamptz '2026-01-01' + g * interval '1 second'
  FROM generate_series(1, $rows) g;
VACUUM ANALYZE pt;
CREATE TABLE seed (id int PRIMARY KEY);
INSERT INTO seed VALUES (1);
});
# the stream, which every copy below joins
$local->safe_psql('postgres',
	"CREATE TABLE wh.public.seed WITH (sync = 'continuous') AS SELECT * FROM seed");
ok(wait_until(60, sub { $local->safe_psql('postgres',
	"SELECT state FROM ctas_fed.syncs WHERE remote_table = 'seed'") eq 'streaming' }),
	'the stream runs');

my $lpm = (split /\n/, slurp_file($local->data_dir . '/postmaster.pid'))[0];
my $rpm = (split /\n/, slurp_file($remote->data_dir . '/postmaster.pid'))[0];
my $want = sql_digest($local, 'postgres', 'SELECT * FROM pt');
my @lines;
my $n = 0;

sub one_copy
{
	my ($how, $catalog) = @_;
	$n++;
	my $table = "pt_copy_$n";
	$local->safe_psql('postgres', 'ALTER SYSTEM SET max_parallel_workers = '
		  . ($how eq 'serial' ? 0 : 8) . '; SELECT pg_reload_conf();');
	sleep 1;
	$local->safe_psql('postgres', 'CHECKPOINT');
	$remote->safe_psql('dw', 'CHECKPOINT') if $catalog eq 'wh';
	my $offset = -s $local->logfile;
	my ($l0, $r0) = (server_cpu($lpm), server_cpu($rpm));
	my $t0 = time;
	my $schema = $catalog eq 'wh' ? 'public' : 'dw';
	$local->safe_psql('postgres',
		"CREATE TABLE $catalog.$schema.$table WITH (sync = 'continuous') AS SELECT * FROM pt");
	my $ok = wait_until(600, sub { $local->safe_psql('postgres',
		"SELECT state FROM ctas_fed.syncs WHERE remote_table = '$table'") eq 'streaming' });
	my $secs = time - $t0;
	# the copy worker and its connection are gone a moment later
	sleep 1;
	my ($l1, $r1) = (server_cpu($lpm), server_cpu($rpm));
	ok($ok, "$how copy into $catalog streams");
	# the copy's own phases (its DEBUG1 line): rows read and sent, commit
	my ($rows_ms, $commit_ms) = slurp_file($local->logfile, $offset)
	  =~ /copy phases: .* rows (\d+) ms, key and commit (\d+) ms/;
	if ($catalog eq 'wh')
	{
		is(sql_digest($remote, 'dw', "SELECT * FROM public.$table"), $want,
			"$how copy into $catalog: the remote equals the source");
	}
	my $line = sprintf('%-10s %-8s %9d rows  %6.2f s (rows %5.2f s, commit %5.2f s)  CPU local %5.2f s  remote %5.2f s',
		$catalog eq 'wh' ? 'postgres' : 'clickhouse', $how, $rows, $secs,
		($rows_ms // -1000) / 1000, ($commit_ms // -1000) / 1000,
		$l1 - $l0, $catalog eq 'wh' ? $r1 - $r0 : 0);
	diag($line);
	push @lines, $line;
	$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('$catalog.$schema.$table')");
}

for my $run (1 .. $runs)
{
	for my $how (qw(serial parallel))
	{
		one_copy($how, 'wh');
		one_copy($how, 'lake') if $ch;
	}
}

my $log = slurp_file($local->logfile);
my @par = $log =~ /the 4 partitions of "pt" are read by (\d) parallel workers/g;
is(scalar @par, $runs * ($ch ? 2 : 1), 'every parallel copy had its readers');

open my $fh, '>>', $out or die "$out: $!";
print $fh "# sync_partcopy " . scalar(localtime) . ", load: " . `uptime`;
print $fh "$_\n" for @lines;
close $fh;

done_testing();
