// Paces terminal output into xterm.js. Each xterm.js write that changes the
// screen costs a whole browser frame (row DOM, style, layout, hit test, paint,
// raster, composite); during a flood that per-frame work, not parsing, is what
// the renderer spends its CPU on (measured with test/bench/terminal-cpu.bench.ts).
// So output arriving while a write went out less than `intervalMs` ago is held
// and written as one piece when the interval ends: output redraws at most
// 1000 / intervalMs times a second, and once it has kept coming for
// `floodAfterMs`, at most 1000 / floodIntervalMs times (a long flood is
// unreadable anyway; each frame saved goes to the program making the output).
// A keystroke's echo after a quiet moment is written at once.
//
// Nothing is dropped or reordered: pieces are written in arrival order, and
// each piece's `parsed` callback runs after xterm.js parsed it (the flow-control
// acknowledgement). What is held is bounded by the host's high watermark, since
// the host stops sending what is not acknowledged.
import { TERMINAL_WINDOW_BYTES } from '../../common/terminal-window.js';

export interface WritePacerOptions {
  /** Least time between two writes into xterm.js while output keeps coming. */
  intervalMs: number;
  /** The same, once output has kept coming for floodAfterMs. */
  floodIntervalMs: number;
  floodAfterMs: number;
  /** Write at once when this many bytes are held, whatever the time. */
  maxHeldBytes: number;
  /**
   * Held output is written once nothing more arrived for this long, whatever the
   * interval: the end of a flood shows without waiting out a long flood interval.
   * Above the host's flood batch time (64 ms, main/terminal/flow-control.ts), so a
   * flood in full flow is not taken for a quiet moment.
   */
  quietMs: number;
}

/**
 * maxHeldBytes is half the window the host keeps (common/terminal-window.ts): a fast
 * flood is written as soon as half a window is held, so the host never waits out a
 * whole interval with its window full.
 *
 * A flood that has kept coming for a second redraws twice a second: each redraw
 * costs the renderer, the browser and the GPU process a fixed amount, and on a
 * machine whose cores the sandbox also needs every saved frame goes to the
 * program making the output. What that would cost the user is taken back by the
 * quiet time (the end of a flood shows 120 ms after it arrived) and by
 * userInput() (a keystroke writes what is held at once). Measured with
 * test/bench/terminal-flood.bench.ts against the same run's earlier renderer
 * (5 redraws a second, 256 KiB held, a 512 KiB window, 32 ms host batches):
 * Chromium 0.10-0.11 CPU s/MB against 0.11-0.13, 3-7 % more throughput.
 */
export const DEFAULT_PACING: WritePacerOptions = { intervalMs: 40, floodIntervalMs: 500, floodAfterMs: 1000, maxHeldBytes: TERMINAL_WINDOW_BYTES / 2, quietMs: 120 };

type Timer = ReturnType<typeof setTimeout>;

export class WritePacer {
  private held: Uint8Array[] = [];
  private heldBytes = 0;
  private lastWrite = Number.NEGATIVE_INFINITY;
  /** When the output that is still coming began (no quiet moment since). */
  private streamStart = 0;
  private timer: Timer | null = null;
  /** When the held output is due by the interval alone. */
  private dueAt = 0;
  private closed = false;
  /** Bytes handed to xterm.js and not yet parsed. */
  private inFlight = 0;
  /** Bumped by discard(): callbacks of earlier writes no longer count. */
  private epoch = 0;

  constructor(
    /** Writes into xterm.js; calls `parsed` once xterm.js parsed the bytes. */
    private readonly write: (data: Uint8Array, parsed: () => void) => void,
    /** Bytes of a write that xterm.js finished parsing. */
    private readonly parsed: (bytes: number) => void,
    private readonly opts: WritePacerOptions = DEFAULT_PACING,
    private readonly now: () => number = () => performance.now(),
  ) {
    const { intervalMs, floodIntervalMs, floodAfterMs, maxHeldBytes, quietMs } = opts;
    if (!(intervalMs >= 0) || !(floodIntervalMs >= intervalMs) || !(floodAfterMs >= 0) || !(maxHeldBytes > 0) || !(quietMs > 0)) {
      throw new Error(
        `invalid write pacing: interval ${intervalMs} ms, flood interval ${floodIntervalMs} ms (not below the interval) after ${floodAfterMs} ms, max held ${maxHeldBytes} bytes, quiet after ${quietMs} ms`,
      );
    }
  }

  /** Bytes received and not yet handed to xterm.js. */
  get pendingBytes(): number {
    return this.heldBytes;
  }

  push(data: Uint8Array): void {
    if (this.closed || data.byteLength === 0) return;
    this.held.push(data);
    this.heldBytes += data.byteLength;
    const now = this.now();
    if (this.timer === null) {
      // Quiet for two flood intervals: this is new output, not more of the same.
      if (now - this.lastWrite > 2 * this.opts.floodIntervalMs) this.streamStart = now;
      const interval = now - this.streamStart >= this.opts.floodAfterMs ? this.opts.floodIntervalMs : this.opts.intervalMs;
      this.dueAt = this.lastWrite + interval;
    }
    if (this.dueAt <= now || this.heldBytes >= this.opts.maxHeldBytes) return this.flush();
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.flush(), Math.min(this.dueAt, now + this.opts.quietMs) - now);
  }

  /**
   * The user typed into the terminal: what is held is written now and the next
   * output goes out at once, so the answer to a keystroke (Ctrl+C ending a flood,
   * say) is never held behind a flood's interval.
   */
  userInput(): void {
    this.flush();
    this.lastWrite = Number.NEGATIVE_INFINITY;
  }

  /** Writes everything held now. */
  flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.heldBytes === 0 || this.closed) return;
    const parts = this.held;
    this.held = [];
    this.heldBytes = 0;
    this.lastWrite = this.now();
    const epoch = this.epoch;
    for (const piece of pieces(parts, WRITE_PIECE_BYTES)) {
      const n = piece.byteLength;
      this.inFlight += n;
      this.write(piece, () => {
        if (epoch !== this.epoch) return;
        this.inFlight -= n;
        this.parsed(n);
      });
    }
  }

  /**
   * The terminal is going away: later pushes are ignored and pending parse
   * callbacks no longer count. Returns the bytes received and never reported
   * parsed (held, or written and unparsed), for the caller to acknowledge.
   */
  close(): number {
    const unparsed = this.heldBytes + this.inFlight;
    this.discard();
    this.closed = true;
    return unparsed;
  }

  /**
   * Forgets what is held and what xterm.js has not parsed yet, as far as
   * acknowledgements go (a re-attach replays it and restarts the host's account).
   */
  discard(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.held = [];
    this.heldBytes = 0;
    this.inFlight = 0;
    this.epoch++;
  }
}

/**
 * xterm.js parses each write whole before it yields to the page (it checks its
 * 12 ms time budget between writes), so what is held goes in as pieces of this
 * size and the page answers in between. With 128 KiB pieces a piece took up to
 * 50 ms of CPU (200 ms under a profiler) and a 20 MB flood made 34 long tasks,
 * longest 304 ms, on a loaded machine; with 16 KiB the longest task took 26 ms
 * of CPU and there were 10, longest 162 ms, at the same throughput
 * (terminal-flood e2e, which asserts the CPU time). A piece may end inside a
 * UTF-8 sequence or an escape sequence: xterm.js's decoder and parser carry
 * their state across writes.
 */
export const WRITE_PIECE_BYTES = 16 * 1024;

/** The parts joined in order and cut into pieces of at most max bytes (a part larger than that is split). */
export function pieces(parts: Uint8Array[], max: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  let group: Uint8Array[] = [];
  let size = 0;
  const close = () => {
    if (size === 0) return;
    out.push(group.length === 1 ? group[0]! : concat(group, size));
    group = [];
    size = 0;
  };
  for (let part of parts) {
    while (part.byteLength > 0) {
      const take = Math.min(max - size, part.byteLength);
      group.push(take === part.byteLength ? part : part.subarray(0, take));
      size += take;
      part = part.subarray(take);
      if (size === max) close();
    }
  }
  close();
  return out;
}

function concat(parts: Uint8Array[], n: number): Uint8Array {
  const out = new Uint8Array(n);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.byteLength;
  }
  return out;
}
