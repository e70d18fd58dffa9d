
# Copyright (c) 2026, ctas_fed developers

# Continuous sync of a partitioned table into ClickHouse (issue 22, item 6,
# docs/sync.md "Partitioned sources"): the same steps as
# 560_sync_partitioned.pl on a ReplacingMergeTree target (rows read with
# FINAL, without the deleted ones) — the initial copy of every partition,
# changes across partitions with a row moved to another one, a new
# partition, a table with rows attached, a partition detached, one dropped;
# after each the remote equals the query (count and checksum) and the job
# streams.
# ctas-tap: parallel

use strict;
use warnings;

use Digest::MD5;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => "wal_level = logical\nmax_wal_senders = 4");
clickhouse_catalog($local, $ch);

sub digest
{
	my @rows = sort grep { $_ ne '' } split /\n/, $_[0];
	return scalar(@rows) . ':' . Digest::MD5::md5_hex(join("\n", @rows));
}

sub job
{
	return $local->safe_psql('postgres',
		"SELECT state || ':' || coalesce(error, '') FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'dw.ev'");
}

sub exact
{
	my ($what) = @_;
	my ($want, $got, $state);
	wait_until(60, sub {
		$state = job();
		$want = digest($local->safe_psql('postgres',
			'COPY (SELECT id, d, v FROM ev) TO STDOUT'));
		$got = digest($ch->query(
			'SELECT id, toString(d), v FROM dw.ev FINAL WHERE _deleted = 0 FORMAT TabSeparated'));
		$got eq $want && $state eq 'streaming:' });
	is($got, $want, "$what: remote equals the query");
	is($state, 'streaming:', "$what: streaming");
}

$local->safe_psql('postgres', q{
CREATE TABLE ev (id int, d date NOT NULL, v text, PRIMARY KEY (id, d))
  PARTITION BY RANGE (d);
CREATE TABLE ev_2026_01 PARTITION OF ev FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
CREATE TABLE ev_2026_02 PARTITION OF ev FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
CREATE TABLE ev_2026_03 (v text, d date NOT NULL, id int NOT NULL);
ALTER TABLE ev ATTACH PARTITION ev_2026_03 FOR VALUES FROM ('2026-03-01') TO ('2026-04-01');
INSERT INTO ev SELECT g, date '2026-01-01' + (g % 90), 'v' || g FROM generate_series(1, 300) g;
CREATE TABLE lake.dw.ev WITH (sync = 'continuous') AS SELECT id, d, v FROM ev;
});
exact('initial copy of every partition');

$local->safe_psql('postgres', q{
BEGIN;
INSERT INTO ev VALUES (1001, '2026-01-15', 'jan'), (1002, '2026-02-15', 'feb');
UPDATE ev SET v = 'upd' WHERE id % 7 = 0;
DELETE FROM ev WHERE id % 11 = 0;
UPDATE ev SET d = '2026-03-20' WHERE id = 1001;
COMMIT;});
exact('changes across partitions, a row moved');

$local->safe_psql('postgres', q{
CREATE TABLE ev_2026_04 PARTITION OF ev FOR VALUES FROM ('2026-04-01') TO ('2026-05-01');
INSERT INTO ev SELECT g, date '2026-04-01' + (g % 30), 'apr' || g FROM generate_series(2001, 2050) g;});
exact('a new partition and rows in it');

$local->safe_psql('postgres', q{
CREATE TABLE ev_2025_12 (id int NOT NULL, d date NOT NULL, v text);
INSERT INTO ev_2025_12 SELECT g, date '2025-12-01' + (g % 31), 'dec' || g FROM generate_series(3001, 3040) g;
ALTER TABLE ev ATTACH PARTITION ev_2025_12 FOR VALUES FROM ('2025-12-01') TO ('2026-01-01');
UPDATE ev SET v = 'after attach' WHERE id = 3001;});
exact('a table with rows attached');

$local->safe_psql('postgres', q{
ALTER TABLE ev DETACH PARTITION ev_2026_01;
DELETE FROM ev_2026_01 WHERE id < 10;});
exact('a partition detached');

$local->safe_psql('postgres', q{
DROP TABLE ev_2026_02;
INSERT INTO ev VALUES (9003, '2026-03-05', 'after drop');});
exact('a partition dropped');

done_testing();
