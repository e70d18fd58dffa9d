
# Copyright (c) 2026, ctas_fed developers

# Hardening of the PostgreSQL target (issue 8):
#  - class 5: no user text reaches the remote SQL: column_types is rebuilt
#    from its parse, remote names hold no control character, _ctas_fed_
#    names are reserved;
#  - class 7: a mapping FOR a superuser on a server owned by a
#    non-superuser gets no trust authentication, in a session or in the
#    resolver;
#  - class 9: atomic = false with if_exists = 'replace' is refused;
#  - class 11: the loser of a race to create a table gets 42P07; DROP
#    SERVER / USER MAPPING / OWNED is refused while a load runs or is
#    prepared; register_catalog fires event triggers; a failed streaming
#    job records the rows its error says were committed.
# Class 10 (cancel, statement_timeout and pg_terminate_backend return
# promptly while the remote backend is stopped in the middle of COPY) is
# timed: it is in 104_postgres_stall.pl, which runs alone.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run ();
use Time::HiRes qw(time usleep);

use CtasFed::Test;

my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 1');
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
# a remote that lets anyone in from 127.0.0.1 without a password
my $trusting = new_remote_cluster('trusting');

my $rport = $remote->port;
$local->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
});

# psql on the local node reading $script from stdin, going on after
# errors, in the background; returns the handle and output references
sub bg_psql
{
	my ($script) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'psql', '-XAtq', '-v', 'VERBOSITY=verbose',
			'-d', $local->connstr('postgres')
		],
		'<', \$script, '>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

# poll $code until it returns true, for up to $secs seconds
sub poll_until
{
	my ($code, $secs) = @_;
	my $deadline = time + ($secs // 30);
	while (time < $deadline)
	{
		return 1 if $code->();
		usleep(50_000);
	}
	return 0;
}

sub remote_tables
{
	return $remote->safe_psql('dw',
		"SELECT coalesce(string_agg(relname, ',' ORDER BY relname), '') FROM pg_class "
		  . "WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'");
}

sub prepared_count
{
	my ($node) = @_;
	return ($node // $remote)->safe_psql('postgres',
		'SELECT count(*) FROM pg_prepared_xacts');
}

# psql on the local node with verbose errors: (exit code, stdout, stderr)
sub lpsql
{
	my ($sql) = @_;
	return $local->psql('postgres', $sql,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
}

# ---------------------------------------------------------------- class 5
# The attack: a trailing comment in column_types, and a column name whose
# line break ends that comment, so that the rest of the name becomes SQL
# of the remote CREATE TABLE (here a column with a DEFAULT).  Streaming
# mode commits the table first, so whatever was created would stay.
my ($ret, $out, $err) = lpsql(q{
CREATE TABLE wh.public.inj WITH (atomic = false, column_types = 'a int --')
  AS SELECT 1 AS a, 2 AS "b
, c int DEFAULT 42) --";
});
isnt($ret, 0, 'column_types with a comment and a line break in a name: refused');
unlike(',' . remote_tables() . ',', qr/,inj,/, 'no remote table was created');
is($remote->safe_psql('dw', 'SELECT count(*) FROM pg_attrdef'),
	'0', 'no remote column DEFAULT exists');

# each half of it on its own
($ret, $out, $err) = lpsql(
	"CREATE TABLE wh.public.inj WITH (column_types = 'a int --') AS SELECT 1 AS a");
like($err, qr/22023: invalid value for option "column_types": comments are not allowed/,
	'a comment in column_types is refused');
($ret, $out, $err) = lpsql(
	qq{CREATE TABLE wh.public.inj AS SELECT 1 AS "b\nc"});
like($err, qr/42602: column name "b\\x0ac" contains a control character/,
	'a line break in a column name is refused, naming the column');
($ret, $out, $err) = lpsql(
	qq{CREATE TABLE wh."pub\x7f".inj AS SELECT 1 AS a});
like($err, qr/42602: schema name "pub\\x7f" contains a control character/,
	'DEL in a schema name is refused');
($ret, $out, $err) = lpsql(
	"CREATE TABLE wh.public._ctas_fed_stage_1_2_3 AS SELECT 1 AS a");
like($err, qr/42939: table name "_ctas_fed_stage_1_2_3" is reserved/,
	'a _ctas_fed_ target name is reserved (42939)');
like($err, qr/HINT:  Choose a table name/, 'with a hint');
is(remote_tables(), '', 'nothing was created remotely');

# the remote type is the deparsed parse, and it works
($ret, $out, $err) = lpsql(q{
CREATE TABLE wh.public.typed
  WITH (column_types = 'a character varying(10), b "numeric"(8, 2)[], c timestamp(0) with time zone')
  AS SELECT 'abc' AS a, ARRAY[1.234] AS b, timestamptz '2024-01-01 10:00:00.7+00' AS c;
});
is($ret, 0, 'column_types with modifiers and arrays works') or diag $err;
is($remote->safe_psql('dw',
		"SELECT string_agg(format_type(atttypid, atttypmod), ', ' ORDER BY attnum) "
		  . "FROM pg_attribute WHERE attrelid = 'public.typed'::regclass AND attnum > 0"),
	'character varying(10), numeric(8,2)[], timestamp(0) with time zone',
	'the remote columns have the types asked for');

# ---------------------------------------------------------------- class 9
$remote->safe_psql('dw',
	'SET ROLE loader; CREATE TABLE keep AS SELECT g AS a FROM generate_series(1, 100) g');
($ret, $out, $err) = lpsql(q{
CREATE TABLE wh.public.keep WITH (atomic = false, if_exists = 'replace', commit_every = 10)
  AS SELECT 1 / (g - 50) AS a FROM generate_series(1, 100) g;
});
like($err, qr/22023: option if_exists = 'replace' needs atomic = true/,
	'atomic = false with if_exists = replace is refused');
like($err, qr/HINT:  Use atomic = true/, 'with a hint');
is($remote->safe_psql('dw', 'SELECT count(*) || \':\' || sum(a) FROM keep'),
	'100:5050', 'the table that was to be replaced is intact');

# ------------------------------------------------- class 11: streaming rows
# A remote statement trigger lets the first COPY pass and fails the second,
# right after the first batch committed.
$remote->safe_psql('dw', q{
SET ROLE loader;
CREATE SEQUENCE copies;
CREATE TABLE stream_app (id int);
CREATE FUNCTION second_copy_fails() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF nextval('public.copies') > 1 THEN
    RAISE EXCEPTION 'no second batch';
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER second_copy_fails BEFORE INSERT ON stream_app
  FOR EACH STATEMENT EXECUTE FUNCTION second_copy_fails();
});
($ret, $out, $err) = lpsql(q{
CREATE TABLE wh.public.stream_app
  WITH (atomic = false, if_exists = 'append', commit_every = 100)
  AS SELECT g AS id FROM generate_series(1, 1000) g;
});
like($err, qr/no second batch/, 'the second batch fails remotely');
like($err, qr/100 rows were committed in the remote table/,
	'the error says 100 rows were committed');
is($remote->safe_psql('dw', 'SELECT count(*) FROM stream_app'),
	'100', 'and 100 rows are there');
is($local->safe_psql('postgres',
		"SELECT state || ':' || rows FROM ctas_fed.jobs WHERE target = 'public.stream_app'"),
	'failed:100', 'the failed streaming job records the same 100 rows');

# ---------------------------------------------- class 11: concurrent create
{
	my $in = "BEGIN;\nCREATE TABLE wh.public.race AS SELECT 1 AS a;\nSELECT 'created';\n";
	my ($aout, $aerr) = ('', '');
	my $ha = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $local->connstr('postgres') ],
		'<', \$in, '>', \$aout, '2>', \$aerr);
	ok(poll_until(sub { $ha->pump_nb; $aout =~ /created/ }),
		'session A created the table and keeps its transaction open')
	  or diag $aerr;
	my ($hb, $bout, $berr) = bg_psql("CREATE TABLE wh.public.race AS SELECT 2 AS a;\n");
	ok( poll_until(
			sub {
				$hb->pump_nb;
				$remote->safe_psql('dw',
					"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
					  . "AND query LIKE 'CREATE TABLE public.race %'") eq '1';
			}),
		'session B waits for session A on the remote');
	$in .= "COMMIT;\n";
	$ha->finish;
	$hb->finish;
	like($$berr, qr/42P07: relation "public.race" already exists in catalog "wh"/,
		'the loser of the race gets 42P07 "already exists"');
	unlike($$berr, qr/23505|pg_type_typname_nsp_index/,
		'not the unique violation of the remote catalog');
	is($remote->safe_psql('dw', 'SELECT a FROM race'), '1', 'the winner\'s table is there');
	is(prepared_count(), '0', 'no prepared transaction is left');
}

# ------------------------------------------ class 11: DROP of a busy catalog
$local->safe_psql('postgres', q{
CREATE ROLE carol LOGIN;
GRANT USAGE ON FOREIGN SERVER wh TO carol;
CREATE USER MAPPING FOR carol SERVER wh OPTIONS (user 'loader', password 'secret');
});
{
	my ($h, $hout, $herr) = start_psql($local,
		"SET ROLE carol; CREATE TABLE wh.public.busy AS SELECT g, pg_sleep(0.01) IS NULL AS s FROM generate_series(1, 100000) g");
	ok(poll_until(
			sub {
				$local->safe_psql('postgres',
					"SELECT count(*) FROM ctas_fed.jobs WHERE target = 'public.busy' AND state = 'running'"
				) eq '1';
			}),
		'a load into wh is running');
	foreach my $stmt (
		'DROP SERVER wh CASCADE',
		'DROP USER MAPPING FOR carol SERVER wh',
		'DROP OWNED BY carol',
		'DROP FOREIGN DATA WRAPPER ctas_fed CASCADE',
		'DROP EXTENSION ctas_fed CASCADE')
	{
		($ret, $out, $err) = lpsql($stmt);
		like($err, qr/55006: catalog "wh" is being used by a running or in-doubt job/,
			"$stmt is refused while a load runs");
	}
	like($err, qr/HINT:  Let the load finish, or resolve what is in doubt/, 'with a hint');
	$local->safe_psql('postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%wh.public.busy%' AND pid <> pg_backend_pid()");
	$h->finish;
}
# prepared and waiting after its PREPARE: in doubt until it commits
{
	my ($h, $hout, $herr) = start_psql($local,
		"SET ctas_fed.fault_point = 'after_prepare:10'; CREATE TABLE wh.public.prep AS SELECT 1 AS a");
	ok(poll_until(sub { prepared_count() eq '1' }), 'a load into wh is prepared');
	($ret, $out, $err) = lpsql('DROP SERVER wh CASCADE');
	like($err, qr/55006: catalog "wh" is being used by a running or in-doubt job/,
		'DROP SERVER is refused while a transaction is prepared');
	like($err, qr/is prepared/, 'the detail names the state');
	$h->finish;
	is($remote->safe_psql('dw', 'SELECT a FROM prep'), '1',
		'the prepared load then commits');
}
is($local->safe_psql('postgres', "SELECT count(*) FROM pg_foreign_server WHERE srvname = 'wh'"),
	'1', 'the catalog is still there');
($ret, $out, $err) = lpsql(q{
CREATE SERVER idle FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', host '127.0.0.1');
CREATE USER MAPPING FOR PUBLIC SERVER idle OPTIONS (user 'x', password 'y');
DROP SERVER idle CASCADE;
});
is($ret, 0, 'a catalog with no work can be dropped') or diag $err;

# ------------------------------- class 11: register_catalog fires triggers
$local->safe_psql('postgres', q{
CREATE TABLE ddl_log (tag text, object text);
CREATE FUNCTION log_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
    INSERT INTO ddl_log VALUES (r.command_tag, r.object_identity);
  END LOOP;
END $$;
CREATE EVENT TRIGGER log_ddl ON ddl_command_end EXECUTE FUNCTION log_ddl();
SELECT ctas_fed.register_catalog('reg_evt', 'postgres', '{"host": "127.0.0.1", "port": 5432}');
DROP EVENT TRIGGER log_ddl;
});
is($local->safe_psql('postgres', "SELECT string_agg(tag || ' ' || object, ',') FROM ddl_log"),
	'CREATE SERVER reg_evt', 'register_catalog fires the ddl_command_end event trigger');
is($local->safe_psql('postgres',
		"SELECT array_to_string(srvoptions, ',') FROM pg_foreign_server WHERE srvname = 'reg_evt'"),
	'type=postgres,host=127.0.0.1,port=5432', 'with the options given');

# ---------------------------------------------------------------- class 7
# A non-superuser owns a server pointing at a remote that trusts local
# connections, and maps the superuser to the remote's superuser.
my $super = $local->safe_psql('postgres', 'SELECT current_user');
my $tport = $trusting->port;
$local->safe_psql('postgres', qq{
CREATE ROLE alice LOGIN;
GRANT USAGE ON FOREIGN DATA WRAPPER ctas_fed TO alice;
SET ROLE alice;
CREATE SERVER evil FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$tport', dbname 'postgres');
CREATE USER MAPPING FOR $super SERVER evil OPTIONS (user '$super');
});
# work in doubt there, of a local transaction that aborted
my $sysid = $local->safe_psql('postgres',
	'SELECT system_identifier FROM pg_control_system()');
my $aborted = $local->safe_psql('postgres',
	'BEGIN; SELECT pg_current_xact_id(); ROLLBACK;');
$trusting->safe_psql('postgres',
	"BEGIN; CREATE TABLE doubt (a int); PREPARE TRANSACTION 'ctas_fed_${sysid}_${aborted}_1'");

# (the resolver may hold the resolution lock for a moment: try again)
poll_until(
	sub {
		($ret, $out, $err) = lpsql("SELECT * FROM ctas_fed.resolve_in_doubt('evil')");
		$err !~ /another resolution/;
	});
like($out, qr/^evil\|\|error: password is required/m,
	'resolve_in_doubt does not connect by trust as the superuser');
like($out, qr/^evil\|\|error: .*owned by a non-superuser/m, 'and says why');
# from here on, only the background resolver connects to "evil"
my $log_offset = -s $local->logfile;
ok( poll_until(
		sub {
			slurp_file($local->logfile, $log_offset) =~
			  /Catalog "evil" is owned by a non-superuser/;
		},
		60),
	'the resolver refuses too, and logs why');
is(prepared_count($trusting), '1', 'the in-doubt transaction was not touched');
($ret, $out, $err) = lpsql('CREATE TABLE evil.public.t AS SELECT 1 AS a');
like($err, qr/password is required/, 'a CTAS by the superuser is refused too');

# a server owned by a superuser keeps the superuser exemption
$local->safe_psql('postgres', 'ALTER SERVER evil OWNER TO CURRENT_USER');
ok(poll_until(sub { prepared_count($trusting) eq '0' }, 60),
	'owned by a superuser: the resolver uses the superuser\'s mapping and resolves');

done_testing();
