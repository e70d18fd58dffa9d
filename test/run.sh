#!/bin/bash
# test/run.sh - "make test" (after "make deps"): build with -Werror,
# install, then run pg_regress on a throwaway instance, the checks of the
# shape of src/ (test/layers.pl) and every TAP test in test/t/.
#
#   make test                        (or, packages installed: bash test/run.sh)
#   TAP_TESTS='test/t/001_servers.pl' bash test/run.sh    only these TAP tests
#   SKIP_REGRESS=1 bash test/run.sh                       TAP tests only
#   TAP_JOBS=1 bash test/run.sh      every TAP test alone (default: those
#                                    marked "# ctas-tap: parallel" 4 at a time)
#   TEST_KEEP=1 bash test/run.sh          keep the test files and logs on success
#   TAP_SECONDS_UPDATE=1 bash test/run.sh write the seconds each TAP test took
#                                    into test/tap_seconds (the parallel ones
#                                    start longest first, from that table)
#
# The packages must be there ("make deps" as root installs them; it says
# what is missing).  As root: make install, and every server runs as the OS
# user "postgres".  As another user: "make install" must be done already (it
# says what to do), and the servers run as that user.  Compiler warnings
# are errors (CTAS_WERROR=1, unless CTAS_WERROR is set otherwise).
#
# Everything runs in a fresh copy of sql/, expected/ and test/ under /tmp
# (the repository may be unreadable to "postgres"), removed on success and
# kept, with its path printed, on failure.
#
# The last line of output is always "N passed, N failed": pg_regress tests
# plus TAP assertions of ctas_fed (a TAP script that dies or misses its plan
# counts as at least one failure).  The checks of the test harness itself
# (test/t/00N_*.pl: servers start, answer, stop) are not ctas_fed tests: they
# are reported on a "harness: N passed, N failed" line before the last one,
# and their failures are added to the last line's failures.  The exit status
# is 0 only when nothing failed and some ctas_fed test ran.

set -u

cd "$(dirname "$0")/.." || exit 2
. test/bootstrap.sh
CTAS_WERROR=${CTAS_WERROR-1}

passed=0
failed=0
# checks of the test harness itself (test/t/00N_*.pl): reported on their own
# line, not counted as ctas_fed tests; their failures still count as failures
harness_passed=0
harness_failed=0
stage=

finish()
{
	local keep=$1
	if [ -n "$stage" ]; then
		ctas_stop_leftovers "$stage" || failed=$((failed + 1))
		if [ "$keep" = 0 ] && [ "$failed" = 0 ] && [ "$harness_failed" = 0 ] &&
			[ "$passed" -gt 0 ] && [ "${TEST_KEEP:-0}" != 1 ]; then
			rm -rf "$stage"
		else
			echo "test files kept in $stage"
		fi
	fi
	if [ $((harness_passed + harness_failed)) -gt 0 ]; then
		echo "harness: $harness_passed passed, $harness_failed failed (not counted below)"
	fi
	echo "$passed passed, $((failed + harness_failed)) failed"
	if [ $((failed + harness_failed)) -gt 0 ] || [ "$passed" = 0 ]; then
		exit 1
	fi
	exit 0
}
trap 'echo "interrupted"; failed=$((failed + 1)); finish 1' INT TERM

# print a file, at most $2 lines (the last ones)
show()
{
	local file=$1 max=${2:-300} n
	[ -f "$file" ] || return 0
	n=$(wc -l < "$file")
	echo "----- $file"
	if [ "$n" -gt "$max" ]; then
		echo "(last $max of $n lines)"
		tail -n "$max" "$file"
	else
		cat "$file"
	fi
	echo "-----"
}

if ! ctas_bootstrap 2>&1; then
	echo "bootstrap failed: see above"
	failed=1
	finish 1
fi

stage=$(mktemp -d /tmp/ctas_fed_test.XXXXXX) || finish 1
if ! ctas_stage "$stage"; then
	failed=1
	finish 1
fi

pgxs_dir=$(dirname "$("$CTAS_PG_CONFIG" --pgxs)")/..
pgxs_dir=$(cd "$pgxs_dir" && pwd)
pg_regress=$pgxs_dir/test/regress/pg_regress
pgxs_perl=$pgxs_dir/test/perl

# a clean environment for the servers and clients of the tests
unset PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER PGPASSWORD PGPASSFILE \
	PGSERVICE PGSERVICEFILE PGOPTIONS PGDATA PGAPPNAME PGSSLMODE top_builddir
runner_env=(
	env
	"PATH=$CTAS_PG_BINDIR:$PATH"
	"PERL5LIB=$pgxs_perl:$stage/test/lib${PERL5LIB:+:$PERL5LIB}"
	"PG_REGRESS=$pg_regress"
	"TESTDIR=$stage"
	"TMPDIR=$stage"    # socket folders of the TAP nodes: kept with the rest
	"LC_ALL=C.UTF-8"
)

# ---- pg_regress ---------------------------------------------------------
# The test list is whatever make thinks REGRESS is (continuation lines,
# +=, variables): ask make with a one-rule makefile of our own.
printf 'ctas-fed-print-regress:\n\t@echo $(REGRESS)\n' > "$stage/print-regress.mk"
regress_tests=$(make --no-print-directory -s -f Makefile -f "$stage/print-regress.mk" \
	PG_CONFIG="$CTAS_PG_CONFIG" ctas-fed-print-regress)
rm -f "$stage/print-regress.mk"

if [ "${SKIP_REGRESS:-0}" != 1 ] && [ -n "$regress_tests" ]; then
	echo "== pg_regress: $regress_tests"
	port=$(ctas_free_port)
	# shellcheck disable=SC2086
	(cd "$stage" && ctas_as_runner "${runner_env[@]}" \
		timeout -k 30 "${REGRESS_TIMEOUT:-1800}" "$pg_regress" \
		--temp-instance="$stage/regress_instance" \
		--temp-config=test/ctas_fed.conf \
		--bindir="$CTAS_PG_BINDIR" \
		--inputdir=. --outputdir="$stage" \
		--dbname=contrib_regression \
		--port="$port" \
		$regress_tests) > "$stage/pg_regress.out" 2>&1
	rc=$?
	cat "$stage/pg_regress.out"
	ok=$(grep -cE '\.\.\. +ok( |$)' "$stage/pg_regress.out")
	bad=$(grep -cE '\.\.\. +FAILED( |$)' "$stage/pg_regress.out")
	passed=$((passed + ok))
	failed=$((failed + bad))
	if [ "$rc" != 0 ] && [ "$bad" = 0 ]; then
		echo "pg_regress failed (exit $rc) without a failed test"
		show "$stage/regress_instance/log/initdb.log" 50
		show "$stage/regress_instance/log/postmaster.log" 100
		failed=$((failed + 1))
	fi
	if [ "$rc" != 0 ]; then
		show "$stage/regression.diffs" 300
	fi
elif [ -z "$regress_tests" ]; then
	echo "== pg_regress: REGRESS is empty"
fi

# ---- alerting rules -------------------------------------------------------
# monitoring/ctas_fed_alerts.yml: promtool's own unit tests, and every
# metric a rule uses must be one that src/metrics.c exports.
echo "== promtool test rules monitoring/ctas_fed_alerts_test.yml"
if ! command -v promtool > /dev/null; then
	echo "promtool is missing: install the Debian package \"prometheus\" (test/bootstrap.sh does, as root)"
	failed=$((failed + 1))
else
	rules_ok=1
	(cd monitoring && promtool test rules ctas_fed_alerts_test.yml) || rules_ok=0
	for m in $(grep -v '^ *#' monitoring/ctas_fed_alerts.yml | grep -o 'ctas_fed_[a-z_]*' | sort -u); do
		if ! grep -q "\"$m\"" src/metrics.c; then
			echo "monitoring/ctas_fed_alerts.yml uses $m, which src/metrics.c does not export"
			rules_ok=0
		fi
	done
	if [ "$rules_ok" = 1 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
fi

# ---- the shape of src/ -------------------------------------------------------
# test/layers.pl, from the sources and the object files just built: no call
# or #include up a layer (DESIGN.md section 3), no cycle between files, no
# target calling another, generic code naming no target nor a target's
# option, every file in the layer table by name, no .c file over 1,000
# lines.  Each rule is one check.  Then its --self-test: each rule fails on
# a violation planted in a copy of src/.
for mode in "" --self-test; do
	echo "== layers: perl test/layers.pl $mode"
	perl test/layers.pl $mode > "$stage/layers.out" 2>&1
	rc=$?
	cat "$stage/layers.out"
	ok=$(grep -cE '^ok [0-9]+' "$stage/layers.out")
	bad=$(grep -cE '^not ok [0-9]+' "$stage/layers.out")
	if [ "$rc" != 0 ] && [ "$bad" = 0 ]; then
		bad=1    # died
	fi
	passed=$((passed + ok))
	failed=$((failed + bad))
done

# ---- TAP ------------------------------------------------------------------
if [ -n "${TAP_TESTS:-}" ]; then
	# shellcheck disable=SC2206
	tap_tests=($TAP_TESTS)
else
	tap_tests=()
	for t in test/t/*.pl; do
		[ -f "$t" ] && tap_tests+=("$t")
	done
fi

# Tests that say so on a line of their own ("# ctas-tap: parallel": they
# assert no timing and share no server with another test) run TAP_JOBS at
# a time first (default 4: a TAP file keeps about a quarter of a core
# busy, it mostly waits on its servers; a whole run with 3 at a time used
# 35% of the 2 cores); every other test then runs alone, so that the
# deadlines some of them check ("cancel returns within 3 s") are
# measured on a machine that is not busy with another test.
tap_jobs=${TAP_JOBS:-4}
parallel_tests=()
serial_tests=()
for t in "${tap_tests[@]}"; do
	if [ "$tap_jobs" -gt 1 ] && grep -q '^# ctas-tap: parallel$' "$t"; then
		parallel_tests+=("$t")
	else
		serial_tests+=("$t")
	fi
done

# Longest first: the parallel tests start in the order of the seconds they
# took last time (test/tap_seconds, "seconds name" a line; a test not in it
# counts as $tap_default_secs), so that a long one does not start last and
# run alone at the end.  TAP_SECONDS_UPDATE=1 writes the seconds of this
# run back into test/tap_seconds (the other lines are kept).
tap_default_secs=60
declare -A tap_secs=()
if [ -f test/tap_seconds ]; then
	while read -r s n; do
		case $s in '' | '#'*) continue ;; esac
		tap_secs[$n]=$s
	done < test/tap_seconds
fi
if [ ${#parallel_tests[@]} -gt 1 ]; then
	mapfile -t parallel_tests < <(
		for t in "${parallel_tests[@]}"; do
			n=$(basename "$t" .pl)
			echo "${tap_secs[$n]:-$tap_default_secs} $t"
		done | sort -k1,1nr -k2,2 | cut -d' ' -f2-)
fi

# run one TAP test into its log; its exit status goes to $log.rc
run_tap()
{
	local t=$1 log=$2
	local t0=$SECONDS
	(cd "$stage" && ctas_as_runner "${runner_env[@]}" \
		timeout -k 30 "${TAP_TIMEOUT:-600}" prove -v "$t") > "$log" 2>&1
	echo $? > "$log.rc"
	echo $((SECONDS - t0)) > "$log.secs"
}

# count and report the result of one TAP test that has run
report_tap()
{
	local t=$1 name log rc ok bad secs
	name=$(basename "$t" .pl)
	log="$stage/tap_$name.log"
	rc=$(cat "$log.rc" 2> /dev/null || echo 1)
	secs=$(cat "$log.secs" 2> /dev/null || echo '?')
	ok=$(grep -cE '^ok [0-9]+|^not ok [0-9]+.*# TODO' "$log")
	bad=$(grep -E '^not ok [0-9]+' "$log" | grep -vc '# TODO')
	if [ "$rc" != 0 ] && [ "$bad" = 0 ]; then
		bad=$((bad + 1))    # died, bad plan or timeout
	fi
	case $name in
	00[0-9]_*)
		harness_passed=$((harness_passed + ok))
		harness_failed=$((harness_failed + bad)) ;;
	*)
		passed=$((passed + ok))
		failed=$((failed + bad)) ;;
	esac
	if [ "$rc" != 0 ]; then
		echo "   $name: $ok ok, $bad not ok, prove exit $rc (${secs} s)"
		show "$log" 150
		show "$stage/tmp_check/log/regress_log_$name" 150
	else
		echo "   $name: $ok ok (${secs} s)"
	fi
}

if [ ${#parallel_tests[@]} -gt 0 ]; then
	echo "== TAP, $tap_jobs at a time: ${parallel_tests[*]}"
	running=0
	for t in "${parallel_tests[@]}"; do
		if [ "$running" -ge "$tap_jobs" ]; then
			wait -n
			running=$((running - 1))
		fi
		run_tap "$t" "$stage/tap_$(basename "$t" .pl).log" &
		running=$((running + 1))
	done
	wait
	for t in "${parallel_tests[@]}"; do
		echo "== TAP $t"
		report_tap "$t"
	done
fi

for t in "${serial_tests[@]}"; do
	echo "== TAP $t"
	run_tap "$t" "$stage/tap_$(basename "$t" .pl).log"
	report_tap "$t"
done

if [ "${TAP_SECONDS_UPDATE:-0}" = 1 ]; then
	for t in "${tap_tests[@]}"; do
		n=$(basename "$t" .pl)
		s=$(cat "$stage/tap_$n.log.secs" 2> /dev/null) && tap_secs[$n]=$s
	done
	{
		echo "# seconds name: how long each TAP test of test/t/ took in a full run"
		echo "# (test/run.sh starts the parallel ones longest first; refresh with"
		echo "# TAP_SECONDS_UPDATE=1 bash test/run.sh)"
		for n in "${!tap_secs[@]}"; do
			[ -f "test/t/$n.pl" ] && echo "${tap_secs[$n]} $n"
		done | sort -k2,2
	} > test/tap_seconds.new && mv test/tap_seconds.new test/tap_seconds
	echo "== test/tap_seconds updated"
fi

finish 0
