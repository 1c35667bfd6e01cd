# The relay, run in a clone after "ok" when the host asked for the first shell
# ($cols, $rows): the template's shell at the asked size (its kept prompt
# first), or a new one; then pty <-> port in frames (main/guest/guest-console.ts)
# until the shell ends (or the host sends kill), and its status last.
if ($sh) { if (open(my $ur, "<", "/dev/urandom")) { my $b = ""; read($ur, $b, 4); eval { put("{{SHELL_SEED_FILE}}", unpack("N", $b . "\0\0\0\0") . "\n", 0600) }; }
  set_size($m, $cols, $rows); frame({{FRAME_DATA}}, substr($prompt, 0, {{MAX_CONSOLE_DATA}})) if length $prompt; }
else { my $started = eval { ($m, $sh) = start_shell($cols, $rows); 1 }; if (!$started) { my $why = $@ || "no reason"; $why =~ s/[^\x20-\x7e]/ /g; frame({{FRAME_ERROR_OR_KILL}}, substr($why, 0, {{MAX_CONSOLE_ERROR}})); exit 1; } }
my $dead = 0; $SIG{CHLD} = sub { $dead = 1 };
my $in = "";
for (;;) {
  my $rin = ""; vec($rin, fileno($m), 1) = 1; vec($rin, fileno($port), 1) = 1;
  # Once the shell is gone, drain what it left in the pty, then report.
  my $got = select(my $rout = $rin, undef, undef, $dead ? 0 : undef);
  # -1 is a signal (SIGCHLD: the next round drains without waiting); 0 only comes while draining.
  next if $got < 0; last if $got == 0;
  if (vec($rout, fileno($m), 1)) { my $d; my $k = sysread($m, $d, {{MAX_CONSOLE_DATA}}); if ($k) { frame({{FRAME_DATA}}, $d); } elsif (!defined $k && $! == POSIX::EINTR()) { } else { last; } }
  if (vec($rout, fileno($port), 1)) {
    my $k = sysread($port, $in, 65536, length $in); if (!$k) { select(undef, undef, undef, 0.05); next; }
    while (length($in) >= 3) {
      my ($t, $l) = unpack("Cn", $in); last if length($in) < 3 + $l;
      my $p = substr($in, 3, $l); substr($in, 0, 3 + $l) = "";
      if ($t == {{FRAME_DATA}}) { while (length $p) { my $w = syswrite($m, $p); if (!defined $w) { next if $! == POSIX::EINTR(); last; } substr($p, 0, $w) = ""; } }
      elsif ($t == {{FRAME_EXIT_OR_RESIZE}} && $l == 4) { set_size($m, unpack("nn", $p)); }
      elsif ($t == {{FRAME_ERROR_OR_KILL}}) { kill("KILL", -$sh, $sh); }
    }
  }
}
waitpid($sh, 0); my $st = $?;
frame({{FRAME_EXIT_OR_RESIZE}}, pack("CC", ($st >> 8) & 255, $st & 127)); exit 0;
