
# Copyright (c) 2026, ctas_fed developers

# The fault proxy of test/lib/faultproxy.pl does what the fault suite relies
# on, against a real PostgreSQL and a real ClickHouse: it forwards; it drops
# a request the server then never sees; it loses the reply of a request the
# server ran; it stalls a reply until cleared; it resets mid-stream; it
# refuses connections; it matches URL-encoded ClickHouse queries; it counts
# hits and honours "times" and "skip"; a new rule never fires on data read
# before it.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use HTTP::Tiny;
use Time::HiRes qw(time usleep);

use CtasFed::Test;

my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $ch = start_clickhouse();

my $pp = start_fault_proxy($remote->port);
my @rcs;
my $cp = start_fault_proxy($ch->{http_port});

# psql through the PostgreSQL proxy: (exit code, stdout, stderr)
sub via_proxy
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	local $ENV{PGPASSWORD} = 'secret';
	IPC::Run::run(
		[
			'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-h', '127.0.0.1',
			'-p', $pp->port, '-U', 'loader', '-d', 'dw', '-c', $sql
		],
		'>', \$out, '2>', \$err,
		IPC::Run::timeout(60));
	chomp $out;
	return ($? >> 8, $out, $err);
}

sub remote_has
{
	my ($table) = @_;
	return $remote->safe_psql('dw',
		"SELECT count(*) FROM pg_class WHERE relname = '$table'");
}

# ClickHouse HTTP through its proxy, the SQL in the URL query string
sub ch_via_proxy
{
	my ($sql, $body) = @_;
	my $http = HTTP::Tiny->new(timeout => 30, keep_alive => 0);
	my $url = 'http://127.0.0.1:' . $cp->port . '/?'
	  . $http->www_form_urlencode({ query => $sql });
	return $http->request('POST', $url,
		{
			headers => {
				'X-ClickHouse-User' => 'default',
				'X-ClickHouse-Key'  => $ch->{password},
			},
			content => $body // '',
		});
}

# --- forwarding
my ($rc, $out, $err) = via_proxy('SELECT 40 + 2');
is("$rc:$out", "0:42", 'PostgreSQL: a statement through the proxy');
my $res = ch_via_proxy('SELECT 40 + 2');
is("$res->{status}:$res->{content}", "200:42\n",
	'ClickHouse: a query through the proxy');

# --- drop_request: the server never sees the statement
my $id = $pp->set_rule(match => 'CREATE TABLE dropped', action => 'drop_request');
($rc, $out, $err) = via_proxy('CREATE TABLE dropped (a int)');
isnt($rc, 0, 'drop_request: the client sees an error');
is($pp->hits($id), 1, 'drop_request: one hit');
is(remote_has('dropped'), '0', 'drop_request: the server never ran it');
$pp->clear;

# --- lose_reply: the server ran it, the client lost the reply
$id = $pp->set_rule(match => 'CREATE TABLE lost', action => 'lose_reply');
my $t0 = time;
($rc, $out, $err) = via_proxy('CREATE TABLE lost (a int)');
isnt($rc, 0, 'lose_reply: the client sees an error');
like($err, qr/server closed the connection|connection|terminat/i,
	'lose_reply: the client lost its connection');
cmp_ok(time - $t0, '<', 4, 'lose_reply: reset soon after the reply');
is($pp->hits($id), 1, 'lose_reply: one hit');
is(remote_has('lost'), '1', 'lose_reply: the server ran it');
$pp->clear;

# --- stall (dir down): the reply is held until the rule is cleared
$id = $pp->set_rule(match => 'SELECT 4242', action => 'stall', dir => 'down');
my ($sout, $serr) = ('', '');
my $h;
{
	local $ENV{PGPASSWORD} = 'secret';
	$h = IPC::Run::start(
		[
			'psql', '-XAtq', '-h', '127.0.0.1', '-p', $pp->port,
			'-U', 'loader', '-d', 'dw', '-c', 'SELECT 4242'
		],
		'>', \$sout, '2>', \$serr, IPC::Run::timeout(60));
}
ok($pp->wait_hit($id), 'stall: the rule fired');
usleep(300_000);
$h->pump_nb;
is($sout, '', 'stall: no reply while stalled');
ok($h->pumpable, 'stall: the client still waits');
$pp->clear;
$h->finish;
is($sout, "4242\n", 'stall: the reply arrives once cleared');

# --- stall (dir up): the request is held, the server does not see it
$id = $pp->set_rule(match => 'CREATE TABLE held', action => 'stall', dir => 'up');
($sout, $serr) = ('', '');
{
	local $ENV{PGPASSWORD} = 'secret';
	$h = IPC::Run::start(
		[
			'psql', '-XAtq', '-h', '127.0.0.1', '-p', $pp->port,
			'-U', 'loader', '-d', 'dw', '-c', 'CREATE TABLE held (a int)'
		],
		'>', \$sout, '2>', \$serr, IPC::Run::timeout(60));
}
ok($pp->wait_hit($id), 'stall up: the rule fired');
usleep(300_000);
is(remote_has('held'), '0', 'stall up: the server has not seen the request');
$pp->clear;
$h->finish;
is(remote_has('held'), '1', 'stall up: the request arrives once cleared');

# --- a new rule never fires on what a connection sent before it existed
{
	my ($in, $o, $e) = ('', '', '');
	local $ENV{PGPASSWORD} = 'secret';
	my $hs = IPC::Run::start(
		[
			'psql', '-XAtq', '-h', '127.0.0.1', '-p', $pp->port,
			'-U', 'loader', '-d', 'dw'
		],
		'<', \$in, '>', \$o, '2>', \$e, IPC::Run::timeout(60));
	$in .= "SELECT 'before';\n";
	$hs->pump until $o =~ /before/;
	$id = $pp->set_rule(match => 'before', action => 'drop_request');
	$in .= "SELECT 'after';\n";
	$hs->pump until $o =~ /after/ || !$hs->pumpable;
	like($o, qr/after/, 'old data does not fire a new rule');
	is($pp->hits($id), 0, 'no hit');
	$in .= "SELECT 'before again';\n";
	$hs->finish;
	is($pp->hits($id), 1, 'new data does');
	$pp->clear;
}

# --- skip
$id = $pp->set_rule(match => 'SELECT 8', action => 'drop_request', skip => 1);
@rcs = map { (via_proxy('SELECT 8'))[0] } 1 .. 3;
is(join(',', map { $_ ? 'err' : 'ok' } @rcs), 'ok,err,ok',
	'skip => 1: the second match fires');
$pp->clear;

# --- refuse, times
$id = $pp->set_rule(action => 'refuse', times => 2);
($rc) = via_proxy('SELECT 1');
isnt($rc, 0, 'refuse: the connection fails');
ok($pp->hits($id) >= 1, 'refuse: hit counted');
$pp->clear;

$id = $pp->set_rule(match => 'SELECT 7', action => 'drop_request', times => 2);
@rcs = map { (via_proxy('SELECT 7'))[0] } 1 .. 3;
is(join(',', map { $_ ? 'err' : 'ok' } @rcs), 'err,err,ok',
	'times => 2: fires twice, then forwards');
is($pp->hits($id), 2, 'times => 2: two hits');
$pp->clear;

# --- ClickHouse: URL-encoded match; the query never ran
$ch->query('CREATE TABLE default.ren_a (x UInt8) ENGINE = Memory');
$id = $cp->set_rule(match => 'RENAME TABLE', action => 'drop_request');
$res = ch_via_proxy('RENAME TABLE default.ren_a TO default.ren_b');
isnt($res->{status}, 200, 'ClickHouse drop_request: the client sees an error');
is($cp->hits($id), 1, 'ClickHouse: matched the URL-encoded query');
is($ch->query("SELECT count() FROM system.tables WHERE name = 'ren_a'"),
	"1\n", 'ClickHouse drop_request: the rename never ran');
$cp->clear;

# --- ClickHouse: lose_reply after the server ran it
$id = $cp->set_rule(match => 'RENAME TABLE', action => 'lose_reply');
$res = ch_via_proxy('RENAME TABLE default.ren_a TO default.ren_b');
isnt($res->{status}, 200, 'ClickHouse lose_reply: the client sees an error');
is($ch->query("SELECT count() FROM system.tables WHERE name = 'ren_b'"),
	"1\n", 'ClickHouse lose_reply: the rename ran');
$cp->clear;

# --- ClickHouse: reset mid-stream of an INSERT body
$ch->query('CREATE TABLE default.rst (x UInt32) ENGINE = Memory');
$id = $cp->set_rule(match => 'INSERT INTO', reset_after => 2000);
$res = ch_via_proxy('INSERT INTO default.rst FORMAT TSV',
	join('', map { "$_\n" } 1 .. 20000));
isnt($res->{status}, 200, 'reset_after: the INSERT fails');
is($cp->hits($id), 1, 'reset_after: one hit');
cmp_ok($cp->connections, '>=', 4, 'connections are counted');
$cp->clear;
$res = ch_via_proxy('SELECT 1');
is($res->{content}, "1\n", 'the proxy forwards again after clear');

$pp->stop;
ok(!$pp->is_running, 'stop');

done_testing();
