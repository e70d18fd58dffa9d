
# Copyright (c) 2026, ctas_fed developers

# WITH (parallel = N) into ClickHouse and PostgreSQL: the exact content (a fingerprint of
# every row, NULLs and hostile values included) at N = 2 and 4; EXPLAIN
# shows the workers and the block ranges; fewer (or no) free workers give
# a NOTICE and the same content; a query that cannot be split loads
# serially after one NOTICE; ROLLBACK, an error in one worker (a value
# ClickHouse refuses, in the last block), cancel and a crash of the leader
# mid-load leave nothing: no table, no staging table, no query in
# ClickHouse, no parallel worker in pg_stat_activity.  PostgreSQL: the same
# content checks, primary key and append, and ROLLBACK, an error in one
# worker, a savepoint rolled back and a crash after PREPARE leave no table,
# no scratch table and no prepared transaction once the resolver ran.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use CtasFed::Test;

my $ch = start_clickhouse();
# the worker's own resolver would race the assertions on leftovers
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600
max_worker_processes = 16
max_parallel_workers = 8');
clickhouse_catalog($local, $ch);

my $source_sql = q{
CREATE SCHEMA src;
CREATE TABLE src.big (id int, label text, n int8, f float8, d date,
  flag bool);
INSERT INTO src.big
SELECT g,
       CASE g % 13
         WHEN 0 THEN NULL WHEN 1 THEN '' WHEN 2 THEN E'tab\\there'
         WHEN 3 THEN E'new\\nline' WHEN 4 THEN E'back\\\\slash' WHEN 5 THEN '\\N'
         WHEN 6 THEN 'quote''s "dq" `bq`' WHEN 7 THEN 'ünïcødé 日本語 😀'
         WHEN 8 THEN E'cr\\rlf\\n' WHEN 9 THEN E'\\x01ctl\\x1f' WHEN 10 THEN ' pad '
         WHEN 11 THEN repeat('long ', 50) ELSE 'plain ' || g END,
       CASE WHEN g % 7 = 0 THEN NULL ELSE g::int8 * 1000000007 END,
       CASE WHEN g % 11 = 0 THEN NULL ELSE g * 0.25 END,
       CASE WHEN g % 10 = 0 THEN NULL ELSE date '2000-01-01' + g % 9000 END,
       CASE WHEN g % 5 = 0 THEN NULL ELSE g % 2 = 0 END
  FROM generate_series(1, 60000) g;
-- rows moved by an UPDATE: still one row each, wherever they now lie
UPDATE src.big SET n = -n WHERE id % 97 = 0;
DELETE FROM src.big WHERE id % 101 = 0;
ANALYZE src.big;
-- immutable and parallel safe as declared, slow as run: keeps a load busy
CREATE FUNCTION src.slow(x int) RETURNS int IMMUTABLE PARALLEL SAFE
  LANGUAGE plpgsql AS $$BEGIN PERFORM pg_sleep(0.002); RETURN x; END$$;
};
$local->safe_psql('postgres', $source_sql);

my $blocks = $local->safe_psql('postgres',
	q{SELECT pg_relation_size('src.big') / 8192});
cmp_ok($blocks, '>', 64, "the source spans many blocks ($blocks)");

# the rows, rendered the same way by both sides (strings as md5)
my $pg_fp = q{SELECT id, md5(label), n, f, d, flag::int FROM src.big};
sub ch_fp
{
	my ($table) = @_;
	return "SELECT id, lower(hex(MD5(label))), n, f, d, flag FROM $table";
}

sub ch_rows
{
	my ($select) = @_;
	my @rows = grep { $_ ne '' } split /\n/,
	  $ch->query("$select FORMAT TabSeparated");
	@rows = sort @rows;
	return scalar(@rows) . ':' . Digest::MD5::md5_hex(join("\n", @rows));
}

my $expect = sql_digest($local, 'postgres', $pg_fp);
my $nrows = $local->safe_psql('postgres', 'SELECT count(*) FROM src.big');

# INSERTs of ours running in ClickHouse
sub ch_inserts
{
	return $ch->query(q{SELECT count() FROM system.processes
	                     WHERE startsWith(query_id, 'ctas_fed_')
	                       AND query LIKE 'INSERT INTO %_ctas_fed_stage%'}) + 0;
}

sub parallel_workers
{
	return $local->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity
		   WHERE backend_type = 'parallel worker'});
}

# --- EXPLAIN: the workers and the block ranges, no remote work
my $plan = $local->safe_psql('postgres', q{
EXPLAIN (COSTS OFF) CREATE TABLE lake.dw.p_explain WITH (parallel = 2) AS
  SELECT * FROM src.big;});
like($plan, qr/Parallel: 2 workers, \d+ chunks of \d+ blocks/,
	'EXPLAIN shows the workers');
like($plan, qr/Block Ranges: \[0,\d+\) .*,end\)/,
	'EXPLAIN shows the block ranges, the last one open');
$plan = $local->safe_psql('postgres', q{
EXPLAIN (COSTS OFF) CREATE TABLE lake.dw.p_explain WITH (parallel = 2) AS
  SELECT * FROM src.big ORDER BY id;});
like($plan, qr/Parallel: no: the query has ORDER BY/,
	'EXPLAIN says why a query is not split');
is($ch->query('EXISTS TABLE dw.p_explain') + 0, 0, 'EXPLAIN made no table');
$plan = $local->safe_psql('postgres', q{
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  CREATE TABLE lake.dw.p_analyze WITH (parallel = 2) AS SELECT * FROM src.big;});
like($plan, qr/Parallel: no: EXPLAIN ANALYZE loads serially/,
	'EXPLAIN ANALYZE says it loads serially');
is(ch_rows(ch_fp('dw.p_analyze')), $expect, 'EXPLAIN ANALYZE loads every row');

# --- exact content at N = 2 and 4
foreach my $n (2, 4)
{
	my ($ret, $out, $err) = $local->psql('postgres', qq{
CREATE TABLE lake.dw.p$n WITH (parallel = $n) AS
  SELECT * FROM src.big WHERE id > 0;
SELECT rows, bytes > 0 FROM ctas_fed.jobs WHERE target = 'dw.p$n';});
	is($ret, 0, "parallel = $n loads") or diag $err;
	unlike($err, qr/NOTICE:  /, "parallel = $n: no NOTICE (split as asked)");
	is($out, "$nrows|t", "parallel = $n: the job counts every row");
	is(ch_rows(ch_fp("dw.p$n")), $expect,
		"parallel = $n: every row arrives exactly");
}

# a projection and a filter are split too
my ($ret, $out, $err) = $local->psql('postgres', q{
CREATE TABLE lake.dw.p_filter WITH (parallel = 3) AS
  SELECT id, upper(label) AS label FROM src.big WHERE id % 3 = 0;});
is($ret, 0, 'a projection and a filter load in parallel') or diag $err;
unlike($err, qr/serially/, 'a projection and a filter are split');
is(ch_rows('SELECT id, lower(hex(MD5(label))) FROM dw.p_filter'),
	sql_digest($local, 'postgres',
		'SELECT id, md5(upper(label)) FROM src.big WHERE id % 3 = 0'),
	'a projection and a filter: every row exactly');

# create_tables_as takes the option too
$ch->query('CREATE DATABASE IF NOT EXISTS dw2');
($ret, $out, $err) = $local->psql('postgres', q{
SELECT target, rows FROM ctas_fed.create_tables_as('lake', 'dw2',
  ARRAY['src.big']::regclass[], options => '{"parallel": 2}');});
is($ret, 0, 'create_tables_as with parallel = 2') or diag $err;
unlike($err, qr/NOTICE/, 'create_tables_as: split as asked');
is($out, "dw2.big|$nrows", 'create_tables_as: the rows');
is(ch_rows(ch_fp('dw2.big')), $expect, 'create_tables_as: every row exactly');

# --- fewer workers than asked, and none
($ret, $out, $err) = $local->psql('postgres', q{
SET max_parallel_workers = 1;
CREATE TABLE lake.dw.p_fewer WITH (parallel = 4) AS SELECT * FROM src.big;});
is($ret, 0, 'fewer free workers: no failure') or diag $err;
like($err, qr/NOTICE:  loading lake\.dw\.p_fewer with 1 parallel workers instead of 4/,
	'fewer free workers: a NOTICE says how many');
is(ch_rows(ch_fp('dw.p_fewer')), $expect, 'fewer free workers: every row');

($ret, $out, $err) = $local->psql('postgres', q{
SET max_parallel_workers = 0;
CREATE TABLE lake.dw.p_none WITH (parallel = 2) AS SELECT * FROM src.big;});
is($ret, 0, 'no free worker: no failure') or diag $err;
like($err, qr/NOTICE:  loading lake\.dw\.p_none in the leader: no parallel worker could be started/,
	'no free worker: a NOTICE says the leader loads');
is(ch_rows(ch_fp('dw.p_none')), $expect, 'no free worker: every row');

# --- not splittable: serial, one NOTICE saying why
($ret, $out, $err) = $local->psql('postgres', q{
CREATE TABLE lake.dw.p_serial WITH (parallel = 2) AS
  SELECT * FROM src.big ORDER BY id LIMIT 1000000;});
is($ret, 0, 'a query that cannot be split loads') or diag $err;
my @notices = ($err =~ /NOTICE/g);
is(scalar(@notices), 1, 'a query that cannot be split: one NOTICE');
like($err, qr/NOTICE:  loading lake\.dw\.p_serial serially: the query has ORDER BY/,
	'the NOTICE says why');
is(ch_rows(ch_fp('dw.p_serial')), $expect,
	'a query that cannot be split: every row');

# --- ROLLBACK leaves nothing
($ret, $out, $err) = $local->psql('postgres', q{
BEGIN;
CREATE TABLE lake.dw.p_rollback WITH (parallel = 2) AS SELECT * FROM src.big;
ROLLBACK;});
is($ret, 0, 'a parallel load, rolled back') or diag $err;
check_invariant(
	node => $local,
	name => 'rollback',
	targets => [ { ch => $ch, table => 'dw.p_rollback' } ],
	jobs => [ [ 'lake', 'dw.p_rollback', 'aborted' ] ]);
is(parallel_workers(), 0, 'rollback: no parallel worker left');

# --- an error in one worker: a date ClickHouse cannot hold, in the last
# block
$local->safe_psql('postgres', q{
CREATE TABLE src.bad AS SELECT * FROM src.big;
INSERT INTO src.bad (id, d) VALUES (1000000, date '2200-01-01');});
($ret, $out, $err) = $local->psql('postgres', q{
CREATE TABLE lake.dw.p_bad WITH (parallel = 2) AS SELECT * FROM src.bad;});
isnt($ret, 0, 'a value ClickHouse refuses fails the load');
like($err, qr/ERROR:.*2200-01-01/, 'the error names the value');
like($err, qr/parallel load into lake\.dw\.p_bad, blocks \d+ to the end/,
	'the error has the context of the worker and its blocks');
like($err, qr/parallel worker/, 'the error says it came from a parallel worker');
check_invariant(
	node => $local,
	name => 'error in a worker',
	targets => [ { ch => $ch, table => 'dw.p_bad' } ],
	jobs => [ [ 'lake', 'dw.p_bad', 'failed' ] ]);
is(parallel_workers(), 0, 'error in a worker: no parallel worker left');

# a failing parallel load and a savepoint rolled back, in a transaction
# that goes on and commits another table
($ret, $out, $err) = $local->psql('postgres', q{
BEGIN;
SAVEPOINT a;
CREATE TABLE lake.dw.p_sp_bad WITH (parallel = 2) AS SELECT * FROM src.bad;
ROLLBACK TO SAVEPOINT a;
SAVEPOINT b;
CREATE TABLE lake.dw.p_sp_gone WITH (parallel = 2) AS SELECT * FROM src.big;
ROLLBACK TO SAVEPOINT b;
CREATE TABLE lake.dw.p_sp_kept WITH (parallel = 2) AS SELECT * FROM src.big;
COMMIT;}, on_error_stop => 0);
like($err, qr/ERROR:.*2200-01-01/, 'savepoints: the failing load fails');
is(ch_rows(ch_fp('dw.p_sp_kept')), $expect,
	'savepoints: the transaction goes on and commits a parallel load');
check_invariant(
	node => $local,
	name => 'savepoints',
	targets => [ { ch => $ch, table => 'dw.p_sp_bad' },
		{ ch => $ch, table => 'dw.p_sp_gone' } ]);

# --- cancel while the workers load
my ($h, $stdout, $stderr) = start_psql_timed($local, q{
SET ctas_fed.progress = on; SET ctas_fed.progress_interval = 1;
CREATE TABLE lake.dw.p_cancel WITH (parallel = 2) AS
  SELECT src.slow(id) AS id, repeat(coalesce(label, 'x'), 300) AS label
    FROM src.big;});
ok(wait_until(60, sub { parallel_workers() == 2 }),
	'cancel: two parallel workers are loading');
ok(wait_until(60, sub {
	ch_inserts() >= 2 }),
	'cancel: each worker has its INSERT running in ClickHouse');
my $moving = wait_until(60, sub {
	$local->safe_psql('postgres',
		q{SELECT rows > 0 AND bytes > 0 FROM ctas_fed.jobs
		   WHERE target = 'dw.p_cancel' AND state = 'running'}) eq 't' });
ok($moving, 'cancel: the job shows the rows of the workers as they go');
my $leader = $local->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity
	   WHERE backend_type = 'client backend' AND query LIKE '%p_cancel%'
	     AND pid <> pg_backend_pid()});
$local->safe_psql('postgres', "SELECT pg_cancel_backend($leader)");
$h->finish;
like($$stderr, qr/canceling statement due to user request/,
	'cancel: the statement is cancelled');
like($$stderr,
	qr/NOTICE:  loading into lake\.dw\.p_cancel with 2 parallel workers: \d+ rows, \d+ bytes/,
	'cancel: progress NOTICEs covered all workers');
check_invariant(
	node => $local,
	name => 'cancel',
	targets => [ { ch => $ch, table => 'dw.p_cancel' } ],
	jobs => [ [ 'lake', 'dw.p_cancel', 'failed' ] ]);
is(parallel_workers(), 0, 'cancel: no parallel worker left');

# --- the leader crashes mid-load (the whole cluster, as the test clusters
# do not restart after a crash): the resolver drops the staging table
($h, $stdout, $stderr) = start_psql_timed($local, q{
CREATE TABLE lake.dw.p_crash WITH (parallel = 2) AS
  SELECT src.slow(id) AS id, repeat(coalesce(label, 'x'), 300) AS label
    FROM src.big;});
ok(wait_until(60, sub {
	ch_inserts() >= 2 }),
	'crash: the workers are loading');
ok(wait_until(60, sub {
	$ch->query(q{SELECT count() FROM system.tables
	              WHERE startsWith(name, '_ctas_fed_stage')}) + 0 >= 1 }),
	'crash: the staging table exists');
$local->stop('immediate');
$h->finish;
$local->start;
check_invariant(
	node => $local,
	name => 'leader crash',
	resolve => 1,
	targets => [ { ch => $ch, table => 'dw.p_crash' } ]);
is(parallel_workers(), 0, 'crash: no parallel worker left');

# --- PostgreSQL catalogs: workers COPY into a scratch table that the
# remote transaction takes at end_load
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
postgres_catalog($local, $remote);

# ctas_fed's tables left on the remote (scratch tables of parallel loads)
sub pg_scratch
{
	return $remote->safe_psql('dw',
		q{SELECT string_agg(relname, ',') FROM pg_class
		   WHERE starts_with(relname, '_ctas_fed_')});
}

# the prepared transactions of the local cluster on the remote
my $sysid = $local->safe_psql('postgres',
	'SELECT system_identifier FROM pg_control_system()');
sub pg_prepared
{
	return $remote->safe_psql('dw',
		qq{SELECT string_agg(gid, ',' ORDER BY gid) FROM pg_prepared_xacts
		    WHERE starts_with(gid, 'ctas_fed_${sysid}_')});
}

# a psql session of its own running $sql, and the log offset before it
sub start_session
{
	my ($sql) = @_;
	my ($in, $o, $e) = ($sql, '', '');
	my $offset = -s $local->logfile;
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $local->connstr('postgres') ],
		'<', \$in, '>', \$o, '2>', \$e, IPC::Run::timeout(180));
	$h->pump while $h->pumpable && $in ne '';
	return ($h, \$e, $offset);
}

# pid and top-level xid of the session running the statement that has $tag
sub leader_of
{
	my ($tag) = @_;
	return split /\|/, $local->safe_psql('postgres', qq{
SELECT pid, backend_xid FROM pg_stat_activity
 WHERE backend_type = 'client backend' AND query LIKE '%$tag%'
   AND pid <> pg_backend_pid()});
}

# the gids of the workers of the leader's transaction $xid, as prepared
sub worker_gids
{
	my ($xid) = @_;
	return scalar(grep { /^ctas_fed_${sysid}_${xid}_1_\d+_[12]$/ }
		  split(/,/, pg_prepared()));
}

foreach my $n (2, 4)
{
	($ret, $out, $err) = $local->psql('postgres', qq{
CREATE TABLE wh.public.p$n WITH (parallel = $n, primary_key = 'id') AS
  SELECT * FROM src.big;
SELECT rows FROM ctas_fed.jobs WHERE catalog = 'wh' AND target = 'public.p$n';});
	is($ret, 0, "PostgreSQL, parallel = $n loads") or diag $err;
	unlike($err, qr/NOTICE/, "PostgreSQL, parallel = $n: split as asked");
	is($out, $nrows, "PostgreSQL, parallel = $n: the job counts every row");
	is(sql_digest($remote, 'dw',
			"SELECT id, md5(label), n, f, d, flag::int FROM public.p$n"),
		$expect, "PostgreSQL, parallel = $n: every row arrives exactly");
	is($remote->safe_psql('dw', qq{
SELECT pg_get_constraintdef(oid) FROM pg_constraint
 WHERE conrelid = 'public.p$n'::regclass AND contype = 'p'}),
		'PRIMARY KEY (id)', "PostgreSQL, parallel = $n: the primary key");
	is(pg_scratch(), '', "PostgreSQL, parallel = $n: no scratch table left");
}

($ret, $out, $err) = $local->psql('postgres', q{
CREATE TABLE wh.public.p_append AS SELECT * FROM src.big;
CREATE TABLE wh.public.p_append WITH (parallel = 2, if_exists = 'append') AS
  SELECT * FROM src.big;});
is($ret, 0, 'PostgreSQL, parallel append') or diag $err;
is($remote->safe_psql('dw', 'SELECT count(*), count(DISTINCT id) FROM public.p_append'),
	2 * $nrows . "|$nrows", 'PostgreSQL, parallel append: the rows twice');
is(pg_scratch(), '', 'PostgreSQL, parallel append: no scratch table left');

# the remote user's default isolation is REPEATABLE READ: the append's
# INSERT ... SELECT must still see the rows the workers committed after the
# remote transaction began (it runs READ COMMITTED whatever the default)
$remote->safe_psql('dw', q{ALTER ROLE loader SET default_transaction_isolation = 'repeatable read'});
($ret, $out, $err) = $local->psql('postgres', q{
CREATE TABLE wh.public.p_append_rr AS SELECT * FROM src.big;
CREATE TABLE wh.public.p_append_rr WITH (parallel = 2, if_exists = 'append') AS
  SELECT * FROM src.big;});
is($ret, 0, 'PostgreSQL, parallel append under REPEATABLE READ by default') or diag $err;
is($remote->safe_psql('dw', 'SELECT count(*), count(DISTINCT id) FROM public.p_append_rr'),
	2 * $nrows . "|$nrows", 'PostgreSQL, parallel append under REPEATABLE READ: the rows twice');
is(pg_scratch(), '', 'PostgreSQL, parallel append under REPEATABLE READ: no scratch table left');
$remote->safe_psql('dw', q{ALTER ROLE loader RESET default_transaction_isolation});

($ret, $out, $err) = $local->psql('postgres', q{
CREATE TABLE wh.public.p2 WITH (parallel = 2, if_exists = 'replace') AS
  SELECT * FROM src.big;});
is($ret, 0, 'PostgreSQL, parallel replace') or diag $err;
is(sql_digest($remote, 'dw',
		'SELECT id, md5(label), n, f, d, flag::int FROM public.p2'),
	$expect, 'PostgreSQL, parallel replace: exactly the new rows');

# rollback, and a savepoint rolled back in a transaction that commits
($ret, $out, $err) = $local->psql('postgres', q{
BEGIN;
CREATE TABLE wh.public.p_rollback WITH (parallel = 2) AS SELECT * FROM src.big;
ROLLBACK;
BEGIN;
SAVEPOINT a;
CREATE TABLE wh.public.p_savepoint WITH (parallel = 2) AS SELECT * FROM src.big;
ROLLBACK TO SAVEPOINT a;
CREATE TABLE wh.public.p_kept AS SELECT 1 AS one;
COMMIT;});
is($ret, 0, 'PostgreSQL: parallel loads rolled back') or diag $err;
check_invariant(
	node => $local,
	name => 'PostgreSQL rollback',
	targets => [
		{ pg => $remote, dbname => 'dw', table => 'public.p_rollback' },
		{ pg => $remote, dbname => 'dw', table => 'public.p_savepoint' } ]);
is(pg_scratch(), '', 'PostgreSQL rollback: no scratch table left');

# a value the remote refuses, in the last block
$local->safe_psql('postgres', q{
CREATE TABLE src.bad_pg AS SELECT id, 'ok' AS v FROM src.big;
INSERT INTO src.bad_pg VALUES (1000000, 'far too long');});
($ret, $out, $err) = $local->psql('postgres', q{
CREATE TABLE wh.public.p_bad WITH (parallel = 2, column_types = 'v varchar(5)') AS
  SELECT * FROM src.bad_pg;});
isnt($ret, 0, 'PostgreSQL: a value the remote refuses fails the load');
like($err, qr/value too long for type character varying\(5\)/,
	'PostgreSQL: the remote error');
like($err, qr/parallel load into wh\.public\.p_bad, (blocks \d+ to the end|end of a worker's stream)/,
	'PostgreSQL: the context of the worker');
is(pg_prepared(), '',
	'PostgreSQL error in a worker: no prepared transaction, without the resolver');
check_invariant(
	node => $local,
	name => 'PostgreSQL error in a worker',
	targets => [ { pg => $remote, dbname => 'dw', table => 'public.p_bad' } ],
	jobs => [ [ 'wh', 'public.p_bad', 'failed' ] ]);
is(pg_scratch(), '', 'PostgreSQL error in a worker: no scratch table left');
is(parallel_workers(), 0, 'PostgreSQL error in a worker: no worker left');

# rows lost on the way: a remote event trigger gives every scratch table a
# trigger that skips some rows, so that each worker's COPY stores fewer rows
# than it sent.  The load's only row check is the workers' (each compares
# what its COPY stored with what it sent, the leader no longer counts the
# scratch table): it must fail the statement and leave nothing.
$remote->safe_psql('dw', q{
CREATE FUNCTION public.lose_rows() RETURNS trigger LANGUAGE plpgsql AS
  $$BEGIN IF NEW.id % 1000 = 7 THEN RETURN NULL; END IF; RETURN NEW; END$$;
CREATE FUNCTION public.add_lose_rows() RETURNS event_trigger
  LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN SELECT * FROM pg_event_trigger_ddl_commands()
            WHERE command_tag = 'CREATE TABLE'
              AND object_identity LIKE '%._ctas_fed_par%' LOOP
    EXECUTE format('CREATE TRIGGER lose_rows BEFORE INSERT ON %s '
                   'FOR EACH ROW EXECUTE FUNCTION public.lose_rows()',
                   r.object_identity);
  END LOOP;
END$$;
CREATE EVENT TRIGGER add_lose_rows ON ddl_command_end
  WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION public.add_lose_rows();});
($ret, $out, $err) = $local->psql('postgres', q{
CREATE TABLE wh.public.p_lost WITH (parallel = 2) AS SELECT * FROM src.big;});
isnt($ret, 0, 'PostgreSQL: rows a remote trigger skipped fail the load');
like($err, qr/catalog "wh" received \d+ rows, but \d+ were sent/,
	'PostgreSQL rows lost: the worker says how many rows the remote stored');
like($err, qr/parallel load into wh\.public\.p_lost, end of a worker's stream/,
	'PostgreSQL rows lost: the context of the worker');
$remote->safe_psql('dw', q{
DROP EVENT TRIGGER add_lose_rows;
DROP FUNCTION public.add_lose_rows(), public.lose_rows();});
is(pg_prepared(), '', 'PostgreSQL rows lost: no prepared transaction');
check_invariant(
	node => $local,
	name => 'PostgreSQL rows lost',
	targets => [ { pg => $remote, dbname => 'dw', table => 'public.p_lost' } ],
	jobs => [ [ 'wh', 'public.p_lost', 'failed' ] ]);
is(pg_scratch(), '', 'PostgreSQL rows lost: no scratch table left');

# statement_timeout while the workers load
($ret, $out, $err) = $local->psql('postgres', q{
SET statement_timeout = '3s';
CREATE TABLE wh.public.p_timeout WITH (parallel = 2) AS
  SELECT src.slow(id) AS id, label FROM src.big;});
like($err, qr/canceling statement due to statement timeout/,
	'PostgreSQL: statement_timeout stops a parallel load');
check_invariant(
	node => $local,
	name => 'PostgreSQL statement_timeout',
	targets => [ { pg => $remote, dbname => 'dw', table => 'public.p_timeout' } ],
	jobs => [ [ 'wh', 'public.p_timeout', 'failed' ] ]);
ok(wait_until(30, sub { pg_scratch() eq '' }),
	'PostgreSQL statement_timeout: no scratch table left');
is(parallel_workers(), 0, 'PostgreSQL statement_timeout: no worker left');

# the leader crashes mid-load, before PREPARE: the remote transaction dies
# with its connection, the resolver drops the committed scratch table
($h, $stdout, $stderr) = start_psql_timed($local, q{
CREATE TABLE wh.public.p_midcrash WITH (parallel = 2) AS
  SELECT src.slow(id) AS id, label FROM src.big;});
ok(wait_until(60, sub { pg_scratch() ne '' && parallel_workers() == 2 }),
	'PostgreSQL crash mid-load: the workers load the scratch table');
$local->stop('immediate');
$h->finish;
$local->start;
check_invariant(
	node => $local,
	name => 'PostgreSQL crash mid-load',
	resolve => 1,
	targets => [ { pg => $remote, dbname => 'dw', table => 'public.p_midcrash' } ]);
ok(wait_until(30, sub {
	$local->psql('postgres', 'SELECT * FROM ctas_fed.resolve_in_doubt()');
	pg_scratch() eq '' }),
	'PostgreSQL crash mid-load: the resolver drops the scratch table');

# the leader crashes after PREPARE: the resolver rolls back, then drops
# the scratch table the rollback gave back
{
	my ($in, $o, $e) = ('', '', '');
	my $offset = -s $local->logfile;
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $local->connstr('postgres') ],
		'<', \$in, '>', \$o, '2>', \$e, IPC::Run::timeout(120));
	$in .= "SET ctas_fed.fault_point = 'after_prepare';\nBEGIN;\n"
	  . "CREATE TABLE wh.public.p_crash WITH (parallel = 2) AS SELECT * FROM src.big;\n"
	  . "COMMIT;\n";
	$h->pump while $h->pumpable && $in ne '';
	$local->wait_for_log(qr/stopped at fault point "after_prepare"/, $offset);
	is($remote->safe_psql('dw',
			q{SELECT count(*) FROM pg_prepared_xacts WHERE starts_with(gid, 'ctas_fed_')}),
		'1', 'PostgreSQL crash: the remote transaction is prepared');
	$local->stop('immediate');
	$h->finish;
	$local->start;
}
check_invariant(
	node => $local,
	name => 'PostgreSQL crash after PREPARE',
	resolve => 1,
	targets => [ { pg => $remote, dbname => 'dw', table => 'public.p_crash' } ]);
ok(wait_until(30, sub {
	$local->psql('postgres', 'SELECT * FROM ctas_fed.resolve_in_doubt()');
	pg_scratch() eq '' }),
	'PostgreSQL crash after PREPARE: the resolver drops the scratch table');
is(parallel_workers(), 0, 'PostgreSQL crash: no parallel worker left');

# the leader stops after every stream ended: each worker's remote
# transaction is prepared under a gid of the leader's transaction; a cancel
# there, then ROLLBACK, rolls them back at once and leaves nothing
{
	my ($h, $e, $offset) = start_session(
		"SET ctas_fed.fault_point = 'after_workers:8';\nBEGIN;\n"
		  . "CREATE TABLE wh.public.p_paused WITH (parallel = 2) AS SELECT * FROM src.big;\n"
		  . "ROLLBACK;\n");
	$local->wait_for_log(qr/stopped at fault point "after_workers"/, $offset);
	my ($pid, $xid) = leader_of('p_paused');
	my $gids = pg_prepared();
	is(scalar(split /,/, $gids), 2,
		'PostgreSQL after the workers: one prepared transaction per worker')
	  or diag $gids;
	is(worker_gids($xid), 2,
		"PostgreSQL after the workers: each under a gid of the leader's transaction")
	  or diag "xid $xid: $gids";
	$local->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	$h->finish;
	like($$e, qr/canceling statement due to user request/,
		'PostgreSQL after the workers: the statement is cancelled');
	is(pg_prepared(), '',
		'PostgreSQL cancel and ROLLBACK after the workers: no prepared transaction, without the resolver');
	is(pg_scratch(), '',
		'PostgreSQL cancel and ROLLBACK after the workers: no scratch table');
	check_invariant(
		node => $local,
		name => 'PostgreSQL cancel after the workers',
		targets => [ { pg => $remote, dbname => 'dw', table => 'public.p_paused' } ]);
}

# the same in a savepoint rolled back, in a transaction that commits: the
# rollback of the savepoint rolls the workers back, not the resolver
{
	my ($h, $e, $offset) = start_session(
		"SET ctas_fed.fault_point = 'after_workers:8';\nBEGIN;\nSAVEPOINT a;\n"
		  . "CREATE TABLE wh.public.p_sp_paused WITH (parallel = 2) AS SELECT * FROM src.big;\n"
		  . "ROLLBACK TO SAVEPOINT a;\nRESET ctas_fed.fault_point;\n"
		  . "CREATE TABLE wh.public.p_sp_after AS SELECT 1 AS one;\nCOMMIT;\n");
	$local->wait_for_log(qr/stopped at fault point "after_workers"/, $offset);
	my ($pid, $xid) = leader_of('p_sp_paused');
	is(worker_gids($xid), 2,
		'PostgreSQL savepoint after the workers: their transactions are prepared');
	$local->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	$h->finish;
	like($$e, qr/canceling statement due to user request/,
		'PostgreSQL savepoint after the workers: the statement is cancelled');
	unlike($$e, qr/WARNING/, 'PostgreSQL savepoint after the workers: no WARNING')
	  or diag $$e;
	is($remote->safe_psql('dw', 'SELECT one FROM public.p_sp_after'), '1',
		'PostgreSQL savepoint after the workers: the transaction commits');
	is(pg_prepared(), '',
		'PostgreSQL savepoint after the workers: no prepared transaction, without the resolver');
	is(pg_scratch(), '',
		'PostgreSQL savepoint after the workers: no scratch table');
	is(pg_digest($remote, 'dw', 'public.p_sp_paused'), 'absent',
		'PostgreSQL savepoint after the workers: no table');
}

# the leader crashes after the workers PREPAREd: the resolver rolls their
# transactions back, then drops the scratch table
{
	my ($h, $e, $offset) = start_session(
		"SET ctas_fed.fault_point = 'after_workers';\n"
		  . "CREATE TABLE wh.public.p_wcrash WITH (parallel = 2) AS SELECT * FROM src.big;\n");
	$local->wait_for_log(qr/stopped at fault point "after_workers"/, $offset);
	my ($pid, $xid) = leader_of('p_wcrash');
	is(worker_gids($xid), 2,
		'PostgreSQL crash after the workers: their transactions are prepared');
	$local->stop('immediate');
	$h->finish;
	$local->start;
}
check_invariant(
	node => $local,
	name => 'PostgreSQL crash after the workers',
	resolve => 1,
	targets => [ { pg => $remote, dbname => 'dw', table => 'public.p_wcrash' } ]);
ok(wait_until(30, sub {
	$local->psql('postgres', 'SELECT * FROM ctas_fed.resolve_in_doubt()');
	pg_scratch() eq '' }),
	'PostgreSQL crash after the workers: the resolver drops the scratch table');

# the leader crashes after the local commit: the resolver commits the
# remote transaction, and the table has every row
{
	my ($h, $e, $offset) = start_session(
		"SET ctas_fed.fault_point = 'after_commit_record';\n"
		  . "CREATE TABLE wh.public.p_ccrash WITH (parallel = 2) AS SELECT * FROM src.big;\n");
	$local->wait_for_log(qr/stopped at fault point "after_commit_record"/,
		$offset);
	is(scalar(split /,/, pg_prepared()), 1,
		'PostgreSQL crash after the commit: only the leader\'s transaction is prepared');
	$local->stop('immediate');
	$h->finish;
	$local->start;
}
check_invariant(
	node => $local,
	name => 'PostgreSQL crash after the commit',
	resolve => 1,
	committed => 1,
	targets => [ { pg => $remote, dbname => 'dw', table => 'public.p_ccrash',
		expect => pg_digest($local, 'postgres', 'src.big') } ]);
is(sql_digest($remote, 'dw',
		'SELECT id, md5(label), n, f, d, flag::int FROM public.p_ccrash'),
	$expect, 'PostgreSQL crash after the commit: every row exactly');
is(pg_scratch(), '', 'PostgreSQL crash after the commit: no scratch table');

# max_worker_processes exhausted, not max_parallel_workers: a cluster with
# one slot of five left once its own background workers run (the logical
# replication launcher, ctas_fed's launcher and notifier, the resolver of
# the database) loads with one worker, after a NOTICE, every row
my $small = new_cluster('small', conf => 'ctas_fed.resolver_naptime = 3600
max_worker_processes = 5
max_parallel_workers = 8');
postgres_catalog($small, $remote);
$small->safe_psql('postgres', $source_sql);
ok(wait_until(60, sub {
	$small->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
	   WHERE backend_type = 'ctas_fed resolver'}) == 1 }),
	'small cluster: the resolver runs');
# the fourth, ctas_fed's notifier, has no database connection and is not
# in pg_stat_activity
is($small->safe_psql('postgres', q{
SELECT string_agg(backend_type, ',' ORDER BY backend_type)
  FROM pg_stat_activity
 WHERE backend_type IN ('logical replication launcher', 'ctas_fed launcher',
                        'ctas_fed resolver', 'parallel worker')}),
	'ctas_fed launcher,ctas_fed resolver,logical replication launcher',
	'small cluster: four of its five background worker slots are taken');
($ret, $out, $err) = $small->psql('postgres', q{
CREATE TABLE wh.public.p_slots WITH (parallel = 3) AS SELECT * FROM src.big;});
is($ret, 0, 'max_worker_processes exhausted: no failure') or diag $err;
like($err,
	qr/NOTICE:  loading wh\.public\.p_slots with 1 parallel workers instead of 3/,
	'max_worker_processes exhausted: a NOTICE says how many');
is(sql_digest($remote, 'dw',
		'SELECT id, md5(label), n, f, d, flag::int FROM public.p_slots'),
	$expect, 'max_worker_processes exhausted: every row exactly');
is(pg_scratch(), '', 'max_worker_processes exhausted: no scratch table left');
check_invariant(
	node => $small,
	name => 'max_worker_processes exhausted',
	committed => 1,
	targets => [ { pg => $remote, dbname => 'dw', table => 'public.p_slots',
		expect => pg_digest($local, 'postgres', 'src.big') } ]);
$small->stop;

# --- create_tables_as with parallel = N: whole tables to the workers
# Eight tables of different sizes and types (NULLs, hostile text, an empty
# one, one big enough to be cut in block ranges) into PostgreSQL and
# ClickHouse at N = 2 and 4: every table exactly, each job committed with
# its rows; ROLLBACK, a value a target refuses in one table, and a crash of
# the leader after the workers prepared leave nothing.
$local->safe_psql('postgres', q{
CREATE SCHEMA many;
CREATE TABLE many.m_big (id int, label text, n int8);
INSERT INTO many.m_big
SELECT g,
       CASE g % 13
         WHEN 0 THEN NULL WHEN 1 THEN '' WHEN 2 THEN E'tab\\there'
         WHEN 3 THEN E'new\\nline' WHEN 4 THEN E'back\\\\slash' WHEN 5 THEN '\\N'
         WHEN 6 THEN 'quote''s "dq" `bq`' WHEN 7 THEN 'ünïcødé 日本語 😀'
         WHEN 8 THEN E'cr\\rlf\\n' WHEN 9 THEN E'\\x01ctl\\x1f' WHEN 10 THEN ' pad '
         WHEN 11 THEN repeat('long ', 40) ELSE 'plain ' || g END,
       CASE WHEN g % 7 = 0 THEN NULL ELSE g::int8 * 1000000007 END
  FROM generate_series(1, 40000) g;
CREATE TABLE many.m_mid (id int, label text, f float8);
INSERT INTO many.m_mid
SELECT g, CASE WHEN g % 5 = 0 THEN NULL ELSE E'mid\\t' || g END,
       CASE WHEN g % 11 = 0 THEN NULL ELSE g * 0.25 END
  FROM generate_series(1, 8000) g;
CREATE TABLE many.m_text (id int, label text, vc varchar(20));
INSERT INTO many.m_text
SELECT g,
       CASE g % 7 WHEN 0 THEN NULL WHEN 1 THEN '' WHEN 2 THEN E'a\\\\b\\nc'
         WHEN 3 THEN '\\N' WHEN 4 THEN 'ünïcødé 😀' WHEN 5 THEN E'\\r' ELSE 'x' || g END,
       CASE WHEN g % 3 = 0 THEN NULL ELSE ('v' || g)::varchar(20) END
  FROM generate_series(1, 3000) g;
CREATE TABLE many.m_nums (id int, i2 int2, amount numeric(14,2), flag bool);
INSERT INTO many.m_nums
SELECT g, CASE WHEN g % 4 = 0 THEN NULL ELSE (g % 30000)::int2 END,
       CASE WHEN g % 6 = 0 THEN NULL ELSE (g * 1.01)::numeric(14,2) END,
       CASE WHEN g % 5 = 0 THEN NULL ELSE g % 2 = 0 END
  FROM generate_series(1, 5000) g;
CREATE TABLE many.m_dates (id int, d date, ts timestamp);
INSERT INTO many.m_dates
SELECT g, CASE WHEN g % 10 = 0 THEN NULL ELSE date '2000-01-01' + g END,
       CASE WHEN g % 10 = 1 THEN NULL
            ELSE timestamp '1999-12-31 23:00:00' + g * interval '1 minute' END
  FROM generate_series(1, 2000) g;
CREATE TABLE many.m_uuid (id int, u uuid);
INSERT INTO many.m_uuid
SELECT g, CASE WHEN g % 8 = 0 THEN NULL ELSE md5(g::text)::uuid END
  FROM generate_series(1, 1500) g;
CREATE TABLE many.m_small (id int, label text);
INSERT INTO many.m_small VALUES (1, 'one'), (2, NULL), (3, E'th\\tree');
CREATE TABLE many.m_empty (id int, label text);
});

# the rows of each table, rendered the same way by PostgreSQL and ClickHouse
my %many_fp = (
	m_big => [ 'SELECT id, md5(label), n FROM many.m_big',
		'SELECT id, lower(hex(MD5(label))), n FROM %s.m_big' ],
	m_mid => [ 'SELECT id, md5(label), f FROM many.m_mid',
		'SELECT id, lower(hex(MD5(label))), f FROM %s.m_mid' ],
	m_text => [ 'SELECT id, md5(label), md5(vc) FROM many.m_text',
		'SELECT id, lower(hex(MD5(label))), lower(hex(MD5(vc))) FROM %s.m_text' ],
	m_nums => [ 'SELECT id, i2, (amount * 100)::int8, flag::int FROM many.m_nums',
		'SELECT id, i2, toInt64(amount * 100), flag FROM %s.m_nums' ],
	m_dates => [
		q{SELECT id, d, to_char(ts, 'YYYY-MM-DD HH24:MI:SS') FROM many.m_dates},
		'SELECT id, d, ts FROM %s.m_dates' ],
	m_uuid => [ 'SELECT id, u FROM many.m_uuid',
		'SELECT id, u FROM %s.m_uuid' ],
	m_small => [ 'SELECT id, md5(label) FROM many.m_small',
		'SELECT id, lower(hex(MD5(label))) FROM %s.m_small' ],
	m_empty => [ 'SELECT id, md5(label) FROM many.m_empty',
		'SELECT id, lower(hex(MD5(label))) FROM %s.m_empty' ],
);
my @many = sort keys %many_fp;
my %many_rows = map {
	$_ => $local->safe_psql('postgres', "SELECT count(*) FROM many.$_")
} @many;
cmp_ok($local->safe_psql('postgres',
		q{SELECT pg_relation_size('many.m_big') * 2 >
		         sum(pg_relation_size(c.oid)) FILTER (WHERE relnamespace = 'many'::regnamespace)
		    FROM pg_class c WHERE relkind = 'r'}),
	'eq', 't', 'many: m_big has more than half of the blocks (cut in ranges)');

# every table of the schema, on both sides, and each job
sub check_many
{
	my ($name, $cat, $schema, $group) = @_;
	foreach my $t (@many)
	{
		if ($cat eq 'lake')
		{
			is(ch_rows(sprintf($many_fp{$t}[1], $schema)),
				sql_digest($local, 'postgres', $many_fp{$t}[0]),
				"$name: $t arrives exactly");
		}
		else
		{
			is(pg_digest($remote, 'dw', "$schema.$t"),
				pg_digest($local, 'postgres', "many.$t"),
				"$name: $t arrives exactly");
		}
	}
	is($local->safe_psql('postgres', qq{
SELECT string_agg(target || ':' || state || ':' || rows, ',' ORDER BY target)
  FROM ctas_fed.jobs WHERE group_id = $group}),
		join(',', map { "$schema.$_:committed:$many_rows{$_}" } @many),
		"$name: each job committed with its rows");
}

sub last_group
{
	return $local->safe_psql('postgres',
		'SELECT max(group_id) FROM ctas_fed.jobs');
}

$ch->query('CREATE DATABASE m2');
$ch->query('CREATE DATABASE m4');
$remote->safe_psql('dw', 'CREATE SCHEMA m2 AUTHORIZATION loader; CREATE SCHEMA m4 AUTHORIZATION loader');
foreach my $n (2, 4)
{
	foreach my $cat ('lake', 'wh')
	{
		($ret, $out, $err) = $local->psql('postgres', qq{
SET client_min_messages = debug1;
SELECT target, rows FROM ctas_fed.create_tables_as('$cat', 'm$n',
  source_schema => 'many', options => '{"parallel": $n}');});
		is($ret, 0, "many into $cat, parallel = $n: the call succeeds")
		  or diag $err;
		is($out, join("\n", map { "m$n.$_|$many_rows{$_}" } @many),
			"many into $cat, parallel = $n: the rows of each table");
		unlike($err, qr/NOTICE:  /, "many into $cat, parallel = $n: no NOTICE");
		my %took = map { $_ => 1 }
		  ($err =~ /parallel worker \d+ loads many\.(m_\w+) into $cat\.m$n\./g);
		is(join(',', sort keys %took), join(',', @many),
			"many into $cat, parallel = $n: workers took every table");
		like($err, qr/parallel load of 8 tables with $n workers, in this order: many\.m_big \(\d+ blocks, \d+ ranges\), many\.m_mid \(\d+ blocks\)/,
			"many into $cat, parallel = $n: biggest first, m_big cut in ranges");
		check_many("many into $cat, parallel = $n", $cat, "m$n", last_group());
	}
}
is(pg_scratch(), '', 'many: no scratch table left');
is(pg_prepared(), '', 'many: no prepared transaction left');
is($ch->query(q{SELECT count() FROM system.tables
                 WHERE startsWith(name, '_ctas_fed_')}) + 0, 0,
	'many: no staging table left');

# two tables loaded at the same time by two workers: each stops after it
# attached, and pg_stat_activity shows both tables' queries at once
$remote->safe_psql('dw', 'CREATE SCHEMA mt AUTHORIZATION loader');
{
	my ($h, $e, $offset) = start_session(
		"SET ctas_fed.fault_point = 'parallel_table:3';\n"
		  . "SELECT count(*) FROM ctas_fed.create_tables_as('wh', 'mt',"
		  . " tables => '{many.m_small, many.m_empty}', options => '{\"parallel\": 2}');\n");
	ok(wait_until(60, sub {
		$local->safe_psql('postgres', q{
SELECT count(DISTINCT query) FROM pg_stat_activity
 WHERE backend_type = 'parallel worker'
   AND query IN ('SELECT * FROM ONLY many.m_small',
                 'SELECT * FROM ONLY many.m_empty')}) == 2 }),
		'many: two workers load two tables at the same time');
	$h->finish;
	is($$e, '', 'many: the call with two tables succeeds') or diag $$e;
	is(pg_digest($remote, 'dw', 'mt.m_small'),
		pg_digest($local, 'postgres', 'many.m_small'),
		'many: m_small arrives exactly');
	is(pg_digest($remote, 'dw', 'mt.m_empty'),
		pg_digest($local, 'postgres', 'many.m_empty'),
		'many: m_empty arrives exactly');
	is(pg_prepared(), '', 'many: two tables: no prepared transaction left');
}

# a table's job has its rows as soon as its workers are done with it, and
# the leader has committed their prepared transactions then, while another
# worker still loads the other table (stopped after it attached)
$remote->safe_psql('dw', 'CREATE SCHEMA mu AUTHORIZATION loader');
{
	my ($h, $e, $offset) = start_session(
		"SET ctas_fed.fault_point = 'parallel_table:4';\n"
		  . "SET ctas_fed.progress = on; SET ctas_fed.progress_interval = 1;\n"
		  . "SELECT count(*) FROM ctas_fed.create_tables_as('wh', 'mu',"
		  . " tables => '{many.m_mid, many.m_small}', options => '{\"parallel\": 2}');\n");
	ok(wait_until(60, sub {
		my $small = q{SELECT count(*) FROM pg_stat_activity
		   WHERE backend_type = 'parallel worker'
		     AND query = 'SELECT * FROM ONLY many.m_small'};
		return 0 unless $local->safe_psql('postgres', $small) == 1;
		return 0 unless $local->safe_psql('postgres', q{
SELECT rows FROM ctas_fed.jobs WHERE catalog = 'wh' AND target = 'mu.m_mid'})
		  eq $many_rows{m_mid};
		my ($pid, $xid) = leader_of('many.m_mid, many.m_small');
		return 0 unless $xid;
		return !grep { /^ctas_fed_${sysid}_${xid}_/ } split(/,/, pg_prepared());
	}), 'many: m_mid done (its job has its rows, its workers committed) while m_small loads');
	$h->finish;
	unlike($$e, qr/ERROR/, 'many: the call with m_mid and m_small succeeds')
	  or diag $$e;
	like($$e, qr/NOTICE:  loading into 2 tables of catalog "wh" with 2 parallel workers: \d+ rows, \d+ bytes/,
		'many: progress NOTICEs cover every table');
	is(pg_digest($remote, 'dw', 'mu.m_mid'),
		pg_digest($local, 'postgres', 'many.m_mid'),
		'many: m_mid arrives exactly, loaded while m_small was');
	is(pg_prepared(), '', 'many: m_mid and m_small: no prepared transaction left');
}

# thirty small tables at parallel = 4 into a remote that allows ten
# prepared transactions: a worker waits for the leader to commit the
# prepared transactions of the tables loaded before it takes another
$local->safe_psql('postgres', 'CREATE SCHEMA tiny;' . join('', map {
	"CREATE TABLE tiny.t$_ AS SELECT g AS id, E'row\\t' || g AS label"
	  . " FROM generate_series(1, $_) g;" } 1 .. 30));
$remote->safe_psql('dw', 'CREATE SCHEMA tiny AUTHORIZATION loader');
($ret, $out, $err) = $local->psql('postgres', q{
SELECT count(*), sum(rows) FROM ctas_fed.create_tables_as('wh', 'tiny',
  source_schema => 'tiny', options => '{"parallel": 4}');});
is($ret, 0, 'many: thirty small tables at parallel = 4 load') or diag $err;
is($out, '30|465', 'many: thirty small tables: every row');
is(join(',', map { pg_digest($remote, 'dw', "tiny.t$_") } 1, 17, 30),
	join(',', map { pg_digest($local, 'postgres', "tiny.t$_") } 1, 17, 30),
	'many: thirty small tables arrive exactly');
is(pg_prepared(), '', 'many: thirty small tables: no prepared transaction left');

# no free worker, then one of three: the leader loads the tables itself,
# or the one worker takes them all, after a NOTICE; every row arrives
foreach my $case ([ 'mn0', 0, 2, 'in the leader: no parallel worker could be started' ],
	[ 'mn1', 1, 3, 'with 1 parallel workers instead of 3' ])
{
	my ($schema, $free, $n, $notice) = @$case;
	$remote->safe_psql('dw', "CREATE SCHEMA $schema AUTHORIZATION loader");
	($ret, $out, $err) = $local->psql('postgres', qq{
SET max_parallel_workers = $free;
SELECT count(*), sum(rows) FROM ctas_fed.create_tables_as('wh', '$schema',
  tables => '{many.m_mid, many.m_text, many.m_small, many.m_empty}',
  options => '{"parallel": $n}');});
	is($ret, 0, "many, $free free workers: no failure") or diag $err;
	like($err, qr/NOTICE:  loading 4 tables of catalog "wh" \Q$notice\E/,
		"many, $free free workers: a NOTICE says so");
	is($out, '4|' . ($many_rows{m_mid} + $many_rows{m_text} + 3),
		"many, $free free workers: the rows of each table");
	is(join(',', map { pg_digest($remote, 'dw', "$schema.$_") } qw(m_mid m_text m_small m_empty)),
		join(',', map { pg_digest($local, 'postgres', "many.$_") } qw(m_mid m_text m_small m_empty)),
		"many, $free free workers: every table arrives exactly");
	is(pg_prepared(), '', "many, $free free workers: no prepared transaction left");
}

# ROLLBACK of the caller's transaction leaves nothing, in either catalog
($ret, $out, $err) = $local->psql('postgres', q{
BEGIN;
SELECT count(*) FROM ctas_fed.create_tables_as('wh', 'public',
  source_schema => 'many', options => '{"parallel": 2}');
SELECT count(*) FROM ctas_fed.create_tables_as('lake', 'dw',
  source_schema => 'many', options => '{"parallel": 2}');
ROLLBACK;});
is($ret, 0, 'many: loads then ROLLBACK') or diag $err;
check_invariant(
	node => $local,
	name => 'many: ROLLBACK',
	targets => [
		(map { { pg => $remote, dbname => 'dw', table => "public.$_" } }
		  qw(m_big m_small m_empty)),
		(map { { ch => $ch, table => "dw.$_" } } qw(m_big m_small m_empty)) ]);
is(pg_scratch(), '', 'many: ROLLBACK leaves no scratch table');

# ROLLBACK TO SAVEPOINT in a transaction that commits: the call's tables
# go, the rest of the transaction stays
($ret, $out, $err) = $local->psql('postgres', q{
BEGIN;
SAVEPOINT a;
SELECT count(*) FROM ctas_fed.create_tables_as('wh', 'public',
  source_schema => 'many', options => '{"parallel": 2}');
ROLLBACK TO SAVEPOINT a;
CREATE TABLE wh.public.m_after AS SELECT 1 AS one;
COMMIT;});
is($ret, 0, 'many: ROLLBACK TO SAVEPOINT, then COMMIT') or diag $err;
unlike($err, qr/WARNING/, 'many: ROLLBACK TO SAVEPOINT: no WARNING') or diag $err;
is($remote->safe_psql('dw', 'SELECT one FROM public.m_after'), '1',
	'many: ROLLBACK TO SAVEPOINT: the transaction commits');
is(join(',', map { pg_digest($remote, 'dw', "public.$_") } @many),
	join(',', map { 'absent' } @many),
	'many: ROLLBACK TO SAVEPOINT: no table of the call');
is(pg_prepared(), '', 'many: ROLLBACK TO SAVEPOINT: no prepared transaction');
is(pg_scratch(), '', 'many: ROLLBACK TO SAVEPOINT: no scratch table');

# a value the target refuses, in one table: the call fails naming it, and
# leaves nothing
$local->safe_psql('postgres', q{
CREATE TABLE many.m_bad (id int, v text, d date);
INSERT INTO many.m_bad SELECT g, 'ok', date '2000-01-01' + g
  FROM generate_series(1, 3000) g;
INSERT INTO many.m_bad VALUES (3001, 'far too long', date '2200-01-01');});
foreach my $cat ('wh', 'lake')
{
	my $schema = $cat eq 'wh' ? 'public' : 'dw';
	# PostgreSQL: too long for varchar(5); ClickHouse: a date it cannot hold
	my $types = $cat eq 'wh'
	  ? ', "column_types": {"many.m_bad": "v varchar(5)"}' : '';
	($ret, $out, $err) = $local->psql('postgres', qq{
SELECT count(*) FROM ctas_fed.create_tables_as('$cat', '$schema',
  tables => '{many.m_bad, many.m_nums, many.m_dates, many.m_uuid}',
  options => '{"parallel": 2$types}');});
	isnt($ret, 0, "many into $cat: a value the target refuses fails the call");
	like($err, qr/parallel load of many\.m_bad into $cat\.$schema\.m_bad/,
		"many into $cat: the error names the table") or diag $err;
	check_invariant(
		node => $local,
		name => "many into $cat: one table fails",
		targets => [ map {
			$cat eq 'wh'
			  ? { pg => $remote, dbname => 'dw', table => "public.$_" }
			  : { ch => $ch, table => "dw.$_" } } qw(m_bad m_nums m_dates m_uuid) ]);
	is($local->safe_psql('postgres', qq{
SELECT state FROM ctas_fed.jobs
 WHERE catalog = '$cat' AND target = '$schema.m_bad'
 ORDER BY job_id DESC LIMIT 1}), 'failed',
		"many into $cat: the job of the table that failed is failed");
}

# the leader crashes after every stream ended, the last tables' workers
# prepared and not yet committed by it; then mid-load, two workers stopped
# in their first table, every scratch table made: once the resolver ran,
# nothing is left, no prepared transaction, no scratch table
$remote->safe_psql('dw', 'CREATE SCHEMA mc AUTHORIZATION loader');
foreach my $point ('after_workers', 'parallel_table')
{
	my ($h, $e, $offset) = start_session(
		"SET ctas_fed.fault_point = '$point';\n"
		  . "SELECT count(*) FROM ctas_fed.create_tables_as('wh', 'mc',"
		  . " source_schema => 'many', options => '{\"parallel\": 2, \"rename\": {\"many.m_big\": \"m_crash\"}}');\n");
	ok(wait_until(60, sub {
		my @stops = (slurp_file($local->logfile, $offset)
			  =~ /stopped at fault point "$point"/g);
		scalar(@stops) >= ($point eq 'after_workers' ? 1 : 2) }),
		"many: crash at $point: the leader or its workers stop there");
	my ($pid, $xid) = leader_of('m_crash');
	my $mine = scalar(grep { /^ctas_fed_${sysid}_${xid}_1_\d+_[12]$/ }
		  split(/,/, pg_prepared()));
	note "many: crash at $point: $mine worker transactions prepared";
	cmp_ok(scalar(split(/,/, pg_scratch())), '>=', 1,
		"many: crash at $point: scratch tables on the remote");
	$local->stop('immediate');
	$h->finish;
	$local->start;
	check_invariant(
		node => $local,
		name => "many: crash at $point",
		resolve => 1,
		targets => [ map { { pg => $remote, dbname => 'dw', table => "mc.$_" } }
			  qw(m_crash m_mid m_nums m_empty m_bad) ]);
	ok(wait_until(30, sub {
		$local->psql('postgres', 'SELECT * FROM ctas_fed.resolve_in_doubt()');
		pg_scratch() eq '' }),
		"many: crash at $point: the resolver drops the scratch tables");
}
is(parallel_workers(), 0, 'many: no parallel worker left');

done_testing();
