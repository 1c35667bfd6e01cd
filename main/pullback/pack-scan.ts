// Reads the packfile inside a returned bundle BEFORE any git process does, and
// adds up what it declares: every object's uncompressed size (for a delta, the
// size of the object it rebuilds, from the delta's own header), their count
// and total. A delta bomb is a few hundred bytes that make `git index-pack` and
// `git diff` allocate gigabytes; here it is refused from its declared sizes,
// with memory bounded by one zlib window (or one small object), and time by the
// caps (inflating stops as soon as an object's output passes what it declared).
//
// Format: gitformat-pack(5). Objects have no id before they are resolved, so
// they are named by their position and offset in the pack.
import fsp, { type FileHandle } from 'node:fs/promises';
import zlib from 'node:zlib';
import { FactoryError } from '../../common/errors.js';
import { formatBytes } from '../git/git-limits.js';

export interface PackCaps {
  maxObjectBytes: number;
  maxTotalBytes: number;
  maxObjects: number;
}

export interface PackScan {
  objects: number;
  /** Sum of the declared uncompressed sizes. */
  totalBytes: number;
  largestBytes: number;
}

const TYPES: Record<number, string> = { 1: 'commit', 2: 'tree', 3: 'blob', 4: 'tag', 6: 'ofs-delta', 7: 'ref-delta' };
const SYNC_INFLATE_MAX = 1024 * 1024;
const READ_CHUNK = 4 * 1024 * 1024;

function rejected(message: string): FactoryError {
  return new FactoryError('PullbackRejected', message);
}

/** A pack git itself would refuse: worded like index-pack's refusal. */
function malformed(detail: string): FactoryError {
  return rejected(`the bundle's objects failed the integrity check: ${detail}`);
}

/** A window over the file, refilled forward; old views stay valid (a new Buffer each time). */
class FileWindow {
  private buf = Buffer.alloc(0);
  private start = 0;
  constructor(private readonly fh: FileHandle, readonly size: number) {}

  /** Up to `n` bytes at `pos`: fewer only at the end of the file. */
  async peek(pos: number, n: number): Promise<Buffer> {
    const want = Math.max(0, Math.min(n, this.size - pos));
    if (pos < this.start || pos + want > this.start + this.buf.length) {
      const len = Math.max(0, Math.min(Math.max(want, READ_CHUNK), this.size - pos));
      const buf = Buffer.alloc(len);
      const { bytesRead } = await this.fh.read(buf, 0, len, pos);
      this.buf = buf.subarray(0, bytesRead);
      this.start = pos;
    }
    return this.buf.subarray(pos - this.start, pos - this.start + want);
  }
}

/** Little-endian base-128 varint at `at` (a delta's base and result sizes). */
function deltaVarint(b: Buffer, at: number): { value: number; next: number } | null {
  let value = 0;
  let scale = 1;
  for (let i = at; i < b.length && i < at + 8; i++) {
    value += (b[i]! & 0x7f) * scale;
    scale *= 128;
    if (!(b[i]! & 0x80)) return { value, next: i + 1 };
  }
  return null;
}

/**
 * Inflates one zlib stream that starts at `pos` and must produce exactly
 * `size` bytes; returns how many input bytes it took and the first `keep`
 * bytes of output. Throws (never allocates past `size`) if it produces more.
 */
async function inflateEntry(win: FileWindow, pos: number, size: number, keep: number, name: string): Promise<{ consumed: number; head: Buffer }> {
  const avail = win.size - pos;
  if (size <= SYNC_INFLATE_MAX) {
    const window = Math.min(avail, 2 * size + 1024);
    try {
      const r = zlib.inflateSync(await win.peek(pos, window), { info: true, maxOutputLength: size + 1 }) as unknown as {
        buffer: Buffer;
        engine: { bytesWritten: number };
      };
      if (r.buffer.length !== size) throw malformed(`${name} inflates to ${r.buffer.length} bytes but declares ${size}`);
      return { consumed: r.engine.bytesWritten, head: Buffer.from(r.buffer.subarray(0, keep)) };
    } catch (e) {
      if (e instanceof FactoryError) throw e;
      const code = (e as { code?: string }).code;
      if (code === 'ERR_BUFFER_TOO_LARGE') throw malformed(`${name} inflates to more than the ${size} bytes it declares`);
      // A stream longer than any zlib would write for this size: read it as a stream below.
      if (!(code === 'Z_BUF_ERROR' && window < avail)) throw malformed(`${name} has corrupt compressed data (${(e as Error).message})`);
    }
  }
  return inflateStreaming(win, pos, size, keep, name);
}

async function inflateStreaming(win: FileWindow, pos: number, size: number, keep: number, name: string): Promise<{ consumed: number; head: Buffer }> {
  const inf = zlib.createInflate();
  let out = 0;
  let head = Buffer.alloc(0);
  let failure: Error | undefined;
  inf.on('data', (c: Buffer) => {
    if (head.length < keep) head = Buffer.concat([head, c.subarray(0, keep - head.length)]);
    out += c.length;
    if (out > size && !failure) {
      failure = malformed(`${name} inflates to more than the ${size} bytes it declares`);
      inf.destroy();
    }
  });
  const ended = new Promise<void>((resolve) => inf.once('end', resolve));
  inf.on('error', (e) => {
    failure ??= malformed(`${name} has corrupt compressed data (${e.message})`);
  });
  let fed = 0;
  for (;;) {
    if (pos + fed >= win.size) {
      inf.destroy();
      throw failure ?? malformed(`${name} is cut off: the pack ends inside it`);
    }
    const chunk = await win.peek(pos + fed, 256 * 1024);
    await new Promise<void>((resolve) => inf.write(chunk, () => resolve()));
    if (failure) throw failure;
    fed += chunk.length;
    // zlib stopped taking input: the stream ended inside this chunk (or right before it).
    if (inf.bytesWritten < fed) break;
  }
  await ended;
  if (failure) throw failure;
  if (out !== size) throw malformed(`${name} inflates to ${out} bytes but declares ${size}`);
  return { consumed: inf.bytesWritten, head };
}

/**
 * Scans the pack that starts at `packOffset` in `file` against `caps`;
 * `hashBytes` is 20 (SHA-1) or 32 (SHA-256). Throws PullbackRejected naming the
 * first object over a cap, its declared size and the cap.
 */
export async function scanPack(file: string, packOffset: number, hashBytes: number, caps: PackCaps): Promise<PackScan> {
  const fh = await fsp.open(file, 'r');
  try {
    const win = new FileWindow(fh, (await fh.stat()).size);
    const hdr = await win.peek(packOffset, 12);
    if (hdr.length < 12 || hdr.toString('latin1', 0, 4) !== 'PACK') throw malformed('the bundle holds no packfile (no PACK signature after its header)');
    const version = hdr.readUInt32BE(4);
    if (version !== 2 && version !== 3) throw malformed(`the bundle's pack has unsupported version ${version}`);
    const count = hdr.readUInt32BE(8);
    if (count > caps.maxObjects) throw rejected(`the bundle's pack declares ${count} objects, over the cap of ${caps.maxObjects} objects`);

    // Offset (from the pack start) -> index, size and resolved type, for ofs-delta bases.
    const seen = new Map<number, { index: number; size: number; type: string | undefined }>();
    let pos = packOffset + 12;
    let total = 0;
    let largest = 0;
    let lastYield = Date.now();
    for (let i = 0; i < count; i++) {
      // Many small objects inflate synchronously: let the event loop (IPC, timers) run now and then.
      if (Date.now() - lastYield > 20) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        lastYield = Date.now();
      }
      const rel = pos - packOffset;
      const h = await win.peek(pos, 16 + hashBytes);
      let k = 0;
      let c = h[k++];
      if (c === undefined) throw malformed(`the bundle's pack ends after ${i} of the ${count} objects it declares`);
      const typeCode = (c >> 4) & 7;
      let size = c & 15;
      let scale = 16;
      while (c & 0x80) {
        c = h[k++];
        if (c === undefined || scale > 2 ** 49) throw malformed(`pack object ${i + 1} of ${count} (at pack offset ${rel}) has a malformed header`);
        size += (c & 0x7f) * scale;
        scale *= 128;
      }
      const kind = TYPES[typeCode];
      if (!kind) throw malformed(`pack object ${i + 1} of ${count} (at pack offset ${rel}) has invalid type ${typeCode}`);
      let name = `pack object ${i + 1} of ${count} (a ${kind} at pack offset ${rel})`;
      let base: { index: number; size: number; type: string | undefined } | undefined;
      if (kind === 'ofs-delta') {
        c = h[k++];
        let dist = (c ?? 0) & 0x7f;
        while (c !== undefined && c & 0x80) {
          c = h[k++];
          dist = (dist + 1) * 128 + ((c ?? 0) & 0x7f);
        }
        base = c === undefined ? undefined : seen.get(rel - dist);
        if (!base) throw malformed(`pack object ${i + 1} of ${count} (at pack offset ${rel}) is a delta on an offset where no object starts`);
        name = `pack object ${i + 1} of ${count} (a ${base.type ?? 'object'}, delta on pack object ${base.index + 1}, at pack offset ${rel})`;
      } else if (kind === 'ref-delta') {
        if (h.length < k + hashBytes) throw malformed(`pack object ${i + 1} of ${count} (at pack offset ${rel}) is cut off`);
        name = `pack object ${i + 1} of ${count} (a delta on object ${h.toString('hex', k, k + hashBytes)}, at pack offset ${rel})`;
        k += hashBytes;
      }
      const overCap = (what: string, n: number) =>
        rejected(`${name} ${what} ${n} bytes (${formatBytes(n)}), over the cap of ${caps.maxObjectBytes} bytes per object (${formatBytes(caps.maxObjectBytes)})`);
      // A delta's own data is loaded whole by git too: it must fit the cap as well.
      if (size > caps.maxObjectBytes) throw overCap(base || kind === 'ref-delta' ? 'carries delta data of' : 'declares', size);

      const isDelta = kind === 'ofs-delta' || kind === 'ref-delta';
      const { consumed, head } = await inflateEntry(win, pos + k, size, isDelta ? 20 : 0, name);
      let declared = size;
      if (isDelta) {
        const baseSize = deltaVarint(head, 0);
        const result = baseSize && deltaVarint(head, baseSize.next);
        if (!baseSize || !result) throw malformed(`${name} has a malformed delta header`);
        if (base && baseSize.value !== base.size) {
          throw malformed(`${name} is a delta for a base of ${baseSize.value} bytes, but its base has ${base.size}`);
        }
        declared = result.value;
        if (declared > caps.maxObjectBytes) throw overCap('declares', declared);
      }
      total += declared;
      largest = Math.max(largest, declared);
      if (total > caps.maxTotalBytes) {
        throw rejected(
          `${name} brings what the bundle's objects declare to ${total} bytes (${formatBytes(total)}), ` +
            `over the cap of ${caps.maxTotalBytes} bytes in total (${formatBytes(caps.maxTotalBytes)})`,
        );
      }
      seen.set(rel, { index: i, size: declared, type: isDelta ? base?.type : kind });
      pos += k + consumed;
    }
    const rest = win.size - pos;
    if (rest < hashBytes) throw malformed(`the bundle's pack is cut off: its ${hashBytes}-byte checksum is missing`);
    if (rest > hashBytes) throw malformed(`the bundle carries ${rest - hashBytes} bytes after its pack`);
    return { objects: count, totalBytes: total, largestBytes: largest };
  } finally {
    await fh.close();
  }
}
