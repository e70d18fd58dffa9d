#!/usr/bin/perl
#
# test/layers.pl - the shape of src/, checked from the built object files
#
#   perl test/layers.pl            (from the repository root, after "make")
#
# DESIGN.md section 3 draws the layers of the code: a file calls only into
# its own layer or lower ones, the graph of calls between files has no
# cycle, a target folder never calls another target folder, generic code
# names no target, and no file grows past what a reviewer can hold.  This
# script checks exactly that, from "nm" of src/**/*.o: a file calls another
# when one of its undefined symbols is a global symbol the other defines
# (functions and variables alike; static symbols are not seen, which is
# right: they cannot be called from another file).
#
# Every .c file under src/ must be in the layer table below, which mirrors
# DESIGN.md section 3; a new file that is not fails loudly, so that the
# table stays true.  Moving a file between layers is a design decision:
# change DESIGN.md and this table together.
#
# Output is TAP (one test per rule, each failure names the files and the
# symbols); test/run.sh counts it.  Exit status 0 only when every rule
# holds.
#
# Copyright (c) 2026, ctas_fed authors
#
# IDENTIFICATION
#	test/layers.pl

use strict;
use warnings;
use File::Find;

# The layer table.  Key: a path under src/, or "folder/*" for every .c of
# that folder.  Value: the layer, and the target the file belongs to (undef
# for generic code).  Keep in the order of DESIGN.md section 3.
my @layer_table = (
	# L4: entry points
	['ctas_fed.c' => 4],
	['utility.c' => 4],

	# L3: the statement, the transaction, the jobs that use targets
	['ctas.c' => 3],
	['multi.c' => 3],
	['xact.c' => 3],
	['sync/*' => 3],
	['parallel*.c' => 3],
	['sqlfuncs.c' => 3],
	['metrics.c' => 3],
	['workers/*' => 3],
	['targets.c' => 3],
	['options.c' => 3],

	# L2: one folder per target
	['postgres/*' => 2, 'postgres'],
	['clickhouse/*' => 2, 'clickhouse'],
	['mysql/*' => 2, 'mysql'],

	# L1: the generic libcurl engine
	['http/*' => 1],

	# L0: settings, descriptors, names, the job registry, and the helpers
	# every layer uses (hosts.c: the host allow-list of the catalogs, calls
	# nothing of ours; typemap.c: the parser of type names shared by the
	# targets' type maps, calls nothing of ours; xrecord.c: the durable
	# records of a staged publication, calls nothing of ours)
	['guc.c' => 0],
	['catalog.c' => 0],
	['gid.c' => 0],
	['jobs.c' => 0],
	['jobshards.c' => 0],
	['hosts.c' => 0],
	['typemap.c' => 0],
	['xrecord.c' => 0],
);

# the only generic file that may name the targets
my $target_table = 'targets.c';

# the longest .c file a reviewer is asked to hold
my $max_lines = 1500;

my $src = shift(@ARGV) // 'src';
die "$src: no such folder (run from the repository root)\n" unless -d $src;

my $ntest = 0;
my $nfailed = 0;

# Print one TAP result; $problems is a list of lines, empty when the rule
# holds.
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

# Find the layer table's entry for a path under src/ ("clickhouse/ddl.c"):
# returns (layer, target) or an empty list.
sub lookup
{
	my ($file) = @_;

	foreach my $entry (@layer_table)
	{
		my ($pattern, $layer, $target) = @$entry;
		my $re = quotemeta($pattern);
		$re =~ s/\\\*/[^\/]*/g;
		return ($layer, $target) if $file =~ /^$re$/;
	}
	return;
}

# every .c file under src/, as a path relative to it, and every header
my (@cfiles, @hfiles);
find(
	{
		no_chdir => 1,
		wanted => sub {
			my $rel = $File::Find::name;
			$rel =~ s/^\Q$src\E\///;
			push @cfiles, $rel if /\.c$/;
			push @hfiles, $rel if /\.h$/;
		}
	},
	$src);
@cfiles = sort @cfiles;
@hfiles = sort @hfiles;
die "$src: no .c files\n" unless @cfiles;

# ---- every file in the layer table, and built --------------------------
my (%layer, %target, @problems);
foreach my $file (@cfiles)
{
	my ($l, $t) = lookup($file);
	if (!defined $l)
	{
		push @problems,
		  "$src/$file: file not in the layer table of test/layers.pl "
		  . "(add it there, and to DESIGN.md section 3)";
		next;
	}
	(my $obj = "$src/$file") =~ s/\.c$/.o/;
	if (!-f $obj || -M $obj > -M "$src/$file")
	{
		push @problems, "$obj: missing or older than its .c (run make first)";
		next;
	}
	$layer{$file} = $l;
	$target{$file} = $t;
}
report('every file of src/ is in the layer table and built', \@problems);

# ---- the call graph between files ----------------------------------------
# defined global symbols -> file; file -> undefined symbols
my (%definer, %undef);
foreach my $file (sort keys %layer)
{
	(my $obj = "$src/$file") =~ s/\.c$/.o/;
	open(my $nm, '-|', 'nm', '-g', '--defined-only', $obj)
	  or die "nm $obj: $!\n";
	while (<$nm>)
	{
		# "0000000000000000 T CtasFoo"
		next unless /^\S*\s+([A-Za-z])\s+(\S+)$/;
		$definer{$2} = $file;
	}
	close($nm) or die "nm -g $obj failed\n";
	open($nm, '-|', 'nm', '-u', $obj) or die "nm $obj: $!\n";
	while (<$nm>)
	{
		next unless /^\s*U\s+(\S+)$/;
		push @{ $undef{$file} }, $1;
	}
	close($nm) or die "nm -u $obj failed\n";
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

sub syms
{
	my ($from, $to) = @_;
	return join(', ', sort @{ $calls{$from}{$to} });
}

# (a) no call up a layer
@problems = ();
foreach my $from (sort keys %calls)
{
	foreach my $to (sort keys %{ $calls{$from} })
	{
		next unless $layer{$to} > $layer{$from};
		push @problems,
		  "$src/$from (L$layer{$from}) calls up into $src/$to (L$layer{$to}): "
		  . syms($from, $to);
	}
}
report('no file calls a file of a higher layer', \@problems);

# (b) no cycle: Tarjan's strongly connected components; each component of
# more than one file is reported with one cycle through it
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
	foreach my $v (sort keys %layer)
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
		  "cycle among " . join(' ', map { "$src/$_" } @$scc) . ":";
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
				  "    $src/$from -> $src/$to: " . syms($from, $to);
			}
		}
	}
}
report('the call graph between files has no cycle', \@problems);

# (c) a target folder calls no other target folder
@problems = ();
foreach my $from (sort keys %calls)
{
	next unless defined $target{$from};
	foreach my $to (sort keys %{ $calls{$from} })
	{
		next unless defined $target{$to} && $target{$to} ne $target{$from};
		push @problems,
		  "$src/$from (target $target{$from}) calls $src/$to "
		  . "(target $target{$to}): "
		  . syms($from, $to);
	}
}
report('no target folder calls another target folder', \@problems);

# (d) generic code names no target: neither a target's name nor a target
# folder's header, outside the target folders, but in the table of targets
@problems = ();
{
	my %targets = map { $_->[2] => 1 } grep { defined $_->[2] } @layer_table;
	my $names = join('|', map { quotemeta } sort keys %targets);

	foreach my $file (@cfiles, @hfiles)
	{
		next if $file eq $target_table;
		my ($dir) = $file =~ m{^([^/]+)/};
		next if defined $dir && $targets{$dir};

		open(my $fh, '<', "$src/$file") or die "$src/$file: $!\n";
		while (my $line = <$fh>)
		{
			if ($line =~ /clickhouse/i
				|| $line =~ /^\s*#\s*include\s+"(?:$names)\//)
			{
				chomp $line;
				$line =~ s/^\s+//;
				push @problems, "$src/$file:$.: $line";
			}
		}
		close($fh);
	}
}
report("generic code names no target (only $src/$target_table may)",
	\@problems);

# (e) no .c file over $max_lines lines
@problems = ();
foreach my $file (@cfiles)
{
	open(my $fh, '<', "$src/$file") or die "$src/$file: $!\n";
	1 while <$fh>;
	my $n = $.;
	close($fh);
	push @problems, "$src/$file: $n lines" if $n > $max_lines;
}
report("no .c file is over $max_lines lines", \@problems);

print "1..$ntest\n";
exit($nfailed ? 1 : 0);
