#!/bin/bash
# test/bench/run.sh - "make bench": the bootstrap of test/run.sh, then
# each benchmark of test/bench/ (postgres.sh, clickhouse.sh) on throwaway
# servers, as the OS user "postgres" when we are root.
#
#   make bench                                 1M and 5M rows (postgres.sh:
#                                              3 runs each, about 8 minutes
#                                              on 2 cores)
#   BENCH_TARGETS=postgres bash test/bench/run.sh   only test/bench/postgres.sh
#   BENCH_TARGETS=sync BENCH_SECONDS=30        continuous sync (test/bench/sync.sh;
#                        BENCH_SYNC_TARGETS=clickhouse: only its ClickHouse runs)
#   BENCH_TARGETS=sync_native  a sync's catch-up against a native subscription
#                        and their steady lag under pgbench at half the
#                        source's capacity (test/bench/sync_native.sh;
#                        BENCH_NATIVE_RUNS=3 rounds, BENCH_LAG_SECONDS=30)
#   BENCH_TARGETS=sync_verify  ctas_fed.verify_sync() on a synced table,
#                        both targets, with a writer on the source
#                        (test/bench/sync_verify.pl, a TAP file run by
#                        prove; BENCH_ROWS="1000000 10000000" for both
#                        sizes, about 40 minutes on 2 cores)
#   BENCH_TARGETS=mysql  into MariaDB against the LOAD DATA pipe
#                        (test/bench/mysql.sh)
#   BENCH_TARGETS=clickhouse_cluster  into a ClickHouse cluster
#                        (test/bench/clickhouse_cluster.sh)
#   BENCH_TARGETS=sync_partcopy  the copy of a partitioned source, serial
#                        against parallel readers (test/bench/sync_partcopy.pl,
#                        a TAP file; BENCH_PARTCOPY_CLICKHOUSE=1 also into
#                        ClickHouse)
#   BENCH_TARGETS=sync_many  100 synced tables in one database: workers,
#                        slots, decoding once, worker memory, into both
#                        targets (test/bench/sync_many.sh; BENCH_MANY_TABLES,
#                        BENCH_MANY_ROUNDS, BENCH_MANY_RUNS, BENCH_MANY_ROWS)
#   BENCH_ROWS=100000 bash test/bench/run.sh   quick smoke check
#   BENCH_ROWS="1000000 5000000" BENCH_RUNS=3 bash test/bench/run.sh
#   BENCH_SKIP_BOOTSTRAP=1 bash test/bench/run.sh
#                        no apt-get, make or make install: use the ctas_fed
#                        already installed (checked to be there)
#   BENCH_TARGETS=postgres BENCH_METHODS="ctas_fed copy_pipe"
#                        a subset of the methods of one target (the names
#                        are in the head of each script)
#   BENCH_TIMEOUT=3600   seconds before a target's benchmark is stopped
#   BENCH_KEEP=1         keep the folder (servers' logs, results) on
#                        success too; test/bench/postgres.sh --summary
#                        FOLDER/postgres/results.txt prints the table again
# BENCH_ROWS, BENCH_RUNS and BENCH_METHODS are passed on only when set:
# each script has its own defaults.
#
# Exit status 1 when a benchmark failed (its servers' logs are printed) or
# when one ran through but a stated goal was not met (its script exits 3:
# "goal(s) NOT met", no logs); 0 when every goal was met.
#
# Everything runs in a fresh copy of the repository's test files under /tmp
# (the repository may be unreadable to "postgres"); the servers' data and
# logs live there too.  The folder is removed on success (unless
# BENCH_KEEP=1) and kept, with its path printed, on failure.
#
# Ctrl-C reaches every process of the benchmark (timeout --foreground keeps
# them in the terminal's process group): psql cancels its statement and
# test/bench/postgres.sh stops its servers.  Servers still running at the
# end (a benchmark killed before it could stop them) are stopped by pid.

set -u

cd "$(dirname "$0")/../.." || exit 2
. test/bootstrap.sh

stage=
status=1

finish()
{
	trap - EXIT INT TERM HUP
	if [ -n "$stage" ]; then
		ctas_stop_leftovers "$stage" || status=1
		if [ "$status" = 0 ] && [ "${BENCH_KEEP:-0}" != 1 ]; then
			rm -rf "$stage"
		else
			echo "benchmark files (logs included) kept in $stage"
		fi
	fi
	exit "$status"
}
trap finish EXIT
trap 'echo "interrupted"; status=1; finish' INT TERM HUP

if [ "${BENCH_SKIP_BOOTSTRAP:-0}" = 1 ]; then
	pkglibdir=$("$CTAS_PG_CONFIG" --pkglibdir) || exit 1
	sharedir=$("$CTAS_PG_CONFIG" --sharedir) || exit 1
	for f in "$pkglibdir/ctas_fed.so" "$sharedir/extension/ctas_fed.control"; do
		[ -f "$f" ] || { echo "$f is missing: run make install, or drop BENCH_SKIP_BOOTSTRAP"; exit 1; }
	done
	ctas_check_runner || exit 1
elif ! ctas_bootstrap 2>&1; then
	echo "bootstrap failed: see above"
	exit 1
fi

stage=$(mktemp -d /tmp/ctas_fed_bench.XXXXXX) || exit 1
ctas_stage "$stage" || exit 1
chmod 755 "$stage"

so=$("$CTAS_PG_CONFIG" --pkglibdir)/ctas_fed.so
echo "== ctas_fed: source $(git describe --always --dirty 2> /dev/null || echo '(not a git checkout)');" \
	"$so of $(date -r "$so" '+%Y-%m-%d %H:%M:%S')"
# the targets: test/bench/<target>.sh, each in a folder of its own
targets=${BENCH_TARGETS:-}
if [ -z "$targets" ]; then
	for t in postgres clickhouse mysql clickhouse_cluster sync sync_native sync_many \
		sync_verify sync_partcopy; do
		[ -f "test/bench/$t.sh" ] || [ -f "test/bench/$t.pl" ] && targets+=" $t"
	done
fi
# only what the user set: each script has its own defaults
pass=()
for v in BENCH_ROWS BENCH_RUNS BENCH_METHODS BENCH_SECONDS BENCH_CLIENTS BENCH_SYNC_TARGETS \
	BENCH_SCALE BENCH_SINGLE BENCH_BULK BENCH_NATIVE_RUNS BENCH_LAG_SECONDS \
	BENCH_LOCAL_CONF BENCH_PERF BENCH_WRITER_RATE BENCH_MANY_TABLES BENCH_MANY_ROUNDS \
	BENCH_MANY_RUNS BENCH_MANY_ROWS BENCH_PARTCOPY_CLICKHOUSE; do
	[ -n "${!v:-}" ] && pass+=("$v=${!v}")
done

echo "== benchmark in $stage (targets:$targets; ${pass[*]:-default sizes and runs})"
status=0
# a TAP benchmark (test/bench/<target>.pl) runs under prove, as test/run.sh
# runs the TAP tests
pgxs_dir=$(cd "$(dirname "$("$CTAS_PG_CONFIG" --pgxs)")/.." && pwd)
for t in $targets; do
	if [ -f "test/bench/$t.sh" ]; then
		run=(bash "test/bench/$t.sh" "$stage/$t")
	elif [ -f "test/bench/$t.pl" ]; then
		run=(env "PERL5LIB=$pgxs_dir/test/perl:$stage/test/lib"
			"PG_REGRESS=$pgxs_dir/test/regress/pg_regress" "TESTDIR=$stage/$t"
			"TMPDIR=$stage/$t" "BENCH_OUT=$stage/$t/results.txt"
			prove -v "test/bench/$t.pl")
	else
		echo "no test/bench/$t.sh"; status=1; continue
	fi
	mkdir -p "$stage/$t" && ctas_is_root && chown "$CTAS_RUNNER:" "$stage/$t"
	echo
	echo "==== $t"
	(cd "$stage" && ctas_as_runner env \
		"PATH=$CTAS_PG_BINDIR:$PATH" \
		"CTAS_PG_BINDIR=$CTAS_PG_BINDIR" \
		"${pass[@]}" \
		"LC_ALL=C.UTF-8" \
		timeout --foreground -k 60 "${BENCH_TIMEOUT:-3600}" \
		"${run[@]}")
	rc=$?
	[ "$rc" = 124 ] && echo "$t: stopped after BENCH_TIMEOUT=${BENCH_TIMEOUT:-3600} seconds"
	if [ "$rc" = 3 ]; then
		# every run succeeded, a goal was not met (said above)
		echo "$t: goal(s) NOT met"
		status=1
	elif [ "$rc" != 0 ]; then
		echo "$t: benchmark failed (exit $rc); server logs:"
		for log in "$stage/$t"/*.log; do
			[ -f "$log" ] && { echo "----- $log"; tail -n 40 "$log"; }
		done
		status=1
		# interrupted: do not start the next one
		[ "$rc" -ge 124 ] && break
	fi
done
finish
