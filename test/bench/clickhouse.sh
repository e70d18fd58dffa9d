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
# Output: the raw runs, then a Markdown table and the verdict on the goals
# of issue 5 (>= 1.0x the pipe, flat memory).  Exit status 0 when every
# run succeeded (whatever the verdict), 1 otherwise.
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

# summary FILE: lines "rows method run seconds rssanon_kB vmhwm_kB"
summary()
{
	awk '
	# a stated goal: "met" or "NOT met", counted; any NOT met makes the
	# exit status 1
	function verdict(ok) { if (!ok) notmet++; return ok ? "met" : "NOT met" }
	function mb(kb) { return sprintf("%.1f MB", kb / 1024) }
	function has(n, m) { return (n SUBSEP m) in best }
	{
		key = $1 SUBSEP $2
		if (!(key in best) || $4 < best[key]) best[key] = $4
		runs[key] = runs[key] (runs[key] == "" ? "" : ", ") sprintf("%.2f", $4)
		if ($5 != "-" && (!(key in maxrss) || $5 > maxrss[key])) maxrss[key] = $5
		if ($6 != "-" && (!(key in maxhwm) || $6 > maxhwm[key])) maxhwm[key] = $6
		if (!($1 in seen)) { seen[$1] = 1; sizes[++nsizes] = $1 }
	}
	END {
		nm = split("ctas_fed ctas_fed_par2 ctas_fed_par4 curl_pipe", m, " ")
		print "| rows | method | seconds (best) | rows/s | vs pipe | peak memory | all runs (s) |"
		print "|---:|---|---:|---:|---:|---|---|"
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
				printf "| %d | %s | %.2f | %d | %s | %s | %s |\n", n, m[j],
					best[k], n / best[k], vs, mem, runs[k]
			}
		}
		print ""
		print "== goals (issue 5)"
		for (i = 1; i <= nsizes; i++) {
			n = sizes[i]
			if (!has(n, "ctas_fed") || !has(n, "curl_pipe")) continue
			r = best[n, "curl_pipe"] / best[n, "ctas_fed"]
			printf "%d rows: ctas_fed = %.2fx the streamed pipe (goal >= 1.0): %s\n", n, r,
				verdict(r >= 1.0)
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

run_ctas_fed()
{
	local n=$1 with=${2:-} memfile out ms
	memfile=$work/ch_bench_mem.$RANDOM
	rm -f "$memfile"
	out=$(lsql 2>&1 <<EOF
SELECT pg_backend_pid() AS pid \gset
\setenv BENCH_PID :pid
\setenv BENCH_MEM '$memfile'
\! bash '$self' --sample "\$BENCH_PID" "\$BENCH_MEM" < /dev/null > /dev/null 2>&1 &
\timing on
CREATE TABLE lake.bench.t $with AS SELECT * FROM src_$n;
EOF
	) || { echo "$out" >&2; return 1; }
	ms=$(printf '%s\n' "$out" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -n 1)
	[ -n "$ms" ] || { echo "no timing in: $out" >&2; return 1; }
	echo "$(awk -v ms="$ms" 'BEGIN { printf "%.3f", ms / 1000 }') $(wait_mem "$memfile")"
	rm -f "$memfile"
}

# the leader's memory is sampled; each worker has a stream of its own
run_ctas_fed_par2() { run_ctas_fed "$1" "WITH (parallel = 2)"; }
run_ctas_fed_par4() { run_ctas_fed "$1" "WITH (parallel = 4)"; }

run_curl_pipe()
{
	local n=$1 t0 t1 rss=- q
	chq "$ddl" || return 1
	q=$(perl -MURI::Escape -e 'print uri_escape($ARGV[0])' "INSERT INTO bench.t FORMAT TabSeparated" 2> /dev/null) ||
		q=INSERT%20INTO%20bench.t%20FORMAT%20TabSeparated
	t0=$(date +%s%N)
	psql -X -q -h 127.0.0.1 -p "$lport" -d bench -v ON_ERROR_STOP=1 \
		-c "COPY (SELECT $pipe_select FROM src_$n) TO STDOUT" |
		${timecmd:+$timecmd -f %M -o "$work/ch_bench_curl.rss"} \
		curl -sS --fail -X POST -H 'Expect:' \
			-H "X-ClickHouse-User: default" -H "X-ClickHouse-Key: $chpw" \
			-T - "$churl/?query=$q&date_time_input_format=best_effort" > "$work/ch_bench_curl.out" ||
		{ cat "$work/ch_bench_curl.out" >&2; return 1; }
	t1=$(date +%s%N)
	[ -n "$timecmd" ] && rss=$(tail -n 1 "$work/ch_bench_curl.rss")
	echo "$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.3f", ns / 1e9 }') $rss -"
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
			echo "$n $m $r $line" | tee -a "$results"
		done
	done
	lsql -c "DROP TABLE src_$n" > /dev/null
done
chq "DROP TABLE IF EXISTS bench.t" > /dev/null

echo
# exit status 1 when a stated goal is not met
summary "$results"
