
# Copyright (c) 2026, ctas_fed developers

# The set-based apply of a sync into PostgreSQL (src/postgres/sync.c): each
# batch of changes is reduced to the net change per key, sent by COPY into a
# temporary table of the remote session and applied by DELETE ... USING and
# INSERT ... ON CONFLICT, in one remote transaction with the job's
# progress.  A remote session holding the remote table's lock keeps the
# worker waiting in a batch while the source makes the changes that then
# arrive together in the next one:
# - a key changing several times, back to its first value; deleted and
#   inserted again, in separate transactions and in one; inserted and
#   deleted; its key updated away and back, and to another key; a row
#   moving out of the WHERE and back in;
# - a TRUNCATE in the middle of a batch, with changes before and after it;
# - a numeric key whose value changes to an equal one of another scale
#   (1.0 to 1.00): the later change wins on the remote too;
# - a batch that fails on the remote in the middle (a CHECK constraint
#   there): nothing of it is visible, and it is applied once the constraint
#   is gone;
# - the worker killed while its batch waits on the remote.
# Each ends with every row of the remote equal to the query's result.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $local = new_cluster('local');
$local->append_conf('postgresql.conf', "wal_level = logical\nmax_wal_senders = 4\n");
$local->restart;
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $rport = $remote->port;

$local->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE TABLE t (id int PRIMARY KEY, v int, s text);
INSERT INTO t SELECT g, g, 'row ' || g FROM generate_series(1, 2000) g;
CREATE TABLE nk (k numeric PRIMARY KEY, v int);
INSERT INTO nk VALUES (1.0, 1), (2, 2), (3.5, 3);
});

my $query = 'SELECT id, v, s FROM t WHERE v >= 0';
my $nk_query = 'SELECT k, v FROM nk';
$local->safe_psql('postgres',
	"CREATE TABLE wh.public.t WITH (sync = 'continuous') AS $query");
$local->safe_psql('postgres',
	"CREATE TABLE wh.public.nk WITH (sync = 'continuous') AS $nk_query");
ok( wait_until(120, sub {
		$local->safe_psql('postgres',
			"SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'") eq '2' }),
	'both syncs reach streaming');

# remote == the query's result, and nothing of ours prepared
sub converged
{
	my ($name, $table, $q) = @_;
	return check_invariant(
		node       => $local,
		name       => $name,
		committed  => 1,
		timeout    => 60,
		pg_remotes => [$remote],
		targets    => [ {
			pg     => $remote,
			dbname => 'dw',
			table  => "public.$table",
			expect => sql_digest($local, 'postgres', $q) } ]);
}

# hold the lock of remote table $table in a session, make the change $sql
# on the source and wait until the worker waits on the lock in its batch;
# returns the session, for release()
sub hold
{
	my ($table, $sql) = @_;
	my $s = session_start($remote, 'dw');
	my ($out, $err) = session_run($s,
		"BEGIN; LOCK TABLE public.$table IN ACCESS EXCLUSIVE MODE");
	die "lock: $err" if $err ne '';
	$local->safe_psql('postgres', $sql);
	ok( wait_until(60, sub {
			$remote->safe_psql('dw',
				"SELECT count(*) FROM pg_locks WHERE relation = 'public.$table'::regclass AND NOT granted") ne '0' }),
		"the worker waits on the lock of $table in its batch");
	return $s;
}

sub release
{
	my ($s) = @_;
	session_run($s, 'COMMIT');
	$s->quit;
}

# ---- the net change per key -------------------------------------------------
my $s = hold('t', 'UPDATE t SET v = v WHERE id = 2000');
$local->safe_psql('postgres', q{
-- key 1: several changes, back to where it was
UPDATE t SET v = 10, s = 'ten' WHERE id = 1;
UPDATE t SET v = 11 WHERE id = 1;
UPDATE t SET v = 1, s = 'row 1' WHERE id = 1;
-- key 2: deleted, then inserted again with other values
DELETE FROM t WHERE id = 2;
INSERT INTO t VALUES (2, 22, 'again');
-- key 3: deleted and inserted again in one transaction
BEGIN; DELETE FROM t WHERE id = 3; INSERT INTO t VALUES (3, 33, 'same xact'); COMMIT;
-- key 5000: inserted and deleted; key 5001 inserted and changed
INSERT INTO t VALUES (5000, 1, 'short-lived');
DELETE FROM t WHERE id = 5000;
INSERT INTO t VALUES (5001, 1, 'new');
UPDATE t SET v = 2 WHERE id = 5001;
-- key 4: moved away and back; key 6 moved to 6106
UPDATE t SET id = 4104 WHERE id = 4;
UPDATE t SET id = 4, s = 'came back' WHERE id = 4104;
UPDATE t SET id = 6106 WHERE id = 6;
-- keys 7 and 8 swap their values through a free key
BEGIN;
UPDATE t SET id = 9999 WHERE id = 7;
UPDATE t SET id = 7 WHERE id = 8;
UPDATE t SET id = 8 WHERE id = 9999;
COMMIT;
-- key 9 out of the WHERE and back in; key 10 out for good
UPDATE t SET v = -1 WHERE id = 9;
UPDATE t SET v = 9, s = 'in again' WHERE id = 9;
UPDATE t SET v = -10 WHERE id = 10;
-- key 11: deleted, then inserted, then deleted again
DELETE FROM t WHERE id = 11;
INSERT INTO t VALUES (11, 0, 'x');
DELETE FROM t WHERE id = 11;
-- and many keys changed in one statement, twice
UPDATE t SET v = v + 1 WHERE id BETWEEN 100 AND 1100;
UPDATE t SET v = v - 1, s = s || '!' WHERE id BETWEEN 600 AND 1600;
});
release($s);
converged('net change per key', 't', $query);
is( $remote->safe_psql('dw', 'SELECT v, s FROM public.t WHERE id IN (1, 2, 3, 4) ORDER BY id'),
	"1|row 1\n22|again\n33|same xact\n4|came back",
	'keys changed back, re-inserted and moved back hold their last values');
is( $remote->safe_psql('dw',
		'SELECT count(*) FROM public.t WHERE id IN (5000, 6, 10, 11, 4104, 9999)'),
	'0', 'keys deleted, moved away or out of the WHERE are gone');

# ---- TRUNCATE in the middle of a batch ---------------------------------------
$s = hold('t', 'UPDATE t SET v = v WHERE id = 2000');
$local->safe_psql('postgres', q{
UPDATE t SET v = 500 WHERE id = 12;
DELETE FROM t WHERE id = 13;
INSERT INTO t VALUES (7000, 1, 'before truncate');
TRUNCATE t;
INSERT INTO t SELECT g, g * 2, 'after ' || g FROM generate_series(1, 300) g;
UPDATE t SET v = 3 WHERE id = 12;
UPDATE t SET v = 4 WHERE id = 12;
DELETE FROM t WHERE id = 13;
INSERT INTO t VALUES (13, 13, 'back after truncate');
BEGIN;
INSERT INTO t VALUES (7001, 1, 'x');
UPDATE t SET v = -5 WHERE id = 14;
COMMIT;
});
release($s);
converged('TRUNCATE in a batch', 't', $query);
is($remote->safe_psql('dw', 'SELECT count(*) FROM public.t'),
	$local->safe_psql('postgres', "SELECT count(*) FROM ($query) q"),
	'after the TRUNCATE: only the rows made after it');

# ---- a numeric key changed to an equal value of another scale ---------------
$s = hold('nk', 'UPDATE nk SET v = v WHERE k = 2');
$local->safe_psql('postgres', q{
UPDATE nk SET k = 1.00, v = 10 WHERE k = 1.0;
UPDATE nk SET v = 20 WHERE k = 2;
UPDATE nk SET k = 2.000 WHERE k = 2;
INSERT INTO nk VALUES (4.0, 4);
DELETE FROM nk WHERE k = 4;
INSERT INTO nk VALUES (4.00, 44);
});
release($s);
converged('a numeric key changed to an equal one', 'nk', $nk_query);

# ---- a batch that fails on the remote in the middle -------------------------
my $before = sql_digest($local, 'postgres', $query);
$remote->safe_psql('dw',
	'ALTER TABLE public.t ADD CONSTRAINT not666 CHECK (v <> 666)');
$local->safe_psql('postgres', q{
BEGIN;
UPDATE t SET v = 15, s = 'first of the batch' WHERE id = 15;
UPDATE t SET v = 666 WHERE id = 16;
INSERT INTO t VALUES (8000, 8, 'last of the batch');
COMMIT;
});
ok( wait_until(60, sub {
		$local->safe_psql('postgres',
			"SELECT count(*) FROM ctas_fed.syncs WHERE remote_table = 't' AND error LIKE '%not666%'") eq '1' }),
	'the failing batch: its error is recorded');
is(pg_digest($remote, 'dw', 'public.t'), $before,
	'the failing batch: nothing of it is visible on the remote');
is($local->safe_psql('postgres', "SELECT state FROM ctas_fed.syncs WHERE remote_table = 't'"),
	'streaming', 'the failing batch: the job keeps retrying');
$remote->safe_psql('dw', 'ALTER TABLE public.t DROP CONSTRAINT not666');
converged('the failed batch, applied once the remote takes it', 't', $query);

# ---- the worker killed while its batch waits on the remote ------------------
$s = hold('t', 'UPDATE t SET v = v + 1 WHERE id <= 200');
$local->safe_psql('postgres', q{
UPDATE t SET v = v + 1 WHERE id <= 250;
DELETE FROM t WHERE id BETWEEN 20 AND 30;
INSERT INTO t VALUES (9000, 9, 'while killed');
});
my $pid = $local->safe_psql('postgres', q{
  SELECT j.pid FROM ctas_fed.jobs j JOIN pg_stat_activity a USING (pid)
   WHERE j.mode = 'sync' AND j.target = 'public.t' AND a.backend_type = 'ctas_fed sync'});
like($pid, qr/^\d+$/, 'the worker of the sync is found');
$local->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
release($s);
converged('the worker killed in a batch', 't', $query);
converged('the other sync too', 'nk', $nk_query);

# ---- nothing left ------------------------------------------------------------
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.t')");
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.nk')");
ok( wait_until(60, sub {
		$local->safe_psql('postgres', 'SELECT count(*) FROM pg_replication_slots') eq '0' }),
	'no replication slot is left');
ok( wait_until(60, sub {
		$remote->safe_psql('dw',
			"SELECT count(*) FROM pg_class WHERE relname = '_ctas_fed_sync_batch'") eq '0' }),
	'no batch table is left on the remote');

done_testing();
