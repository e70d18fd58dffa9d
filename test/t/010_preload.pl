
# Copyright (c) 2026, ctas_fed developers

# Without shared_preload_libraries, ctas_fed installs no hooks, and every
# entry point - CREATE EXTENSION first - fails with a hint that says what to
# set.  A federated CTAS is then never silently run as a local one.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use CtasFed::Test;

my $node = new_cluster('nopreload', preload => 0);

my ($ret, $out, $err) = $node->psql('postgres', 'CREATE EXTENSION ctas_fed');
isnt($ret, 0, 'CREATE EXTENSION fails without shared_preload_libraries');
like($err, qr/ctas_fed must be loaded via shared_preload_libraries/,
	'the error says why');
like($err, qr/HINT:  Add ctas_fed to shared_preload_libraries in postgresql\.conf/,
	'the hint says what to set');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_extension WHERE extname = 'ctas_fed'"),
	'0', 'nothing was installed');

# installed while preloaded, then the setting is lost: still no silent CTAS
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'ctas_fed'");
$node->restart;
$node->safe_psql('postgres', q{
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '1', dbname 'dw');
});
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$node->restart;
($ret, $out, $err) = psql_verbose($node,
	'CREATE TABLE wh.public.t AS SELECT 1 AS a');
isnt($ret, 0, 'a federated CTAS fails without the preloaded library');
# PostgreSQL's own refusal of a three-part name: nothing ran it as local
like($err, qr/^ERROR:  0A000: cross-database references are not implemented: "?wh"?\.public\.t/m,
	'with PostgreSQL\'s own error (0A000)') or diag $err;
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_class WHERE relname = 't'"),
	'0', 'no local table was created instead');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT ctas_fed.catalog_descriptor('wh')");
like($err, qr/HINT:  Add ctas_fed to shared_preload_libraries/,
	'functions say what to set');

done_testing();
