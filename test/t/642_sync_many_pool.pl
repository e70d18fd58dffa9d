
# Copyright (c) 2026, ctas_fed developers

# Many syncs, few workers (docs/sync.md, "Streams" and "The worker pool"):
# 20 syncs into two catalogs (PostgreSQL and ClickHouse) on a server with
# max_worker_processes = 8 and ctas_fed.max_sync_workers = 1.  18 of them
# share the database's default stream, 2 are in a stream of their own
# (stream = 'iso'): one slot per stream, and one sync worker serving both
# streams in turn (a worker yields its slice to a waiting stream).  Under a
# mixed workload on all 20 sources, both streams progress while never more
# than one sync worker runs, and once quiet every remote table equals its
# source.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local',
	conf => "wal_level = logical\nmax_worker_processes = 8\nctas_fed.max_sync_workers = 1");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $rport = $remote->port;
clickhouse_catalog($local, $ch);
$local->safe_psql('postgres', qq{
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE TABLE ctl (stop boolean);
INSERT INTO ctl VALUES (false);
});

my @tables = map { "t$_" } 1 .. 20;
for my $i (1 .. 20)
{
	$local->safe_psql('postgres', qq{
CREATE TABLE t$i (id int PRIMARY KEY, v text, n int);
INSERT INTO t$i SELECT g, 'v' || g, 0 FROM generate_series(1, 500) g;});
}
# a mixed workload on every table: inserts, updates, deletes, one
# transaction over several tables
$local->safe_psql('postgres', q{
CREATE PROCEDURE writer() LANGUAGE plpgsql AS $$
DECLARE
  i bigint := 0;
  t int;
BEGIN
  WHILE NOT (SELECT stop FROM ctl) LOOP
    i := i + 1;
    t := i % 20 + 1;
    EXECUTE format('INSERT INTO t%s VALUES (%s, %L, %s)', t, 10000 + i, 'new', i);
    EXECUTE format('UPDATE t%s SET n = n + 1, v = %L WHERE id = %s', (i * 7) % 20 + 1, 'u' || i, (i * 7919) % 500 + 1);
    EXECUTE format('DELETE FROM t%s WHERE id = %s', (i * 3) % 20 + 1, (i * 104729) % 500 + 1);
    COMMIT;
    PERFORM pg_sleep(0.005);
  END LOOP;
END $$;
});

# t1..t10 into PostgreSQL, t11..t20 into ClickHouse; t10 and t20 isolated
for my $i (1 .. 20)
{
	my $cat = $i <= 10 ? 'wh.public' : 'lake.dw';
	my $opt = ($i == 10 || $i == 20) ? ", stream = 'iso'" : '';
	$local->safe_psql('postgres',
		"CREATE TABLE $cat.t$i WITH (sync = 'continuous'$opt) AS SELECT id, v, n FROM t$i");
}

sub workers
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
}

sub remote_rows
{
	my ($i, $cols) = @_;
	if ($i <= 10)
	{
		return join("\n", sort grep { $_ ne '' } split /\n/,
			$remote->safe_psql('dw', "COPY (SELECT $cols FROM public.t$i) TO STDOUT"));
	}
	my $body = $ch->query("SELECT $cols FROM dw.t$i FINAL WHERE _deleted = 0 FORMAT TabSeparated");
	return join("\n", sort grep { $_ ne '' } split /\n/, $body);
}

sub local_rows
{
	my ($i, $cols) = @_;
	return join("\n", sort grep { $_ ne '' } split /\n/,
		$local->safe_psql('postgres', "COPY (SELECT $cols FROM t$i) TO STDOUT"));
}

sub same
{
	my ($i) = @_;
	return remote_rows($i, 'id, v, n') eq local_rows($i, 'id, v, n');
}

my $max_workers = 0;
sub sample
{
	my $w = workers();
	$max_workers = $w if $w > $max_workers;
	return $w;
}

ok(wait_until(180, sub {
	sample();
	$local->safe_psql('postgres',
		"SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'") eq '20' }),
	'20 syncs reach streaming');
is($local->safe_psql('postgres', q{
  SELECT count(DISTINCT stream_id) || ' ' ||
         (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%')
    FROM ctas_fed.syncs}),
	'2 2', 'two streams, two slots, for 20 syncs');

# both streams progress under the workload, one worker at a time
my ($w) = start_psql($local, 'CALL writer()');
my $start = time;
my (%first_seen);
while (time - $start < 40)
{
	sample();
	for my $i (1, 10, 11, 20)
	{
		next if $first_seen{$i};
		my $n = $i <= 10
		  ? $remote->safe_psql('dw', "SELECT count(*) FROM public.t$i WHERE id > 10000")
		  : $ch->query("SELECT count() FROM dw.t$i FINAL WHERE id > 10000 AND _deleted = 0 FORMAT TabSeparated") + 0;
		$first_seen{$i} = time - $start if $n > 0;
	}
	last if keys %first_seen == 4;
	usleep(200_000);
}
ok(defined $first_seen{$_}, "t$_ received the workload's rows while the writer ran")
  foreach 1, 10, 11, 20;
note("first rows after " . join(', ', map { "t$_ " . sprintf('%.1f s', $first_seen{$_} // -1) } sort { $a <=> $b } keys %first_seen));
ok(wait_until(60, sub {
	sample();
	$local->safe_psql('postgres', q{
	  SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'
	     AND application_name LIKE 'ctas_fed sync %'}) eq '1' }),
	'a sync worker serves the streams');
$local->safe_psql('postgres', 'UPDATE ctl SET stop = true');
$w->finish;
my $all = sub { sample(); for my $i (1 .. 20) { return 0 unless same($i); } return 1; };
ok(wait_until(180, $all), 'every remote table equals its source once quiet');
ok(same($_), "t$_ matches its source row for row") foreach 1 .. 20;
ok($max_workers <= 1, "never more than ctas_fed.max_sync_workers (1) sync workers (saw $max_workers)");
like(sync_waits(), qr/^\d+$/, 'the jobs view answers');

sub sync_waits
{
	return $local->safe_psql('postgres', "SELECT count(*) FROM ctas_fed.jobs WHERE mode = 'sync'");
}

done_testing();
