
# Copyright (c) 2026, ctas_fed developers

# Continuous sync into PostgreSQL: a whole-row sync (SELECT *) follows
# ADD, DROP, RENAME and ALTER TYPE on its remote table, in the remote
# transaction of the rows around the DDL (issue 18).  After each DDL, with
# rows changed right before and after it in the same transaction and in the
# adjacent ones, the remote table equals the source by checksum, with the
# source's column names and order.  Added columns take the rows' values the
# source gave them (a constant default, NULL); a volatile default fails the
# job with the reason, after the transactions before the DDL, as does a new
# type for a column the WHERE reads; a retype whose values change and ALTER
# TYPE ... USING copy the sync again (515).  A DDL made while the worker is
# killed is followed at its place.  Each followed change is recorded in
# ctas_fed.sync_schema_changes and sent to the webhook (schema_change).
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;

use CtasFed::Test;

my ($hook, $hook_log) = start_hook_receiver();
my $local = new_cluster('local', conf => "wal_level = logical\nmax_wal_senders = 4\nmax_worker_processes = 16");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
postgres_catalog($local, $remote, options => { notify_url => $hook });

sub job
{
	my ($name) = @_;
	return $local->safe_psql('postgres',
		"SELECT state || ':' || coalesce(error, '') FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'public.$name'");
}

# remote columns, in order
sub remote_columns
{
	my ($name) = @_;
	return $remote->safe_psql('dw',
		"SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) "
		  . "FROM pg_attribute WHERE attrelid = 'public.$name'::regclass AND attnum > 0 AND NOT attisdropped");
}

sub source_columns
{
	my ($name) = @_;
	return $local->safe_psql('postgres',
		"SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) "
		  . "FROM pg_attribute WHERE attrelid = 'public.$name'::regclass AND attnum > 0 AND NOT attisdropped");
}

# the remote equals the source (SELECT *), columns and rows
sub same
{
	my ($name, $what) = @_;
	my $want = sql_digest($local, 'postgres', "SELECT * FROM $name");
	my $got;
	wait_until(30, sub {
		$got = pg_digest($remote, 'dw', "public.$name");
		$got eq $want });
	is($got, $want, "$name: $what: remote = source by checksum");
	is(remote_columns($name), source_columns($name), "$name: $what: the columns");
	is(job($name), 'streaming:', "$name: $what: streaming");
}

$local->safe_psql('postgres', q{
CREATE TABLE t1 (id int PRIMARY KEY, a int, b text, c int);
INSERT INTO t1 SELECT g, g, 'b' || g, g FROM generate_series(1, 200) g;
CREATE TABLE wh.public.t1 WITH (sync = 'continuous') AS SELECT * FROM t1;});
ok(wait_until(60, sub { job('t1') eq 'streaming:' }), 't1: streaming');
same('t1', 'initial copy');

# ADD COLUMN with a constant default, between changes of its transaction,
# and in the adjacent transactions
my $t0 = Time::HiRes::time();
$local->safe_psql('postgres', q{
UPDATE t1 SET a = -a WHERE id <= 5;
BEGIN;
UPDATE t1 SET b = 'before' WHERE id BETWEEN 6 AND 10;
ALTER TABLE t1 ADD COLUMN d int NOT NULL DEFAULT 42;
UPDATE t1 SET d = 7, b = 'after' WHERE id BETWEEN 8 AND 12;
INSERT INTO t1 VALUES (1001, 1, 'new', 1, 1);
COMMIT;
INSERT INTO t1 (id, a) VALUES (1002, 2);
DELETE FROM t1 WHERE id = 3;});
same('t1', 'ADD COLUMN DEFAULT 42');
note(sprintf('ADD COLUMN followed, remote = source checked, %.2f s after the statements began', Time::HiRes::time() - $t0));

# ADD COLUMN without default (NULL), a constant expression default, and
# DROP COLUMN and RENAME COLUMN, each in a transaction of its own, with
# changes right before and after
$local->safe_psql('postgres', q{
UPDATE t1 SET c = c + 1 WHERE id <= 20;
ALTER TABLE t1 ADD COLUMN e text, ADD COLUMN f date DEFAULT '2024-02-29'::date + 1;
UPDATE t1 SET e = 'e' || id WHERE id <= 30;
ALTER TABLE t1 DROP COLUMN c;
UPDATE t1 SET a = a * 10 WHERE id <= 40;
BEGIN;
UPDATE t1 SET b = 'x' WHERE id = 50;
ALTER TABLE t1 RENAME COLUMN b TO b2;
UPDATE t1 SET b2 = 'y' WHERE id = 51;
COMMIT;});
same('t1', 'ADD (NULL, expression default), DROP, RENAME');

# a column dropped and added again under the same name in one statement
$local->safe_psql('postgres', q{
BEGIN;
UPDATE t1 SET e = 'before' WHERE id = 60;
ALTER TABLE t1 DROP COLUMN e, ADD COLUMN e int DEFAULT 5;
UPDATE t1 SET e = 6 WHERE id = 61;
COMMIT;});
same('t1', 'DROP and ADD of one name in one statement');

# ALTER TYPE whose values keep their text: followed
$local->safe_psql('postgres', q{
BEGIN;
UPDATE t1 SET a = 2147483647 WHERE id = 70;
ALTER TABLE t1 ALTER COLUMN a TYPE bigint;
UPDATE t1 SET a = 9000000000 WHERE id = 71;
COMMIT;
UPDATE t1 SET b2 = repeat('z', 30) WHERE id = 72;
ALTER TABLE t1 ALTER COLUMN b2 TYPE varchar(40);});
same('t1', 'ALTER TYPE int -> bigint, text -> varchar(40)');

# the key column renamed
$local->safe_psql('postgres', q{
BEGIN;
UPDATE t1 SET a = 1 WHERE id = 80;
ALTER TABLE t1 RENAME COLUMN id TO id2;
UPDATE t1 SET a = 2 WHERE id2 = 81;
INSERT INTO t1 (id2, a) VALUES (2000, 3);
COMMIT;
DELETE FROM t1 WHERE id2 = 82;});
same('t1', 'RENAME of the key column');

# only the last 100 rows of a sync are kept: 150 old ones, then a change
$local->safe_psql('postgres', q{
INSERT INTO ctas_fed.sync_schema_changes (sync_id, lsn, change, followed, recorded_at)
  SELECT sync_id, '0/1', 'old ' || g, true, now() - interval '1 day'
    FROM ctas_fed.syncs, generate_series(1, 150) g WHERE remote_table = 't1'
    ORDER BY g;});
my $kept_before = $local->safe_psql('postgres', q{SELECT string_agg(change, '; ' ORDER BY change_id) FROM ctas_fed.sync_schema_changes WHERE change NOT LIKE 'old %'});

# the worker killed, the DDL committed before it starts again
$local->safe_psql('postgres', q{
SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync';
UPDATE t1 SET a = 0 WHERE id2 <= 5;
BEGIN;
UPDATE t1 SET d = 100 WHERE id2 <= 10;
ALTER TABLE t1 ADD COLUMN g numeric DEFAULT 1.50;
UPDATE t1 SET g = 2 WHERE id2 <= 3;
COMMIT;
ALTER TABLE t1 DROP COLUMN f;
UPDATE t1 SET d = 101 WHERE id2 <= 2;});
same('t1', 'DDL while the worker was killed');

# recorded, and sent to the webhook
is($kept_before,
	'ADD COLUMN d integer; ADD COLUMN e text; ADD COLUMN f date; DROP COLUMN c; '
	  . 'RENAME COLUMN b TO b2; DROP COLUMN e; ADD COLUMN e integer; '
	  . 'ALTER COLUMN a TYPE bigint; ALTER COLUMN b2 TYPE character varying(40); '
	  . 'RENAME COLUMN id TO id2',
	'sync_schema_changes: every followed change, in order');
is($local->safe_psql('postgres',
	"SELECT count(*) || ' ' || (array_agg(change ORDER BY change_id))[1] || ' ' || string_agg(change, '; ' ORDER BY change_id) FILTER (WHERE change NOT LIKE 'old %') FROM ctas_fed.sync_schema_changes"),
	'100 old 53 ADD COLUMN g numeric; DROP COLUMN f',
	'sync_schema_changes: the last 100 of the sync kept');
is($local->safe_psql('postgres',
	"SELECT count(*) FROM (SELECT lsn < lag(lsn) OVER (ORDER BY change_id) AS back FROM ctas_fed.sync_schema_changes) s WHERE back"),
	'0', 'sync_schema_changes: at the lsns of their transactions, in WAL order');
ok(wait_until(30, sub { -f $hook_log && slurp_file($hook_log) =~
	/"target": "public.t1", "mode": "sync", "state": "schema_change", "rows": \d+, "bytes": \d+, "error": "DROP COLUMN f"/ }),
	'webhook: schema_change events');

# what cannot be followed fails the job, after the transactions before it
$local->safe_psql('postgres', q{
CREATE TABLE t2 (id int PRIMARY KEY, a int, b text);
INSERT INTO t2 SELECT g, g, 'b' || g FROM generate_series(1, 100) g;
CREATE TABLE wh.public.t2 WITH (sync = 'continuous') AS SELECT * FROM t2;
CREATE TABLE t3 (id int PRIMARY KEY, a int);
INSERT INTO t3 SELECT g, g FROM generate_series(1, 100) g;
CREATE TABLE wh.public.t3 WITH (sync = 'continuous') AS SELECT * FROM t3;
CREATE TABLE t4 (id int PRIMARY KEY, a numeric(10,2));
INSERT INTO t4 SELECT g, g FROM generate_series(1, 100) g;
CREATE TABLE wh.public.t4 WITH (sync = 'continuous') AS SELECT * FROM t4;
CREATE TABLE t5 (id int PRIMARY KEY, a int);
INSERT INTO t5 SELECT g, g FROM generate_series(1, 100) g;
CREATE TABLE wh.public.t5 WITH (sync = 'continuous') AS SELECT * FROM t5 WHERE a % 2 = 0;
CREATE TABLE t6 (id int PRIMARY KEY, a int);
INSERT INTO t6 SELECT g, g FROM generate_series(1, 100) g;
CREATE TABLE wh.public.t6 WITH (sync = 'continuous') AS SELECT * FROM t6;});
ok(wait_until(60, sub { join(' ', map { job($_) } qw(t2 t3 t4 t5 t6)) eq join(' ', ('streaming:') x 5) }),
	't2 .. t6: streaming');

my %want;
$local->safe_psql('postgres', q{UPDATE t2 SET a = -a WHERE id <= 10; UPDATE t3 SET a = -a WHERE id <= 10; UPDATE t4 SET a = a / 3 WHERE id <= 10; UPDATE t5 SET a = a + 2 WHERE id <= 10;});
$want{$_} = sql_digest($local, 'postgres', "SELECT * FROM $_") for qw(t2 t3 t4);
$want{t5} = sql_digest($local, 'postgres', "SELECT * FROM t5 WHERE a % 2 = 0");
$want{t6} = sql_digest($local, 'postgres', "SELECT * FROM t6");
$local->safe_psql('postgres', q{
BEGIN;
UPDATE t2 SET a = 0 WHERE id = 20;
ALTER TABLE t2 ADD COLUMN r float8 DEFAULT random();
COMMIT;
UPDATE t2 SET a = 1 WHERE id = 21;
BEGIN;
UPDATE t3 SET a = 0 WHERE id = 20;
ALTER TABLE t3 ALTER COLUMN a TYPE text USING (a * 2)::text;
COMMIT;
ALTER TABLE t4 ALTER COLUMN a TYPE numeric(10,1);
ALTER TABLE t5 ALTER COLUMN a TYPE bigint;
UPDATE t5 SET a = 0 WHERE id = 20;
ALTER TABLE t6 ADD COLUMN n int GENERATED ALWAYS AS IDENTITY;
UPDATE t6 SET a = 0 WHERE id = 20;});
for my $t (qw(t2 t5 t6))
{
	ok(wait_until(30, sub { job($t) =~ /^failed:/ }), "$t: failed");
	is(pg_digest($remote, 'dw', "public.$t"), $want{$t},
		"$t: the remote holds the transactions before the DDL, and only them");
}
# a retype whose values change: the sync is copied again (515 tests more)
for my $t (qw(t3 t4))
{
	my $w = sql_digest($local, 'postgres', "SELECT * FROM $t");
	ok(wait_until(60, sub { job($t) eq 'streaming:' && pg_digest($remote, 'dw', "public.$t") eq $w }),
		"$t: retyped, copied again: remote = query's result");
}
like(job('t2'), qr/column "r" was added to table "public.t2" of sync \d+ with a volatile default/, 't2: the reason');
like(job('t5'), qr/column "a" of table "public.t5", which the WHERE of sync \d+ reads, changed its type from integer to bigint/, 't5: the reason');
like(job('t6'), qr/column "n" was added to table "public.t6" of sync \d+ with a volatile default \(or as an identity/, 't6: an identity column: the reason');
is($local->safe_psql('postgres', q{
  SELECT string_agg(y.remote_table || ' ' || (c.change = y.error) || ' ' || (c.lsn <= pg_current_wal_lsn()), ', ' ORDER BY y.remote_table)
    FROM ctas_fed.sync_schema_changes c JOIN ctas_fed.syncs y USING (sync_id) WHERE NOT c.followed}),
	't2 true true, t5 true true, t6 true true',
	'sync_schema_changes: the changes the syncs failed at, with the reason');

done_testing();
