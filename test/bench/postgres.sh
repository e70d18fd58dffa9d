#!/bin/bash
# test/bench/postgres.sh - ctas_fed against the tools a user would use
# instead, to load a PostgreSQL table into another PostgreSQL cluster:
#
#   ctas_fed      CREATE TABLE wh.public.t AS SELECT * FROM src
#                 (CREATE TABLE + binary COPY + two-phase commit, one statement)
#   ctas_fed_par2, ctas_fed_par4
#                 the same WITH (parallel = 2 or 4): that many parallel
#                 workers COPY into a scratch table over connections of
#                 their own, which the two-phase transaction renames
#   copy pipe     psql -c "COPY src TO STDOUT (FORMAT binary)" |
#                 psql -c "COPY t FROM STDIN (FORMAT binary)"
#   postgres_fdw  INSERT INTO foreign_table SELECT * FROM src, batch_size 1000
#
# Called by test/bench/run.sh ("make bench") as the OS user that runs the
# servers, from a staged copy of the repository, with the folder it may
# use (under /tmp) as its only argument:
#
#   bash test/bench/postgres.sh WORKDIR
#
# Environment:
#   BENCH_ROWS     sizes to measure, default "1000000 5000000"
#   BENCH_RUNS     timed runs of each method at each size, default 3; the
#                  best (shortest) is reported, with all the runs next to it
#   BENCH_METHODS  a subset of "ctas_fed ctas_fed_par2 ctas_fed_par4
#                  copy_pipe postgres_fdw" (default all)
#   CTAS_PG_BINDIR PostgreSQL programs, default /usr/lib/postgresql/15/bin
#
# It starts two throwaway clusters in WORKDIR (local: ctas_fed preloaded,
# postgres_fdw; remote: max_prepared_transactions = 10), both on
# 127.0.0.1 only on free ports, and stops them on exit, failure and signals
# included.  Every method writes into a fresh, empty remote table "t",
# dropped after the run.  The source table of each size is generated once,
# frozen and analyzed, and read warm from the OS cache by every method.
# Runs are interleaved (round 1: every method, round 2: every method, ...)
# so that drift on a shared machine spreads over the methods.
#
# What is timed (wall clock, on the client):
#   ctas_fed, postgres_fdw   the statement, by psql's \timing, in a fresh
#                            session (so ctas_fed's connection to the remote,
#                            CREATE TABLE, PREPARE and COMMIT PREPARED are in)
#   copy pipe                the whole pipeline: both psql processes, their
#                            connections, both COPYs; the remote table is
#                            created before, untimed
# postgres_fdw's remote table and foreign table are also created untimed.
#
# Memory: a side process reads /proc/<pid>/status of the local backend
# every 50 ms until it exits, and keeps the largest RssAnon (private
# anonymous memory: palloc'd memory, libpq buffers; not shared_buffers) and
# the last VmHWM (peak resident set, shared pages the backend touched
# included).  The local backend of ctas_fed and postgres_fdw is sampled
# from the start of the session (psql hands its pid over); that of the
# pipe's COPY TO is found among the postmaster's children by its ps title.
#
# CPU (user + system, in seconds, the difference between the start and the
# end of each run; cpu_watch_start in lib.sh): everything each cluster
# spent, its postmaster's whole process tree (backends, parallel workers,
# walwriter, checkpointer, ..., those that exited during the run included,
# through the postmaster's reaped-children time); the client processes
# (psql, both of the pipe's) from the shell that waits for them; and per
# process, sampled every 20 ms: the local backend of the session (the
# leader, or the pipe's COPY TO), each parallel worker, each remote backend
# (with parallel = N: N workers' and the leader's own, which only creates,
# prepares and commits).  The sampler reads /proc only and opens no
# connection, so it adds no backend to what it measures.  The WAL that the
# remote wrote during the run (pg_current_wal_lsn before and after, read
# outside the CPU window) is printed too, per million rows: with more
# cores, that is what a parallel load runs into.
#
# "cpu stall" (in the raw lines) is the share of the run's wall time during
# which some runnable task waited for a CPU (/proc/pressure/cpu): high
# values mean that something else, or the method's own processes, wanted
# more than the CPUs there are; on a shared machine it tells a noisy run.
#
# Output: the raw runs, then a Markdown table, the CPU figures, and the
# verdict on the goals of issue 3 (>= 0.9x the copy pipe, >= 3x
# postgres_fdw, flat memory) and issue 11 (parallel = 2 at >= 1.3x the
# copy pipe).  Exit status 0 when every run succeeded and every goal was
# met, 3 when every run succeeded but a goal was not met, 1 when a run
# failed (every run checks the row count of the remote table), 130 when
# interrupted.
#
# Internal: "postgres.sh --sample PID OUTFILE" is the memory sampler,
# "--watch" finds a backend and samples it; "postgres.sh --summary
# WORKDIR/results.txt" prints the table again.

set -u -o pipefail

# ---- sampler of one backend's memory and CPU -----------------------------
if [ "${1:-}" = --sample ]; then
	pid=$2 out=$3 max=0 first='' hwm=0 ticks=0
	# a pipe that never delivers: "read -t" on it sleeps without a fork
	exec {nap}<> <(:)
	while [ -d "/proc/$pid" ]; do
		{
			while read -r key value _; do
				case $key in
					RssAnon:)
						[ -z "$first" ] && first=$value
						[ "$value" -gt "$max" ] && max=$value
						;;
					VmHWM:) hwm=$value ;;
				esac
			done < "/proc/$pid/status"
			# utime + stime: fields 14 and 15 of stat, 11 and 12 (from 0)
			# of what follows "pid (comm) "
			read -r stat < "/proc/$pid/stat" &&
				read -r -a fields <<< "${stat##*) }" &&
				[ "${#fields[@]}" -gt 13 ] && ticks=$((fields[11] + fields[12]))
		} 2> /dev/null
		read -r -t 0.05 -u "$nap" _
	done
	cpu=$(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }')
	echo "$max $hwm ${first:-0} $cpu" > "$out.tmp" && mv "$out.tmp" "$out"
	exit 0
fi

# ---- backend finder (started in the background for each run) -----------
# --watch POSTMASTER_PID PATTERN OUT: poll the postmaster's children until
# one has a ps title that PATTERN (a shell pattern) matches, then sample
# it; "- - - -" in OUT if OUT.done appears first.  Reads /proc only: no
# connection, so no backend of its own.
if [ "${1:-}" = --watch ]; then
	pm=$2 pattern=$3 out=$4
	exec {nap}<> <(:)
	while [ ! -e "$out.done" ]; do
		for f in /proc/"$pm"/task/*/children; do
			read -r -a kids < "$f" || true
			for pid in "${kids[@]}"; do
				# the ps title is one string (no fork: this polls)
				title=
				read -r -d '' title < "/proc/$pid/cmdline"
				# shellcheck disable=SC2053
				[[ $title == $pattern ]] && exec bash "$0" --sample "$pid" "$out"
			done
		done 2> /dev/null
		read -r -t 0.02 -u "$nap" _
	done
	echo "- - - -" > "$out.tmp" && mv "$out.tmp" "$out"
	exit 0
fi

# summary FILE: the Markdown table and the verdict, from the lines of FILE:
# "rows method run seconds local_rssanon_peak_kB local_vmhwm_kB
# local_rssanon_first_kB local_cluster_cpu_s remote_cluster_cpu_s
# client_cpu_s stall_pct local_backend_cpu_s workers_cpu_s
# remote_backends_cpu_s remote_wal_bytes" (workers and remote backends:
# "a+b+...", largest first; "-" where not measured)
summary()
{
	awk -v ncpu="$(nproc)" '
	# a stated goal: "met" or "NOT met", counted; any NOT met makes the
	# exit status 1
	function verdict(ok) { if (!ok) notmet++; return ok ? "met" : "NOT met" }
	function mb(kb) { return sprintf("%.1f MB", kb / 1024) }
	function range(k) {
		if (!(k in maxrss)) return "-"
		if (maxrss[k] - minrss[k] < 512) return mb(maxrss[k])
		return sprintf("%.1f-%.1f MB", minrss[k] / 1024, maxrss[k] / 1024)
	}
	function has(n, m) { return (n SUBSEP m) in best }
	function num(v) { return v == "-" ? 0 : v }
	# sum of the first "upto" terms of "a+b+c" (all when upto is 0)
	function sumof(list, upto,   a, c, i, t) {
		if (list == "-") return 0
		c = split(list, a, "+")
		if (upto && upto < c) c = upto
		for (i = 1; i <= c; i++) t += a[i]
		return t
	}
	function count(list,   a) { return list == "-" ? 0 : split(list, a, "+") }
	# the run of median total CPU of key k: its line
	function median(k,   i, j, t, c, idx) {
		c = nrun[k]
		for (i = 1; i <= c; i++) idx[i] = i
		for (i = 1; i <= c; i++)
			for (j = i + 1; j <= c; j++)
				if (tot[k, idx[j]] < tot[k, idx[i]]) { t = idx[i]; idx[i] = idx[j]; idx[j] = t }
		return line[k, idx[int((c + 1) / 2)]]
	}
	{
		key = $1 SUBSEP $2
		if (!(key in best) || $4 < best[key]) best[key] = $4
		runs[key] = runs[key] (runs[key] == "" ? "" : ", ") sprintf("%.2f", $4)
		nrun[key]++
		line[key, nrun[key]] = $0
		tot[key, nrun[key]] = num($8) + num($9) + num($10)
		# memory: the largest over the runs, and the smallest peak
		if ($5 != "-" && (!(key in maxrss) || $5 > maxrss[key])) maxrss[key] = $5
		if ($5 != "-" && (!(key in minrss) || $5 < minrss[key])) minrss[key] = $5
		if ($5 != "-" && $7 != "-" && (!(key in growth) || $5 - $7 > growth[key]))
			growth[key] = $5 - $7
		if ($6 != "-" && (!(key in maxhwm) || $6 > maxhwm[key])) maxhwm[key] = $6
		if (!($1 in seen)) { seen[$1] = 1; sizes[++nsizes] = $1 }
	}
	END {
		nm = split("ctas_fed ctas_fed_par2 ctas_fed_par4 copy_pipe postgres_fdw", m, " ")
		# the CPU figures of the median run of each method
		for (k in nrun) {
			split(median(k), f, " ")
			lcpu[k] = num(f[8]); rcpu[k] = num(f[9]); ccpu[k] = num(f[10])
			bcpu[k] = f[12]; wcpu[k] = f[13]; rbcpu[k] = f[14]
			allcpu[k] = lcpu[k] + rcpu[k] + ccpu[k]
			wal[k] = num(f[15])
		}
		print "| rows | method | seconds (best) | rows/s | vs copy pipe | ctas_fed / postgres_fdw | local backend peak RssAnon (runs: min-max) | local backend VmHWM (max) | CPU s: local cluster / remote cluster / clients (run of median CPU) | CPU s per million rows | CPU s per process: local backend; parallel workers; remote backends | all runs (s) |"
		print "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
		for (i = 1; i <= nsizes; i++) {
			n = sizes[i]
			for (j = 1; j <= nm; j++) {
				k = n SUBSEP m[j]
				if (!(k in best)) continue
				vs_pipe = has(n, "copy_pipe") ? sprintf("%.2fx", best[n, "copy_pipe"] / best[k]) : "-"
				vs_fdw = ""
				if (m[j] == "ctas_fed" && has(n, "postgres_fdw"))
					vs_fdw = sprintf("%.2fx", best[n, "postgres_fdw"] / best[k])
				printf "| %d | %s | %.2f | %d | %s | %s | %s | %s | %.2f / %.2f / %.2f | %.2f | %s; %s; %s | %s |\n", n, m[j],
					best[k], n / best[k], vs_pipe, vs_fdw,
					range(k), (k in maxhwm) ? mb(maxhwm[k]) : "-",
					lcpu[k], rcpu[k], ccpu[k], allcpu[k] * 1e6 / n,
					bcpu[k], wcpu[k], rbcpu[k], runs[k]
			}
		}
		print ""
		printf "== CPU: where the bound lies on this machine (%d CPUs; all processes of both clusters and the clients, run of median CPU)\n", ncpu
		for (i = 1; i <= nsizes; i++) {
			n = sizes[i]
			for (j = 1; j <= nm; j++) {
				k = n SUBSEP m[j]
				if (!(k in best)) continue
				printf "%d rows: %-13s %6.2f CPU s (%.2f per million rows: local %.2f, remote %.2f, clients %.2f): on %d CPUs no faster than %.2f s, best run %.2f s; remote WAL %.0f MB per million rows\n",
					n, m[j], allcpu[k], allcpu[k] * 1e6 / n, lcpu[k] * 1e6 / n,
					rcpu[k] * 1e6 / n, ccpu[k] * 1e6 / n, ncpu, allcpu[k] / ncpu, best[k],
					wal[k] / 1048576 * 1e6 / n
			}
			if (has(n, "copy_pipe") && has(n, "ctas_fed_par2")) {
				p = n SUBSEP "copy_pipe"; q = n SUBSEP "ctas_fed_par2"
				printf "%d rows: ceiling of parallel = 2 vs the copy pipe here: %.2fx (the pipe best run / parallel = 2 CPU over %d CPUs); pipe CPU / parallel = 2 CPU = %.2fx\n",
					n, best[p] / (allcpu[q] / ncpu), ncpu, allcpu[p] / allcpu[q]
			}
			# per process: what one core does
			for (j = 1; j <= nm; j++) {
				k = n SUBSEP m[j]
				if (!(k in best) || m[j] !~ /^ctas_fed/) continue
				nw = count(wcpu[k])
				if (nw > 0) {
					w = sumof(wcpu[k], 0); r = sumof(rbcpu[k], nw)
					printf "%d rows: %-13s per core: a local worker reads and encodes %d rows/s (%d workers, %s s), a remote COPY FROM backend takes %d rows/s (%s s of %s s); leader %s s\n",
						n, m[j], w ? n / w : 0, nw, wcpu[k], r ? n / r : 0,
						r, rbcpu[k], bcpu[k]
				} else if (count(rbcpu[k]) > 0) {
					b = num(bcpu[k]); r = sumof(rbcpu[k], 1)
					printf "%d rows: %-13s per core: the local backend reads and encodes %d rows/s (%s s), the remote COPY FROM backend takes %d rows/s (%s s)\n",
						n, m[j], b ? n / b : 0, bcpu[k], r ? n / r : 0, r
				}
			}
		}
		print ""
		print "== goals (issues 3 and 11)"
		for (i = 1; i <= nsizes; i++) {
			n = sizes[i]
			if (!has(n, "ctas_fed")) continue
			cf = best[n, "ctas_fed"]
			if (has(n, "copy_pipe")) {
				r = best[n, "copy_pipe"] / cf
				printf "%d rows: ctas_fed = %.2fx the copy pipe (goal >= 0.9): %s\n", n, r,
					verdict(r >= 0.9)
			}
			if (has(n, "postgres_fdw")) {
				r = best[n, "postgres_fdw"] / cf
				printf "%d rows: ctas_fed = %.2fx postgres_fdw (goal >= 3): %s\n", n, r,
					verdict(r >= 3)
			}
		}
		for (i = 1; i <= nsizes; i++) {
			n = sizes[i]
			if (!has(n, "ctas_fed_par2") || !has(n, "copy_pipe")) continue
			r = best[n, "copy_pipe"] / best[n, "ctas_fed_par2"]
			printf "%d rows: parallel = 2 = %.2fx the copy pipe (goal >= 1.3 on this machine): %s\n", n, r,
				verdict(r >= 1.3)
		}
		lo = sizes[1]; hi = sizes[nsizes]
		if (nsizes >= 2 && has(lo, "ctas_fed")) {
			a = maxrss[lo, "ctas_fed"]; b = maxrss[hi, "ctas_fed"]
			# flat: the largest peak at most 10% + 1 MB above that of the
			# smallest size (sampling noise)
			printf "ctas_fed local backend peak RssAnon, largest of the runs: %s at %d rows, %s at %d rows (goal: flat): %s\n",
				mb(a), lo, mb(b), hi, verdict(b <= a * 1.1 + 1024)
		}
		if (nsizes >= 2 && has(lo, "postgres_fdw"))
			printf "(postgres_fdw: %s at %d rows, %s at %d rows)\n",
				mb(maxrss[lo, "postgres_fdw"]), lo, mb(maxrss[hi, "postgres_fdw"]), hi
		for (i = 1; i <= nsizes; i++) {
			n = sizes[i]
			out = ""
			for (j = 1; j <= nm; j++)
				if ((n SUBSEP m[j]) in growth)
					out = out sprintf("%s%s %s", out == "" ? "" : ", ", m[j],
						mb(growth[n, m[j]]))
			if (out != "")
				printf "local backend RssAnon growth during the session, largest of the runs, %d rows: %s\n",
					n, out
		}
		if (notmet) {
			printf "%d stated goal(s) NOT met: exit status 1\n", notmet
			exit 1
		}
	}' "$1"
}

if [ "${1:-}" = --summary ]; then
	summary "$2"
	exit    # 1 when a stated goal is not met
fi

work=${1:?usage: postgres.sh WORKDIR}
bindir=${CTAS_PG_BINDIR:-/usr/lib/postgresql/15/bin}
rows_list=${BENCH_ROWS:-1000000 5000000}
runs=${BENCH_RUNS:-3}
methods=${BENCH_METHODS:-ctas_fed ctas_fed_par2 ctas_fed_par4 copy_pipe postgres_fdw}
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
conf_file=$(cd "$(dirname "$0")/.." && pwd)/ctas_fed.conf

export PATH=$bindir:$PATH
unset PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER PGPASSWORD PGPASSFILE \
	PGSERVICE PGSERVICEFILE PGOPTIONS PGDATA PGAPPNAME PGSSLMODE

case $runs in '' | *[!0-9]* | 0) echo "BENCH_RUNS must be a positive integer" >&2; exit 1 ;; esac
for m in $methods; do
	case $m in ctas_fed | ctas_fed_par2 | ctas_fed_par4 | copy_pipe | postgres_fdw) ;;
		*) echo "BENCH_METHODS: unknown method $m" >&2; exit 1 ;; esac
done
for n in $rows_list; do
	case $n in '' | *[!0-9]* | 0) echo "BENCH_ROWS: not a positive integer: $n" >&2; exit 1 ;; esac
done
[ -f "$conf_file" ] || { echo "$conf_file not found" >&2; exit 1; }
[ -f "$("$bindir/pg_config" --sharedir)/extension/postgres_fdw.control" ] || {
	echo "postgres_fdw is not installed (it comes with postgresql-15)" >&2; exit 1; }

started=()
cleanup()
{
	local d
	trap - EXIT INT TERM HUP
	for d in "${started[@]}"; do
		[ -f "$d/postmaster.pid" ] &&
			pg_ctl -D "$d" -m fast -w -t 60 stop > /dev/null 2>&1
	done
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM HUP

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# settings of both clusters, the same for every method
common_conf="
listen_addresses = '127.0.0.1'
unix_socket_directories = '$work'
ssl = off
shared_buffers = 256MB
# no checkpoint inside a timed run: an explicit CHECKPOINT precedes each run
max_wal_size = 8GB
checkpoint_timeout = 30min
# the source table is vacuumed and analyzed by hand, the targets are dropped
autovacuum = off
# fsync, synchronous_commit, wal_level, full_page_writes: defaults
# (on, on, replica, on)
"

# pg_init NAME PORT EXTRA_CONF HOST_AUTH: initdb, configure, start
pg_init()
{
	local dir=$work/$1
	initdb -D "$dir" -A trust -E UTF8 --locale=C.UTF-8 > "$work/$1.initdb.log" 2>&1 ||
		{ cat "$work/$1.initdb.log"; return 1; }
	cat >> "$dir/postgresql.conf" <<EOF

# added by test/bench/postgres.sh
port = $2
$common_conf
$3
EOF
	cat > "$dir/pg_hba.conf" <<EOF
# written by test/bench/postgres.sh
local all all                trust
host  all all 127.0.0.1/32   $4
EOF
	started+=("$dir")
	pg_ctl -D "$dir" -l "$work/$1.log" -w -t 120 start > /dev/null ||
		{ tail -n 30 "$work/$1.log"; return 1; }
}

lport=$(free_port) || die "no free port"
rport=$(free_port) || die "no free port"

# psql on the unix socket, as the runner (superuser of both clusters)
lsql() { psql -X -q -h "$work" -p "$lport" -d bench -v ON_ERROR_STOP=1 "$@"; }
rsql() { psql -X -q -h "$work" -p "$rport" -d dw -v ON_ERROR_STOP=1 "$@"; }

echo "== local PostgreSQL on 127.0.0.1:$lport (ctas_fed preloaded)"
pg_init local "$lport" "$(cat "$conf_file")" trust || die "local cluster did not start"
echo "== remote PostgreSQL on 127.0.0.1:$rport (database dw, role loader)"
pg_init remote "$rport" "max_prepared_transactions = 10" scram-sha-256 ||
	die "remote cluster did not start"

psql -X -q -h "$work" -p "$lport" -d postgres -v ON_ERROR_STOP=1 \
	-c "CREATE DATABASE bench" || die "CREATE DATABASE bench"
psql -X -q -h "$work" -p "$rport" -d postgres -v ON_ERROR_STOP=1 \
	-c "CREATE ROLE loader LOGIN PASSWORD 'secret'" \
	-c "CREATE DATABASE dw OWNER loader" || die "remote set-up"

lsql <<EOF || die "local set-up"
CREATE EXTENSION ctas_fed;
CREATE SERVER wh FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '$rport', dbname 'dw');
CREATE USER MAPPING FOR CURRENT_USER SERVER wh
  OPTIONS (user 'loader', password 'secret');
CREATE EXTENSION postgres_fdw;
CREATE SERVER fdw_wh FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host '127.0.0.1', port '$rport', dbname 'dw', batch_size '1000');
CREATE USER MAPPING FOR CURRENT_USER SERVER fdw_wh
  OPTIONS (user 'loader', password 'secret');
EOF

# the columns of every table here; the remote table that ctas_fed creates
# has exactly these types (checked below against its EXPLAIN)

# remote table t, empty, owned by loader (untimed)
create_remote_t()
{
	rsql -c "SET ROLE loader" -c "CREATE TABLE public.t ($columns)"
}

drop_remote_t()
{
	rsql -c "SET client_min_messages = warning" \
		-c "DROP TABLE IF EXISTS public.t" -c "CHECKPOINT" > /dev/null
}

remote_count()
{
	rsql -At -c "SELECT count(*) FROM public.t"
}

# wait_sample FILE: the sampler's "max_rssanon_kB vmhwm_kB
# first_rssanon_kB cpu_s", once the backend is gone
wait_sample()
{
	local f=$1
	for _ in $(seq 1 600); do
		[ -f "$f" ] && { cat "$f"; return 0; }
		sleep 0.05
	done
	echo "bench: the sampler of $f did not finish" >&2
	return 1
}

# CPU pressure: microseconds during which some runnable task waited for a
# CPU (0 when the kernel has no PSI)
cpu_stall_us()
{
	sed -n 's/^some .*total=\([0-9]*\).*/\1/p' /proc/pressure/cpu 2> /dev/null | grep . ||
		echo 0
}

# wait until no backend of loader is left from the previous run
wait_no_loader()
{
	for _ in $(seq 1 600); do
		[ "$(rsql -At -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'loader'")" = 0 ] &&
			return 0
		sleep 0.05
	done
	echo "bench: a backend of loader is still there on the remote" >&2
	return 1
}

# children_cpu FILE: CPU seconds (user + system) of the children, from the
# output of the "times" builtin in FILE
children_cpu()
{
	awk 'NR == 2 {
		t = 0
		for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
		printf "%.2f", t
	}' "$1"
}

# cpu_start OUT: sample the CPU of both clusters' process trees (lib.sh)
cpu_start()
{
	cpu_watch_start "$1" "local=$(head -n 1 "$work/local/postmaster.pid")" \
		"remote=$(head -n 1 "$work/remote/postmaster.pid")"
}

# cpu_end OUT LOCAL_BACKEND_REGEX: stop the sampler once every process
# born during the run has exited, and print "local_cluster_s
# remote_cluster_s local_backend_s workers_s remote_backends_s" (the
# backend: the local process whose ps title matches the regex)
cpu_end()
{
	cpu_watch_stop "$1" || return 1
	echo "$(cpu_field "$1" total:local) $(cpu_field "$1" total:remote)" \
		"$(cpu_field "$1" "sum:local:$2") $(cpu_field "$1" 'procs:local:parallel worker')" \
		"$(cpu_field "$1" 'procs:remote:^postgres: loader ')"
	rm -f "$1"
}

# run_statement LABEL SQL: the statement in a fresh local session, timed by
# psql's \timing, with the local backend's memory sampled (its pid is
# known first) and the CPU of both clusters and of psql measured; prints
# "seconds local_rssanon_kB local_vmhwm_kB local_first_kB local_cluster_s
# remote_cluster_s client_s local_backend_s workers_s remote_backends_s"
run_statement()
{
	local label=$1 sql=$2 lfile cfile tfile out rc ms lsample cpu

	lfile=$work/sample.local.$label.$RANDOM
	cfile=$work/cpu.$label.$RANDOM
	tfile=$work/times.$label.$RANDOM
	rm -f "$lfile"
	cpu_start "$cfile" || return 1
	out=$(
		lsql 2>&1 <<EOF
SELECT pg_backend_pid() AS pid \gset
\setenv BENCH_PID :pid
\setenv BENCH_SAMPLE '$lfile'
\! bash '$self' --sample "\$BENCH_PID" "\$BENCH_SAMPLE" < /dev/null > /dev/null 2>&1 &
\timing on
$sql;
EOF
		rc=$?
		times > "$tfile"
		exit $rc
	)
	rc=$?
	# the session's backend ("[local]": on the unix socket)
	cpu=$(cpu_end "$cfile" '^postgres: [^ ]+ bench [[]local[]]') || return 1
	[ "$rc" = 0 ] || { echo "$out" >&2; return 1; }
	ms=$(printf '%s\n' "$out" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -n 1)
	[ -n "$ms" ] || { echo "no timing in: $out" >&2; return 1; }
	lsample=$(wait_sample "$lfile") || return 1
	rm -f "$lfile"
	echo "$(awk -v ms="$ms" 'BEGIN { printf "%.3f", ms / 1000 }') ${lsample% *}" \
		"$(cpu_merge "$cpu" "$(children_cpu "$tfile")")"
	rm -f "$tfile"
}

# cpu_merge "L R B W RB" CLIENT: "L R CLIENT B W RB"
cpu_merge()
{
	local l r b w rb
	read -r l r b w rb <<< "$1"
	echo "$l $r $2 $b $w $rb"
}

run_ctas_fed()
{
	local n=$1
	run_statement ctas_fed "CREATE TABLE wh.public.t AS SELECT * FROM src_$n"
}

run_ctas_fed_par2()
{
	run_statement ctas_fed_par2 "CREATE TABLE wh.public.t WITH (parallel = 2) AS SELECT * FROM src_$1"
}

run_ctas_fed_par4()
{
	run_statement ctas_fed_par4 "CREATE TABLE wh.public.t WITH (parallel = 4) AS SELECT * FROM src_$1"
}

run_postgres_fdw()
{
	local n=$1
	create_remote_t > /dev/null || return 1
	run_statement postgres_fdw "INSERT INTO ft_t SELECT * FROM src_$n"
}

# run_copy_pipe N: the pipe, timed from the start of the first psql to the
# end of the last; its COPY TO backend's memory sampled (found by its ps
# title), the CPU of both clusters and of the two psql processes measured;
# prints the fields of run_statement
run_copy_pipe()
{
	local n=$1 t0 t1 lfile cfile tfile rc lsample cpu

	create_remote_t > /dev/null || return 1
	tfile=$work/times.pipe.$RANDOM
	lfile=$work/sample.local.pipe.$RANDOM
	cfile=$work/cpu.pipe.$RANDOM
	rm -f "$lfile" "$lfile.done"
	cpu_start "$cfile" || return 1
	bash "$self" --watch "$(head -n 1 "$work/local/postmaster.pid")" \
		"postgres: * bench 127.0.0.1(*" "$lfile" < /dev/null > /dev/null 2>&1 &
	t0=$(date +%s%N)
	# in a subshell of its own, whose only children are the two psql
	(
		psql -X -q -h 127.0.0.1 -p "$lport" -d bench \
			-v ON_ERROR_STOP=1 -c "COPY src_$n TO STDOUT (FORMAT binary)" |
			PGPASSWORD=secret psql -X -q -h 127.0.0.1 -p "$rport" -U loader -d dw \
				-v ON_ERROR_STOP=1 -c "COPY t FROM STDIN (FORMAT binary)"
		rc=$?
		times > "$tfile"
		exit $rc
	)
	rc=$?
	t1=$(date +%s%N)
	touch "$lfile.done"
	cpu=$(cpu_end "$cfile" '^postgres: [^ ]+ bench 127[.]0[.]0[.]1[(]') || return 1
	[ "$rc" = 0 ] || return 1
	lsample=$(wait_sample "$lfile") || return 1
	rm -f "$lfile" "$lfile.done"
	echo "$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.3f", ns / 1e9 }') ${lsample% *}" \
		"$(cpu_merge "$cpu" "$(children_cpu "$tfile")")"
	rm -f "$tfile"
}

lsql -c "CREATE FOREIGN TABLE ft_t ($columns) SERVER fdw_wh
  OPTIONS (schema_name 'public', table_name 't')" || die "CREATE FOREIGN TABLE"

results=$work/results.txt
: > "$results"

echo "== machine: $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo) RAM," \
	"load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "== settings: shared_buffers 256MB, max_wal_size 8GB, autovacuum off," \
	"fsync/synchronous_commit/wal_level default; $runs runs, best kept"
for n in $rows_list; do
	echo "== generating src_$n ($n rows)"
	t0=$(date +%s)
	make_source "$n" | lsql > /dev/null || die "generating src_$n"
	size=$(lsql -At -c "SELECT pg_size_pretty(pg_table_size('src_$n'))")
	echo "   $(($(date +%s) - t0)) s, $size"

	if [ "$n" = "$(echo "$rows_list" | awk '{ print $1 }')" ]; then
		echo "== what ctas_fed will do (EXPLAIN)"
		plan=$(lsql -At -c "EXPLAIN (COSTS OFF) CREATE TABLE wh.public.t AS SELECT * FROM src_$n") ||
			die "EXPLAIN of the CTAS"
		printf '%s\n' "$plan" | sed 's/^/   /'
		# the pre-created tables of the other methods are the same
		ddl=$(printf '%s\n' "$plan" | sed -n 's/^ *Remote DDL: //p' | tr -s ' \n' ' ')
		[ "$ddl" = "$(echo "CREATE TABLE public.t ($columns)" | tr -s ' \n' ' ')" ] ||
			die "ctas_fed creates '$ddl', the other methods '$columns'"
		printf '%s\n' "$plan" | grep -q 'Remote Load: .*FORMAT binary' ||
			die "ctas_fed does not use the binary COPY format here"
	fi

	for r in $(seq 1 "$runs"); do
		for m in $methods; do
			drop_remote_t || die "DROP TABLE t on the remote"
			wait_no_loader || die "the previous run is still connected"
			wal0=$(rsql -At -c "SELECT pg_current_wal_lsn()") || die "WAL position on the remote"
			stall0=$(cpu_stall_us)
			res=$("run_$m" "$n") || die "$m, $n rows, run $r failed"
			stall1=$(cpu_stall_us)
			wal=$(rsql -At -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$wal0')") ||
				die "WAL position on the remote"
			got=$(remote_count) || die "count on the remote"
			[ "$got" = "$n" ] || die "$m, $n rows, run $r: the remote table has $got rows"
			read -r secs rss hwm first cpu rcpu ccpu bcpu wcpu rbcpu <<< "$res"
			stall=$(awk -v us=$((stall1 - stall0)) -v s="$secs" 'BEGIN { printf "%.0f", us / 1e4 / s }')
			echo "$n $m $r $secs $rss $hwm $first $cpu $rcpu $ccpu $stall $bcpu $wcpu $rbcpu $wal" >> "$results"
			printf '   %-9s %-13s run %s: %8.3f s  CPU s: local cluster %s, remote cluster %s, psql %s; cpu stall %s%%; remote WAL %d MB\n' \
				"$n" "$m" "$r" "$secs" "$cpu" "$rcpu" "$ccpu" "$stall" "$((wal / 1048576))"
			printf '   %-9s %-13s        CPU s: local backend %s, parallel workers %s, remote backends %s\n' \
				"" "" "$bcpu" "$wcpu" "$rbcpu"
			printf '   %-9s %-13s        local backend RssAnon %s kB (first sample), %s kB (peak); VmHWM %s kB\n' \
				"" "" "$first" "$rss" "$hwm"
		done
	done
	drop_remote_t || die "DROP TABLE t on the remote"
	lsql -c "DROP TABLE src_$n" || die "DROP TABLE src_$n"
done

echo "== load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"

# ---- the table ------------------------------------------------------------
echo
echo "== results (best of $runs runs; ratios are throughput ratios)"
# exit status 3 when a stated goal is not met
summary "$results"
rc=$?
[ "$rc" = 1 ] && exit 3
exit "$rc"
