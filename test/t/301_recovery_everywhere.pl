
# Copyright (c) 2026, ctas_fed developers

# Recovery in every database, promptly, with no setting (issue 8, classes 1,
# 2 and part of 11).  The extension lives in an application database "app"
# (not "postgres"), and ctas_fed.resolver_naptime is an hour, so whatever
# gets resolved here is the launcher's resolver of "app", woken by backends
# and retrying with backoff:
#  - a resolver runs in "app", none in "postgres" (no extension there);
#  - a local crash after PREPARE: rolled back within 10 s of the restart;
#  - a lost COMMIT PREPARED (remote stopped at commit): the job stays in
#    doubt while the remote is down, and is committed within 10 s of the
#    remote coming back;
#  - a job whose local transaction aborted before anything was prepared
#    (crash mid-load) leaves in_doubt although its catalog is down, and the
#    in-doubt gauge drops to 0;
#  - a lost reply to PREPARE TRANSACTION (a relay of our own cuts the
#    connection after the server ran it): rolled back within 10 s;
#  - resolve_in_doubt() over many catalogs, one refusing connections and
#    two that never answer (PostgreSQL with connect_timeout 0, ClickHouse):
#    returns in bounded time, one row per failing catalog, and every
#    catalog name intact; the resolver still resolves meanwhile;
#  - a streaming job's long multibyte error is cut on a character boundary,
#    in ctas_fed.jobs and in its webhook;
#  - DROP EXTENSION stops the resolver; DROP DATABASE of a database with
#    the extension works as without it.

use strict;
use warnings;

use IO::Socket::INET;
use IPC::Run ();
use POSIX ();
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
my $rport = $remote->port;

my $local = new_cluster('local',
	conf => "ctas_fed.resolver_naptime = 3600\n"
	  . "ctas_fed.resolve_timeout = 3\n");
$local->safe_psql('postgres', 'CREATE DATABASE app');
postgres_catalog($local, $remote, name => 'good', dbname => 'app');
$local->safe_psql('app',
	'CREATE TABLE src AS SELECT g AS id, md5(g::text) AS t FROM generate_series(1, 5000) g');

# poll $sql in database $db of $node until it returns $expected, up to
# $secs seconds; returns the time it took, or undef
sub wait_for
{
	my ($node, $db, $sql, $expected, $secs) = @_;
	my $t0 = time;
	my $got = '';
	while (time - $t0 < ($secs // 30))
	{
		$got = $node->safe_psql($db, $sql);
		return time - $t0 if $got eq $expected;
		usleep(100_000);
	}
	diag "waited for [$sql] = [$expected], last got [$got]";
	return undef;
}

# psql -c $sql in database app, not waited for
sub start_app_psql
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $local->connstr('app'), '-c', $sql ],
		'>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

sub prepared
{
	return $remote->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts');
}

sub remote_has
{
	my ($table) = @_;
	return $remote->safe_psql('dw',
		"SELECT count(*) FROM pg_class WHERE relname = '$table'");
}

sub job_state
{
	my ($target) = @_;
	return $local->safe_psql('app',
		"SELECT state FROM ctas_fed.jobs WHERE target = 'public.$target' ORDER BY job_id DESC LIMIT 1");
}

sub resolvers
{
	my ($db) = @_;
	return "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed resolver' AND datname = '$db'";
}

# the launcher saved the registry with $text in it (a target, a gid)
sub wait_registry_has
{
	my ($text) = @_;
	my $file = $local->data_dir . '/pg_stat/ctas_fed_jobs.stat';
	foreach (1 .. 300)
	{
		return 1 if -f $file && index(slurp_file($file), $text) >= 0;
		usleep(100_000);
	}
	return 0;
}

# --- one resolver where the extension is, none elsewhere
ok(defined wait_for($local, 'postgres', resolvers('app'), '1'),
	'a resolver runs in the application database');
ok(defined wait_for($local, 'postgres', resolvers('postgres'), '0'),
	'no resolver stays in a database without the extension');

# --- a local crash after PREPARE, resolved at restart with no setting
my ($h, $out, $err) = start_app_psql(
	"SET ctas_fed.fault_point = 'after_prepare'; CREATE TABLE good.public.crash_prep AS SELECT * FROM src");
ok(defined wait_for($remote, 'postgres', 'SELECT count(*) FROM pg_prepared_xacts', '1'),
	'the remote transaction is prepared');
my $gid = $remote->safe_psql('postgres', 'SELECT gid FROM pg_prepared_xacts');
ok(wait_registry_has($gid), 'the registry is saved with the gid');
$local->stop('immediate');
$h->finish;
$local->start;
my ($rc, $stderr);
my $took = wait_for($remote, 'postgres', 'SELECT count(*) FROM pg_prepared_xacts', '0', 10);
ok(defined $took, 'crash after PREPARE: resolved within 10 s of the restart');
is(remote_has('crash_prep'), '0', 'rolled back: no remote table');
ok(defined wait_for($local, 'app',
		"SELECT state FROM ctas_fed.jobs WHERE target = 'public.crash_prep'", 'aborted', 10),
	'the job is recorded as aborted');

# --- a lost COMMIT PREPARED: woken resolver, backoff, not the naptime
($h, $out, $err) = start_app_psql(
	"SET ctas_fed.fault_point = 'after_commit_record:3'; CREATE TABLE good.public.lost_commit AS SELECT * FROM src");
ok(defined wait_for($remote, 'postgres', 'SELECT count(*) FROM pg_prepared_xacts', '1'),
	'prepared before the remote stops');
$remote->stop('fast');
$h->finish;
like($$err, qr/WARNING:  could not commit prepared transaction/, 'COMMIT warns');
is(job_state('lost_commit'), 'in_doubt', 'the job is in doubt');
ok(defined wait_for($local, 'app', "SELECT ctas_fed.metrics() ~ 'ctas_fed_in_doubt 1'", 't'),
	'the in-doubt gauge counts it');
# the resolver tries (and fails) meanwhile; what it cannot see stays in doubt
my $log_offset = -s $local->logfile;
$local->wait_for_log(qr/ctas_fed resolver: could not resolve catalog "good"/, $log_offset);
$log_offset = -s $local->logfile;
$local->wait_for_log(qr/ctas_fed resolver: could not resolve catalog "good"/, $log_offset);
pass('the resolver retries while the remote is down');
is(job_state('lost_commit'), 'in_doubt', 'committed locally, remote down: still in doubt');
$remote->start;
$took = wait_for($remote, 'postgres', 'SELECT count(*) FROM pg_prepared_xacts', '0', 10);
ok(defined $took, 'committed within 10 s of the remote coming back ('
	  . (defined $took ? sprintf('%.1f s', $took) : 'no') . ')');
is($remote->safe_psql('dw', 'SELECT count(*) FROM lost_commit'), '5000', 'with all its rows');
ok(defined wait_for($local, 'app',
		"SELECT state FROM ctas_fed.jobs WHERE target = 'public.lost_commit'", 'committed', 10),
	'the job is recorded as committed');

# --- aborted before anything was prepared: settled with the catalog down
($h, $out, $err) = start_app_psql(
	"CREATE TABLE good.public.cut AS SELECT id, t, pg_sleep(0.002) IS NULL AS s FROM src");
ok(defined wait_for($local, 'app',
		"SELECT count(*) FROM ctas_fed.jobs WHERE target = 'public.cut' AND state = 'running' AND rows > 0", '1'),
	'a load runs');
ok(wait_registry_has('public.cut'), 'the registry is saved with it running');
$local->stop('immediate');
$h->finish;
$remote->stop('fast');
$local->start;
ok(defined wait_for($local, 'app',
		"SELECT state FROM ctas_fed.jobs WHERE target = 'public.cut'", 'aborted', 10),
	'a job cut before PREPARE is aborted, with its catalog down');
like($local->safe_psql('app', 'SELECT ctas_fed.metrics()'),
	qr/^ctas_fed_in_doubt 0$/m, 'the in-doubt gauge drops to 0');
$remote->start;
is(prepared(), '0', 'nothing was prepared on the remote');

# --- a lost reply to PREPARE TRANSACTION
# A relay to the remote that, while $flag exists, passes on the message
# that carries PREPARE TRANSACTION, lets the server run it, and then cuts
# the connection instead of passing the reply back.
my $flag = PostgreSQL::Test::Utils::tempdir() . '/lose_prepare_reply';
my $relay_sock = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 20, ReuseAddr => 1)
  or die "could not listen: $!";
my $relay_port = $relay_sock->sockport;
my $relay_pid = fork();
die "fork failed" unless defined $relay_pid;
END { kill 'TERM', $relay_pid if $relay_pid; }
if ($relay_pid == 0)
{
	require IO::Select;
	$SIG{TERM} = sub { POSIX::_exit(0) };
	my $sel = IO::Select->new($relay_sock);
	my %peer;
	while (1)
	{
		foreach my $s ($sel->can_read)
		{
			if ($s == $relay_sock)
			{
				my $c = $relay_sock->accept or next;
				my $r = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $rport)
				  or do { close $c; next; };
				$peer{$c} = $r;
				$peer{$r} = $c;
				$sel->add($c, $r);
				next;
			}
			my $other = $peer{$s} or next;
			my $buf;
			my $n = sysread($s, $buf, 65536);
			if (!$n)
			{
				$sel->remove($s, $other);
				delete @peer{ $s, $other };
				close $s;
				close $other;
				next;
			}
			syswrite($other, $buf);
			if (-e $flag && $buf =~ /PREPARE TRANSACTION/)
			{
				unlink $flag;
				usleep(500_000);    # the server runs it; its reply is lost
				$sel->remove($s, $other);
				delete @peer{ $s, $other };
				close $s;
				close $other;
			}
		}
	}
}
close $relay_sock;
postgres_catalog($local, undef, name => 'relayed', port => $relay_port,
	dbname => 'app');
open my $ff, '>', $flag or die;
close $ff;
my $log_offset2 = -s $local->logfile;
($rc, $out, $err) = $local->psql('app',
	'CREATE TABLE relayed.public.lost_prepare AS SELECT * FROM src');
isnt($rc, 0, 'COMMIT fails when the reply to PREPARE is lost');
ok(!-e $flag, 'the PREPARE reached the remote');
my $lost_gid = $local->safe_psql('app',
	"SELECT gid FROM ctas_fed.jobs WHERE target = 'public.lost_prepare'");
like($lost_gid, qr/^ctas_fed_\d+_\d+_\d+$/, 'the job names the gid it sent');
$took = wait_for($remote, 'postgres', 'SELECT count(*) FROM pg_prepared_xacts', '0', 10);
ok(defined $took, 'nothing stays prepared: resolved within 10 s');
ok(defined eval {
		$local->wait_for_log(qr/catalog "relayed": \Q$lost_gid\E: rolled back/, $log_offset2);
	}, 'the resolver rolled back the transaction that PREPARE left');
is(remote_has('lost_prepare'), '0', 'no remote table');
ok(defined wait_for($local, 'app',
		"SELECT state FROM ctas_fed.jobs WHERE target = 'public.lost_prepare'", 'aborted', 10),
	'the job is recorded as aborted');
kill 'TERM', $relay_pid;
waitpid($relay_pid, 0);
$relay_pid = 0;
$local->safe_psql('app', 'DROP SERVER relayed CASCADE');

# --- resolve_in_doubt() over many catalogs, some failing
my $refuse = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1, ReuseAddr => 1)
  or die "could not listen: $!";
my $refuse_port = $refuse->sockport;
close $refuse;    # nothing listens there now: connections are refused
my $hung = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 100, ReuseAddr => 1)
  or die "could not listen: $!";
my $hung_port = $hung->sockport;    # accepted by the kernel, never answered

my @names = map { sprintf('cat_%02d_%s', $_, 'x' x 40) } 1 .. 30;
postgres_catalog($local, $remote, name => $_, dbname => 'app') foreach @names;
postgres_catalog($local, undef, name => 'cat_15_refused', port => $refuse_port,
	dbname => 'app');
postgres_catalog($local, undef, name => 'cat_16_hung', port => $hung_port,
	options => { connect_timeout => 0 }, dbname => 'app');
clickhouse_catalog($local, undef, name => 'cat_17_hung_http',
	url => "http://127.0.0.1:$hung_port", options => { timeout => 3600 },
	password => 'x', dbname => 'app');
push @names, 'cat_15_refused', 'cat_16_hung', 'cat_17_hung_http', 'good';

my $t0 = time;
my $rows;
($rc, $rows, $stderr) = $local->psql('app',
	"SELECT catalog, action FROM ctas_fed.resolve_in_doubt() ORDER BY 1, 2");
my $elapsed = time - $t0;
is($rc, 0, 'resolve_in_doubt() does not stop at a failing catalog') or diag $stderr;
cmp_ok($elapsed, '<', 30, sprintf('and returns in bounded time (%.1f s)', $elapsed));
my %known = map { $_ => 1 } @names;
my @bad = grep { my ($c) = split /\|/; !$known{$c} } split /\n/, $rows;
is(scalar(@bad), 0, 'every catalog name comes back intact')
  or diag join("\n", @bad);
like($rows, qr/^cat_15_refused\|error: ./m, 'the refused catalog is an error row');
like($rows, qr/^cat_16_hung\|error: no answer within ctas_fed\.resolve_timeout \(3 s\)$/m,
	'the hung catalog is an error row after the deadline');
# A ClickHouse catalog is resolved from this cluster's durable records
# alone: with none recorded for it, the hung endpoint is never contacted.
unlike($rows, qr/^cat_17_hung_http\|/m,
	'a ClickHouse catalog with nothing recorded is not contacted, hung or not');
is($local->safe_psql('app', 'SELECT 1'), '1', 'the session is usable');

# the resolver is not stalled by them either: a lost commit still ends
($h, $out, $err) = start_app_psql(
	"SET ctas_fed.fault_point = 'after_commit_record:3'; CREATE TABLE good.public.lost_again AS SELECT * FROM src");
ok(defined wait_for($remote, 'postgres', 'SELECT count(*) FROM pg_prepared_xacts', '1'),
	'prepared before the remote stops');
$remote->stop('fast');
$h->finish;
is(job_state('lost_again'), 'in_doubt', 'the job is in doubt');
$remote->start;
$took = wait_for($remote, 'postgres', 'SELECT count(*) FROM pg_prepared_xacts', '0', 15);
ok(defined $took, 'resolved within 15 s with a hung catalog in the round ('
	  . (defined $took ? sprintf('%.1f s', $took) : 'no') . ')');
$local->safe_psql('app',
	'DROP SERVER cat_17_hung_http, cat_16_hung, cat_15_refused CASCADE');
close $hung;

# --- a long multibyte error is cut on a character boundary, in the view
# and in the webhook
my ($hook_url, $hook_log, $hook_port) = start_hook_receiver();
$local->safe_psql('app',
	"ALTER SERVER good OPTIONS (ADD notify_url 'http://127.0.0.1:$hook_port/hook')");
$local->safe_psql('app', q{
CREATE FUNCTION boom(i int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	IF i > 3 THEN
		RAISE EXCEPTION '%', repeat('é', 400);
	END IF;
	RETURN i;
END $$;
});
($rc, $out, $stderr) = $local->psql('app',
	"CREATE TABLE good.public.mb WITH (atomic = false, commit_every = 2) AS SELECT boom(id) FROM src");
isnt($rc, 0, 'the streaming load fails');
my $hex = $local->safe_psql('app',
	"SELECT encode(convert_to(error, 'UTF8'), 'hex') FROM ctas_fed.jobs WHERE target = 'public.mb'");
my $bytes = pack('H*', $hex);
cmp_ok(length($bytes), '>', 400, 'the error is kept, cut');
ok(utf8::decode($bytes), 'and is valid UTF-8');
my $hook = '';
foreach (1 .. 100)
{
	($hook) = grep { /"target": "public.mb".*"state": "failed"/ }
	  split /\n/, (-f $hook_log ? slurp_file($hook_log) : '');
	last if defined $hook;
	usleep(100_000);
}
ok(defined $hook, 'the webhook of the failed job arrives');
$hook //= '';
like($hook, qr/"error": "(?:\xc3\xa9){200,}"/, 'with the error, cut');
ok(utf8::decode($hook), 'as valid UTF-8');
stop_hook_receiver($hook_url);

# --- DROP EXTENSION stops the resolver
$local->safe_psql('postgres', 'CREATE DATABASE app2');
$local->safe_psql('app2', 'CREATE EXTENSION ctas_fed');
# a job makes the launcher start the resolver without waiting for a scan
$local->safe_psql('app2', qq{
CREATE SERVER g2 FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER g2 OPTIONS (user 'loader', password 'secret');
CREATE TABLE g2.public.in_app2 AS SELECT 1 AS a;
});
ok(defined wait_for($local, 'postgres', resolvers('app2'), '1'),
	'a database that starts using the extension gets a resolver');
$local->safe_psql('app2', 'DROP EXTENSION ctas_fed CASCADE');
ok(defined wait_for($local, 'postgres', resolvers('app2'), '0', 5),
	'DROP EXTENSION stops it');

# --- DROP DATABASE of a database with the extension
ok(defined wait_for($local, 'postgres', resolvers('app'), '1'), 'the resolver of app runs');
$t0 = time;
($rc, $out, $stderr) = $local->psql('postgres', 'DROP DATABASE app');
is($rc, 0, 'DROP DATABASE of a database with the extension succeeds') or diag $stderr;
cmp_ok(time - $t0, '<', 5, 'without waiting for the resolver');
is($local->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'app'"),
	'0', 'the database is gone');
is($local->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed resolver'"),
	'0', 'and no resolver is left');

is(prepared(), '0', 'no prepared transaction left on the remote');
done_testing();
