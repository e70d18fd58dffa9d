#!/bin/bash
# test/bench/clickhouse.sh - ctas_fed against the tool a user would use
# instead, to load a PostgreSQL table into ClickHouse:
#
#   ctas_fed    CREATE TABLE lake.bench.t AS SELECT * FROM src
#               (name check, staging table, one streamed RowBinary INSERT,
#               count check, RENAME TABLE at commit: one statement)
#   ctas_fed_par2, ctas_fed_par4
#               the same WITH (parallel = 2 or 4): that many parallel
#               workers, one INSERT each into the staging table
#   curl_pipe   psql -c "COPY (SELECT ...) TO STDOUT" |
#               curl -X POST -H 'Expect:' -T - '.../?query=INSERT ... FORMAT TabSeparated'
#               (streamed; curl --data-binary @- buffers the whole body and
#               is slower, so this is the better of the two)
#
# Called by test/bench/run.sh ("make bench") as the OS user that runs the
# servers, from a staged copy of the repository, with the folder it may
# use (under /tmp) as its only argument; it can also be run by hand:
#
#   bash test/bench/clickhouse.sh WORKDIR
#
# Environment:
#   BENCH_ROWS     sizes to measure, default "1000000 5000000"
#   BENCH_RUNS     timed runs of each method at each size, default 2; the
#                  best (shortest) is reported
#   BENCH_METHODS  a subset of "ctas_fed ctas_fed_par2 ctas_fed_par4
#                  curl_pipe" (default all)
#   CTAS_PG_BINDIR PostgreSQL programs, default /usr/lib/postgresql/15/bin
#
# It starts a throwaway PostgreSQL cluster (ctas_fed preloaded) and a
# throwaway ClickHouse server (test/lib/clickhouse-config.sh) in WORKDIR,
# both on 127.0.0.1 only on free ports, and stops them on exit, failure and
# signals included.  Both methods write into a fresh table bench.t with the
# same definition: the pipe's table is created, untimed, from the DDL that
# EXPLAIN of the CTAS shows.  The pipe converts in its SELECT what
# ClickHouse's TabSeparated cannot read from PostgreSQL's text (booleans to
# 0/1, arrays to [...]) and lets ClickHouse parse the timestamps
# (date_time_input_format=best_effort).  Runs are interleaved.
#
# What is timed (wall clock): ctas_fed, the statement by psql's \timing in a
# fresh session (connection to ClickHouse, DDL, count check, RENAME
# included); the pipe, the whole pipeline (both processes).
#
# Memory: a side process reads /proc/<backend pid>/status every 50 ms and
# keeps the largest RssAnon (palloc'd memory, curl buffers; not shared
# buffers) and VmHWM of the backend; for the pipe, the peak RSS of curl
# (/usr/bin/time).
#
# CPU (user + system, in seconds, the difference between the start and the
# end of each run; cpu_watch_start in lib.sh): the PostgreSQL cluster's
# whole process tree (backends, parallel workers, walwriter, checkpointer;
# those that exited during the run included), the clickhouse-server process
# (all its threads), the client processes (psql; the pipe's psql and curl)
# from the shell that waits for them; per process: the session's backend
# (the leader, or the pipe's COPY TO), each parallel worker, and the
# busiest threads of clickhouse-server.
#
# Output: the raw runs, then a Markdown table, the CPU figures, and the
# verdict on the goals of issue 5 (>= 1.0x the pipe, flat memory) and
# issue 11 (parallel = 2 at >= 1.3x the pipe).  Exit status 0 when every
# run succeeded and every goal was met, 3 when every run succeeded but a
# goal was not met, 1 otherwise.
#
# Internal: "clickhouse.sh --sample PID OUTFILE" is the memory sampler;
# "clickhouse.sh --summary WORKDIR/clickhouse_results.txt" prints the table again.

set -u -o pipefail

# ---- memory sampler --------------------------------------------------------
if [ "${1:-}" = --sample ]; then
	pid=$2 out=$3 max=0 hwm=0
	while [ -d "/proc/$pid" ]; do
		{
			while read -r key value _; do
				case $key in
					RssAnon:) [ "$value" -gt "$max" ] && max=$value ;;
					VmHWM:) hwm=$value ;;
				esac
			done < "/proc/$pid/status"
		} 2> /dev/null
		sleep 0.05
	done
	echo "$max $hwm" > "$out.tmp" && mv "$out.tmp" "$out"
	exit 0
fi

# summary FILE: lines "rows method run seconds rssanon_kB vmhwm_kB
# postgres_cpu_s clickhouse_cpu_s client_cpu_s local_backend_cpu_s
# workers_cpu_s clickhouse_threads_cpu_s" (the last two "a+b+...", largest
# first; "-" where not measured)
summary()
{
	awk -v ncpu="$(nproc)" '
	# a stated goal: "met" or "NOT met", counted; any NOT met makes the
	# exit status 1
	function verdict(ok) { if (!ok) notmet++; return ok ? "met" : "NOT met" }
	function mb(kb) { return sprintf("%.1f MB", kb / 1024) }
	function has(n, m) { return (n SUBSEP m) in best }
	function num(v) { return v == "-" || v == "" ? 0 : v }
	function sumof(list,   a, c, i, t) {
		if (list == "-" || list == "") return 0
		c = split(list, a, "+")
		for (i = 1; i <= c; i++) t += a[i]
		return t
	}
	function count(list,   a) { return list == "-" || list == "" ? 0 : split(list, a, "+") }
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
		tot[key, nrun[key]] = num($7) + num($8) + num($9)
		if ($5 != "-" && (!(key in maxrss) || $5 > maxrss[key])) maxrss[key] = $5
		if ($6 != "-" && (!(key in maxhwm) || $6 > maxhwm[key])) maxhwm[key] = $6
		if (!($1 in seen)) { seen[$1] = 1; sizes[++nsizes] = $1 }
	}
	END {
		nm = split("ctas_fed ctas_fed_par2 ctas_fed_par4 curl_pipe", m, " ")
		for (k in nrun) {
			split(median(k), f, " ")
			pcpu[k] = num(f[7]); hcpu[k] = num(f[8]); ccpu[k] = num(f[9])
			bcpu[k] = f[10]; wcpu[k] = f[11]; thcpu[k] = f[12]
			allcpu[k] = pcpu[k] + hcpu[k] + ccpu[k]
		}
		print "| rows | method | seconds (best) | rows/s | vs pipe | peak memory | CPU s: PostgreSQL / ClickHouse / clients (run of median CPU) | CPU s per million rows | CPU s per process: local backend; parallel workers; busiest ClickHouse threads | all runs (s) |"
		print "|---:|---|---:|---:|---:|---|---:|---:|---|---|"
		for (i = 1; i <= nsizes; i++) {
			n = sizes[i]
			for (j = 1; j <= nm; j++) {
				k = n SUBSEP m[j]
				if (!(k in best)) continue
				vs = has(n, "curl_pipe") ? sprintf("%.2fx", best[n, "curl_pipe"] / best[k]) : "-"
				if (m[j] ~ /^ctas_fed/)
					mem = sprintf("backend RssAnon %s, VmHWM %s", mb(maxrss[k]), mb(maxhwm[k]))
				else
					mem = sprintf("curl RSS %s", mb(maxrss[k]))
				printf "| %d | %s | %.2f | %d | %s | %s | %.2f / %.2f / %.2f | %.2f | %s; %s; %s | %s |\n", n, m[j],
					best[k], n / best[k], vs, mem, pcpu[k], hcpu[k], ccpu[k],
					allcpu[k] * 1e6 / n, bcpu[k], wcpu[k], thcpu[k], runs[k]
			}
		}
		print ""
		printf "== CPU: where the bound lies on this machine (%d CPUs; the PostgreSQL cluster, clickhouse-server and the clients, run of median CPU)\n", ncpu
		for (i = 1; i <= nsizes; i++) {
			n = sizes[i]
			for (j = 1; j <= nm; j++) {
				k = n SUBSEP m[j]
				if (!(k in best)) continue
				printf "%d rows: %-13s %6.2f CPU s (%.2f per million rows: PostgreSQL %.2f, ClickHouse %.2f, clients %.2f): on %d CPUs no faster than %.2f s, best run %.2f s\n",
					n, m[j], allcpu[k], allcpu[k] * 1e6 / n, pcpu[k] * 1e6 / n,
					hcpu[k] * 1e6 / n, ccpu[k] * 1e6 / n, ncpu, allcpu[k] / ncpu, best[k]
			}
			if (has(n, "curl_pipe") && has(n, "ctas_fed_par2")) {
				p = n SUBSEP "curl_pipe"; q = n SUBSEP "ctas_fed_par2"
				printf "%d rows: ceiling of parallel = 2 vs the pipe here: %.2fx (the pipe best run / parallel = 2 CPU over %d CPUs); pipe CPU / parallel = 2 CPU = %.2fx\n",
					n, best[p] / (allcpu[q] / ncpu), ncpu, allcpu[p] / allcpu[q]
			}
			for (j = 1; j <= nm; j++) {
				k = n SUBSEP m[j]
				if (!(k in best) || m[j] !~ /^ctas_fed/) continue
				nw = count(wcpu[k])
				w = nw ? sumof(wcpu[k]) : num(bcpu[k])
				who = "the local backend reads and encodes"
				if (nw) who = sprintf("a local worker reads and encodes (%d workers)", nw)
				printf "%d rows: %-13s per core: %s %d rows/s (%s s), ClickHouse takes %d rows/s (%.2f s, all threads)\n",
					n, m[j], who, w ? n / w : 0, nw ? wcpu[k] : bcpu[k],
					hcpu[k] ? n / hcpu[k] : 0, hcpu[k]
			}
		}
		print ""
		print "== goals (issues 5 and 11)"
		for (i = 1; i <= nsizes; i++) {
			n = sizes[i]
			if (!has(n, "ctas_fed") || !has(n, "curl_pipe")) continue
			r = best[n, "curl_pipe"] / best[n, "ctas_fed"]
			printf "%d rows: ctas_fed = %.2fx the streamed pipe (goal >= 1.0): %s\n", n, r,
				verdict(r >= 1.0)
		}
		for (i = 1; i <= nsizes; i++) {
			n = sizes[i]
			if (!has(n, "ctas_fed_par2") || !has(n, "curl_pipe")) continue
			r = best[n, "curl_pipe"] / best[n, "ctas_fed_par2"]
			printf "%d rows: parallel = 2 = %.2fx the streamed pipe (goal >= 1.3 on this machine): %s\n", n, r,
				verdict(r >= 1.3)
		}
		lo = sizes[1]; hi = sizes[nsizes]
		if (nsizes >= 2 && has(lo, "ctas_fed")) {
			a = maxrss[lo, "ctas_fed"]; b = maxrss[hi, "ctas_fed"]
			printf "ctas_fed backend peak RssAnon: %s at %d rows, %s at %d rows (goal: flat): %s\n",
				mb(a), lo, mb(b), hi, verdict(b <= a * 1.1 + 1024)
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

work=${1:?usage: clickhouse.sh WORKDIR}
work=$(cd "$work" && pwd)
bindir=${CTAS_PG_BINDIR:-/usr/lib/postgresql/15/bin}
rows_list=${BENCH_ROWS:-1000000 5000000}
runs=${BENCH_RUNS:-2}
methods=${BENCH_METHODS:-ctas_fed ctas_fed_par2 ctas_fed_par4 curl_pipe}
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
testdir=$(cd "$(dirname "$0")/.." && pwd)
conf_file=$testdir/ctas_fed.conf

export PATH=$bindir:$PATH
unset PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER PGPASSWORD PGPASSFILE \
	PGSERVICE PGSERVICEFILE PGOPTIONS PGDATA PGAPPNAME PGSSLMODE

case $runs in '' | *[!0-9]* | 0) echo "BENCH_RUNS must be a positive integer" >&2; exit 1 ;; esac
for m in $methods; do
	case $m in ctas_fed | ctas_fed_par2 | ctas_fed_par4 | curl_pipe) ;;
		*) echo "BENCH_METHODS: unknown method $m" >&2; exit 1 ;; esac
done
for n in $rows_list; do
	case $n in '' | *[!0-9]* | 0) echo "BENCH_ROWS: not a positive integer: $n" >&2; exit 1 ;; esac
done
[ -f "$conf_file" ] || { echo "$conf_file not found" >&2; exit 1; }
chserver=$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)
[ -x "$chserver" ] || { echo "clickhouse-server not found: apt-get install clickhouse-server" >&2; exit 1; }
command -v curl > /dev/null || { echo "curl not found: apt-get install curl" >&2; exit 1; }
timecmd=/usr/bin/time
[ -x "$timecmd" ] || timecmd=

pgdir=$work/ch_bench_pg
chdir=$work/ch_bench_clickhouse
pg_started=0
ch_pid=

cleanup()
{
	trap - EXIT INT TERM HUP
	if [ "$pg_started" = 1 ] && [ -f "$pgdir/postmaster.pid" ]; then
		pg_ctl -D "$pgdir" -m fast -w -t 60 stop > /dev/null 2>&1
	fi
	if [ -n "$ch_pid" ] && kill -0 "$ch_pid" 2> /dev/null; then
		kill -TERM "$ch_pid"
		for _ in $(seq 1 300); do
			kill -0 "$ch_pid" 2> /dev/null || break
			sleep 0.2
		done
		kill -KILL "$ch_pid" 2> /dev/null
	fi
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM HUP

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lport=$(free_port) || die "no free port"
chhttp=$(free_port) || die "no free port"
chtcp=$(free_port) || die "no free port"
chpw=bench$RANDOM$RANDOM
churl=http://127.0.0.1:$chhttp

# ---- ClickHouse ------------------------------------------------------------
echo "== ClickHouse on 127.0.0.1:$chhttp"
bash "$testdir/lib/clickhouse-config.sh" "$chdir" "$chhttp" "$chtcp" "$chpw" ||
	die "clickhouse-config.sh failed"
"$chserver" --config-file="$chdir/config.xml" --pid-file="$chdir/clickhouse.pid" \
	--daemon > "$chdir/log/stderr.log" 2>&1 || die "clickhouse-server did not start"
for _ in $(seq 1 150); do
	[ -z "$ch_pid" ] && [ -f "$chdir/clickhouse.pid" ] && ch_pid=$(tr -dc '0-9' < "$chdir/clickhouse.pid")
	[ "$(curl -s "$churl/ping")" = "Ok." ] && break
	sleep 0.2
done
[ "$(curl -s "$churl/ping")" = "Ok." ] || { tail -n 30 "$chdir/log/clickhouse-server.err.log"; die "ClickHouse did not answer"; }
[ -n "$ch_pid" ] || ch_pid=$(tr -dc '0-9' < "$chdir/clickhouse.pid")

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
chq "CREATE DATABASE bench" || die "CREATE DATABASE bench"
echo "   version $(chq 'SELECT version()')"

# ---- PostgreSQL ------------------------------------------------------------
echo "== local PostgreSQL on 127.0.0.1:$lport (ctas_fed preloaded)"
initdb -D "$pgdir" -A trust -E UTF8 --locale=C.UTF-8 > "$work/ch_bench_pg.initdb.log" 2>&1 ||
	{ cat "$work/ch_bench_pg.initdb.log"; die "initdb"; }
cat >> "$pgdir/postgresql.conf" <<EOF

# added by test/bench/clickhouse.sh
port = $lport
listen_addresses = '127.0.0.1'
unix_socket_directories = '$work'
ssl = off
shared_buffers = 256MB
max_wal_size = 8GB
checkpoint_timeout = 30min
autovacuum = off
max_worker_processes = 16
$(cat "$conf_file")
EOF
pg_started=1
pg_ctl -D "$pgdir" -l "$work/ch_bench_pg.log" -w -t 120 start > /dev/null ||
	{ tail -n 30 "$work/ch_bench_pg.log"; die "PostgreSQL did not start"; }

lsql() { psql -X -q -h "$work" -p "$lport" -d bench -v ON_ERROR_STOP=1 "$@"; }
psql -X -q -h "$work" -p "$lport" -d postgres -c "CREATE DATABASE bench" || die "CREATE DATABASE"
lsql <<EOF || die "local set-up"
CREATE EXTENSION ctas_fed;
CREATE SERVER lake FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url '$churl');
CREATE USER MAPPING FOR CURRENT_USER SERVER lake
  OPTIONS (user 'default', password '$chpw');
EOF

# what the pipe sends: PostgreSQL's text, with the conversions TabSeparated needs
pipe_select="id, label, amount, ratio, ts, flag::int, translate(arr::text, '{}', '[]'), doc"

wait_mem()
{
	for _ in $(seq 1 600); do
		[ -f "$1" ] && { cat "$1"; return 0; }
		sleep 0.05
	done
	echo "0 0"
}

# cpu_start OUT: sample the CPU of the PostgreSQL cluster's process tree
# and of clickhouse-server (lib.sh)
cpu_start()
{
	cpu_watch_start "$1" "pg=$(head -n 1 "$pgdir/postmaster.pid")" "ch=$ch_pid"
}

# cpu_end OUT LOCAL_BACKEND_REGEX CLIENT_S: stop the sampler once every
# process born during the run has exited, and print "postgres_s
# clickhouse_s CLIENT_S local_backend_s workers_s clickhouse_threads_s"
# (the backend: the process whose ps title matches the regex; the 4
# busiest threads of ClickHouse)
cpu_end()
{
	cpu_watch_stop "$1" || return 1
	echo "$(cpu_field "$1" total:pg) $(cpu_field "$1" total:ch) $3" \
		"$(cpu_field "$1" "sum:pg:$2") $(cpu_field "$1" 'procs:pg:parallel worker')" \
		"$(cpu_field "$1" threads:ch:4)"
	rm -f "$1"
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

run_ctas_fed()
{
	local n=$1 with=${2:-} memfile cfile tfile out rc ms cpu
	memfile=$work/ch_bench_mem.$RANDOM
	cfile=$work/ch_bench_cpu.$RANDOM
	tfile=$work/ch_bench_times.$RANDOM
	rm -f "$memfile"
	cpu_start "$cfile" || return 1
	out=$(
		lsql 2>&1 <<EOF
SELECT pg_backend_pid() AS pid \gset
\setenv BENCH_PID :pid
\setenv BENCH_MEM '$memfile'
\! bash '$self' --sample "\$BENCH_PID" "\$BENCH_MEM" < /dev/null > /dev/null 2>&1 &
\timing on
CREATE TABLE lake.bench.t $with AS SELECT * FROM src_$n;
EOF
		rc=$?
		times > "$tfile"
		exit $rc
	)
	rc=$?
	# the session's backend ("[local]": on the unix socket)
	cpu=$(cpu_end "$cfile" '^postgres: [^ ]+ bench [[]local[]]' "$(children_cpu "$tfile")") ||
		return 1
	rm -f "$tfile"
	[ "$rc" = 0 ] || { echo "$out" >&2; return 1; }
	ms=$(printf '%s\n' "$out" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -n 1)
	[ -n "$ms" ] || { echo "no timing in: $out" >&2; return 1; }
	echo "$(awk -v ms="$ms" 'BEGIN { printf "%.3f", ms / 1000 }') $(wait_mem "$memfile") $cpu"
	rm -f "$memfile"
}

# the leader's memory is sampled; each worker has a stream of its own
run_ctas_fed_par2() { run_ctas_fed "$1" "WITH (parallel = 2)"; }
run_ctas_fed_par4() { run_ctas_fed "$1" "WITH (parallel = 4)"; }

run_curl_pipe()
{
	local n=$1 t0 t1 rss=- q cfile tfile rc cpu
	chq "$ddl" || return 1
	q=$(perl -MURI::Escape -e 'print uri_escape($ARGV[0])' "INSERT INTO bench.t FORMAT TabSeparated" 2> /dev/null) ||
		q=INSERT%20INTO%20bench.t%20FORMAT%20TabSeparated
	cfile=$work/ch_bench_cpu.$RANDOM
	tfile=$work/ch_bench_times.$RANDOM
	cpu_start "$cfile" || return 1
	t0=$(date +%s%N)
	# in a subshell of its own, whose only children are psql and curl
	(
		psql -X -q -h 127.0.0.1 -p "$lport" -d bench -v ON_ERROR_STOP=1 \
			-c "COPY (SELECT $pipe_select FROM src_$n) TO STDOUT" |
			${timecmd:+$timecmd -f %M -o "$work/ch_bench_curl.rss"} \
			curl -sS --fail -X POST -H 'Expect:' \
				-H "X-ClickHouse-User: default" -H "X-ClickHouse-Key: $chpw" \
				-T - "$churl/?query=$q&date_time_input_format=best_effort" > "$work/ch_bench_curl.out"
		rc=$?
		times > "$tfile"
		exit $rc
	)
	rc=$?
	t1=$(date +%s%N)
	cpu=$(cpu_end "$cfile" '^postgres: [^ ]+ bench 127[.]0[.]0[.]1[(]' "$(children_cpu "$tfile")") ||
		return 1
	rm -f "$tfile"
	[ "$rc" = 0 ] || { cat "$work/ch_bench_curl.out" >&2; return 1; }
	[ -n "$timecmd" ] && rss=$(tail -n 1 "$work/ch_bench_curl.rss")
	echo "$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.3f", ns / 1e9 }') $rss - $cpu"
}

results=$work/clickhouse_results.txt
: > "$results"

echo "== machine: $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo) RAM," \
	"load average $(cut -d' ' -f1-3 /proc/loadavg) at start; $runs runs, best kept"
for n in $rows_list; do
	echo "== generating src_$n ($n rows)"
	make_source "$n" | lsql > /dev/null || die "generating src_$n"
	echo "   $(lsql -At -c "SELECT pg_size_pretty(pg_table_size('src_$n'))")"

	plan=$(lsql -At -c "EXPLAIN (COSTS OFF) CREATE TABLE lake.bench.t AS SELECT * FROM src_$n") ||
		die "EXPLAIN of the CTAS"
	ddl=$(printf '%s\n' "$plan" | sed -n 's/^Remote DDL: //p')
	[ -n "$ddl" ] || die "no Remote DDL in the EXPLAIN output"
	echo "   $ddl"

	for r in $(seq 1 "$runs"); do
		for m in $methods; do
			chq "DROP TABLE IF EXISTS bench.t" || die "DROP TABLE"
			line=$("run_$m" "$n") || die "$m failed at $n rows"
			count=$(chq "SELECT count() FROM bench.t") || die "count"
			[ "$count" = "$n" ] || die "$m: bench.t holds $count rows, not $n"
			echo "$n $m $r $line" >> "$results"
			read -r secs _ _ lc cc clc bc wc th <<< "$line"
			printf '   %-9s %-13s run %s: %8.3f s  CPU s: PostgreSQL %s, ClickHouse %s, clients %s;' \
				"$n" "$m" "$r" "$secs" "$lc" "$cc" "$clc"
			printf ' local backend %s, parallel workers %s, ClickHouse threads %s\n' "$bc" "$wc" "$th"
		done
	done
	lsql -c "DROP TABLE src_$n" > /dev/null
done
chq "DROP TABLE IF EXISTS bench.t" > /dev/null

echo
# exit status 3 when a stated goal is not met
summary "$results"
rc=$?
[ "$rc" = 1 ] && exit 3
exit "$rc"
