
# Copyright (c) 2026, ctas_fed developers

# Fault suite, crashes: the local server is crashed (immediate stop) at
# each fault point of the commit protocol (ctas_fed.fault_point:
# after_prepare, after_rename, after_commit_record) in a transaction that
# loads a PostgreSQL catalog, a ClickHouse catalog, or both; and a remote
# PostgreSQL is stopped while the local transaction pauses at a fault
# point ("name:N"), and so is ClickHouse (killed).  After the restart and the resolver, the invariant of
# CtasFed::Test::check_invariant holds: the remote tables have exactly the
# source's rows iff the local commit record was written, nothing of ours
# is left prepared, staged or running, and the jobs say what happened.

# ctas-tap: parallel

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use HTTP::Tiny;
use Time::HiRes qw(usleep);

use CtasFed::Test;

my $ch = start_clickhouse();
my $remote = new_remote_cluster(
	'remote',
	host_auth => 'scram-sha-256',
	roles     => { loader => 'secret' },
	databases => { dw => 'loader' });
my $churl = $ch->{url};

my $local = new_cluster('local');
clickhouse_catalog($local, $ch, options => { connect_timeout => 2 });
postgres_catalog($local, $remote, options => { connect_timeout => 2 });
$local->safe_psql('postgres', qq{
CREATE TABLE src AS
  SELECT g AS id, md5(g::text) AS label FROM generate_series(1, 300) g;
});
my $digest = sql_digest($local, 'postgres', 'SELECT id, label FROM src');
my $sysid = $local->safe_psql('postgres',
	'SELECT system_identifier FROM pg_control_system()');

# Run $sql in a transaction of a session stopped at fault point $point;
# returns the psql handle once the server log says it stopped there.
sub stop_at
{
	my ($point, $sql) = @_;
	my ($in, $out, $err) = ('', '', '');
	my $offset = -s $local->logfile;
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $local->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
	$in .= "SET ctas_fed.fault_point = '$point';\nBEGIN;\n$sql\nCOMMIT;\n";
	$h->pump while $h->pumpable && $in ne '';
	my ($name) = split /:/, $point;
	$local->wait_for_log(qr/stopped at fault point "$name"/, $offset);
	return ($h, \$out, \$err);
}

my $n = 0;

# targets and jobs of the statements for kind pg, ch or mixed
sub plan_for
{
	my ($kind, $n) = @_;
	my (@sql, @targets, @jobs);
	if ($kind ne 'ch')
	{
		push @sql, "CREATE TABLE wh.public.p$n AS SELECT id, label FROM src;";
		push @targets, { pg => $remote, dbname => 'dw', table => "public.p$n",
			expect => $digest };
		push @jobs, [ 'wh', "public.p$n" ];
	}
	if ($kind ne 'pg')
	{
		push @sql, "CREATE TABLE lake.dw.c$n AS SELECT id, label FROM src;";
		push @targets, { ch => $ch, table => "dw.c$n", expect => $digest };
		push @jobs, [ 'lake', "dw.c$n" ];
	}
	return (join("\n", @sql), \@targets, \@jobs);
}

# --- the local server crashes at each fault point
foreach my $kind ('pg', 'ch', 'mixed')
{
	foreach my $point ('after_prepare', 'after_rename', 'after_commit_record')
	{
		$n++;
		my $name = "crash $n ($kind, $point)";
		my ($sql, $targets, $jobs) = plan_for($kind, $n);
		my ($h) = stop_at($point, $sql);
		pass("$name: stopped at the fault point");
		# the fault point is really in doubt: PostgreSQL prepared, and
		# after the renames the ClickHouse table is published
		is($remote->safe_psql('postgres',
				"SELECT count(*) FROM pg_prepared_xacts WHERE starts_with(gid, 'ctas_fed_${sysid}_')"),
			'1', "$name: the PostgreSQL transaction is prepared")
		  if $kind ne 'ch';
		is($ch->query("EXISTS TABLE dw.c$n"), $point eq 'after_prepare' ? "0\n" : "1\n",
			"$name: the ClickHouse table is published only after the renames")
		  if $kind ne 'pg';
		$local->stop('immediate');
		$h->finish;
		$local->start;
		my $committed = $point eq 'after_commit_record' ? 1 : 0;
		my $state = $committed ? 'committed' : 'aborted';
		my $s = session_start($local);
		check_invariant(
			name      => $name,
			node      => $local,
			committed => $committed,
			targets   => $targets,
			pg_remotes => [$remote],
			clickhouse => [$ch],
			jobs      => [ map { [ @$_, $state ] } @$jobs ],
			resolve   => 1,
			session   => $s,
			session_ctas => "CREATE TABLE lake.dw.after$n AS SELECT id FROM src;"
			  . " CREATE TABLE wh.public.after$n AS SELECT id FROM src");
		$s->quit;
	}
}

# --- the remote PostgreSQL stops while the local transaction pauses
foreach my $point ('after_prepare', 'after_rename', 'after_commit_record')
{
	$n++;
	my $name = "remote down $n (mixed, $point)";
	my ($sql, $targets, $jobs) = plan_for('mixed', $n);
	my ($h, $out, $err) = stop_at("$point:3", $sql);
	$remote->stop('immediate');
	$h->finish;
	# the local transaction commits: PREPARE was done before the pause;
	# only COMMIT PREPARED meets the stopped server, and fails with a
	# WARNING after the local commit
	unlike($$err, qr/ERROR/, "$name: the local transaction commits");
	like($$err, qr/WARNING/, "$name: a WARNING says COMMIT PREPARED failed");
	$remote->start;
	my $s = session_start($local);
	check_invariant(
		name      => $name,
		node      => $local,
		committed => 1,
		targets   => $targets,
		jobs      => [ map { [ @$_, 'committed' ] } @$jobs ],
		resolve   => 1,
		session   => $s,
		session_ctas => "CREATE TABLE wh.public.after$n AS SELECT id FROM src");
	$s->quit;
}

# --- ClickHouse is killed while the local transaction pauses
sub ch_kill9
{
	kill 'KILL', $ch->{pid};
	foreach (1 .. 100)
	{
		last unless kill 0, $ch->{pid};
		usleep(100_000);
	}
	unlink $ch->{pid_file};
	return;
}

sub ch_start_again
{
	system('clickhouse-server', "--config-file=$ch->{dir}/config.xml",
		"--pid-file=$ch->{pid_file}", '--daemon') == 0
	  or die "could not restart clickhouse-server";
	my $http = HTTP::Tiny->new(timeout => 5);
	foreach (1 .. 300)
	{
		my $res = $http->get("$churl/ping");
		if ($res->{status} == 200)
		{
			if (open my $fh, '<', $ch->{pid_file})
			{
				my $p = <$fh>;
				$ch->{pid} = $1 if defined $p && $p =~ /(\d+)/;
			}
			return 1;
		}
		usleep(100_000);
	}
	return 0;
}

# after_prepare: the rename meets a dead server, the transaction aborts
# and PostgreSQL's prepared transaction is rolled back; after_commit_record:
# the finish meets a dead server, the transaction stays committed
foreach my $point ('after_prepare', 'after_commit_record')
{
	$n++;
	my $name = "ClickHouse down $n (mixed, $point)";
	my ($sql, $targets, $jobs) = plan_for('mixed', $n);
	my ($h, $out, $err) = stop_at("$point:3", $sql);
	ch_kill9();
	$h->finish;
	my $committed = $point eq 'after_commit_record' ? 1 : 0;
	if ($committed)
	{
		unlike($$err, qr/ERROR/, "$name: the local transaction commits");
	}
	else
	{
		like($$err, qr/ERROR/, "$name: the commit fails");
	}
	ok(ch_start_again(), "$name: ClickHouse restarted");
	my $s = session_start($local);
	check_invariant(
		name      => $name,
		node      => $local,
		committed => $committed,
		targets   => $targets,
		jobs      => [ map { [ @$_, $committed ? 'committed' : 'aborted' ] } @$jobs ],
		resolve   => 1,
		session   => $s,
		session_ctas => "CREATE TABLE lake.dw.after$n AS SELECT id FROM src");
	$s->quit;
}

$local->stop;
$remote->stop;
$ch->stop;
done_testing();
