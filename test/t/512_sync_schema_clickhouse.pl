
# Copyright (c) 2026, ctas_fed developers

# Continuous sync into ClickHouse: schema changes in WAL order (issue 18).
# Under schema_changes = 'follow' a rename of a read column and a column
# added between changes of one transaction are followed; a type change of a
# read column fails the job after the transactions before it; a whole-row
# sync (SELECT *) follows a column added and fails at a column renamed,
# with the reason, and the remote keeps exactly the transactions before the
# DDL.

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

# a type change of a read column: the job fails after what came before
$local->safe_psql('postgres', q{UPDATE t1 SET v2 = 'last before' WHERE id = 4});
$want = pg_rows('SELECT id, v2 FROM t1 WHERE w % 2 = 0');
$local->safe_psql('postgres', q{
BEGIN;
UPDATE t1 SET v2 = 'in the DDL transaction' WHERE id = 6;
ALTER TABLE t1 ALTER COLUMN v2 TYPE varchar(40);
COMMIT;
UPDATE t1 SET v2 = 'after' WHERE id = 8;});
ok(wait_until(30, sub { job('dw.t1') =~ /^failed:/ }), 't1: type change: the job failed');
like(job('dw.t1'), qr/column "v2" of table "public.t1" read by sync \d+ changed its type: ALTER TABLE public.t1/,
	't1: the reason names the column and the DDL');
is(ch_rows('t1', 'id, v'), $want,
	't1: the remote holds the transactions before the DDL, and only them');

# a whole-row sync: a column added is followed (test 514 has more), a
# column renamed fails the job (ClickHouse 18.16 has no RENAME COLUMN)
$local->safe_psql('postgres', q{
ALTER TABLE t2 ADD COLUMN z int DEFAULT 1;
UPDATE t2 SET v = 'after', z = 2 WHERE id = 2;});
$want = pg_rows('SELECT id, v, z FROM t2');
wait_until(30, sub { $got = eval { ch_rows('t2', 'id, v, z') } // ''; $got eq $want });
is($got, $want, 't2: column added to a whole-row sync: followed');
$local->safe_psql('postgres', q{UPDATE t2 SET v = 'before' WHERE id = 1});
$want = pg_rows('SELECT id, v FROM t2');
$local->safe_psql('postgres', q{
ALTER TABLE t2 RENAME COLUMN v TO v2;
UPDATE t2 SET v2 = 'after' WHERE id = 3;});
ok(wait_until(30, sub { job('dw.t2') =~ /^failed:/ }), 't2: column renamed in a whole-row sync: failed');
like(job('dw.t2'), qr/column "v" cannot be renamed in a ClickHouse table/,
	't2: the reason');
is(ch_rows('t2', 'id, v'), $want, 't2: the remote holds the transactions before the DDL');

ok(wait_until(30, sub {
	$local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'") eq '0' }),
	'the failed jobs released their slot');

done_testing();
