
# Copyright (c) 2026, ctas_fed developers

# Continuous sync into ClickHouse: RENAME COLUMN of a whole-row sync's source
# (issue 18).  ClickHouse 18.16 has no RENAME COLUMN: the worker rebuilds the
# table under the new names (a staging table made as the synced table is,
# the column renamed while it is empty, every row of the old table copied
# into it, one RENAME TABLE swap, the old table dropped), between the
# source transactions before and after the DDL.  The remote then equals the
# source by checksum under the source's column names, with changes right
# before and after the DDL.  A worker killed with the rebuilt table filled
# and not swapped in (fault point sync_rename_swap) leaves a staging table;
# the next worker reads the DDL's transaction again, makes it again and
# swaps it in: same result, each change recorded once, no staging table
# left.  A key column renamed fails the job with the reason (it is in the
# sorting key).  On main's code, every rename here failed the job.
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

sub staging_tables
{
	return $ch->query("SELECT count() FROM system.tables WHERE database = 'dw' AND name LIKE '_ctas_fed_resync_%' FORMAT TabSeparated") + 0;
}

sub same
{
	my ($name, $what) = @_;
	my $cols = source_columns($name);
	my $want = rows_digest($local->safe_psql('postgres',
		"COPY (SELECT $cols FROM $name) TO STDOUT"));
	my $got;
	wait_until(60, sub {
		my $res = $ch->request("SELECT $cols FROM dw.$name FINAL WHERE _deleted = 0 FORMAT TabSeparated");
		$got = $res->{status} == 200 ? rows_digest($res->{content}) : $res->{content};
		$got eq $want });
	is($got, $want, "$name: $what: remote = source");
	is(remote_columns($name), $cols, "$name: $what: the columns, in order");
	is(job($name), 'streaming:', "$name: $what: streaming");
	is(staging_tables(), 0, "$name: $what: no staging table left");
}

$local->safe_psql('postgres', q{
CREATE TABLE t1 (id int PRIMARY KEY, a int, b text, c int);
INSERT INTO t1 SELECT g, g, 'b' || g, g FROM generate_series(1, 300) g;
CREATE TABLE lake.dw.t1 WITH (sync = 'continuous') AS SELECT * FROM t1;});
ok(wait_until(60, sub { job('t1') eq 'streaming:' }), 't1: streaming');
same('t1', 'initial copy');

# a rename with changes in the transactions before, and after it in its own
$local->safe_psql('postgres', q{
UPDATE t1 SET a = -a WHERE id <= 5;
DELETE FROM t1 WHERE id = 6;
BEGIN;
ALTER TABLE t1 RENAME COLUMN b TO b2;
UPDATE t1 SET b2 = 'after' WHERE id BETWEEN 7 AND 9;
INSERT INTO t1 VALUES (1001, 1, 'new', 1);
COMMIT;
UPDATE t1 SET b2 = 'next', c = 0 WHERE id = 10;});
same('t1', 'RENAME COLUMN b TO b2');

# two renames in one transaction, then an added column
$local->safe_psql('postgres', q{
BEGIN;
ALTER TABLE t1 RENAME COLUMN a TO a2;
ALTER TABLE t1 RENAME COLUMN c TO c2;
COMMIT;
ALTER TABLE t1 ADD COLUMN d int DEFAULT 4;
UPDATE t1 SET c2 = 5, d = 6 WHERE id <= 3;});
same('t1', 'renames and ADD COLUMN');

# killed with the rebuilt table filled and not swapped in.  The slot's
# position is made durable first (XXX: a crash replays the DDL messages of
# transactions after the last checkpointed position, which a whole-row sync
# records again; see the report of issue 18)
sleep 2;
$local->safe_psql('postgres', 'CHECKPOINT');
$local->safe_psql('postgres', q{
  ALTER SYSTEM SET ctas_fed.fault_point = 'sync_rename_swap';
  SELECT pg_reload_conf();});
sleep 1;
my $log_offset = -s $local->logfile;
$local->safe_psql('postgres', q{
UPDATE t1 SET d = 100 WHERE id <= 10;
ALTER TABLE t1 RENAME COLUMN d TO d2;
UPDATE t1 SET d2 = 7 WHERE id = 11;});
ok(wait_until(60, sub { slurp_file($local->logfile, $log_offset) =~ /stopped at fault point "sync_rename_swap"/ }),
	'the worker stopped with the rebuilt table filled');
is(staging_tables(), 1, 'a staging table is left');
is(remote_columns('t1'), 'id,a2,b2,c2,d', 'the synced table keeps the old names meanwhile');
$local->safe_psql('postgres', 'ALTER SYSTEM RESET ctas_fed.fault_point');
$local->stop('immediate');
$local->start;
$local->safe_psql('postgres', q{UPDATE t1 SET d2 = 8 WHERE id = 12;});
same('t1', 'crash before the swap');
is($local->safe_psql('postgres', q{
  SELECT string_agg(c.change, '; ' ORDER BY c.change_id)
    FROM ctas_fed.sync_schema_changes c JOIN ctas_fed.syncs y USING (sync_id) WHERE y.remote_table = 't1'}),
	'RENAME COLUMN b TO b2; RENAME COLUMN a TO a2; RENAME COLUMN c TO c2; ADD COLUMN d integer; RENAME COLUMN d TO d2',
	'each change recorded once');

# the key column renamed: not followed
$local->safe_psql('postgres', q{UPDATE t1 SET a2 = 0 WHERE id = 20;});
my $cols = 'id,a2,b2,c2,d2';
my $want = rows_digest($local->safe_psql('postgres', "COPY (SELECT $cols FROM t1) TO STDOUT"));
$local->safe_psql('postgres', q{ALTER TABLE t1 RENAME COLUMN id TO id2; UPDATE t1 SET a2 = 1 WHERE id2 = 21;});
ok(wait_until(60, sub { job('t1') =~ /^failed:/ }), 'key renamed: failed');
like(job('t1'), qr/key column "id" cannot be renamed in a ClickHouse table/, 'key renamed: the reason');
is(rows_digest($ch->query("SELECT $cols FROM dw.t1 FINAL WHERE _deleted = 0 FORMAT TabSeparated")),
	$want, 'key renamed: the remote holds the transactions before the DDL');

done_testing();
