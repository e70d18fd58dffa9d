
# Copyright (c) 2026, ctas_fed developers

# ctas_fed.resync() into ClickHouse is atomic for readers (issue 18): the
# copy goes into a staging table, which one RENAME TABLE puts in the synced
# table's place.  A remote table damaged on purpose (rows changed, deleted,
# added) is resynced while a reader reads it again and again: every read
# sees the damaged table or the copy, never a mix of the two; afterwards
# the remote equals the source and no staging table is left.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => "wal_level = logical\nmax_wal_senders = 4");
clickhouse_catalog($local, $ch);

$local->safe_psql('postgres', q{
CREATE TABLE t (id int PRIMARY KEY, v text);
INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 50000) g;
CREATE TABLE lake.dw.t WITH (sync = 'continuous') AS SELECT * FROM t;});

sub state
{
	return $local->safe_psql('postgres', q{SELECT state FROM ctas_fed.syncs});
}

# what a reader sees: rows and a checksum, or the error
sub read_remote
{
	my $res = $ch->request(
		"SELECT count(), sum(cityHash64(id, v)) FROM dw.t FINAL WHERE _deleted = 0 FORMAT TabSeparated");
	return $res->{status} == 200 ? $res->{content} =~ s/\s+$//r : 'error';
}

sub source_read
{
	# the same checksum, computed by ClickHouse over the source's rows
	my $rows = $local->safe_psql('postgres', q{COPY (SELECT id, v FROM t ORDER BY id) TO STDOUT});
	$ch->query('DROP TABLE IF EXISTS dw.src_check');
	$ch->query('CREATE TABLE dw.src_check (id Int32, v String) ENGINE = Memory');
	my $res = $ch->request("INSERT INTO dw.src_check FORMAT TabSeparated", data => "$rows\n");
	die "insert: $res->{content}" if $res->{status} != 200;
	my $r = $ch->query('SELECT count(), sum(cityHash64(id, v)) FROM dw.src_check FORMAT TabSeparated');
	$ch->query('DROP TABLE dw.src_check');
	return $r =~ s/\s+$//r;
}

ok(wait_until(60, sub { state() eq 'streaming' }), 'streaming');
my $want = source_read();
ok(wait_until(30, sub { read_remote() eq $want }), 'remote = source before the damage');

# damage: rows changed, deleted and added behind the sync's back
$ch->query("ALTER TABLE dw.t UPDATE v = 'tampered' WHERE id % 100 = 0");
$ch->query("ALTER TABLE dw.t DELETE WHERE id % 100 = 1");
$ch->query("INSERT INTO dw.t (id, v, _version, _deleted) VALUES (900000, 'extra', 1, 0)");
my $damaged;
ok(wait_until(30, sub { $damaged = read_remote(); $damaged =~ /^49501\t/ && $damaged ne $want }),
	'damaged: 500 rows deleted, 1 added, 500 changed');

$local->safe_psql('postgres', q{SELECT ctas_fed.resync('lake.dw.t')});
my (%seen, $errors);
$errors = 0;
ok(wait_until(120, sub {
	my $r;
	# reads in a row between two looks at the job's state
	for (1 .. 20)
	{
		$r = read_remote();
		$errors++ if $r eq 'error';
		$seen{$r}++ unless $r eq 'error';
	}
	return state() eq 'streaming' && $r eq $want;
}), 'resynced: remote = source');
my @mixed = grep { $_ ne $want && $_ ne $damaged } keys %seen;
is(scalar(@mixed), 0, 'every read saw the damaged table or the copy, never a mix')
  or diag(join("\n", @mixed));
note("reads: " . join(', ', map { "$seen{$_} x $_" } keys %seen) . ", $errors failed");
ok($seen{$damaged} && $seen{$want}, 'reads saw both the damaged table and the copy');
is($ch->query(q{SELECT count() FROM system.tables WHERE database = 'dw' AND startsWith(name, '_ctas_fed_resync_')}),
	"0\n", 'no staging table left');

# ctas_fed.sync_checks keeps the last 100 checks of a sync: 150 old ones,
# then a verify
$local->safe_psql('postgres', q{
INSERT INTO ctas_fed.sync_checks (sync_id, consistent_lsn, result, source_rows, duration_ms, differences)
  SELECT sync_id, '0/1', 'old', g, 0, '[]' FROM ctas_fed.syncs, generate_series(1, 150) g ORDER BY g;});
is($local->safe_psql('postgres', q{SELECT result FROM ctas_fed.verify_sync('lake.dw.t')}), 'equal',
	'verify_sync: equal after the resync');
is($local->safe_psql('postgres', q{
  SELECT count(*) || ' ' || (array_agg(source_rows ORDER BY check_id))[1] || ' ' || (array_agg(result ORDER BY check_id DESC))[1]
    FROM ctas_fed.sync_checks}), '100 52 equal', 'sync_checks: the last 100 of the sync kept');

# and the sync goes on into the new table
$local->safe_psql('postgres', q{UPDATE t SET v = 'after' WHERE id <= 10; DELETE FROM t WHERE id = 11});
$want = source_read();
ok(wait_until(30, sub { read_remote() eq $want }), 'changes after the resync applied');

done_testing();
