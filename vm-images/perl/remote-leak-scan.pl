#!/usr/bin/perl
# Factory in a Box: leak scan on a sandbox host. Usage: perl scan.pl SPEC LABEL=FILE...
# It never sees a credential: it gets, per needle, its character class, unit
# (plain bytes or UTF-16 LE/BE), length and two digests, SHA-256(salt || first
# m bytes) and SHA-256(salt || all bytes), with a fresh salt per check. It finds
# runs of graphic ASCII (plain, then UTF-16) with one regex pass each (C speed),
# looks for each class only inside them, hashes the m-byte window at every start
# in a run long enough for the shortest needle (salt + window fit one SHA-256
# block), and checks the full digest where the prefix matches. Runs shorter than
# the shortest needle cost no hash. It is uploaded as a file over SFTP, never
# passed on a shell line; its answer is parsed strictly at home
# (main/remote/remote-leak.ts). Needs perl with Digest::SHA (Debian's perl).
use strict;
use warnings;
my $HAVE_SHA = eval { require Digest::SHA; Digest::SHA->import('sha256'); 1 };
if (!$HAVE_SHA) { print STDERR "fiab-leakscan: perl's Digest::SHA is missing (Debian package: perl)\n"; exit 3 }

my %CLASS = (hex => '0-9a-f', HEX => '0-9A-F', tok => 'A-Za-z0-9_\-', b64 => 'A-Za-z0-9+/', word => '\x21-\x7e');
sub fail { print STDERR "fiab-leakscan: $_[0]\n"; exit 2 }

@ARGV >= 2 or fail('usage: scan.pl SPEC LABEL=FILE...');
my $specfile = shift @ARGV;
open(my $sf, '<:raw', $specfile) or fail('cannot open the spec');
my @spec = <$sf>;
close $sf;
chomp @spec;
(shift(@spec) // '') eq 'fiab-leakscan-spec 1' or fail('not a spec');
my %opt;
my %groups;  # class.1 or class.w -> { class, wide, prefix, minlen, units => { unit => { prefix digest => [[id, len, full digest]] } } }
my $maxlen = 0;
my $ended = 0;
for my $line (@spec) {
  if ($line =~ /^(nonce|salt) ([0-9a-f]{16,64})$/) { $opt{$1} = $2; next }
  if ($line =~ /^(chunk|maxwindows|maxhits) ([0-9]{1,15})$/) { $opt{$1} = $2 + 0; next }
  if ($line =~ /^needle ([0-9]{1,6}) (hex|HEX|tok|b64|word) (1|le|be) ([0-9]{1,5}) ([0-9]{1,2}) ([0-9a-f]{64}) ([0-9a-f]{64})$/) {
    my ($id, $class, $unit, $len, $m) = ($1, $2, $3, $4 + 0, $5 + 0);
    fail('bad needle length') if $len < 4 || $m < 4 || $m > $len || ($unit ne '1' && $len % 2);
    my $g = $unit eq '1' ? "$class.1" : "$class.w";
    my $gr = $groups{$g} //= { class => $class, wide => $unit ne '1', prefix => $m, minlen => $len, units => {} };
    fail('one prefix length per class') if $gr->{prefix} != $m;
    $gr->{minlen} = $len if $len < $gr->{minlen};
    push @{ $gr->{units}{$unit}{ pack('H*', $6) } }, [ $id, $len, pack('H*', $7) ];
    $maxlen = $len if $len > $maxlen;
    next;
  }
  if ($line eq 'end') { $ended = 1; last }
  fail('bad spec line');
}
$ended && defined $opt{nonce} && defined $opt{salt} or fail('incomplete spec');
my $salt = pack('H*', $opt{salt});
my $CHUNK = $opt{chunk} || 16 * 1024 * 1024;
$CHUNK = $maxlen if $CHUNK < $maxlen;
my $MAXWIN = $opt{maxwindows} || 4_000_000_000;
my $MAXHITS = $opt{maxhits} || 20;
for my $g (values %groups) {
  my $c = $CLASS{ $g->{class} };
  my $k = $g->{wide} ? $g->{minlen} / 2 : $g->{minlen};
  my $k1 = $k - 1;
  # Wide runs: one char of the class, then (NUL, char) pairs; LE windows end with the NUL after, BE ones start with the NUL before.
  $g->{re} = $g->{wide} ? qr/[$c](?:\x00[$c]){$k1,}/ : qr/[$c]{$k,}/;
}
# Every class is inside graphic ASCII: one pass finds the runs of that (plain, then
# wide), and each class is looked for only inside them, not over the whole buffer.
# The runs are found in a copy of the buffer where every graphic character is P,
# NUL stays and any other byte is \x01: index() looks for k P's (wide: P, then
# NUL P pairs) with a skip search, where a regex for k graphic characters tried
# again from every byte of each shorter run (18 s for a 1 GiB guest's memory).
my @passes;
for my $wide (0, 1) {
  my @gs = grep { ($_->{wide} ? 1 : 0) == $wide } values %groups;
  next unless @gs;
  my ($k) = sort { $a <=> $b } map { $wide ? $_->{minlen} / 2 : $_->{minlen} } @gs;
  push @passes, [ $wide ? 'P' . ("\x00P" x ($k - 1)) : 'P' x $k, $wide ? qr/\G(?:\x00P)*/ : qr/\GP*/, \@gs ];
}

my $windows = 0;
my @out;
for my $arg (@ARGV) {
  $arg =~ /^([a-z][a-z-]{0,19})=(\/.+)$/s or fail('bad source argument');
  my ($label, $file) = ($1, $2);
  my $fh;
  if (!-e $file) { push @out, "source $label missing"; next }
  if (!open($fh, '<:raw', $file)) { push @out, "source $label unreadable"; next }
  my (%count, @hitlines);
  my ($bytes, $runs, $capped, $base, $carry, $bad) = (0, 0, 0, 0, '', 0);
  while (!$capped) {
    my $n = read($fh, my $chunk, $CHUNK);
    if (!defined $n) { $bad = 1; last }
    $bytes += $n;
    my $final = $n == 0;
    my $buf = $carry . $chunk;
    undef $chunk;
    my $size = length $buf;
    # Each window start is looked at once: in the first buffer that holds the longest needle from it, or at the end.
    my $limit = $final ? $size : $size - $maxlen + 1;
    $limit = 0 if $limit < 0;
    (my $map = $buf) =~ tr/\x21-\x7e/P/;
    $map =~ tr/P\x00/\x01/c;
    for my $pass (@passes) {
     my ($least, $rest, $gs) = @$pass;
     my $at = 0;
     while (($at = index($map, $least, $at)) >= 0) {
      pos($map) = $at + length $least;
      $map =~ /$rest/g;
      my ($os, $oe) = ($at, pos($map));
      $at = $oe;
      last if $os - 1 >= $limit;
      my $run = substr($buf, $os, $oe - $os);
     for my $g (@$gs) {
      my ($re, $m, $minlen, $units) = ($g->{re}, $g->{prefix}, $g->{minlen}, $g->{units});
      while ($run =~ /$re/g) {
        my ($s, $e) = ($os + $-[0], $os + $+[0]);
        last if $s - 1 >= $limit;
        $runs++;
        for my $u (keys %$units) {
          my $pre = $units->{$u};
          my ($i, $last, $step);
          if ($u eq '1') { ($i, $last, $step) = ($s, $e - $minlen, 1) }
          elsif ($u eq 'le') { ($i, $last, $step) = ($s, $e + 1 - $minlen, 2) }
          else { ($i, $last, $step) = ($s - 1, $e - $minlen, 2) }
          $last = $size - $minlen if $last > $size - $minlen;
          $last = $limit - 1 if $last > $limit - 1;
          $i += $step if $i < 0;
          next if $i > $last;
          $windows += int(($last - $i) / $step) + 1;
          if ($windows > $MAXWIN) { $capped = 1; last }
          for (; $i <= $last; $i += $step) {
            my $cands = $pre->{ Digest::SHA::sha256($salt . substr($buf, $i, $m)) } or next;
            for my $cand (@$cands) {
              my ($id, $len, $full) = @$cand;
              next if $i + $len > $size || Digest::SHA::sha256($salt . substr($buf, $i, $len)) ne $full;
              push @hitlines, "hit $label $id " . ($base + $i) if ++$count{$id} <= $MAXHITS;
            }
          }
        }
        last if $capped;
      }
      last if $capped;
     }
     last if $capped;
     }
     last if $capped;
    }
    last if $final;
    $carry = substr($buf, $limit);
    $base += $limit;
  }
  close $fh;
  if ($bad) { push @out, "source $label unreadable"; next }
  push @out, "source $label bytes $bytes runs $runs " . ($capped ? 'capped' : 'ok'), @hitlines, map { "count $label $_ $count{$_}" } sort { $a <=> $b } keys %count;
}
print "fiab-leakscan 1 $opt{nonce}\n", map({ "$_\n" } @out), "windows $windows\n", "end $opt{nonce}\n";
