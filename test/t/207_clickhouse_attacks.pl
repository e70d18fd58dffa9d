
# Copyright (c) 2026, ctas_fed developers

# The ClickHouse writer attacked as a hostile user, a hostile ClickHouse user
# and a broken disk would (issue 8, review of the merged work):
#
#  - durable records in pg_ctas_fed/ damaged after they were written
#    (truncated, a line cut short, bytes changed): the resolver must not
#    crash, must not act on a partial or altered list of tables, and must
#    keep the file and say so;
#  - a ClickHouse user who creates the staging table name the next
#    transaction of this cluster would use: the load must not write into
#    that table, nor drop it;
#  - a user target called like our scratch tables is refused;
#  - resolve_in_doubt() run by another user does not act on a transaction
#    with that user's ClickHouse credentials;
#  - order_by / partition_by expressions that read other tables, dictionaries
#    or hosts (a subquery in a partition key is evaluated at INSERT, and its
#    value quoted in ClickHouse's error) are refused;
#  - lost replies at the steps test 204 does not cover.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use utf8;

use CtasFed::Test;

my $ch = start_clickhouse();
# resolution is called explicitly, after each case
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $chpw  = $ch->{password};
my $churl = $ch->{url};

clickhouse_catalog($local, $ch, options => { connect_timeout => 2, timeout => 10 });

sub scratch_tables
{
	return $ch->query(
		"SELECT count() FROM system.tables WHERE startsWith(name, '_ctas_fed_')") + 0;
}

sub ch_exists
{
	my ($t) = @_;
	return $ch->query("EXISTS TABLE dw.`$t`") + 0;
}

sub records
{
	return $local->safe_psql('postgres',
		q{SELECT count(*) FROM pg_ls_dir('pg_ctas_fed', true, false) f WHERE f LIKE 'ch\_%'}) + 0;
}

sub start_time
{
	return $local->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
}

# ------------------------------------------------------------------------
# 1. Damaged durable records
# ------------------------------------------------------------------------

my $dbid = $local->safe_psql('postgres',
	q{SELECT oid FROM pg_database WHERE datname = 'postgres'});
my $srvid = $local->safe_psql('postgres',
	q{SELECT oid FROM pg_foreign_server WHERE srvname = 'lake'});
my $umid = $local->safe_psql('postgres',
	q{SELECT umid FROM pg_user_mappings WHERE srvname = 'lake'});
my $sysid = $local->safe_psql('postgres',
	'SELECT system_identifier FROM pg_control_system()');
my $recdir = $local->data_dir . '/pg_ctas_fed';
mkdir $recdir, 0700 unless -d $recdir;

# an aborted local transaction, for the records below
sub aborted_xid
{
	return $local->safe_psql('postgres', 'BEGIN; SELECT txid_current(); ROLLBACK;');
}

# write a record file as the server would, plus $extra bytes; returns path
sub write_record
{
	my ($xid, $content) = @_;
	my $path = "$recdir/ch_${xid}_${srvid}_${umid}";
	open(my $fh, '>', $path) or die "cannot write $path: $!";
	binmode $fh;
	print $fh $content;
	close $fh;
	chmod 0600, $path;
	return $path;
}

sub record_header
{
	my ($xid, $gid) = @_;
	return "ctas_fed clickhouse\t1\t$xid\t$dbid\t$srvid\t$umid\t$gid\n";
}

# the resolver, called by hand; returns (ret, stdout, stderr)
sub resolve
{
	return $local->psql('postgres',
		q{SELECT action FROM ctas_fed.resolve_in_doubt('lake')});
}

# a real record, to learn its exact layout: a transaction that stays open
# (its record then exists) while we copy the file
{
	my ($h) = start_psql($local, q{BEGIN;
CREATE TABLE lake.dw.realrec AS SELECT 1 AS a;
SELECT pg_sleep(60);});
	my $real;
	foreach (1 .. 200)
	{
		opendir(my $d, $recdir);
		my @f = grep { /^ch_\d+_\d+_\d+$/ } readdir($d);
		closedir $d;
		if (@f)
		{
			open(my $fh, '<', "$recdir/$f[0]") or next;
			local $/;
			$real = <$fh>;
			close $fh;
			last if defined $real && $real =~ /\n.*\n/s;
		}
		usleep(50_000);
	}
	$local->safe_psql('postgres',
		q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid != pg_backend_pid()});
	$h->finish;
	ok(defined $real, 'a live transaction has a durable record');
	like($real // '', qr/\ncrc32c\t[0-9A-F]{8}\n\z/,
		'a record ends with the checksum of its lines');
}

# --- 1a. an action line cut short: fewer fields than an action has.  The
# old reader took the six fields for granted and read past the row.
$ch->query('CREATE TABLE dw.keep (a Int32) ENGINE = Memory');
$ch->query('INSERT INTO dw.keep VALUES (42)');
my $t0  = start_time();
my $xid = aborted_xid();
my $path = write_record($xid, record_header($xid, 'dw._ctas_fed_new_x') . "create\tdw\n");
my ($ret, $out, $err) = resolve();
is($ret, 0, 'short action line: resolve_in_doubt() returns') or diag $err;
is(start_time(), $t0, 'short action line: the server did not restart');
ok(-e $path, 'short action line: the record is kept');
like($err, qr/damaged/, 'short action line: a WARNING says the record is damaged');
is($ch->query('SELECT a FROM dw.keep'), "42\n", 'short action line: no table touched');
unlink $path;

# --- 1b. a header only (the lines of the actions lost) and a record cut
# inside its last field: nothing may be acted on, the file stays.
$xid = aborted_xid();
# a well-formed record of two creates, with a cut after the first line
my $full = record_header($xid, "dw._ctas_fed_new_${sysid}_${xid}_1_t1")
  . "create\tdw\tt1\t_ctas_fed_stage_${sysid}_${xid}_1\t\\N\t_ctas_fed_new_${sysid}_${xid}_1_t1\n"
  . "create\tdw\tt2\t_ctas_fed_stage_${sysid}_${xid}_2\t\\N\t_ctas_fed_new_${sysid}_${xid}_2_t2\n";
my @lines = split /(?<=\n)/, $full;
foreach my $case (
	[ 'header only', $lines[0] ],
	[ 'one of two actions', $lines[0] . $lines[1] ],
	[ 'cut inside a field', substr($full, 0, length($full) - 9) ],
	[ 'a byte changed', $full =~ s/_1\t\\N/_3\t\\N/r ],
	[ 'garbage', "\x01\x02\x03 not a record \x7f\n" ])
{
	my ($name, $content) = @$case;
	foreach my $n (1, 2)
	{
		$ch->query("CREATE TABLE IF NOT EXISTS dw._ctas_fed_stage_${sysid}_${xid}_$n "
			  . "(a Int32) ENGINE = Memory");
	}
	$path = write_record($xid, $content);
	($ret, $out, $err) = resolve();
	is($ret, 0, "$name: resolve_in_doubt() returns") or diag $err;
	ok(-e $path, "$name: the record is kept");
	is(ch_exists("_ctas_fed_stage_${sysid}_${xid}_1")
		  + ch_exists("_ctas_fed_stage_${sysid}_${xid}_2"),
		2, "$name: no table named by it was dropped");
	like($err, qr/damaged/, "$name: a WARNING says the record is damaged");
	unlink $path;
}
is(start_time(), $t0, 'damaged records: the server never restarted');
$ch->query("DROP TABLE dw._ctas_fed_stage_${sysid}_${xid}_1");
$ch->query("DROP TABLE dw._ctas_fed_stage_${sysid}_${xid}_2");

# ------------------------------------------------------------------------
# 2. resolve_in_doubt() of another user acts only on its own mapping's
# transactions: a transaction of postgres's mapping, left in doubt (the
# proxy keeps its staging table from being dropped), is neither touched
# with alice's ClickHouse credentials nor shown to her.
# ------------------------------------------------------------------------
my $fp   = start_fault_proxy($ch->{http_port});
my $purl = 'http://127.0.0.1:' . $fp->port;
$local->safe_psql('postgres', qq{
CREATE SERVER flaky FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url '$purl', connect_timeout '2', timeout '10');
CREATE USER MAPPING FOR postgres SERVER flaky OPTIONS (user 'default', password '$chpw');
CREATE ROLE alice LOGIN;
GRANT USAGE ON FOREIGN SERVER flaky TO alice;
GRANT EXECUTE ON FUNCTION ctas_fed.resolve_in_doubt(name) TO alice;
CREATE USER MAPPING FOR alice SERVER flaky OPTIONS (user 'default', password '$chpw');
});
my $r1 = $fp->set_rule(match => 'INSERT INTO `dw`.`_ctas_fed_stage_', action => 'drop_request');
my $r2 = $fp->set_rule(match => 'DROP TABLE IF EXISTS `dw`.`_ctas_fed_stage_',
	action => 'drop_request', times => 0);
($ret, $out, $err) = $local->psql('postgres',
	'CREATE TABLE flaky.dw.bobs AS SELECT g FROM generate_series(1, 1000) g');
isnt($ret, 0, 'other mapping: the load fails (its INSERT never arrives)');
ok($fp->wait_hit($r2, 1, 10), 'other mapping: the staging table could not be dropped');
is(records(), 1, 'other mapping: its durable record stays');
my $stage = $ch->query(
	"SELECT name FROM system.tables WHERE database = 'dw' AND startsWith(name, '_ctas_fed_stage_')");
chomp $stage;
isnt($stage, '', 'other mapping: its staging table stays');
($ret, $out, $err) = $local->psql('postgres',
	q{SELECT object || ': ' || action FROM ctas_fed.resolve_in_doubt('flaky')},
	extra_params => [ '-U', 'alice' ]);
is($ret, 0, 'other mapping: alice may run resolve_in_doubt()') or diag $err;
is($out, '', "other mapping: alice's call neither acts on nor shows postgres's transaction");
is(records(), 1, "other mapping: the record is still there after alice's call");
$fp->clear;
my $clean = 0;
foreach (1 .. 100)
{
	$local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.resolve_in_doubt('flaky')});
	if (records() == 0 && scratch_tables() == 0) { $clean = 1; last; }
	usleep(100_000);
}
ok($clean, "other mapping: postgres's own resolution cleans up");

# ------------------------------------------------------------------------
# 3. A ClickHouse user plants the scratch table names the next transactions
# of this cluster would use (system identifier and xids can be guessed):
# the staging table of a create, the renamed-away table of a replace and
# of a DROP TABLE.  The loads must succeed without touching the planted
# tables (before: the CREATE failed and abort dropped the planted table;
# the RENAME failed and the replace stayed in doubt for ever).
# ------------------------------------------------------------------------
$ch->query('CREATE TABLE dw.prized (a Int32) ENGINE = Memory');
$ch->query('INSERT INTO dw.prized VALUES (7)');
$ch->query('CREATE TABLE dw.doomed (a Int32) ENGINE = Memory');
my $next = $local->safe_psql('postgres', 'SELECT txid_current()') + 1;
my @planted;
foreach my $x ($next .. $next + 5)
{
	push @planted, "_ctas_fed_stage_${sysid}_${x}_1",
	  "_ctas_fed_old_${sysid}_${x}_1_prized",
	  "_ctas_fed_drop_${sysid}_${x}_1_doomed";
}
foreach my $t (@planted)
{
	$ch->query("CREATE TABLE dw.`$t` (a Int32) ENGINE = Memory");
	$ch->query("INSERT INTO dw.`$t` VALUES (666)");
}
sub planted_intact
{
	my $n = 0;
	foreach my $t (@planted)
	{
		$n++ if ch_exists($t) && $ch->query("SELECT a FROM dw.`$t`") eq "666\n";
	}
	return $n;
}

($ret, $out, $err) = $local->psql('postgres',
	'CREATE TABLE lake.dw.fresh AS SELECT g AS a FROM generate_series(1, 100) g');
is($ret, 0, 'planted names: a create succeeds') or diag $err;
is(ch_exists('fresh') ? $ch->query('SELECT count() FROM dw.fresh') : 'none', "100\n", 'planted names: with its rows');
($ret, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE lake.dw.prized WITH (if_exists = 'replace') AS SELECT g AS a FROM generate_series(1, 50) g});
is($ret, 0, 'planted names: a replace succeeds') or diag $err;
is(ch_exists('prized') ? $ch->query('SELECT count() FROM dw.prized') : 'none', "50\n", 'planted names: the new content replaced the old');
($ret, $out, $err) = $local->psql('postgres', 'DROP TABLE lake.dw.doomed');
is($ret, 0, 'planted names: a DROP TABLE succeeds') or diag $err;
is(ch_exists('doomed'), 0, 'planted names: the table is gone');
is(planted_intact(), scalar(@planted), 'planted names: every planted table is untouched');
is(scratch_tables(), scalar(@planted), 'planted names: no scratch table of ours is left');
is(records(), 0, 'planted names: no durable record is left');
$ch->query("DROP TABLE IF EXISTS dw.`$_`") foreach @planted;

# --- a user target called like our scratch tables is refused (42939),
# in every mode, before anything is created
foreach my $w ('', q{WITH (if_exists = 'replace') }, q{WITH (atomic = false) })
{
	($ret, $out, $err) = $local->psql('postgres',
		"CREATE TABLE lake.dw._ctas_fed_stage_1_2_3 ${w}AS SELECT 1 AS a",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/42939.*table name "_ctas_fed_stage_1_2_3" is reserved/,
		"scratch-like target ${w}is refused");
}
is(ch_exists('_ctas_fed_stage_1_2_3'), 0, 'scratch-like target: nothing created');

# ------------------------------------------------------------------------
# 4. order_by / partition_by that read beyond the row.  ClickHouse evaluates
# a partition key at each INSERT and quotes what it cannot convert in its
# error: a subquery there let a user of a shared mapping read any table the
# mapping's ClickHouse user may read, and reach other hosts from the
# ClickHouse server (url(), remote()).  Refused before anything is sent.
# ------------------------------------------------------------------------
$ch->query('CREATE TABLE dw.secret (s String) ENGINE = Memory');
$ch->query("INSERT INTO dw.secret VALUES ('topsecret')");
$local->safe_psql('postgres', 'GRANT USAGE ON FOREIGN SERVER lake TO alice');
foreach my $opt (
	q{partition_by = 'toUInt8((SELECT s FROM dw.secret))'},
	q{partition_by = 'toUInt8((select s from dw.secret))'},
	q{partition_by = 'toUInt8((SELECT * FROM url(''http://127.0.0.1:1/'', TSV, ''s String'')))'},
	q{order_by = 'a IN dw.secret'},
	q{partition_by = 'dictGetString(''d'', ''s'', toUInt64(a))'},
	q{partition_by = '`joinGet`(''dw.j'', ''s'', a)'},
	q{partition_by = 'notIn (a, dw.secret)'})
{
	($ret, $out, $err) = $local->psql('postgres',
		"CREATE TABLE lake.dw.leak WITH ($opt) AS SELECT 1 AS a",
		extra_params => [ '-U', 'alice', '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/22023: invalid value for option/, "reaching expression refused: $opt");
	unlike($err, qr/topsecret/, "reaching expression: nothing read: $opt");
}
is(ch_exists('leak'), 0, 'reaching expressions: no table created');
($ret, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE lake.dw.keys WITH (partition_by = 'intDiv(a, 10)', order_by = '(domain(s), a)')
	  AS SELECT g AS a, 'http://h' || g || '.example/x' AS s FROM generate_series(1, 30) g},
	extra_params => [ '-U', 'alice' ]);
is($ret, 0, 'ordinary key expressions still work') or diag $err;
is(ch_exists('keys') ? $ch->query('SELECT count() FROM dw.keys') : 'none', "30\n",
	'ordinary key expressions: all rows');

# --- names that need every escape: a database with a backquote, a dot and
# a space, a table with a dot, a space and a non-ASCII letter, and a table
# name of 63 bytes of 3-byte characters (ClickHouse escapes each byte in its
# file names: the scratch names around it approach 255 bytes)
$ch->query("CREATE DATABASE `we\\`ird.d b`");
my $long = "\x{20ac}" x 21;
foreach my $case (
	[ q{"we`ird.d b"}, qq{"tab le.\x{fc}"}, qq{`we\\`ird.d b`.`tab le.\x{fc}`} ],
	[ 'dw', qq{"$long"}, "dw.`$long`" ])
{
	my ($db, $tab, $chname) = @$case;
	utf8::encode($chname);
	my $name = "lake.$db.$tab";
	my @steps = (
		"CREATE TABLE $name AS SELECT g AS a FROM generate_series(1, 10) g",
		"CREATE TABLE $name WITH (if_exists = 'replace') AS SELECT g AS a FROM generate_series(1, 20) g",
		"CREATE TABLE $name WITH (if_exists = 'append') AS SELECT g AS a FROM generate_series(1, 5) g");
	utf8::encode($_) foreach @steps;
	foreach my $sql (@steps)
	{
		($ret, $out, $err) = $local->psql('postgres', $sql);
		is($ret, 0, "escaped names: step of $db") or diag $err;
	}
	is($ch->query("SELECT count(), sum(a) FROM $chname"), "25\t225\n",
		"escaped names: replace then append hold exactly their rows ($db)");
	my $drop = "DROP TABLE $name";
	utf8::encode($drop);
	($ret, $out, $err) = $local->psql('postgres', $drop);
	is($ret, 0, "escaped names: DROP TABLE ($db)") or diag $err;
	is(scratch_tables(), 0, "escaped names: no scratch table left ($db)");
	is(records(), 0, "escaped names: no durable record left ($db)");
}
is($ch->query("SELECT count() FROM system.tables WHERE database = 'we\\`ird.d b'"), "0\n",
	'escaped names: the tables are gone');

# ------------------------------------------------------------------------
# 5. Lost replies at steps test 204 does not cover: the CREATE of the
# staging table, the CREATE of the commit marker, a post-commit DROP, the
# KILL QUERY of a cancelled load.  Invariant after each case, once the
# resolver ran: the target holds exactly its rows iff the transaction
# committed, no _ctas_fed_ table and no record is left.
# ------------------------------------------------------------------------
sub flaky_sql
{
	my ($sql) = @_;
	return $local->psql('postgres', $sql);
}

sub flaky_clean
{
	my ($name) = @_;
	my $clean = 0;
	foreach (1 .. 100)
	{
		$local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.resolve_in_doubt('flaky')});
		if (records() == 0 && scratch_tables() == 0) { $clean = 1; last; }
		usleep(100_000);
	}
	ok($clean, "$name: no _ctas_fed_ table and no record left after resolution");
	my ($r, $o, $e) = flaky_sql(
		q{CREATE TABLE flaky.dw.probe WITH (if_exists = 'replace') AS SELECT 1 AS a});
	is($r, 0, "$name: the next load works") or diag $e;
}

my $lr = $fp->set_rule(match => 'CREATE TABLE `dw`.`_ctas_fed_stage_', action => 'lose_reply');
($ret, $out, $err) = flaky_sql(
	'CREATE TABLE flaky.dw.lr_stage AS SELECT g AS a FROM generate_series(1, 100) g');
ok($fp->wait_hit($lr, 1, 5), 'lost CREATE of the staging table: the reply was lost');
$fp->clear;
isnt($ret, 0, 'lost CREATE of the staging table: the statement fails');
is(ch_exists('lr_stage'), 0, 'lost CREATE of the staging table: no target table');
flaky_clean('lost CREATE of the staging table');

$lr = $fp->set_rule(match => 'CREATE TABLE `dw`.`_ctas_fed_new_', action => 'lose_reply');
($ret, $out, $err) = flaky_sql(
	'CREATE TABLE flaky.dw.lr_marker AS SELECT g AS a FROM generate_series(1, 100) g');
ok($fp->wait_hit($lr, 1, 5), 'lost CREATE of the marker: the reply was lost');
$fp->clear;
isnt($ret, 0, 'lost CREATE of the marker: the transaction rolls back');
is(ch_exists('lr_marker'), 0, 'lost CREATE of the marker: no target table');
flaky_clean('lost CREATE of the marker');

$ch->query('CREATE TABLE dw.lr_old (a Int32) ENGINE = Memory');
$ch->query('INSERT INTO dw.lr_old VALUES (1)');
$lr = $fp->set_rule(match => 'DROP TABLE IF EXISTS `dw`.`_ctas_fed_old_', action => 'lose_reply');
($ret, $out, $err) = flaky_sql(
	q{CREATE TABLE flaky.dw.lr_old WITH (if_exists = 'replace') AS SELECT g AS a FROM generate_series(1, 100) g});
ok($fp->wait_hit($lr, 1, 5), 'lost post-commit DROP: the reply was lost');
$fp->clear;
is($ret, 0, 'lost post-commit DROP: the transaction commits') or diag $err;
is($ch->query('SELECT count(), sum(a) FROM dw.lr_old'), "100\t5050\n",
	'lost post-commit DROP: the target holds exactly the new rows');
flaky_clean('lost post-commit DROP');

# the publishing RENAME ran but its reply is lost, and so are the replies
# to the system.tables checks of the abort: the abort cannot tell what to
# undo, leaves the record, and the resolver takes the published table back
my $lr1 = $fp->set_rule(match => 'RENAME TABLE `dw`.`_ctas_fed_stage_', action => 'lose_reply');
my $lr2 = $fp->set_rule(match => 'SELECT name FROM system.tables WHERE database', action => 'lose_reply',
	times => 0);
($ret, $out, $err) = flaky_sql(
	'CREATE TABLE flaky.dw.lr_check AS SELECT g AS a FROM generate_series(1, 100) g');
ok($fp->wait_hit($lr1, 1, 5) && $fp->wait_hit($lr2, 1, 5),
	'lost checks during abort: the RENAME and the check replies were lost');
isnt($ret, 0, 'lost checks during abort: the transaction rolls back');
like($err, qr/WARNING/, 'lost checks during abort: a WARNING says what is left');
is(records(), 1, 'lost checks during abort: the record stays for the resolver');
$fp->clear;
flaky_clean('lost checks during abort');
is(ch_exists('lr_check'), 0, 'lost checks during abort: the published table was taken back');

# a cancelled load whose KILL QUERY reply is lost: the cancel still returns
# promptly, and nothing stays (rows of 1 kB: the INSERT reaches ClickHouse
# with the first 1 MB, in about a second; narrow rows at this pace took
# longer than the 10 s the wait below gives it)
$lr = $fp->set_rule(match => 'KILL QUERY', action => 'lose_reply');
my ($kh, $kout, $kerr) = start_psql($local,
	q{CREATE TABLE flaky.dw.lr_kill AS SELECT g AS a, repeat('x', 1000) AS pad, pg_sleep(0.001) IS NULL AS s FROM generate_series(1, 100000) g});
my $kpid = wait_active($local, 'CREATE TABLE flaky.dw.lr_kill%');
ok(defined $kpid, 'lost KILL QUERY: the load runs');
my $staged = 0;
foreach (1 .. 100)
{
	$staged = $ch->query(
		"SELECT count() FROM system.processes WHERE query LIKE 'INSERT INTO `dw`.`_ctas_fed_stage_%'") + 0;
	last if $staged;
	usleep(100_000);
}
my $t_cancel = time();
$local->safe_psql('postgres', "SELECT pg_cancel_backend($kpid)");
$kh->finish;
my $took = time() - $t_cancel;
ok($took < 10, "lost KILL QUERY: the cancel returns within seconds (took ${took}s)");
like($$kerr, qr/cancel/, 'lost KILL QUERY: the statement was cancelled');
$fp->clear;
is(ch_exists('lr_kill'), 0, 'lost KILL QUERY: no target table');
flaky_clean('lost KILL QUERY');

# ------------------------------------------------------------------------
# 6. The job history file (pg_stat/ctas_fed_jobs.stat, jobs.c) damaged while
# the server was down: it is loaded all or nothing (header checksum, body
# checksum, every field checked), and job ids are never given out twice.
# ------------------------------------------------------------------------
# another user's job errors quote values of the rows: not for everyone
# (pg_stat_activity shows another user's query only to pg_read_all_stats)
($ret, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE lake.dw.private WITH (column_types = 'a UUID') AS SELECT 'card-4111-1111'::text AS a});
like($err, qr/card-4111-1111/, "a failed load's error quotes the value");
my $seen = $local->safe_psql('postgres',
	q{SELECT count(*) FROM ctas_fed.jobs WHERE error LIKE '%card-4111-1111%'},
	extra_params => [ '-U', 'alice' ]);
is($seen, '0', "another user's job error is hidden from alice");

my $jobs_file = $local->data_dir . '/pg_stat/ctas_fed_jobs.stat';
sub read_file_bytes
{
	my ($f) = @_;
	open(my $fh, '<:raw', $f) or die "cannot read $f: $!";
	local $/;
	my $d = <$fh>;
	close $fh;
	return $d;
}
sub write_file_bytes
{
	my ($f, $d) = @_;
	open(my $fh, '>:raw', $f) or die "cannot write $f: $!";
	print $fh $d;
	close $fh;
}
# CRC-32C (Castagnoli), as port/pg_crc32c.h computes it
my @crc32c_table = map {
	my $c = $_;
	$c = ($c & 1) ? (($c >> 1) ^ 0x82F63B78) : ($c >> 1) foreach (1 .. 8);
	$c;
} 0 .. 255;
sub crc32c
{
	my ($d) = @_;
	my $c = 0xFFFFFFFF;
	$c = $crc32c_table[($c ^ $_) & 0xFF] ^ ($c >> 8) foreach unpack('C*', $d);
	return $c ^ 0xFFFFFFFF;
}
# the header: magic, version, sizes of a job and of a catalog's counters,
# njobs, ncatalogs, next job id, CRC of the body, CRC of the header
my $hdrsize = 40;
sub reseal
{
	my ($file) = @_;
	my @h = unpack('L4 l2 q', $file);
	my $body = substr($file, $hdrsize);
	my $head = pack('L4 l2 q L', @h, crc32c($body));
	return $head . pack('L', crc32c($head)) . $body;
}
sub jobs_start
{
	my ($name, $detail) = @_;
	my $offset = -s $local->logfile;
	$local->start;
	like(slurp_file($local->logfile, $offset),
		qr/LOG:  ctas_fed job history file "pg_stat\/ctas_fed_jobs.stat" is damaged, starting with an empty history\n.*DETAIL:  $detail/,
		"$name: the server says the file is damaged");
	is($local->safe_psql('postgres', 'SELECT count(*) FROM ctas_fed.jobs'),
		'0', "$name: nothing of it is loaded");
}

foreach my $n (1 .. 3)
{
	$local->safe_psql('postgres',
		"CREATE TABLE lake.dw.hist$n AS SELECT $n AS a");
}
my $max_id = $local->safe_psql('postgres', 'SELECT max(job_id) FROM ctas_fed.jobs');
$local->stop;
my $saved = read_file_bytes($jobs_file);
my (undef, undef, $jobsize, undef, $njobs, undef, $next_id) = unpack('L4 l2 q', $saved);
ok($njobs >= 3 && $jobsize > 0 && $next_id > $max_id,
	"the job file holds the history ($njobs jobs) and the next id ($next_id)");
is(reseal($saved), $saved, 'the test computes the checksums as the server does');

# the file as saved loads
$local->start;
is($local->safe_psql('postgres', 'SELECT count(*), max(job_id) FROM ctas_fed.jobs'),
	"$njobs|$max_id", 'an intact job file is loaded');
$local->stop;

# cut inside the second job: before, the first job was loaded and the
# counter of job ids was not, so that new jobs got the ids of loaded ones
write_file_bytes($jobs_file, substr($saved, 0, $hdrsize + $jobsize + int($jobsize / 2)));
jobs_start('truncated job file', 'The file is \\d+ bytes long');
$local->safe_psql('postgres', 'CREATE TABLE lake.dw.hist_after AS SELECT 1 AS a');
my $dup = $local->safe_psql('postgres',
	'SELECT count(*) - count(DISTINCT job_id) FROM ctas_fed.jobs');
is($dup, 0, 'truncated job file: job ids stay unique');
cmp_ok($local->safe_psql('postgres', 'SELECT min(job_id) FROM ctas_fed.jobs'),
	'>', $max_id, 'truncated job file: no id of the lost history is given again');
$local->stop;

# the first job's bytes replaced (no NUL in its strings, an unknown state):
# the checksum of the body catches it; resealed with valid checksums, the
# checks of its fields do
# CtasJob on x86-64: in_use, job_id at 8, catalog[64] at 16, target[200],
# mode[16] at 280, state at 296
my $first = substr($saved, $hdrsize, $jobsize);
is(unpack('q', substr($first, 8, 8)) > 0 && substr($first, 280, 16) =~ /^(atomic|streaming|drop)\0/,
	1, 'the test knows where the fields of a job are');
my %bad = (
	'changed bytes' => "\x01" . ("\xff" x ($jobsize - 1)),
	'changed bytes, resealed' => "\x01" . ("\xff" x ($jobsize - 1)),
	'unterminated catalog, resealed' =>
		substr($first, 0, 16) . ('x' x 64) . substr($first, 80),
	'invalid UTF-8, resealed' =>
		substr($first, 0, 16) . "\xff\xfe\0" . substr($first, 19),
	'unknown state, resealed' =>
		substr($first, 0, 296) . pack('l', 6) . substr($first, 300),
	'future job id, resealed' =>
		substr($first, 0, 8) . pack('q', $next_id) . substr($first, 16));
foreach my $case (sort keys %bad)
{
	my $bad = $saved;
	substr($bad, $hdrsize, $jobsize) = $bad{$case};
	$bad = reseal($bad) if $case =~ /resealed/;
	write_file_bytes($jobs_file, $bad);
	jobs_start("damaged job ($case)", $case =~ /resealed/ ?
		'Job 0 holds a value the server cannot have written' :
		'The checksum of the jobs does not match the header');
	($ret, $out, $err) = $local->psql('postgres',
		q{SELECT count(*) FROM ctas_fed.jobs
		  WHERE convert_from(convert_to(concat(catalog, target, mode, state, error, gid), 'UTF8'), 'UTF8') IS NOT NULL});
	is($ret, 0, "damaged job ($case): ctas_fed.jobs shows only valid text") or diag $err;
	is($local->safe_psql('postgres',
		q{SELECT count(*) FROM ctas_fed.jobs WHERE state NOT IN ('running', 'prepared', 'committed', 'aborted', 'failed', 'in_doubt')}),
		'0', "damaged job ($case): no job in an unknown state");
	$local->safe_psql('postgres', 'CREATE TABLE lake.dw.hist_bad AS SELECT 1 AS a');
	cmp_ok($local->safe_psql('postgres', 'SELECT min(job_id) FROM ctas_fed.jobs'),
		'>', $max_id, "damaged job ($case): new job ids stay above the lost ones");
	$ch->query('DROP TABLE dw.hist_bad');
	$local->stop;
}

# a header damaged too: nothing of the file can be trusted, ids continue
# above any the server can have given out
my $bad = $saved;
substr($bad, 24, 8) = pack('q', 1);
write_file_bytes($jobs_file, $bad);
jobs_start('damaged header', "The header's magic number or checksum is wrong");
$local->safe_psql('postgres', 'CREATE TABLE lake.dw.hist_hdr AS SELECT 1 AS a');
cmp_ok($local->safe_psql('postgres', 'SELECT min(job_id) FROM ctas_fed.jobs'),
	'>', $max_id, 'damaged header: new job ids stay above the lost ones');
ok($local->safe_psql('postgres', 'SELECT 1') eq '1', 'damaged job file: the server runs');

# ------------------------------------------------------------------------
# 7. Deep brackets in a table option: ClickHouse 18.16 parses them
# recursively without limit, and a thousand levels crash the server (every
# query of every user lost), for anyone with USAGE on a catalog.  Refused
# beyond 32 levels, before anything is sent.  Last in this file: on code
# without the limit, ClickHouse is gone after it.
# ------------------------------------------------------------------------
my $deep = ('(' x 1000) . 'a' . (')' x 1000);
foreach my $opt ("order_by = '$deep'", "engine = 'MergeTree$deep'",
	"partition_by = '" . ('[' x 1000) . 'a' . (']' x 1000) . "'")
{
	($ret, $out, $err) = $local->psql('postgres',
		"CREATE TABLE lake.dw.deep WITH ($opt) AS SELECT 1 AS a",
		extra_params => [ '-U', 'alice', '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/22023: invalid value for option.*\n.*nested more than 32 deep/,
		'deep brackets refused: ' . substr($opt, 0, 20));
	is(eval { $ch->query('SELECT 1') } // 'ClickHouse is gone', "1\n",
		'deep brackets: ClickHouse still runs');
}
# index_granularity 0 (or a value that wraps around to it) makes the
# INSERT loop for ever in ClickHouse 18.16
foreach my $v ('0', '99999999999999999999', '0.5')
{
	($ret, $out, $err) = $local->psql('postgres',
		"CREATE TABLE lake.dw.gran WITH (settings = 'index_granularity = $v') AS SELECT g AS a FROM generate_series(1, 1000) g",
		extra_params => [ '-U', 'alice', '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/22023: invalid value for option "settings".*\n.*index_granularity must be/,
		"index_granularity = $v is refused");
}
is($ch->query(
	"SELECT count() FROM system.processes WHERE query LIKE 'INSERT INTO `dw`.`_ctas_fed_stage_%'"),
	"0\n", 'index_granularity: no INSERT left running');
($ret, $out, $err) = $local->psql('postgres',
	"CREATE TABLE lake.dw.gran WITH (settings = 'index_granularity = 64') AS SELECT g AS a FROM generate_series(1, 1000) g");
is($ret, 0, 'index_granularity = 64 is fine') or diag $err;

($ret, $out, $err) = $local->psql('postgres',
	"CREATE TABLE lake.dw.deep32 WITH (order_by = '" . ('(' x 32) . 'a' . (')' x 32) . "') AS SELECT 1 AS a");
is($ret, 0, 'brackets 32 deep are fine') or diag $err;

done_testing();
