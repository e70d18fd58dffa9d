
# Copyright (c) 2026, ctas_fed developers

# What a non-superuser can reach through a ClickHouse catalog, and how fast
# a stalled ClickHouse lets go (issue 8, classes 7, 8 and 10):
#
#  - an HTTP endpoint that is not ClickHouse (small servers of this test,
#    answering 200, 500 and a redirect with a secret body): the secret
#    shows nowhere - not in the error of a CTAS, remote_tables() or
#    resolve_in_doubt(), not in ctas_fed.jobs, not in the server log;
#    a real ClickHouse exception is still shown;
#  - ctas_fed.allowed_hosts: superuser-only, checked when a non-superuser
#    sets url/host/hostaddr and again at connect time, for ClickHouse and
#    PostgreSQL catalogs; a superuser's catalog is not limited;
#  - password_required for ClickHouse mappings of non-superusers;
#  - cancel, statement_timeout and pg_terminate_backend against a
#    ClickHouse server stopped with SIGSTOP return within seconds; once it
#    runs again, resolve_in_doubt() leaves no _ctas_fed_ table and the
#    session loads again.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;
use IO::Socket::INET;
use POSIX ();

use CtasFed::Test;

my $ch = start_clickhouse();
# the worker's own resolver would race the assertions on leftovers
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $chpw  = $ch->{password};
my $churl = $ch->{url};

# a stopped ClickHouse must never outlive a failing test
my $ch_pid = $ch->{pid};
END { kill 'CONT', $ch_pid if $ch_pid; }

my $secret = 'metadata-secret-' . int(rand(1e9));

# --- a small HTTP server that is not ClickHouse
my @fake_pids;
END { kill 'KILL', $_ foreach @fake_pids; }

sub start_fake_http
{
	my (%o) = @_;
	my $port = free_port();
	my $srv  = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => $port,
		Listen    => 16,
		ReuseAddr => 1,
		Proto     => 'tcp') or die "cannot listen on 127.0.0.1:$port: $!";
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		# bounded: the server ends by itself after 10 minutes
		alarm(600);
		while (my $c = $srv->accept)
		{
			my $req = '';
			while ($req !~ /\r\n\r\n/)
			{
				my $n = sysread($c, $req, 65536, length $req);
				last unless $n;
			}
			if ($req =~ /^Content-Length:\s*(\d+)/mi)
			{
				my $want = $1;
				my (undef, $body) = split /\r\n\r\n/, $req, 2;
				$body //= '';
				while (length($body) < $want)
				{
					my $n = sysread($c, $body, $want - length $body,
						length $body);
					last unless $n;
				}
			}
			my $resp =
			    "HTTP/1.1 $o{status}\r\n"
			  . join('', map { "$_\r\n" } @{ $o{headers} || [] })
			  . "Content-Type: text/plain\r\n"
			  . 'Content-Length: '
			  . length($o{body})
			  . "\r\nConnection: close\r\n\r\n"
			  . $o{body};
			syswrite($c, $resp);
			close $c;
		}
		POSIX::_exit(0);
	}
	close $srv;
	push @fake_pids, $pid;
	return "http://127.0.0.1:$port";
}

my $fake200 = start_fake_http(status => '200 OK', body => "$secret\t$secret\n");
my $fake500 = start_fake_http(status => '500 Internal Server Error', body => $secret);
my $fake302 = start_fake_http(
	status  => '302 Found',
	headers => ["Location: $churl/"],
	body    => $secret);
my $fakech = start_fake_http(
	status  => '500 Internal Server Error',
	headers => ['X-ClickHouse-Server-Display-Name: fake'],
	body =>
	  "Code: 999, e.displayText() = DB::Exception: shown because it is ClickHouse's, e.what() = DB::Exception\n"
);

clickhouse_catalog($local, $ch, options => { connect_timeout => 2 });
$local->safe_psql('postgres', qq{
CREATE ROLE alice LOGIN;
GRANT USAGE ON FOREIGN DATA WRAPPER ctas_fed TO alice;
GRANT EXECUTE ON FUNCTION ctas_fed.resolve_in_doubt(name) TO alice;
});

# --- helpers (no assertions)

# run SQL as alice with verbose errors (SQLSTATE shown)
sub as_alice
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $local->psql('postgres',
		"\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', 'alice' ]);
	return ($ret, $out, $err);
}

sub as_super
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $local->psql('postgres',
		"\\set VERBOSITY verbose\n$sql");
	return ($ret, $out, $err);
}

sub set_allowed_hosts
{
	my ($value) = @_;
	$local->safe_psql('postgres',
		"ALTER SYSTEM SET ctas_fed.allowed_hosts = '$value'; SELECT pg_reload_conf();");
	# wait until a new session sees it
	foreach (1 .. 100)
	{
		return if $local->safe_psql('postgres', 'SHOW ctas_fed.allowed_hosts') eq $value;
		usleep(50_000);
	}
	die "ctas_fed.allowed_hosts did not become '$value'";
}

sub scratch_tables
{
	return $ch->query(
		"SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_')") + 0;
}

# --- class 8: answers of servers that are not ClickHouse are not shown

my ($ret, $out, $err);
my @seen;    # every output and error, checked for the secret at the end

foreach my $case ([ 'evil200', $fake200, 200 ], [ 'evil500', $fake500, 500 ],
	[ 'evil302', $fake302, 302 ])
{
	my ($srv, $url, $status) = @$case;

	($ret, $out, $err) = as_alice(qq{
CREATE SERVER $srv FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url '$url', connect_timeout '2');
CREATE USER MAPPING FOR alice SERVER $srv OPTIONS (user 'u', password 'p');});
	is($ret, 0, "$srv: a non-superuser creates a catalog at any URL (allowed_hosts empty)");

	($ret, $out, $err) = as_alice("CREATE TABLE $srv.dw.t AS SELECT 1 AS a");
	push @seen, $out, $err;
	like($err, qr/ERROR:  08001: "\Q$url\E" is not a ClickHouse server/,
		"$srv: CTAS says the endpoint is not ClickHouse");
	like($err, qr/DETAIL:  HTTP status $status\./, "$srv: with the HTTP status");
	unlike($err, qr/\Q$secret\E/, "$srv: CTAS error without the body");

	($ret, $out, $err) = as_alice("SELECT * FROM ctas_fed.remote_tables('$srv', 'dw')");
	push @seen, $out, $err;
	like($err, qr/is not a ClickHouse server/, "$srv: remote_tables() fails");
	unlike("$out$err", qr/\Q$secret\E/, "$srv: remote_tables() without the body");

	($ret, $out, $err) = as_alice("SELECT * FROM ctas_fed.resolve_in_doubt('$srv')");
	push @seen, $out, $err;
	unlike("$out$err", qr/\Q$secret\E/, "$srv: resolve_in_doubt() without the body");
}

# a redirect is not followed: the 302 above named the real ClickHouse
is($ch->query("SELECT count() FROM system.tables WHERE database = 'dw'") + 0,
	0, 'the redirect was not followed');

# a ClickHouse answer (its headers) is shown
($ret, $out, $err) = as_alice(qq{
CREATE SERVER fakech FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url '$fakech', connect_timeout '2');
CREATE USER MAPPING FOR alice SERVER fakech OPTIONS (user 'u', password 'p');
CREATE TABLE fakech.dw.t AS SELECT 1 AS a;});
like($err, qr/ClickHouse error 999: shown because it is ClickHouse's/,
	'an exception of a ClickHouse server is still shown');

my $jobs = $local->safe_psql('postgres',
	'SELECT coalesce(string_agg(j::text, E\'\n\'), \'\') FROM ctas_fed.jobs j');
unlike($jobs, qr/\Q$secret\E/, 'ctas_fed.jobs holds no body');
unlike(join("\n", @seen), qr/\Q$secret\E/, 'no output showed the body');
my $log = slurp_file($local->logfile);
unlike($log, qr/\Q$secret\E/, 'the server log holds no body');
like($log, qr/is not a ClickHouse server/, 'the server log has the errors');

# --- class 7: a non-superuser's ClickHouse mapping needs a password

($ret, $out, $err) = as_alice(qq{
CREATE SERVER alake FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url '$churl', connect_timeout '2');
CREATE USER MAPPING FOR alice SERVER alake OPTIONS (user 'default');});
is($ret, 0, 'alice has a mapping without password');
($ret, $out, $err) = as_alice('CREATE TABLE alake.dw.nopw AS SELECT 1 AS a');
like($err, qr/ERROR:  2F003: password is required/,
	'a non-superuser\'s ClickHouse mapping without password is refused');
like($err, qr/HINT:  .*password_required/, 'the hint names password_required');
($ret, $out, $err) = as_alice(
	"ALTER USER MAPPING FOR alice SERVER alake OPTIONS (ADD password_required 'false')");
like($err, qr/password_required=false is superuser-only/,
	'alice cannot relax it herself');
($ret, $out, $err) = as_alice(
	"ALTER USER MAPPING FOR alice SERVER alake OPTIONS (ADD password '')");
($ret, $out, $err) = as_alice('CREATE TABLE alake.dw.nopw AS SELECT 1 AS a');
like($err, qr/ERROR:  2F003: password is required/, 'an empty password is no password');
$local->safe_psql('postgres',
	"ALTER USER MAPPING FOR alice SERVER alake OPTIONS (ADD password_required 'false')");
($ret, $out, $err) = as_alice('CREATE TABLE alake.dw.nopw AS SELECT 1 AS a');
unlike($err, qr/2F003/, 'password_required false, set by a superuser, lets it through');
like($err, qr/ClickHouse error 19[34]/, '(and ClickHouse itself refuses the empty password)');
$local->safe_psql('postgres', qq{
ALTER USER MAPPING FOR alice SERVER alake
  OPTIONS (DROP password_required, SET password '$chpw')});
($ret, $out, $err) = as_alice('CREATE TABLE alake.dw.withpw AS SELECT 1 AS a');
is($ret, 0, 'with its password, alice loads');
is($ch->query('SELECT count() FROM dw.withpw') + 0, 1, 'the row is there');
# a superuser's catalog: the PUBLIC mapping of lake works for the superuser
($ret, $out, $err) = as_super('CREATE TABLE lake.dw.su AS SELECT 1 AS a');
is($ret, 0, 'the superuser\'s catalog is unchanged');

# --- ctas_fed.allowed_hosts

($ret, $out, $err) = as_alice("SET ctas_fed.allowed_hosts = ''");
like($err, qr/permission denied to set parameter "ctas_fed.allowed_hosts"/,
	'the setting is superuser-only');
($ret, $out, $err) = as_super("SET ctas_fed.allowed_hosts = '10.0.0.0/33'");
like($err, qr/invalid value for parameter "ctas_fed.allowed_hosts"/, 'a bad prefix is refused');
($ret, $out, $err) = as_super("SET ctas_fed.allowed_hosts = 'a b'");
like($err, qr/invalid value for parameter "ctas_fed.allowed_hosts"/, 'a bad name is refused');

set_allowed_hosts('10.1.0.0/16, ClickHouse.Example, ::1');

# validation time
($ret, $out, $err) = as_alice(qq{
CREATE SERVER blocked FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url 'http://169.254.169.254')});
like($err, qr/ERROR:  42501: host "169.254.169.254" in option "url" is not allowed/,
	'a non-superuser cannot name an unlisted host');
like($err, qr/HINT:  .*ctas_fed\.allowed_hosts/, 'the hint names the setting');
($ret, $out, $err) = as_alice(qq{
CREATE SERVER ok1 FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url 'http://clickhouse.example:8123');
CREATE SERVER ok2 FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url 'http://10.1.200.3:8123');
CREATE SERVER ok3 FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url 'http://[::1]:8123');
CREATE SERVER ok4 FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host 'CLICKHOUSE.example', hostaddr '10.1.0.1');});
is($ret, 0, 'names (any case), addresses in a prefix and IPv6 literals are allowed')
  or diag($err);
($ret, $out, $err) = as_alice(qq{
CREATE SERVER bad2 FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url 'http://10.2.0.1:8123')});
like($err, qr/42501: host "10.2.0.1" in option "url" is not allowed/, 'outside the prefix');
($ret, $out, $err) = as_alice(qq{
CREATE SERVER bad3 FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host 'clickhouse.example,evil.example')});
like($err, qr/42501: host "evil.example" in option "host" is not allowed/,
	'every host of a libpq host list is checked');
($ret, $out, $err) = as_alice(
	"ALTER SERVER ok4 OPTIONS (SET hostaddr '192.168.1.1')");
like($err, qr/42501: host "192.168.1.1" in option "hostaddr" is not allowed/,
	'ALTER SERVER is checked too');

# connect time: alice's catalogs made while the list was open
($ret, $out, $err) = as_alice('CREATE TABLE alake.dw.blocked AS SELECT 1 AS a');
like($err, qr/ERROR:  42501: catalog "alake" may not connect to host "127.0.0.1"/,
	'connect time: the ClickHouse catalog of a non-superuser is refused');
is($ch->query('EXISTS TABLE dw.blocked') + 0, 0, 'nothing was created');
($ret, $out, $err) = as_alice("SELECT * FROM ctas_fed.remote_tables('alake', 'dw')");
like($err, qr/42501: catalog "alake" may not connect/, 'remote_tables() too');

$local->safe_psql('postgres', qq{
CREATE USER MAPPING FOR alice SERVER ok4 OPTIONS (user 'u', password 'p');
ALTER SERVER ok4 OPTIONS (SET host '127.0.0.1', DROP hostaddr);});
($ret, $out, $err) = as_alice('CREATE TABLE ok4.public.t AS SELECT 1 AS a');
like($err, qr/ERROR:  42501: catalog "ok4" may not connect to host "127.0.0.1"/,
	'connect time: the PostgreSQL catalog of a non-superuser is refused');

# a superuser's catalog is not limited
($ret, $out, $err) = as_super('CREATE TABLE lake.dw.su2 AS SELECT 1 AS a');
is($ret, 0, 'the superuser\'s catalog reaches an unlisted host') or diag($err);

set_allowed_hosts('127.0.0.0/8');
($ret, $out, $err) = as_alice('CREATE TABLE alake.dw.allowed AS SELECT g FROM generate_series(1, 7) g');
is($ret, 0, 'once listed, alice loads') or diag($err);
is($ch->query('SELECT count() FROM dw.allowed') + 0, 7, 'all 7 rows');
set_allowed_hosts(' , ');
($ret, $out, $err) = as_alice('CREATE TABLE alake.dw.open AS SELECT 1 AS a');
is($ret, 0, 'a list of blanks and commas limits nothing') or diag($err);
set_allowed_hosts('');

# --- class 10: a ClickHouse server that stops answering

# an interactive psql session, to run statements one after another
sub bg_session_start
{
	my %s = (in => '', out => '', err => '');
	$s{h} = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $local->connstr('postgres') ],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err});
	return \%s;
}

# send sql; with a timeout, wait for its end (true when it ended)
sub bg_session_send
{
	my ($s, $sql) = @_;
	$s->{mark} = 'done' . int(rand(1e9));
	$s->{out} = '';
	$s->{err} = '';
	$s->{in} .= "$sql;\n\\echo $s->{mark}\n";
	$s->{h}->pump_nb;
}

sub bg_session_wait
{
	my ($s, $timeout) = @_;
	my $deadline = time + $timeout;
	while (time < $deadline)
	{
		$s->{h}->pump_nb;
		return 1 if $s->{out} =~ /\Q$s->{mark}\E/;
		usleep(20_000);
	}
	return 0;
}

sub wait_ch_insert
{
	foreach (1 .. 300)
	{
		my $n = $ch->query(
			"SELECT count() FROM system.processes WHERE startsWith(query_id, 'ctas_fed_') AND query LIKE 'INSERT INTO%_ctas_fed_stage_%'");
		return 1 if $n + 0 > 0;
		usleep(100_000);
	}
	return 0;
}

# no query of ours runs any more on ClickHouse (bounded wait)
sub no_query_left
{
	foreach (1 .. 150)
	{
		return 1 if $ch->query(
			"SELECT count() FROM system.processes WHERE startsWith(query_id, 'ctas_fed_')") + 0 == 0;
		usleep(200_000);
	}
	return 0;
}

# after SIGCONT: resolve until nothing of ours is left (bounded)
sub resolved_clean
{
	foreach (1 .. 150)
	{
		$local->psql('postgres', 'SELECT * FROM ctas_fed.resolve_in_doubt()');
		return 1 if scratch_tables() == 0;
		usleep(200_000);
	}
	return 0;
}

# 50 million rows that stream from the first one (a function in FROM is
# materialized first: generate_series(1, 50000000) alone took seconds of
# tuplestore before ClickHouse saw its INSERT)
my $big = q{SELECT a * 100000 + b AS id, repeat(md5((a * 100000 + b)::text), 8) AS pad }
  . q{FROM generate_series(0, 499) a, generate_series(1, 100000) b};

# cancel mid-INSERT
my $s = bg_session_start();
bg_session_send($s, 'SELECT pg_backend_pid()');
ok(bg_session_wait($s, 30), 'session started');
my ($bpid) = $s->{out} =~ /^(\d+)$/m;
bg_session_send($s, "CREATE TABLE lake.dw.stall_cancel AS $big");
ok(wait_ch_insert(), 'ClickHouse runs the INSERT');
kill 'STOP', $ch_pid;
my $t0 = time;
$local->safe_psql('postgres', "SELECT pg_cancel_backend($bpid)");
ok(bg_session_wait($s, 60), 'the canceled CTAS returned');
my $took = time - $t0;
cmp_ok($took, '<', 5, 'cancel against a stopped ClickHouse returns within seconds');
like($s->{err}, qr/ERROR:  canceling statement due to user request/, 'as a cancel');

# statement_timeout, the server stopped before the statement
$t0 = time;
bg_session_send($s, "SET statement_timeout = '2s'; CREATE TABLE lake.dw.stall_timeout AS SELECT 1 AS a");
ok(bg_session_wait($s, 60), 'the timed-out CTAS returned');
$took = time - $t0;
cmp_ok($took, '<', 6, 'statement_timeout against a stopped ClickHouse returns within seconds');
like($s->{err}, qr/ERROR:  canceling statement due to statement timeout/, 'as a timeout');

kill 'CONT', $ch_pid;
ok(resolved_clean(), 'once ClickHouse runs again, the resolver leaves no scratch table');
ok(no_query_left(), 'and no query of ours runs on ClickHouse');
is($ch->query('EXISTS TABLE dw.stall_cancel') + 0, 0, 'no canceled table');
is($ch->query('EXISTS TABLE dw.stall_timeout') + 0, 0, 'no timed-out table');

bg_session_send($s, "RESET statement_timeout; CREATE TABLE lake.dw.after_stall AS SELECT g FROM generate_series(1, 1000) g");
ok(bg_session_wait($s, 60), 'the session runs another CTAS');
is($s->{err}, '', 'without error');
is($ch->query('SELECT count() FROM dw.after_stall') + 0, 1000, 'and loads all rows');
$s->{in} .= "\\q\n";
$s->{h}->finish;

# pg_terminate_backend mid-INSERT
my ($h, $hout, $herr) = start_psql($local, "CREATE TABLE lake.dw.stall_term AS $big");
my $tpid = wait_active($local, 'CREATE TABLE lake.dw.stall_term%');
ok(defined $tpid, 'the CTAS to terminate runs');
ok(wait_ch_insert(), 'ClickHouse runs its INSERT');
kill 'STOP', $ch_pid;
$t0 = time;
$local->safe_psql('postgres', "SELECT pg_terminate_backend($tpid)");
$h->finish;
my $gone = 0;
foreach (1 .. 300)
{
	if ($local->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE pid = $tpid") == 0)
	{
		$gone = 1;
		last;
	}
	usleep(20_000);
}
$took = time - $t0;
ok($gone, 'the terminated backend exited');
cmp_ok($took, '<', 5, 'pg_terminate_backend against a stopped ClickHouse takes seconds');
kill 'CONT', $ch_pid;
ok(resolved_clean(), 'after termination, the resolver leaves no scratch table');
ok(no_query_left(), 'and no query of ours runs on ClickHouse');
is($ch->query('EXISTS TABLE dw.stall_term') + 0, 0, 'no terminated table');
is($local->safe_psql('postgres', 'SELECT 1'), '1', 'the server is up');

done_testing();
