# Subs of the first-shell console (main/guest/guest-console.ts), defined by the
# waiter once its port is open ($port): frame() writes one frame to the port;
# set_size(master, cols, rows) sizes a pty; start_shell(cols, rows) opens a pty
# and starts root's login shell on it, in its own session with the pty as its
# controlling terminal and a clean login environment, and returns (master, pid).
# Kept to what perl-base has: the pty through /dev/ptmx and its ioctls (x86_64
# numbers: TIOCGPTN, TIOCSPTLCK, TIOCSWINSZ).
sub frame { my ($t, $p) = @_; my $f = pack("Cn", $t, length $p) . $p; while (length $f) { my $w = syswrite($port, $f); if (!defined $w) { next if $! == POSIX::EINTR(); exit 1; } substr($f, 0, $w) = ""; } }
sub set_size { my ($m, $cols, $rows) = @_; my $ws = pack("S4", $rows, $cols, 0, 0); return ioctl($m, 0x5414, $ws); }
sub start_shell {
  my ($cols, $rows) = @_;
  sysopen(my $m, "/dev/ptmx", POSIX::O_RDWR() | POSIX::O_NOCTTY()) or die "/dev/ptmx: $!\n";
  my $n = pack("L", 0); ioctl($m, 0x80045430, $n) or die "TIOCGPTN: $!\n"; my $pts = "/dev/pts/" . unpack("L", $n);
  my $u = pack("l", 0); ioctl($m, 0x40045431, $u) or die "unlockpt: $!\n";
  set_size($m, $cols, $rows) or die "TIOCSWINSZ: $!\n";
  my $sh = fork() // die "fork: $!\n";
  if (!$sh) {
    POSIX::setsid(); close($m); close($port);
    # Opening the pts in a new session without O_NOCTTY makes it the controlling terminal.
    sysopen(my $s, $pts, POSIX::O_RDWR()) or POSIX::_exit(127); POSIX::dup2(fileno($s), $_) for 0 .. 2; close($s) if fileno($s) > 2;
    # A shell started in the template would give every clone the same $RANDOM (and bash's first $SRANDOM
    # comes from bytes it read there): at its first prompt it sets a trap that, before the first command
    # (in the clone), seeds RANDOM from SHELL_SEED_FILE, written by the relay from the clone's kernel.
    %ENV = (HOME => "/root", USER => "root", LOGNAME => "root", SHELL => "/bin/bash", TERM => "xterm-256color", LANG => "C.UTF-8", PATH => "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", {{NODE_GYP_ENV_NAME}} => "{{NODE_GYP_ENV_VALUE}}",
      PROMPT_COMMAND => "unset PROMPT_COMMAND; trap \"{ read -r RANDOM < {{SHELL_SEED_FILE}}; } 2>/dev/null; trap - DEBUG\" DEBUG");
    chdir("/root"); exec { "/bin/bash" } "-bash"; POSIX::_exit(127);
  }
  return ($m, $sh);
}
