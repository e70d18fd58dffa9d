
# Copyright (c) 2026, ctas_fed developers

# ctas_fed.verify_sync() on a PostgreSQL and a ClickHouse catalog
# (docs/sync-verify-resync.md): equal after the copy, and again and again
# while a writer changes the source (the check compares one consistent
# point, whatever the worker applied), without stopping the sync; rows
# changed behind the syncs' backs on the remotes (an update, a delete, an
# extra row) are found and named with both versions; the results are kept
# in ctas_fed.sync_checks and shown as metrics; resync() repairs them and
# verify_sync() says so.  Who may verify, and the errors.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Time::HiRes qw(usleep);

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => "wal_level = logical");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
postgres_catalog($local, $remote);
clickhouse_catalog($local, $ch);

$local->safe_psql('postgres', q{
CREATE TABLE t (id int PRIMARY KEY, v text, n int, amount numeric(12,2),
                d date, flag boolean);
INSERT INTO t SELECT g, CASE WHEN g % 10 = 0 THEN NULL ELSE 'v' || g END, g,
                     g * 1.25, date '2024-01-01' + g % 400, g % 3 = 0
  FROM generate_series(1, 20000) g;
CREATE TABLE churn_ctl (stop boolean);
INSERT INTO churn_ctl VALUES (false);
CREATE PROCEDURE churn(base int) LANGUAGE plpgsql AS $$
DECLARE
  i int := base;
BEGIN
  WHILE NOT (SELECT stop FROM churn_ctl) LOOP
    i := i + 1;
    INSERT INTO t VALUES (100000 + i, 'new' || i, i, i, date '2025-01-01', true);
    UPDATE t SET v = 'u' || i, n = n + 1, amount = amount + 0.01
     WHERE id = (i::bigint * 7919) % 20000 + 1;
    DELETE FROM t WHERE id = (i::bigint * 104729) % 20000 + 1;
    UPDATE t SET id = id + 1000000 WHERE id = (i::bigint * 31) % 20000 + 1;
    COMMIT;
    PERFORM pg_sleep(0.002);
  END LOOP;
END $$;
CREATE ROLE mallory LOGIN;
CREATE TABLE wh.public.t_pg WITH (sync = 'continuous') AS SELECT * FROM t;
CREATE TABLE lake.dw.t_ch WITH (sync = 'continuous') AS SELECT * FROM t;
});

sub states
{
	return $local->safe_psql('postgres',
		"SELECT string_agg(remote_table || '=' || state, ' ' ORDER BY remote_table) FROM ctas_fed.syncs");
}
ok(wait_until(120, sub { states() eq 't_ch=streaming t_pg=streaming' }),
	'both syncs stream');

# the result of verify_sync(), one line per row
sub verify
{
	my ($target) = @_;
	return $local->safe_psql('postgres',
		"SELECT result, key, source_row, remote_row FROM ctas_fed.verify_sync('$target') ORDER BY key::bigint");
}

is(verify('wh.public.t_pg'), 'equal|||', 'PostgreSQL: equal after the copy');
is(verify('lake.dw.t_ch'), 'equal|||', 'ClickHouse: equal after the copy');

# equal while a writer runs, every time: the check compares one point
my ($churn) = start_psql($local, 'CALL churn(0)');
usleep(500_000);
for my $round (1 .. 3)
{
	is(verify('wh.public.t_pg'), 'equal|||', "PostgreSQL: equal under a writer ($round)");
	is(verify('lake.dw.t_ch'), 'equal|||', "ClickHouse: equal under a writer ($round)");
}
$local->safe_psql('postgres', 'UPDATE churn_ctl SET stop = true');
$churn->finish;
ok($local->safe_psql('postgres', 'SELECT count(*) FROM t WHERE id > 100000') > 10,
	'the writer made changes');
# the syncs went on streaming: a change made now arrives
$local->safe_psql('postgres', "INSERT INTO t VALUES (5000000, 'after', 0, 0, '2024-01-01', true)");
ok(wait_until(30, sub {
	$remote->safe_psql('dw', 'SELECT v FROM public.t_pg WHERE id = 5000000') eq 'after' }),
	'PostgreSQL: the sync streams on after the checks');
ok(wait_until(30, sub {
	$ch->query("SELECT v FROM dw.t_ch FINAL WHERE id = 5000000 AND _deleted = 0") eq "after\n" }),
	'ClickHouse: the sync streams on after the checks');

# damage behind the syncs' backs: two rows the writer left in place
my $ka = $local->safe_psql('postgres',
	'SELECT min(id) FROM t WHERE id BETWEEN 3 AND 4000000');
my $kb = $local->safe_psql('postgres',
	"SELECT min(id) FROM t WHERE id BETWEEN $ka + 1 AND 4000000");
$remote->safe_psql('dw', qq{
UPDATE public.t_pg SET v = 'tampered' WHERE id = $ka;
DELETE FROM public.t_pg WHERE id = $kb;
INSERT INTO public.t_pg VALUES (7777777, 'extra', 0, 0, '2024-01-01', false);
});
$ch->query("ALTER TABLE dw.t_ch UPDATE v = 'tampered' WHERE id = $ka");
$ch->query("ALTER TABLE dw.t_ch DELETE WHERE id = $kb");
$ch->query("INSERT INTO dw.t_ch (id, v, n, amount, d, flag, _version, _deleted) VALUES (7777777, 'extra', 0, 0, '2024-01-01', 0, 1, 0)");
ok(wait_until(30, sub {
	$ch->query("SELECT count() FROM dw.t_ch FINAL WHERE _deleted = 0 AND (id = $kb OR v = 'tampered')") == 1 }),
	'ClickHouse: the mutations are done');

# a source row as verify_sync() shows it, with v replaced when given
sub shown
{
	my ($id, $kbool, $v) = @_;
	my $flag = $kbool eq 'pg' ? 'flag::text' : "CASE WHEN flag THEN '1' ELSE '0' END";
	my $vv = defined $v ? "'$v'" : "coalesce(v, 'NULL')";
	return $local->safe_psql('postgres',
		"SELECT format('(%s, %s, %s, %s, %s, %s)', id, $vv, n, amount, d, $flag) FROM t WHERE id = $id");
}

for my $case (['wh.public.t_pg', 'pg', 'PostgreSQL', 'false'], ['lake.dw.t_ch', 'ch', 'ClickHouse', '0'])
{
	my ($target, $kind, $what, $false) = @$case;
	my @rows = split /\n/, verify($target);
	is(scalar(@rows), 3, "$what: three differing keys") or diag join("\n", @rows);
	is($rows[0], "different|$ka|" . shown($ka, $kind) . '|' . shown($ka, $kind, 'tampered'),
		"$what: the changed row, both versions");
	is($rows[1], "different|$kb|" . shown($kb, $kind) . '|',
		"$what: the deleted row, missing remotely");
	is($rows[2], "different|7777777||(7777777, extra, 0, 0.00, 2024-01-01, $false)",
		"$what: the extra row, missing at the source");
}

# recorded, and in the metrics
is($local->safe_psql('postgres', q{
	SELECT string_agg(result || ':' || jsonb_array_length(differences), ',' ORDER BY check_id)
	  FROM ctas_fed.sync_checks c JOIN ctas_fed.syncs s USING (sync_id)
	 WHERE s.remote_table = 't_pg'}),
	'equal:0,equal:0,equal:0,equal:0,different:3',
	'ctas_fed.sync_checks: every check of the PostgreSQL sync');
ok($local->safe_psql('postgres', q{
	SELECT bool_and(source_rows > 19000 AND duration_ms >= 0 AND consistent_lsn > '0/0')
	  FROM ctas_fed.sync_checks}) eq 't', 'ctas_fed.sync_checks: rows, time, point');
my $metrics = $local->safe_psql('postgres', 'SELECT ctas_fed.metrics()');
like($metrics, qr/^ctas_fed_sync_verify_differences\{catalog="wh",target="public.t_pg"\} 3$/m,
	'metric: differences of the last check');
like($metrics, qr/^ctas_fed_sync_verified_timestamp_seconds\{catalog="lake",target="dw.t_ch"\} \d+\.\d+$/m,
	'metric: time of the last check');

# who may verify, and the errors
my ($rc, $out, $err) = $local->psql('postgres',
	"SET ROLE mallory; SELECT * FROM ctas_fed.verify_sync('wh.public.t_pg')");
like($err, qr/must be a member of role ".*" to verify its sync into "wh.public.t_pg"/,
	'verify by a role that is not the owner: refused');
($rc, $out, $err) = $local->psql('postgres', "SELECT * FROM ctas_fed.verify_sync('wh.public.nosuch')");
like($err, qr/there is no running sync into "wh.public.nosuch"/, 'verify of no sync: error');

# resync repairs, verify says so
$local->safe_psql('postgres', q{
SELECT ctas_fed.resync('wh.public.t_pg');
SELECT ctas_fed.resync('lake.dw.t_ch');
});
($rc, $out, $err) = $local->psql('postgres', "SELECT * FROM ctas_fed.verify_sync('wh.public.t_pg')");
like($err, qr/the sync into "wh.public.t_pg" is not streaming/, 'verify while copying: error');
ok(wait_until(120, sub { states() eq 't_ch=streaming t_pg=streaming' }),
	'both syncs stream again after resync()');
is(verify('wh.public.t_pg'), 'equal|||', 'PostgreSQL: equal after resync()');
is(verify('lake.dw.t_ch'), 'equal|||', 'ClickHouse: equal after resync()');

$local->safe_psql('postgres', q{
SELECT ctas_fed.stop_sync('wh.public.t_pg');
SELECT ctas_fed.stop_sync('lake.dw.t_ch');
});
ok(wait_until(30, sub { $local->safe_psql('postgres',
	"SELECT count(*) FROM pg_replication_slots") eq '0' }),
	'no slot left (the checks\' ephemeral slots included)');

done_testing();
