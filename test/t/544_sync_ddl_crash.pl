
# Copyright (c) 2026, ctas_fed developers

# A schema change that a whole-row sync followed, with a crash between the
# remote commit that changed the remote table and the local commit that
# stores the sync's new columns (fault point sync_schema_unsaved), into
# PostgreSQL and ClickHouse (issue 18).  After the restart the job reads
# the DDL's transaction again as applied, takes the columns from its
# message, opens its target for them (the ClickHouse table has lost a
# column the stored columns still name) and goes on: the remote equals the
# source, each change is recorded once.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => "wal_level = logical\nmax_wal_senders = 4\nmax_worker_processes = 16");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
postgres_catalog($local, $remote);
clickhouse_catalog($local, $ch);

sub states
{
	return $local->safe_psql('postgres',
		"SELECT string_agg(remote_table || '=' || state || coalesce(' ' || error, ''), ' ' ORDER BY remote_table) FROM ctas_fed.syncs");
}

sub rows
{
	my ($text) = @_;
	my @rows = sort grep { $_ ne '' } split /\n/, $text;
	return scalar(@rows) . ':' . join('|', @rows);
}

sub cols
{
	my ($t) = @_;
	return $local->safe_psql('postgres',
		"SELECT string_agg(attname::text, ', ' ORDER BY attnum) FROM pg_attribute "
		  . "WHERE attrelid = '$t'::regclass AND attnum > 0 AND NOT attisdropped");
}

sub same
{
	my ($what) = @_;
	for my $t (qw(t_pg t_ch))
	{
		my $c = cols($t);
		my $want = rows($local->safe_psql('postgres', "COPY (SELECT $c FROM $t) TO STDOUT"));
		my $got;
		wait_until(60, sub {
			if ($t eq 't_pg')
			{
				my ($rc, $out) = $remote->psql('dw', "COPY (SELECT $c FROM public.t_pg) TO STDOUT");
				$got = $rc == 0 ? rows($out) : 'error';
			}
			else
			{
				my $res = $ch->request("SELECT $c FROM dw.t_ch FINAL WHERE _deleted = 0 FORMAT TabSeparated");
				$got = $res->{status} == 200 ? rows($res->{content}) : 'error';
			}
			$got eq $want });
		is($got, $want, "$what: $t: remote = source");
	}
	is(states(), 't_ch=streaming t_pg=streaming', "$what: both streaming");
}

$local->safe_psql('postgres', q{
CREATE TABLE t_pg (id int PRIMARY KEY, a int, b text, c int);
CREATE TABLE t_ch (id int PRIMARY KEY, a int, b text, c int);
INSERT INTO t_pg SELECT g, g, 'b' || g, g FROM generate_series(1, 100) g;
INSERT INTO t_ch SELECT g, g, 'b' || g, g FROM generate_series(1, 100) g;
CREATE TABLE wh.public.t_pg WITH (sync = 'continuous') AS SELECT * FROM t_pg;
CREATE TABLE lake.dw.t_ch WITH (sync = 'continuous') AS SELECT * FROM t_ch;});
ok(wait_until(60, sub { states() eq 't_ch=streaming t_pg=streaming' }), 'streaming');

$local->safe_psql('postgres', q{
  ALTER SYSTEM SET ctas_fed.fault_point = 'sync_schema_unsaved';
  SELECT pg_reload_conf();});
sleep 1;
my $log_offset = -s $local->logfile;
$local->safe_psql('postgres', q{
UPDATE t_pg SET a = -a WHERE id <= 5;
UPDATE t_ch SET a = -a WHERE id <= 5;
BEGIN;
UPDATE t_pg SET b = 'before' WHERE id = 6;
ALTER TABLE t_pg DROP COLUMN b, ADD COLUMN d int DEFAULT 7;
UPDATE t_pg SET d = 8 WHERE id = 7;
COMMIT;
ALTER TABLE t_ch DROP COLUMN b, ADD COLUMN d int DEFAULT 7;
UPDATE t_ch SET d = 8 WHERE id = 7;});
ok(wait_until(60, sub {
	my @hits = slurp_file($local->logfile, $log_offset) =~ /stopped at fault point "sync_schema_unsaved"/g;
	@hits == 2 }), 'both workers stopped after the remote commit, before storing the new columns');
is($ch->query(q{SELECT count() FROM system.columns WHERE database = 'dw' AND table = 't_ch' AND name = 'b'}),
	"0\n", 'ClickHouse: the column is dropped remotely');
is($local->safe_psql('postgres', q{SELECT string_agg(array_to_string(remote_columns, ','), ' ' ORDER BY remote_table) FROM ctas_fed.syncs}),
	'id,a,b,c id,a,b,c', 'the stored columns are the old ones');
$local->safe_psql('postgres', 'ALTER SYSTEM RESET ctas_fed.fault_point');
$local->stop('immediate');
$local->start;
$local->safe_psql('postgres', q{
UPDATE t_pg SET d = 9, c = 0 WHERE id <= 3;
UPDATE t_ch SET d = 9, c = 0 WHERE id <= 3;
DELETE FROM t_ch WHERE id = 4;});
same('crash before the new columns were stored');
is($local->safe_psql('postgres', q{SELECT string_agg(array_to_string(remote_columns, ','), ' ' ORDER BY remote_table) FROM ctas_fed.syncs}),
	'id,a,c,d id,a,c,d', 'the new columns stored');
is($local->safe_psql('postgres', q{
  SELECT string_agg(y.remote_table || ': ' || c.change, '; ' ORDER BY y.remote_table, c.change_id)
    FROM ctas_fed.sync_schema_changes c JOIN ctas_fed.syncs y USING (sync_id)}),
	't_ch: DROP COLUMN b; t_ch: ADD COLUMN d integer; t_pg: DROP COLUMN b; t_pg: ADD COLUMN d integer',
	'each change recorded once');

done_testing();
