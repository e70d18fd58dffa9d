
# Copyright (c) 2026, ctas_fed developers

# test/bench/sync_verify.pl - the time ctas_fed.verify_sync() takes on a
# synced table of BENCH_ROWS rows (default 1000000), into a PostgreSQL and
# a ClickHouse catalog, BENCH_RUNS times each (default 3), on throwaway
# servers; also the check's memory: the peak of the sync worker's private
# memory (RssAnon) during each check, which must not grow with the table.  Not part of the test suite; run it as a TAP file
# through test/run.sh, which builds, installs and starts it as the servers'
# OS user:
#
#   TAP_TESTS=test/bench/sync_verify.pl TAP_TIMEOUT=3600 SKIP_REGRESS=1 \
#     bash test/run.sh
#   BENCH_ROWS=10000000 TAP_TESTS=test/bench/sync_verify.pl ... (10M)
#
# The times are printed as TAP notes and appended to BENCH_OUT (default
# /tmp/ctas_fed_sync_verify_bench.txt).  Each check must answer "equal".

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Time::HiRes qw(time);

use CtasFed::Test;

my $rows = $ENV{BENCH_ROWS} // 1000000;
my $runs = $ENV{BENCH_RUNS} // 3;
my $out = $ENV{BENCH_OUT} // '/tmp/ctas_fed_sync_verify_bench.txt';

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => "wal_level = logical\nshared_buffers = 256MB\nmax_wal_size = 8GB");
my $remote = new_remote_cluster(
	'remote',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
postgres_catalog($local, $remote);
clickhouse_catalog($local, $ch);

$local->safe_psql('postgres', qq{
CREATE TABLE src (id bigint PRIMARY KEY, label text, amount numeric(12,2),
                  ts timestamptz, flag boolean, d date);
INSERT INTO src
SELECT g, md5(g::text) || repeat(chr(97 + g % 26), g % 24),
       ((g::int8 * 7919) % 100000000) / 100.0,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second',
       CASE WHEN g % 7 = 0 THEN NULL ELSE g % 2 = 0 END,
       date '2024-01-01' + g % 1000
  FROM generate_series(1, $rows) g;
VACUUM ANALYZE src;
});
my $t0 = time;
$local->safe_psql('postgres', q{
CREATE TABLE wh.public.src_pg WITH (sync = 'continuous') AS SELECT * FROM src;
CREATE TABLE lake.dw.src_ch WITH (sync = 'continuous') AS SELECT * FROM src;
});
ok(wait_until(3600, sub { $local->safe_psql('postgres',
	"SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'") eq '2' }),
	'both syncs stream');
note(sprintf('initial copies of %d rows: %.1f s', $rows, time - $t0));

# the pid of the sync worker of $table
sub worker_pid
{
	my ($table) = @_;
	return $local->safe_psql('postgres', qq{
	  SELECT st.pid FROM ctas_fed.sync_status() st
	    JOIN ctas_fed.syncs s USING (sync_id) WHERE s.remote_table = '$table'});
}

my @report;
for my $case (['wh.public.src_pg', 'src_pg', 'PostgreSQL'], ['lake.dw.src_ch', 'src_ch', 'ClickHouse'])
{
	my ($target, $table, $what) = @$case;
	my (@times, @peaks);
	for my $run (1 .. $runs)
	{
		my $pid = worker_pid($table);
		my $s = time;
		my ($h) = start_psql($local,
			"SELECT count(*) FROM ctas_fed.verify_sync('$target')");
		# the worker's private memory (RssAnon: not the shared buffers it reads)
		push @peaks, peak_rss_anon($pid, $h);
		push @times, time - $s;
		is($local->safe_psql('postgres', qq{
			SELECT result FROM ctas_fed.sync_checks c JOIN ctas_fed.syncs s USING (sync_id)
			 WHERE s.remote_table = '$table' ORDER BY check_id DESC LIMIT 1}),
			'equal', "$what: run $run equal");
	}
	my @sorted = sort { $a <=> $b } @times;
	my $line = sprintf('verify_sync %s, %d rows: best %.2f s, median %.2f s; worker RssAnon peak per run (kB): %s',
		$what, $rows, $sorted[0], $sorted[int(@sorted / 2)], join(' ', @peaks));
	note($line);
	push @report, $line;
}
open my $f, '>>', $out or die "$out: $!";
print $f scalar(localtime) . "\n" . join("\n", @report) . "\n";
close $f;

done_testing();
