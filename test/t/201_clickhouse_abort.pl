
# Copyright (c) 2026, ctas_fed developers

# Every way a CREATE TABLE AS into ClickHouse can fail ends with no target
# table, no _ctas_fed_ scratch table and no query of ours running:
# ROLLBACK, an error at row N, bad table options, unknown database, wrong
# password, a server that is down, ROLLBACK TO SAVEPOINT, cancel and
# statement_timeout mid-INSERT, the server killed mid-load (then
# resolve_in_doubt), and failures at commit time.  PostgreSQL and ClickHouse
# catalogs in one transaction commit together and roll back together; a
# failure after a rename was published undoes it (create, replace, drop).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;
use HTTP::Tiny;
use Digest::MD5;

use CtasFed::Test;

my $ch     = start_clickhouse();
# the worker's own resolver would race the assertions on leftovers
my $local  = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $nopre = new_remote_cluster(
	'nopre',
	max_prepared_transactions => 0,
	host_auth                 => 'scram-sha-256',
	roles                     => { loader => 'secret' },
	databases                 => { dw => 'loader' });

# a fault proxy in front of ClickHouse (catalog "stalled"), so that a
# cancel lands in ctas_fed's own socket wait
my $fp = start_fault_proxy($ch->{http_port});
my $fpurl = 'http://127.0.0.1:' . $fp->port;
my $chpw  = $ch->{password};
my $churl = $ch->{url};
my $dead  = free_port();

clickhouse_catalog($local, $ch, options => { connect_timeout => 2 });
clickhouse_catalog($local, $ch, name => 'stalled', url => $fpurl,
	options => { connect_timeout => 2 });
clickhouse_catalog($local, $ch, name => 'badpw', password => "wrong-$chpw");
clickhouse_catalog($local, $ch, name => 'down', url => "http://127.0.0.1:$dead",
	options => { connect_timeout => 2 });
postgres_catalog($local, $remote);
postgres_catalog($local, $nopre, name => 'np_on', options => { two_phase => 'on' });
$local->safe_psql('postgres', qq{
CREATE TABLE src AS
  SELECT g AS id, md5(g::text) AS label, g * 0.5 AS half
    FROM generate_series(1, 50000) g;
});

# --- helpers (no assertions)

sub scratch_tables
{
	return $ch->query(
		"SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_')") + 0;
}

sub our_queries
{
	return $ch->query(
		"SELECT count() FROM system.processes WHERE startsWith(query_id, 'ctas_fed_')") + 0;
}

sub ch_exists
{
	my ($t) = @_;
	return $ch->query("EXISTS TABLE dw.$t") + 0;
}

sub pg_exists
{
	my ($t) = @_;
	return $remote->safe_psql('dw', "SELECT count(*) FROM pg_tables WHERE tablename = '$t'") + 0;
}

my @all_errors;

sub run_sql
{
	my ($sql, %opts) = @_;
	my ($ret, $out, $err) = $local->psql('postgres', $sql, %opts);
	push @all_errors, $err;
	return ($ret, $out, $err);
}

# The invariant after an abort (CtasFed::Test::check_invariant): the
# ClickHouse table $t (and the PostgreSQL tables of %opts{pg}: [node,
# table] pairs) are as before the transaction, no prepared transaction of
# ours on either PostgreSQL catalog, nothing of ours staged or running in
# ClickHouse, the job of $t in state $opts{state} (default: not checked).
sub nothing_left
{
	my ($t, $name, %opts) = @_;
	my @targets = ({ ch => $ch, table => "dw.$t", expect => 'n/a',
		before => $opts{before} // 'absent' });
	push @targets, map { { pg => $_->[0], dbname => 'dw',
		table => "public.$_->[1]", expect => 'n/a' } } @{ $opts{pg} // [] };
	check_invariant(
		name       => $name,
		node       => $local,
		committed  => 0,
		targets    => \@targets,
		pg_remotes => [ $remote, $nopre ],
		clickhouse => [$ch],
		jobs       => $opts{state} ? [ [ $opts{catalog} // 'lake', "dw.$t", $opts{state} ] ] : [],
		timeout    => $opts{timeout} // 10);
}



# wait until ClickHouse runs our INSERT into a staging table
sub wait_ch_insert
{
	foreach (1 .. 300)
	{
		my $n = $ch->query(
			"SELECT count() FROM system.processes WHERE startsWith(query_id, 'ctas_fed_') AND query LIKE 'INSERT INTO%_ctas_fed_stage_%'");
		return 1 if $n + 0 > 0;
		usleep(100_000);
	}
	return 0;
}

# a slow source: rows of ~500 bytes trickle out, so that a 1 MB chunk of
# the INSERT goes out about every second
my $slow = q{SELECT g AS id, repeat('x', 500) AS pad, pg_sleep(0.0005) IS NULL AS s FROM generate_series(1, 200000) g};

# --- ROLLBACK
my ($ret, $out, $err) = run_sql(q{BEGIN; CREATE TABLE lake.dw.rb AS SELECT * FROM src; ROLLBACK;});
is($ret, 0, 'CTAS then ROLLBACK') or diag $err;
nothing_left('rb', 'ROLLBACK', state => 'aborted');

# --- error at row N
($ret, $out, $err) = run_sql(q{CREATE TABLE lake.dw.rown AS SELECT id, 1 / (id - 30000) AS x FROM src});
like($err, qr/ERROR:  division by zero/, 'an error at row 30000 fails the CTAS');
nothing_left('rown', 'error at row N', state => 'failed');

# an error after several MB were streamed
($ret, $out, $err) = run_sql(q{CREATE TABLE lake.dw.rown2 AS SELECT g, repeat('y', 300) AS pad, 1 / (g - 40000) AS x FROM generate_series(1, 50000) g});
like($err, qr/ERROR:  division by zero/, 'an error after 12 MB fails the CTAS');
nothing_left('rown2', 'error after 12 MB', state => 'failed');

# --- bad definitions, bad catalogs
($ret, $out, $err) = run_sql(q{CREATE TABLE lake.dw.bad WITH (engine = 'MergeTree', order_by = 'nosuch') AS SELECT * FROM src});
like($err, qr/ClickHouse error 47: Unknown identifier: nosuch/, 'bad order_by: ClickHouse\'s message');
nothing_left('bad', 'bad order_by');
($ret, $out, $err) = run_sql(q{CREATE TABLE lake.dw.bad WITH (engine = 'Log', order_by = 'id') AS SELECT * FROM src});
like($err, qr/ERROR:  could not create the staging table on ClickHouse catalog "lake"/, 'ORDER BY on a Log table');
nothing_left('bad', 'ORDER BY for an engine without one');

($ret, $out, $err) = run_sql(q{CREATE TABLE lake.nosuchdb.t AS SELECT 1 AS a});
like($err, qr/ERROR:  database "nosuchdb" does not exist in ClickHouse catalog "lake"/, 'unknown database');
is(scratch_tables(), 0, 'unknown database: nothing staged');

($ret, $out, $err) = run_sql(q{CREATE TABLE badpw.dw.t AS SELECT 1 AS a});
like($err, qr/ERROR:  could not read the server version on ClickHouse catalog "badpw"/, 'wrong password: error');
like($err, qr/ClickHouse error 193: Wrong password for user default/, 'wrong password: ClickHouse\'s reason');
is(ch_exists('t'), 0, 'wrong password: nothing created');

my $t0 = time;
($ret, $out, $err) = run_sql(q{CREATE TABLE down.dw.t AS SELECT 1 AS a});
like($err, qr/ERROR:  could not read the server version on ClickHouse catalog "down"/, 'server down: error');
like($err, qr/libcurl error 7 \(Couldn't connect to server\)/, 'server down: the reason');
cmp_ok(time - $t0, '<', 10, 'server down: fails at once');
($ret, $out, $err) = run_sql(q{\set VERBOSITY verbose
CREATE TABLE down.dw.t AS SELECT 1 AS a});
like($err, qr/ERROR:  08001:/, 'server down: SQLSTATE 08001');

# --- savepoints
($ret, $out, $err) = run_sql(q{
BEGIN;
CREATE TABLE lake.dw.sp_a AS SELECT 1 AS a;
SAVEPOINT s1;
CREATE TABLE lake.dw.sp_b AS SELECT * FROM src;
SAVEPOINT s2;
CREATE TABLE lake.dw.sp_c AS SELECT 3 AS a;
ROLLBACK TO SAVEPOINT s1;
CREATE TABLE lake.dw.sp_d AS SELECT 4 AS a;
SAVEPOINT s3;
CREATE TABLE lake.dw.sp_e AS SELECT 5 AS a;
RELEASE SAVEPOINT s3;
SAVEPOINT s4;
CREATE TABLE lake.dw.sp_f AS SELECT 1 / 0 AS a;
ROLLBACK TO SAVEPOINT s4;
COMMIT;}, on_error_stop => 0);
is($ret, 0, 'savepoints') or diag $err;
like($err, qr/ERROR:  division by zero/, 'the CTAS in the last savepoint failed');
is(join(',', map { ch_exists($_) } qw(sp_a sp_b sp_c sp_d sp_e sp_f)), '1,0,0,1,1,0',
	'ROLLBACK TO SAVEPOINT undoes the CTAS inside it, RELEASE keeps them');
is(scratch_tables(), 0, 'savepoints: no scratch table left');

# --- PostgreSQL and ClickHouse in one transaction
($ret, $out, $err) = run_sql(q{
BEGIN;
CREATE TABLE wh.public.both1 AS SELECT * FROM src;
CREATE TABLE lake.dw.both1 AS SELECT * FROM src;
COMMIT;});
is($ret, 0, 'PostgreSQL and ClickHouse catalogs in one transaction') or diag $err;
is(pg_exists('both1') . ch_exists('both1'), '11', 'commit together');
is($ch->query('SELECT count() FROM dw.both1'), "50000\n", 'with every row');

run_sql(q{
BEGIN;
CREATE TABLE wh.public.both2 AS SELECT * FROM src;
CREATE TABLE lake.dw.both2 AS SELECT * FROM src;
ROLLBACK;});
is(pg_exists('both2') . ch_exists('both2'), '00', 'roll back together');
nothing_left('both2', 'mixed ROLLBACK', pg => [ [ $remote, 'both2' ] ],
	state => 'aborted');

# the PostgreSQL participant fails to PREPARE: ClickHouse never publishes
($ret, $out, $err) = run_sql(q{
BEGIN;
CREATE TABLE lake.dw.both3 AS SELECT * FROM src;
CREATE TABLE np_on.public.both3 AS SELECT * FROM src;
COMMIT;});
isnt($ret, 0, 'a PostgreSQL catalog that cannot PREPARE fails the commit');
is($nopre->safe_psql('dw', q{SELECT count(*) FROM pg_tables WHERE tablename = 'both3'}), '0',
	'no table on the PostgreSQL catalog');
nothing_left('both3', 'PREPARE failure', pg => [ [ $nopre, 'both3' ] ],
	state => 'aborted');

# ClickHouse fails at pre-commit (the name was taken meanwhile): the
# prepared PostgreSQL transaction is rolled back
# a session that takes the ClickHouse name between load and commit
sub clash_then_commit
{
	my ($sql, $clash_table) = @_;
	my ($in, $o, $e) = ('', '', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=0', '-d', $local->connstr('postgres') ],
		'<', \$in, '>', \$o, '2>', \$e, IPC::Run::timeout(120));
	$in .= "BEGIN;\n$sql\n\\echo loaded\n";
	$h->pump until $o =~ /loaded/ || !$h->pumpable;
	$ch->query("CREATE TABLE dw.$clash_table (x Int32) ENGINE = Memory");
	$ch->query("INSERT INTO dw.$clash_table VALUES (42)");
	$in .= "COMMIT;\n";
	$h->finish;
	push @all_errors, $e;
	return $e;
}

$err = clash_then_commit(q{
CREATE TABLE wh.public.both4 AS SELECT * FROM src;
CREATE TABLE lake.dw.both4 AS SELECT * FROM src;}, 'both4');
like($err, qr/ERROR:  could not publish the new table on ClickHouse catalog "lake"/,
	'a RENAME that fails at pre-commit fails the commit');
is(pg_exists('both4'), 0, 'the PostgreSQL catalog rolled back');
is($ch->query('SELECT * FROM dw.both4'), "42\n", 'the other session\'s table is untouched');
nothing_left('both4', 'RENAME failure after PREPARE',
	before => ch_digest($ch, 'dw.both4'), pg => [ [ $remote, 'both4' ] ],
	state => 'aborted');
$ch->query('DROP TABLE dw.both4');

# a second ClickHouse action fails at pre-commit: the first rename is undone
$err = clash_then_commit(q{
CREATE TABLE lake.dw.first5 AS SELECT * FROM src;
CREATE TABLE lake.dw.second5 AS SELECT 1 AS a;}, 'second5');
like($err, qr/could not publish the new table/, 'second publish fails');
is(ch_exists('first5'), 0, 'the first table, already renamed into place, was taken back');
nothing_left('first5', 'undone rename', state => 'aborted');
$ch->query('DROP TABLE dw.second5');

# replace, then a failure: the old table is back
run_sql(q{CREATE TABLE lake.dw.rep6 AS SELECT 'old' AS v});
$err = clash_then_commit(q{
CREATE TABLE lake.dw.rep6 WITH (if_exists = 'replace') AS SELECT 'new' AS v;
CREATE TABLE lake.dw.second6 AS SELECT 1 AS a;}, 'second6');
like($err, qr/could not publish the new table/, 'replace then a failing publish');
is($ch->query('SELECT v FROM dw.rep6'), "old\n", 'the replaced table is restored');
nothing_left('rep6', 'undone replace', before => '1:' . Digest::MD5::md5_hex('old'),
	state => 'aborted');
$ch->query('DROP TABLE dw.second6');

# drop, then a failure: the table is back
run_sql(q{CREATE TABLE lake.dw.drop7 AS SELECT 'kept' AS v});
$err = clash_then_commit(q{
DROP TABLE lake.dw.drop7;
CREATE TABLE lake.dw.second7 AS SELECT 1 AS a;}, 'second7');
like($err, qr/could not publish the new table/, 'drop then a failing publish');
is($ch->query('SELECT v FROM dw.drop7'), "kept\n", 'the dropped table is restored');
nothing_left('drop7', 'undone drop', before => '1:' . Digest::MD5::md5_hex('kept'));
$ch->query('DROP TABLE dw.second7');

# append, then a failure: ClickHouse cannot take rows back, and says so
run_sql(q{CREATE TABLE lake.dw.app8 AS SELECT g AS id FROM generate_series(1, 10) g});
$err = clash_then_commit(q{
CREATE TABLE lake.dw.app8 WITH (if_exists = 'append') AS SELECT g AS id FROM generate_series(11, 15) g;
CREATE TABLE lake.dw.second8 AS SELECT 1 AS a;}, 'second8');
like($err, qr/WARNING:  rows appended to table "dw.app8" of ClickHouse catalog "lake" stay there/,
	'append then a failing publish: a WARNING says the rows stay');
is($ch->query('SELECT count() FROM dw.app8'), "15\n", 'as documented');
nothing_left('app8', 'append failure',
	before => sql_digest($local, 'postgres', 'SELECT g FROM generate_series(1, 15) g'));
$ch->query('DROP TABLE dw.second8');

# --- cancel and statement_timeout while ctas_fed waits for ClickHouse:
# the proxy holds the INSERT stream, so the backend sits in ctas_fed's own
# socket wait (wait event type Extension), not in the source query
sub wait_in_ctas_fed
{
	my ($pid) = @_;
	foreach (1 .. 200)
	{
		return 1 if $local->safe_psql('postgres',
			"SELECT wait_event_type FROM pg_stat_activity WHERE pid = $pid") eq 'Extension';
		usleep(50_000);
	}
	return 0;
}

my $rule = $fp->set_rule(match => 'INSERT INTO', action => 'stall', dir => 'up');
my ($h, $hout, $herr) = start_psql($local,
	"CREATE TABLE stalled.dw.canceled AS SELECT * FROM src");
my $pid = wait_active($local, 'CREATE TABLE stalled.dw.canceled%');
ok(defined $pid, 'the CTAS to cancel is running');
ok($fp->wait_hit($rule), 'its INSERT stream is stalled');
ok(wait_in_ctas_fed($pid), 'the backend waits in ctas_fed\'s socket wait');
$t0 = time;
$local->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
$h->finish;
push @all_errors, $$herr;
like($$herr, qr/ERROR:  canceling statement due to user request/, 'pg_cancel_backend stops the CTAS');
cmp_ok(time - $t0, '<', 5, 'promptly');
$fp->clear;
nothing_left('canceled', 'cancel in the INSERT wait', state => 'failed',
	catalog => 'stalled');

$rule = $fp->set_rule(match => 'INSERT INTO', action => 'stall', dir => 'up');
$t0 = time;
($ret, $out, $err) = run_sql("SET statement_timeout = '2500ms'; CREATE TABLE stalled.dw.timedout AS SELECT * FROM src");
is($fp->hits($rule), 1, 'statement_timeout: the INSERT stream was stalled');
like($err, qr/ERROR:  canceling statement due to statement timeout/, 'statement_timeout stops the CTAS');
cmp_ok(time - $t0, '<', 8, 'promptly');
$fp->clear;
nothing_left('timedout', 'statement_timeout in the INSERT wait', state => 'failed',
	catalog => 'stalled');

# --- cancel mid-INSERT while the source query runs (pg_sleep)
($h, $hout, $herr) = start_psql($local, "CREATE TABLE lake.dw.canceled2 AS $slow");
$pid = wait_active($local, 'CREATE TABLE lake.dw.canceled2%');
ok(defined $pid, 'the CTAS to cancel is running');
ok(wait_ch_insert(), 'ClickHouse is running its INSERT');
$t0 = time;
$local->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
$h->finish;
push @all_errors, $$herr;
like($$herr, qr/ERROR:  canceling statement due to user request/, 'pg_cancel_backend stops the CTAS');
cmp_ok(time - $t0, '<', 5, 'promptly');
nothing_left('canceled2', 'cancel mid-INSERT', state => 'failed');

# --- the server is killed mid-load
sub ch_kill9
{
	kill 'KILL', $ch->{pid};
	foreach (1 .. 100)
	{
		last unless kill 0, $ch->{pid};
		usleep(100_000);
	}
	unlink $ch->{pid_file};
}

sub ch_start_again
{
	system('clickhouse-server', "--config-file=$ch->{dir}/config.xml",
		"--pid-file=$ch->{pid_file}", '--daemon') == 0
	  or die "could not restart clickhouse-server";
	my $http = HTTP::Tiny->new(timeout => 5);
	foreach (1 .. 300)
	{
		my $res = $http->get("$churl/ping");
		if ($res->{status} == 200)
		{
			if (open my $fh, '<', $ch->{pid_file})
			{
				my $p = <$fh>;
				$ch->{pid} = $1 if defined $p && $p =~ /(\d+)/;
			}
			return 1;
		}
		usleep(100_000);
	}
	return 0;
}

($h, $hout, $herr) = start_psql($local, "CREATE TABLE lake.dw.killed AS $slow");
ok(defined wait_active($local, 'CREATE TABLE lake.dw.killed%'), 'the CTAS to break is running');
ok(wait_ch_insert(), 'ClickHouse is running its INSERT');
my $streamed = 0;
foreach (1 .. 200)
{
	$streamed = $local->safe_psql('postgres',
		q{SELECT count(*) FROM ctas_fed.jobs WHERE target = 'dw.killed' AND rows > 0});
	last if $streamed;
	usleep(50_000);
}
ok($streamed, 'rows are streaming');
ch_kill9();
$t0 = time;
$h->finish;
push @all_errors, $$herr;
like($$herr, qr/ERROR:  could not insert rows on ClickHouse catalog "lake"/, 'the CTAS fails when the server dies');
like($$herr, qr/WARNING:  could not drop the staging table/, 'the cleanup that cannot run is a WARNING');
cmp_ok(time - $t0, '<', 15, 'the failure is prompt');
ok(ch_start_again(), 'ClickHouse restarted');
ok(scratch_tables() >= 1, 'the staging table outlived the crash');
like( $local->safe_psql('postgres', q{SELECT string_agg(action, ',') FROM ctas_fed.resolve_in_doubt('lake')}),
	qr/rolled back/, 'resolve_in_doubt drops it');
nothing_left('killed', 'server killed mid-load, after resolve', state => 'failed');

# resolve leaves a transaction in progress alone and finishes one that committed
my ($in, $o, $e) = ('', '', '');
my $bg = IPC::Run::start([ 'psql', '-XAtq', '-d', $local->connstr('postgres') ],
	'<', \$in, '>', \$o, '2>', \$e, IPC::Run::timeout(120));
$in .= "BEGIN;\nCREATE TABLE lake.dw.inprog AS SELECT 1 AS a;\n\\echo loaded\n";
$bg->pump until $o =~ /loaded/ || !$bg->pumpable;
like( $local->safe_psql('postgres', q{SELECT string_agg(action, ',') FROM ctas_fed.resolve_in_doubt('lake')}),
	qr/left: its transaction is in progress/, 'resolve leaves a running transaction alone');
$in .= "COMMIT;\n";
$bg->finish;
is(ch_exists('inprog'), 1, 'which then commits');

# a table that only looks like a leftover of this cluster (same system
# identifier, a committed xid) is no one's record: resolve leaves it alone
my $sysid = $local->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
my $xid   = $local->safe_psql('postgres', 'SELECT txid_current()');
$ch->query("CREATE TABLE dw._ctas_fed_old_${sysid}_${xid}_1_zz (a Int32) ENGINE = Memory");
is( $local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.resolve_in_doubt('lake') WHERE object LIKE '%_zz'}),
	'0', 'resolve does not act on a table that no record names');
is(ch_exists("_ctas_fed_old_${sysid}_${xid}_1_zz"), 1, 'the look-alike table is still there');
$ch->query("DROP TABLE dw._ctas_fed_old_${sysid}_${xid}_1_zz");
is(scratch_tables(), 0, 'resolve: no scratch table left');
nothing_left('zz', 'after resolve');

# --- no secret anywhere
my $leaks = grep { index($_, $chpw) >= 0 } @all_errors;
is($leaks, 0, 'the password appears in no message');

$fp->stop;
$local->stop;
$remote->stop;
$nopre->stop;
$ch->stop;
done_testing();
