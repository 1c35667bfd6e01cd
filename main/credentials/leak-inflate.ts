// Compressed streams inside scanned data: gzip members and zlib streams (git
// objects, PNG, HTTP bodies). Headers are found in the data, checked cheaply
// here in JS (a Node zlib call costs 0.1-0.4 ms, too much for every 0x78 byte
// of a memory dump), and only then inflated by Node's zlib, streaming, with an
// output cap, into a scanner.
import zlib from 'node:zlib';
import { drainedOrClosed } from '../streams/drained.js';

export type StreamKind = 'gzip' | 'zlib';

/**
 * Reads up to `length` bytes at `position` of the scanned data (fewer at its end). Given
 * `into` (at least `length` long), it may read into it and answer with the part it filled.
 */
export type PositionalReader = (position: number, length: number, into?: Buffer) => Promise<Buffer>;

// Standard zlib headers (CMF 0x78: deflate, 32 KiB window) at the four levels;
// git, Python and Node write these. Other window sizes are rare enough to skip.
const ZLIB_FLG = new Set([0x01, 0x5e, 0x9c, 0xda]);

/** Offsets in [from, to) where a gzip member or zlib stream may start (header bytes only; may read past `to`). */
export function streamHeaderCandidates(buf: Buffer, from: number, to: number): Array<{ offset: number; kind: StreamKind }> {
  const out: Array<{ offset: number; kind: StreamKind }> = [];
  for (let i = buf.indexOf(0x78, from); i >= 0 && i < to && i + 1 < buf.length; i = buf.indexOf(0x78, i + 1)) {
    if (ZLIB_FLG.has(buf[i + 1]!)) out.push({ offset: i, kind: 'zlib' });
  }
  for (let i = buf.indexOf(0x1f, from); i >= 0 && i < to && i + 3 < buf.length; i = buf.indexOf(0x1f, i + 1)) {
    // Magic, method deflate, reserved flag bits clear.
    if (buf[i + 1] === 0x8b && buf[i + 2] === 8 && (buf[i + 3]! & 0xe0) === 0) out.push({ offset: i, kind: 'gzip' });
  }
  return out.sort((a, b) => a.offset - b.offset);
}

/** Where the deflate data of a gzip member starts (after its optional fields), or -1. */
function gzipDataOffset(b: Buffer): number {
  if (b.length < 10) return -1;
  const flg = b[3]!;
  let p = 10;
  if (flg & 4) {
    if (p + 2 > b.length) return -1;
    p += 2 + b.readUInt16LE(p);
  }
  for (const bit of [8, 16]) {
    if (!(flg & bit)) continue;
    const nul = b.indexOf(0, p);
    if (nul < 0 || nul - p > 1024) return -1; // file names and comments are short
    p = nul + 1;
  }
  if (flg & 2) p += 2;
  return p < b.length ? p : -1;
}

/**
 * A cheap test that `head` (the first bytes of a candidate) starts a real
 * stream: the header, then the first deflate block decoded for up to 64
 * symbols (stored: LEN is the complement of NLEN; dynamic: the code-length and
 * literal codes are valid prefix codes; every distance within the output so far).
 * Running out of bytes counts as plausible.
 */
export function plausibleStream(head: Buffer, kind: StreamKind): boolean {
  let start: number;
  if (kind === 'zlib') {
    if (head.length < 3 || (head[0]! * 256 + head[1]!) % 31 !== 0 || head[1]! & 0x20) return false;
    start = 2;
  } else {
    start = gzipDataOffset(head);
    if (start < 0) return false;
  }
  return checkDeflate(head, start);
}

const OUT_OF_INPUT = Symbol('out of input');
const FIXED = (() => {
  const lengths = new Uint8Array(288);
  lengths.fill(8, 0, 144).fill(9, 144, 256).fill(7, 256, 280).fill(8, 280, 288);
  return { lit: huffman(lengths)!, dist: huffman(new Uint8Array(30).fill(5))! };
})();
const CL_ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];
const LEN_BASE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LEN_EXTRA = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DIST_BASE = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577];
const DIST_EXTRA = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];

interface Huffman {
  count: Uint16Array;
  symbol: Uint16Array;
}

/** Canonical Huffman code from code lengths (as in zlib's puff.c); null when over-subscribed. */
function huffman(lengths: Uint8Array): Huffman | null {
  const count = new Uint16Array(16);
  for (const l of lengths) count[l]!++;
  if (count[0] === lengths.length) return { count, symbol: new Uint16Array(0) };
  let left = 1;
  for (let len = 1; len < 16; len++) {
    left = left * 2 - count[len]!;
    if (left < 0) return null;
  }
  const offs = new Uint16Array(16);
  for (let len = 1; len < 15; len++) offs[len + 1] = offs[len]! + count[len]!;
  const symbol = new Uint16Array(lengths.length);
  lengths.forEach((l, s) => {
    if (l) symbol[offs[l]!++] = s;
  });
  return { count, symbol };
}

type PuffStatus = 'end' | 'cap' | 'need-more' | 'bad';

/**
 * A small inflater in the manner of zlib's puff.c: decodes raw deflate from
 * buf[start] until the final block ends ('end'), `maxOut` bytes came out
 * ('cap'), the input runs out ('need-more') or the data is not deflate ('bad').
 * With `collect` false it only follows the codes (no output buffer), and stops
 * after `maxSymbols` symbols of the first block. Slower per byte than zlib but
 * with no set-up cost: most streams in a dump or a git pack are small.
 */
function puff(buf: Buffer, start: number, opts: { maxOut: number; collect: boolean; maxSymbols?: number }): { status: PuffStatus; out: Buffer; consumed: number } {
  let pos = start;
  let bitBuf = 0;
  let bitCnt = 0;
  let out = Buffer.allocUnsafe(opts.collect ? Math.min(opts.maxOut, 16 * 1024) : 0);
  let produced = 0;
  let symbols = 0;
  const maxSymbols = opts.maxSymbols ?? Infinity;
  const bits = (need: number): number => {
    let val = bitBuf;
    while (bitCnt < need) {
      if (pos >= buf.length) throw OUT_OF_INPUT;
      val |= buf[pos++]! << bitCnt;
      bitCnt += 8;
    }
    bitBuf = val >>> need;
    bitCnt -= need;
    return val & ((1 << need) - 1);
  };
  const decode = (h: Huffman): number => {
    let code = 0, first = 0, index = 0;
    for (let len = 1; len < 16; len++) {
      code |= bits(1);
      const count = h.count[len]!;
      if (code - count < first) return h.symbol[index + (code - first)]!;
      index += count;
      first = (first + count) << 1;
      code <<= 1;
    }
    return -1;
  };
  const room = (n: number): boolean => {
    if (!opts.collect) return true;
    if (produced + n > opts.maxOut) return false;
    if (produced + n > out.length) {
      const grown = Buffer.allocUnsafe(Math.min(opts.maxOut, Math.max(out.length * 2, produced + n)));
      out.copy(grown, 0, 0, produced);
      out = grown;
    }
    return true;
  };
  const result = (status: PuffStatus) => ({ status, out: out.subarray(0, opts.collect ? produced : 0), consumed: pos - start });
  try {
    let last = 0;
    do {
      last = bits(1);
      const type = bits(2);
      if (type === 3) return result('bad');
      if (type === 0) {
        bitBuf = 0; // to a byte boundary
        bitCnt = 0;
        if (pos + 4 > buf.length) throw OUT_OF_INPUT;
        const len = buf.readUInt16LE(pos);
        if ((len ^ 0xffff) !== buf.readUInt16LE(pos + 2)) return result('bad');
        pos += 4;
        if (!opts.collect) return result('end'); // plausible enough
        if (!room(len)) return result('cap');
        if (pos + len > buf.length) throw OUT_OF_INPUT;
        buf.copy(out, produced, pos, pos + len);
        produced += len;
        pos += len;
        continue;
      }
      let lit = FIXED.lit;
      let dist = FIXED.dist;
      if (type === 2) {
        const nlen = bits(5) + 257, ndist = bits(5) + 1, ncode = bits(4) + 4;
        if (nlen > 286 || ndist > 30) return result('bad');
        const cl = new Uint8Array(19);
        for (let i = 0; i < ncode; i++) cl[CL_ORDER[i]!] = bits(3);
        const clCode = huffman(cl);
        if (!clCode || !clCode.symbol.length) return result('bad');
        const lengths = new Uint8Array(nlen + ndist);
        for (let i = 0; i < nlen + ndist; ) {
          const sym = decode(clCode);
          if (sym < 0) return result('bad');
          if (sym < 16) {
            lengths[i++] = sym;
            continue;
          }
          let rep = 0, len = 0;
          if (sym === 16) {
            if (i === 0) return result('bad');
            len = lengths[i - 1]!;
            rep = 3 + bits(2);
          } else rep = sym === 17 ? 3 + bits(3) : 11 + bits(7);
          if (i + rep > nlen + ndist) return result('bad');
          lengths.fill(len, i, i + rep);
          i += rep;
        }
        if (lengths[256] === 0) return result('bad'); // no end-of-block code
        const l = huffman(lengths.subarray(0, nlen));
        const d = huffman(lengths.subarray(nlen));
        if (!l || !d) return result('bad');
        lit = l;
        dist = d;
      }
      for (;;) {
        if (++symbols > maxSymbols) return result('end');
        const sym = decode(lit);
        if (sym < 0 || sym > 285) return result('bad');
        if (sym === 256) break;
        if (sym < 256) {
          if (!room(1)) return result('cap');
          if (opts.collect) out[produced] = sym;
          produced++;
          continue;
        }
        const l = sym - 257;
        const length = LEN_BASE[l]! + bits(LEN_EXTRA[l]!);
        const ds = decode(dist);
        if (ds < 0 || ds > 29) return result('bad');
        const back = DIST_BASE[ds]! + bits(DIST_EXTRA[ds]!);
        if (back > produced) return result('bad'); // nothing that far back: not deflate from here
        if (!room(length)) return result('cap');
        if (opts.collect) for (let i = 0; i < length; i++, produced++) out[produced] = out[produced - back]!;
        else produced += length;
      }
    } while (!last);
    return result('end');
  } catch (err) {
    if (err === OUT_OF_INPUT) return result('need-more');
    throw err;
  }
}

function checkDeflate(buf: Buffer, start: number): boolean {
  const r = puff(buf, start, { maxOut: Infinity, collect: false, maxSymbols: 64 });
  return r.status !== 'bad';
}

/**
 * Inflates a stream whose compressed bytes all lie in `head` (from its header)
 * in JS, when its output is at most `maxOut`: 'end' (done), 'bad' (not deflate
 * after all; `out` holds what came before, as zlib would have streamed it), or
 * null when it needs more input or more output room: use inflateAt then.
 */
export function inflateSmall(head: Buffer, kind: StreamKind, maxOut: number): { status: 'end' | 'bad'; out: Buffer; inBytes: number } | null {
  const start = kind === 'zlib' ? 2 : gzipDataOffset(head);
  if (start < 0) return { status: 'bad', out: Buffer.alloc(0), inBytes: 0 };
  const r = puff(head, start, { maxOut, collect: true });
  if (r.status === 'end' || r.status === 'bad') return { status: r.status, out: r.out, inBytes: start + r.consumed };
  return null;
}

export interface InflateResult {
  /** Decompressed bytes handed to the sink. */
  outBytes: number;
  /** Compressed bytes the stream used (from its header). */
  inBytes: number;
  /** The output cap stopped it before the stream's end. */
  capped: boolean;
  /** Why it ended early, if it did (corrupt data, input ended). */
  error?: string;
}

/**
 * Inflates the stream at `offset`, handing output chunks to `sink` until the
 * stream ends, fails, or `maxOut` bytes came out. Memory: one input block
 * and zlib's own window, whatever the stream declares.
 */
export async function inflateAt(read: PositionalReader, offset: number, kind: StreamKind, maxOut: number, sink: (chunk: Buffer) => void): Promise<InflateResult> {
  // Raw deflate after the header we parsed ourselves: Node's gunzip fails on
  // bytes after a member (and drops output it had), and a checksum that does
  // not match (a stream cut by a page boundary) must not lose what came before.
  const head = await read(offset, 2048);
  const dataStart = kind === 'zlib' ? 2 : gzipDataOffset(head);
  if (dataStart < 0) return { outBytes: 0, inBytes: 0, capped: false, error: 'no gzip header' };
  const z = zlib.createInflateRaw();
  let outBytes = 0;
  let capped = false;
  let ended = false;
  let error: string | undefined;
  z.on('data', (c: Buffer) => {
    if (capped) return;
    const room = maxOut - outBytes;
    if (c.length >= room) {
      capped = c.length > room;
      if (room > 0) sink(c.subarray(0, room));
      outBytes = maxOut;
      if (capped) z.destroy();
      return;
    }
    sink(c);
    outBytes += c.length;
  });
  const done = new Promise<void>((resolve) => {
    z.on('end', () => {
      ended = true;
      resolve();
    });
    z.on('error', (e) => {
      error = e.message;
      resolve();
    });
    z.on('close', () => resolve());
  });
  let pos = offset + dataStart;
  const BLOCK = 64 * 1024;
  while (!ended && !capped && error === undefined) {
    const block = await read(pos, BLOCK);
    if (!block.length) {
      z.end();
      break;
    }
    pos += block.length;
    if (!z.write(block)) await drainedOrClosed(z);
    // Let zlib run on what it has before deciding to read more.
    await new Promise<void>((r) => setImmediate(r));
  }
  if (!ended && !capped && error === undefined) await done;
  if (!z.destroyed) z.destroy();
  return { outBytes, inBytes: dataStart + z.bytesWritten, capped, ...(error && !capped ? { error } : {}) };
}
