
# Copyright (c) 2026, ctas_fed developers

# The timed promises of the README for PostgreSQL catalogs (this file runs
# alone, so that the machine is not busy with another test):
#   - cancel while ctas_fed waits on the socket of a remote that does not
#     read (remote backend stopped with SIGSTOP): 57014 at once
#   - COMMIT PREPARED after the local commit is bounded (30 s) and a WARNING;
#     ctas_fed_in_doubt and ctas_fed_oldest_in_doubt_age_seconds of that job
#   - the webhook queue overflows without slowing anything, and is counted
#     (ctas_fed_webhook_events_dropped_total)
# The other promises are in 110_promises.pl.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(time);

use CtasFed::Test;

my $pw = 'Pw-honest-4f9c2e';    # the password of every mapping

# the resolver must not race the in-doubt assertions below
my $local  = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $remote = new_remote_cluster('remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => $pw },
	databases => { dw => 'loader' });

# a webhook endpoint that accepts connections and never answers
my $silent = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 5, ReuseAddr => 1)
  or die "could not listen: $!";
my $hookport = $silent->sockport;

my $rport = $remote->port;
$local->safe_psql('postgres', qq{
SET log_statement = 'none';
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE SERVER hook FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw',
           notify_url 'http://127.0.0.1:$hookport/hook');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password '$pw');
CREATE USER MAPPING FOR PUBLIC SERVER hook OPTIONS (user 'loader', password '$pw');
});

sub metrics
{
	return $local->safe_psql('postgres', 'SELECT ctas_fed.metrics()');
}

# the value of one sample of the metrics text; undef when absent
sub metric
{
	my ($text, $sample) = @_;
	return $text =~ /^\Q$sample\E (\S+)$/m ? $1 : undef;
}

sub remote_has_table
{
	my ($node, $table) = @_;
	return $node->safe_psql('dw',
		"SELECT count(*) FROM pg_class WHERE relname = '$table'");
}

sub prepared
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(gid, ',' ORDER BY gid), '') FROM pg_prepared_xacts");
}

# pid of the remote backend of ctas_fed on $node (database dw), waiting
# until it runs a statement matching $like when given
sub remote_backend
{
	my ($node, $like) = @_;
	my $cond = defined $like ? " AND state = 'active' AND query LIKE '$like'" : '';
	return wait_until(
		30,
		sub {
			$node->safe_psql('postgres',
				"SELECT pid FROM pg_stat_activity WHERE application_name = 'ctas_fed' "
				  . "AND datname = 'dw'$cond LIMIT 1");
		});
}

# --- cancel while ctas_fed itself waits on the socket of the remote
my ($h, $hout, $herr) = start_psql_timed($local,
	"CREATE TABLE wh.public.stalled AS SELECT g, repeat('x', 2000) AS pad "
	  . "FROM generate_series(1, 1000000) g",
	psql_args => [ '-v', 'VERBOSITY=verbose' ]);
my $rpid = remote_backend($remote, 'COPY%');
ok($rpid, 'the remote backend runs the COPY');
kill 'STOP', $rpid;
# the local backend fills the socket and then waits for it, in ctas_fed's
# loop (wait event "Extension"), with the query still running
my $lpid = wait_until(
	30,
	sub {
		$local->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE wait_event = 'Extension' "
			  . "AND query LIKE 'CREATE TABLE wh.public.stalled%'");
	});
ok($lpid, 'the CTAS waits on the socket of the stopped remote');
my $off = -s $local->logfile;
my $t0  = time;
$local->safe_psql('postgres', "SELECT pg_cancel_backend($lpid)");
ok(wait_log($local, qr/ERROR:  canceling statement due to user request/, $off, 30),
	'the cancel is reported');
my $cancel_secs = time - $t0;
cmp_ok($cancel_secs, '<', 3,
	"while the remote is still stopped, within seconds ($cancel_secs s)");
kill 'CONT', $rpid;
$h->finish;
like($$herr, qr/^ERROR:  57014: canceling statement due to user request$/m,
	'the CTAS ends with 57014');
is(remote_has_table($remote, 'stalled'), 0, 'canceled: no remote table');
is(prepared($remote), '', 'canceled: no prepared transaction');

# --- COMMIT PREPARED after the local commit is bounded in time
# stop at the local commit record for 3 s, stop the remote backend meanwhile
$off = -s $local->logfile;
($h, $hout, $herr) = start_psql_timed($local,
	"SET ctas_fed.fault_point = 'after_commit_record:3'; "
	  . "CREATE TABLE wh.public.slow_commit AS SELECT 1 AS a",
	psql_args => [ '-v', 'VERBOSITY=verbose' ]);
ok(wait_log($local, qr/stopped at fault point "after_commit_record"/, $off, 60),
	'the backend reached the local commit record');
$t0   = time;
# the newest ctas_fed session on the remote is the one of this backend
$rpid = $remote->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE application_name = 'ctas_fed' "
	  . "AND datname = 'dw' ORDER BY backend_start DESC LIMIT 1");
kill 'STOP', $rpid;
# the job goes in doubt after the bound, and wakes the resolver at once:
# keep the resolver from settling it (new logins of the mapping's user are
# refused) until the metrics of the job in doubt have been read
$remote->safe_psql('postgres', 'ALTER ROLE loader NOLOGIN');
$h->finish;
my $commit_secs = time - $t0;
kill 'CONT', $rpid;
like($$herr,
	qr/WARNING:  08006: could not commit prepared transaction "ctas_fed_\d+_\d+_\d+" on catalog "wh"/,
	'a remote that does not answer COMMIT PREPARED: a WARNING naming the gid');
unlike($$herr, qr/ERROR/, 'and no error: the local transaction committed');
cmp_ok($commit_secs, '<', 3 + 30 + 10,
	"the local COMMIT waits at most the 30 s bound ($commit_secs s)");
cmp_ok($commit_secs, '>=', 30, 'and does not give up before it');
is( $local->safe_psql('postgres',
		"SELECT state FROM ctas_fed.jobs WHERE target = 'public.slow_commit'"),
	'in_doubt',
	'the job is in doubt');
my $m = metrics();
is(metric($m, 'ctas_fed_in_doubt'), 1, 'ctas_fed_in_doubt: 1');
cmp_ok(metric($m, 'ctas_fed_oldest_in_doubt_age_seconds'), '>=', 30,
	'ctas_fed_oldest_in_doubt_age_seconds: the age of that job');
$remote->safe_psql('postgres', 'ALTER ROLE loader LOGIN');
# the remote, running again, commits the prepared transaction or leaves it
# to the resolver; either way it ends committed
$local->safe_psql('postgres', "SELECT * FROM ctas_fed.resolve_in_doubt('wh')");
ok(wait_until(30, sub { prepared($remote) eq '' }),
	'no prepared transaction is left');
is($remote->safe_psql('dw', 'SELECT a FROM slow_commit'), '1',
	'the remote table is committed');

# --- the webhook queue overflows (256 events), without delaying anyone
my $sql = join('', map { "CREATE TABLE hook.public.h$_ AS SELECT $_ AS a;\n" } 1 .. 150);
$t0 = time;
$local->safe_psql('postgres', $sql);
my $hook_secs = time - $t0;
cmp_ok($hook_secs, '<', 60, "150 CTAS with a webhook that never answers ($hook_secs s)");
my $dropped = metric(metrics(), 'ctas_fed_webhook_events_dropped_total');
# every job queues at least 2 events (running, then its end): 300 or more
cmp_ok($dropped, '>=', 300 - 256 - 3,
	"ctas_fed_webhook_events_dropped_total counts the dropped events ($dropped)");
is($remote->safe_psql('dw', "SELECT count(*) FROM pg_class WHERE relname ~ '^h[0-9]+\$'"),
	'150', 'and every load committed');

close $silent;
done_testing();
