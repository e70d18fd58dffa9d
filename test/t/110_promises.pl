
# Copyright (c) 2026, ctas_fed developers

# Promises of the README for PostgreSQL catalogs that no other test holds
# ctas_fed to, each checked where it can fail:
#   - the metrics of known jobs: ctas_fed_jobs, ctas_fed_jobs_ended_total,
#     ctas_fed_bytes_total, ctas_fed_job_duration_seconds, ctas_fed_in_doubt,
#     ctas_fed_oldest_in_doubt_age_seconds,
#     ctas_fed_webhook_events_dropped_total
#   - the command tag "SELECT n" of a federated CTAS
#   - one-phase commit: a later failure leaves the remote commit and a WARNING
#   - backend memory does not grow with the number of rows
#   - no password in the server log, in errors or in ctas_fed.jobs
#   - the xid of a transaction that joined a catalog is durable before any
#     remote work: after a crash it is not handed out again
# The promises that are timed (cancel at once, the 30 s bound of COMMIT
# PREPARED, the webhook queue that slows nothing down) are in
# 111_promises_timed.pl, which runs alone.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use CtasFed::Test;

my $pw     = 'Pw-honest-4f9c2e';     # the password of every mapping
my $badpw  = 'Bad-pw-honest-77d1';   # a wrong one, for the error path
my %remote_opts = (
	host_auth => 'scram-sha-256',
	roles     => { loader => $pw },
	databases => { dw => 'loader' });

# the resolver must not race the in-doubt assertions below
my $local  = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $remote = new_remote_cluster('remote', %remote_opts);
my $nopre  = new_remote_cluster('nopre', %remote_opts,
	max_prepared_transactions => 0);
my $tight = new_remote_cluster('tight', %remote_opts,
	max_prepared_transactions => 1);

my ($rport, $nport, $tport) = ($remote->port, $nopre->port, $tight->port);
# log_statement = none: the passwords of the mappings are not in the log
# because of the test's own statements
$local->safe_psql('postgres', qq{
SET log_statement = 'none';
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE SERVER mx FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE SERVER np FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$nport', dbname 'dw');
CREATE SERVER tight FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$tport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password '$pw');
CREATE USER MAPPING FOR PUBLIC SERVER mx OPTIONS (user 'loader', password '$pw');
CREATE USER MAPPING FOR PUBLIC SERVER bad OPTIONS (user 'loader', password '$badpw');
CREATE USER MAPPING FOR PUBLIC SERVER np OPTIONS (user 'loader', password '$pw');
CREATE USER MAPPING FOR PUBLIC SERVER tight OPTIONS (user 'loader', password '$pw');
});
my $log_start = -s $local->logfile;

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

# --- known jobs on catalog mx, then their metrics
my ($ret, $out, $err) = psql_verbose($local,
	'CREATE TABLE mx.public.m1 AS SELECT g AS id FROM generate_series(1, 10) g');
is($ret, 0, 'CTAS of 10 rows') or diag $err;
is($out, 'SELECT 10', 'the command tag is "SELECT 10"');
($ret, $out, $err) = psql_verbose($local,
	'CREATE TABLE mx.public.m2 AS SELECT g AS id, md5(g::text) AS h FROM generate_series(1, 5) g');
is($out, 'SELECT 5', 'the command tag is "SELECT 5"');
$local->safe_psql('postgres',
	'BEGIN; CREATE TABLE mx.public.m3 AS SELECT 1 AS a; ROLLBACK;');
($ret, $out, $err) = psql_verbose($local,
	'CREATE TABLE mx.public.m4 AS SELECT 1 / (g - 3) AS x FROM generate_series(1, 5) g');
like($err, qr/^ERROR:  22012: division by zero$/m, 'a failing CTAS: 22012');

my $bytes = $local->safe_psql('postgres',
	"SELECT sum(bytes) FROM ctas_fed.jobs WHERE catalog = 'mx' AND state = 'committed'");
my $m = metrics();
cmp_ok($bytes, '>', 0, 'committed jobs have bytes');
is(metric($m, 'ctas_fed_jobs{catalog="mx",state="committed"}'), 2, 'ctas_fed_jobs: 2 committed');
is(metric($m, 'ctas_fed_jobs{catalog="mx",state="aborted"}'),   1, 'ctas_fed_jobs: 1 aborted');
is(metric($m, 'ctas_fed_jobs{catalog="mx",state="failed"}'),    1, 'ctas_fed_jobs: 1 failed');
is(metric($m, 'ctas_fed_jobs{catalog="mx",state="running"}'),   0, 'ctas_fed_jobs: none running');
is(metric($m, 'ctas_fed_jobs_ended_total{catalog="mx",state="committed"}'), 2,
	'ctas_fed_jobs_ended_total: 2 committed');
is(metric($m, 'ctas_fed_jobs_ended_total{catalog="mx",state="aborted"}'), 1,
	'ctas_fed_jobs_ended_total: 1 aborted');
is(metric($m, 'ctas_fed_jobs_ended_total{catalog="mx",state="failed"}'), 1,
	'ctas_fed_jobs_ended_total: 1 failed');
is(metric($m, 'ctas_fed_rows_total{catalog="mx"}'), 15, 'ctas_fed_rows_total: 15');
is(metric($m, 'ctas_fed_bytes_total{catalog="mx"}'), $bytes,
	'ctas_fed_bytes_total: the bytes of the committed jobs');
is(metric($m, 'ctas_fed_job_duration_seconds_count{catalog="mx"}'), 4,
	'ctas_fed_job_duration_seconds: 4 jobs ended');
is(metric($m, 'ctas_fed_job_duration_seconds_bucket{catalog="mx",le="+Inf"}'), 4,
	'ctas_fed_job_duration_seconds: +Inf bucket');
my @buckets = $m =~ /^ctas_fed_job_duration_seconds_bucket\{catalog="mx",le="[^"]+"\} (\d+)$/mg;
ok(@buckets > 2 && !grep({ $buckets[$_] < $buckets[ $_ - 1 ] } 1 .. $#buckets),
	'ctas_fed_job_duration_seconds: cumulative buckets');
my $dsum = metric($m, 'ctas_fed_job_duration_seconds_sum{catalog="mx"}');
ok(defined $dsum && $dsum > 0 && $dsum < 30,
	"ctas_fed_job_duration_seconds_sum is the time spent ($dsum s)");
is(metric($m, 'ctas_fed_in_doubt'), 0, 'ctas_fed_in_doubt: 0');
is(metric($m, 'ctas_fed_oldest_in_doubt_age_seconds'), '0.000',
	'ctas_fed_oldest_in_doubt_age_seconds: 0 without jobs in doubt');
is(metric($m, 'ctas_fed_webhook_events_dropped_total'), 0,
	'ctas_fed_webhook_events_dropped_total: 0');

# --- one-phase commit: the window of the README
# np cannot prepare (one phase, committed at pre-commit); tight's only
# prepared-transaction slot is taken, so its PREPARE fails after that
$tight->safe_psql('dw', "BEGIN; CREATE TABLE filler (a int); PREPARE TRANSACTION 'filler'");
($ret, $out, $err) = psql_verbose($local, q{
BEGIN;
CREATE TABLE np.public.op_kept AS SELECT 1 AS a;
CREATE TABLE tight.public.op_lost AS SELECT 1 AS a;
COMMIT;});
like($err, qr/ERROR:  53200: maximum number of prepared transactions reached/,
	'the second catalog fails at pre-commit (53200)');
like($err,
	qr/WARNING:  08007: the remote transaction on catalog "np" was committed in one phase and is not rolled back/,
	'a WARNING (08007) says the one-phase commit stays');
is(remote_has_table($nopre, 'op_kept'), 1, 'the one-phase table stays');
is(remote_has_table($tight, 'op_lost'), 0, 'the two-phase table is rolled back');
is(prepared($tight), 'filler', 'no prepared transaction of ours on the remote');
$tight->safe_psql('dw', "ROLLBACK PREPARED 'filler'");

# --- backend memory does not grow with the number of rows, even when the
# remote stops reading for a while (back-pressure instead of buffering)
sub load_peak
{
	my ($table, $rows, $stall) = @_;
	my ($lh) = start_psql_timed($local,
		"SET work_mem = '64kB'; SELECT pg_sleep(0.5); CREATE TABLE wh.public.$table AS "
		  . "SELECT g, repeat(md5(g::text), 8) AS pad FROM generate_series(1, $rows) g");
	my $pid = wait_until(
		30,
		sub {
			$local->safe_psql('postgres',
				"SELECT pid FROM pg_stat_activity WHERE query LIKE 'SET work_mem = ''64kB''; SELECT pg_sleep(0.5); CREATE TABLE wh.public.$table%'");
		});
	my ($state, $rpid, $stalled_at) = (0, undef, undef);
	my $tick = sub {
		return unless $stall;
		if ($state == 0)
		{
			# stop the remote as soon as its COPY runs
			$rpid = $remote->safe_psql('postgres',
				"SELECT pid FROM pg_stat_activity WHERE application_name = 'ctas_fed' "
				  . "AND datname = 'dw' AND query LIKE 'COPY%'");
			if ($rpid ne '')
			{
				kill 'STOP', $rpid;
				$state = 1;
			}
		}
		elsif ($state == 1)
		{
			# until the backend waits for the socket, or has read a third of
			# the rows meanwhile (what it did not send, it would buffer)
			my $r = $local->safe_psql('postgres',
				"SELECT coalesce(max(rows), 0) || ' ' || "
				  . "(SELECT count(*) FROM pg_stat_activity WHERE pid = $pid AND wait_event = 'Extension') "
				  . "FROM ctas_fed.jobs WHERE target = 'public.$table' AND state = 'running'");
			my ($jrows, $waiting) = split / /, $r;
			if ($waiting || $jrows >= $rows / 3)
			{
				$stalled_at = $jrows;
				kill 'CONT', $rpid;
				$state = 2;
			}
		}
	};
	my $peak = peak_rss_anon($pid, $lh, $tick);
	kill 'CONT', $rpid if $state == 1;
	return ($peak, $stalled_at);
}
my ($small) = load_peak('mem_small', 30000, 0);
my ($large, $stalled_at) = load_peak('mem_large', 300000, 1);
ok(defined $stalled_at, 'the remote was stopped during the large load')
  and note "the load had read $stalled_at rows when the remote was resumed";
is($remote->safe_psql('dw', 'SELECT count(*) FROM mem_large'), '300000',
	'the large load arrived');
# 300000 rows of 270 bytes are 80 MB: a buffered load would show it (a
# small work_mem keeps generate_series's own tuplestore out of the picture)
cmp_ok($large, '<', $small + 4096,
	"backend peak RssAnon: $small kB at 30000 rows, $large kB at 300000 rows with a stall (flat)");

# --- no password anywhere
($ret, $out, $err) = psql_verbose($local,
	'CREATE TABLE bad.public.nope AS SELECT 1 AS a');
like($err, qr/ERROR:  08001: could not connect to catalog "bad"/,
	'a wrong password: the connection error (08001)');
my $everything = $err . $local->safe_psql('postgres',
	'SELECT string_agg(j::text, E\'\n\') FROM ctas_fed.jobs j');
my $log = slurp_file($local->logfile, $log_start);
like($log, qr/could not connect to catalog "bad"/, 'the error is in the server log');
foreach my $secret ($pw, $badpw)
{
	unlike($everything, qr/\Q$secret\E/, "the password $secret is in no error and no job");
	unlike($log, qr/\Q$secret\E/, "the password $secret is not in the server log");
}

# --- the xid is durable before any remote work
# (the history is saved by the worker shortly after each change: wait for
# a save after the last job, so that the crash below cannot lose it)
my $save_from = time;
$local->safe_psql('postgres', 'CREATE TABLE mx.public.m5 AS SELECT 1 AS a');
ok(wait_registry_save($local, $save_from), 'the worker saved the job registry');
my $bg = $local->background_psql('postgres', on_error_stop => 0);
$bg->query_safe('BEGIN');
$bg->query_safe('CREATE TABLE wh.public.crashed AS SELECT 1 AS a');
my $crashed = $bg->query_safe('SELECT pg_current_xact_id()');
is(remote_has_table($remote, 'crashed'), 0, 'the remote table is not visible yet');
$local->stop('immediate');
eval { $bg->quit };
$local->start;
my $next = $local->safe_psql('postgres',
	'BEGIN; SELECT pg_current_xact_id(); CREATE TABLE local_mark (a int); COMMIT;');
cmp_ok($next, '>', $crashed,
	"after the crash, the next xid ($next) is beyond the crashed one ($crashed)");
is($local->safe_psql('postgres', "SELECT pg_xact_status('$crashed')"), 'aborted',
	'the crashed xid is aborted');
is( $local->safe_psql('postgres',
		"SELECT string_agg(target || ' ' || state, ',' ORDER BY job_id) FROM ctas_fed.jobs "
		  . "WHERE catalog = 'mx'"),
	'public.m1 committed,public.m2 committed,public.m3 aborted,public.m4 failed,public.m5 committed',
	'the saved history survived the crash');
ok(wait_until(30, sub {
			$remote->safe_psql('postgres',
				"SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'ctas_fed'")
			  eq 't' }),
	'the remote session of the crashed backend is gone');
is(remote_has_table($remote, 'crashed'), 0, 'and its table with it');
is(prepared($remote), '', 'no prepared transaction');

done_testing();
