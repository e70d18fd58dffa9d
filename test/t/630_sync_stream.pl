
# Copyright (c) 2026, ctas_fed developers

# create_tables_as with {"sync": "continuous"}: the tables of one call share
# one decoding stream (one publication, one replication slot, one sync
# worker).  ROLLBACK of the call leaves nothing; the copy of every table
# under one snapshot while a writer changes all of them, then the stream;
# every row of every table compared once the source is quiet; the worker
# failing between the commits of its jobs, killed, and the local server
# crashed while the writer runs; stop_sync of one table and a DDL failing
# another leave the others streaming on the same slot; the last stop drops
# the slot and the publication.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;


use CtasFed::Test;

# a webhook receiver (CtasFed::Test): records every request body, one per line
my (undef, $hook_log, $hook_port) = start_hook_receiver();

# how many webhook events match $re
sub hooks
{
	my ($re) = @_;
	return 0 unless -f $hook_log;
	return scalar(grep { $_ =~ $re } split /\n/, slurp_file($hook_log));
}

my $local = new_cluster('local');
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $rport = $remote->port;

$local->append_conf('postgresql.conf', "wal_level = logical\nmax_wal_senders = 4\n");
$local->restart;

$local->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw',
           notify_url 'http://127.0.0.1:$hook_port/hook');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE SCHEMA shop;
CREATE TABLE shop.a (id int PRIMARY KEY, v text, n int);
CREATE TABLE shop.b (id int PRIMARY KEY, v text, n int);
CREATE TABLE shop.c (id bigint PRIMARY KEY, v text, n numeric);
INSERT INTO shop.a SELECT g, 'a' || g, g FROM generate_series(1, 20000) g;
INSERT INTO shop.b SELECT g, 'b' || g, g FROM generate_series(1, 20000) g;
INSERT INTO shop.c SELECT g, 'c' || g, g FROM generate_series(1, 20000) g;
CREATE TABLE churn_ctl (stop boolean);
INSERT INTO churn_ctl VALUES (false);
-- a writer that changes the three tables, often in one transaction, until
-- told to stop: inserts, updates, key changes, deletes, rolled-back work
CREATE PROCEDURE churn(base int) LANGUAGE plpgsql AS \$\$
DECLARE
  i int := base;
BEGIN
  WHILE NOT (SELECT stop FROM churn_ctl) LOOP
    i := i + 1;
    INSERT INTO shop.a VALUES (100000 + i, 'new', i);
    UPDATE shop.b SET n = n + 1, v = 'u' || i WHERE id = (i::bigint * 7919) % 20000 + 1;
    DELETE FROM shop.c WHERE id = (i::bigint * 104729) % 20000 + 1;
    IF i % 2 = 0 THEN
      COMMIT;
    END IF;
    UPDATE shop.a SET id = id + 1000000 WHERE id = (i::bigint * 31) % 20000 + 1;
    INSERT INTO shop.c VALUES (200000 + i, 'new', i);
    BEGIN
      INSERT INTO shop.b VALUES (900000 + i, 'rolled back', 0);
      RAISE EXCEPTION 'undo';
    EXCEPTION WHEN raise_exception THEN NULL;
    END;
    COMMIT;
    -- a steady writer, not one that outruns the sync on a loaded machine
    PERFORM pg_sleep(0.001);
  END LOOP;
END \$\$;
});

sub our_slots
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'");
}

sub our_publications
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_publication WHERE pubname LIKE 'ctas_fed_sync_%'");
}

sub published
{
	return $local->safe_psql('postgres', q{
	  SELECT coalesce(string_agg(tablename, ',' ORDER BY tablename), '')
	    FROM pg_publication_tables WHERE pubname LIKE 'ctas_fed_sync_%'});
}

sub workers
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
}

sub remote_tables
{
	return $remote->safe_psql('dw', q{
	  SELECT count(*) FROM pg_tables
	   WHERE schemaname = 'public' AND tablename IN ('a', 'b', 'c')});
}

sub state_of
{
	my ($t) = @_;
	return $local->safe_psql('postgres',
		"SELECT state FROM ctas_fed.syncs WHERE remote_table = '$t'");
}

# every row of a table, on both sides
sub same
{
	my ($t) = @_;
	return sql_digest($local, 'postgres', "SELECT id, v, n FROM shop.$t")
	  eq sql_digest($remote, 'dw', "SELECT id, v, n FROM public.$t");
}

my $call = q{SELECT count(*) FROM ctas_fed.create_tables_as('wh', 'public',
  tables => ARRAY['shop.a', 'shop.b', 'shop.c']::regclass[],
  options => '{"sync": "continuous"}')};

# ROLLBACK: no remote table, job, publication or slot
$local->safe_psql('postgres', "BEGIN; $call; ROLLBACK;");
is(remote_tables(), '0', 'ROLLBACK: no remote table');
is($local->safe_psql('postgres', 'SELECT count(*) FROM ctas_fed.syncs'), '0',
	'ROLLBACK: no job');
is(our_publications(), '0', 'ROLLBACK: no publication');
is(our_slots(), '0', 'ROLLBACK: no slot');
is($remote->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'ROLLBACK: no prepared transaction on the remote');

# a table joins the stream's publication only from its owner: the call of
# a role that owns the first table but not the second fails, and leaves
# nothing
$local->safe_psql('postgres', q{
CREATE ROLE syncer LOGIN REPLICATION;
GRANT USAGE ON FOREIGN SERVER wh TO syncer;
GRANT CREATE ON DATABASE postgres TO syncer;
GRANT USAGE ON SCHEMA shop TO syncer;
CREATE TABLE shop.mine (id int PRIMARY KEY, v text);
ALTER TABLE shop.mine OWNER TO syncer;
CREATE TABLE shop.theirs (id int PRIMARY KEY, v text);
GRANT SELECT ON shop.theirs TO syncer;
});
my ($rc, $out, $err) = $local->psql('postgres', q{SET ROLE syncer;
SELECT count(*) FROM ctas_fed.create_tables_as('wh', 'public',
  tables => ARRAY['shop.mine', 'shop.theirs']::regclass[],
  options => '{"sync": "continuous"}')});
like($err, qr/must be owner of table theirs/,
	'a table of another owner may not join the stream');
is(remote_tables() . ' ' . our_publications() . ' ' .
	  $local->safe_psql('postgres', 'SELECT count(*) FROM ctas_fed.syncs'),
	'0 0 0', 'the refused call leaves no remote table, publication or job');
is($remote->safe_psql('dw',
		"SELECT count(*) FROM pg_tables WHERE tablename IN ('mine', 'theirs')"),
	'0', 'the refused call leaves no remote table of its own');

# committed while the writer runs: three jobs, one stream
my ($churn) = start_psql($local, 'CALL churn(0)');
is($local->safe_psql('postgres', $call), '3', 'create_tables_as: three tables');
is(remote_tables(), '3', 'three remote tables');
is(published(), 'a,b,c', 'one publication of the three tables');
is(our_publications(), '1', 'one publication');
ok(wait_until(120, sub {
	$local->safe_psql('postgres',
		"SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'") eq '3' }),
	'the three jobs reach streaming');
is(our_slots(), '1', 'exactly one replication slot for the three tables');
is(workers(), '1', 'one sync worker for the three tables');
is($local->safe_psql('postgres', q{
  SELECT count(*) || ' ' || count(DISTINCT stream_id) || ' ' ||
         count(DISTINCT publication) || ' ' || count(DISTINCT slot_name) || ' ' ||
         count(DISTINCT job_group)
    FROM ctas_fed.syncs}),
	'3 1 1 1 1', 'three jobs of one stream: one publication, one slot name');

# every job applies changes made after the copy, then the source is quiet
my $lsn = $local->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
ok(wait_until(60, sub {
	$remote->safe_psql('dw',
		"SELECT count(*) FROM public._ctas_fed_sync_progress WHERE lsn > '$lsn'") eq '3' }),
	'each job stores its own applied lsn, past the copy');
$local->safe_psql('postgres', 'UPDATE churn_ctl SET stop = true');
$churn->finish;
ok($local->safe_psql('postgres', 'SELECT count(*) FROM shop.c WHERE id > 200000') > 0,
	'the writer made changes');
ok(wait_until(120, sub { same('a') && same('b') && same('c') }),
	'every table equals its source once quiet (every row)');
ok(same($_), "fingerprint of $_ matches") foreach qw(a b c);

# the jobs view: one row per job, each its own lag, the slot shown
ok(wait_until(30, sub { $local->safe_psql('postgres', q{
	  SELECT count(*) || ' ' || count(DISTINCT gid)
	    FROM ctas_fed.jobs
	   WHERE mode = 'sync' AND state = 'streaming' AND rows > 0 AND pid > 0
	     AND lag_bytes BETWEEN 0 AND 1000000 AND lag_seconds BETWEEN 0 AND 5}) eq '3 1' }),
	'jobs view: three jobs streaming, one slot, lag small once quiet');

# the worker failing or killed while the writer runs: another one goes on
# from what each job stored, exactly once.  A reader of the remote would see a source
# transaction applied twice as a second write of a row inserted once:
# every write of a row of a is logged remotely.
$remote->safe_psql('dw', q{
CREATE TABLE a_log (id int);
CREATE FUNCTION log_a() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = public AS $$
BEGIN
  INSERT INTO a_log VALUES (NEW.id);
  RETURN NULL;
END $$;
CREATE TRIGGER a_log AFTER INSERT OR UPDATE ON public.a
  FOR EACH ROW EXECUTE FUNCTION log_a();
});
# and every write into b, whose rows the writer updates (a new n each time)
sync_write_log($remote, 'b', 'id');
$local->safe_psql('postgres', 'UPDATE churn_ctl SET stop = false');
($churn) = start_psql($local, 'CALL churn(1000000)');
$lsn = $local->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
ok(wait_until(60, sub {
	$remote->safe_psql('dw',
		"SELECT count(*) FROM public._ctas_fed_sync_progress WHERE lsn > '$lsn'") eq '3' }),
	'streaming while the writer runs again');

# a failure between the commits of one peek: the remote refuses the commit
# of c (the last job to commit) once, after a and b committed theirs, and
# before the slot is advanced; the worker started again gets the same
# source transactions, which a and b skip and c applies
my $c_id = $local->safe_psql('postgres',
	"SELECT sync_id FROM ctas_fed.syncs WHERE remote_table = 'c'");
$remote->safe_psql('dw', qq{
CREATE FUNCTION fail_c() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = public AS \$\$
BEGIN
  IF NEW.job LIKE '%/$c_id' AND to_regclass('public.fail_once') IS NOT NULL
     AND nextval('public.fail_once') = 1 THEN
    RAISE EXCEPTION 'injected failure between the commits of a stream';
  END IF;
  RETURN NEW;
END \$\$;
CREATE TRIGGER fail_c BEFORE INSERT OR UPDATE ON public._ctas_fed_sync_progress
  FOR EACH ROW EXECUTE FUNCTION fail_c();
CREATE SEQUENCE fail_once;
});
ok(wait_until(60, sub {
	$remote->safe_psql('dw', 'SELECT last_value FROM fail_once') > 1 }),
	'the commit of c failed once, the worker started again');
$lsn = $local->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
ok(wait_until(60, sub {
	$remote->safe_psql('dw',
		"SELECT count(*) FROM public._ctas_fed_sync_progress WHERE lsn > '$lsn'") eq '3' }),
	'after the failure between the commits, every job streams again');

my $pid = $local->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
$local->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok(wait_until(60, sub {
	$local->safe_psql('postgres', qq{
	  SELECT count(*) FROM pg_stat_activity
	   WHERE backend_type = 'ctas_fed sync' AND pid <> $pid}) eq '1' }),
	'killed worker: one worker started again');
$local->safe_psql('postgres', 'UPDATE churn_ctl SET stop = true');
$churn->finish;
ok(wait_until(120, sub { same('a') && same('b') && same('c') }),
	'killed worker: every table equals its source once quiet');
my $inserted = $local->safe_psql('postgres',
	'SELECT count(*) FROM shop.a WHERE id >= 1100000');
ok($inserted > 0, 'the writer inserted rows around the kill');
is($remote->safe_psql('dw', q{
	  SELECT count(DISTINCT id) || ' ' || count(*) FROM a_log WHERE id >= 1100000}),
	"$inserted $inserted",
	'failure between commits, killed worker: every row inserted once was written once (nothing applied twice)');
like(sync_writes($remote, 'b'), qr/^[1-9]\d* [1-9]\d* 0$/,
	'failure between commits, killed worker: no updated row of b written twice');
is(our_slots(), '1', 'killed worker: still one slot');

# the local server crashes: the stream resumes by itself after the restart
$local->stop('immediate');
$local->start;
$local->safe_psql('postgres', q{
  INSERT INTO shop.a VALUES (4000000, 'after crash', 0);
  UPDATE shop.b SET v = 'after crash' WHERE id <= 50;
  DELETE FROM shop.c WHERE id BETWEEN 500 AND 550;});
ok(wait_until(90, sub { same('a') && same('b') && same('c') }),
	'local crash: the stream resumes, every table equals its source');
is(our_slots() . ' ' . workers(), '1 1', 'local crash: one slot, one worker');

# stop_sync of one table: it leaves the publication, the others go on with
# the same slot and worker
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.a')");
is(state_of('a'), 'stopped', 'stop_sync: the job is stopped');
is(published(), 'b,c', 'stop_sync: its table left the publication');
$local->safe_psql('postgres', q{
  INSERT INTO shop.a VALUES (5000000, 'after stop', 0);
  INSERT INTO shop.b VALUES (5000000, 'after stop', 0);
  UPDATE shop.c SET v = 'after stop' WHERE id <= 100;});
ok(wait_until(60, sub { same('b') && same('c') }),
	'stop_sync of one: the others go on streaming');
is($remote->safe_psql('dw', 'SELECT count(*) FROM public.a WHERE id = 5000000'), '0',
	'the stopped table no longer follows');
is(our_slots(), '1', 'stop_sync of one: the slot stays');
is(workers(), '1', 'stop_sync of one: the worker goes on');
ok(wait_until(30, sub {
	hooks(qr/"target": "public.a", "mode": "sync", "state": "stopped"/) == 1 }),
	'webhook: the stop of a job whose stream goes on');
($rc, $out, $err) = $local->psql('postgres', 'DROP SERVER wh CASCADE');
like($err,
	qr/continuous sync into "wh.public.[bc]" is streaming.*\n.*HINT:  Stop it with ctas_fed.stop_sync\(\)/s,
	'DROP SERVER refused, naming a job that runs, not the stopped one');
ok(wait_until(30, sub {
	$local->safe_psql('postgres', 'SELECT ctas_fed.metrics()') !~ /target="public.a"/ }),
	'the stopped job leaves the metrics');
like($local->safe_psql('postgres', 'SELECT ctas_fed.metrics()'),
	qr/^ctas_fed_sync_lag_bytes\{catalog="wh",target="public.c"\} \d+$/m,
	'the jobs that go on keep their metrics');
is($local->safe_psql('postgres', q{
	  SELECT state || ' ' || (pid IS NULL) || ' ' || (lag_bytes IS NULL)
	    FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'public.a'}),
	'stopped true true', 'jobs view: the stopped job has no worker and no lag');

# a DDL that b cannot follow (a column added with a volatile default: the
# WAL does not carry the values it gave the rows): b fails, c goes on
$local->safe_psql('postgres', q{
  INSERT INTO shop.b VALUES (6000000, 'before ddl', 0);
  ALTER TABLE shop.b ADD COLUMN r float8 DEFAULT random();
  INSERT INTO shop.b VALUES (6000001, 'after ddl', 0);
  INSERT INTO shop.c VALUES (6000000, 'with ddl', 0);});
ok(wait_until(60, sub { state_of('b') eq 'failed' }), 'DDL: that job failed');
like($local->safe_psql('postgres', q{SELECT error FROM ctas_fed.syncs WHERE remote_table = 'b'}),
	qr/column "r" was added to table "shop.b" of sync \d+ with a volatile default .*: ALTER TABLE/,
	'DDL: the error names the column');
is($remote->safe_psql('dw', q{SELECT string_agg(v, ',' ORDER BY id) FROM public.b WHERE id >= 6000000}),
	'before ddl', 'DDL: what came before it was applied, nothing after');
ok(wait_until(30, sub { published() eq 'c' }), 'DDL: the failed table left the publication');
ok(wait_until(30, sub {
	hooks(qr/"target": "public.b", "mode": "sync", "state": "failed", .*"error": "column \\"r\\"/) == 1 }),
	'webhook: the failure of one job');
$local->safe_psql('postgres', q{
  UPDATE shop.c SET v = 'after the failure' WHERE id <= 200;
  DELETE FROM shop.c WHERE id BETWEEN 300 AND 400;});
ok(wait_until(60, sub { same('c') }), 'DDL on another table: the last job goes on');
is(state_of('c'), 'streaming', 'the last job is streaming');
is(our_slots(), '1', 'DDL on one: the slot stays for the others');

# the last job stopped: the slot, the publication and the worker go
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.c')");
ok(wait_until(30, sub { our_slots() eq '0' }), 'last stop: the slot is dropped');
is(our_publications(), '0', 'last stop: the publication is dropped');
ok(wait_until(30, sub { workers() eq '0' }), 'last stop: no sync worker');
ok(wait_until(30, sub {
	hooks(qr/"target": "public.c", "mode": "sync", "state": "stopped"/) == 1 }),
	'webhook: the stop of the last job');
is(hooks(qr/"state": "stopped"/), 2, 'webhook: each stop told once');
is(hooks(qr/"target": "public.[abc]", "mode": "sync", "state": "copying"/), 3,
	'webhook: each job told its copy');
is($local->safe_psql('postgres', q{
  SELECT string_agg(remote_table || ' ' || state, ',' ORDER BY remote_table)
    FROM ctas_fed.syncs}),
	'a stopped,b failed,c stopped', 'the jobs record how each ended');
is($remote->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'no prepared transaction left on the remote');

# ctas_fed.max_syncs_per_role counts a create_tables_as call once, and a
# CTAS once: the tables of one call are one sync there
$local->safe_psql('postgres', q{
CREATE TABLE shop.mine2 (id int PRIMARY KEY, v text);
ALTER TABLE shop.mine2 OWNER TO syncer;
INSERT INTO shop.mine SELECT g, 'm' || g FROM generate_series(1, 100) g;
INSERT INTO shop.mine2 SELECT g, 'n' || g FROM generate_series(1, 100) g;
});
my $as_syncer = "SET ctas_fed.max_syncs_per_role = 2; SET ROLE syncer;";
is($local->safe_psql('postgres', qq{$as_syncer
SELECT count(*) FROM ctas_fed.create_tables_as('wh', 'public',
  tables => ARRAY['shop.mine', 'shop.mine2']::regclass[],
  options => '{"sync": "continuous"}')}),
	'2', 'max_syncs_per_role = 2: a call of two tables');
($rc, $out, $err) = $local->psql('postgres', qq{$as_syncer
CREATE TABLE wh.public.mine3 WITH (sync = 'continuous') AS SELECT * FROM shop.mine});
is($err, '', 'max_syncs_per_role = 2: the call of two tables counted once');
($rc, $out, $err) = $local->psql('postgres', qq{$as_syncer
CREATE TABLE wh.public.mine4 WITH (sync = 'continuous') AS SELECT * FROM shop.mine});
like($err, qr/too many continuous syncs for role "syncer"/,
	'max_syncs_per_role = 2: a third sync is refused');
ok(wait_until(60, sub {
	$local->safe_psql('postgres',
		"SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'") eq '3' }),
	'the three tables of the role stream');
is(our_slots(), '1', 'the CTAS joined the stream of the call: one slot');
$local->safe_psql('postgres', q{
  SELECT ctas_fed.stop_sync('wh.public.mine');
  SELECT ctas_fed.stop_sync('wh.public.mine2');
  SELECT ctas_fed.stop_sync('wh.public.mine3');});
ok(wait_until(30, sub { our_slots() eq '0' }), 'all stopped: no slot');

done_testing();
