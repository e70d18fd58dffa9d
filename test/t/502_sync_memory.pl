
# Copyright (c) 2026, ctas_fed developers

# A sync worker's memory stays bounded however large a source transaction
# is.  One PostgreSQL-target and one ClickHouse-target sync follow a table
# while three source transactions of some hundred megabytes each are
# applied: one inserts 200,000 rows of about 1 kB, one updates every key
# twice, one deletes a third of them.  The peak resident memory of each
# sync worker (VmHWM of /proc/<pid>/status, on a cluster with small
# shared_buffers, and RssAnon sampled while it applies) stays far below
# the size of one of those transactions; then both remotes equal the query
# on the source, row for row.  A value-changing retype in the middle of a
# source transaction is then followed by a copy again: both remotes equal
# the source once more, with the column retyped, and stream on.

# ctas-tap: parallel

use strict;
use warnings;

use Digest::MD5;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use CtasFed::Test;

# The worker's bound: logical decoding holds up to logical_decoding_work_mem
# of changes (then spills to disk), the peek's tuplestore and ClickHouse's
# tuplesort work_mem each; the rest is the backend's own.  A transaction
# below is about 200 MB of pgoutput messages.
my $bound_kb = 120 * 1024;

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => qq{
wal_level = logical
shared_buffers = 16MB
work_mem = 4MB
logical_decoding_work_mem = 32MB
max_wal_size = 2GB
});
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
postgres_catalog($local, $remote);
clickhouse_catalog($local, $ch);

$local->safe_psql('postgres', q{
CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL, pad text NOT NULL);
INSERT INTO big VALUES (0, 0, 'seed');
CREATE TABLE wh.public.big WITH (sync = 'continuous') AS SELECT id, v, pad FROM big;
CREATE TABLE lake.dw.big WITH (sync = 'continuous', stream = 'ch') AS SELECT id, v, pad FROM big;
});

sub our_slots
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'");
}

ok(wait_until(120, sub {
	$local->safe_psql('postgres',
		q{SELECT string_agg(state, ',') FROM ctas_fed.jobs WHERE mode = 'sync'}) eq 'streaming,streaming' }),
	'both syncs streaming');

# the sync workers, by target
my %pid;
foreach my $row (split /\n/, $local->safe_psql('postgres', q{
	SELECT s.remote_table || ' ' || c.srvname || ' ' || a.pid
	  FROM pg_stat_activity a
	  JOIN ctas_fed.syncs s ON a.application_name = 'ctas_fed sync ' || s.sync_id
	  JOIN pg_foreign_server c ON c.oid = s.server
	 WHERE a.backend_type = 'ctas_fed sync'}))
{
	my (undef, $srv, $p) = split / /, $row;
	$pid{$srv} = $p;
}
ok($pid{wh} && $pid{lake}, 'the two sync workers are running');

sub status_kb
{
	my ($p, $field) = @_;
	open my $fh, '<', "/proc/$p/status" or return undef;
	while (<$fh>)
	{
		return $1 if /^\Q$field\E:\s+(\d+)\s+kB/;
	}
	return undef;
}

note "RssAnon before the transactions: "
  . join(', ', map { "$_ " . (status_kb($pid{$_}, 'RssAnon') // '?') . ' kB' } sort keys %pid);

# Run $sql on the source, then wait until both slots confirmed the WAL it
# wrote, sampling RssAnon of both workers every 20 ms meanwhile.  Returns
# true once caught up.
my %rss_peak = (wh => 0, lake => 0);

sub apply_and_sample
{
	my ($sql, $timeout) = @_;
	$local->safe_psql('postgres', $sql);
	my $lsn = $local->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
	my $deadline = Time::HiRes::time() + $timeout;
	my $next_check = 0;
	while (Time::HiRes::time() < $deadline)
	{
		foreach my $srv (keys %pid)
		{
			my $kb = status_kb($pid{$srv}, 'RssAnon') // 0;
			$rss_peak{$srv} = $kb if $kb > $rss_peak{$srv};
		}
		if (Time::HiRes::time() >= $next_check)
		{
			return 1 if $local->safe_psql('postgres', qq{
				SELECT count(*) = 2 AND bool_and(confirmed_flush_lsn >= '$lsn')
				  FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'}) eq 't';
			$next_check = Time::HiRes::time() + 0.5;
		}
		usleep(20_000);
	}
	return 0;
}

# one transaction: 200,000 rows of about 1 kB
ok(apply_and_sample(q{
	INSERT INTO big SELECT g, 1, repeat(md5(g::text), 31)
	  FROM generate_series(1, 200000) g}, 600),
	'a transaction of 200,000 inserted rows applied by both');
# one transaction: every key updated twice
ok(apply_and_sample(q{
	BEGIN;
	UPDATE big SET v = 2, pad = repeat(md5('u' || id), 31) WHERE id > 0;
	UPDATE big SET v = 3 WHERE id % 2 = 0;
	COMMIT}, 900),
	'a transaction of 300,000 updates applied by both');
# one transaction: a third of the keys deleted
ok(apply_and_sample(q{DELETE FROM big WHERE id % 3 = 0}, 600),
	'a transaction of deletes applied by both');

foreach my $srv (sort keys %pid)
{
	my $hwm = status_kb($pid{$srv}, 'VmHWM');
	note "$srv worker: VmHWM $hwm kB, sampled RssAnon peak $rss_peak{$srv} kB";
	ok(defined $hwm && $hwm < $bound_kb,
		"$srv worker: peak resident memory (VmHWM $hwm kB) below $bound_kb kB");
	ok($rss_peak{$srv} > 0 && $rss_peak{$srv} < $bound_kb,
		"$srv worker: sampled RssAnon peak ($rss_peak{$srv} kB) below $bound_kb kB");
}
is($local->safe_psql('postgres', q{
	SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'
	   AND pid IN (} . join(', ', values %pid) . ')'), '2',
	'the same two workers applied everything (none restarted)');

# every row of both remotes equals the query on the source
sub digest_rows
{
	my ($text) = @_;
	my @rows = sort grep { $_ ne '' } split /\n/, $text;
	return scalar(@rows) . ':' . Digest::MD5::md5_hex(join("\n", @rows));
}
my $want = digest_rows($local->safe_psql('postgres',
	'COPY (SELECT id, v, md5(pad) FROM big) TO STDOUT'));
is(digest_rows($remote->safe_psql('dw',
	'COPY (SELECT id, v, md5(pad) FROM public.big) TO STDOUT')),
	$want, 'PostgreSQL target equals the source, every row');
is(digest_rows($ch->query(
	'SELECT id, v, lower(hex(MD5(pad))) FROM dw.big FINAL WHERE _deleted = 0 FORMAT TabSeparated')),
	$want, 'ClickHouse target (FINAL, _deleted = 0) equals the source, every row');
is($remote->safe_psql('dw', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'no prepared transaction left on the remote');
is($ch->query(q{SELECT count() FROM system.tables WHERE position(name, '_ctas_fed_') > 0 AND name != '_ctas_fed_sync_progress' FORMAT TabSeparated}),
	"0\n", 'no staging table left in ClickHouse');

# A value-changing retype (integer to numeric(20,2): every value's text
# changes) in the middle of a source transaction whose first changes the
# target already holds.  The workers wait on a lock of ctas_fed.syncs
# meanwhile, so that one peek returns both the transaction before and the
# one with the DDL: its first changes share the remote transaction with the
# one before.  Each job applies the transactions before the DDL's, then
# copies the sync again from a snapshot after it (some 130 MB), the remote
# column retyped: both remotes then equal the source, every row, and stream
# on with the same slots.
my $slots_before = $local->safe_psql('postgres',
	q{SELECT string_agg(slot_name, ',' ORDER BY slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'});
my $locker = session_start($local);
my ($out, $err) = session_run($locker,
	'BEGIN; LOCK TABLE ctas_fed.syncs IN ACCESS EXCLUSIVE MODE');
is($err, '', 'workers held off');
$local->safe_psql('postgres', q{
	UPDATE big SET v = 4 WHERE id = 1;
	BEGIN;
	UPDATE big SET v = 5 WHERE id <= 3000;
	ALTER TABLE big ALTER COLUMN v TYPE numeric(20,2);
	UPDATE big SET v = 6 WHERE id = 2;
	COMMIT});
session_run($locker, 'ROLLBACK');
$locker->quit;
$local->safe_psql('postgres', q{UPDATE big SET v = 7.25 WHERE id = 4});
ok(wait_until(600, sub {
	$local->safe_psql('postgres', q{
		SELECT count(*) FROM ctas_fed.sync_schema_changes
		 WHERE followed AND change = 'ALTER COLUMN v TYPE numeric(20,2) (values copied again)'}) eq '2'
	  && $local->safe_psql('postgres',
		q{SELECT string_agg(state || ':' || coalesce(error, ''), ',') FROM ctas_fed.jobs WHERE mode = 'sync'})
	  eq 'streaming:,streaming:' }),
	'DDL in the middle of a transaction: both jobs copied again and streaming');
$want = digest_rows($local->safe_psql('postgres',
	'COPY (SELECT id, v, md5(pad) FROM big) TO STDOUT'));
my $got;
wait_until(120, sub {
	$got = digest_rows($remote->safe_psql('dw',
		'COPY (SELECT id, v, md5(pad) FROM public.big) TO STDOUT'));
	$got eq $want });
is($got, $want, 'PostgreSQL target after the retype equals the source, every row');
wait_until(120, sub {
	$got = digest_rows($ch->query(
		'SELECT id, v, lower(hex(MD5(pad))) FROM dw.big FINAL WHERE _deleted = 0 FORMAT TabSeparated'));
	$got eq $want });
is($got, $want, 'ClickHouse target after the retype equals the source, every row');
is($remote->safe_psql('dw', q{SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM public.big WHERE id IN (1, 2, 4, 5)}),
	'1=5.00,2=6.00,4=7.25,5=5.00',
	'PostgreSQL target: the DDL\'s transaction and the one after it, in the new type');
is($ch->query(q{SELECT id, v FROM dw.big FINAL WHERE _deleted = 0 AND id IN (1, 2, 4, 5) ORDER BY id FORMAT TabSeparated}),
	"1\t5.00\n2\t6.00\n4\t7.25\n5\t5.00\n", 'ClickHouse target: the same');
is($remote->safe_psql('dw',
	q{SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'public.big'::regclass AND attname = 'v'}),
	'numeric(20,2)', 'PostgreSQL target: column v retyped');
is($ch->query(q{SELECT type FROM system.columns WHERE database = 'dw' AND table = 'big' AND name = 'v' FORMAT TabSeparated}),
	"Nullable(Decimal(20, 2))\n", 'ClickHouse target: column v retyped (Nullable, as every column not in the key)');
is($remote->safe_psql('dw', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'no prepared transaction left on the remote after the copy again');
is($ch->query(q{SELECT count() FROM system.tables WHERE position(name, '_ctas_fed_') > 0 AND name != '_ctas_fed_sync_progress' FORMAT TabSeparated}),
	"0\n", 'no staging or rebuild table left in ClickHouse');
is($local->safe_psql('postgres',
	q{SELECT string_agg(slot_name, ',' ORDER BY slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'}),
	$slots_before, 'the jobs stream on with their slots');

done_testing();
