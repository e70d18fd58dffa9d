
# Copyright (c) 2026, ctas_fed developers

# A catalog that is down holds back only its own syncs (docs/sync.md,
# "When a catalog is down"): three syncs of one stream, two into catalog
# wa and one into catalog wb; wb's server is stopped for about 20 s while a
# writer changes all three sources.  The stream's worker goes on (the same
# process): wa's rows arrive while wb is down, wb's job records its error
# and is retried; the slot stays at wb's applied position; once wb is back
# its job catches up from there, exactly (every row compared, every remote
# write logged: nothing lost, nothing written twice).
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $local = new_cluster('local');
my %remote;
for my $r (qw(a b))
{
	$remote{$r} = new_remote_cluster(
		"remote$r",
		host_auth => 'scram-sha-256',
		roles     => { loader => 'secret' },
		databases => { dw => 'loader' });
}
my ($pa, $pb) = ($remote{a}->port, $remote{b}->port);

$local->append_conf('postgresql.conf', "wal_level = logical\n");
$local->restart;

$local->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed;
CREATE SERVER wa FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$pa', dbname 'dw');
CREATE SERVER wb FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$pb', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wa OPTIONS (user 'loader', password 'secret');
CREATE USER MAPPING FOR PUBLIC SERVER wb OPTIONS (user 'loader', password 'secret');
CREATE TABLE a1 (id int PRIMARY KEY, n int);
CREATE TABLE a2 (id int PRIMARY KEY, n int);
CREATE TABLE b1 (id int PRIMARY KEY, n int);
INSERT INTO a1 SELECT g, 0 FROM generate_series(1, 5000) g;
INSERT INTO a2 SELECT g, 0 FROM generate_series(1, 5000) g;
INSERT INTO b1 SELECT g, 0 FROM generate_series(1, 5000) g;
CREATE TABLE ctl (stop boolean);
INSERT INTO ctl VALUES (false);
CREATE PROCEDURE writer() LANGUAGE plpgsql AS \$\$
DECLARE
  i bigint := 0;
BEGIN
  WHILE NOT (SELECT stop FROM ctl) LOOP
    i := i + 1;
    UPDATE a1 SET n = n + 1 WHERE id = (i * 7919) % 5000 + 1;
    UPDATE b1 SET n = n + 1 WHERE id = (i * 7919) % 5000 + 1;
    INSERT INTO b1 VALUES (100000 + i, i);
    COMMIT;
    UPDATE a2 SET n = n + 1 WHERE id = (i * 31) % 5000 + 1;
    DELETE FROM b1 WHERE id = (i * 104729) % 5000 + 1;
    INSERT INTO a1 VALUES (100000 + i, i);
    COMMIT;
    PERFORM pg_sleep(0.005);
  END LOOP;
END \$\$;
});

sub state_of
{
	my ($t) = @_;
	return $local->safe_psql('postgres',
		"SELECT state FROM ctas_fed.syncs WHERE remote_table = '$t'");
}

sub same
{
	my ($t, $r) = @_;
	return sql_digest($local, 'postgres', "SELECT id, n FROM public.$t")
	  eq sql_digest($remote{$r}, 'dw', "SELECT id, n FROM public.$t");
}

sub worker_pid
{
	return $local->safe_psql('postgres',
		"SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
}

for my $t (qw(a1 a2 b1))
{
	my $cat = 'w' . substr($t, 0, 1);
	$local->safe_psql('postgres',
		"CREATE TABLE $cat.public.$t WITH (sync = 'continuous') AS SELECT id, n FROM public.$t");
}
ok(wait_until(60, sub {
	$local->safe_psql('postgres',
		"SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'") eq '3' }),
	'three syncs stream');
is($local->safe_psql('postgres', q{
  SELECT count(DISTINCT stream_id) || ' ' ||
         (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%')
    FROM ctas_fed.syncs}),
	'1 1', 'one stream, one slot, into two catalogs');
sync_write_log($remote{a}, 'a1', 'id');
sync_write_log($remote{a}, 'a2', 'id');
sync_write_log($remote{b}, 'b1', 'id');
my $pid = worker_pid();
like($pid, qr/^\d+$/, 'one sync worker');

my ($w) = start_psql($local, 'CALL writer()');
ok(wait_until(30, sub { same('a1', 'a') ? 0 : 1 }), 'the writer writes');

# wb down
$remote{b}->stop('fast');
my $down_at = time;
ok(wait_until(60, sub {
	$local->safe_psql('postgres',
		"SELECT error IS NOT NULL FROM ctas_fed.syncs WHERE remote_table = 'b1'") eq 't' }),
	'wb down: its job records the error');
is(state_of('b1'), 'streaming', 'wb down: its job is still streaming (retried)');
$local->safe_psql('postgres', "INSERT INTO a1 VALUES (999999, -1)");
ok(wait_until(30, sub {
	$remote{a}->safe_psql('dw', 'SELECT count(*) FROM public.a1 WHERE id = 999999') eq '1' }),
	'wb down: a row written into a1 arrives in wa');
my $applied = $remote{a}->safe_psql('dw',
	'SELECT count(*) FROM public.a1 WHERE id > 100000');
sleep(3);
ok($remote{a}->safe_psql('dw', 'SELECT count(*) FROM public.a1 WHERE id > 100000') > $applied,
	'wb down: wa keeps applying the writer\'s rows');
is($local->safe_psql('postgres',
	"SELECT count(*) FROM ctas_fed.syncs WHERE server = (SELECT oid FROM pg_foreign_server WHERE srvname = 'wa') AND error IS NOT NULL"),
	'0', 'wb down: the jobs into wa record no error');
is(worker_pid(), $pid, 'wb down: the stream\'s worker never ended');
ok($local->safe_psql('postgres', q{
  SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn) > 0
    FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'}) eq 't',
	'wb down: the slot holds the WAL wb still needs');
sleep(1) while time - $down_at < 20;

# wb back: its job catches up from its own applied position
$remote{b}->start;
ok(wait_until(60, sub {
	$local->safe_psql('postgres',
		"SELECT error IS NULL FROM ctas_fed.syncs WHERE remote_table = 'b1'") eq 't' }),
	'wb back: its job streams again, its error cleared');
$local->safe_psql('postgres', 'UPDATE ctl SET stop = true');
$w->finish;
ok(wait_until(120, sub { same('a1', 'a') && same('a2', 'a') && same('b1', 'b') }),
	'every table equals its source once quiet');
ok(same('a1', 'a') && same('a2', 'a') && same('b1', 'b'), 'fingerprints match');
like(sync_writes($remote{$_ =~ /^a/ ? 'a' : 'b'}, $_), qr/^[1-9]\d* [1-9]\d* 0$/,
	"$_: no row written twice with the same image (nothing applied twice)")
  foreach qw(a1 a2 b1);
is(worker_pid(), $pid, 'the same worker throughout');
ok(wait_until(30, sub { $local->safe_psql('postgres', q{
  SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn) < 1000000
    FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'}) eq 't' }),
	'caught up: the slot advanced again');

done_testing();
