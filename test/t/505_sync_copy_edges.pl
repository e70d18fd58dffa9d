
# Copyright (c) 2026, ctas_fed developers

# The edges of a continuous sync's initial copy:
#  - a sync worker that has connected to its database but not yet
#    registered itself when DROP DATABASE of that database begins (a fault
#    point holds it there) exits by itself, and the DROP succeeds.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => "wal_level = logical");
clickhouse_catalog($local, $ch);

sub our_slots
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'");
}

# ---- DROP DATABASE before the worker registers itself ----------------------
# The database's own setting holds its sync worker 3 s at the fault point
# after the worker connected and before it registers (the resolver of the
# database reads the setting too, and passes no such point).  DROP
# DATABASE, sent meanwhile, stops the resolver and marks the database; the
# worker sees the mark once it goes on, and exits, within the 5 s DROP
# DATABASE waits for the other users of the database.
$local->safe_psql('postgres', 'CREATE DATABASE dropwin');
clickhouse_catalog($local, $ch, dbname => 'dropwin', database => 'dw3');
$local->safe_psql('postgres',
	q{ALTER DATABASE dropwin SET ctas_fed.fault_point = 'sync_worker_attach:3'});
my $log_offset = -s $local->logfile;
$local->safe_psql('dropwin', q{
  CREATE TABLE t (id int PRIMARY KEY, v text);
  INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) g;
  CREATE TABLE lake.dw3.t WITH (sync = 'continuous') AS SELECT id, v FROM t;});
ok(wait_log($local, qr/stopped at fault point "sync_worker_attach"/, $log_offset, 60),
	'DROP DATABASE window: the worker is connected, not registered');
is($local->safe_psql('postgres',
	q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync' AND datname = 'dropwin'}),
	'1', 'DROP DATABASE window: the worker is in the database');
my ($rc, $out, $err) = $local->psql('postgres', 'DROP DATABASE dropwin');
is($rc, 0, 'DROP DATABASE window: DROP DATABASE succeeds') or diag($err);
like(slurp_file($local->logfile, $log_offset),
	qr/ctas_fed sync \d+: the worker exits, its database is being dropped or changed/,
	'DROP DATABASE window: the worker saw the mark and exited');
is($local->safe_psql('postgres',
	q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'}),
	'0', 'DROP DATABASE window: no sync worker left');
is(our_slots(), '0', 'DROP DATABASE window: no slot left');
is($ch->query(
		"SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_stage')") + 0,
	0, 'no staging table left in ClickHouse');

done_testing();
