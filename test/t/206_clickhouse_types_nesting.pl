
# Copyright (c) 2026, ctas_fed developers

# The parser of ClickHouse types in column_types, reached through EXPLAIN
# with no ClickHouse server contacted (the catalog's port is closed):
#   - a deeply nested type is refused with an error naming the column, and
#     the server survives (it used to overflow the stack and crash);
#   - nesting up to the limit still works;
#   - a two-level Array for a one-dimensional PostgreSQL array names the
#     column's whole types in its error, not the element's.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $local = new_cluster('local');
my $port  = free_port();

# a catalog at a closed port: EXPLAIN never reaches it
clickhouse_catalog($local, undef, url => "http://127.0.0.1:$port", password => 'x');

sub explain_types
{
	my ($types, $select) = @_;
	my ($ret, $out, $err) = $local->psql('postgres',
		"EXPLAIN CREATE TABLE lake.dw.t WITH (column_types = '$types') AS $select",
		on_error_stop => 1);
	return ($ret, $out, $err);
}

# 100000 levels: enough to overflow any stack without a depth check
my $deep = ('Array(' x 100000) . 'Int32' . (')' x 100000);
my ($ret, $out, $err) = explain_types("a $deep", 'SELECT ARRAY[1] AS a');
isnt($ret, 0, 'a deeply nested Array type is refused');
like($err, qr/ClickHouse type of column "a" is nested too deeply/,
	'the error names the column');
unlike($err, qr/server closed the connection|terminated by signal/,
	'the backend did not crash');

my $nulls = ('LowCardinality(' x 5000) . 'String' . (')' x 5000);
($ret, $out, $err) = explain_types("s $nulls", q{SELECT 'x'::text AS s});
like($err, qr/ClickHouse type of column "s" is nested too deeply/,
	'so is a deeply nested LowCardinality');

is($local->safe_psql('postgres', 'SELECT 1'), '1', 'the server is still up');
ok(!$local->log_contains(qr/was terminated by signal/),
	'no backend was terminated by a signal');

# nesting within the limit still parses
my $ok = ('LowCardinality(' x 2) . 'Nullable(String)' . (')' x 2);
($ret, $out, $err) = explain_types("s $ok", q{SELECT 'x'::text AS s});
is($ret, 0, 'a type nested a few levels is accepted') or diag $err;
like($out, qr/`s` LowCardinality\(Nullable\(String\)\)/,
	'and shows in the remote DDL');

# Array(Array(Int32)) for integer[]: the error names the column's types
($ret, $out, $err) = explain_types('a Array(Array(Int32))', 'SELECT ARRAY[1, 2] AS a');
like($err,
	qr/column "a" of type integer\[\] cannot be written as ClickHouse type Array\(Array\(Int32\)\)/,
	'Array(Array(Int32)) for integer[]: the error names both whole types');

$local->stop;
done_testing();
