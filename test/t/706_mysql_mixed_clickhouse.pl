
# Copyright (c) 2026, ctas_fed developers

# A MySQL catalog and a ClickHouse catalog in one local transaction (both
# publish at pre-commit, as last resources): both commit; both roll back;
# the MySQL publication fails after ClickHouse published (ClickHouse's
# publication is undone); the ClickHouse publication fails after MySQL
# published, or before it (MySQL's RENAME is undone, or never made).  After
# each: the tables with all their rows iff committed, no staging or scratch
# table on either side, no XA branch.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $my    = start_mariadb();
my $ch    = start_clickhouse();
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
mysql_catalog($local, $my);
clickhouse_catalog($local, $ch);

sub my_exists
{
	my ($t) = @_;
	return $my->sql("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'shop' AND table_name = '$t'");
}

sub ch_exists
{
	my ($t) = @_;
	return $ch->query("SELECT count() FROM system.tables WHERE database = 'dw' AND name = '$t'") + 0;
}

sub nothing_left
{
	my ($what) = @_;
	$local->safe_psql('postgres', 'SELECT count(*) FROM ctas_fed.resolve_in_doubt()');
	is($my->sql(q{SELECT count(*) FROM information_schema.tables WHERE table_name LIKE '\_ctas\_fed\_%'}),
		'0', "$what: no MySQL staging table");
	is($my->sql('XA RECOVER'), '', "$what: no XA branch");
	is($ch->query("SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_')") + 0,
		0, "$what: no ClickHouse scratch table");
}

sub commit_err
{
	my ($sql, $plant) = @_;
	my $s = session_start($local);
	my ($out, $err) = session_run($s, "BEGIN;\n$sql");
	$plant->();
	($out, $err) = session_run($s, 'COMMIT;');
	$s->quit;
	return $err;
}

$local->safe_psql('postgres', q{CREATE TABLE shop.shop.app AS SELECT 0 AS a});

# --- both commit
$local->safe_psql('postgres', q{BEGIN;
CREATE TABLE lake.dw.c1 AS SELECT g FROM generate_series(1, 1000) g;
CREATE TABLE shop.shop.c1 AS SELECT g FROM generate_series(1, 1000) g;
CREATE TABLE shop.shop.app WITH (if_exists = 'append') AS SELECT 1 AS a;
COMMIT;});
is($ch->query('SELECT count(), sum(g) FROM dw.c1'), "1000\t500500\n", 'ClickHouse table committed');
is($my->sql('SELECT count(*), sum(g) FROM shop.c1'), "1000\t500500", 'MySQL table committed');
is($my->sql('SELECT count(*) FROM shop.app'), '2', 'MySQL append committed');
nothing_left('commit');

# --- both roll back
$local->safe_psql('postgres', q{BEGIN;
CREATE TABLE lake.dw.c2 AS SELECT 1 AS a;
CREATE TABLE shop.shop.c2 AS SELECT 1 AS a;
CREATE TABLE shop.shop.app WITH (if_exists = 'append') AS SELECT 2 AS a;
CREATE TABLE lake.dw.c1 WITH (if_exists = 'replace') AS SELECT 7 AS g;
ROLLBACK;});
is(ch_exists('c2') + my_exists('c2'), 0, 'ROLLBACK: neither table exists');
is($my->sql('SELECT count(*) FROM shop.app'), '2', 'ROLLBACK: no row appended');
is($ch->query('SELECT count() FROM dw.c1'), "1000\n", 'ROLLBACK: the replaced ClickHouse table is whole');
nothing_left('rollback');

# --- the MySQL publication fails after ClickHouse published
my $err = commit_err(q{CREATE TABLE lake.dw.c3 AS SELECT 1 AS a;
CREATE TABLE lake.dw.c1 WITH (if_exists = 'replace') AS SELECT 8 AS g;
CREATE TABLE shop.shop.c3 AS SELECT 1 AS a;
CREATE TABLE shop.shop.app WITH (if_exists = 'append') AS SELECT 3 AS a;},
	sub { $my->sql(q{CREATE TABLE shop.c3 (planted int); INSERT INTO shop.c3 VALUES (42)}) });
like($err, qr/could not publish the tables on MySQL catalog "shop".*already exists/s,
	'MySQL RENAME fails on a planted table');
is(ch_exists('c3'), 0, 'the ClickHouse table was taken back');
is($ch->query('SELECT count(), sum(g) FROM dw.c1'), "1000\t500500\n",
	'the replaced ClickHouse table is whole again');
is($my->sql('SELECT planted FROM shop.c3'), '42', 'the planted MySQL table is untouched');
is($my->sql('SELECT count(*) FROM shop.app'), '2', 'no row appended');
nothing_left('MySQL publication failed');
$my->sql('DROP TABLE shop.c3');

# --- the ClickHouse publication fails (MySQL joined first)
$err = commit_err(q{CREATE TABLE shop.shop.c4 AS SELECT 1 AS a;
CREATE TABLE shop.shop.c1 WITH (if_exists = 'replace') AS SELECT 9 AS g;
CREATE TABLE shop.shop.app WITH (if_exists = 'append') AS SELECT 4 AS a;
CREATE TABLE lake.dw.c4 AS SELECT 1 AS a;},
	sub { $ch->query('CREATE TABLE dw.c4 (planted Int32) ENGINE = Memory');
		  $ch->query('INSERT INTO dw.c4 VALUES (42)') });
like($err, qr/already exists/, 'ClickHouse publication fails on a planted table');
is(my_exists('c4'), '0', 'the MySQL table was taken back (or never published)');
is($my->sql('SELECT count(*), sum(g) FROM shop.c1'), "1000\t500500",
	'the replaced MySQL table is whole');
is($my->sql('SELECT count(*) FROM shop.app'), '2', 'no row appended');
is($ch->query('SELECT planted FROM dw.c4'), "42\n", 'the planted ClickHouse table is untouched');
nothing_left('ClickHouse publication failed');

is($local->safe_psql('postgres',
	q{SELECT string_agg(state, ',' ORDER BY job_id) FROM ctas_fed.jobs WHERE target LIKE '%.c1'}),
	'committed,committed,aborted,aborted,aborted', 'jobs of c1 on both catalogs');

done_testing();
