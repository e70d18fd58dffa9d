
# Copyright (c) 2026, ctas_fed developers

# Streaming mode (atomic = false) into ClickHouse: the table is created
# first and visible while the load runs, rows are committed every
# commit_every rows, and on failure (an error at row N, cancel, the server
# killed) the committed rows stay and the error says how many - the same
# number ClickHouse holds.  No staging table is ever used.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use IPC::Run;
use HTTP::Tiny;

use CtasFed::Test;

my $ch    = start_clickhouse();
# the worker's own resolver would race the assertions on leftovers
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $chpw  = $ch->{password};
my $churl = $ch->{url};

clickhouse_catalog($local, $ch, options => { connect_timeout => 2 });

sub scratch_tables
{
	return $ch->query(
		"SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_')") + 0;
}

sub count_of
{
	my ($t) = @_;
	return $ch->query("SELECT count() FROM dw.$t") + 0;
}


# --- success
my ($ret, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE lake.dw.s1 WITH (atomic = false, commit_every = 1000) AS SELECT g AS id, md5(g::text) AS h FROM generate_series(1, 10500) g});
is($ret, 0, 'streaming CTAS') or diag $err;
is(count_of('s1'), 10500, 'every row arrives');
is($ch->query('SELECT sum(id), uniqExact(h) FROM dw.s1'), "55130250\t10500\n", 'with the right content');
is(scratch_tables(), 0, 'no staging table in streaming mode');

# --- the table is visible while the load runs, growing by commit_every
my ($h, $hout, $herr) = start_psql_timed($local, q{CREATE TABLE lake.dw.s2 WITH (atomic = false, commit_every = 200) AS SELECT g AS id, pg_sleep(0.002) IS NULL AS s FROM generate_series(1, 3000) g});
my $seen = wait_until(30,
	sub { $ch->query('EXISTS TABLE dw.s2') + 0 && count_of('s2') }) // 0;
$h->finish;
ok($seen > 0 && $seen < 3000, "rows are visible while the load runs ($seen)");
is($seen % 200, 0, 'in whole blocks of commit_every rows');
is(count_of('s2'), 3000, 'and all of them at the end');

# --- an error at row N: the committed blocks stay, and the error says so
($ret, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE lake.dw.s3 WITH (atomic = false, commit_every = 1000) AS SELECT g AS id, 1 / (g - 5500) AS x FROM generate_series(1, 10000) g});
isnt($ret, 0, 'an error at row 5500 fails the streaming CTAS');
like($err, qr/ERROR:  division by zero/, 'with its error');
like($err, qr/5000 rows were committed in the remote table and stay there/,
	'the error says how many rows were committed');
is(count_of('s3'), 5000, 'and ClickHouse holds exactly those');

# --- cancel: the same
($h, $hout, $herr) = start_psql_timed($local, q{CREATE TABLE lake.dw.s4 WITH (atomic = false, commit_every = 300) AS SELECT g AS id, pg_sleep(0.002) IS NULL AS s FROM generate_series(1, 100000) g},
	psql_args => [ '-v', 'VERBOSITY=verbose' ]);
my $pid = wait_until(
	30,
	sub {
		my $p = $local->safe_psql('postgres',
			q{SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'CREATE TABLE lake.dw.s4%'});
		$p ne '' && ($ch->query('EXISTS TABLE dw.s4') + 0) && count_of('s4') >= 600 ? $p : undef;
	});
ok($pid, 'the streaming load has committed 600 rows or more');
$local->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
$h->finish;
like($$herr, qr/^ERROR:  57014: canceling statement due to user request$/m,
	'cancel stops the streaming CTAS (57014)');
my ($n) = $$herr =~ /(\d+) rows were committed in the remote table/;
ok(defined $n && $n >= 600 && $n % 300 == 0, 'the error says how many rows were committed');
# an INSERT the server took may still be finishing: wait for the count
wait_until(10, sub { count_of('s4') == ($n // -1) });
is(count_of('s4'), $n // -1, 'and ClickHouse holds exactly those');
is($ch->query("SELECT count() FROM system.processes WHERE startsWith(query_id, 'ctas_fed_')") + 0,
	0, 'no query of ours is left running');

# --- a large block in flight: what the socket took stays, and is counted
($ret, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE lake.dw.s5 WITH (atomic = false, commit_every = 1000000) AS SELECT g AS id, repeat('z', 400) AS pad, 1 / (g - 20000) AS x FROM generate_series(1, 30000) g});
like($err, qr/division by zero/, 'an error inside a large block');
($n) = $err =~ /(\d+) rows were committed in the remote table/;
wait_until(10, sub { count_of('s5') == ($n // -1) });
is(count_of('s5'), $n // -1, "the error's count matches ClickHouse ($n)");

# --- append and IF NOT EXISTS in streaming mode; replace is refused
($ret, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE lake.dw.s1 WITH (atomic = false, if_exists = 'append') AS SELECT g AS id, 'x' AS h FROM generate_series(1, 500) g});
is($ret, 0, 'streaming append') or diag $err;
is(count_of('s1'), 11000, 'the rows were added');
($ret, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE IF NOT EXISTS lake.dw.s1 WITH (atomic = false) AS SELECT 1 AS id});
like($err, qr/NOTICE:  relation "dw.s1" already exists in catalog "lake", skipping/, 'streaming IF NOT EXISTS');
($ret, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE lake.dw.s1 WITH (atomic = false, if_exists = 'replace') AS SELECT 1 AS id});
like($err, qr/ERROR:  option if_exists = 'replace' needs atomic = true/, 'streaming replace is refused');
is(count_of('s1'), 11000, 'and the table is untouched');

# --- the server dies mid-stream: committed blocks stay
($h, $hout, $herr) = start_psql_timed($local, q{CREATE TABLE lake.dw.s6 WITH (atomic = false, commit_every = 500) AS SELECT g AS id, pg_sleep(0.002) IS NULL AS s FROM generate_series(1, 100000) g});
ok(wait_until(30, sub { ($ch->query('EXISTS TABLE dw.s6') + 0) && count_of('s6') >= 1000 }),
	'the streaming load has committed 1000 rows or more');
kill 'KILL', $ch->{pid};
ok(wait_until(10, sub { !kill 0, $ch->{pid} }), 'ClickHouse is killed');
unlink $ch->{pid_file};
my $t0 = time;
$h->finish;
like($$herr, qr/ERROR:  could not insert rows on ClickHouse catalog "lake"/, 'the streaming CTAS fails when the server dies');
cmp_ok(time - $t0, '<', 10, 'promptly');
($n) = $$herr =~ /(\d+) rows were committed in the remote table/;
ok(defined $n && $n >= 1000 && $n % 500 == 0, 'the error says how many rows were committed');

system('clickhouse-server', "--config-file=$ch->{dir}/config.xml",
	"--pid-file=$ch->{pid_file}", '--daemon');
ok( wait_until(
		30, sub { HTTP::Tiny->new(timeout => 5)->get("$churl/ping")->{status} == 200 }),
	'ClickHouse restarted');
if (open my $fh, '<', $ch->{pid_file})
{
	my $p = <$fh>;
	$ch->{pid} = $1 if defined $p && $p =~ /(\d+)/;
}
is(count_of('s6'), $n // -1, 'the committed rows survived the crash');
is(scratch_tables(), 0, 'no scratch table');

$local->stop;
$ch->stop;
done_testing();
