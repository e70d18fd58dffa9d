
# Copyright (c) 2026, ctas_fed developers

# ctas_fed.resync() and the automatic resync of a lost slot, into a
# PostgreSQL and a ClickHouse catalog (docs/sync-verify-resync.md).
#
# The remote tables are damaged behind the syncs' backs (a row changed, a
# row deleted, a row added); resync() copies them again from a new snapshot
# (a temporary slot's) while a writer runs, the stream goes on in the same
# job (the ClickHouse sync in a stream of its own, stream = 'ch'), and every row of
# both sides is compared once the writer stopped: the writes made before,
# during and after the resync arrived, and the damage is gone.  Readers of
# the remote tables see the whole table throughout.  Who may resync, and the
# errors.  Then the slots are lost while the catalogs are unreachable (a
# slot invalidated by max_slot_wal_keep_size, a slot dropped as after a
# restore) and the source changes meanwhile: each job resyncs by itself
# once its catalog is back, with a webhook event and a metric, and ends
# streaming with the remote equal to the source.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Time::HiRes qw(usleep);

use CtasFed::Test;

my ($hook, $hook_log) = start_hook_receiver();

sub wait_hook
{
	my ($re) = @_;
	return wait_until(60, sub { -f $hook_log && slurp_file($hook_log) =~ $re });
}

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => "wal_level = logical");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $rport = $remote->port;
postgres_catalog($local, $remote, options => { notify_url => $hook });
clickhouse_catalog($local, $ch, options => { notify_url => $hook });

$local->safe_psql('postgres', q{
CREATE TABLE t (id int PRIMARY KEY, v text, n int);
INSERT INTO t SELECT g, 'v' || g, g FROM generate_series(1, 20000) g;
CREATE TABLE junk (g int, pad text);
CREATE TABLE churn_ctl (stop boolean);
INSERT INTO churn_ctl VALUES (false);
-- inserts, updates, deletes and key changes, one transaction at a time,
-- until told to stop
CREATE PROCEDURE churn(base int) LANGUAGE plpgsql AS $$
DECLARE
  i int := base;
BEGIN
  WHILE NOT (SELECT stop FROM churn_ctl) LOOP
    i := i + 1;
    INSERT INTO t VALUES (100000 + i, 'new' || i, i);
    UPDATE t SET v = 'u' || i, n = n + 1 WHERE id = (i::bigint * 7919) % 20000 + 1;
    DELETE FROM t WHERE id = (i::bigint * 104729) % 20000 + 1;
    UPDATE t SET id = id + 1000000 WHERE id = (i::bigint * 31) % 20000 + 1;
    COMMIT;
    PERFORM pg_sleep(0.002);
  END LOOP;
END $$;
CREATE ROLE mallory LOGIN;
});

my $src_query = 'SELECT id, v, n FROM t';
my $pg_query = 'SELECT id, v, n FROM public.t_pg';

# every row as a reader of ClickHouse sees it, as sql_digest does
sub ch_digest_final
{
	my $body = $ch->query(
		"SELECT id, v, n FROM dw.t_ch FINAL WHERE _deleted = 0 FORMAT TabSeparated");
	my @rows = sort grep { $_ ne '' } split /\n/, $body;
	return scalar(@rows) . ':' . Digest::MD5::md5_hex(join("\n", @rows));
}

sub ch_count
{
	return $ch->query("SELECT count() FROM dw.t_ch FINAL WHERE _deleted = 0") + 0;
}

sub states
{
	return $local->safe_psql('postgres',
		"SELECT string_agg(remote_table || '=' || state, ' ' ORDER BY remote_table) FROM ctas_fed.syncs");
}

sub both_streaming
{
	return wait_until(120, sub { states() eq 't_ch=streaming t_pg=streaming' });
}

# both remotes equal the source, once it is quiet
sub converged
{
	my ($what) = @_;
	my $want = sql_digest($local, 'postgres', $src_query);
	ok(wait_until(60, sub { sql_digest($remote, 'dw', $pg_query) eq $want }),
		"$what: PostgreSQL remote equals the source (every row)");
	ok(wait_until(60, sub { ch_digest_final() eq $want }),
		"$what: ClickHouse remote equals the source (every row, FINAL)");
	is(sql_digest($remote, 'dw', $pg_query) . ' ' . ch_digest_final(),
		"$want $want", "$what: fingerprints");
}

$local->safe_psql('postgres', q{
CREATE TABLE wh.public.t_pg WITH (sync = 'continuous') AS SELECT id, v, n FROM t;
CREATE TABLE lake.dw.t_ch WITH (sync = 'continuous', stream = 'ch') AS SELECT id, v, n FROM t;
});
ok(both_streaming(), 'both syncs stream');
converged('after the copy');

# damage behind the syncs' backs: a row changed, one deleted, one added
$remote->safe_psql('dw', q{
UPDATE public.t_pg SET v = 'tampered' WHERE id = 5;
DELETE FROM public.t_pg WHERE id = 6;
INSERT INTO public.t_pg VALUES (7777777, 'extra', 0);
});
$ch->query("ALTER TABLE dw.t_ch UPDATE v = 'tampered' WHERE id = 5");
$ch->query("ALTER TABLE dw.t_ch DELETE WHERE id = 6");
$ch->query("INSERT INTO dw.t_ch (id, v, n, _version, _deleted) VALUES (7777777, 'extra', 0, 1, 0)");
ok(wait_until(30, sub {
	$ch->query("SELECT count() FROM dw.t_ch FINAL WHERE _deleted = 0 AND (id = 6 OR v = 'tampered')") == 1 }),
	'ClickHouse: the mutations are done');
my $want = sql_digest($local, 'postgres', $src_query);
isnt(sql_digest($remote, 'dw', $pg_query), $want, 'PostgreSQL remote damaged');
isnt(ch_digest_final(), $want, 'ClickHouse remote damaged');

# who may resync, and the errors
my ($rc, $out, $err) = $local->psql('postgres',
	"SET ROLE mallory; SELECT ctas_fed.resync('wh.public.t_pg')");
like($err, qr/must be a member of role ".*" to resync its sync into "wh.public.t_pg"/,
	'resync by a role that is not the owner: refused');
($rc, $out, $err) = $local->psql('postgres', "SELECT ctas_fed.resync('wh.public.nosuch')");
like($err, qr/there is no running sync into "wh.public.nosuch"/, 'resync of no sync: error');
($rc, $out, $err) = $local->psql('postgres', "SELECT ctas_fed.resync('t_pg')");
like($err, qr/invalid sync target "t_pg"/, 'resync of a bad name: error');
($rc, $out, $err) = $local->psql('postgres',
	"BEGIN; SELECT ctas_fed.resync('wh.public.t_pg'); ROLLBACK;");
is($rc, 0, 'resync in a transaction rolled back');
is(states(), 't_ch=streaming t_pg=streaming', 'rolled back: nothing happens');

# resync both while a writer runs; readers see the whole table throughout
my $slot_before = $local->safe_psql('postgres',
	"SELECT string_agg(slot_name || ':' || confirmed_flush_lsn, ',') FROM pg_replication_slots");
my ($churn) = start_psql($local, 'CALL churn(0)');
usleep(300_000);
$local->safe_psql('postgres', q{
SELECT ctas_fed.resync('wh.public.t_pg');
SELECT ctas_fed.resync('lake.dw.t_ch');
});
my ($min_pg, $min_ch) = (1e9, 1e9);
my $copying_seen = 0;
ok(wait_until(120, sub {
	my $pg = $remote->safe_psql('dw', 'SELECT count(*) FROM public.t_pg');
	my $c = ch_count();
	$min_pg = $pg if $pg < $min_pg;
	$min_ch = $c if $c < $min_ch;
	my $s = states();
	$copying_seen++ if $s =~ /copying/;
	return $s eq 't_ch=streaming t_pg=streaming'
	  && $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'") eq '2';
}), 'both syncs stream again after resync()');
ok($min_pg >= 19000, "PostgreSQL readers saw the whole table during the resync (min $min_pg rows)");
ok($min_ch >= 19000, "ClickHouse readers saw the whole table during the resync (min $min_ch rows)");
is($local->safe_psql('postgres',
	"SELECT string_agg(slot_name, ',' ORDER BY slot_name) FROM pg_replication_slots"),
	join(',', sort map { (split /:/)[0] } split /,/, $slot_before),
	'the same slots: a resync copies under a temporary slot and its stream goes on');
ok(wait_hook(qr/"target": "public.t_pg", "mode": "sync", "state": "copying".*\n(?:.*\n)*.*"target": "public.t_pg", "mode": "sync", "state": "streaming"/),
	'webhook: copying, then streaming');
my $metrics = $local->safe_psql('postgres', 'SELECT ctas_fed.metrics()');
like($metrics, qr/^ctas_fed_sync_resyncs_total\{catalog="wh",target="public.t_pg"\} 1$/m,
	'metric: the PostgreSQL resync counted');
like($metrics, qr/^ctas_fed_sync_resyncs_total\{catalog="lake",target="dw.t_ch"\} 1$/m,
	'metric: the ClickHouse resync counted');
# the writer goes on after the resync, then stops
my $lsn = $local->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
ok(wait_until(60, sub {
	$remote->safe_psql('dw', "SELECT count(*) FROM public._ctas_fed_sync_progress WHERE lsn > '$lsn'") eq '1' }),
	'changes made after the resync are applied');
$local->safe_psql('postgres', 'UPDATE churn_ctl SET stop = true');
$churn->finish;
ok($local->safe_psql('postgres', 'SELECT count(*) FROM t WHERE id > 100000') > 10,
	'the writer made changes');
converged('after resync() with a writer');
is($remote->safe_psql('dw', "SELECT count(*) FROM public.t_pg WHERE v = 'tampered' OR id = 7777777"),
	'0', 'PostgreSQL: the damage is gone');
is($ch->query("SELECT count() FROM dw.t_ch FINAL WHERE _deleted = 0 AND (v = 'tampered' OR id = 7777777)") + 0,
	0, 'ClickHouse: the damage is gone');
is($ch->query("SELECT count() FROM system.tables WHERE database = 'dw' AND name LIKE '%ctas_fed%' AND name != '_ctas_fed_sync_progress'") + 0,
	0, 'ClickHouse: no other table left');

# lost slots: the catalogs unreachable, so that the workers cannot advance
# them; the PostgreSQL job's slot dropped (a restore without it), the
# ClickHouse job's invalidated by max_slot_wal_keep_size; the source
# changes meanwhile
$local->safe_psql('postgres', q{
ALTER SERVER wh OPTIONS (SET port '1');
ALTER SERVER lake OPTIONS (SET url 'http://127.0.0.1:1');
});
# the workers keep their connections: end them, their next ones fail
$local->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
ok(wait_until(60, sub { $local->safe_psql('postgres',
	"SELECT count(*) FROM ctas_fed.syncs WHERE error IS NOT NULL") eq '2' }),
	'both jobs report their unreachable catalog');
$local->safe_psql('postgres', q{
UPDATE t SET v = 'while lost' WHERE id % 100 = 0;
DELETE FROM t WHERE id % 100 = 1;
INSERT INTO t SELECT g, 'lost' || g, g FROM generate_series(500001, 500500) g;
ALTER SYSTEM SET max_slot_wal_keep_size = '32MB';
SELECT pg_reload_conf();
});
ok(wait_until(30, sub { $local->safe_psql('postgres',
	"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%' AND active") eq '0' }),
	'no worker holds a slot');
my $pg_slot = $local->safe_psql('postgres',
	"SELECT slot_name FROM ctas_fed.syncs WHERE remote_table = 't_pg'");
my $ch_slot = $local->safe_psql('postgres',
	"SELECT slot_name FROM ctas_fed.syncs WHERE remote_table = 't_ch'");
$local->safe_psql('postgres', "SELECT pg_drop_replication_slot('$pg_slot')");
my $lost = 0;
for my $round (1 .. 10)
{
	$local->safe_psql('postgres', q{
INSERT INTO junk SELECT g, repeat('x', 1000) FROM generate_series(1, 20000) g;
TRUNCATE junk;
SELECT pg_switch_wal();
CHECKPOINT;
});
	$lost = $local->safe_psql('postgres',
		"SELECT wal_status FROM pg_replication_slots WHERE slot_name = '$ch_slot'") eq 'lost';
	last if $lost;
}
ok($lost, 'the ClickHouse job\'s slot is invalidated (wal_status lost)');
$local->safe_psql('postgres', q{
ALTER SYSTEM RESET max_slot_wal_keep_size;
SELECT pg_reload_conf();
});
$local->safe_psql('postgres', qq{
ALTER SERVER wh OPTIONS (SET port '$rport');
ALTER SERVER lake OPTIONS (SET url '$ch->{url}');
});
ok(wait_hook(qr/"target": "public.t_pg", "mode": "sync", "state": "resyncing", "rows": \d+, "bytes": \d+, "error": "replication slot \\"\Q$pg_slot\E\\" is missing"/),
	'webhook: the PostgreSQL job resyncs, its slot missing');
ok(wait_hook(qr/"target": "dw.t_ch", "mode": "sync", "state": "resyncing", "rows": \d+, "bytes": \d+, "error": "replication slot \\"\Q$ch_slot\E\\" was invalidated/),
	'webhook: the ClickHouse job resyncs, its slot invalidated');
ok(both_streaming(), 'both jobs stream again');
ok(wait_until(30, sub { $local->safe_psql('postgres', q{
	SELECT count(*) FROM pg_replication_slots
	 WHERE slot_name LIKE 'ctas_fed_sync_%' AND wal_status IN ('reserved', 'extended')}) eq '2' }),
	'each stream has a sound slot');
is($local->safe_psql('postgres', 'SELECT count(*) FROM ctas_fed.syncs WHERE error IS NOT NULL'),
	'0', 'no error left on the jobs');
$metrics = $local->safe_psql('postgres', 'SELECT ctas_fed.metrics()');
like($metrics, qr/^ctas_fed_sync_resyncs_total\{catalog="lake",target="dw.t_ch"\} 1$/m,
	'metric: the automatic resync counted');
# the stream goes on after it
$local->safe_psql('postgres', "UPDATE t SET v = 'after' WHERE id % 100 = 2");
converged('after the automatic resync');
like(slurp_file($local->logfile),
	qr/ctas_fed sync \d+: replication slot "\Q$ch_slot\E" was invalidated \(max_slot_wal_keep_size\), resyncing the remote table from a new snapshot/,
	'the server log tells the automatic resync');

$local->safe_psql('postgres', q{
SELECT ctas_fed.stop_sync('wh.public.t_pg');
SELECT ctas_fed.stop_sync('lake.dw.t_ch');
});
ok(wait_until(30, sub { $local->safe_psql('postgres',
	"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'") eq '0' }),
	'no slot left after stop_sync');
is($remote->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'no prepared transaction on the remote');

done_testing();
