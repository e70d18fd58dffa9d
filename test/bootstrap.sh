# test/bootstrap.sh - the packages of "make deps", and the set-up shared by
# test/run.sh and test/demo.sh
#
#   bash test/bootstrap.sh    ("make deps") as root: apt-get install the
#                             Debian packages that are missing, then fetch
#                             the remote PostgreSQL versions (pgversions.sh)
#
# Sourced (bash) from the repository root:
#
#   . test/bootstrap.sh
#   ctas_bootstrap            # packages there?, make, make install (root)
#   ctas_stage stage_dir      # a copy the runner user can read
#   ctas_as_runner cmd ...    # run as postgres when we are root
#
# Only "make deps" installs packages (and only then touches the network,
# and only for what is missing); ctas_bootstrap checks that they are there
# and says what to do when not.  As root, ctas_bootstrap builds and
# installs the extension, and every server runs as the unprivileged OS user
# "postgres" (PostgreSQL refuses to run as root).  As another user it
# checks that the installed extension is the one just built.  The build
# passes CTAS_WERROR from the environment (test/run.sh sets it to 1).
#
# Nothing here starts a server.  Package installation is done with a
# policy-rc.d that forbids starting services, so that no system PostgreSQL,
# ClickHouse or Prometheus is left listening on its default port.

CTAS_PG_BINDIR=${CTAS_PG_BINDIR:-/usr/lib/postgresql/15/bin}
CTAS_PG_CONFIG=${CTAS_PG_CONFIG:-$CTAS_PG_BINDIR/pg_config}
CTAS_RUNNER=postgres
CTAS_PACKAGES=(build-essential postgresql-15 postgresql-server-dev-15 libpq-dev
	libcurl4-openssl-dev clickhouse-server clickhouse-client libipc-run-perl
	prometheus-pushgateway prometheus curl
	mariadb-server mariadb-client libmariadb-dev)

ctas_is_root()
{
	[ "$(id -u)" -eq 0 ]
}

# print the packages of CTAS_PACKAGES that are not installed
ctas_missing_packages()
{
	local p
	for p in "${CTAS_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
			grep -q '^install ok installed$' || echo "$p"
	done
}

# install what is missing (root only); no network when nothing is missing
ctas_install_packages()
{
	local missing created_policy=0 rc=0 svc
	missing=$(ctas_missing_packages | tr '\n' ' ')
	missing=${missing% }
	[ -n "$missing" ] || return 0

	if ! ctas_is_root; then
		echo "missing packages: $missing" >&2
		echo "install them as root:  apt-get install -y $missing" >&2
		return 1
	fi

	echo "== installing: $missing"
	# services running before we install anything are not ours
	local services="postgresql clickhouse-server prometheus prometheus-pushgateway prometheus-node-exporter"
	local active_before=""
	if [ -d /run/systemd/system ]; then
		for svc in $services; do
			systemctl is-active --quiet "$svc" 2>/dev/null && active_before+=" $svc"
		done
	fi
	# Forbid service starts during installation (invoke-rc.d and
	# deb-systemd-invoke both obey policy-rc.d).  An existing policy is
	# someone else's: leave it alone.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\n# written by ctas_fed test/bootstrap.sh\nexit 101\n' \
			> /usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		created_policy=1
	fi
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive apt-get update -q &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends $missing || rc=$?
	[ "$created_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d

	# Belt and braces with systemd: a service that runs now and did not
	# before was started by this installation.
	if [ -d /run/systemd/system ]; then
		for svc in $services; do
			case " $active_before " in *" $svc "*) continue ;; esac
			if systemctl is-active --quiet "$svc" 2>/dev/null; then
				echo "== stopping $svc, started by the installation"
				systemctl stop "$svc" || true
			fi
		done
	fi
	if [ "$rc" != 0 ]; then
		echo "apt-get failed (exit $rc)" >&2
		return "$rc"
	fi
	missing=$(ctas_missing_packages | tr '\n' ' ')
	if [ -n "$missing" ]; then
		echo "still missing after apt-get: $missing" >&2
		return 1
	fi
}

# are the packages there?  Says what to do when not.
ctas_check_packages()
{
	local missing
	missing=$(ctas_missing_packages | tr '\n' ' ')
	missing=${missing% }
	[ -n "$missing" ] || return 0
	echo "missing packages: $missing" >&2
	echo "install them as root:  make deps   (or: apt-get install -y $missing)" >&2
	return 1
}

# make; make install (root) or check that the installed build is this one
ctas_build_install()
{
	local pkglibdir sharedir f
	echo "== make${CTAS_WERROR:+ CTAS_WERROR=$CTAS_WERROR}"
	make --no-print-directory -j"$(nproc)" PG_CONFIG="$CTAS_PG_CONFIG" \
		CTAS_WERROR="${CTAS_WERROR:-}" || return 1
	if ctas_is_root; then
		echo "== make install"
		make --no-print-directory PG_CONFIG="$CTAS_PG_CONFIG" \
			CTAS_WERROR="${CTAS_WERROR:-}" install || return 1
		return 0
	fi
	pkglibdir=$("$CTAS_PG_CONFIG" --pkglibdir)
	sharedir=$("$CTAS_PG_CONFIG" --sharedir)
	for f in ctas_fed.so:"$pkglibdir" ctas_fed.control:"$sharedir/extension" \
		ctas_fed--0.1.sql:"$sharedir/extension" \
		ctas_fed--0.1--0.2.sql:"$sharedir/extension" \
		ctas_fed--0.2--0.3.sql:"$sharedir/extension"; do
		if ! cmp -s "${f%%:*}" "${f#*:}/${f%%:*}"; then
			echo "the installed ${f%%:*} in ${f#*:} is missing or not this build" >&2
			echo "install it as root:  make install PG_CONFIG=$CTAS_PG_CONFIG" >&2
			echo "(or run 'make test' as root: it installs, then runs the servers as $CTAS_RUNNER)" >&2
			return 1
		fi
	done
}

# Is user "postgres" there when we need it (root)?
ctas_check_runner()
{
	if ctas_is_root && ! id "$CTAS_RUNNER" > /dev/null 2>&1; then
		echo "OS user $CTAS_RUNNER does not exist (it comes with postgresql-15)" >&2
		return 1
	fi
}

ctas_bootstrap()
{
	ctas_check_packages && ctas_check_runner && ctas_build_install
}

# ctas_stage DIR: copy what the tests read (sql/, expected/, test/, and
# README.md and docs/ for test/t/900_docs_examples.pl) into
# DIR and hand it to the runner user.  The repository itself may live where
# that user cannot read (/root/...).
ctas_stage()
{
	local dir=$1 d
	for d in sql expected test; do
		if [ -d "$d" ]; then
			cp -R "$d" "$dir/" || return 1
		else
			mkdir -p "$dir/$d"
		fi
	done
	cp README.md "$dir/" || return 1
	[ ! -d docs ] || cp -R docs "$dir/" || return 1
	if ctas_is_root; then
		chown -R "$CTAS_RUNNER:" "$dir" || return 1
	fi
}

# ctas_as_runner CMD ...: run CMD as postgres (root) or as ourselves
ctas_as_runner()
{
	if ctas_is_root; then
		runuser -u "$CTAS_RUNNER" -- "$@"
	else
		"$@"
	fi
}

# a TCP port that is free on 127.0.0.1 now, outside the ephemeral range
ctas_free_port()
{
	perl -MIO::Socket::INET -e '
		for (1 .. 500) {
			my $p = 20000 + int(rand(12000));
			my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1",
				LocalPort => $p, Proto => "tcp", Listen => 1, ReuseAddr => 1)
			  or next;
			close $s;
			print "$p\n";
			exit 0;
		}
		exit 1;'
}

# ctas_stop_leftovers DIR: stop, by pid, any server whose pid file is still
# under DIR (a test or demo killed before it could stop them).  Prints what
# it stopped; returns 1 if it stopped anything.
ctas_stop_leftovers()
{
	local dir=$1 pidfile pid data found=0
	[ -d "$dir" ] || return 0
	while IFS= read -r pidfile; do
		data=$(dirname "$pidfile")
		pid=$(head -n 1 "$pidfile" 2>/dev/null)
		[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || continue
		echo "== leftover PostgreSQL in $data (pid $pid): stopping it"
		ctas_as_runner "$CTAS_PG_BINDIR/pg_ctl" -D "$data" -m immediate -w stop \
			> /dev/null 2>&1 || kill -KILL "$pid" 2>/dev/null
		found=1
	done < <(find "$dir" -name postmaster.pid 2>/dev/null)
	while IFS= read -r pidfile; do
		pid=$(tr -dc '0-9' < "$pidfile" 2>/dev/null)
		[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || continue
		# only our own servers: ClickHouse names its pid file on its command
		# line; the Pushgateway's pid file is written by CtasFed::Test
		case "$pidfile:$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)" in
			*/clickhouse.pid:*clickhouse*"--pid-file=$pidfile"*) ;;
			*/pushgateway.pid:*pushgateway*) ;;
			*) continue ;;
		esac
		echo "== leftover $(basename "$pidfile" .pid) (pid $pid): stopping it"
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 1 150); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL "$pid" 2>/dev/null
		found=1
	done < <(find "$dir" \( -name clickhouse.pid -o -name pushgateway.pid \) 2>/dev/null)
	[ "$found" = 0 ]
}

# "make deps": run, not sourced
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	ctas_install_packages && ctas_check_runner &&
		bash "$(dirname "${BASH_SOURCE[0]}")/pgversions.sh"
fi
