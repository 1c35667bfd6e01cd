# Run in the template, before it is saved: the first shell is started there
# and its prompt read and kept ($prompt), so a clone's first shell is already
# waiting for a key when the clone resumes (under emulation a shell's start is
# most of a second of translation). Any failure leaves no shell ($sh undef): a
# clone asked for one then starts it itself.
my ($m, $sh, $prompt) = (undef, undef, "");
eval {
  ($m, $sh) = start_shell(80, 24);
  # The prompt is the shell waiting in its line editor: nothing more comes for a moment.
  my $until = time() + 30;
  for (;;) { my $rin = ""; vec($rin, fileno($m), 1) = 1; my $n = select(my $rout = $rin, undef, undef, 0.2);
    if ($n > 0) { my $d; my $k = sysread($m, $d, {{MAX_CONSOLE_DATA}}); $k or die "the shell ended\n"; $prompt .= $d; length($prompt) < 65536 or die "the shell printed too much\n"; next; }
    last if $prompt =~ /[#\$] \z/; time() < $until or die "no prompt within 30 s\n"; }
  1;
} or do { kill("KILL", -$sh, $sh) if $sh; waitpid($sh, 0) if $sh; ($m, $sh, $prompt) = (undef, undef, ""); };
