// One terminal session's log on disk, written off the main thread. Output is
// queued and written in batches by a single async loop per session (the I/O runs
// on libuv's thread pool), so a slow disk never blocks the event loop.
//
// The queue is bounded. Above a high watermark the owner pauses the session's
// source — the same pause a slow viewer causes — and resumes it below a low one:
// the program in the sandbox slows to the disk's pace and the log stays
// complete, as `cmd > file` would. Dropping bytes instead would make the log of
// a stage disagree with what ran. Only a disk that stops answering altogether
// (no write finished for `stallMs`) lets the source go, so a stuck disk can
// never stall a stage; output past the hard cap is then left out of the log and
// a marker line there says how many bytes are missing.
import * as fsp from 'node:fs/promises';

export interface LogQueueLimits {
  /** Ask for the source to be paused when this many bytes wait for the disk. */
  high: number;
  /** Ask for it to resume once no more than this many wait. */
  low: number;
  /** Never hold more than this in memory: later output is dropped from the log (with a marker). */
  hardCap: number;
  /** While held, a disk that finishes no write for this long is taken as stuck and the source let go. */
  stallMs: number;
  /** Largest single write (queued chunks are joined up to this). */
  maxWriteBytes: number;
}

export const DEFAULT_LOG_QUEUE: LogQueueLimits = {
  high: 2 * 1024 * 1024,
  low: 512 * 1024,
  hardCap: 16 * 1024 * 1024,
  stallMs: 30_000,
  maxWriteBytes: 1024 * 1024,
};

export interface SessionLogDeps {
  file: string;
  /** Where saveMeta() writes (write to `.tmp`, then rename). */
  metaFile: string;
  /** The log rotates to `<file>.1` at this size, so no file is ever larger. */
  maxLogBytes: number;
  limits: LogQueueLimits;
  /** true: stop reading from the source; false: read again. */
  onPressure(hold: boolean): void;
  /** A write failed, or the disk stalled: said once per failure, never swallowed. */
  onError(err: Error): void;
}

export function droppedMarker(bytes: number): Buffer {
  return Buffer.from(`\r\n[factory: ${bytes} bytes of output are missing from this log: the disk did not keep up]\r\n`);
}

/** Room kept under the hard cap for the one marker that may still be added (at the end, or before the next chunk). */
const MARKER_ROOM = droppedMarker(Number.MAX_SAFE_INTEGER).length;

export class SessionLog {
  private queue: Buffer[] = [];
  private queued = 0;
  private meta: string | null = null;
  private fh: fsp.FileHandle | null = null;
  private fileBytes = 0;
  private running = false;
  private closeWanted = false;
  private destroyed = false;
  private dataError: Error | null = null;
  private held = false;
  /** The disk stalled while held: the source runs free until a write completes. */
  private stalled = false;
  private stallTimer: NodeJS.Timeout | null = null;
  private droppedPending = 0;
  private droppedTotal = 0;
  private waiters: Array<() => void> = [];

  constructor(private readonly deps: SessionLogDeps) {
    const l = deps.limits;
    if (!(l.low >= 0 && l.high > l.low && l.hardCap >= l.high && l.hardCap > 2 * MARKER_ROOM && l.maxWriteBytes > 0 && deps.maxLogBytes > 0)) {
      throw new Error(`invalid log queue limits: need 0 <= low < high <= hardCap, a hardCap over ${2 * MARKER_ROOM} bytes and positive sizes, got ${JSON.stringify(l)}`);
    }
  }

  /** Bytes in memory waiting for the disk (queued or being written). */
  get queuedBytes(): number {
    return this.queued;
  }
  get isHolding(): boolean {
    return this.held;
  }
  /** Bytes left out of the log so far (hard cap reached, or after a failed write). */
  get droppedBytes(): number {
    return this.droppedTotal;
  }
  /** Why the log stopped, if it did. */
  get error(): Error | null {
    return this.dataError;
  }

  append(chunk: Buffer): void {
    if (this.destroyed || chunk.length === 0) return;
    if (this.dataError) {
      this.droppedTotal += chunk.length;
      return;
    }
    // The chunk goes in after the marker for what was dropped before it, and one more marker must
    // still fit after it: so the queue never holds more than hardCap, markers included.
    const marker = this.droppedPending > 0 ? droppedMarker(this.droppedPending).length : 0;
    if (this.queued + marker + chunk.length > this.deps.limits.hardCap - MARKER_ROOM) {
      this.droppedPending += chunk.length;
      this.droppedTotal += chunk.length;
      return;
    }
    this.enqueueMarker();
    this.enqueue(chunk);
    if (!this.held && !this.stalled && this.queued >= this.deps.limits.high) {
      this.held = true;
      this.armStall();
      this.deps.onPressure(true);
    }
    this.kick();
  }

  /** Writes the session's metadata once the data appended so far is on disk (the latest call wins). */
  saveMeta(json: string): void {
    if (this.destroyed) return;
    this.meta = json;
    this.kick();
  }

  /** Resolves once everything appended or saved so far is on disk (or has failed and been reported). */
  settled(): Promise<void> {
    if (!this.running && !this.hasWork()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Writes what is queued and closes the file; a later append opens it again. */
  end(): Promise<void> {
    this.closeWanted = true;
    this.enqueueMarker();
    this.kick();
    return this.settled();
  }

  /** end(), and nothing more is accepted (the session is being removed or the app quits). */
  destroy(): Promise<void> {
    const done = this.end();
    this.destroyed = true;
    return done;
  }

  // --- the write loop -------------------------------------------------------

  private enqueue(b: Buffer): void {
    this.queue.push(b);
    this.queued += b.length;
  }

  private enqueueMarker(): void {
    if (this.droppedPending === 0 || this.dataError) return;
    this.enqueue(droppedMarker(this.droppedPending));
    this.droppedPending = 0;
  }

  private hasWork(): boolean {
    return (this.queued > 0 && !this.dataError) || this.meta !== null || (this.closeWanted && this.fh !== null);
  }

  private kick(): void {
    if (this.running) return;
    this.running = true;
    void this.pump().then(() => {
      this.running = false;
      if (this.hasWork()) this.kick();
      else for (const w of this.waiters.splice(0)) w();
    });
  }

  /** Never rejects: every failure is reported through onError. */
  private async pump(): Promise<void> {
    for (;;) {
      if (this.queued > 0 && !this.dataError) {
        try {
          await this.writeBatch();
        } catch (err) {
          await this.failData(err);
        }
      } else if (this.meta !== null) {
        const json = this.meta;
        this.meta = null;
        const tmp = `${this.deps.metaFile}.tmp`;
        try {
          // Write then rename, so a crash never leaves half a JSON file.
          await fsp.writeFile(tmp, json, { mode: 0o600 });
          await fsp.rename(tmp, this.deps.metaFile);
        } catch (err) {
          // A full disk fails mid-write: the partial temp file goes, the last whole metadata stays.
          await fsp.rm(tmp, { force: true }).catch((rmErr: unknown) => this.deps.onError(asError(rmErr, `removing ${tmp}`)));
          this.deps.onError(asError(err, `saving ${this.deps.metaFile}`));
        }
      } else if (this.closeWanted && this.fh) {
        await this.closeFile();
      } else {
        return;
      }
    }
  }

  private async writeBatch(): Promise<void> {
    // Join queued chunks into one write of at most maxWriteBytes (a lone larger chunk goes as it is).
    const parts: Buffer[] = [];
    let size = 0;
    while (this.queue.length > 0 && (size === 0 || size + this.queue[0]!.length <= this.deps.limits.maxWriteBytes)) {
      const b = this.queue.shift()!;
      parts.push(b);
      size += b.length;
    }
    const buf = parts.length === 1 ? parts[0]! : Buffer.concat(parts, size);
    let off = 0;
    while (off < buf.length) {
      if (!this.fh) {
        this.fh = await fsp.open(this.deps.file, 'a', 0o600);
        this.fileBytes = (await this.fh.stat()).size;
      }
      if (this.fileBytes >= this.deps.maxLogBytes) await this.rotate();
      const n = Math.min(buf.length - off, this.deps.maxLogBytes - this.fileBytes);
      await writeAll(this.fh!, buf.subarray(off, off + n));
      off += n;
      this.fileBytes += n;
    }
    // Counted as queued until written: it is memory held for the disk either way.
    this.queued -= buf.length;
    this.progressed();
  }

  private async rotate(): Promise<void> {
    await this.fh?.close();
    this.fh = null;
    await fsp.rename(this.deps.file, `${this.deps.file}.1`);
    this.fh = await fsp.open(this.deps.file, 'w', 0o600);
    this.fileBytes = 0;
  }

  private async closeFile(): Promise<void> {
    const fh = this.fh!;
    this.fh = null;
    try {
      await fh.close();
    } catch (err) {
      this.deps.onError(asError(err, `closing ${this.deps.file}`));
    }
  }

  /** A failed write stops this log (a full disk will not take the next one either); the terminal goes on. */
  private async failData(err: unknown): Promise<void> {
    this.dataError = asError(err, `writing ${this.deps.file}`);
    this.droppedTotal += this.queued + this.droppedPending;
    this.queue = [];
    this.queued = 0;
    this.droppedPending = 0;
    this.release();
    if (this.fh) await this.closeFile();
    this.deps.onError(this.dataError);
  }

  private progressed(): void {
    this.stalled = false;
    if (this.held) {
      if (this.queued <= this.deps.limits.low) this.release();
      else this.armStall();
    }
  }

  private release(): void {
    this.clearStall();
    if (!this.held) return;
    this.held = false;
    this.deps.onPressure(false);
  }

  private armStall(): void {
    this.clearStall();
    this.stallTimer = setTimeout(() => {
      this.stallTimer = null;
      if (!this.held) return;
      this.stalled = true;
      this.release();
      this.deps.onError(
        new Error(
          `the disk took no write of ${this.deps.file} for ${this.deps.limits.stallMs} ms; the terminal runs on and output beyond ${this.deps.limits.hardCap} queued bytes is left out of the log`,
        ),
      );
    }, this.deps.limits.stallMs);
    // A pending stall check must not keep a quitting process alive.
    this.stallTimer.unref();
  }

  private clearStall(): void {
    if (this.stallTimer) {
      clearTimeout(this.stallTimer);
      this.stallTimer = null;
    }
  }
}

async function writeAll(fh: fsp.FileHandle, buf: Buffer): Promise<void> {
  let off = 0;
  while (off < buf.length) {
    const { bytesWritten } = await fh.write(buf, off, buf.length - off);
    if (bytesWritten <= 0) throw new Error('the disk accepted no bytes');
    off += bytesWritten;
  }
}

function asError(err: unknown, doing: string): Error {
  const e = err instanceof Error ? err : new Error(String(err));
  return new Error(`terminal log: ${doing}: ${e.message}`, { cause: e });
}
