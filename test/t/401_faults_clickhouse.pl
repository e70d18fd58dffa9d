
# Copyright (c) 2026, ctas_fed developers

# Fault suite, ClickHouse target: a fault proxy between the local cluster
# and ClickHouse's HTTP port breaks each step of the protocol (connect,
# CREATE of the staging table, the INSERT stream, the publication marker,
# RENAME (publish), DROP (finish), and the undo of renames and drops on
# abort) with each action (drop the request, lose the reply after the
# server ran it, stall until statement_timeout or a cancel, reset
# mid-stream).  Mixed transactions with a PostgreSQL catalog check that a
# ClickHouse failure rolls the prepared PostgreSQL transaction back.
# After every case, once the resolver ran, the invariant of
# CtasFed::Test::check_invariant holds.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use CtasFed::Test;

my $ch = start_clickhouse();
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $fp = start_fault_proxy($ch->{http_port});
my $purl = 'http://127.0.0.1:' . $fp->port;

my $local = new_cluster('local');
clickhouse_catalog($local, $ch, url => $purl,
	options => { connect_timeout => 2 });
clickhouse_catalog($local, $ch, name => 'lake2', url => $purl,
	options => { connect_timeout => 2 });
postgres_catalog($local, $remote);
$local->safe_psql('postgres', qq{
CREATE TABLE src AS
  SELECT g AS id, md5(g::text) AS label FROM generate_series(1, 300) g;
});
my $digest = sql_digest($local, 'postgres', 'SELECT id, label FROM src');

my $n = 0;

# One case, as in 400_faults_postgres.pl:
#   rules     rules for the proxy (%T% is the table name); the first fires
#   sql       the statements; %T% the ClickHouse table, %T2% a second
#             ClickHouse table (catalog lake2), %P% a PostgreSQL table
#   committed did the local transaction commit?
#   state     expected state of the job(s)
#   error     pattern stderr must match ('' = no error)
#   timeout   statement_timeout; cancel: cancel once the fault was hit
sub run_case
{
	my (%c) = @_;
	$n++;
	my $name = "case $n ($c{name})";
	my %names = (T => "t$n", T2 => "t${n}b", P => "p$n");
	my $sql = $c{sql} // 'CREATE TABLE lake.dw.%T% AS SELECT id, label FROM src';
	$sql =~ s/%(T2|T|P)%/$names{$1}/g;

	my $s = session_start($local);
	my ($pid) = session_run($s, 'SELECT pg_backend_pid()');
	session_run($s, "SET statement_timeout = '$c{timeout}'") if $c{timeout};

	my @ids;
	foreach my $r (@{ $c{rules} })
	{
		my %r = %$r;
		$r{match} =~ s/%(T2|T|P)%/$names{$1}/g if defined $r{match};
		push @ids, $fp->set_rule(%r);
	}
	my $t0 = time;
	my $token = session_send($s, $sql);
	ok($fp->wait_hit($ids[0], 1, 30), "$name: the fault was hit");
	$local->safe_psql('postgres', "SELECT pg_cancel_backend($pid)")
	  if $c{cancel};
	my ($out, $err) = session_wait($s, $token, 60);
	my $elapsed = time - $t0;
	$err //= 'statement did not end within 60 s';
	$fp->clear;
	note("$name: stderr: $err") if $err ne q{};
	# either: the client may retry (libcurl re-sends a request that died
	# on a reused connection); the outcome decides what the remote must hold
	if ($c{committed} eq 'either')
	{
		$c{committed} = $err =~ /ERROR/ ? 0 : 1;
		$c{state} = 'committed' if $c{committed};
		note("$name: " . ($c{committed} ? 'committed after a retry' : 'failed'));
		pass("$name: the statement ended");
	}
	elsif ($c{error} eq '')
	{
		unlike($err, qr/ERROR/, "$name: the transaction commits");
	}
	else
	{
		like($err, $c{error}, "$name: the statement fails as expected");
	}
	cmp_ok($elapsed, '<', $c{bound} // 20, "$name: bounded wait")
	  if $c{timeout} || $c{cancel} || $c{bound};
	session_run($s, 'RESET statement_timeout') if $c{timeout};

	my @targets = ({ ch => $ch, table => "dw.t$n", expect => $digest });
	my @jobs = ([ 'lake', "dw.t$n", $c{state} ]);
	if ($sql =~ /t${n}b/)
	{
		push @targets, { ch => $ch, table => "dw.t${n}b", expect => $digest };
		push @jobs, [ 'lake2', "dw.t${n}b", $c{state} ];
	}
	if ($sql =~ /p$n/)
	{
		push @targets, { pg => $remote, dbname => 'dw', table => "public.p$n",
			expect => $digest };
		push @jobs, [ 'wh', "public.p$n", $c{state} ];
	}
	check_invariant(
		name      => $name,
		node      => $local,
		committed => $c{committed},
		targets   => \@targets,
		jobs      => \@jobs,
		timeout   => 20,
		resolve   => 1,
		session   => $s,
		session_ctas => "CREATE TABLE lake.dw.after$n AS SELECT id FROM src",
		session_cleanup => "DROP TABLE lake.dw.after$n");
	$s->quit;
	return;
}

my $fail = qr/ERROR/;
my $stage_create = 'CREATE TABLE `dw`.`_ctas_fed_stage_';
my $marker_create = 'CREATE TABLE `dw`.`_ctas_fed_new_';
my $publish = 'RENAME TABLE `dw`.`_ctas_fed_stage_';
my $finish = 'DROP TABLE IF EXISTS `dw`.`_ctas_fed_new_';
my $drop_stage = 'DROP TABLE IF EXISTS `dw`.`_ctas_fed_stage_';
my $two = 'BEGIN; CREATE TABLE lake.dw.%T% AS SELECT id, label FROM src;'
  . ' CREATE TABLE lake2.dw.%T2% AS SELECT id, label FROM src; COMMIT';
my $mixed = 'BEGIN; CREATE TABLE wh.public.%P% AS SELECT id, label FROM src;'
  . ' CREATE TABLE lake.dw.%T% AS SELECT id, label FROM src; COMMIT';

my @cases = (
	# connect
	{ name => 'connect refused', rules => [ { action => 'refuse' } ],
	  committed => 0, state => 'failed', error => $fail },
	# CREATE (staging)
	{ name => 'CREATE staging dropped',
	  rules => [ { match => $stage_create, action => 'drop_request', times => 0 } ],
	  committed => 0, state => 'failed', error => $fail },
	{ name => 'CREATE staging reply lost',
	  rules => [ { match => $stage_create, action => 'lose_reply' } ],
	  committed => 0, state => 'failed', error => $fail },
	{ name => 'CREATE staging stalled, statement_timeout',
	  rules => [ { match => $stage_create, action => 'stall', dir => 'down' } ],
	  timeout => '2s',
	  committed => 0, state => 'failed', error => qr/statement timeout/ },
	{ name => 'CREATE staging stalled, cancel',
	  rules => [ { match => $stage_create, action => 'stall', dir => 'down' } ],
	  cancel => 1,
	  committed => 0, state => 'failed', error => qr/canceling statement/ },
	# INSERT stream
	{ name => 'INSERT dropped',
	  rules => [ { match => 'INSERT INTO', action => 'drop_request', times => 0 } ],
	  committed => 0, state => 'failed', error => $fail },
	{ name => 'INSERT reset mid-stream',
	  rules => [ { match => 'INSERT INTO', reset_after => 4000, times => 0 } ],
	  committed => 0, state => 'failed', error => $fail },
	{ name => 'INSERT reset once mid-stream (a retry may succeed)',
	  rules => [ { match => 'INSERT INTO', reset_after => 4000 } ],
	  committed => 'either', state => 'failed', error => $fail },
	{ name => 'CREATE staging dropped once (a retry may succeed)',
	  rules => [ { match => $stage_create, action => 'drop_request' } ],
	  committed => 'either', state => 'failed', error => $fail },
	{ name => 'INSERT reply lost (rows inserted)',
	  rules => [ { match => 'INSERT INTO', action => 'lose_reply' } ],
	  committed => 0, state => 'failed', error => $fail },
	{ name => 'INSERT stalled, statement_timeout',
	  rules => [ { match => 'INSERT INTO', action => 'stall', dir => 'up' } ],
	  timeout => '2s',
	  committed => 0, state => 'failed', error => qr/statement timeout/ },
	{ name => 'INSERT stalled, cancel',
	  rules => [ { match => 'INSERT INTO', action => 'stall', dir => 'up' } ],
	  cancel => 1,
	  committed => 0, state => 'failed', error => qr/canceling statement/ },
	# marker (pre-commit)
	{ name => 'marker CREATE dropped',
	  rules => [ { match => $marker_create, action => 'drop_request', times => 0 } ],
	  committed => 0, state => 'aborted', error => $fail },
	{ name => 'marker CREATE reply lost',
	  rules => [ { match => $marker_create, action => 'lose_reply' } ],
	  committed => 0, state => 'aborted', error => $fail },
	{ name => 'marker CREATE stalled, cancel',
	  rules => [ { match => $marker_create, action => 'stall', dir => 'down' } ],
	  cancel => 1,
	  committed => 0, state => 'aborted', error => qr/canceling statement/ },
	# RENAME (publish)
	{ name => 'RENAME dropped',
	  rules => [ { match => $publish, action => 'drop_request', times => 0 } ],
	  committed => 0, state => 'aborted', error => $fail },
	{ name => 'RENAME reply lost (renamed)',
	  rules => [ { match => $publish, action => 'lose_reply' } ],
	  committed => 0, state => 'aborted', error => $fail },
	# (statement_timeout cannot stop a stalled pre-commit: PostgreSQL
	# disables it before it commits, also for an explicit COMMIT; a
	# cancel can)
	{ name => 'RENAME stalled, cancel',
	  rules => [ { match => $publish, action => 'stall', dir => 'down' } ],
	  cancel => 1,
	  committed => 0, state => 'aborted', error => qr/canceling statement/ },
	# DROP (finish, after the local commit)
	{ name => 'finish DROP dropped',
	  rules => [ { match => $finish, action => 'drop_request', times => 0 } ],
	  committed => 1, state => 'committed', error => '' },
	{ name => 'finish DROP reply lost',
	  rules => [ { match => $finish, action => 'lose_reply' } ],
	  committed => 1, state => 'committed', error => '' },
	# a hung server after the local commit: interrupts are held there, so
	# only a bound of ctas_fed's own ends the wait (PostgreSQL catalogs:
	# 30 s for COMMIT PREPARED)
	{ name => 'finish DROP stalled (bounded like COMMIT PREPARED)',
	  rules => [ { match => $finish, action => 'stall', dir => 'down' } ],
	  bound => 40,
	  committed => 1, state => 'committed', error => '' },
	# undo on abort: ROLLBACK drops the staging table
	{ name => 'ROLLBACK: staging DROP dropped',
	  sql => 'BEGIN; CREATE TABLE lake.dw.%T% AS SELECT id, label FROM src; ROLLBACK',
	  rules => [ { match => $drop_stage, action => 'drop_request', times => 0 } ],
	  committed => 0, state => 'aborted', error => '' },
	{ name => 'ROLLBACK: staging DROP reply lost',
	  sql => 'BEGIN; CREATE TABLE lake.dw.%T% AS SELECT id, label FROM src; ROLLBACK',
	  rules => [ { match => $drop_stage, action => 'lose_reply' } ],
	  committed => 0, state => 'aborted', error => '' },
	# undo of a published rename: the second catalog's rename fails
	{ name => 'second RENAME fails, the first is undone',
	  sql => $two,
	  rules => [ { match => $publish, skip => 1, action => 'drop_request', times => 0 } ],
	  committed => 0, state => 'aborted', error => $fail },
	{ name => 'second RENAME fails, undo RENAME dropped',
	  sql => $two,
	  rules => [ { match => 'RENAME TABLE `dw`.`t', action => 'drop_request', times => 0 },
		  { match => $publish, skip => 1, action => 'drop_request', times => 0 } ],
	  committed => 0, state => 'aborted', error => $fail },
	{ name => 'second RENAME fails, undo RENAME reply lost',
	  sql => $two,
	  rules => [ { match => 'RENAME TABLE `dw`.`t', action => 'lose_reply' },
		  { match => $publish, skip => 1, action => 'drop_request', times => 0 } ],
	  committed => 0, state => 'aborted', error => $fail },
	# mixed PostgreSQL + ClickHouse: ClickHouse fails after the PREPARE
	{ name => 'mixed: RENAME dropped, PostgreSQL rolled back',
	  sql => $mixed,
	  rules => [ { match => $publish, action => 'drop_request', times => 0 } ],
	  committed => 0, state => 'aborted', error => $fail },
	{ name => 'mixed: RENAME reply lost, PostgreSQL rolled back',
	  sql => $mixed,
	  rules => [ { match => $publish, action => 'lose_reply' } ],
	  committed => 0, state => 'aborted', error => $fail },
	{ name => 'mixed: finish DROP dropped, both committed',
	  sql => $mixed,
	  rules => [ { match => $finish, action => 'drop_request', times => 0 } ],
	  committed => 1, state => 'committed', error => '' },
);

run_case(%$_) foreach @cases;

$fp->stop;
$local->stop;
$remote->stop;
$ch->stop;
done_testing();
