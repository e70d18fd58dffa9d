
# Copyright (c) 2026, ctas_fed developers

# Continuous sync of a partitioned table into PostgreSQL (issue 22, item 6,
# docs/sync.md "Partitioned sources").  A table partitioned by range of a
# date, three partitions (one with its columns in another order), followed
# as one table by three syncs: the whole table, a WHERE over it, and one of
# its partitions alone.  After each step the remote tables equal their
# queries (count and checksum) and the jobs stream:
#  - inserts, updates and deletes across partitions, an UPDATE that moves a
#    row to another partition;
#  - a new partition (CREATE TABLE ... PARTITION OF) and rows in it:
#    followed without a copy;
#  - an empty table attached: followed as a new partition;
#  - a partition detached (then changed on its own), a partition dropped
#    (in a REPEATABLE READ transaction with changes to it before): the keys
#    of its rows, carried by the DDL's message, leave the remote tables at
#    the DDL's place;
#  - a table with rows attached, in a transaction with changes before and
#    after: its rows, carried by the DDL's message, join at the DDL's place;
#  - two levels of partitions: a table with rows attached under a
#    partition, a partition of a partition detached; DETACH ...
#    CONCURRENTLY: the remote tables keep the transactions before the DDL,
#    then the stream is copied again (a resync, in the log); an unlogged
#    table attached (the job fails);
#  - what cannot be followed is refused with the reason: ONLY on a
#    partitioned table, a partition whose replica identity lacks the key,
#    a table and its partition in one stream;
#  - text keys with a space, a backslash, a newline, empty, leaving with a
#    detached partition;
#  - TRUNCATE of one partition, which pgoutput does not send: verify_sync
#    shows it, resync repairs it.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $local = new_cluster('local', conf => "wal_level = logical\nmax_wal_senders = 4\nmax_worker_processes = 16");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
postgres_catalog($local, $remote);

my %query = (
	ev       => 'SELECT id, d, v FROM ev',
	ev_where => q{SELECT id, d, upper(v) AS v FROM ev WHERE id % 3 <> 0},
	ev_leaf  => 'SELECT id, d, v FROM ev_2026_03',
);

sub job
{
	my ($name) = @_;
	return $local->safe_psql('postgres',
		"SELECT state || ':' || coalesce(error, '') FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'public.$name'");
}

sub resyncs
{
	my $log = slurp_file($local->logfile);
	my @n = $log =~ /: partition \w+ \w+ of the source of sync \d+: [^\n]*resyncing/g;
	return scalar @n;
}

# every sync streams and its remote table equals its query (count:md5)
sub all_exact
{
	my ($what) = @_;
	for my $name (sort keys %query)
	{
		my ($want, $got, $state);
		wait_until(60, sub {
			$state = job($name);
			$want = sql_digest($local, 'postgres', $query{$name});
			$got = pg_digest($remote, 'dw', "public.$name");
			$got eq $want && $state eq 'streaming:' });
		is($got, $want, "$name: $what: remote equals the query");
		is($state, 'streaming:', "$name: $what: streaming");
	}
}

$local->safe_psql('postgres', q{
CREATE TABLE ev (id int, d date NOT NULL, v text, PRIMARY KEY (id, d))
  PARTITION BY RANGE (d);
CREATE TABLE ev_2026_01 PARTITION OF ev FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
CREATE TABLE ev_2026_02 PARTITION OF ev FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
-- another column order: the partition's attnums differ from the root's
CREATE TABLE ev_2026_03 (v text, d date NOT NULL, id int NOT NULL);
ALTER TABLE ev ATTACH PARTITION ev_2026_03 FOR VALUES FROM ('2026-03-01') TO ('2026-04-01');
INSERT INTO ev SELECT g, date '2026-01-01' + (g % 90), 'v' || g FROM generate_series(1, 300) g;
});

# what cannot be followed is refused with the reason
my ($rc, $out, $err) = $local->psql('postgres',
	"CREATE TABLE wh.public.x WITH (sync = 'continuous') AS SELECT * FROM ONLY ev");
like($err, qr/continuous sync does not support ONLY on a partitioned table/,
	'ONLY on a partitioned table refused');
$local->safe_psql('postgres', q{
CREATE TABLE bad (id int, d date NOT NULL, u int NOT NULL, PRIMARY KEY (id, d)) PARTITION BY RANGE (d);
CREATE TABLE bad_1 PARTITION OF bad FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
CREATE UNIQUE INDEX bad_1_u ON bad_1 (u);
ALTER TABLE bad_1 REPLICA IDENTITY USING INDEX bad_1_u;});
($rc, $out, $err) = $local->psql('postgres',
	"CREATE TABLE wh.public.x WITH (sync = 'continuous') AS SELECT * FROM bad");
like($err, qr/cannot sync partitioned table "bad": the replica identity of partition "bad_1" does not contain the key column "id"/,
	'a partition whose replica identity lacks the key refused');
($rc, $out, $err) = $local->psql('postgres',
	q{SELECT * FROM ctas_fed.create_tables_as('wh', 'public', tables => ARRAY['ev', 'ev_2026_01']::regclass[], options => '{"sync": "continuous"}')});
like($err, qr/cannot sync table "ev(_2026_01)?" and its partition or partitioned ancestor "ev(_2026_01)?" in one stream/,
	'a table and its partition in one stream refused');
is($remote->safe_psql('dw', "SELECT count(*) FROM pg_tables WHERE tablename IN ('x', 'ev', 'ev_2026_01')"),
	'0', 'nothing left remotely by the refused statements');

for my $name (sort keys %query)
{
	$local->safe_psql('postgres',
		"CREATE TABLE wh.public.$name WITH (sync = 'continuous') AS $query{$name}");
}
is($local->safe_psql('postgres',
	"SELECT pubviaroot FROM pg_publication p JOIN pg_publication_rel r ON r.prpubid = p.oid WHERE r.prrelid = 'ev'::regclass ORDER BY 1"),
	"t\nt", 'the publications of the partitioned table publish via the root');
all_exact('initial copy of every partition');

# changes across partitions, a row moved to another partition
$local->safe_psql('postgres', q{
BEGIN;
INSERT INTO ev VALUES (1001, '2026-01-15', 'jan'), (1002, '2026-02-15', 'feb'), (1003, '2026-03-15', 'mar');
UPDATE ev SET v = 'upd' WHERE id % 7 = 0;
DELETE FROM ev WHERE id % 11 = 0;
UPDATE ev SET d = '2026-03-20' WHERE id = 1001;
UPDATE ev SET d = '2026-01-20', v = 'moved out of march' WHERE id = 1003;
COMMIT;
UPDATE ev SET id = id + 5000 WHERE id = 1002;});
all_exact('inserts, updates, deletes, rows moved between partitions');

# a new partition: empty, followed as it is
my $before = resyncs();
$local->safe_psql('postgres', q{
CREATE TABLE ev_2026_04 PARTITION OF ev FOR VALUES FROM ('2026-04-01') TO ('2026-05-01');
INSERT INTO ev SELECT g, date '2026-04-01' + (g % 30), 'apr' || g FROM generate_series(2001, 2050) g;});
all_exact('new partition and rows in it');
is(resyncs(), $before, 'a new partition is followed without a copy');

# a table with rows attached, in a transaction with changes before and after
$local->safe_psql('postgres', q{
CREATE TABLE ev_2025_12 (id int NOT NULL, d date NOT NULL, v text);
INSERT INTO ev_2025_12 SELECT g, date '2025-12-01' + (g % 31), CASE WHEN g % 10 <> 0 THEN 'dec ' || g END FROM generate_series(3001, 3040) g;
BEGIN;
UPDATE ev SET v = 'before attach' WHERE id = 7;
ALTER TABLE ev ATTACH PARTITION ev_2025_12 FOR VALUES FROM ('2025-12-01') TO ('2026-01-01');
UPDATE ev SET v = 'after attach' WHERE id IN (8, 3001);
COMMIT;
DELETE FROM ev WHERE id = 3002;});
all_exact('a table with rows attached');
is(resyncs(), $before, 'a table with rows attached is followed without a copy: its rows join');

# an empty table attached: followed as a new partition
$before = resyncs();
$local->safe_psql('postgres', q{
CREATE TABLE ev_2026_05 (id int NOT NULL, d date NOT NULL, v text);
ALTER TABLE ev ATTACH PARTITION ev_2026_05 FOR VALUES FROM ('2026-05-01') TO ('2026-06-01');
INSERT INTO ev VALUES (4001, '2026-05-02', 'may');});
all_exact('an empty table attached');
is(resyncs(), $before, 'an empty table attached is followed without a copy');

# a partition detached, then changed as a table of its own
$before = resyncs();
$local->safe_psql('postgres', q{
ALTER TABLE ev DETACH PARTITION ev_2026_01;
INSERT INTO ev_2026_01 VALUES (9001, '2026-01-05', 'after detach');
UPDATE ev_2026_01 SET v = 'detached' WHERE id = 1;
INSERT INTO ev VALUES (9002, '2026-02-05', 'after detach');});
all_exact('a partition detached');
is(resyncs(), $before, 'the detach is followed without a copy: the keys of its rows leave');

# a partition dropped (and a DROP rolled back: nothing)
$before = resyncs();
$local->safe_psql('postgres', q{
BEGIN; DROP TABLE ev_2026_04; ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE ev SET v = 'before drop' WHERE d = '2026-02-10';
INSERT INTO ev VALUES (9005, '2026-02-11', 'dropped with its partition');
DROP TABLE ev_2026_02;
INSERT INTO ev VALUES (9003, '2026-03-05', 'after drop');
COMMIT;});
all_exact('a partition dropped');
is(resyncs(), $before, 'the drop is followed without a copy: the keys of its rows leave');
is($local->safe_psql('postgres', q{SELECT count(*) FROM ev WHERE d >= '2026-04-01' AND d < '2026-05-01'}),
	'50', 'the rolled back DROP left its partition');

# the leaf's sync follows the table it read, attached or not
$local->safe_psql('postgres', q{
ALTER TABLE ev DETACH PARTITION ev_2026_03;
UPDATE ev_2026_03 SET v = 'leaf alone' WHERE id % 2 = 0;});
all_exact('the leaf detached');

# two levels: a partitioned partition, a table with rows attached under it,
# one of its partitions detached; DETACH ... CONCURRENTLY (a resync)
$before = resyncs();
$local->safe_psql('postgres', q{
CREATE TABLE ev_2026_06 PARTITION OF ev FOR VALUES FROM ('2026-06-01') TO ('2026-07-01') PARTITION BY RANGE (d);
CREATE TABLE ev_2026_06a PARTITION OF ev_2026_06 FOR VALUES FROM ('2026-06-01') TO ('2026-06-16');
INSERT INTO ev SELECT g, date '2026-06-01' + (g % 15), 'jun' || g FROM generate_series(5001, 5020) g;
CREATE TABLE ev_2026_06b (d date NOT NULL, id int NOT NULL, v text);
INSERT INTO ev_2026_06b SELECT date '2026-06-16' + (g % 14), g, 'late jun' || g FROM generate_series(5101, 5120) g;
ALTER TABLE ev_2026_06 ATTACH PARTITION ev_2026_06b FOR VALUES FROM ('2026-06-16') TO ('2026-07-01');});
all_exact('a table with rows attached to a partition of a partition');
is(resyncs(), $before, 'the attach two levels down is followed without a copy');
$local->safe_psql('postgres', q{
ALTER TABLE ev_2026_06 DETACH PARTITION ev_2026_06a;
UPDATE ev SET v = 'after sub-detach' WHERE id = 5101;});
all_exact('a partition of a partition detached');
is(resyncs(), $before, 'the detach two levels down is followed without a copy');
$local->safe_psql('postgres', q{ALTER TABLE ev DETACH PARTITION ev_2026_05 CONCURRENTLY;});
all_exact('DETACH ... CONCURRENTLY');
ok(resyncs() > $before, 'DETACH ... CONCURRENTLY resynced the streams');

# keys of text with a space, a backslash, a newline leave with a
# detached partition (the DDL's message escapes them)
$local->safe_psql('postgres', q{
CREATE TABLE pk (k text, r int, v int, PRIMARY KEY (k, r)) PARTITION BY LIST (r);
CREATE TABLE pk_1 PARTITION OF pk FOR VALUES IN (1);
CREATE TABLE pk_2 PARTITION OF pk FOR VALUES IN (2);
INSERT INTO pk VALUES ('a b', 1, 1), ('back\slash', 1, 2), (E'new\nline', 1, 3), ('', 1, 4),
  ('a b', 2, 5), ('back\slash', 2, 6);
CREATE TABLE wh.public.pk WITH (sync = 'continuous') AS SELECT * FROM pk;});
$query{pk} = 'SELECT * FROM pk';
all_exact('text keys');
$before = resyncs();
$local->safe_psql('postgres', q{ALTER TABLE pk DETACH PARTITION pk_1;});
all_exact('text keys of a detached partition');
is(resyncs(), $before, 'text keys: followed without a copy');
delete $query{pk};

# an unlogged table attached: its changes would not be decoded, the job
# fails with the reason after the transactions before
$local->safe_psql('postgres', q{
CREATE TABLE pu (id int, d date NOT NULL, PRIMARY KEY (id, d)) PARTITION BY RANGE (d);
CREATE TABLE pu_1 PARTITION OF pu FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
INSERT INTO pu VALUES (1, '2026-01-01');
CREATE TABLE wh.public.pu WITH (sync = 'continuous') AS SELECT * FROM pu;});
ok(wait_until(60, sub { job('pu') eq 'streaming:' }), 'pu: streaming');
$local->safe_psql('postgres', q{
INSERT INTO pu VALUES (2, '2026-01-02');
CREATE UNLOGGED TABLE pu_2 (id int NOT NULL, d date NOT NULL);
ALTER TABLE pu ATTACH PARTITION pu_2 FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
INSERT INTO pu VALUES (3, '2026-02-02');});
ok(wait_until(30, sub { job('pu') =~ /^failed:/ }), 'pu: an unlogged partition attached fails the job');
like(job('pu'), qr/a partition of the source of sync \d+ is unlogged, and logical decoding does not see its changes: ALTER TABLE public.pu/,
	'pu: the reason');
is($remote->safe_psql('dw', 'SELECT string_agg(id::text, \',\' ORDER BY id) FROM public.pu'), '1,2',
	'pu: the remote keeps the transactions before the ATTACH');

# TRUNCATE of one partition: pgoutput does not send it under
# publish_via_partition_root (docs/sync.md); verify_sync finds the rows the
# remote still has, resync repairs it
$local->safe_psql('postgres', q{TRUNCATE ev_2025_12; INSERT INTO ev VALUES (9004, '2026-04-06', 'after truncate');});
my $diff;
wait_until(30, sub {
	$diff = $local->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE result = 'different') FROM ctas_fed.verify_sync('wh.public.ev')");
	$diff > 0 });
ok($diff > 0, 'a TRUNCATE of one partition is not in the stream: verify_sync shows the difference');
$local->safe_psql('postgres', "SELECT ctas_fed.resync('wh.public.ev')");
delete $query{$_} for qw(ev_where ev_leaf);
all_exact('resync after a TRUNCATE of one partition');

done_testing();
