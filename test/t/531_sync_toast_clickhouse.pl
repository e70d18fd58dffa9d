
# Copyright (c) 2026, ctas_fed developers

# Unchanged TOAST values in a continuous sync into a ClickHouse catalog,
# without REPLICA IDENTITY FULL (docs/sync-toast.md).  ClickHouse writes
# whole rows, so a value an UPDATE did not send is read from the source,
# proven to be the change's (the row version read was made by the change's
# transaction, and nothing after it in that transaction changed it): large
# text and jsonb out of line (uncompressed and compressed) left unchanged
# and changed, a whole-row sync, an expression over them, a WHERE with
# rows moving into it, a toasted key, several UPDATEs of a row in one
# transaction and across peeks, the worker killed in between; then a
# value that cannot be proven fails the job with the reason and writes
# nothing of its transaction.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local',
	conf => "wal_level = logical\nmax_worker_processes = 20\nmax_replication_slots = 20");
clickhouse_catalog($local, $ch);

$local->safe_psql('postgres', q{
CREATE TABLE docs (id int PRIMARY KEY, n int, body text, meta jsonb);
ALTER TABLE docs ALTER body SET STORAGE EXTERNAL;
CREATE FUNCTION big_json(i int) RETURNS jsonb IMMUTABLE LANGUAGE sql AS $$
  SELECT jsonb_build_object('k', i, 'pad',
    (SELECT string_agg(md5((i * 1000 + g)::text) || repeat('z', 40), '') FROM generate_series(1, 400) g)) $$;
INSERT INTO docs SELECT g, g, 'a' || repeat(md5(g::text), 200), big_json(g) FROM generate_series(1, 30) g;
CREATE TABLE tkey (k text PRIMARY KEY, n int, body text);
ALTER TABLE tkey ALTER k SET STORAGE EXTERNAL;
ALTER TABLE tkey ALTER body SET STORAGE EXTERNAL;
INSERT INTO tkey SELECT 'key' || g || (SELECT string_agg(md5((g * 100 + h)::text), '') FROM generate_series(1, 68) h),
    g, repeat(md5(g::text), 100)
  FROM generate_series(1, 5) g;
});
is($local->safe_psql('postgres', q{
  SELECT pg_column_compression(body) IS NULL AND pg_column_size(body) >= 6400,
         pg_column_compression(meta) = 'pglz' AND pg_column_size(meta) > 2100
    FROM docs WHERE id = 1}), 't|t', 'body out of line uncompressed, meta out of line compressed');

# name => [query, the remote's columns]
my %syncs = (
	ch_all   => [ 'SELECT * FROM docs', 'id, n, body, meta' ],
	ch_expr  => [ q{SELECT id, n, md5(body) AS body_md5, (meta->>'k')::int AS k FROM docs},
		'id, n, body_md5, k' ],
	ch_where => [ 'SELECT id, n, body FROM docs WHERE n % 2 = 0', 'id, n, body' ],
	ch_tkey  => [ 'SELECT k, n, md5(body) AS h FROM tkey', 'k, n, h' ],
);
foreach my $t (sort keys %syncs)
{
	$local->safe_psql('postgres',
		"CREATE TABLE lake.dw.$t WITH (sync = 'continuous') AS $syncs{$t}[0]");
}

sub rows
{
	my ($text) = @_;
	my @rows = sort grep { $_ ne '' } split /\n/, $text;
	return scalar(@rows) . ':' . join("\n", @rows);
}

sub ch_rows
{
	my ($t) = @_;
	return rows($ch->query(
		"SELECT $syncs{$t}[1] FROM dw.$t FINAL WHERE _deleted = 0 FORMAT TabSeparated"));
}

sub streaming
{
	return $local->safe_psql('postgres', q{
	  SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'});
}

sub check_all
{
	my ($name) = @_;
	foreach my $t (sort keys %syncs)
	{
		my $want = rows($local->safe_psql('postgres', "COPY ($syncs{$t}[0]) TO STDOUT"));
		ok(wait_until(60, sub { ch_rows($t) eq $want }), "$name: $t equals its query");
	}
	is($local->safe_psql('postgres', q{
	  SELECT string_agg(remote_table || ' ' || state || coalesce(' ' || error, ''), ', ' ORDER BY remote_table)
	    FROM ctas_fed.syncs WHERE state <> 'streaming' AND remote_table NOT LIKE '%fail'}), '', "$name: every job streaming");
}

ok(wait_until(90, sub { streaming() eq scalar(keys %syncs) }), 'all syncs streaming');
check_all('copy');

# UPDATEs that leave the large values unchanged; rows move into the WHERE
$local->safe_psql('postgres', 'UPDATE docs SET n = n + 1');
check_all('unchanged values');
$local->safe_psql('postgres', 'UPDATE tkey SET n = n + 1');
check_all('toasted key unchanged');

# UPDATEs that change them
$local->safe_psql('postgres', q{
  UPDATE docs SET body = 'b' || repeat(md5('new' || id), 200), meta = big_json(id + 1000) WHERE id IN (2, 3)});
check_all('changed values');

# several UPDATEs of one row in one transaction that leave them unchanged
$local->safe_psql('postgres', q{
BEGIN;
UPDATE docs SET n = n + 1 WHERE id = 7;
UPDATE docs SET n = n + 1 WHERE id = 7;
UPDATE docs SET n = n + 1 WHERE id IN (7, 8);
COMMIT;});
check_all('several updates of a row in a transaction');

# across peeks
for my $i (1 .. 3)
{
	$local->safe_psql('postgres', "UPDATE docs SET n = n + 1 WHERE id % 3 = $i % 3");
	check_all("peek $i");
}

# the workers killed, an UPDATE while they are down
$local->safe_psql('postgres', q{
  SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'});
$local->safe_psql('postgres', 'UPDATE docs SET n = n + 1 WHERE id <= 20');
ok(wait_until(60, sub { streaming() eq scalar(keys %syncs) }), 'restarted workers streaming');
check_all('worker killed');

# A value that cannot be proven: two transactions change the row, the
# second after the first left body unchanged, both read in one peek (the
# worker is killed, and both commit while the one started in its place
# waits at a fault point before its first peek, 4 s for each job it takes:
# a worker is started again at once, and a peek between the two would read
# them apart).
# The source holds the second one's row; ClickHouse writes rows before the
# batch ends, so the first one's cannot wait for the second, and with a
# WHERE the remote row cannot give it (test 542 has the case where it
# does): the job fails.
$local->safe_psql('postgres', q{
  CREATE TABLE docs2 (id int PRIMARY KEY, n int, body text);
  ALTER TABLE docs2 ALTER body SET STORAGE EXTERNAL;
  INSERT INTO docs2 SELECT g, g, repeat(md5(g::text), 200) FROM generate_series(1, 3) g;
  CREATE TABLE lake.dw.ch_fail WITH (sync = 'continuous') AS SELECT id, n, body FROM docs2 WHERE n > 0});
ok(wait_until(60, sub { streaming() eq scalar(keys %syncs) + 1 }), 'fail case: streaming');
my $before = rows($ch->query('SELECT id, n, body FROM dw.ch_fail FINAL WHERE _deleted = 0 FORMAT TabSeparated'));
my $pid = $local->safe_psql('postgres', q{
  SELECT pid FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'
     AND application_name = (SELECT 'ctas_fed sync ' || stream_id FROM ctas_fed.syncs WHERE remote_table = 'ch_fail')});
$local->safe_psql('postgres',
	q{ALTER DATABASE postgres SET ctas_fed.fault_point = 'sync_worker_attach:4'});
my $log_offset = -s $local->logfile;
$local->safe_psql('postgres', "SELECT pg_terminate_backend($pid)") if $pid ne '';
ok(wait_until(60, sub {
	slurp_file($local->logfile, $log_offset) =~ /stopped at fault point "sync_worker_attach"/ }),
	'fail case: the new worker waits before its first peek');
$local->safe_psql('postgres', 'UPDATE docs2 SET n = n + 1 WHERE id = 1');
$local->safe_psql('postgres', 'UPDATE docs2 SET n = n + 1 WHERE id = 1');
$local->safe_psql('postgres', 'ALTER DATABASE postgres RESET ctas_fed.fault_point');
ok(wait_until(90, sub { $local->safe_psql('postgres', q{
	  SELECT state FROM ctas_fed.syncs WHERE remote_table = 'ch_fail'}) eq 'failed' }),
	'fail case: the job failed');
like($local->safe_psql('postgres', q{SELECT error FROM ctas_fed.syncs WHERE remote_table = 'ch_fail'}),
	qr/cannot rebuild the unchanged TOAST value of column "body"/,
	'fail case: the error names the column');
is(rows($ch->query('SELECT id, n, body FROM dw.ch_fail FINAL WHERE _deleted = 0 FORMAT TabSeparated')),
	$before, 'fail case: nothing of those transactions written');
check_all('the other syncs go on');

foreach my $t (sort keys %syncs)
{
	$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('lake.dw.$t')");
}
ok(wait_until(30, sub { $local->safe_psql('postgres',
		q{SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'}) eq '0' }),
	'no slot left');
is($ch->query(q{SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_') AND name <> '_ctas_fed_sync_progress'}),
	"0\n", 'no staging table left in ClickHouse');

done_testing();
