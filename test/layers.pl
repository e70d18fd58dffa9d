#!/usr/bin/perl
#
# test/layers.pl - the shape of src/, checked from the sources and the
# built object files
#
#   perl test/layers.pl              (from the repository root, after "make")
#   perl test/layers.pl --self-test  plant one violation of each rule in a
#                                    copy of src/ and show that it fails
#
# DESIGN.md section 3 draws the layers of the code: a file calls only into
# its own layer or lower ones, the graph of calls between files has no
# cycle, a target folder never calls another target folder, generic code
# names no target and no target's option, a file includes no header of a
# higher layer, and no file grows past what a reviewer can hold.  This
# script checks exactly that:
#
#  - calls, from "nm" of src/**/*.o: a file calls another when one of its
#    undefined symbols is a global symbol the other defines (functions and
#    variables alike; static symbols are not seen, which is right: they
#    cannot be called from another file);
#  - includes, from the #include "..." lines of every .c and .h file;
#  - names, from the identifiers and string literals of every generic file
#    (comments are not read: prose may name a target);
#  - the SQL on ctas_fed.syncs, from the string literals of every .c file:
#    only the table's module (sync/syncs.c, sync/syncs_query.c) names it;
#  - sizes, from the line counts;
#  - headers, from the extern lines of every .h file: each names only
#    functions and variables that a .c file of its own module defines
#    (header_module).
#
# The layer table below lists every .c and .h file of src/ by name, no
# globs: a new file fails until it is added, and an entry whose file is gone
# fails too, so that the table stays true.  Moving a file between layers is
# a design decision: change DESIGN.md and this table together.
#
# Output is TAP (one test per rule, each failure names the files and the
# symbols or lines); test/run.sh counts it.  Exit status 0 only when every
# rule holds.
#
# Copyright (c) 2026, ctas_fed authors
#
# IDENTIFICATION
#	test/layers.pl

use strict;
use warnings;
use File::Basename qw(dirname);
use File::Copy qw(copy);
use File::Find;
use File::Path qw(make_path);
use File::Temp qw(tempdir);

# The layer table: every .c and .h file under src/, in the order of DESIGN.md
# section 3.  [path under src/, layer, target (undef for generic code), what
# the file is].
my @layer_table = (
	# L4: entry points
	['ctas_fed.c' => 4, undef, '_PG_init only: hooks, shared memory, workers'],
	['utility.c' => 4, undef, 'the ProcessUtility and EXPLAIN hooks'],
	['utility.h' => 4, undef, 'utility.c'],

	# L3: the statement, the transaction, the jobs that use targets
	['ctas.c' => 3, undef, 'the load run: if_exists, jobs, EXPLAIN, DROP, DestReceiver'],
	['ctas_prepare.c' => 3, undef, 'statement -> load, before remote work: options, columns'],
	['ctas.h' => 3, undef, 'ctas.c, ctas_prepare.c'],
	['multi.c' => 3, undef, 'create_tables_as(): many tables in one call'],
	['xact.c' => 3, undef, 'participants, the one transaction callback, commit order'],
	['xact.h' => 3, undef, 'xact.c'],
	['parallel.c' => 3, undef, 'parallel loads: the leader'],
	['parallel_worker.c' => 3, undef, 'parallel loads: the workers'],
	['parallel.h' => 3, undef, 'parallel loads: what ctas.c and multi.c call'],
	['parallel_dsm.h' => 3, undef, 'parallel loads: the DSM leader and workers share'],
	['sqlfuncs.c' => 3, undef, 'remote_tables, remote_columns, resolve_in_doubt'],
	['metrics.c' => 3, undef, 'the jobs view, metrics text, webhook JSON'],
	['metrics.h' => 3, undef, 'metrics.c'],
	['targets.c' => 3, undef, 'the one table that names the targets'],
	['targets.h' => 3, undef, 'targets.c'],
	['options.c' => 3, undef, 'the FDW validator, driven by the option tables'],
	['sync/sync.h' => 3, undef, 'continuous sync: what ctas.c, utility.c, workers and metrics.c call'],
	['sync/sync_int.h' => 3, undef, 'continuous sync: private header of the folder'],
	['sync/check.c' => 3, undef, 'statement time, first: the checks, the key'],
	['sync/statement.c' => 3, undef, 'at statement time: publication, ctas_fed.syncs, stop'],
	['sync/tick.c' => 3, undef, "the resolver's side: starts stream workers, drops ended slots"],
	['sync/worker.c' => 3, undef, 'the worker of a stream: slot, peek loop'],
	['sync/join.c' => 3, undef, "a stream's copy, joins, jobs leaving, jobs held by a down catalog"],
	['sync/joincopy.c' => 3, undef, "a join's copy worker, its launch and bound"],
	['sync/apply.c' => 3, undef, "pgoutput messages to a target's changes"],
	['sync/message.c' => 3, undef, 'one message for one job: the query, the source row and key'],
	['sync/toast.c' => 3, undef, 'unchanged TOAST values rebuilt'],
	['sync/ddl.c' => 3, undef, "schema changes in WAL order: the event trigger's messages"],
	['sync/copy.c' => 3, undef, "the copy's plain columns"],
	['sync/partcopy.c' => 3, undef, 'the copy of a partitioned source by parallel readers'],
	['sync/resync.c' => 3, undef, 'resync(): the copy again from a new snapshot'],
	['sync/reshape.c' => 3, undef, 'the copy that follows a retype: the job and the remote take the new columns'],
	['sync/verify.c' => 3, undef, 'verify_sync(): the check, in the worker'],
	['sync/status.c' => 3, undef, "the workers' shared status, jobs view, metrics"],
	['sync/syncs.c' => 3, undef, 'ctas_fed.syncs as the worker loads and records a job; states, events, pool'],
	['sync/syncs_query.c' => 3, undef, 'the other statements on ctas_fed.syncs, one accessor each'],
	['sync/slot.c' => 3, undef, "the replication slots as the workers use them, a job's copy lock"],
	['sync/follow.c' => 3, undef, 'schema changes a whole-row sync follows, and a new key'],
	['sync/schemalog.c' => 3, undef, 'the record of followed schema changes: shape, rows, webhook, once'],
	['sync/merge.c' => 3, undef, 'the streams of a database merged into one (0.3)'],
	['sync/partition.c' => 3, undef, 'a partitioned source followed as one table'],
	['sync/partition_ddl.c' => 3, undef, "a partitioned source's DDL, from the event triggers"],
	['workers/workers.h' => 3, undef, 'background workers: what the rest calls'],
	['workers/workers_int.h' => 3, undef, 'the resolver slots launcher and resolvers share'],
	['workers/launcher.c' => 3, undef, 'one per cluster: job history, starts the resolvers'],
	['workers/resolver.c' => 3, undef, 'one per database: in-doubt work, sync tick'],
	['workers/notifier.c' => 3, undef, 'one per cluster: webhooks, Pushgateway'],
	['workers/bgworker.c' => 3, undef, 'the one BackgroundWorker filler'],

	# L2: the writer interface, and one folder per target
	['target.h' => 2, undef, 'the writer and sync interface: all a target includes'],
	['syncbatch.c' => 2, undef, 'the net change per key of a sync batch, for targets that apply sets'],
	['syncbatch.h' => 2, undef, 'syncbatch.c'],
	['staged.c' => 2, undef, "staged publication for targets that cannot prepare: actions, savepoints, the commit and abort walks; the target's SQL through CtasStagedOps"],
	['staged.h' => 2, undef, 'staged.c'],
	['postgres/postgres_target.h' => 2, 'postgres', 'private header of the PostgreSQL target'],
	['postgres/connection.c' => 2, 'postgres', 'libpq connection cache, connecting, notices, password rules'],
	['postgres/exec.c' => 2, 'postgres', 'SQL and COPY on a connection: waits, results, remote errors, cancel'],
	['postgres/typemap.c' => 2, 'postgres', 'type map, COPY text'],
	['postgres/deparse.c' => 2, 'postgres', 'the SQL text of a load'],
	['postgres/writer.c' => 2, 'postgres', 'load, DROP, EXPLAIN, listing; the routine'],
	['postgres/xact.c' => 2, 'postgres', 'the remote transaction: 2PC steps over a state enum'],
	['postgres/parallel.c' => 2, 'postgres', "parallel loads: scratch table, workers' gids"],
	['postgres/sync.c' => 2, 'postgres', 'applying a sync: batches as sets, the progress table'],
	['postgres/sync_batch.c' => 2, 'postgres', 'the statement queue and the batch of net changes of a sync'],
	['postgres/sync_sql.c' => 2, 'postgres', "the SQL of a sync's apply"],
	['postgres/copy.c' => 2, 'postgres', 'COPY data of loads and syncs'],
	['postgres/pipeline.c' => 2, 'postgres', 'statements sent, results read later (the overlapped apply of a sync)'],
	['postgres/verify.c' => 2, 'postgres', "verify_sync's remote side"],
	['postgres/resolve.c' => 2, 'postgres', 'stray prepared transactions'],
	['clickhouse/clickhouse.h' => 2, 'clickhouse', 'private header of the ClickHouse target'],
	['clickhouse/client.c' => 2, 'clickhouse', 'the HTTP protocol: query_id, KILL QUERY, credentials, streams'],
	['clickhouse/answer.c' => 2, 'clickhouse', "its answers: exceptions, SQLSTATEs, safe remote text, errors"],
	['clickhouse/types.c' => 2, 'clickhouse', 'type names, type map'],
	['clickhouse/ddl.c' => 2, 'clickhouse', 'table options, CREATE TABLE'],
	['clickhouse/rowbinary.c' => 2, 'clickhouse', 'the RowBinary encoder'],
	['clickhouse/writer.c' => 2, 'clickhouse', 'load, DROP, EXPLAIN, listing; the routine'],
	['clickhouse/xact.c' => 2, 'clickhouse', 'pre-commit, commit, abort, savepoints over an action state enum'],
	['clickhouse/record.c' => 2, 'clickhouse', "the transactions' durable records"],
	['clickhouse/stage.c' => 2, 'clickhouse', "one server's staging table and stream"],
	['clickhouse/cluster.c' => 2, 'clickhouse', 'cluster catalogs: shards, routing, the Distributed table'],
	['clickhouse/sync.c' => 2, 'clickhouse', 'applying a sync: ReplacingMergeTree rows'],
	['clickhouse/sync_rows.c' => 2, 'clickhouse', "a sync's kept changes and the rows sent"],
	['clickhouse/verify.c' => 2, 'clickhouse', "a resync's rebuild, verify_sync's remote side"],
	['clickhouse/resolve.c' => 2, 'clickhouse', 'recovery'],
	['clickhouse/cityhash.c' => 2, 'clickhouse', "cityHash64 and intHash64, as ClickHouse computes them"],
	['clickhouse/shardkey.c' => 2, 'clickhouse', 'sharding keys: parsed, rebuilt, the shard of a row'],
	['clickhouse/sync_keep.c' => 2, 'clickhouse', 'unchanged TOAST values taken from the remote row'],
	['clickhouse/sync_alter.c' => 2, 'clickhouse', 'a synced table changing shape: followed schema changes, rebuilds'],
	['mysql/mysql_target.h' => 2, 'mysql', 'private header of the MySQL target'],
	['mysql/conn.c' => 2, 'mysql', 'sessions, latch waits, the local-infile handler'],
	['mysql/types.c' => 2, 'mysql', 'type map, LOAD DATA text'],
	['mysql/writer.c' => 2, 'mysql', 'load, LOAD DATA; the routine'],
	['mysql/xact.c' => 2, 'mysql', 'staging + RENAME, XA, durable records'],
	['mysql/resolve.c' => 2, 'mysql', 'recovery, XA RECOVER'],
	['mysql/sync.c' => 2, 'mysql', 'applying a sync: batches as sets'],
	['mysql/verify.c' => 2, 'mysql', "verify_sync's remote side"],

	# L1: the generic libcurl engine
	['http/curl.c' => 1, undef, 'hardened transfer, latch waits, timeouts'],
	['http/curl.h' => 1, undef, 'http/curl.c'],

	# L0: settings, descriptors, names, the job registry, and the helpers
	# every layer uses
	['guc.c' => 0, undef, 'every setting, CtasCheckPreloaded'],
	['guc.h' => 0, undef, 'guc.c'],
	['catalog.c' => 0, undef, 'descriptors, generic options, the password rule, listing'],
	['catalog.h' => 0, undef, 'catalog.c; the option table entry every target fills'],
	['gid.c' => 0, undef, "gids and scratch-table names; the local transaction's status"],
	['gid.h' => 0, undef, 'gid.c'],
	['jobs.c' => 0, undef, 'the shared-memory job registry'],
	['jobs_file.c' => 0, undef, "the registry created at startup from its file; its saves"],
	['jobs.h' => 0, undef, 'jobs.c, jobs_file.c'],
	['jobs_int.h' => 0, undef, 'the registry in shared memory, private to jobs*.c'],
	['hosts.c' => 0, undef, "ctas_fed.allowed_hosts, asked of the option tables' host kinds"],
	['hosts.h' => 0, undef, 'hosts.c'],
	['typemap.c' => 0, undef, 'the column_types parser'],
	['typemap.h' => 0, undef, 'typemap.c'],
	['jobshards.c' => 0, undef, 'per-shard counters of the jobs of cluster catalogs'],
	['jobshards.h' => 0, undef, 'jobshards.c'],
	['xrecord.c' => 0, undef, 'the durable records of a staged publication'],
	['xrecord.h' => 0, undef, 'xrecord.c'],
);

# The only generic file that may name the targets and include their
# headers: the one table of targets.
my $target_table = 'targets.c';

# Generic lines that must name a target or a target's option, each with
# why: [file (undef: any generic file), regex the line matches].  Keep it
# short.  (Include lines are not read here: "postgres.h" is PostgreSQL's
# own header, and the include rule checks those lines.)
my @name_allow = (
	# the local server's configuration file, in the hints of settings that
	# need a restart: the local PostgreSQL, not the target
	[ undef, qr/\bpostgresql\.conf\b/ ],

	# the local session's IntervalStyle pinned to its default value
	# "postgres", so that interval text is canonical (verify, the sync
	# worker's and the DDL triggers' settings): a value of a local
	# setting, not the target
	[ undef, qr/"intervalstyle", "postgres"/ ],

	# "options", a key of JSON of our own: the descriptor's list of server
	# options (catalog.c) and create_tables_as's per-table object (multi.c),
	# not the PostgreSQL target's libpq option of that name
	[ 'catalog.c', qr/\\"options\\": / ],
	[ 'multi.c', qr/"\\"options\\" must be a JSON object"/ ],
);

# the longest .c file a reviewer is asked to hold
my $max_lines = 1000;

# .c files over $max_lines lines that another engineer is restructuring
# right now; each entry goes when its split lands.
my %size_exceptions = (
);

# The SQL on table ctas_fed.syncs lives in one module (DESIGN.md section 3,
# issue #17): only these files name the table in a string.
my %syncs_sql_files = ('sync/syncs.c' => 1, 'sync/syncs_query.c' => 1);

# files whose statements on ctas_fed.syncs have not moved to that module
# yet (none left); an entry goes when its statements move
my %syncs_sql_exceptions = (
);

# headers whose module is not their name's (header_module): header ->
# the .c files it declares
my %header_module = (
	'jobs_int.h' => [ 'jobs.c', 'jobs_file.c' ],
	'parallel_dsm.h' => [ 'parallel.c', 'parallel_worker.c' ],
);

# a function this long is printed (not failed): a reason to look again
my $long_function = 100;

# the page of the docs that shows the layer table, between these lines
my $arch_page = 'docs/architecture.md';
my $arch_begin = '<!-- generated by test/layers.pl --write-docs: do not edit -->';
my $arch_end = '<!-- end of the layer table -->';

my $self_test = 0;
my $write_docs = 0;
my @args;
foreach my $a (@ARGV)
{
	if ($a eq '--self-test') { $self_test = 1; }
	elsif ($a eq '--write-docs') { $write_docs = 1; }
	else { push @args, $a; }
}

# The layer table as the architecture page shows it: one row per file.
sub layer_table_markdown
{
	my @out = ('| layer | file | what it is |', '|---|---|---|');
	foreach my $entry (@layer_table)
	{
		my ($path, $l, $t, $what) = @$entry;
		push @out, "| L$l" . (defined $t ? " ($t)" : '') . " | `src/$path` | $what |";
	}
	return join("\n", @out) . "\n";
}

# Print one TAP result; $problems is a list of lines, empty when the rule
# holds.
my $ntest = 0;
my $nfailed = 0;

sub report
{
	my ($name, $problems) = @_;

	$ntest++;
	if (@$problems)
	{
		$nfailed++;
		print "not ok $ntest - $name\n";
		print "#   $_\n" foreach @$problems;
	}
	else
	{
		print "ok $ntest - $name\n";
	}
	return;
}

sub slurp
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "$path: $!\n";
	local $/;
	my $text = <$fh>;
	close($fh);
	return $text;
}

# The text of a C file with its comments blanked out (newlines kept, so
# that line numbers stay), string and character literals kept.
sub strip_comments
{
	my ($text) = @_;
	$text =~ s{
		(/\*.*?\*/)					# a comment
		| (//[^\n]*)				# a C++ comment
		| ("(?:\\.|[^"\\\n])*")		# a string literal: kept
		| ('(?:\\.|[^'\\\n])*')		# a character literal: kept
	}{
		defined $1 ? ($1 =~ tr/\n//cdr)
		  : defined $2 ? ''
		  : defined $3 ? $3 : $4
	}gsex;
	return $text;
}

# The option names of every target, from the option tables of its folder
# ("static const CtasOption xx_options[] = { {"name", ...}, ... }"), less
# the generic ones (CtasCommonOptions of catalog.c): target -> [names]
sub target_option_names
{
	my ($src, $files, $targets) = @_;
	my (%names, %common);

	my $catalog = slurp("$src/catalog.c");
	while ($catalog =~ /CtasOption\s+\w+\[\]\s*=\s*\{(.*?)\n\};/gs)
	{
		my $body = $1;
		$common{$1} = 1 while $body =~ /\{\s*"([^"]+)"/g;
	}
	foreach my $file (@$files)
	{
		my $t = $targets->{$file};
		next unless defined $t && $file =~ /\.c$/;
		my $text = slurp("$src/$file");
		while ($text =~ /CtasOption\s+\w+\[\]\s*=\s*\{(.*?)\n\};/gs)
		{
			my $body = $1;
			while ($body =~ /\{\s*"([^"]+)"/g)
			{
				$names{$t}{$1} = 1 unless $common{$1};
			}
		}
	}
	return { map { $_ => [ sort keys %{ $names{$_} } ] } keys %names };
}

# The global symbols an object file defines and those it uses: nm, once
# per object (the self-test's copies share their objects' answers).
my %nm_cache;

sub nm_of
{
	my ($obj, $file) = @_;
	my @st = stat($obj);
	my $key = "$file $st[7] $st[9]";
	return @{ $nm_cache{$key} } if $nm_cache{$key};

	my (@defined, @undefined);
	open(my $nm, '-|', 'nm', '-g', '--defined-only', $obj)
	  or die "nm $obj: $!\n";
	while (<$nm>)
	{
		# "0000000000000000 T CtasFoo"
		next unless /^\S*\s+([A-Za-z])\s+(\S+)$/;
		push @defined, $2;
	}
	close($nm) or die "nm -g $obj failed\n";
	open($nm, '-|', 'nm', '-u', $obj) or die "nm $obj: $!\n";
	while (<$nm>)
	{
		next unless /^\s*U\s+(\S+)$/;
		push @undefined, $1;
	}
	close($nm) or die "nm -u $obj failed\n";
	$nm_cache{$key} = [ \@defined, \@undefined ];
	return (\@defined, \@undefined);
}

# The .c files whose functions header $h may declare: every .c file of its
# folder for a header in a folder (one module: its private header and its
# public one), else for src/NAME.h the files NAME.c and NAME_*.c, or the
# files %header_module lists.
sub header_module
{
	my ($h, $cfiles) = @_;
	return @{ $header_module{$h} } if $header_module{$h};
	my $dir = dirname($h);
	return grep { dirname($_) eq $dir } @$cfiles if $dir ne '.';
	(my $stem = $h) =~ s/\.h$//;
	return grep { $_ eq "$stem.c" || /^\Q$stem\E_[^\/]*\.c$/ } @$cfiles;
}

# Run every rule on the tree at $root (src/ below it); returns the list of
# [rule name, [problems]] and prints the notes (long functions).
sub check_tree
{
	my ($root, $quiet) = @_;
	my $src = "$root/src";
	my @results;
	my @problems;
	die "$src: no such folder (run from the repository root)\n"
	  unless -d $src;

	my (%layer, %target);
	foreach my $entry (@layer_table)
	{
		my ($path, $l, $t) = @$entry;
		die "test/layers.pl: $path is twice in the layer table\n"
		  if exists $layer{$path};
		$layer{$path} = $l;
		$target{$path} = $t;
	}
	my %targets = map { $_ => 1 } grep { defined } values %target;

	# every .c and .h file under src/, as a path relative to it
	my @files;
	find(
		{
			no_chdir => 1,
			wanted => sub {
				return unless /\.[ch]$/;
				(my $rel = $File::Find::name) =~ s/^\Q$src\E\///;
				push @files, $rel;
			}
		},
		$src);
	@files = sort @files;

	# ---- (1) every file in the layer table, and built -------------------
	my %present = map { $_ => 1 } @files;
	foreach my $file (@files)
	{
		if (!exists $layer{$file})
		{
			push @problems,
			  "src/$file: not in the layer table of test/layers.pl "
			  . "(add it there, and to DESIGN.md section 3)";
			next;
		}
		next unless $file =~ /\.c$/;
		(my $obj = "$src/$file") =~ s/\.c$/.o/;
		(my $shown = "src/$file") =~ s/\.c$/.o/;
		push @problems, "$shown: missing or older than its .c (run make first)"
		  if !-f $obj || -M $obj > -M "$src/$file";
	}
	foreach my $entry (@layer_table)
	{
		push @problems,
		  "src/$entry->[0]: in the layer table of test/layers.pl, but no such file"
		  unless $present{ $entry->[0] };
	}
	push @results,
	  [ 'every .c and .h file of src/ is in the layer table, by name, and built',
		[@problems] ];
	my @cfiles = grep { /\.c$/ && exists $layer{$_} && $present{$_} } @files;
	my @known = grep { exists $layer{$_} } @files;

	# ---- the call graph between files -------------------------------------
	# defined global symbols -> file; file -> undefined symbols
	my (%definer, %undef);
	foreach my $file (@cfiles)
	{
		(my $obj = "$src/$file") =~ s/\.c$/.o/;
		next unless -f $obj;
		my ($defined, $undefined) = nm_of($obj, $file);
		$definer{$_} = $file foreach @$defined;
		$undef{$file} = $undefined;
	}

	# file -> callee file -> [symbols]
	my %calls;
	foreach my $file (sort keys %undef)
	{
		foreach my $sym (@{ $undef{$file} })
		{
			my $callee = $definer{$sym};
			next unless defined $callee && $callee ne $file;
			push @{ $calls{$file}{$callee} }, $sym;
		}
	}
	my $syms = sub {
		my ($from, $to) = @_;
		return join(', ', sort @{ $calls{$from}{$to} });
	};

	# ---- (2) no call up a layer ------------------------------------------
	@problems = ();
	foreach my $from (sort keys %calls)
	{
		foreach my $to (sort keys %{ $calls{$from} })
		{
			next unless $layer{$to} > $layer{$from};
			push @problems,
			  "src/$from (L$layer{$from}) calls up into src/$to (L$layer{$to}): "
			  . $syms->($from, $to);
		}
	}
	push @results, [ 'no file calls a file of a higher layer', [@problems] ];

	# ---- (3) no cycle: Tarjan's strongly connected components; each
	# component of more than one file is reported with one cycle through it
	@problems = ();
	{
		my ($index, @stack, %onstack, %idx, %low, @sccs) = (0);
		my $strongconnect;
		$strongconnect = sub {
			my ($v) = @_;
			$idx{$v} = $low{$v} = $index++;
			push @stack, $v;
			$onstack{$v} = 1;
			foreach my $w (sort keys %{ $calls{$v} || {} })
			{
				if (!defined $idx{$w})
				{
					$strongconnect->($w);
					$low{$v} = $low{$w} if $low{$w} < $low{$v};
				}
				elsif ($onstack{$w})
				{
					$low{$v} = $idx{$w} if $idx{$w} < $low{$v};
				}
			}
			if ($low{$v} == $idx{$v})
			{
				my @scc;
				my $w;
				do
				{
					$w = pop @stack;
					$onstack{$w} = 0;
					push @scc, $w;
				} while ($w ne $v);
				push @sccs, [ sort @scc ] if @scc > 1;
			}
		};
		foreach my $v (@cfiles)
		{
			$strongconnect->($v) unless defined $idx{$v};
		}

		# For each file of a component, the shortest cycle through it; the
		# same cycle found from two of its files is reported once.
		foreach my $scc (@sccs)
		{
			my %in = map { $_ => 1 } @$scc;
			my %seen;

			push @problems,
			  "cycle among " . join(' ', map { "src/$_" } @$scc) . ":";
			foreach my $start (@$scc)
			{
				my %prev;
				my @queue = ($start);
				my $found;
			  BFS: while (@queue)
				{
					my $v = shift @queue;
					foreach my $w (sort keys %{ $calls{$v} })
					{
						next unless $in{$w};
						if ($w eq $start)
						{
							$found = $v;
							last BFS;
						}
						next if exists $prev{$w};
						$prev{$w} = $v;
						push @queue, $w;
					}
				}
				my @path;
				for (my $v = $found; $v ne $start; $v = $prev{$v})
				{
					unshift @path, $v;
				}
				unshift @path, $start;

				# one name per cycle: its files rotated to start at the least
				my ($least) = sort { $path[$a] cmp $path[$b] } 0 .. $#path;
				my $key = join(' ', @path[ $least .. $#path ],
					@path[ 0 .. $least - 1 ]);
				next if $seen{$key}++;

				push @problems, "  cycle:";
				for (my $i = 0; $i < @path; $i++)
				{
					my $from = $path[$i];
					my $to = $path[ ($i + 1) % @path ];
					push @problems,
					  "    src/$from -> src/$to: " . $syms->($from, $to);
				}
			}
		}
	}
	push @results, [ 'the call graph between files has no cycle', [@problems] ];

	# ---- (4) a target folder calls no other target folder ----------------
	@problems = ();
	foreach my $from (sort keys %calls)
	{
		next unless defined $target{$from};
		foreach my $to (sort keys %{ $calls{$from} })
		{
			next unless defined $target{$to} && $target{$to} ne $target{$from};
			push @problems,
			  "src/$from (target $target{$from}) calls src/$to "
			  . "(target $target{$to}): "
			  . $syms->($from, $to);
		}
	}
	push @results, [ 'no target folder calls another target folder', [@problems] ];

	# ---- (5) includes: no header of a higher layer, no target's header in
	# generic code (but the table of targets) or in another target, no
	# folder's private header (*_int.h) outside its folder
	@problems = ();
	foreach my $file (@known)
	{
		open(my $fh, '<', "$src/$file") or die "$src/$file: $!\n";
		while (my $line = <$fh>)
		{
			next unless $line =~ /^\s*#\s*include\s+"([^"]+)"/;
			my $inc = $1;
			my $dir = dirname($file);

			# as the compiler finds it: next to the file, then in src/
			my $h = $dir ne '.' && -f "$src/$dir/$inc" ? "$dir/$inc" : $inc;
			next unless -f "$src/$h";    # PostgreSQL's, libpq's
			(my $shown = $line) =~ s/^\s+|\s+$//g;
			if (!exists $layer{$h})
			{
				next;    # reported by the table rule
			}
			if ($layer{$h} > $layer{$file})
			{
				push @problems,
				  "src/$file:$. (L$layer{$file}) includes src/$h "
				  . "(L$layer{$h}): $shown";
			}
			if (defined $target{$h}
				&& ($target{$file} // '') ne $target{$h}
				&& $file ne $target_table)
			{
				push @problems,
				  "src/$file:$. ("
				  . (defined $target{$file} ? "target $target{$file}" : 'generic')
				  . ") includes the header of target $target{$h}: $shown";
			}
			if ($h =~ m{^(.*)/[^/]*_int\.h$} && dirname($file) ne $1)
			{
				push @problems,
				  "src/$file:$. includes the private header of $1/: $shown";
			}
		}
		close($fh);
	}
	push @results,
	  [ 'no file includes a header of a higher layer, another target or another folder\'s private header',
		[@problems] ];

	# ---- (6) generic code names no target and no target's option, in
	# its identifiers and strings (comments are prose): only the table of
	# targets may, and the lines of @name_allow
	@problems = ();
	{
		my $names = join('|', map { quotemeta } sort keys %targets);
		my $options = target_option_names($src, \@known, \%target);
		my %option_of;
		foreach my $t (sort keys %$options)
		{
			push @{ $option_of{$_} }, $t foreach @{ $options->{$t} };
		}
		my $opts = join('|', map { quotemeta } sort keys %option_of);

		foreach my $file (@known)
		{
			next if defined $target{$file} || $file eq $target_table;
			my @lines = split /\n/, strip_comments(slurp("$src/$file"));
			for (my $i = 0; $i < @lines; $i++)
			{
				my $line = $lines[$i];
				next if $line =~ /^\s*#\s*include\b/;    # rule 5
				my @what;

				# a target's name, in an identifier or a string
				while ($line =~ /("(?:\\.|[^"\\])*"|[A-Za-z_]\w*)/g)
				{
					my $tok = $1;
					push @what, "names target \"$1\""
					  if $tok =~ /($names)/i;
					next unless $tok =~ /^"(.*)"$/s && $opts ne '';
					my $s = $1;

					# a target's option: a literal that is its name, or
					# quotes it (option \"url\")
					if ($s =~ /^($opts)$/ || $s =~ /\\"($opts)\\"/)
					{
						push @what,
						  "names option \"$1\" of "
						  . join('/', @{ $option_of{$1} });
					}
				}
				next unless @what;
				next
				  if grep { (!defined $_->[0] || $file eq $_->[0])
						  && $line =~ $_->[1] } @name_allow;
				(my $shown = $line) =~ s/^\s+|\s+$//g;
				my %u;
				push @problems,
				  "src/$file:" . ($i + 1) . ": "
				  . join(', ', grep { !$u{$_}++ } @what) . ": $shown";
			}
		}
	}
	push @results,
	  [ "generic code names no target and no target's option (only src/$target_table may)",
		[@problems] ];

	# ---- (7) the architecture page shows the layer table: every file of
	# the table and no other, as --write-docs writes it
	@problems = ();
	if (!-f "$root/$arch_page")
	{
		push @problems, "$arch_page: no such file";
	}
	else
	{
		my $page = slurp("$root/$arch_page");
		my ($block) = $page =~ /^\Q$arch_begin\E\n(.*?)^\Q$arch_end\E$/ms;
		if (!defined $block)
		{
			push @problems,
			  "$arch_page: no layer table between \"$arch_begin\" and \"$arch_end\"";
		}
		else
		{
			my %shown = map { $_ => 1 } $block =~ /`src\/([^`]+)`/g;
			foreach my $entry (@layer_table)
			{
				push @problems, "$arch_page: src/$entry->[0] is missing"
				  unless delete $shown{ $entry->[0] };
			}
			push @problems,
			  "$arch_page: src/$_ is not in the layer table of test/layers.pl"
			  foreach sort keys %shown;
			push @problems, "$arch_page: the layer table differs from test/layers.pl's"
			  if !@problems && $block ne layer_table_markdown();
		}
		push @problems, "(run: perl test/layers.pl --write-docs)" if @problems;
	}
	push @results,
	  [ "the architecture page ($arch_page) shows the layer table", [@problems] ];

	# ---- (8) no .c file over $max_lines lines; functions over
	# $long_function lines are printed
	@problems = ();
	my @long;
	foreach my $file (@cfiles)
	{
		my @lines = split /\n/, slurp("$src/$file"), -1;
		pop @lines if @lines && $lines[-1] eq '';
		my $n = scalar @lines;
		push @problems, "src/$file: $n lines"
		  if $n > $max_lines && !$size_exceptions{$file};

		# PostgreSQL layout: the name at the start of a line, the body from
		# a "{" to a "}" of their own at the start of a line
		for (my $i = 0; $i < @lines; $i++)
		{
			next unless $lines[$i] =~ /^([A-Za-z_]\w*)\(/ && $lines[$i] !~ /;\s*$/;
			my ($name, $start) = ($1, $i);
			my $j = $i + 1;
			$j++ while $j < @lines && $lines[$j] !~ /^[{;]/;
			next unless $j < @lines && $lines[$j] eq '{';
			$j++ while $j < @lines && $lines[$j] ne '}';
			my $len = $j - $start + 1;
			push @long, "src/$file:" . ($start + 1) . ": $name(), $len lines"
			  if $len > $long_function;
			$i = $j;
		}
	}
	push @results, [ "no .c file is over $max_lines lines", [@problems] ];

	# ---- (9) only the module of ctas_fed.syncs names that table in a
	# string (its SQL, and its errors)
	@problems = ();
	foreach my $file (@cfiles)
	{
		next if $syncs_sql_files{$file} || $syncs_sql_exceptions{$file};
		my @lines = split /\n/, strip_comments(slurp("$src/$file"));
		for (my $i = 0; $i < @lines; $i++)
		{
			my $line = $lines[$i];
			while ($line =~ /"((?:\\.|[^"\\])*)"/g)
			{
				next unless $1 =~ /\bctas_fed\.syncs(?!\w)/;
				(my $shown = $line) =~ s/^\s+|\s+$//g;
				push @problems, "src/$file:" . ($i + 1) . ": $shown";
				last;
			}
		}
	}
	push @results,
	  [ 'only ' . join(' and ', map { "src/$_" } sort keys %syncs_sql_files)
		  . ' name table ctas_fed.syncs in a string',
		[@problems] ];

	# ---- (10) a header declares only its own module: every function and
	# variable of ours that its extern lines name is defined by a .c file
	# of the header's module (header_module)
	@problems = ();
	foreach my $h (grep { /\.h$/ } @known)
	{
		my @mine = header_module($h, \@cfiles);
		my %mine = map { $_ => 1 } @mine;
		my $text = strip_comments(slurp("$src/$h"));
		while ($text =~ /^[ \t]*extern\b([^;]*);/mg)
		{
			my $decl = $1;
			my $name;
			if ($decl =~ /\(\s*\*\s*(\w+)\s*\)\s*\(/) { $name = $1; }    # pointer
			elsif ($decl =~ /(\w+)\s*\(/) { $name = $1; }    # function
			elsif ($decl =~ /(\w+)\s*(?:\[[^\]]*\]\s*)*$/) { $name = $1; }
			next unless defined $name;
			my $def = $definer{$name};
			next unless defined $def && !$mine{$def};    # PostgreSQL's, or its own
			push @problems,
			  "src/$h declares $name, which src/$def defines: not a file of its module ("
			  . (@mine ? join(' ', map { "src/$_" } @mine) : 'none') . ")";
		}
	}
	push @results,
	  [ "a header declares only its own module's functions and variables",
		[@problems] ];

	if (!$quiet && @long)
	{
		print "# functions over $long_function lines (a reason to look again):\n";
		print "#   $_\n" foreach @long;
	}
	return (\@results, \@long);
}

# ---- --self-test --------------------------------------------------------
# Each rule is shown to fail on a violation planted in a copy of src/ (the
# object files copied along, with their times, so that the "built" check
# still holds): the copy passes before, and the planted violation makes
# exactly its rule fail.

# Copy the tree at $from (src/ and docs/) to a new temporary folder.
sub copy_tree
{
	my ($from) = @_;
	my $to = tempdir('ctas_fed_layers.XXXXXX', TMPDIR => 1, CLEANUP => 1);
	find(
		{
			no_chdir => 1,
			wanted => sub {
				my $rel = $File::Find::name;
				$rel =~ s/^\Q$from\E\///;
				return unless $rel =~ m{^(?:src|docs)(?:/|$)};
				if (-d $_) { make_path("$to/$rel"); return; }
				return unless /\.(?:c|h|o|md)$/;
				copy($_, "$to/$rel") or die "copy $rel: $!\n";
				my @st = stat($_);
				utime($st[8], $st[9], "$to/$rel");
			}
		},
		$from);
	return $to;
}

# Change a file of the copy with $edit (a sub on its text), keeping its
# time, so that its object file still counts as built.
sub plant
{
	my ($root, $file, $edit) = @_;
	my $path = "$root/$file";
	my @st = stat($path);
	my $old = -f $path ? slurp($path) : undef;
	my $put = sub {
		my ($text) = @_;
		if (!defined $text)
		{
			unlink($path) or die "$path: $!\n";
			return;
		}
		open(my $fh, '>', $path) or die "$path: $!\n";
		print $fh $text;
		close($fh);
		utime($st[8], $st[9], $path) if @st;
	};
	$put->(defined $edit ? $edit->($old // '') : undef);

	# the undo
	return sub { $put->($old); };
}

sub add_after_includes
{
	my ($add) = @_;
	return sub {
		my ($t) = @_;
		$t =~ s/^(#include "postgres\.h"\n)/$1$add\n/m or die "no postgres.h";
		return $t;
	};
}

if ($self_test)
{
	my $root = shift(@args) // '.';
	my @cases = (
		[ 'an include of a higher layer',
		  'no file includes a header',
		  [ 'src/gid.c', add_after_includes('#include "ctas.h"') ] ],
		[ "a generic file including a target's header",
		  'no file includes a header',
		  [ 'src/jobs.c', add_after_includes('#include "clickhouse/clickhouse.h"') ] ],
		[ "a folder's private header included outside the folder",
		  'no file includes a header',
		  [ 'src/xact.c', add_after_includes('#include "sync/sync_int.h"') ] ],
		[ "a target's name in a string of generic code",
		  'generic code names no target',
		  [ 'src/xact.c', sub { $_[0] . "\nstatic const char *layers_selftest = \"MySQL\";\n" } ] ],
		[ "a target's name in an identifier of generic code",
		  'generic code names no target',
		  [ 'src/gid.c', sub { $_[0] . "\nextern int CtasClickhouseSelfTest;\n" } ] ],
		[ "a target's option name in generic code",
		  'generic code names no target',
		  [ 'src/catalog.c', sub { $_[0] . "\nstatic const char *layers_selftest = \"shard_urls\";\n" } ] ],
		[ 'a file that is not in the layer table',
		  'every .c and .h file',
		  [ 'src/selftest_extra.h', sub { "/* not in the table */\n" } ] ],
		[ 'an entry of the layer table whose file is gone',
		  'every .c and .h file',
		  [ 'src/typemap.h', undef ] ],
		[ 'a file of the table missing from the architecture page',
		  'the architecture page',
		  [ $arch_page, sub { $_[0] =~ s/^\| [^\n]*`src\/gid\.c`[^\n]*\n//mr } ] ],
		[ 'a file on the architecture page that is not in the table',
		  'the architecture page',
		  [ $arch_page, sub { $_[0] =~ s/^(\Q$arch_end\E)$/| L0 | `src\/gone.c` | planted |\n$1/mr } ] ],
		[ 'a statement on ctas_fed.syncs outside its module',
		  'only src/sync/syncs.c',
		  [ 'src/sync/merge.c', sub { $_[0] . "\nstatic const char *layers_selftest = \"SELECT FROM ctas_fed.syncs\";\n" } ] ],
		[ 'a .c file over the size cap',
		  'no .c file is over',
		  [ 'src/gid.c', sub { $_[0] . ("/* filler */\n" x $max_lines) } ] ],
		[ "a header declaring another module's function",
		  'a header declares only its own module',
		  [ 'src/gid.h', sub { $_[0] . "\nextern void CtasRecordClose(int *fd);\n" } ] ],
	);

	my $n = 0;
	my $bad = 0;
	my $t = sub {
		my ($ok, $name) = @_;
		$n++;
		print(($ok ? '' : 'not ') . "ok $n - self-test: $name\n");
		$bad++ unless $ok;
	};

	my $copy = copy_tree($root);
	my ($base) = check_tree($copy, 1);
	my @failing = map { $_->[0] } grep { @{ $_->[1] } } @$base;
	$t->(!@failing, 'the unchanged copy passes every rule');
	print "#   fails: $_\n" foreach @failing;

	foreach my $case (@cases)
	{
		my ($what, $rule, $edit) = @$case;
		my $undo = plant($copy, @$edit);
		my ($res) = check_tree($copy, 1);
		$undo->();
		my @f = grep { @{ $_->[1] } } @$res;
		my $ok = @f == 1 && index($f[0][0], $rule) == 0;
		$t->($ok, "$what fails \"$rule...\"");
		foreach my $r (@f)
		{
			print "#   not ok - $r->[0]\n";
			print "#     $_\n" foreach @{ $r->[1] };
		}
	}

	# a call up a layer: the calls are read from the object files, so the
	# call is planted in one: an object that calls the notifier (L3),
	# linked into the typemap's (L0), which nothing of the notifier calls
	{
		my $obj = "$copy/src/typemap.o";
		my @st = stat($obj);
		my $dir = tempdir('ctas_fed_layers_obj.XXXXXX', TMPDIR => 1, CLEANUP => 1);
		my $old = slurp($obj);
		open(my $fh, '>', "$dir/up.c") or die "$dir/up.c: $!\n";
		print $fh "extern void CtasNotifierRegister(void);\n"
		  . "void layers_selftest(void);\n"
		  . "void layers_selftest(void) { CtasNotifierRegister(); }\n";
		close($fh);
		my $ok = system('cc', '-c', '-o', "$dir/up.o", "$dir/up.c") == 0
		  && system('ld', '-r', '-o', "$dir/both.o", $obj, "$dir/up.o") == 0
		  && copy("$dir/both.o", $obj);
		utime($st[8], $st[9], $obj);
		my ($res) = check_tree($copy, 1);
		open($fh, '>', $obj) or die "$obj: $!\n";
		print $fh $old;
		close($fh);
		utime($st[8], $st[9], $obj);
		my @f = grep { @{ $_->[1] } } @$res;
		$t->($ok && @f == 1 && index($f[0][0], 'no file calls a file of a higher') == 0,
			'a call up a layer (planted in an object file) fails "no file calls a file of a higher layer..."');
		foreach my $r (@f)
		{
			print "#   not ok - $r->[0]\n";
			print "#     $_\n" foreach @{ $r->[1] };
		}
	}

	# the long-function list is printed, never failed
	{
		plant($copy, 'src/gid.c',
			sub { $_[0] . "\nstatic void\nlayers_selftest(void)\n{\n" . ("\t;\n" x $long_function) . "}\n" });
		my ($res, $long) = check_tree($copy, 1);
		my @f = grep { @{ $_->[1] } } @$res;
		my @hit = grep { /layers_selftest/ } @$long;
		$t->(!@f && @hit == 1,
			"a function over $long_function lines is listed, not failed");
		print "#   listed: $_\n" foreach @hit;
	}
	print "1..$n\n";
	exit($bad ? 1 : 0);
}

my $root = shift(@args) // '.';
if ($write_docs)
{
	my $page = slurp("$root/$arch_page");
	$page =~ s/^(\Q$arch_begin\E\n).*?^(\Q$arch_end\E)$/$1 . layer_table_markdown() . $2/mse
	  or die "$arch_page: no \"$arch_begin\" line followed by \"$arch_end\"\n";
	open(my $fh, '>', "$root/$arch_page") or die "$arch_page: $!\n";
	print $fh $page;
	close($fh);
	print "wrote the layer table into $arch_page\n";
	exit(0);
}
my ($results) = check_tree($root, 0);
report(@$_) foreach @$results;
print "1..$ntest\n";
exit($nfailed ? 1 : 0);
