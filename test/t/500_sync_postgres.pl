
# Copyright (c) 2026, ctas_fed developers

# Continuous sync into a PostgreSQL catalog: CREATE TABLE ... WITH (sync =
# 'continuous').  The statement surface: what is eligible and the error that
# says why not, wal_level, and the atomicity of what the statement creates
# (remote table, publication, job record) with ROLLBACK and ROLLBACK TO
# SAVEPOINT.  No replication slot is ever left behind.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $local = new_cluster('local');
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $rport = $remote->port;

$local->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE TABLE orders (id int PRIMARY KEY, customer text, amount numeric(12,2),
                     region text, status text);
INSERT INTO orders SELECT g, 'c' || g % 10, g * 1.5, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, 'new'
  FROM generate_series(1, 1000) g;
CREATE TABLE nokey (a int, b text);
CREATE TABLE other (id int PRIMARY KEY, x int);
CREATE VIEW orders_v AS SELECT * FROM orders;
CREATE TABLE parted (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE UNLOGGED TABLE unlogged_t (id int PRIMARY KEY);
});

sub sql_error
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $local->psql('postgres', $sql);
	return $rc == 0 ? '' : $err;
}

sub remote_has_table
{
	my ($name) = @_;
	return $remote->safe_psql('dw',
		"SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = '$name'"
	);
}

sub our_slots
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'");
}

# wal_level: the cluster starts with the framework's minimal
like(
	sql_error("CREATE TABLE wh.public.o WITH (sync = 'continuous') AS SELECT * FROM orders"),
	qr/continuous sync requires wal_level = logical.*\n.*HINT:  Set wal_level = logical in postgresql.conf/s,
	'wal_level below logical: error with the setting in the hint');
is(remote_has_table('o'), '0', 'no remote table after the wal_level error');

$local->append_conf('postgresql.conf', "wal_level = logical\nmax_wal_senders = 4\n");
$local->restart;

# option values
like(sql_error("CREATE TABLE wh.public.o WITH (sync = 'sometimes') AS SELECT * FROM orders"),
	qr/invalid value for option "sync": "sometimes"/, 'bad value of sync');
like(sql_error("CREATE TABLE wh.public.o WITH (sync = 'continuous', atomic = false) AS SELECT * FROM orders"),
	qr/option "sync" cannot be combined with atomic = false/, 'sync with atomic = false');
like(sql_error("CREATE TABLE wh.public.o WITH (sync = 'continuous', if_exists = 'append') AS SELECT * FROM orders"),
	qr/option "sync" cannot be combined with IF NOT EXISTS/, 'sync with if_exists');
like(sql_error("CREATE TABLE wh.public.o WITH (sync = 'continuous', primary_key = 'customer') AS SELECT * FROM orders"),
	qr/option "primary_key" of a synced table must name the key of the source/, 'primary_key other than the source key');

# eligibility: each refusal names what made the query ineligible
my @ineligible = (
	[ 'SELECT o.id, x FROM orders o JOIN other USING (id)', qr/does not support joins or more than one table/, 'join' ],
	[ 'SELECT region, count(*) FROM orders GROUP BY region', qr/does not support aggregate functions or GROUP BY/, 'aggregate' ],
	[ 'SELECT id, row_number() OVER () FROM orders', qr/does not support window functions/, 'window function' ],
	[ 'SELECT * FROM orders LIMIT 10', qr/does not support LIMIT or OFFSET/, 'LIMIT' ],
	[ 'SELECT DISTINCT id, region FROM orders', qr/does not support DISTINCT/, 'DISTINCT' ],
	[ 'SELECT * FROM orders WHERE id IN (SELECT id FROM other)', qr/does not support subqueries/, 'sublink' ],
	[ 'SELECT id, random() AS r FROM orders', qr/does not support volatile or stable functions/, 'volatile function' ],
	[ 'SELECT id, now() AS t FROM orders', qr/does not support volatile or stable functions/, 'stable function' ],
	[ 'SELECT id, generate_series(1, 2) AS g FROM orders', qr/does not support set-returning functions/, 'SRF' ],
	[ 'SELECT * FROM orders_v', qr/does not support views/, 'view' ],
	[ 'SELECT * FROM parted', qr/does not support partitioned tables/, 'partitioned table' ],
	[ 'SELECT * FROM unlogged_t', qr/does not support temporary or unlogged tables/, 'unlogged table' ],
	[ 'SELECT id FROM orders UNION ALL SELECT id FROM other', qr/does not support UNION, INTERSECT or EXCEPT/, 'UNION' ],
	[ 'SELECT 1 AS one', qr/does not support a query without a FROM clause/, 'no FROM' ],
	[ 'SELECT * FROM nokey', qr/cannot sync table "nokey" because it has no primary key or replica identity index/, 'no key' ],
	[ 'SELECT customer, amount FROM orders', qr/needs the key column "id" of table "orders" in the query result/, 'key not projected' ],
	[ 'SELECT id + 0 AS id, amount FROM orders', qr/needs the key column "id"/, 'key as an expression' ],
	[ 'SELECT ctid::text AS c, id FROM orders', qr/does not support system columns/, 'system column' ],
);
foreach my $case (@ineligible)
{
	my ($q, $re, $what) = @$case;
	like(sql_error("CREATE TABLE wh.public.o WITH (sync = 'continuous') AS $q"),
		$re, "ineligible: $what");
}
is(remote_has_table('o'), '0', 'no remote table after any refusal');

# eligible: renamed key, immutable expressions, WHERE; ROLLBACK leaves nothing
my $ctas = q{CREATE TABLE wh.public.eu_orders WITH (sync = 'continuous') AS
  SELECT id AS order_id, upper(customer) AS customer, amount * 2 AS doubled, status
    FROM orders WHERE region = 'eu'};
$local->safe_psql('postgres', "BEGIN; $ctas; ROLLBACK;");
is(remote_has_table('eu_orders'), '0', 'ROLLBACK: no remote table');
is($local->safe_psql('postgres', 'SELECT count(*) FROM ctas_fed.syncs'), '0',
	'ROLLBACK: no job record');
is($local->safe_psql('postgres',
		"SELECT count(*) FROM pg_publication WHERE pubname LIKE 'ctas_fed_sync_%'"),
	'0', 'ROLLBACK: no publication');

$local->safe_psql('postgres',
	"BEGIN; SAVEPOINT a; $ctas; ROLLBACK TO SAVEPOINT a; COMMIT;");
is(remote_has_table('eu_orders'), '0', 'ROLLBACK TO SAVEPOINT: no remote table');
is($local->safe_psql('postgres', 'SELECT count(*) FROM ctas_fed.syncs'), '0',
	'ROLLBACK TO SAVEPOINT: no job record');
is($local->safe_psql('postgres',
		"SELECT count(*) FROM pg_publication WHERE pubname LIKE 'ctas_fed_sync_%'"),
	'0', 'ROLLBACK TO SAVEPOINT: no publication');
is($remote->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'no prepared transaction left on the remote');

# committed: the table with the source key as its primary key, the
# publication of the source, the job record
$local->safe_psql('postgres', $ctas);
is(remote_has_table('eu_orders'), '1', 'COMMIT: remote table created');
is($remote->safe_psql('dw', q{
  SELECT string_agg(a.attname, ',' ORDER BY a.attnum)
    FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
   WHERE i.indrelid = 'public.eu_orders'::regclass AND i.indisprimary}),
	'order_id', 'remote primary key: the renamed source key');
is($local->safe_psql('postgres', q{
  SELECT remote_schema || '.' || remote_table || ' ' || source::regclass || ' ' ||
         array_to_string(key_columns, ',') || ' ' || array_to_string(source_key, ',') || ' ' ||
         (publication = slot_name) || ' ' || state
    FROM ctas_fed.syncs}),
	'public.eu_orders orders order_id 1 true copying',
	'job record: target, source, key, names, state');
is($local->safe_psql('postgres', q{
  SELECT count(*) FROM pg_publication_tables p JOIN ctas_fed.syncs s ON p.pubname = s.publication
   WHERE p.tablename = 'orders'}),
	'1', 'publication of the source table');
like(sql_error("CREATE TABLE wh.public.eu_orders2 WITH (sync = 'continuous') AS SELECT * FROM orders"),
	qr/^$/, 'a second sync of the same table');
is($local->safe_psql('postgres', 'SELECT count(*) FROM ctas_fed.syncs'), '2',
	'two job records');

like(sql_error("EXPLAIN ANALYZE CREATE TABLE wh.public.x WITH (sync = 'continuous') AS SELECT * FROM orders"),
	qr/EXPLAIN ANALYZE of a CREATE TABLE AS with the option "sync" is not supported/,
	'EXPLAIN ANALYZE refused');

is(our_slots(), '0', 'no replication slot of ours left');

done_testing();
