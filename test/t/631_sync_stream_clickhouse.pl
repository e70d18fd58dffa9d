
# Copyright (c) 2026, ctas_fed developers

# create_tables_as with {"sync": "continuous"} into ClickHouse: the tables
# of one call share one decoding stream (one publication, one slot, one
# worker); the copy of both tables under one snapshot while a writer
# changes them, then the stream; a reader's SELECT ... FINAL WHERE
# _deleted = 0 of every table equals its source once quiet; stop_sync of
# one leaves the other streaming on the same slot; the last stop drops the
# slot, and no staging table is left in ClickHouse.

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
CREATE SCHEMA shop;
CREATE TABLE shop.p (id int PRIMARY KEY, v text, n int);
CREATE TABLE shop.q (id bigint PRIMARY KEY, v text);
INSERT INTO shop.p SELECT g, 'p' || g, g FROM generate_series(1, 20000) g;
INSERT INTO shop.q SELECT g, 'q' || g FROM generate_series(1, 20000) g;
CREATE PROCEDURE churn(base int, cnt int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN base + 1 .. base + cnt LOOP
    INSERT INTO shop.p VALUES (100000 + i, 'new', i);
    UPDATE shop.q SET v = 'u' || i WHERE id = (i::bigint * 7919) % 20000 + 1;
    DELETE FROM shop.p WHERE id = (i::bigint * 104729) % 20000 + 1;
    UPDATE shop.q SET id = id + 1000000 WHERE id = (i::bigint * 31) % 20000 + 1;
    COMMIT;
  END LOOP;
END $$;
});

sub our_slots
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'");
}

sub workers
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
}

# every row of a table as a reader of ClickHouse sees it, and of the source
sub ch_rows
{
	my ($t, $cols) = @_;
	my $body = $ch->query("SELECT $cols FROM dw.$t FINAL WHERE _deleted = 0 FORMAT TabSeparated");
	my @rows = sort grep { $_ ne '' } split /\n/, $body;
	return scalar(@rows) . ':' . join("\n", @rows);
}

sub pg_rows
{
	my ($t, $cols) = @_;
	my @rows = sort grep { $_ ne '' } split /\n/,
	  $local->safe_psql('postgres', "COPY (SELECT $cols FROM shop.$t) TO STDOUT");
	return scalar(@rows) . ':' . join("\n", @rows);
}

sub same
{
	my ($t) = @_;
	my $cols = $t eq 'p' ? 'id, v, n' : 'id, v';
	return ch_rows($t, $cols) eq pg_rows($t, $cols);
}

my ($churn) = start_psql($local, 'CALL churn(0, 3000)');
is($local->safe_psql('postgres', q{
  SELECT count(*) FROM ctas_fed.create_tables_as('lake', 'dw',
    tables => ARRAY['shop.p', 'shop.q']::regclass[],
    options => '{"sync": "continuous"}')}),
	'2', 'create_tables_as: two tables');
ok(wait_until(120, sub {
	$local->safe_psql('postgres',
		"SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'") eq '2' }),
	'both jobs reach streaming');
sync_write_log($ch, $_, 'id') for 'p', 'q';
is(our_slots(), '1', 'one replication slot for both tables');
# (creating a materialized view on a table ClickHouse 18.16 is inserting
# into can fail that insert once: the worker then starts again in 5 s)
ok(wait_until(30, sub { workers() eq '1' }), 'one sync worker for both tables');
$churn->finish;
# more changes once the write logs exist: the first writer may have been
# applied whole before they were made, which would leave them empty
$local->safe_psql('postgres', 'CALL churn(3000, 500)');
ok($local->safe_psql('postgres', 'SELECT count(*) FROM shop.p WHERE id > 100000') eq '3500',
	'the writer made its changes');
ok(wait_until(60, sub { same('p') && same('q') }),
	'FINAL WHERE _deleted = 0 of both tables equals the source (every row)');
like(sync_writes($ch, $_), qr/^[1-9]\d* [1-9]\d* 0$/,
	"$_: no key and version written twice (exactly once)") for 'p', 'q';
is(sync_writes_conflicts($ch, $_), 0, "$_: no key and version written with two rows")
  for 'p', 'q';

# stop one: the other goes on, on the same slot
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('lake.dw.p')");
$local->safe_psql('postgres', 'CALL churn(10000, 200)');
ok(wait_until(60, sub { same('q') }), 'stop_sync of one: the other goes on');
is($ch->query('SELECT count() FROM dw.p FINAL WHERE _deleted = 0 AND id > 110000') + 0, 0,
	'the stopped table no longer follows');
is(our_slots(), '1', 'stop_sync of one: the slot stays');

# the last stop: the slot goes, nothing is left behind in ClickHouse
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('lake.dw.q')");
ok(wait_until(30, sub { our_slots() eq '0' }), 'last stop: the slot is dropped');
ok(wait_until(30, sub { workers() eq '0' }), 'last stop: no sync worker');
is($local->safe_psql('postgres',
		"SELECT count(*) FROM pg_publication WHERE pubname LIKE 'ctas_fed_sync_%'"),
	'0', 'last stop: no publication');
is($ch->query(q{SELECT count() FROM system.tables
	  WHERE startsWith(name, '_ctas_fed_') AND name <> '_ctas_fed_sync_progress'}) + 0,
	0, 'no _ctas_fed_ table left in ClickHouse but the progress table');

done_testing();
