#!/bin/bash
# test/bench/mysql.sh - ctas_fed against what a user would write instead to
# load a PostgreSQL table into MariaDB / MySQL:
#
#   ctas_fed    CREATE TABLE shop.bench.t AS SELECT * FROM src
#               (staging table, LOAD DATA LOCAL INFILE chunks of 4 MB served
#               from memory and read as CHARACTER SET binary, one RENAME
#               TABLE at commit: one statement)
#   pipe        psql -c "COPY (SELECT ...) TO STDOUT" |
#               mariadb --local-infile=1 -e "LOAD DATA LOCAL INFILE '/dev/stdin' ..."
#               (CHARACTER SET utf8mb4, as a user would write it)
#               (the SELECT converts what LOAD DATA cannot read from
#               PostgreSQL's text: booleans to 0/1, arrays to JSON,
#               timestamptz to UTC)
#   ctas_fed_par2
#               the same WITH (parallel = 2): two LOAD DATA streams, so two
#               server threads (not in the default methods)
#   insert      multi-row INSERT statements of 1000 rows each, rendered by
#               PostgreSQL (format(... %L ...)) and piped into mariadb: what
#               DuckDB's mysql extension sends (for reference)
#
# Run by test/bench/run.sh (BENCH_TARGETS=mysql) as the OS user that runs
# the servers, or by hand:  bash test/bench/mysql.sh WORKDIR
#
# Environment: BENCH_ROWS (default "1000000"), BENCH_RUNS (default 1; the
# methods take turns, run after run), BENCH_METHODS (subset of "ctas_fed
# ctas_fed_par2 pipe insert"; default "ctas_fed pipe insert"),
# CTAS_PG_BINDIR.
#
# It starts a throwaway PostgreSQL (ctas_fed preloaded) and a throwaway
# mariadbd (its own datadir, socket and port on 127.0.0.1, as the user
# running the script) in WORKDIR and stops both, by pid, on exit.  Every
# method writes a fresh table bench.t of the same definition (the pipe's
# and the insert's are created, untimed, from the DDL EXPLAIN shows).
# mariadbd runs in a session of its own (setsid), as a service would: on a
# kernel with autogroups the sessions share the CPU as groups, and the
# server must not share its part with the clients or samplers of this
# script (that made the comparison unfair, see docs/performance.md).
#
# Timed (wall clock): ctas_fed, the statement (psql's \timing); the others,
# the whole pipeline.  CPU (user + system seconds, lib.sh's cpu_watch): the
# PostgreSQL cluster's process tree, mariadbd, and the psql and mariadb
# clients of a pipeline (/usr/bin/time each).  Memory: the peak RssAnon of
# the ctas_fed backend (sampled every 50 ms by one perl process in a
# session of its own; parallel workers are not counted).
#
# Output: one line per run (with the 1-minute load average at its end),
# then a table per size and method: the median wall time and the spread,
# the pipe's median over the method's ("vs pipe", above 1: faster than the
# pipe; goal 1.2 for ctas_fed), and the median CPU seconds per million rows
# of each process.  Exit status 0 when every run succeeded and ctas_fed's
# median was at least 1.2x the pipe's at every size, 3 when it was not, 1
# on a failure.

set -u -o pipefail

work=${1:?usage: mysql.sh WORKDIR}
mkdir -p "$work" || exit 1
work=$(cd "$work" && pwd)
testdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
conf_file=$testdir/ctas_fed.conf
. "$testdir/bench/lib.sh"

rows_list=${BENCH_ROWS:-1000000}
runs=${BENCH_RUNS:-1}
methods=${BENCH_METHODS:-ctas_fed pipe insert}

pgdir=$work/my_bench_pg
mydir=$work/my_bench_mariadb
pg_started=0
my_pid=

cleanup()
{
	trap - EXIT INT TERM HUP
	if [ "$pg_started" = 1 ] && [ -f "$pgdir/postmaster.pid" ]; then
		pg_ctl -D "$pgdir" -m fast -w -t 60 stop > /dev/null 2>&1
	fi
	if [ -n "$my_pid" ] && kill -0 "$my_pid" 2> /dev/null; then
		kill -TERM "$my_pid"
		for _ in $(seq 1 300); do
			kill -0 "$my_pid" 2> /dev/null || break
			sleep 0.2
		done
		kill -KILL "$my_pid" 2> /dev/null
	fi
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM HUP

lport=$(free_port) || die "no free port"
myport=$(free_port) || die "no free port"

# ---- MariaDB ---------------------------------------------------------------
echo "== MariaDB on 127.0.0.1:$myport"
mkdir -p "$mydir/data"
mariadb-install-db --no-defaults --datadir="$mydir/data" \
	--auth-root-authentication-method=normal --skip-test-db \
	> "$mydir/install.log" 2>&1 || { cat "$mydir/install.log"; die "mariadb-install-db"; }
# in a session of its own, as a service runs: with the scheduler's
# autogroups (sched_autogroup_enabled, on in Debian), a session shares the
# CPU with the others as one, so a server in the script's session would
# share its part with whatever else this script runs (clients, samplers)
setsid mariadbd --no-defaults --datadir="$mydir/data" --socket="$mydir/sock" \
	--port="$myport" --bind-address=127.0.0.1 --pid-file="$mydir/pid" \
	--log-error="$work/my_bench_mariadb.log" --skip-name-resolve --skip-log-bin \
	--innodb-buffer-pool-size=512M --innodb-log-file-size=512M \
	--innodb-flush-log-at-trx-commit=2 ${BENCH_MARIADB_OPTS:-} < /dev/null > /dev/null 2>&1 &
my_pid=$!
myroot() { mariadb --no-defaults --socket="$mydir/sock" -uroot -N -B "$@"; }
for _ in $(seq 1 300); do
	myroot -e 'SELECT 1' > /dev/null 2>&1 && break
	kill -0 "$my_pid" 2> /dev/null || break
	sleep 0.2
done
myroot -e "DROP USER IF EXISTS ''@'localhost';
CREATE USER loader@'%' IDENTIFIED BY 'secret'; GRANT ALL ON *.* TO loader@'%';
CREATE DATABASE bench;" || { tail -n 30 "$work/my_bench_mariadb.log"; die "MariaDB did not start"; }
echo "   version $(myroot -e 'SELECT version()')"
myc() { mariadb --no-defaults -h127.0.0.1 -P"$myport" -uloader -psecret "$@"; }

# ---- PostgreSQL ------------------------------------------------------------
echo "== local PostgreSQL on 127.0.0.1:$lport (ctas_fed preloaded)"
initdb -D "$pgdir" -A trust -E UTF8 --locale=C.UTF-8 > "$work/my_bench_pg.initdb.log" 2>&1 ||
	{ cat "$work/my_bench_pg.initdb.log"; die "initdb"; }
cat >> "$pgdir/postgresql.conf" <<EOF

# added by test/bench/mysql.sh
port = $lport
listen_addresses = '127.0.0.1'
unix_socket_directories = '$work'
shared_buffers = 256MB
max_wal_size = 8GB
autovacuum = off
$(cat "$conf_file")
EOF
pg_started=1
pg_ctl -D "$pgdir" -l "$work/my_bench_pg.log" -w -t 120 start > /dev/null ||
	{ tail -n 30 "$work/my_bench_pg.log"; die "PostgreSQL did not start"; }
lsql() { psql -X -q -h "$work" -p "$lport" -d bench -v ON_ERROR_STOP=1 "$@"; }
psql -X -q -h "$work" -p "$lport" -d postgres -c "CREATE DATABASE bench" || die "CREATE DATABASE"
lsql <<EOF || die "local set-up"
CREATE EXTENSION ctas_fed;
CREATE SERVER shop FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'mysql', host '127.0.0.1', port '$myport');
CREATE USER MAPPING FOR CURRENT_USER SERVER shop
  OPTIONS (user 'loader', password 'secret');
EOF

cols="id, label, amount, ratio, ts, flag, arr, doc"
pipe_select="id, label, amount, ratio, ts AT TIME ZONE 'UTC', flag::int, array_to_json(arr), doc"
insert_select="format('(%s,%L,%s,%s,%L,%s,%L,%L)', id, label, amount, ratio,
  ts AT TIME ZONE 'UTC', coalesce(flag::int::text, 'NULL'), array_to_json(arr), doc)"

# the peak RssAnon (kB) of a process until it exits (or its client does: a
# reused pid is not ours), into a file: one perl process in a session of
# its own that reads /proc every 50 ms.  (It was a shell loop forking awk
# and mv 40 times a second, in the script's session, which held mariadbd
# too: with autogroups it took CPU from the server during the ctas_fed
# runs only, and doubled their wall time on a loaded machine.)
sample_mem()
{
	perl -MPOSIX -MTime::HiRes=sleep -e '
		my ($pid, $out, $client) = @ARGV;
		POSIX::setsid();
		my $max = 0;
		while (-d "/proc/$pid" && kill(0, $client)) {
			if (open(my $fh, "<", "/proc/$pid/status")) {
				while (<$fh>) { $max = $1 if /^RssAnon:\s+(\d+)/ && $1 > $max }
				close $fh;
			}
			sleep 0.05;
		}
		open(my $o, ">", $out) or die "$out: $!";
		print $o "$max\n";
		close $o;' "$1" "$2" "$3" < /dev/null
}

results=$work/mysql_results.txt
: > "$results"

# run_method METHOD ROWS: one timed run; appends
# "METHOD ROWS WALL PG_CPU MY_CPU PSQL_CPU MYCLIENT_CPU PEAK_KB LOAD" to
# $results (CPU in seconds: the PostgreSQL cluster, mariadbd, the psql and
# the mariadb client of a pipeline)
run_method()
{
	local m=$1 n=$2 t0 t1 wall c1=0 c2=0 peak=0 out=$work/cpu.$m.$n cnt
	myc -e "DROP TABLE IF EXISTS bench.t" || return 1
	case $m in ctas_fed*) ;; *) myc -e "$ddl" || return 1 ;; esac
	cpu_watch_start "$out" "pg=$(head -n 1 "$pgdir/postmaster.pid")" "my=$my_pid" || return 1
	case $m in
		ctas_fed | ctas_fed_par2)
			local with=
			[ "$m" = ctas_fed_par2 ] && with="WITH (parallel = 2) "
			rm -f "$work/backend.pid" "$work/mem"
			(
				lsql -At -c "SELECT pg_backend_pid()" -c '\o /dev/null' \
					-c "SELECT pg_sleep(0.5)" -c '\o' -c '\timing on' \
					-c "CREATE TABLE shop.bench.t ${with}AS SELECT * FROM src_$n" > "$work/ctas.out" 2>&1
			) &
			local ps=$!
			for _ in $(seq 1 100); do
				[ -s "$work/ctas.out" ] && break
				sleep 0.02
			done
			sample_mem "$(head -n 1 "$work/ctas.out")" "$work/mem" "$ps" &
			local sampler=$!
			wait "$ps" || { cat "$work/ctas.out" >&2; return 1; }
			wall=$(awk '/^Time:/ { t = $2 } END { printf "%.3f", t / 1000 }' "$work/ctas.out")
			wait "$sampler"
			peak=$(cat "$work/mem" 2> /dev/null || echo 0)
			;;
		pipe | insert)
			local left right
			if [ "$m" = pipe ]; then
				left="psql -X -q -h '$work' -p $lport -d bench -c \"COPY (SELECT $pipe_select FROM src_$n) TO STDOUT\""
				right="mariadb --no-defaults -h127.0.0.1 -P$myport -uloader -psecret --local-infile=1 -e \"LOAD DATA LOCAL INFILE '/dev/stdin' INTO TABLE bench.t CHARACTER SET utf8mb4 ($cols)\""
			else
				left="psql -X -q -At -h '$work' -p $lport -d bench -c \"SELECT 'INSERT INTO bench.t ($cols) VALUES ' || string_agg($insert_select, ',') || ';' FROM src_$n GROUP BY (id - 1) / 1000\""
				right="mariadb --no-defaults -h127.0.0.1 -P$myport -uloader -psecret bench"
			fi
			t0=$(date +%s.%N)
			bash -o pipefail -c "/usr/bin/time -f '%U %S' -o '$work/time.psql' $left |
  /usr/bin/time -f '%U %S' -o '$work/time.mariadb' $right" || return 1
			t1=$(date +%s.%N)
			wall=$(echo "$t1 - $t0" | bc)
			c1=$(awk '{ printf "%.2f", $1 + $2 }' "$work/time.psql")
			c2=$(awk '{ printf "%.2f", $1 + $2 }' "$work/time.mariadb")
			;;
	esac
	cpu_watch_stop "$out" || return 1
	cnt=$(myc -N -B -e "SELECT count(*) FROM bench.t") || return 1
	[ "$cnt" = "$n" ] || { echo "$m: $cnt rows instead of $n" >&2; return 1; }
	echo "$m $n $wall $(cpu_field "$out" total:pg) $(cpu_field "$out" total:my) $c1 $c2 $peak $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$results"
}

# summary RESULTS: per rows and method, over its runs: the median wall time
# with the spread (min-max), the ratio of the pipe's median to the method's
# (above 1: faster than the pipe; the goal for ctas_fed is 1.2), and the
# median CPU seconds per million rows of each process: the PostgreSQL
# cluster (the ctas_fed backend and its workers, or the pipe's COPY
# backend), mariadbd, psql and the mariadb client of a pipeline
summary()
{
	echo "| rows | method | runs | wall s median (min-max) | vs pipe (medians) | goal 1.2x | CPU s / 1M rows: PostgreSQL + mariadbd + psql + mariadb = total | peak RssAnon | load (1 min) |"
	echo "|---:|---|---:|---|---:|---|---|---:|---|"
	awk '
		function median(k, f,    i, j, t, m, a) {
			m = n[k]
			for (i = 1; i <= m; i++) a[i] = v[k, i, f]
			for (i = 2; i <= m; i++)
				for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
			return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
		}
		{
			k = $2 " " $1; i = ++n[k]
			for (f = 3; f <= 9; f++) v[k, i, f] = $f
			if (i == 1 || $3 < lo[k]) lo[k] = $3
			if (i == 1 || $3 > hi[k]) hi[k] = $3
			if (i == 1 || $9 < llo[k]) llo[k] = $9
			if (i == 1 || $9 > lhi[k]) lhi[k] = $9
		}
		END {
			for (k in n) {
				split(k, r, " ")
				w = median(k, 3)
				p = (r[1] " pipe") in n ? median(r[1] " pipe", 3) : 0
				ratio = (p > 0 && w > 0) ? sprintf("%.2fx", p / w) : "-"
				goal = "-"
				if (r[2] ~ /^ctas_fed/ && p > 0)
					goal = (p / w >= 1.2) ? "met" : "NOT met"
				m = r[1] / 1000000
				pg = median(k, 4) / m; my = median(k, 5) / m
				c1 = median(k, 6) / m; c2 = median(k, 7) / m
				printf "| %s | %s | %d | %.2f (%.2f-%.2f) | %s | %s | %.2f + %.2f + %.2f + %.2f = %.2f | %s | %.1f-%.1f |\n",
					r[1], r[2], n[k], w, lo[k], hi[k], ratio, goal, pg, my, c1, c2,
					pg + my + c1 + c2, r[2] ~ /^ctas_fed/ ? int(median(k, 8) / 1024) " MB" : "-",
					llo[k], lhi[k]
			}
		}' "$1" | sort -t'|' -k2,2n -k3,3
}
status=0
for n in $rows_list; do
	echo "== $n rows"
	make_source "$n" | lsql > /dev/null || die "source table"
	ddl=$(lsql -At -c "EXPLAIN (COSTS OFF) CREATE TABLE shop.bench.t AS SELECT * FROM src_$n" |
		sed -n 's/^Remote DDL: //p')
	[ -n "$ddl" ] || die "no DDL from EXPLAIN"
	echo "   method rows wall_s pg_cpu_s mariadbd_cpu_s psql_cpu_s mariadb_cpu_s peak_rss_kb load_1min"
	for r in $(seq 1 "$runs"); do
		for m in $methods; do
			run_method "$m" "$n" || { echo "$m failed" >&2; status=1; }
		done
	done
done

# ---- summary -----------------------------------------------------------------
echo
summary "$results" | tee "$work/summary.txt"
# the goal: ctas_fed's median at least 1.2x the pipe's, at every size
if [ "$status" = 0 ] && ! grep -q '| ctas_fed | .*| NOT met |' "$work/summary.txt"; then
	exit 0
fi
[ "$status" = 0 ] && exit 3
exit 1
