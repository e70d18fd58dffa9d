
# Copyright (c) 2026, ctas_fed developers

# The copy of a partitioned source, partition by partition in parallel
# (issue 22, item 6; docs/sync.md, "Partitioned sources"), into both
# targets.  A table of four partitions (one with its columns in another
# order):
#  - the stream's initial copy into PostgreSQL and a join copy into
#    ClickHouse read the partitions with parallel workers (the log says so)
#    and the remote tables equal the source (count and checksum);
#  - a parallel reader terminated in the middle of a join copy: the copy
#    fails, nothing of it is visible remotely, it is done again and the
#    remote equals the source;
#  - a partition on whose rows the query fails (division by zero), into both
#    targets: nothing visible remotely, the job records the reason; once
#    the row is fixed the copy is done again and the remote equals the
#    query; a query that evaluates something is copied without readers
#    (the copying process would evaluate it in parallel mode);
#  - a query calling a PL/pgSQL function marked PARALLEL SAFE with an
#    EXCEPTION block (a subtransaction, refused in parallel mode) is copied,
#    exactly;
#  - max_parallel_workers_per_gather = 0 for the database: no readers;
#  - no temporary slot, prepared transaction or other table left behind.
# ctas-tap: parallel

use strict;
use warnings;

use Digest::MD5;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local',
	conf => "wal_level = logical\nmax_wal_senders = 4\nmax_worker_processes = 16\nmax_parallel_workers = 8");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
postgres_catalog($local, $remote);
clickhouse_catalog($local, $ch);

sub ch_digest
{
	my @rows = sort grep { $_ ne '' } split /\n/, $_[0];
	return scalar(@rows) . ':' . Digest::MD5::md5_hex(join("\n", @rows));
}

sub job
{
	my ($target) = @_;
	return $local->safe_psql('postgres',
		"SELECT state || ':' || coalesce(error, '') FROM ctas_fed.jobs WHERE mode = 'sync' AND target = '$target'");
}

sub pg_exact
{
	my ($table, $query, $what) = @_;
	my ($want, $got);
	my $ok = wait_until(90, sub {
		$want = sql_digest($local, 'postgres', $query);
		$got = sql_digest($remote, 'dw', "SELECT * FROM public.$table");
		$got eq $want && job("public.$table") eq 'streaming:' });
	is($got, $want, "$what: the remote table equals the query (checksum)");
	is(job("public.$table"), 'streaming:', "$what: streaming");
}

sub ch_exact
{
	my ($table, $cols, $query, $what) = @_;
	my ($want, $got);
	wait_until(90, sub {
		$want = ch_digest($local->safe_psql('postgres', "COPY ($query) TO STDOUT"));
		$got = ch_digest($ch->query(
			"SELECT $cols FROM dw.$table FINAL WHERE _deleted = 0 FORMAT TabSeparated"));
		$got eq $want && job("dw.$table") eq 'streaming:' });
	is($got, $want, "$what: the ClickHouse table equals the query (checksum)");
	is(job("dw.$table"), 'streaming:', "$what: streaming");
}

sub readers_logged
{
	my ($offset) = @_;
	my $log = slurp_file($local->logfile, $offset);
	my @n = $log =~ /the 4 partitions of "pt" are read by [12] parallel workers/g;
	return scalar @n;
}

$local->safe_psql('postgres', q{
CREATE TABLE pt (id int, p int NOT NULL, k int NOT NULL, v text, PRIMARY KEY (id, p))
  PARTITION BY LIST (p);
CREATE TABLE pt_0 PARTITION OF pt FOR VALUES IN (0);
CREATE TABLE pt_1 PARTITION OF pt FOR VALUES IN (1);
CREATE TABLE pt_2 PARTITION OF pt FOR VALUES IN (2);
CREATE TABLE pt_3 (v text, k int NOT NULL, p int NOT NULL, id int NOT NULL);
ALTER TABLE pt ATTACH PARTITION pt_3 FOR VALUES IN (3);
INSERT INTO pt SELECT g, g % 4, 1 + g % 5, md5(g::text) FROM generate_series(1, 40000) g;
});
my $plain = 'SELECT id, p, k, v FROM pt';

# the stream's initial copy (PostgreSQL), then a join copy (ClickHouse)
my $offset = -s $local->logfile;
$local->safe_psql('postgres',
	"CREATE TABLE wh.public.pt WITH (sync = 'continuous') AS $plain");
pg_exact('pt', $plain, 'initial copy of the stream');
$local->safe_psql('postgres',
	"CREATE TABLE lake.dw.pt WITH (sync = 'continuous') AS $plain");
ch_exact('pt', 'id, p, k, v', $plain, 'join copy into ClickHouse');
is(readers_logged($offset), 2, 'both copies read the partitions with parallel workers');

# a parallel reader terminated in the middle of a join copy: each reader
# waits 8 s after each partition, the remote sees nothing of the copy
$local->safe_psql('postgres', q{
  ALTER SYSTEM SET ctas_fed.fault_point = 'sync_partition_read:8';
  SELECT pg_reload_conf();});
$offset = -s $local->logfile;
$local->safe_psql('postgres',
	"CREATE TABLE wh.public.pt2 WITH (sync = 'continuous') AS $plain");
ok(wait_log($local, qr/stopped at fault point "sync_partition_read"/, $offset, 60),
	'a reader of the join copy stops after a partition');
is($remote->safe_psql('dw', 'SELECT count(*) FROM public.pt2'), '0',
	'the copy in progress is not visible');
$local->safe_psql('postgres', q{
  ALTER SYSTEM RESET ctas_fed.fault_point;
  SELECT pg_reload_conf();});
is($local->safe_psql('postgres', q{
  SELECT count(pg_terminate_backend(pid)) > 0 FROM pg_stat_activity
   WHERE backend_type = 'parallel worker'}), 't', 'a reader terminated');
ok(wait_log($local, qr/ERROR:  terminating background worker "parallel worker" due to administrator command/, $offset, 60),
	'the copy fails on the reader\'s termination');
is($remote->safe_psql('dw', 'SELECT count(*) FROM public.pt2'), '0',
	'nothing of the failed copy is visible');
ok(wait_log($local, qr/ctas_fed sync \d+: joined stream/, $offset, 60),
	'the copy is done again');
pg_exact('pt2', $plain, 'the copy done again after the reader was terminated');

# a partition whose rows make the query fail, into both targets; the query
# evaluates an expression, so no reader runs
my $div = 'SELECT id, p, 100 / k AS q FROM pt';
my $div_offset = -s $local->logfile;
$local->safe_psql('postgres', 'UPDATE pt SET k = 0 WHERE id = 39999');
$local->safe_psql('postgres',
	"CREATE TABLE wh.public.pt3 WITH (sync = 'continuous') AS $div");
$local->safe_psql('postgres',
	"CREATE TABLE lake.dw.pt3 WITH (sync = 'continuous') AS $div");
ok(wait_until(60, sub { job('public.pt3') =~ /division by zero/ }),
	'PostgreSQL: the job records the reason');
ok(wait_until(60, sub { job('dw.pt3') =~ /division by zero/ }),
	'ClickHouse: the job records the reason');
is($remote->safe_psql('dw', 'SELECT count(*) FROM public.pt3'), '0',
	'PostgreSQL: nothing of the failed copy is visible');
is($ch->query('SELECT count() FROM dw.pt3 FINAL WHERE _deleted = 0'), "0\n",
	'ClickHouse: nothing of the failed copy is visible');
$local->safe_psql('postgres', 'UPDATE pt SET k = 3 WHERE id = 39999');
pg_exact('pt3', $div, 'PostgreSQL: copied once the row is fixed');
ch_exact('pt3', 'id, p, q', $div, 'ClickHouse: copied once the row is fixed');
is(readers_logged($div_offset), 0, 'a query that evaluates an expression is copied without readers');

# a PL/pgSQL function marked PARALLEL SAFE whose EXCEPTION block starts a
# subtransaction at every call: refused in parallel mode, so a copy with
# readers would fail at every try
$local->safe_psql('postgres', q{
CREATE FUNCTION safe_len(t text) RETURNS int IMMUTABLE PARALLEL SAFE LANGUAGE plpgsql AS $$
BEGIN
  RETURN length(t);
EXCEPTION WHEN others THEN
  RETURN NULL;
END $$;});
my $safe = 'SELECT id, p, safe_len(v) AS n FROM pt';
$local->safe_psql('postgres',
	"CREATE TABLE wh.public.pt4 WITH (sync = 'continuous') AS $safe");
pg_exact('pt4', $safe, 'a PARALLEL SAFE function with an EXCEPTION block: copied');

# max_parallel_workers_per_gather = 0 for the database: a plain copy
# without readers
$local->safe_psql('postgres', 'ALTER DATABASE postgres SET max_parallel_workers_per_gather = 0');
my $gather_offset = -s $local->logfile;
$local->safe_psql('postgres',
	"CREATE TABLE wh.public.pt5 WITH (sync = 'continuous') AS $plain");
pg_exact('pt5', $plain, 'max_parallel_workers_per_gather = 0: copied');
is(readers_logged($gather_offset), 0, 'max_parallel_workers_per_gather = 0: no readers');
$local->safe_psql('postgres', 'ALTER DATABASE postgres RESET max_parallel_workers_per_gather');

# changes after the copies, then everything equal and nothing left over
$local->safe_psql('postgres',
	"UPDATE pt SET v = 'x' || v WHERE id % 97 = 0; DELETE FROM pt WHERE id % 89 = 0; UPDATE pt SET p = 3 WHERE id % 4 = 0 AND id < 400;");
pg_exact($_, $plain, "after changes: $_") foreach qw(pt pt2 pt5);
pg_exact('pt3', $div, 'after changes: pt3');
pg_exact('pt4', $safe, 'after changes: pt4');
ch_exact('pt', 'id, p, k, v', $plain, 'after changes: ClickHouse pt');
ch_exact('pt3', 'id, p, q', $div, 'after changes: ClickHouse pt3');
is($local->safe_psql('postgres',
	"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'"),
	'1', 'one slot, the stream\'s: no temporary slot of a copy left');
is($remote->safe_psql('dw', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'no prepared transaction left on the remote');
is($remote->safe_psql('dw', q{
  SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = 'public' AND c.relkind = 'r'}),
	'_ctas_fed_sync_progress,pt,pt2,pt3,pt4,pt5', 'no other table on the remote');
is($ch->query(q{SELECT arrayStringConcat(groupArray(name), ',') FROM
  (SELECT name FROM system.tables WHERE database = 'dw' ORDER BY name)}),
	"_ctas_fed_sync_progress,pt,pt3\n", 'no other table on ClickHouse');
is($local->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'"),
	'0', 'no parallel worker left');

done_testing();
