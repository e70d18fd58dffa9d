#!/bin/bash
# test/bench/sync.sh - continuous sync (CREATE TABLE ... WITH (sync =
# 'continuous')) into a PostgreSQL and a ClickHouse catalog, measured as
# ratios:
#
#   initial copy  the time a sync of SELECT * FROM src takes from its
#                 CREATE TABLE to the state "streaming" against a plain
#                 CREATE TABLE wh.public.t AS SELECT * FROM src, and against
#                 the same WITH (primary_key = 'id'), which does the same
#                 remote work as the sync (goal of issue 10: the sync's copy
#                 at >= 0.9x the plain CTAS); BENCH_COPY_RUNS runs of each,
#                 alternating, best of each, and where the sync's time went
#   streaming     pgbench at full speed on the source for BENCH_SECONDS
#                 (TPC-B-like, then a custom INSERT/UPDATE/DELETE script)
#                 with a sync of the changed table running: lag_seconds and
#                 lag_bytes of the job sampled every second (p50, p95, max),
#                 source changes made per second against changes applied per
#                 second, and the time the sync takes to converge after
#                 pgbench stops (goal: within 10 s), checked by comparing
#                 every row of both sides; each workload once per target
#                 (ClickHouse: the rows of SELECT ... FINAL WHERE
#                 _deleted = 0)
#
# Called by test/bench/run.sh (BENCH_TARGETS=sync) as the OS user that runs
# the servers, from a staged copy of the repository:
#
#   bash test/bench/sync.sh WORKDIR
#
# Environment:
#   BENCH_ROWS     rows of the copy's source table, default 1000000
#   BENCH_SECONDS  seconds of each pgbench run, default 30
#   BENCH_CLIENTS  pgbench clients, default 4
#   BENCH_SYNC_TARGETS  targets of the streaming runs, default
#                  "postgres clickhouse"; empty: the initial copy only
#   BENCH_COPY_RUNS  runs of each method of the initial copy, default 3
#   CTAS_PG_BINDIR PostgreSQL programs, default /usr/lib/postgresql/15/bin
#
# Two throwaway clusters on 127.0.0.1 in WORKDIR (local: ctas_fed preloaded,
# wal_level = logical) and a throwaway ClickHouse server
# (test/lib/clickhouse-config.sh), stopped on exit.  Exit status 0 when every step
# worked and the remote equalled the source after each run, whatever the
# ratios; 1 otherwise.

set -u -o pipefail

work=${1:?usage: sync.sh WORKDIR}
bindir=${CTAS_PG_BINDIR:-/usr/lib/postgresql/15/bin}
rows=${BENCH_ROWS:-1000000}
seconds=${BENCH_SECONDS:-30}
clients=${BENCH_CLIENTS:-4}
sync_targets=${BENCH_SYNC_TARGETS-postgres clickhouse}
copy_runs=${BENCH_COPY_RUNS:-3}
testdir=$(cd "$(dirname "$0")/.." && pwd)
conf_file=$testdir/ctas_fed.conf
for t in $sync_targets; do
	case $t in postgres | clickhouse) ;;
		*) echo "BENCH_SYNC_TARGETS: unknown target $t" >&2; exit 1 ;; esac
done

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sync_bench_env

trap sync_bench_stop EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM HUP

sync_bench_clusters "$(cat "$conf_file")
wal_level = logical" "max_prepared_transactions = 10"
lsql <<EOF || die "local set-up"
CREATE EXTENSION ctas_fed;
$(sync_bench_wh_sql)
EOF

# ClickHouse, when a streaming run goes there
case " $sync_targets " in
*" clickhouse "*) sync_bench_clickhouse ;;
esac

# digest of a query's rows, the same way on both sides
digest()
{
	"$1" -c "COPY ($2) TO STDOUT" | LC_ALL=C sort | md5sum | cut -c1-32
}

# the same of a ClickHouse query (the first argument, rsql's place, unused)
ch_digest()
{
	chq "$2 FORMAT TabSeparated" | LC_ALL=C sort | md5sum | cut -c1-32
}

# wait_state TARGET STATE: until the sync job of TARGET is in STATE (600 s)
wait_state()
{
	for _ in $(seq 1 6000); do
		[ "$(lsql -c "SELECT state FROM ctas_fed.jobs WHERE mode = 'sync' AND target = '$1'")" = "$2" ] &&
			return 0
		sleep 0.1
	done
	return 1
}

status=0

# ---- initial copy against a plain CTAS -----------------------------------
# Three methods, each run timed inside one psql session (no psql start in
# the time), in a rotating order, $copy_runs runs each, best of each kept:
#   plain     CREATE TABLE wh.public.t AS SELECT * FROM src (no key)
#   plain_pk  the same WITH (primary_key = 'id'): the same remote work as the
#             sync (rows, then ALTER TABLE ... ADD PRIMARY KEY)
#   sync      WITH (sync = 'continuous'), until its job is "streaming"
#             (worker start, slot, copy, key, remote COMMIT), polled every
#             10 ms in ctas_fed.syncs (the jobs view costs more CPU, which
#             the sync's processes would miss on a loaded machine)
# Both clusters are checkpointed before each run.  The sync worker's DEBUG1
# messages (log_min_messages of database bench) give the time of each phase
# of its best run.
echo "== initial copy of $rows rows, $copy_runs runs of each method in a rotating order"
make_source "$rows" | lsql > /dev/null || die "source table"
lsql -c "ALTER TABLE src_$rows ADD PRIMARY KEY (id)" || die "primary key"
lsql -c "ALTER DATABASE bench SET log_min_messages = debug1" || die "log_min_messages"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# copy_once METHOD TABLE: the seconds METHOD takes, on stdout
copy_once()
{
	local opts= wait=
	case $1 in
		plain) ;;
		plain_pk) opts="WITH (primary_key = 'id')" ;;
		sync)
			opts="WITH (sync = 'continuous')"
			wait="DO \$\$ BEGIN
  WHILE coalesce((SELECT state FROM ctas_fed.syncs
                  WHERE remote_table = '$2'), '') <> 'streaming' LOOP
    IF clock_timestamp() - current_setting('bench.t0')::timestamptz > interval '600 s' THEN
      RAISE 'the sync did not reach streaming';
    END IF;
    PERFORM pg_sleep(0.01);
  END LOOP;
END \$\$;"
			;;
	esac
	psql -X -q -h "$work" -p "$rport" -d dw -c CHECKPOINT > /dev/null || return 1
	lsql -c CHECKPOINT > /dev/null || return 1
	lsql <<EOF
SELECT set_config('bench.t0', clock_timestamp()::text, false) \gset
CREATE TABLE wh.public.$2 $opts AS SELECT * FROM src_$rows;
$wait
SELECT round(extract(epoch FROM clock_timestamp() - current_setting('bench.t0')::timestamptz), 3);
EOF
}

declare -A best
methods=(plain plain_pk sync)
for run in $(seq 1 "$copy_runs"); do
	for k in 0 1 2; do
		method=${methods[$(((run - 1 + k) % 3))]}
		table=copy_${method}_$run
		secs=$(copy_once "$method" "$table" | tail -n 1) || die "copy run $run: $method"
		[ "$(rsql -c "SELECT count(*) FROM public.$table")" = "$rows" ] ||
			{ echo "copy run $run: $method: wrong row count"; status=1; }
		if [ "$method" != plain ]; then
			[ "$(rsql -c "SELECT count(*) FROM pg_index WHERE indrelid = 'public.$table'::regclass AND indisprimary")" = 1 ] ||
				{ echo "copy run $run: $method: no primary key"; status=1; }
		fi
		echo "   run $run: $method $secs s"
		if [ -z "${best[$method]:-}" ] || awk -v a="$secs" -v b="${best[$method]}" 'BEGIN { exit !(a < b) }'; then
			best[$method]=$secs
			[ "$method" = sync ] && best_sync_table=$table
		fi
		if [ "$method" = sync ]; then
			lsql -c "SELECT ctas_fed.stop_sync('wh.public.$table')" > /dev/null
			# the resolver drops the slot: none left before the next run
			for _ in $(seq 1 600); do
				[ "$(lsql -c "SELECT count(*) FROM pg_replication_slots")" = 0 ] && break
				sleep 0.1
			done
		fi
		rsql -c "DROP TABLE public.$table" || die "DROP TABLE $table"
	done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
lsql -c "ALTER DATABASE bench RESET log_min_messages" || die "log_min_messages"
plain=${best[plain]} plain_pk=${best[plain_pk]} synced=${best[sync]}
copy_ratio=$(awk -v p="$plain" -v s="$synced" 'BEGIN { printf "%.2f", p / s }')
copy_ratio_pk=$(awk -v p="$plain_pk" -v s="$synced" 'BEGIN { printf "%.2f", p / s }')
# the phases of the best sync run, from the worker's DEBUG1 messages
sync_id=$(lsql -c "SELECT sync_id FROM ctas_fed.syncs WHERE remote_table = '$best_sync_table'")
phases=$(sed -n "s/.*ctas_fed sync $sync_id copy phases: //p" "$work/local.log")

# ---- streaming under pgbench ----------------------------------------------
if [ -n "$sync_targets" ]; then
	pgbench -i -s 10 -q -h "$work" -p "$lport" bench > "$work/pgbench-init.log" 2>&1 ||
		die "pgbench -i"
	lsql -c "CREATE TABLE iud (id int PRIMARY KEY, s text, v int);
	         INSERT INTO iud SELECT g, 'x', 0 FROM generate_series(1, 1000000, 2) g" || die "iud"
fi
cat > "$work/iud.sql" <<'EOF'
\set id random(1, 1000000)
INSERT INTO iud VALUES (:id, 'i', 0) ON CONFLICT (id) DO UPDATE SET v = iud.v + 1;
UPDATE iud SET v = v + 1, s = 'u' WHERE id = :id + 1;
DELETE FROM iud WHERE id = :id + 2;
EOF

# run NAME TABLE QUERY REMOTE_QUERY PGBENCH_ARGS...: into $catalog.$schema,
# the remote rows digested by $rdigest
run()
{
	local name=$1 table=$2 query=$3 remote_query=$4
	shift 4
	lsql -c "CREATE TABLE $catalog.$schema.$table WITH (sync = 'continuous') AS $query" || return 1
	wait_state "$schema.$table" streaming || return 1
	local c0 c1 t0 t1 t2 lag_file=$work/$name.lag
	: > "$lag_file"
	c0=$(lsql -c "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables WHERE relname = '${query##* FROM }'")
	t0=$(now)
	pgbench -n -c "$clients" -j "$clients" -T "$seconds" -h "$work" -p "$lport" "$@" bench \
		> "$work/$name.pgbench.log" 2>&1 &
	local pgb=$!
	while kill -0 "$pgb" 2> /dev/null; do
		lsql -c "SELECT lag_seconds, lag_bytes FROM ctas_fed.jobs WHERE mode = 'sync' AND target = '$schema.$table'" \
			| tr '|' ' ' >> "$lag_file"
		sleep 1
	done
	wait "$pgb" || { cat "$work/$name.pgbench.log"; return 1; }
	t1=$(now)
	c1=$(lsql -c "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables WHERE relname = '${query##* FROM }'")
	# converged: every row of both sides equal
	local want
	want=$(digest lsql "$query")
	for _ in $(seq 1 1200); do
		[ "$($rdigest rsql "$remote_query")" = "$want" ] && break
		sleep 0.05
	done
	t2=$(now)
	[ "$($rdigest rsql "$remote_query")" = "$want" ] || { echo "$name: did not converge"; return 1; }
	local applied
	applied=$(lsql -c "SELECT changes FROM ctas_fed.sync_status() s JOIN ctas_fed.syncs y USING (sync_id) WHERE y.remote_table = '$table'")
	lsql -c "SELECT ctas_fed.stop_sync('$catalog.$schema.$table')" > /dev/null
	sort -n -k1 "$lag_file" | awk -v name="$name" -v made="$((c1 - c0))" -v applied="${applied:-0}" \
		-v secs="$(elapsed "$t0" "$t1")" -v conv="$(elapsed "$t1" "$t2")" '
		{ lag[NR] = $1; bytes[NR] = $2 }
		END {
			p50 = lag[int(NR * 0.5) > 0 ? int(NR * 0.5) : 1]
			p95 = lag[int(NR * 0.95) > 0 ? int(NR * 0.95) : 1]
			printf "| %s | %.0f | %.0f | %.2f | %.1f s | %.1f s | %.1f s | %.1f s |\n",
				name, made / secs, applied / secs, (made > 0 ? applied / made : 0),
				p50, p95, lag[NR], conv
		}' >> "$work/results.md"
}

echo "== streaming: pgbench for $seconds s with $clients clients"
: > "$work/results.md"
for target in $sync_targets; do
	case $target in
	postgres)
		catalog=wh schema=public rdigest=digest
		run tpcb accounts "SELECT * FROM pgbench_accounts" "SELECT * FROM public.accounts" ||
			{ echo "tpcb run failed"; status=1; }
		run iud iud_copy "SELECT * FROM iud" "SELECT * FROM public.iud_copy" -f "$work/iud.sql" ||
			{ echo "iud run failed"; status=1; }
		;;
	clickhouse)
		# filler (char(84)) left out: its padding reads differently on each side
		catalog=lake schema=bench rdigest=ch_digest
		run tpcb_clickhouse ch_accounts "SELECT aid, bid, abalance FROM pgbench_accounts" \
			"SELECT aid, bid, abalance FROM bench.ch_accounts FINAL WHERE _deleted = 0" ||
			{ echo "tpcb (ClickHouse) run failed"; status=1; }
		run iud_clickhouse ch_iud "SELECT id, s, v FROM iud" \
			"SELECT id, s, v FROM bench.ch_iud FINAL WHERE _deleted = 0" -f "$work/iud.sql" ||
			{ echo "iud (ClickHouse) run failed"; status=1; }
		;;
	esac
done

echo
goal() { awk -v r="$1" 'BEGIN { print (r >= 0.9 ? "met" : "NOT met") }'; }
echo "initial copy, $rows rows, best of $copy_runs runs (load average before $load_before, after $load_after):"
echo "  plain CTAS ${plain} s, plain CTAS WITH (primary_key = 'id') ${plain_pk} s, sync until streaming ${synced} s"
echo "  sync: ${copy_ratio}x the plain CTAS (goal >= 0.9x: $(goal "$copy_ratio")),"
echo "        ${copy_ratio_pk}x the plain CTAS with the same key (goal >= 0.9x: $(goal "$copy_ratio_pk"))"
echo "  phases of the best sync run: $phases"
echo
echo "| workload | changes made/s | applied/s | applied/made | lag p50 | lag p95 | lag max | converged after |"
echo "|---|---|---|---|---|---|---|---|"
cat "$work/results.md"
echo
echo "(lag: lag_seconds of the job, sampled every second; converged: from the end of pgbench"
echo " until every row of the remote equals the source; goal within 10 s)"
[ "$(lsql -c "SELECT count(*) FROM pg_replication_slots")" = 0 ] ||
	{ sleep 3; [ "$(lsql -c "SELECT count(*) FROM pg_replication_slots")" = 0 ] || { echo "a slot was left"; status=1; }; }
exit $status
