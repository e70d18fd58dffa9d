
# Copyright (c) 2026, ctas_fed developers

# Lost replies between ctas_fed and ClickHouse, through the fault proxy of
# test/lib/faultproxy.pl: the proxy forwards a request whole, ClickHouse
# runs it, and the reply never arrives (the client connection is reset).
# The writer must not send the statement again (libcurl's silent retry on
# a reused connection), must find out what happened instead of guessing,
# and must then finish or undo; when it cannot even ask, it leaves its
# durable record for the resolver.  After every case: the remote table is
# there with exactly its rows (count and content digest) iff the local
# transaction committed, no _ctas_fed_ table and no record is left once
# the resolver ran, and the session can run another CTAS.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch    = start_clickhouse();
# resolution is called explicitly, after each case
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $fp    = start_fault_proxy($ch->{http_port});
my $purl  = 'http://127.0.0.1:' . $fp->port;

clickhouse_catalog($local, $ch, name => 'flaky', url => $purl,
	options => { connect_timeout => 2, timeout => 10 });
$local->safe_psql('postgres',
	'CREATE TABLE src AS SELECT g AS id, md5(g::text) AS label FROM generate_series(1, 500) g');

sub scratch_tables
{
	return $ch->query(
		"SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_')") + 0;
}

sub ch_exists
{
	my ($t) = @_;
	return $ch->query("EXISTS TABLE dw.$t") + 0;
}

sub digest
{
	my ($t) = @_;
	return $ch->query("SELECT count(), sum(cityHash64(id, label)) FROM dw.$t");
}

sub records
{
	return $local->safe_psql('postgres',
		q{SELECT count(*) FROM pg_ls_dir('pg_ctas_fed', true, false) f WHERE f LIKE 'ch\_%'}) + 0;
}

sub job_state
{
	my ($t) = @_;
	return $local->safe_psql('postgres',
		"SELECT string_agg(state, ',') FROM ctas_fed.jobs WHERE target LIKE '%.$t'");
}

sub run_sql
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $local->psql('postgres', $sql);
	return ($ret, $out, $err);
}

# the resolver ran: nothing of ours left, the session works
sub after_resolve
{
	my ($name) = @_;
	$local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.resolve_in_doubt('flaky')});
	is(scratch_tables(), 0, "$name: no _ctas_fed_ table left");
	is(records(),        0, "$name: no durable record left");
	my ($ret, $out, $err) = run_sql(
		'CREATE TABLE flaky.dw.probe WITH (if_exists = \'replace\') AS SELECT 1 AS a');
	is($ret, 0, "$name: the session can run another CTAS") or diag $err;
}

# --- 1. append, INSERT ... SELECT (Log engine): the reply is lost after
# ClickHouse moved the rows.  Sent once (no resend on a new connection),
# and the writer counts the target to find out the rows arrived.
$ch->query('CREATE TABLE dw.app (id Int32, label String) ENGINE = Log');
$ch->query("INSERT INTO dw.app SELECT toInt32(number), 'old' FROM system.numbers LIMIT 100");
my $id = $fp->set_rule(match => 'INSERT INTO `dw`.`app` SELECT', action => 'lose_reply');
my ($ret, $out, $err) = run_sql(
	q{CREATE TABLE flaky.dw.app WITH (if_exists = 'append') AS SELECT id, label FROM src});
ok($fp->wait_hit($id, 1, 5), 'append: the reply to the INSERT ... SELECT was lost');
$fp->clear;
is($ret, 0, 'append: the transaction commits: the rows did arrive') or diag $err;
is($ch->query('SELECT count() FROM dw.app'), "600\n",
	'append: committed 500 rows, the target has exactly 500 more');
run_sql(q{CREATE TABLE flaky.dw.app_ref AS SELECT id, label FROM src});
is($ch->query("SELECT count(), sum(cityHash64(id, label)) FROM dw.app WHERE label != 'old'"),
	digest('app_ref'), 'append: and they are the rows of the statement (content digest)');
is($ch->query("SELECT count() FROM dw.app WHERE label = 'old'"), "100\n",
	'append: the rows that were there are untouched');
after_resolve('append');

# --- 1b. append into a partitioned MergeTree table: the staged parts are
# attached partition by partition (three here); the reply to the first
# ATTACH is lost
$ch->query('CREATE TABLE dw.mt (id Int32, label String) ENGINE = MergeTree '
	  . 'PARTITION BY id % 3 ORDER BY id');
$ch->query("INSERT INTO dw.mt SELECT toInt32(number), 'old' FROM system.numbers LIMIT 30");
$id = $fp->set_rule(match => 'ATTACH PARTITION ID', action => 'lose_reply');
($ret, $out, $err) = run_sql(
	q{CREATE TABLE flaky.dw.mt WITH (if_exists = 'append') AS SELECT id, label FROM src});
ok($fp->wait_hit($id, 1, 5), 'append (MergeTree): the reply to an ATTACH PARTITION was lost');
$fp->clear;
is($ret, 0, 'append (MergeTree): the transaction commits') or diag $err;
is($ch->query("SELECT count(), sum(cityHash64(id, label)) FROM dw.mt WHERE label != 'old'"),
	digest('app_ref'), 'append (MergeTree): exactly the 500 rows of the statement arrived');
is($ch->query("SELECT count() FROM dw.mt WHERE label = 'old'"), "30\n",
	'append (MergeTree): the rows that were there are untouched');
after_resolve('append (MergeTree)');

# --- 2. CREATE: the reply to the RENAME that publishes the table is lost;
# then the transaction rolls back (the error): the published table must not
# stay
($ret, $out, $err) = (undef, '', '');
$id = $fp->set_rule(match => 'RENAME TABLE `dw`.`_ctas_fed_stage_', action => 'lose_reply');
($ret, $out, $err) = run_sql(q{CREATE TABLE flaky.dw.pub AS SELECT id, label FROM src});
ok($fp->wait_hit($id, 1, 5), 'create: the reply to the RENAME was lost');
$fp->clear;
isnt($ret, 0, 'create: the statement fails');
like($err, qr/could not publish the new table/, 'create: the error names the step');
is(ch_exists('pub'), 0, 'create: the published table was taken back');
after_resolve('create');

# --- 2b. CREATE: the RENAME that publishes the table never reaches the
# server: the abort finds the staging table still there and drops it
$id = $fp->set_rule(match => 'RENAME TABLE `dw`.`_ctas_fed_stage_', action => 'drop_request');
($ret, $out, $err) = run_sql(q{CREATE TABLE flaky.dw.pub AS SELECT id, label FROM src});
ok($fp->wait_hit($id, 1, 5), 'create: the RENAME was dropped');
$fp->clear;
isnt($ret, 0, 'create, dropped request: the statement fails');
is(ch_exists('pub'), 0, 'create, dropped request: no table');
after_resolve('create, dropped request');

# --- 3. replace: the reply to the RENAME that moves the original away is
# lost: the original must come back with its content
run_sql(q{CREATE TABLE flaky.dw.rep AS SELECT id, label FROM src WHERE id <= 10});
my $orig = digest('rep');
$id = $fp->set_rule(match => 'RENAME TABLE `dw`.`rep` TO', action => 'lose_reply');
($ret, $out, $err) = run_sql(
	q{CREATE TABLE flaky.dw.rep WITH (if_exists = 'replace') AS SELECT id, label FROM src});
ok($fp->wait_hit($id, 1, 5), 'replace: the reply to the first RENAME was lost');
$fp->clear;
isnt($ret, 0, 'replace: the statement fails');
is(digest('rep'), $orig, 'replace: the original table is back with its content');
after_resolve('replace, first rename');

# --- 4. replace: the reply to the RENAME that publishes the new content is
# lost, so the transaction rolls back: the rolled-back content must not
# stay in place of the original
$id = $fp->set_rule(match => 'RENAME TABLE `dw`.`_ctas_fed_stage_', action => 'lose_reply');
($ret, $out, $err) = run_sql(
	q{CREATE TABLE flaky.dw.rep WITH (if_exists = 'replace') AS SELECT id, label FROM src});
ok($fp->wait_hit($id, 1, 5), 'replace: the reply to the publishing RENAME was lost');
$fp->clear;
isnt($ret, 0, 'replace: the statement fails');
is(digest('rep'), $orig, 'replace: the original content is back, not the new one');
after_resolve('replace, second rename');

# --- 5. the reply is lost and the server cannot be asked during the abort
# (every look at system.tables is dropped): the writer leaves its record,
# and the resolver undoes the transaction once the server answers again
my $late_log = -s $local->logfile;
my $lost = $fp->set_rule(match => 'RENAME TABLE `dw`.`_ctas_fed_stage_', action => 'lose_reply');
my $mute = $fp->set_rule(match => 'SELECT name FROM system.tables', action => 'drop_request',
	times => 0);
($ret, $out, $err) = run_sql(q{CREATE TABLE flaky.dw.late AS SELECT id, label FROM src});
ok($fp->wait_hit($lost, 1, 5), 'unreachable: the reply to the RENAME was lost');
isnt($ret, 0, 'unreachable: the statement fails');
like($err, qr/WARNING:  could not check the tables of the transaction in database "dw"/,
	'unreachable: the abort says it could not find out');
is(records(), 1, 'unreachable: the durable record stays');
is(ch_exists('late'), 1, 'unreachable: the published table is still there for now');
is(job_state('late'), 'in_doubt', 'unreachable: the job is in doubt');
$fp->clear;
# the background resolver may have settled it first, once the server
# answered again: then the call finds nothing left, and the log says so
my $settled = $local->safe_psql('postgres',
	q{SELECT coalesce(string_agg(action, ','), '') FROM ctas_fed.resolve_in_doubt('flaky')});
ok($settled =~ /rolled back/
	  || slurp_file($local->logfile, $late_log) =~ /ctas_fed resolver: catalog "flaky": \S+_late: rolled back/,
	'unreachable: the resolver rolls the transaction back')
  or diag("resolve_in_doubt: $settled");
is(ch_exists('late'), 0, 'unreachable: the table of the aborted transaction is gone');
is(job_state('late'), 'aborted', 'unreachable: the job is settled as aborted');
after_resolve('unreachable');

# --- 6. a committed transaction whose post-commit cleanup cannot run: the
# record stays, the resolver drops the replaced table
$id = $fp->set_rule(match => 'DROP TABLE IF EXISTS `dw`.`_ctas_fed_old_', action => 'drop_request');
($ret, $out, $err) = run_sql(
	q{CREATE TABLE flaky.dw.rep WITH (if_exists = 'replace') AS SELECT id, label FROM src});
ok($fp->wait_hit($id, 1, 5), 'post-commit: the DROP of the old table was dropped');
$fp->clear;
is($ret, 0, 'post-commit: the statement commits') or diag $err;
is(records(), 1, 'post-commit: the durable record stays');
is($ch->query('SELECT count() FROM dw.rep'), "500\n", 'post-commit: the new content is there');
like($local->safe_psql('postgres',
		q{SELECT string_agg(action, ',') FROM ctas_fed.resolve_in_doubt('flaky')}),
	qr/committed/, 'post-commit: the resolver finishes the committed transaction');
after_resolve('post-commit');

$fp->stop;
$local->stop;
$ch->stop;
done_testing();
