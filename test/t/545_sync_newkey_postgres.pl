
# Copyright (c) 2026, ctas_fed developers

# Continuous sync into PostgreSQL: a new key of the source followed
# (issue 18, docs/sync-schema-changes.md, "A new key").  The replica
# identity moves off the sync's key (REPLICA IDENTITY USING INDEX another
# unique index; the primary key replaced on other columns in one
# statement): the remote primary key, named from the remote's catalog, is
# dropped and one on the new columns added in the remote transaction of
# the rows around the DDL, and the upserts and deletes key by the new
# columns from then on.  The hostile case of the issue: an UPDATE of the
# old key columns after the move (before: rows duplicated remotely).  Whole
# rows and a query sync that outputs the new key; a query sync that does
# not read it fails with the reason.  DDL inside a transaction with
# changes before and after it, the worker killed with the DDL committed,
# a crash between the remote change and the local record (fault point
# sync_schema_unsaved), and an immediate restart after a followed DDL: the
# change is recorded once and sent to the webhook once.  Each case ends
# with remote = source by checksum.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

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

# the remote primary key's columns
sub remote_key
{
	my ($name) = @_;
	return $remote->safe_psql('dw', qq{
	  SELECT string_agg(a.attname, ',' ORDER BY k.n)
	    FROM pg_constraint c, unnest(c.conkey) WITH ORDINALITY k(attnum, n), pg_attribute a
	   WHERE c.conrelid = 'public.$name'::regclass AND c.contype = 'p'
	     AND a.attrelid = c.conrelid AND a.attnum = k.attnum});
}

# the remote equals the query's result, keyed as want_key
sub same
{
	my ($name, $query, $key, $what) = @_;
	my $want = sql_digest($local, 'postgres', $query);
	my $got;
	wait_until(60, sub {
		$got = pg_digest($remote, 'dw', "public.$name");
		$got eq $want });
	is($got, $want, "$name: $what: remote = source by checksum");
	is(remote_key($name), $key, "$name: $what: the remote key");
	is(job($name), 'streaming:', "$name: $what: streaming");
}

sub changes
{
	my ($name) = @_;
	return $local->safe_psql('postgres', qq{
	  SELECT string_agg(c.change, '; ' ORDER BY c.change_id)
	    FROM ctas_fed.sync_schema_changes c JOIN ctas_fed.syncs y USING (sync_id)
	   WHERE y.remote_table = '$name'});
}

$local->safe_psql('postgres', q{
CREATE TABLE k1 (id int PRIMARY KEY, code int NOT NULL UNIQUE, v text);
CREATE TABLE k2 (id int PRIMARY KEY, a int NOT NULL, b int NOT NULL, v text);
CREATE TABLE k3 (id int PRIMARY KEY, code int NOT NULL UNIQUE, v text, w int);
CREATE TABLE k4 (id int PRIMARY KEY, code int NOT NULL UNIQUE, v text);
INSERT INTO k1 SELECT g, g + 1000, 'v' || g FROM generate_series(1, 200) g;
INSERT INTO k2 SELECT g, g % 10, g / 10, 'v' || g FROM generate_series(1, 200) g;
INSERT INTO k3 SELECT g, g + 1000, 'v' || g, g FROM generate_series(1, 200) g;
INSERT INTO k4 SELECT g, g + 1000, 'v' || g FROM generate_series(1, 200) g;
CREATE TABLE wh.public.k1 WITH (sync = 'continuous') AS SELECT * FROM k1;
CREATE TABLE wh.public.k2 WITH (sync = 'continuous') AS SELECT * FROM k2;
CREATE TABLE wh.public.k3 WITH (sync = 'continuous') AS SELECT id, code AS c, v FROM k3 WHERE w % 7 <> 0;
CREATE TABLE wh.public.k4 WITH (sync = 'continuous') AS SELECT id, v FROM k4;});
ok(wait_until(60, sub { join(' ', map { job($_) } qw(k1 k2 k3 k4)) eq join(' ', ('streaming:') x 4) }),
	'k1 .. k4: streaming');
same('k1', 'SELECT * FROM k1', 'id', 'initial copy');

# k1: the identity moves to another unique index, in a transaction with
# changes before and after it, then the old key changes
$local->safe_psql('postgres', q{
UPDATE k1 SET v = 'before' WHERE id <= 5;
BEGIN;
UPDATE k1 SET v = 'in, before' WHERE id BETWEEN 6 AND 10;
ALTER TABLE k1 REPLICA IDENTITY USING INDEX k1_code_key;
UPDATE k1 SET id = id + 1000 WHERE id BETWEEN 11 AND 15;
DELETE FROM k1 WHERE id = 16;
COMMIT;
UPDATE k1 SET id = id + 2000, v = 'old key changed' WHERE id <= 10;
UPDATE k1 SET code = code + 5000 WHERE id BETWEEN 20 AND 25;
DELETE FROM k1 WHERE id = 30;
INSERT INTO k1 VALUES (30, 30, 'again');});
same('k1', 'SELECT * FROM k1', 'code', 'REPLICA IDENTITY USING INDEX, then UPDATEs of the old key');
is($remote->safe_psql('dw', 'SELECT count(*) FROM public.k1'),
	$local->safe_psql('postgres', 'SELECT count(*) FROM k1'), 'k1: no row duplicated remotely');
is(changes('k1'), 'KEY (code)', 'k1: the new key recorded');

# k2: the primary key replaced on other columns in one statement
$local->safe_psql('postgres', q{
BEGIN;
UPDATE k2 SET v = 'in, before' WHERE id <= 5;
ALTER TABLE k2 DROP CONSTRAINT k2_pkey, ADD PRIMARY KEY (a, b);
UPDATE k2 SET id = -id WHERE id <= 20;
COMMIT;
UPDATE k2 SET id = id + 500 WHERE id > 100;
DELETE FROM k2 WHERE a = 3;});
same('k2', 'SELECT * FROM k2', 'a,b', 'primary key replaced');
is(changes('k2'), 'KEY (a, b)', 'k2: the new key recorded');
# the old key's column lost the NOT NULL of its primary key remotely too
# (before: the remote refused the NULL and the job stopped)
$local->safe_psql('postgres', q{
ALTER TABLE k2 ALTER id DROP NOT NULL;
INSERT INTO k2 VALUES (NULL, 77, 77, 'no id');});
same('k2', 'SELECT * FROM k2', 'a,b', 'a NULL in the old key column');

# k3: a query sync that outputs the new key (under another name) follows
$local->safe_psql('postgres', q{
ALTER TABLE k3 REPLICA IDENTITY USING INDEX k3_code_key;
UPDATE k3 SET id = id + 1000 WHERE id <= 20;
UPDATE k3 SET w = 7 WHERE id BETWEEN 30 AND 40;
DELETE FROM k3 WHERE id = 50;});
same('k3', 'SELECT id, code AS c, v FROM k3 WHERE w % 7 <> 0', 'c', 'query sync');

# k4: a query sync that does not read it fails, with the reason, after the
# transactions before the DDL
$local->safe_psql('postgres', q{UPDATE k4 SET v = 'before' WHERE id <= 5;});
my $want4 = sql_digest($local, 'postgres', 'SELECT id, v FROM k4');
$local->safe_psql('postgres', q{
ALTER TABLE k4 REPLICA IDENTITY USING INDEX k4_code_key;
UPDATE k4 SET id = id + 1000 WHERE id <= 5;});
ok(wait_until(60, sub { job('k4') =~ /^failed:/ }), 'k4: failed');
like(job('k4'), qr/the replica identity of the source of sync \d+ no longer contains the key column "id", and the query does not output column "code" of the new replica identity as a column of its result/,
	'k4: the reason');
is(pg_digest($remote, 'dw', 'public.k4'), $want4, 'k4: the remote holds the transactions before the DDL');

# found in review: a key that stays within the new identity but is no
# longer unique alone.  w7: the primary key replaced by a wider one (id,
# region): before, the key stayed id, and a second row of an id overwrote
# the first remotely.  w8: REPLICA IDENTITY FULL, then the primary key
# dropped: the key is no longer known to be unique, the job fails.  w9: a
# partitioned source whose identity moves to another index: REPLICA
# IDENTITY on a partitioned table does not reach its partitions, so the
# new key is not followed: the job fails.
$local->safe_psql('postgres', q{
CREATE TABLE w7 (id int PRIMARY KEY, region text NOT NULL, v text);
CREATE TABLE w8 (id int PRIMARY KEY, v text);
CREATE TABLE w9 (id int, region text NOT NULL, code int NOT NULL, v text,
                 PRIMARY KEY (id, region), UNIQUE (code, region)) PARTITION BY LIST (region);
CREATE TABLE w9_eu PARTITION OF w9 FOR VALUES IN ('eu');
CREATE TABLE w9_us PARTITION OF w9 FOR VALUES IN ('us');
INSERT INTO w7 SELECT g, 'eu', 'v' || g FROM generate_series(1, 100) g;
INSERT INTO w8 SELECT g, 'v' || g FROM generate_series(1, 100) g;
INSERT INTO w9 SELECT g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, g + 1000, 'v' || g FROM generate_series(1, 100) g;
CREATE TABLE wh.public.w7 WITH (sync = 'continuous') AS SELECT * FROM w7;
CREATE TABLE wh.public.w8 WITH (sync = 'continuous') AS SELECT * FROM w8;
CREATE TABLE wh.public.w9 WITH (sync = 'continuous') AS SELECT * FROM w9;});
ok(wait_until(60, sub { join(' ', map { job($_) } qw(w7 w8 w9)) eq join(' ', ('streaming:') x 3) }),
	'w7 .. w9: streaming');
$local->safe_psql('postgres', q{
ALTER TABLE w7 DROP CONSTRAINT w7_pkey, ADD PRIMARY KEY (id, region);
INSERT INTO w7 SELECT g, 'us', 'us ' || g FROM generate_series(1, 10) g;
UPDATE w7 SET v = 'eu changed' WHERE id <= 5 AND region = 'eu';
DELETE FROM w7 WHERE id = 6 AND region = 'us';});
same('w7', 'SELECT * FROM w7', 'id,region', 'primary key replaced by a wider one');
is(changes('w7'), 'KEY (id, region)', 'w7: the wider key recorded');
my $want8 = sql_digest($local, 'postgres', 'SELECT * FROM w8');
$local->safe_psql('postgres', q{
ALTER TABLE w8 REPLICA IDENTITY FULL;
ALTER TABLE w8 DROP CONSTRAINT w8_pkey;
INSERT INTO w8 VALUES (1, 'a second row of id 1');});
ok(wait_until(60, sub { job('w8') =~ /^failed:/ }), 'w8: FULL without a primary key: failed');
like(job('w8'), qr/the replica identity of the source of sync \d+ is FULL and it has no primary key: its key is no longer known to be unique/,
	'w8: the reason');
is(pg_digest($remote, 'dw', 'public.w8'), $want8, 'w8: the remote holds the transactions before the DDL');
my $want9 = sql_digest($local, 'postgres', 'SELECT * FROM w9');
$local->safe_psql('postgres', q{
ALTER TABLE w9 REPLICA IDENTITY USING INDEX w9_code_region_key;
UPDATE w9 SET code = code + 5000 WHERE id <= 10;});
ok(wait_until(60, sub { job('w9') =~ /^failed:/ }), 'w9: a new key of a partitioned source: failed');
like(job('w9'), qr/a new key of a partitioned table is not followed/, 'w9: the reason');
is(pg_digest($remote, 'dw', 'public.w9'), $want9, 'w9: the remote holds the transactions before the DDL');

# the worker killed, the DDL committed before it starts again
$local->safe_psql('postgres', q{
CREATE TABLE k5 (id int PRIMARY KEY, code int NOT NULL UNIQUE, v text);
INSERT INTO k5 SELECT g, g + 1000, 'v' || g FROM generate_series(1, 200) g;
CREATE TABLE wh.public.k5 WITH (sync = 'continuous') AS SELECT * FROM k5;});
ok(wait_until(60, sub { job('k5') eq 'streaming:' }), 'k5: streaming');
$local->safe_psql('postgres', q{
SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync';
UPDATE k5 SET v = 'before' WHERE id <= 5;
BEGIN;
UPDATE k5 SET v = 'in' WHERE id <= 8;
ALTER TABLE k5 DROP CONSTRAINT k5_pkey, ADD PRIMARY KEY (code);
UPDATE k5 SET id = id + 1000 WHERE id <= 3;
COMMIT;
UPDATE k5 SET id = -id WHERE id BETWEEN 4 AND 10;});
same('k5', 'SELECT * FROM k5', 'code', 'DDL while the worker was killed');

# a crash between the remote change and the local record: the job reads
# the DDL's transaction again, as applied, and takes the key from its
# message; the change is recorded and sent once
$local->safe_psql('postgres', q{
CREATE TABLE k6 (id int PRIMARY KEY, code int NOT NULL UNIQUE, v text);
INSERT INTO k6 SELECT g, g + 1000, 'v' || g FROM generate_series(1, 200) g;
CREATE TABLE wh.public.k6 WITH (sync = 'continuous') AS SELECT * FROM k6;});
ok(wait_until(60, sub { job('k6') eq 'streaming:' }), 'k6: streaming');
$local->safe_psql('postgres', q{
  ALTER SYSTEM SET ctas_fed.fault_point = 'sync_schema_unsaved';
  SELECT pg_reload_conf();});
sleep 1;
my $log_offset = -s $local->logfile;
$local->safe_psql('postgres', q{
BEGIN;
UPDATE k6 SET v = 'in' WHERE id <= 8;
ALTER TABLE k6 REPLICA IDENTITY USING INDEX k6_code_key;
UPDATE k6 SET id = id + 1000 WHERE id <= 3;
COMMIT;});
ok(wait_until(60, sub { slurp_file($local->logfile, $log_offset) =~ /stopped at fault point "sync_schema_unsaved"/ }),
	'k6: stopped after the remote commit, before storing the new key');
is(remote_key('k6'), 'code', 'k6: the remote key changed');
is($local->safe_psql('postgres', q{SELECT array_to_string(key_columns, ',') || ' ' || array_to_string(source_key, ',') FROM ctas_fed.syncs WHERE remote_table = 'k6'}),
	'id 1', 'k6: the stored key is the old one');
$local->safe_psql('postgres', 'ALTER SYSTEM RESET ctas_fed.fault_point');
$local->stop('immediate');
$local->start;
$local->safe_psql('postgres', q{UPDATE k6 SET id = -id WHERE id BETWEEN 4 AND 10;});
same('k6', 'SELECT * FROM k6', 'code', 'crash before the new key was stored');
is($local->safe_psql('postgres', q{SELECT array_to_string(key_columns, ',') || ' ' || array_to_string(source_key, ',') FROM ctas_fed.syncs WHERE remote_table = 'k6'}),
	'code 2', 'k6: the new key stored');
is(changes('k6'), 'KEY (code)', 'k6: recorded once');

# an immediate restart after followed DDL (the slot's position is durable
# only at a checkpoint: the DDL's transaction is read again): one record
# and one webhook event per change
$local->safe_psql('postgres', q{
CREATE TABLE k7 (id int PRIMARY KEY, code int NOT NULL UNIQUE, v text);
INSERT INTO k7 SELECT g, g + 1000, 'v' || g FROM generate_series(1, 200) g;
CREATE TABLE wh.public.k7 WITH (sync = 'continuous') AS SELECT * FROM k7;});
ok(wait_until(60, sub { job('k7') eq 'streaming:' }), 'k7: streaming');
$local->safe_psql('postgres', 'CHECKPOINT');
$local->safe_psql('postgres', q{
ALTER TABLE k7 ADD COLUMN d int DEFAULT 4;
ALTER TABLE k7 REPLICA IDENTITY USING INDEX k7_code_key;
UPDATE k7 SET id = id + 1000 WHERE id <= 3;});
same('k7', 'SELECT * FROM k7', 'code', 'followed before the restart');
is(changes('k7'), 'ADD COLUMN d integer; KEY (code)', 'k7: recorded');
ok(wait_until(30, sub { -f $hook_log && slurp_file($hook_log) =~ /"target": "public.k7".*"error": "KEY \(code\)"/ }),
	'k7: webhook event sent');
$local->stop('immediate');
$local->start;
$local->safe_psql('postgres', q{UPDATE k7 SET id = -id WHERE id BETWEEN 4 AND 10;});
same('k7', 'SELECT * FROM k7', 'code', 'after an immediate restart');
# the worker has read the DDL's transactions again by now (remote = source
# after them); let a notifier round pass
sleep 3;
is(changes('k7'), 'ADD COLUMN d integer; KEY (code)', 'k7: each change recorded once after the restart');
my @events = slurp_file($hook_log) =~ /"target": "public.k7"[^\n]*"state": "schema_change"/g;
is(scalar(@events), 2, 'k7: one webhook event per change');

# no staging or leftover tables on the remote
is($remote->safe_psql('dw', q{SELECT count(*) FROM pg_class WHERE relname LIKE '\_ctas\_fed\_resync%'}),
	'0', 'no staging tables left');

done_testing();
