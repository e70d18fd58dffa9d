
# Copyright (c) 2026, ctas_fed developers

# ALTER EXTENSION ctas_fed UPDATE from 0.2 to 0.3 with syncs running
# (docs/sync.md, "Streams"): the extension installed at version 0.2 with
# this library, two single syncs and a create_tables_as sync made there
# (each a stream of its own, as in 0.2: three slots), a writer running
# through the update.  After it the oldest stream's worker merges the other
# two into its own (sync/merge.c): one slot, one publication, every sync
# goes on without a copy again (a marker row in each remote table stays),
# nothing lost (every row compared) or written twice (every remote write
# logged), and a sync made after the update joins that stream.  Two batch
# CTAS jobs are in doubt at the moment of the update: the local server
# crashed with each stopped at a fault point (after_prepare, and
# after_commit_record), their remote prepared transactions left on a
# second remote that stays down through the restart and the update; once
# it is back the resolver settles both (no prepared transaction left, the
# table there iff the local commit record was written).
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

use CtasFed::Test;

my $local = new_cluster('local',
	conf => "wal_level = logical\nctas_fed.resolver_naptime = 1");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $rport = $remote->port;
my $remote2 = new_remote_cluster(
	'remote2',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $rport2 = $remote2->port;

$local->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed VERSION '0.2';
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE SERVER wd FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport2', dbname 'dw',
           connect_timeout '2');
CREATE USER MAPPING FOR PUBLIC SERVER wd OPTIONS (user 'loader', password 'secret');
CREATE TABLE batch AS SELECT g AS id, md5(g::text) AS t FROM generate_series(1, 2000) g;
CREATE TABLE s1 (id int PRIMARY KEY, n int);
CREATE TABLE s2 (id int PRIMARY KEY, n int);
CREATE TABLE g1 (id int PRIMARY KEY, n int);
CREATE TABLE g2 (id int PRIMARY KEY, n int);
CREATE TABLE late (id int PRIMARY KEY, n int);
INSERT INTO s1 SELECT g, 0 FROM generate_series(1, 3000) g;
INSERT INTO s2 SELECT g, 0 FROM generate_series(1, 3000) g;
INSERT INTO g1 SELECT g, 0 FROM generate_series(1, 3000) g;
INSERT INTO g2 SELECT g, 0 FROM generate_series(1, 3000) g;
INSERT INTO late SELECT g, 0 FROM generate_series(1, 1000) g;
CREATE TABLE ctl (stop boolean);
INSERT INTO ctl VALUES (false);
CREATE PROCEDURE writer() LANGUAGE plpgsql AS \$\$
DECLARE
  i bigint := 0;
BEGIN
  WHILE NOT (SELECT stop FROM ctl) LOOP
    i := i + 1;
    UPDATE s1 SET n = n + 1 WHERE id = (i * 7919) % 3000 + 1;
    UPDATE s2 SET n = n + 1 WHERE id = (i * 31) % 3000 + 1;
    INSERT INTO g1 VALUES (100000 + i, i);
    UPDATE g2 SET n = n + 1 WHERE id = (i * 104729) % 3000 + 1;
    UPDATE late SET n = n + 1 WHERE id = i % 1000 + 1;
    COMMIT;
    PERFORM pg_sleep(0.003);
  END LOOP;
END \$\$;
});
is($local->safe_psql('postgres',
	"SELECT extversion FROM pg_extension WHERE extname = 'ctas_fed'"), '0.2',
	'installed at version 0.2');

$local->safe_psql('postgres', q{
CREATE TABLE wh.public.s1 WITH (sync = 'continuous') AS SELECT id, n FROM s1;
CREATE TABLE wh.public.s2 WITH (sync = 'continuous') AS SELECT id, n FROM s2;
SELECT count(*) FROM ctas_fed.create_tables_as('wh', 'public',
  tables => ARRAY['g1', 'g2']::regclass[], options => '{"sync": "continuous"}');
});
my ($rc, $out, $err) = $local->psql('postgres',
	"CREATE TABLE wh.public.x WITH (sync = 'continuous', stream = 'x') AS SELECT id, n FROM late");
like($err, qr/option "stream" needs version 0.3 of extension "ctas_fed"/,
	'0.2: the option stream asks for the update');
ok(wait_until(90, sub {
	$local->safe_psql('postgres',
		"SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'") eq '4' }),
	'0.2: four syncs stream');
is($local->safe_psql('postgres', q{
  SELECT count(DISTINCT stream_id) || ' ' ||
         (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%')
    FROM ctas_fed.syncs}),
	'3 3', '0.2: three streams, three slots');
sync_write_log($remote, $_, 'id') for qw(s1 s2 g1 g2);
# a marker in every remote table that a copy again would remove
$remote->safe_psql('dw', "INSERT INTO public.$_ VALUES (-1, -1)") for qw(s1 s2 g1 g2);

# two batch jobs in doubt: the local server crashes with one stopped after
# its remote PREPARE, the other after its local commit record
my $sysid = $local->safe_psql('postgres',
	'SELECT system_identifier FROM pg_control_system()');
my @doubt;
for my $point (qw(after_prepare after_commit_record))
{
	my ($in, $out, $err) = ('', '', '');
	my $offset = -s $local->logfile;
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $local->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
	$in .= "SET ctas_fed.fault_point = '$point';\nBEGIN;\n"
	  . "CREATE TABLE wd.public.$point AS SELECT id, t FROM batch;\nCOMMIT;\n";
	$h->pump while $h->pumpable && $in ne '';
	$local->wait_for_log(qr/stopped at fault point "$point"/, $offset);
	push @doubt, $h;
}
is($remote2->safe_psql('postgres',
	"SELECT count(*) FROM pg_prepared_xacts WHERE starts_with(gid, 'ctas_fed_${sysid}_')"),
	'2', 'two batch jobs prepared on the second remote');
$remote2->stop('fast');
$local->stop('immediate');
$_->finish foreach @doubt;
$local->start;
ok(wait_until(90, sub {
	$local->safe_psql('postgres',
		"SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'") eq '4' }),
	'0.2, after the crash: four syncs stream');
is($local->safe_psql('postgres',
	"SELECT string_agg(target || ' ' || state, ', ' ORDER BY target) FROM ctas_fed.jobs WHERE catalog = 'wd'"),
	'public.after_commit_record in_doubt, public.after_prepare in_doubt',
	'0.2, after the crash: the batch jobs are in doubt (their remote is down)');

my ($w) = start_psql($local, 'CALL writer()');
ok(wait_until(30, sub {
	$remote->safe_psql('dw', 'SELECT count(*) FROM public.g1 WHERE id > 100000') > 0 }),
	'the writer\'s rows arrive');
$local->safe_psql('postgres', 'ALTER EXTENSION ctas_fed UPDATE');
is($local->safe_psql('postgres',
	"SELECT extversion FROM pg_extension WHERE extname = 'ctas_fed'"), '0.3',
	'updated to 0.3 while the syncs run');

# the second remote back: the resolver settles the jobs in doubt
$remote2->start;
ok(wait_until(90, sub {
	$remote2->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') eq '0' }),
	'after the update: no prepared transaction left');
is($remote2->safe_psql('dw', q{
  SELECT string_agg(n.nspname || '.' || c.relname, ',' ORDER BY c.relname)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
     AND n.nspname NOT LIKE 'pg_toast%'}),
	'public.after_commit_record',
	'the table is there iff its local commit record was written, no staging table left');
is(sql_digest($remote2, 'dw', 'SELECT id, t FROM public.after_commit_record'),
	sql_digest($local, 'postgres', 'SELECT id, t FROM batch'),
	'the committed table holds the source\'s rows');
ok(wait_until(60, sub { $local->safe_psql('postgres',
	"SELECT string_agg(target || ' ' || state, ', ' ORDER BY target) FROM ctas_fed.jobs WHERE catalog = 'wd'")
	  eq 'public.after_commit_record committed, public.after_prepare aborted' }),
	'the jobs say what happened');
$local->safe_psql('postgres',
	'CREATE TABLE wh.public.late WITH (sync = \'continuous\') AS SELECT id, n FROM late');
is($local->safe_psql('postgres', q{
  SELECT stream_id = (SELECT min(stream_id) FROM ctas_fed.syncs) FROM ctas_fed.syncs
   WHERE remote_table = 'late'}),
	't', 'a sync made after the update joins the oldest stream');
ok(wait_until(60, sub {
	$local->safe_psql('postgres',
		"SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'") eq '5' }),
	'five syncs stream');
ok(wait_until(90, sub { $local->safe_psql('postgres', q{
  SELECT count(DISTINCT stream_id) || ' ' ||
         (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%') || ' ' ||
         (SELECT count(*) FROM pg_publication WHERE pubname LIKE 'ctas_fed_sync_%')
    FROM ctas_fed.syncs WHERE state = 'streaming'}) eq '1 1 1' }),
	'the streams of 0.2 merged: one stream, one slot, one publication');
is($local->safe_psql('postgres', q{
  SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_publication_tables
   WHERE pubname LIKE 'ctas_fed_sync_%'}),
	'g1,g2,late,s1,s2', 'the merged publication holds every synced table');
sleep(2);
$local->safe_psql('postgres', 'UPDATE ctl SET stop = true');
$w->finish;

sub same
{
	my ($t) = @_;
	return sql_digest($local, 'postgres', "SELECT id, n FROM $t")
	  eq sql_digest($remote, 'dw', "SELECT id, n FROM public.$t WHERE id <> -1");
}
ok(wait_until(90, sub { same('s1') && same('s2') && same('g1') && same('g2') && same('late') }),
	'every remote table equals its source once quiet');
is($remote->safe_psql('dw', 'SELECT ' . join(' + ', map { "(SELECT count(*) FROM public.$_ WHERE id = -1)" } qw(s1 s2 g1 g2))),
	'4', 'no copy again: the remote markers are still there');
like(sync_writes($remote, $_), qr/^[1-9]\d* [1-9]\d* 0$/,
	"$_: no row written twice with the same image (nothing applied twice)")
  foreach qw(s1 s2 g1 g2);

done_testing();
