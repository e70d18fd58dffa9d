
# Copyright (c) 2026, ctas_fed developers

# Continuous sync: the exact source state, and schema changes in WAL order
# (issue 18).  Each case ends with the invariant: the remote table equals
# the query's result, or the job is failed with a reason and the remote
# holds exactly the source transactions committed before the DDL.
#
#  - a replica identity moved to another unique index before an UPDATE of
#    the old key (the old row stayed remotely; now the remote key follows,
#    545), and moved to one a query sync does not read (fails);
#  - a rewriting ALTER COLUMN ... TYPE <same type> USING <expr> (the remote
#    kept the old values; now copied again, see 515);
#  - a column dropped and added again under the same name and type in one
#    statement (the sync read the new column as the old one);
#  - an inheritance child created after the sync began (its rows are in the
#    query's result, never in the stream);
#  - under schema_changes = 'follow', the harmless DDLs: a read column
#    renamed, a column added, an unread column retyped, in a transaction
#    with changes before and after them;
#  - schema_changes = 'fail': a DDL rolled back in a subtransaction is
#    nothing; one in a transaction with changes before and after it fails
#    the job with the DDL named, after the transactions before it;
#  - a DDL committed while the catalog was down, and while the worker was
#    killed: the transactions committed before it are applied first;
#  - a query FROM ONLY the table follows a new child; the event trigger
#    disabled fails the sync (it could no longer see every DDL).

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

sub job_state
{
	my ($target) = @_;
	return $local->safe_psql('postgres',
		"SELECT state FROM ctas_fed.jobs WHERE mode = 'sync' AND target = '$target'");
}

sub job_error
{
	my ($target) = @_;
	return $local->safe_psql('postgres',
		"SELECT coalesce(error, '') FROM ctas_fed.jobs WHERE mode = 'sync' AND target = '$target'");
}

# a sync of $query into public.$name, streaming
sub make_sync
{
	my ($name, $query, $with) = @_;
	$with = $with ? ", $with" : '';
	$local->safe_psql('postgres',
		"CREATE TABLE wh.public.$name WITH (sync = 'continuous'$with) AS $query");
	ok(wait_until(60, sub { job_state("public.$name") eq 'streaming' }),
		"$name: streaming");
}

# the remote table equals the query's result now
sub caught_up
{
	my ($name, $query, $what) = @_;
	my $want = sql_digest($local, 'postgres', $query);
	my $got;
	wait_until(30, sub {
		$got = pg_digest($remote, 'dw', "public.$name");
		$got eq $want });
	is($got, $want, "$name: $what");
	return $want;
}

# the job failed with a reason matching $re, and the remote table holds
# $want, the query's result before the DDL
sub failed_at
{
	my ($name, $want, $re, $what) = @_;
	ok(wait_until(30, sub { job_state("public.$name") eq 'failed' }),
		"$name: $what: the job failed");
	like(job_error("public.$name"), $re, "$name: $what: the reason");
	is(pg_digest($remote, 'dw', "public.$name"), $want,
		"$name: $what: the remote holds the transactions before the DDL, and only them");
}

sub stop
{
	my ($name) = @_;
	$local->psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.$name')");
}

# t_c, t_g and t_h have a column x that their syncs do not read: a sync of
# whole rows follows these DDLs instead (test 513)
$local->safe_psql('postgres', q{
CREATE TABLE t_a (id int PRIMARY KEY, code int NOT NULL UNIQUE, v text);
CREATE TABLE t_b (id int PRIMARY KEY, v int);
CREATE TABLE t_c (id int PRIMARY KEY, v int, x int);
CREATE TABLE t_d (id int PRIMARY KEY, v int);
CREATE TABLE t_e (id int PRIMARY KEY, v text, w int);
CREATE TABLE t_f (id int PRIMARY KEY, v int);
CREATE TABLE t_g (id int PRIMARY KEY, v int, x int);
CREATE TABLE t_h (id int PRIMARY KEY, v int, x int);
INSERT INTO t_a SELECT g, g + 1000, 'a' || g FROM generate_series(1, 100) g;
INSERT INTO t_b SELECT g, g FROM generate_series(1, 100) g;
INSERT INTO t_c SELECT g, g FROM generate_series(1, 100) g;
INSERT INTO t_d SELECT g, g FROM generate_series(1, 100) g;
INSERT INTO t_e SELECT g, 'e' || g, g FROM generate_series(1, 100) g;
INSERT INTO t_f SELECT g, g FROM generate_series(1, 100) g;
INSERT INTO t_g SELECT g, g FROM generate_series(1, 100) g;
INSERT INTO t_h SELECT g, g FROM generate_series(1, 100) g;
});

# the option is validated
my ($rc, $out, $err) = $local->psql('postgres',
	"CREATE TABLE wh.public.x WITH (sync = 'continuous', schema_changes = 'maybe') AS SELECT * FROM t_f");
like($err, qr/invalid value for option "schema_changes": "maybe"/, 'schema_changes validated');
($rc, $out, $err) = $local->psql('postgres',
	"CREATE TABLE wh.public.x WITH (schema_changes = 'fail') AS SELECT * FROM t_f");
like($err, qr/option "schema_changes" requires sync = 'continuous'/, 'schema_changes needs sync');

# A: the replica identity moves to another unique index, then an UPDATE of
# the old key: a whole-row sync follows the new key (545); a query sync
# that does not read it fails
make_sync('t_a', 'SELECT * FROM t_a');
make_sync('t_a2', 'SELECT id, v FROM t_a');
$local->safe_psql('postgres', q{UPDATE t_a SET v = 'before' WHERE id <= 10});
my $want = caught_up('t_a', 'SELECT * FROM t_a', 'caught up before the identity moves');
my $want2 = caught_up('t_a2', 'SELECT id, v FROM t_a', 'caught up before the identity moves');
$local->safe_psql('postgres', q{
ALTER TABLE t_a REPLICA IDENTITY USING INDEX t_a_code_key;
UPDATE t_a SET id = id + 1000 WHERE id <= 5;});
failed_at('t_a2', $want2, qr/replica identity of the source of sync \d+ no longer contains the key column "id", and the query does not output column "code"/,
	'identity moved to a column the query does not read');
$want = sql_digest($local, 'postgres', 'SELECT * FROM t_a');
ok(wait_until(30, sub { job_state('public.t_a') eq 'streaming' && pg_digest($remote, 'dw', 'public.t_a') eq $want }),
	't_a: identity moved, the key followed: remote = query result');
stop('t_a');
stop('t_a2');

# B: a rewrite of a read column under the same type
make_sync('t_b', 'SELECT id, v FROM t_b');
$want = caught_up('t_b', 'SELECT id, v FROM t_b', 'caught up before the rewrite');
$local->safe_psql('postgres', q{
ALTER TABLE t_b ALTER COLUMN v TYPE int USING v * 10;
UPDATE t_b SET v = 0 WHERE id = 1;});
# followed since the copy again after a retype (515): the new values
$want = sql_digest($local, 'postgres', 'SELECT id, v FROM t_b');
ok(wait_until(60, sub { job_state('public.t_b') eq 'streaming' && pg_digest($remote, 'dw', 'public.t_b') eq $want }),
	't_b: rewritten column: copied again, remote = query result');
stop('t_b');

# C: dropped and added again under the same name and type, in one statement
make_sync('t_c', 'SELECT id, v FROM t_c');
$want = caught_up('t_c', 'SELECT id, v FROM t_c', 'caught up before the drop and add');
$local->safe_psql('postgres', q{
ALTER TABLE t_c DROP COLUMN v, ADD COLUMN v int;
UPDATE t_c SET v = 7 WHERE id <= 3;});
failed_at('t_c', $want, qr/column "v".*dropped/, 'dropped and added again');
stop('t_c');

# D: an inheritance child created after the sync began
make_sync('t_d', 'SELECT id, v FROM t_d');
$want = caught_up('t_d', 'SELECT id, v FROM t_d', 'caught up before the child');
$local->safe_psql('postgres', q{
CREATE TABLE t_d_child () INHERITS (t_d);
INSERT INTO t_d_child VALUES (5000, 5000);});
failed_at('t_d', $want, qr/inheritance child "t_d_child"/, 'inheritance child');
stop('t_d');

# E: follow: a read column renamed, a column added, an unread column
# retyped, between changes of the same transaction
my $q_e = q{SELECT id, v FROM t_e WHERE id % 2 = 0};
make_sync('t_e', $q_e);
$local->safe_psql('postgres', q{
BEGIN;
UPDATE t_e SET v = 'before rename' WHERE id <= 10;
ALTER TABLE t_e RENAME COLUMN v TO v2;
UPDATE t_e SET v2 = 'after rename' WHERE id > 90;
ALTER TABLE t_e ADD COLUMN z int DEFAULT 5;
INSERT INTO t_e VALUES (200, 'new', 1, 2);
COMMIT;
ALTER TABLE t_e ALTER COLUMN w TYPE bigint;
UPDATE t_e SET w = w + 1, v2 = v2 || '!' WHERE id % 3 = 0;
DELETE FROM t_e WHERE id = 4;});
caught_up('t_e', q{SELECT id, v2 FROM t_e WHERE id % 2 = 0}, 'harmless DDLs followed');
is(job_state('public.t_e') . job_error('public.t_e'), 'streaming',
	't_e: still streaming, without error');
stop('t_e');

# F: schema_changes = 'fail'
make_sync('t_f', 'SELECT id, v FROM t_f', q{schema_changes = 'fail'});
$local->safe_psql('postgres', q{
BEGIN;
INSERT INTO t_f VALUES (101, 101);
SAVEPOINT s;
ALTER TABLE t_f ADD COLUMN x int;
ROLLBACK TO s;
INSERT INTO t_f VALUES (102, 102);
COMMIT;});
$want = caught_up('t_f', 'SELECT id, v FROM t_f', 'a DDL rolled back in a subtransaction is nothing');
is(job_state('public.t_f'), 'streaming', 't_f: streaming after the rolled back DDL');
$local->safe_psql('postgres', q{
BEGIN;
INSERT INTO t_f VALUES (103, 103);
ALTER TABLE t_f ADD COLUMN y int;
INSERT INTO t_f VALUES (104, 104);
COMMIT;});
failed_at('t_f', $want, qr/schema change.*ALTER TABLE/, 'schema_changes = fail');
stop('t_f');

# G: the catalog is down when the DDL commits
make_sync('t_g', 'SELECT id, v FROM t_g');
caught_up('t_g', 'SELECT id, v FROM t_g', 'caught up before the catalog goes down');
$remote->stop;
$local->safe_psql('postgres', q{UPDATE t_g SET v = -v WHERE id <= 50});
$want = sql_digest($local, 'postgres', 'SELECT id, v FROM t_g');
$local->safe_psql('postgres', q{
ALTER TABLE t_g DROP COLUMN v;
INSERT INTO t_g VALUES (500);});
sleep 3;
$remote->start;
failed_at('t_g', $want, qr/column "v".*dropped/, 'DDL while the catalog was down');
stop('t_g');

# H: the worker is killed, the DDL commits before it starts again
make_sync('t_h', 'SELECT id, v FROM t_h');
caught_up('t_h', 'SELECT id, v FROM t_h', 'caught up before the worker is killed');
$local->safe_psql('postgres', q{
SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync';
UPDATE t_h SET v = -v WHERE id <= 50;});
$want = sql_digest($local, 'postgres', 'SELECT id, v FROM t_h');
$local->safe_psql('postgres', q{
ALTER TABLE t_h DROP COLUMN v;
UPDATE t_h SET x = 0;});
failed_at('t_h', $want, qr/column "v"/, 'DDL while the worker was killed');
stop('t_h');

# I: a query FROM ONLY the table follows a new inheritance child; then the
# event trigger disabled: the sync could no longer see every DDL, and fails
$local->safe_psql('postgres', q{
CREATE TABLE t_i (id int PRIMARY KEY, v int);
INSERT INTO t_i SELECT g, g FROM generate_series(1, 100) g;});
make_sync('t_i', 'SELECT id, v FROM ONLY t_i');
$local->safe_psql('postgres', q{
CREATE TABLE t_i_child () INHERITS (t_i);
INSERT INTO t_i_child VALUES (5000, 5000);
UPDATE t_i SET v = -v WHERE id <= 10;});
$want = caught_up('t_i', 'SELECT id, v FROM ONLY t_i', 'FROM ONLY: a new child is followed');
is(job_state('public.t_i'), 'streaming', 't_i: streaming after the child');
$local->safe_psql('postgres', q{ALTER EVENT TRIGGER ctas_fed_schema_changes DISABLE});
failed_at('t_i', $want, qr/event trigger "ctas_fed_schema_changes" of sync \d+ is gone or not enabled always/,
	'event trigger disabled');
$local->safe_psql('postgres', q{ALTER EVENT TRIGGER ctas_fed_schema_changes ENABLE ALWAYS});
stop('t_i');

ok(wait_until(30, sub {
	$local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'") eq '0' }),
	'no slot left');

done_testing();
