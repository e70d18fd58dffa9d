#!/bin/bash
# test/bench/sync_native.sh - catch-up of a paused backlog: a ctas_fed sync
# into a PostgreSQL catalog against PostgreSQL's own logical replication
# (CREATE SUBSCRIPTION), on the same source table and the same remote
# server, measured in one run as a ratio (issue 22, item 5):
#
#   source   pgbench_accounts of pgbench -i -s BENCH_SCALE on the local
#            cluster, followed at once by
#            - a native subscription on the remote (table
#              public.pgbench_accounts, copy_data), and
#            - CREATE TABLE wh.public.accounts WITH (sync = 'continuous')
#              AS SELECT * FROM pgbench_accounts
#   pause    native: ALTER SUBSCRIPTION ... DISABLE (its apply worker and
#            walsender end); ctas_fed: a remote session holds LOCK TABLE
#            public.accounts IN ACCESS EXCLUSIVE MODE and one change is made,
#            so that the sync worker waits on the lock in its remote
#            transaction (its slot is neither peeked nor advanced meanwhile)
#   backlog  BENCH_SINGLE single-row UPDATEs of random accounts from
#            BENCH_CLIENTS pgbench clients, then one UPDATE of BENCH_BULK
#            rows, then a marker UPDATE of aid 1 (the last change)
#   resume   each alone, native first: ENABLE the subscription, or end the
#            locking session; timed until the remote row of aid 1 holds
#            the marker (applied in source commit order, so everything before
#            it is applied too), polled every 20 ms in one remote session;
#            then every row of both
#            copies is compared with the source (not timed)
#   decoding one peek of the whole backlog at the sync's slot, before the
#            catch-ups (the decoding work of the sync's worker, done at once)
#   CPU      CPU seconds of each cluster's processes during each catch-up
#            (test/bench/lib.sh's cpu_watch): local (walsender, or the sync
#            worker's decoding and encoding) and remote (apply worker, or the
#            backend that applies ctas_fed's batches)
#
#   steady   then both follow pgbench at about half the source's capacity
#            at once, for BENCH_LAG_SECONDS: the capacity is the rate of
#            an unthrottled pgbench of the same single-row UPDATEs for 5 s
#            (appliers running), the load pgbench -R of half that; a
#            heartbeat session writes the time (ms) into aid 1 every 100 ms
#            (pgbench leaves aid 1 alone), a remote session reads aid 1 of
#            both copies every 100 ms: the lag of a side is the age of the
#            newest heartbeat it holds; p50/p95/max of each side
#
#   ClickHouse the same backlog caught up by a sync of the same table into
#            ClickHouse (BENCH_SYNC_TARGETS holds "clickhouse", the
#            default), in a stream of its own (stream = 'ch'), paused by
#            stopping clickhouse-server (SIGSTOP: the worker waits for the
#            answer to its write of the first change, its slot neither
#            peeked nor advanced) and resumed (SIGCONT) after the two
#            others, alone; timed until aid 1 of SELECT ... FINAL holds the
#            marker.  Native logical replication cannot target ClickHouse:
#            its rate (changes/s) and CPU s per million changes (sync
#            worker + clickhouse-server) are printed beside the others
#   peeks    where the sync worker's time goes during each catch-up: the
#            share of perf's samples of the worker (perf record -g) whose
#            stack holds the decoding's functions (lib.sh's
#            decoding_symbols: its peeks and slot advances, the pgoutput
#            messages, their tuplestore) against the rest (the apply); the
#            peeks' number and wall time from pg_stat_statements (loaded
#            for the bench)
#
# Prints the times, the ratio native time / ctas_fed time (goal of issue 22:
# >= 1.2x), the CPU seconds, CPU seconds per million changes of each side
# (the two processes that do the work: walsender + apply worker, sync
# worker + remote backend), and the steady lag (goal: ctas_fed's p95 < 1 s).
# BENCH_NATIVE_RUNS rounds (default 1), each with a fresh backlog; the best
# time of each side is compared.
#
#   bash test/bench/sync_native.sh WORKDIR      (as the OS user of the servers;
#   BENCH_TARGETS=sync_native bash test/bench/run.sh does that)
#
# Environment: BENCH_SYNC_TARGETS ("postgres clickhouse"; "postgres"
# leaves ClickHouse out), BENCH_SCALE (default 5), BENCH_SINGLE (40000), BENCH_BULK
# (50000), BENCH_CLIENTS (4), BENCH_NATIVE_RUNS (1), BENCH_LAG_SECONDS (30;
# 0: no steady phase), CTAS_PG_BINDIR; BENCH_LOCAL_CONF (lines added to the
# local postgresql.conf), BENCH_PERF=1 (perf record of the sync worker and
# its remote backend during each catch-up, in WORKDIR).
# Exit status 0 when every step worked and both copies equalled the source
# after each catch-up, 3 when the goal was not met, 1 otherwise.

set -u -o pipefail

work=${1:?usage: sync_native.sh WORKDIR}
bindir=${CTAS_PG_BINDIR:-/usr/lib/postgresql/15/bin}
scale=${BENCH_SCALE:-5}
single=${BENCH_SINGLE:-40000}
bulk=${BENCH_BULK:-50000}
clients=${BENCH_CLIENTS:-4}
runs=${BENCH_NATIVE_RUNS:-1}
lag_secs=${BENCH_LAG_SECONDS:-30}
with_ch=
case " ${BENCH_SYNC_TARGETS-postgres clickhouse} " in *" clickhouse "*) with_ch=1 ;; esac
testdir=$(cd "$(dirname "$0")/.." && pwd)
conf_file=$testdir/ctas_fed.conf
marker_base=700000000

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sync_bench_env

lock_pid=
cleanup()
{
	[ -n "$lock_pid" ] && kill "$lock_pid" 2> /dev/null
	[ -n "$ch_pid" ] && kill -CONT "$ch_pid" 2> /dev/null
	sync_bench_stop
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM HUP

digest() { "$1" -c "COPY ($2) TO STDOUT" | LC_ALL=C sort | md5sum | cut -c1-32; }

sync_bench_clusters "$(cat "$conf_file")
wal_level = logical
shared_preload_libraries = 'ctas_fed, pg_stat_statements'
${BENCH_LOCAL_CONF:-}" "max_prepared_transactions = 10" \
	"local replication all        trust"
pgbench -i -q -s "$scale" -h "$work" -p "$lport" bench > "$work/pgbench-init.log" 2>&1 ||
	{ cat "$work/pgbench-init.log"; die "pgbench -i"; }
naccounts=$(lsql -c "SELECT count(*) FROM pgbench_accounts")
lsql <<EOF || die "local set-up"
CREATE EXTENSION ctas_fed;
CREATE EXTENSION pg_stat_statements;
$(sync_bench_wh_sql)
CREATE PUBLICATION native_pub FOR TABLE pgbench_accounts;
EOF
rsql <<EOF || die "remote table of the subscription"
CREATE TABLE public.pgbench_accounts
  (aid int PRIMARY KEY, bid int, abalance int, filler char(84));
CREATE SUBSCRIPTION native
  CONNECTION 'host=$work port=$lport dbname=bench'
  PUBLICATION native_pub;
EOF
lsql -c "CREATE TABLE wh.public.accounts WITH (sync = 'continuous') AS SELECT * FROM pgbench_accounts" ||
	die "the sync"

if [ -n "$with_ch" ]; then
	sync_bench_clickhouse
	# filler (char(84)) left out, as in test/bench/sync.sh
	lsql -c "CREATE TABLE lake.bench.ch_accounts WITH (sync = 'continuous', stream = 'ch') AS SELECT aid, bid, abalance FROM pgbench_accounts" ||
		die "the ClickHouse sync"
fi
ch_digest() { chq "$1 FORMAT TabSeparated" | LC_ALL=C sort | md5sum | cut -c1-32; }
# ch_wait_marker MARKER: until aid 1 in ClickHouse holds MARKER (600 s),
# polled every 20 ms
ch_wait_marker()
{
	local q="SELECT abalance FROM bench.ch_accounts FINAL WHERE aid = 1 AND _deleted = 0"
	for _ in $(seq 1 30000); do
		[ "$(chq "$q" 2> /dev/null)" = "$1" ] && return 0
		sleep 0.02
	done
	return 1
}
# peeks: "SECONDS CALLS" of the sync workers' peeks since the last
# pg_stat_statements_reset()
peeks()
{
	lsql -F ' ' -c "SELECT round(coalesce(sum(total_exec_time), 0)::numeric / 1000, 2), coalesce(sum(calls), 0)
		FROM pg_stat_statements WHERE query LIKE '%pg_logical_slot_peek_binary_changes%'"
}
# worker_pid STREAM_NAME: the pid of the sync worker of a stream ('' for
# the default stream)
worker_pid()
{
	lsql -c "SELECT a.pid FROM pg_stat_activity a
		WHERE a.application_name = 'ctas_fed sync ' || (SELECT DISTINCT stream_id FROM ctas_fed.syncs
			WHERE coalesce(stream_name, '') = '$1' AND state = 'streaming')"
}

# wait_marker TABLE MARKER: until the remote row of aid 1 in TABLE holds
# MARKER (600 s), polled every 20 ms in one session (a psql started every
# 20 ms would cost the remote more CPU than the catch-up measured)
wait_marker()
{
	rsql -c "SET statement_timeout = '600s'" -c "DO \$\$
BEGIN
	WHILE (SELECT abalance FROM $1 WHERE aid = 1) IS DISTINCT FROM $2 LOOP
		PERFORM pg_catalog.pg_sleep(0.02);
	END LOOP;
END \$\$" > /dev/null
}

# until: wait up to $1 s for the query $3 on side $2 to print $4
until_equal()
{
	local secs=$1 side=$2 q=$3 want=$4
	for _ in $(seq 1 $((secs * 20))); do
		[ "$($side -c "$q")" = "$want" ] && return 0
		sleep 0.05
	done
	return 1
}
until_equal 600 rsql "SELECT count(*) FILTER (WHERE srsubstate <> 'r') FROM pg_subscription_rel" 0 ||
	die "the subscription's initial copy did not end"
until_equal 600 lsql "SELECT state FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'public.accounts'" streaming ||
	die "the sync did not reach streaming"
if [ -n "$with_ch" ]; then
	until_equal 600 lsql "SELECT state FROM ctas_fed.jobs WHERE mode = 'sync' AND target = 'bench.ch_accounts'" streaming ||
		die "the ClickHouse sync did not reach streaming"
fi
rsql -c "ALTER TABLE public.accounts SET (autovacuum_enabled = on)" > /dev/null

cat > "$work/single.sql" <<EOF
\set aid random(2, 100000 * $scale)
\set delta random(-5000, 5000)
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
EOF

# steady: both follow pgbench at half the source's capacity at once; the
# lag of each (the age of the newest heartbeat in its copy), p50/p95/max
steady()
{
	local cap rate hb_pid samp_pid pg_pid row secs=$lag_secs n_changes
	echo
	echo "== steady lag: both appliers following pgbench at half the source's capacity"
	rsql -c "ALTER SUBSCRIPTION native ENABLE" || return 1
	until_equal 60 rsql "SELECT count(*) FROM pg_stat_subscription WHERE pid IS NOT NULL" 1 ||
		return 1
	sleep 2
	pgbench -n -c "$clients" -j "$clients" -T 5 -f "$work/single.sql" \
		-h "$work" -p "$lport" bench > "$work/pgbench.cap.log" 2>&1 ||
		{ cat "$work/pgbench.cap.log"; return 1; }
	cap=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$work/pgbench.cap.log" | head -1)
	rate=$(awk -v c="$cap" 'BEGIN { printf "%d", c / 2 }')
	echo "   source capacity ${cap} tps (unthrottled, $clients clients); load: pgbench -R $rate for $secs s"
	# let both catch up with the capacity run first
	sleep 5
	rsql -c "DROP TABLE IF EXISTS lag_samples; CREATE TABLE lag_samples (side text, lag_ms bigint)" > /dev/null || return 1
	# the heartbeat: the time in ms (mod 1e9) into aid 1, every 100 ms
	lsql -c "DO \$\$
BEGIN
	FOR i IN 1 .. $((secs * 10 + 20)) LOOP
		UPDATE pgbench_accounts
		   SET abalance = ((extract(epoch FROM clock_timestamp()) * 1000)::bigint % 1000000000)::int
		 WHERE aid = 1;
		COMMIT;
		PERFORM pg_catalog.pg_sleep(0.1);
	END LOOP;
END \$\$" > /dev/null 2>&1 &
	hb_pid=$!
	sleep 1
	if [ -n "${BENCH_PERF:-}" ]; then
		perf record -q -g -o "$work/perf.steady.data" \
			-p "$(pgrep -d, -P "$lpid" -f 'ctas_fed sync'),$(pgrep -d, -P "$rpid" -f 'loader dw')" \
			> /dev/null 2>&1 &
		perf_pid=$!
	fi
	cpu_watch_start "$work/cpu.steady" local="$lpid" remote="$rpid" || return 1
	pgbench -n -c "$clients" -j "$clients" -R "$rate" -T "$secs" -f "$work/single.sql" \
		-h "$work" -p "$lport" bench > "$work/pgbench.steady.log" 2>&1 &
	pg_pid=$!
	# the sampler: both copies' aid 1 every 100 ms, on the remote
	rsql -c "DO \$\$
DECLARE
	now_ms bigint;
BEGIN
	FOR i IN 1 .. $((secs * 10)) LOOP
		now_ms := (extract(epoch FROM clock_timestamp()) * 1000)::bigint % 1000000000;
		INSERT INTO lag_samples
		SELECT 'native', now_ms - abalance FROM public.pgbench_accounts WHERE aid = 1
		UNION ALL
		SELECT 'ctas_fed', now_ms - abalance FROM public.accounts WHERE aid = 1;
		COMMIT;
		PERFORM pg_catalog.pg_sleep(0.1);
	END LOOP;
END \$\$" > /dev/null &
	samp_pid=$!
	sleep $((secs / 2))
	echo "   WAL held mid-way (bytes): ctas_fed $(lsql -c "SELECT wal_held_bytes FROM ctas_fed.jobs WHERE target = 'public.accounts' AND state = 'streaming'")," \
		"native $(lsql -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) FROM pg_replication_slots WHERE slot_name = 'native'")"
	wait "$pg_pid" || { cat "$work/pgbench.steady.log"; return 1; }
	wait "$samp_pid" || return 1
	cpu_watch_stop "$work/cpu.steady" || return 1
	if [ -n "${BENCH_PERF:-}" ]; then
		kill -INT "$perf_pid"
		wait "$perf_pid" 2> /dev/null
	fi
	wait "$hb_pid"
	n_changes=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$work/pgbench.steady.log")
	n_changes=$((n_changes + secs * 10))
	echo "   $n_changes changes in $secs s ($(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$work/pgbench.steady.log" | head -1) tps)"
	echo
	echo "| side | lag p50 s | lag p95 s | lag max s | CPU s (walsender + apply worker / sync worker + remote backend) | CPU s per 1M changes |"
	echo "|---|---|---|---|---|---|"
	for side in native ctas_fed; do
		if [ "$side" = native ]; then
			cpu=$(awk -v a="$(cpu_field "$work/cpu.steady" 'sum:local:walsender')" -v b="$(cpu_field "$work/cpu.steady" 'sum:remote:logical replication')" 'BEGIN { printf "%.2f", a + b }')
		else
			cpu=$(awk -v a="$(cpu_field "$work/cpu.steady" 'sum:local:ctas_fed sync')" -v b="$(cpu_field "$work/cpu.steady" 'sum:remote:loader')" 'BEGIN { printf "%.2f", a + b }')
		fi
		row=$(rsql -F ' ' -c "SELECT round((percentile_cont(0.5) WITHIN GROUP (ORDER BY lag_ms) / 1000)::numeric, 3),
			round((percentile_cont(0.95) WITHIN GROUP (ORDER BY lag_ms) / 1000)::numeric, 3),
			round((max(lag_ms) / 1000.0)::numeric, 3) FROM lag_samples WHERE side = '$side'")
		set -- $row
		echo "| $side | $1 | $2 | $3 | $cpu | $(awk -v c="$cpu" -v n="$n_changes" 'BEGIN { printf "%.1f", c * 1000000 / n }') |"
		[ "$side" = ctas_fed ] && p95=$2
	done
	lag_met=$(awk -v p="$p95" 'BEGIN { print (p < 1 ? "met" : "NOT met") }')
	echo
	echo "steady lag under pgbench at half the source's capacity ($rate tps): ctas_fed p95 ${p95} s (goal < 1 s: $lag_met)"
	echo "(load average $(cut -d' ' -f1-3 /proc/loadavg))"
	return 0
}

status=0
: > "$work/rows_targets.txt"
best_native=
best_ctas=
: > "$work/rows.txt"

lpid=$(head -1 "$work/local/postmaster.pid")
slot=$(lsql -c "SELECT slot_name FROM ctas_fed.syncs WHERE remote_table = 'accounts'")
pub=$(lsql -c "SELECT publication FROM ctas_fed.syncs WHERE remote_table = 'accounts'")
rpid=$(head -1 "$work/remote/postmaster.pid")

for run in $(seq 1 "$runs"); do
	marker=$((marker_base + run))
	echo "== round $run: pause both, make a backlog"
	# native: disable, wait until its apply worker and walsender are gone
	rsql -c "ALTER SUBSCRIPTION native DISABLE" || die "disable"
	until_equal 60 rsql "SELECT count(*) FROM pg_stat_subscription WHERE pid IS NOT NULL" 0 ||
		die "the apply worker did not stop"
	until_equal 60 lsql "SELECT count(*) FROM pg_stat_replication" 0 ||
		die "the walsender did not stop"
	# ctas_fed: a session holding the remote table's lock, then one change
	# that the worker takes into its remote transaction, where it waits
	PGAPPNAME=bench_lock psql -X -q -h "$work" -p "$rport" -d dw \
		-c "BEGIN; LOCK TABLE public.accounts IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(3600)" \
		> /dev/null 2>&1 &
	lock_pid=$!
	until_equal 60 rsql "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'bench_lock' AND l.relation = 'public.accounts'::regclass AND l.granted" 1 ||
		die "the lock was not taken"
	# ClickHouse: stopped, so that the sync worker of stream "ch" waits
	# for the answer to its write of the change below
	if [ -n "$with_ch" ]; then
		ch_worker=$(worker_pid ch)
		kill -STOP "$ch_pid" || die "SIGSTOP clickhouse-server"
	fi
	lsql -c "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 2"
	# (the worker of stream "ch" peeks within SYNC_IDLE_MS, 100 ms)
	[ -n "$with_ch" ] && sleep 2
	until_equal 60 rsql "SELECT count(*) FROM pg_locks WHERE relation = 'public.accounts'::regclass AND NOT granted" 1 ||
		die "the sync worker did not wait on the lock"

	pgbench -n -c "$clients" -j "$clients" -t $((single / clients)) -f "$work/single.sql" \
		-h "$work" -p "$lport" bench > "$work/pgbench.log" 2>&1 ||
		{ cat "$work/pgbench.log"; die "pgbench"; }
	lsql -c "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= $bulk" || die "bulk update"
	lsql -c "UPDATE pgbench_accounts SET abalance = $marker WHERE aid = 1" || die "marker"
	want=$(digest lsql "SELECT aid, bid, abalance, filler FROM pgbench_accounts")
	lsql -c "CHECKPOINT"; rsql -c "CHECKPOINT"

	# the decoding alone: one peek of the whole backlog at the sync's slot
	# (it consumes nothing), as the sync worker's peeks do in parts
	cpu_watch_start "$work/cpu.decode.$run" local="$lpid" || die "cpu_watch"
	t0=$(now)
	lsql -c "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('$slot', NULL, NULL, 'proto_version', '1', 'publication_names', '$pub')" > /dev/null ||
		die "peek"
	t1=$(now)
	cpu_watch_stop "$work/cpu.decode.$run" || die "cpu_watch"
	decode=$(elapsed "$t0" "$t1")/$(cpu_field "$work/cpu.decode.$run" total:local)

	# native alone
	cpu_watch_start "$work/cpu.native.$run" local="$lpid" remote="$rpid" || die "cpu_watch"
	t0=$(now)
	rsql -c "ALTER SUBSCRIPTION native ENABLE"
	wait_marker public.pgbench_accounts "$marker" ||
		{ echo "native: the marker did not arrive"; status=1; }
	t1=$(now)
	cpu_watch_stop "$work/cpu.native.$run" || die "cpu_watch"
	native=$(elapsed "$t0" "$t1")
	[ "$(digest rsql "SELECT aid, bid, abalance, filler FROM public.pgbench_accounts")" = "$want" ] ||
		{ echo "native: the copy differs from the source"; status=1; }
	rsql -c "ALTER SUBSCRIPTION native DISABLE" || die "disable"

	# ctas_fed alone
	perf_pid=
	if [ -n "${BENCH_PERF:-}" ]; then
		# BENCH_PERF=1: a profile of the sync worker and its remote backend
		perf record -q -g -o "$work/perf.ctas.$run.data" \
			-p "$(pgrep -d, -P "$lpid" -f 'ctas_fed sync'),$(pgrep -d, -P "$rpid" -f 'loader dw')" \
			> /dev/null 2>&1 &
		perf_pid=$!
		sleep 0.5
	fi
	lsql -c "SELECT pg_stat_statements_reset()" > /dev/null
	perf_start "$work/perf.worker.$run.data" "$(worker_pid '')"
	cpu_watch_start "$work/cpu.ctas.$run" local="$lpid" remote="$rpid" || die "cpu_watch"
	t0=$(now)
	rsql -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'bench_lock'" > /dev/null
	wait_marker public.accounts "$marker" ||
		{ echo "ctas_fed: the marker did not arrive"; status=1; }
	t1=$(now)
	cpu_watch_stop "$work/cpu.ctas.$run" || die "cpu_watch"
	if [ -n "$perf_pid" ]; then
		kill -INT "$perf_pid"
		wait "$perf_pid" 2> /dev/null
	fi
	wait "$lock_pid" 2> /dev/null
	lock_pid=
	ctas=$(elapsed "$t0" "$t1")
	perf_stop "$work/perf.worker.$run.data"
	read -r peek_s peek_n <<< "$(peeks)"
	share=$(perf_share "$work/perf.worker.$run.data" $decoding_symbols)
	[ "$(digest rsql "SELECT aid, bid, abalance, filler FROM public.accounts")" = "$want" ] ||
		{ echo "ctas_fed: the copy differs from the source"; status=1; }

	# ClickHouse alone
	ch=-
	if [ -n "$with_ch" ]; then
		want_ch=$(digest lsql "SELECT aid, bid, abalance FROM pgbench_accounts")
		lsql -c "SELECT pg_stat_statements_reset()" > /dev/null
		perf_start "$work/perf.ch.$run.data" "$ch_worker"
		cpu_watch_start "$work/cpu.ch.$run" local="$lpid" ch="$ch_pid" || die "cpu_watch"
		t0=$(now)
		kill -CONT "$ch_pid"
		ch_wait_marker "$marker" ||
			{ echo "ClickHouse: the marker did not arrive"; status=1; }
		t1=$(now)
		cpu_watch_stop "$work/cpu.ch.$run" || die "cpu_watch"
		ch=$(elapsed "$t0" "$t1")
		perf_stop "$work/perf.ch.$run.data"
		read -r chpeek_s chpeek_n <<< "$(peeks)"
		chshare=$(perf_share "$work/perf.ch.$run.data" $decoding_symbols)
		[ "$(ch_digest "SELECT aid, bid, abalance FROM bench.ch_accounts FINAL WHERE _deleted = 0")" = "$want_ch" ] ||
			{ echo "ClickHouse: the copy differs from the source"; status=1; }
	fi

	n=$(cpu_field "$work/cpu.native.$run" total:local)/$(cpu_field "$work/cpu.native.$run" total:remote)
	nw=$(cpu_field "$work/cpu.native.$run" 'sum:local:walsender')/$(cpu_field "$work/cpu.native.$run" 'sum:remote:logical replication')
	c=$(cpu_field "$work/cpu.ctas.$run" total:local)/$(cpu_field "$work/cpu.ctas.$run" total:remote)
	cw=$(cpu_field "$work/cpu.ctas.$run" 'sum:local:ctas_fed sync')/$(cpu_field "$work/cpu.ctas.$run" 'sum:remote:loader')
	echo "   native ${native} s (CPU local/remote ${n} s; walsender/apply worker ${nw} s)"
	echo "   ctas_fed ${ctas} s (CPU local/remote ${c} s; sync worker/remote backend ${cw} s)"
	echo "   one peek of the whole backlog at the sync's slot: ${decode} s (time/CPU)"
	changes=$((single + bulk + 2))
	wcpu=$(cpu_field "$work/cpu.ctas.$run" 'sum:local:ctas_fed sync')
	echo "   ctas_fed's worker: ${wcpu} CPU s, ${share}% of its perf samples in its peeks (decoding);" \
		"$peek_n peeks, ${peek_s} s of the ${ctas} s catch-up"
	per_m()
	{
		awk -v a="$1" -v b="$2" -v n="$changes" 'BEGIN { if (a == "-" || b == "-") print "-"; else printf "%.1f", (a + b) * 1000000 / n }'
	}
	nm=$(per_m "$(cpu_field "$work/cpu.native.$run" 'sum:local:walsender')" "$(cpu_field "$work/cpu.native.$run" 'sum:remote:logical replication')")
	cm=$(per_m "$(cpu_field "$work/cpu.ctas.$run" 'sum:local:ctas_fed sync')" "$(cpu_field "$work/cpu.ctas.$run" 'sum:remote:loader')")
	rate() { awk -v n="$changes" -v t="$1" 'BEGIN { if (t == "-" || t <= 0) print "-"; else printf "%.0f", n / t }'; }
	if [ -n "$with_ch" ]; then
		chwcpu=$(cpu_field "$work/cpu.ch.$run" 'sum:local:ctas_fed sync')
		chm=$(per_m "$chwcpu" "$(cpu_field "$work/cpu.ch.$run" total:ch)")
		echo "   ClickHouse ${ch} s ($(rate "$ch") changes/s; sync workers/clickhouse-server CPU ${chwcpu}/$(cpu_field "$work/cpu.ch.$run" total:ch) s, $chm CPU s per 1M changes);" \
			"its worker: ${chshare}% of its perf samples in its peeks; $chpeek_n peeks, ${chpeek_s} s"
	fi
	echo "| $run | $native | $(rate "$native") | $nm | $ctas | $(rate "$ctas") | $cm | $wcpu | $share% | $ch | $(rate "$ch") | ${chm:--} | ${chwcpu:--} | ${chshare:--}% | $(cut -d' ' -f1 /proc/loadavg) |" >> "$work/rows_targets.txt"
	echo "| $run | $native | $n | $nw | $nm | $ctas | $c | $cw | $cm | $decode | $(awk -v a="$native" -v b="$ctas" 'BEGIN { printf "%.2f", a / b }')x | $(cut -d' ' -f1 /proc/loadavg) |" >> "$work/rows.txt"
	best_native=$(awk -v a="$native" -v b="${best_native:-1e9}" 'BEGIN { print (a < b ? a : b) }')
	best_ctas=$(awk -v a="$ctas" -v b="${best_ctas:-1e9}" 'BEGIN { print (a < b ? a : b) }')
done

ratio=$(awk -v a="$best_native" -v b="$best_ctas" 'BEGIN { printf "%.2f", a / b }')
met=$(awk -v r="$ratio" 'BEGIN { print (r >= 1.2 ? "met" : "NOT met") }')
echo
echo "catch-up of a paused backlog: pgbench_accounts scale $scale ($naccounts rows),"
echo "$single single-row updates from $clients clients + one $bulk-row UPDATE + a marker"
echo
echo "| round | native s | CPU local/remote s | walsender/apply worker s | their CPU s per 1M changes | ctas_fed s | CPU local/remote s | sync worker/remote backend s | their CPU s per 1M changes | decoding alone s/CPU s | native/ctas_fed | load average |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
cat "$work/rows.txt"
echo
echo "best: native ${best_native} s, ctas_fed ${best_ctas} s: ctas_fed at ${ratio}x native's catch-up speed (goal >= 1.2x: $met)"
echo "(load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "the same backlog into each target: seconds, changes/s, CPU s per 1M changes (walsender + apply worker;"
echo "sync worker + remote backend; sync worker + clickhouse-server), the sync worker's CPU s and the share"
echo "of its perf samples in its peeks (decoding; the rest is the apply)"
echo
echo "| round | native s | changes/s | CPU s/1M | ctas_fed into PostgreSQL s | changes/s | CPU s/1M | worker CPU s | in peeks | ctas_fed into ClickHouse s | changes/s | CPU s/1M | worker CPU s | in peeks | load average |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
cat "$work/rows_targets.txt"

# the steady phase compares the PostgreSQL appliers alone
[ -n "$with_ch" ] && lsql -c "SELECT ctas_fed.stop_sync('lake.bench.ch_accounts')" > /dev/null
lag_met=met
if [ "$lag_secs" -gt 0 ]; then
	steady || die "the steady phase"
fi
lsql -c "SELECT ctas_fed.stop_sync('wh.public.accounts')" > /dev/null
rsql -c "DROP SUBSCRIPTION native" > /dev/null
[ "$status" = 0 ] && { [ "$met" != met ] || [ "$lag_met" != met ]; } && exit 3
exit $status
