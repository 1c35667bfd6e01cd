// A restored clone's first shell over its identity port, before any SSH login.
// Under software emulation the first SSH login in a clone costs more than the
// whole restore (its key exchange, authentication and session code are
// translated for the first time); the port is already open and the waiter
// that took the identity is already running and translated. When the host asks
// for it (a `console` line before the identity), the waiter, once it has said
// "ok", relays between root's login shell on a pty and the port in frames
// (vm-images/perl/console-relay.pl); that shell was started in the template
// and sits at its prompt in every clone (console-prestart.pl). The host's end
// (GuestConsole) is a TerminalSource like an SSH channel. Everything the guest sends is untrusted:
// frames are checked and capped, and a malformed one ends the session.
import type net from 'node:net';
import { TERMINAL_SIZE_RANGE, terminalSizeFits } from '../../common/contract.js';
import type { TerminalSource } from '../terminal/types.js';
import { GUEST_NODE_GYP_DIR } from './guest-shell.js';

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
/** The seed of a template-started shell's $RANDOM in a clone (see start_shell's environment in console-subs.pl). */
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
 * The {{NAME}}s of the guest's half of the console (vm-images/perl/console-subs.pl,
 * console-prestart.pl and console-relay.pl, parts of the identity waiter): the
 * frame types and caps both ends keep to.
 */
export function consolePerlValues(): Record<string, number | string> {
  return {
    FRAME_DATA: CONSOLE_FRAME.data,
    FRAME_EXIT_OR_RESIZE: CONSOLE_FRAME.exitOrResize,
    FRAME_ERROR_OR_KILL: CONSOLE_FRAME.errorOrKill,
    MAX_CONSOLE_DATA,
    MAX_CONSOLE_ERROR,
    SHELL_SEED_FILE,
    // The login environment of the first shell is an SSH login's: sshd_config's SetEnv too.
    NODE_GYP_ENV_NAME: GUEST_NODE_GYP_DIR.name,
    NODE_GYP_ENV_VALUE: GUEST_NODE_GYP_DIR.value,
  };
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
