
# Copyright (c) 2026, ctas_fed developers

# Smoke test of the test machinery: the servers every later test uses start,
# answer, and are gone after they are stopped.
#   - local PostgreSQL with test/ctas_fed.conf and CREATE EXTENSION (ctas_fed
#     not installed is a failure that says what to install)
#   - a remote PostgreSQL (max_prepared_transactions, TCP, password auth)
#   - ClickHouse over HTTP, with its password (and Code 193 without it)
#   - a Prometheus Pushgateway

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

# The extension is installed when both its library and its control file
# are where this PostgreSQL looks for them.
my $pkglibdir = `pg_config --pkglibdir`;
my $sharedir  = `pg_config --sharedir`;
my $bindir    = `pg_config --bindir`;
chomp($pkglibdir, $sharedir, $bindir);
my $installed = -f "$pkglibdir/ctas_fed.so"
  && -f "$sharedir/extension/ctas_fed.control";

# --- local PostgreSQL
# ctas_fed not installed is a failure that says what to do, never a skip
ok($installed, "ctas_fed is installed in $pkglibdir and $sharedir")
  or diag "ctas_fed.so or ctas_fed.control is missing: run "
  . "\"make install PG_CONFIG=$bindir/pg_config\" (test/run.sh does)";
my $local = new_cluster('local');
is($local->safe_psql('postgres', 'SELECT 1'), '1', 'local cluster answers');
is($local->safe_psql('postgres', 'SHOW listen_addresses'),
	'127.0.0.1', 'local cluster listens on 127.0.0.1');
is($local->safe_psql('postgres', 'SHOW shared_preload_libraries'),
	'ctas_fed', 'ctas_fed is preloaded');
my ($cret, $cout, $cerr) = $local->psql('postgres', 'CREATE EXTENSION ctas_fed');
is($cret, 0, 'CREATE EXTENSION ctas_fed') or diag $cerr;
is( $local->safe_psql(
		'postgres',
		"SELECT extname FROM pg_extension WHERE extname = 'ctas_fed'"),
	'ctas_fed',
	'the extension is in pg_extension');

# --- remote PostgreSQL, reached over TCP with a password
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
is($remote->safe_psql('postgres', 'SHOW max_prepared_transactions'),
	'10', 'remote cluster allows prepared transactions');

my ($ret, $stdout, $stderr) = $local->psql(
	'postgres', 'SELECT current_user, current_database()',
	extra_params => [
		'-d',
		tcp_connstr(
			$remote,
			dbname   => 'dw',
			user     => 'loader',
			password => 'secret')
	]);
is($ret,    0,           'loader connects to the remote over TCP');
is($stdout, 'loader|dw', 'as loader, to dw');

($ret, $stdout, $stderr) = $local->psql(
	'postgres', 'SELECT 1',
	extra_params => [
		'-d',
		tcp_connstr(
			$remote,
			dbname   => 'dw',
			user     => 'loader',
			password => 'wrong')
	]);
isnt($ret, 0, 'a wrong password is refused');
like($stderr, qr/password authentication failed for user "loader"/,
	'with the password error');

# --- ClickHouse
my $ch = start_clickhouse();
like($ch->{url}, qr{^http://127\.0\.0\.1:\d+$}, 'ClickHouse url');
is($ch->query('SELECT 1'), "1\n", 'ClickHouse answers SELECT 1');
like($ch->query('SELECT version()'), qr/^\d+\.\d+/, 'ClickHouse version');
is($ch->query("SELECT toUnixTimestamp(toDateTime('2000-01-01 00:00:00'))"),
	"946684800\n", 'ClickHouse runs in UTC');

my $res = $ch->request('SELECT 1', password => 'wrong');
isnt($res->{status}, 200, 'ClickHouse refuses a wrong password');
like($res->{content}, qr/^Code: 193\b/, 'with Code 193');

$ch->query('CREATE TABLE t (id UInt32, s String) ENGINE = MergeTree ORDER BY id');
$ch->query('INSERT INTO t FORMAT TabSeparated', data => "1\ta\n2\tb\n");
is($ch->query('SELECT count(), sum(id) FROM t'), "2\t3\n",
	'ClickHouse INSERT with a data body');
ok(!eval { $ch->query('SELECT * FROM no_such_table'); 1 },
	'query() dies on an HTTP error');
like($@, qr/Code: 60\b/, 'with the ClickHouse error in the message');

# --- Pushgateway
my $pgw = start_pushgateway();
like($pgw->get('/metrics'), qr/^# HELP /m, 'Pushgateway answers /metrics');

# --- stop everything; nothing is left running
my %pids = (
	local       => $local->{_pid},
	remote      => $remote->{_pid},
	clickhouse  => $ch->{pid},
	pushgateway => $pgw->{pid});
my %ports = (
	local           => $local->port,
	remote          => $remote->port,
	clickhouse_http => $ch->{http_port},
	clickhouse_tcp  => $ch->{tcp_port},
	pushgateway     => $pgw->{port});

$local->stop;
$remote->stop;
ok($ch->stop,  'ClickHouse stopped');
ok($pgw->stop, 'Pushgateway stopped');

foreach my $name (sort keys %pids)
{
	ok(defined $pids{$name} && !kill(0, $pids{$name}),
		"$name process $pids{$name} is gone");
}
foreach my $name (sort keys %ports)
{
	ok(!port_is_open($ports{$name}), "$name port $ports{$name} is closed");
}

done_testing();
