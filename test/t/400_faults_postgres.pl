
# Copyright (c) 2026, ctas_fed developers

# Fault suite, PostgreSQL target: a fault proxy between the local cluster
# and the remote one breaks each step of the protocol (connect, CREATE
# TABLE, COPY, PREPARE TRANSACTION, COMMIT PREPARED, ROLLBACK, ROLLBACK
# PREPARED) with each action (drop the request, lose the reply after the
# server ran it, stall until statement_timeout or a cancel, reset
# mid-stream).  After every case, once the resolver ran, the invariant of
# CtasFed::Test::check_invariant holds: the remote table has exactly the
# source's rows iff the local transaction committed, no prepared
# transaction of ours is left, the job has the expected state, and the
# same session runs another federated CTAS.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use CtasFed::Test;

my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $fp = start_fault_proxy($remote->port);
my $pport = $fp->port;

# the test calls resolve_in_doubt itself; the worker wakes up on its own
# too, which is allowed (the invariant is what must hold, whoever resolves)
my $local = new_cluster('local');
$local->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$pport', dbname 'dw',
           connect_timeout '5');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE SERVER wh2 FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$pport', dbname 'dw',
           connect_timeout '5');
CREATE USER MAPPING FOR PUBLIC SERVER wh2 OPTIONS (user 'loader', password 'secret');
CREATE TABLE src AS
  SELECT g AS id, md5(g::text) AS label FROM generate_series(1, 300) g;
});
my $digest = sql_digest($local, 'postgres', 'SELECT id, label FROM src');

# the resolver's first pass over the catalogs goes through the proxy too:
# let it end before the first fault, which it could otherwise take
ok(wait_resolver_pass($local, $fp, 2),
	'the resolver passed over the proxied catalogs before the first fault');

my $n = 0;

# wait (30 s at most) until the local log from $offset matches $re
sub wait_local_log
{
	my ($re, $offset) = @_;
	foreach (1 .. 300)
	{
		return 1 if slurp_file($local->logfile, $offset) =~ $re;
		usleep(100_000);
	}
	return 0;
}

# One case: rules on the proxy, a transaction in a session that already
# used the catalog (unless cold), the fault, then the invariant.
#   rules     rules for the proxy; the first one must fire
#   sql       the statements, with %T% (and %T2%) for the table names
#   committed did the local transaction commit?
#   state     expected state of the job(s)
#   error     pattern the statement's stderr must match ('' = no error)
#   timeout   statement_timeout for the statement
#   cancel    cancel the backend once the first rule fired
sub run_case
{
	my (%c) = @_;
	$n++;
	my $t  = "t$n";
	my $t2 = "t${n}b";
	my $name = "case $n ($c{name})";
	my $sql = $c{sql} // 'CREATE TABLE wh.public.%T% AS SELECT id, label FROM src';
	$sql =~ s/%T%/$t/g;
	$sql =~ s/%T2%/$t2/g;

	my $s = session_start($local);
	my ($pid) = session_run($s, 'SELECT pg_backend_pid()');
	unless ($c{cold})
	{
		my ($o, $e) = session_run($s,
			"CREATE TABLE wh.public.warm$n AS SELECT 1 AS x;"
			  . "CREATE TABLE wh2.public.warm${n}b AS SELECT 1 AS x");
		die "$name: warm-up failed: $e" if $e ne '';
	}
	session_run($s, "SET statement_timeout = '$c{timeout}'") if $c{timeout};

	my @ids = map { $fp->set_rule(%$_) } @{ $c{rules} };
	my $offset = -s $local->logfile;
	my $t0 = time;
	my $token = session_send($s, $sql);
	ok($fp->wait_hit($ids[0], 1, 30), "$name: the fault was hit");
	$local->safe_psql('postgres', "SELECT pg_cancel_backend($pid)")
	  if $c{cancel};
	# a stall that models a network hiccup ends once the cancel or the
	# timeout has fired (its ERROR is logged before the abort runs), so
	# that the abort can talk to the server; with hold, the server stays
	# silent and the abort waits out its own bound
	if (($c{cancel} || $c{timeout}) && !$c{hold})
	{
		$fp->clear
		  if wait_local_log(qr/ERROR:  canceling statement due to/, $offset);
	}
	my ($out, $err) = session_wait($s, $token, 60);
	my $elapsed = time - $t0;
	$err //= 'statement did not end within 60 s';
	$fp->clear;
	note("$name: stderr: $err") if $err ne '';
	if ($c{error} eq '')
	{
		unlike($err, qr/ERROR/, "$name: the transaction commits");
	}
	else
	{
		like($err, $c{error}, "$name: the statement fails as expected");
	}
	cmp_ok($elapsed, "<", $c{bound} // ($c{hold} ? 40 : 10), "$name: bounded wait")
	  if $c{timeout} || $c{cancel} || $c{bound};
	session_run($s, 'RESET statement_timeout') if $c{timeout};

	my @targets = ({ pg => $remote, dbname => 'dw', table => "public.$t",
		expect => $digest });
	my @jobs = ([ 'wh', "public.$t", $c{state} ]);
	if ($sql =~ /$t2/)
	{
		push @targets, { pg => $remote, dbname => 'dw',
			table => "public.$t2", expect => $digest };
		push @jobs, [ 'wh2', "public.$t2", $c{state} ];
	}
	check_invariant(
		name      => $name,
		node      => $local,
		committed => $c{committed},
		targets   => \@targets,
		jobs      => \@jobs,
		timeout   => 20,
		resolve   => 1,
		session   => $s,
		session_ctas => "CREATE TABLE wh.public.after$n AS SELECT id FROM src",
		session_cleanup => "DROP TABLE wh.public.after$n");
	$s->quit;
	return;
}

my $fail_stmt = qr/ERROR/;
my $two = 'BEGIN; CREATE TABLE wh.public.%T% AS SELECT id, label FROM src;'
  . ' CREATE TABLE wh2.public.%T2% AS SELECT id, label FROM src; COMMIT';

my @cases = (
	# connect
	{ name => 'connect refused', cold => 1,
	  rules => [ { action => 'refuse' } ],
	  committed => 0, state => 'failed', error => $fail_stmt },
	{ name => 'connect: startup packet dropped', cold => 1,
	  rules => [ { match => '', action => 'drop_request' } ],
	  committed => 0, state => 'failed', error => $fail_stmt },
	{ name => 'connect: startup stalled, statement_timeout', cold => 1,
	  rules => [ { match => '', action => 'stall' } ], timeout => '2s',
	  committed => 0, state => 'failed', error => qr/statement timeout/ },
	# CREATE TABLE
	{ name => 'CREATE TABLE dropped',
	  rules => [ { match => 'CREATE TABLE', action => 'drop_request' } ],
	  committed => 0, state => 'failed', error => $fail_stmt },
	{ name => 'CREATE TABLE reply lost',
	  rules => [ { match => 'CREATE TABLE', action => 'lose_reply' } ],
	  committed => 0, state => 'failed', error => $fail_stmt },
	{ name => 'CREATE TABLE stalled, statement_timeout',
	  rules => [ { match => 'CREATE TABLE', action => 'stall', dir => 'down' } ],
	  timeout => '2s',
	  committed => 0, state => 'failed', error => qr/statement timeout/ },
	{ name => 'CREATE TABLE stalled, cancel',
	  rules => [ { match => 'CREATE TABLE', action => 'stall', dir => 'down' } ],
	  cancel => 1,
	  committed => 0, state => 'failed', error => qr/canceling statement/ },
	# COPY
	{ name => 'COPY dropped',
	  rules => [ { match => 'COPY ', action => 'drop_request' } ],
	  committed => 0, state => 'failed', error => $fail_stmt },
	{ name => 'COPY reset mid-stream',
	  rules => [ { match => 'COPY ', reset_after => 3000 } ],
	  committed => 0, state => 'failed', error => $fail_stmt },
	{ name => 'COPY stalled, statement_timeout',
	  rules => [ { match => 'COPY ', action => 'stall', dir => 'up' } ],
	  timeout => '2s',
	  committed => 0, state => 'failed', error => qr/statement timeout/ },
	{ name => 'COPY stalled, cancel, the server stays silent (abort bound)',
	  rules => [ { match => 'COPY ', action => 'stall', dir => 'up' } ],
	  cancel => 1, hold => 1,
	  committed => 0, state => 'failed', error => qr/canceling statement/ },
	# PREPARE TRANSACTION
	{ name => 'PREPARE dropped',
	  rules => [ { match => 'PREPARE TRANSACTION', action => 'drop_request' } ],
	  committed => 0, state => 'aborted', error => $fail_stmt },
	{ name => 'PREPARE reply lost (remote prepared)',
	  rules => [ { match => 'PREPARE TRANSACTION', action => 'lose_reply' } ],
	  committed => 0, state => 'aborted', error => $fail_stmt },
	# (statement_timeout cannot stop a stalled pre-commit: PostgreSQL
	# disables it before it commits, also for an explicit COMMIT; a
	# cancel can)
	{ name => 'PREPARE stalled, cancel',
	  rules => [ { match => 'PREPARE TRANSACTION', action => 'stall', dir => 'down' } ],
	  cancel => 1,
	  committed => 0, state => 'aborted', error => qr/canceling statement/ },
	# COMMIT PREPARED (after the local commit: never an error)
	{ name => 'COMMIT PREPARED dropped',
	  rules => [ { match => 'COMMIT PREPARED', action => 'drop_request' } ],
	  committed => 1, state => 'committed', error => '' },
	{ name => 'COMMIT PREPARED reply lost (remote committed)',
	  rules => [ { match => 'COMMIT PREPARED', action => 'lose_reply' } ],
	  committed => 1, state => 'committed', error => '' },
	{ name => 'COMMIT PREPARED stalled (30 s bound)',
	  rules => [ { match => 'COMMIT PREPARED', action => 'stall', dir => 'down' } ],
	  bound => 40,
	  committed => 1, state => 'committed', error => '' },
	# ROLLBACK (an explicit rollback of the local transaction)
	{ name => 'ROLLBACK dropped',
	  sql => 'BEGIN; CREATE TABLE wh.public.%T% AS SELECT id, label FROM src; ROLLBACK',
	  rules => [ { match => "ROLLBACK\0", action => 'drop_request' } ],
	  committed => 0, state => 'aborted', error => '' },
	{ name => 'ROLLBACK reply lost',
	  sql => 'BEGIN; CREATE TABLE wh.public.%T% AS SELECT id, label FROM src; ROLLBACK',
	  rules => [ { match => "ROLLBACK\0", action => 'lose_reply' } ],
	  committed => 0, state => 'aborted', error => '' },
	# ROLLBACK PREPARED: the second PREPARE fails, the first is rolled back
	{ name => 'second PREPARE fails',
	  sql => $two,
	  rules => [ { match => 'PREPARE TRANSACTION', skip => 1,
		  action => 'drop_request' } ],
	  committed => 0, state => 'aborted', error => $fail_stmt },
	{ name => 'ROLLBACK PREPARED dropped',
	  sql => $two,
	  rules => [ { match => 'ROLLBACK PREPARED', action => 'drop_request' },
		  { match => 'PREPARE TRANSACTION', skip => 1, action => 'drop_request' } ],
	  committed => 0, state => 'aborted', error => $fail_stmt },
	{ name => 'ROLLBACK PREPARED reply lost',
	  sql => $two,
	  rules => [ { match => 'ROLLBACK PREPARED', action => 'lose_reply' },
		  { match => 'PREPARE TRANSACTION', skip => 1, action => 'drop_request' } ],
	  committed => 0, state => 'aborted', error => $fail_stmt },
);

run_case(%$_) foreach @cases;

# a remote server killed mid-COPY, then started again
{
	$n++;
	my $name = "case $n (remote killed mid-COPY)";
	my $s = session_start($local);
	my $id = $fp->set_rule(match => 'COPY ', action => 'stall', dir => 'up');
	my $token = session_send($s,
		"CREATE TABLE wh.public.t$n AS SELECT id, label FROM src");
	ok($fp->wait_hit($id), "$name: the COPY is under way");
	$remote->stop('immediate');
	$fp->clear;
	my ($out, $err) = session_wait($s, $token, 60);
	like($err // 'timed out', qr/ERROR/, "$name: the statement fails");
	$remote->start;
	check_invariant(
		name      => $name,
		node      => $local,
		committed => 0,
		targets   => [ { pg => $remote, dbname => 'dw', table => "public.t$n",
			expect => $digest } ],
		jobs      => [ [ 'wh', "public.t$n", 'failed' ] ],
		timeout   => 20,
		resolve   => 1,
		session   => $s,
		session_ctas => "CREATE TABLE wh.public.after$n AS SELECT id FROM src");
	$s->quit;
}

# a remote server killed between PREPARE and COMMIT PREPARED
{
	$n++;
	my $name = "case $n (remote killed before COMMIT PREPARED)";
	my $s = session_start($local);
	my $id = $fp->set_rule(match => 'COMMIT PREPARED', action => 'stall', dir => 'up');
	my $token = session_send($s,
		"CREATE TABLE wh.public.t$n AS SELECT id, label FROM src");
	ok($fp->wait_hit($id), "$name: COMMIT PREPARED is on its way");
	$remote->stop('immediate');
	$fp->clear;
	my ($out, $err) = session_wait($s, $token, 60);
	unlike($err // 'timed out', qr/ERROR|timed out/,
		"$name: the local commit stands");
	$remote->start;
	check_invariant(
		name      => $name,
		node      => $local,
		committed => 1,
		targets   => [ { pg => $remote, dbname => 'dw', table => "public.t$n",
			expect => $digest } ],
		jobs      => [ [ 'wh', "public.t$n", 'committed' ] ],
		timeout   => 20,
		resolve   => 1,
		session   => $s,
		session_ctas => "CREATE TABLE wh.public.after$n AS SELECT id FROM src");
	$s->quit;
}

$fp->stop;
$local->stop;
$remote->stop;
done_testing();
