
# Copyright (c) 2026, ctas_fed developers

# Continuous sync into a ClickHouse catalog: the table is a
# ReplacingMergeTree(_version) ordered by the key, with _version and
# _deleted columns; a reader's SELECT ... FINAL WHERE _deleted = 0 equals
# the query on the source after a copy while a writer runs, updates,
# deletes, rows moving in and out of the WHERE, key changes, TRUNCATE, a
# killed worker, a local crash, ClickHouse down and back, and stop_sync.
# No staging table and no slot are left.

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

$local->safe_psql('postgres', q{
CREATE TABLE orders (id int PRIMARY KEY, customer text, amount int, region text);
INSERT INTO orders SELECT g, 'c' || g, g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END
  FROM generate_series(1, 20000) g;
CREATE PROCEDURE churn(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. n LOOP
    INSERT INTO orders VALUES (100000 + i, 'n' || i, i, CASE WHEN i % 3 = 0 THEN 'us' ELSE 'eu' END);
    UPDATE orders SET amount = amount + 1 WHERE id = (i * 7919) % 20000 + 1;
    UPDATE orders SET region = CASE WHEN region = 'eu' THEN 'us' ELSE 'eu' END
     WHERE id = (i::bigint * 104729) % 20000 + 1;
    DELETE FROM orders WHERE id = (i::bigint * 15485863) % 20000 + 1;
    UPDATE orders SET id = id + 1000000 WHERE id = (i * 31) % 20000 + 1;
    COMMIT;
  END LOOP;
END $$;
});

my $query = q{SELECT id, upper(customer), amount FROM orders WHERE region = 'eu'};
my $final = q{SELECT order_id, customer, amount FROM dw.eu FINAL WHERE _deleted = 0};

sub ch_rows_digest
{
	my $body = $ch->query("$final FORMAT TabSeparated");
	my @rows = sort grep { $_ ne '' } split /\n/, $body;
	return scalar(@rows) . ':' . join("\n", @rows);
}

sub pg_rows_digest
{
	my @rows = sort grep { $_ ne '' } split /\n/,
	  $local->safe_psql('postgres', "COPY ($query) TO STDOUT");
	return scalar(@rows) . ':' . join("\n", @rows);
}

sub our_slots
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'");
}

# options that would break the table's semantics are refused
my ($rc, $out, $err) = $local->psql('postgres',
	"CREATE TABLE lake.dw.x WITH (sync = 'continuous', engine = 'MergeTree') AS SELECT * FROM orders");
like($err, qr/option "engine" cannot be combined with the option "sync"/, 'engine refused');

my ($churn) = start_psql($local, 'CALL churn(3000)');
$local->safe_psql('postgres', qq{
  CREATE TABLE lake.dw.eu WITH (sync = 'continuous') AS
    SELECT id AS order_id, upper(customer) AS customer, amount FROM orders WHERE region = 'eu'});
like($ch->query(q{SELECT engine_full FROM system.tables WHERE database = 'dw' AND name = 'eu'}),
	qr/^ReplacingMergeTree\(_version\) PRIMARY KEY order_id ORDER BY order_id /,
	'ReplacingMergeTree(_version) ordered by the key');
is($ch->query(q{SELECT name, type FROM system.columns WHERE database = 'dw' AND table = 'eu' AND startsWith(name, '_') ORDER BY name FORMAT TabSeparated}),
	"_deleted\tUInt8\n_version\tUInt64\n", '_version and _deleted columns');
ok(wait_until(120, sub {
	$local->safe_psql('postgres', q{SELECT state FROM ctas_fed.jobs WHERE mode = 'sync'}) eq 'streaming' }),
	'sync streaming');
# every row the sync inserts, logged by a materialized view that merges
# cannot thin out (docs/sync-exactly-once.md)
sync_write_log($ch, 'eu', 'order_id');
$churn->finish;
my $want = pg_rows_digest();
ok(wait_until(60, sub { ch_rows_digest() eq $want }),
	'FINAL WHERE _deleted = 0 equals the query after the writer (every row)');

# the worker killed: another one goes on from the stored progress
my $pid = $local->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'});
$local->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
$local->safe_psql('postgres', q{
  UPDATE orders SET customer = customer || '!' WHERE id % 100 = 0;
  DELETE FROM orders WHERE id % 333 = 0;});
$want = pg_rows_digest();
ok(wait_until(60, sub { ch_rows_digest() eq $want }), 'killed worker: converges again');
like(sync_writes($ch, 'eu'), qr/^[1-9]\d* [1-9]\d* 0$/,
	'writer, idle worker killed: no key and version written twice (exactly once)');

# the local server crashes mid-stream: the job resumes after the restart
($churn) = start_psql($local, 'CALL churn(2000)');
ok(wait_until(60, sub { $local->safe_psql('postgres',
		q{SELECT count(*) > 20 FROM orders WHERE id > 100000}) eq 't' }),
	'crash: the writer runs');
$local->stop('immediate');
$churn->finish;
$local->start;
$want = pg_rows_digest();
ok(wait_until(90, sub { ch_rows_digest() eq $want }), 'crash: resumed and converged');
is(sync_writes_conflicts($ch, 'eu'), 0, 'crash: no key and version written with two rows');

# TRUNCATE: every key gets a delete row; later rows stay
$local->safe_psql('postgres', q{
  TRUNCATE orders;
  INSERT INTO orders VALUES (1, 'a', 1, 'eu'), (2, 'b', 2, 'eu'), (3, 'c', 3, 'us');});
$want = pg_rows_digest();
ok(wait_until(60, sub { ch_rows_digest() eq $want }), 'TRUNCATE and later rows applied');
is(ch_rows_digest(), "2:1\tA\t1\n2\tB\t2", 'the rows after TRUNCATE');

# one source transaction of more than 65536 changes, several of each key,
# rows leaving and entering the WHERE, keys deleted and inserted again: the
# row of each key that FINAL keeps is its last change
$local->safe_psql('postgres', q{
BEGIN;
INSERT INTO orders SELECT g, 'k' || g, 0, 'eu' FROM generate_series(10, 1009) g;
DO $$
BEGIN
  FOR i IN 1 .. 70 LOOP
    UPDATE orders SET amount = i WHERE id BETWEEN 10 AND 1009;
  END LOOP;
END $$;
UPDATE orders SET region = 'us' WHERE id BETWEEN 10 AND 209;
UPDATE orders SET region = 'eu', customer = 'back' || id WHERE id BETWEEN 10 AND 109;
DELETE FROM orders WHERE id BETWEEN 500 AND 599;
INSERT INTO orders SELECT g, 'again' || g, -g, 'eu' FROM generate_series(500, 549) g;
COMMIT;});
$want = pg_rows_digest();
like($want, qr/^852:/, 'the large transaction left 852 rows in the WHERE');
ok(wait_until(90, sub { ch_rows_digest() eq $want }),
	'> 65536 changes in one transaction: the last change of each key wins');
# (a batch applied again writes the same rows again: only different rows count)
is($ch->query(q{SELECT count() FROM (SELECT order_id, _version FROM dw.eu
	GROUP BY order_id, _version HAVING uniqExact(customer, amount, _deleted) > 1)}) + 0,
	0, 'no two different rows of a key share a version');

# DROP DATABASE of a database with a running sync: the hook stops the
# database's resolver and sync workers first, DROP DATABASE drops the slot,
# the sync of the other database goes on
$local->safe_psql('postgres', 'CREATE DATABASE dropme');
clickhouse_catalog($local, $ch, dbname => 'dropme', database => 'dw2');
$local->safe_psql('dropme', q{
  CREATE TABLE t (id int PRIMARY KEY, v text);
  INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) g;
  CREATE TABLE lake.dw2.t WITH (sync = 'continuous') AS SELECT id, v FROM t;});
ok(wait_until(60, sub { $local->safe_psql('dropme',
	q{SELECT state FROM ctas_fed.jobs WHERE mode = 'sync'}) eq 'streaming' }),
	'DROP DATABASE: the sync of the other database streams');
is(our_slots(), '2', 'DROP DATABASE: two slots before');
($rc, $out, $err) = $local->psql('postgres', 'DROP DATABASE dropme');
is($rc, 0, 'DROP DATABASE with a running sync succeeds') or diag($err);
is(our_slots(), '1', 'DROP DATABASE: its slot dropped, the other kept');
$local->safe_psql('postgres', q{UPDATE orders SET amount = amount + 1 WHERE id = 1});
$want = pg_rows_digest();
ok(wait_until(60, sub { ch_rows_digest() eq $want }),
	'DROP DATABASE: the sync of this database goes on');

$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('lake.dw.eu')");
ok(wait_until(30, sub { our_slots() eq '0' }), 'stop_sync: slot dropped');
is($ch->query(
		"SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_stage')") + 0,
	0, 'no staging table left in ClickHouse');

# ClickHouse down for a while (a fault proxy in front of it refuses new
# connections and resets the open ones): the changes wait in the slot, the
# job shows the error and a growing lag, and once ClickHouse answers again
# the sync catches up; FINAL WHERE _deleted = 0 equals the query
my $fp = start_fault_proxy($ch->{http_port});
clickhouse_catalog($local, undef, name => 'lake_fp', database => undef,
	url => 'http://127.0.0.1:' . $fp->port, password => $ch->{password},
	options => { connect_timeout => 2, timeout => 10 });
$local->safe_psql('postgres', q{
  INSERT INTO orders SELECT g, 'c' || g, g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END
    FROM generate_series(10, 5000) g ON CONFLICT (id) DO NOTHING;
  CREATE TABLE lake_fp.dw.eu_down WITH (sync = 'continuous') AS
    SELECT id AS order_id, upper(customer) AS customer, amount FROM orders WHERE region = 'eu'});
$final = q{SELECT order_id, customer, amount FROM dw.eu_down FINAL WHERE _deleted = 0};
ok(wait_until(120, sub {
	$local->safe_psql('postgres', q{SELECT state FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'dw.eu_down'}) eq 'streaming' }),
	'down: sync through the proxy streaming');
$want = pg_rows_digest();
ok(wait_until(60, sub { ch_rows_digest() eq $want }), 'down: copied before the fault');
$fp->set_rule(action => 'refuse', times => 0);
$fp->set_rule(match => 'POST', action => 'reset', times => 0);
$local->safe_psql('postgres', q{
  INSERT INTO orders VALUES (500001, 'while down', 1, 'eu');
  UPDATE orders SET customer = customer || ' down' WHERE id % 7 = 0;
  DELETE FROM orders WHERE id % 11 = 0;});
my $lag1;
ok(wait_until(60, sub {
	$lag1 = $local->safe_psql('postgres', q{
	  SELECT lag_bytes FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'dw.eu_down' AND state = 'streaming'
	     AND error IS NOT NULL AND lag_bytes > 0 AND lag_seconds > 2});
	$lag1 ne '' }), 'down: the job shows the error and its lag');
$local->safe_psql('postgres', q{UPDATE orders SET amount = amount + 1 WHERE region = 'eu'});
ok(wait_until(30, sub { $local->safe_psql('postgres', q{
	  SELECT lag_bytes FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'dw.eu_down' AND state = 'streaming'})
	  > $lag1 }), 'down: the lag grows with the changes');
isnt(ch_rows_digest(), pg_rows_digest(), 'down: ClickHouse does not have the changes yet');
$fp->clear;
$want = pg_rows_digest();
ok(wait_until(120, sub { ch_rows_digest() eq $want }),
	'back: FINAL WHERE _deleted = 0 equals the query (every row)');
ok(wait_until(30, sub { $local->safe_psql('postgres', q{
	  SELECT count(*) FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'dw.eu_down' AND state = 'streaming'
	     AND error IS NULL}) eq '1' }), 'back: the error is cleared');
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('lake_fp.dw.eu_down')");
ok(wait_until(30, sub { our_slots() eq '0' }), 'back: slot dropped after stop_sync');
is($ch->query(
		"SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_') AND name <> '_ctas_fed_sync_progress'") + 0,
	0, 'back: no _ctas_fed_ table left in ClickHouse but the progress table');
$fp->stop;

done_testing();
