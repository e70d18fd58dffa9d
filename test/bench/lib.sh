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
