
# Copyright (c) 2026, ctas_fed developers

# A ClickHouse cluster (issue 20): rows per shard in ctas_fed.job_shards and
# in the metrics, and rows sharded by cityHash64 of a String column routed
# exactly as the Distributed table routes them.  The proof, as in 210: the
# same rows inserted again through the Distributed table
# (insert_distributed_sync = 1) land next to ours, so every id is on one
# shard only, twice.  The strings are random, of every length from 0 to 300
# bytes (every branch of CityHash64: 0, 1-3, 4-8, 9-16, 17-32, 33-64 bytes
# and blocks of 64), with non-ASCII characters, tabs and backslashes.
#
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my @sh    = start_clickhouse_cluster(2);
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');

clickhouse_cluster_catalog($local, \@sh);
$local->safe_psql('postgres', q{
	SELECT setseed(0.213);
	CREATE TABLE src AS
	  SELECT g AS id,
	         (SELECT coalesce(string_agg(CASE WHEN r < 0.15 THEN chr(192 + (r * 20000)::int)
	                                         WHEN r < 0.17 THEN chr(9)
	                                         WHEN r < 0.19 THEN chr(92)
	                                         ELSE translate(chr(32 + ((r * 1000)::int % 95)), '''', '~') END, ''), '')
	            FROM (SELECT random() AS r, g FROM generate_series(1, g % 301)) c) AS s
	  FROM generate_series(0, 2999) g;
	ALTER TABLE src ADD PRIMARY KEY (id);
});
is($local->safe_psql('postgres',
	q{SELECT count(DISTINCT octet_length(s)) >= 301 AND bool_or(s = '') AND bool_or(octet_length(s) > 300)
	    AND bool_or(s ~ '[^\x01-\x7f]') FROM src}),
	't', 'the strings: empty, every length class, non-ASCII');
# (no single quote: ClickHouse's TabSeparated output escapes it, so digests would differ)
my $src_digest = sql_digest($local, 'postgres', 'SELECT id, s FROM src');

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

# Insert (id, s) again through the Distributed table dw.$t, synchronously;
# every id must then be on one shard only, twice.  "ok" or what is wrong.
sub routing_proof
{
	my ($t) = @_;
	my $rows = $local->safe_psql('postgres',
		'COPY (SELECT id, s FROM src ORDER BY id) TO STDOUT');
	$sh[0]->query("INSERT INTO dw.$t (id, s) FORMAT TabSeparated",
		data => "$rows\n", params => { insert_distributed_sync => 1 });
	my @bad = each_shard(
		"SELECT count() FROM (SELECT id, count() AS c FROM dw.${t}_local GROUP BY id HAVING c != 2)");
	my @ids = each_shard("SELECT uniqExact(id) FROM dw.${t}_local");
	return "ids not twice on one shard: @bad" if grep { $_ != 0 } @bad;
	return "ids per shard @ids do not add up to 3000" if $ids[0] + $ids[1] != 3000;
	return 'ok';
}

sub metric
{
	my ($name) = @_;
	my $m = $local->safe_psql('postgres', 'SELECT ctas_fed.metrics()');
	return $m =~ /^\Q$name\E (\S+)$/m ? $1 : 'none';
}

# --- 1. cityHash64 of a String column, given as sharding_key

my ($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.cs WITH (sharding_key = 'cityHash64(s)', primary_key = 'id')
	  AS SELECT id, s FROM src});
is($rc, 0, 'CTAS sharded by cityHash64 of a text column') or diag($err);
my @n = each_shard('SELECT count() FROM dw.cs_local');
ok($n[0] > 1000 && $n[1] > 1000 && $n[0] + $n[1] == 3000, "rows on both shards (@n)");
is(ch_digest($sh[1], 'dw.cs'), $src_digest, 'every string as it was, through the Distributed table');
like($sh[0]->query("SELECT engine_full FROM system.tables WHERE database = 'dw' AND name = 'cs'"),
	qr/cityHash64\(s\)\)$/m, 'the Distributed table shards by cityHash64(s)');

# --- 2. the rows per shard of that job

my $job = $local->safe_psql('postgres',
	q{SELECT max(job_id) FROM ctas_fed.jobs WHERE target = 'dw.cs'});
is($local->safe_psql('postgres',
	"SELECT string_agg(format('%s:%s:%s', shard, rows, state), ',' ORDER BY shard) FROM ctas_fed.job_shards WHERE job_id = $job"),
	"1:$n[0]:committed,2:$n[1]:committed",
	'ctas_fed.job_shards: the rows of each shard, as the shards hold them');
is($local->safe_psql('postgres',
	"SELECT sum(s.bytes) = j.bytes AND bool_and(s.bytes > 0) FROM ctas_fed.job_shards s JOIN ctas_fed.jobs j USING (job_id) WHERE job_id = $job GROUP BY j.bytes"),
	't', 'ctas_fed.job_shards: the bytes of the shards add up to the job\'s');
is(metric('ctas_fed_shard_rows_total{catalog="ring",shard="1"}'), $n[0],
	'metrics: rows of shard 1');
is(metric('ctas_fed_shard_rows_total{catalog="ring",shard="2"}'), $n[1],
	'metrics: rows of shard 2');

is(routing_proof('cs'), 'ok',
	'cityHash64 of strings: rows inserted through the Distributed table land on the shard the load chose');

# --- 3. a text primary key: sharded by cityHash64 of it by default

($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.pk WITH (primary_key = 's') AS SELECT DISTINCT ON (s) id, s FROM src ORDER BY s, id});
is($rc, 0, 'CTAS with a text primary key') or diag($err);
like($sh[1]->query("SELECT engine_full FROM system.tables WHERE database = 'dw' AND name = 'pk'"),
	qr/cityHash64\(s\)\)$/m, 'a text primary key: sharded by cityHash64 of it');
my @k = each_shard('SELECT count() FROM dw.pk_local');
my $distinct = $local->safe_psql('postgres', 'SELECT count(DISTINCT s) FROM src');
is($k[0] + $k[1], $distinct, "every distinct string once (@k)");
my $rows = $local->safe_psql('postgres',
	'COPY (SELECT DISTINCT ON (s) id, s FROM src ORDER BY s, id) TO STDOUT');
$sh[1]->query('INSERT INTO dw.pk (id, s) FORMAT TabSeparated',
	data => "$rows\n", params => { insert_distributed_sync => 1 });
is(join(',', each_shard(
	'SELECT count() FROM (SELECT s, count() AS c FROM dw.pk_local GROUP BY s HAVING c != 2)')),
	'0,0', 'a text primary key: the same rows through the Distributed table meet ours, each string on one shard');

# a rolled-back load: its shards are shown aborted, the metrics unchanged
$local->safe_psql('postgres', q{
	BEGIN;
	CREATE TABLE ring.dw.gone WITH (sharding_key = 'cityHash64(s)') AS SELECT id, s FROM src;
	ROLLBACK;
});
is($local->safe_psql('postgres',
	q{SELECT string_agg(state || ':' || rows, ',' ORDER BY shard) FROM ctas_fed.job_shards WHERE target = 'dw.gone'}),
	"aborted:$n[0],aborted:$n[1]", 'a rolled-back load: its shards, aborted');
is(metric('ctas_fed_shard_rows_total{catalog="ring",shard="1"}'), $n[0] + $k[0],
	'metrics: only committed rows count');

# --- 4. what is refused

sub fails
{
	my ($sql, $re, $name) = @_;
	my ($r, $o, $e) = $local->psql('postgres', $sql);
	like($e, $re, $name);
	return;
}
fails(q{CREATE TABLE ring.dw.b WITH (sharding_key = 'intHash64(s)') AS SELECT id, s FROM src},
	qr/cannot shard by column "s" of type String/, 'intHash64 of a string is refused');
fails(q{CREATE TABLE ring.dw.b WITH (sharding_key = 'sipHash64(s)') AS SELECT id, s FROM src},
	qr/invalid value for option "sharding_key".*\n.*cityHash64\(column\) of an integer or String column/,
	'other hash functions are refused, with what is computed');
fails(q{CREATE TABLE ring.dw.b WITH (sharding_key = 'cityHash64(f)') AS SELECT id, id::float8 AS f FROM src},
	qr/cannot shard by column "f" of type Float64/, 'cityHash64 of a float is refused');
fails(q{CREATE TABLE ring.dw.b WITH (sharding_key = 'cityHash64(s)') AS SELECT id, NULLIF(s, '') AS s FROM src},
	qr/null value in column "s"/, 'a NULL in the sharding column is an error');
is(scratch(), '0,0', 'no scratch table on any shard');

# --- 5. the rows per shard and their counters survive a restart (the
# launcher saves the registry when the server stops)

my $shards_before = $local->safe_psql('postgres',
	'SELECT string_agg(format(\'%s:%s:%s:%s\', job_id, shard, rows, bytes), \',\' ORDER BY job_id, shard) FROM ctas_fed.job_shards');
my $metric_before = metric('ctas_fed_shard_rows_total{catalog="ring",shard="2"}');
$local->restart;
is($local->safe_psql('postgres',
	'SELECT string_agg(format(\'%s:%s:%s:%s\', job_id, shard, rows, bytes), \',\' ORDER BY job_id, shard) FROM ctas_fed.job_shards'),
	$shards_before, 'after a restart: ctas_fed.job_shards as before');
is(metric('ctas_fed_shard_rows_total{catalog="ring",shard="2"}'), $metric_before,
	'after a restart: the per-shard counters as before');

done_testing();
