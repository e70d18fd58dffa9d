
# Copyright (c) 2026, ctas_fed developers

# A MySQL catalog in one transaction with a PostgreSQL catalog: both
# commit, both roll back, a failing RENAME at the MySQL pre-commit rolls
# back the PostgreSQL prepared transaction, and a local crash after the
# PostgreSQL PREPARE (before the MySQL publication) is resolved on both.
# statement_timeout and pg_terminate_backend end a stalled MySQL load at
# once; jobs and metrics name the catalog.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;

use CtasFed::Test;

my $my     = start_mariadb();
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $fp    = start_fault_proxy($my->{port});
mysql_catalog($local, $my);
mysql_catalog($local, $my, name => 'px', port => $fp->port, extension => 0);
postgres_catalog($local, $remote, extension => 0);

sub scratch
{
	return $my->sql(q{SELECT count(*) FROM information_schema.tables WHERE table_name LIKE '\_ctas\_fed\_%'});
}

sub my_exists
{
	my ($t) = @_;
	return $my->sql("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'shop' AND table_name = '$t'");
}

sub pg_exists
{
	my ($t) = @_;
	return $remote->safe_psql('dw', "SELECT count(*) FROM pg_class WHERE relname = '$t'");
}

sub prepared
{
	return $remote->safe_psql('dw', 'SELECT count(*) FROM pg_prepared_xacts');
}

sub nothing_left
{
	my ($name) = @_;
	ok(wait_until(30, sub {
		$local->safe_psql('postgres', 'SELECT count(*) FROM ctas_fed.resolve_in_doubt()');
		return scratch() == 0 && $my->sql('XA RECOVER') eq '' && prepared() == 0;
	}), "$name: nothing left (staging, XA branch, prepared transaction)");
}

$local->safe_psql('postgres', q{CREATE TABLE shop.shop.app AS SELECT 0 AS a});

# --- both commit
$local->safe_psql('postgres', q{BEGIN;
CREATE TABLE wh.public.m1 AS SELECT g FROM generate_series(1, 100) g;
CREATE TABLE shop.shop.m1 AS SELECT g FROM generate_series(1, 100) g;
CREATE TABLE shop.shop.app WITH (if_exists = 'append') AS SELECT 1 AS a;
COMMIT;});
is($remote->safe_psql('dw', 'SELECT count(*) FROM m1'), '100', 'PostgreSQL table committed');
is($my->sql('SELECT count(*) FROM shop.m1'), '100', 'MySQL table committed');
is($my->sql('SELECT count(*) FROM shop.app'), '2', 'MySQL append committed');
nothing_left('commit');

# --- both roll back
$local->safe_psql('postgres', q{BEGIN;
CREATE TABLE wh.public.m2 AS SELECT 1 AS a;
CREATE TABLE shop.shop.m2 AS SELECT 1 AS a;
CREATE TABLE shop.shop.app WITH (if_exists = 'append') AS SELECT 2 AS a;
ROLLBACK;});
is(pg_exists('m2') + my_exists('m2'), 0, 'neither table exists after ROLLBACK');
is($my->sql('SELECT count(*) FROM shop.app'), '2', 'no row appended');
nothing_left('rollback');

# --- the MySQL publication fails: the PostgreSQL PREPARE is rolled back
my $s = session_start($local);
session_run($s, q{BEGIN;
CREATE TABLE wh.public.m3 AS SELECT 1 AS a;
CREATE TABLE shop.shop.m3 AS SELECT 1 AS a;
CREATE TABLE shop.shop.app WITH (if_exists = 'append') AS SELECT 3 AS a;});
$my->sql(q{CREATE TABLE shop.m3 (planted int); INSERT INTO shop.m3 VALUES (42)});
my ($rc, $out, $err) = (0, session_run($s, 'COMMIT;'));
like($err, qr/could not publish the tables on MySQL catalog "shop".*already exists/s,
	'the RENAME fails on the planted table');
$s->quit;
is(pg_exists('m3'), '0', 'the PostgreSQL table was rolled back');
is($my->sql('SELECT planted FROM shop.m3'), '42', 'the planted table is untouched');
is($my->sql('SELECT count(*) FROM shop.app'), '2', 'no row appended');
nothing_left('failed publication');

# --- local crash after the PostgreSQL PREPARE, before the MySQL publication
{
	my ($in, $o, $e) = ('', '', '');
	my $offset = -s $local->logfile;
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $local->connstr('postgres') ],
		'<', \$in, '>', \$o, '2>', \$e, IPC::Run::timeout(120));
	$in .= q{SET ctas_fed.fault_point = 'after_prepare';
BEGIN;
CREATE TABLE wh.public.m4 AS SELECT 1 AS a;
CREATE TABLE shop.shop.m4 AS SELECT 1 AS a;
CREATE TABLE shop.shop.app WITH (if_exists = 'append') AS SELECT 4 AS a;
COMMIT;
};
	$h->pump while $h->pumpable && $in ne '';
	$local->wait_for_log(qr/stopped at fault point "after_prepare"/, $offset);
	is(prepared(), '1', 'PostgreSQL prepared');
	cmp_ok(scratch(), '>', 0, 'MySQL staging table there');
	$local->stop('immediate');
	$h->finish;
	$local->start;
}
nothing_left('crash after prepare');
is(pg_exists('m4') + my_exists('m4'), 0, 'neither table exists');
is($my->sql('SELECT count(*) FROM shop.app'), '2', 'no row appended');

# --- statement_timeout and pg_terminate_backend reach a stalled load
my $id = $fp->set_rule(match => 'LOAD DATA', action => 'stall', dir => 'down', times => 0);
my $t0 = time;
($rc, $out, $err) = $local->psql('postgres',
	q{SET statement_timeout = '1s'; CREATE TABLE px.shop.to AS SELECT 1 AS a});
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout ends the stalled load');
cmp_ok(time - $t0, '<', 6, 'promptly');
my ($h, $stdout, $stderr) = start_psql($local, q{CREATE TABLE px.shop.term AS SELECT 1 AS a});
my $pid = wait_active($local, 'CREATE TABLE px.shop.term%');
ok(wait_until(20, sub { $fp->hits($id) >= 2 }), 'the second load stalls');
$t0 = time;
$local->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
$h->finish;
like($$stderr, qr/terminating connection due to administrator command/, 'pg_terminate_backend ends it');
cmp_ok(time - $t0, '<', 6, 'promptly');
$fp->clear;
nothing_left('timeouts');
is(my_exists('to') + my_exists('term'), 0, 'no table');

# --- jobs and metrics
is($local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.jobs WHERE catalog = 'shop' AND state = 'committed' AND target LIKE 'shop.m1'}),
	'1', 'the job of the committed MySQL CTAS');
like($local->safe_psql('postgres', 'SELECT ctas_fed.metrics()'), qr/ctas_fed_rows_total\{catalog="shop"\} \d+/, 'metrics per MySQL catalog');

done_testing();
