# test/bench/lib.sh - helpers shared by the benchmarks (sourced)

die()
{
	echo "bench: $*" >&2
	exit 1
}

# a TCP port free on 127.0.0.1 now, not one of those already chosen
ports=()
free_port()
{
	local p
	for _ in $(seq 1 100); do
		p=$(perl -MIO::Socket::INET -e '
			my $p = 20000 + int(rand(12000));
			my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1",
				LocalPort => $p, Proto => "tcp", Listen => 1, ReuseAddr => 1)
			  or exit 1;
			print "$p\n";') || continue
		case " ${ports[*]} " in *" $p "*) continue ;; esac
		ports+=("$p")
		echo "$p"
		return 0
	done
	return 1
}

# The source table of every benchmark: 8 mixed columns
columns="id bigint, label text, amount numeric(12,2), ratio double precision,
  ts timestamp with time zone, flag boolean, arr integer[], doc jsonb"

# make_source N: SQL that creates src_N with N rows, frozen, analyzed and
# checkpointed, so that every method reads the same warm table
make_source()
{
	cat <<EOF
CREATE TABLE src_$1 ($columns);
INSERT INTO src_$1
SELECT g,
       md5(g::text) || repeat(chr(97 + g % 26), g % 24),
       ((g::int8 * 7919) % 100000000) / 100.0,
       g / 7.0::float8,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second',
       CASE WHEN g % 7 = 0 THEN NULL ELSE g % 2 = 0 END,
       ARRAY[g % 1000, g % 7, g % 13]::int4[],
       jsonb_build_object('k', g % 100, 's', 'v' || (g % 1000), 'ok', g % 3 = 0)
  FROM generate_series(1, $1) g;
VACUUM (FREEZE, ANALYZE) src_$1;
CHECKPOINT;
SELECT count(*) FROM src_$1;
EOF
}
