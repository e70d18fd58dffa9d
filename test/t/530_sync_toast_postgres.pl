
# Copyright (c) 2026, ctas_fed developers

# Unchanged TOAST values in a continuous sync into a PostgreSQL catalog,
# without REPLICA IDENTITY FULL (docs/sync-toast.md).  Large text and jsonb
# values, stored out of line uncompressed and compressed, that UPDATEs
# leave unchanged (pgoutput does not send them) and that UPDATEs change;
# a whole-row sync (the remote keeps the value: UPDATE of the columns
# sent), an expression over the toasted columns and a WHERE (the value read
# from the source, proven to be the change's), rows moving into the WHERE
# by such an UPDATE, a toasted key left unchanged and changed, several
# UPDATEs of one row in one transaction and across peeks, the workers
# killed in between.  Each case ends with the remote equal to the query's
# result; a value that cannot be proven fails the job with the reason.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $local = new_cluster('local',
	conf => "wal_level = logical\nmax_worker_processes = 20\nmax_replication_slots = 20");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
postgres_catalog($local, $remote);

# body: out of line, uncompressed (STORAGE EXTERNAL); meta: out of line,
# compressed; small: inline.  tkey: a key stored out of line.
$local->safe_psql('postgres', q{
CREATE TABLE docs (id int PRIMARY KEY, n int, body text, meta jsonb, small text);
ALTER TABLE docs ALTER body SET STORAGE EXTERNAL;
CREATE FUNCTION big_json(i int) RETURNS jsonb IMMUTABLE LANGUAGE sql AS $$
  SELECT jsonb_build_object('k', i, 'pad',
    (SELECT string_agg(md5((i * 1000 + g)::text) || repeat('z', 40), '') FROM generate_series(1, 400) g)) $$;
INSERT INTO docs SELECT g, g, 'a' || repeat(md5(g::text), 200), big_json(g), 's' || g
  FROM generate_series(1, 40) g;
CREATE TABLE tkey (k text PRIMARY KEY, n int, body text);
ALTER TABLE tkey ALTER k SET STORAGE EXTERNAL;
ALTER TABLE tkey ALTER body SET STORAGE EXTERNAL;
INSERT INTO tkey SELECT 'key' || g || (SELECT string_agg(md5((g * 100 + h)::text), '') FROM generate_series(1, 68) h),
    g, repeat(md5(g::text), 100)
  FROM generate_series(1, 5) g;
});
is($local->safe_psql('postgres', q{
  SELECT pg_column_compression(body) IS NULL AND pg_column_size(body) >= 6400,
         pg_column_compression(meta) = 'pglz' AND pg_column_size(meta) > 2100,
         (SELECT pg_column_size(k) >= 2000 FROM tkey LIMIT 1)
    FROM docs WHERE id = 1}), 't|t|t', 'body and key out of line uncompressed, meta out of line compressed');

# one sync per way of rebuilding the values
my %syncs = (
	docs_all   => 'SELECT * FROM docs',
	docs_expr  => q{SELECT id, n, md5(body) AS body_md5, meta->>'k' AS k, length(meta::text) AS meta_len, small FROM docs},
	docs_where => 'SELECT id, n, body, meta FROM docs WHERE n % 2 = 0',
	docs_where_big => q{SELECT id, n FROM docs WHERE body LIKE 'b%' OR (meta->>'k')::int > 1000},
	tkey_all   => 'SELECT * FROM tkey',
	tkey_expr  => 'SELECT k, n, length(body) AS len FROM tkey WHERE n < 1000',
);
foreach my $t (sort keys %syncs)
{
	$local->safe_psql('postgres',
		"CREATE TABLE wh.public.$t WITH (sync = 'continuous') AS $syncs{$t}");
}

sub streaming
{
	return $local->safe_psql('postgres', q{
	  SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'});
}

# every sync's remote table equals its query, every job streaming
sub check_all
{
	my ($name) = @_;
	foreach my $t (sort keys %syncs)
	{
		my $want = sql_digest($local, 'postgres', $syncs{$t});
		ok(wait_until(60, sub { pg_digest($remote, 'dw', "public.$t") eq $want }),
			"$name: $t equals its query");
	}
	is($local->safe_psql('postgres', q{
	  SELECT string_agg(remote_table || ' ' || state || coalesce(' ' || error, ''), ', ' ORDER BY remote_table)
	    FROM ctas_fed.syncs WHERE state <> 'streaming' AND remote_table NOT LIKE '%fail'}), '', "$name: every job streaming");
}

ok(wait_until(90, sub { streaming() eq scalar(keys %syncs) }), 'all syncs streaming');
check_all('copy');

# UPDATEs that leave every large value unchanged: rows move in and out of
# the WHERE (n % 2), the values stay
$local->safe_psql('postgres', 'UPDATE docs SET n = n + 1');
$local->safe_psql('postgres', 'UPDATE tkey SET n = n + 1');
check_all('unchanged values');

# UPDATEs that change them, and some that do not, in one transaction
$local->safe_psql('postgres', q{
BEGIN;
UPDATE docs SET body = 'b' || repeat(md5('new' || id), 200) WHERE id IN (2, 3);
UPDATE docs SET meta = big_json(id + 2000) WHERE id IN (3, 4);
UPDATE docs SET n = n + 1 WHERE id BETWEEN 1 AND 10;
UPDATE docs SET small = 'changed' WHERE id = 5;
UPDATE tkey SET body = repeat('new', 3000) WHERE n = 2;
COMMIT;});
check_all('changed values');

# several UPDATEs of one row in one transaction, unchanged values between
# changed ones; a toasted key changed with its body unchanged
$local->safe_psql('postgres', q{
BEGIN;
UPDATE docs SET n = n + 1 WHERE id = 7;
UPDATE docs SET n = n + 1 WHERE id = 7;
UPDATE docs SET body = 'c' || body WHERE id = 7;
UPDATE docs SET n = n + 1 WHERE id = 7;
UPDATE docs SET n = n + 1, small = 'x' WHERE id = 8;
UPDATE docs SET n = n + 1 WHERE id = 8;
UPDATE tkey SET n = n + 1 WHERE n = 3;
UPDATE tkey SET k = 'moved' || k WHERE n = 4;
UPDATE tkey SET n = n + 10 WHERE n = 4;
COMMIT;});
check_all('several updates of a row in a transaction');

# across peeks: one transaction at a time, each applied before the next
for my $i (1 .. 3)
{
	$local->safe_psql('postgres', "UPDATE docs SET n = n + 1 WHERE id % 3 = $i % 3");
	check_all("peek $i");
}

# the workers killed between UPDATEs: the restarted ones go on from the
# stored position
sub kill_workers
{
	$local->safe_psql('postgres', q{
	  SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'});
}
kill_workers();
$local->safe_psql('postgres', 'UPDATE docs SET n = n + 1 WHERE id <= 20');
$local->safe_psql('postgres', 'UPDATE tkey SET n = n + 1');
ok(wait_until(60, sub { streaming() eq scalar(keys %syncs) }), 'restarted workers streaming');
$local->safe_psql('postgres', 'UPDATE docs SET n = n + 1 WHERE id > 20');
kill_workers();
$local->safe_psql('postgres', 'UPDATE docs SET meta = big_json(id + 3000) WHERE id = 30');
$local->safe_psql('postgres', 'UPDATE docs SET n = n + 1 WHERE id >= 30');
check_all('workers killed between updates');

# INSERT, DELETE and a key change of rows with large values
$local->safe_psql('postgres', q{
INSERT INTO docs SELECT g, g, 'b' || repeat(md5(g::text), 200), big_json(g), 'new' FROM generate_series(41, 45) g;
DELETE FROM docs WHERE id = 41;
UPDATE docs SET id = id + 100 WHERE id = 42;
UPDATE docs SET n = n + 1 WHERE id IN (43, 142);});
check_all('insert, delete, key change');

# An UPDATE that leaves body unchanged, then one that changes it, in two
# transactions read by one peek (the workers are killed, and both commit
# while the ones started in their place wait at a fault point before their
# first peek, 4 s for each job: a worker starts again at once): the source
# holds the second one's value, which supersedes the first one's in the
# remote transaction.
$local->safe_psql('postgres', q{
  CREATE TABLE docs2 (id int PRIMARY KEY, n int, body text);
  ALTER TABLE docs2 ALTER body SET STORAGE EXTERNAL;
  INSERT INTO docs2 SELECT g, g, repeat(md5(g::text), 200) FROM generate_series(1, 3) g;
  CREATE TABLE wh.public.docs_fail WITH (sync = 'continuous') AS SELECT id, n, body FROM docs2 WHERE n > 0});
my $q2 = 'SELECT id, n, body FROM docs2 WHERE n > 0';
ok(wait_until(60, sub { streaming() eq scalar(keys %syncs) + 1 }), 'docs2: streaming');
$local->safe_psql('postgres',
	q{ALTER DATABASE postgres SET ctas_fed.fault_point = 'sync_worker_attach:4'});
my $log_offset = -s $local->logfile;
kill_workers();
ok(wait_until(60, sub {
	slurp_file($local->logfile, $log_offset) =~ /stopped at fault point "sync_worker_attach"/ }),
	'docs2: a new worker waits before its first peek');
$local->safe_psql('postgres', 'UPDATE docs2 SET n = n + 1 WHERE id = 1');
$local->safe_psql('postgres', q{UPDATE docs2 SET body = 'new' || body WHERE id = 1});
$local->safe_psql('postgres', 'ALTER DATABASE postgres RESET ctas_fed.fault_point');
my $want2 = sql_digest($local, 'postgres', $q2);
ok(wait_until(90, sub { pg_digest($remote, 'dw', 'public.docs_fail') eq $want2 }),
	'docs2: superseded in one peek, the remote equals the query');

# An UPDATE in a subtransaction: the row version's xmin is the
# subtransaction's, whose parent pg_subtrans may no longer tell; then the
# value is not proven, and the job fails with the reason, the remote as
# before the transaction.  Either way the invariant holds.
my $before = pg_digest($remote, 'dw', 'public.docs_fail');
$local->safe_psql('postgres', q{
  BEGIN; SAVEPOINT s; UPDATE docs2 SET n = n + 1 WHERE id = 2; RELEASE s; COMMIT;});
$want2 = sql_digest($local, 'postgres', $q2);
ok(wait_until(60, sub {
	  my $state = $local->safe_psql('postgres', q{
		SELECT state FROM ctas_fed.syncs WHERE remote_table = 'docs_fail'});
	  $state eq 'failed' || pg_digest($remote, 'dw', 'public.docs_fail') eq $want2 }),
	'subtransaction: followed, or the job failed');
if ($local->safe_psql('postgres', q{SELECT state FROM ctas_fed.syncs WHERE remote_table = 'docs_fail'}) eq 'failed')
{
	like($local->safe_psql('postgres', q{SELECT error FROM ctas_fed.syncs WHERE remote_table = 'docs_fail'}),
		qr/cannot rebuild the unchanged TOAST value of column "body"/,
		'subtransaction: the error names the column');
	is(pg_digest($remote, 'dw', 'public.docs_fail'), $before,
		'subtransaction: the remote kept the state before the transaction');
}
else
{
	is(pg_digest($remote, 'dw', 'public.docs_fail'), $want2,
		'subtransaction: the remote equals the query');
}
$local->safe_psql('postgres', q{
  SELECT ctas_fed.stop_sync('wh.public.docs_fail') FROM ctas_fed.syncs
   WHERE remote_table = 'docs_fail' AND state = 'streaming'});
check_all('the other syncs go on');

foreach my $t (sort keys %syncs)
{
	$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('wh.public.$t')");
}
ok(wait_until(30, sub { $local->safe_psql('postgres',
		q{SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'}) eq '0' }),
	'no slot left');

done_testing();
