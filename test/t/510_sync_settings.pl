
# Copyright (c) 2026, ctas_fed developers

# Continuous sync: values reach the remote independent of any setting
# (issue 18, "no silent divergence").  Hostile DateStyle, IntervalStyle,
# extra_float_digits, bytea_output, TimeZone and lc_monetary are set on the
# local database, on the role the sync worker runs as, on the sync's owner
# and on the remote role; a table with every type of the type map is synced
# into PostgreSQL and ClickHouse, rows are inserted, updated and deleted
# while it streams, and each remote table must equal the query's result
# read under neutral settings (PostgreSQL), or a one-shot CTAS of the same
# query made in a neutral session (ClickHouse).  (money, whose text depends
# on lc_monetary, is refused by the type map: cast it to numeric.)  Before the settings were
# pinned in the worker, streamed dates came out with day and month swapped
# and floats rounded to two digits, while the initial copy was right.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $ch = start_clickhouse();
my $local = new_cluster('local', conf => "wal_level = logical\nmax_wal_senders = 4");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
postgres_catalog($local, $remote);
clickhouse_catalog($local, $ch);

# what a reader sees is the same under any setting; these are the ones
# the comparison reads under
my $neutral = q{SET datestyle = 'ISO, MDY'; SET intervalstyle = 'postgres';
SET extra_float_digits = 1; SET bytea_output = 'hex'; SET timezone = 'UTC';
SET lc_monetary = 'C';};
my $hostile = q{datestyle = 'SQL, DMY', intervalstyle = 'sql_standard',
extra_float_digits = -15, bytea_output = 'escape', timezone = 'Pacific/Chatham',
lc_monetary = 'C.utf8'};
my $hostile2 = q{datestyle = 'German', intervalstyle = 'iso_8601',
extra_float_digits = -10, bytea_output = 'escape', timezone = 'America/St_Johns'};

sub set_all
{
	my ($what, $settings) = @_;
	my $sql = '';
	foreach my $s (split /,\s*(?=[a-z_]+ =)/, $settings)
	{
		$sql .= "ALTER $what SET $s;\n";
	}
	return $sql;
}

$local->safe_psql('postgres', q{
CREATE TABLE typed (id int PRIMARY KEY, i2 int2, i8 int8, f4 float4,
  f8 float8, n numeric(20,6), b bool, t text, vc varchar(20), bp char(5),
  c "char", by bytea, js json, jb jsonb, d date, tm time, ttz timetz,
  ts timestamp, tstz timestamptz, iv interval, u uuid, ip inet,
  ai int4[], ad date[], af float8[], ats timestamptz[], aiv interval[]);
CREATE PROCEDURE fill(a int, z int) LANGUAGE sql AS $$
INSERT INTO typed SELECT g, g, g * 1000000007::int8, g / 7.0::float4,
  g / 3.0::float8, g * 1.123457, g % 2 = 0, 'text ' || g, 'vc' || g,
  'b' || g % 10, 'x', decode(md5(g::text), 'hex') || '\x00ff5c'::bytea,
  json_build_object('a', g / 3.0::float8), jsonb_build_object('k', g, 'f', g / 3.0),
  make_date(2026, 1 + g % 12, 1 + g % 28), make_time(g % 24, g % 60, g / 7.0),
  make_time(10, 11, 12.5)::timetz,
  make_timestamp(2026, 1 + g % 12, 1 + g % 28, g % 24, 5, 6.789),
  make_timestamptz(2026, 1 + g % 12, 1 + g % 28, g % 24, 5, 6.789, 'UTC'),
  make_interval(years => 1, months => -g, days => g, secs => -g * 3.25),
  md5(g::text)::uuid,
  ('10.0.' || g % 256 || '.1')::inet, ARRAY[g, -g], ARRAY[make_date(2026, 2, 1 + g % 12)],
  ARRAY[g / 3.0::float8, 1e-300 * g], ARRAY[make_timestamptz(2025, 12, 3, 4, 5, 6, 'UTC')],
  ARRAY[make_interval(days => -g, secs => g)]
  FROM generate_series(a, z) g
$$;
CALL fill(1, 60);
CREATE ROLE syncer LOGIN REPLICATION;
GRANT USAGE ON FOREIGN SERVER wh, lake TO syncer;
ALTER TABLE typed OWNER TO syncer;
GRANT CREATE ON DATABASE postgres TO syncer;
});

# hostile everywhere: the database, the worker's role, the owner, the
# remote role
$local->safe_psql('postgres', set_all('DATABASE postgres', $hostile)
	  . set_all('ROLE CURRENT_USER', $hostile)
	  . set_all('ROLE syncer', $hostile2));
$remote->safe_psql('dw', set_all('ROLE loader', $hostile2));

my $ch_cols = 'id, i2, i8, f4, f8, n, b, t, vc, bp, by, js, jb, d, ts, tstz, u, ai, ad, af';

# the owner's own session makes the syncs
$local->safe_psql('postgres', qq{
CREATE TABLE wh.public.typed WITH (sync = 'continuous') AS SELECT * FROM typed;
CREATE TABLE lake.dw.typed WITH (sync = 'continuous') AS SELECT $ch_cols FROM typed;
}, extra_params => [ '-U', 'syncer' ]);

ok(wait_until(120, sub {
	$local->safe_psql('postgres',
		q{SELECT string_agg(state, ',') FROM ctas_fed.jobs WHERE mode = 'sync'})
	  eq 'streaming,streaming' }),
	'both syncs streaming');

# a worker started after every setting: it reads them all
$local->safe_psql('postgres', q{
SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'});

# changes streamed under the hostile settings
$local->safe_psql('postgres', q{
CALL fill(61, 160);
UPDATE typed SET d = d + 1, f8 = f8 * 1.1, iv = iv * 2, tstz = tstz + interval '1 hour',
  by = by || '\x5c'::bytea, af = af || 0.1::float8 WHERE id % 5 = 0;
DELETE FROM typed WHERE id % 7 = 0;
UPDATE typed SET id = id + 1000 WHERE id % 11 = 0;
});

sub digest_under_neutral
{
	my ($node, $db, $select) = @_;
	return CtasFed::Test::_rows_digest(
		$node->safe_psql($db, "$neutral COPY ($select) TO STDOUT"));
}

my $want = digest_under_neutral($local, 'postgres', 'SELECT * FROM typed');
my $got;
wait_until(60, sub {
	$got = digest_under_neutral($remote, 'dw', 'SELECT * FROM public.typed');
	$got eq $want });
is($got, $want, 'PostgreSQL target: every type equals the query result after streaming');

# ClickHouse: the reference is a one-shot CTAS of the same query, in a
# neutral session
$local->safe_psql('postgres',
	"$neutral CREATE TABLE lake.dw.typed_ref AS SELECT $ch_cols FROM typed ORDER BY id");
my $ch_want = $ch->query("SELECT * FROM dw.typed_ref ORDER BY id FORMAT TabSeparated");
my $ch_got;
wait_until(60, sub {
	$ch_got = $ch->query(
		"SELECT $ch_cols FROM dw.typed FINAL WHERE _deleted = 0 ORDER BY id FORMAT TabSeparated");
	$ch_got eq $ch_want });
is($ch_got, $ch_want, 'ClickHouse target: every type equals a one-shot CTAS of the query');
like($ch_want, qr/^1\t/, 'the reference has rows');

is($local->safe_psql('postgres',
		q{SELECT string_agg(state || coalesce(error, ''), ',') FROM ctas_fed.jobs WHERE mode = 'sync'}),
	'streaming,streaming', 'both syncs still streaming, without error');

# nothing left behind once stopped
$local->safe_psql('postgres', q{
SELECT ctas_fed.stop_sync('wh.public.typed');
SELECT ctas_fed.stop_sync('lake.dw.typed');});
ok(wait_until(30, sub {
	$local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'") eq '0' }),
	'no slot left');

done_testing();
