
# Copyright (c) 2026, ctas_fed developers

# Continuous sync into a ClickHouse cluster catalog (issue 20), two real
# shards: ReplacingMergeTree(_version) local tables and a Distributed table
# on every shard; the worker routes each change by the sharding key (a
# function of the primary key) to the shard that holds the key, so that
# every version of a key meets on one shard, and a reader of the
# Distributed table with FINAL WHERE _deleted = 0 sees the query's result.
# After a writer (inserts, updates, deletes, key changes), a killed worker,
# shard 2 down and back, and TRUNCATE: the content equals the source, each
# key is on one shard only, and rows inserted through the Distributed table
# land on the shard the worker chose.  Keys that are not a function of the
# primary key are refused.  verify_sync answers equal, a resync converges,
# and a text key is routed by cityHash64 like the loads.
#
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my @sh    = start_clickhouse_cluster(2);
my $local = new_cluster('local', conf => "wal_level = logical");
clickhouse_cluster_catalog($local, \@sh);

$local->safe_psql('postgres', q{
CREATE TABLE orders (id int PRIMARY KEY, customer text, amount int);
INSERT INTO orders SELECT g, 'c' || g, g FROM generate_series(1, 5000) g;
CREATE PROCEDURE churn(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. n LOOP
    INSERT INTO orders VALUES (100000 + i, 'n' || i, i);
    UPDATE orders SET amount = amount + 1 WHERE id = (i * 7919) % 5000 + 1;
    DELETE FROM orders WHERE id = (i::bigint * 15485863) % 5000 + 1;
    UPDATE orders SET id = id + 1000000 WHERE id = (i * 31) % 5000 + 1;
    COMMIT;
  END LOOP;
END $$;
});

my $query = q{SELECT id, customer, amount FROM orders};

sub ch_rows
{
	my ($ch) = @_;
	my @rows = sort grep { $_ ne '' } split /\n/,
	  $ch->query("SELECT id, customer, amount FROM dw.o FINAL WHERE _deleted = 0 FORMAT TabSeparated");
	return scalar(@rows) . ':' . Digest::MD5::md5_hex(join("\n", @rows));
}

sub pg_rows
{
	my @rows = sort grep { $_ ne '' } split /\n/,
	  $local->safe_psql('postgres', "COPY ($query) TO STDOUT");
	return scalar(@rows) . ':' . Digest::MD5::md5_hex(join("\n", @rows));
}

# ids (every version, deleted ones too) found on both shards' local tables
sub on_both
{
	my %seen;
	foreach my $i (0, 1)
	{
		$seen{$_} |= 1 << $i foreach grep { $_ ne '' } split /\n/,
		  $sh[$i]->query('SELECT DISTINCT id FROM dw.o_local FORMAT TabSeparated');
	}
	return scalar(grep { $_ == 3 } values %seen);
}

sub converges
{
	my ($name) = @_;
	my $want = pg_rows();
	ok(wait_until(90, sub { ch_rows($sh[1]) eq $want }),
		"$name: FINAL through the Distributed table equals the query") or diag(ch_rows($sh[1]) . " vs $want");
	is(on_both(), 0, "$name: every key (all its versions) on one shard only");
	return;
}

# --- refused: a sharding key that is not a function of the primary key

my ($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.x WITH (sync = 'continuous', sharding_key = 'amount') AS SELECT id, amount FROM orders});
like($err, qr/cannot sync into cluster catalog "ring" with sharding key `amount`/,
	'sync: a sharding key of another column than the key is refused');
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.x WITH (sync = 'continuous', sharding_key = 'rand()') AS SELECT id, amount FROM orders});
like($err, qr/cannot sync into cluster catalog "ring" with sharding key rand\(\)/,
	'sync: rand() is refused');
is(join(',', map { $_->query("SELECT count() FROM system.tables WHERE database = 'dw'") + 0 } @sh),
	'0,0', 'refused: nothing on any shard');

# --- the sync, a writer running meanwhile

my ($churn) = start_psql($local, 'CALL churn(1500)');
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.o WITH (sync = 'continuous') AS SELECT id, customer, amount FROM orders});
is($rc, 0, 'CREATE TABLE ... WITH (sync) into a cluster catalog') or diag($err);
foreach my $i (0, 1)
{
	like($sh[$i]->query(q{SELECT engine_full FROM system.tables WHERE database = 'dw' AND name = 'o_local'}),
		qr/^ReplacingMergeTree\(_version\)/, "shard " . ($i + 1) . ": the local table is a ReplacingMergeTree(_version)");
	like($sh[$i]->query(q{SELECT engine_full FROM system.tables WHERE database = 'dw' AND name = 'o'}),
		qr/o_local\\', intHash64\(id\)\)$/m, "shard " . ($i + 1) . ": the Distributed table, sharded by intHash64 of the key");
}
ok(wait_until(120, sub {
	$local->safe_psql('postgres', q{SELECT state FROM ctas_fed.jobs WHERE mode = 'sync'}) eq 'streaming' }),
	'sync streaming');
$churn->finish;
converges('after the copy and the writer');
my @n = map { $_->query('SELECT count() FROM dw.o_local FINAL WHERE _deleted = 0') + 0 } @sh;
ok($n[0] > 1000 && $n[1] > 1000, "the rows are on both shards (@n)");

# the worker killed: another one goes on from the stored progress
my $pid = $local->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'});
$local->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
$local->safe_psql('postgres', q{
  UPDATE orders SET customer = customer || '!' WHERE id % 10 = 0;
  DELETE FROM orders WHERE id % 33 = 0;});
converges('killed worker');

# shard 2 down while changes arrive: the worker retries; once it is back,
# every change of both shards is there
$sh[1]->crash;
$local->safe_psql('postgres', q{
  UPDATE orders SET amount = -amount WHERE id % 7 = 0;
  INSERT INTO orders SELECT g, 'late' || g, g FROM generate_series(200001, 200500) g;});
sleep 2;
$sh[1]->restart;
converges('shard 2 down and back');

# TRUNCATE: a delete row for every key, on every shard
$local->safe_psql('postgres', q{
  TRUNCATE orders;
  INSERT INTO orders SELECT g, 't' || g, g FROM generate_series(1, 300) g;});
converges('TRUNCATE and later rows');

# the proof of the routing: every key inserted again through the
# Distributed table (as a deleted row of version 0, which FINAL ignores)
# lands on the shard that holds it
my $ids = $local->safe_psql('postgres', 'COPY (SELECT id, 0, 1 FROM orders) TO STDOUT');
$sh[0]->query('INSERT INTO dw.o (id, _version, _deleted) FORMAT TabSeparated',
	data => "$ids\n", params => { insert_distributed_sync => 1 });
is(on_both(), 0, 'rows inserted through the Distributed table meet the synced ones');
is(ch_rows($sh[0]), pg_rows(), 'and FINAL still equals the query');

# verify and resync
my ($vrc, $vout, $verr) = $local->psql('postgres', q{SELECT string_agg(result, ',') FROM ctas_fed.verify_sync('ring.dw.o')});
is($vout, 'equal', 'verify_sync through the Distributed table: equal') or diag($verr);
$local->safe_psql('postgres', q{DELETE FROM orders WHERE id % 5 = 0});
($vrc, $vout, $verr) = $local->psql('postgres', q{SELECT ctas_fed.resync('ring.dw.o')});
is($vrc, 0, 'resync of a sync into a cluster') or diag($verr);
ok(wait_until(90, sub {
	$local->safe_psql('postgres', q{SELECT state FROM ctas_fed.jobs WHERE mode = 'sync'}) eq 'streaming' }),
	'resync: streaming again');
converges('resync');

# a text key: sharded by cityHash64 of it, changes routed the same way
$local->safe_psql('postgres', q{
  CREATE TABLE codes (code text PRIMARY KEY, n int);
  INSERT INTO codes SELECT 'code-' || g || repeat('é', g % 40), g FROM generate_series(1, 2000) g;});
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.codes WITH (sync = 'continuous') AS SELECT code, n FROM codes});
is($rc, 0, 'sync of a table with a text key') or diag($err);
like($sh[1]->query(q{SELECT engine_full FROM system.tables WHERE database = 'dw' AND name = 'codes'}),
	qr/cityHash64\(code\)\)$/m, 'a text key: the Distributed table shards by cityHash64 of it');
$local->safe_psql('postgres', q{
  UPDATE codes SET n = -n WHERE n % 3 = 0;
  DELETE FROM codes WHERE n % 7 = 0;
  INSERT INTO codes VALUES ('', 0), ('ünï', 1);});
my $want_codes = $local->safe_psql('postgres', q{SELECT count(*) || ':' || sum(n) FROM codes});
ok(wait_until(90, sub {
	my $r = $sh[0]->query('SELECT toString(count()) || \':\' || toString(sum(n)) FROM dw.codes FINAL WHERE _deleted = 0');
	chomp $r; $r eq $want_codes }), "a text key: FINAL through the Distributed table equals the source ($want_codes)");
my %seen;
foreach my $i (0, 1)
{
	$seen{$_} |= 1 << $i foreach split /\n/,
	  $sh[$i]->query('SELECT DISTINCT hex(code) FROM dw.codes_local FORMAT TabSeparated');
}
is(scalar(grep { $_ == 3 } values %seen), 0, 'a text key: every key on one shard only');
$local->safe_psql('postgres', q{SELECT ctas_fed.stop_sync('ring.dw.codes')});

$local->safe_psql('postgres', q{SELECT ctas_fed.stop_sync('ring.dw.o')});
ok(wait_until(60, sub {
	$local->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots}) eq '0' }),
	'stop_sync: the slot goes');

done_testing();
