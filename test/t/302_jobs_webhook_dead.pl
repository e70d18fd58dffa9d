
# Copyright (c) 2026, ctas_fed developers

# A dead webhook endpoint (it accepts connections and never answers) does
# not slow commits down: five CTAS take as long as five into a catalog
# without a webhook.  Timed: this file runs alone.  The rest of the jobs,
# webhooks and crash recovery is in 300_jobs_recovery.pl.

use strict;
use warnings;

use IO::Socket::INET;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use CtasFed::Test;

# a port where nothing answers: connections are accepted, never served
my $dead = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 100, ReuseAddr => 1)
  or die "could not listen: $!";
my $dead_port = $dead->sockport;

my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });

my $local = new_cluster('local', conf => "ctas_fed.resolver_naptime = 1\n");
postgres_catalog($local, $remote, name => 'wh_dead',
	options => { notify_url => "http://127.0.0.1:$dead_port/hook" });
postgres_catalog($local, $remote, name => 'wh_quiet');

sub job_state
{
	my ($target) = @_;
	return $local->safe_psql('postgres',
		"SELECT state FROM ctas_fed.jobs WHERE target = 'public.$target' ORDER BY job_id DESC LIMIT 1");
}

# --- a dead webhook endpoint does not slow commits down
sub time_commits
{
	my ($server) = @_;
	my $t0 = time;
	foreach my $i (1 .. 5)
	{
		$local->safe_psql('postgres',
			"CREATE TABLE $server.public.lat_${server}_$i AS SELECT 1 AS a");
	}
	return time - $t0;
}
# one untimed CTAS into each first: the connection to the remote is made,
# and the webhook of wh_dead is already stuck on its endpoint
foreach my $server ('wh_quiet', 'wh_dead')
{
	$local->safe_psql('postgres',
		"CREATE TABLE $server.public.warm_$server AS SELECT 1 AS a");
}
my $t_quiet = time_commits('wh_quiet');
my $t_dead = time_commits('wh_dead');
cmp_ok($t_dead, '<', $t_quiet + 1.0,
	sprintf('commits with a dead webhook take as long (%.2fs vs %.2fs)', $t_dead, $t_quiet));
is(job_state('lat_wh_dead_5'), 'committed', 'and the jobs still finish');

close $dead;
done_testing();
