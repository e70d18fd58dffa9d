
# Copyright (c) 2026, ctas_fed developers

# Attacks on continuous sync, create_tables_as and parallel loads, as a
# hostile non-superuser (and a hostile network) would make them.  The
# assertions say what must hold; a case whose bug lies in a file that the
# branch of this test did not fix is TODO, with the file and the reason.
#
#  1. a sync (a replication slot) needs REPLICATION
#  2. the sync worker runs the owner's code as the owner (constant
#     arguments folded too), and only code the owner may EXECUTE, with an
#     empty search_path; its publication is
#     not its creator's to change, its table not another CTAS's to replace
#     or append to, its names not another user's to take first; REPLICATION
#     revoked, USAGE revoked, the replica identity moved: the job fails for
#     good
#  3. create_tables_as: renames cut at 63 bytes (clashes found before any
#     remote work), a table named twice, an empty remote schema
#  4. row-level security and column privileges hold for create_tables_as
#     and parallel loads; 5. and for a sync after the fact
#  6. quotes, dots and mixed case; reserved scratch names
#  7. lost replies to the commit of a sync's copy and of a batch
#  8. two remote roles syncing into one remote schema: a progress table
#     another remote role owns is never used
#  9. ctas_fed.max_syncs_per_role: a non-superuser cannot hold every
#     background worker with syncs

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use CtasFed::Test;

my $local = new_cluster('local',
	conf => "wal_level = logical\nmax_wal_senders = 4\nmax_replication_slots = 10\n");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $rport = $remote->port;

$local->safe_psql('postgres', qq{
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR PUBLIC SERVER wh OPTIONS (user 'loader', password 'secret');
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
GRANT CREATE ON DATABASE postgres TO alice, mallory;
GRANT CREATE ON SCHEMA public TO alice, mallory;
GRANT USAGE ON FOREIGN SERVER wh TO alice, mallory;
});

# poll until $cond returns true, at most $secs seconds
sub wait_until
{
	my ($secs, $cond) = @_;
	my $deadline = time() + $secs;
	while (time() < $deadline)
	{
		return 1 if $cond->();
		usleep(100_000);
	}
	return $cond->();
}

# the error of $sql run as $role (superuser when undef), '' when it worked
sub sql_error
{
	my ($sql, $role) = @_;
	$sql = "SET ROLE $role; $sql" if defined $role;
	my ($rc, $out, $err) = $local->psql('postgres', $sql);
	return $rc == 0 ? '' : $err;
}

sub as_role
{
	my ($role, $sql) = @_;
	return $local->safe_psql('postgres', "SET ROLE $role; $sql");
}

sub remote
{
	return $remote->safe_psql('dw', $_[0]);
}

sub sync_state
{
	my ($table) = @_;
	return $local->safe_psql('postgres',
		"SELECT state FROM ctas_fed.syncs WHERE remote_table = '$table'");
}

sub our_slots
{
	return $local->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ctas_fed_sync_%'");
}


# ---------------------------------------------------------------------------
# 1. A sync creates a logical replication slot, which holds WAL until the
# worker confirms it: PostgreSQL lets only superusers and roles with
# REPLICATION create one (pg_create_logical_replication_slot).  A sync by a
# role without REPLICATION must be refused, before any remote work.
my $err = sql_error(q{
  CREATE TABLE m_src (id int PRIMARY KEY, v int);
  INSERT INTO m_src SELECT g, g FROM generate_series(1, 10) g;
  CREATE TABLE wh.public.m_sync WITH (sync = 'continuous') AS SELECT * FROM m_src;},
	'mallory');
like($err, qr/permission denied to create a continuous sync/,
	'slot: a role without REPLICATION may not create a sync');
is(remote(q{SELECT count(*) FROM pg_tables WHERE tablename = 'm_sync'}), '0',
	'slot: no remote table after the refusal');
is($local->safe_psql('postgres', q{
	  SELECT (SELECT count(*) FROM ctas_fed.syncs)
	       + (SELECT count(*) FROM pg_publication)
	       + (SELECT count(*) FROM pg_replication_slots)}),
	'0', 'slot: no job, publication or slot after the refusal');

# ---------------------------------------------------------------------------
# 2. The sync worker connects as the bootstrap superuser and switches to the
# job's owner only around the scan and the apply.  Everything that runs the
# owner's code must run as the owner: an IMMUTABLE function with constant
# arguments is evaluated by the planner when the worker prepares the
# query's expressions.
$local->safe_psql('postgres', 'ALTER ROLE alice REPLICATION; ALTER ROLE mallory REPLICATION');
as_role('alice', q{
  CREATE TABLE a_src (id int PRIMARY KEY, v int);
  INSERT INTO a_src SELECT g, g FROM generate_series(1, 20) g;
  CREATE FUNCTION whoami() RETURNS text IMMUTABLE LANGUAGE plpgsql
    AS $$ BEGIN RETURN current_user; END $$;
  CREATE TABLE wh.public.a_who WITH (sync = 'continuous')
    AS SELECT id, v, whoami() AS who FROM a_src;});
ok(wait_until(60, sub { sync_state('a_who') eq 'streaming' }),
	'owner code: sync streaming');
as_role('alice', 'INSERT INTO a_src VALUES (21, 21)');
ok(wait_until(60, sub { remote('SELECT count(*) FROM public.a_who') eq '21' }),
	'owner code: the new row was applied');
is(remote(q{SELECT string_agg(DISTINCT who, ',') FROM public.a_who}),
	'alice', 'owner code: the copy and the stream evaluate as the owner, not as the superuser');

# a function its owner may not EXECUTE: a sync's query is not run at
# statement time, so the check the executor would make must be made there
# (the worker would run it as the owner without asking)
$local->safe_psql('postgres', q{
  CREATE FUNCTION priv_fn(int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN RETURN $1 * 1000; END $$;
  REVOKE EXECUTE ON FUNCTION priv_fn(int) FROM PUBLIC;});
like(sql_error('SELECT priv_fn(1)', 'alice'), qr/permission denied for function priv_fn/,
	'execute: alice may not call priv_fn');
like(sql_error(q{CREATE TABLE wh.public.a_priv WITH (sync = 'continuous') AS SELECT id, priv_fn(v) AS p FROM a_src}, 'alice'),
	qr/permission denied for function priv_fn/, 'execute: nor through a sync');
like(sql_error(q{CREATE TABLE wh.public.a_priv WITH (sync = 'continuous') AS SELECT id, v FROM a_src WHERE priv_fn(v) > 0}, 'alice'),
	qr/permission denied for function priv_fn/, 'execute: nor in the WHERE of a sync');
is(remote(q{SELECT count(*) FROM pg_tables WHERE tablename = 'a_priv'}), '0',
	'execute: no remote table');

# the same as an escalation: a function that would make its caller a
# superuser, which only a superuser may do
$local->safe_psql('postgres', q{
  CREATE ROLE eve LOGIN REPLICATION;
  GRANT CREATE ON DATABASE postgres TO eve;
  GRANT CREATE ON SCHEMA public TO eve;
  GRANT USAGE ON FOREIGN SERVER wh TO eve;});
as_role('eve', q{
  CREATE TABLE e_src (id int PRIMARY KEY, v int);
  INSERT INTO e_src VALUES (1, 1);
  CREATE FUNCTION e_promote() RETURNS void VOLATILE LANGUAGE plpgsql AS $$
  BEGIN
    EXECUTE 'ALTER ROLE eve SUPERUSER';
  EXCEPTION WHEN OTHERS THEN NULL;
  END $$;
  CREATE FUNCTION e_const() RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
  BEGIN
    PERFORM public.e_promote();
    RETURN 1;
  END $$;
  CREATE TABLE wh.public.e_sync WITH (sync = 'continuous')
    AS SELECT id, v + e_const() AS v FROM e_src;});
ok(wait_until(60, sub { sync_state('e_sync') eq 'streaming' }),
	'escalation: sync streaming');
as_role('eve', 'INSERT INTO e_src VALUES (2, 2)');
ok(wait_until(60, sub { remote('SELECT count(*) FROM public.e_sync') eq '2' }),
	'escalation: the new row was applied');
is($local->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'eve'}),
	'f', 'escalation: the owner\'s function did not run as a superuser');
$local->safe_psql('postgres', 'ALTER ROLE eve NOSUPERUSER');

# ---------------------------------------------------------------------------
# 2b. The publication of a sync is the job's, not its owner's to change: with
# "publish = 'insert'" the worker would never see a DELETE and the remote
# table would silently keep the row; dropped or renamed, the worker would
# fail and retry for ever while its slot holds WAL.
my $pub = $local->safe_psql('postgres',
	q{SELECT publication FROM ctas_fed.syncs WHERE remote_table = 'a_who'});
like(sql_error(qq{ALTER PUBLICATION $pub SET (publish = 'insert')}, 'alice'),
	qr/must be owner of publication/, 'publication: its owner may not change what it publishes');
like(sql_error(qq{DROP PUBLICATION $pub}, 'alice'),
	qr/must be owner of publication/, 'publication: its owner may not drop it');
like(sql_error(qq{ALTER PUBLICATION $pub RENAME TO mine}, 'alice'),
	qr/must be owner of publication/, 'publication: its owner may not rename it');
as_role('alice', 'DELETE FROM a_src WHERE id = 1');
ok(wait_until(60, sub { remote('SELECT count(*) FROM public.a_who') eq '20' }),
	'publication: the delete reached the remote');

# another user's CREATE TABLE AS with if_exists 'replace' or 'append' into
# the table a sync keeps: refused, the sync's table stays the query's
like(sql_error(q{CREATE TABLE wh.public.a_who WITH (if_exists = 'replace')
                   AS SELECT 1 AS id, 1 AS v, 'mallory'::text AS who}, 'mallory'),
	qr/continuous sync into "wh\.public\.a_who" is streaming/,
	'synced table: another CTAS may not replace it');
like(sql_error(q{CREATE TABLE wh.public.a_who WITH (if_exists = 'append')
                   AS SELECT 1000 AS id, 1 AS v, 'mallory'::text AS who}, 'mallory'),
	qr/continuous sync into "wh\.public\.a_who" is streaming/,
	'synced table: another CTAS may not append to it');
like(sql_error(q{CREATE TABLE wh.public.a_who WITH (if_exists = 'replace')
                   AS SELECT id, v, 'again'::text AS who FROM a_src}, 'alice'),
	qr/continuous sync into "wh\.public\.a_who" is streaming/,
	'synced table: nor may its owner, while it runs');
is(remote(q{SELECT count(*) || ' ' || count(*) FILTER (WHERE id = 1000 OR who IN ('mallory', 'again')) FROM public.a_who}),
	'20 0', 'synced table: the remote rows are the sync\'s');

# names of the publication and the slot taken first by another user: the
# sync takes the next free name, and leaves the squatter's objects alone
my ($dboid, $next) = split /\|/, $local->safe_psql('postgres', q{
  SELECT (SELECT oid FROM pg_database WHERE datname = 'postgres'),
         last_value + 1 FROM ctas_fed.syncs_sync_id_seq});
my @squat = map { "ctas_fed_sync_${dboid}_" . ($next + $_) } 0 .. 2;
as_role('mallory', qq{
  CREATE PUBLICATION $squat[0];
  CREATE PUBLICATION $squat[1];
  SELECT pg_create_logical_replication_slot('$squat[2]', 'pgoutput');});
is(sql_error(q{CREATE TABLE wh.public.a_squat WITH (sync = 'continuous') AS SELECT id, v FROM a_src}, 'alice'),
	'', 'squatted names: the sync is created');
ok(wait_until(60, sub { sync_state('a_squat') eq 'streaming' }), 'squatted names: sync streaming');
is($local->safe_psql('postgres', q{
  SELECT publication NOT IN ('} . join("', '", @squat) . q{') FROM ctas_fed.syncs WHERE remote_table = 'a_squat'}),
	't', 'squatted names: the job has a name of its own');
is($local->safe_psql('postgres', qq{
  SELECT (SELECT count(*) FROM pg_publication p JOIN pg_roles r ON r.oid = p.pubowner
           WHERE pubname IN ('$squat[0]', '$squat[1]') AND rolname = 'mallory')
         || ' ' || (SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$squat[2]')}),
	'2 1', 'squatted names: the squatter\'s publications and slot are left alone');
sql_error(q{SELECT ctas_fed.stop_sync('wh.public.a_squat')}, 'alice');
as_role('mallory', qq{
  DROP PUBLICATION $squat[0];
  DROP PUBLICATION $squat[1];
  SELECT pg_drop_replication_slot('$squat[2]');});

# ---------------------------------------------------------------------------
# 3. create_tables_as: a "rename" is an identifier like the table name of a
# CREATE TABLE AS, which the parser cuts at 63 bytes; a remote PostgreSQL
# cuts it there too.  Two names that differ only after 63 bytes are one
# remote table: the call must see the clash before any remote work, not
# replace one table by the other.
my $long = 'x' x 63;
as_role('alice', q{
  CREATE TABLE r1 (id int PRIMARY KEY, v text);
  CREATE TABLE r2 (id int PRIMARY KEY, v text);
  INSERT INTO r1 SELECT g, 'one' FROM generate_series(1, 5) g;
  INSERT INTO r2 SELECT g, 'two' FROM generate_series(1, 7) g;});
$err = sql_error(qq{
  SELECT * FROM ctas_fed.create_tables_as('wh', 'public', ARRAY['r1', 'r2']::regclass[],
    options => '{"if_exists": "replace", "rename": {"r1": "${long}1", "r2": "${long}2"}}')},
	'alice');
like($err, qr/tables public\.r1 and public\.r2 would both be created as "$long"/,
	'long names: two renames cut to one name are a clash');
is(remote(qq{SELECT count(*) FROM pg_tables WHERE tablename = '$long'}), '0',
	'long names: no remote table after the clash');
# one long name is cut as the parser cuts a name, and the result says so
remote(qq{DROP TABLE IF EXISTS public."$long"});
my $res = as_role('alice', qq{
  SELECT target, rows FROM ctas_fed.create_tables_as('wh', 'public', ARRAY['r1']::regclass[],
    options => '{"rename": {"r1": "${long}1"}}')});
is($res, "public.$long|5", 'long names: the name is cut at 63 bytes, as in a statement');
is(remote(qq{SELECT count(*) FROM public."$long"}), '5', 'long names: remote table under the cut name');
remote(qq{DROP TABLE public."$long"});
# an empty remote schema (no statement can name one) is refused before any
# remote work, not left to the remote's parser (or ClickHouse's default
# database)
like(sql_error(q{SELECT * FROM ctas_fed.create_tables_as('wh', '', ARRAY['r1']::regclass[])}, 'alice'),
	qr/"remote_schema" must not be empty/, 'empty remote schema refused');
# one table under two spellings in a per-table object: an error, not the
# last one silently winning
like(sql_error(q{
  SELECT * FROM ctas_fed.create_tables_as('wh', 'public', ARRAY['r1', 'r2']::regclass[],
    options => '{"rename": {"r1": "first", "public.r1": "second"}}')}, 'alice'),
	qr/table public\.r1 is named more than once in option "rename"/,
	'rename: one table under two spellings refused');
like(sql_error(q{
  SELECT * FROM ctas_fed.create_tables_as('wh', 'public', ARRAY['r1', 'r2']::regclass[],
    options => '{"primary_key": {"r1": "id", "public.r1": null}}')}, 'alice'),
	qr/table public\.r1 is named more than once in option "primary_key"/,
	'per-table option: one table under two spellings refused');
is(remote(q{SELECT count(*) FROM pg_tables WHERE tablename IN ('r1', 'r2', 'first', 'second')}), '0',
	'rename: nothing created by the refused calls');

# ---------------------------------------------------------------------------
# 4. Row-level security and column privileges hold for create_tables_as and
# parallel loads: the rows a policy hides from the caller are not copied.
$local->safe_psql('postgres', q{
  CREATE ROLE bob;
  CREATE TABLE b_secret (id int PRIMARY KEY, owner_name text, secret text);
  ALTER TABLE b_secret OWNER TO bob;
  INSERT INTO b_secret SELECT g, CASE WHEN g <= 10 THEN 'alice' ELSE 'bob' END, md5(g::text)
    FROM generate_series(1, 3000) g;
  ALTER TABLE b_secret ENABLE ROW LEVEL SECURITY;
  CREATE POLICY mine ON b_secret FOR SELECT USING (owner_name = current_user);
  GRANT SELECT ON b_secret TO alice;
  CREATE TABLE b_cols (id int PRIMARY KEY, pub text, priv text);
  INSERT INTO b_cols VALUES (1, 'p', 's');
  ALTER TABLE b_cols OWNER TO bob;
  GRANT SELECT (id, pub) ON b_cols TO alice;});
is(as_role('alice', 'SELECT count(*) FROM b_secret'), '10', 'rls: alice sees her 10 rows');
as_role('alice', q{
  SELECT * FROM ctas_fed.create_tables_as('wh', 'public', ARRAY['b_secret']::regclass[],
    options => '{"rename": {"b_secret": "rls_multi"}}')});
is(remote('SELECT count(*) FROM public.rls_multi'), '10',
	'rls: create_tables_as copies only the rows the policy shows');
as_role('alice', q{
  SET max_parallel_workers_per_gather = 0;
  CREATE TABLE wh.public.rls_par WITH (parallel = 2) AS SELECT * FROM b_secret});
is(remote('SELECT count(*) FROM public.rls_par'), '10',
	'rls: a parallel load copies only the rows the policy shows');
as_role('alice', q{
  SELECT * FROM ctas_fed.create_tables_as('wh', 'public', ARRAY['b_secret']::regclass[],
    options => '{"parallel": 2, "rename": {"b_secret": "rls_multi_par"}}')});
is(remote('SELECT count(*) FROM public.rls_multi_par'), '10',
	'rls: create_tables_as with parallel workers copies only the rows the policy shows');
like(sql_error(q{
  SELECT * FROM ctas_fed.create_tables_as('wh', 'public', ARRAY['b_cols']::regclass[])}, 'alice'),
	qr/permission denied for table b_cols/, 'column privileges: SELECT * of a table with a hidden column refused');
like(sql_error(q{CREATE TABLE wh.public.cols_par WITH (parallel = 2) AS SELECT * FROM b_cols}, 'alice'),
	qr/permission denied for table b_cols/, 'column privileges: a parallel load of a hidden column refused');
is(remote(q{SELECT count(*) FROM pg_tables WHERE tablename IN ('b_cols', 'cols_par')}), '0',
	'column privileges: no remote table');

# a sync through create_tables_as (option "sync"), of a table the caller
# does not own: refused like the statement
like(sql_error(q{
  SELECT * FROM ctas_fed.create_tables_as('wh', 'public', ARRAY['b_secret']::regclass[],
    options => '{"sync": "continuous", "rename": {"b_secret": "rls_sync"}}')}, 'alice'),
	qr/row-level security|must be owner/, 'rls: no sync of a table with row-level security');

# ---------------------------------------------------------------------------
# 5. A sync made while its owner could read every row keeps to what the
# owner may read: row-level security enabled later, or the table given to
# another owner who grants SELECT under a policy.
as_role('alice', q{
  CREATE TABLE a_later (id int PRIMARY KEY, owner_name text);
  INSERT INTO a_later SELECT g, 'alice' FROM generate_series(1, 5) g;
  CREATE TABLE wh.public.a_later WITH (sync = 'continuous') AS SELECT * FROM a_later;});
ok(wait_until(60, sub { sync_state('a_later') eq 'streaming' }), 'rls later: sync streaming');
$local->safe_psql('postgres', q{
  ALTER TABLE a_later OWNER TO bob;
  GRANT SELECT ON a_later TO alice;
  ALTER TABLE a_later ENABLE ROW LEVEL SECURITY;
  CREATE POLICY mine ON a_later FOR SELECT USING (owner_name = current_user);
  INSERT INTO a_later SELECT g, 'bob' FROM generate_series(6, 9) g;});
is(as_role('alice', 'SELECT count(*) FROM a_later'), '5', 'rls later: alice sees 5 rows');
# wait for the worker to have read past the insert: the job fails, or
# its remote table has what it applied
ok(wait_until(30, sub {
	sync_state('a_later') eq 'failed'
	  || remote('SELECT count(*) FROM public.a_later') ne '5' }),
	'rls later: the worker saw the insert');
is(remote('SELECT count(*) FROM public.a_later'), '5',
	'rls later: no row hidden by the policy reaches the remote');

# the owner of a sync loses REPLICATION: the sync must stop holding its slot
$local->safe_psql('postgres', 'ALTER ROLE alice NOREPLICATION');
as_role('alice', 'INSERT INTO a_src VALUES (22, 22)');
ok(wait_until(30, sub {
	sync_state('a_who') eq 'failed'
	  || remote('SELECT count(*) FROM public.a_who WHERE id = 22') eq '1' }),
	'replication revoked: the worker saw the insert');
is(sync_state('a_who'), 'failed', 'replication revoked: the job fails');
like($local->safe_psql('postgres', q{SELECT error FROM ctas_fed.syncs WHERE remote_table = 'a_who'}),
	qr/the owner of sync \d+ no longer has the REPLICATION attribute/,
	'replication revoked: the error says why');
$local->safe_psql('postgres', 'ALTER ROLE alice REPLICATION');

# the owner loses USAGE on the catalog: the worker (here made to start
# again) cannot rebuild the catalog, a state that does not heal by itself
as_role('alice', q{CREATE TABLE wh.public.a_use WITH (sync = 'continuous') AS SELECT id, v FROM a_src});
ok(wait_until(60, sub { sync_state('a_use') eq 'streaming' }), 'usage revoked: sync streaming');
$local->safe_psql('postgres', q{REVOKE USAGE ON FOREIGN SERVER wh FROM alice;
  SELECT pg_terminate_backend(pid) FROM pg_stat_activity
   WHERE backend_type = 'ctas_fed sync'
     AND application_name = (SELECT 'ctas_fed sync ' || sync_id FROM ctas_fed.syncs WHERE remote_table = 'a_use');});
ok(wait_until(30, sub { sync_state('a_use') eq 'failed' }), 'usage revoked: the job fails for good');
like($local->safe_psql('postgres', q{SELECT error FROM ctas_fed.syncs WHERE remote_table = 'a_use'}),
	qr/permission denied for foreign server wh|the owner of sync \d+ may no longer use catalog "wh"/,
	'usage revoked: the error says why');
$local->safe_psql('postgres', 'GRANT USAGE ON FOREIGN SERVER wh TO alice');

# the source's replica identity moved to another unique index that the
# query does not read (a whole-row sync follows the new key, 545): a DELETE
# then carries no value of the sync's key, which the job cannot follow; it
# must fail for good (and drop its slot), not retry for ever while its slot
# holds WAL
$local->safe_psql('postgres', q{
  CREATE TABLE ri_src (id int PRIMARY KEY, u int NOT NULL UNIQUE, v text);
  INSERT INTO ri_src SELECT g, g, 'v' FROM generate_series(1, 10) g;
  CREATE TABLE wh.public.ri WITH (sync = 'continuous') AS SELECT id, v FROM ri_src;});
ok(wait_until(60, sub { sync_state('ri') eq 'streaming' }), 'replica identity: sync streaming');
$local->safe_psql('postgres', q{
  ALTER TABLE ri_src REPLICA IDENTITY USING INDEX ri_src_u_key;
  DELETE FROM ri_src WHERE id = 1;});
ok(wait_until(30, sub { $local->safe_psql('postgres', q{
	  SELECT error IS NOT NULL OR state = 'failed' FROM ctas_fed.syncs WHERE remote_table = 'ri'}) eq 't' }),
	'replica identity: the job reports the change it cannot apply');
ok(wait_until(15, sub { sync_state('ri') eq 'failed' }), 'replica identity: the job fails for good');
$local->safe_psql('postgres', q{SELECT ctas_fed.stop_sync('wh.public.ri')})
  if sync_state('ri') ne 'failed';

# search_path: with the default search_path ("$user", public) an
# unqualified name in the owner's function could resolve to another user's
# object in public.  The worker runs with an empty search_path, as
# PostgreSQL's apply worker does: the name is not found, and the job says so.
as_role('mallory', q{
  CREATE FUNCTION public.fmt(int) RETURNS text IMMUTABLE LANGUAGE sql AS $$ SELECT 'hijacked' $$;});
$local->safe_psql('postgres', q{
  CREATE SCHEMA app AUTHORIZATION alice;
  ALTER ROLE alice SET search_path = app;});
as_role('alice', q{
  CREATE FUNCTION app.fmt(int) RETURNS text IMMUTABLE LANGUAGE sql AS $$ SELECT 'n' || $1 $$;
  CREATE FUNCTION app.show(int) RETURNS text IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN RETURN fmt($1); END $$;
  CREATE TABLE app.sp_src (id int PRIMARY KEY, v int);
  INSERT INTO app.sp_src SELECT g, g FROM generate_series(1, 5) g;
  CREATE TABLE wh.public.sp WITH (sync = 'continuous') AS SELECT id, app.show(v) AS s FROM app.sp_src;});
as_role('alice', 'INSERT INTO app.sp_src VALUES (6, 6)');
ok(wait_until(60, sub { $local->safe_psql('postgres', q{
	  SELECT state <> 'copying' OR error IS NOT NULL FROM ctas_fed.syncs WHERE remote_table = 'sp'}) eq 't' }),
	'search_path: the worker evaluated the owner\'s function');
is(remote(q{SELECT count(*) FROM public.sp WHERE s = 'hijacked'}), '0',
	'search_path: another user\'s function in public is not called');
# the worker retries, and clears the error when it opens the target again:
# the error is read until it shows (it did not, at one read, in a loaded run)
ok(wait_until(30, sub { $local->safe_psql('postgres', q{
	  SELECT coalesce(error, '') FROM ctas_fed.syncs WHERE remote_table = 'sp'}) =~ /function fmt\(integer\) does not exist/ }),
	'search_path: the job says which name it did not find');
$local->safe_psql('postgres', q{SELECT ctas_fed.stop_sync('wh.public.sp')})
  if sync_state('sp') =~ /copying|streaming/;

# ---------------------------------------------------------------------------
# 6. Names: quotes, dots and mixed case in the source, the target and
# stop_sync; the names of the project's own scratch objects refused.
$local->safe_psql('postgres', q{
  CREATE SCHEMA "Odd.Sch""ema";
  CREATE TABLE "Odd.Sch""ema"."Src.Ta""ble" ("Id" int PRIMARY KEY, "V.al" text);
  INSERT INTO "Odd.Sch""ema"."Src.Ta""ble" SELECT g, 'v' || g FROM generate_series(1, 30) g;
  CREATE TABLE wh.public."Tgt.Ta""ble" WITH (sync = 'continuous')
    AS SELECT "Id", "V.al" FROM "Odd.Sch""ema"."Src.Ta""ble" WHERE "Id" % 3 <> 0;});
ok(wait_until(60, sub { sync_state('Tgt.Ta"ble') eq 'streaming' }), 'odd names: sync streaming');
$local->safe_psql('postgres', q{
  UPDATE "Odd.Sch""ema"."Src.Ta""ble" SET "V.al" = 'changed' WHERE "Id" = 1;
  DELETE FROM "Odd.Sch""ema"."Src.Ta""ble" WHERE "Id" = 2;});
my $want = sql_digest($local, 'postgres', q{SELECT "Id", "V.al" FROM "Odd.Sch""ema"."Src.Ta""ble" WHERE "Id" % 3 <> 0});
ok(wait_until(60, sub { sql_digest($remote, 'dw', q{SELECT * FROM public."Tgt.Ta""ble"}) eq $want }),
	'odd names: the remote follows');
like(sql_error(q{SELECT ctas_fed.stop_sync('wh.public.tgt.ta"ble')}),
	qr/invalid sync target|no running sync/, 'odd names: stop_sync of an unquoted spelling finds nothing');
$local->safe_psql('postgres', q{SELECT ctas_fed.stop_sync('wh.public."Tgt.Ta""ble"')});
is(sync_state('Tgt.Ta"ble'), 'stopped', 'odd names: stop_sync of the quoted name');
like(sql_error(q{CREATE TABLE wh.public."_CTAS_FED_sync_progress" WITH (sync = 'continuous') AS SELECT id, v FROM a_src}, 'alice'),
	qr/table name "_CTAS_FED_sync_progress" is reserved/, 'reserved: a sync into a scratch name refused');
like(sql_error(q{
  SELECT * FROM ctas_fed.create_tables_as('wh', 'public', ARRAY['r1']::regclass[],
    options => '{"rename": {"r1": "_ctas_fed_sync_progress"}}')}, 'alice'),
	qr/table name "_ctas_fed_sync_progress" is reserved/, 'reserved: a rename to a scratch name refused');

# ---------------------------------------------------------------------------
# 7. The network: the reply to the commit of the sync's initial copy is lost
# (the remote committed the rows, the key and the progress; the worker saw
# a broken connection), then the reply to the commit of a streamed batch.
# The job copies again or resumes, and the remote equals the query.
my $fp = start_fault_proxy($rport);
my $fport = $fp->port;
$local->safe_psql('postgres', qq{
  CREATE SERVER whp FOREIGN DATA WRAPPER ctas_fed
    OPTIONS (type 'postgres', host '127.0.0.1', port '$fport', dbname 'dw');
  CREATE USER MAPPING FOR PUBLIC SERVER whp OPTIONS (user 'loader', password 'secret');
  CREATE TABLE lr_src (id int PRIMARY KEY, v text);
  INSERT INTO lr_src SELECT g, md5(g::text) FROM generate_series(1, 50000) g;});
my $rule = $fp->set_rule(match => 'ADD PRIMARY KEY', action => 'lose_reply');
$local->safe_psql('postgres',
	q{CREATE TABLE whp.public.lr WITH (sync = 'continuous') AS SELECT * FROM lr_src});
ok($fp->wait_hit($rule, 1, 60), 'lost reply: the commit of the copy was sent');
ok(wait_until(90, sub { sync_state('lr') eq 'streaming' }), 'lost reply: the job is streaming');
$local->safe_psql('postgres', 'UPDATE lr_src SET v = v || 1 WHERE id % 100 = 0; DELETE FROM lr_src WHERE id % 97 = 0');
$want = sql_digest($local, 'postgres', 'SELECT * FROM lr_src');
ok(wait_until(60, sub { sql_digest($remote, 'dw', 'SELECT * FROM public.lr') eq $want }),
	'lost reply (copy): the remote equals the source');
is(remote(q{SELECT count(*) FROM pg_index WHERE indrelid = 'public.lr'::regclass AND indisprimary}),
	'1', 'lost reply (copy): one primary key');
$rule = $fp->set_rule(match => '_ctas_fed_sync_progress (job, lsn) VALUES', action => 'lose_reply');
$local->safe_psql('postgres', 'UPDATE lr_src SET v = v || 2 WHERE id % 50 = 0; INSERT INTO lr_src VALUES (100001, 0)');
ok($fp->wait_hit($rule, 1, 60), 'lost reply: the commit of a batch was sent');
$local->safe_psql('postgres', 'DELETE FROM lr_src WHERE id % 41 = 0');
$want = sql_digest($local, 'postgres', 'SELECT * FROM lr_src');
ok(wait_until(90, sub { sql_digest($remote, 'dw', 'SELECT * FROM public.lr') eq $want }),
	'lost reply (stream): the remote equals the source');
$local->safe_psql('postgres', q{SELECT ctas_fed.stop_sync('whp.public.lr')});
# the slot is the stream's: it goes with the stream's last running sync
ok(wait_until(30, sub { $local->safe_psql('postgres', q{
	  SELECT count(*) FROM pg_replication_slots r JOIN ctas_fed.syncs s USING (slot_name)
	   WHERE s.remote_table = 'lr'
	     AND NOT EXISTS (SELECT FROM ctas_fed.syncs o WHERE o.stream_id = s.stream_id
	                        AND o.state IN ('copying', 'streaming'))}) eq '0'
	  && $local->safe_psql('postgres', q{
	  SELECT count(*) FROM pg_publication_tables WHERE tablename = 'lr_src'}) eq '0' }),
	'lost reply: stop_sync leaves no slot of its own, and its table leaves the publication');
is(remote('SELECT count(*) FROM pg_prepared_xacts'), '0', 'no prepared transaction left');

# ---------------------------------------------------------------------------
# 8. The remote side: the progress table "<schema>"._ctas_fed_sync_progress
# is one per remote schema, owned by the remote role whose sync made it
# first.  A sync through another remote role into the same schema cannot
# write it: the job retries for ever while its slot holds WAL.  (And the
# first role can rewrite the stored position of the other's jobs, which
# would then skip source transactions.)
$remote->safe_psql('dw', q{
  CREATE ROLE other LOGIN PASSWORD 'secret2';
  GRANT USAGE, CREATE ON SCHEMA public TO other;});
$local->safe_psql('postgres', qq{
  CREATE SERVER wh2 FOREIGN DATA WRAPPER ctas_fed
    OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
  CREATE USER MAPPING FOR PUBLIC SERVER wh2 OPTIONS (user 'other', password 'secret2');
  CREATE TABLE o_src (id int PRIMARY KEY, v int);
  INSERT INTO o_src SELECT g, g FROM generate_series(1, 5) g;
  CREATE TABLE wh2.public.o_sync WITH (sync = 'continuous') AS SELECT * FROM o_src;});
my $owned = qr/sync progress table public\._ctas_fed_sync_progress on catalog "wh2" is owned by role "\w+", not by the catalog's user/;
ok(wait_until(30, sub { $local->safe_psql('postgres', q{
	  SELECT coalesce(error, '') FROM ctas_fed.syncs WHERE remote_table = 'o_sync'}) =~ $owned }),
	'shared progress table: another remote role\'s table is not used, and the job says whose it is');
# even with every privilege on it: its owner could rewrite the position
$remote->safe_psql('dw', 'GRANT ALL ON public._ctas_fed_sync_progress TO other');
$local->safe_psql('postgres', q{
  UPDATE ctas_fed.syncs SET error = NULL WHERE remote_table = 'o_sync';
  SELECT pg_terminate_backend(pid) FROM pg_stat_activity
   WHERE backend_type = 'ctas_fed sync'
     AND application_name = (SELECT 'ctas_fed sync ' || stream_id FROM ctas_fed.syncs WHERE remote_table = 'o_sync');});
ok(wait_until(30, sub { $local->safe_psql('postgres', q{
	  SELECT coalesce(error, '') FROM ctas_fed.syncs WHERE remote_table = 'o_sync'}) =~ $owned }),
	'shared progress table: granted privileges on it change nothing');
is(remote(q{SELECT count(*) FROM public.o_sync}), '0',
	'shared progress table: nothing was copied through it');
$local->safe_psql('postgres', q{SELECT ctas_fed.stop_sync('wh2.public.o_sync')})
  if sync_state('o_sync') =~ /copying|streaming/;

# ---------------------------------------------------------------------------
# 9. A running sync holds a background worker and a replication slot for as
# long as it runs: with REPLICATION alone a role could take every worker
# slot of max_worker_processes.  ctas_fed.max_syncs_per_role bounds the
# syncs a non-superuser runs; stopped ones do not count.
$local->safe_psql('postgres', q{
  CREATE ROLE quota LOGIN REPLICATION;
  GRANT CREATE ON DATABASE postgres TO quota;
  GRANT USAGE ON FOREIGN SERVER wh TO quota;
  CREATE TABLE q_src (id int PRIMARY KEY, v int);
  INSERT INTO q_src SELECT g, g FROM generate_series(1, 5) g;
  ALTER TABLE q_src OWNER TO quota;
  ALTER SYSTEM SET ctas_fed.max_syncs_per_role = 1;
  SELECT pg_reload_conf();});
wait_until(30, sub { $local->safe_psql('postgres', 'SHOW ctas_fed.max_syncs_per_role') eq '1' });

# the error of a sync as quota, with its SQLSTATE
sub quota_sync
{
	my ($table) = @_;
	my ($rc, $out, $err) = $local->psql('postgres',
		"\\set VERBOSITY verbose\nSET ROLE quota;\n"
		  . "CREATE TABLE wh.public.$table WITH (sync = 'continuous') AS SELECT * FROM q_src;");
	return $rc == 0 ? '' : $err;
}

sub quota_running
{
	return $local->safe_psql('postgres', q{
	  SELECT count(*) FROM ctas_fed.syncs
	   WHERE owner = 'quota'::regrole AND state IN ('copying', 'streaming')});
}

is(quota_sync('q_one'), '', 'quota: the first sync of the role is made');
$err = quota_sync('q_two');
like($err, qr/ERROR:  53400: too many continuous syncs for role "quota"/,
	'quota: the second is refused with configuration_limit_exceeded');
like($err, qr/DETAIL:  The role has 1 continuous sync running in this database/,
	'quota: the detail counts the running syncs');
like($err, qr/HINT:  .*ctas_fed\.max_syncs_per_role/, 'quota: the hint names the setting');
is(remote(q{SELECT count(*) FROM pg_tables WHERE tablename = 'q_two'}), '0',
	'quota: no remote table after the refusal');
is(quota_running(), '1', 'quota: one job of the role');

as_role('quota', q{SELECT ctas_fed.stop_sync('wh.public.q_one')});
is(quota_sync('q_two'), '', 'quota: a stopped sync does not count');
ok(wait_until(60, sub { remote(q{SELECT count(*) FROM public.q_two}) eq '5' }),
	'quota: the allowed sync copies its rows');
as_role('quota', q{SELECT ctas_fed.stop_sync('wh.public.q_two')});

$local->safe_psql('postgres',
	'ALTER SYSTEM SET ctas_fed.max_syncs_per_role = 0; SELECT pg_reload_conf();');
wait_until(30, sub { $local->safe_psql('postgres', 'SHOW ctas_fed.max_syncs_per_role') eq '0' });
like(quota_sync('q_three'),
	qr/53400: too many continuous syncs.*\n.*DETAIL:  Only superusers may create continuous syncs while "ctas_fed\.max_syncs_per_role" is 0\./,
	'quota: 0 leaves syncs to superusers');
is(quota_running(), '0', 'quota: no job of the role runs');
$local->safe_psql('postgres',
	'ALTER SYSTEM RESET ctas_fed.max_syncs_per_role; SELECT pg_reload_conf();');

# ---------------------------------------------------------------------------
# 10. What runs as the extension's owner in a user's session (the check of
# DROP SERVER for running syncs, stop_sync, the quota) must not resolve an
# operator of the user's schemas: an "=" for oid and integer in a schema the
# user put before pg_catalog in the search_path would run with the owner's
# rights.
$local->safe_psql('postgres', q{
  CREATE ROLE oscar LOGIN;
  GRANT CREATE ON DATABASE postgres TO oscar;
  GRANT USAGE ON FOREIGN DATA WRAPPER ctas_fed TO oscar;});
as_role('oscar', q{
  CREATE SCHEMA oscar;
  CREATE FUNCTION oscar.oid_int_eq(oid, integer) RETURNS boolean LANGUAGE plpgsql AS $$
  BEGIN
    BEGIN
      EXECUTE 'ALTER ROLE oscar SUPERUSER';
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
    RETURN pg_catalog.oideq($1, $2::oid);
  END $$;
  CREATE OPERATOR oscar.= (LEFTARG = oid, RIGHTARG = integer, FUNCTION = oscar.oid_int_eq);
  CREATE SERVER oscar_srv FOREIGN DATA WRAPPER ctas_fed
    OPTIONS (type 'postgres', host '127.0.0.1', port '1', dbname 'x');});
my ($o_ret, $o_out, $o_err) = $local->psql('postgres',
	'SET ROLE oscar; SET search_path = oscar, pg_catalog; DROP SERVER oscar_srv');
is($o_ret, 0, 'search_path: oscar drops his own server') or diag $o_err;
is($local->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'oscar'}),
	'f', 'search_path: an operator in the caller\'s schema does not run as the extension\'s owner');

# ---------------------------------------------------------------------------
# 11. The owner's code may change a setting for the session
# (set_config(..., false) is allowed in a restricted operation): it must not
# outlive that code in the sync worker, whose own statements run as the
# bootstrap superuser and would then resolve "=" through the owner's schema.
as_role('eve', q{
  CREATE SCHEMA eve_s;
  CREATE FUNCTION eve_s.int8_eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
  BEGIN
    BEGIN
      EXECUTE 'ALTER ROLE eve SUPERUSER';
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
    RETURN pg_catalog.int8eq($1, $2);
  END $$;
  CREATE OPERATOR eve_s.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = eve_s.int8_eq);
  CREATE FUNCTION public.e_set(int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
  BEGIN
    PERFORM pg_catalog.set_config('search_path', 'eve_s, pg_catalog', false);
    RETURN $1;
  END $$;
  CREATE TABLE e_gsrc (id int PRIMARY KEY, v int);
  INSERT INTO e_gsrc VALUES (1, 1);
  CREATE TABLE wh.public.e_guc WITH (sync = 'continuous')
    AS SELECT id, public.e_set(v) AS v FROM e_gsrc;});
ok(wait_until(60, sub { sync_state('e_guc') eq 'streaming' }), 'settings: sync streaming');
as_role('eve', 'INSERT INTO e_gsrc VALUES (2, 2)');
ok(wait_until(60, sub { remote('SELECT count(*) FROM public.e_guc') eq '2' }),
	'settings: the change was applied (the owner\'s function ran in the worker)');
as_role('eve', 'INSERT INTO e_gsrc VALUES (3, 3)');
ok(wait_until(60, sub { remote('SELECT count(*) FROM public.e_guc') eq '3' }),
	'settings: and the next one, after more of the worker\'s own statements');
is($local->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'eve'}),
	'f', 'settings: a search_path set by the owner\'s code does not reach the worker\'s statements');
$local->safe_psql('postgres', q{ALTER ROLE eve NOSUPERUSER; SELECT ctas_fed.stop_sync('wh.public.e_guc')});

done_testing();
