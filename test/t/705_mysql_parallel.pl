
# Copyright (c) 2026, ctas_fed developers

# parallel = 2 into a MariaDB catalog: each worker streams its own LOAD DATA
# into the one staging table on a connection of its own, the leader's
# transaction publishes it (create, replace, an append to the table the
# transaction created) or drops it (ROLLBACK, a worker's error); an append
# to an existing table goes by one XA branch per worker (707_mysql_parallel_
# append.pl).  Every row arrives once (checksum), and
# nothing is left: no staging table, no XA branch.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $my    = start_mariadb();
my $local = new_cluster('local',
	conf => "max_worker_processes = 16\nmax_parallel_workers = 8");
mysql_catalog($local, $my);

$local->safe_psql('postgres', q{
CREATE TABLE big (id int PRIMARY KEY, name text, amount numeric(12,2), d date);
INSERT INTO big SELECT g, 'n' || g || E'\t' || repeat('x', g % 40), g * 1.25,
       DATE '2020-01-01' + g % 1000
  FROM generate_series(1, 200000) g;
ANALYZE big;
-- one row that MySQL cannot hold, in the last blocks: one worker fails
CREATE TABLE bad (LIKE big);
INSERT INTO bad SELECT * FROM big;
UPDATE bad SET d = DATE '0900-01-01' WHERE id = 199990;
});

my $src_sum = $local->safe_psql('postgres', q{
SELECT count(*) || ' ' || md5(string_agg(concat_ws('|', id, name, amount, d), E'\n' ORDER BY id)) FROM big});

sub my_sum
{
	my ($t) = @_;
	return $my->sql(qq{SET SESSION group_concat_max_len = 1073741824;
SELECT CONCAT(COUNT(*), ' ', MD5(GROUP_CONCAT(CONCAT_WS('|', id, name, amount, d) ORDER BY id SEPARATOR '\\n'))) FROM shop.$t});
}

sub nothing_left
{
	my ($what) = @_;
	is($my->sql(q{SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE '\_ctas\_fed\_%'})
		  . ' ' . ($my->sql('XA RECOVER') eq '' ? 'no-xa' : 'xa'),
		'0 no-xa', "$what: no staging table, no XA branch");
}

sub psql_err
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $local->psql('postgres', $sql);
	return $rc == 0 ? '' : $err;
}

# EXPLAIN: the workers, no remote work
like($local->safe_psql('postgres',
	q{EXPLAIN (COSTS OFF) CREATE TABLE shop.shop.p WITH (parallel = 2) AS SELECT * FROM big}),
	qr/Parallel: 2 workers, \d+ chunks of \d+ blocks/, 'EXPLAIN shows the workers');
is($my->sql("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'shop'"),
	'0', 'EXPLAIN made no table');

# create, in parallel
my ($rc, $out, $err) = $local->psql('postgres', q{SET client_min_messages = notice;
CREATE TABLE shop.shop.p WITH (parallel = 2) AS SELECT * FROM big});
is($rc, 0, 'parallel = 2: create') or diag $err;
unlike($err, qr/loads serially|fewer/, 'no serial fallback') or diag $err;
is(my_sum('p'), $src_sum, 'create: every row once (checksum)');
nothing_left('create');

# replace, in parallel, rolled back then committed
$local->safe_psql('postgres', q{BEGIN;
CREATE TABLE shop.shop.p WITH (parallel = 2, if_exists = 'replace') AS SELECT id, name, amount, d FROM big WHERE id <= 1000;
ROLLBACK;});
is(my_sum('p'), $src_sum, 'replace rolled back: the old table whole');
nothing_left('replace rolled back');
$local->safe_psql('postgres', q{CREATE TABLE shop.shop.p WITH (parallel = 2, if_exists = 'replace') AS SELECT * FROM big WHERE id % 2 = 0});
is($my->sql('SELECT COUNT(*), MIN(id) FROM shop.p'), "100000\t2", 'replace committed');
nothing_left('replace');

# an append to the table this transaction created goes into its staging table
$local->safe_psql('postgres', q{BEGIN;
CREATE TABLE shop.shop.q WITH (parallel = 2) AS SELECT * FROM big WHERE id <= 100000;
CREATE TABLE shop.shop.q WITH (parallel = 2, if_exists = 'append') AS SELECT * FROM big WHERE id > 100000;
COMMIT;});
is(my_sum('q'), $src_sum, 'create + parallel append in one transaction: every row once');
nothing_left('create + append');

# an append to an existing table: one XA branch per worker (707 tests it
# through)
$local->safe_psql('postgres', q{CREATE TABLE shop.shop.s AS SELECT * FROM big WHERE id <= 100000});
$local->safe_psql('postgres', q{CREATE TABLE shop.shop.s WITH (parallel = 2, if_exists = 'append') AS SELECT * FROM big WHERE id > 100000});
is(my_sum('s'), $src_sum, 'parallel append to an existing table: every row once');
nothing_left('append to an existing table');

# a worker fails: nothing of the other worker's rows is left anywhere
like(psql_err(q{CREATE TABLE shop.shop.r WITH (parallel = 2) AS SELECT * FROM bad}),
	qr/value "0900-01-01" of column "d" cannot be written to MySQL/,
	'one worker fails: the statement fails with its error');
is($my->sql("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'shop' AND table_name = 'r'"),
	'0', 'no table r');
nothing_left('a worker failed');
like(psql_err(q{CREATE TABLE shop.shop.p WITH (parallel = 2, if_exists = 'replace') AS SELECT * FROM bad}),
	qr/cannot be written to MySQL/, 'a worker fails during a replace');
is($my->sql('SELECT COUNT(*), MIN(id) FROM shop.p'), "100000\t2", 'replace failed: the old table whole');
nothing_left('a replace whose worker failed');

is($local->safe_psql('postgres', q{SELECT string_agg(state, ',' ORDER BY job_id) FROM ctas_fed.jobs WHERE target LIKE '%.p'}),
	'committed,aborted,committed,failed', 'jobs');

done_testing();
