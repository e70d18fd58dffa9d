#!/usr/bin/perl

# Copyright (c) 2026, ctas_fed developers

#
# faultproxy.pl - a TCP proxy that injects faults, for the ctas_fed TAP tests
#
# Usage:
#   perl faultproxy.pl --listen PORT --target PORT --dir DIR
#
# Listens on 127.0.0.1:PORT and forwards every connection to
# 127.0.0.1:TARGET, byte for byte, until a rule says otherwise.  One process
# serves every connection (select loop, non-blocking sockets).  Tests do not
# run this script by hand: CtasFed::Test::start_fault_proxy() starts it and
# its handle (CtasFed::Test::FaultProxy) writes the rules; see the POD in
# test/lib/CtasFed/Test.pm.
#
# Control files, in DIR:
#
#   DIR/rules   written by the test (atomically: write DIR/rules.tmp, then
#               rename), re-read by the proxy every 20 ms:
#                   gen G
#                   rule ID key=value key=value ...
#               G is a number the test increments at each change; values are
#               percent-encoded (%XX for any byte outside [A-Za-z0-9_.-]).
#
#   DIR/status  written by the proxy (atomically) after it loaded a new
#               generation of rules and after every hit:
#                   gen G          (last generation loaded)
#                   conns N        (connections accepted so far)
#                   hit ID N       (times rule ID fired; one line per rule
#                                   ever loaded; counters survive reloads)
#
# Rule keys:
#
#   match=STR   the rule fires on a connection when STR appears in the bytes
#               the client sent (client -> server only).  The bytes are
#               scanned both raw and URL-decoded (%XX and '+'), so
#               "RENAME TABLE" matches a ClickHouse query in a URL query
#               string as well as in a request body, and "COMMIT PREPARED"
#               matches a PostgreSQL Query or Parse message.  Matching is
#               case-sensitive.  An empty or absent match fires on the first
#               bytes of any connection (for PostgreSQL: its startup packet).
#               The scan covers the data not yet scanned plus the last 8 kB
#               before it (so that a match may straddle two reads), but
#               never data read before the current rules were loaded;
#               bytes up to the end of a match are not scanned again, so
#               one statement fires a rule once.
#   action=A    what happens when the rule fires:
#       refuse        (no match needed) close every new connection at once,
#                     before reading anything: a failing connect.
#       drop_request  close both sides without forwarding the data read in
#                     which the match was found (earlier data of the same
#                     connection was already forwarded): the server never
#                     sees the statement.
#       lose_reply    forward the request, let the server run it; discard
#                     what the server sends back; once the server sent
#                     something and was then quiet for 200 ms, or closed,
#                     or wait_ms (default 5000) passed, reset the client
#                     connection (RST) and close the server side.
#       stall         stop forwarding in direction dir=up (client -> server:
#                     the matching data is held), dir=down (server ->
#                     client: the request is forwarded, the reply held) or
#                     dir=both (default), until the rule is removed (clear):
#                     then the held data flows again.  A stalled direction
#                     is not read from, so TCP flow control pushes back.
#       reset         forward reset_after=N more client bytes, counted from
#                     the first byte of the match (raw, also for a match
#                     found in the URL-decoded bytes; default 0), then
#                     reset both connections (RST).
#                     reset_after=N alone implies action=reset.
#   times=N     the rule fires N times (default 1), then is inert; times=0:
#               no limit.  once=1 is times=1.
#   skip=N      the first N matches are let through (not counted as hits):
#               the rule fires on the (N+1)th statement that matches.
#
# Each firing counts one hit, also for a refused connection.  A connection
# on which a fault fired is not matched again (except after a stall ended).
#
# The proxy exits when its parent process is gone, on SIGTERM, or when DIR
# disappears.
#

use strict;
use warnings;

use Errno qw(EAGAIN EWOULDBLOCK EINTR EINPROGRESS);
use Getopt::Long;
use IO::Select;
use IO::Socket::INET;
use Socket qw(SOL_SOCKET SO_LINGER SHUT_WR IPPROTO_TCP TCP_NODELAY);
use Time::HiRes qw(time);

my ($listen_port, $target_port, $dir);
GetOptions(
	'listen=i' => \$listen_port,
	'target=i' => \$target_port,
	'dir=s'    => \$dir)
  or die "usage: $0 --listen PORT --target PORT --dir DIR\n";
die "usage: $0 --listen PORT --target PORT --dir DIR\n"
  unless $listen_port && $target_port && defined $dir && -d $dir;

$SIG{PIPE} = 'IGNORE';
my $parent = getppid();

my $listener = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1',
	LocalPort => $listen_port,
	Proto     => 'tcp',
	Listen    => 64,
	ReuseAddr => 1)
  or die "faultproxy: cannot listen on 127.0.0.1:$listen_port: $@\n";
$listener->blocking(0);

my $WINDOW   = 8192;       # bytes kept from scanned data
my $MAXBUF   = 1 << 20;    # stop reading a side with this much pending
my $QUIET    = 0.2;        # lose_reply: quiet time after the reply

my $gen   = -1;            # generation of the rules loaded
my @rules;                 # loaded rules, in id order
my %hits;                  # rule id => count (kept across reloads)
my %used;                  # rule id => times fired in this rule's life
my %skipped;               # rule id => matches let through (skip=N)
my %ruleby;                # rule id => rule
my $conns = 0;
my $last_rules_text = '';
my $next_reload = 0;

# every connection: a hash, see accept_one()
my @conns;

sub unesc
{
	my ($s) = @_;
	$s =~ s/%([0-9A-Fa-f]{2})/chr(hex($1))/ge;
	return $s;
}

sub url_decode
{
	my ($s) = @_;
	$s =~ tr/+/ /;
	$s =~ s/%([0-9A-Fa-f]{2})/chr(hex($1))/ge;
	return $s;
}

# (start, end) in the raw bytes $raw of the first URL-decoded match of $m
sub decoded_match
{
	my ($raw, $m) = @_;
	my ($dec, @at) = ('');
	my $i = 0;
	while ($i < length $raw)
	{
		push @at, $i;
		my $ch = substr($raw, $i, 1);
		if ($ch eq '%' && substr($raw, $i + 1, 2) =~ /^[0-9A-Fa-f]{2}$/)
		{
			$dec .= chr(hex(substr($raw, $i + 1, 2)));
			$i += 3;
		}
		else
		{
			$dec .= $ch eq '+' ? ' ' : $ch;
			$i++;
		}
	}
	push @at, $i;
	my $pos = index($dec, $m);
	return (length $raw, length $raw) if $pos < 0;
	return ($at[$pos], $at[ $pos + length $m ]);
}

sub write_status
{
	my $text = "gen $gen\nconns $conns\n";
	$text .= "hit $_ $hits{$_}\n" foreach sort { $a <=> $b } keys %hits;
	my $tmp = "$dir/status.tmp";
	open my $fh, '>', $tmp or return;
	print $fh $text;
	close $fh;
	rename $tmp, "$dir/status";
	return;
}

sub load_rules
{
	my $text;
	if (open my $fh, '<', "$dir/rules")
	{
		local $/;
		$text = <$fh>;
		close $fh;
	}
	else
	{
		exit 0 unless -d $dir;
		return;
	}
	return if $text eq $last_rules_text;
	$last_rules_text = $text;

	my $newgen = $gen;
	my @new;
	foreach my $line (split /\n/, $text)
	{
		if ($line =~ /^gen (\d+)$/)
		{
			$newgen = $1;
		}
		elsif ($line =~ /^rule (\d+)((?: \S+=\S*)*)\s*$/)
		{
			my %r = (id => $1);
			foreach my $kv (split ' ', $2)
			{
				my ($k, $v) = split /=/, $kv, 2;
				$r{$k} = unesc($v);
			}
			$r{action} //= defined $r{reset_after} ? 'reset' : 'drop_request';
			$r{match}  //= '';
			$r{times} = 1 if $r{once};
			$r{times} //= 1;
			$r{dir}   //= 'both';
			push @new, \%r;
		}
	}
	@rules  = sort { $a->{id} <=> $b->{id} } @new;
	%ruleby = map { ($_->{id} => $_) } @rules;
	foreach my $r (@rules)
	{
		$hits{ $r->{id} } //= 0;
		$used{ $r->{id} } //= 0;
	}
	# data read before these rules existed never fires them
	$_->{win} = '' foreach @conns;
	$gen = $newgen;
	write_status();
	return;
}

# can rule $r fire once more?
sub live
{
	my ($r) = @_;
	return $r->{times} == 0 || $used{ $r->{id} } < $r->{times};
}

sub fire
{
	my ($r) = @_;
	$used{ $r->{id} }++;
	$hits{ $r->{id} }++;
	write_status();
	return;
}

sub rst_close
{
	my ($sock) = @_;
	return unless $sock;
	setsockopt($sock, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0));
	close $sock;
	return;
}

# end a connection: RST on both sides when $reset, else a plain close
sub kill_conn
{
	my ($c, $reset) = @_;
	return if $c->{dead};
	if ($reset)
	{
		rst_close($c->{c});
		rst_close($c->{s});
	}
	else
	{
		close $c->{c} if $c->{c};
		close $c->{s} if $c->{s};
	}
	$c->{dead} = 1;
	return;
}

sub accept_one
{
	my $client = $listener->accept or return;
	$conns++;
	foreach my $r (@rules)
	{
		next unless $r->{action} eq 'refuse' && live($r);
		fire($r);
		rst_close($client);
		return;
	}
	my $server = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $target_port,
		Proto    => 'tcp');
	if (!$server)
	{
		rst_close($client);
		write_status();
		return;
	}
	$client->blocking(0);
	$server->blocking(0);
	setsockopt($client, IPPROTO_TCP, TCP_NODELAY, 1);
	setsockopt($server, IPPROTO_TCP, TCP_NODELAY, 1);
	push @conns, {
		c        => $client,
		s        => $server,
		up       => '',       # pending client -> server
		down     => '',       # pending server -> client
		held_up  => '',       # held by a stall
		held_down => '',
		win      => '',       # client bytes kept for matching
		c_eof    => 0,
		s_eof    => 0,
		faulted  => 0,        # a fault fired: no more matching
		stall_up => undef,    # rule id stalling client -> server
		stall_down => undef,
		lose     => undef,    # lose_reply: { deadline, quiet_at }
		reset_left => undef,  # reset: client bytes still to forward
	};
	write_status();
	return;
}

# find the first live rule matching the client data $data just read on $c;
# returns (rule, offset of the match start in $data or undef)
sub find_match
{
	my ($c, $data) = @_;
	my $prev = length $c->{win};
	$c->{win} .= $data;
	foreach my $r (@rules)
	{
		next if $r->{action} eq 'refuse' || !live($r);
		my $m = $r->{match};
		if ($m eq '')
		{
			# first bytes of the connection
			next unless $prev == 0 && !$c->{seen};
			$c->{seen} = 1;
			return ($r, 0);
		}
		my $pos = index($c->{win}, $m);
		my $off;
		if ($pos >= 0)
		{
			$off = $pos - $prev;
			$off = 0 if $off < 0;
			$c->{win} = substr($c->{win}, $pos + length $m);
		}
		elsif (index(url_decode($c->{win}), $m) >= 0)
		{
			my $end;
			($pos, $end) = decoded_match($c->{win}, $m);
			$c->{win} = substr($c->{win}, $end);
			$off = $pos - $prev;
			$off = 0 if $off < 0;
		}
		next unless defined $off;
		# skip=N: let the first N matches through
		if (($skipped{ $r->{id} } // 0) < ($r->{skip} // 0))
		{
			$skipped{ $r->{id} }++;
			return;
		}
		return ($r, $off);
	}
	$c->{seen} = 1;
	$c->{win} = substr($c->{win}, -$WINDOW) if length $c->{win} > $WINDOW;
	return;
}

sub client_data
{
	my ($c, $data) = @_;

	if (defined $c->{reset_left})
	{
		my $n = $c->{reset_left} < length $data ? $c->{reset_left} : length $data;
		$c->{up} .= substr($data, 0, $n);
		$c->{reset_left} -= $n;
		return;
	}
	if ($c->{faulted} || $c->{lose})
	{
		$c->{up} .= $data;
		return;
	}

	my ($r, $off) = find_match($c, $data);
	if (!$r)
	{
		$c->{up} .= $data;
		return;
	}

	fire($r);
	$c->{faulted} = 1;
	my $a = $r->{action};
	if ($a eq 'drop_request')
	{
		kill_conn($c, 0);
	}
	elsif ($a eq 'lose_reply')
	{
		$c->{up} .= $data;
		$c->{lose} = { deadline => time + ($r->{wait_ms} // 5000) / 1000 };
		$c->{down} = '';
	}
	elsif ($a eq 'stall')
	{
		my $d = $r->{dir};
		if ($d eq 'down')
		{
			$c->{up} .= $data;
		}
		else
		{
			$c->{held_up} .= $data;
			$c->{stall_up} = $r->{id};
		}
		$c->{stall_down} = $r->{id} if $d eq 'down' || $d eq 'both';
	}
	elsif ($a eq 'reset')
	{
		my $allowed = $off + ($r->{reset_after} // 0);
		my $n = $allowed < length $data ? $allowed : length $data;
		$c->{up} .= substr($data, 0, $n);
		$c->{reset_left} = $allowed - $n;
	}
	else
	{
		# unknown action: behave as drop_request, loudly
		print STDERR "faultproxy: unknown action \"$a\" in rule $r->{id}\n";
		kill_conn($c, 0);
	}
	return;
}

# release the stalls of rules no longer loaded
sub release_stalls
{
	foreach my $c (@conns)
	{
		if (defined $c->{stall_up} && !$ruleby{ $c->{stall_up} })
		{
			$c->{up} .= $c->{held_up};
			$c->{held_up} = '';
			$c->{stall_up} = undef;
			$c->{faulted} = 0;
		}
		if (defined $c->{stall_down} && !$ruleby{ $c->{stall_down} })
		{
			$c->{down} .= $c->{held_down};
			$c->{held_down} = '';
			$c->{stall_down} = undef;
			$c->{faulted} = 0;
		}
	}
	return;
}

sub flush
{
	my ($sock, $bufref) = @_;
	while (length $$bufref)
	{
		my $n = syswrite($sock, $$bufref);
		if (!defined $n)
		{
			return 1 if $! == EAGAIN || $! == EWOULDBLOCK;
			next if $! == EINTR;
			return 0;
		}
		substr($$bufref, 0, $n) = '';
	}
	return 1;
}

for (;;)
{
	exit 0 if getppid() != $parent;
	if (time >= $next_reload)
	{
		load_rules();
		release_stalls();
		$next_reload = time + 0.02;
	}

	my $rd = IO::Select->new($listener);
	my $wr = IO::Select->new();
	foreach my $c (@conns)
	{
		next if $c->{dead};
		$rd->add($c->{c})
		  if !$c->{c_eof} && !defined $c->{stall_up} && length $c->{up} < $MAXBUF
		  && !(defined $c->{reset_left} && $c->{reset_left} == 0);
		$rd->add($c->{s})
		  if !$c->{s_eof}
		  && ($c->{lose} || (!defined $c->{stall_down} && length $c->{down} < $MAXBUF));
		$wr->add($c->{s}) if length $c->{up};
		$wr->add($c->{c}) if length $c->{down} && !$c->{lose};
	}

	my ($canr, $canw) = IO::Select->select($rd, $wr, undef, 0.02);
	my %r = map { ($_ => 1) } @{ $canr // [] };
	my %w = map { ($_ => 1) } @{ $canw // [] };

	accept_one() if $r{$listener};

	foreach my $c (@conns)
	{
		next if $c->{dead};

		if ($r{ $c->{c} })
		{
			my $buf;
			my $n = sysread($c->{c}, $buf, 65536);
			if (defined $n && $n > 0)
			{
				client_data($c, $buf);
			}
			elsif (defined $n || ($! != EAGAIN && $! != EINTR))
			{
				$c->{c_eof} = 1;
			}
		}
		next if $c->{dead};

		if ($r{ $c->{s} })
		{
			my $buf;
			my $n = sysread($c->{s}, $buf, 65536);
			if (defined $n && $n > 0)
			{
				if ($c->{lose})
				{
					$c->{lose}{quiet_at} = time + $QUIET;
				}
				else
				{
					$c->{down} .= $buf;
				}
			}
			elsif (defined $n || ($! != EAGAIN && $! != EINTR))
			{
				$c->{s_eof} = 1;
			}
		}

		if ($w{ $c->{s} } && !flush($c->{s}, \$c->{up}))
		{
			$c->{s_eof} = 1;
			$c->{up} = '';
		}
		if ($w{ $c->{c} } && !flush($c->{c}, \$c->{down}))
		{
			kill_conn($c, 0);
			next;
		}

		# lose_reply: the reply came and went quiet, or the server closed,
		# or the time is up
		if (my $l = $c->{lose})
		{
			if ((defined $l->{quiet_at} && time >= $l->{quiet_at})
				|| $c->{s_eof} || time >= $l->{deadline})
			{
				kill_conn($c, 1);
				next;
			}
		}

		# reset: the bytes allowed are written
		if (defined $c->{reset_left} && $c->{reset_left} == 0
			&& !length $c->{up})
		{
			kill_conn($c, 1);
			next;
		}

		# half-close towards the server once the client is done
		if ($c->{c_eof} && !$c->{shut_s} && !length $c->{up}
			&& !length $c->{held_up})
		{
			shutdown($c->{s}, SHUT_WR);
			$c->{shut_s} = 1;
		}
		# the server is done and its data delivered: close the connection
		if ($c->{s_eof} && !length $c->{down} && !length $c->{held_down}
			&& !$c->{lose})
		{
			kill_conn($c, 0);
			next;
		}
	}
	@conns = grep { !$_->{dead} } @conns;
}
