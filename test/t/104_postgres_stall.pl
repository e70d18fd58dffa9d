
# Copyright (c) 2026, ctas_fed developers

# Hardening of the PostgreSQL target (issue 8), class 10: cancel,
# statement_timeout and pg_terminate_backend return promptly while the
# remote backend is stopped in the middle of COPY, and leave no table and no
# prepared transaction.  Timed: this file runs alone.  The other classes are
# in 101_postgres_hardening.pl.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run ();
use Time::HiRes qw(time usleep);

use CtasFed::Test;

my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 1');
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
});

# remote processes stopped by this test are always continued
my @stopped;
END { kill 'CONT', @stopped if @stopped; }

# psql on the local node reading $script from stdin, going on after
# errors, in the background; returns the handle and output references
sub bg_psql
{
	my ($script) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'psql', '-XAtq', '-v', 'VERBOSITY=verbose',
			'-d', $local->connstr('postgres')
		],
		'<', \$script, '>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

# poll $code until it returns true, for up to $secs seconds
sub poll_until
{
	my ($code, $secs) = @_;
	my $deadline = time + ($secs // 30);
	while (time < $deadline)
	{
		return 1 if $code->();
		usleep(50_000);
	}
	return 0;
}

sub remote_tables
{
	return $remote->safe_psql('dw',
		"SELECT coalesce(string_agg(relname, ',' ORDER BY relname), '') FROM pg_class "
		  . "WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'");
}

sub prepared_count
{
	my ($node) = @_;
	return ($node // $remote)->safe_psql('postgres',
		'SELECT count(*) FROM pg_prepared_xacts');
}

# ------------------------------------------- class 10: the remote stalls
{
	# rows without end that stream from the first one: a function in FROM
	# is materialized first, so generate_series(1, 100000000) alone would
	# keep the backend busy writing a tuplestore for tens of seconds before
	# its first row, and the waits below would time out on a busy machine
	my $rows = "SELECT a * 100000 + b AS g, repeat('x', 300) AS pad "
	  . "FROM generate_series(0, 999) a, generate_series(1, 100000) b";
	my ($h, $hout, $herr) = bg_psql(qq{
SET statement_timeout = '4s';
SELECT 't0 ' || extract(epoch FROM clock_timestamp());
CREATE TABLE wh.public.stall1 AS $rows;
SELECT 't1 ' || extract(epoch FROM clock_timestamp());
RESET statement_timeout;
CREATE TABLE wh.public.stall2 AS $rows;
SELECT 't2 ' || extract(epoch FROM clock_timestamp());
CREATE TABLE wh.public.after_stall AS SELECT 1 AS a;
SELECT 'done';
});
	my $copy_pid = sub {
		my ($table) = @_;
		return $remote->safe_psql('dw',
			"SELECT pid FROM pg_stat_activity WHERE query LIKE 'COPY public.$table %'");
	};
	my $rpid;
	ok(poll_until(sub { $h->pump_nb; $rpid = $copy_pid->('stall1'); $rpid ne '' }),
		'the first COPY runs on the remote');
	kill 'STOP', $rpid;
	push @stopped, $rpid;
	ok(poll_until(sub { $h->pump_nb; $$hout =~ /t1 / }, 60),
		'statement_timeout ends the statement');
	my ($t0) = $$hout =~ /t0 ([\d.]+)/;
	my ($t1) = $$hout =~ /t1 ([\d.]+)/;
	like($$herr, qr/57014: canceling statement due to statement timeout/,
		'with the statement_timeout error');
	cmp_ok($t1 - $t0, '<', 4 + 3,
		'statement_timeout = 4s returns within 3 s of the timeout while the remote is stopped');

	my $rpid2;
	ok(poll_until(sub { $h->pump_nb; $rpid2 = $copy_pid->('stall2'); $rpid2 ne '' }),
		'the second COPY runs on the remote');
	kill 'STOP', $rpid2;
	push @stopped, $rpid2;
	my $lpid = $local->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE query LIKE 'CREATE TABLE wh.public.stall2%'");
	# the local backend blocks on the socket once the buffers are full
	ok( poll_until(
			sub {
				$local->safe_psql('postgres',
					"SELECT wait_event_type = 'Extension' AND now() - query_start > interval '1 s' "
					  . "FROM pg_stat_activity WHERE pid = $lpid") eq 't';
			}),
		'the local backend waits for the stopped remote');
	my $tc = time;
	$local->safe_psql('postgres', "SELECT pg_cancel_backend($lpid)");
	ok(poll_until(sub { $h->pump_nb; $$hout =~ /done/ }, 60),
		'the session goes on after the cancel');
	my ($t2) = $$hout =~ /t2 ([\d.]+)/;
	like($$herr, qr/57014: canceling statement due to user request/,
		'with the cancel error');
	cmp_ok($t2 - $tc, '<', 3,
		'pg_cancel_backend returns within 3 s while the remote is stopped');
	$h->finish;

	kill 'CONT', $rpid, $rpid2;
	@stopped = ();
	ok( poll_until(
			sub {
				$remote->safe_psql('dw',
					"SELECT count(*) FROM pg_stat_activity WHERE pid IN ($rpid, $rpid2)") eq '0';
			}),
		'the continued remote backends see the closed connections and exit');
	my $tables = ',' . remote_tables() . ',';
	unlike($tables, qr/,stall1,|,stall2,/, 'the stalled loads left no remote table');
	like($tables, qr/,after_stall,/, 'the same session ran another CTAS');
	is(prepared_count(), '0', 'no prepared transaction is left');
}

# pg_terminate_backend of a backend waiting for a stopped remote
{
	my ($h, $hout, $herr) = start_psql($local,
		"CREATE TABLE wh.public.stall3 AS SELECT a * 100000 + b AS g, repeat('x', 300) AS pad "
		  . "FROM generate_series(0, 999) a, generate_series(1, 100000) b");
	my $rpid;
	ok( poll_until(
			sub {
				$rpid = $remote->safe_psql('dw',
					"SELECT pid FROM pg_stat_activity WHERE query LIKE 'COPY public.stall3 %'");
				$rpid ne '';
			}),
		'the third COPY runs on the remote');
	kill 'STOP', $rpid;
	push @stopped, $rpid;
	my $lpid = $local->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE query LIKE 'CREATE TABLE wh.public.stall3%'");
	ok( poll_until(
			sub {
				$local->safe_psql('postgres',
					"SELECT wait_event_type = 'Extension' AND now() - query_start > interval '1 s' "
					  . "FROM pg_stat_activity WHERE pid = $lpid") eq 't';
			}),
		'the local backend waits for the stopped remote');
	my $tt = time;
	$local->safe_psql('postgres', "SELECT pg_terminate_backend($lpid)");
	ok( poll_until(
			sub {
				$local->safe_psql('postgres',
					"SELECT count(*) FROM pg_stat_activity WHERE pid = $lpid") eq '0';
			},
			60),
		'the terminated backend exits');
	cmp_ok(time - $tt, '<', 3,
		'pg_terminate_backend takes effect within 3 s while the remote is stopped');
	$h->finish;
	kill 'CONT', $rpid;
	@stopped = ();
	ok( poll_until(
			sub {
				$remote->safe_psql('dw',
					"SELECT count(*) FROM pg_stat_activity WHERE pid = $rpid") eq '0';
			}),
		'the continued remote backend exits');
	unlike(',' . remote_tables() . ',', qr/,stall3,/, 'no remote table is left');
	is(prepared_count(), '0', 'no prepared transaction is left');
}

done_testing();
