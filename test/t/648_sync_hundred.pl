
# Copyright (c) 2026, ctas_fed developers

# 100 syncs on a default-configured server (issue 22, "Tests"): a local
# server with max_worker_processes = 8 and ctas_fed.max_sync_workers left
# at its default; 100 small tables, 50 synced into a PostgreSQL catalog and
# 50 into a ClickHouse catalog, 98 in the database's default stream and
# t50 / t100 in a stream of their own (stream = 'iso').  Under a mixed
# workload on every source (inserts, updates, deletes, transactions over
# several tables, one TRUNCATE), sampled all along:
#   - never more "ctas_fed sync" workers than ctas_fed.max_sync_workers;
#   - one replication slot per stream (2), whatever the number of syncs (a
#     join copy's slot, ctas_fed_sync_j*, lives only while its snapshot is
#     taken, as a tablesync slot does, and is not counted);
#   - once quiet, every remote table equals its source (a digest of its
#     sorted rows on both sides);
#   - nothing written twice into PostgreSQL: a trigger on each remote table
#     (ENABLE ALWAYS, so that it fires under the apply's
#     session_replication_role) logs every row version written, and each
#     (table, id, n) is logged once (n grows with every update of a key,
#     and the workload never inserts a key again).  ClickHouse may take a
#     batch twice by design (docs/sync.md); it is checked for equality only.
# Asserts no timing.
# ctas-tap: parallel

use strict;
use warnings;

use Digest::MD5 qw(md5_hex);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

use CtasFed::Test;

my $N = 100;
my $HALF = $N / 2;
my $t0 = time;

my $ch = start_clickhouse();
my $local = new_cluster('local',
	conf => "wal_level = logical\nmax_worker_processes = 8");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $rport = $remote->port;
clickhouse_catalog($local, $ch);
$local->safe_psql('postgres', qq{
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE TABLE ctl (stop boolean);
INSERT INTO ctl VALUES (false);
});
is($local->safe_psql('postgres',
	"SELECT current_setting('max_worker_processes') || ' ' || current_setting('ctas_fed.max_sync_workers') || ' ' || (SELECT source FROM pg_settings WHERE name = 'ctas_fed.max_sync_workers')"),
	'8 2 default', 'max_worker_processes = 8, ctas_fed.max_sync_workers at its default (2)');
my $max_sync = 2;

$local->safe_psql('postgres', qq{
DO \$\$
BEGIN
  FOR t IN 1 .. $N LOOP
    EXECUTE format('CREATE TABLE t%s (id int PRIMARY KEY, v text, n int NOT NULL)', t);
    EXECUTE format('INSERT INTO t%s SELECT g, ''v'' || g, 0 FROM generate_series(1, 20) g', t);
  END LOOP;
END \$\$;
});

# a mixed workload on every table: an insert, an update of another table,
# a delete in a third, in one transaction; now and then a bulk update of
# one table and (once) a TRUNCATE
$local->safe_psql('postgres', qq{
CREATE PROCEDURE writer() LANGUAGE plpgsql AS \$\$
DECLARE
  i bigint := 0;
BEGIN
  WHILE NOT (SELECT stop FROM ctl) LOOP
    i := i + 1;
    EXECUTE format('INSERT INTO t%s VALUES (%s, %L, 0)', i % $N + 1, 100000 + i, 'new' || i);
    EXECUTE format('UPDATE t%s SET n = n + 1, v = %L WHERE id = %s', (i * 7) % $N + 1, 'u' || i, (i * 13) % 20 + 1);
    EXECUTE format('DELETE FROM t%s WHERE id = %s', (i * 3) % $N + 1, (i * 17) % 20 + 1);
    IF i % 50 = 0 THEN
      EXECUTE format('UPDATE t%s SET n = n + 1', (i / 50) % $N + 1);
    END IF;
    IF i = 400 THEN
      TRUNCATE t37, t77;
    END IF;
    COMMIT;
    PERFORM pg_sleep(0.002);
  END LOOP;
END \$\$;
});

my $max_workers = 0;
my $max_slots = 0;
sub sample
{
	my ($w, $s) = split /\|/, $local->safe_psql('postgres', q{
	  SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'),
	         (SELECT count(*) FROM pg_replication_slots
	          WHERE NOT temporary AND slot_name !~ '^ctas_fed_sync_j')});
	$max_workers = $w if $w > $max_workers;
	$max_slots = $s if $s > $max_slots;
	return;
}

# t1..t50 into PostgreSQL, t51..t100 into ClickHouse; t50 and t100 isolated
my $sql = '';
for my $i (1 .. $N)
{
	my $cat = $i <= $HALF ? 'wh.public' : 'lake.dw';
	my $opt = ($i == $HALF || $i == $N) ? ", stream = 'iso'" : '';
	$sql .= "CREATE TABLE $cat.t$i WITH (sync = 'continuous'$opt) AS SELECT id, v, n FROM t$i;\n";
}
my $tc = time;
$local->safe_psql('postgres', $sql);
ok(wait_until(300, sub {
	sample();
	$local->safe_psql('postgres',
		"SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'") eq "$N" }),
	"$N syncs reach streaming");
note(sprintf('%d syncs created and streaming after %.1f s', $N, time - $tc));
is($local->safe_psql('postgres', q{
  SELECT count(DISTINCT stream_id) || ' ' ||
         (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%' AND NOT temporary)
    FROM ctas_fed.syncs}),
	'2 2', "two streams, two slots, for $N syncs");

# the write log of the PostgreSQL side
my $trig = q{
CREATE TABLE public.wlog (tbl text, id int, n int, op text);
GRANT INSERT ON public.wlog TO loader;
CREATE FUNCTION public.wlog() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.wlog VALUES (TG_TABLE_NAME, NEW.id, NEW.n, TG_OP);
  RETURN NEW;
END $$;
};
for my $i (1 .. $HALF)
{
	$trig .= "CREATE TRIGGER wlog AFTER INSERT OR UPDATE ON public.t$i FOR EACH ROW EXECUTE FUNCTION public.wlog();\n"
	  . "ALTER TABLE public.t$i ENABLE ALWAYS TRIGGER wlog;\n";
}
$remote->safe_psql('dw', $trig);

# the rows of every table on one side, "table\tid\tv\tn" lines
sub rows_of
{
	my ($side, $first, $last) = @_;
	my @q;
	for my $i ($first .. $last)
	{
		push @q, $side eq 'clickhouse'
		  ? "SELECT 't$i', id, v, n FROM dw.t$i FINAL WHERE _deleted = 0"
		  : "SELECT 't$i', id, v, n FROM " . ($side eq 'remote' ? 'public.' : '') . "t$i";
	}
	my $q = join(' UNION ALL ', @q);
	return $side eq 'clickhouse'
	  ? $ch->query("$q FORMAT TabSeparated")
	  : ($side eq 'remote' ? $remote : $local)->safe_psql(
		$side eq 'remote' ? 'dw' : 'postgres', "COPY ($q) TO STDOUT");
}

# per table: count and md5 of its sorted rows
sub digests
{
	my ($text) = @_;
	my %rows;
	for my $l (split /\n/, $text)
	{
		next if $l eq '';
		my ($t, $rest) = split /\t/, $l, 2;
		push @{ $rows{$t} }, $rest;
	}
	return { map { $_ => scalar(@{ $rows{$_} }) . ':' . md5_hex(join("\n", sort @{ $rows{$_} })) } keys %rows };
}

# the tables whose remote digest differs from the local one
sub differing
{
	my $l = digests(rows_of('local', 1, $N));
	my $r = { %{ digests(rows_of('remote', 1, $HALF)) },
		%{ digests(rows_of('clickhouse', $HALF + 1, $N)) } };
	return grep { ($l->{"t$_"} // 'empty') ne ($r->{"t$_"} // 'empty') } 1 .. $N;
}

is(join(' ', differing()), '', 'every remote table equals its source after the copies');

# the workload, sampled while it runs
my $tw = time;
my ($w) = start_psql($local, 'CALL writer()');
my $seen_pg = 0;
my $seen_ch = 0;
while (time - $tw < 15)
{
	sample();
	$seen_pg ||= $remote->safe_psql('dw', 'SELECT count(*) FROM public.t1 WHERE id > 100000') > 0;
	$seen_ch ||= $ch->query('SELECT count() FROM dw.t100 FINAL WHERE id > 100000 AND _deleted = 0 FORMAT TabSeparated') > 0;
	usleep(300_000);
}
ok($seen_pg && $seen_ch, 'both catalogs received the workload while it ran');
$local->safe_psql('postgres', 'UPDATE ctl SET stop = true');
$w->finish;
my $writes = $local->safe_psql('postgres', 'SELECT sum(n) FROM (' .
	join(' UNION ALL ', map { "SELECT sum(n) AS n FROM t$_" } 1 .. $N) . ') s');
note("the workload ran " . sprintf('%.1f s', time - $tw) . "; sum of n over the sources: $writes");

my @diff;
ok(wait_until(240, sub { sample(); @diff = differing(); return !@diff }),
	'every remote table equals its source once quiet')
  or diag('differing: ' . join(' ', map { "t$_" } @diff));
note(sprintf('converged %.1f s after the workload began', time - $tw));
sample();

cmp_ok($max_workers, '<=', $max_sync,
	"never more than ctas_fed.max_sync_workers ($max_sync) sync workers (saw $max_workers)");
cmp_ok($max_slots, '<=', 2, "never more than one slot per stream (saw $max_slots)");
is($local->safe_psql('postgres',
	"SELECT count(*) FROM ctas_fed.syncs WHERE state <> 'streaming' OR error IS NOT NULL"),
	'0', 'every sync streams, none with an error');
is($remote->safe_psql('dw',
	"SELECT count(*) FROM (SELECT tbl, id, n FROM public.wlog GROUP BY 1, 2, 3 HAVING count(*) > 1) d"),
	'0', 'no row version written twice into PostgreSQL (write log)');
cmp_ok($remote->safe_psql('dw', 'SELECT count(*) FROM public.wlog'), '>', 0,
	'the write log saw the writes');
note(sprintf('run time %.1f s', time - $t0));

done_testing();
