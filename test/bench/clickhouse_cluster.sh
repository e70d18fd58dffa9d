#!/bin/bash
# test/bench/clickhouse_cluster.sh - a CTAS into a 2-shard ClickHouse
# cluster (issue 20) against one server, and against what a user would do
# instead: stream the rows into the Distributed table.
#
#   cluster     CREATE TABLE ring.bench.t WITH (primary_key = 'id') AS
#               SELECT * FROM src: a local table and a Distributed table on
#               both shards, rows routed by intHash64(id), one RowBinary
#               INSERT per shard, published atomically at commit
#   single      CREATE TABLE lake.bench.t ... into shard 1 alone
#   dist_pipe   psql -c "COPY (SELECT ...) TO STDOUT" | curl -T - \
#               '.../?query=INSERT INTO bench.t FORMAT TabSeparated&
#                insert_distributed_sync=1' on shard 1, into the same
#               Distributed table over the same local tables (created
#               untimed from the DDL that EXPLAIN shows); the setting is a
#               URL parameter, or the rows for shard 2 would arrive later
#
#   bash test/bench/clickhouse_cluster.sh WORKDIR
#
# Environment: BENCH_ROWS (default 1000000), BENCH_RUNS (default 1; the
# best is kept), CTAS_PG_BINDIR.  It starts a throwaway PostgreSQL
# (ctas_fed preloaded) and two ClickHouse servers that form the cluster
# "bench_cluster" (remote_servers, no ZooKeeper), all on 127.0.0.1, and
# stops them on exit.  Wall clock: the statement by psql's \timing; the
# pipe, the whole pipeline.  CPU seconds (user + system, lib.sh's sampler):
# the PostgreSQL cluster's process tree, each clickhouse-server, and the
# client processes.  The load average (1 minute, /proc/loadavg) before and
# after each run is printed beside it: other work on the machine moves the
# wall clock.  Output: one line per run, then the ratios.

set -u -o pipefail

work=${1:?usage: clickhouse_cluster.sh WORKDIR}
work=$(cd "$work" && pwd)
bindir=${CTAS_PG_BINDIR:-/usr/lib/postgresql/15/bin}
rows_list=${BENCH_ROWS:-1000000}
runs=${BENCH_RUNS:-1}
testdir=$(cd "$(dirname "$0")/.." && pwd)
conf_file=$testdir/ctas_fed.conf
export PATH=$bindir:$PATH
unset PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER PGPASSWORD PGPASSFILE \
	PGSERVICE PGSERVICEFILE PGOPTIONS PGDATA PGAPPNAME PGSSLMODE

chserver=$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)
[ -x "$chserver" ] || { echo "clickhouse-server not found: apt-get install clickhouse-server" >&2; exit 1; }

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pgdir=$work/chc_bench_pg
pg_started=0
ch_pids=()

cleanup()
{
	trap - EXIT INT TERM HUP
	if [ "$pg_started" = 1 ] && [ -f "$pgdir/postmaster.pid" ]; then
		pg_ctl -D "$pgdir" -m fast -w -t 60 stop > /dev/null 2>&1
	fi
	for pid in "${ch_pids[@]}"; do
		kill -TERM "$pid" 2> /dev/null
	done
	for pid in "${ch_pids[@]}"; do
		for _ in $(seq 1 300); do
			kill -0 "$pid" 2> /dev/null || break
			sleep 0.2
		done
		kill -KILL "$pid" 2> /dev/null
	done
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM HUP

lport=$(free_port) || die "no free port"
chpw=bench$RANDOM$RANDOM
http=() tcp=()
for i in 1 2; do
	http[$i]=$(free_port) || die "no free port"
	tcp[$i]=$(free_port) || die "no free port"
done

# ---- the two ClickHouse servers, one cluster --------------------------------
xml="<yandex><remote_servers><bench_cluster>"
for i in 1 2; do
	xml+="<shard><replica><host>127.0.0.1</host><port>${tcp[$i]}</port>"
	xml+="<user>default</user><password>$chpw</password></replica></shard>"
done
xml+="</bench_cluster></remote_servers></yandex>"
for i in 1 2; do
	d=$work/chc_bench_ch$i
	bash "$testdir/lib/clickhouse-config.sh" "$d" "${http[$i]}" "${tcp[$i]}" "$chpw" ||
		die "clickhouse-config.sh failed"
	mkdir -p "$d/config.d"
	echo "$xml" > "$d/config.d/cluster.xml"
	"$chserver" --config-file="$d/config.xml" --pid-file="$d/clickhouse.pid" \
		--daemon > "$d/log/stderr.log" 2>&1 || die "clickhouse-server did not start"
	for _ in $(seq 1 150); do
		[ "$(curl -s "http://127.0.0.1:${http[$i]}/ping")" = "Ok." ] && break
		sleep 0.2
	done
	ch_pids+=("$(tr -dc '0-9' < "$d/clickhouse.pid")")
done

# chq I SQL: run SQL on shard I, fail on an error
chq()
{
	local out
	out=$(curl -sS -H "X-ClickHouse-User: default" -H "X-ClickHouse-Key: $chpw" \
		--data-binary "$2" "http://127.0.0.1:${http[$1]}/?wait_end_of_query=1" -w '\n%{http_code}') || return 1
	case ${out##*$'\n'} in
		200) printf '%s' "${out%$'\n'*}" ;;
		*) echo "ClickHouse: ${out%$'\n'*}" >&2; return 1 ;;
	esac
}
for i in 1 2; do chq "$i" "CREATE DATABASE bench" || die "CREATE DATABASE bench"; done
echo "== ClickHouse $(chq 1 'SELECT version()'), 2 shards: $(chq 1 "SELECT count() FROM system.clusters WHERE cluster = 'bench_cluster'")"

# ---- PostgreSQL ---------------------------------------------------------------
initdb -D "$pgdir" -A trust -E UTF8 --locale=C.UTF-8 > "$work/chc_bench_initdb.log" 2>&1 ||
	die "initdb"
cat >> "$pgdir/postgresql.conf" <<EOF

# added by test/bench/clickhouse_cluster.sh
port = $lport
listen_addresses = '127.0.0.1'
unix_socket_directories = '$work'
shared_buffers = 256MB
max_wal_size = 8GB
autovacuum = off
$(cat "$conf_file")
EOF
pg_started=1
pg_ctl -D "$pgdir" -l "$work/chc_bench_pg.log" -w -t 120 start > /dev/null || die "PostgreSQL did not start"
lsql() { psql -X -q -h "$work" -p "$lport" -d bench -v ON_ERROR_STOP=1 "$@"; }
psql -X -q -h "$work" -p "$lport" -d postgres -c "CREATE DATABASE bench" || die "CREATE DATABASE"
lsql <<EOF || die "local set-up"
CREATE EXTENSION ctas_fed;
CREATE SERVER ring FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url 'http://127.0.0.1:${http[1]}', cluster 'bench_cluster',
           shard_urls 'http://127.0.0.1:${http[1]}, http://127.0.0.1:${http[2]}');
CREATE USER MAPPING FOR CURRENT_USER SERVER ring OPTIONS (user 'default', password '$chpw');
CREATE SERVER lake FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url 'http://127.0.0.1:${http[1]}');
CREATE USER MAPPING FOR CURRENT_USER SERVER lake OPTIONS (user 'default', password '$chpw');
EOF

pipe_select="id, label, amount, ratio, ts, flag::int, translate(arr::text, '{}', '[]'), doc"

children_cpu()
{
	awk 'NR == 2 {
		t = 0
		for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
		printf "%.2f", t
	}' "$1"
}

# timed METHOD N: prints "seconds pg_cpu ch1_cpu ch2_cpu client_cpu"
timed()
{
	local m=$1 n=$2 cfile=$work/chc_bench_cpu.$RANDOM tfile=$work/chc_bench_times.$RANDOM
	local t0 t1 rc out secs
	cpu_watch_start "$cfile" "pg=$(head -n 1 "$pgdir/postmaster.pid")" \
		"ch1=${ch_pids[0]}" "ch2=${ch_pids[1]}" || return 1
	t0=$(date +%s%N)
	case $m in
		cluster | single)
			local cat=ring with="WITH (primary_key = 'id')"
			[ "$m" = single ] && cat=lake
			out=$(
				lsql 2>&1 <<EOF
\timing on
CREATE TABLE $cat.bench.t $with AS SELECT * FROM src_$n;
EOF
				rc=$?
				times > "$tfile"
				exit $rc
			)
			rc=$?
			;;
		dist_pipe)
			out=$(
				psql -X -q -h 127.0.0.1 -p "$lport" -d bench -v ON_ERROR_STOP=1 \
					-c "COPY (SELECT $pipe_select FROM src_$n) TO STDOUT" |
					curl -sS --fail -X POST -H 'Expect:' \
						-H "X-ClickHouse-User: default" -H "X-ClickHouse-Key: $chpw" \
						-T - "http://127.0.0.1:${http[1]}/?query=INSERT%20INTO%20bench.t%20FORMAT%20TabSeparated&insert_distributed_sync=1&date_time_input_format=best_effort" 2>&1
				rc=$?
				times > "$tfile"
				exit $rc
			)
			rc=$?
			;;
	esac
	t1=$(date +%s%N)
	cpu_watch_stop "$cfile" || return 1
	[ "$rc" = 0 ] || { echo "$m: $out" >&2; return 1; }
	secs=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.3f", ns / 1e9 }')
	if [ "$m" != dist_pipe ]; then
		secs=$(printf '%s\n' "$out" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -n 1 |
			awk '{ printf "%.3f", $1 / 1000 }')
	fi
	echo "$secs $(cpu_field "$cfile" total:pg) $(cpu_field "$cfile" total:ch1)" \
		"$(cpu_field "$cfile" total:ch2) $(children_cpu "$tfile")"
	rm -f "$cfile" "$tfile"
}

drop_all()
{
	for i in 1 2; do
		chq "$i" "DROP TABLE IF EXISTS bench.t" && chq "$i" "DROP TABLE IF EXISTS bench.t_local" || return 1
	done
}

results=$work/clickhouse_cluster_results.txt
: > "$results"
echo "== machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
for n in $rows_list; do
	make_source "$n" | lsql > /dev/null || die "generating src_$n"
	plan=$(lsql -At -c "EXPLAIN (COSTS OFF) CREATE TABLE ring.bench.t WITH (primary_key = 'id') AS SELECT * FROM src_$n") ||
		die "EXPLAIN"
	local_ddl=$(printf '%s\n' "$plan" | sed -n 's/^Remote DDL (every shard): //p')
	dist_ddl=$(printf '%s\n' "$plan" | sed -n 's/^Distributed DDL (every shard): //p')
	[ -n "$local_ddl" ] && [ -n "$dist_ddl" ] || die "no DDL in the EXPLAIN output"
	for r in $(seq 1 "$runs"); do
		for m in cluster single dist_pipe; do
			drop_all || die "drop"
			if [ "$m" = dist_pipe ]; then
				for i in 1 2; do
					chq "$i" "$local_ddl" && chq "$i" "$dist_ddl" || die "pipe DDL"
				done
			fi
			la0=$(cut -d' ' -f1 /proc/loadavg)
			line=$(timed "$m" "$n") || die "$m failed at $n rows"
			la1=$(cut -d' ' -f1 /proc/loadavg)
			if [ "$m" = single ]; then
				count=$(chq 1 "SELECT count() FROM bench.t")
			else
				count=$(chq 2 "SELECT count() FROM bench.t")
				split="$(chq 1 'SELECT count() FROM bench.t_local') + $(chq 2 'SELECT count() FROM bench.t_local')"
			fi
			[ "$count" = "$n" ] || die "$m: bench.t holds $count rows, not $n"
			echo "$n $m $r $line $la0 $la1" >> "$results"
			read -r secs pg c1 c2 cl <<< "$line"
			printf '   %-8s %-10s run %s: %7.3f s  (load average %s -> %s)  CPU s: PostgreSQL %s, ClickHouse 1 %s, ClickHouse 2 %s, clients %s%s\n' \
				"$n" "$m" "$r" "$secs" "$la0" "$la1" "$pg" "$c1" "$c2" "$cl" \
				"$([ "$m" != single ] && echo "  (rows per shard: $split)")"
		done
	done
	lsql -c "DROP TABLE src_$n" > /dev/null
done
drop_all > /dev/null

echo
awk '
	{ k = $1 SUBSEP $2; if (!(k in best) || $4 < best[k]) { best[k] = $4; cpu[k] = $5 + $6 + $7 + $8; la[k] = $9 "-" $10 }
	  if (!($1 in seen)) { seen[$1] = 1; sizes[++ns] = $1 } }
	END {
		for (i = 1; i <= ns; i++) {
			n = sizes[i]
			printf "%d rows: cluster %.2f s (%.2f CPU s, load %s), single server %.2f s (%.2f CPU s, load %s), Distributed pipe %.2f s (%.2f CPU s, load %s)\n",
				n, best[n, "cluster"], cpu[n, "cluster"], la[n, "cluster"],
				best[n, "single"], cpu[n, "single"], la[n, "single"],
				best[n, "dist_pipe"], cpu[n, "dist_pipe"], la[n, "dist_pipe"]
			printf "%d rows: cluster vs single server: %.2fx the speed, %.2fx the CPU; cluster vs Distributed pipe: %.2fx the speed, %.2fx the CPU\n",
				n, best[n, "single"] / best[n, "cluster"], cpu[n, "cluster"] / cpu[n, "single"],
				best[n, "dist_pipe"] / best[n, "cluster"], cpu[n, "cluster"] / cpu[n, "dist_pipe"]
		}
	}' "$results"
