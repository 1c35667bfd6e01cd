// A restored clone's identity without an SSH login first. The snapshot
// template leaves a root waiter in its guest (vm-images/perl/identity-waiter.pl),
// blocked reading the virtio-serial identity port, and its sshd blocked in open() on a
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
import { GUEST_SSH_PATHS, identityApplyValues, rekeyInput } from './guest-agent.js';
import { consolePerlValues, consoleRequestLine, GuestConsole } from './guest-console.js';
import { perlOneLine } from './guest-perl.js';

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

/** The command the template runs as root (through SSH) to leave the waiter behind; loads the port's driver first. */
export function identityWaiterCommand(): string {
  const waiter = perlOneLine('identity-waiter.pl', {
    ...identityApplyValues(),
    ...consolePerlValues(),
    IDENTITY_PORT_NAME,
    HOST_KEY: GUEST_SSH_PATHS.hostKey,
    SSHD_PID_FILE: GUEST_SSH_PATHS.sshdPidFile,
  });
  return `modprobe virtio_console && perl -e '${waiter}'`;
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
