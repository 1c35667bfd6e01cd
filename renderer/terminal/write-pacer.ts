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

export interface WritePacerOptions {
  /** Least time between two writes into xterm.js while output keeps coming. */
  intervalMs: number;
  /** The same, once output has kept coming for floodAfterMs. */
  floodIntervalMs: number;
  floodAfterMs: number;
  /** Write at once when this many bytes are held, whatever the time. */
  maxHeldBytes: number;
}

/**
 * maxHeldBytes is half the host's high watermark (512 KiB, main/terminal/flow-control.ts):
 * a fast flood is written as soon as half a window is held, so the host never
 * waits out a whole interval with its window full (that would cap a local
 * flood at 512 KiB per interval).
 *
 * A flood that has kept coming for a second redraws 5 times a second: each
 * redraw costs the renderer, the browser and the GPU process a fixed amount,
 * and on a machine whose cores the sandbox also needs every saved frame goes to
 * the program making the output. Measured with test/bench/terminal-cpu.bench.ts
 * (8 MB at about 0.8 MB/s, 3 rounds each): 0.27-0.30 CPU s/MB on the host and in
 * Chromium at 200 ms, 0.34-0.41 at 100 ms.
 */
export const DEFAULT_PACING: WritePacerOptions = { intervalMs: 40, floodIntervalMs: 200, floodAfterMs: 1000, maxHeldBytes: 256 * 1024 };

type Timer = ReturnType<typeof setTimeout>;

export class WritePacer {
  private held: Uint8Array[] = [];
  private heldBytes = 0;
  private lastWrite = Number.NEGATIVE_INFINITY;
  /** When the output that is still coming began (no quiet moment since). */
  private streamStart = 0;
  private timer: Timer | null = null;
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
    const { intervalMs, floodIntervalMs, floodAfterMs, maxHeldBytes } = opts;
    if (!(intervalMs >= 0) || !(floodIntervalMs >= intervalMs) || !(floodAfterMs >= 0) || !(maxHeldBytes > 0)) {
      throw new Error(
        `invalid write pacing: interval ${intervalMs} ms, flood interval ${floodIntervalMs} ms (not below the interval) after ${floodAfterMs} ms, max held ${maxHeldBytes} bytes`,
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
    if (this.timer !== null && this.heldBytes < this.opts.maxHeldBytes) return;
    const now = this.now();
    // Quiet for two flood intervals: this is new output, not more of the same.
    if (now - this.lastWrite > 2 * this.opts.floodIntervalMs) this.streamStart = now;
    const interval = now - this.streamStart >= this.opts.floodAfterMs ? this.opts.floodIntervalMs : this.opts.intervalMs;
    const wait = this.lastWrite + interval - now;
    if (wait <= 0 || this.heldBytes >= this.opts.maxHeldBytes) this.flush();
    else this.timer = setTimeout(() => this.flush(), wait);
  }

  /** Writes everything held now. */
  flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.heldBytes === 0 || this.closed) return;
    const parts = this.held;
    const n = this.heldBytes;
    this.held = [];
    this.heldBytes = 0;
    this.lastWrite = this.now();
    this.inFlight += n;
    const epoch = this.epoch;
    this.write(parts.length === 1 ? parts[0]! : concat(parts, n), () => {
      if (epoch !== this.epoch) return;
      this.inFlight -= n;
      this.parsed(n);
    });
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

function concat(parts: Uint8Array[], n: number): Uint8Array {
  const out = new Uint8Array(n);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.byteLength;
  }
  return out;
}
