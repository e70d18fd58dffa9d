
# Copyright (c) 2026, ctas_fed developers

# Every SQL example of the documentation runs, and shows what psql prints.
#
# The convention (docs/architecture.md, "Documentation examples"):
# - Each page listed in @pages is run in ONE psql session (psql -X -a -q,
#   footers off), its blocks in order, so a later block sees the objects of
#   an earlier one.
# - A fenced block tagged ```sql is run.  What psql prints for it (the input
#   echoed by -a, then each statement's rows, NOTICEs and ERRORs) must equal
#   the block's text: a block that shows no output must produce none.
#   Blocks tagged otherwise (```text, ```sh, ```conf, ```json, ...) are not
#   run.
# - <!-- docs-setup: SQL --> runs SQL in the page's session, unseen by the
#   reader, its output not compared (an ERROR in it fails the test).
# - <!-- docs-wait: SQL --> polls SQL (a boolean) until it is true (60 s).
# - Before the comparison both sides are normalised; only what truly varies
#   from run to run: the ports (the docs say 5433 for the remote
#   PostgreSQL and 8123 for ClickHouse; the test substitutes the real ones
#   and back), the ClickHouse password, LSNs (<lsn>), timestamps (<ts>),
#   database oids and sync/job ids inside object names
#   (ctas_fed_sync_<oid>_<id>), psql's "psql:<stdin>:N: " prefix, comment
#   lines of their own (psql -a does not echo them), blank
#   lines, and the widths of aligned columns (runs of blanks and of dashes
#   are collapsed, so a value of another width does not move the others).
#
# The servers: a local cluster with ctas_fed (wal_level logical), a remote
# PostgreSQL with database dw owned by role loader (password secret), a
# ClickHouse server with the databases the docs use.  The catalogs are the
# docs' own (warehouse, lake), created by the docs' blocks.

# ctas-tap: parallel

use strict;
use warnings;

use Cwd qw(abs_path);
my $root;
BEGIN { $root = abs_path(__FILE__) =~ s{/test/t/[^/]+$}{}r; }

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep time);
use File::Basename qw(dirname);

use CtasFed::Test;

my @pages = qw(README.md docs/reference.md docs/clickhouse.md
  docs/many-tables-parallel.md docs/sync.md docs/postgres-versions.md
  docs/clickhouse-clusters.md docs/mysql.md docs/sync-schema-changes.md
  docs/sync-toast.md docs/sync-exactly-once.md docs/sync-performance.md
  docs/sync-verify-resync.md);

my $local = new_cluster('local',
	# one resolver per database with ctas_fed (one per page), sync workers
	conf => "wal_level = logical\nmax_replication_slots = 10\n"
	  . "max_wal_senders = 10\nmax_worker_processes = 24\n");
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $ch = start_clickhouse();
$ch->query("CREATE DATABASE IF NOT EXISTS $_") for qw(analytics dw);

my $rport  = $remote->port;
my $chport = $ch->{http_port};
my $chpw   = $ch->{password};

# the page's text as the test sends it (real ports, real password)
sub to_real
{
	my ($s) = @_;
	$s =~ s/port '5433'/port '$rport'/g;
	$s =~ s/127\.0\.0\.1:8123/127.0.0.1:$chport/g;
	$s =~ s/(SERVER lake\s+OPTIONS \(user 'default', password )'[^']*'/$1'$chpw'/g;
	return $s;
}

sub normalise
{
	my ($s) = @_;
	$s =~ s/\b$rport\b/5433/g;
	$s =~ s/\b$chport\b/8123/g;
	$s =~ s/(SERVER lake\s+OPTIONS \(user 'default', password )'[^']*'/$1'<password>'/g;
	$s =~ s/^psql:<stdin>:\d+: //mg;
	$s =~ s/\b[0-9A-F]{1,8}\/[0-9A-F]{1,8}\b/<lsn>/g;
	$s =~ s/\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d(?::\d\d)?)?/<ts>/g;
	$s =~ s/ctas_fed_sync_\d+_\d+/ctas_fed_sync_<oid>_<id>/g;
	$s =~ s/ctas_fed_sync_\d+_</ctas_fed_sync_<oid>_</g;
	$s =~ s/^--.*\n?//mg;    # psql -a does not echo a comment line of its own
	$s =~ s/[ \t]+$//mg;
	$s =~ s/ {2,}/ /g;
	$s =~ s/-{2,}/-/g;
	$s =~ s/\n{2,}/\n/g;
	$s =~ s/^\n+|\n+$//g;
	return $s;
}

# The statements of a ```sql block, without the output it shows: after a
# line that ends a statement (";", maybe followed by a -- comment), the
# lines up to the next one that starts with an SQL keyword, a comment or a
# psql meta-command are psql's output.
my $sql_start = qr/^(?:SELECT|CREATE|INSERT|UPDATE|DELETE|DROP|ALTER|GRANT|REVOKE|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|EXPLAIN|SET|RESET|WITH|TRUNCATE|PREPARE|EXECUTE|COPY|TABLE|VALUES|CALL|DO|ANALYZE|VACUUM|--|\\)\b/;

sub statements_of
{
	my ($block) = @_;
	my ($in_output, @sql) = (0);
	foreach my $l (split /\n/, $block)
	{
		$in_output = 0 if $l =~ $sql_start;
		push @sql, $l unless $in_output;
		$in_output = 1 if !$in_output && $l =~ /;\s*(?:--.*)?$/;
	}
	return join("\n", @sql);
}

# [kind, text, line]: kind sql (compared), setup, wait
sub parse_page
{
	my ($text) = @_;
	my @items;
	my @lines = split /\n/, $text, -1;
	my $i = 0;
	while ($i < @lines)
	{
		my $l = $lines[$i];
		if ($l =~ /^```(\S*)/)
		{
			my ($tag, $start) = ($1, $i + 1);
			my @body;
			$i++;
			while ($i < @lines && $lines[$i] !~ /^```\s*$/)
			{
				push @body, $lines[$i++];
			}
			push @items, [ 'sql', join("\n", @body), $start ] if $tag eq 'sql';
		}
		elsif ($l =~ /^<!-- docs-(setup|wait):(.*)$/)
		{
			my ($kind, $start, $body) = ($1, $i + 1, $2);
			until ($body =~ s/-->\s*$//)
			{
				$i++;
				die "unterminated docs-$kind comment at line $start" if $i >= @lines;
				$body .= "\n" . $lines[$i];
			}
			push @items, [ $kind, $body, $start ];
		}
		$i++;
	}
	return @items;
}

my $examples = 0;
foreach my $page (@pages)
{
	my $text = PostgreSQL::Test::Utils::slurp_file("$root/$page");
	my @items = parse_page($text);

	# README.md in database postgres, every other page in a database of its
	# own (docs_reference, ...), so each page starts from nothing
	my $db = 'postgres';
	if ($page ne 'README.md')
	{
		($db = $page) =~ s{^docs/(.*)\.md$}{docs_$1};
		$db =~ s/-/_/g;
		$local->safe_psql('postgres', "CREATE DATABASE $db");
	}
	my ($in, $out) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-a', '-q', '-v', 'ON_ERROR_STOP=0',
		  '-d', $local->connstr($db) ],
		'<', \$in, '>&', \$out);
	$in .= "\\pset footer off\n";
	my $n = 0;
	foreach my $item (@items)
	{
		my ($kind, $body, $line) = @$item;
		$n++;
		if ($kind eq 'wait')
		{
			$in .= "\\echo \@\@docs-wait $n\n";
			# poll from a second session; the page's session waits meanwhile
			my ($ok, $deadline) = (0, time + 60);
			while (time < $deadline)
			{
				$ok = 1, last
				  if $local->safe_psql($db, to_real($body)) eq 't';
				usleep(100_000);
			}
			ok($ok, "$page line $line: docs-wait condition became true");
			next;
		}
		my $sql = $kind eq 'sql' ? statements_of($body) : $body;
		$in .= "\\echo \@\@docs-block $n\n" . to_real($sql) . "\n"
		  . "\\echo \@\@docs-end $n\n";
		# run block by block: the wait items above need the blocks before
		# them to be done
		IPC::Run::pump($h) until $out =~ /^\@\@docs-end $n$/m;
		my ($got) = $out =~ /^\@\@docs-block $n\n(.*?)^\\echo \@\@docs-end $n\n/ms;
		$got //= '';
		if ($kind eq 'setup')
		{
			unlike($got, qr/ERROR/, "$page line $line: docs-setup runs")
			  or diag($got);
		}
		else
		{
			$examples++;
			is(normalise($got), normalise($body),
				"$page line $line: the example runs and prints what it shows");
		}
	}
	$in .= "\\q\n";
	IPC::Run::finish($h);
}
note("$examples examples compared");

# the examples left their effects on the servers: the README's loads
is($remote->safe_psql('dw', 'SELECT count(*), sum(total) FROM public.daily_sales'),
	'7|2485', 'README: daily_sales arrived in the remote PostgreSQL');
is($ch->query('SELECT count(), sum(total) = 2485 FROM default.daily_sales'),
	"7\t1\n", 'README: daily_sales arrived in ClickHouse');
is($remote->safe_psql('dw', 'SELECT count(*) FROM pg_prepared_xacts'),
	'0', 'no prepared transaction left on the remote');
# the resolver drops the slot of a stopped stream within about a second
ok(wait_until(30, sub {
	$local->safe_psql('postgres', 'SELECT count(*) FROM pg_replication_slots') eq '0' }),
	'the stopped sync left no slot');

$ch->stop;
done_testing();
