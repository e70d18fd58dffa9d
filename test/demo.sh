#!/bin/bash
# test/demo.sh - "make demo": the bootstrap of test/run.sh, then throwaway
# servers and test/demo.sql run in the local one, statements echoed.
#
# Servers, all on 127.0.0.1, on free ports, run as "postgres" when we are
# root, in a fresh folder under /tmp:
#   local    PostgreSQL with test/ctas_fed.conf (shared_preload_libraries)
#   remote   PostgreSQL, max_prepared_transactions = 10, database dw owned by
#            role loader (password secret), password auth over TCP
#   ClickHouse, user default with a generated password
#   MariaDB, database shop, user loader (password secret)
# Everything started here is stopped on exit, failure and Ctrl-C included;
# the folder is removed on success and kept (path printed) on failure.
#
# KEEP_RUNNING=1 bash test/demo.sh   waits for Enter before stopping, and
#                                    prints how to connect meanwhile.

set -u

cd "$(dirname "$0")/.." || exit 2
. test/bootstrap.sh

work=
ch_pid=
my_pid=
status=1
started_pg=()

cleanup()
{
	local d
	trap - EXIT INT TERM
	[ -n "$work" ] || exit "$status"
	for d in "${started_pg[@]}"; do
		[ -f "$d/postmaster.pid" ] &&
			ctas_as_runner "$CTAS_PG_BINDIR/pg_ctl" -D "$d" -m fast -w stop > /dev/null
	done
	if [ -n "$ch_pid" ] && kill -0 "$ch_pid" 2>/dev/null; then
		kill -TERM "$ch_pid"
		for _ in $(seq 1 300); do
			kill -0 "$ch_pid" 2>/dev/null || break
			sleep 0.2
		done
	fi
	if [ -n "$my_pid" ] && kill -0 "$my_pid" 2>/dev/null; then
		kill -TERM "$my_pid"
		for _ in $(seq 1 300); do
			kill -0 "$my_pid" 2>/dev/null || break
			sleep 0.2
		done
	fi
	ctas_stop_leftovers "$work" || status=1
	if [ "$status" = 0 ]; then
		rm -rf "$work"
	else
		echo "demo failed; files (logs included) kept in $work"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'echo interrupted; status=1; cleanup' INT TERM

ctas_bootstrap 2>&1 || { echo "bootstrap failed: see above"; exit 1; }

work=$(mktemp -d /tmp/ctas_fed_demo.XXXXXX) || exit 1
ctas_stage "$work" || exit 1
cd "$work" || exit 1

# ports: five different free ones
ports=()
while [ "${#ports[@]}" -lt 5 ]; do
	p=$(ctas_free_port) || { echo "no free port found"; exit 1; }
	case " ${ports[*]} " in *" $p "*) continue ;; esac
	ports+=("$p")
done
local_port=${ports[0]} remote_port=${ports[1]} ch_http=${ports[2]} ch_tcp=${ports[3]}
my_port=${ports[4]}
ch_password=chpw$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')

# pg_init NAME PORT EXTRA_CONF HOST_AUTH: initdb and configure $work/NAME
pg_init()
{
	local dir=$work/$1
	ctas_as_runner "$CTAS_PG_BINDIR/initdb" -D "$dir" -A trust -N > "$work/$1.initdb.log" 2>&1 || {
		cat "$work/$1.initdb.log"; return 1; }
	ctas_as_runner bash -c 'cat >> "$1/postgresql.conf"' _ "$dir" <<EOF || return 1

# added by test/demo.sh
$3
port = $2
listen_addresses = '127.0.0.1'
unix_socket_directories = '$work'
password_encryption = 'scram-sha-256'
fsync = off
EOF
	ctas_as_runner bash -c 'cat > "$1/pg_hba.conf"' _ "$dir" <<EOF || return 1
# written by test/demo.sh
local all all                trust
host  all all 127.0.0.1/32   $4
EOF
}

# pg_start NAME
pg_start()
{
	started_pg+=("$work/$1")
	ctas_as_runner "$CTAS_PG_BINDIR/pg_ctl" -D "$work/$1" -l "$work/$1.log" -w start > /dev/null || {
		tail -n 30 "$work/$1.log"; return 1; }
}

# psql_as_runner PORT ARGS...
psql_at()
{
	local port=$1
	shift
	ctas_as_runner "$CTAS_PG_BINDIR/psql" -X -h "$work" -p "$port" "$@"
}

echo "== local PostgreSQL on 127.0.0.1:$local_port"
pg_init local "$local_port" "$(cat test/ctas_fed.conf)
wal_level = logical" trust || exit 1
pg_start local || exit 1

echo "== remote PostgreSQL on 127.0.0.1:$remote_port (database dw, role loader)"
pg_init remote "$remote_port" "max_prepared_transactions = 10" scram-sha-256 || exit 1
pg_start remote || exit 1
psql_at "$remote_port" -d postgres -q -v ON_ERROR_STOP=1 \
	-c "CREATE ROLE loader LOGIN PASSWORD 'secret'" \
	-c "CREATE DATABASE dw OWNER loader" || exit 1

echo "== ClickHouse on 127.0.0.1:$ch_http"
ch_server=$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)
ctas_as_runner bash test/lib/clickhouse-config.sh "$work/clickhouse" "$ch_http" "$ch_tcp" \
	"$ch_password" || exit 1
ctas_as_runner "$ch_server" --config-file="$work/clickhouse/config.xml" \
	--pid-file="$work/clickhouse/clickhouse.pid" --daemon || exit 1
ch_url=http://127.0.0.1:$ch_http
for _ in $(seq 1 150); do
	[ -z "$ch_pid" ] && [ -f "$work/clickhouse/clickhouse.pid" ] &&
		ch_pid=$(tr -dc '0-9' < "$work/clickhouse/clickhouse.pid")
	[ "$(curl -s --max-time 2 "$ch_url/ping")" = "Ok." ] && break
	sleep 0.2
done
if [ "$(curl -s --max-time 2 "$ch_url/ping")" != "Ok." ]; then
	echo "ClickHouse did not answer GET /ping within 30 s"
	tail -n 30 "$work/clickhouse/log/clickhouse-server.err.log" "$work/clickhouse/log/stderr.log"
	exit 1
fi

echo "== MariaDB on 127.0.0.1:$my_port (database shop, user loader)"
ctas_as_runner mkdir -p "$work/mariadb/data" || exit 1
ctas_as_runner mariadb-install-db --no-defaults --datadir="$work/mariadb/data" \
	--auth-root-authentication-method=normal --skip-test-db > "$work/mariadb.install.log" 2>&1 || {
	cat "$work/mariadb.install.log"; exit 1; }
ctas_as_runner mariadbd --no-defaults --datadir="$work/mariadb/data" \
	--socket="$work/mariadb/data/sock" --port="$my_port" --bind-address=127.0.0.1 \
	--pid-file="$work/mariadb/data/pid" --log-error="$work/mariadb/data/error.log" \
	--skip-name-resolve --skip-log-bin < /dev/null > /dev/null 2>&1 &
my_pid=$!
my_root() { mariadb --no-defaults --socket="$work/mariadb/data/sock" -uroot "$@"; }
for _ in $(seq 1 300); do
	my_root -e 'SELECT 1' > /dev/null 2>&1 && break
	sleep 0.2
done
my_root -e "DROP USER IF EXISTS ''@'localhost'; CREATE USER loader@'%' IDENTIFIED BY 'secret';
GRANT ALL ON *.* TO loader@'%'; CREATE DATABASE shop;" || {
	tail -n 30 "$work/mariadb/data/error.log"; exit 1; }

echo "== test/demo.sql"
psql_at "$local_port" -d postgres --echo-all -v ON_ERROR_STOP=1 \
	-v remote_port="$remote_port" -v ch_url="$ch_url" -v ch_password="$ch_password" \
	-v my_port="$my_port" -f test/demo.sql || exit 1

echo "== the rows, read on the remote PostgreSQL itself (as loader)"
psql_at "$remote_port" -d dw -U loader -c "SELECT * FROM public.daily_sales ORDER BY day" || exit 1
psql_at "$remote_port" -d postgres -c "SELECT count(*) AS prepared_transactions_left FROM pg_prepared_xacts" || exit 1
psql_at "$remote_port" -d dw -U loader -c "SELECT * FROM public.eu_orders ORDER BY id" || exit 1

echo "== the rows, read on ClickHouse itself"
curl -sS --fail -H 'X-ClickHouse-User: default' -H "X-ClickHouse-Key: $ch_password" \
	"$ch_url/" --data-binary 'SELECT * FROM default.daily_sales ORDER BY day FORMAT PrettyCompactNoEscapes' || exit 1
curl -sS --fail -H 'X-ClickHouse-User: default' -H "X-ClickHouse-Key: $ch_password" \
	"$ch_url/" --data-binary "SELECT count() AS staging_tables_left FROM system.tables WHERE startsWith(name, '_ctas_fed_') FORMAT PrettyCompactNoEscapes" || exit 1

echo "== the rows, read on MariaDB itself"
my_root -t -e "SELECT * FROM shop.daily_sales ORDER BY day;
SELECT count(*) AS staging_tables_left FROM information_schema.tables WHERE table_name LIKE '\\_ctas\\_fed\\_%';
XA RECOVER;" || exit 1

if [ "${KEEP_RUNNING:-0}" = 1 ]; then
	cat <<EOF
== servers are running:
   local:      psql -h $work -p $local_port -d postgres   (as $(ctas_is_root && echo "$CTAS_RUNNER" || id -un))
   remote:     psql "host=127.0.0.1 port=$remote_port dbname=dw user=loader password=secret"
   ClickHouse: curl -H 'X-ClickHouse-User: default' -H 'X-ClickHouse-Key: $ch_password' $ch_url --data-binary 'SELECT 1'
Press Enter to stop them.
EOF
	read -r _
fi
status=0
