// A restored clone's identity without an SSH login first. The snapshot
// template leaves a root waiter in its guest (identityWaiterCommand), blocked
// reading the virtio-serial identity port, and its sshd blocked in open() on a
// FIFO where its host key file was: no sshd listens in the template, so no
// clone can ever serve the template's host key. When a clone resumes, the host
// has already written the clone's identity into the port's socket
// (IdentityChannel); the waiter credits the host's entropy and reseeds the
// kernel's generator, writes a new machine id, the authorized keys and the
// clock, then feeds the new host key through the FIFO: sshd, already running
// and linked, reads it and starts listening (no re-exec, which costs hundreds
// of ms in a clone whose emulator has translated nothing yet). It answers "ok"
// once sshd listens; the host's first SSH connection then pins the new key.
import net from 'node:net';
import type { SandboxKeys } from '../ssh/sandbox-keys.js';
import { GUEST_SSH_PATHS, identityApplyPerl, rekeyInput } from './guest-agent.js';
import { consolePrestartPerl, consoleRelayPerl, consoleRequestLine, consoleSubsPerl, GuestConsole } from './guest-console.js';

/**
 * The guest's name of the virtio-serial port a restored clone gets its identity
 * through: the host writes into the socket chardev `identity0` (vm/qemu-args.ts),
 * the waiter the template left in the guest reads it.
 */
export const IDENTITY_PORT_NAME = 'org.factory.identity';

/** The waiter's answers are short; anything longer is not a waiter speaking. */
const MAX_REPLY_BYTES = 1024;
/** What is kept of the first shell's output until its session takes the port (it is taken at once). */
const MAX_EARLY_CONSOLE_BYTES = 64 * 1024;

/**
 * The waiter, as one perl program (no shell, no other process: under emulation
 * each process start costs). Run as root in the template, after sync: it finds
 * the port, turns the host key file into a FIFO, sends sshd SIGHUP (sshd
 * re-executes and waits in open() of the FIFO), waits until it does, then
 * forks: the child starts the first shell (consolePrestartPerl) and tells the
 * parent, which exits 0 (the template's command ends); the child waits for
 * the identity, takes it, then either relays the host's first shell
 * (guest-console.ts, when the message asked for one) or becomes a login shell
 * that exits at once (a warm-up: see the last line). Paths are plain
 * (GUEST_SSH_PATHS); no single quote anywhere.
 */
function waiterPerl(): string {
  const p = GUEST_SSH_PATHS;
  return [
    'use strict; use POSIX ();',
    'my $dev;',
    `for my $f (glob("/sys/class/virtio-ports/*/name")) { open(my $h, "<", $f) or next; my $n = <$h> // ""; chomp $n; if ($n eq "${IDENTITY_PORT_NAME}") { ($dev) = $f =~ m{^/sys/class/virtio-ports/([a-z0-9]+)/name$}; last; } }`,
    `defined $dev or die "no virtio port named ${IDENTITY_PORT_NAME}\\n";`,
    'sysopen(my $port, "/dev/$dev", POSIX::O_RDWR()) or die "/dev/$dev: $!\\n";',
    ...consoleSubsPerl(),
    `my $key = "${p.hostKey}";`,
    `my $pid; if (open(my $f, "<", "${p.sshdPidFile}")) { $pid = <$f>; chomp $pid if defined $pid; }`,
    'defined $pid && $pid =~ /^[0-9]+$/ or die "no sshd pid\\n";',
    'unlink("$key.fifo"); POSIX::mkfifo("$key.fifo", 0600) or die "mkfifo: $!\\n"; rename("$key.fifo", $key) or die "rename: $!\\n";',
    'kill("HUP", $pid) or die "SIGHUP to sshd $pid: $!\\n";',
    // Only to make sure the re-exec is paid here and not in every clone; sshd would block there anyway.
    'my $until = time() + 10;',
    'for (;;) { my $w = ""; if (open(my $h, "<", "/proc/$pid/wchan")) { $w = <$h> // ""; } last if $w eq "wait_for_partner" || time() > $until; select(undef, undef, undef, 0.01); }',
    // The template's command ends once the child is ready: its first shell is at its prompt (or none could start).
    'pipe(my $ready_r, my $ready_w) or die "pipe: $!\\n";',
    'my $child = fork() // die "fork: $!\\n";',
    'if ($child) { close($ready_w); my $said = <$ready_r> // ""; exit 0 if $said eq "ready\\n"; die "the identity waiter did not get ready\\n"; }',
    'close($ready_r); POSIX::setsid(); open(STDIN, "<", "/dev/null"); open(STDOUT, ">", "/dev/null"); open(STDERR, ">", "/dev/null");',
    ...consolePrestartPerl(),
    'syswrite($ready_w, "ready\\n"); close($ready_w);',
    // From here on this runs in each clone, right after it resumes.
    'my $buf = ""; my ($cols, $rows);',
    'until ($buf =~ /\\n-----END OPENSSH PRIVATE KEY-----\\n/) { my $n = sysread($port, $buf, 4096, length $buf); if (!$n) { select(undef, undef, undef, 0.01); next; } if (length($buf) > 16384) { syswrite($port, "error: identity message too long\\n"); exit 1; } }',
    'my $ok = eval {',
    '  my ($cc, $cr, $epoch, $seed, $mid, $pub, $hostkey) = $buf =~ /\\A(?:console ([0-9]{1,4}) ([0-9]{1,3})\\n)?([^\\n]*)\\n([^\\n]*)\\n([^\\n]*)\\n([^\\n]*)\\n(-----BEGIN OPENSSH PRIVATE KEY-----\\n.*\\n-----END OPENSSH PRIVATE KEY-----\\n)\\z/s or die "malformed identity message\\n";',
    '  ($cols, $rows) = ($cc, $cr);',
    ...identityApplyPerl().map((line) => `  ${line}`),
    '  -p $key or die "$key is no longer the FIFO sshd waits on\\n";',
    '  put("$key.new", $hostkey, 0600);',
    '  local $SIG{ALRM} = sub { die "sshd did not open its host key within 20 s\\n" }; alarm(20);',
    // sshd waits in open(): this returns at once. The file goes in place before sshd reads EOF, so its next open of the path finds it.
    '  open(my $fifo, ">", $key) or die "$key: $!\\n"; alarm(0);',
    '  rename("$key.new", $key) or die "rename $key: $!\\n";',
    '  print $fifo $hostkey or die "$key: $!\\n"; close($fifo) or die "$key: $!\\n";',
    '  my $until = time() + 20;',
    '  sub listening { for my $t ("/proc/net/tcp", "/proc/net/tcp6") { open(my $h, "<", $t) or next; <$h>; while (my $l = <$h>) { my @f = split(" ", $l); return 1 if $f[1] =~ /:0016$/ && $f[3] eq "0A"; } } return 0; }',
    '  until (listening()) { time() < $until or die "sshd did not listen within 20 s of getting its host key\\n"; select(undef, undef, undef, 0.005); }',
    '  1;',
    '};',
    'my $why = $@ // ""; $why =~ s/[^\\x20-\\x7e]/ /g;',
    'syswrite($port, $ok ? "ok\\n" : "error: $why\\n"); exit(1) unless $ok;',
    // The host asked for its first shell: relay it (consoleRelayPerl ends the waiter when the shell ends).
    'if (defined $cols) {',
    ...consoleRelayPerl().map((line) => `  ${line}`),
    '}',
    // Not asked for: the template's shell goes (killed: it writes no history).
    'if ($sh) { kill("KILL", -$sh, $sh); waitpid($sh, 0); }',
    // While the host logs in, root's login shell runs once with nothing to do, so the emulator has
    // translated it when the first real one starts (fixed addresses under TCG: guestKernelCmdline).
    `$ENV{HOME} = "/root"; $ENV{TERM} = "xterm-256color"; exec { "/bin/bash" } "-bash", "-i", "-c", "exit"; exit(0);`,
  ].join(' ');
}

/** The command the template runs as root (through SSH) to leave the waiter behind; loads the port's driver first. */
export function identityWaiterCommand(): string {
  return `modprobe virtio_console && perl -e '${waiterPerl()}'`;
}

/**
 * The message the waiter reads: rekeyInput()'s lines (time, entropy, machine id, client key, host
 * key), after a `console <cols> <rows>` line when the host wants its first shell over the port.
 */
export function identityMessage(keys: Pick<SandboxKeys, 'clientPublicKey' | 'hostPrivateKey'>, nowMs = Date.now(), firstShell?: ShellSize): string {
  const text = rekeyInput(keys, nowMs);
  if (!text.endsWith('\n-----END OPENSSH PRIVATE KEY-----\n')) throw new Error('the host private key for the identity does not end its OpenSSH armour');
  return (firstShell ? consoleRequestLine(firstShell) : '') + text;
}

export interface ShellSize {
  cols: number;
  rows: number;
}

/** The host's end of a VM's identity port: a connection to the QEMU socket chardev. */
export class IdentityChannel {
  /** Guest bytes so far: the answer, then (with a first shell asked for) its first frames, capped. */
  private received: Buffer = Buffer.alloc(0);
  private ended: string | undefined;
  private readonly waiters = new Set<() => void>();
  /** A first shell was asked for: the socket outlives the answer, for takeConsole(). */
  private keepOpen = false;
  private readonly onData = (chunk: Buffer) => {
    if (this.received.length + chunk.length > MAX_EARLY_CONSOLE_BYTES) this.ended ??= `the identity port sent more than ${MAX_EARLY_CONSOLE_BYTES} bytes before they were read`;
    else this.received = Buffer.concat([this.received, chunk]);
    this.wake();
  };

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', this.onData);
    socket.on('error', (err) => {
      this.ended ??= `the identity port's socket failed: ${err.message}`;
      this.wake();
    });
    socket.on('close', () => {
      this.ended ??= "QEMU closed the identity port's socket";
      this.wake();
    });
  }

  /** Connects to QEMU's socket at path, retrying until it exists or the deadline passes. */
  static async connect(socketPath: string, deadline: number, alive: () => boolean = () => true): Promise<IdentityChannel> {
    for (;;) {
      try {
        const socket = await new Promise<net.Socket>((resolve, reject) => {
          const s = net.createConnection({ path: socketPath });
          s.once('connect', () => {
            s.removeListener('error', reject);
            resolve(s);
          });
          s.once('error', reject);
        });
        return new IdentityChannel(socket);
      } catch (err) {
        if (!alive() || Date.now() > deadline) throw new Error(`could not connect to the identity port's socket: ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  }

  /** Sends the identity (the waiter reads it once the guest runs), asking for the first shell when a size is given. */
  send(keys: Pick<SandboxKeys, 'clientPublicKey' | 'hostPrivateKey'>, firstShell?: ShellSize): void {
    this.keepOpen = !!firstShell;
    this.socket.write(identityMessage(keys, Date.now(), firstShell));
  }

  /**
   * Resolves once the waiter says "ok" (sshd listens with the new host key);
   * rejects with the waiter's own reason, a malformed answer, a closed socket
   * or the timeout. Closes the channel, unless it answered "ok" to a message
   * that asked for a first shell: then takeConsole() has it.
   */
  async reply(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let keep = false;
    try {
      for (;;) {
        // Guest bytes: only ever looked at up to the cap.
        const line = /^([^\n]*)\n/.exec(this.received.subarray(0, MAX_REPLY_BYTES).toString('latin1'))?.[1];
        if (line !== undefined) {
          if (line === 'ok') {
            keep = this.keepOpen && !this.ended;
            return;
          }
          const shown = line.replace(/[^\x20-\x7e]/g, '?').slice(0, 300);
          throw new Error(line.startsWith('error: ') ? `the guest could not take its identity: ${shown.slice(7)}` : `the identity port answered something else than ok: ${JSON.stringify(shown)}`);
        }
        if (this.received.length >= MAX_REPLY_BYTES) throw new Error(`the identity port sent ${MAX_REPLY_BYTES} bytes without a line end`);
        if (this.ended) throw new Error(`${this.ended} before the guest took its identity`);
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`the guest did not take its identity within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, left);
          function done() {
            clearTimeout(timer);
            resolve();
          }
          this.waiters.add(() => done());
        });
      }
    } finally {
      if (!keep) this.close();
    }
  }

  /** The port after "ok" to a message that asked for a first shell: the shell's session (GuestConsole). */
  takeConsole(): GuestConsole {
    if (!this.keepOpen || this.ended) throw new Error(`the identity port has no first shell to hand over${this.ended ? ` (${this.ended})` : ''}`);
    this.keepOpen = false;
    this.ended = 'handed to the first shell';
    this.socket.removeAllListeners('data');
    this.socket.removeAllListeners('error');
    this.socket.removeAllListeners('close');
    // What came after the answer's line is the shell's first frames.
    const rest = this.received.subarray(this.received.indexOf(0x0a) + 1);
    return new GuestConsole(this.socket, rest);
  }

  close(): void {
    this.ended ??= 'closed';
    this.socket.destroy();
  }

  private wake(): void {
    const all = [...this.waiters];
    this.waiters.clear();
    for (const w of all) w();
  }
}
