
# Copyright (c) 2026, ctas_fed developers

# Cancel and statement_timeout of a CREATE TABLE AS into a remote
# PostgreSQL cluster take effect promptly (timed: this file runs alone) and
# leave no table and no prepared transaction: statement_timeout mid-COPY,
# while the remote waits on a lock, while connecting to a listener that
# never answers; pg_cancel_backend mid-COPY.  The rest of the PostgreSQL
# target is in 100_postgres_target.pl.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(time);

use CtasFed::Test;

my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });

my $rport = $remote->port;
$local->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE TABLE src AS
  SELECT g AS id, md5(g::text) AS label FROM generate_series(1, 10000) g;
});

# digest of a table rendered as text, the same way on both sides
my $digest_sql = q{
  SELECT count(*) || ':' || coalesce(md5(string_agg(t::text, '|' ORDER BY t.id)), '-') FROM %s t};

sub remote_digest
{
	my ($node, $db, $table) = @_;
	return $node->safe_psql($db, sprintf($digest_sql, $table));
}

sub remote_tables
{
	my ($node, $db) = @_;
	return $node->safe_psql($db,
		"SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class "
		  . "WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'");
}

sub prepared_count
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		'SELECT count(*) FROM pg_prepared_xacts');
}

sub nothing_left
{
	my ($table, $what) = @_;
	my $tables = remote_tables($remote, 'dw');
	unlike(",$tables,", qr/,$table,/, "$what: no remote table");
	is(prepared_count($remote), '0', "$what: no prepared transaction");
}

my $local_digest = $local->safe_psql('postgres', sprintf($digest_sql, 'src'));

# the table a replace below must leave intact
my ($ret, $out, $err) = $local->psql('postgres',
	'CREATE TABLE wh.public.big AS SELECT * FROM src');
is($ret, 0, 'CTAS of the table to keep succeeds') or diag $err;

# --- cancel mid-COPY: statement_timeout while rows trickle in
my $t0 = time;
($ret, $out, $err) = $local->psql('postgres',
	"SET statement_timeout = '1s'; CREATE TABLE wh.public.slow AS "
	  . "SELECT g, pg_sleep(0.01) IS NULL AS s FROM generate_series(1, 100000) g");
my $elapsed = time - $t0;
like($err, qr/canceling statement due to statement timeout/,
	'statement_timeout cancels the CTAS');
cmp_ok($elapsed, '<', 5, 'the cancel takes effect promptly');
nothing_left('slow', 'statement_timeout mid-COPY');

# --- cancel while the remote itself is busy: a remote lock blocks DROP
my $locker = $remote->background_psql('dw');
$locker->query_safe('BEGIN; LOCK TABLE big IN ACCESS EXCLUSIVE MODE;');
$t0 = time;
($ret, $out, $err) = $local->psql('postgres',
	"SET statement_timeout = '1s'; CREATE TABLE wh.public.big "
	  . "WITH (if_exists = 'replace') AS SELECT 1 AS a");
$elapsed = time - $t0;
like($err, qr/canceling statement due to statement timeout/,
	'statement_timeout cancels a remote command that waits on a lock');
cmp_ok($elapsed, '<', 5, 'the remote wait is interrupted promptly');
is( $remote->safe_psql('dw',
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'ctas_fed' AND state = 'active'"),
	'0',
	'the remote command was canceled too');
$locker->query_safe('ROLLBACK;');
$locker->quit;
is(remote_digest($remote, 'dw', 'big'), $local_digest,
	'the table that was to be replaced is intact');

# --- cancel while connecting: a listener that never answers
my $silent = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 5, ReuseAddr => 1)
  or die "could not listen: $!";
my $sport = $silent->sockport;
$local->safe_psql('postgres', qq{
CREATE SERVER silent FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$sport', dbname 'dw', connect_timeout '60');
CREATE USER MAPPING FOR PUBLIC SERVER silent OPTIONS (user 'loader', password 'secret');
});
$t0 = time;
($ret, $out, $err) = $local->psql('postgres',
	"SET statement_timeout = '1s'; CREATE TABLE silent.public.t AS SELECT 1 AS a");
$elapsed = time - $t0;
like($err, qr/canceling statement due to statement timeout/,
	'statement_timeout cancels a connection attempt');
cmp_ok($elapsed, '<', 5, 'the connection attempt is interrupted promptly');
$local->safe_psql('postgres', qq{
ALTER SERVER silent OPTIONS (SET connect_timeout '1');
});
($ret, $out, $err) = $local->psql('postgres',
	"CREATE TABLE silent.public.t AS SELECT 1 AS a");
like($err, qr/could not connect to catalog "silent".*\n.*timed out after 1 seconds/,
	'connect_timeout bounds a connection attempt');
close($silent);

# --- pg_cancel_backend from another session, mid-COPY
# rows of a running job, as the registry publishes them (every 1000 rows)
sub job_rows
{
	my ($target) = @_;
	return $local->safe_psql('postgres',
		"SELECT coalesce(max(rows), 0) FROM ctas_fed.jobs "
		  . "WHERE target = '$target' AND state = 'running'");
}

# (2 ms a row: the registry publishes the first 1000 rows after 2 s, and
# the load would go on for 200 s)
my ($h, $hout, $herr) = start_psql_timed($local,
	"CREATE TABLE wh.public.canceled AS SELECT g, pg_sleep(0.002) IS NULL AS s FROM generate_series(1, 100000) g",
	psql_args => [ '-v', 'VERBOSITY=verbose' ]);
my $pid = wait_active($local, 'CREATE TABLE wh.public.canceled%');
ok(defined $pid, 'the CTAS to cancel is running');
ok(wait_until(60, sub { job_rows('public.canceled') >= 1000 }),
	'rows are flowing into the remote COPY');
$t0 = time;
$local->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
$h->finish;
$elapsed = time - $t0;
like($$herr, qr/^ERROR:  57014: canceling statement due to user request$/m,
	'pg_cancel_backend stops the CTAS (57014)');
cmp_ok($elapsed, '<', 5, 'pg_cancel_backend takes effect promptly');
nothing_left('canceled', 'pg_cancel_backend mid-COPY');

done_testing();
