// Pure terminal flow-control pieces, no I/O and no timers of their own, so they
// can be tested byte by byte: the watermark accounting that decides when to
// pause/resume a source, the output batcher that turns many small reads into
// few size-capped chunks, and the byte-capped scrollback ring.
import { TERMINAL_WINDOW_BYTES } from '../../common/terminal-window.js';

export interface Watermarks {
  /** Pause the source when this many emitted bytes are not yet acknowledged. */
  high: number;
  /** Resume the source once unacknowledged bytes fall to this many or fewer. */
  low: number;
}

/** The window the renderer's pacing is made for (common/terminal-window.ts); resume at a quarter of it. */
export const DEFAULT_WATERMARKS: Watermarks = { high: TERMINAL_WINDOW_BYTES, low: TERMINAL_WINDOW_BYTES / 4 };

export type FlowDecision = 'pause' | 'resume' | null;

/**
 * Counts bytes sent to a viewer and not yet acknowledged (xterm.js parsed them).
 * Only engaged while a viewer is attached: nobody acknowledges otherwise, and a
 * stage with no open tab must not stall.
 */
export class FlowController {
  private unacked = 0;
  private paused = false;
  private engaged = false;

  constructor(private readonly marks: Watermarks = DEFAULT_WATERMARKS) {
    if (!(marks.low >= 0 && marks.high > marks.low)) {
      throw new Error(`invalid watermarks: low ${marks.low} must be >= 0 and below high ${marks.high}`);
    }
  }

  get unacknowledged(): number {
    return this.unacked;
  }
  get isPaused(): boolean {
    return this.paused;
  }
  get isEngaged(): boolean {
    return this.engaged;
  }

  /** A viewer attached: start counting from zero (earlier in-flight bytes belong to a gone viewer). */
  engage(): FlowDecision {
    this.engaged = true;
    this.unacked = 0;
    return this.setPaused(false);
  }

  /** No viewer any more (detached, or silent too long): stop counting and let the source run. */
  disengage(): FlowDecision {
    this.engaged = false;
    this.unacked = 0;
    return this.setPaused(false);
  }

  /** Bytes were emitted to the viewer. */
  sent(bytes: number): FlowDecision {
    if (!this.engaged) return null;
    this.unacked += bytes;
    return this.unacked > this.marks.high ? this.setPaused(true) : null;
  }

  /** The viewer parsed this many bytes. Over-acknowledging (several viewers, a reattach) clamps at zero. */
  ack(bytes: number): FlowDecision {
    if (!Number.isFinite(bytes) || bytes < 0) throw new Error(`ack of ${bytes} bytes is not a byte count`);
    if (!this.engaged) return null;
    this.unacked = Math.max(0, this.unacked - bytes);
    return this.unacked <= this.marks.low ? this.setPaused(false) : null;
  }

  private setPaused(paused: boolean): FlowDecision {
    if (this.paused === paused) return null;
    this.paused = paused;
    return paused ? 'pause' : 'resume';
  }
}

export interface BatchLimits {
  /** How long the first byte of a batch may wait before it is emitted. */
  delayMs: number;
  /**
   * How long it may wait once output has kept coming for streamAfterMs: a flood
   * goes out in fewer, larger messages (every message costs the host, the
   * browser and the renderer a fixed amount), while the first output after a
   * quiet moment (a keystroke's echo) still waits only delayMs. Absent: delayMs.
   */
  streamDelayMs?: number;
  streamAfterMs?: number;
  /** No emitted chunk is larger than this; a batch reaching it is emitted at once. */
  maxChunkBytes: number;
}

/**
 * 64 ms and up to 256 KiB per message in a flood: every message costs the host,
 * the browser and the renderer a fixed amount (8 ms to 32 ms sent a third as many
 * messages for about a fifth less CPU per MB, test/bench/terminal-cpu.bench.ts),
 * and the renderer holds a flood's output for half a second anyway
 * (renderer/terminal/write-pacer.ts), so nobody sees it later.
 */
export const DEFAULT_BATCH: BatchLimits = { delayMs: 8, streamDelayMs: 64, streamAfterMs: 100, maxChunkBytes: 256 * 1024 };

/**
 * Collects source output; the owner arms a timer when push() says so and calls
 * flush() when it fires. Chunks that reach the cap come back from push() at once.
 * Bytes are never re-encoded, so a UTF-8 sequence split across reads stays intact
 * (the decoder at the far end joins it).
 */
export class OutputBatcher {
  private parts: Buffer[] = [];
  private size = 0;
  /** When a chunk last went out, and when the output that keeps coming began (caller's clock, ms). */
  private lastEmitAt = Number.NEGATIVE_INFINITY;
  private streamStart = 0;

  constructor(private readonly limits: BatchLimits = DEFAULT_BATCH) {
    const { delayMs, streamDelayMs = delayMs, streamAfterMs = 0, maxChunkBytes } = limits;
    if (!(maxChunkBytes > 0)) throw new Error(`maxChunkBytes must be positive, got ${maxChunkBytes}`);
    if (!(delayMs >= 0) || !(streamDelayMs >= delayMs) || !(streamAfterMs >= 0)) {
      throw new Error(`invalid batching: delay ${delayMs} ms, stream delay ${streamDelayMs} ms (not below the delay) after ${streamAfterMs} ms`);
    }
  }

  /**
   * How long the batch just started may wait: delayMs, or streamDelayMs once
   * output has kept coming (no gap longer than two stream delays) for streamAfterMs.
   */
  delayFor(now: number): number {
    const { delayMs, streamDelayMs = delayMs, streamAfterMs = 0 } = this.limits;
    if (now - this.lastEmitAt > 2 * streamDelayMs) this.streamStart = now;
    return now - this.streamStart >= streamAfterMs ? streamDelayMs : delayMs;
  }

  get pendingBytes(): number {
    return this.size;
  }

  /**
   * Adds a read. Returns the full chunks ready now, and whether a timer must be
   * armed for the remainder (true only when the batch went from empty to non-empty).
   */
  push(data: Buffer, now = 0): { ready: Buffer[]; armTimer: boolean } {
    const wasEmpty = this.size === 0;
    if (data.length > 0) {
      this.parts.push(data);
      this.size += data.length;
    }
    const ready: Buffer[] = [];
    if (this.size >= this.limits.maxChunkBytes) {
      const all = this.take();
      let off = 0;
      while (all.length - off >= this.limits.maxChunkBytes) {
        ready.push(all.subarray(off, off + this.limits.maxChunkBytes));
        off += this.limits.maxChunkBytes;
      }
      if (off < all.length) {
        this.parts = [all.subarray(off)];
        this.size = all.length - off;
      }
      this.lastEmitAt = now;
    }
    return { ready, armTimer: wasEmpty && this.size > 0 };
  }

  /** Everything pending, in chunks no larger than the cap. */
  flush(now = 0): Buffer[] {
    if (this.size === 0) return [];
    this.lastEmitAt = now;
    const all = this.take();
    const out: Buffer[] = [];
    for (let off = 0; off < all.length; off += this.limits.maxChunkBytes) {
      out.push(all.subarray(off, Math.min(all.length, off + this.limits.maxChunkBytes)));
    }
    return out;
  }

  private take(): Buffer {
    const all = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.size);
    this.parts = [];
    this.size = 0;
    return all;
  }
}

/**
 * The last `capBytes` of a session's output, plus the absolute stream offset of
 * its end (so a viewer can tell which live chunks the replay already covers).
 */
export class ScrollbackBuffer {
  private parts: Buffer[] = [];
  private size = 0;
  private total = 0;

  constructor(private readonly capBytes: number) {
    if (!(capBytes > 0)) throw new Error(`scrollback cap must be positive, got ${capBytes}`);
  }

  /** Bytes ever appended (the stream offset of the end of the buffer). */
  get endOffset(): number {
    return this.total;
  }
  get byteLength(): number {
    return this.size;
  }

  append(data: Buffer): void {
    if (data.length === 0) return;
    this.total += data.length;
    if (data.length >= this.capBytes) {
      this.parts = [Buffer.from(data.subarray(data.length - this.capBytes))];
      this.size = this.capBytes;
      return;
    }
    this.parts.push(data);
    this.size += data.length;
    while (this.size > this.capBytes) {
      const head = this.parts[0]!;
      const excess = this.size - this.capBytes;
      if (head.length <= excess) {
        this.parts.shift();
        this.size -= head.length;
      } else {
        this.parts[0] = head.subarray(excess);
        this.size -= excess;
      }
    }
    // Many tiny reads would make replay a long concat of slivers: compact now and then.
    if (this.parts.length > 1024) this.parts = [Buffer.concat(this.parts, this.size)];
  }

  /** The kept bytes, starting at a UTF-8 character boundary. */
  snapshot(): Buffer {
    const all = Buffer.concat(this.parts, this.size);
    return all.subarray(utf8BoundaryFrom(all, 0));
  }

  /** The last maxBytes kept, starting at a character boundary. */
  tail(maxBytes: number): Buffer {
    const all = this.snapshot();
    if (all.length <= maxBytes) return all;
    const start = all.length - Math.max(0, maxBytes);
    return all.subarray(utf8BoundaryFrom(all, start));
  }
}

/** First index >= start that is not a UTF-8 continuation byte (at most 3 skipped). */
export function utf8BoundaryFrom(buf: Uint8Array, start: number): number {
  let i = start;
  while (i < buf.length && i - start < 3 && (buf[i]! & 0xc0) === 0x80) i++;
  return i;
}

/**
 * Terminal output as plain text for summaries and error messages: escape
 * sequences (CSI, OSC, single-char escapes) and other control characters
 * removed, CRLF normalised, a bare CR treated as the overwrite it is.
 */
export function terminalBytesToText(bytes: Uint8Array): string {
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  const stripped = text
    // OSC ... BEL or ST
    .replace(/\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?/g, '')
    // DCS / SOS / PM / APC ... ST
    .replace(/\x1b[PX^_][^\x1b]*(?:\x1b\\)?/g, '')
    // CSI
    .replace(/\x1b\[[0-?]*[ -/]*[@-~]/g, '')
    // other two-byte escapes
    .replace(/\x1b[@-Z\\-_()#%*+][0-9A-Za-z]?/g, '')
    .replace(/\x1b/g, '')
    .replace(/\r+\n/g, '\n');
  // A lone CR returns to column 0: keep only what was written last on the line.
  const lines = stripped.split('\n').map((line) => {
    const cut = line.lastIndexOf('\r');
    return cut >= 0 ? line.slice(cut + 1) : line;
  });
  return lines.join('\n').replace(/[\x00-\x08\x0b-\x1f\x7f]/g, '');
}
