
# Copyright (c) 2026, ctas_fed developers

# A parallel load into a PostgreSQL catalog that the leader gives up while
# its workers' PREPARE TRANSACTION are on their way: each worker has sent
# its PREPARE, the remote session has not read it yet (the fault proxy holds
# it), and the leader's statement is cancelled.  The abort terminates the
# workers; the remote sessions then read the PREPARE and prepare.  The abort
# must wait for those sessions before it looks for the workers' gids, or it
# finds none, and a prepared transaction (holding the scratch table) is left
# for the resolver.  Found by running 610 beside another test: under load
# the window is wide.  The resolver is kept asleep, so what is checked is
# what the statement itself settled.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use CtasFed::Test;

my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $fp = start_fault_proxy($remote->port);
my $pport = $fp->port;

my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600
max_worker_processes = 16
max_parallel_workers = 8');
$local->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$pport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE TABLE big AS SELECT g AS id, md5(g::text) AS label FROM generate_series(1, 60000) g;
ANALYZE big;
});

my $sysid = $local->safe_psql('postgres',
	'SELECT system_identifier FROM pg_control_system()');

sub prepared
{
	return $remote->safe_psql('dw',
		qq{SELECT count(*) FROM pg_prepared_xacts
		    WHERE starts_with(gid, 'ctas_fed_${sysid}_')});
}

sub scratch
{
	return $remote->safe_psql('dw',
		q{SELECT count(*) FROM pg_class WHERE starts_with(relname, '_ctas_fed_')});
}

# every worker's PREPARE is held on its way to the remote
my $rule = $fp->set_rule(match => 'PREPARE TRANSACTION', action => 'stall',
	dir => 'up', times => 0);
my ($h, $out, $err) = start_psql($local,
	q{CREATE TABLE wh.public.raced WITH (parallel = 2) AS SELECT id, label FROM big});
ok($fp->wait_hit($rule, 2, 60), 'both workers sent their PREPARE TRANSACTION');

# the leader gives up; its abort terminates the workers
my $leader = $local->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity
	   WHERE backend_type = 'client backend' AND query LIKE 'CREATE TABLE wh.public.raced%'});
$local->safe_psql('postgres', "SELECT pg_cancel_backend($leader)");
ok(wait_until(30, sub {
	$local->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'}) == 0 }),
	'the workers are gone');

# only now do the remote sessions read their PREPARE
sleep 1;
$fp->clear;
$h->finish;
like($$err, qr/canceling statement due to user request/, 'the statement was cancelled');
is(prepared(), 0, 'no prepared transaction of a worker is left (without the resolver)');
is(scratch(), 0, 'no scratch table is left');
is($remote->safe_psql('dw', q{SELECT to_regclass('public.raced') IS NULL}), 't',
	'no table on the remote');
unlike(slurp_file($local->logfile), qr/WARNING:  could not/,
	'no WARNING: the abort rolled back every worker gid and dropped the scratch table');

# the same catalog still loads in parallel
$local->safe_psql('postgres',
	q{CREATE TABLE wh.public.after WITH (parallel = 2) AS SELECT id, label FROM big});
is($remote->safe_psql('dw', 'SELECT count(*) FROM public.after'), '60000',
	'a parallel load after the race lands whole');
is(prepared(), 0, 'and leaves no prepared transaction');

$fp->stop;
done_testing();
