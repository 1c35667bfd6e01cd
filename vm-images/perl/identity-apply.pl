# Taking a new identity, the part both ways of handing it in share: the re-key
# over SSH (rekey.pl) and the identity port's waiter (identity-waiter.pl). Not a
# program of its own: statements included there, which expect $epoch, $seed,
# $mid and $pub (the first four lines of the host's rekeyInput()) and die naming
# what is wrong. In order: each value checked; the host's entropy into the
# kernel's input pool, credited (RNDADDENTROPY), and the kernel's generator
# reseeded from it at once (RNDRESEEDCRNG): without that, clones of one memory
# snapshot go on drawing /dev/urandom from one generator state for up to a
# minute; the machine id; the authorized keys; the clock (settimeofday).
# Defines put(file, text, mode) for the caller's own files.
$epoch =~ /^([0-9]+)\.([0-9]{3})$/ or die "bad time\n"; my ($sec, $ms) = ($1, $2);
$seed =~ /^[0-9a-f]{128}$/ or die "bad seed\n";
$mid =~ /^[0-9a-f]{32}$/ or die "bad machine id\n";
$pub =~ /^ssh-ed25519 [A-Za-z0-9+\/=]+( [^\r\n]*)?$/ or die "bad client key\n";
open(my $r, ">", "/dev/urandom") or die "open /dev/urandom: $!\n";
my $e = pack("H*", $seed);
ioctl($r, 0x40085203, pack("ii", 8 * length($e), length($e)) . $e) or die "RNDADDENTROPY: $!\n";
ioctl($r, 0x5207, 0) or die "RNDRESEEDCRNG: $!\n";
close($r);
sub put { my ($f, $t, $mode) = @_; open(my $h, ">", $f) or die "$f: $!\n"; !defined $mode or chmod($mode, $f) or die "$f: $!\n"; print $h $t or die "$f: $!\n"; close($h) or die "$f: $!\n"; }
put("{{MACHINE_ID}}", "$mid\n"); chmod(0444, "{{MACHINE_ID}}");
put("{{ROOT_AUTHORIZED_KEYS}}", "$pub\n");
put("{{AGENT_AUTHORIZED_KEYS}}", "$pub\n");
# struct timeval; 164 is settimeofday on x86_64.
syscall(164, pack("qq", $sec, $ms * 1000), 0) == 0 or die "settimeofday: $!\n";
