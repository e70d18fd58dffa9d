
# Copyright (c) 2026, ctas_fed developers

# The local server crashes in the commit protocol of a transaction that did
# a CREATE, a replace and a DROP in ClickHouse:
#   - after the renames (pre-commit), before the local commit record: the
#     published tables are visible (the documented window), and after the
#     restart the resolver, deciding from the local transaction's status
#     (aborted), takes all three back;
#   - after the local commit record, before post-commit: the resolver
#     (committed) drops what post-commit would have dropped.
# Either way no _ctas_fed_ table is left.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use IPC::Run;
use Digest::MD5;

use CtasFed::Test;

my $ch    = start_clickhouse();
my $local = new_cluster('local');

clickhouse_catalog($local, $ch);

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

# Run the transaction in a session that stops at the fault point; crash
# the server there; start it again.
sub crash_at
{
	my ($point, $sql) = @_;
	my ($in, $out, $err) = ('', '', '');
	my $offset = -s $local->logfile;
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $local->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
	$in .= "SET ctas_fed.fault_point = '$point';\nBEGIN;\n$sql\nCOMMIT;\n";
	$h->pump while $h->pumpable && $in ne '';
	$local->wait_for_log(qr/stopped at fault point "$point"/, $offset);
	return $h;
}

# wait for the worker (or ask resolve_in_doubt) until nothing is left
sub resolved
{
	foreach my $i (1 .. 150)
	{
		return 1 if scratch_tables() == 0;
		$local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.resolve_in_doubt('lake')})
		  if $i % 50 == 0;
		usleep(100_000);
	}
	return scratch_tables() == 0;
}

# the invariant once resolved: each [table, digest if committed, digest
# before, job state] as check_invariant wants it
sub invariant
{
	my ($name, $committed, @t) = @_;
	my $s = session_start($local);
	check_invariant(
		name      => $name,
		node      => $local,
		committed => $committed,
		targets   => [ map { { ch => $ch, table => "dw.$_->[0]",
			expect => $_->[1], before => $_->[2] } } @t ],
		jobs      => [ map { [ 'lake', "dw.$_->[0]", $_->[3] ] } @t ],
		resolve   => 1,
		session   => $s,
		session_ctas => "CREATE TABLE lake.dw.after_$t[0][0] AS SELECT 1 AS a");
	$s->quit;
	return;
}

my $old  = '1:' . Digest::MD5::md5_hex('old');
my $new  = '1:' . Digest::MD5::md5_hex('new');
my $kept = '1:' . Digest::MD5::md5_hex('kept');
my $thousand = sql_digest($local, 'postgres', 'SELECT g FROM generate_series(1, 1000) g');

$local->safe_psql('postgres', q{
CREATE TABLE lake.dw.rep1 AS SELECT 'old' AS v;
CREATE TABLE lake.dw.gone1 AS SELECT 'kept' AS v;
CREATE TABLE lake.dw.rep2 AS SELECT 'old' AS v;
CREATE TABLE lake.dw.gone2 AS SELECT 'kept' AS v;
});

# --- crash after the renames, before the local commit record
my $h = crash_at('after_rename', q{
CREATE TABLE lake.dw.new1 AS SELECT g FROM generate_series(1, 1000) g;
CREATE TABLE lake.dw.rep1 WITH (if_exists = 'replace') AS SELECT 'new' AS v;
DROP TABLE lake.dw.gone1;});
is(ch_exists('new1'), 1, 'after the rename, the new table is visible (the documented window)');
is($ch->query('SELECT v FROM dw.rep1'), "new\n", 'so is the replacement');
is(ch_exists('gone1'), 0, 'and the dropped table is gone');
$local->stop('immediate');
$h->finish;
$local->start;
ok(resolved(), 'the resolver finishes the aborted transaction');
is(ch_exists('new1'), 0, 'the table of the aborted CREATE was taken back');
is($ch->query('SELECT v FROM dw.rep1'), "old\n", 'the replaced table is back');
is($ch->query('SELECT v FROM dw.gone1'), "kept\n", 'the dropped table is back');
invariant('crash after the renames', 0,
	[ 'new1', $thousand, 'absent', 'aborted' ],
	[ 'rep1', $new, $old, 'aborted' ],
	[ 'gone1', 'absent', $kept, 'aborted' ]);

# --- crash after the local commit record, before post-commit
$h = crash_at('after_commit_record', q{
CREATE TABLE lake.dw.new2 AS SELECT g FROM generate_series(1, 1000) g;
CREATE TABLE lake.dw.rep2 WITH (if_exists = 'replace') AS SELECT 'new' AS v;
DROP TABLE lake.dw.gone2;});
ok(scratch_tables() > 0, 'post-commit has not run: leftovers are there');
$local->stop('immediate');
$h->finish;
$local->start;
ok(resolved(), 'the resolver finishes the committed transaction');
is($ch->query('SELECT count() FROM dw.new2'), "1000\n", 'the committed CREATE stays');
is($ch->query('SELECT v FROM dw.rep2'), "new\n", 'the replacement stays');
is(ch_exists('gone2'), 0, 'the dropped table stays dropped');

invariant('crash after the commit record', 1,
	[ 'new2', $thousand, 'absent', 'committed' ],
	[ 'rep2', $new, $old, 'committed' ],
	[ 'gone2', 'absent', $kept, 'committed' ]);

# --- the same table replaced twice in one transaction, crash after the
# renames: the resolver undoes the transaction as a whole, newest action
# first, and the ORIGINAL table comes back with its content
$local->safe_psql('postgres',
	q{CREATE TABLE lake.dw.twice AS SELECT 'original' AS v, g FROM generate_series(1, 100) g});
my $digest = 'SELECT count(), sum(cityHash64(v, g)) FROM dw.twice';
my $orig = $ch->query($digest);
$h = crash_at('after_rename', q{
CREATE TABLE lake.dw.twice WITH (if_exists = 'replace') AS SELECT 'first' AS v, 1 AS g;
CREATE TABLE lake.dw.twice WITH (if_exists = 'replace') AS SELECT 'second' AS v, 2 AS g;});
is($ch->query('SELECT v FROM dw.twice'), "second\n",
	'replaced twice: after the renames the second replacement is visible');
$local->stop('immediate');
$h->finish;
$local->start;
ok(resolved(), 'the resolver finishes the transaction that replaced a table twice');
is($ch->query($digest), $orig, 'the original table is back, with its original content');

# --- a savepoint rolled back before the crash: the record names the undone
# action too (its tables are gone); the resolver settles the transaction and
# its job
$h = crash_at('after_rename', q{
SAVEPOINT s;
CREATE TABLE lake.dw.sp1 AS SELECT 1 AS a;
ROLLBACK TO SAVEPOINT s;
CREATE TABLE lake.dw.sp2 AS SELECT 2 AS a;});
is(ch_exists('sp2'), 1, 'savepoint: the table after the savepoint is published');
$local->stop('immediate');
$h->finish;
$local->start;
ok(resolved(), 'savepoint: the resolver finishes the transaction');
is(ch_exists('sp1') + ch_exists('sp2'), 0, 'savepoint: neither table stays');
my $sp_state = '';
foreach (1 .. 100)
{
	$sp_state = $local->safe_psql('postgres',
		q{SELECT string_agg(state, ',') FROM ctas_fed.jobs WHERE target LIKE '%sp2%'});
	last if $sp_state eq 'aborted';
	$local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.resolve_in_doubt('lake')});
	usleep(100_000);
}
is($sp_state, 'aborted', 'savepoint: the job of the published table is settled as aborted');

# --- a table made to look like a leftover of this cluster (its system
# identifier, an aborted and a committed xid), created in ClickHouse
# directly: no record names it, so the resolver leaves it alone
my $sysid = $local->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
my $xid_c = $local->safe_psql('postgres', 'SELECT txid_current()');
my $xid_a = $local->safe_psql('postgres', 'BEGIN; SELECT txid_current(); ROLLBACK;');
$ch->query("CREATE TABLE dw.victim (a Int32) ENGINE = Memory");
$ch->query("INSERT INTO dw.victim VALUES (7)");
$ch->query("CREATE TABLE dw._ctas_fed_stage_${sysid}_${xid_c}_1 (a Int32) ENGINE = Memory");
$ch->query("CREATE TABLE dw._ctas_fed_old_${sysid}_${xid_a}_1_victim (a Int32) ENGINE = Memory");
$ch->query("CREATE TABLE dw._ctas_fed_new_${sysid}_${xid_a}_2_victim (x UInt8) ENGINE = TinyLog");
$local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.resolve_in_doubt('lake')});
is(scratch_tables(), 3, 'look-alike scratch tables are left alone');
is($ch->query('SELECT a FROM dw.victim'), "7\n", 'and so is the table they name');
$ch->query("DROP TABLE dw._ctas_fed_stage_${sysid}_${xid_c}_1");
$ch->query("DROP TABLE dw._ctas_fed_old_${sysid}_${xid_a}_1_victim");
$ch->query("DROP TABLE dw._ctas_fed_new_${sysid}_${xid_a}_2_victim");

# --- crash mid-load: the worker alone drops the staging table
$local->append_conf('postgresql.conf', "ctas_fed.resolver_naptime = 1\n");
$local->restart;
my ($lh, $lout, $lerr) = start_psql($local,
	"CREATE TABLE lake.dw.midload AS SELECT g, pg_sleep(0.001) IS NULL AS s FROM generate_series(1, 100000) g");
my $staged = 0;
foreach (1 .. 200)
{
	$staged = $ch->query(
		"SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_stage_')") + 0;
	last if $staged;
	usleep(100_000);
}
ok($staged, 'the load is streaming into a staging table');
my $streamed = 0;
foreach (1 .. 200)
{
	$streamed = $local->safe_psql('postgres',
		q{SELECT count(*) FROM ctas_fed.jobs WHERE target = 'dw.midload' AND rows > 0});
	last if $streamed;
	usleep(50_000);
}
ok($streamed, 'rows are streaming');
$local->stop('immediate');
$lh->finish;
$local->start;
my $clean = 0;
foreach (1 .. 200)
{
	if (scratch_tables() == 0) { $clean = 1; last; }
	usleep(100_000);
}
ok($clean, 'after a crash mid-load the worker drops the staging table');
is(ch_exists('midload'), 0, 'and no target table appears');
my $s = session_start($local);
check_invariant(
	name      => 'crash mid-load, the worker alone',
	node      => $local,
	committed => 0,
	targets   => [ { ch => $ch, table => 'dw.midload', expect => 'n/a' } ],
	jobs      => [ [ 'lake', 'dw.midload', 'aborted' ] ],
	session   => $s,
	session_ctas => 'CREATE TABLE lake.dw.after_midload AS SELECT 1 AS a');
$s->quit;

$local->stop;
$ch->stop;
done_testing();
