# test/bench/lib.sh - helpers shared by the benchmarks (sourced)

die()
{
	echo "bench: $*" >&2
	exit 1
}

# a TCP port free on 127.0.0.1 now, not one of those already chosen
ports=()
free_port()
{
	local p
	for _ in $(seq 1 100); do
		p=$(perl -MIO::Socket::INET -e '
			my $p = 20000 + int(rand(12000));
			my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1",
				LocalPort => $p, Proto => "tcp", Listen => 1, ReuseAddr => 1)
			  or exit 1;
			print "$p\n";') || continue
		case " ${ports[*]} " in *" $p "*) continue ;; esac
		ports+=("$p")
		echo "$p"
		return 0
	done
	return 1
}

# The source table of every benchmark: 8 mixed columns
columns="id bigint, label text, amount numeric(12,2), ratio double precision,
  ts timestamp with time zone, flag boolean, arr integer[], doc jsonb"

# make_source N: SQL that creates src_N with N rows, frozen, analyzed and
# checkpointed, so that every method reads the same warm table
make_source()
{
	cat <<EOF
CREATE TABLE src_$1 ($columns);
INSERT INTO src_$1
SELECT g,
       md5(g::text) || repeat(chr(97 + g % 26), g % 24),
       ((g::int8 * 7919) % 100000000) / 100.0,
       g / 7.0::float8,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second',
       CASE WHEN g % 7 = 0 THEN NULL ELSE g % 2 = 0 END,
       ARRAY[g % 1000, g % 7, g % 13]::int4[],
       jsonb_build_object('k', g % 100, 's', 'v' || (g % 1000), 'ok', g % 3 = 0)
  FROM generate_series(1, $1) g;
VACUUM (FREEZE, ANALYZE) src_$1;
CHECKPOINT;
SELECT count(*) FROM src_$1;
EOF
}

# ---- CPU accounting ---------------------------------------------------------
# cpu_watch_start OUT LABEL=PID ...: start, in the background, a sampler of
# the CPU time (user + system) of each process tree rooted at PID (a
# postmaster: its backends, parallel workers, walwriter, checkpointer, ...;
# clickhouse-server: its threads); cpu_watch_stop OUT makes it write OUT
# and waits for it.  OUT has one line per tree and per process, all in CPU
# seconds spent between start and stop:
#   total LABEL SECONDS        the whole tree, exact: the root's own time,
#                              that of its live descendants and, through
#                              the root's cutime/cstime, that of those that
#                              exited (once reaped)
#   proc LABEL PID SECONDS TITLE   each process of the tree, sampled every
#                              20 ms (a process that exits loses at most
#                              the last 20 ms); TITLE is its ps title, e.g.
#                              "postgres: parallel worker for PID 123"
#   thread LABEL TID SECONDS NAME  each thread of a root that used
#                              10 ms or more (clickhouse-server)
# At stop it first waits (up to 30 s) until every process that appeared
# in a tree during the run has exited and been reaped, so that the totals
# hold all of it: stop it after the method's client has finished.
cpu_watch_start()
{
	local out=$1 pid
	shift
	rm -f "$out" "$out.stop" "$out.ready"
	perl -e "$cpu_watch_pl" "$out" "$@" < /dev/null > /dev/null 2> "$out.err" &
	pid=$!
	# it has its baseline when it creates OUT.ready
	for _ in $(seq 1 200); do
		[ -e "$out.ready" ] && return 0
		kill -0 "$pid" 2> /dev/null || break
		sleep 0.01
	done
	cat "$out.err" >&2
	return 1
}

cpu_watch_stop()
{
	local out=$1
	touch "$out.stop"
	# not "wait": this may run in a subshell, whose child the sampler is not
	for _ in $(seq 1 1200); do
		[ -e "$out" ] && break
		[ -s "$out.err" ] && break
		sleep 0.05
	done
	[ -s "$out" ] || { echo "bench: the CPU sampler wrote nothing" >&2; cat "$out.err" >&2; return 1; }
	rm -f "$out.stop" "$out.ready" "$out.err"
}

# cpu_field OUT WHAT: from cpu_watch's OUT, in seconds (2 decimals):
#   total:LABEL           that tree's total
#   procs:LABEL:REGEX     the processes of tree LABEL whose title matches
#                         REGEX, largest first, joined by "+" ("-": none)
#   sum:LABEL:REGEX       their sum
#   threads:LABEL:N       the N busiest threads of tree LABEL, joined by "+"
cpu_field()
{
	awk -v what="$2" '
	BEGIN {
		# KIND:LABEL:ARG, ARG may hold colons
		kind = substr(what, 1, index(what, ":") - 1)
		rest = substr(what, length(kind) + 2)
		label = rest; arg = ""
		if (index(rest, ":")) {
			label = substr(rest, 1, index(rest, ":") - 1)
			arg = substr(rest, length(label) + 2)
		}
	}
	kind == "total" && $1 == "total" && $2 == label { printf "%.2f", $3; found = 1 }
	(kind == "procs" || kind == "sum") && $1 == "proc" && $2 == label {
		# the title: what follows "proc LABEL PID SECONDS "
		title = $0
		for (i = 1; i <= 4; i++) sub(/^[^ ]+ /, "", title)
		if (title ~ arg) { v[++n] = $4; s += $4 }
	}
	kind == "threads" && $1 == "thread" && $2 == label { v[++n] = $4 }
	END {
		if (kind == "total") { if (!found) printf "-"; exit }
		if (kind == "sum") { printf (n ? "%.2f" : "-"), s; exit }
		if (!n) { printf "-"; exit }
		# largest first
		for (i = 1; i <= n; i++)
			for (j = i + 1; j <= n; j++)
				if (v[j] > v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		m = (kind == "threads" && arg < n) ? arg : n
		for (i = 1; i <= m; i++) printf "%s%.2f", (i > 1 ? "+" : ""), v[i]
	}' "$1"
}

cpu_watch_pl='
use strict;
use warnings;
use POSIX ();
use Time::HiRes qw(sleep time);

my ($out, @roots) = @ARGV;
my $hz = POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100;
my %root;							# label => pid
for (@roots) { my ($l, $p) = split /=/, $_, 2; $root{$l} = $p; }

# (ppid, own ticks, reaped children ticks) of a pid, or () when gone
sub stat_of
{
	my ($path) = @_;
	open(my $fh, "<", $path) or return ();
	my $s = <$fh>;
	close $fh;
	return () unless defined $s && $s =~ /\) (.*)$/;
	my @f = split / /, $1;
	# from the state on: 0 state, 1 ppid, 11 utime, 12 stime,
	# 13 cutime, 14 cstime
	return () if $f[0] eq "Z";			# not reaped yet: not its final figures
	return ($f[1], $f[11] + $f[12], $f[13] + $f[14]);
}

sub title_of
{
	my ($pid) = @_;
	open(my $fh, "<", "/proc/$pid/cmdline") or return "?";
	local $/;
	my $t = <$fh> // "";
	close $fh;
	$t =~ s/\0+$//;
	$t =~ s/\0/ /g;
	$t =~ s/\s+$//;
	return $t eq "" ? "?" : $t;
}

# the children of a pid, from /proc/PID/task/*/children
sub children
{
	my ($pid) = @_;
	my @k;
	for my $f (glob("/proc/$pid/task/*/children"))
	{
		open(my $fh, "<", $f) or next;
		my $l = <$fh> // "";
		close $fh;
		push @k, split " ", $l;
	}
	return @k;
}

# label => { pid => [ppid, own, reaped children] } for the root of each
# label and all its descendants but zombies
sub trees
{
	my %t;
	for my $l (keys %root)
	{
		my @todo = ($root{$l});
		while (defined(my $pid = shift @todo))
		{
			my @s = stat_of("/proc/$pid/stat") or next;
			$t{$l}{$pid} = [@s];
			push @todo, children($pid);
		}
	}
	return \%t;
}

# the whole tree, in ticks
sub total
{
	my ($tree, $l) = @_;
	return undef unless $tree->{$l}{ $root{$l} };	# the root is gone
	my $t = 0;
	$t += $_->[1] + $_->[2] for values %{ $tree->{$l} };
	return $t;
}

sub threads
{
	my ($pid) = @_;
	my %th;
	opendir(my $dh, "/proc/$pid/task") or return {};
	for my $tid (grep { /^\d+$/ } readdir $dh)
	{
		my @s = stat_of("/proc/$pid/task/$tid/stat");
		$th{$tid} = $s[1] if @s;
	}
	closedir $dh;
	return \%th;
}

# the descendants of a root, not the root
sub members
{
	my ($tree, $l) = @_;
	return grep { $_ != $root{$l} } keys %{ $tree->{$l} };
}

my $tree = trees();
my (%start, %first, %last, %title, %label, %th0);
for my $l (keys %root)
{
	$start{$l} = total($tree, $l);
	die "process $root{$l} ($l) is not running\n" unless defined $start{$l};
	for my $pid (members($tree, $l))
	{
		$first{$pid} = $last{$pid} = $tree->{$l}{$pid}[1];
		$label{$pid} = $l;
		$title{$pid} = title_of($pid);
	}
	$th0{$l} = threads($root{$l});
}
open(my $rd, ">", "$out.ready") or die "$out.ready: $!";
close $rd;

my %before = map { $_ => 1 } keys %first;
my $stopping;
while (1)
{
	$tree = trees();
	for my $l (keys %root)
	{
		for my $pid (members($tree, $l))
		{
			if (!exists $last{$pid})
			{
				$first{$pid} = 0;		# born during the run
				$label{$pid} = $l;
			}
			$last{$pid} = $tree->{$l}{$pid}[1];
			# the ps title is set after the fork: read it again until set
			$title{$pid} = title_of($pid)
			  if !defined $title{$pid} || $title{$pid} !~ /^postgres: ./;
		}
	}
	if (-e "$out.stop")
	{
		$stopping //= time;
		# done when no process born during the run is left (zombies
		# excluded from the trees are not reaped yet: wait for them too)
		my $left = 0;
		for my $pid (keys %first)
		{
			next if $before{$pid};
			$left++ if -e "/proc/$pid";
		}
		last if !$left || time - $stopping > 30;
	}
	sleep 0.02;
}
# the totals once more, now that every process born during the run is
# gone: one reaped between the read of its parent and that of the list of
# its children would be missed by the last look
$tree = trees();
open(my $fh, ">", "$out.tmp") or die "$out.tmp: $!";
for my $l (sort keys %root)
{
	my $end = total($tree, $l);
	printf $fh "total %s %s\n", $l,
	  defined $end ? sprintf("%.2f", ($end - $start{$l}) / $hz) : "-";
	for my $pid (sort { $a <=> $b } grep { $label{$_} eq $l } keys %first)
	{
		printf $fh "proc %s %d %.2f %s\n", $l, $pid,
		  ($last{$pid} - $first{$pid}) / $hz, $title{$pid} // "?";
	}
	my $th = threads($root{$l});
	next if keys %$th < 2;			# one thread: the process itself
	for my $tid (sort { $a <=> $b } keys %$th)
	{
		my $d = $th->{$tid} - ($th0{$l}{$tid} // 0);
		next if $d < $hz / 100;
		open(my $c, "<", "/proc/$root{$l}/task/$tid/comm");
		my $name = $c ? <$c> : "?";
		chomp $name;
		printf $fh "thread %s %d %.2f %s\n", $l, $tid, $d / $hz, $name;
	}
}
close $fh;
rename("$out.tmp", $out) or die "rename: $!";
'

# ---- where a process's CPU goes (perf) -------------------------------------
# perf_start OUT PID,PID...: perf record (call graphs through the frame
# pointers, 999 Hz, user space) of those processes, in the background;
# perf_stop OUT ends it; perf_share OUT SYMBOL...: the share (%) of the
# samples whose stack holds one of the SYMBOLs or more, "-" without perf
# or samples.  Static functions have no symbol in a stripped build, and a
# function that only tail-calls another leaves no frame: name what calls
# them or what they call.  The decoding at a logical slot, peeks and
# advances (the peek's set-returning function with the pgoutput messages
# and their tuplestore, everything that reads and decodes WAL):
decoding_symbols="ExecMakeTableFunctionResult pg_logical_replication_slot_advance XLogReadRecord LogicalDecodingProcessRecord CreateDecodingContext FreeDecodingContext"
perf_start()
{
	command -v perf > /dev/null || return 0
	perf record -q -g -F 999 -o "$1" -p "$2" > "$1.log" 2>&1 &
	echo $! > "$1.pid"
	sleep 0.3
}

perf_stop()
{
	local pid
	[ -f "$1.pid" ] || return 0
	pid=$(cat "$1.pid")
	kill -INT "$pid" 2> /dev/null
	wait "$pid" 2> /dev/null
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2> /dev/null || break
		sleep 0.1
	done
	rm -f "$1.pid"
}

perf_share()
{
	local data=$1
	shift
	[ -s "$data" ] || { printf -- -; return 0; }
	perf script -i "$data" -F ip,sym 2> /dev/null |
		awk -v syms=" $* " '
			# a sample: its frames, one a line, then an empty line
			NF == 0 { if (inside) { n++; hit += in_set; inside = 0; in_set = 0 } next }
			{ inside = 1; if (index(syms, " " $2 " ")) in_set = 1 }
			END {
				if (inside) { n++; hit += in_set }
				if (n) printf "%.1f", 100 * hit / n; else printf "-"
			}'
}

# ---- the servers of the sync benchmarks -------------------------------------
# sync.sh, sync_native.sh and sync_many.sh each start a local cluster (the
# source, with ctas_fed), a remote one (catalog wh) and, when asked, a
# ClickHouse server (catalog lake), all under WORKDIR ($work) and stopped on
# exit.  The caller sets work, bindir, testdir and conf_file first.

# (kept when the sourcing script set them first)
[ -n "${started+x}" ] || started=()
ch_pid=${ch_pid:-}

# sync_bench_env: the PostgreSQL binaries of $bindir first in PATH, and no
# libpq setting from the environment
sync_bench_env()
{
	export PATH=$bindir:$PATH
	unset PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER PGPASSWORD PGPASSFILE \
		PGSERVICE PGSERVICEFILE PGOPTIONS PGDATA PGAPPNAME PGSSLMODE
}

# sync_bench_stop: stop every cluster sync_bench_pg_init started, then
# ClickHouse (TERM, then KILL after 60 s); the benchmark's EXIT trap
sync_bench_stop()
{
	local d
	trap - EXIT INT TERM HUP
	for d in "${started[@]}"; do
		[ -f "$d/postmaster.pid" ] &&
			pg_ctl -D "$d" -m fast -w -t 60 stop > /dev/null 2>&1
	done
	if [ -n "$ch_pid" ] && kill -0 "$ch_pid" 2> /dev/null; then
		kill -TERM "$ch_pid"
		for _ in $(seq 1 300); do
			kill -0 "$ch_pid" 2> /dev/null || break
			sleep 0.2
		done
		kill -KILL "$ch_pid" 2> /dev/null
	fi
}

# sync_bench_pg_init NAME PORT EXTRA_CONF [EXTRA_HBA]: initdb $work/NAME,
# configure, start
sync_bench_pg_init()
{
	local dir=$work/$1
	initdb -D "$dir" -A trust -E UTF8 --locale=C.UTF-8 > "$work/$1.initdb.log" 2>&1 ||
		{ cat "$work/$1.initdb.log"; return 1; }
	cat >> "$dir/postgresql.conf" <<EOF

# added by test/bench/$(basename "$0")
port = $2
listen_addresses = '127.0.0.1'
unix_socket_directories = '$work'
ssl = off
shared_buffers = 256MB
max_wal_size = 8GB
$3
EOF
	{
		echo "local all all                trust"
		[ -n "${4:-}" ] && echo "$4"
		echo "host  all all 127.0.0.1/32   scram-sha-256"
	} > "$dir/pg_hba.conf"
	started+=("$dir")
	pg_ctl -D "$dir" -l "$work/$1.log" -w -t 120 start > /dev/null ||
		{ tail -n 30 "$work/$1.log"; return 1; }
}

# sync_bench_clusters LOCAL_CONF REMOTE_CONF [LOCAL_HBA]: the two clusters
# on free ports (lport, rport), with database bench on the local one and dw
# (owner loader, password secret) on the remote one; lsql and rsql run SQL
# there.  Dies on a failure.
sync_bench_clusters()
{
	lport=$(free_port) || die "no free port"
	rport=$(free_port) || die "no free port"
	sync_bench_pg_init local "$lport" "$1" "${3:-}" || die "local cluster did not start"
	sync_bench_pg_init remote "$rport" "$2" || die "remote cluster did not start"
	psql -X -q -h "$work" -p "$lport" -d postgres -c "CREATE DATABASE bench" || die "CREATE DATABASE"
	psql -X -q -h "$work" -p "$rport" -d postgres \
		-c "CREATE ROLE loader LOGIN PASSWORD 'secret'" \
		-c "CREATE DATABASE dw OWNER loader" || die "remote set-up"
}
lsql() { psql -X -q -At -h "$work" -p "$lport" -d bench -v ON_ERROR_STOP=1 "$@"; }
rsql() { psql -X -q -At -h "$work" -p "$rport" -d dw -v ON_ERROR_STOP=1 "$@"; }

# sync_bench_wh_sql: the SQL of catalog wh, the remote cluster, for lsql
sync_bench_wh_sql()
{
	cat <<EOF
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR CURRENT_USER SERVER wh
  OPTIONS (user 'loader', password 'secret');
EOF
}

# chq SQL: run SQL on ClickHouse, fail on an error
chq()
{
	local out
	out=$(curl -sS -H "X-ClickHouse-User: default" -H "X-ClickHouse-Key: $chpw" \
		--data-binary "$1" "$churl/?wait_end_of_query=1" -w '\n%{http_code}') || return 1
	case ${out##*$'\n'} in
		200) printf '%s' "${out%$'\n'*}" ;;
		*) echo "ClickHouse: ${out%$'\n'*}" >&2; return 1 ;;
	esac
}

# sync_bench_clickhouse: a ClickHouse server (test/lib/clickhouse-config.sh)
# in $work/clickhouse, its pid in ch_pid, its url in churl, database bench,
# and catalog lake on it.  Dies on a failure.
sync_bench_clickhouse()
{
	local chserver chhttp chtcp
	chserver=$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)
	[ -x "$chserver" ] || die "clickhouse-server not found"
	chdir=$work/clickhouse
	chhttp=$(free_port) || die "no free port"
	chtcp=$(free_port) || die "no free port"
	chpw=bench$RANDOM$RANDOM
	churl=http://127.0.0.1:$chhttp
	bash "$testdir/lib/clickhouse-config.sh" "$chdir" "$chhttp" "$chtcp" "$chpw" ||
		die "clickhouse-config.sh failed"
	"$chserver" --config-file="$chdir/config.xml" --pid-file="$chdir/clickhouse.pid" \
		--daemon > "$chdir/log/stderr.log" 2>&1 || die "clickhouse-server did not start"
	for _ in $(seq 1 150); do
		[ -z "$ch_pid" ] && [ -f "$chdir/clickhouse.pid" ] && ch_pid=$(tr -dc '0-9' < "$chdir/clickhouse.pid")
		[ "$(curl -s "$churl/ping")" = "Ok." ] && break
		sleep 0.2
	done
	[ "$(curl -s "$churl/ping")" = "Ok." ] || die "ClickHouse did not answer"
	[ -n "$ch_pid" ] || ch_pid=$(tr -dc '0-9' < "$chdir/clickhouse.pid")
	chq "CREATE DATABASE bench" || die "CREATE DATABASE bench in ClickHouse"
	lsql <<EOF || die "ClickHouse catalog"
CREATE SERVER lake FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url '$churl');
CREATE USER MAPPING FOR CURRENT_USER SERVER lake
  OPTIONS (user 'default', password '$chpw');
EOF
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
