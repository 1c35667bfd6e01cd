# The re-key of a guest restored from a shared snapshot, run over SSH as root
# (perl -e, built by main/guest/guest-agent.ts; perl-base is in every Debian
# system): under emulation each process start costs, so no shell, date, cat or
# pgrep. It reads rekeyInput() from stdin, takes the identity
# (identity-apply.pl), writes the host key (0600) and sends SIGHUP to sshd,
# which reloads it; it ends once sshd listens again, so that any connection
# after the re-key meets the new key.
use strict;
my @l = map { my $x = <STDIN>; defined $x or die "re-key input ends early\n"; chomp $x; $x } 1 .. 4;
my ($epoch, $seed, $mid, $pub) = @l;
my $hostkey = do { local $/; <STDIN> };
#include identity-apply.pl
put("{{HOST_KEY}}", $hostkey, 0600);
my $pid; if (open(my $f, "<", "{{SSHD_PID_FILE}}")) { $pid = <$f>; chomp $pid if defined $pid; }
if (!defined $pid || $pid !~ /^[0-9]+$/) { ($pid) = sort { $a <=> $b } grep { my $c; open($c, "<", "/proc/$_/comm") && (<$c> // "") eq "sshd\n" } map { (split m{/})[-1] } glob("/proc/[0-9]*"); }
defined $pid or die "no sshd to reload\n";
# sshd loads its host key before it listens: a listening socket on port 22 it did not have before means the new key is served.
sub listeners { my %i; for my $t ("/proc/net/tcp", "/proc/net/tcp6") { open(my $h, "<", $t) or next; <$h>; while (my $l = <$h>) { my @f = split(" ", $l); $i{$f[9]} = 1 if $f[1] =~ /:0016$/ && $f[3] eq "0A"; } } return %i; }
my %old = listeners();
kill("HUP", $pid) or die "SIGHUP to sshd $pid: $!\n";
my $until = time() + 20;
for (;;) { my %now = listeners(); last if grep { !$old{$_} } keys %now; time() < $until or die "sshd did not reload its host key within 20 s\n"; select(undef, undef, undef, 0.01); }
