
# Copyright (c) 2026, ctas_fed developers

# Continuous sync into ClickHouse: an unchanged TOAST value that the source
# cannot prove is taken from the remote row (issue 18), as ClickHouse's
# MaterializedPostgreSQL does: a batched lookup with FINAL by key, after
# the rows written before, or from an earlier change of the key in the same
# source transaction.  A table with a large text and a large jsonb column,
# default replica identity, updates that leave them unchanged: in one
# transaction after an INSERT of the row, several times in a row, in two
# transactions read in one peek (the worker killed), for more keys than
# one lookup batch; the remote equals the source after each.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => "wal_level = logical\nmax_wal_senders = 4");
clickhouse_catalog($local, $ch);

$local->safe_psql('postgres', q{
CREATE TABLE docs (id int PRIMARY KEY, n int, body text, meta jsonb);
ALTER TABLE docs ALTER body SET STORAGE EXTERNAL;
INSERT INTO docs SELECT g, g, 'a' || repeat(md5(g::text), 100), jsonb_build_object('k', g, 'pad', repeat(md5(g::text), 100))
  FROM generate_series(1, 1500) g;
CREATE TABLE lake.dw.docs WITH (sync = 'continuous') AS SELECT * FROM docs;});

sub job
{
	return $local->safe_psql('postgres',
		"SELECT state || ':' || coalesce(error, '') FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'dw.docs'");
}

sub rows_digest
{
	my ($text) = @_;
	my @rows = sort grep { $_ ne '' } split /\n/, $text;
	return scalar(@rows) . ':' . join("\n", map { Digest::MD5::md5_hex($_) } @rows);
}

sub same
{
	my ($what) = @_;
	my $want = rows_digest($local->safe_psql('postgres',
		"COPY (SELECT id, n, body, meta::text FROM docs) TO STDOUT"));
	my $got;
	wait_until(60, sub {
		$got = rows_digest($ch->query(
			"SELECT id, n, body, meta FROM dw.docs FINAL WHERE _deleted = 0 FORMAT TabSeparated"));
		$got eq $want });
	is($got, $want, "$what: remote = source");
	is(job(), 'streaming:', "$what: streaming");
}

ok(wait_until(60, sub { job() eq 'streaming:' }), 'streaming');
is($local->safe_psql('postgres', q{SELECT pg_column_size(body) > 2000 AND pg_column_compression(body) IS NULL FROM docs WHERE id = 1}),
	't', 'body is stored out of line');
same('copy');

# every row, more than one lookup batch
my $t0 = Time::HiRes::time();
$local->safe_psql('postgres', 'UPDATE docs SET n = n + 1');
same('unchanged values of 1500 rows');
note(sprintf('1500 rows with unchanged values applied, remote read back, in %.2f s', Time::HiRes::time() - $t0));

# an INSERT then UPDATEs of the row in one transaction, and rows updated
# twice in one transaction
$local->safe_psql('postgres', q{
BEGIN;
INSERT INTO docs VALUES (5000, 1, 'b' || repeat(md5('x'), 100), '{"k": 5000}');
UPDATE docs SET n = n + 1 WHERE id = 5000;
UPDATE docs SET n = n + 1 WHERE id IN (5000, 7);
UPDATE docs SET n = n + 1 WHERE id = 7;
COMMIT;});
same('in-transaction changes');

# a value changed, then left unchanged in the next transaction
$local->safe_psql('postgres', q{
UPDATE docs SET body = 'c' || repeat(md5('y'), 100) WHERE id = 8;
UPDATE docs SET n = n + 1 WHERE id = 8;});
same('changed, then unchanged');

# two transactions read in one peek: the source holds the second one's row,
# which cannot prove the first one's value; the remote row does
$local->safe_psql('postgres', q{
  SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'});
$local->safe_psql('postgres', 'UPDATE docs SET n = n + 1 WHERE id = 1');
$local->safe_psql('postgres', 'UPDATE docs SET n = n + 1, body = body || \'!\' WHERE id = 1');
$local->safe_psql('postgres', 'UPDATE docs SET n = n + 1 WHERE id = 2');
$local->safe_psql('postgres', 'UPDATE docs SET n = n + 1 WHERE id = 2');
same('two transactions in one peek, worker killed');

done_testing();
