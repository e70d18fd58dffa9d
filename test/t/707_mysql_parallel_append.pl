
# Copyright (c) 2026, ctas_fed developers

# parallel = N appending to an existing table of a MariaDB catalog: each
# worker loads the table in an XA branch of its own (gid of the leader's
# transaction), prepared at the end of its stream; the leader commits them
# all after the local commit, the abort rolls them all back, the resolver
# settles them from the local transaction's outcome.  Checked: every row
# once (checksums on both sides), nothing visible before the commit, a
# ROLLBACK, a rolled-back savepoint and a failing worker leave the table as
# it was; a local crash while one branch is prepared and another worker is
# still loading, after every worker prepared, and after the commit record;
# a non-superuser whose MySQL user may use one database only.  After each:
# no XA branch in XA RECOVER, nothing in doubt.  An append of no rows, serial
# and parallel, leaves no branch either.
# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

use CtasFed::Test;

my $my    = start_mariadb();
my $local = new_cluster('local',
	conf => "max_worker_processes = 16\nmax_parallel_workers = 8\nctas_fed.resolver_naptime = 3600");
mysql_catalog($local, $my);

$local->safe_psql('postgres', q{
CREATE TABLE big (id int PRIMARY KEY, name text, amount numeric(12,2), d date);
INSERT INTO big SELECT g, 'n' || g || E'\t' || repeat('x', g % 40), g * 1.25,
       DATE '2020-01-01' + g % 1000
  FROM generate_series(1, 200000) g;
ANALYZE big;
-- one row that MySQL cannot hold, in the last blocks: one worker fails
CREATE TABLE bad (LIKE big);
INSERT INTO bad SELECT * FROM big;
UPDATE bad SET d = DATE '0900-01-01' WHERE id = 199990;
-- immutable and parallel safe as declared, slow as run: keeps one worker busy
CREATE FUNCTION slow(x int) RETURNS int IMMUTABLE PARALLEL SAFE
  LANGUAGE plpgsql AS $$BEGIN PERFORM pg_sleep(0.01); RETURN x; END$$;
});

# the first half of big is there already; the appends bring the rest
$local->safe_psql('postgres',
	q{CREATE TABLE shop.shop.t AS SELECT * FROM big WHERE id <= 100000});

sub pg_sum
{
	my ($where) = @_;
	return $local->safe_psql('postgres', qq{
SELECT count(*) || ' ' || md5(string_agg(concat_ws('|', id, name, amount, d), E'\\n' ORDER BY id)) FROM big WHERE $where});
}

sub my_sum
{
	my ($t) = @_;
	return $my->sql(qq{SET SESSION group_concat_max_len = 1073741824;
SELECT CONCAT(COUNT(*), ' ', MD5(GROUP_CONCAT(CONCAT_WS('|', id, name, amount, d) ORDER BY id SEPARATOR '\\n'))) FROM shop.$t});
}

sub branches
{
	my $r = $my->sql('XA RECOVER');
	return $r eq '' ? 0 : scalar(split /\n/, $r);
}

sub nothing_left
{
	my ($what) = @_;
	# after a crash the resolver settles (here, or in its own pass)
	ok(wait_until(60, sub {
		$local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.resolve_in_doubt()});
		return branches() == 0;
	}), "$what: resolved");
	is($my->sql(q{SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE '\_ctas\_fed\_%'})
		  . ' ' . branches(),
		'0 0', "$what: no staging table, no XA branch");
	is($local->safe_psql('postgres', q{SELECT count(*) FROM ctas_fed.resolve_in_doubt()}),
		'0', "$what: nothing in doubt");
}

sub psql_err
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $local->psql('postgres', $sql);
	return $rc == 0 ? '' : $err;
}

my $half  = pg_sum('id <= 100000');
my $whole = pg_sum('true');
is(my_sum('t'), $half, 'the first half is there');

# --- EXPLAIN says how
like($local->safe_psql('postgres',
	q{EXPLAIN (COSTS OFF) CREATE TABLE shop.shop.t WITH (parallel = 2, if_exists = 'append') AS SELECT * FROM big WHERE id > 100000}),
	qr/Parallel: 2 workers/, 'EXPLAIN shows the workers');

# --- rolled back: nothing of it, no branch
my ($rc, $out, $err) = $local->psql('postgres', q{SET client_min_messages = notice;
BEGIN;
CREATE TABLE shop.shop.t WITH (parallel = 2, if_exists = 'append') AS SELECT * FROM big WHERE id > 100000;
ROLLBACK;});
is($rc, 0, 'parallel append, rolled back') or diag $err;
unlike($err, qr/loads serially|fewer|WARNING/, 'in parallel, without a warning') or diag $err;
is(my_sum('t'), $half, 'rolled back: the table as it was');
nothing_left('rolled back');

# --- a rolled-back savepoint
$local->safe_psql('postgres', q{BEGIN;
SAVEPOINT a;
CREATE TABLE shop.shop.t WITH (parallel = 2, if_exists = 'append') AS SELECT * FROM big WHERE id > 100000;
ROLLBACK TO SAVEPOINT a;
COMMIT;});
is(my_sum('t'), $half, 'savepoint rolled back: the table as it was');
nothing_left('savepoint rolled back');

# --- a worker fails: every branch rolled back
like(psql_err(q{CREATE TABLE shop.shop.t WITH (parallel = 2, if_exists = 'append') AS SELECT * FROM bad WHERE id > 100000}),
	qr/value "0900-01-01" of column "d" cannot be written to MySQL/,
	'one worker fails: the statement fails with its error');
is(my_sum('t'), $half, 'a worker failed: the table as it was');
nothing_left('a worker failed');

# --- committed: the branches stay invisible until the local commit
my ($in, $o, $e) = ('', '', '');
my $ph = IPC::Run::start([ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $local->connstr('postgres') ],
	'<', \$in, '>', \$o, '2>', \$e, IPC::Run::timeout(300));
$in .= q{BEGIN;
CREATE TABLE shop.shop.t WITH (parallel = 2, if_exists = 'append') AS SELECT * FROM big WHERE id > 100000;
SELECT 'loaded';
};
$ph->pump until $o =~ /loaded/ || !$ph->pumpable;
is($my->sql('SELECT COUNT(*) FROM shop.t'), '100000', 'before the commit the appended rows are invisible');
cmp_ok(branches(), '>=', 1, 'and held by prepared branches');
$in .= "COMMIT;\n";
$ph->finish;
is($?, 0, 'parallel append committed') or diag $e;
is(my_sum('t'), $whole, 'committed: every row once (checksum)');
nothing_left('committed');
is($local->safe_psql('postgres', q{SELECT state FROM ctas_fed.jobs WHERE target LIKE '%.t' ORDER BY job_id DESC LIMIT 1}),
	'committed', 'the job is committed');

# --- appends of no rows leave no branch (a read-only branch cannot commit)
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE shop.shop.t WITH (if_exists = 'append') AS SELECT * FROM big WHERE id < 0});
is($rc . $err, '0', 'serial append of no rows: no error, no warning');
($rc, $out, $err) = $local->psql('postgres',
	q{CREATE TABLE shop.shop.t WITH (parallel = 2, if_exists = 'append') AS SELECT * FROM big WHERE id < 0});
is($rc . $err, '0', 'parallel append of no rows: no error, no warning');
is(my_sum('t'), $whole, 'the table as it was');
nothing_left('appends of no rows');

# --- local crashes
$my->sql('DELETE FROM shop.t WHERE id > 100000');
is(my_sum('t'), $half, 'back to the first half');

sub crash_at
{
	my ($point, $sql, $before) = @_;
	my ($in, $o, $e) = ('', '', '');
	my $offset = -s $local->logfile;
	my $ph = IPC::Run::start([ 'psql', '-XAtq', '-d', $local->connstr('postgres') ],
		'<', \$in, '>', \$o, '2>', \$e, IPC::Run::timeout(300));
	$in .= ($point ? "SET ctas_fed.fault_point = '$point';\n" : '')
	  . "BEGIN;\n$sql\nCOMMIT;\n";
	$ph->pump while $ph->pumpable && $in ne '';
	$local->wait_for_log(qr/stopped at fault point "$point"/, $offset) if $point;
	$before->() if $before;
	$local->stop('immediate');
	$ph->finish;
	$local->start;
	return;
}

# one worker prepared, the other still loading the slow last rows
crash_at(undef, q{CREATE TABLE shop.shop.t WITH (parallel = 2, if_exists = 'append')
  AS SELECT CASE WHEN id > 199000 THEN slow(id) ELSE id END AS id, name, amount, d FROM big WHERE id > 100000;},
	sub {
		ok(wait_until(120, sub { branches() >= 1 }), 'a crash while one branch is prepared ...');
		is(branches(), 1, '... and the other worker still loads');
	});
nothing_left('crash with one branch prepared');
is(my_sum('t'), $half, 'the table as it was');

# every worker prepared, the leader not yet at end_load
crash_at('after_workers', q{CREATE TABLE shop.shop.t WITH (parallel = 2, if_exists = 'append') AS SELECT * FROM big WHERE id > 100000;},
	sub { cmp_ok(branches(), '>=', 1, 'after the workers: their branches are prepared') });
nothing_left('crash after the workers');
is(my_sum('t'), $half, 'the table as it was');

# the local commit is durable, post-commit did not run: the resolver commits
crash_at('after_commit_record', q{CREATE TABLE shop.shop.t WITH (parallel = 2, if_exists = 'append') AS SELECT * FROM big WHERE id > 100000;},
	sub { cmp_ok(branches(), '>=', 1, 'after the commit record: the branches are prepared') });
nothing_left('crash after the commit record');
is(my_sum('t'), $whole, 'committed by the resolver: every row once (checksum)');

# --- a non-superuser, whose MySQL user may use database shop only
$my->sql(q{CREATE USER 'bob'@'%' IDENTIFIED BY 'Bob-s3cret'; GRANT ALL ON shop.* TO 'bob'@'%';
CREATE TABLE shop.u (id INT PRIMARY KEY, name LONGTEXT, amount DECIMAL(12,2), d DATE)});
$local->safe_psql('postgres', q{
CREATE ROLE bob LOGIN;
GRANT SELECT ON big, bad TO bob;
CREATE SERVER bobs FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql', host '127.0.0.1', port '} . $my->{port} . q{');
GRANT USAGE ON FOREIGN SERVER bobs TO bob;
CREATE USER MAPPING FOR bob SERVER bobs OPTIONS (user 'bob', password 'Bob-s3cret');
});
($rc, $out, $err) = $local->psql('postgres', q{SET client_min_messages = notice; SET ROLE bob;
CREATE TABLE bobs.shop.u WITH (parallel = 2, if_exists = 'append') AS SELECT * FROM big});
is($rc, 0, 'a non-superuser appends in parallel') or diag $err;
unlike($err, qr/loads serially|fewer|WARNING/, 'in parallel, without a warning') or diag $err;
is(my_sum('u'), $whole, 'non-superuser: every row once (checksum)');
like(psql_err(q{SET ROLE bob;
CREATE TABLE bobs.shop.u WITH (parallel = 2, if_exists = 'append') AS SELECT * FROM bad}),
	qr/cannot be written to MySQL/, 'a non-superuser whose worker fails');
is(my_sum('u'), $whole, 'the table as it was');
is(branches(), 0, 'non-superuser: no XA branch');
$local->safe_psql('postgres', q{GRANT EXECUTE ON FUNCTION ctas_fed.resolve_in_doubt(name) TO bob});
is($local->safe_psql('postgres', q{SET ROLE bob; SELECT string_agg(object || ': ' || action, '; ') FROM ctas_fed.resolve_in_doubt('bobs')}),
	'', 'non-superuser: nothing in doubt');

done_testing();
