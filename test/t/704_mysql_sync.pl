
# Copyright (c) 2026, ctas_fed developers

# Continuous sync into a MariaDB catalog: the initial copy, then a writer
# that inserts, updates (leaving a TOAST column unchanged, which the remote
# keeps), deletes, changes keys and truncates, while the sync worker is
# killed twice and MariaDB is killed and restarted.  Once quiet, the remote
# table equals the source by checksum, and a write log kept by triggers on
# MariaDB shows that no change was applied twice.  resync repairs a remote
# that drifted; verify_sync finds it equal, then names the keys that
# drifted; stop_sync leaves no slot.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use CtasFed::Test;

my $my    = start_mariadb();
my $local = new_cluster('local', conf => "wal_level = logical");
mysql_catalog($local, $my);

$local->safe_psql('postgres', q{
CREATE TABLE src (id int PRIMARY KEY, ver int NOT NULL, name text,
                  amount numeric(12,2), big text, b bytea,
                  ts timestamptz DEFAULT '2024-01-02 03:04:05.678901+02',
                  d date DEFAULT '2024-02-29', flag bool DEFAULT true,
                  t time DEFAULT '23:59:59.5', n numeric DEFAULT 1.50);
ALTER TABLE src ALTER COLUMN big SET STORAGE EXTERNAL;
INSERT INTO src SELECT g, 0, 'n' || g, g * 1.5,
       CASE WHEN g % 50 = 0 THEN repeat(md5(g::text), 200) END,
       CASE WHEN g % 3 = 0 THEN decode(md5(g::text), 'hex') END,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '1.000001 s',
       DATE '2000-01-01' + g, g % 2 = 0, time '00:00' + g * interval '1.5 s',
       CASE WHEN g % 7 = 0 THEN NULL ELSE g / 8.0 END
  FROM generate_series(1, 5000) g;
CREATE PROCEDURE churn(base int, cnt int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN base + 1 .. base + cnt LOOP
    INSERT INTO src VALUES (100000 + i, 0, E'new\t' || i, i, NULL, '\x00ff');
    -- big is not touched: an unchanged TOAST value the remote keeps
    UPDATE src SET ver = ver + 1, name = 'u' || i, amount = amount + 1
      WHERE id = (i * 7919) % 5000 + 1 OR id = (i * 13) % 5000 + 1;
    DELETE FROM src WHERE id = (i::bigint * 104729) % 5000 + 1;
    UPDATE src SET id = id + 1000000, ver = ver + 1
      WHERE id = (i * 31) % 5000 + 1;
    COMMIT;
  END LOOP;
END $$;
});

sub state
{
	return $local->safe_psql('postgres', 'SELECT state FROM ctas_fed.syncs');
}

sub workers
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
}

sub src_sum
{
	return $local->safe_psql('postgres', q{
SELECT count(*) || ' ' || md5(string_agg(concat_ws('|', id, ver, name, amount,
       md5(big), encode(b, 'hex')), E'\n' ORDER BY id)) FROM src});
}

sub my_sum
{
	my ($rc, $out) = $my->try_sql(q{SET SESSION group_concat_max_len = 1073741824;
SELECT CONCAT(COUNT(*), ' ', MD5(GROUP_CONCAT(CONCAT_WS('|', id, ver, name, amount,
       MD5(big), LOWER(HEX(b))) ORDER BY id SEPARATOR '\n'))) FROM shop.src});
	return '' if $rc != 0;
	chomp $out;
	return $out;
}

# the statement: a three-part name, the key of the source
$local->safe_psql('postgres',
	"CREATE TABLE shop.shop.src WITH (sync = 'continuous') AS SELECT * FROM src");
ok(wait_until(60, sub { state() eq 'streaming' }), 'the sync reaches streaming');
ok(wait_until(30, sub { my_sum() eq src_sum() }), 'initial copy: equal by checksum');
is($my->sql("SELECT engine FROM information_schema.tables WHERE table_schema = 'shop' AND table_name = '_ctas_fed_sync_progress'"),
	'InnoDB', 'the progress table is InnoDB');
like($my->sql('SHOW CREATE TABLE shop.src'), qr/PRIMARY KEY \(`id`\)/,
	'the remote table has the key of the source');

# a write log on MariaDB: one row per row inserted, and per row an update
# touches (BEFORE UPDATE fires even when the values are the same, so an
# upsert applied again shows as a repeated (key, row))
$my->sql(q{CREATE TABLE shop.src_writes (n BIGINT AUTO_INCREMENT PRIMARY KEY,
  k INT, img VARCHAR(64)) ENGINE = InnoDB;
CREATE TRIGGER shop.src_wi AFTER INSERT ON shop.src FOR EACH ROW
  INSERT INTO shop.src_writes (k, img) VALUES (NEW.id, MD5(CONCAT_WS('|', NEW.id, NEW.ver, NEW.name, NEW.amount, MD5(NEW.big))));
CREATE TRIGGER shop.src_wu BEFORE UPDATE ON shop.src FOR EACH ROW
  INSERT INTO shop.src_writes (k, img) VALUES (NEW.id, MD5(CONCAT_WS('|', NEW.id, NEW.ver, NEW.name, NEW.amount, MD5(NEW.big))));});

sub repeated
{
	return $my->sql('SELECT COUNT(*) - COUNT(DISTINCT k, img) FROM shop.src_writes');
}

# a stream of changes, the worker killed twice, MariaDB killed and restarted
my ($writer, $wout, $werr) = start_psql($local, 'CALL churn(0, 1500)');
for my $kill (1 .. 2)
{
	usleep(700_000);
	my $pid = $local->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
	$local->safe_psql('postgres', "SELECT pg_terminate_backend($pid)") if $pid;
	ok(wait_until(60, sub { my $p = $local->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'");
		$p ne '' && $p ne $pid }), "worker killed ($kill): a new worker runs");
}
$writer->finish;
is($$werr, '', 'the writer ran through');
# MariaDB killed; changes go on meanwhile; restarted
$my->kill9;
my ($writer2, $wout2, $werr2) = start_psql($local, 'CALL churn(1500, 1000)');
usleep(1_500_000);
$my->restart;
pass('MariaDB killed and restarted mid-stream');
$writer2->finish;
is($$werr2, '', 'the second writer ran through');

ok(wait_until(90, sub { my_sum() eq src_sum() }),
	'after kills and a MariaDB restart: equal by checksum')
  or diag('source ' . src_sum() . "\nremote " . my_sum());
is(repeated(), '0', 'no row written twice (write log on MariaDB)');
is($local->safe_psql('postgres', 'SELECT state FROM ctas_fed.syncs'), 'streaming',
	'still streaming');

# TRUNCATE, then new rows: the remote empties and refills in one transaction
$local->safe_psql('postgres', q{TRUNCATE src;
INSERT INTO src SELECT g, 7, 't' || g, g, NULL, NULL FROM generate_series(1, 300) g;
UPDATE src SET ver = 8 WHERE id <= 10;});
ok(wait_until(60, sub { my_sum() eq src_sum() }), 'TRUNCATE and refill: equal by checksum');
is(repeated(), '0', 'still no row written twice');
is($my->sql("SELECT COUNT(*) FROM shop._ctas_fed_sync_progress"), '1',
	'one progress row for the job');

# resync: the table deleted and copied again in one remote transaction
$local->safe_psql('postgres', q{UPDATE src SET name = 'before resync' WHERE id = 1});
$my->sql("UPDATE shop.src SET name = 'drifted' WHERE id = 2");
$local->safe_psql('postgres', "SELECT ctas_fed.resync('shop.shop.src')");
ok(wait_until(60, sub { state() eq 'streaming' && my_sum() eq src_sum() }),
	'resync: equal by checksum again (the remote drift is gone)');

# verify_sync: equal, then the differing keys of a remote that drifted
is($local->safe_psql('postgres',
	"SELECT string_agg(result, ',') FROM ctas_fed.verify_sync('shop.shop.src')"),
	'equal', 'verify_sync: equal');
$my->sql("UPDATE shop.src SET name = 'drifted' WHERE id = 3; DELETE FROM shop.src WHERE id = 4");
is($local->safe_psql('postgres',
	"SELECT string_agg(result || ' ' || key, ',' ORDER BY key) FROM ctas_fed.verify_sync('shop.shop.src')"),
	'different 3,different 4', 'verify_sync: the drifted and the missing key');
$local->safe_psql('postgres', "SELECT ctas_fed.resync('shop.shop.src')");
ok(wait_until(60, sub { state() eq 'streaming' && my_sum() eq src_sum() }),
	'resync: equal by checksum again');

# stop: no slot left, nothing staged on MariaDB
$local->safe_psql('postgres', "SELECT ctas_fed.stop_sync('shop.shop.src')");
ok(wait_until(60, sub { $local->safe_psql('postgres',
	"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'") eq '0' }),
	'stop_sync: the slot is dropped');
is($my->sql(q{SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE '\_ctas\_fed\_stage%'}),
	'0', 'no staging table left');

done_testing();
