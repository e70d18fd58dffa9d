
# Copyright (c) 2026, ctas_fed developers

# Continuous sync into ClickHouse: schema changes in WAL order (issue 18).
# Under schema_changes = 'follow' a rename of a read column and a column
# added between changes of one transaction are followed; a type change of a
# result column is followed by a copy again (the remote column retyped); a
# type change of a column the WHERE reads fails the job after the
# transactions before it, with the reason; a whole-row sync (SELECT *)
# follows a column added and a column renamed (the table rebuilt under the
# new names), and fails at its key column renamed, the remote keeping
# exactly the transactions before the DDL.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => "wal_level = logical\nmax_wal_senders = 4");
clickhouse_catalog($local, $ch);

sub job
{
	my ($target) = @_;
	return $local->safe_psql('postgres',
		"SELECT state || ':' || coalesce(error, '') FROM ctas_fed.jobs WHERE mode = 'sync' AND target = '$target'");
}

sub ch_rows
{
	my ($table, $cols) = @_;
	return $ch->query(
		"SELECT $cols FROM dw.$table FINAL WHERE _deleted = 0 ORDER BY id FORMAT TabSeparated");
}

sub pg_rows
{
	my ($query) = @_;
	my $out = $local->safe_psql('postgres', "COPY ($query ORDER BY id) TO STDOUT");
	return $out eq '' ? '' : "$out\n";
}

$local->safe_psql('postgres', q{
CREATE TABLE t1 (id int PRIMARY KEY, v text, w int);
CREATE TABLE t2 (id int PRIMARY KEY, v text);
INSERT INTO t1 SELECT g, 'v' || g, g FROM generate_series(1, 100) g;
INSERT INTO t2 SELECT g, 'v' || g FROM generate_series(1, 100) g;
CREATE TABLE lake.dw.t1 WITH (sync = 'continuous') AS SELECT id, v FROM t1 WHERE w % 2 = 0;
CREATE TABLE lake.dw.t2 WITH (sync = 'continuous') AS SELECT * FROM t2;
});
ok(wait_until(60, sub { job('dw.t1') eq 'streaming:' && job('dw.t2') eq 'streaming:' }),
	'both syncs streaming');

# follow: a rename of a read column and a column added, between changes
$local->safe_psql('postgres', q{
BEGIN;
UPDATE t1 SET v = 'before' WHERE id <= 10;
ALTER TABLE t1 RENAME COLUMN v TO v2;
UPDATE t1 SET v2 = 'after', w = w + 1 WHERE id > 90;
ALTER TABLE t1 ADD COLUMN z int;
INSERT INTO t1 VALUES (1000, 'new', 2, 3);
COMMIT;
DELETE FROM t1 WHERE id = 2;});
my $want = pg_rows('SELECT id, v2 FROM t1 WHERE w % 2 = 0');
my $got;
wait_until(30, sub { $got = ch_rows('t1', 'id, v'); $got eq $want });
is($got, $want, 't1: rename and add column followed: remote equals the query');
is(job('dw.t1'), 'streaming:', 't1: still streaming');

# a type change of a result column: followed by a copy again from a
# snapshot after the DDL, with the changes before and after it
$local->safe_psql('postgres', q{UPDATE t1 SET v2 = 'last before' WHERE id = 4});
$local->safe_psql('postgres', q{
BEGIN;
UPDATE t1 SET v2 = 'in the DDL transaction' WHERE id = 6;
ALTER TABLE t1 ALTER COLUMN v2 TYPE varchar(40);
COMMIT;
UPDATE t1 SET v2 = 'after' WHERE id = 8;});
$want = pg_rows('SELECT id, v2 FROM t1 WHERE w % 2 = 0');
ok(wait_until(60, sub {
	$local->safe_psql('postgres', q{
		SELECT count(*) FROM ctas_fed.sync_schema_changes c JOIN ctas_fed.syncs y USING (sync_id)
		 WHERE y.remote_table = 't1' AND c.followed
		   AND c.change = 'ALTER COLUMN v TYPE character varying(40) (values copied again)'}) eq '1'
	  && job('dw.t1') eq 'streaming:' }),
	't1: type change of a result column: copied again, streaming');
wait_until(30, sub { $got = ch_rows('t1', 'id, v'); $got eq $want });
is($got, $want, 't1: type change followed: remote equals the query');
is($ch->query(q{SELECT count() FROM system.tables WHERE database = 'dw' AND name LIKE '_ctas_fed_resync_%' FORMAT TabSeparated}),
	"0\n", 't1: no rebuild table left');

# a type change of a column the WHERE reads: the job fails after what came
# before (the WHERE's operators are bound to the old type)
$local->safe_psql('postgres', q{UPDATE t1 SET v2 = 'last before' WHERE id = 10});
$want = pg_rows('SELECT id, v2 FROM t1 WHERE w % 2 = 0');
$local->safe_psql('postgres', q{
BEGIN;
UPDATE t1 SET v2 = 'in the DDL transaction' WHERE id = 12;
ALTER TABLE t1 ALTER COLUMN w TYPE bigint;
COMMIT;
UPDATE t1 SET v2 = 'after' WHERE id = 14;});
ok(wait_until(30, sub { job('dw.t1') =~ /^failed:/ }), 't1: type change of a WHERE column: the job failed');
like(job('dw.t1'), qr/column "w" of table "public.t1" read by sync \d+ changed its type from integer to bigint, which the query reads in an expression or its WHERE/,
	't1: the reason names the column');
is(ch_rows('t1', 'id, v'), $want,
	't1: the remote holds the transactions before the DDL, and only them');

# a whole-row sync: a column added is followed (test 514 has more), a
# column renamed too (ClickHouse 18.16 has no RENAME COLUMN: the table is
# rebuilt under the new names, test 516 has more), a key column renamed
# fails the job
$local->safe_psql('postgres', q{
ALTER TABLE t2 ADD COLUMN z int DEFAULT 1;
UPDATE t2 SET v = 'after', z = 2 WHERE id = 2;});
$want = pg_rows('SELECT id, v, z FROM t2');
wait_until(30, sub { $got = eval { ch_rows('t2', 'id, v, z') } // ''; $got eq $want });
is($got, $want, 't2: column added to a whole-row sync: followed');
$local->safe_psql('postgres', q{
UPDATE t2 SET v = 'before' WHERE id = 1;
BEGIN;
ALTER TABLE t2 RENAME COLUMN v TO v2;
UPDATE t2 SET v2 = 'in the DDL transaction' WHERE id = 3;
COMMIT;
UPDATE t2 SET v2 = 'after' WHERE id = 4;});
$want = pg_rows('SELECT id, v2, z FROM t2');
wait_until(60, sub { $got = eval { ch_rows('t2', 'id, v2, z') } // ''; $got eq $want });
is($got, $want, 't2: column renamed in a whole-row sync: followed, remote equals the source');
is($ch->query(q{SELECT name FROM system.columns WHERE database = 'dw' AND table = 't2' AND name NOT IN ('_version', '_deleted') FORMAT TabSeparated}),
	"id\nv2\nz\n", 't2: the remote columns under the new names');
is(job('dw.t2'), 'streaming:', 't2: still streaming');
is($ch->query(q{SELECT count() FROM system.tables WHERE database = 'dw' AND name LIKE '_ctas_fed_resync_%' FORMAT TabSeparated}),
	"0\n", 't2: no rebuild table left');
$local->safe_psql('postgres', q{UPDATE t2 SET v2 = 'last before' WHERE id = 5});
$want = pg_rows('SELECT id, v2, z FROM t2');
$local->safe_psql('postgres', q{
ALTER TABLE t2 RENAME COLUMN id TO id2;
UPDATE t2 SET v2 = 'after' WHERE id2 = 6;});
ok(wait_until(30, sub { job('dw.t2') =~ /^failed:/ }), 't2: key column renamed: failed');
like(job('dw.t2'), qr/key column "id" cannot be renamed in a ClickHouse table \(it is in the sorting key\)/,
	't2: the reason');
is(ch_rows('t2', 'id, v2, z'), $want, 't2: the remote holds the transactions before the DDL');

ok(wait_until(30, sub {
	$local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'") eq '0' }),
	'the failed jobs released their slot');

done_testing();
