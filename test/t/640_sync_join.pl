
# Copyright (c) 2026, ctas_fed developers

# One decoding stream per database (docs/sync.md, "Streams"): syncs made one
# after the other join the running stream (one slot, one publication, one
# worker) as tables join PostgreSQL's apply worker.  A sync joins while the
# stream applies a large transaction and while a writer changes the joining
# table; a worker killed with a join copy sent and not committed; the
# option stream = 'name' makes a stream of its own; ctas_fed.resync() of one
# table copies that table only; a stream worker killed during a join copy;
# the copy worker of a join killed, and the local server crashed, in the
# middle of its copy, under a writer.  Every table compared row by row, and every
# remote write logged: nothing lost, nothing applied twice.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

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
CREATE TABLE big (id int PRIMARY KEY, n int);
CREATE TABLE j (id int PRIMARY KEY, n int);
CREATE TABLE k (id int PRIMARY KEY, n int);
CREATE TABLE iso (id int PRIMARY KEY, n int);
INSERT INTO big SELECT g, 0 FROM generate_series(1, 50000) g;
INSERT INTO j SELECT g, 0 FROM generate_series(1, 20000) g;
INSERT INTO k SELECT g, 0 FROM generate_series(1, 5000) g;
INSERT INTO iso SELECT g, 0 FROM generate_series(1, 1000) g;
CREATE TABLE ctl (stop boolean);
INSERT INTO ctl VALUES (false);
-- small transactions on j and big until told to stop
CREATE PROCEDURE writer() LANGUAGE plpgsql AS \$\$
DECLARE
  -- a writer started again goes on after the rows of the last one
  i int := coalesce((SELECT max(id) - 100000 FROM j WHERE id > 100000), 0);
BEGIN
  WHILE NOT (SELECT stop FROM ctl) LOOP
    i := i + 1;
    UPDATE j SET n = n + 1 WHERE id = (i::bigint * 7919) % 20000 + 1;
    INSERT INTO j VALUES (100000 + i, i);
    DELETE FROM j WHERE id = (i::bigint * 104729) % 20000 + 1;
    UPDATE big SET n = n + 1 WHERE id = (i::bigint * 31) % 50000 + 1;
    COMMIT;
    PERFORM pg_sleep(0.002);
  END LOOP;
END \$\$;
});

sub slots
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'");
}

sub workers
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
}

sub state_of
{
	my ($t) = @_;
	return $local->safe_psql('postgres',
		"SELECT state FROM ctas_fed.syncs WHERE remote_table = '$t' AND state <> 'stopped'");
}

sub same
{
	my ($t) = @_;
	return sql_digest($local, 'postgres', "SELECT id, n FROM public.$t")
	  eq sql_digest($remote, 'dw', "SELECT id, n FROM public.$t");
}

sub sync
{
	my ($t, $opts) = @_;
	$opts = $opts ? ", $opts" : '';
	$local->safe_psql('postgres',
		"CREATE TABLE wh.public.$t WITH (sync = 'continuous'$opts) AS SELECT id, n FROM public.$t");
}

# the first sync makes the stream
sync('big');
ok(wait_until(60, sub { state_of('big') eq 'streaming' }), 'first sync streams');
is(slots(), '1', 'first sync: one slot');
my $explain = $local->safe_psql('postgres',
	"EXPLAIN (COSTS OFF) CREATE TABLE wh.public.j WITH (sync = 'continuous') AS SELECT id, n FROM public.j");
like($explain, qr/^\s*Sync Publication: ALTER PUBLICATION ctas_fed_sync_\d+_\d+ ADD TABLE ONLY public\.j$/m,
	'EXPLAIN: a sync would join the running stream');
like($explain, qr/^\s*Sync Initial Copy: by the sync worker, under the snapshot of a temporary slot's consistent point/m,
	'EXPLAIN: its copy under a temporary slot');
sync_write_log($remote, 'big', 'id');

# a sync of j made while the stream applies a large transaction on big,
# with a writer changing j (and big) during the join copy, and a transaction
# that wrote j before the sync's commit and commits after it: the join's
# slot waits for it, its copy sees it, the stream skips it for j
my $open = session_start($local);
session_run($open, 'BEGIN; UPDATE j SET n = n + 1000 WHERE id <= 3000;');
$local->safe_psql('postgres', 'UPDATE big SET n = n + 1');
my ($w) = start_psql($local, 'CALL writer()');
sync('j');
is($local->safe_psql('postgres', q{
  SELECT count(DISTINCT stream_id) || ' ' || count(DISTINCT slot_name) || ' ' ||
         count(DISTINCT publication) FROM ctas_fed.syncs}),
	'1 1 1', 'the second sync joined the stream');
is($local->safe_psql('postgres', q{
  SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_publication_tables
   WHERE pubname LIKE 'ctas_fed_sync_%'}),
	'big,j', 'its table joined the stream\'s publication');
sleep(2);
is(state_of('j'), 'copying', 'the join copy waits for the transaction open before it');
session_run($open, 'COMMIT;');
ok(wait_until(120, sub { state_of('j') eq 'streaming' }), 'the joined sync streams');
sync_write_log($remote, 'j', 'id');
ok(wait_until(60, sub {
	$local->safe_psql('postgres', 'SELECT count(*) FROM j WHERE id > 100000') > 0 }),
	'the writer writes');

# a crash with a join copy sent to the remote and not committed
$local->safe_psql('postgres', q{
  ALTER SYSTEM SET ctas_fed.fault_point = 'sync_copy_commit';
  SELECT pg_reload_conf();});
my $log = -s $local->logfile;
sync('k');
ok(wait_log($local, qr/stopped at fault point "sync_copy_commit"/, $log, 60),
	'join copy of k sent, not committed');
is(slots(), '1', 'a join copy holds no slot of its own');
is($remote->safe_psql('dw', 'SELECT count(*) FROM public.k'), '0',
	'the uncommitted join copy is not visible');
$local->safe_psql('postgres', 'UPDATE ctl SET stop = true');
$w->finish;
$local->safe_psql('postgres', 'ALTER SYSTEM RESET ctas_fed.fault_point');
$local->stop('immediate');
$local->start;
$local->safe_psql('postgres', 'UPDATE ctl SET stop = false');
($w) = start_psql($local, 'CALL writer()');
ok(wait_until(60, sub { state_of('k') eq 'streaming' }),
	'crash during a join copy: the next worker copies k again');
is(slots(), '1', 'after the crash: still one slot');
$local->safe_psql('postgres', 'UPDATE k SET n = n + 1 WHERE id % 10 = 0');

# stream = 'name': a stream of its own
my ($rc, $out, $err) = $local->psql('postgres',
	"CREATE TABLE wh.public.bad WITH (sync = 'continuous', stream = 'Bad-Name') AS SELECT id, n FROM public.iso");
like($err, qr/invalid value for option "stream": "Bad-Name"/, 'a stream name is checked');
sync('iso', "stream = 'isolated'");
ok(wait_until(60, sub { state_of('iso') eq 'streaming' }), 'the isolated sync streams');
is(slots(), '2', 'stream = name: a slot of its own');
is($local->safe_psql('postgres',
	"SELECT stream_name FROM ctas_fed.syncs WHERE remote_table = 'iso'"),
	'isolated', 'its stream is recorded');
ok(wait_until(30, sub { workers() eq '2' }), 'two streams, two workers');

# resync of one table of the shared stream copies that table only
$local->safe_psql('postgres', "SELECT ctas_fed.resync('wh.public.k')");
ok(wait_until(60, sub {
	state_of('k') eq 'streaming' && same('k') }), 'resync of k: streaming again');

$local->safe_psql('postgres', 'UPDATE ctl SET stop = true');
$w->finish;
ok(wait_until(120, sub { same('big') && same('j') && same('k') && same('iso') }),
	'every table equals its source once quiet');
ok(same($_), "fingerprint of $_ matches") foreach qw(big j k iso);
like(sync_writes($remote, 'big'), qr/^[1-9]\d* [1-9]\d* 0$/,
	'big: no row written twice with the same image (nothing applied twice)');
like(sync_writes($remote, 'j'), qr/^[1-9]\d* [1-9]\d* 0$/,
	'j: no row written twice with the same image (nothing applied twice)');
is($remote->safe_psql('dw', 'SELECT count(*) FROM public.j WHERE id <= 3000 AND n < 1000'),
	'0', 'the transaction committed during the join arrived whole');
is($local->safe_psql('postgres',
	"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_j%'"),
	'0', 'no temporary slot of a join is left');

# the stream's worker killed (SIGTERM) while the rows of a join copy go to
# the remote: the copy, in a copy worker of its own (sync/joincopy.c), goes
# on, or is copied again; the next stream worker takes the job in (the
# query's WHERE waits a little every 1000 rows: a copy of some seconds)
$local->safe_psql('postgres', q{
  CREATE TABLE big2 (id int PRIMARY KEY, n int);
  INSERT INTO big2 SELECT g, 0 FROM generate_series(1, 200000) g;
  CREATE FUNCTION slow(int) RETURNS boolean IMMUTABLE LANGUAGE plpgsql AS $$
  BEGIN
    IF $1 % 1000 = 0 THEN PERFORM pg_sleep(0.01); END IF;
    RETURN true;
  END $$;
  CREATE TABLE wh.public.big2 WITH (sync = 'continuous')
    AS SELECT id, n FROM public.big2 WHERE public.slow(id);});
ok(wait_until(60, sub {
	$remote->safe_psql('dw', q{
	  SELECT count(*) FROM pg_stat_activity
	   WHERE query LIKE 'COPY public.big2%' AND state = 'active'}) eq '1' }),
	'the join copy of big2 sends its rows');
$local->safe_psql('postgres', q{
  SELECT pg_terminate_backend(pid) FROM pg_stat_activity
   WHERE backend_type = 'ctas_fed sync'
     AND application_name = (SELECT 'ctas_fed sync ' || stream_id FROM ctas_fed.syncs
                              WHERE remote_table = 'big2')});
$local->safe_psql('postgres', 'UPDATE big2 SET n = 1 WHERE id % 1000 = 0');
ok(wait_until(90, sub { state_of('big2') eq 'streaming' && same('big2') }),
	'killed during a join copy: copied again, then streaming, equal to its source');
is($local->safe_psql('postgres',
	"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'"),
	'2', 'no temporary slot left by the killed join copy');
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.big2')");

# the copy worker of a join (sync/joincopy.c) killed (SIGTERM) in the
# middle of its copy, under the writer: the stream's worker, which went on
# applying j meanwhile, starts another that copies the table again
sub stream_worker
{
	return $local->safe_psql('postgres', q{
	  SELECT pid FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'
	     AND application_name = (SELECT 'ctas_fed sync ' || stream_id FROM ctas_fed.syncs
	                              WHERE remote_table = 'j' AND state = 'streaming')});
}
sub copying_into
{
	my ($t) = @_;
	return $remote->safe_psql('dw', qq{
	  SELECT count(*) FROM pg_stat_activity
	   WHERE query LIKE 'COPY public.$t%' AND state = 'active'}) eq '1';
}
sub j_rows
{
	return $remote->safe_psql('dw', 'SELECT count(*) FROM public.j WHERE id > 100000');
}
$local->safe_psql('postgres', 'UPDATE ctl SET stop = false');
($w) = start_psql($local, 'CALL writer()');
my $spid = stream_worker();
like($spid, qr/^\d+$/, 'the stream of j has its worker');
# (its WHERE waits 0.1 s every 1000 rows: a copy of some 20 s)
$local->safe_psql('postgres', q{
  CREATE TABLE big3 (id int PRIMARY KEY, n int);
  INSERT INTO big3 SELECT g, 0 FROM generate_series(1, 200000) g;
  CREATE FUNCTION slower(int) RETURNS boolean IMMUTABLE LANGUAGE plpgsql AS $$
  BEGIN
    IF $1 % 1000 = 0 THEN PERFORM pg_sleep(0.1); END IF;
    RETURN true;
  END $$;
  CREATE TABLE wh.public.big3 WITH (sync = 'continuous')
    AS SELECT id, n FROM public.big3 WHERE public.slower(id);});
ok(wait_until(60, sub { copying_into('big3') }), 'the copy worker of big3 sends its rows');
my $j0 = j_rows();
ok(wait_until(30, sub { j_rows() > $j0 }),
	'the stream applies j while big3 is copied');
is(state_of('big3'), 'copying', 'big3 still copying then');
is($local->safe_psql('postgres', q{
  SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
   WHERE backend_type = 'ctas_fed sync copy'}), '1', 'its copy worker killed');
$local->safe_psql('postgres', 'UPDATE big3 SET n = 2 WHERE id % 1000 = 0');
ok(wait_until(120, sub { state_of('big3') eq 'streaming' && same('big3') }),
	'copy worker killed: copied again by another, streaming, equal to its source');
is(stream_worker(), $spid, 'the stream\'s worker went on through it');
is(slots(), '2', 'no temporary slot left by the killed copy worker');

# the local server crashed in the middle of a join copy (a resync of big3):
# the next stream worker starts its copy again
$local->safe_psql('postgres', "SELECT ctas_fed.resync('wh.public.big3')");
ok(wait_until(60, sub { copying_into('big3') }), 'the resync of big3 copies');
$local->safe_psql('postgres', 'UPDATE ctl SET stop = true');
$w->finish;
$local->stop('immediate');
$local->start;
$local->safe_psql('postgres', 'UPDATE ctl SET stop = false');
($w) = start_psql($local, 'CALL writer()');
$local->safe_psql('postgres', 'UPDATE big3 SET n = 3 WHERE id % 500 = 0');
ok(wait_until(120, sub { state_of('big3') eq 'streaming' && same('big3') }),
	'crash during a copy worker\'s copy: copied again, streaming, equal to its source');
is(slots(), '2', 'after the crash: no temporary slot left');
$local->safe_psql('postgres', 'UPDATE ctl SET stop = true');
$w->finish;
ok(wait_until(120, sub { same('big') && same('j') }),
	'big and j equal their sources after the killed copies');
like(sync_writes($remote, 'j'), qr/^[1-9]\d* [1-9]\d* 0$/,
	'j: still no row written twice with the same image');
like(sync_writes($remote, 'big'), qr/^[1-9]\d* [1-9]\d* 0$/,
	'big: still no row written twice with the same image');
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.big3')");

# stop_sync leaves the stream; the last stop drops the slot
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.j')");
is(slots(), '2', 'a stop leaves the stream running');
$local->safe_psql('postgres', q{
  SELECT ctas_fed.stop_sync('wh.public.big');
  SELECT ctas_fed.stop_sync('wh.public.k');
  SELECT ctas_fed.stop_sync('wh.public.iso');});
ok(wait_until(30, sub { slots() eq '0' }), 'the last stops drop the slots');
is($local->safe_psql('postgres',
	"SELECT count(*) FROM pg_publication WHERE pubname LIKE 'ctas_fed_sync_%'"),
	'0', 'and the publications');

done_testing();
