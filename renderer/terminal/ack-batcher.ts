// Coalesces flow-control acknowledgements: one call per ~64 KiB parsed or per
// few milliseconds, instead of one round trip per chunk. Always flushes on a
// timer, so a small remainder can never leave the host waiting (no deadlock
// between the low watermark and the batching threshold).

export interface AckBatcherOptions {
  /** Send at once when this many bytes are pending. Keep below high - low watermark. */
  threshold: number;
  /** Otherwise send this long after the first pending byte. */
  delayMs: number;
}

export const DEFAULT_ACK: AckBatcherOptions = { threshold: 64 * 1024, delayMs: 10 };

export class AckBatcher {
  private pending = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly send: (bytes: number) => void,
    private readonly opts: AckBatcherOptions = DEFAULT_ACK,
  ) {}

  /** Bytes xterm.js finished parsing. */
  add(bytes: number): void {
    if (bytes <= 0) return;
    this.pending += bytes;
    if (this.pending >= this.opts.threshold) this.flush();
    else if (this.timer === null) this.timer = setTimeout(() => this.flush(), this.opts.delayMs);
  }

  flush(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.pending === 0) return;
    const n = this.pending;
    this.pending = 0;
    this.send(n);
  }

  /** Forget pending bytes (the session was re-attached: the host's account restarted at zero). */
  reset(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.pending = 0;
  }
}
