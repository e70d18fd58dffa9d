
# Copyright (c) 2026, ctas_fed developers

# Continuous sync into a PostgreSQL catalog: CREATE TABLE ... WITH (sync =
# 'continuous').  The statement surface: what is eligible and the error that
# says why not, wal_level, and the atomicity of what the statement creates
# (remote table, publication, job record) with ROLLBACK and ROLLBACK TO
# SAVEPOINT.  Then the worker: the initial copy while a writer changes the
# source in every way (inserts, updates, rows moving in and out of the
# WHERE, key changes, deletes, rolled-back work), the stream after it, and
# every row of both sides compared once the source is quiet; TRUNCATE;
# stop_sync and DROP TABLE; a DDL on a synced column fails the job.  No
# replication slot is ever left behind.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Time::HiRes qw(usleep);

use CtasFed::Test;

# a webhook receiver (CtasFed::Test): records every request body, one per line
my (undef, $hook_log, $hook_port) = start_hook_receiver();

sub wait_hook
{
	my ($re) = @_;
	return wait_until(30, sub { -f $hook_log && slurp_file($hook_log) =~ $re });
}

my $local = new_cluster('local');
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $rport = $remote->port;

$local->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw',
           notify_url 'http://127.0.0.1:$hook_port/hook');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE TABLE orders (id int PRIMARY KEY, customer text, amount numeric(12,2),
                     region text, status text);
INSERT INTO orders SELECT g, 'c' || g % 10, g * 1.5, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, 'new'
  FROM generate_series(1, 50000) g;
-- a writer that changes the source in every way until told to stop: new
-- rows, updates, rows moving in and out of the WHERE, key changes,
-- deletes, and rolled-back work
CREATE TABLE churn_ctl (stop boolean);
INSERT INTO churn_ctl VALUES (false);
CREATE PROCEDURE churn() LANGUAGE plpgsql AS \$\$
DECLARE
  i int := 0;
BEGIN
  WHILE NOT (SELECT stop FROM churn_ctl) LOOP
    i := i + 1;
    INSERT INTO orders VALUES (100000 + i, 'n' || i, i, CASE WHEN i % 3 = 0 THEN 'us' ELSE 'eu' END, 'new');
    UPDATE orders SET status = 'u' || i, amount = amount + 1 WHERE id = (i * 7919) % 50000 + 1;
    UPDATE orders SET region = CASE WHEN region = 'eu' THEN 'us' ELSE 'eu' END WHERE id = (i::bigint * 104729) % 50000 + 1;
    DELETE FROM orders WHERE id = (i::bigint * 15485863) % 50000 + 1;
    UPDATE orders SET id = id + 1000000 WHERE id = (i * 31) % 50000 + 1;
    BEGIN
      INSERT INTO orders VALUES (900000 + i, 'rolled back', 0, 'eu', 'x');
      RAISE EXCEPTION 'undo';
    EXCEPTION WHEN raise_exception THEN NULL;
    END;
    COMMIT;
  END LOOP;
END \$\$;
CREATE TABLE nokey (a int, b text);
CREATE TABLE other (id int PRIMARY KEY, x int);
CREATE VIEW orders_v AS SELECT * FROM orders;
CREATE TABLE parted (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE UNLOGGED TABLE unlogged_t (id int PRIMARY KEY);
});

sub sql_error
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $local->psql('postgres', $sql);
	return $rc == 0 ? '' : $err;
}

sub remote_has_table
{
	my ($name) = @_;
	return $remote->safe_psql('dw',
		"SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = '$name'"
	);
}

sub our_slots
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'");
}

# wal_level: the cluster starts with the framework's minimal
like(
	sql_error("CREATE TABLE wh.public.o WITH (sync = 'continuous') AS SELECT * FROM orders"),
	qr/continuous sync requires wal_level = logical.*\n.*HINT:  Set wal_level = logical in postgresql.conf/s,
	'wal_level below logical: error with the setting in the hint');
is(remote_has_table('o'), '0', 'no remote table after the wal_level error');

$local->append_conf('postgresql.conf', "wal_level = logical\nmax_wal_senders = 4\n");
$local->restart;

# option values
like(sql_error("CREATE TABLE wh.public.o WITH (sync = 'sometimes') AS SELECT * FROM orders"),
	qr/invalid value for option "sync": "sometimes"/, 'bad value of sync');
like(sql_error("CREATE TABLE wh.public.o WITH (sync = 'continuous', atomic = false) AS SELECT * FROM orders"),
	qr/option "sync" cannot be combined with atomic = false/, 'sync with atomic = false');
like(sql_error("CREATE TABLE wh.public.o WITH (sync = 'continuous', if_exists = 'append') AS SELECT * FROM orders"),
	qr/option "sync" cannot be combined with IF NOT EXISTS/, 'sync with if_exists');
like(sql_error("CREATE TABLE wh.public.o WITH (sync = 'continuous', primary_key = 'customer') AS SELECT * FROM orders"),
	qr/option "primary_key" of a synced table must name the key of the source/, 'primary_key other than the source key');

# eligibility: each refusal names what made the query ineligible
my @ineligible = (
	[ 'SELECT o.id, x FROM orders o JOIN other USING (id)', qr/does not support joins or more than one table/, 'join' ],
	[ 'SELECT region, count(*) FROM orders GROUP BY region', qr/does not support aggregate functions or GROUP BY/, 'aggregate' ],
	[ 'SELECT id, row_number() OVER () FROM orders', qr/does not support window functions/, 'window function' ],
	[ 'SELECT * FROM orders LIMIT 10', qr/does not support LIMIT or OFFSET/, 'LIMIT' ],
	[ 'SELECT DISTINCT id, region FROM orders', qr/does not support DISTINCT/, 'DISTINCT' ],
	[ 'SELECT * FROM orders WHERE id IN (SELECT id FROM other)', qr/does not support subqueries/, 'sublink' ],
	[ 'SELECT id, random() AS r FROM orders', qr/does not support volatile or stable functions/, 'volatile function' ],
	[ 'SELECT id, now() AS t FROM orders', qr/does not support volatile or stable functions/, 'stable function' ],
	[ 'SELECT id, generate_series(1, 2) AS g FROM orders', qr/does not support set-returning functions/, 'SRF' ],
	[ 'SELECT * FROM orders_v', qr/does not support views/, 'view' ],
	[ 'SELECT * FROM ONLY parted', qr/does not support ONLY on a partitioned table/, 'ONLY a partitioned table' ],
	[ 'SELECT * FROM unlogged_t', qr/does not support temporary or unlogged tables/, 'unlogged table' ],
	[ 'SELECT id FROM orders UNION ALL SELECT id FROM other', qr/does not support UNION, INTERSECT or EXCEPT/, 'UNION' ],
	[ 'SELECT 1 AS one', qr/does not support a query without a FROM clause/, 'no FROM' ],
	[ 'SELECT * FROM nokey', qr/cannot sync table "nokey" because it has no primary key or replica identity index/, 'no key' ],
	[ 'SELECT customer, amount FROM orders', qr/needs the key column "id" of table "orders" in the query result/, 'key not projected' ],
	[ 'SELECT id + 0 AS id, amount FROM orders', qr/needs the key column "id"/, 'key as an expression' ],
	[ 'SELECT ctid::text AS c, id FROM orders', qr/does not support system columns/, 'system column' ],
);
foreach my $case (@ineligible)
{
	my ($q, $re, $what) = @$case;
	like(sql_error("CREATE TABLE wh.public.o WITH (sync = 'continuous') AS $q"),
		$re, "ineligible: $what");
}
is(remote_has_table('o'), '0', 'no remote table after any refusal');

# eligible: renamed key, immutable expressions, WHERE; ROLLBACK leaves nothing
my $ctas = q{CREATE TABLE wh.public.eu_orders WITH (sync = 'continuous') AS
  SELECT id AS order_id, upper(customer) AS customer, amount * 2 AS doubled, status
    FROM orders WHERE region = 'eu'};
$local->safe_psql('postgres', "BEGIN; $ctas; ROLLBACK;");
is(remote_has_table('eu_orders'), '0', 'ROLLBACK: no remote table');
is($local->safe_psql('postgres', 'SELECT count(*) FROM ctas_fed.syncs'), '0',
	'ROLLBACK: no job record');
is($local->safe_psql('postgres',
		"SELECT count(*) FROM pg_publication WHERE pubname LIKE 'ctas_fed_sync_%'"),
	'0', 'ROLLBACK: no publication');

$local->safe_psql('postgres',
	"BEGIN; SAVEPOINT a; $ctas; ROLLBACK TO SAVEPOINT a; COMMIT;");
is(remote_has_table('eu_orders'), '0', 'ROLLBACK TO SAVEPOINT: no remote table');
is($local->safe_psql('postgres', 'SELECT count(*) FROM ctas_fed.syncs'), '0',
	'ROLLBACK TO SAVEPOINT: no job record');
is($local->safe_psql('postgres',
		"SELECT count(*) FROM pg_publication WHERE pubname LIKE 'ctas_fed_sync_%'"),
	'0', 'ROLLBACK TO SAVEPOINT: no publication');
is($remote->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'no prepared transaction left on the remote');

# committed: the table (its primary key comes with the copy), the
# publication of the source, the job record; the source keeps changing
# before, during and after the initial copy
my ($churn) = start_psql($local, 'CALL churn()');
$local->safe_psql('postgres', $ctas);
is(remote_has_table('eu_orders'), '1', 'COMMIT: remote table created');
is($local->safe_psql('postgres', q{
  SELECT remote_schema || '.' || remote_table || ' ' || source::regclass || ' ' ||
         array_to_string(key_columns, ',') || ' ' || array_to_string(source_key, ',') || ' ' ||
         (publication = slot_name) || ' ' ||
         -- the worker starts at the commit and may be done copying already
         (state IN ('copying', 'streaming'))
    FROM ctas_fed.syncs}),
	'public.eu_orders orders order_id 1 true true',
	'job record: target, source, key, names, state');
is($local->safe_psql('postgres', q{
  SELECT count(*) FROM pg_publication_tables p JOIN ctas_fed.syncs s ON p.pubname = s.publication
   WHERE p.tablename = 'orders'}),
	'1', 'publication of the source table');
like(sql_error("CREATE TABLE wh.public.eu_orders2 WITH (sync = 'continuous') AS SELECT * FROM orders"),
	qr/^$/, 'a second sync of the same table');
is($local->safe_psql('postgres', 'SELECT count(*) FROM ctas_fed.syncs'), '2',
	'two job records');

# the worker copies under the slot's snapshot, then streams: wait for the
# copy to end while the writer runs, let it run on a little, stop it, and
# compare every row of both sides
my $eu_query = q{SELECT id, upper(customer), amount * 2, status FROM orders WHERE region = 'eu'};
my $eu_remote = q{SELECT order_id, customer, doubled, status FROM public.eu_orders};
ok(wait_until(120, sub {
	$local->safe_psql('postgres',
		"SELECT count(*) = 2 FROM ctas_fed.syncs WHERE state = 'streaming'") eq 't' }),
	'both syncs reach streaming');
# every write into the whole-table copy logged on the remote: a source
# transaction applied twice would write a row it already wrote
# (docs/sync-exactly-once.md)
sync_write_log($remote, 'eu_orders2', 'id');
# the initial copy built the key in the transaction of its rows
is($remote->safe_psql('dw', q{
  SELECT string_agg(a.attname, ',' ORDER BY a.attnum)
    FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
   WHERE i.indrelid = 'public.eu_orders'::regclass AND i.indisprimary}),
	'order_id', 'remote primary key: the renamed source key');
my $lsn = $local->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
ok(wait_until(60, sub {
	$remote->safe_psql('dw', "SELECT count(*) FROM public._ctas_fed_sync_progress WHERE lsn > '$lsn'") eq '2' }),
	'both syncs apply changes made after their copy');
$local->safe_psql('postgres', 'UPDATE churn_ctl SET stop = true');
$churn->finish;
ok($local->safe_psql('postgres', 'SELECT count(*) FROM orders WHERE id > 100000') > 0,
	'the writer made changes');
my $want = sql_digest($local, 'postgres', $eu_query);
ok(wait_until(60, sub { sql_digest($remote, 'dw', $eu_remote) eq $want }),
	'remote equals the query after the source is quiet (every row)');
is(sql_digest($remote, 'dw', $eu_remote), $want, 'fingerprints match');
my $want_all = sql_digest($local, 'postgres', 'SELECT * FROM orders');
ok(wait_until(60, sub { sql_digest($remote, 'dw', 'SELECT * FROM public.eu_orders2') eq $want_all }),
	'the second sync (the whole table) matches too');
# the jobs view: mode sync, state, rows, lag; the CTAS's own job is the
# sync's row
ok(wait_until(30, sub { $local->safe_psql('postgres', q{
	  SELECT count(*) FROM ctas_fed.jobs
	   WHERE mode = 'sync' AND state = 'streaming' AND rows > 0 AND pid > 0
	     AND lag_bytes BETWEEN 0 AND 1000000 AND lag_seconds BETWEEN 0 AND 5}) eq '2' }),
	'jobs view: both syncs streaming, rows counted, lag small once quiet');
# WAL of other tables only: the slots still move on, and hold no WAL
$local->safe_psql('postgres',
	'CREATE TABLE unrelated AS SELECT g, md5(g::text) FROM generate_series(1, 200000) g');
ok(wait_until(30, sub { $local->safe_psql('postgres', q{
	  SELECT count(*) FROM ctas_fed.jobs
	   WHERE mode = 'sync' AND state = 'streaming' AND lag_bytes < 1000000}) eq '2' }),
	'other tables\' WAL: the slots are advanced over it');

# webhooks on the state changes of sync jobs
ok(wait_hook(qr/"target": "public.eu_orders", "mode": "sync", "state": "copying"/),
	'webhook: copying');
ok(wait_hook(qr/"target": "public.eu_orders", "mode": "sync", "state": "streaming", "rows": [1-9]/),
	'webhook: streaming, with the rows copied');

# the metrics: lag and changes by catalog and target, promtool-clean
my $metrics = $local->safe_psql('postgres', 'SELECT ctas_fed.metrics()');
like($metrics, qr/^ctas_fed_sync_lag_bytes\{catalog="wh",target="public.eu_orders"\} \d+$/m,
	'metrics: lag_bytes of a sync');
like($metrics, qr/^ctas_fed_sync_lag_seconds\{catalog="wh",target="public.eu_orders2"\} [\d.]+$/m,
	'metrics: lag_seconds of a sync');
like($metrics, qr/^ctas_fed_sync_changes_total\{catalog="wh",target="public.eu_orders"\} [1-9]\d*$/m,
	'metrics: changes applied');
my $mfile = PostgreSQL::Test::Utils::tempdir() . '/metrics.txt';
open my $mf, '>', $mfile or die;
print $mf "$metrics\n";
close $mf;
my $promtool = `which promtool`;
chomp $promtool;
my $check = `$promtool check metrics < $mfile 2>&1`;
is($?, 0, 'metrics: promtool check metrics passes') or diag $check;

is($local->safe_psql('postgres', q{
	  SELECT count(*) FROM ctas_fed.jobs j JOIN ctas_fed.syncs s USING (job_id)
	   WHERE j.mode <> 'sync'}),
	'0', 'jobs view: one row per sync job');
is($local->safe_psql('postgres', q{
	  SELECT count(*) FROM ctas_fed.jobs WHERE mode <> 'sync' AND lag_bytes IS NOT NULL}),
	'0', 'jobs view: lag is NULL for other modes');
is($local->safe_psql('postgres',
		qq{SELECT bool_and(r.confirmed_flush_lsn >= '$lsn')
		    FROM pg_replication_slots r JOIN ctas_fed.syncs s ON s.slot_name = r.slot_name}),
	't', 'the slots are advanced past what was applied');

# the worker killed: the resolver starts another one, which goes on from
# what the remote stored
my $pid = $local->safe_psql('postgres', q{
  SELECT pid FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync' ORDER BY pid LIMIT 1});
ok($pid > 0, 'a sync worker runs');
$local->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
$local->safe_psql('postgres', q{
  INSERT INTO orders VALUES (3000001, 'after kill', 1, 'eu', 'new');
  UPDATE orders SET status = 'after kill' WHERE id IN (SELECT id FROM orders ORDER BY id LIMIT 100);});
ok(wait_until(60, sub {
	$local->safe_psql('postgres', qq{
	  SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync' AND pid <> $pid}) eq '1' }),
	'killed worker: started again (one stream carries both syncs)');
$want = sql_digest($local, 'postgres', $eu_query);
$want_all = sql_digest($local, 'postgres', 'SELECT * FROM orders');
ok(wait_until(60, sub { sql_digest($remote, 'dw', $eu_remote) eq $want
	  && sql_digest($remote, 'dw', 'SELECT * FROM public.eu_orders2') eq $want_all }),
	'killed worker: both remotes equal their queries');
like(sync_writes($remote, 'eu_orders2'), qr/^[1-9]\d* [1-9]\d* 0$/,
	'writer, killed worker: no row written twice (exactly once)');

# the remote down for a while: changes wait in the slot, the error shows
# in the job, and the sync catches up once the remote is back
$remote->stop('fast');
$local->safe_psql('postgres', q{
  INSERT INTO orders VALUES (3000002, 'while down', 2, 'eu', 'new');
  UPDATE orders SET status = 'while down' WHERE id IN (SELECT id FROM orders WHERE region = 'eu' ORDER BY id LIMIT 50);
  DELETE FROM orders WHERE id IN (SELECT id FROM orders WHERE region = 'eu' ORDER BY id DESC LIMIT 20);});
ok(wait_until(60, sub { $local->safe_psql('postgres', q{
	  SELECT count(*) FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'public.eu_orders'
	     AND error IS NOT NULL AND lag_bytes > 0 AND lag_seconds > 2}) eq '1' }),
	'remote down: the job shows the error and its lag, growing');
$remote->start;
$want = sql_digest($local, 'postgres', $eu_query);
$want_all = sql_digest($local, 'postgres', 'SELECT * FROM orders');
ok(wait_until(90, sub { sql_digest($remote, 'dw', $eu_remote) eq $want
	  && sql_digest($remote, 'dw', 'SELECT * FROM public.eu_orders2') eq $want_all }),
	'remote back: both remotes equal their queries');
ok(wait_until(30, sub { $local->safe_psql('postgres', q{
	  SELECT count(*) FROM ctas_fed.jobs WHERE mode = 'sync' AND state = 'streaming' AND error IS NULL}) eq '2' }),
	'remote back: the error is cleared');

# TRUNCATE of the source empties the remote table; later rows follow
$local->safe_psql('postgres', q{
  TRUNCATE orders;
  INSERT INTO orders VALUES (1, 'a', 1, 'eu', 'new'), (2, 'b', 2, 'us', 'new'), (3, 'c', 3, 'eu', 'new');
  UPDATE orders SET region = 'eu' WHERE id = 2;
  DELETE FROM orders WHERE id = 1;});
$want = sql_digest($local, 'postgres', $eu_query);
ok(wait_until(60, sub { sql_digest($remote, 'dw', $eu_remote) eq $want }),
	'TRUNCATE and later changes applied');
is($remote->safe_psql('dw', 'SELECT string_agg(order_id::text, \',\' ORDER BY order_id) FROM public.eu_orders'),
	'2,3', 'remote rows after TRUNCATE');

# stop_sync: the job stops and leaves the stream; the slot and the
# publication of its source stay for the other sync of the stream (of the
# same table), and go with the last one (below)
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.eu_orders2')");
is($local->safe_psql('postgres', q{SELECT state FROM ctas_fed.syncs s WHERE remote_table = 'eu_orders2'}),
	'stopped', 'stop_sync: state stopped');
is($local->safe_psql('postgres', q{
	  SELECT count(*) FROM pg_replication_slots r JOIN ctas_fed.syncs s ON s.slot_name = r.slot_name
	   WHERE s.remote_table = 'eu_orders2'}) . ' ' .
	$local->safe_psql('postgres', q{
	  SELECT count(*) FROM pg_publication_tables p JOIN ctas_fed.syncs s ON p.pubname = s.publication
	   WHERE s.remote_table = 'eu_orders' AND p.tablename = 'orders'}),
	'1 1', 'stop_sync of one sync of a stream: the slot and the source\'s publication stay for the other');
is($local->safe_psql('postgres', q{
	  SELECT state || ' ' || (finished_at IS NOT NULL) || ' ' || (lag_bytes IS NULL)
	    FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'public.eu_orders2'}),
	'stopped true true', 'jobs view: stopped job, finished, no lag');
ok(wait_hook(qr/"target": "public.eu_orders2", "mode": "sync", "state": "stopped"/),
	'webhook: stopped');
like(sql_error("SELECT ctas_fed.stop_sync('wh.public.eu_orders2')"),
	qr/there is no running sync into "wh.public.eu_orders2"/, 'stop_sync of a stopped sync');

# a DDL that retypes a column the query reads only as a column of its
# result: followed by a copy again under a snapshot after the DDL (what
# came before it applied first), the remote column retyped (sync/reshape.c;
# the worker crashed here when the query reads more source columns than
# it has result columns, as this one does with region)
$local->safe_psql('postgres', q{
  INSERT INTO orders VALUES (10, 'before ddl', 10, 'eu', 'new');
  DROP VIEW orders_v;
  ALTER TABLE orders ALTER COLUMN status TYPE varchar(20);
  INSERT INTO orders VALUES (11, 'after ddl', 11, 'eu', 'new');});
$want = sql_digest($local, 'postgres', $eu_query);
ok(wait_until(90, sub {
	$local->safe_psql('postgres', q{SELECT state FROM ctas_fed.syncs WHERE remote_table = 'eu_orders'}) eq 'streaming'
	  && sql_digest($remote, 'dw', $eu_remote) eq $want }),
	'retype of a result column: copied again, streaming, the remote equals the query');
is($remote->safe_psql('dw', q{
	  SELECT format_type(atttypid, atttypmod) FROM pg_attribute
	   WHERE attrelid = 'public.eu_orders'::regclass AND attname = 'status'}),
	'character varying(20)', 'retype of a result column: the remote column retyped');

# a DDL that retypes a column the WHERE reads: the job fails with a clear
# error and releases its slot, after applying what came before the DDL
$local->safe_psql('postgres', q{
  INSERT INTO orders VALUES (12, 'before ddl 2', 12, 'eu', 'new');
  ALTER TABLE orders ALTER COLUMN region TYPE varchar(10);
  INSERT INTO orders VALUES (13, 'after ddl 2', 13, 'eu', 'new');});
ok(wait_until(60, sub {
	$local->safe_psql('postgres', q{SELECT state FROM ctas_fed.syncs WHERE remote_table = 'eu_orders'}) eq 'failed' }),
	'DDL on a synced column: job failed');
like($local->safe_psql('postgres', q{SELECT error FROM ctas_fed.syncs WHERE remote_table = 'eu_orders'}),
	qr/column "region" of table "public.orders" read by sync \d+ changed its type from text to character varying, which the query reads in an expression or its WHERE: ALTER TABLE/,
	'the error names the column');
is($remote->safe_psql('dw', q{SELECT count(*) FROM public.eu_orders WHERE customer = 'BEFORE DDL 2'}),
	'1', 'the change before the DDL was applied');
ok(wait_until(30, sub { our_slots() eq '0' }), 'the failed job released its slot');
like($local->safe_psql('postgres', q{
	  SELECT state || ': ' || error FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'public.eu_orders'}),
	qr/^failed: column "region"/, 'jobs view: failed job with its error');
ok(wait_hook(qr/"target": "public.eu_orders", "mode": "sync", "state": "failed", "rows": \d+, "bytes": 0, "error": "column \\"region\\"/),
	'webhook: failed, with the error');
unlike(slurp_file($hook_log), qr/secret/, 'no secret in any webhook');
is($local->safe_psql('postgres', q{
	  CREATE ROLE outsider;
	  SET ROLE outsider;
	  SELECT state || ': ' || error FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'public.eu_orders'}),
	'failed: <insufficient privilege>', 'jobs view: the error of another user\'s sync is masked');
# sync_jobs() runs as the extension's owner: called directly by another
# login, it must not hand out the error either
$local->safe_psql('postgres', 'CREATE ROLE sync_reader LOGIN');
is($local->safe_psql('postgres', q{
	  SELECT state || ': ' || error FROM ctas_fed.sync_jobs() WHERE target = 'public.eu_orders'},
	extra_params => ['-U', 'sync_reader']),
	'failed: <insufficient privilege>', 'sync_jobs(): the error of another user\'s sync is masked');

like(sql_error("EXPLAIN ANALYZE CREATE TABLE wh.public.x WITH (sync = 'continuous') AS SELECT * FROM orders"),
	qr/EXPLAIN ANALYZE of a CREATE TABLE AS with the option "sync" is not supported/,
	'EXPLAIN ANALYZE refused');

# DROP TABLE of a synced table stops the sync with the DROP
$local->safe_psql('postgres', q{CREATE TABLE wh.public.small WITH (sync = 'continuous') AS SELECT id, customer FROM orders});
ok(wait_until(60, sub {
	$local->safe_psql('postgres', q{SELECT state FROM ctas_fed.syncs WHERE remote_table = 'small'}) eq 'streaming' }),
	'third sync streaming');
$local->safe_psql('postgres', 'BEGIN; DROP TABLE wh.public.small; ROLLBACK;');
is($local->safe_psql('postgres', q{SELECT state FROM ctas_fed.syncs WHERE remote_table = 'small'}),
	'streaming', 'DROP TABLE rolled back: the sync goes on');
$local->safe_psql('postgres', 'DROP TABLE wh.public.small');
is($local->safe_psql('postgres', q{SELECT state FROM ctas_fed.syncs WHERE remote_table = 'small'}),
	'stopped', 'DROP TABLE: sync stopped');
is(remote_has_table('small'), '0', 'DROP TABLE: remote table gone');
ok(wait_until(30, sub { our_slots() eq '0' }), 'DROP TABLE: slot dropped');
ok(wait_until(30, sub { $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_publication WHERE pubname LIKE 'ctas_fed_sync_%'") eq '0' }),
	'no publication of a stopped or failed sync left');

# the worker killed during the initial copy: the copy begins again with a
# new slot, and nothing of the first attempt shows; the remote logs its
# statements, to show the COPY's format
$remote->safe_psql('dw', q{ALTER ROLE loader SET log_statement = 'all'});
$local->safe_psql('postgres', q{
  CREATE TABLE big (id int PRIMARY KEY, v text);
  INSERT INTO big SELECT g, md5(g::text) FROM generate_series(1, 300000) g;
  CREATE TABLE wh.public.big WITH (sync = 'continuous') AS SELECT * FROM big;});
my $copier;
ok(wait_until(60, sub {
	# the only running sync; its slot exists once the copy has begun
	$copier = $local->safe_psql('postgres', q{
	  SELECT a.pid FROM pg_stat_activity a, ctas_fed.syncs s, pg_replication_slots r
	   WHERE a.backend_type = 'ctas_fed sync' AND s.remote_table = 'big'
	     AND s.state = 'copying' AND r.slot_name = s.slot_name});
	$copier ne '' }), 'copy of a big table in progress');
$local->safe_psql('postgres', "SELECT pg_terminate_backend($copier)");
$local->safe_psql('postgres', 'UPDATE big SET v = v || 1 WHERE id % 1000 = 0; DELETE FROM big WHERE id % 999 = 0');
ok(wait_until(120, sub {
	$local->safe_psql('postgres', q{SELECT state FROM ctas_fed.syncs WHERE remote_table = 'big'}) eq 'streaming' }),
	'killed during the copy: copied again, streaming');
$want = sql_digest($local, 'postgres', 'SELECT * FROM big');
ok(wait_until(60, sub { sql_digest($remote, 'dw', 'SELECT * FROM public.big') eq $want }),
	'killed during the copy: remote equals the source');
$remote->safe_psql('dw', q{ALTER ROLE loader RESET log_statement});
# the copy sent the rows in binary (int and text are the same types on both
# sides), and built the primary key once, in the transaction of its rows
like(slurp_file($remote->logfile), qr/COPY public\.big \(id, v\) FROM STDIN \(FORMAT binary\)/,
	'big: the initial copy is a binary COPY');
# Under load the whole first copy may commit on the remote before the
# kill lands: the copy again then finds the table with its key, and keeps
# it (the key was built once, with the first copy's rows).  Told apart by
# the remote's log: two copies, one ADD PRIMARY KEY.
my $remote_log = slurp_file($remote->logfile);
my $copies = () = $remote_log =~ /COPY public\.big \(id, v\) FROM STDIN/g;
my $keys_sent = () = $remote_log =~ /ALTER TABLE public\.big ADD PRIMARY KEY/g;
if ($copies >= 2 && $keys_sent == 1)
{
	note('the kill landed after the first copy had committed on the remote');
	is($remote->safe_psql('dw', q{
	  SELECT count(*) FROM pg_index WHERE indrelid = 'public.big'::regclass AND indisprimary}),
		'1', 'big: primary key built once, by the first copy, kept by the second');
}
else
{
	is($remote->safe_psql('dw', q{
	  SELECT count(*) > 0 FROM public.big
	   WHERE xmin = (SELECT xmin FROM pg_index WHERE indrelid = 'public.big'::regclass AND indisprimary)}),
		't', 'big: primary key built in the transaction of the copied rows');
}
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.big')");
ok(wait_until(30, sub { our_slots() eq '0' }), 'big: slot dropped after stop_sync');

# the commit of a sync CTAS wakes the resolver, which starts the worker; four
# in a row (how soon is measured by test/bench/sync.sh, not asserted here:
# timing belongs in benchmarks)
for my $i (1 .. 4)
{
	# from before the statement: the worker may start before the next one
	my $before = $local->safe_psql('postgres', 'SELECT clock_timestamp()');
	$local->safe_psql('postgres',
		"CREATE TABLE wh.public.quick$i WITH (sync = 'continuous') AS SELECT * FROM other");
	my $delay;
	ok(wait_until(30, sub {
		$delay = $local->safe_psql('postgres', qq{
		  SELECT extract(epoch FROM min(backend_start) - '$before')
		    FROM pg_stat_activity
		   WHERE backend_type = 'ctas_fed sync' AND backend_start > '$before'});
		$delay ne '' }), "quick$i: the sync worker started");
	note("quick$i: the worker started $delay s after the statement began");
	$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.quick$i')");
}
ok(wait_until(30, sub { our_slots() eq '0' }), 'quick: slots dropped after stop_sync');

# a non-superuser syncs a table of its own, through a user mapping with a
# password; the worker reads and evaluates as that user; another user may
# not stop the sync
$local->safe_psql('postgres', q{
  CREATE ROLE analyst LOGIN REPLICATION;
  GRANT CREATE ON DATABASE postgres TO analyst;
  GRANT CREATE ON SCHEMA public TO analyst;
  GRANT USAGE ON FOREIGN SERVER wh TO analyst;
  SET ROLE analyst;
  CREATE TABLE mine (id int PRIMARY KEY, v text);
  INSERT INTO mine SELECT g, 'v' || g FROM generate_series(1, 100) g;
  CREATE FUNCTION shout(text) RETURNS text IMMUTABLE LANGUAGE sql AS $$ SELECT upper($1) || '!' $$;
  CREATE TABLE wh.public.mine WITH (sync = 'continuous') AS SELECT id, shout(v) AS v FROM mine WHERE id % 2 = 0;
  RESET ROLE;});
ok(wait_until(60, sub { $local->safe_psql('postgres', q{
	  SELECT state FROM ctas_fed.syncs WHERE remote_table = 'mine'}) eq 'streaming' }),
	'non-superuser: sync streaming');
$local->safe_psql('postgres', q{SET ROLE analyst; UPDATE mine SET v = 'changed' WHERE id = 2; DELETE FROM mine WHERE id = 4;});
$want = sql_digest($local, 'postgres', 'SELECT id, upper(v) || \'!\' FROM mine WHERE id % 2 = 0');
ok(wait_until(60, sub { sql_digest($remote, 'dw', 'SELECT * FROM public.mine') eq $want }),
	'non-superuser: the remote follows, the owner\'s function applied');
like(sql_error(q{SET ROLE outsider; SELECT ctas_fed.stop_sync('wh.public.mine')}),
	qr/permission denied|must be a member of role "analyst"/, 'another user may not stop it');
$local->safe_psql('postgres', q{SET ROLE analyst; SELECT ctas_fed.stop_sync('wh.public.mine')});
ok(wait_until(30, sub { our_slots() eq '0' }), 'non-superuser: stopped, no slot');

# unchanged TOAST values: pgoutput does not send a large value that an
# UPDATE left alone; the remote keeps its own (test/t/530 tries the rest),
# and with REPLICA IDENTITY FULL the old row supplies the value
$local->safe_psql('postgres', q{
  CREATE TABLE docs (id int PRIMARY KEY, body text, n int);
  ALTER TABLE docs ALTER body SET STORAGE EXTERNAL;
  INSERT INTO docs VALUES (1, repeat('x', 100000), 0);
  CREATE TABLE docs_full (id int PRIMARY KEY, body text, n int);
  ALTER TABLE docs_full ALTER body SET STORAGE EXTERNAL;
  ALTER TABLE docs_full REPLICA IDENTITY FULL;
  INSERT INTO docs_full VALUES (1, repeat('y', 100000), 0);
  CREATE TABLE wh.public.docs WITH (sync = 'continuous') AS SELECT * FROM docs;
  CREATE TABLE wh.public.docs_full WITH (sync = 'continuous') AS SELECT * FROM docs_full;});
ok(wait_until(60, sub { $local->safe_psql('postgres', q{
	  SELECT count(*) FROM ctas_fed.syncs WHERE remote_table LIKE 'docs%' AND state = 'streaming'}) eq '2' }),
	'toast: both syncs streaming');
$local->safe_psql('postgres', 'UPDATE docs SET n = 1; UPDATE docs_full SET n = 1;');
ok(wait_until(60, sub { $remote->safe_psql('dw',
		'SELECT n || \' \' || length(body) FROM public.docs') eq '1 100000' }),
	'toast: without REPLICA IDENTITY FULL the update arrives, the large value kept');
ok(wait_until(60, sub { $remote->safe_psql('dw',
		'SELECT n || \' \' || length(body) FROM public.docs_full') eq '1 100000' }),
	'toast: with REPLICA IDENTITY FULL the update arrives, the large value intact');
$local->safe_psql('postgres', q{SELECT ctas_fed.stop_sync('wh.public.docs')});

# DROP of the source table fails the job, which releases its slot
$local->safe_psql('postgres', 'DROP TABLE docs_full');
ok(wait_until(60, sub { $local->safe_psql('postgres', q{
	  SELECT state FROM ctas_fed.syncs WHERE remote_table = 'docs_full'}) eq 'failed' }),
	'source dropped: job failed');
like($local->safe_psql('postgres', q{SELECT error FROM ctas_fed.syncs WHERE remote_table = 'docs_full'}),
	qr/the source table of sync \d+ was dropped/, 'source dropped: the error says so');
ok(wait_until(30, sub { our_slots() eq '0' }), 'toast, source dropped: no slot left');

# the local server crashes mid-stream while the source changes: after the
# restart the job resumes by itself, from what the remote stored
$local->safe_psql('postgres', q{
  UPDATE churn_ctl SET stop = false;
  CREATE TABLE wh.public.crashed WITH (sync = 'continuous') AS SELECT * FROM orders WHERE region = 'eu';});
ok(wait_until(60, sub {
	$local->safe_psql('postgres', q{SELECT state FROM ctas_fed.syncs WHERE remote_table = 'crashed'}) eq 'streaming' }),
	'crash: sync streaming');
($churn) = start_psql($local, 'CALL churn()');
$lsn = $local->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
ok(wait_until(60, sub {
	$remote->safe_psql('dw', qq{
	  SELECT count(*) FROM public._ctas_fed_sync_progress WHERE lsn > '$lsn'}) ne '0' }),
	'crash: changes being applied');
$local->stop('immediate');
$churn->finish;
$local->start;
$local->safe_psql('postgres', 'UPDATE orders SET status = status || \'!\' WHERE id % 10 = 0');
my $crash_query = q{SELECT * FROM orders WHERE region = 'eu'};
$want = sql_digest($local, 'postgres', $crash_query);
ok(wait_until(90, sub { sql_digest($remote, 'dw', 'SELECT * FROM public.crashed') eq $want }),
	'crash: the job resumed after the restart and the remote equals the query');
is($local->safe_psql('postgres', q{
	  SELECT state FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'public.crashed'}),
	'streaming', 'crash: the job is in the jobs view after the restart');
like(sql_error('DROP EXTENSION ctas_fed CASCADE'),
	qr/continuous sync into "wh.public.crashed" is streaming.*\n.*HINT:  Stop it with ctas_fed.stop_sync\(\)/s,
	'DROP EXTENSION refused while a sync runs');
like(sql_error('DROP SERVER wh CASCADE'),
	qr/continuous sync into "wh.public.crashed" is streaming/,
	'DROP SERVER refused while a sync runs into it');
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.crashed')");
ok(wait_until(30, sub { our_slots() eq '0' }), 'crash: slot dropped after stop_sync');

# no background worker free for the sync worker: the job says what to set
my $tight = new_cluster('tight',
	conf => "wal_level = logical\nmax_worker_processes = 4");
$tight->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE TABLE t (id int PRIMARY KEY);
CREATE TABLE wh.public.tight WITH (sync = 'continuous') AS SELECT * FROM t;});
ok(wait_until(60, sub { $tight->safe_psql('postgres', q{
	  SELECT error FROM ctas_fed.jobs WHERE mode = 'sync'}) =~ /increase max_worker_processes/ }),
	'no free background worker: the job says to increase max_worker_processes');
$tight->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.tight')");
is($tight->safe_psql('postgres', 'SELECT count(*) FROM pg_replication_slots'), '0',
	'no free background worker: no slot');
$tight->stop;

is(our_slots(), '0', 'no replication slot of ours left');
$local->safe_psql('postgres', 'DROP EXTENSION ctas_fed CASCADE');
is(our_slots(), '0', 'DROP EXTENSION once every sync is stopped: no slot');

done_testing();
