# The identity port's waiter (main/guest/identity-channel.ts), as one perl
# program (no shell, no other process: under emulation each process start
# costs). Run as root in the snapshot template, after sync: it finds the port,
# turns the host key file into a FIFO, sends sshd SIGHUP (sshd re-executes and
# waits in open() of the FIFO), waits until it does, then forks: the child
# starts the first shell (console-prestart.pl) and tells the parent, which
# exits 0 (the template's command ends); the child waits for the identity,
# takes it, then either relays the host's first shell (console-relay.pl, when
# the message asked for one) or becomes a login shell that exits at once (a
# warm-up: see the last line). The template keeps this program in its memory:
# a change here is a change of TEMPLATE_VERSION (main/vm/warm-state.ts).
use strict; use POSIX ();
my $dev;
for my $f (glob("/sys/class/virtio-ports/*/name")) { open(my $h, "<", $f) or next; my $n = <$h> // ""; chomp $n; if ($n eq "{{IDENTITY_PORT_NAME}}") { ($dev) = $f =~ m{^/sys/class/virtio-ports/([a-z0-9]+)/name$}; last; } }
defined $dev or die "no virtio port named {{IDENTITY_PORT_NAME}}\n";
sysopen(my $port, "/dev/$dev", POSIX::O_RDWR()) or die "/dev/$dev: $!\n";
#include console-subs.pl
my $key = "{{HOST_KEY}}";
my $pid; if (open(my $f, "<", "{{SSHD_PID_FILE}}")) { $pid = <$f>; chomp $pid if defined $pid; }
defined $pid && $pid =~ /^[0-9]+$/ or die "no sshd pid\n";
unlink("$key.fifo"); POSIX::mkfifo("$key.fifo", 0600) or die "mkfifo: $!\n"; rename("$key.fifo", $key) or die "rename: $!\n";
kill("HUP", $pid) or die "SIGHUP to sshd $pid: $!\n";
# Only to make sure the re-exec is paid here and not in every clone; sshd would block there anyway.
my $until = time() + 10;
for (;;) { my $w = ""; if (open(my $h, "<", "/proc/$pid/wchan")) { $w = <$h> // ""; } last if $w eq "wait_for_partner" || time() > $until; select(undef, undef, undef, 0.01); }
# The template's command ends once the child is ready: its first shell is at its prompt (or none could start).
pipe(my $ready_r, my $ready_w) or die "pipe: $!\n";
my $child = fork() // die "fork: $!\n";
if ($child) { close($ready_w); my $said = <$ready_r> // ""; exit 0 if $said eq "ready\n"; die "the identity waiter did not get ready\n"; }
close($ready_r); POSIX::setsid(); open(STDIN, "<", "/dev/null"); open(STDOUT, ">", "/dev/null"); open(STDERR, ">", "/dev/null");
#include console-prestart.pl
syswrite($ready_w, "ready\n"); close($ready_w);
# From here on this runs in each clone, right after it resumes.
my $buf = ""; my ($cols, $rows);
until ($buf =~ /\n-----END OPENSSH PRIVATE KEY-----\n/) { my $n = sysread($port, $buf, 4096, length $buf); if (!$n) { select(undef, undef, undef, 0.01); next; } if (length($buf) > 16384) { syswrite($port, "error: identity message too long\n"); exit 1; } }
my $ok = eval {
  my ($cc, $cr, $epoch, $seed, $mid, $pub, $hostkey) = $buf =~ /\A(?:console ([0-9]{1,4}) ([0-9]{1,3})\n)?([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n(-----BEGIN OPENSSH PRIVATE KEY-----\n.*\n-----END OPENSSH PRIVATE KEY-----\n)\z/s or die "malformed identity message\n";
  ($cols, $rows) = ($cc, $cr);
  #include identity-apply.pl
  -p $key or die "$key is no longer the FIFO sshd waits on\n";
  put("$key.new", $hostkey, 0600);
  local $SIG{ALRM} = sub { die "sshd did not open its host key within 20 s\n" }; alarm(20);
  # sshd waits in open(): this returns at once. The file goes in place before sshd reads EOF, so its next open of the path finds it.
  open(my $fifo, ">", $key) or die "$key: $!\n"; alarm(0);
  rename("$key.new", $key) or die "rename $key: $!\n";
  print $fifo $hostkey or die "$key: $!\n"; close($fifo) or die "$key: $!\n";
  my $until = time() + 20;
  sub listening { for my $t ("/proc/net/tcp", "/proc/net/tcp6") { open(my $h, "<", $t) or next; <$h>; while (my $l = <$h>) { my @f = split(" ", $l); return 1 if $f[1] =~ /:0016$/ && $f[3] eq "0A"; } } return 0; }
  until (listening()) { time() < $until or die "sshd did not listen within 20 s of getting its host key\n"; select(undef, undef, undef, 0.005); }
  1;
};
my $why = $@ // ""; $why =~ s/[^\x20-\x7e]/ /g;
syswrite($port, $ok ? "ok\n" : "error: $why\n"); exit(1) unless $ok;
# The host asked for its first shell: relay it (console-relay.pl ends the waiter when the shell ends).
if (defined $cols) {
  #include console-relay.pl
}
# Not asked for: the template's shell goes (killed: it writes no history).
if ($sh) { kill("KILL", -$sh, $sh); waitpid($sh, 0); }
# While the host logs in, root's login shell runs once with nothing to do, so the emulator has
# translated it when the first real one starts (fixed addresses under TCG: guestKernelCmdline).
$ENV{HOME} = "/root"; $ENV{TERM} = "xterm-256color"; exec { "/bin/bash" } "-bash", "-i", "-c", "exit"; exit(0);
