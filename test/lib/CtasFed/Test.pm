
# Copyright (c) 2026, ctas_fed developers

=pod

=head1 NAME

CtasFed::Test - servers for the ctas_fed TAP tests

=head1 SYNOPSIS

  use PostgreSQL::Test::Utils;
  use Test::More;
  use lib 'test/lib';            # test/run.sh puts test/lib in PERL5LIB anyway
  use CtasFed::Test;

  # local PostgreSQL with test/ctas_fed.conf (shared_preload_libraries ...)
  my $node = new_cluster('local');

  # a plain second PostgreSQL: max_prepared_transactions = 10, TCP on
  # 127.0.0.1, a role with a password, a database it owns
  my $remote = new_remote_cluster('remote',
	  host_auth => 'scram-sha-256',
	  roles     => { loader => 'secret' },
	  databases => { dw => 'loader' });
  my $connstr = tcp_connstr($remote, dbname => 'dw', user => 'loader',
	  password => 'secret');

  # a private ClickHouse server, as the OS user running the test
  my $ch = start_clickhouse();
  my $body = $ch->query('SELECT version()');     # dies unless HTTP 200
  my $res  = $ch->request('SELECT 1', password => 'wrong');  # never dies
  $ch->stop;

  # a fault proxy in front of a server (see test/lib/faultproxy.pl)
  my $fp = start_fault_proxy($ch->{http_port});
  my $id = $fp->set_rule(match => 'RENAME TABLE', action => 'lose_reply');
  ... point the catalog at 127.0.0.1:$fp->port, run the statement ...
  $fp->wait_hit($id) or die;
  $fp->clear;

  my $pgw = start_pushgateway();
  my $metrics = $pgw->get('/metrics');
  $pgw->stop;

=head1 DESCRIPTION

Helpers shared by every test in F<test/t/>.  They start servers and return
handles; they contain no assertions (tests assert with Test::More).

Every server listens on 127.0.0.1 only, on a port found free by
PostgreSQL::Test::Cluster::get_free_port() (which also reserves it against
parallel tests).  Every server started here is stopped by C<stop>, when its
handle is destroyed, or at the latest in this module's END block, so that a
test that dies, or is stopped by SIGINT, SIGTERM or SIGHUP, does not
leave one running.  (A handle that goes out of scope keeps its server
running until C<stop> or the end of the test.)  The files of ClickHouse and the
Pushgateway live in a PostgreSQL::Test::Utils::tempdir, that is below
F<$TESTDIR/tmp_check>, kept when a test fails.

The ClickHouse configuration is written by F<test/lib/clickhouse-config.sh>,
which F<test/demo.sh> uses too.

=head1 FUNCTIONS

=over

=cut

package CtasFed::Test;

use strict;
use warnings;

use Carp;
use Digest::MD5 ();
use Exporter 'import';
use File::Basename qw(dirname);
use File::Spec;
use HTTP::Tiny;
use IPC::Run ();
use IO::Socket::INET;
use POSIX qw(WNOHANG);
use Test::More ();
use Time::HiRes qw(time usleep);

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils ();

our @EXPORT = qw(
  start_psql
  wait_active
  new_cluster
  new_remote_cluster
  tcp_connstr
  start_clickhouse
  start_pushgateway
  start_fault_proxy
  check_invariant
  pg_digest
  ch_digest
  sql_digest
  session_start
  session_send
  session_wait
  session_run
  free_port
  port_is_open
);

# folder of this module's tree: test/lib
my $libdir = File::Spec->rel2abs(dirname(__FILE__) . '/..');

# Servers started by this process and not yet stopped.  Strong references:
# a handle is never destroyed before the END block below, which stops what
# is left.  (Weak ones would let the handles of file-scoped variables be
# freed when the main program ends, before END, and a DESTROY interrupted
# by a pending signal would then leave its server running.)
my @live_servers;

=pod

=item free_port()

A TCP port free on 127.0.0.1 and reserved for this test process (the
reservation mechanism of PostgreSQL::Test::Cluster, shared with the
PostgreSQL nodes and with parallel tests).

=cut

sub free_port
{
	return PostgreSQL::Test::Cluster::get_free_port();
}

=pod

=item port_is_open($port)

True when something accepts TCP connections on 127.0.0.1:$port.

=cut

sub port_is_open
{
	my ($port) = @_;
	my $sock = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $port,
		Proto    => 'tcp',
		Timeout  => 3);
	return 0 unless $sock;
	close $sock;
	return 1;
}

# path of test/ctas_fed.conf: next to this module's tree, else $TESTDIR
sub _ctas_fed_conf_path
{
	my @candidates = ("$libdir/../ctas_fed.conf");
	push @candidates, "$ENV{TESTDIR}/test/ctas_fed.conf" if $ENV{TESTDIR};
	foreach my $path (@candidates)
	{
		return $path if -f $path;
	}
	croak "test/ctas_fed.conf not found (looked at @candidates)";
}

# Quote a string as an SQL literal.
sub _sql_literal
{
	my ($s) = @_;
	$s =~ s/'/''/g;
	return "'$s'";
}

# Quote a string as an SQL identifier.
sub _sql_ident
{
	my ($s) = @_;
	$s =~ s/"/""/g;
	return qq("$s");
}

# Quote a libpq connection string value.
sub _conninfo_value
{
	my ($s) = @_;
	$s =~ s/([\\'])/\\$1/g;
	return "'$s'";
}

# Shared part of new_cluster and new_remote_cluster: new, init, conf,
# pg_hba, start, roles and databases.
sub _make_node
{
	my ($name, $conf, %opts) = @_;

	my %new_params;
	foreach my $k (qw(port own_host install_path))
	{
		$new_params{$k} = delete $opts{$k} if exists $opts{$k};
	}
	my $init_params = delete $opts{init}      // {};
	my $extra_conf  = delete $opts{conf}      // '';
	my $host_auth   = delete $opts{host_auth} // 'trust';
	my $start       = delete $opts{start}     // 1;
	my $roles       = delete $opts{roles}     // {};
	my $databases   = delete $opts{databases} // {};
	croak "unknown option(s): " . join(', ', sort keys %opts) if %opts;
	croak "host_auth must be trust, scram-sha-256, md5 or password"
	  unless $host_auth =~ /^(trust|scram-sha-256|md5|password)$/;
	$databases = { map { $_ => undef } @$databases }
	  if ref $databases eq 'ARRAY';
	croak "roles and databases need start => 1"
	  if !$start && (%$roles || %$databases);

	my $node = PostgreSQL::Test::Cluster->new($name, %new_params);
	$node->init(%$init_params);

	# Cluster.pm's init writes listen_addresses = '' (unix sockets only);
	# a later line wins, so TCP on 127.0.0.1 is added here, next to the
	# socket directory that the framework's own psql calls use.
	$node->append_conf('postgresql.conf',
		"\n# added by CtasFed::Test\n$conf\n"
		  . "listen_addresses = '127.0.0.1'\n"
		  . "password_encryption = 'scram-sha-256'\n"
		  . $extra_conf . "\n");

	# Unix socket: trust (the framework's psql).  TCP from 127.0.0.1: as
	# asked.  Only IPv4 loopback: servers listen on 127.0.0.1 only.
	open my $hba, '>', $node->data_dir . '/pg_hba.conf'
	  or croak "could not write pg_hba.conf: $!";
	print $hba "# written by CtasFed::Test\n"
	  . "local all         all                trust\n"
	  . "local replication all                trust\n"
	  . "host  all         all  127.0.0.1/32  $host_auth\n"
	  . "host  replication all  127.0.0.1/32  $host_auth\n";
	close $hba;

	return $node unless $start;
	$node->start;

	my @sql;
	foreach my $role (sort keys %$roles)
	{
		my $pw = $roles->{$role};
		push @sql,
		  "CREATE ROLE " . _sql_ident($role) . " LOGIN"
		  . (defined $pw ? " PASSWORD " . _sql_literal($pw) : '') . ";";
	}
	$node->safe_psql('postgres', join("\n", @sql)) if @sql;
	foreach my $db (sort keys %$databases)
	{
		my $owner = $databases->{$db};
		$node->safe_psql('postgres',
			"CREATE DATABASE " . _sql_ident($db)
			  . (defined $owner ? " OWNER " . _sql_ident($owner) : ''));
	}
	return $node;
}

=pod

=item new_cluster($name, %opts)

A PostgreSQL::Test::Cluster node, initialised, with the content of
F<test/ctas_fed.conf> appended to its postgresql.conf, listening on its
unix socket (for C<safe_psql> and friends) and on TCP 127.0.0.1, started.

Options:

=over

=item preload => 0

Leave out the C<shared_preload_libraries> line of ctas_fed.conf (to test
loading without it).

=item conf => TEXT

More postgresql.conf lines, appended last.

=item host_auth => 'trust' | 'scram-sha-256' | 'md5' | 'password'

Authentication of TCP connections from 127.0.0.1 (default trust).  Unix
socket connections are always trusted.

=item roles => { name => password-or-undef, ... }

Login roles to create after start.

=item databases => [ names ] or { name => owner-or-undef, ... }

Databases to create after start (after the roles).

=item start => 0

Only init and configure; roles and databases are then not allowed.

=item init => { ... }

Parameters for PostgreSQL::Test::Cluster::init.

=item port, own_host, install_path

Passed to PostgreSQL::Test::Cluster->new.

=back

=cut

sub new_cluster
{
	my ($name, %opts) = @_;
	my $preload = delete $opts{preload} // 1;

	my $conf = PostgreSQL::Test::Utils::slurp_file(_ctas_fed_conf_path());
	$conf =~ s/^\s*shared_preload_libraries\b.*$//mg unless $preload;
	return _make_node($name, $conf, %opts);
}

=pod

=item new_remote_cluster($name, %opts)

A plain PostgreSQL (no ctas_fed) to be a remote target:
C<max_prepared_transactions> (option of that name, default 10), TCP on
127.0.0.1, started.  The other options are those of C<new_cluster>
(without C<preload>).

=cut

sub new_remote_cluster
{
	my ($name, %opts) = @_;
	my $mpt = delete $opts{max_prepared_transactions} // 10;

	return _make_node($name, "max_prepared_transactions = $mpt\n", %opts);
}

=pod

=item tcp_connstr($node, key => value, ...)

A libpq connection string for $node over TCP (host=127.0.0.1 port=N),
with the given keywords (dbname, user, password, ...) quoted.

=cut

sub tcp_connstr
{
	my ($node, %kv) = @_;
	my $s = 'host=127.0.0.1 port=' . $node->port;
	foreach my $k (sort keys %kv)
	{
		$s .= " $k=" . _conninfo_value($kv{$k});
	}
	return $s;
}

# Find an executable: in PATH, then in the given folders.
sub _find_program
{
	my ($name, @extra_dirs) = @_;
	foreach my $dir (split(/:/, $ENV{PATH} // ''), @extra_dirs)
	{
		next unless length $dir;
		return "$dir/$name" if -f "$dir/$name" && -x _;
	}
	return undef;
}

# tail of a text file, for error messages
sub _tail
{
	my ($path, $lines) = @_;
	return "($path does not exist)\n" unless -f $path;
	open my $fh, '<', $path or return "(cannot read $path: $!)\n";
	my @all = <$fh>;
	close $fh;
	splice(@all, 0, @all - $lines) if @all > $lines;
	return "--- $path\n" . join('', @all);
}

# Is pid alive (and not a zombie child of ours)?
sub _alive
{
	my ($pid) = @_;
	return 0 unless $pid;
	return 0 if waitpid($pid, WNOHANG) == $pid;    # our reaped child
	return kill(0, $pid) ? 1 : 0;
}

# Send SIGTERM, wait up to $timeout s, then SIGKILL and wait up to 10 s.
# Returns true when the process is gone.
sub _terminate
{
	my ($pid, $timeout) = @_;
	return 1 unless _alive($pid);
	kill 'TERM', $pid;
	for my $sig ('TERM', 'KILL')
	{
		my $deadline = time + ($sig eq 'TERM' ? $timeout : 10);
		kill 'KILL', $pid if $sig eq 'KILL';
		while (time < $deadline)
		{
			return 1 unless _alive($pid);
			usleep(100_000);
		}
	}
	return !_alive($pid);
}

# stop the server of a handle started by this process: SIGTERM, wait up to
# $timeout seconds (then SIGKILL); forget it and its pid file once gone
sub _stop_server
{
	my ($self, $timeout, $pidfile) = @_;
	return 1 unless $self->{pid} && $self->{owner} == $$;
	my $gone = _terminate($self->{pid}, $timeout);
	if ($gone)
	{
		_unregister($self);
		unlink $pidfile if defined $pidfile;
		$self->{pid} = undef;
	}
	return $gone;
}

sub _register
{
	my ($server) = @_;
	push @live_servers, $server;
	return;
}

sub _unregister
{
	my ($server) = @_;
	@live_servers = grep { $_ != $server } @live_servers;
	return;
}

=pod

=item start_clickhouse(%opts)

Start a private ClickHouse server as the current OS user and wait (30 s at
most, option C<timeout>) until C<GET /ping> answers C<Ok.>; dies with the
tail of its logs otherwise.  Options: C<password> (default: generated).
Returns a CtasFed::Test::ClickHouse handle, a hash with
C<http_port>, C<tcp_port>, C<user> ('default'), C<password>, C<url>
(C<http://127.0.0.1:PORT>), C<pid>, C<dir> and the methods described below.
More options: C<http_port>, C<tcp_port> (default: free ones) and
C<config_d> (C<< { 'file.xml' => $xml } >>, written to F<config.d/>, which
the server merges into its configuration).

=cut

sub start_clickhouse
{
	my (%opts) = @_;
	my $timeout  = $opts{timeout}  // 30;
	my $password = $opts{password} // sprintf('chpw%08x%08x',
		int(rand(0xffffffff)), int(rand(0xffffffff)));

	my $server = _find_program('clickhouse-server', '/usr/sbin', '/usr/bin')
	  or croak "clickhouse-server not found: apt-get install clickhouse-server clickhouse-client";

	my $dir = PostgreSQL::Test::Utils::tempdir('clickhouse');
	my $http_port = $opts{http_port} // free_port();
	my $tcp_port  = $opts{tcp_port}  // free_port();

	system('bash', "$libdir/clickhouse-config.sh", $dir, $http_port,
		$tcp_port, $password) == 0
	  or croak "clickhouse-config.sh failed (exit status $?)";
	# more configuration, merged by the server from config.d/*.xml
	foreach my $file (sort keys %{ $opts{config_d} // {} })
	{
		mkdir "$dir/config.d";
		open my $fh, '>', "$dir/config.d/$file" or croak "$dir/config.d/$file: $!";
		print $fh $opts{config_d}{$file};
		close $fh;
	}

	my $self = bless {
		http_port => $http_port,
		tcp_port  => $tcp_port,
		user      => 'default',
		password  => $password,
		url       => "http://127.0.0.1:$http_port",
		dir       => $dir,
		pid_file  => "$dir/clickhouse.pid",
		pid       => undef,
		owner     => $$,
	}, 'CtasFed::Test::ClickHouse';

	# --daemon: the server detaches and writes its pid file; it removes the
	# file again when it stops, so the pid is remembered here.
	system($server, "--config-file=$dir/config.xml",
		"--pid-file=$self->{pid_file}", '--daemon') == 0
	  or croak "clickhouse-server --daemon failed (exit status $?)\n"
	  . _tail("$dir/log/stderr.log", 30);

	my $http     = HTTP::Tiny->new(timeout => 5, keep_alive => 0);
	my $deadline = time + $timeout;
	my $ready    = 0;
	while (time < $deadline)
	{
		$self->_read_pid unless $self->{pid};
		my $res = $http->get("$self->{url}/ping");
		if ($res->{status} == 200 && $res->{content} eq "Ok.\n")
		{
			$ready = 1;
			last;
		}
		last if $self->{pid} && !_alive($self->{pid});
		usleep(200_000);
	}
	$self->_read_pid unless $self->{pid};
	_register($self) if $self->{pid};
	if (!$ready || !$self->{pid})
	{
		my $logs = _tail("$dir/log/clickhouse-server.err.log", 40)
		  . _tail("$dir/log/stderr.log", 20);
		$self->stop;
		croak "ClickHouse did not answer GET /ping on $self->{url} within "
		  . "$timeout s:\n$logs";
	}
	return $self;
}

=pod

=item start_pushgateway(%opts)

Start a Prometheus Pushgateway (persistence off) on a free port and wait
until it answers C<GET /-/ready> (30 s at most, option C<timeout>).
Returns a CtasFed::Test::Pushgateway handle: a hash with C<port>, C<url>,
C<pid>, C<dir>, methods C<get($path)> and C<stop>.

=cut

sub start_pushgateway
{
	my (%opts) = @_;
	my $timeout = $opts{timeout} // 30;

	my $prog = _find_program('prometheus-pushgateway', '/usr/bin')
	  // _find_program('pushgateway', '/usr/bin')
	  or croak "prometheus-pushgateway not found: apt-get install prometheus-pushgateway";

	my $dir  = PostgreSQL::Test::Utils::tempdir('pushgateway');
	my $port = free_port();
	my $log  = "$dir/pushgateway.log";

	my $pid = fork();
	croak "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		open(STDIN,  '<',  '/dev/null');
		open(STDOUT, '>>', $log) or POSIX::_exit(127);
		open(STDERR, '>&', \*STDOUT) or POSIX::_exit(127);
		exec($prog, "--web.listen-address=127.0.0.1:$port",
			'--persistence.file=', '--log.level=info')
		  or POSIX::_exit(127);
	}

	my $self = bless {
		port  => $port,
		url   => "http://127.0.0.1:$port",
		dir   => $dir,
		pid   => $pid,
		log   => $log,
		owner => $$,
	}, 'CtasFed::Test::Pushgateway';
	_register($self);

	# a pid file, so that test/run.sh can find a leftover after a crash
	open my $pf, '>', "$dir/pushgateway.pid";
	print $pf "$pid\n";
	close $pf;

	my $http     = HTTP::Tiny->new(timeout => 5, keep_alive => 0);
	my $deadline = time + $timeout;
	while (time < $deadline)
	{
		my $res = $http->get("$self->{url}/-/ready");
		return $self if $res->{status} == 200;
		last unless _alive($pid);
		usleep(200_000);
	}
	my $logs = _tail($log, 30);
	$self->stop;
	croak "Pushgateway did not become ready on $self->{url} within $timeout s:\n$logs";
}

# A test killed by SIGINT/SIGTERM/SIGHUP (Ctrl-C, the timeout of
# test/run.sh) would skip END blocks, leaving its servers running: make
# those signals die instead, unless the test chose its own handler.
# The first signal dies; later ones (timeout signals the whole process
# group, runuser forwards) are ignored so that the clean-up can finish.
foreach my $sig (qw(INT TERM HUP))
{
	next
	  unless !defined $SIG{$sig} || $SIG{$sig} eq '' || $SIG{$sig} eq 'DEFAULT';
	$SIG{$sig} = sub {
		$SIG{$_} = 'IGNORE' foreach qw(INT TERM HUP);
		die "caught SIG$_[0]\n";
	};
}

# Stop whatever is still running at exit, in reverse order of start.
END
{
	my $exit_code = $?;
	my @servers = grep { $_->{owner} == $$ } reverse @live_servers;
	# signal them all first, so that they shut down in parallel
	kill 'TERM', $_->{pid} foreach grep { $_->{pid} } @servers;
	$_->stop foreach @servers;
	$? = $exit_code;
}

=pod

=back

=head1 CtasFed::Test::ClickHouse METHODS

=over

=item $ch->request($sql, %opts)

Send $sql over HTTP (POST) and return the HTTP::Tiny response hash
(C<status>, C<content>, C<headers>); never dies on an HTTP error.  Options:
C<user>, C<password> (default: the handle's), C<data> (then $sql goes in the
C<query> URL parameter and C<data> is the body, as for INSERT ... FORMAT),
C<database>, C<query_id>, C<params> (more URL parameters: settings),
C<timeout> (s, default 60).  Credentials are sent in the
X-ClickHouse-User / X-ClickHouse-Key headers, never in the URL.

=item $ch->query($sql, %opts)

Like C<request> but returns the body, and dies with the status and the body
when the status is not 200 or when the body ends with a ClickHouse
exception (which can follow a 200 status in a streamed response).

=item $ch->stop

SIGTERM to the server, wait until it is gone (60 s, then SIGKILL).
Returns true when it is gone.  Called at exit for every server still
running.

=item $ch->is_running

True while the server process exists.

=item $ch->log_tail($n)

The last $n lines of the error log and the main log.

=back

=cut

=pod

=pod

=item start_fault_proxy($target_port, %opts)

Start F<test/lib/faultproxy.pl> listening on 127.0.0.1:I<free port> and
forwarding to 127.0.0.1:$target_port; waits (10 s at most) until it
listens.  Returns a CtasFed::Test::FaultProxy handle:

=over

=item $fp->port

The port to connect to instead of $target_port.

=item $fp->set_rule(%rule)

Add a rule and wait (10 s at most, else die) until the proxy loaded it;
returns its id.  Keys (documented in the header of faultproxy.pl):
C<match> (substring of the client's bytes, raw or URL-decoded), C<action>
(C<drop_request>, C<lose_reply>, C<stall>, C<reset>, C<refuse>), C<dir>
(stall: C<up>, C<down>, C<both>), C<reset_after> (bytes; implies
C<reset>), C<wait_ms> (lose_reply), C<times> (default 1, 0: no limit) or
C<once>, C<skip> (let the first N matches through).

=item $fp->clear_rule($id), $fp->clear

Remove one rule, or all; connections a removed stall rule held flow
again.  Both wait until the proxy loaded the change.

=item $fp->hits($id)

How many times rule $id fired so far (0 if never).

=item $fp->wait_hit($id, $n, $timeout)

Wait until rule $id fired $n times (default 1), $timeout seconds at most
(default 30); returns true if it did.

=item $fp->connections

Connections accepted so far.

=item $fp->stop, $fp->is_running

Stop the proxy (SIGTERM; its connections die with it).

=back

=cut

sub start_fault_proxy
{
	my ($target_port, %opts) = @_;
	my $timeout = $opts{timeout} // 10;
	my $dir  = PostgreSQL::Test::Utils::tempdir('faultproxy');
	my $port = free_port();
	my $self = bless {
		port   => $port,
		target => $target_port,
		dir    => $dir,
		gen    => 0,
		next_id => 1,
		rules  => {},
		pid    => undef,
		owner  => $$,
	}, 'CtasFed::Test::FaultProxy';
	$self->_write_rules;

	my $pid = fork();
	croak "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		open STDOUT, '>>', "$dir/proxy.log";
		open STDERR, '>>', "$dir/proxy.log";
		{
			no warnings 'exec';
			exec($^X, "$libdir/faultproxy.pl", '--listen', $port,
				'--target', $target_port, '--dir', $dir);
		}
		POSIX::_exit(127);
	}
	$self->{pid} = $pid;
	_register($self);

	my $deadline = time + $timeout;
	while (time < $deadline)
	{
		return $self if $self->_status->{gen} == 0 && port_is_open($port);
		last unless _alive($pid);
		usleep(50_000);
	}
	my $log = _tail("$dir/proxy.log", 20);
	$self->stop;
	croak "fault proxy did not listen on 127.0.0.1:$port within $timeout s:\n$log";
}

=head2 The invariant after a fault

=over

=item sql_digest($node, $dbname, $select)

Digest of the rows of $select on PostgreSQL $node: "I<count>:I<md5>" of
the rows in COPY text format, ordered by all columns.  The digests of
C<pg_digest> and C<ch_digest> are comparable with it for columns whose
text forms agree (integers, text without tabs or backslashes).

=item pg_digest($node, $dbname, $table)

Digest of a table of a remote PostgreSQL, or C<absent>.

=item ch_digest($ch, $table)

Digest of ClickHouse table $table (C<db.name>), or C<absent>.

=cut

sub _rows_digest
{
	my ($text) = @_;
	my @rows = grep { $_ ne '' } split /\n/, $text;
	@rows = sort @rows;
	return scalar(@rows) . ':' . Digest::MD5::md5_hex(join("\n", @rows));
}

sub sql_digest
{
	my ($node, $dbname, $select) = @_;
	return _rows_digest($node->safe_psql($dbname,
		"COPY ($select) TO STDOUT"));
}

sub pg_digest
{
	my ($node, $dbname, $table) = @_;
	my $exists = $node->safe_psql($dbname,
		"SELECT to_regclass(" . _sql_literal($table) . ") IS NOT NULL");
	return 'absent' unless $exists eq 't';
	my ($rc, $out, $err) = $node->psql($dbname,
		"COPY (SELECT * FROM $table) TO STDOUT");
	return 'absent' if $rc != 0 && $err =~ /does not exist/;
	return "error: $err" if $rc != 0;
	return _rows_digest($out);
}

sub ch_digest
{
	my ($ch, $table) = @_;
	return 'absent' unless $ch->query("EXISTS TABLE $table") + 0;
	my $res = $ch->request("SELECT * FROM $table FORMAT TabSeparated");
	return 'absent' if $res->{content} =~ /Code: 60,/;
	return "error: $res->{content}" if $res->{status} != 200;
	return _rows_digest($res->{content});
}

=item check_invariant(%args)

The promise of ctas_fed after a fault or an abort, checked by polling
until it holds or a deadline passes (C<timeout>, default 30 s), then
asserted with one Test::More check per part, each named
"I<name>: ...", showing what differs:

=over

=item * every target in C<targets> has exactly the C<expect>ed digest if
C<committed> is true, else its digest C<before> (default C<absent>).  A
target is C<< { pg => $node, dbname => 'dw', table => 'public.t', expect
=> DIGEST } >> or C<< { ch => $ch, table => 'dw.t', expect => DIGEST } >>;

=item * no prepared transaction of this cluster (gid prefix
C<ctas_fed_E<lt>sysidE<gt>_>) on any PostgreSQL in C<pg_remotes> (default:
those of the targets; a remote that does not answer fails the check);

=item * no C<_ctas_fed_> table and no query of ours (query_id prefix
C<ctas_fed_E<lt>sysidE<gt>_>) in any ClickHouse in C<clickhouse> (default:
those of the targets);

=item * C<jobs>: C<< [ [ $catalog, $target, $state ], ... ] >>, the state
of the latest job of each (catalog, target) in ctas_fed.jobs is exactly
$state;

=item * C<session> (a session from C<session_start>): the same session
runs C<session_ctas> (a federated CTAS) without error, then
C<session_cleanup> if given.

=back

C<node> is the local cluster, C<dbname> its database (default postgres).
With C<resolve>, ctas_fed.resolve_in_doubt() is called about every
second while the invariant does not hold yet (errors ignored).  Returns
true when every part held.

=cut

sub check_invariant
{
	my (%a) = @_;
	my $node    = $a{node} or croak 'check_invariant: node is required';
	my $dbname  = $a{dbname} // 'postgres';
	my $name    = $a{name} // 'invariant';
	my $timeout = $a{timeout} // 30;
	my @targets = @{ $a{targets} // [] };
	my @pgs = @{ $a{pg_remotes} // [ grep { defined } map { $_->{pg} } @targets ] };
	my @chs = @{ $a{clickhouse} // [ grep { defined } map { $_->{ch} } @targets ] };
	my %seen;
	@pgs = grep { !$seen{"$_"}++ } @pgs;
	@chs = grep { !$seen{"$_"}++ } @chs;

	my $sysid = $node->safe_psql($dbname,
		'SELECT system_identifier FROM pg_control_system()');
	my $prefix = "ctas_fed_${sysid}_";

	# one observation of everything: (label => [got, expected])
	my $observe = sub {
		my @obs;
		foreach my $t (@targets)
		{
			my $want = $a{committed} ? $t->{expect} : ($t->{before} // 'absent');
			my $got = eval {
				$t->{pg}
				  ? pg_digest($t->{pg}, $t->{dbname} // 'postgres', $t->{table})
				  : ch_digest($t->{ch}, $t->{table});
			} // "error: $@";
			my $where = $t->{pg} ? 'PostgreSQL ' . $t->{pg}->name : 'ClickHouse';
			push @obs, [ "$where table $t->{table} "
				  . ($a{committed} ? 'has exactly the rows committed'
					: 'is as before the aborted transaction'), $got, $want ];
		}
		foreach my $pg (@pgs)
		{
			my ($rc, $out, $err) = $pg->psql('postgres',
				"SELECT string_agg(gid, ',' ORDER BY gid) FROM pg_prepared_xacts "
				  . "WHERE starts_with(gid, '$prefix')");
			$out = "remote unreachable: $err" if $rc != 0;
			push @obs, [ 'no prepared transaction of ours on ' . $pg->name,
				$out, '' ];
		}
		foreach my $ch (@chs)
		{
			my $t = eval { $ch->query(
				"SELECT arrayStringConcat(groupArray(concat(database, '.', name)), ',') "
				  . "FROM system.tables WHERE startsWith(name, '_ctas_fed_')") } // "error: $@";
			chomp $t;
			push @obs, [ 'no _ctas_fed_ table in ClickHouse', $t, '' ];
			my $q = eval { $ch->query(
				"SELECT arrayStringConcat(groupArray(query_id), ',') "
				  . "FROM system.processes WHERE startsWith(query_id, '$prefix')") } // "error: $@";
			chomp $q;
			push @obs, [ 'no query of ours running in ClickHouse', $q, '' ];
		}
		foreach my $j (@{ $a{jobs} // [] })
		{
			my ($cat, $target, $state) = @$j;
			my ($rc, $out, $err) = $node->psql($dbname,
				"SELECT state FROM ctas_fed.jobs WHERE catalog = "
				  . _sql_literal($cat) . ' AND target = ' . _sql_literal($target)
				  . ' ORDER BY job_id DESC LIMIT 1');
			$out = "error: $err" if $rc != 0;
			$out = '(no job)' if $out eq '';
			push @obs, [ "job of $cat $target is $state", $out, $state ];
		}
		return @obs;
	};

	my $deadline = time + $timeout;
	my $next_resolve = time;
	my @obs;
	while (1)
	{
		@obs = $observe->();
		last unless grep { $_->[1] ne $_->[2] } @obs;
		last if time >= $deadline;
		if ($a{resolve} && time >= $next_resolve)
		{
			my ($rc, $out, $err) = $node->psql($dbname,
				"SELECT string_agg(catalog || ' ' || object || ': ' || action, '; ') "
				  . 'FROM ctas_fed.resolve_in_doubt()');
			Test::More::note("$name: resolve_in_doubt: "
				  . ($rc == 0 ? $out : $err)) if $out ne '' || $rc != 0;
			$next_resolve = time + 1;
		}
		usleep(200_000);
	}

	my $waited = time - ($deadline - $timeout);
	Test::More::note(sprintf('%s: observed after %.1f s', $name, $waited))
	  if $waited >= 1;
	my $ok = 1;
	foreach my $o (@obs)
	{
		$ok = 0 unless Test::More::is($o->[1], $o->[2], "$name: $o->[0]");
	}
	if ($a{session})
	{
		my ($out, $err) = session_run($a{session}, $a{session_ctas}, 60);
		$ok = 0 unless Test::More::is($err, '',
			"$name: the same session runs another federated CTAS");
		session_run($a{session}, $a{session_cleanup}, 60)
		  if defined $a{session_cleanup};
	}
	return $ok;
}

=item session_start($node, $dbname)

A long-lived psql session (PostgreSQL::Test::BackgroundPsql, errors do
not end it) for C<session_run>, C<session_wait> and C<check_invariant>.

=item session_wait($session, $token, $timeout)

C<my $token = session_send($s, $sql)> sends $sql without waiting;
C<session_wait($s, $token, $timeout)> waits (default 60 s) for its end and
returns (stdout, stderr), or () when the time is up (the statement still
runs).  C<session_run($s, $sql, $timeout)> does both.

=cut

sub session_start
{
	my ($node, $dbname) = @_;
	return $node->background_psql($dbname // 'postgres', on_error_stop => 0);
}

sub session_send
{
	my ($s, $sql) = @_;
	my $n = $s->{query_cnt}++;
	my $banner = "background_psql: QUERY_SEPARATOR $n:";
	$s->{stdout} = '';
	$s->{stderr} = '';
	$s->{stdin} .= "$sql\n;\n\\echo '$banner'\n\\warn '$banner'\n";
	$s->{run}->pump_nb;
	return $banner;
}

sub session_wait
{
	my ($s, $banner, $timeout) = @_;
	my $deadline = time + ($timeout // 60);
	my $match = qr/\r?\n?\Q$banner\E\r?\n/;
	while (!($s->{stdout} =~ $match && $s->{stderr} =~ $match))
	{
		return () if time >= $deadline || !$s->{run}->pumpable;
		$s->{run}->pump_nb;
		usleep(20_000);
	}
	my ($out, $err) = ($s->{stdout}, $s->{stderr});
	$out =~ s/$match//;
	$err =~ s/$match//;
	$s->{stdout} = '';
	$s->{stderr} = '';
	chomp $out;
	return ($out, $err);
}

sub session_run
{
	my ($s, $sql, $timeout) = @_;
	my @r = session_wait($s, session_send($s, $sql), $timeout);
	return @r ? @r : ('', 'timed out');
}

=back

=head2 Statements in the background

=over

=item start_psql($node, $sql)

Start C<psql -c $sql> against database postgres of $node without waiting
for it; returns the IPC::Run handle and references to its stdout and
stderr.  C<< $h->finish >> waits for it.

=cut

sub start_psql
{
	my ($node, $sql) = @_;
	my ($stdout, $stderr) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', $sql ],
		'>', \$stdout, '2>', \$stderr);
	return ($h, \$stdout, \$stderr);
}

=item wait_active($node, $pattern)

The pid of the backend of $node whose active statement is LIKE $pattern,
waiting up to 20 s for one; undef if none shows up.

=back

=cut

sub wait_active
{
	my ($node, $pattern) = @_;
	foreach (1 .. 200)
	{
		my $pid = $node->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE '$pattern'");
		return $pid if $pid ne '';
		usleep(100_000);
	}
	return undef;
}


#############################################################################
# Conditions, not sleeps (issue 12).  Added as one block so that it merges
# apart from the rest of the package.
#############################################################################

=pod

=head2 Waiting for conditions

=over

=item wait_until($timeout, $code)

Call $code every 100 ms until it returns a true value, for at most
$timeout seconds; returns that value, or undef at the deadline.

=cut

sub wait_until
{
	my ($timeout, $code) = @_;
	my $deadline = Time::HiRes::time() + $timeout;
	while (1)
	{
		my $v = $code->();
		return $v if $v;
		return undef if Time::HiRes::time() > $deadline;
		usleep(100_000);
	}
}

=item start_psql_timed($node, $sql, %opts)

Like C<start_psql>, but under an IPC::Run timer: C<< $h->finish >> and
C<< $h->pump >> die once C<timeout> seconds (default 180) have passed
instead of hanging the test.  Options: C<timeout>, C<psql_args> (more psql
arguments, e.g. C<['-v', 'VERBOSITY=verbose']>).  Returns the handle and
references to stdout and stderr.

=cut

sub start_psql_timed
{
	my ($node, $sql, %opts) = @_;
	my ($stdout, $stderr) = ('', '');
	my $h = IPC::Run::start(
		[
			'psql', '-XAtq', @{ $opts{psql_args} // [] },
			'-d', $node->connstr('postgres'), '-c', $sql
		],
		'>', \$stdout, '2>', \$stderr,
		IPC::Run::timeout($opts{timeout} // 180));
	return ($h, \$stdout, \$stderr);
}

=item psql_verbose($node, $sql)

Run $sql with psql B<without> C<-q> (so that command tags such as
C<SELECT 20000> are printed) and with C<VERBOSITY=verbose> (so that errors
carry their SQLSTATE: C<ERROR:  57014: ...>), under a 180 s timer.
Returns ($exit_status, $stdout, $stderr).

=cut

sub psql_verbose
{
	my ($node, $sql) = @_;
	my ($stdout, $stderr) = ('', '');
	IPC::Run::run(
		[
			'psql', '-XAt', '-v', 'VERBOSITY=verbose', '-d',
			$node->connstr('postgres'), '-c', $sql
		],
		'>', \$stdout, '2>', \$stderr,
		IPC::Run::timeout(180));
	my $ret = $? >> 8;
	chomp $stdout;
	return ($ret, $stdout, $stderr);
}

=item wait_log($node, $regexp, $offset, $timeout)

Wait (default 30 s) until the server log of $node, from byte $offset on,
matches $regexp; returns the offset just past the match, or undef at the
deadline.  C<< -s $node->logfile >> before an action is the offset to
pass.

=cut

sub wait_log
{
	my ($node, $re, $offset, $timeout) = @_;
	return wait_until(
		$timeout // 30,
		sub {
			my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile,
				$offset // 0);
			return $log =~ $re ? ($offset // 0) + $+[0] : undef;
		});
}

=item wait_registry_save($node, $after)

Wait (30 s at most) until the ctas_fed worker has written the job registry
(F<pg_stat/ctas_fed_jobs.stat>) after the time $after (a
Time::HiRes::time(), taken before the change to be saved); true when it
has.  The file is written to a temporary name and renamed, so a new
modification time means a complete save.

=cut

sub wait_registry_save
{
	my ($node, $after) = @_;
	my $file = $node->data_dir . '/pg_stat/ctas_fed_jobs.stat';
	return wait_until(
		30,
		sub {
			my @st = Time::HiRes::stat($file);
			return @st && $st[9] >= $after;
		});
}

=item peak_rss_anon($pid, $h, $tick)

Sample C<RssAnon> of process $pid (kB, from F</proc/$pid/status>) every
20 ms while the IPC::Run handle $h runs, then finish $h; returns the
largest sample (0 when none could be read).  $tick, when given, is called
after every sample (to act on the process under observation).

=back

=cut

sub peak_rss_anon
{
	my ($pid, $h, $tick) = @_;
	my $peak = 0;
	while ($h->pumpable)
	{
		if (open my $fh, '<', "/proc/$pid/status")
		{
			while (<$fh>)
			{
				$peak = $1 if /^RssAnon:\s+(\d+)/ && $1 > $peak;
			}
			close $fh;
		}
		$tick->() if $tick;
		$h->pump_nb;
		usleep(20_000);
	}
	$h->finish;
	return $peak;
}

=item wait_resolver_pass($node, $fp, $nconns)

The resolver of C<$node>'s database starts with the extension and passes
once over every catalog, connecting to each.  A fault test whose catalogs
go through the fault proxy C<$fp> calls this before arming its first rule:
it waits (60 s at most) until the proxy has accepted at least C<$nconns>
connections and the resolver is idle, so that the resolver's pass cannot
take a fault meant for a session.  True once that holds.

=cut

sub wait_resolver_pass
{
	my ($node, $fp, $nconns) = @_;
	return wait_until(60, sub {
		$fp->connections >= $nconns
		  && $node->safe_psql('postgres', q{
			SELECT count(*) FROM pg_stat_activity
			 WHERE backend_type = 'ctas_fed resolver'
			   AND datname = current_database() AND state = 'idle'}) eq '1';
	});
}

push @EXPORT, qw(wait_until start_psql_timed psql_verbose wait_log
  wait_registry_save peak_rss_anon wait_resolver_pass);


package CtasFed::Test::ClickHouse;

use strict;
use warnings;

use Carp;
use HTTP::Tiny;
use IPC::Run ();

sub _read_pid
{
	my ($self) = @_;
	open my $fh, '<', $self->{pid_file} or return;
	my $pid = <$fh>;
	close $fh;
	$self->{pid} = $1 if defined $pid && $pid =~ /^\s*(\d+)/;
	return;
}

sub request
{
	my ($self, $sql, %opts) = @_;
	my $user     = $opts{user}     // $self->{user};
	my $password = $opts{password} // $self->{password};
	my %params   = %{ $opts{params} // {} };
	$params{database} = $opts{database} if defined $opts{database};
	$params{query_id} = $opts{query_id} if defined $opts{query_id};
	my $body = $sql;
	if (defined $opts{data})
	{
		$params{query} = $sql;
		$body = $opts{data};
	}

	my $http = HTTP::Tiny->new(timeout => $opts{timeout} // 60,
		keep_alive => 0);
	my $url = "$self->{url}/";
	$url .= '?' . $http->www_form_urlencode(\%params) if %params;
	return $http->request(
		'POST', $url,
		{
			headers => {
				'X-ClickHouse-User' => $user,
				'X-ClickHouse-Key'  => $password,
				'Content-Type'      => 'text/plain; charset=utf-8',
			},
			content => $body,
		});
}

sub query
{
	my ($self, $sql, %opts) = @_;
	my $res = $self->request($sql, %opts);
	my $content = $res->{content} // '';
	croak "ClickHouse HTTP $res->{status} for query: $sql\n$content"
	  if $res->{status} != 200;
	croak "ClickHouse exception after HTTP 200 for query: $sql\n$content"
	  if $content =~ /(?:^|\n)Code: \d+, e\.displayText\(\) = [^\n]*\n?\z/;
	return $content;
}

sub is_running
{
	my ($self) = @_;
	return CtasFed::Test::_alive($self->{pid});
}

sub log_tail
{
	my ($self, $n) = @_;
	$n //= 40;
	return CtasFed::Test::_tail("$self->{dir}/log/clickhouse-server.err.log", $n)
	  . CtasFed::Test::_tail("$self->{dir}/log/clickhouse-server.log", $n);
}

sub stop
{
	my ($self) = @_;
	return CtasFed::Test::_stop_server($self, 60);
}

sub DESTROY
{
	my ($self) = @_;
	local ($?, $@, $!);
	$self->stop;
	return;
}

=pod

=head1 CtasFed::Test::Pushgateway METHODS

=over

=item $pgw->get($path)

GET $url$path; returns the body, dies unless the status is 200.

=item $pgw->stop, $pgw->is_running

As for ClickHouse (10 s before SIGKILL).

=back

=cut

package CtasFed::Test::Pushgateway;

use strict;
use warnings;

use Carp;
use HTTP::Tiny;
use IPC::Run ();

sub get
{
	my ($self, $path) = @_;
	my $res = HTTP::Tiny->new(timeout => 30, keep_alive => 0)
	  ->get($self->{url} . $path);
	croak "Pushgateway HTTP $res->{status} for GET $path\n$res->{content}"
	  if $res->{status} != 200;
	return $res->{content};
}

sub is_running
{
	my ($self) = @_;
	return CtasFed::Test::_alive($self->{pid});
}

sub stop
{
	my ($self) = @_;
	return CtasFed::Test::_stop_server($self, 10, "$self->{dir}/pushgateway.pid");
}

sub DESTROY
{
	my ($self) = @_;
	local ($?, $@, $!);
	$self->stop;
	return;
}


package CtasFed::Test::FaultProxy;

use strict;
use warnings;

use Carp;
use Time::HiRes qw(usleep);

sub port
{
	my ($self) = @_;
	return $self->{port};
}

sub _esc
{
	my ($v) = @_;
	$v = '' unless defined $v;
	$v =~ s/([^A-Za-z0-9_.-])/sprintf('%%%02X', ord($1))/ge;
	return $v;
}

# write the rules file (atomically), next generation
sub _write_rules
{
	my ($self) = @_;
	my $text = "gen $self->{gen}\n";
	foreach my $id (sort { $a <=> $b } keys %{ $self->{rules} })
	{
		my $r = $self->{rules}{$id};
		$text .= "rule $id"
		  . join('', map { " $_=" . _esc($r->{$_}) } sort keys %$r) . "\n";
	}
	my $tmp = "$self->{dir}/rules.tmp";
	open my $fh, '>', $tmp or croak "cannot write $tmp: $!";
	print $fh $text;
	close $fh or croak "cannot write $tmp: $!";
	rename $tmp, "$self->{dir}/rules" or croak "cannot rename $tmp: $!";
	return;
}

sub _status
{
	my ($self) = @_;
	my %st = (gen => -1, conns => 0, hits => {});
	open my $fh, '<', "$self->{dir}/status" or return \%st;
	while (my $line = <$fh>)
	{
		if ($line =~ /^(gen|conns) (-?\d+)$/)
		{
			$st{$1} = $2;
		}
		elsif ($line =~ /^hit (\d+) (\d+)$/)
		{
			$st{hits}{$1} = $2;
		}
	}
	close $fh;
	return \%st;
}

# publish the rules and wait until the proxy loaded them
sub _publish
{
	my ($self) = @_;
	$self->{gen}++;
	$self->_write_rules;
	my $deadline = time + 10;
	while (time < $deadline)
	{
		return if $self->_status->{gen} >= $self->{gen};
		croak "fault proxy (pid $self->{pid}) is gone"
		  unless $self->is_running;
		usleep(10_000);
	}
	croak "fault proxy did not load rules generation $self->{gen} within 10 s";
}

sub set_rule
{
	my ($self, %rule) = @_;
	my %known = map { ($_ => 1) }
	  qw(match action dir reset_after wait_ms times once skip);
	foreach (keys %rule)
	{
		croak "unknown fault proxy rule key \"$_\"" unless $known{$_};
	}
	$rule{action} //= defined $rule{reset_after} ? 'reset' : undef;
	croak 'fault proxy rule without action' unless defined $rule{action};
	croak "unknown fault proxy action \"$rule{action}\""
	  unless $rule{action} =~ /^(?:drop_request|lose_reply|stall|reset|refuse)$/;
	delete $rule{once} if exists $rule{once} && !$rule{once};
	my $id = $self->{next_id}++;
	$self->{rules}{$id} = \%rule;
	$self->_publish;
	return $id;
}

sub clear_rule
{
	my ($self, $id) = @_;
	delete $self->{rules}{$id};
	$self->_publish;
	return;
}

sub clear
{
	my ($self) = @_;
	$self->{rules} = {};
	$self->_publish;
	return;
}

sub hits
{
	my ($self, $id) = @_;
	return $self->_status->{hits}{$id} // 0;
}

sub wait_hit
{
	my ($self, $id, $n, $timeout) = @_;
	$n       //= 1;
	$timeout //= 30;
	my $deadline = time + $timeout;
	while (1)
	{
		return 1 if $self->hits($id) >= $n;
		return 0 if time >= $deadline;
		usleep(20_000);
	}
}

sub connections
{
	my ($self) = @_;
	return $self->_status->{conns};
}

sub is_running
{
	my ($self) = @_;
	return CtasFed::Test::_alive($self->{pid});
}

sub stop
{
	my ($self) = @_;
	return CtasFed::Test::_stop_server($self, 10);
}

sub DESTROY
{
	my ($self) = @_;
	local ($?, $@, $!);
	$self->stop;
	return;
}


#############################################################################
# The ClickHouse catalog of a test.  Added as one block so that it merges
# apart from the rest of the package.
#############################################################################

package CtasFed::Test;

=pod

=head2 Catalogs

The set-up that the TAP tests share: a catalog (foreign server) and a user
mapping C<FOR PUBLIC>, in database C<postgres> of $node unless told
otherwise, after C<CREATE EXTENSION IF NOT EXISTS ctas_fed>.  Both die when
a statement fails and assert nothing.

=over

=item clickhouse_catalog($node, $ch, %opts)

A catalog of type C<clickhouse> whose C<url> is that of $ch, a user mapping
with ClickHouse's user C<default> and $ch's password, and in ClickHouse the
database C<dw> (C<IF NOT EXISTS>).  $ch may be undef for a catalog that
never reaches a server (then C<url> is required and no database is made).
Options:

  name       the catalog's name (default lake)
  url        another url (a fault proxy in front of $ch, a closed port)
  options    more server options, { connect_timeout => 2, timeout => 10 }
  password   another password for the user mapping (a wrong one)
  extension  0: do not create the extension
  database   the ClickHouse database to create (default dw); undef: none
  dbname     the local database (default postgres)

=item postgres_catalog($node, $remote, %opts)

A catalog of type C<postgres> on host 127.0.0.1, port $remote->port,
database C<dw>, and a user mapping with user C<loader>, password C<secret>
(the role that C<new_remote_cluster> is usually given).  $remote may be
undef when C<port> is given.  Options:

  name       the catalog's name (default wh)
  port       another port (a proxy, a closed or a hung port)
  options    more server options, { two_phase => 'on', notify_url => ... }
  user, password   another user mapping
  extension  0: do not create the extension
  dbname     the local database (default postgres)

=back

=cut

# CREATE SERVER ... OPTIONS (...) and CREATE USER MAPPING FOR PUBLIC, with
# the extension first unless told otherwise; the options named in $first
# come first, in that order, the others sorted.
sub _create_catalog
{
	my ($node, $opts, $name, $server, $first, $mapping) = @_;
	my %seen = map { $_ => 1 } @$first;
	my $sql = '';

	$sql .= "CREATE EXTENSION IF NOT EXISTS ctas_fed;\n"
	  if $opts->{extension} // 1;
	$sql .= sprintf(
		"CREATE SERVER %s FOREIGN DATA WRAPPER ctas_fed OPTIONS (%s);\n",
		_sql_ident($name),
		join(', ',
			map { "$_ " . _sql_literal($server->{$_}) }
			  (@$first, grep { !$seen{$_} } sort keys %$server)));
	$sql .= sprintf(
		"CREATE USER MAPPING FOR PUBLIC SERVER %s OPTIONS (%s);\n",
		_sql_ident($name),
		join(', ',
			map { "$_->[0] " . _sql_literal($_->[1]) } @$mapping));
	$node->safe_psql($opts->{dbname} // 'postgres', $sql);
	return;
}

sub clickhouse_catalog
{
	my ($node, $ch, %opts) = @_;
	my $url = $opts{url} // ($ch ? $ch->{url} : undef);
	my $password = $opts{password} // ($ch ? $ch->{password} : '');
	my $db = exists $opts{database} ? $opts{database} : 'dw';

	die "clickhouse_catalog: no url" unless defined $url;
	_create_catalog($node, \%opts, $opts{name} // 'lake',
		{ %{ $opts{options} // {} }, type => 'clickhouse', url => $url },
		[ 'type', 'url' ],
		[ [ user => 'default' ], [ password => $password ] ]);
	$ch->query('CREATE DATABASE IF NOT EXISTS ' . $db) if $ch && defined $db;
	return;
}

sub postgres_catalog
{
	my ($node, $remote, %opts) = @_;
	my $port = $opts{port} // $remote->port;

	_create_catalog(
		$node, \%opts,
		$opts{name} // 'wh',
		{
			%{ $opts{options} // {} },
			type => 'postgres',
			host => '127.0.0.1',
			port => $port,
			dbname => 'dw'
		},
		[ 'type', 'host', 'port', 'dbname' ],
		[
			[ user => $opts{user} // 'loader' ],
			[ password => $opts{password} // 'secret' ]
		]);
	return;
}

push @EXPORT, qw(clickhouse_catalog postgres_catalog);

# ClickHouse clusters (issue 20).  Added as one block so that it merges
# apart from the rest of the package.

=pod

=head2 ClickHouse clusters

=over

=item start_clickhouse_cluster($n, %opts)

Start $n ClickHouse servers on 127.0.0.1 that know each other as the
cluster C<name> (default C<ctas_cluster>) of their C<remote_servers>: one
shard per server, in order, one replica each, no ZooKeeper; all with the
same password.  Option C<weights> (a list, default all 1).  Returns the
handles, shard 1 first; each has C<cluster> and C<shard>.

=item clickhouse_cluster_catalog($node, \@shards, %opts)

A catalog of type C<clickhouse> (default name C<ring>) with C<url> of
shard 1, C<cluster> and C<shard_urls> of every shard (options C<url> and
C<shard_urls>, a list, to go through proxies), a user mapping, and
database C<dw> on every shard.  C<options>: more server options.

=item $ch->crash

SIGKILL to the server, and wait until it is gone.

=item $ch->restart(%opts)

Start a stopped or crashed server again, with its folder, ports and
configuration; wait (C<timeout>, 30 s) until it answers C<GET /ping>.

=back

=cut

sub start_clickhouse_cluster
{
	my ($n, %opts) = @_;
	my $name = $opts{name} // 'ctas_cluster';
	my $password = $opts{password} // sprintf('chpw%08x%08x',
		int(rand(0xffffffff)), int(rand(0xffffffff)));
	my @weights = @{ $opts{weights} // [ (1) x $n ] };
	my @ports = map { [ free_port(), free_port() ] } 1 .. $n;
	my $xml = "<?xml version=\"1.0\"?>\n<yandex><remote_servers><$name>\n";
	foreach my $i (0 .. $n - 1)
	{
		$xml .= "<shard><weight>$weights[$i]</weight><replica><host>127.0.0.1</host>"
		  . "<port>$ports[$i][1]</port><user>default</user>"
		  . "<password>$password</password></replica></shard>\n";
	}
	$xml .= "</$name></remote_servers></yandex>\n";
	my @chs;
	foreach my $i (0 .. $n - 1)
	{
		my $ch = start_clickhouse(
			password  => $password,
			http_port => $ports[$i][0],
			tcp_port  => $ports[$i][1],
			config_d  => { 'ctas_fed_cluster.xml' => $xml });
		$ch->{cluster} = $name;
		$ch->{shard}   = $i + 1;
		push @chs, $ch;
	}
	return @chs;
}

sub clickhouse_cluster_catalog
{
	my ($node, $chs, %opts) = @_;
	my @urls = @{ $opts{shard_urls} // [ map { $_->{url} } @$chs ] };
	_create_catalog($node, \%opts, $opts{name} // 'ring',
		{
			%{ $opts{options} // {} },
			type       => 'clickhouse',
			url        => $opts{url} // $chs->[0]{url},
			cluster    => $opts{cluster} // $chs->[0]{cluster},
			shard_urls => join(', ', @urls)
		},
		[ 'type', 'url', 'cluster', 'shard_urls' ],
		[ [ user => 'default' ], [ password => $chs->[0]{password} ] ]);
	$_->query('CREATE DATABASE IF NOT EXISTS dw') foreach @$chs;
	return;
}

push @EXPORT, qw(start_clickhouse_cluster clickhouse_cluster_catalog);

package CtasFed::Test::ClickHouse;

sub crash
{
	my ($self) = @_;
	return 1 unless $self->{pid};
	kill 'KILL', $self->{pid};
	my $deadline = time + 30;
	while (time < $deadline && CtasFed::Test::_alive($self->{pid}))
	{
		Time::HiRes::usleep(50_000);
	}
	CtasFed::Test::_unregister($self);
	unlink $self->{pid_file};
	$self->{pid} = undef;
	return 1;
}

sub restart
{
	my ($self, %opts) = @_;
	my $timeout = $opts{timeout} // 30;
	my $server = CtasFed::Test::_find_program('clickhouse-server', '/usr/sbin',
		'/usr/bin')
	  or Carp::croak 'clickhouse-server not found';
	Carp::croak 'restart: the server is still running'
	  if $self->{pid} && CtasFed::Test::_alive($self->{pid});
	system($server, "--config-file=$self->{dir}/config.xml",
		"--pid-file=$self->{pid_file}", '--daemon') == 0
	  or Carp::croak "clickhouse-server --daemon failed (exit status $?)";
	my $http = HTTP::Tiny->new(timeout => 5, keep_alive => 0);
	my $deadline = time + $timeout;
	while (time < $deadline)
	{
		$self->_read_pid unless $self->{pid};
		my $res = $http->get("$self->{url}/ping");
		if ($res->{status} == 200 && $res->{content} eq "Ok.\n")
		{
			CtasFed::Test::_register($self);
			return $self;
		}
		Time::HiRes::usleep(200_000);
	}
	Carp::croak "ClickHouse did not come back on $self->{url}:\n"
	  . $self->log_tail(20);
}

package CtasFed::Test;


#############################################################################
# Remote PostgreSQL servers of other major versions (issue 21).  Added as one
# block so that it merges apart from the rest of the package.
#############################################################################

package CtasFed::Test;

=pod

=head2 Other PostgreSQL versions

=over

=item new_versioned_remote_cluster($major, %opts)

A plain PostgreSQL of major version $major (12, 13, 14, 16, 17, 18) to be
a remote target, from the binaries that F<test/pgversions.sh> (C<make
deps>) unpacked into F<$CTAS_PG_VERSIONS_DIR/$major> (default
F</var/cache/ctas_fed/pg-versions>); dies saying so when they are not
there.  initdb and pg_ctl of that version, as the OS user running the test,
data in a PostgreSQL::Test::Utils::tempdir; the server listens on
127.0.0.1 (a port from C<free_port>) and on a private unix socket, with
C<max_prepared_transactions> (option of that name, default 10).
Other options: C<host_auth> (TCP from 127.0.0.1, default scram-sha-256; the
socket is trusted), C<roles> and C<databases> (as for C<new_cluster>),
C<conf> (more postgresql.conf lines).

Returns a CtasFed::Test::VersionedPg handle with the methods of
PostgreSQL::Test::Cluster that the helpers here use: C<name>, C<port>,
C<host>, C<connstr($db)>, C<psql($db, $sql)> (list context: exit status,
stdout, stderr), C<safe_psql($db, $sql)> (dies on error), C<data_dir>,
C<logfile>; and C<version_num> (server_version_num), C<restart(%opts)>
(option C<conf>: lines appended first) and C<stop>, which stops the
postmaster by its pid (SIGINT, a fast shutdown; SIGKILL after 60 s).
Statements run with the system's psql (15), which talks to every version.

=back

=cut

sub new_versioned_remote_cluster
{
	my ($major, %opts) = @_;
	my $mpt       = delete $opts{max_prepared_transactions} // 10;
	my $host_auth = delete $opts{host_auth} // 'scram-sha-256';
	my $roles     = delete $opts{roles} // {};
	my $databases = delete $opts{databases} // {};
	my $extra     = delete $opts{conf} // '';
	croak "unknown option(s): " . join(', ', sort keys %opts) if %opts;
	$databases = { map { $_ => undef } @$databases }
	  if ref $databases eq 'ARRAY';

	my $root = ($ENV{CTAS_PG_VERSIONS_DIR} // '/var/cache/ctas_fed/pg-versions')
	  . "/$major";
	croak "PostgreSQL $major is not in $root: run \"make deps\" (test/pgversions.sh)"
	  unless -x "$root/bin/postgres" && -x "$root/bin/initdb";

	my $dir = PostgreSQL::Test::Utils::tempdir("pg$major");
	my $self = bless {
		name    => "pg$major",
		major   => $major,
		bindir  => "$root/bin",
		data    => "$dir/data",
		log     => "$dir/server.log",
		sockdir => PostgreSQL::Test::Utils::tempdir_short(),
		port    => free_port(),
		pid     => undef,
		owner   => $$,
	}, 'CtasFed::Test::VersionedPg';

	IPC::Run::run(
		[
			"$root/bin/initdb", '-D', $self->{data}, '-U', 'postgres',
			'-E', 'UTF8', '--locale=C', '--no-sync', '-A', 'trust'
		],
		'>', "$dir/initdb.log", '2>&1')
	  or croak "initdb of PostgreSQL $major failed:\n" . _tail("$dir/initdb.log", 30);
	open my $conf, '>>', "$self->{data}/postgresql.conf"
	  or croak "could not write postgresql.conf: $!";
	print $conf "\n# added by CtasFed::Test\n"
	  . "listen_addresses = '127.0.0.1'\n"
	  . "port = $self->{port}\n"
	  . "unix_socket_directories = '$self->{sockdir}'\n"
	  . "max_prepared_transactions = $mpt\n"
	  . "password_encryption = 'scram-sha-256'\n"
	  . "fsync = off\nshared_buffers = 32MB\nmax_connections = 50\n"
	  . "timezone = 'UTC'\nlog_line_prefix = '%m [%p] %q%u@%d '\n"
	  . "$extra\n";
	close $conf;
	open my $hba, '>', "$self->{data}/pg_hba.conf"
	  or croak "could not write pg_hba.conf: $!";
	print $hba "# written by CtasFed::Test\n"
	  . "local all all               trust\n"
	  . "host  all all  127.0.0.1/32 $host_auth\n";
	close $hba;

	$self->_start;
	_register($self);

	my @sql;
	foreach my $role (sort keys %$roles)
	{
		my $pw = $roles->{$role};
		push @sql, "CREATE ROLE " . _sql_ident($role) . " LOGIN"
		  . (defined $pw ? " PASSWORD " . _sql_literal($pw) : '') . ";";
	}
	$self->safe_psql('postgres', join("\n", @sql)) if @sql;
	foreach my $db (sort keys %$databases)
	{
		my $owner = $databases->{$db};
		$self->safe_psql('postgres', "CREATE DATABASE " . _sql_ident($db)
			  . (defined $owner ? " OWNER " . _sql_ident($owner) : ''));
	}
	return $self;
}

push @EXPORT, qw(new_versioned_remote_cluster);


package CtasFed::Test::VersionedPg;

use strict;
use warnings;

use Carp;
use IPC::Run ();
use Time::HiRes qw(time usleep);

sub name        { return $_[0]->{name}; }
sub port        { return $_[0]->{port}; }
sub host        { return '127.0.0.1'; }
sub data_dir    { return $_[0]->{data}; }
sub logfile     { return $_[0]->{log}; }

sub connstr
{
	my ($self, $db) = @_;
	return "host=$self->{sockdir} port=$self->{port} user=postgres dbname="
	  . CtasFed::Test::_conninfo_value($db // 'postgres');
}

# pg_ctl start -w, then the postmaster's pid from its pid file
sub _start
{
	my ($self) = @_;
	my $out = '';
	IPC::Run::run(
		[
			"$self->{bindir}/pg_ctl", '-D', $self->{data}, '-l', $self->{log},
			'-w', '-t', '60', 'start'
		],
		'>', \$out, '2>&1')
	  or croak "PostgreSQL $self->{major} did not start:\n$out"
	  . CtasFed::Test::_tail($self->{log}, 30);
	open my $fh, '<', "$self->{data}/postmaster.pid"
	  or croak "no postmaster.pid: $!";
	my $pid = <$fh>;
	close $fh;
	chomp $pid;
	$self->{pid} = $pid;
	return;
}

sub psql
{
	my ($self, $db, $sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $self->connstr($db), '-f', '-' ],
		'<', \$sql, '>', \$out, '2>', \$err, IPC::Run::timeout(180));
	my $rc = $? >> 8;
	chomp $out;
	return wantarray ? ($rc, $out, $err) : $rc;
}

sub safe_psql
{
	my ($self, $db, $sql) = @_;
	my ($rc, $out, $err) = $self->psql($db, $sql);
	croak "psql on $self->{name} failed (exit $rc): $err\nstatement: $sql"
	  if $rc != 0;
	return $out;
}

sub version_num
{
	my ($self) = @_;
	return $self->safe_psql('postgres', 'SHOW server_version_num');
}

# fast shutdown by pid: SIGINT, then SIGKILL after $timeout s
sub stop
{
	my ($self, $timeout) = @_;
	return 1 unless $self->{pid} && $self->{owner} == $$;
	my $pid = $self->{pid};
	kill 'INT', $pid;
	my $deadline = time + ($timeout // 60);
	while (CtasFed::Test::_alive($pid) && time < $deadline)
	{
		usleep(50_000);
	}
	kill 'KILL', $pid if CtasFed::Test::_alive($pid);
	usleep(50_000) while CtasFed::Test::_alive($pid) && time < $deadline + 10;
	return 0 if CtasFed::Test::_alive($pid);
	CtasFed::Test::_unregister($self);
	$self->{pid} = undef;
	return 1;
}

sub restart
{
	my ($self, %opts) = @_;
	$self->stop or croak "PostgreSQL $self->{major} did not stop";
	if (defined $opts{conf})
	{
		open my $conf, '>>', "$self->{data}/postgresql.conf"
		  or croak "could not write postgresql.conf: $!";
		print $conf "$opts{conf}\n";
		close $conf;
	}
	$self->_start;
	CtasFed::Test::_register($self);
	return;
}

sub DESTROY
{
	my ($self) = @_;
	local ($?, $@, $!);
	$self->stop;
	return;
}




#############################################################################
# MariaDB: a private server and the MySQL catalog of a test.  Added as one
# block so that it merges apart from the rest of the package.
#############################################################################

package CtasFed::Test;

=pod

=head2 MariaDB

=over

=item start_mariadb(%opts)

Start a private MariaDB server (C<mariadbd --no-defaults>) with its own
datadir, socket and port on 127.0.0.1, as the OS user C<mysql> when the
test runs as root, else as the user running the test (C<postgres> under
F<test/run.sh>, which cannot switch users).  Waits (60 s at most, option
C<timeout>) until it answers; dies with its error log otherwise.  Drops the
anonymous accounts and creates the account C<loader> (password C<secret>,
or option C<password>) with every privilege, and the database C<shop>.
Returns a CtasFed::Test::MariaDB handle: a hash with C<port>, C<socket>,
C<dir>, C<pid>, C<user> and C<password> (of C<loader>), and the methods
C<sql($sql)> (runs as root over the socket, returns the rows as text, tab
separated, dies on error), C<try_sql($sql)> (returns (exit code, output)),
C<kill9>, C<is_running> and C<stop> (SIGTERM by pid, then SIGKILL).

=back

=cut

sub start_mariadb
{
	my (%opts) = @_;
	my $timeout  = $opts{timeout}  // 60;
	my $password = $opts{password} // 'secret';

	my $server = _find_program('mariadbd', '/usr/sbin')
	  or croak "mariadbd not found: apt-get install mariadb-server mariadb-client";
	my $install = _find_program('mariadb-install-db', '/usr/bin')
	  or croak "mariadb-install-db not found: apt-get install mariadb-server";

	my $dir  = PostgreSQL::Test::Utils::tempdir('mariadb');
	my $port = $opts{port} // free_port();
	my $as_root = $> == 0;
	my @runas = $as_root ? ('runuser', '-u', 'mysql', '--') : ();
	chmod 0755, $dir;
	mkdir "$dir/data" or croak "mkdir $dir/data: $!";
	# a tmpdir of its own: a server that starts removes the temporary
	# tables it finds in its tmpdir, another server's too
	mkdir "$dir/tmp" or croak "mkdir $dir/tmp: $!";
	system('chown', 'mysql:mysql', "$dir/data", "$dir/tmp") if $as_root;

	my $self = bless {
		port     => $port,
		dir      => $dir,
		datadir  => "$dir/data",
		socket   => "$dir/data/mariadb.sock",
		pid_file => "$dir/data/mariadb.pid",
		user     => 'loader',
		password => $password,
		pid      => undef,
		owner    => $$,
		runas    => \@runas,
		server   => $server,
	}, 'CtasFed::Test::MariaDB';

	IPC::Run::run([ @runas, $install, '--no-defaults',
			"--datadir=$self->{datadir}", "--tmpdir=$dir/tmp",
			'--auth-root-authentication-method=normal', '--skip-test-db' ],
		'>', "$dir/install.log", '2>&1', '<', \undef)
	  or croak "mariadb-install-db failed:\n" . _tail("$dir/install.log", 30);
	$self->_start($timeout);

	$self->sql(
		"DROP USER IF EXISTS ''\@'localhost'; "
		  . "CREATE USER 'loader'\@'%' IDENTIFIED BY '$password'; "
		  . "GRANT ALL ON *.* TO 'loader'\@'%'; "
		  . "CREATE DATABASE shop;");
	return $self;
}

=pod

=item mysql_catalog($node, $my, %opts)

A catalog of type C<mysql> on host 127.0.0.1, port $my->{port}, and a user
mapping FOR PUBLIC with user C<loader> and $my's password.  Options as for
C<postgres_catalog>: C<name> (default C<shop>), C<port>, C<options>,
C<user>, C<password>, C<extension>, C<dbname>.

=cut

sub mysql_catalog
{
	my ($node, $my, %opts) = @_;
	my $port = $opts{port} // $my->{port};

	_create_catalog(
		$node, \%opts,
		$opts{name} // 'shop',
		{
			%{ $opts{options} // {} },
			type => 'mysql',
			host => '127.0.0.1',
			port => $port,
		},
		[ 'type', 'host', 'port' ],
		[
			[ user => $opts{user} // 'loader' ],
			[ password => $opts{password} // $my->{password} ]
		]);
	return;
}

push @EXPORT, qw(start_mariadb mysql_catalog);

package CtasFed::Test::MariaDB;

use strict;
use warnings;

use Carp;
use IPC::Run ();
use Time::HiRes qw(time usleep);

sub _start
{
	my ($self, $timeout) = @_;
	my $dir = $self->{dir};
	my $h = IPC::Run::start(
		[
			@{ $self->{runas} }, $self->{server},
			'--no-defaults',                   "--datadir=$self->{datadir}",
			"--socket=$self->{socket}",        "--port=$self->{port}",
			'--bind-address=127.0.0.1',        "--pid-file=$self->{pid_file}",
			"--log-error=$dir/data/error.log", '--skip-name-resolve',
			'--innodb-buffer-pool-size=64M',   '--max-connections=200',
			'--skip-log-bin',                  "--tmpdir=$dir/tmp"
		],
		'<', \undef, '>', "$dir/server.out", '2>', "$dir/server.err");
	$self->{run} = $h;
	my $deadline = time + $timeout;
	while (time < $deadline)
	{
		$self->_read_pid unless $self->{pid};
		if ($self->{pid} && -S $self->{socket})
		{
			my ($rc) = $self->try_sql('SELECT 1');
			if ($rc == 0)
			{
				CtasFed::Test::_register($self);
				return;
			}
		}
		last unless $h->pumpable;
		usleep(200_000);
	}
	my $log = CtasFed::Test::_tail("$dir/data/error.log", 40)
	  . CtasFed::Test::_tail("$dir/server.err", 10);
	$self->{pid} //= ($h->{KIDS}[0]{PID} // undef);
	$self->stop;
	croak "MariaDB did not answer on $self->{socket} within $timeout s:\n$log";
}

sub _read_pid
{
	my ($self) = @_;
	open my $fh, '<', $self->{pid_file} or return;
	my $pid = <$fh>;
	close $fh;
	$self->{pid} = $1 if defined $pid && $pid =~ /^\s*(\d+)/;
	return;
}

sub try_sql
{
	my ($self, $sql) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[
			'mariadb', '--no-defaults', "--socket=$self->{socket}", '-uroot',
			'-N', '-B', '-e', $sql
		],
		'<', \undef, '>', \$out, '2>', \$err);
	return ($ok ? 0 : ($? >> 8 || 1), $out . $err);
}

sub sql
{
	my ($self, $sql) = @_;
	my ($rc, $out) = $self->try_sql($sql);
	croak "MariaDB: $sql\n$out" if $rc != 0;
	chomp $out;
	return $out;
}

sub is_running
{
	my ($self) = @_;
	return CtasFed::Test::_alive($self->{pid});
}

# kill -9 (a server that dies mid-load); restart with ->restart
sub kill9
{
	my ($self) = @_;
	kill 'KILL', $self->{pid} if $self->{pid};
	usleep(100_000) while CtasFed::Test::_alive($self->{pid});
	$self->{run}->finish if $self->{run};
	CtasFed::Test::_unregister($self);
	$self->{pid} = undef;
	unlink $self->{pid_file};
	return;
}

sub restart
{
	my ($self) = @_;
	$self->kill9 if $self->is_running;
	$self->_start(60);
	return;
}

sub stop
{
	my ($self) = @_;
	my $gone = CtasFed::Test::_stop_server($self, 60, $self->{pid_file});
	$self->{run}->finish if $gone && $self->{run} && !$self->{run}->pumpable;
	return $gone;
}

sub DESTROY
{
	my ($self) = @_;
	local ($?, $@, $!);
	$self->stop;
	return;
}


#############################################################################
# A webhook receiver of a test.  Added as one block so that it merges apart
# from the rest of the package.
#############################################################################

package CtasFed::Test;

=pod

=head2 Webhooks

=over

=item start_hook_receiver()

A webhook receiver on 127.0.0.1, in a child process that ends with the
test (without running the test's END blocks): it answers every request 200 and appends its body, one per line, to
a file.  Returns the URL to give as C<notify_url>, the file's path and
the port it listens on.

=item stop_hook_receiver(url)

Stops the receiver that start_hook_receiver() returned C<url> for (a
webhook that went away).

=back

=cut

my @hook_receivers;
my %hook_receiver_of;
END { kill 'TERM', @hook_receivers if @hook_receivers; }

sub start_hook_receiver
{
	my $log = PostgreSQL::Test::Utils::tempdir() . '/hooks.log';
	my $sock = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 20, ReuseAddr => 1)
	  or croak "could not listen: $!";
	my $port = $sock->sockport;
	my $pid = fork();
	croak 'fork failed' unless defined $pid;
	if ($pid == 0)
	{
		$SIG{TERM} = sub { POSIX::_exit(0) };
		while (my $c = $sock->accept)
		{
			my ($head, $body) = ('', '');
			while (my $line = <$c>)
			{
				$head .= $line;
				last if $line eq "\r\n";
			}
			my ($len) = $head =~ /Content-Length:\s*(\d+)/i;
			read($c, $body, $len // 0);
			open my $f, '>>', $log or die;
			print $f "$body\n";
			close $f;
			print $c "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
			close $c;
		}
		POSIX::_exit(0);
	}
	close $sock;
	push @hook_receivers, $pid;
	$hook_receiver_of{"http://127.0.0.1:$port/hook"} = $pid;
	return ("http://127.0.0.1:$port/hook", $log, $port);
}

sub stop_hook_receiver
{
	my ($url) = @_;
	my $pid = delete $hook_receiver_of{$url} or croak "no webhook receiver at $url";
	kill 'TERM', $pid;
	waitpid($pid, 0);
	@hook_receivers = grep { $_ != $pid } @hook_receivers;
	return;
}

push @EXPORT, qw(start_hook_receiver stop_hook_receiver);


#############################################################################
# Exactly once: the per-change write log of a synced table.  Added as one
# block so that it merges apart from the rest of the package.
#############################################################################

package CtasFed::Test;

=pod

=head2 Exactly once: the per-change write log of a synced table

A replayed upsert leaves the same table, so comparing the remote table with
its source cannot see a source transaction applied twice.  These helpers log
every write that the sync makes into a remote table, on the remote itself,
so that a test can count them (docs/sync-exactly-once.md).

=over

=item sync_write_log($target, $table, $keys)

Start logging the writes into remote table C<$table> (schema public of
database dw on a PostgreSQL remote, a C<PostgreSQL::Test::Cluster>;
database dw on ClickHouse, a handle of C<start_clickhouse>); C<$keys> is its
key, comma-separated column names.  PostgreSQL: an AFTER INSERT OR UPDATE
trigger appends (key, md5 of the row) to C<${table}_writes>, in the remote
transaction of the write (a rolled back apply leaves nothing).  ClickHouse:
a materialized view C<${table}_writes> receives (key, _version, _deleted,
hash of the row) of every row inserted, which the merges of the
ReplacingMergeTree cannot hide.  Writes made before the call are not seen.

=item sync_writes($target, $table, $where)

The write log as C<"writes keys repeated">: rows written, distinct keys
written, and writes that repeat an earlier one (PostgreSQL: the same key
with the same row; ClickHouse: the same key and _version).  C<$where>, a
condition on C<k> (the key as text) and, on PostgreSQL, C<n> (the write's
order), limits it.  An exactly-once sync has C<repeated> 0 where the source
wrote each row once.  On ClickHouse a worker that dies between a batch's
rows and its progress row writes the batch again by design (the versions
make it harmless): only a test without such a death may expect 0 there.
C<sync_writes_conflicts($ch, $table)> counts the (key, _version) written
with two different rows, which must be 0 always.

=back

=cut

sub _ch_key_expr
{
	my ($keys) = @_;
	my @k = map { s/^\s+|\s+$//gr } split /,/, $keys;
	return @k == 1 ? "toString($k[0])" : 'toString(tuple(' . join(', ', @k) . '))';
}

sub sync_write_log
{
	my ($target, $table, $keys) = @_;
	my $log = "${table}_writes";

	if ($target->isa('PostgreSQL::Test::Cluster'))
	{
		my $k = join(', ', map { 'NEW.' . (s/^\s+|\s+$//gr) } split /,/, $keys);
		$k = "ROW($k)::text" if $keys =~ /,/;
		$k = "($k)::text" unless $keys =~ /,/;
		$target->safe_psql('dw', qq{
CREATE TABLE public."$log" (n bigserial, k text, img text);
CREATE FUNCTION public."$log"() RETURNS trigger LANGUAGE plpgsql
  SECURITY DEFINER SET search_path = public AS \$\$
BEGIN
  INSERT INTO public."$log" (k, img) VALUES ($k, md5(NEW::text));
  RETURN NULL;
END \$\$;
CREATE TRIGGER "$log" AFTER INSERT OR UPDATE ON public."$table"
  FOR EACH ROW EXECUTE FUNCTION public."$log"();});
		return;
	}
	my @cols = grep { $_ ne '' } split /\n/, $target->query(
		"SELECT name FROM system.columns WHERE database = 'dw' AND table = '$table' "
		  . "FORMAT TabSeparated");
	croak "sync_write_log: no table dw.$table in ClickHouse" unless @cols;
	$target->query("CREATE MATERIALIZED VIEW dw.`$log` ENGINE = MergeTree ORDER BY tuple() AS "
		  . 'SELECT ' . _ch_key_expr($keys) . ' AS k, _version AS v, _deleted AS d, '
		  . 'cityHash64(' . join(', ', map { "`$_`" } @cols) . ") AS h FROM dw.`$table`");
	return;
}

sub sync_writes
{
	my ($target, $table, $where) = @_;
	my $log = "${table}_writes";
	$where //= '1 = 1';

	if ($target->isa('PostgreSQL::Test::Cluster'))
	{
		return $target->safe_psql('dw', qq{
SELECT count(*) || ' ' || count(DISTINCT k) || ' ' ||
       (count(*) - count(DISTINCT (k, img)))
  FROM public."$log" WHERE $where});
	}
	my $r = $target->query("SELECT count(), uniqExact(k), count() - uniqExact(k, v) "
		  . "FROM dw.`$log` WHERE $where FORMAT TabSeparated");
	chomp $r;
	return join(' ', split /\t/, $r);
}

sub sync_writes_conflicts
{
	my ($ch, $table) = @_;
	my $r = $ch->query("SELECT count() FROM (SELECT k, v FROM dw.`${table}_writes` "
		  . "GROUP BY k, v HAVING uniqExact(h) > 1)");
	return $r + 0;
}

push @EXPORT, qw(sync_write_log sync_writes sync_writes_conflicts);


=over

=item cpu_of($pid, $children), children_of($ppid), server_cpu($ppid)

For the benchmarks (F<test/bench/sync_verify.pl>, F<sync_partcopy.pl>):
the CPU seconds of process C<$pid> from F</proc/$pid/stat> (with its
reaped children's when C<$children>); the live children of C<$ppid>; and
the CPU seconds of a PostgreSQL server whose postmaster is C<$ppid>: the
postmaster, its reaped children and its live ones.

=back

=cut

# /proc/$pid/stat: (utime + stime [+ cutime + cstime]) in seconds
sub cpu_of
{
	my ($pid, $children) = @_;
	open my $fh, '<', "/proc/$pid/stat" or return 0;
	my $stat = <$fh>;
	close $fh;
	$stat =~ s/^.*\)\s+//;    # fields from the 3rd (state) on
	my @f = split ' ', $stat;
	my $t = $f[11] + $f[12];
	$t += $f[13] + $f[14] if $children;
	return $t / (POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100);
}

# the live children of $ppid
sub children_of
{
	my ($ppid) = @_;
	my @kids;
	opendir my $d, '/proc' or return ();
	for my $p (grep { /^\d+$/ } readdir $d)
	{
		open my $fh, '<', "/proc/$p/stat" or next;
		my $stat = <$fh>;
		close $fh;
		push @kids, $p if $stat && $stat =~ /\)\s+\S+\s+(\d+)/ && $1 == $ppid;
	}
	closedir $d;
	return @kids;
}

# CPU seconds of a PostgreSQL server: postmaster, reaped and live children
sub server_cpu
{
	my ($ppid) = @_;
	my $t = cpu_of($ppid, 1);
	$t += cpu_of($_, 0) for children_of($ppid);
	return $t;
}

push @EXPORT, qw(cpu_of children_of server_cpu);

1;
