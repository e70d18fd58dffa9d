
# Copyright (c) 2026, ctas_fed developers

# test/bench/sync_verify.pl - what ctas_fed.verify_sync() costs on a synced
# table of BENCH_ROWS rows, into a PostgreSQL and a ClickHouse catalog, on
# throwaway servers, while a writer keeps changing the source:
#
#   seconds   the wall time of each check (BENCH_RUNS per target; default 3
#             under 5M rows, 1 from 5M up), with its split between the
#             source's scans and the remote's (the worker's LOG line)
#   CPU       seconds of CPU during the check: the sync worker (it runs
#             the source's scans), the whole local server (the worker, the
#             parallel workers of its scans, and the writer's backends,
#             about 0.1 s of CPU a second at 50 transactions), the remote
#             server (PostgreSQL: the postmaster and its children, the
#             check's connections included once they are gone; ClickHouse:
#             its one process)
#   memory    the peak private memory (RssAnon, kB) of the sync worker
#             during the check, and of the remote server's process that
#             ran the check's query (PostgreSQL: its backends of the
#             catalog's user; ClickHouse: the server, above its level
#             before the check); sampled every 50 ms
#   writers   pgbench on the source during every check (BEGIN; an UPDATE
#             of a random row; an INSERT; COMMIT), rate-limited to
#             BENCH_WRITER_RATE transactions per second (default 50) over
#             2 clients: the largest latency of a transaction that ended
#             during a check, against the largest outside the checks (a
#             check that blocked writers would show as a latency close to
#             its own time)
#   load      `uptime` when each check ends (the machine is shared)
#
# Each check must answer "equal" although the writer changes the source
# all along (the check compares one consistent point).
#
# Run through test/bench/run.sh (BENCH_TARGETS=sync_verify; BENCH_ROWS may
# be a list: "1000000 10000000"), or as a TAP file through test/run.sh,
# which builds, installs and starts it as the servers' OS user:
#
#   TAP_TESTS=test/bench/sync_verify.pl TAP_TIMEOUT=7200 SKIP_REGRESS=1 \
#     bash test/run.sh
#   BENCH_ROWS=10000000 TAP_TESTS=test/bench/sync_verify.pl ... (10M)
#
# The results are printed as TAP notes and appended to BENCH_OUT (default
# /tmp/ctas_fed_sync_verify_bench.txt).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use POSIX ();
use Time::HiRes qw(time usleep);

use CtasFed::Test;

my @sizes = split ' ', ($ENV{BENCH_ROWS} // '1000000');
my $out = $ENV{BENCH_OUT} // '/tmp/ctas_fed_sync_verify_bench.txt';
my $rate = $ENV{BENCH_WRITER_RATE} // 50;

my $ch = start_clickhouse();
my $local = new_cluster('local',
	conf => "wal_level = logical\nshared_buffers = 256MB\nmax_wal_size = 8GB");
my $remote = new_remote_cluster(
	'remote',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' },
	conf      => "shared_buffers = 256MB\nmax_wal_size = 8GB");
postgres_catalog($local, $remote);
clickhouse_catalog($local, $ch);
my $wdir = PostgreSQL::Test::Utils::tempdir('writer');

sub rss_anon
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/status" or return 0;
	my $kb = 0;
	while (<$fh>)
	{
		$kb = $1 if /^RssAnon:\s+(\d+)/;
	}
	close $fh;
	return $kb;
}

sub cmdline
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/cmdline" or return '';
	local $/;
	my $c = <$fh> // '';
	close $fh;
	return $c;
}

sub load { my $u = `uptime`; chomp $u; $u =~ s/^.*load average:\s*/load /; return $u; }

# pgbench on the source in 5 s pieces (each writes its log when it ends)
# until $stop exists; returns the pid of the loop
sub start_writer
{
	my ($table, $rows, $stop) = @_;
	my $script = "$wdir/$table.sql";
	open my $fh, '>', $script or die "$script: $!";
	print $fh "\\set id random(1, $rows)\nBEGIN;\n"
	  . "UPDATE $table SET amount = amount + 1 WHERE id = :id;\n"
	  . "INSERT INTO $table (id, label, flag) VALUES (nextval('${table}_w'), 'written', true);\n"
	  . "COMMIT;\n";
	close $fh;
	my $pid = fork // die "fork: $!";
	if ($pid == 0)
	{
		my $i = 0;
		open STDOUT, '>', '/dev/null';    # its summary every 5 s
		until (-e $stop)
		{
			system('pgbench', '-n', '-h', $local->host, '-p', $local->port,
				'-c', '2', '-R', $rate, '-T', '5', '-l',
				"--log-prefix=$wdir/$table.$i", '-f', $script, 'postgres');
			$i++;
		}
		POSIX::_exit(0);
	}
	return $pid;
}

# (latency ms, end time) of every transaction the writer logged for $table
sub writer_log
{
	my ($table) = @_;
	my @tx;
	for my $file (glob "$wdir/$table.*.[0-9]*")
	{
		open my $fh, '<', $file or next;
		while (<$fh>)
		{
			my @f = split;
			push @tx, [ $f[2] / 1000, $f[4] + $f[5] / 1e6 ] if @f >= 6;
		}
		close $fh;
	}
	return @tx;
}

# the pid of the sync worker of $table
sub worker_pid
{
	my ($table) = @_;
	return $local->safe_psql('postgres', qq{
	  SELECT st.pid FROM ctas_fed.sync_status() st
	    JOIN ctas_fed.syncs s USING (sync_id) WHERE s.remote_table = '$table'});
}

my @report;
for my $rows (@sizes)
{
	my $runs = $ENV{BENCH_RUNS} // ($rows >= 5000000 ? 1 : 3);
	my $src = "src_$rows";
	my $t0 = time;
	$local->safe_psql('postgres', qq{
	CREATE TABLE $src (id bigint PRIMARY KEY, label text, amount numeric(12,2),
	                  ts timestamptz, flag boolean, d date);
	INSERT INTO $src
	SELECT g, md5(g::text) || repeat(chr(97 + g % 26), g % 24),
	       ((g::int8 * 7919) % 100000000) / 100.0,
	       timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second',
	       CASE WHEN g % 7 = 0 THEN NULL ELSE g % 2 = 0 END,
	       date '2024-01-01' + g % 1000
	  FROM generate_series(1, $rows) g;
	CREATE SEQUENCE ${src}_w START $rows;
	SELECT setval('${src}_w', $rows);
	VACUUM ANALYZE $src;
	});
	note(sprintf('%d rows loaded: %.1f s', $rows, time - $t0));
	$t0 = time;
	$local->safe_psql('postgres', qq{
	CREATE TABLE wh.public.v${rows}_pg WITH (sync = 'continuous') AS SELECT * FROM $src;
	CREATE TABLE lake.dw.v${rows}_ch WITH (sync = 'continuous') AS SELECT * FROM $src;
	});
	ok(wait_until(7200, sub { $local->safe_psql('postgres',
		"SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming' "
		. "AND remote_table LIKE 'v${rows}_%'") eq '2' }),
		"$rows rows: both syncs stream");
	note(sprintf('initial copies of %d rows: %.1f s', $rows, time - $t0));

	my $stop = "$wdir/$src.stop";
	my $writer = start_writer($src, $rows, $stop);
	sleep 6;    # the writer's baseline, before the first check
	my @windows;
	for my $case ([ "wh.public.v${rows}_pg", "v${rows}_pg", 'PostgreSQL' ],
		[ "lake.dw.v${rows}_ch", "v${rows}_ch", 'ClickHouse' ])
	{
		my ($target, $table, $what) = @$case;
		my (@lines);
		for my $run (1 .. $runs)
		{
			my $pid = worker_pid($table);
			my $chpid = $ch->{pid};
			my $rpm = $remote->{_pid};
			my $lpm = $local->{_pid};
			my ($w0, $l0, $r0, $c0) = (cpu_of($pid, 0), server_cpu($lpm), server_cpu($rpm), cpu_of($chpid, 0));
			my ($wbase, $chbase) = (rss_anon($pid), rss_anon($chpid));
			my ($wpeak, $rpeak, $chpeak) = (0, 0, 0);
			my $logpos = -s $local->logfile;
			my $s = time;
			my ($h, $stdout, $stderr) = start_psql($local,
				"SELECT result FROM ctas_fed.verify_sync('$target')");
			while ($h->pumpable)
			{
				my $k = rss_anon($pid);
				$wpeak = $k if $k > $wpeak;
				$k = rss_anon($chpid) - $chbase;
				$chpeak = $k if $k > $chpeak;
				for my $b (children_of($rpm))
				{
					next unless cmdline($b) =~ /loader/;
					$k = rss_anon($b);
					$rpeak = $k if $k > $rpeak;
				}
				usleep(50_000);
				$h->pump_nb;
			}
			$h->finish;
			my $e = time;
			chomp $$stdout;
			my ($w1, $l1, $r1, $c1) = (cpu_of($pid, 0), server_cpu($lpm), server_cpu($rpm), cpu_of($chpid, 0));
			push @windows, [ $s, $e ];
			is($$stdout, 'equal', "$what, $rows rows: run $run equal")
			  or diag($$stderr);
			my $split = '';
			if (open my $lf, '<', $local->logfile)
			{
				seek $lf, $logpos, 0;
				while (<$lf>)
				{
					$split = "$1 ms source, $2 ms remote"
					  if /checked \d+ rows .* \(scans: (\d+) ms source, (\d+) ms remote/;
				}
				close $lf;
			}
			my $line = sprintf('verify_sync %s, %d rows, run %d: %.1f s (%s); CPU s worker %.1f, local server %.1f, remote %.1f; '
				  . 'RssAnon kB worker %d (before %d), remote %d; %s',
				$what, $rows, $run, $e - $s, $split || 'no split logged',
				$w1 - $w0, $l1 - $l0, $what eq 'PostgreSQL' ? $r1 - $r0 : $c1 - $c0,
				$wpeak, $wbase, $what eq 'PostgreSQL' ? $rpeak : $chpeak, load());
			note($line);
			push @report, $line;
			sleep 3;    # writer latency outside the checks
		}
	}
	open my $sf, '>', $stop or die "$stop: $!";
	close $sf;
	waitpid $writer, 0;

	# the writer: latency inside and outside the checks
	my (@in, @outside);
	for my $tx (writer_log($src))
	{
		my ($lat, $end) = @$tx;
		my $inside = grep { $end >= $_->[0] && $end <= $_->[1] + 1 } @windows;
		push @{ $inside ? \@in : \@outside }, $lat;
	}
	my $max = sub { my $m = 0; $_ > $m and $m = $_ for @_; $m };
	my $line = sprintf('writer on %s (%d tx/s, 2 clients): %d transactions during the checks, '
		  . 'max latency %.1f ms; %d outside, max %.1f ms',
		$src, $rate, scalar @in, $max->(@in), scalar @outside, $max->(@outside));
	note($line);
	push @report, $line;
	ok(@in > 0, "$rows rows: the writer committed during the checks");
	$local->safe_psql('postgres', qq{
	SELECT ctas_fed.stop_sync('wh.public.v${rows}_pg');
	SELECT ctas_fed.stop_sync('lake.dw.v${rows}_ch');
	});
}
open my $f, '>>', $out or die "$out: $!";
print $f scalar(localtime) . "\n" . join("\n", @report) . "\n";
close $f;

done_testing();
