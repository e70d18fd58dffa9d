
# Copyright (c) 2026, ctas_fed developers

# The edges of a continuous sync's initial copy:
#  - EXPLAIN of a sync CTAS says what the sync will do: its key, that a
#    PostgreSQL target's key is built after the rows of the copy, the
#    publication the statement creates and the slot the worker creates;
#  - into ClickHouse, the copied rows get _version = consistent point - 2,
#    and every change committed at or after the consistent point, however
#    soon after it, wins over the copied row of its key: with a writer
#    committing all through the copy, FINAL ... WHERE _deleted = 0 equals
#    the source, and the raw versions say which rows came from where;
#  - a sync worker that has connected to its database but not yet
#    registered itself when DROP DATABASE of that database begins (a fault
#    point holds it there) exits by itself, and the DROP succeeds.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => "wal_level = logical");
clickhouse_catalog($local, $ch);
# EXPLAIN without ANALYZE reaches no remote: a catalog nobody listens on
postgres_catalog($local, undef, port => free_port());

$local->safe_psql('postgres', q{
CREATE TABLE vt (id int PRIMARY KEY, v int NOT NULL, note text);
INSERT INTO vt SELECT g, 0, 'n' || g FROM generate_series(1, 100000) g;
CREATE TABLE writer_stop (x int);
-- one transaction per key, each key once, until told to stop
CREATE PROCEDURE bump() LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. 100000 LOOP
    EXIT WHEN EXISTS (SELECT FROM writer_stop);
    UPDATE vt SET v = v + 1 WHERE id = i;
    COMMIT;
  END LOOP;
END $$;
});

sub our_slots
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'");
}

# ---- EXPLAIN ---------------------------------------------------------------
my $dboid = $local->safe_psql('postgres',
	q{SELECT oid FROM pg_database WHERE datname = current_database()});
my $explain = $local->safe_psql('postgres', q{
  EXPLAIN (COSTS OFF) CREATE TABLE wh.public.vt_copy WITH (sync = 'continuous')
    AS SELECT id AS vid, v FROM vt WHERE v >= 0});
note($explain);
like($explain, qr/^\s*Remote Key: ALTER TABLE public\.vt_copy ADD PRIMARY KEY \(vid\)$/m,
	'EXPLAIN: the remote key, named as the query projects it');
like($explain,
	qr/^\s*Remote Key Built: by the sync worker, after the rows of the initial copy, in their remote transaction$/m,
	'EXPLAIN: the key is built after the copy');
like($explain, qr/^\s*Sync: continuous$/m, 'EXPLAIN: Sync');
like($explain, qr/^\s*Sync Source: public\.vt$/m, 'EXPLAIN: Sync Source');
like($explain, qr/^\s*Sync Key: vid$/m, 'EXPLAIN: Sync Key');
like($explain,
	qr/^\s*Sync Publication: CREATE PUBLICATION ctas_fed_sync_${dboid}_<sync_id> FOR TABLE ONLY public\.vt$/m,
	'EXPLAIN: the publication the statement creates');
like($explain,
	qr/^\s*Sync Slot: ctas_fed_sync_${dboid}_<sync_id> \(pgoutput\), created by the sync worker after commit$/m,
	'EXPLAIN: the slot the worker creates');
like($explain, qr/^\s*Sync Initial Copy: by the sync worker, under the snapshot of the slot's consistent point/m,
	'EXPLAIN: the initial copy');
like($explain, qr/^\s*Filter: \(v >= 0\)$/m, 'EXPLAIN: the plan of the query');
$explain = $local->safe_psql('postgres', q{
  EXPLAIN (COSTS OFF, FORMAT JSON) CREATE TABLE lake.dw.vt_copy WITH (sync = 'continuous')
    AS SELECT id, v FROM vt});
like($explain, qr/"Sync Key": \["id"\]/, 'EXPLAIN (FORMAT JSON): Sync Key is a list');
like($explain, qr/"Remote DDL": "CREATE TABLE [^"]*ReplacingMergeTree\(_version\)/,
	'EXPLAIN, ClickHouse: the table keyed for FINAL');
unlike($explain, qr/Remote Key Built/, 'EXPLAIN, ClickHouse: no key built afterwards');
is($local->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM pg_publication) + (SELECT count(*) FROM ctas_fed.syncs)}),
	'0', 'EXPLAIN: no publication and no job made');

# ---- ClickHouse: the versions at the consistent point ----------------------
# A writer commits one update after another, each of another key, from
# before the CREATE TABLE until after the copy; the first of its
# transactions the slot decodes commits right after the consistent point C,
# while the copy (rows at C - 2) is being written.  Each key changes at
# most once, so a merge of ClickHouse keeps each key's newest row: that of
# the first decoded change stays to be looked at.
my $log_offset = -s $local->logfile;
my ($writer) = start_psql($local, 'CALL bump()');
ok(wait_until(60, sub { $local->safe_psql('postgres',
		q{SELECT count(*) > 50 FROM vt WHERE v > 0}) eq 't' }),
	'versions: the writer runs');
$local->safe_psql('postgres', q{
  CREATE TABLE lake.dw.vt WITH (sync = 'continuous') AS SELECT id, v, note FROM vt});
my $at = wait_log($local,
	qr/ctas_fed sync \d+: copied (\d+) rows, streaming from ([0-9A-F]+)\/([0-9A-F]+)/,
	$log_offset, 120);
ok($at, 'versions: the copy is done');
my $log = slurp_file($local->logfile, $log_offset);
my ($copied, $hi, $lo) =
  $log =~ /ctas_fed sync \d+: copied (\d+) rows, streaming from ([0-9A-F]+)\/([0-9A-F]+)/;
my $c = hex($hi) * 2**32 + hex($lo);
is($copied, 100000, 'versions: every row copied');
my $running = $local->safe_psql('postgres',
	q{SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CALL bump%' AND state = 'active'});
is($running, '1', 'versions: the writer still commits after the copy');
$local->safe_psql('postgres', 'INSERT INTO writer_stop VALUES (1)');
$writer->finish;

my $final = q{SELECT id, v, note FROM dw.vt FINAL WHERE _deleted = 0};
sub ch_rows
{
	return join("\n", sort grep { $_ ne '' } split /\n/,
		$ch->query("$final FORMAT TabSeparated"));
}
my $want = join("\n", sort grep { $_ ne '' } split /\n/,
	$local->safe_psql('postgres', 'COPY (SELECT id, v, note FROM vt) TO STDOUT'));
ok(wait_until(90, sub { ch_rows() eq $want }),
	'versions: FINAL WHERE _deleted = 0 equals the source (every row)');
is($ch->query(sprintf(
	'SELECT count() FROM dw.vt WHERE _version <> %.0f AND _version < %.0f', $c - 2, $c)) + 0,
	0, 'versions: a row has the consistent point minus 2 (copied) or a commit lsn at or after it');
is($ch->query(sprintf(
	'SELECT count() FROM dw.vt FINAL WHERE _version = %.0f AND v = 0', $c - 2)) + 0,
	$local->safe_psql('postgres', 'SELECT count(*) FROM vt WHERE v = 0'),
	'versions: the keys never changed keep their copied rows');
my $first = $ch->query(sprintf(
	'SELECT min(_version) FROM dw.vt WHERE _version >= %.0f FORMAT TabSeparated', $c));
chomp $first;
ok($first > 0 && $first - $c < 1024 * 1024,
	'versions: the first decoded change committed right after the consistent point')
  or diag("consistent point $c, first change $first");
# the key of that first change: its copied row lost to it
my $key = $ch->query(sprintf(
	'SELECT id FROM dw.vt WHERE _version = %.0f FORMAT TabSeparated', $first));
chomp $key;
is($ch->query("SELECT _version, v FROM dw.vt FINAL WHERE id = $key AND _deleted = 0 FORMAT TabSeparated"),
	"$first\t1\n",
	'versions: the first change after the consistent point wins over the copied row');
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('lake.dw.vt')");
ok(wait_until(30, sub { our_slots() eq '0' }), 'versions: slot dropped after stop_sync');

# ---- DROP DATABASE before the worker registers itself ----------------------
# The database's own setting holds its sync worker 3 s at the fault point
# after the worker connected and before it registers (the resolver of the
# database reads the setting too, and passes no such point).  DROP
# DATABASE, sent meanwhile, stops the resolver and marks the database; the
# worker sees the mark once it goes on, and exits, within the 5 s DROP
# DATABASE waits for the other users of the database.
$local->safe_psql('postgres', 'CREATE DATABASE dropwin');
clickhouse_catalog($local, $ch, dbname => 'dropwin', database => 'dw3');
$local->safe_psql('postgres',
	q{ALTER DATABASE dropwin SET ctas_fed.fault_point = 'sync_worker_attach:3'});
$log_offset = -s $local->logfile;
$local->safe_psql('dropwin', q{
  CREATE TABLE t (id int PRIMARY KEY, v text);
  INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) g;
  CREATE TABLE lake.dw3.t WITH (sync = 'continuous') AS SELECT id, v FROM t;});
ok(wait_log($local, qr/stopped at fault point "sync_worker_attach"/, $log_offset, 60),
	'DROP DATABASE window: the worker is connected, not registered');
is($local->safe_psql('postgres',
	q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync' AND datname = 'dropwin'}),
	'1', 'DROP DATABASE window: the worker is in the database');
my ($rc, $out, $err) = $local->psql('postgres', 'DROP DATABASE dropwin');
is($rc, 0, 'DROP DATABASE window: DROP DATABASE succeeds') or diag($err);
like(slurp_file($local->logfile, $log_offset),
	qr/ctas_fed sync \d+: the worker exits, its database is being dropped or changed/,
	'DROP DATABASE window: the worker saw the mark and exited');
is($local->safe_psql('postgres',
	q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'}),
	'0', 'DROP DATABASE window: no sync worker left');
is(our_slots(), '0', 'DROP DATABASE window: no slot left');
is($ch->query(
		"SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_stage')") + 0,
	0, 'no staging table left in ClickHouse');

done_testing();
