// A restored clone's first shell over its identity port, before any SSH login.
// Under software emulation the first SSH login in a clone costs more than the
// whole restore (its key exchange, authentication and session code are
// translated for the first time); the port is already open and the waiter
// that took the identity is already running and translated. When the host asks
// for it (a `console` line before the identity), the waiter, once it has said
// "ok", relays between root's login shell on a pty and the port in frames
// (consoleRelayPerl); that shell was started in the template and sits at its
// prompt in every clone (consolePrestartPerl). The host's end (GuestConsole) is a
// TerminalSource like an SSH channel. Everything the guest sends is untrusted:
// frames are checked and capped, and a malformed one ends the session.
import type net from 'node:net';
import { TERMINAL_SIZE_RANGE, terminalSizeFits } from '../../common/contract.js';
import type { TerminalSource } from '../terminal/types.js';

/** Frame types, both ways: [type u8][length u16, big-endian][payload]. */
export const CONSOLE_FRAME = {
  /** Bytes of the terminal (guest → host: pty output; host → guest: keys). */
  data: 1,
  /** guest → host: the shell ended, [exit code u8][signal u8]; host → guest: [cols u16][rows u16]. */
  exitOrResize: 2,
  /** guest → host: the shell could not start (printable text); host → guest: kill the shell (no payload). */
  errorOrKill: 3,
} as const;

/** Largest data payload either side sends in one frame (the relay reads the pty 4 KiB at a time). */
export const MAX_CONSOLE_DATA = 4096;
/** The seed of a template-started shell's $RANDOM in a clone (see start_shell's environment). */
const SHELL_SEED_FILE = '/run/factory-shell-seed';
/** Largest error text the guest may send. */
const MAX_CONSOLE_ERROR = 300;
/** What the host buffers of an incomplete frame: one whole frame at most. */
const HEADER_BYTES = 3;
/** After kill(), how long the relay gets to report the end before the port is let go. */
const KILL_WAIT_MS = 2000;

/** The `console <cols> <rows>` line that asks the waiter for a first shell (identityMessage puts it first). */
export function consoleRequestLine(size: { cols: number; rows: number }): string {
  const { cols, rows } = size;
  if (!terminalSizeFits(cols, rows)) throw new Error(`console size ${cols}x${rows} is out of range (${TERMINAL_SIZE_RANGE})`);
  return `console ${cols} ${rows}\n`;
}

export function encodeConsoleFrame(type: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  if (payload.length > 0xffff) throw new Error(`a console frame holds at most 65535 bytes, not ${payload.length}`);
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt8(type, 0);
  header.writeUInt16BE(payload.length, 1);
  return Buffer.concat([header, payload]);
}

/**
 * Perl subs the waiter defines once its port is open ($port): frame() writes
 * one frame to the port; set_size(master, cols, rows) sizes a pty;
 * start_shell(cols, rows) opens a pty and starts root's
 * login shell on it, in its own session with the pty as its controlling
 * terminal and a clean login environment, and returns (master, pid). Kept to
 * what perl-base has: the pty through /dev/ptmx and its ioctls (x86_64
 * numbers: TIOCGPTN, TIOCSPTLCK, TIOCSWINSZ). No single quote anywhere (the
 * waiter runs as perl -e '...').
 */
export function consoleSubsPerl(): string[] {
  return [
    'sub frame { my ($t, $p) = @_; my $f = pack("Cn", $t, length $p) . $p; while (length $f) { my $w = syswrite($port, $f); if (!defined $w) { next if $! == POSIX::EINTR(); exit 1; } substr($f, 0, $w) = ""; } }',
    'sub set_size { my ($m, $cols, $rows) = @_; my $ws = pack("S4", $rows, $cols, 0, 0); return ioctl($m, 0x5414, $ws); }',
    'sub start_shell {',
    '  my ($cols, $rows) = @_;',
    '  sysopen(my $m, "/dev/ptmx", POSIX::O_RDWR() | POSIX::O_NOCTTY()) or die "/dev/ptmx: $!\\n";',
    '  my $n = pack("L", 0); ioctl($m, 0x80045430, $n) or die "TIOCGPTN: $!\\n"; my $pts = "/dev/pts/" . unpack("L", $n);',
    '  my $u = pack("l", 0); ioctl($m, 0x40045431, $u) or die "unlockpt: $!\\n";',
    '  set_size($m, $cols, $rows) or die "TIOCSWINSZ: $!\\n";',
    '  my $sh = fork() // die "fork: $!\\n";',
    '  if (!$sh) {',
    '    POSIX::setsid(); close($m); close($port);',
    // Opening the pts in a new session without O_NOCTTY makes it the controlling terminal.
    '    sysopen(my $s, $pts, POSIX::O_RDWR()) or POSIX::_exit(127); POSIX::dup2(fileno($s), $_) for 0 .. 2; close($s) if fileno($s) > 2;',
    // A shell started in the template would give every clone the same $RANDOM (and bash's first $SRANDOM
    // comes from bytes it read there): at its first prompt it sets a trap that, before the first command
    // (in the clone), seeds RANDOM from SHELL_SEED_FILE, written by the relay from the clone's kernel.
    '    %ENV = (HOME => "/root", USER => "root", LOGNAME => "root", SHELL => "/bin/bash", TERM => "xterm-256color", LANG => "C.UTF-8", PATH => "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",',
    `      PROMPT_COMMAND => "unset PROMPT_COMMAND; trap \\"{ read -r RANDOM < ${SHELL_SEED_FILE}; } 2>/dev/null; trap - DEBUG\\" DEBUG");`,
    '    chdir("/root"); exec { "/bin/bash" } "-bash"; POSIX::_exit(127);',
    '  }',
    '  return ($m, $sh);',
    '}',
  ];
}

/**
 * Run in the template, before it is saved: the first shell is started there
 * and its prompt read and kept ($prompt), so a clone's first shell is already
 * waiting for a key when the clone resumes (under emulation a shell's start is
 * most of a second of translation). Any failure leaves no shell ($sh undef):
 * a clone asked for one then starts it itself.
 */
export function consolePrestartPerl(): string[] {
  return [
    'my ($m, $sh, $prompt) = (undef, undef, "");',
    'eval {',
    '  ($m, $sh) = start_shell(80, 24);',
    // The prompt is the shell waiting in its line editor: nothing more comes for a moment.
    '  my $until = time() + 30;',
    '  for (;;) { my $rin = ""; vec($rin, fileno($m), 1) = 1; my $n = select(my $rout = $rin, undef, undef, 0.2);',
    `    if ($n > 0) { my $d; my $k = sysread($m, $d, ${MAX_CONSOLE_DATA}); $k or die "the shell ended\\n"; $prompt .= $d; length($prompt) < 65536 or die "the shell printed too much\\n"; next; }`,
    '    last if $prompt =~ /[#\\$] \\z/; time() < $until or die "no prompt within 30 s\\n"; }',
    '  1;',
    '} or do { kill("KILL", -$sh, $sh) if $sh; waitpid($sh, 0) if $sh; ($m, $sh, $prompt) = (undef, undef, ""); };',
  ];
}

/**
 * The relay, run in a clone after "ok" when the host asked for the first shell
 * ($cols, $rows): the template's shell at the asked size (its kept prompt
 * first), or a new one; then pty ↔ port in frames until the shell ends (or the
 * host sends kill), and its status last.
 */
export function consoleRelayPerl(): string[] {
  const F = CONSOLE_FRAME;
  return [
    `if ($sh) { if (open(my $ur, "<", "/dev/urandom")) { my $b = ""; read($ur, $b, 4); eval { put("${SHELL_SEED_FILE}", unpack("N", $b . "\\0\\0\\0\\0") . "\\n", 0600) }; }`,
    '  set_size($m, $cols, $rows); frame(' + F.data + ', substr($prompt, 0, ' + MAX_CONSOLE_DATA + ')) if length $prompt; }',
    'else { my $started = eval { ($m, $sh) = start_shell($cols, $rows); 1 }; if (!$started) { my $why = $@ || "no reason"; $why =~ s/[^\\x20-\\x7e]/ /g; frame(' + F.errorOrKill + ', substr($why, 0, ' + MAX_CONSOLE_ERROR + ')); exit 1; } }',
    'my $dead = 0; $SIG{CHLD} = sub { $dead = 1 };',
    'my $in = "";',
    'for (;;) {',
    '  my $rin = ""; vec($rin, fileno($m), 1) = 1; vec($rin, fileno($port), 1) = 1;',
    // Once the shell is gone, drain what it left in the pty, then report.
    '  my $got = select(my $rout = $rin, undef, undef, $dead ? 0 : undef);',
    // -1 is a signal (SIGCHLD: the next round drains without waiting); 0 only comes while draining.
    '  next if $got < 0; last if $got == 0;',
    `  if (vec($rout, fileno($m), 1)) { my $d; my $k = sysread($m, $d, ${MAX_CONSOLE_DATA}); if ($k) { frame(${F.data}, $d); } elsif (!defined $k && $! == POSIX::EINTR()) { } else { last; } }`,
    '  if (vec($rout, fileno($port), 1)) {',
    '    my $k = sysread($port, $in, 65536, length $in); if (!$k) { select(undef, undef, undef, 0.05); next; }',
    '    while (length($in) >= 3) {',
    '      my ($t, $l) = unpack("Cn", $in); last if length($in) < 3 + $l;',
    '      my $p = substr($in, 3, $l); substr($in, 0, 3 + $l) = "";',
    `      if ($t == ${F.data}) { while (length $p) { my $w = syswrite($m, $p); if (!defined $w) { next if $! == POSIX::EINTR(); last; } substr($p, 0, $w) = ""; } }`,
    `      elsif ($t == ${F.exitOrResize} && $l == 4) { set_size($m, unpack("nn", $p)); }`,
    `      elsif ($t == ${F.errorOrKill}) { kill("KILL", -$sh, $sh); }`,
    '    }',
    '  }',
    '}',
    'waitpid($sh, 0); my $st = $?;',
    `frame(${F.exitOrResize}, pack("CC", ($st >> 8) & 255, $st & 127)); exit 0;`,
  ];
}

/**
 * The host's end of the first shell: the identity port's socket after "ok".
 * Pausing stops reading the socket, so QEMU stops taking the guest's writes,
 * the relay blocks and so does the shell: the same backpressure as an SSH
 * channel's window.
 */
export class GuestConsole implements TerminalSource {
  private pending: Buffer = Buffer.alloc(0);
  private readonly dataListeners: Array<(chunk: Buffer) => void> = [];
  private readonly exitListeners: Array<(code: number | null, lost: boolean) => void> = [];
  /** Output that came before anyone listened (the shell starts before its session is registered). */
  private early: Buffer[] = [];
  private exitStatus: { code: number | null; lost: boolean } | null = null;
  private killed = false;
  private killTimer: NodeJS.Timeout | undefined;
  /** Why the session ended other than by the shell's exit, for the terminal to show. */
  problem: string | undefined;
  /** Settles at the shell's first output, or its end: the shell is up (or will never be). */
  readonly started: Promise<void>;
  private markStarted: () => void = () => {};

  constructor(
    private readonly socket: net.Socket,
    initial: Buffer,
  ) {
    this.started = new Promise((resolve) => (this.markStarted = resolve));
    socket.on('data', (chunk: Buffer) => this.feed(chunk));
    socket.on('error', () => this.end(null, !this.killed));
    socket.on('close', () => this.end(null, !this.killed));
    if (initial.length) this.feed(initial);
  }

  onData(listener: (chunk: Buffer) => void): void {
    this.dataListeners.push(listener);
    const early = this.early;
    this.early = [];
    for (const chunk of early) listener(chunk);
  }

  onExit(listener: (code: number | null, lost: boolean) => void): void {
    this.exitListeners.push(listener);
    if (this.exitStatus) listener(this.exitStatus.code, this.exitStatus.lost);
  }

  write(data: string | Buffer): void {
    if (this.exitStatus) return;
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    for (let at = 0; at < bytes.length; at += MAX_CONSOLE_DATA) {
      this.socket.write(encodeConsoleFrame(CONSOLE_FRAME.data, bytes.subarray(at, at + MAX_CONSOLE_DATA)));
    }
  }

  resize(cols: number, rows: number): void {
    if (this.exitStatus) return;
    const size = Buffer.alloc(4);
    size.writeUInt16BE(Math.max(1, Math.min(0xffff, Math.trunc(cols))), 0);
    size.writeUInt16BE(Math.max(1, Math.min(0xffff, Math.trunc(rows))), 2);
    this.socket.write(encodeConsoleFrame(CONSOLE_FRAME.exitOrResize, size));
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  kill(): void {
    if (this.exitStatus || this.killed) return;
    this.killed = true;
    // The relay reports the end; a paused socket would never read it.
    this.socket.resume();
    this.socket.write(encodeConsoleFrame(CONSOLE_FRAME.errorOrKill));
    this.killTimer = setTimeout(() => this.end(null, false), KILL_WAIT_MS);
    this.killTimer.unref?.();
  }

  private feed(chunk: Buffer): void {
    if (this.exitStatus) return;
    // At most one incomplete frame is ever held (HEADER_BYTES + a capped payload).
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    while (this.pending.length >= HEADER_BYTES && !this.exitStatus) {
      const type = this.pending.readUInt8(0);
      const length = this.pending.readUInt16BE(1);
      const bad = frameProblem(type, length);
      if (bad) return this.fail(bad);
      if (this.pending.length < HEADER_BYTES + length) return;
      const payload = this.pending.subarray(HEADER_BYTES, HEADER_BYTES + length);
      this.pending = this.pending.subarray(HEADER_BYTES + length);
      if (type === CONSOLE_FRAME.data) this.emit(Buffer.from(payload));
      else if (type === CONSOLE_FRAME.exitOrResize) {
        const code = payload.readUInt8(0);
        const signal = payload.readUInt8(1);
        this.end(signal ? null : code, false);
      } else {
        const why = payload.toString('latin1').replace(/[^\x20-\x7e]/g, '?');
        this.fail(`the sandbox's first shell could not start: ${why}`);
      }
    }
  }

  private fail(why: string): void {
    this.problem = why;
    this.emit(Buffer.from(`\r\n[factory: ${why}]\r\n`));
    this.end(null, true);
  }

  private emit(chunk: Buffer): void {
    this.markStarted();
    if (this.dataListeners.length === 0) this.early.push(chunk);
    for (const l of this.dataListeners) l(chunk);
  }

  private end(code: number | null, lost: boolean): void {
    if (this.exitStatus) return;
    this.exitStatus = { code, lost };
    this.markStarted();
    clearTimeout(this.killTimer);
    this.socket.destroy();
    for (const l of this.exitListeners) l(code, lost);
  }
}

/** Why a frame header from the guest is not one the relay sends, or undefined. */
function frameProblem(type: number, length: number): string | undefined {
  if (type === CONSOLE_FRAME.data) return length >= 1 && length <= MAX_CONSOLE_DATA ? undefined : `the console sent a data frame of ${length} bytes (1..${MAX_CONSOLE_DATA})`;
  if (type === CONSOLE_FRAME.exitOrResize) return length === 2 ? undefined : `the console sent an exit frame of ${length} bytes (2)`;
  if (type === CONSOLE_FRAME.errorOrKill) return length >= 1 && length <= MAX_CONSOLE_ERROR ? undefined : `the console sent an error frame of ${length} bytes (1..${MAX_CONSOLE_ERROR})`;
  return `the console sent a frame of unknown type ${type}`;
}
