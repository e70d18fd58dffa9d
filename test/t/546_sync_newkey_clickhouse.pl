
# Copyright (c) 2026, ctas_fed developers

# Continuous sync into ClickHouse: a new key of the source followed
# (issue 18, docs/sync-schema-changes.md, "A new key").  The sorting key of
# a ReplacingMergeTree cannot change in place: the worker applies the
# source transactions before the DDL's, then the sync is copied again
# (as after a retype that changes values, sync/reshape.c) into a staging
# table ordered by the new key, swapped in by RENAME TABLE, so that readers
# see the old table or the new one.  REPLICA IDENTITY USING INDEX and a
# primary key replaced in one statement, whole rows and a query sync that
# outputs the new key, a query sync that does not read it (fails), DDL in
# a transaction with changes before and after it, an UPDATE of the old key
# after the move, the worker killed with the DDL committed, and a crash
# after the copy committed before the job's new key was stored (fault
# point sync_reshape_unsaved).  Each case ends with remote = source by
# checksum, the table ordered by the new key, the change recorded once and
# no staging table left.
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

sub rows_digest
{
	my ($text) = @_;
	my @rows = sort grep { $_ ne '' } split /\n/, $text;
	return scalar(@rows) . ':' . join('|', @rows);
}

# the ORDER BY of the ClickHouse table
sub order_by
{
	my ($name) = @_;
	my $create = $ch->query("SHOW CREATE TABLE dw.$name FORMAT TabSeparatedRaw");
	return $create =~ /ORDER BY (?:\(([^)]*)\)|(\S+))/ ? ($1 // $2) : $create;
}

sub changes
{
	my ($name) = @_;
	return $local->safe_psql('postgres', qq{
	  SELECT string_agg(c.change, '; ' ORDER BY c.change_id)
	    FROM ctas_fed.sync_schema_changes c JOIN ctas_fed.syncs y USING (sync_id)
	   WHERE y.remote_table = '$name' AND c.followed});
}

# the remote (FINAL, not deleted) equals the query's result
sub same
{
	my ($name, $cols, $query, $key, $what) = @_;
	my $want = rows_digest($local->safe_psql('postgres', "COPY ($query) TO STDOUT"));
	my $got;
	wait_until(120, sub {
		my $res = $ch->request("SELECT $cols FROM dw.$name FINAL WHERE _deleted = 0 FORMAT TabSeparated");
		$got = $res->{status} == 200 ? rows_digest($res->{content}) : $res->{content};
		$got eq $want && job($name) eq 'streaming:' });
	is($got, $want, "$name: $what: remote = query's result");
	is(job($name), 'streaming:', "$name: $what: streaming");
	is(order_by($name), $key, "$name: $what: ordered by the key");
	is($ch->query("SELECT count() FROM system.tables WHERE database = 'dw' AND name LIKE '_ctas_fed_resync_%' FORMAT TabSeparated") + 0,
		0, "$name: $what: no staging table left");
}

$local->safe_psql('postgres', q{
CREATE TABLE c1 (id int PRIMARY KEY, code int NOT NULL UNIQUE, v text);
CREATE TABLE c2 (id int PRIMARY KEY, a int NOT NULL, b int NOT NULL, v text);
CREATE TABLE c3 (id int PRIMARY KEY, code int NOT NULL UNIQUE, v text, w int);
CREATE TABLE c4 (id int PRIMARY KEY, code int NOT NULL UNIQUE, v text);
INSERT INTO c1 SELECT g, g + 1000, 'v' || g FROM generate_series(1, 200) g;
INSERT INTO c2 SELECT g, g % 10, g / 10, 'v' || g FROM generate_series(1, 200) g;
INSERT INTO c3 SELECT g, g + 1000, 'v' || g, g FROM generate_series(1, 200) g;
INSERT INTO c4 SELECT g, g + 1000, 'v' || g FROM generate_series(1, 200) g;
CREATE TABLE lake.dw.c1 WITH (sync = 'continuous') AS SELECT * FROM c1;
CREATE TABLE lake.dw.c2 WITH (sync = 'continuous') AS SELECT * FROM c2;
CREATE TABLE lake.dw.c3 WITH (sync = 'continuous') AS SELECT id, code AS c, v FROM c3 WHERE w % 7 <> 0;
CREATE TABLE lake.dw.c4 WITH (sync = 'continuous') AS SELECT id, v FROM c4;});
ok(wait_until(90, sub { join(' ', map { job($_) } qw(c1 c2 c3 c4)) eq join(' ', ('streaming:') x 4) }),
	'c1 .. c4: streaming');
same('c1', 'id, code, v', 'SELECT * FROM c1', 'id', 'initial copy');

# c1: the identity moves, in a transaction with changes before and after
# it, then the old key changes
$local->safe_psql('postgres', q{
UPDATE c1 SET v = 'before' WHERE id <= 5;
BEGIN;
UPDATE c1 SET v = 'in, before' WHERE id BETWEEN 6 AND 10;
ALTER TABLE c1 REPLICA IDENTITY USING INDEX c1_code_key;
UPDATE c1 SET id = id + 1000 WHERE id BETWEEN 11 AND 15;
DELETE FROM c1 WHERE id = 16;
COMMIT;
UPDATE c1 SET id = id + 2000, v = 'old key changed' WHERE id <= 10;
DELETE FROM c1 WHERE id = 30;});
same('c1', 'id, code, v', 'SELECT * FROM c1', 'code', 'REPLICA IDENTITY USING INDEX, then UPDATEs of the old key');
is(changes('c1'), 'KEY (code) (rows copied again)', 'c1: the new key recorded once');

# c2: the primary key replaced on other columns in one statement
$local->safe_psql('postgres', q{
ALTER TABLE c2 DROP CONSTRAINT c2_pkey, ADD PRIMARY KEY (a, b);
UPDATE c2 SET id = -id WHERE id <= 20;
DELETE FROM c2 WHERE a = 3;});
same('c2', 'id, a, b, v', 'SELECT * FROM c2', 'a, b', 'primary key replaced');

# c3: a query sync that outputs the new key follows
$local->safe_psql('postgres', q{
ALTER TABLE c3 REPLICA IDENTITY USING INDEX c3_code_key;
UPDATE c3 SET id = id + 1000 WHERE id <= 20;
UPDATE c3 SET w = 7 WHERE id BETWEEN 30 AND 40;});
same('c3', 'id, c, v', 'SELECT id, code AS c, v FROM c3 WHERE w % 7 <> 0', 'c', 'query sync');

# c4: a query sync that does not read it fails with the reason
$local->safe_psql('postgres', q{
ALTER TABLE c4 REPLICA IDENTITY USING INDEX c4_code_key;
UPDATE c4 SET id = id + 1000 WHERE id <= 5;});
ok(wait_until(60, sub { job('c4') =~ /^failed:/ }), 'c4: failed');
like(job('c4'), qr/no longer contains the key column "id", and the query does not output column "code"/,
	'c4: the reason');

# the worker killed, the DDL committed before it starts again
$local->safe_psql('postgres', q{
CREATE TABLE c5 (id int PRIMARY KEY, code int NOT NULL UNIQUE, v text);
INSERT INTO c5 SELECT g, g + 1000, 'v' || g FROM generate_series(1, 200) g;
CREATE TABLE lake.dw.c5 WITH (sync = 'continuous') AS SELECT * FROM c5;});
ok(wait_until(60, sub { job('c5') eq 'streaming:' }), 'c5: streaming');
$local->safe_psql('postgres', q{
SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync';
UPDATE c5 SET v = 'before' WHERE id <= 5;
ALTER TABLE c5 DROP CONSTRAINT c5_pkey, ADD PRIMARY KEY (code);
UPDATE c5 SET id = id + 1000 WHERE id <= 3;});
same('c5', 'id, code, v', 'SELECT * FROM c5', 'code', 'DDL while the worker was killed');

# a crash after the copy committed, before the job's new key was stored:
# copied again, the change recorded once
$local->safe_psql('postgres', q{
CREATE TABLE c6 (id int PRIMARY KEY, code int NOT NULL UNIQUE, v text);
INSERT INTO c6 SELECT g, g + 1000, 'v' || g FROM generate_series(1, 200) g;
CREATE TABLE lake.dw.c6 WITH (sync = 'continuous') AS SELECT * FROM c6;});
ok(wait_until(60, sub { job('c6') eq 'streaming:' }), 'c6: streaming');
$local->safe_psql('postgres', q{
  ALTER SYSTEM SET ctas_fed.fault_point = 'sync_reshape_unsaved';
  SELECT pg_reload_conf();});
sleep 1;
my $log_offset = -s $local->logfile;
$local->safe_psql('postgres', q{
ALTER TABLE c6 REPLICA IDENTITY USING INDEX c6_code_key;
UPDATE c6 SET id = id + 1000 WHERE id <= 3;});
ok(wait_until(120, sub { slurp_file($local->logfile, $log_offset) =~ /stopped at fault point "sync_reshape_unsaved"/ }),
	'c6: the copy committed, the new key not stored');
$local->safe_psql('postgres', 'ALTER SYSTEM RESET ctas_fed.fault_point');
$local->stop('immediate');
$local->start;
$local->safe_psql('postgres', q{UPDATE c6 SET id = -id WHERE id BETWEEN 4 AND 10;});
same('c6', 'id, code, v', 'SELECT * FROM c6', 'code', 'crash before the new key was stored');
is($local->safe_psql('postgres', q{SELECT array_to_string(key_columns, ',') || ' ' || array_to_string(source_key, ',') FROM ctas_fed.syncs WHERE remote_table = 'c6'}),
	'code 2', 'c6: the new key stored');
is(changes('c6'), 'KEY (code) (rows copied again)', 'c6: recorded once');

is($ch->query("SELECT count() FROM system.tables WHERE database = 'dw' AND name LIKE '_ctas_fed_resync%' FORMAT TabSeparated") + 0,
	0, 'no staging table left');

done_testing();
