// A guest memory dump is physical memory: a value a process holds in one
// virtual buffer can sit on two physical pages that are nowhere near each other
// in the dump, so no contiguous search finds it. Here each page's first and
// last bytes are matched against the start and end of every fixed needle, and
// a value is reported when some page ends with its first k bytes and some other
// page starts with the rest. Only fixed encodings: an escaped or compressed
// value split across pages is not reassembled.
import { open } from 'node:fs/promises';
import type { LeakNeedle } from './leak-needles.js';

export const PAGE_BYTES = 4096;
/** Bytes of a value that must be matched exactly at page edges for a split hit (as for a whole needle). */
const MIN_EVIDENCE = 12;

/** The dump's RAM blocks: where each lies in the file and at which physical address it starts. */
export interface PageMap {
  segments: Array<{ offset: number; size: number; paddr: number }>;
}

export interface PageEdge {
  offset: number;
  /** A page starts here / a page ends just before here. */
  start: boolean;
  end: boolean;
}

/** The page edges of a map in file order, generated as needed (a 2 GiB guest has half a million). */
export function* pageEdges(map: PageMap): Generator<PageEdge> {
  const segs = [...map.segments].sort((a, b) => a.offset - b.offset);
  let pending: PageEdge | undefined;
  const emit = function* (e: PageEdge): Generator<PageEdge> {
    if (pending && pending.offset === e.offset) {
      pending.start ||= e.start;
      pending.end ||= e.end;
      return;
    }
    if (pending) yield pending;
    pending = e;
  };
  for (const s of segs) {
    yield* emit({ offset: s.offset, start: true, end: false });
    const first = s.offset + ((PAGE_BYTES - (s.paddr % PAGE_BYTES)) % PAGE_BYTES);
    for (let b = first; b < s.offset + s.size; b += PAGE_BYTES) if (b > s.offset) yield* emit({ offset: b, start: true, end: true });
    yield* emit({ offset: s.offset + s.size, start: false, end: true });
  }
  if (pending) yield pending;
}

/**
 * Reads the PT_LOAD segments of an ELF64 little-endian core file (QEMU's
 * dump-guest-memory with paging off); null when the file is not such a dump.
 */
export async function elfPageMap(file: string): Promise<PageMap | null> {
  const fh = await open(file, 'r');
  try {
    const eh = Buffer.alloc(64);
    await fh.read(eh, 0, 64, 0);
    if (eh.readUInt32BE(0) !== 0x7f454c46 || eh[4] !== 2 || eh[5] !== 1) return null;
    const phoff = Number(eh.readBigUInt64LE(0x20));
    const phentsize = eh.readUInt16LE(0x36);
    let phnum = eh.readUInt16LE(0x38);
    if (phnum === 0xffff) {
      // PN_XNUM: the real count is in section header 0's sh_info.
      const shoff = Number(eh.readBigUInt64LE(0x28));
      const sh = Buffer.alloc(64);
      await fh.read(sh, 0, 64, shoff);
      phnum = sh.readUInt32LE(0x2c);
    }
    if (phentsize < 56 || phnum > 1_000_000) return null;
    const ph = Buffer.alloc(phentsize * phnum);
    await fh.read(ph, 0, ph.length, phoff);
    const segments: PageMap['segments'] = [];
    for (let i = 0; i < phnum; i++) {
      const p = ph.subarray(i * phentsize);
      if (p.readUInt32LE(0) !== 1) continue; // PT_LOAD
      const size = Number(p.readBigUInt64LE(32));
      if (size) segments.push({ offset: Number(p.readBigUInt64LE(8)), paddr: Number(p.readBigUInt64LE(24)), size });
    }
    return { segments };
  } finally {
    await fh.close();
  }
}

const u32 = (b: Uint8Array, i: number) => ((b[i]! << 24) | (b[i + 1]! << 16) | (b[i + 2]! << 8) | b[i + 3]!) >>> 0;
const u24 = (b: Uint8Array, i: number) => (b[i]! << 16) | (b[i + 1]! << 8) | b[i + 2]!;

/** Collects needle halves at page edges while the dump streams past, then pairs them. */
export class PageSplitFinder {
  /** last 4 bytes of a prefix of length k >= 4 → (needle, k) */
  private readonly tailIndex = new Map<number, Array<[number, number]>>();
  /** first 4 bytes of a suffix starting at k (length >= 4) → (needle, k) */
  private readonly headIndex = new Map<number, Array<[number, number]>>();
  /** (needle, k) → file offset of the page edge where that half was seen. */
  private readonly tails = new Map<string, number>();
  private readonly heads = new Map<string, number>();
  /** The last 1-3 bytes and the first 1-3 bytes of every page, for halves too short to index (bitmaps: 2 MiB each at most). */
  private readonly shortTails = [new Bits(8), new Bits(16), new Bits(24)];
  private readonly shortHeads = [new Bits(8), new Bits(16), new Bits(24)];

  constructor(private readonly needles: readonly LeakNeedle[]) {
    needles.forEach((n, idx) => {
      const p = n.bytes;
      for (let k = 1; k < p.length; k++) {
        if (k >= 4) push(this.tailIndex, u32(p, k - 4), [idx, k]);
        if (p.length - k >= 4) push(this.headIndex, u32(p, k), [idx, k]);
      }
    });
  }

  /** A page ends at view[i] (exclusive): look at the bytes before it. */
  pageEnd(view: Uint8Array, i: number, offset: number): void {
    if (i >= 4) {
      for (const [idx, k] of this.tailIndex.get(u32(view, i - 4)) ?? []) {
        const p = this.needles[idx]!.bytes;
        if (i >= k && Buffer.compare(view.subarray(i - k, i), p.subarray(0, k)) === 0) this.tails.set(`${idx}:${k}`, offset);
      }
    }
    for (let len = 1; len <= 3 && len <= i; len++) this.shortTails[len - 1]!.add(len === 3 ? u24(view, i - 3) : len === 2 ? (view[i - 2]! << 8) | view[i - 1]! : view[i - 1]!);
  }

  /** A page starts at view[i]: look at the bytes from it on. */
  pageStart(view: Uint8Array, i: number, offset: number): void {
    if (i + 4 <= view.length) {
      for (const [idx, k] of this.headIndex.get(u32(view, i)) ?? []) {
        const p = this.needles[idx]!.bytes;
        const rest = p.length - k;
        if (i + rest <= view.length && Buffer.compare(view.subarray(i, i + rest), p.subarray(k)) === 0) this.heads.set(`${idx}:${k}`, offset);
      }
    }
    for (let len = 1; len <= 3 && i + len <= view.length; len++) this.shortHeads[len - 1]!.add(len === 3 ? u24(view, i) : len === 2 ? (view[i]! << 8) | view[i + 1]! : view[i]!);
  }

  /** Needles whose two halves were seen on different page edges (the same edge is a contiguous match, found already). */
  results(): Array<{ needle: LeakNeedle; k: number; tailAt: number; headAt: number }> {
    const out: Array<{ needle: LeakNeedle; k: number; tailAt: number; headAt: number }> = [];
    const seen = new Set<number>();
    this.needles.forEach((n, idx) => {
      const p = n.bytes;
      for (let k = 1; k < p.length; k++) {
        const key = `${idx}:${k}`;
        const rest = p.length - k;
        const tailAt = k >= 4 ? this.tails.get(key) : this.shortTails[k - 1]!.has(shortKey(p, 0, k)) ? -1 : undefined;
        const headAt = rest >= 4 ? this.heads.get(key) : this.shortHeads[rest - 1]!.has(shortKey(p, k, rest)) ? -1 : undefined;
        if (tailAt === undefined || headAt === undefined || (tailAt === headAt && tailAt >= 0)) continue;
        // A half of 1-3 bytes is no evidence (some page always ends so): count only the halves matched exactly.
        if ((k >= 4 ? k : 0) + (rest >= 4 ? rest : 0) < MIN_EVIDENCE) continue;
        if (seen.has(idx)) continue;
        seen.add(idx);
        out.push({ needle: n, k, tailAt, headAt });
      }
    });
    return out;
  }
}

function shortKey(p: Uint8Array, at: number, len: number): number {
  return len === 3 ? u24(p, at) : len === 2 ? (p[at]! << 8) | p[at + 1]! : p[at]!;
}

class Bits {
  private readonly words: Uint32Array;
  constructor(bits: number) {
    this.words = new Uint32Array(Math.max(1, (1 << bits) >>> 5));
  }
  add(n: number): void {
    this.words[n >>> 5]! |= 1 << (n & 31);
  }
  has(n: number): boolean {
    return (this.words[n >>> 5]! & (1 << (n & 31))) !== 0;
  }
}

function push<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const l = m.get(k);
  if (l) l.push(v);
  else m.set(k, [v]);
}
