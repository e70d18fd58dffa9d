
# Copyright (c) 2026, ctas_fed developers

# A hostile MySQL server (a proxy in front of a real MariaDB that speaks
# the protocol) asks the client for a local file of its choosing:
#   - in reply to a plain query (the table check before a load);
#   - in reply to our own LOAD DATA, with the file name changed to
#     /etc/passwd;
#   - in reply to a query of resolve_in_doubt().
# The handler serves only the stream its statement started: each request
# is refused, nothing of the file reaches the "server", the statement
# fails with an error that says so, and the session is never used again.
# Also: names with backquotes, quotes and backslashes stay names; a table
# name of the scratch shape is refused; a non-superuser needs a password
# and a host that ctas_fed.allowed_hosts lists; no password appears in an
# error, the jobs or the catalogs view.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IO::Select;
use IO::Socket::INET;
use POSIX ();

use CtasFed::Test;

my $my    = start_mariadb(password => 'Sup3r-s3cret');
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $dir   = PostgreSQL::Test::Utils::tempdir('hostile');

# --- the hostile proxy: one forked child per connection
#   mode inject:  a COM_QUERY containing $trigger is not forwarded; the
#                 client gets a LOCAL INFILE request for /etc/passwd, what
#                 it sends back is kept in $dir/capture, then an ERR packet
#   mode rewrite: a COM_QUERY containing $trigger is forwarded, and the
#                 server's LOCAL INFILE request is rewritten to /etc/passwd;
#                 what the client sends back is kept in $dir/capture
sub hostile_proxy
{
	my ($mode, $trigger) = @_;
	my $port = free_port();
	my $listener = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
		LocalPort => $port, Listen => 16, ReuseAddr => 1)
	  or die "listen: $!";
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid)
	{
		close $listener;
		return ($pid, $port);
	}
	my $parent = getppid();
	# a copy of the test: no handler that would stop the test's servers
	$SIG{$_} = 'DEFAULT' foreach qw(TERM INT HUP);
	$SIG{CHLD} = 'IGNORE';
	while (1)
	{
		my $sel = IO::Select->new($listener);
		POSIX::_exit(0) if getppid() != $parent;
		next unless $sel->can_read(0.5);
		my $c = $listener->accept or next;
		my $child = fork();
		if (defined $child && $child == 0)
		{
			proxy_conn($c, $mode, $trigger);
			POSIX::_exit(0);
		}
		close $c;
	}
}

sub packet
{
	my ($seq, $payload) = @_;
	return substr(pack('V', length $payload), 0, 3) . chr($seq) . $payload;
}

sub proxy_conn
{
	my ($c, $mode, $trigger) = @_;
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $my->{port})
	  or return;
	my ($up, $down) = ('', '');
	my $rewrite_next = 0;
	my $capturing = 0;
	my $capture = '';
	my $sel = IO::Select->new($c, $s);
	while (1)
	{
		my @ready = $sel->can_read(10);
		last unless @ready;
		foreach my $fh (@ready)
		{
			my $buf;
			my $n = sysread($fh, $buf, 65536);
			return unless $n;
			if ($fh == $s)
			{
				if ($rewrite_next)
				{
					$down .= $buf;
					next if length $down < 4;
					my $len = unpack('V', substr($down, 0, 3) . "\0");
					next if length $down < 4 + $len;
					my $seq = ord(substr($down, 3, 1));
					my $payload = substr($down, 4, $len);
					if (substr($payload, 0, 1) eq "\xfb")
					{
						syswrite($c, packet($seq, "\xfb/etc/passwd") . substr($down, 4 + $len));
						$capturing = 1;
					}
					else
					{
						syswrite($c, $down);
					}
					$down = '';
					$rewrite_next = 0;
					next;
				}
				syswrite($c, $buf);
				next;
			}
			# client -> server, packet by packet
			$up .= $buf;
			while (length $up >= 4)
			{
				my $len = unpack('V', substr($up, 0, 3) . "\0");
				last if length $up < 4 + $len;
				my $pkt = substr($up, 0, 4 + $len, '');
				my $seq = ord(substr($pkt, 3, 1));
				my $payload = substr($pkt, 4);
				if ($capturing)
				{
					$capture .= $payload;
					if ($len == 0)
					{
						$capturing = 0;
						save_capture($capture);
						if ($mode eq 'inject')
						{
							syswrite($c, packet($seq + 1,
								"\xff" . pack('v', 1148) . '#42000' . 'refused by the hostile proxy'));
							next;
						}
					}
					next if $mode eq 'inject';
					syswrite($s, $pkt);
					next;
				}
				if ($seq == 0 && substr($payload, 0, 1) eq "\x03"
					&& index($payload, $trigger) >= 0)
				{
					if ($mode eq 'inject')
					{
						syswrite($c, packet(1, "\xfb/etc/passwd"));
						$capturing = 1;
						$capture = '';
						save_capture('(asked)');
						next;
					}
					$rewrite_next = 1;
				}
				syswrite($s, $pkt);
			}
		}
	}
	save_capture($capture) if $capturing;
	return;
}

sub save_capture
{
	my ($data) = @_;
	open my $fh, '>', "$dir/capture" or die;
	print $fh $data;
	close $fh;
	return;
}

sub read_capture
{
	open my $fh, '<', "$dir/capture" or return undef;
	local $/;
	my $d = <$fh>;
	close $fh;
	unlink "$dir/capture";
	return $d;
}

sub scratch
{
	return $my->sql(q{SELECT count(*) FROM information_schema.tables WHERE table_name LIKE '\_ctas\_fed\_%'});
}

mysql_catalog($local, $my);

# --- a local file requested in reply to a plain query
my ($p1, $port1) = hostile_proxy('inject', 'information_schema.schemata');
mysql_catalog($local, $my, name => 'evil1', port => $port1, extension => 0);
my ($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE evil1.shop.x AS SELECT 1 AS a});
isnt($rc, 0, 'plain query answered with a file request: the statement fails');
like($err, qr/MySQL catalog "evil1"/, 'and names the catalog');
my $cap = read_capture();
ok(defined $cap, 'the proxy did ask');
unlike($cap // '', qr/root:/, 'nothing of /etc/passwd was sent');
is($cap, '', 'nothing at all but the empty packet');

# --- our LOAD DATA answered with a request for another file
my ($p2, $port2) = hostile_proxy('rewrite', 'LOAD DATA');
mysql_catalog($local, $my, name => 'evil2', port => $port2, extension => 0);
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE evil2.shop.y AS SELECT g FROM generate_series(1, 10) g});
isnt($rc, 0, 'LOAD DATA answered with a request for /etc/passwd: the statement fails');
like($err, qr/asked for a local file, which ctas_fed refused/, 'and says why');
$cap = read_capture();
ok(defined $cap, 'the server was asked for /etc/passwd');
unlike($cap // '', qr/root:/, 'nothing of /etc/passwd was sent');
unlike($cap // '', qr/^1$/m, 'nor the rows of the stream');
is(scratch(), '0', 'the staging table was dropped');
is($my->sql(q{SELECT count(*) FROM information_schema.tables WHERE table_name = 'y'}), '0', 'no table');

# the same through resolve_in_doubt: an XA RECOVER answered with a request
my ($p3, $port3) = hostile_proxy('inject', 'XA RECOVER');
mysql_catalog($local, $my, name => 'evil3', port => $port3, extension => 0);
$local->safe_psql('postgres', q{SET ctas_fed.fault_point = ''});
($rc, $out, $err) = $local->psql('postgres', q{SELECT * FROM ctas_fed.resolve_in_doubt('evil3')});
unlike(read_capture() // '', qr/root:/, 'resolve_in_doubt sends no file either');
kill 'TERM', $p1, $p2, $p3;

# --- names are quoted, never spliced
$my->sql("CREATE DATABASE `we``ird'db`");
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE shop."we`ird'db"."t`1; DROP DATABASE shop; --" ("c`1", "c'2") AS SELECT 1, 'x'});
is($rc, 0, 'odd names work') or diag($err);
is($my->sql("SELECT `c``1`, `c'2` FROM `we``ird'db`.`t``1; DROP DATABASE shop; --`"), "1\tx", 'as names');
is($my->sql(q{SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'shop'}), '1', 'nothing injected');
($rc, $out, $err) = $local->psql('postgres', q{CREATE TABLE shop.shop._CTAS_FED_stage_1 AS SELECT 1 AS a});
like($err, qr/is reserved/, 'a scratch-shaped name is refused');

# --- non-superusers: password required, allowed_hosts, no secrets shown
$local->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
CREATE SERVER alices FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql', host '127.0.0.1', port '} . $my->{port} . q{');
ALTER SERVER alices OWNER TO alice;
GRANT USAGE ON FOREIGN SERVER alices TO alice;
CREATE USER MAPPING FOR alice SERVER alices OPTIONS (user 'loader');
});
($rc, $out, $err) = $local->psql('postgres', q{SET ROLE alice; CREATE TABLE alices.shop.a1 AS SELECT 1 AS a});
like($err, qr/password is required/, 'a non-superuser needs a password');
($rc, $out, $err) = $local->psql('postgres', q{SET ROLE alice; ALTER USER MAPPING FOR alice SERVER alices OPTIONS (ADD password_required 'false')});
like($err, qr/superuser/, 'and cannot waive it');
$local->safe_psql('postgres', q{ALTER USER MAPPING FOR alice SERVER alices OPTIONS (ADD password 'wrong-Pa55')});
($rc, $out, $err) = $local->psql('postgres', q{SET ROLE alice; CREATE TABLE alices.shop.a1 AS SELECT 1 AS a});
like($err, qr/could not connect to MySQL catalog "alices"/, 'a wrong password fails');
unlike($err, qr/wrong-Pa55/, 'without the password in the error');
($rc, $out, $err) = $local->psql('postgres', q{SET ctas_fed.allowed_hosts = '10.0.0.1'; SET ROLE alice; CREATE TABLE alices.shop.a1 AS SELECT 1 AS a});
like($err, qr/allowed_hosts|not allowed|not listed/, 'a host outside ctas_fed.allowed_hosts is refused');
$local->safe_psql('postgres', q{ALTER USER MAPPING FOR alice SERVER alices OPTIONS (SET password 'Sup3r-s3cret')});
($rc, $out, $err) = $local->psql('postgres', q{SET ROLE alice; CREATE TABLE alices.shop.a1 AS SELECT 1 AS a});
is($rc, 0, 'with the password it works') or diag($err);
my $everything = $local->safe_psql('postgres', q{SELECT (SELECT string_agg(j::text, ' ') FROM ctas_fed.jobs j) || (SELECT string_agg(c::text, ' ') FROM ctas_fed.catalogs c)});
unlike($everything, qr/Sup3r-s3cret|wrong-Pa55/, 'no password in the jobs or the catalogs view');
# the log of the test's own statements (log_statement = all) aside
my $log = join('', grep { !/LOG:  statement: |STATEMENT:  / } split /^/, slurp_file($local->logfile));
like($log, qr/could not connect to MySQL catalog "alices"/, 'the server log has the errors');
unlike($log, qr/Sup3r-s3cret|wrong-Pa55/, 'but no password');

done_testing();
