
# Copyright (c) 2026, ctas_fed developers

# Jobs, status webhooks, metrics and crash recovery:
#  - ctas_fed.jobs shows a running job's rows growing from another session;
#  - a local crash after the remote PREPARE is rolled back by the worker;
#  - a local crash after the local commit record is committed by the worker;
#  - the remote down during COMMIT PREPARED: COMMIT succeeds with a WARNING
#    naming the gid, and the worker commits once the remote is back;
#  - the history of committed and aborted jobs survives a crash restart;
#  - webhooks arrive for running -> committed and running -> aborted;
#  - ctas_fed.metrics() passes promtool, and the Pushgateway holds the
#    pushed series.
# That a dead webhook endpoint does not slow commits down is timed: it is in
# 302_jobs_webhook_dead.pl, which runs alone.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use CtasFed::Test;

my $pgw = start_pushgateway();

# a webhook receiver (CtasFed::Test): records every request body, one per line
my ($hook_url, $hook_log, $hook_port) = start_hook_receiver();

my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });

my $local = new_cluster('local',
	conf => "ctas_fed.resolver_naptime = 1\n"
	  . "ctas_fed.pushgateway_url = '" . $pgw->{url} . "'\n");
postgres_catalog($local, $remote,
	options => { notify_url => "http://127.0.0.1:$hook_port/hook" });
postgres_catalog($local, $remote, name => 'wh_quiet');
$local->safe_psql('postgres',
	'CREATE TABLE src AS SELECT g AS id, md5(g::text) AS t FROM generate_series(1, 20000) g');

sub remote_has
{
	my ($table) = @_;
	return $remote->safe_psql('dw',
		"SELECT count(*) FROM pg_class WHERE relname = '$table'");
}

sub prepared { return $remote->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'); }

sub job_state
{
	my ($target) = @_;
	return $local->safe_psql('postgres',
		"SELECT state FROM ctas_fed.jobs WHERE target = 'public.$target' ORDER BY job_id DESC LIMIT 1");
}

# wait until the worker saved the registry with every target in @targets
# (pg_stat/ctas_fed_jobs.stat holds each job's target name)
sub wait_registry_saved
{
	my (@targets) = @_;
	my $file = $local->data_dir . '/pg_stat/ctas_fed_jobs.stat';
	foreach (1 .. 300)
	{
		if (-f $file)
		{
			my $content = slurp_file($file);
			return 1 unless grep { index($content, $_) < 0 } @targets;
		}
		usleep(100_000);
	}
	return 0;
}

my $src_digest = sql_digest($local, 'postgres', 'SELECT * FROM src');

# the invariant after a crash, once the worker resolved (no explicit
# resolve_in_doubt: the promise is that the worker does it)
sub after_crash
{
	my ($table, $committed, $name) = @_;
	my $s = session_start($local);
	check_invariant(
		name      => $name,
		node      => $local,
		committed => $committed,
		targets   => [ { pg => $remote, dbname => 'dw', table => "public.$table",
			expect => $src_digest } ],
		jobs      => [ [ 'wh_quiet', "public.$table", $committed ? 'committed' : 'aborted' ] ],
		session   => $s,
		session_ctas => "CREATE TABLE wh_quiet.public.after_$table AS SELECT 1 AS a");
	$s->quit;
	return;
}

sub wait_for
{
	my ($sql, $expected, $what, $node) = @_;
	$node //= $local;
	foreach (1 .. 300)
	{
		return 1 if $node->safe_psql('postgres', $sql) eq $expected;
		usleep(100_000);
	}
	diag "$what: " . $node->safe_psql('postgres', $sql);
	return 0;
}


# --- a running job's rows advance, seen from another session
my ($h, $out, $err) = start_psql($local, "CREATE TABLE wh_quiet.public.slow AS SELECT id, t, pg_sleep(0.0005) IS NULL AS s FROM src");
ok(wait_for("SELECT count(*) > 0 FROM ctas_fed.jobs WHERE target = 'public.slow' AND state = 'running' AND rows > 0",
		't', 'running job visible'), 'a running job is visible with rows');
my $r1 = $local->safe_psql('postgres', "SELECT rows FROM ctas_fed.jobs WHERE target = 'public.slow'");
my $r2 = $r1;
foreach (1 .. 100)
{
	$r2 = $local->safe_psql('postgres', "SELECT rows FROM ctas_fed.jobs WHERE target = 'public.slow'");
	last if $r2 > $r1;
	usleep(50_000);
}
cmp_ok($r2, '>', $r1, "its rows advance ($r1 -> $r2)");
$h->finish;
is(job_state('slow'), 'committed', 'the job ends committed');
is($local->safe_psql('postgres', "SELECT rows FROM ctas_fed.jobs WHERE target = 'public.slow'"),
	'20000', 'with all its rows');

# --- progress NOTICEs, when asked for
($h, $out, $err) = start_psql($local,
	"SET ctas_fed.progress = on; SET ctas_fed.progress_interval = 1; "
	  . "CREATE TABLE wh_quiet.public.prog AS SELECT id, pg_sleep(0.0005) IS NULL AS s FROM src WHERE id <= 6000");
$h->finish;
like($$err, qr/NOTICE:  loading into wh_quiet\.public\.prog: \d+ rows, \d+ bytes, \d+ rows\/s/,
	'ctas_fed.progress reports rows, bytes and rate');

# --- webhooks: running -> committed, running -> aborted
$local->safe_psql('postgres', 'CREATE TABLE wh.public.hooked AS SELECT * FROM src');
$local->safe_psql('postgres', 'BEGIN; CREATE TABLE wh.public.hooked_rb AS SELECT * FROM src WHERE id <= 10; ROLLBACK;');
my $hooks = '';
foreach (1 .. 100)
{
	$hooks = -f $hook_log ? slurp_file($hook_log) : '';
	last if $hooks =~ /"public.hooked_rb".*"state": "aborted"/;
	usleep(100_000);
}
like($hooks, qr/"target": "public.hooked", "mode": "atomic", "state": "running"/, 'webhook: running');
like($hooks, qr/"target": "public.hooked", "mode": "atomic", "state": "committed", "rows": 20000/,
	'webhook: committed with its rows');
like($hooks, qr/"target": "public.hooked_rb", "mode": "atomic", "state": "aborted", "rows": 10/,
	'webhook: aborted with its rows');
unlike($hooks, qr/secret/, 'no secret in any webhook');

# --- metrics: promtool, Pushgateway
my $metrics = $local->safe_psql('postgres', 'SELECT ctas_fed.metrics()');
my $mfile = PostgreSQL::Test::Utils::tempdir() . '/metrics.txt';
open my $mf, '>', $mfile or die;
print $mf "$metrics\n";
close $mf;
my $promtool = `which promtool`;
chomp $promtool;
ok($promtool ne '', 'promtool is installed');
my $check = `$promtool check metrics < $mfile 2>&1`;
is($?, 0, 'promtool check metrics passes') or diag $check;
like($metrics, qr/ctas_fed_rows_total\{catalog="wh"\} 20000/, 'rows by catalog');
my $pushed = '';
foreach (1 .. 100)
{
	$pushed = $pgw->get('/metrics');
	last if $pushed =~ /ctas_fed_rows_total\{.*catalog="wh"/;
	usleep(100_000);
}
like($pushed, qr/ctas_fed_rows_total\{[^}]*catalog="wh"[^}]*\} 20000/,
	'the Pushgateway holds the pushed series');

# --- local crash after the remote PREPARE: the worker rolls back
($h, $out, $err) = start_psql($local, "SET ctas_fed.fault_point = 'after_prepare'; CREATE TABLE wh_quiet.public.crash_prep AS SELECT * FROM src");
ok(wait_for("SELECT count(*) FROM pg_prepared_xacts", '1', 'prepared on the remote', $remote),
	'the remote transaction is prepared');
ok(wait_registry_saved('public.crash_prep'), 'the worker saved the registry with the job');
$local->stop('immediate');
$h->finish;
is(remote_has('crash_prep'), '0', 'not visible while in doubt');
$local->start;
ok(wait_for("SELECT count(*) FROM pg_prepared_xacts", '0', 'resolved', $remote),
	'after restart the worker resolves the prepared transaction');
is(remote_has('crash_prep'), '0', 'crash after PREPARE: rolled back, no table');
ok(wait_for("SELECT state FROM ctas_fed.jobs WHERE target = 'public.crash_prep'", 'aborted', 'job state'),
	'the job is recorded as aborted');
after_crash('crash_prep', 0, 'crash after PREPARE');

# --- local crash after the local commit record: the worker commits
# (the wait event Extension alone does not tell the fault point from
# ctas_fed's socket waits during the COPY: the log line does)
my $offset = -s $local->logfile;
($h, $out, $err) = start_psql($local, "SET ctas_fed.fault_point = 'after_commit_record'; CREATE TABLE wh_quiet.public.crash_commit AS SELECT * FROM src");
ok($local->wait_for_log(qr/stopped at fault point "after_commit_record"/, $offset),
	'the backend waits after its commit record');
ok(wait_registry_saved('public.crash_commit'), 'the worker saved the registry with the job');
$local->stop('immediate');
$h->finish;
is(prepared(), '1', 'the remote transaction is in doubt');
$local->start;
ok(wait_for("SELECT count(*) FROM pg_prepared_xacts", '0', 'resolved', $remote),
	'after restart the worker resolves it');
is($remote->safe_psql('dw', 'SELECT count(*) FROM crash_commit'), '20000',
	'crash after the commit record: committed, with all rows');
ok(wait_for("SELECT state FROM ctas_fed.jobs WHERE target = 'public.crash_commit'", 'committed', 'job state'),
	'the job is recorded as committed');
after_crash('crash_commit', 1, 'crash after the commit record');

# --- history survives a crash restart
my $before = $local->safe_psql('postgres',
	"SELECT string_agg(target || ':' || state, ',' ORDER BY job_id) FROM ctas_fed.jobs WHERE target IN ('public.hooked', 'public.hooked_rb')");
is($before, 'public.hooked:committed,public.hooked_rb:aborted', 'committed and aborted jobs in the history');
ok(wait_registry_saved('public.hooked', 'public.hooked_rb'), 'the registry on disk has them');
$local->stop('immediate');
$local->start;
is($local->safe_psql('postgres',
		"SELECT string_agg(target || ':' || state, ',' ORDER BY job_id) FROM ctas_fed.jobs WHERE target IN ('public.hooked', 'public.hooked_rb')"),
	$before, 'the history survives a crash restart');

# --- a job the launcher had no time to save before a crash does not give
# its id to another job after the restart (ids are reserved on disk ahead;
# its webhook events may already carry it).  The launcher is stopped with
# SIGSTOP so that it cannot save, then killed: a crash.
my $launcher = $local->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'ctas_fed launcher'");
like($launcher, qr/^\d+$/, 'the launcher runs');
$local->safe_psql('postgres',
	'CREATE TABLE wh_quiet.public.before_unsaved AS SELECT * FROM src LIMIT 10');
ok(wait_registry_saved('public.before_unsaved'), 'the registry is saved before the launcher stops');
kill 'STOP', $launcher;
$local->safe_psql('postgres',
	'CREATE TABLE wh_quiet.public.unsaved AS SELECT * FROM src LIMIT 10');
my $unsaved_id = $local->safe_psql('postgres',
	"SELECT job_id FROM ctas_fed.jobs WHERE target = 'public.unsaved'");
like($unsaved_id, qr/^\d+$/, 'the job that will be lost has an id');
$offset = -s $local->logfile;
kill 'KILL', $launcher;
# the test clusters run with restart_after_crash = off: the server goes down
ok($local->wait_for_log(qr/terminated by signal 9.*\n(.*\n)*.*database system is shut down/, $offset),
	'killing the launcher crashes the server');
$local->_update_pid(0);
$local->start;
ok(wait_for("SELECT count(*) FROM ctas_fed.jobs WHERE target = 'public.unsaved'", '0', 'job lost'),
	'the unsaved job is gone from the history (the crash came before any save)');
$local->safe_psql('postgres',
	'CREATE TABLE wh_quiet.public.after_unsaved AS SELECT * FROM src LIMIT 10');
my $new_id = $local->safe_psql('postgres',
	"SELECT job_id FROM ctas_fed.jobs WHERE target = 'public.after_unsaved'");
cmp_ok($new_id, '>', $unsaved_id,
	'the first job after the crash gets an id above the lost job\'s');

# the launcher cannot save: a job still runs, with a WARNING (the registry
# never fails a statement)
$local->restart;
$launcher = $local->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'ctas_fed launcher'");
kill 'STOP', $launcher;
my ($ret, $o, $e) = $local->psql('postgres',
	'CREATE TABLE wh_quiet.public.unreserved AS SELECT * FROM src LIMIT 10');
kill 'CONT', $launcher;
is($ret, 0, 'a job whose id the launcher cannot reserve still runs');
like($e, qr/WARNING:  ctas_fed could not reserve job ids in "pg_stat\/ctas_fed_jobs.stat"/,
	'with a WARNING that its id is not reserved');
is($remote->safe_psql('dw', 'SELECT count(*) FROM unreserved'), '10',
	'and its rows arrive');

# --- the remote goes down during COMMIT PREPARED
($h, $out, $err) = start_psql($local, "SET ctas_fed.fault_point = 'after_commit_record:8'; CREATE TABLE wh_quiet.public.remote_down AS SELECT * FROM src");
ok(wait_for("SELECT count(*) FROM pg_prepared_xacts", '1', 'prepared', $remote), 'prepared before the remote stops');
$remote->stop('fast');
$h->finish;
like($$err, qr/WARNING:  could not commit prepared transaction "ctas_fed_\d+_\d+_1" on catalog "wh_quiet"/,
	'COMMIT warns with the gid');
unlike($$err, qr/ERROR/, 'and succeeds');
is(job_state('remote_down'), 'in_doubt', 'the job is in doubt');
$remote->start;
ok(wait_for("SELECT count(*) FROM pg_prepared_xacts", '0', 'resolved', $remote),
	'once the remote is back the worker commits it');
is($remote->safe_psql('dw', 'SELECT count(*) FROM remote_down'), '20000', 'all rows are there');
ok(wait_for("SELECT state FROM ctas_fed.jobs WHERE target = 'public.remote_down'", 'committed', 'job state'),
	'the job is recorded as committed');
after_crash('remote_down', 1, 'remote down during COMMIT PREPARED');

stop_hook_receiver($hook_url);
done_testing();
