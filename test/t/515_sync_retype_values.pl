
# Copyright (c) 2026, ctas_fed developers

# Continuous sync: ALTER TABLE ... ALTER COLUMN ... TYPE on a synced source
# whose rewrite changes values' text (numeric(10,2) -> numeric(10,1),
# text -> varchar(3) USING left(...), int -> text USING ..., timestamp ->
# date), into PostgreSQL and ClickHouse, whole-row syncs and query syncs
# (issue 18).  The worker applies the source transactions committed before
# the DDL's, then copies the sync again from a snapshot after it, the remote
# column retyped in the copy's remote transaction (PostgreSQL) or on the
# rebuilt table swapped in by RENAME (ClickHouse): the remote then equals the
# query's result by checksum, with the new column types, changes made in the
# DDL's transaction before and after it and in the adjacent transactions
# included.  Also with the worker killed at the DDL, and with the DDL in a
# subtransaction rolled back (nothing to follow).  A query sync whose
# expression reads the retyped column fails with the reason.  Each retype
# is recorded in ctas_fed.sync_schema_changes ("values copied again").
# On main's code, every retype here failed the job ("not followed").
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => "wal_level = logical\nmax_wal_senders = 4\nmax_worker_processes = 16");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
postgres_catalog($local, $remote);
clickhouse_catalog($local, $ch);

sub job
{
	my ($target) = @_;
	return $local->safe_psql('postgres',
		"SELECT state || ':' || coalesce(error, '') FROM ctas_fed.jobs WHERE mode = 'sync' AND catalog || '.' || target = '$target'");
}

sub rows_digest
{
	my ($text) = @_;
	my @rows = sort grep { $_ ne '' } split /\n/, $text;
	return scalar(@rows) . ':' . join('|', @rows);
}

sub pg_types
{
	my ($node, $db, $table) = @_;
	return $node->safe_psql($db,
		"SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) "
		  . "FROM pg_attribute WHERE attrelid = '$table'::regclass AND attnum > 0 AND NOT attisdropped");
}

# the remote of a sync into PostgreSQL equals the query's result
sub same_pg
{
	my ($table, $query, $types, $what) = @_;
	my $want = rows_digest($local->safe_psql('postgres', "COPY ($query) TO STDOUT"));
	my $got;
	wait_until(60, sub {
		$got = rows_digest($remote->safe_psql('dw', "COPY (SELECT * FROM public.$table) TO STDOUT"));
		$got eq $want && job("wh.public.$table") eq 'streaming:' });
	is($got, $want, "$table: $what: remote = query's result");
	is(pg_types($remote, 'dw', "public.$table"), $types, "$table: $what: remote column types");
	is(job("wh.public.$table"), 'streaming:', "$table: $what: streaming");
}

# the remote of a sync into ClickHouse (FINAL, not deleted) equals it
sub same_ch
{
	my ($table, $cols, $query, $types, $what) = @_;
	my $want = rows_digest($local->safe_psql('postgres', "COPY ($query) TO STDOUT"));
	my $got;
	wait_until(60, sub {
		my $res = $ch->request("SELECT $cols FROM dw.$table FINAL WHERE _deleted = 0 FORMAT TabSeparated");
		$got = $res->{status} == 200 ? rows_digest($res->{content}) : $res->{content};
		$got eq $want && job("lake.dw.$table") eq 'streaming:' });
	is($got, $want, "$table: $what: remote = query's result");
	my $t = $ch->query("SELECT name, type FROM system.columns WHERE database = 'dw' AND table = '$table' "
		  . "AND name NOT IN ('_version', '_deleted') FORMAT TabSeparated");
	is(join(', ', map { s/\t/ /r } grep { $_ ne '' } split /\n/, $t), $types,
		"$table: $what: remote column types");
	is(job("lake.dw.$table"), 'streaming:', "$table: $what: streaming");
	is($ch->query("SELECT count() FROM system.tables WHERE database = 'dw' AND name LIKE '_ctas_fed_resync_%' FORMAT TabSeparated") + 0,
		0, "$table: $what: no rebuild table left");
}

$local->safe_psql('postgres', q{
CREATE TABLE p1 (id int PRIMARY KEY, a numeric(10,2), b text, c int, ts timestamp);
INSERT INTO p1 SELECT g, g * 1.27, 'text' || g, g, '2024-01-01 10:00'::timestamp + g * interval '7 hours'
  FROM generate_series(1, 200) g;
CREATE TABLE c1 (LIKE p1 INCLUDING ALL);
INSERT INTO c1 SELECT * FROM p1;
CREATE TABLE q1 (id int PRIMARY KEY, a numeric(10,2), b text, c int);
INSERT INTO q1 SELECT g, g * 1.27, 'text' || g, g FROM generate_series(1, 200) g;
CREATE TABLE wh.public.p1 WITH (sync = 'continuous') AS SELECT * FROM p1;
CREATE TABLE lake.dw.c1 WITH (sync = 'continuous', primary_key = 'id') AS SELECT * FROM c1;
CREATE TABLE wh.public.q1 WITH (sync = 'continuous') AS
  SELECT id, a AS amount, b FROM q1 WHERE a > 10;
CREATE TABLE lake.dw.cq1 WITH (sync = 'continuous', primary_key = 'id') AS
  SELECT id, a AS amount, b FROM q1 WHERE a > 10;
CREATE TABLE wh.public.q2 WITH (sync = 'continuous') AS
  SELECT id, c * 2 AS c2 FROM q1;});
ok(wait_until(90, sub {
	join(' ', map { job($_) } qw(wh.public.p1 lake.dw.c1 wh.public.q1 lake.dw.cq1 wh.public.q2))
	  eq join(' ', ('streaming:') x 5) }), 'the syncs stream');

my $q1 = 'SELECT id, a AS amount, b FROM q1 WHERE a > 10';
my $schema_rows = sub {
	$local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.sync_schema_changes});
};

# numeric(10,2) -> numeric(10,1) rounds: changes before and after the DDL
# in its transaction and in the adjacent ones
$local->safe_psql('postgres', q{
UPDATE p1 SET a = a + 0.01 WHERE id <= 5;
UPDATE c1 SET a = a + 0.01 WHERE id <= 5;
UPDATE q1 SET a = a + 0.01 WHERE id <= 10;
BEGIN;
UPDATE p1 SET a = 0.06, b = 'before' WHERE id BETWEEN 6 AND 10;
UPDATE c1 SET a = 0.06, b = 'before' WHERE id BETWEEN 6 AND 10;
UPDATE q1 SET a = 10.04 WHERE id BETWEEN 11 AND 15;
ALTER TABLE p1 ALTER COLUMN a TYPE numeric(10,1);
ALTER TABLE c1 ALTER COLUMN a TYPE numeric(10,1);
ALTER TABLE q1 ALTER COLUMN a TYPE numeric(10,1);
UPDATE p1 SET a = 99.99, b = 'after' WHERE id BETWEEN 8 AND 12;
UPDATE c1 SET a = 99.99, b = 'after' WHERE id BETWEEN 8 AND 12;
UPDATE q1 SET a = 10.06 WHERE id BETWEEN 16 AND 18;
INSERT INTO p1 VALUES (1001, 1.25, 'new', 1, '2024-05-05 23:59');
INSERT INTO c1 VALUES (1001, 1.25, 'new', 1, '2024-05-05 23:59');
COMMIT;
DELETE FROM p1 WHERE id = 3;
DELETE FROM c1 WHERE id = 3;
UPDATE q1 SET a = 20.55 WHERE id = 20;});
same_pg('p1', 'SELECT * FROM p1',
	'id integer, a numeric(10,1), b text, c integer, ts timestamp without time zone',
	'numeric(10,2) -> numeric(10,1)');
same_ch('c1', 'id, a, b, c, ts', 'SELECT * FROM c1',
	q{id Int32, a Nullable(Decimal(10, 1)), b Nullable(String), c Nullable(Int32), ts Nullable(DateTime(\'UTC\'))},
	'numeric(10,2) -> numeric(10,1)');
same_pg('q1', $q1, 'id integer, amount numeric(10,1), b text',
	'query sync: numeric(10,2) -> numeric(10,1), rows in and out of its WHERE');
same_ch('cq1', 'id, amount, b', $q1,
	'id Int32, amount Nullable(Decimal(10, 1)), b Nullable(String)',
	'query sync: numeric(10,2) -> numeric(10,1)');
same_pg('q2', 'SELECT id, c * 2 AS c2 FROM q1', 'id integer, c2 integer',
	'a column it does not read retyped');

# several retypes in one statement, USING expressions that change values,
# the worker killed before the DDL: it meets it at its place when it comes
# back
$local->safe_psql('postgres', q{
SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync';
UPDATE p1 SET b = 'xyzzy' WHERE id = 30;
UPDATE c1 SET b = 'xyzzy' WHERE id = 30;
BEGIN;
UPDATE p1 SET c = 1000 WHERE id = 31;
UPDATE c1 SET c = 1000 WHERE id = 31;
ALTER TABLE p1 ALTER COLUMN b TYPE varchar(3) USING left(b, 3),
  ALTER COLUMN c TYPE text USING (c * 2)::text, ALTER COLUMN ts TYPE date;
ALTER TABLE c1 ALTER COLUMN b TYPE varchar(3) USING left(b, 3),
  ALTER COLUMN c TYPE text USING (c * 2)::text, ALTER COLUMN ts TYPE date;
UPDATE p1 SET c = 'after' WHERE id = 32;
UPDATE c1 SET c = 'after' WHERE id = 32;
COMMIT;
INSERT INTO p1 VALUES (1002, 2.5, 'abc', 'x', '2025-01-01');
INSERT INTO c1 VALUES (1002, 2.5, 'abc', 'x', '2025-01-01');
ALTER TABLE q1 ALTER COLUMN b TYPE varchar(3) USING upper(left(b, 3));
UPDATE q1 SET b = 'zz' WHERE id = 40;});
same_pg('p1', 'SELECT * FROM p1',
	'id integer, a numeric(10,1), b character varying(3), c text, ts date',
	'USING left(), int -> text USING c * 2, timestamp -> date, worker killed');
same_ch('c1', 'id, a, b, c, ts', 'SELECT * FROM c1',
	'id Int32, a Nullable(Decimal(10, 1)), b Nullable(String), c Nullable(String), ts Nullable(Date)',
	'USING left(), int -> text USING c * 2, timestamp -> date, worker killed');
same_pg('q1', $q1, 'id integer, amount numeric(10,1), b character varying(3)',
	'query sync: text -> varchar(3) USING upper(left())');
same_ch('cq1', 'id, amount, b', $q1,
	'id Int32, amount Nullable(Decimal(10, 1)), b Nullable(String)',
	'query sync: text -> varchar(3) USING upper(left())');

# a retype in a subtransaction rolled back: nothing to follow
my $before = $schema_rows->();
$local->safe_psql('postgres', q{
BEGIN;
UPDATE p1 SET a = 1.1 WHERE id = 50;
SAVEPOINT s;
ALTER TABLE p1 ALTER COLUMN a TYPE numeric(10,0);
UPDATE p1 SET a = 7 WHERE id = 51;
ROLLBACK TO SAVEPOINT s;
UPDATE p1 SET a = 2.2 WHERE id = 52;
COMMIT;});
same_pg('p1', 'SELECT * FROM p1',
	'id integer, a numeric(10,1), b character varying(3), c text, ts date',
	'a retype rolled back with its subtransaction');
is($schema_rows->(), $before, 'a retype rolled back: nothing recorded');

# recorded: the changes the copies followed
is($local->safe_psql('postgres', q{
  SELECT string_agg(y.remote_table || ': ' || c.change, '; ' ORDER BY y.remote_table, c.change_id)
    FROM ctas_fed.sync_schema_changes c JOIN ctas_fed.syncs y USING (sync_id) WHERE c.followed}),
	'c1: ALTER COLUMN a TYPE numeric(10,1) (values copied again); '
	  . 'c1: ALTER COLUMN b TYPE character varying(3) (values copied again); '
	  . 'c1: ALTER COLUMN c TYPE text (values copied again); '
	  . 'c1: ALTER COLUMN ts TYPE date (values copied again); '
	  . 'cq1: ALTER COLUMN amount TYPE numeric(10,1) (values copied again); '
	  . 'cq1: ALTER COLUMN b TYPE character varying(3) (values copied again); '
	  . 'p1: ALTER COLUMN a TYPE numeric(10,1) (values copied again); '
	  . 'p1: ALTER COLUMN b TYPE character varying(3) (values copied again); '
	  . 'p1: ALTER COLUMN c TYPE text (values copied again); '
	  . 'p1: ALTER COLUMN ts TYPE date (values copied again); '
	  . 'q1: ALTER COLUMN amount TYPE numeric(10,1) (values copied again); '
	  . 'q1: ALTER COLUMN b TYPE character varying(3) (values copied again)',
	'sync_schema_changes: each retype the copies followed');

# a query whose expression reads the retyped column: the job fails, the
# remote keeping the transactions before the DDL
$local->safe_psql('postgres', q{UPDATE q1 SET c = -c WHERE id <= 3;});
my $want = rows_digest($local->safe_psql('postgres', 'COPY (SELECT id, c * 2 AS c2 FROM q1) TO STDOUT'));
$local->safe_psql('postgres', q{ALTER TABLE q1 ALTER COLUMN c TYPE bigint; UPDATE q1 SET c = 0 WHERE id = 5;});
ok(wait_until(60, sub { job('wh.public.q2') =~ /^failed:/ }), 'q2: failed');
like(job('wh.public.q2'), qr/column "c" of table "public.q1" read by sync \d+ changed its type from integer to bigint, which the query reads in an expression or its WHERE/,
	'q2: the reason');
is(rows_digest($remote->safe_psql('dw', 'COPY (SELECT * FROM public.q2) TO STDOUT')), $want,
	'q2: the remote holds the transactions before the DDL');
same_pg('q1', $q1, 'id integer, amount numeric(10,1), b character varying(3)',
	'a column it does not read retyped, after');

done_testing();
