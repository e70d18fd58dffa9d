
# Copyright (c) 2026, ctas_fed developers

# Two ways a catalog could reach further than its owner may:
#  - notify_url and ctas_fed.allowed_hosts: for a server a non-superuser
#    owns, the webhook's host must be listed, when the option is set
#    (CREATE / ALTER SERVER) and when the notifier sends (the setting may
#    have been narrowed since); a refused webhook is not sent, and the log
#    says why once per job, without the URL;
#  - remote NOTICEs and WARNINGs of a PostgreSQL catalog reach the local
#    log only through ereport, attributed to the catalog, their line breaks
#    escaped: a hostile remote cannot forge a log line.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use CtasFed::Test;

# a webhook receiver (CtasFed::Test): records every request body, one per line
my (undef, $hook_log, $hook_port) = start_hook_receiver();

my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $rport = $remote->port;
my $local = new_cluster('local');

# the webhooks name the receiver "localhost", which allowed_hosts compares
# as a name: 127.0.0.1 can be listed for the catalog's own connection
# without listing the webhook
my $alice_hook = "http://localhost:$hook_port/alice";
my $super_hook = "http://localhost:$hook_port/super";

postgres_catalog($local, $remote, name => 's_wh',
	options => { notify_url => $super_hook });
$local->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
GRANT USAGE ON FOREIGN DATA WRAPPER ctas_fed TO alice;
});

# --- helpers (no assertions)

# run SQL as alice / as the superuser with verbose errors (SQLSTATE shown)
sub as_alice
{
	my ($sql) = @_;
	return $local->psql('postgres', "\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', 'alice' ]);
}

sub as_super
{
	my ($sql) = @_;
	return $local->psql('postgres', "\\set VERBOSITY verbose\n$sql");
}

sub set_allowed_hosts
{
	my ($value) = @_;
	$local->safe_psql('postgres',
		"ALTER SYSTEM SET ctas_fed.allowed_hosts = '$value'; SELECT pg_reload_conf();");
	# a new session has it once the postmaster reloaded and signalled the
	# notifier
	foreach (1 .. 100)
	{
		return if $local->safe_psql('postgres', 'SHOW ctas_fed.allowed_hosts') eq $value;
		usleep(50_000);
	}
	die "ctas_fed.allowed_hosts did not become '$value'";
}

sub hooks
{
	return -f $hook_log ? slurp_file($hook_log) : '';
}

# wait until the receiver got the "committed" event of target
sub wait_hook
{
	my ($target) = @_;
	return wait_until(30,
		sub { hooks() =~ /"target": "public\.$target", "mode": "atomic", "state": "committed"/ });
}

sub remote_count
{
	my ($table) = @_;
	return $remote->safe_psql('dw', "SELECT count(*) FROM public.$table");
}

my ($ret, $out, $err);

# --- notify_url: while allowed_hosts is empty, alice's webhook works

($ret, $out, $err) = as_alice(qq{
CREATE SERVER a_wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw',
           notify_url '$alice_hook');
CREATE USER MAPPING FOR alice SERVER a_wh OPTIONS (user 'loader', password 'secret');});
is($ret, 0, 'a non-superuser names any webhook host while allowed_hosts is empty')
  or diag($err);
($ret, $out, $err) = as_alice('CREATE TABLE a_wh.public.a_open AS SELECT g FROM generate_series(1, 3) g');
is($ret, 0, 'alice loads') or diag($err);
ok(wait_hook('a_open'), 'her webhook arrives while the setting is empty');

# --- validation time

set_allowed_hosts('127.0.0.1');

($ret, $out, $err) = as_alice(qq{
CREATE SERVER a_meta FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw',
           notify_url 'http://169.254.169.254/latest/meta-data')});
like($err, qr/ERROR:  42501: host "169\.254\.169\.254" in option "notify_url" is not allowed/,
	'CREATE SERVER: a non-superuser cannot point notify_url at an unlisted host');
like($err, qr/HINT:  .*ctas_fed\.allowed_hosts/, 'the hint names the setting');
is($local->safe_psql('postgres', q{SELECT count(*) FROM pg_foreign_server WHERE srvname = 'a_meta'}),
	'0', 'no server was created');

($ret, $out, $err) = as_alice(
	"ALTER SERVER a_wh OPTIONS (SET notify_url 'http://10.0.0.1:8080/hook')");
like($err, qr/ERROR:  42501: host "10\.0\.0\.1" in option "notify_url" is not allowed/,
	'ALTER SERVER: the same');
like($local->safe_psql('postgres',
		q{SELECT array_to_string(srvoptions, ' ') FROM pg_foreign_server WHERE srvname = 'a_wh'}),
	qr/notify_url=\Q$alice_hook\E/, 'the option kept its value');

($ret, $out, $err) = as_super(qq{
CREATE SERVER s_meta FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw',
           notify_url 'http://169.254.169.254/hook')});
is($ret, 0, 'a superuser names any webhook host') or diag($err);

# --- send time: alice's server was made while the list was open

# (should the ALTER SERVER above have passed, the superuser puts it back)
$local->safe_psql('postgres',
	"ALTER SERVER a_wh OPTIONS (SET notify_url '$alice_hook')");
my $log_offset = -s $local->logfile;
($ret, $out, $err) = as_alice('CREATE TABLE a_wh.public.a_narrowed AS SELECT g FROM generate_series(1, 5) g');
is($ret, 0, 'alice still loads: her catalog\'s host is listed') or diag($err);
is(remote_count('a_narrowed'), '5', 'all 5 rows are on the remote');
# the notifier sends in order: once the superuser's later webhook arrived,
# alice's would have
($ret, $out, $err) = as_super('CREATE TABLE s_wh.public.s_after AS SELECT 1 AS a');
is($ret, 0, 'the superuser loads') or diag($err);
ok(wait_hook('s_after'), 'the superuser\'s webhook to the same unlisted host is sent');
unlike(hooks(), qr/a_narrowed/, 'no event of alice\'s job reached the unlisted host');

my $job = $local->safe_psql('postgres',
	q{SELECT job_id FROM ctas_fed.jobs WHERE target = 'public.a_narrowed'});
ok(wait_log($local, qr/did not send the status of job $job to the webhook of catalog "a_wh"/,
		$log_offset), 'the log says the webhook was not sent');
my $log = slurp_file($local->logfile, $log_offset);
like($log, qr/DETAIL:  The owner of the catalog's server is not a superuser, and option "notify_url" names host "localhost", which "ctas_fed\.allowed_hosts" does not list\./,
	'and why');
my @said = $log =~ /did not send the status of job $job /g;
is(scalar @said, 1, 'once for the job, not for each of its events');
unlike($log, qr/\Q$alice_hook\E/, 'the URL is not logged');

set_allowed_hosts('127.0.0.1, LOCALHOST');
($ret, $out, $err) = as_alice('CREATE TABLE a_wh.public.a_listed AS SELECT 1 AS a');
is($ret, 0, 'alice loads') or diag($err);
ok(wait_hook('a_listed'), 'once the host is listed, her webhook is sent again');
set_allowed_hosts('');

# --- remote notices: a remote event trigger that says too much

$remote->safe_psql('dw', q{
CREATE FUNCTION public.noisy() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE E'remote says hi\n2026-01-01 00:00:00.000 UTC [1] LOG:  forged entry';
  RAISE WARNING E'second\r\nLOG:  forged too';
END $$;
CREATE EVENT TRIGGER noisy ON ddl_command_end EXECUTE FUNCTION public.noisy();
});

$log_offset = -s $local->logfile;
($ret, $out, $err) = as_super('CREATE TABLE s_wh.public.noisy AS SELECT g FROM generate_series(1, 4) g');
is($ret, 0, 'a CTAS into a catalog that sends notices works') or diag($err);
is(remote_count('noisy'), '4', 'all 4 rows are on the remote');
ok(wait_log($local, qr/catalog "s_wh" sent WARNING: /, $log_offset),
	'the remote messages reached the local log');
$log = slurp_file($local->logfile, $log_offset);
like($log,
	qr/LOG:  catalog "s_wh" sent NOTICE: remote says hi\\n2026-01-01 00:00:00\.000 UTC \[1\] LOG:  forged entry\n/,
	'the NOTICE is logged on one line, attributed, its line break escaped');
like($log, qr/LOG:  catalog "s_wh" sent WARNING: second\\r\\nLOG:  forged too\n/,
	'the WARNING too, carriage return included');
unlike($log, qr/^2026-01-01 00:00:00\.000 UTC \[1\] LOG:  forged entry/m,
	'no forged line starts a line of the log');
unlike($log, qr/^LOG:  forged too/m, 'nor the second one');
unlike($log, qr/^(NOTICE|WARNING):  (remote says hi|second)/m,
	'libpq\'s default processor printed nothing raw');
is($remote->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'),
	'0', 'no prepared transaction is left on the remote');

done_testing();
