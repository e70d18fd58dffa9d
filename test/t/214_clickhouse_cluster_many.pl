
# Copyright (c) 2026, ctas_fed developers

# create_tables_as and parallel = N into a ClickHouse cluster catalog
# (issue 20), two real shards, shard 2 behind the fault proxy.  After each
# load, every shard's content: every key on one shard only (the same rows
# inserted again through the Distributed table meet ours), the rows of the
# shards together equal to the source (by checksum), the rows per shard in
# ctas_fed.job_shards.  Faults: shard 2 killed mid-load of the third table
# of create_tables_as, and in the middle of a parallel load: the statement
# fails and nothing is left on any shard (tables, staging tables, records).
#
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my @sh    = start_clickhouse_cluster(2);
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600
max_worker_processes = 16
max_parallel_workers = 8');
my $fp = start_fault_proxy($sh[1]{http_port});

clickhouse_cluster_catalog($local, \@sh,
	shard_urls => [ $sh[0]{url}, 'http://127.0.0.1:' . $fp->port ],
	options => { connect_timeout => 2, timeout => 5 });
$local->safe_psql('postgres', q{
	CREATE SCHEMA src;
	CREATE TABLE src.a AS SELECT g AS id, md5(g::text) AS label FROM generate_series(1, 3000) g;
	ALTER TABLE src.a ADD PRIMARY KEY (id);
	CREATE TABLE src.b AS SELECT g::int8 AS id, g % 7 AS n, 'b' || g AS label FROM generate_series(-1000, 1999) g;
	ALTER TABLE src.b ADD PRIMARY KEY (id);
	CREATE TABLE src.c AS SELECT 'key ' || g AS id, g AS n FROM generate_series(1, 2500) g;
	ALTER TABLE src.c ADD PRIMARY KEY (id);
	CREATE TABLE big AS SELECT g AS id, md5(g::text) AS label, g * 3 AS n
	  FROM generate_series(1, 40000) g;
	ALTER TABLE big ADD PRIMARY KEY (id);
	ANALYZE big;
	CREATE FUNCTION slow(x int) RETURNS int IMMUTABLE PARALLEL SAFE
	  LANGUAGE plpgsql AS $$BEGIN PERFORM pg_sleep(0.002); RETURN x; END$$;
});

sub each_shard
{
	my ($sql) = @_;
	return map { my $r = $_->query($sql); chomp $r; $r } @sh;
}

sub scratch
{
	return join(',', each_shard(
		"SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_')"));
}

sub records
{
	return $local->safe_psql('postgres',
		q{SELECT count(*) FROM pg_ls_dir('pg_ctas_fed', true, false) f WHERE f LIKE 'ch\_%'}) + 0;
}

# The content of dw.$t on the shards: "ok" when the local tables together
# hold the source rows ($cols of $src, by checksum), and the same rows
# inserted again through the Distributed table put every id twice on one
# shard only; else what is wrong.
sub shards_ok
{
	my ($t, $src, $cols) = @_;
	my @rows = sort map { split /\n/, $_->query("SELECT $cols FROM dw.${t}_local FORMAT TabSeparated") } @sh;
	my $got = scalar(@rows) . ':' . Digest::MD5::md5_hex(join("\n", @rows));
	my $want = sql_digest($local, 'postgres', "SELECT $cols FROM $src");
	return "shards hold $got, source $want" if $got ne $want;
	my $copy = $local->safe_psql('postgres', "COPY (SELECT $cols FROM $src) TO STDOUT");
	$sh[0]->query("INSERT INTO dw.$t ($cols) FORMAT TabSeparated",
		data => "$copy\n", params => { insert_distributed_sync => 1 });
	my @bad = each_shard(
		"SELECT count() FROM (SELECT id, count() AS c FROM dw.${t}_local GROUP BY id HAVING c != 2)");
	return "ids not twice on one shard: @bad" if grep { $_ != 0 } @bad;
	my @n = each_shard("SELECT count() FROM dw.${t}_local");
	return "one shard is empty: @n" if grep { $_ == 0 } @n;
	return 'ok';
}

sub job_shards
{
	my ($target) = @_;
	return $local->safe_psql('postgres',
		"SELECT string_agg(rows::text, ',' ORDER BY shard) FROM ctas_fed.job_shards
		  WHERE job_id = (SELECT max(job_id) FROM ctas_fed.jobs WHERE target = '$target')");
}

# --- 1. create_tables_as: three tables, every shard, one transaction

my ($rc, $out, $err) = $local->psql('postgres',
	q{SELECT string_agg(target || ':' || rows, ',' ORDER BY target)
	    FROM ctas_fed.create_tables_as('ring', 'dw', source_schema => 'src')});
is($rc, 0, 'create_tables_as into a cluster catalog') or diag($err);
is($out, 'dw.a:3000,dw.b:3000,dw.c:2500', 'create_tables_as: every table, every row');
foreach my $case ([ 'a', 'id, label', 'intHash64' ], [ 'b', 'id, n, label', 'intHash64' ],
	[ 'c', 'id, n', 'cityHash64' ])
{
	my ($t, $cols, $fn) = @$case;
	like($sh[1]->query("SELECT engine_full FROM system.tables WHERE database = 'dw' AND name = '$t'"),
		qr/\\'${t}_local\\', $fn\(id\)\)$/m, "create_tables_as: $t sharded by $fn of its primary key");
	my @n = each_shard("SELECT count() FROM dw.${t}_local");
	is(job_shards("dw.$t"), "$n[0],$n[1]", "create_tables_as: $t: ctas_fed.job_shards has the rows of each shard");
	is(shards_ok($t, "src.$t", $cols), 'ok', "create_tables_as: $t: every row once, each key on one shard");
}
is(scratch(), '0,0', 'create_tables_as: no scratch table');
is(records(), 0, 'create_tables_as: no durable record');

# --- 2. shard 2 fails mid-load of the third table (its connection reset
# after 20 kB of rows): the call fails, nothing on any shard

$local->safe_psql('postgres', q{
	CREATE SCHEMA src2;
	CREATE TABLE src2.t1 AS SELECT g AS id FROM generate_series(1, 100) g;
	CREATE TABLE src2.t2 AS SELECT g AS id FROM generate_series(1, 100) g;
	CREATE TABLE src2.t3 AS SELECT g AS id, md5(g::text) AS label FROM generate_series(1, 20000) g;
});
foreach my $db (qw(dw2 dw3)) { $_->query("CREATE DATABASE IF NOT EXISTS $db") foreach @sh; }
my $rule = $fp->set_rule(match => 'INSERT INTO `dw2`.`_ctas_fed_stage', skip => 2,
	reset_after => 20000);
($rc, $out, $err) = $local->psql('postgres',
	q{SELECT count(*) FROM ctas_fed.create_tables_as('ring', 'dw2',
	    ARRAY['src2.t1', 'src2.t2', 'src2.t3']::regclass[], options => '{"sharding_key": "id"}')});
is($fp->hits($rule), 1, 'failed: shard 2\'s INSERT of the third table was cut');
$fp->clear_rule($rule);
isnt($rc, 0, 'failed: create_tables_as fails');
like($err, qr/ring \(shard 2\)/, 'failed: the error names the shard');
is(join(',', each_shard("SELECT count() FROM system.tables WHERE database = 'dw2'")), '0,0',
	'failed: no table of the call on any shard, staging tables included');
is(records(), 0, 'failed: no durable record');
is(scratch(), '0,0', 'failed: no scratch table');

# --- 3. parallel = 2: each worker routes its rows to every shard

($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.p WITH (parallel = 2, primary_key = 'id') AS SELECT id, label, n FROM big});
is($rc, 0, 'parallel = 2 into a cluster catalog') or diag($err);
is($local->safe_psql('postgres', q{SELECT rows FROM ctas_fed.jobs WHERE target = 'dw.p'}), '40000',
	'parallel: the job counts every row');
my @n = each_shard('SELECT count() FROM dw.p_local');
is(job_shards('dw.p'), "$n[0],$n[1]", 'parallel: ctas_fed.job_shards has the rows of each shard');
is(shards_ok('p', 'big', 'id, label, n'), 'ok', 'parallel: every row once, each key on the shard Distributed chooses');
is(scratch(), '0,0', 'parallel: no scratch table');

# the workers' rows per shard advance while they load (each adds what it
# sent at every 1 MB sent to a shard)
$local->safe_psql('postgres', q{
	CREATE TABLE wide AS SELECT g AS id, repeat(md5(g::text), 6) AS label FROM generate_series(1, 100000) g;
	ANALYZE wide;
	CREATE FUNCTION pause(x int) RETURNS int IMMUTABLE PARALLEL SAFE
	  LANGUAGE plpgsql AS $$BEGIN IF x % 1000 = 0 THEN PERFORM pg_sleep(0.05); END IF; RETURN x; END$$;
});
my ($h, $hout, $herr) = start_psql($local,
	q{CREATE TABLE ring.dw.w WITH (parallel = 2, primary_key = 'id') AS SELECT pause(id) AS id, label FROM wide});
ok(wait_until(30, sub {
	$local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.job_shards
	  WHERE target = 'dw.w' AND state = 'running' AND rows > 0}) eq '2' }),
	'parallel: ctas_fed.job_shards shows rows on both shards while the workers load');
$h->finish;
is($$herr, '', 'parallel: the wide load commits');
my @w = each_shard('SELECT count() FROM dw.w_local');
is(job_shards('dw.w'), "$w[0],$w[1]", 'parallel: at the end, the exact rows of each shard');

my $plan = $local->safe_psql('postgres',
	q{EXPLAIN (COSTS OFF) CREATE TABLE ring.dw.pe WITH (parallel = 2, primary_key = 'id') AS SELECT id, label, n FROM big});
like($plan, qr/Parallel: 2 workers/, 'EXPLAIN parallel = 2 into a cluster: the workers');
like($plan, qr/Sharding Key: intHash64\(`id`\)/, 'EXPLAIN parallel = 2 into a cluster: the routing');

# create_tables_as with {"parallel": 2}
($rc, $out, $err) = $local->psql('postgres',
	q{SELECT count(*) FROM ctas_fed.create_tables_as('ring', 'dw3', source_schema => 'src', options => '{"parallel": 2}')});
is($rc, 0, 'create_tables_as with parallel = 2 into a cluster catalog') or diag($err);
is(join(',', map { join('+', each_shard("SELECT count() FROM dw3.${_}_local")) } qw(a b c)) =~ s/(\d+)\+(\d+)/$1+$2/ger,
	'3000,3000,2500', 'create_tables_as in parallel: every row of every table on the shards');

# --- 4. shard 2 killed in the middle of a parallel load
# (a worker notices the crash when it next sends data to that shard, about
# every 1 MB: rows of 2 kB get there in seconds, rows of 32 bytes only at
# the end of the load, 40 s later)

($h, $hout, $herr) = start_psql($local,
	q{CREATE TABLE ring.dw.pk WITH (parallel = 2, primary_key = 'id') AS SELECT slow(id) AS id, repeat(label, 64) AS label FROM big});
ok(wait_until(30, sub {
	$local->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'}) >= 2
	  && $sh[1]->query("SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_stage_')") > 0 }),
	'parallel killed: two workers load, shard 2 has its staging table');
$sh[1]->crash;
$h->finish;
like($$herr, qr/ERROR/, 'parallel killed: the statement fails');
$sh[1]->restart;
$local->safe_psql('postgres', 'SELECT ctas_fed.resolve_in_doubt()');
ok(wait_until(30, sub {
	join(',', each_shard("SELECT count() FROM system.tables WHERE database = 'dw' AND (name LIKE 'pk%' OR startsWith(name, '_ctas_fed_'))")) eq '0,0' }),
	'parallel killed: nothing on any shard');
is(records(), 0, 'parallel killed: no durable record');

done_testing();
