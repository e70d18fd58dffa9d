
# Copyright (c) 2026, ctas_fed developers

# CREATE TABLE AS into a separate remote PostgreSQL cluster: every row
# arrives (checksums on both sides), and every failure - ROLLBACK, an error
# at row N, savepoint rollback, a second catalog failing, the remote backend
# killed mid-COPY - leaves no table and no prepared transaction.  Also the
# one-phase fallback, streaming mode, a non-superuser with a real password,
# cache reconnect, and resolve_in_doubt.  Cancel and statement_timeout,
# whose promptness is timed, are in 103_postgres_cancel.pl (run alone).

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

# the worker's resolver would race the gids this test makes by hand
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader', dw2 => 'loader' });
# a remote that cannot prepare transactions
my $nopre = new_remote_cluster(
	'nopre',
	max_prepared_transactions => 0,
	host_auth                 => 'scram-sha-256',
	roles                     => { loader => 'secret' },
	databases                 => { dw => 'loader' });

my $rport = $remote->port;
my $nport = $nopre->port;
$local->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE SERVER wh2 FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw2');
CREATE SERVER np FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$nport', dbname 'dw');
CREATE SERVER np_on FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$nport', dbname 'dw', two_phase 'on');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE USER MAPPING FOR PUBLIC SERVER wh2 OPTIONS (user 'loader', password 'secret');
CREATE USER MAPPING FOR PUBLIC SERVER np OPTIONS (user 'loader', password 'secret');
CREATE USER MAPPING FOR PUBLIC SERVER np_on OPTIONS (user 'loader', password 'secret');
CREATE ROLE analyst LOGIN;
GRANT USAGE ON FOREIGN SERVER wh TO analyst;
CREATE TABLE src AS
  SELECT g AS id,
         md5(g::text) || E'\\t\\n\\\\' || chr(1000 + g % 500) AS label,
         (g * 1.01)::numeric(14,2) AS amount,
         g * 0.5::float8 AS ratio,
         timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second' AS ts,
         CASE WHEN g % 7 = 0 THEN NULL ELSE g % 2 = 0 END AS flag,
         ARRAY[g, g + 1, NULL] AS arr,
         jsonb_build_object('g', g, 's', 'x' || g) AS doc
    FROM generate_series(1, 100000) g;
GRANT SELECT ON src TO analyst;
});

# digest of a table rendered as text, the same way on both sides
my $digest_sql = q{
  SET timezone = 'UTC'; SET extra_float_digits = 3;
  SELECT count(*) || ':' || coalesce(md5(string_agg(t::text, '|' ORDER BY t.id)), '-') FROM %s t};

sub remote_digest
{
	my ($node, $db, $table) = @_;
	return $node->safe_psql($db, sprintf($digest_sql, $table));
}

sub remote_tables
{
	my ($node, $db) = @_;
	return $node->safe_psql($db,
		"SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class "
		  . "WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'");
}

sub prepared_count
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		'SELECT count(*) FROM pg_prepared_xacts');
}

sub nothing_left
{
	my ($table, $what) = @_;
	my $tables = remote_tables($remote, 'dw');
	unlike(",$tables,", qr/,$table,/, "$what: no remote table");
	is(prepared_count($remote), '0', "$what: no prepared transaction");
}

my $local_digest = $local->safe_psql('postgres', sprintf($digest_sql, 'src'));

# --- success: every row, every value
my ($ret, $out, $err) = $local->psql('postgres',
	'CREATE TABLE wh.public.big AS SELECT * FROM src',
	extra_params => [ '--echo-errors', '-v', 'ON_ERROR_STOP=1' ]);
is($ret, 0, 'CTAS of 100000 rows succeeds') or diag $err;
is(remote_digest($remote, 'dw', 'big'), $local_digest,
	'every row arrives unchanged (count and md5 of all rows)');
is(prepared_count($remote), '0', 'no prepared transaction after commit');

# --- a non-superuser with a password that the remote really checks
($ret, $out, $err) = $local->psql('postgres',
	'SET ROLE analyst; CREATE TABLE wh.public.by_analyst AS SELECT id FROM src WHERE id <= 10');
is($ret, 0, 'non-superuser writes with a password-authenticated mapping')
  or diag $err;
is($remote->safe_psql('dw', 'SELECT count(*) FROM by_analyst'),
	'10', 'rows of the non-superuser arrive');
$local->safe_psql('postgres',
	"ALTER USER MAPPING FOR PUBLIC SERVER wh OPTIONS (SET password 'wrong-pw-xyz')");
($ret, $out, $err) = $local->psql('postgres',
	'CREATE TABLE wh.public.pw_test AS SELECT 1 AS a');
like($err, qr/could not connect to catalog "wh"/, 'wrong password: connection error names the catalog');
unlike($err, qr/wrong-pw-xyz/, 'the password is not in the error');
$local->safe_psql('postgres',
	"ALTER USER MAPPING FOR PUBLIC SERVER wh OPTIONS (SET password 'secret')");

# --- ROLLBACK
$local->safe_psql('postgres',
	'BEGIN; CREATE TABLE wh.public.rb AS SELECT * FROM src; ROLLBACK;');
nothing_left('rb', 'ROLLBACK');

# --- an error at row N of the query
($ret, $out, $err) = $local->psql('postgres',
	'CREATE TABLE wh.public.err_n AS SELECT id, 1 / (id - 54321) AS x FROM src');
like($err, qr/division by zero/, 'error at row 54321 is reported');
like($err, qr/after 54320 rows/, 'the error context says how far the load got');
nothing_left('err_n', 'error at row N');

# rows of a running job, as the registry publishes them (every 1000 rows)
sub job_rows
{
	my ($target) = @_;
	return $local->safe_psql('postgres',
		"SELECT coalesce(max(rows), 0) FROM ctas_fed.jobs "
		  . "WHERE target = '$target' AND state = 'running'");
}

# --- the remote backend dies mid-COPY
# (the load notices it when it sends its next 64 kB of COPY data: rows of
# 500 bytes fill that in a second, narrow rows at this pace would take 40)
my ($h, $hout, $herr) = start_psql_timed($local,
	"CREATE TABLE wh.public.killed AS SELECT g, repeat('x', 500) AS pad, pg_sleep(0.005) IS NULL AS s FROM generate_series(1, 100000) g",
	psql_args => [ '-v', 'VERBOSITY=verbose' ]);
ok(defined wait_active($local, 'CREATE TABLE wh.public.killed%'), 'the CTAS to break is running');
ok(wait_until(60, sub { job_rows('public.killed') >= 1000 }),
	'rows are flowing into the remote COPY');
my $killed = $remote->safe_psql('postgres',
	"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
	  . "WHERE application_name = 'ctas_fed' AND datname = 'dw'");
is($killed, '1', 'the remote backend of the load was terminated');
$h->finish;
like($$herr, qr/^ERROR:  08006: server closed the connection unexpectedly$/m,
	'the CTAS fails with a connection failure (08006) when its remote backend dies');
like($$herr, qr/^CONTEXT:  remote SQL command on catalog "wh": COPY$/m,
	'naming the catalog and the remote command');
nothing_left('killed', 'remote backend killed mid-COPY');
# the broken cached connection is replaced at the next transaction
($ret, $out, $err) = $local->psql('postgres',
	'CREATE TABLE wh.public.after_kill AS SELECT 1 AS a');
is($ret, 0, 'the next CTAS reconnects') or diag $err;

# --- one long-lived session: its cached connection breaks between two CTAS
my $bg = $local->background_psql('postgres', on_error_stop => 0);
$bg->query_safe('\set VERBOSITY verbose');
$bg->query_safe('CREATE TABLE wh.public.ll1 AS SELECT 1 AS a');
my $rpid = $remote->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE application_name = 'ctas_fed' AND datname = 'dw'");
like($rpid, qr/^\d+$/, 'the session keeps one remote connection between statements');
$remote->safe_psql('postgres', "SELECT pg_terminate_backend($rpid)");
ok(wait_until(30, sub {
			$remote->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE pid = $rpid") eq '0' }),
	'the remote backend of the session is gone');
$bg->{stderr} = '';
my ($ll2, $ll2_ret) = $bg->query('CREATE TABLE wh.public.ll2 AS SELECT 2 AS a');
my $ll2_err = $bg->{stderr};
$bg->{stderr} = '';
# as in postgres_fdw: BEGIN finds the connection broken, nothing was done on
# it in this transaction, so it is replaced and the statement goes on
is($ll2_ret, 0, 'the CTAS after the break reconnects and succeeds')
  or diag $ll2_err;
my (undef, $ll2_rows) = $remote->psql('dw', 'SELECT a FROM ll2');
is($ll2_rows, '2', 'and its row arrives');
isnt(
	$remote->safe_psql('dw',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'ctas_fed' AND datname = 'dw'"),
	$rpid,
	'on a new remote backend');
my ($ll3, $ll3_ret) = $bg->query('CREATE TABLE wh.public.ll3 AS SELECT 3 AS a');
is($ll3_ret, 0, 'the next CTAS of the same session succeeds') or diag $bg->{stderr};
is($remote->safe_psql('dw', 'SELECT a FROM ll3'), '3', 'and its row arrives');
is(prepared_count($remote), '0', 'no prepared transaction is left');

# a break after the remote transaction began is not papered over: the
# remote transaction and its work are gone, so the statement fails
$bg->query_safe('BEGIN');
$bg->query_safe('CREATE TABLE wh.public.ll4 AS SELECT 4 AS a');
$rpid = $remote->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE application_name = 'ctas_fed' AND datname = 'dw'");
$remote->safe_psql('postgres', "SELECT pg_terminate_backend($rpid)");
ok(wait_until(30, sub {
			$remote->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE pid = $rpid") eq '0' }),
	'the remote backend of the open transaction is gone');
my ($ll5, $ll5_ret) = $bg->query('CREATE TABLE wh.public.ll5 AS SELECT 5 AS a');
isnt($ll5_ret, 0, 'a CTAS after a break inside the transaction fails');
$bg->query('ROLLBACK');
nothing_left('ll4', 'break inside a transaction, first table');
nothing_left('ll5', 'break inside a transaction, second table');
$bg->quit;

# --- column_types: the rebuilt types (a keyword after a dot unquoted) are
# accepted by the remote and mean there what they say
my $ct_types = q{a varchar(10), b numeric(18,2), c interval, d "char", }
  . q{e timestamptz, f int[], g interval second(2), h bit(3)};
my $ct_query = q{SELECT 'abc' AS a, 12.5 AS b, interval '1 day' AS c, 'x' AS d, }
  . q{timestamptz '2024-01-01 00:00:00+00' AS e, ARRAY[1, 2] AS f, }
  . q{interval '1.5 s' AS g, B'101' AS h};
my $ct_explain = $local->safe_psql('postgres',
	"EXPLAIN (COSTS OFF) CREATE TABLE wh.public.ct_types "
	  . "WITH (column_types = '$ct_types') AS $ct_query");
like(
	$ct_explain,
	qr/Remote DDL: CREATE TABLE public\.ct_types \(a pg_catalog\.varchar\(10\), b pg_catalog\.numeric\(18, 2\), c pg_catalog\.interval, d "char", e timestamptz, f pg_catalog\.int4\[\], g pg_catalog\.interval\(4096, 2\), h pg_catalog\.bit\(3\)\)$/m,
	'EXPLAIN shows the remote types without needless quotes')
  or diag $ct_explain;
($ret, $out, $err) = $local->psql('postgres',
	"CREATE TABLE wh.public.ct_types WITH (column_types = '$ct_types') AS $ct_query");
is($ret, 0, 'a CTAS with those column_types succeeds') or diag $err;
is( $remote->safe_psql('dw', q{
SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
  FROM pg_attribute WHERE attrelid = 'public.ct_types'::regclass AND attnum > 0}),
	'a character varying(10), b numeric(18,2), c interval, d "char", '
	  . 'e timestamp with time zone, f integer[], g interval second(2), h bit(3)',
	'the remote columns have the types asked for');
is( $remote->safe_psql('dw', q{SELECT a, b, c, d, e AT TIME ZONE 'UTC', f, g, h FROM ct_types}),
	'abc|12.50|1 day|x|2024-01-01 00:00:00|{1,2}|00:00:01.5|101',
	'and the row arrives');

# --- savepoints
$local->safe_psql('postgres', q{
BEGIN;
CREATE TABLE wh.public.sp_keep AS SELECT 1 AS a;
SAVEPOINT s1;
CREATE TABLE wh.public.sp_drop AS SELECT * FROM src;
ROLLBACK TO SAVEPOINT s1;
COMMIT;
});
is(remote_tables($remote, 'dw') =~ /\bsp_keep\b/ ? 1 : 0, 1, 'savepoint: work before it commits');
nothing_left('sp_drop', 'ROLLBACK TO SAVEPOINT');

# --- two catalogs in one transaction, the second one failing
$remote->safe_psql('dw2', 'CREATE TABLE taken (a int)');
($ret, $out, $err) = $local->psql('postgres', q{
BEGIN;
CREATE TABLE wh.public.two_a AS SELECT * FROM src;
CREATE TABLE wh2.public.taken AS SELECT 1 AS a;
COMMIT;
});
like($err, qr/already exists in catalog "wh2"/, 'second catalog fails');
nothing_left('two_a', 'two catalogs, one failing');
is(remote_tables($remote, 'dw2'), 'taken', 'the second catalog is untouched');
# and both commit together
$local->safe_psql('postgres', q{
BEGIN;
CREATE TABLE wh.public.two_ok AS SELECT 1 AS a;
CREATE TABLE wh2.public.two_ok AS SELECT 2 AS a;
COMMIT;
});
is($remote->safe_psql('dw', 'SELECT a FROM two_ok') . $remote->safe_psql('dw2', 'SELECT a FROM two_ok'),
	'12', 'two catalogs commit together');

# --- one-phase fallback: the remote cannot prepare
($ret, $out, $err) = $local->psql('postgres',
	'CREATE TABLE np.public.one_phase AS SELECT id FROM src WHERE id <= 100');
is($ret, 0, 'two_phase auto commits in one phase when the remote cannot prepare') or diag $err;
is($nopre->safe_psql('dw', 'SELECT count(*) FROM one_phase'), '100', 'one-phase rows arrive');
($ret, $out, $err) = $local->psql('postgres',
	'BEGIN; CREATE TABLE np.public.one_phase_rb AS SELECT 1 AS a; ROLLBACK;');
is($nopre->safe_psql('dw', "SELECT count(*) FROM pg_class WHERE relname = 'one_phase_rb'"),
	'0', 'one-phase: ROLLBACK before commit still leaves nothing');
($ret, $out, $err) = $local->psql('postgres',
	'CREATE TABLE np_on.public.must_prepare AS SELECT 1 AS a');
like($err, qr/requires two-phase commit/, 'two_phase on refuses a remote that cannot prepare');

# --- streaming mode keeps committed batches
($ret, $out, $err) = $local->psql('postgres',
	"CREATE TABLE wh.public.stream WITH (atomic = false, commit_every = 10000) AS "
	  . "SELECT id, 1 / (id - 25001) AS x FROM (SELECT id FROM src ORDER BY id OFFSET 0) s");
like($err, qr/20000 rows were committed/, 'streaming error says how many rows were committed');
is($remote->safe_psql('dw', 'SELECT count(*) FROM stream'), '20000',
	'streaming: the table and two committed batches stay');

# --- resolve_in_doubt decides from the local transaction's status
my $sysid = $local->safe_psql('postgres',
	'SELECT system_identifier FROM pg_control_system()');
my $aborted = $local->safe_psql('postgres',
	'BEGIN; SELECT pg_current_xact_id(); ROLLBACK;');
my $committed = $local->safe_psql('postgres',
	'BEGIN; SELECT pg_current_xact_id(); CREATE TABLE mark (a int); COMMIT;');
$remote->safe_psql('dw', "SET ROLE loader; BEGIN; CREATE TABLE doubt_rb (a int); PREPARE TRANSACTION 'ctas_fed_${sysid}_${aborted}_1'");
$remote->safe_psql('dw', "SET ROLE loader; BEGIN; CREATE TABLE doubt_ok (a int); PREPARE TRANSACTION 'ctas_fed_${sysid}_${committed}_1'");
$remote->safe_psql('dw', "BEGIN; CREATE TABLE other (a int); PREPARE TRANSACTION 'ctas_fed_1_${committed}_1'");
my $actions = $local->safe_psql('postgres',
	"SELECT string_agg(action, ',' ORDER BY object) FROM ctas_fed.resolve_in_doubt('wh')");
is($actions, 'rolled back,committed', 'resolve_in_doubt acts on this cluster\'s gids only');
like(remote_tables($remote, 'dw'), qr/\bdoubt_ok\b/, 'committed local transaction: remote committed');
unlike(remote_tables($remote, 'dw'), qr/\bdoubt_rb\b/, 'aborted local transaction: remote rolled back');
is(prepared_count($remote), '1', 'another cluster\'s prepared transaction is left alone');
$remote->safe_psql('dw', "ROLLBACK PREPARED 'ctas_fed_1_${committed}_1'");

done_testing();
