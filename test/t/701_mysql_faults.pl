
# Copyright (c) 2026, ctas_fed developers

# Faults around a MySQL catalog, and the invariant after each: the table
# with all its rows iff the local transaction committed, no staging or
# scratch table, no XA branch in XA RECOVER.
#   - a lost reply to the publishing RENAME, to XA PREPARE, to XA COMMIT
#     (the fault proxy);
#   - the MariaDB server killed in the middle of a load;
#   - a stalled server during LOAD DATA, and a cancel that ends it at once;
#   - the local server crashed after the publication (before its commit
#     record) and after its commit record (before post-commit): the
#     resolver decides from the local transaction's outcome.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;

use CtasFed::Test;

my $my    = start_mariadb();
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $fp    = start_fault_proxy($my->{port});
mysql_catalog($local, $my);
mysql_catalog($local, $my, name => 'px', port => $fp->port,
	options => { connect_timeout => 5 }, extension => 0);

sub scratch
{
	return $my->sql(q{SELECT count(*) FROM information_schema.tables WHERE table_name LIKE '\_ctas\_fed\_%'});
}

sub branches
{
	my $r = $my->sql('XA RECOVER');
	return $r eq '' ? 0 : scalar(split /\n/, $r);
}

sub exists_t
{
	my ($t) = @_;
	return $my->sql("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'shop' AND table_name = '$t'");
}

# resolve until nothing of ours is left (30 s at most)
sub settled
{
	return wait_until(30, sub {
		$local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.resolve_in_doubt()});
		return scratch() == 0 && branches() == 0;
	});
}

sub invariant
{
	my ($name) = @_;
	ok(settled(), "$name: resolved");
	is(scratch(), '0', "$name: no staging or scratch table");
	is(branches(), 0, "$name: no XA branch");
	is($local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.resolve_in_doubt()}), '0',
		"$name: nothing left in doubt");
}

$local->safe_psql('postgres', q{
CREATE TABLE shop.shop.rep AS SELECT 'old' AS v;
CREATE TABLE shop.shop.gone AS SELECT 'kept' AS v;
CREATE TABLE shop.shop.app AS SELECT 1 AS a;
});

# --- lost reply to the RENAME that publishes create, replace and drop
my $id = $fp->set_rule(match => 'RENAME TABLE', action => 'lose_reply');
my ($rc, $out, $err) = $local->psql('postgres', q{BEGIN;
CREATE TABLE px.shop.new1 AS SELECT g FROM generate_series(1, 1000) g;
CREATE TABLE px.shop.rep WITH (if_exists = 'replace') AS SELECT 'new' AS v;
DROP TABLE px.shop.gone;
COMMIT;});
ok($fp->wait_hit($id), 'the RENAME was sent and its reply lost');
isnt($rc, 0, 'the commit fails');
like($err, qr/could not publish the tables on MySQL catalog "px"/, 'and says why');
$fp->clear;
invariant('lost RENAME reply');
is(exists_t('new1'), '0', 'the new table was taken back');
is($my->sql('SELECT v FROM shop.rep'), 'old', 'the replaced table is back');
is($my->sql('SELECT v FROM shop.gone'), 'kept', 'the dropped table is back');

# --- lost reply to XA PREPARE
$id = $fp->set_rule(match => 'XA PREPARE', action => 'lose_reply');
($rc, $out, $err) = $local->psql('postgres', q{
CREATE TABLE px.shop.app WITH (if_exists = 'append') AS SELECT g AS a FROM generate_series(2, 100) g});
ok($fp->wait_hit($id), 'XA PREPARE was sent and its reply lost');
isnt($rc, 0, 'the append fails');
$fp->clear;
invariant('lost XA PREPARE reply');
is($my->sql('SELECT count(*) FROM shop.app'), '1', 'no row was appended');

# --- lost reply to XA COMMIT: the local transaction committed
$id = $fp->set_rule(match => 'XA COMMIT', action => 'lose_reply');
($rc, $out, $err) = $local->psql('postgres', q{
CREATE TABLE px.shop.app WITH (if_exists = 'append') AS SELECT g AS a FROM generate_series(2, 100) g});
ok($fp->wait_hit($id), 'XA COMMIT was sent and its reply lost');
is($rc, 0, 'the append commits');
$fp->clear;
invariant('lost XA COMMIT reply');
is($my->sql('SELECT count(*), sum(a) FROM shop.app'), "100\t5050", 'every row was appended once');

# --- a stalled server during LOAD DATA: cancel ends the wait at once
$id = $fp->set_rule(match => 'LOAD DATA', action => 'stall', dir => 'down');
my ($h, $stdout, $stderr) = start_psql($local,
	q{CREATE TABLE px.shop.stalled AS SELECT g FROM generate_series(1, 10) g});
ok($fp->wait_hit($id), 'the load stalls');
my $pid = wait_active($local, 'CREATE TABLE px.shop.stalled%');
my $t0 = time;
$local->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
$h->finish;
my $took = time - $t0;
like($$stderr, qr/canceling statement due to user request/, 'cancel reaches the stalled load');
cmp_ok($took, '<', 5, 'promptly');
$fp->clear;
invariant('cancel of a stalled load');
is(exists_t('stalled'), '0', 'no table');

# --- the MariaDB server killed in the middle of a load (create and append)
($h, $stdout, $stderr) = start_psql($local, q{BEGIN;
CREATE TABLE shop.shop.app WITH (if_exists = 'append') AS SELECT g AS a FROM generate_series(1, 200000) g;
CREATE TABLE shop.shop.killed AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 3000000) g;
COMMIT;});
ok(wait_until(60, sub { scratch() > 0 && $my->sql(q{SELECT count(*) FROM information_schema.processlist WHERE info LIKE 'LOAD DATA%'}) > 0 }),
	'the load is running');
$my->kill9;
$h->finish;
like($$stderr, qr/MySQL catalog "shop"/, 'the load fails');
$my->restart;
invariant('server killed mid-load');
is(exists_t('killed'), '0', 'no table');
is($my->sql('SELECT count(*) FROM shop.app'), '100', 'no row appended');

# --- the local server crashes in the commit protocol
sub crash_at
{
	my ($point, $sql, $before) = @_;
	my ($in, $o, $e) = ('', '', '');
	my $offset = -s $local->logfile;
	my $ph = IPC::Run::start([ 'psql', '-XAtq', '-d', $local->connstr('postgres') ],
		'<', \$in, '>', \$o, '2>', \$e, IPC::Run::timeout(120));
	$in .= "SET ctas_fed.fault_point = '$point';\nBEGIN;\n$sql\nCOMMIT;\n";
	$ph->pump while $ph->pumpable && $in ne '';
	$local->wait_for_log(qr/stopped at fault point "$point"/, $offset);
	$before->() if $before;
	$local->stop('immediate');
	$ph->finish;
	$local->start;
	return;
}

my $txn = q{
CREATE TABLE shop.shop.c1 AS SELECT g FROM generate_series(1, 1000) g;
CREATE TABLE shop.shop.rep WITH (if_exists = 'replace') AS SELECT 'new' AS v;
DROP TABLE shop.shop.gone;
CREATE TABLE shop.shop.app WITH (if_exists = 'append') AS SELECT g AS a FROM generate_series(101, 150) g;};

crash_at('after_rename', $txn, sub {
	is(exists_t('c1'), '1', 'after the rename the new table is visible (the documented window)');
	is(branches(), 1, 'and the XA branch is prepared');
});
invariant('crash after the publication');
is(exists_t('c1'), '0', 'the aborted CREATE was taken back');
is($my->sql('SELECT v FROM shop.rep'), 'old', 'the replaced table is back');
is($my->sql('SELECT v FROM shop.gone'), 'kept', 'the dropped table is back');
is($my->sql('SELECT count(*) FROM shop.app'), '100', 'the appended rows were rolled back');

(my $txn2 = $txn) =~ s/c1/c2/;
crash_at('after_commit_record', $txn2, sub {
	is(branches(), 1, 'before post-commit the XA branch is prepared');
	is(exists_t('gone'), '0', 'and the drop is published');
});
invariant('crash after the commit record');
is($my->sql('SELECT count(*) FROM shop.c2'), '1000', 'the committed CREATE stays');
is($my->sql('SELECT v FROM shop.rep'), 'new', 'the replacement stays');
is(exists_t('gone'), '0', 'the dropped table stays dropped');
is($my->sql('SELECT count(*) FROM shop.app'), '150', 'the appended rows were committed');
is($local->safe_psql('postgres', q{SELECT string_agg(DISTINCT state, ',') FROM ctas_fed.jobs WHERE catalog = 'shop' AND target LIKE '%c2'}),
	'committed', 'the job of the committed transaction');

done_testing();
