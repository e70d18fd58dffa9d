
# Copyright (c) 2026, ctas_fed developers

# The pipelined apply into PostgreSQL (src/sync/apply.c, "Pipelining"): a
# job's remote transaction commits every 5000 changes and the worker goes
# on reading and building the next batch while the remote applies the one
# it sent.  A remote session holding a lock on the remote table keeps a
# batch in flight (sent, COMMIT included, not applied yet):
# - the worker is killed while a batch is in flight: the remote session
#   that runs it outlives the worker, and the new worker waits for it (an
#   advisory lock per job) before it reads the job's progress;
# - the local server crashes while a batch is in flight;
# - a batch fails on the remote in the middle of the pipeline (a CHECK
#   constraint there): nothing of it is visible, the batches before it are,
#   and it is applied once the constraint is gone.
# The remote logs every write the sync makes (sync_write_log): every row
# is written exactly once, and equals the source's.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $local = new_cluster('local', conf => "wal_level = logical\n");
postgres_catalog($local, $remote);

$local->safe_psql('postgres', q{
CREATE TABLE t (id bigint PRIMARY KEY, v int);
CREATE TABLE wh.public.t WITH (sync = 'continuous') AS SELECT * FROM t;
});
ok( wait_until(120, sub {
		$local->safe_psql('postgres',
			"SELECT state FROM ctas_fed.jobs WHERE mode = 'sync'") eq 'streaming' }),
	'the sync streams');
sync_write_log($remote, 't', 'id');

my $next = 0;

# n source transactions of one row each, ids after the last ones
sub insert_rows
{
	my ($n, $v) = @_;
	my $from = $next + 1;
	$next += $n;
	$v //= 'i % 1000';
	$local->safe_psql('postgres', qq{
DO \$\$
BEGIN
  FOR i IN $from .. $next LOOP
    INSERT INTO t VALUES (i, $v);
    COMMIT;
  END LOOP;
END \$\$;});
	return;
}

sub source_rows
{
	return $local->safe_psql('postgres',
		q{SELECT count(*) || ' ' || coalesce(sum(id + v), 0) FROM t});
}

sub remote_rows
{
	return $remote->safe_psql('dw',
		q{SELECT count(*) || ' ' || coalesce(sum(id + v), 0) FROM public.t});
}

sub worker
{
	return $local->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
}

# a remote statement of the sync waiting for the table's lock
sub waits_on_lock
{
	return $remote->safe_psql('dw', q{
SELECT count(*) > 0 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
 WHERE l.relation = 'public.t'::regclass AND NOT l.granted
   AND a.usename = 'loader'}) eq 't';
}

sub lock_remote
{
	my $s = session_start($remote, 'dw');
	my ($out, $err) = session_run($s,
		'BEGIN; LOCK TABLE public.t IN EXCLUSIVE MODE;');
	die "lock: $err" if $err =~ /ERROR/;
	return $s;
}

# 1. the worker killed while a batch is in flight
my $lock = lock_remote();
insert_rows(12000);
ok(wait_until(60, \&waits_on_lock), 'killed worker: a batch waits on the remote');
my $before = worker();
$local->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
insert_rows(3000);
ok(wait_until(60, sub { my $w = worker(); $w ne '' && $w ne $before }),
	'killed worker: a new worker');
sleep 2;    # the old remote session sees its client gone, the new one waits
$lock->quit;
ok(wait_until(60, sub { remote_rows() eq source_rows() }),
	'killed worker: the remote equals the source');
is(sync_writes($remote, 't'), "$next $next 0",
	'killed worker: every row written exactly once');

# 2. the local server crashed while a batch is in flight
$lock = lock_remote();
insert_rows(12000);
ok(wait_until(60, \&waits_on_lock), 'crash: a batch waits on the remote');
$local->stop('immediate');
$local->start;
insert_rows(100);
ok(wait_until(60, sub { worker() ne '' }), 'crash: the worker runs again');
sleep 2;
$lock->quit;
ok(wait_until(60, sub { remote_rows() eq source_rows() }),
	'crash: the remote equals the source');
is(sync_writes($remote, 't'), "$next $next 0",
	'crash: every row written exactly once');

# 3. a batch that fails on the remote in the middle of the pipeline: the
# row 7000 transactions on violates a constraint the source does not have
$remote->safe_psql('dw',
	'ALTER TABLE public.t ADD CONSTRAINT small CHECK (v < 1000000) NOT VALID');
my $first = $next + 1;
my $bad = $next + 7000;
insert_rows(12000, "CASE WHEN i = $bad THEN 2000000 ELSE i % 1000 END");
ok( wait_until(60, sub {
		$local->safe_psql('postgres',
			"SELECT error FROM ctas_fed.jobs WHERE mode = 'sync'") =~ /small/ }),
	'failing batch: the error is shown');
my ($n, $max) = split /\|/, $remote->safe_psql('dw',
	"SELECT count(*), coalesce(max(id), 0) FROM public.t WHERE id >= $first");
cmp_ok($max, '<', $bad, "failing batch: nothing of it is visible ($n rows of the round)");
is($n, $max >= $first ? $max - $first + 1 : 0,
	'failing batch: the batches before it are, whole');
$remote->safe_psql('dw', 'ALTER TABLE public.t DROP CONSTRAINT small');
ok(wait_until(90, sub { remote_rows() eq source_rows() }),
	'failing batch: the remote equals the source once the constraint is gone');
is(sync_writes($remote, 't'), "$next $next 0",
	'failing batch: every row written exactly once');
is($local->safe_psql('postgres',
		"SELECT state || ' ' || coalesce(error, '-') FROM ctas_fed.jobs WHERE mode = 'sync'"),
	'streaming -', 'failing batch: the sync streams on');

$local->stop;
$remote->stop;
done_testing();
