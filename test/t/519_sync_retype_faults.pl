
# Copyright (c) 2026, ctas_fed developers

# Continuous sync: a value-changing retype (ALTER COLUMN ... TYPE, followed
# by a copy again, test 515) under faults (issue 18).  Whole-row syncs into
# PostgreSQL and ClickHouse and a query sync into PostgreSQL; each case
# ends with the remote equal to the query's result by checksum, the remote
# column types of the new shape, the job streaming, each retype recorded
# once in ctas_fed.sync_schema_changes, no prepared transaction and no
# rebuild table left:
# - the catalogs down at the DDL (the remote PostgreSQL stopped, the
#   ClickHouse server killed), with changes before and after it in its
#   transaction and in the next one;
# - the worker killed (server stopped immediate) during the copy again,
#   the copy sent and not committed (fault point sync_copy_commit);
# - the worker killed after the copy again committed on the remote and
#   before the job's new shape is stored (fault point sync_reshape_unsaved):
#   the next worker copies again, the remote alters found done;
# - two retypes of one column in one transaction, one in a subtransaction
#   kept (RELEASE), changes between them.
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
	my ($table) = @_;
	return $remote->safe_psql('dw',
		"SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) "
		  . "FROM pg_attribute WHERE attrelid = '$table'::regclass AND attnum > 0 AND NOT attisdropped");
}

sub ch_types
{
	my ($table) = @_;
	my $t = $ch->query("SELECT name, type FROM system.columns WHERE database = 'dw' AND table = '$table' "
		  . "AND name NOT IN ('_version', '_deleted') FORMAT TabSeparated");
	return join(', ', map { s/\t/ /r } grep { $_ ne '' } split /\n/, $t);
}

my $q = 'SELECT id, a AS amount, b FROM q';

# the three remotes equal their queries, with these column types
sub all_same
{
	my ($what, $p_types, $c_types, $q_types) = @_;
	my %want = (
		p => rows_digest($local->safe_psql('postgres', 'COPY (SELECT * FROM p) TO STDOUT')),
		c => rows_digest($local->safe_psql('postgres', 'COPY (SELECT * FROM c) TO STDOUT')),
		q => rows_digest($local->safe_psql('postgres', "COPY ($q) TO STDOUT")));
	my %got;
	my $read = sub {
		$got{p} = rows_digest($remote->safe_psql('dw', 'COPY (SELECT * FROM public.p) TO STDOUT'));
		$got{q} = rows_digest($remote->safe_psql('dw', 'COPY (SELECT * FROM public.q) TO STDOUT'));
		my $res = $ch->request('SELECT id, a, b FROM dw.c FINAL WHERE _deleted = 0 FORMAT TabSeparated');
		$got{c} = $res->{status} == 200 ? rows_digest($res->{content}) : $res->{content};
	};
	wait_until(180, sub {
		$read->();
		$got{p} eq $want{p} && $got{c} eq $want{c} && $got{q} eq $want{q}
		  && job('wh.public.p') eq 'streaming:' && job('lake.dw.c') eq 'streaming:'
		  && job('wh.public.q') eq 'streaming:' });
	is($got{p}, $want{p}, "$what: p (PostgreSQL, whole rows) = source");
	is($got{c}, $want{c}, "$what: c (ClickHouse, whole rows) = source");
	is($got{q}, $want{q}, "$what: q (PostgreSQL, query) = query's result");
	is(job('wh.public.p') . ' ' . job('lake.dw.c') . ' ' . job('wh.public.q'),
		'streaming: streaming: streaming:', "$what: the three jobs stream");
	is(pg_types('public.p'), $p_types, "$what: p column types");
	is(ch_types('c'), $c_types, "$what: c column types");
	is(pg_types('public.q'), $q_types, "$what: q column types");
	is($remote->safe_psql('dw', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
		"$what: no prepared transaction left");
	is($ch->query("SELECT count() FROM system.tables WHERE database = 'dw' AND name LIKE '_ctas_fed_resync_%' FORMAT TabSeparated") + 0,
		0, "$what: no rebuild table left");
}

sub recorded
{
	my ($like) = @_;
	return $local->safe_psql('postgres', qq{
	  SELECT string_agg(y.remote_table || ': ' || c.change, '; ' ORDER BY y.remote_table, c.change_id)
	    FROM ctas_fed.sync_schema_changes c JOIN ctas_fed.syncs y USING (sync_id)
	   WHERE c.followed AND c.change LIKE '$like'});
}

sub set_fault
{
	my ($point) = @_;
	$local->safe_psql('postgres', $point eq ''
		? 'ALTER SYSTEM RESET ctas_fed.fault_point'
		: "ALTER SYSTEM SET ctas_fed.fault_point = '$point'");
	$local->safe_psql('postgres', 'SELECT pg_reload_conf()');
}

$local->safe_psql('postgres', q{
CREATE TABLE p (id int PRIMARY KEY, a numeric(10,2), b text);
INSERT INTO p SELECT g, g * 1.27, 'text' || g FROM generate_series(1, 300) g;
CREATE TABLE c (LIKE p INCLUDING ALL);
INSERT INTO c SELECT * FROM p;
CREATE TABLE q (LIKE p INCLUDING ALL);
INSERT INTO q SELECT * FROM p;
CREATE TABLE wh.public.p WITH (sync = 'continuous') AS SELECT * FROM p;
CREATE TABLE lake.dw.c WITH (sync = 'continuous', primary_key = 'id') AS SELECT * FROM c;
CREATE TABLE wh.public.q WITH (sync = 'continuous') AS SELECT id, a AS amount, b FROM q;});
ok(wait_until(90, sub {
	join(' ', map { job($_) } qw(wh.public.p lake.dw.c wh.public.q))
	  eq 'streaming: streaming: streaming:' }), 'the syncs stream');

# 1. the catalogs down at the DDL
$remote->stop('fast');
$ch->crash;
$local->safe_psql('postgres', q{
UPDATE p SET b = 'before' WHERE id <= 5;
UPDATE c SET b = 'before' WHERE id <= 5;
UPDATE q SET b = 'before' WHERE id <= 5;
BEGIN;
UPDATE p SET a = 0.06 WHERE id BETWEEN 6 AND 10;
UPDATE c SET a = 0.06 WHERE id BETWEEN 6 AND 10;
UPDATE q SET a = 0.06 WHERE id BETWEEN 6 AND 10;
ALTER TABLE p ALTER COLUMN a TYPE numeric(10,1);
ALTER TABLE c ALTER COLUMN a TYPE numeric(10,1);
ALTER TABLE q ALTER COLUMN a TYPE numeric(10,1);
UPDATE p SET a = 99.99, b = 'after' WHERE id BETWEEN 8 AND 12;
UPDATE c SET a = 99.99, b = 'after' WHERE id BETWEEN 8 AND 12;
UPDATE q SET a = 99.99, b = 'after' WHERE id BETWEEN 8 AND 12;
COMMIT;
DELETE FROM p WHERE id = 1;
DELETE FROM c WHERE id = 1;
DELETE FROM q WHERE id = 1;
INSERT INTO p VALUES (1001, 1.25, 'new');
INSERT INTO c VALUES (1001, 1.25, 'new');
INSERT INTO q VALUES (1001, 1.25, 'new');});
ok(wait_until(60, sub {
	job('wh.public.p') =~ /:.+/ && job('lake.dw.c') =~ /:.+/ }),
	'catalogs down: the jobs record the error');
note 'while down: ' . job('wh.public.p') . ' | ' . job('lake.dw.c');
$remote->start;
$ch->restart;
all_same('catalogs down at the DDL',
	'id integer, a numeric(10,1), b text',
	'id Int32, a Nullable(Decimal(10, 1)), b Nullable(String)',
	'id integer, amount numeric(10,1), b text');
is(recorded('%a% TYPE numeric(10,1)%'),
	'c: ALTER COLUMN a TYPE numeric(10,1) (values copied again); '
	  . 'p: ALTER COLUMN a TYPE numeric(10,1) (values copied again); '
	  . 'q: ALTER COLUMN amount TYPE numeric(10,1) (values copied again)',
	'catalogs down: each retype recorded once');

# 2. the worker killed during the copy again, the copy not committed
set_fault('sync_copy_commit');
my $log = -s $local->logfile;
$local->safe_psql('postgres', q{
BEGIN;
UPDATE p SET b = 'in 2' WHERE id = 20;
UPDATE c SET b = 'in 2' WHERE id = 20;
UPDATE q SET b = 'in 2' WHERE id = 20;
ALTER TABLE p ALTER COLUMN b TYPE varchar(4) USING left(b, 4);
ALTER TABLE c ALTER COLUMN b TYPE varchar(4) USING left(b, 4);
ALTER TABLE q ALTER COLUMN b TYPE varchar(4) USING left(b, 4);
COMMIT;
UPDATE p SET b = 'zz' WHERE id = 21;
UPDATE c SET b = 'zz' WHERE id = 21;
UPDATE q SET b = 'zz' WHERE id = 21;});
ok(wait_log($local, qr/stopped at fault point "sync_copy_commit"/, $log, 120),
	'a copy again sent, not committed');
sleep(3);
set_fault('');
$local->stop('immediate');
$local->start;
all_same('worker killed before the copy again committed',
	'id integer, a numeric(10,1), b character varying(4)',
	'id Int32, a Nullable(Decimal(10, 1)), b Nullable(String)',
	'id integer, amount numeric(10,1), b character varying(4)');

# 3. the worker killed after the copy again committed, its shape unsaved
set_fault('sync_reshape_unsaved');
$log = -s $local->logfile;
$local->safe_psql('postgres', q{
BEGIN;
UPDATE p SET a = 3.14 WHERE id = 30;
UPDATE c SET a = 3.14 WHERE id = 30;
UPDATE q SET a = 3.14 WHERE id = 30;
ALTER TABLE p ALTER COLUMN a TYPE numeric(10,0);
ALTER TABLE c ALTER COLUMN a TYPE numeric(10,0);
ALTER TABLE q ALTER COLUMN a TYPE numeric(10,0);
COMMIT;
UPDATE p SET a = 7 WHERE id = 31;
UPDATE c SET a = 7 WHERE id = 31;
UPDATE q SET a = 7 WHERE id = 31;});
ok(wait_log($local, qr/stopped at fault point "sync_reshape_unsaved"/, $log, 120),
	'a copy again committed, the job\'s shape not stored');
sleep(3);
set_fault('');
$local->stop('immediate');
$local->start;
all_same('worker killed after the copy again committed',
	'id integer, a numeric(10,0), b character varying(4)',
	'id Int32, a Nullable(Decimal(10, 0)), b Nullable(String)',
	'id integer, amount numeric(10,0), b character varying(4)');
is(recorded('%TYPE numeric(10,0)%'),
	'c: ALTER COLUMN a TYPE numeric(10,0) (values copied again); '
	  . 'p: ALTER COLUMN a TYPE numeric(10,0) (values copied again); '
	  . 'q: ALTER COLUMN amount TYPE numeric(10,0) (values copied again)',
	'killed after the remote commit: each retype recorded once');

# 4. two retypes of one column in one transaction, one in a subtransaction
# kept, changes between them
$local->safe_psql('postgres', q{
BEGIN;
UPDATE p SET b = 'x1' WHERE id = 40;
UPDATE c SET b = 'x1' WHERE id = 40;
UPDATE q SET b = 'x1' WHERE id = 40;
ALTER TABLE p ALTER COLUMN b TYPE varchar(2) USING left(b, 2);
ALTER TABLE c ALTER COLUMN b TYPE varchar(2) USING left(b, 2);
ALTER TABLE q ALTER COLUMN b TYPE varchar(2) USING left(b, 2);
UPDATE p SET b = 'x2' WHERE id = 41;
UPDATE c SET b = 'x2' WHERE id = 41;
UPDATE q SET b = 'x2' WHERE id = 41;
SAVEPOINT s;
ALTER TABLE p ALTER COLUMN b TYPE text USING b || '!';
ALTER TABLE c ALTER COLUMN b TYPE text USING b || '!';
ALTER TABLE q ALTER COLUMN b TYPE text USING b || '!';
RELEASE SAVEPOINT s;
UPDATE p SET b = 'x3' WHERE id = 42;
UPDATE c SET b = 'x3' WHERE id = 42;
UPDATE q SET b = 'x3' WHERE id = 42;
COMMIT;});
all_same('two retypes in one transaction',
	'id integer, a numeric(10,0), b text',
	'id Int32, a Nullable(Decimal(10, 0)), b Nullable(String)',
	'id integer, amount numeric(10,0), b text');

done_testing();
