
# Copyright (c) 2026, ctas_fed developers

# A sync joining a running stream is copied by a copy worker of its own
# (sync/joincopy.c) while the stream's worker goes on applying the
# stream's other syncs.  This file measures the other sync's lag through
# the join and checks the join is exact: sync a streams under a writer; a
# sync of table big (CTAS_JOIN_ROWS rows, 200000 unless set; docs/sync.md
# gives the lag measured for 1,000,000) joins the stream, its copy worker
# waiting 10 s before its commit; a's lag is
# sampled through the join and printed (not asserted: a timing), and a's
# remote rows must grow while big is still copying (a fact: the stream
# applied a during the copy), and the job's rows in the jobs view count the
# rows of the copy worker.  Then the fallback: with no background worker
# slot free (a fault point), a sync of big joining under the writer is
# copied by the stream's worker itself.  Then all equal their sources
# (checksums), nothing written twice into a or the fallback's table, and
# the worker is the same process.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use CtasFed::Test;

my $rows = $ENV{CTAS_JOIN_ROWS} // 200000;
my $local = new_cluster('local');
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $rport = $remote->port;

$local->append_conf('postgresql.conf', "wal_level = logical\n");
$local->restart;

$local->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE TABLE a (id int PRIMARY KEY, n int, at timestamptz);
INSERT INTO a SELECT g, 0, now() FROM generate_series(1, 5000) g;
CREATE TABLE big (id int PRIMARY KEY, n int, t text);
INSERT INTO big SELECT g, 0, md5(g::text) FROM generate_series(1, $rows) g;
CREATE TABLE ctl (stop boolean);
INSERT INTO ctl VALUES (false);
CREATE PROCEDURE writer() LANGUAGE plpgsql AS \$\$
DECLARE
  i bigint := 0;
BEGIN
  WHILE NOT (SELECT stop FROM ctl) LOOP
    i := i + 1;
    UPDATE a SET n = n + 1, at = clock_timestamp() WHERE id = (i * 7919) % 5000 + 1;
    UPDATE big SET n = n + 1 WHERE id = (i * 104729) % $rows + 1;
    COMMIT;
    INSERT INTO a VALUES (100000 + i, i, clock_timestamp());
    COMMIT;
    PERFORM pg_sleep(0.01);
  END LOOP;
END \$\$;
});

sub worker_pid
{
	return $local->safe_psql('postgres',
		"SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
}

sub rows_a
{
	return $remote->safe_psql('dw', 'SELECT count(*) FROM public.a');
}

sub lag_a
{
	return $remote->safe_psql('dw',
		"SELECT extract(epoch FROM clock_timestamp() - max(at)) FROM public.a");
}

$local->safe_psql('postgres',
	"CREATE TABLE wh.public.a WITH (sync = 'continuous') AS SELECT * FROM public.a");
ok(wait_until(60, sub { $local->safe_psql('postgres',
	"SELECT state FROM ctas_fed.syncs WHERE remote_table = 'a'") eq 'streaming' }),
	'a streams');
sync_write_log($remote, 'a', 'id');
my $pid = worker_pid();
like($pid, qr/^\d+$/, 'one sync worker');
my ($w) = start_psql($local, 'CALL writer()');
ok(wait_until(30, sub { lag_a() < 1 }), 'the writer writes, a follows');

# the copy worker waits 10 s before its remote commit (a fault point that
# goes on): a's remote rows must grow during the copy however fast the
# machine copies
$local->safe_psql('postgres', q{
  ALTER SYSTEM SET ctas_fed.fault_point = 'sync_copy_commit:10';
  SELECT pg_reload_conf();});
my $offset = -s $local->logfile;
my $t0 = time;
$local->safe_psql('postgres',
	"CREATE TABLE wh.public.big WITH (sync = 'continuous') AS SELECT * FROM public.big");
my ($max, $joined) = (0, undef);
my ($rows_first, $rows_last);	# a's remote rows seen while big copies
while (time - $t0 < 600)
{
	my $r = rows_a();
	my $l = lag_a();
	$max = $l if $l > $max;
	my $state = $local->safe_psql('postgres',
		"SELECT state FROM ctas_fed.syncs WHERE remote_table = 'big'");
	if (!defined $joined && $state eq 'copying')
	{
		$rows_first //= $r;
		$rows_last = $r;
	}
	if (!defined $joined && $state eq 'streaming')
	{
		$joined = time - $t0;
	}
	last if defined $joined && time - $t0 > $joined + 2;
	usleep(100_000);
}
ok(defined $joined, 'big joined the stream');
$local->safe_psql('postgres', q{
  ALTER SYSTEM RESET ctas_fed.fault_point;
  SELECT pg_reload_conf();});
my $log = slurp_file($local->logfile, $offset);
my ($copied) = $log =~ /ctas_fed sync \d+: copied (\d+) rows/;
diag(sprintf('join of %d rows (and a 10 s wait before its commit): streaming after %.1f s; a\'s lag at most %.2f s during the join',
		$rows, $joined // -1, $max));
is($copied, $rows, 'the join copied every row');
ok(defined $rows_first && $rows_last > $rows_first,
	'the stream applied a while big was copied (a\'s remote rows grew)');
diag(sprintf('a\'s remote rows during the copy: %d, then %d',
		$rows_first // -1, $rows_last // -1));

# the rows of the copy worker are counted in the job's rows (the jobs view,
# ctas_fed.sync_status()): the job's rows are its copied rows plus the
# changes applied to it since
my $big_id = $local->safe_psql('postgres',
	"SELECT sync_id FROM ctas_fed.syncs WHERE remote_table = 'big'");
is($local->safe_psql('postgres',
	"SELECT rows - changes FROM ctas_fed.sync_status() WHERE sync_id = $big_id"),
	$rows, 'the job\'s counters hold the rows of the join copy');
ok($local->safe_psql('postgres', q{
  SELECT j.rows FROM ctas_fed.jobs j JOIN ctas_fed.syncs s USING (job_id)
   WHERE s.remote_table = 'big'}) >= $rows,
	'the jobs view counts the rows of the join copy');

# the fallback: no background worker slot free for a copy worker (a fault
# point makes every registration fail), the stream's worker copies the
# joining sync itself between two rounds, under the writer
$local->safe_psql('postgres', q{
  ALTER SYSTEM SET ctas_fed.fault_point = 'sync_copy_worker_none';
  SELECT pg_reload_conf();});
$offset = -s $local->logfile;
$local->safe_psql('postgres',
	"CREATE TABLE wh.public.big2 WITH (sync = 'continuous') AS SELECT * FROM public.big");
ok(wait_until(120, sub { $local->safe_psql('postgres',
	"SELECT state FROM ctas_fed.syncs WHERE remote_table = 'big2'") eq 'streaming' }),
	'fallback: big2 joined the stream');
$local->safe_psql('postgres', q{
  ALTER SYSTEM RESET ctas_fed.fault_point;
  SELECT pg_reload_conf();});
$log = slurp_file($local->logfile, $offset);
like($log, qr/ctas_fed sync \d+: no background worker is free for its join copy, copied by the worker of stream \d+/,
	'fallback: the stream\'s worker copied big2');
unlike($log, qr/ctas_fed sync copy \d+/, 'fallback: no copy worker ran');
my $big2_id = $local->safe_psql('postgres',
	"SELECT sync_id FROM ctas_fed.syncs WHERE remote_table = 'big2'");
is($local->safe_psql('postgres',
	"SELECT rows - changes FROM ctas_fed.sync_status() WHERE sync_id = $big2_id"),
	$rows, 'fallback: the job\'s counters hold the rows of its copy');
sync_write_log($remote, 'big2', 'id');
usleep(2_000_000);

$local->safe_psql('postgres', 'UPDATE ctl SET stop = true');
$w->finish;
ok(wait_until(120, sub {
	sql_digest($local, 'postgres', 'SELECT id, n, at FROM public.a')
	  eq sql_digest($remote, 'dw', 'SELECT id, n, at FROM public.a')
	  && sql_digest($local, 'postgres', 'SELECT id, n, t FROM public.big')
	  eq sql_digest($remote, 'dw', 'SELECT id, n, t FROM public.big')
	  && sql_digest($local, 'postgres', 'SELECT id, n, t FROM public.big')
	  eq sql_digest($remote, 'dw', 'SELECT id, n, t FROM public.big2') }),
	'a, big and big2 equal their sources (checksums)');
like(sync_writes($remote, 'big2'), qr/^[1-9]\d* [1-9]\d* 0$/,
	'big2: no row written twice with the same image');
like(sync_writes($remote, 'a'), qr/^[1-9]\d* [1-9]\d* 0$/,
	'a: no row written twice with the same image');
is(worker_pid(), $pid, 'the same worker throughout');

done_testing();
