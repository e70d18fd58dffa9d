#!/bin/bash
# test/bench/sync_many.sh - many synced tables in one database (issue 22,
# item 5): BENCH_MANY_TABLES (default 100) source tables m1..mN, first one
# sync (m1 into PostgreSQL), then a sync of every table into PostgreSQL,
# then (those stopped) a sync of every table into ClickHouse; in each phase
# the same writer touches every table, and the bench measures:
#
#   workers   background workers of the local cluster, sampled every second
#             from pg_stat_activity.backend_type while the writer runs (goal:
#             at most ctas_fed.max_sync_workers = 2 "ctas_fed sync" workers,
#             beside the launcher and a resolver per database)
#             on a server with max_worker_processes = 8
#   slots     rows of pg_replication_slots, sampled likewise (goal: 1; a
#             join copy makes a temporary slot for a moment: the maximum
#             seen while the syncs were created is printed too)
#   decoding  the CPU seconds of the sync worker's decoding (its peeks,
#             pg_logical_slot_peek_binary_changes, and slot advances): the
#             worker's CPU from /proc times the share of perf's samples of
#             the worker whose stack holds the decoding's functions
#             (perf record -g; lib.sh's decoding_symbols); the number and
#             wall time of the peeks from pg_stat_statements, loaded for
#             the bench;
#             goal: with N syncs at most 2x the same with 1 sync, for the
#             same writer (N slots would decode the WAL N times); beside it
#             one full decode of the same WAL for the same publication, by
#             a backend on a probe slot made before the writer (its CPU from
#             /proc): the worker's peeks against it show how much of the
#             WAL the peeks decode more than once
#   CPU       CPU seconds of the sync worker(s) from the writer's start until
#             every remote table converged (test/bench/lib.sh's cpu_watch)
#   memory    RssAnon of the sync worker once the remote converged after
#             each run of the writer (goal: flat, the last within 10% + 1 MB
#             of the first; met / NOT met printed per target, with the
#             numbers); the peak of a sample every second beside;
#             the worker's memory contexts are logged (local.log) after
#             each run
#   equal     at the end of each phase, every row of every remote table
#             against its source (ClickHouse: FINAL WHERE _deleted = 0),
#             one digest of all tables; a difference fails the bench
#
# The writer (one session, synchronous_commit off), run BENCH_MANY_RUNS
# times (default 2) in each phase: BENCH_MANY_ROUNDS rounds (default 30),
# each a transaction per table with an UPDATE of 5 rows, an INSERT and a
# DELETE: 7 row changes per table and round.
#
#   bash test/bench/sync_many.sh WORKDIR   (BENCH_TARGETS=sync_many
#                                           bash test/bench/run.sh)
#
# Environment: BENCH_MANY_TABLES (100), BENCH_MANY_ROUNDS (30),
# BENCH_MANY_RUNS (2; at most 10: the keys deleted must exist),
# BENCH_MANY_ROWS (rows per table, 1000), BENCH_SYNC_TARGETS ("postgres
# clickhouse"), CTAS_PG_BINDIR.  perf (Debian: linux-perf) for the
# decoding's share; without it that column says "-".
# Exit status 0 when every goal was met, 3 when a goal was not met, 1 when
# a step failed or a remote table differed from its source.

set -u -o pipefail

work=${1:?usage: sync_many.sh WORKDIR}
bindir=${CTAS_PG_BINDIR:-/usr/lib/postgresql/15/bin}
ntables=${BENCH_MANY_TABLES:-100}
rounds=${BENCH_MANY_ROUNDS:-30}
runs=${BENCH_MANY_RUNS:-2}
[ "$runs" -ge 2 ] || { echo "BENCH_MANY_RUNS must be 2 or more" >&2; exit 1; }
nrows=${BENCH_MANY_ROWS:-1000}
sync_targets=${BENCH_SYNC_TARGETS-postgres clickhouse}
testdir=$(cd "$(dirname "$0")/.." && pwd)
conf_file=$testdir/ctas_fed.conf

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sync_bench_env

sampler_pid=
cleanup()
{
	[ -n "$sampler_pid" ] && kill "$sampler_pid" 2> /dev/null
	sync_bench_stop
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM HUP

load() { cut -d' ' -f1-3 /proc/loadavg; }

# the default max_worker_processes, said aloud; pg_stat_statements for the
# time of the worker's peeks
sync_bench_clusters "$(cat "$conf_file")
wal_level = logical
max_worker_processes = 8
shared_preload_libraries = 'ctas_fed, pg_stat_statements'
pg_stat_statements.track = all" "max_prepared_transactions = 10
max_connections = 200"
lsql <<EOF || die "local set-up"
CREATE EXTENSION ctas_fed;
CREATE EXTENSION pg_stat_statements;
$(sync_bench_wh_sql)
EOF
lpid=$(head -1 "$work/local/postmaster.pid")

case " $sync_targets " in
*" clickhouse "*) sync_bench_clickhouse ;;
esac

# ---- the source tables --------------------------------------------------
lsql <<EOF > /dev/null || die "source tables"
DO \$\$
BEGIN
	FOR t IN 1 .. $ntables LOOP
		EXECUTE format('CREATE TABLE m%s (id int PRIMARY KEY, v int NOT NULL, s text)', t);
		EXECUTE format('INSERT INTO m%s SELECT g, g, md5(g::text) FROM generate_series(1, $nrows) g', t);
	END LOOP;
END \$\$;
VACUUM ANALYZE;
CHECKPOINT;
EOF

# the writer, run $1 (phase + 3 x run of the phase): the same row changes
# each time, each its own keys inserted and deleted
writer()
{
	lsql -c "SET synchronous_commit = off" -c "DO \$\$
BEGIN
	FOR r IN 1 .. $rounds LOOP
		FOR t IN 1 .. $ntables LOOP
			EXECUTE format('UPDATE m%s SET v = v + 1, s = md5(s) WHERE id %% 200 = %s', t, r % 200);
			EXECUTE format('INSERT INTO m%s VALUES (%s, %s, ''new'')', t, 1000000 + $1 * 10000 + r, r);
			EXECUTE format('DELETE FROM m%s WHERE id = %s', t, 1 + $1 * $rounds + r);
			COMMIT;
		END LOOP;
	END LOOP;
END \$\$" > /dev/null
}

# union QUERY_OF_T FIRST LAST: QUERY_OF_T (with @ for the table number) of
# tables FIRST..LAST joined by UNION ALL
union()
{
	local t sep=
	for t in $(seq "$2" "$3"); do
		printf '%s%s' "$sep" "${1//@/$t}"
		sep=" UNION ALL "
	done
}

# summary SIDE FIRST LAST: per table "name count sum(id) sum(v)", sorted
# (cheap enough to poll); digest SIDE FIRST LAST: every row of every table
summary()
{
	case $1 in
	local) lsql -c "COPY ($(union "SELECT 'm@', count(*), sum(id), sum(v) FROM m@" "$2" "$3")) TO STDOUT" ;;
	postgres) rsql -c "COPY ($(union "SELECT 'm@', count(*), sum(id), sum(v) FROM public.m@" "$2" "$3")) TO STDOUT" ;;
	clickhouse) chq "$(union "SELECT 'm@', count(), sum(id), sum(v) FROM bench.m@ FINAL WHERE _deleted = 0" "$2" "$3") FORMAT TabSeparated" ;;
	esac | LC_ALL=C sort
}
digest()
{
	case $1 in
	local) lsql -c "COPY ($(union "SELECT 'm@', id, v, s FROM m@" "$2" "$3")) TO STDOUT" ;;
	postgres) rsql -c "COPY ($(union "SELECT 'm@', id, v, s FROM public.m@" "$2" "$3")) TO STDOUT" ;;
	clickhouse) chq "$(union "SELECT 'm@', id, v, s FROM bench.m@ FINAL WHERE _deleted = 0" "$2" "$3") FORMAT TabSeparated" ;;
	esac | LC_ALL=C sort | md5sum | cut -c1-32
}

# the sampler: every second, the background workers by backend_type, the
# slots, and RssAnon of every sync worker, into $1
sampler()
{
	local out=$1 pid kb
	: > "$out"
	while :; do
		echo "workers $(lsql -c "SELECT count(*) FILTER (WHERE backend_type = 'ctas_fed sync') || ' ' ||
			count(*) FILTER (WHERE backend_type LIKE 'ctas_fed%') || ' ' ||
			coalesce(string_agg(replace(backend_type, ' ', '_'), ',' ORDER BY backend_type) FILTER (WHERE backend_type LIKE 'ctas_fed%'), '-') || ' ' ||
			(SELECT count(*) FROM pg_replication_slots WHERE slot_name <> 'bench_probe')
			FROM pg_stat_activity")" >> "$out"
		for pid in $(pgrep -P "$lpid" -f 'ctas_fed sync'); do
			kb=$(awk '/^RssAnon:/ { print $2 }' "/proc/$pid/status" 2> /dev/null) &&
				[ -n "$kb" ] && echo "rss $pid $kb" >> "$out"
		done
		sleep 1
	done
}

# wait_streaming N: until N syncs stream (1200 s); the maximum of slots
# seen meanwhile in $max_slots_join
wait_streaming()
{
	local n s
	max_slots_join=0
	for _ in $(seq 1 12000); do
		n=$(lsql -c "SELECT count(*) FROM ctas_fed.syncs WHERE state = 'streaming'")
		s=$(lsql -c "SELECT count(*) FROM pg_replication_slots")
		[ "$s" -gt "$max_slots_join" ] && max_slots_join=$s
		[ "$n" = "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# converge TARGET FIRST LAST: until the summaries of the remote tables
# equal those of their sources (polled, 600 s)
converge()
{
	local want
	want=$(summary local "$2" "$3")
	for _ in $(seq 1 1200); do
		[ "$(summary "$1" "$2" "$3")" = "$want" ] && return 0
		sleep 0.5
	done
	return 1
}

# rss_mb: RssAnon of the sync workers, in MB, "+"-joined
rss_mb()
{
	local pid out=
	for pid in $(pgrep -P "$lpid" -f 'ctas_fed sync'); do
		out+=${out:++}$(awk '/^RssAnon:/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status" 2> /dev/null)
	done
	echo "${out:--}"
}

# phase NAME TARGET FIRST LAST PHASE_NO: the writer with the syncs of
# tables FIRST..LAST into TARGET running; one row of results
status=0
phase()
{
	local name=$1 target=$2 first=$3 last=$4 no=$5 pub lsn0 lsn1 t0 t1 t2 ok= rss_a=- rss_b=-
	pub=$(lsql -c "SELECT DISTINCT publication FROM ctas_fed.syncs WHERE state = 'streaming'")
	lsql -c "SELECT 1 FROM pg_create_logical_replication_slot('bench_probe', 'pgoutput')" > /dev/null ||
		return 1
	lsql -c "SELECT pg_stat_statements_reset()" > /dev/null || return 1
	# the same full-page images in every phase's WAL
	lsql -c "CHECKPOINT" > /dev/null || return 1
	sampler "$work/samples.$name" &
	sampler_pid=$!
	if [ "$target" = clickhouse ]; then
		cpu_watch_start "$work/cpu.$name" local="$lpid" remote="$ch_pid" || return 1
	else
		cpu_watch_start "$work/cpu.$name" local="$lpid" remote="$(head -1 "$work/remote/postmaster.pid")" || return 1
	fi
	# where the worker's CPU goes: its peeks (the decoding) against the rest
	perf_start "$work/perf.$no.data" "$(pgrep -d, -P "$lpid" -f 'ctas_fed sync')"
	lsn0=$(lsql -c "SELECT pg_current_wal_lsn()")
	# the writer $runs times (other keys each time), the worker's RssAnon
	# once converged after each: flat when the last is not above the first
	local i rss_list= w_list=
	for i in $(seq 0 $((runs - 1))); do
		t0=$(now)
		writer "$((no + 3 * i))" || return 1
		t1=$(now)
		w_list+=${w_list:+ + }$(elapsed "$t0" "$t1")
		[ "$i" = $((runs - 1)) ] && lsn1=$(lsql -c "SELECT pg_current_wal_lsn()")
		ok=
		converge "$target" "$first" "$last" && ok=1
		t2=$(now)
		rss_b=$(rss_mb)
		# and its memory contexts, into local.log, to see what grew
		lsql -c "SELECT pg_log_backend_memory_contexts(pid) FROM pg_stat_activity WHERE backend_type = 'ctas_fed sync'" > /dev/null
		[ "$i" = 0 ] && rss_a=$rss_b
		rss_list+=${rss_list:+ / }$rss_b
	done
	perf_stop "$work/perf.$no.data"
	cpu_watch_stop "$work/cpu.$name" || return 1
	kill "$sampler_pid" 2> /dev/null
	wait "$sampler_pid" 2> /dev/null
	sampler_pid=
	if [ -z "$ok" ]; then
		echo "$name: the remote tables did not converge in 600 s"
		diff <(summary local "$first" "$last") <(summary "$target" "$first" "$last") | head -20
		status=1
	elif [ "$(digest local "$first" "$last")" != "$(digest "$target" "$first" "$last")" ]; then
		echo "$name: a remote table differs from its source"
		status=1
		ok=
	fi
	# the worker's peeks
	read -r peeks peek_s <<< "$(lsql -F ' ' -c "SELECT coalesce(sum(calls), 0), round(coalesce(sum(total_exec_time), 0)::numeric / 1000, 2)
		FROM pg_stat_statements WHERE query LIKE '%pg_logical_slot_peek_binary_changes%'")"
	# one decode of the same WAL, by a backend, on the probe slot
	cpu_watch_start "$work/cpu.probe.$name" local="$lpid" || return 1
	local msgs
	msgs=$(lsql -c "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('bench_probe', '$lsn1', NULL, 'proto_version', '1', 'publication_names', '$pub')") ||
		return 1
	cpu_watch_stop "$work/cpu.probe.$name" || return 1
	lsql -c "SELECT pg_drop_replication_slot('bench_probe')" > /dev/null
	probe_cpu=$(cpu_field "$work/cpu.probe.$name" total:local)
	worker_cpu=$(cpu_field "$work/cpu.$name" 'sum:local:ctas_fed sync')
	share=$(perf_share "$work/perf.$no.data" $decoding_symbols)
	decode_cpu=$(awk -v c="$worker_cpu" -v s="$share" 'BEGIN { if (s == "-" || c == "-") print "-"; else printf "%.2f", c * s / 100 }')
	[ "$no" = 0 ] && decode_cpu_1=$decode_cpu
	# the samples
	read -r max_sync max_ctas types max_slots <<< "$(awk '$1 == "workers" {
			if ($2 > s) s = $2; if ($3 > c) { c = $3; ty = $4 } if ($5 > sl) sl = $5 }
		END { print s + 0, c + 0, (ty == "" ? "-" : ty), sl + 0 }' "$work/samples.$name")"
	# RssAnon of the busiest worker (most samples): first, last, peak, in MB
	read -r rss_first rss_last rss_peak rss_n <<< "$(awk '$1 == "rss" { n[$2]++; if (!($2 in f)) f[$2] = $3; l[$2] = $3; if ($3 > p[$2]) p[$2] = $3 }
		END { for (k in n) if (n[k] > bn) { bn = n[k]; b = k }
			if (bn) printf "%.1f %.1f %.1f %d", f[b] / 1024, l[b] / 1024, p[b] / 1024, bn; else print "- - - 0" }' "$work/samples.$name")"
	local changes=$((runs * rounds * (last - first + 1) * 7)) all=$((runs * rounds * ntables * 7))
	echo "| $name | $((last - first + 1)) | $all | $(lsql -c "SELECT pg_size_pretty(pg_wal_lsn_diff('$lsn1', '$lsn0'))") | $changes | $w_list | $(elapsed "$t1" "$t2") | $max_sync ($max_ctas: $types) | $max_slots | $worker_cpu | $(cpu_field "$work/cpu.$name" total:remote) | $decode_cpu ($share%, $peeks peeks, $peek_s s) | $probe_cpu ($msgs msgs) | $(awk -v a="$decode_cpu" -v b="$probe_cpu" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }') | $(awk -v a="$decode_cpu" -v b="${decode_cpu_1:-0}" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }') | $rss_list (peak $rss_peak, $rss_n samples) | $([ -n "$ok" ] && echo equal || echo DIFFERENT) | $(load) |" >> "$work/rows.txt"
	# the goals of the many-syncs phases
	if [ "$((last - first))" -gt 0 ]; then
		[ "$max_sync" -le 2 ] || goal_workers="NOT met"
		[ "$max_slots" -le 1 ] || goal_slots="NOT met"
		awk -v a="$decode_cpu" -v b="${decode_cpu_1:-0}" 'BEGIN { exit !(a != "-" && a <= 2 * b + 0.05) }' || goal_decode="NOT met"
		# memory per target: met / NOT met, with the numbers
		local m=met
		awk -v a="$rss_a" -v b="$rss_b" 'BEGIN { exit !(a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b <= a * 1.1 + 1) }' || m="NOT met"
		[ "$m" = met ] || goal_memory="NOT met"
		memory_lines+="memory per worker flat into $target (RssAnon after the last of $runs writer runs <= after the first x 1.1 + 1 MB): $m ($rss_list MB; peak $rss_peak)"$'\n'
	fi
	return 0
}

goal_workers=met goal_slots=met goal_decode=met goal_memory=met
memory_lines=
: > "$work/rows.txt"

echo "== $ntables source tables of $nrows rows; the writer: $rounds rounds, a transaction per table, 7 row changes each"
echo "== 1 sync (m1 into PostgreSQL)"
lsql -c "CREATE TABLE wh.public.m1 WITH (sync = 'continuous') AS SELECT * FROM m1" || die "the first sync"
wait_streaming 1 || die "the first sync did not reach streaming"
phase "1 sync, PostgreSQL" postgres 1 1 0 || die "phase 1"
tail -n 1 "$work/rows.txt"

for target in $sync_targets; do
	case $target in
	postgres) catalog=wh schema=public ;;
	clickhouse) catalog=lake schema=bench ;;
	esac
	# the syncs of the previous phase leave first (into ClickHouse: the
	# PostgreSQL ones; into PostgreSQL: none, m1's stays)
	if [ "$target" != postgres ]; then
		for s in $(lsql -c "SELECT srvname || '.' || remote_schema || '.' || remote_table
			FROM ctas_fed.syncs JOIN pg_foreign_server f ON f.oid = server WHERE state = 'streaming'"); do
			lsql -c "SELECT ctas_fed.stop_sync('$s')" > /dev/null || die "stop_sync $s"
		done
	fi
	first=1
	[ "$target" = postgres ] && first=2
	echo "== $ntables syncs into $target: creating them ($(load))"
	t0=$(now)
	for t in $(seq "$first" "$ntables"); do
		lsql -c "CREATE TABLE $catalog.$schema.m$t WITH (sync = 'continuous') AS SELECT * FROM m$t" > /dev/null ||
			die "sync of m$t into $target"
	done
	t1=$(now)
	wait_streaming "$ntables" || die "the syncs into $target did not all reach streaming"
	echo "   created in $(elapsed "$t0" "$t1") s, all streaming after $(elapsed "$t0" "$(now)") s; at most $max_slots_join slot(s) seen meanwhile"
	phase "$ntables syncs, $target" "$target" 1 "$ntables" $([ "$target" = postgres ] && echo 1 || echo 2) ||
		die "phase $target"
	tail -n 1 "$work/rows.txt"
done

echo
echo "$ntables tables in one database, max_worker_processes = 8, ctas_fed.max_sync_workers = 2;"
echo "the writer, $runs times per phase: $rounds rounds x $ntables tables, a transaction per table (UPDATE of 5 rows, INSERT, DELETE)"
echo
echo "| phase | syncs | changes written | WAL | changes synced | writer s | converged after s | sync workers (ctas_fed workers: types) | slots | sync worker CPU s | remote CPU s | of which its peeks (decoding) CPU s (share of samples, peeks, their wall s) | one decode CPU s | peeks / one decode | peeks / peeks with 1 sync | worker RssAnon MB after each writer run | remote vs source | load average |"
echo "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---|---|---|"
cat "$work/rows.txt"
echo
echo "sync workers <= ctas_fed.max_sync_workers (2) with $ntables syncs: $goal_workers"
echo "replication slots = 1 with $ntables syncs: $goal_slots"
echo "WAL decoded once (the CPU of the worker's peeks with $ntables syncs <= 2x that with 1 sync; $ntables slots: ${ntables}x): $goal_decode"
printf '%s' "$memory_lines"
echo "(load average $(load))"
[ "$status" = 0 ] || exit 1
for g in "$goal_workers" "$goal_slots" "$goal_decode" "$goal_memory"; do
	[ "$g" = met ] || exit 3
done
exit 0
