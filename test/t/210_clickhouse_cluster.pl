
# Copyright (c) 2026, ctas_fed developers

# CREATE TABLE AS into a ClickHouse cluster catalog (issue 20): two real
# ClickHouse servers that know each other as one cluster (remote_servers,
# no ZooKeeper).  The load creates <table>_local on every shard and a
# Distributed table over them on every shard, and routes every row itself.
# The proof of the routing: the same rows inserted again through the
# Distributed table (insert_distributed_sync = 1) land next to ours, so
# every key is on exactly one shard, twice.  Also: replace, append,
# ROLLBACK, DROP TABLE, EXPLAIN, the checks of the cluster and of the
# options, and what is refused.  After each statement: no _ctas_fed_
# table on any shard, no durable record left.

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
	CREATE TABLE src AS
	  SELECT g AS id, (g * 7 - 300)::int4 AS i32, (g % 200 - 100)::int2 AS i16,
	         md5(g::text) AS label
	  FROM generate_series(-500, 1499) g;
	ALTER TABLE src ADD PRIMARY KEY (id);
});
my $src_digest = sql_digest($local, 'postgres', 'SELECT id, label FROM src');

# --- helpers (no assertions)

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

# rows of dw.<t>_local on each shard, as "n1,n2"
sub per_shard
{
	my ($t) = @_;
	return join(',', each_shard("SELECT count() FROM dw.${t}_local"));
}

# Insert the same (id, label) rows again through the Distributed table,
# synchronously; then every id must be on one shard only, twice.  Returns
# "ok" or what is wrong.
sub routing_proof
{
	my ($t, $cols) = @_;
	$cols //= 'id, label';
	my $rows = $local->safe_psql('postgres',
		"COPY (SELECT $cols FROM src ORDER BY id) TO STDOUT");
	$sh[0]->query("INSERT INTO dw.$t ($cols) FORMAT TabSeparated",
		data => "$rows\n", params => { insert_distributed_sync => 1 });
	my @bad = each_shard(
		"SELECT count() FROM (SELECT id, count() AS c FROM dw.${t}_local GROUP BY id HAVING c != 2)");
	my @ids = each_shard("SELECT uniqExact(id) FROM dw.${t}_local");
	my $n = $local->safe_psql('postgres', 'SELECT count(*) FROM src');
	return "ids not twice on one shard: @bad" if grep { $_ != 0 } @bad;
	return "ids per shard @ids do not add up to $n" if $ids[0] + $ids[1] != $n;
	return 'ok';
}

# --- 1. a load with the default key: intHash64 of the primary key

my ($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.ev WITH (primary_key = 'id') AS SELECT id, label FROM src});
is($rc, 0, 'CTAS into a cluster catalog') or diag($err);
is(join(',', each_shard(
	"SELECT engine FROM system.tables WHERE database = 'dw' AND name IN ('ev', 'ev_local') ORDER BY name")),
	"Distributed\nMergeTree,Distributed\nMergeTree",
	'every shard has the Distributed table and the MergeTree local table');
like($sh[1]->query(
	"SELECT engine_full FROM system.tables WHERE database = 'dw' AND name = 'ev'"),
	qr/^Distributed\(\\'ctas_cluster\\', \\'dw\\', \\'ev_local\\', intHash64\(id\)\)$/m,
	'the Distributed table shards by intHash64 of the primary key');
my @n = split /,/, per_shard('ev');
ok($n[0] > 0 && $n[1] > 0 && $n[0] + $n[1] == 2000,
	"rows on both shards, 2000 in all (@n)");
is(ch_digest($sh[1], 'dw.ev'), $src_digest,
	'every row through the Distributed table of shard 2');
is(scratch(), '0,0', 'no scratch table on any shard');
is(records(), 0, 'no durable record left');
is(routing_proof('ev'), 'ok',
	'rows inserted through the Distributed table land on the shard the load chose');

# --- 2. the other keys we compute

foreach my $case (
	[ 'id',               'id, label' ],
	[ 'cityHash64(i32)',  'id, i32, label' ],
	[ 'intHash64(i32)',   'id, i32, label' ],
	[ 'i16',              'id, i16, label' ],
	[ 'cityHash64(`i16`)', 'id, i16, label' ])
{
	my ($key, $cols) = @$case;
	($rc, $out, $err) = $local->psql('postgres',
		"CREATE TABLE ring.dw.k WITH (sharding_key = '$key') AS SELECT $cols FROM src");
	is($rc, 0, "CTAS with sharding_key $key") or diag($err);
	@n = split /,/, per_shard('k');
	ok($n[0] > 0 && $n[1] > 0, "sharding_key $key: rows on both shards (@n)");
	is(routing_proof('k', $cols), 'ok', "sharding_key $key: routing agrees with Distributed");
	$local->safe_psql('postgres', 'DROP TABLE ring.dw.k');
	is(join(',', each_shard("SELECT count() FROM system.tables WHERE database = 'dw' AND name IN ('k', 'k_local')")),
		'0,0', "sharding_key $key: DROP TABLE drops both tables on every shard");
}

# rand(): no primary key, spread over both shards
$local->safe_psql('postgres',
	q{CREATE TABLE ring.dw.r AS SELECT id, label FROM src});
like($sh[0]->query("SELECT engine_full FROM system.tables WHERE database = 'dw' AND name = 'r'"),
	qr/rand\(\)\)$/m, 'without a primary key, rows are sharded by rand()');
@n = split /,/, per_shard('r');
ok($n[0] > 0 && $n[1] > 0 && $n[0] + $n[1] == 2000, "rand(): both shards, 2000 rows (@n)");

# --- 3. replace, append, rollback

($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.ev WITH (primary_key = 'id', if_exists = 'replace')
	  AS SELECT id, label FROM src WHERE id < 100});
is($rc, 0, 'replace') or diag($err);
is(join(',', each_shard('SELECT count() FROM dw.ev')), '600,600',
	'replace: the new rows through the Distributed table of each shard');
is(scratch(), '0,0', 'replace: no scratch table left');

($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.ev WITH (if_exists = 'append')
	  AS SELECT id, label FROM src WHERE id >= 100});
is($rc, 0, 'append') or diag($err);
is(ch_digest($sh[0], 'dw.ev'), $src_digest, 'append: every row once');
is(routing_proof('ev'), 'ok', 'append: routed by the table\'s own key');
is(scratch(), '0,0', 'append: no scratch table left');

($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.ev WITH (if_exists = 'append', sharding_key = 'id') AS SELECT id, label FROM src});
like($err, qr/sharding key `id` differs from intHash64\(`id`\)/,
	'append with another sharding key is refused');

$local->safe_psql('postgres', q{
	BEGIN;
	CREATE TABLE ring.dw.gone WITH (primary_key = 'id') AS SELECT id, label FROM src;
	ROLLBACK;
});
is(join(',', each_shard("SELECT count() FROM system.tables WHERE database = 'dw' AND name LIKE 'gone%'")),
	'0,0', 'ROLLBACK: nothing on any shard');
is(scratch(), '0,0', 'ROLLBACK: no scratch table');

# two cluster tables and a savepoint in one transaction
$local->safe_psql('postgres', q{
	BEGIN;
	CREATE TABLE ring.dw.t1 WITH (primary_key = 'id') AS SELECT id, label FROM src;
	SAVEPOINT s;
	CREATE TABLE ring.dw.t2 WITH (primary_key = 'id') AS SELECT id, label FROM src;
	ROLLBACK TO SAVEPOINT s;
	CREATE TABLE ring.dw.t1 WITH (if_exists = 'replace', primary_key = 'id') AS SELECT id, label FROM src WHERE id < 0;
	COMMIT;
});
is(join(',', each_shard("SELECT count() FROM dw.t1")), '500,500',
	'create then replace in one transaction: the last one wins');
is(join(',', each_shard("SELECT count() FROM system.tables WHERE database = 'dw' AND name LIKE 't2%'")),
	'0,0', 'the rolled-back savepoint left nothing');
is(scratch(), '0,0', 'no scratch table after the transaction');

# --- 4. EXPLAIN

$out = $local->safe_psql('postgres',
	q{EXPLAIN (COSTS OFF) CREATE TABLE ring.dw.x WITH (primary_key = 'id', sharding_key = 'cityHash64(id)') AS SELECT id, label FROM src});
like($out, qr/Cluster: ctas_cluster/, 'EXPLAIN: the cluster');
like($out, qr/Shards: 2/, 'EXPLAIN: the shards');
like($out, qr/Routing: each row to the shard of slot cityHash64\(`id`\) % \(sum of shard weights\)/,
	'EXPLAIN: the routing');
like($out, qr/Remote DDL \(every shard\): CREATE TABLE `dw`.`x_local` \(`id` Int32, `label` Nullable\(String\)\) ENGINE = MergeTree ORDER BY \(`id`\)/,
	'EXPLAIN: the local table of every shard');
like($out, qr/Distributed DDL \(every shard\): CREATE TABLE `dw`.`x` AS `dw`.`x_local` ENGINE = Distributed\('ctas_cluster', 'dw', 'x_local', cityHash64\(`id`\)\)/,
	'EXPLAIN: the Distributed table of every shard');

# --- 5. what is refused

sub fails
{
	my ($sql, $re, $name) = @_;
	my ($r, $o, $e) = $local->psql('postgres', $sql);
	like($e, $re, $name);
	return;
}
fails(q{CREATE TABLE ring.dw.b WITH (sharding_key = 'id; DROP TABLE dw.ev') AS SELECT id FROM src},
	qr/invalid value for option "sharding_key"/, 'sharding_key: no statement after the key');
fails(q{CREATE TABLE ring.dw.b WITH (sharding_key = 'sipHash64(label)') AS SELECT id, label FROM src},
	qr/invalid value for option "sharding_key"/, 'sharding_key: only keys we can compute');
fails(q{CREATE TABLE ring.dw.b WITH (sharding_key = 'label') AS SELECT id, label FROM src},
	qr/cannot shard by column "label" of type String/, 'sharding_key: integer columns only (strings by cityHash64)');
fails(q{CREATE TABLE ring.dw.b WITH (sharding_key = 'nope') AS SELECT id FROM src},
	qr/sharding key column "nope" is not a column of the query/, 'sharding_key: a column of the query');
fails(q{CREATE TABLE ring.dw.b WITH (primary_key = 'f') AS SELECT id, id::float8 AS f FROM src},
	qr/cannot shard by column "f" of type Float64/, 'a primary key we cannot hash needs a sharding_key');
fails(q{CREATE TABLE ring.dw.b WITH (sharding_key = 'i32') AS SELECT id, NULL::int AS i32 FROM src},
	qr/null value in column "i32" cannot be written to ClickHouse type Int32/, 'a NULL in the sharding column is an error');
fails(q{CREATE TABLE ring.dw.b WITH (atomic = false) AS SELECT id FROM src},
	qr/atomic = false is not supported into cluster catalog "ring"/, 'streaming is refused');
fails(q{CREATE TABLE ring.dw.b WITH (local_table = '_ctas_fed_stage_1_2_3_{table}') AS SELECT id FROM src},
	qr/invalid local table name "_ctas_fed_stage_1_2_3_b"/, 'local_table: not a scratch name');
fails(q{CREATE TABLE ring.dw.b WITH (local_table = '{table}') AS SELECT id FROM src},
	qr/invalid local table name "b" for table "b"/, 'local_table: not the table itself');
fails(q{CREATE TABLE ring.dw.ev_local AS SELECT id FROM src},
	qr/already exists/, 'a table whose name is taken by a local table exists');
is(scratch(), '0,0', 'refused statements left no scratch table');

# local_table pattern
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE ring.dw.p WITH (local_table = 'shard_{table}', sharding_key = 'id') AS SELECT id, label FROM src});
is($rc, 0, 'local_table pattern') or diag($err);
my @p = each_shard("SELECT count() FROM dw.shard_p");
is($p[0] + $p[1], 2000, 'local_table: the local tables are named by the pattern');
is(join('', each_shard('SELECT count() FROM dw.p')), '20002000', 'local_table: the Distributed tables read them');

# catalogs that do not match the cluster
clickhouse_cluster_catalog($local, \@sh, name => 'swapped',
	shard_urls => [ $sh[1]{url}, $sh[0]{url} ]);
fails(q{CREATE TABLE swapped.dw.b AS SELECT id FROM src},
	qr/entry 1 of shard_urls of ClickHouse catalog "swapped" is not shard 1 of cluster "ctas_cluster"/,
	'shard_urls out of order are refused');
clickhouse_cluster_catalog($local, \@sh, name => 'short', shard_urls => [ $sh[0]{url} ]);
fails(q{CREATE TABLE short.dw.b AS SELECT id FROM src},
	qr/cluster "ctas_cluster" has 2 shards, but ClickHouse catalog "short" lists 1 in shard_urls/,
	'too few shard_urls are refused');
clickhouse_cluster_catalog($local, \@sh, name => 'nocluster', cluster => 'nope');
fails(q{CREATE TABLE nocluster.dw.b AS SELECT id FROM src},
	qr/cluster "nope" of ClickHouse catalog "nocluster" is not in system.clusters/,
	'an unknown cluster is refused');
fails(q{CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://127.0.0.1:1', cluster 'c', shard_urls 'http://127.0.0.1:1, ftp://127.0.0.1:2')},
	qr/URL scheme "ftp" is not supported/, 'shard_urls: http and https only');
fails(q{CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://127.0.0.1:1', cluster 'c', shard_urls 'http://127.0.0.1:1,,http://127.0.0.1:2')},
	qr/invalid value for option "shard_urls"/, 'shard_urls: no empty entry');
$local->safe_psql('postgres',
	q{CREATE SERVER half FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://127.0.0.1:1', cluster 'c');
	  CREATE USER MAPPING FOR PUBLIC SERVER half OPTIONS (user 'default', password 'x')});
fails(q{CREATE TABLE half.dw.b AS SELECT id FROM src},
	qr/has option "cluster" but not "shard_urls"/, 'cluster without shard_urls is refused');

# allowed_hosts applies to every shard URL of a non-superuser's catalog
$local->safe_psql('postgres', q{
	CREATE ROLE alice LOGIN;
	GRANT USAGE ON FOREIGN DATA WRAPPER ctas_fed TO alice;
	GRANT CREATE ON SCHEMA public TO alice;
	ALTER SYSTEM SET ctas_fed.allowed_hosts = 'localhost';
	SELECT pg_reload_conf();
});
($rc, $out, $err) = $local->psql('postgres',
	"SET ROLE alice; CREATE SERVER a1 FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://localhost:1', cluster 'c', shard_urls 'http://localhost:1, http://127.0.0.2:8123')");
like($err, qr/host "127.0.0.2" in option "shard_urls" is not allowed/,
	'allowed_hosts: each shard URL is checked when a non-superuser sets it');
$local->safe_psql('postgres', q{ALTER SYSTEM RESET ctas_fed.allowed_hosts; SELECT pg_reload_conf();});

is(scratch(), '0,0', 'at the end: no scratch table on any shard');
is(records(), 0, 'at the end: no durable record');

done_testing();
