
# Copyright (c) 2026, ctas_fed developers

# Continuous sync into ClickHouse: a whole-row sync (SELECT *) follows ADD,
# DROP and ALTER TYPE on its ReplacingMergeTree table, between source
# transactions (issue 18).  After each DDL, with rows changed in the
# transactions right before and after it, the remote table read with FINAL
# equals the source by checksum, with the source's columns.  An added
# column's value for the rows there are is its DEFAULT on ClickHouse.  A DDL
# after changes of its own transaction fails the job with the reason, the
# remote keeping the transactions before (a RENAME: 516).  A DDL made while the worker is killed is followed at its place.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => "wal_level = logical\nmax_wal_senders = 4\nmax_worker_processes = 16");
clickhouse_catalog($local, $ch);

sub job
{
	my ($name) = @_;
	return $local->safe_psql('postgres',
		"SELECT state || ':' || coalesce(error, '') FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'dw.$name'");
}

sub source_columns
{
	my ($name) = @_;
	return $local->safe_psql('postgres',
		"SELECT string_agg(attname::text, ',' ORDER BY attnum) FROM pg_attribute "
		  . "WHERE attrelid = 'public.$name'::regclass AND attnum > 0 AND NOT attisdropped");
}

sub remote_columns
{
	my ($name) = @_;
	my $r = $ch->query("SELECT name FROM system.columns WHERE database = 'dw' AND table = '$name' "
		  . "AND name NOT IN ('_version', '_deleted') FORMAT TabSeparated");
	return join(',', grep { $_ ne '' } split /\n/, $r);
}

sub rows_digest
{
	my ($text) = @_;
	my @rows = sort grep { $_ ne '' } split /\n/, $text;
	return scalar(@rows) . ':' . join('|', @rows);
}

# the remote (FINAL, not deleted) equals the source, columns and rows
sub same
{
	my ($name, $what) = @_;
	my $cols = source_columns($name);
	my $want = rows_digest($local->safe_psql('postgres',
		"COPY (SELECT $cols FROM $name) TO STDOUT"));
	my $got;
	wait_until(30, sub {
		my $res = $ch->request("SELECT $cols FROM dw.$name FINAL WHERE _deleted = 0 FORMAT TabSeparated");
		$got = $res->{status} == 200 ? rows_digest($res->{content}) : $res->{content};
		$got eq $want });
	is($got, $want, "$name: $what: remote = source");
	is(remote_columns($name), $cols, "$name: $what: the columns");
	is(job($name), 'streaming:', "$name: $what: streaming");
}

$local->safe_psql('postgres', q{
CREATE TABLE t1 (id int PRIMARY KEY, a int, b text, c int);
INSERT INTO t1 SELECT g, g, 'b' || g, g FROM generate_series(1, 50) g;
CREATE TABLE lake.dw.t1 WITH (sync = 'continuous') AS SELECT * FROM t1;});
ok(wait_until(60, sub { job('t1') eq 'streaming:' }), 't1: streaming');

$local->safe_psql('postgres', q{
UPDATE t1 SET a = -a WHERE id <= 5;
ALTER TABLE t1 ADD COLUMN d int NOT NULL DEFAULT 42, ADD COLUMN e text DEFAULT 'x y', ADD COLUMN f date DEFAULT '2024-02-29';
BEGIN;
UPDATE t1 SET d = 7, e = NULL WHERE id BETWEEN 6 AND 10;
INSERT INTO t1 VALUES (1001, 1, 'new', 1, 1, 'n', '2025-01-01');
COMMIT;
DELETE FROM t1 WHERE id = 3;});
same('t1', 'ADD COLUMN with defaults');

$local->safe_psql('postgres', q{
UPDATE t1 SET c = c + 1 WHERE id <= 20;
ALTER TABLE t1 DROP COLUMN c, ADD COLUMN g int;
UPDATE t1 SET g = id WHERE id <= 30;
ALTER TABLE t1 ALTER COLUMN a TYPE bigint;
UPDATE t1 SET a = 9000000000 WHERE id = 31;});
same('t1', 'DROP, ADD (NULL), ALTER TYPE int -> bigint');

# the worker killed, the DDL committed before it starts again
$local->safe_psql('postgres', q{
SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync';
UPDATE t1 SET d = 100 WHERE id <= 10;
ALTER TABLE t1 ADD COLUMN h int DEFAULT 5;
UPDATE t1 SET h = 6 WHERE id <= 3;
ALTER TABLE t1 DROP COLUMN e;
UPDATE t1 SET d = 101 WHERE id <= 2;});
same('t1', 'DDL while the worker was killed');

# not followed into ClickHouse: a DDL after changes of its own transaction
$local->safe_psql('postgres', q{
CREATE TABLE t2 (id int PRIMARY KEY, a int);
INSERT INTO t2 SELECT g, g FROM generate_series(1, 50) g;
CREATE TABLE lake.dw.t2 WITH (sync = 'continuous') AS SELECT * FROM t2;});
ok(wait_until(60, sub { job('t2') eq 'streaming:' }), 't2: streaming');
$local->safe_psql('postgres', q{UPDATE t2 SET a = -a WHERE id <= 5;});
my %want;
for my $t (qw(t2))
{
	$want{$t} = rows_digest($local->safe_psql('postgres', "COPY (SELECT id, a FROM $t) TO STDOUT"));
}
$local->safe_psql('postgres', q{
BEGIN;
UPDATE t2 SET a = 0 WHERE id = 10;
ALTER TABLE t2 ADD COLUMN z int;
COMMIT;});
for my $t (qw(t2))
{
	ok(wait_until(30, sub { job($t) =~ /^failed:/ }), "$t: failed");
	is(rows_digest($ch->query("SELECT id, a FROM dw.$t FINAL WHERE _deleted = 0 FORMAT TabSeparated")),
		$want{$t}, "$t: the remote holds the transactions before the DDL, and only them");
}
like(job('t2'), qr/came after changes of the same source transaction, which a catalog without transactions cannot keep apart/, 't2: the reason');

done_testing();
