// One pass over a byte source (a file, a git object, decompressed output) in
// bounded chunks: every fixed needle at once (NeedleMatcher), escaped forms
// decoded in windows around each escape, and compressed streams noted, then
// inflated one by one under caps and scanned the same way. Chunks overlap by
// enough bytes that nothing straddling a chunk boundary is missed.
import { open } from 'node:fs/promises';
import type { LeakHit, LeakScanned } from '../../common/credentials.js';
import { inflateAt, inflateSmall, plausibleStream, streamHeaderCandidates, type PositionalReader, type StreamKind } from './leak-inflate.js';
import { decodeEscapes, escapeAt, type LeakNeedle, NeedleMatcher } from './leak-needles.js';
import { pageEdges, PageSplitFinder, type PageEdge, type PageMap } from './leak-pages.js';

export interface ScanLimits {
  chunkBytes: number;
  maxHitsPerNeedle: number;
  /** Decompressed bytes scanned per stream. */
  maxStreamBytes: number;
  /** Decompressed bytes scanned per source, all streams together. */
  maxInflatedBytes: number;
  /** Candidate streams kept per source. */
  maxStreams: number;
}

export const DEFAULT_SCAN_LIMITS: ScanLimits = {
  chunkBytes: 16 * 1024 * 1024,
  maxHitsPerNeedle: 20,
  maxStreamBytes: 64 * 1024 * 1024,
  maxInflatedBytes: 1024 * 1024 * 1024,
  maxStreams: 200_000,
};

export type ScanHit = Omit<LeakHit, 'source'>;
export type SourceScan = Omit<LeakScanned, 'source'> & { hits: ScanHit[] };

/** Bytes a stream candidate needs after its header for the plausibility check. */
const HEAD_BYTES = 512;
const MAX_NOT_INFLATED_LISTED = 20;
/** Streams that fit in this much input and give at most this much output are inflated in JS. */
const SMALL_STREAM_INPUT = [8 * 1024, 64 * 1024];
const SMALL_STREAM_OUTPUT = 256 * 1024;

interface ScannerSink {
  hit(needle: LeakNeedle, offset: number, encoding: string, detail?: string): void;
  stream?(offset: number, kind: StreamKind): void;
  /** Page edges of a memory dump, and who collects the needle halves found at them. */
  pages?: { edges: Iterator<PageEdge>; finder: PageSplitFinder };
}

/**
 * Scans one logical byte stream given as views that overlap: each view starts
 * with the bytes the previous scan() said to carry, then new bytes. push()
 * feeds it from pieces of any size through a buffer of its own.
 */
class ByteScanner {
  /** Bytes at most carried from one view into the next (the overlap). */
  readonly keep: number;
  /** Source offset of the next view's first byte. */
  private base = 0;
  /** Bytes at the start of the next view already scanned for needles (the carried overlap). */
  private carry = 0;
  /** Source offset up to which escapes and stream headers were handled. */
  private processedTo = 0;
  private readonly escWindow: number;
  private readonly defer: number;
  private readonly seenEscaped = new Set<string>();
  private readonly needleBytes = new Uint8Array(256);
  /** The next page edge to look at. */
  private nextEdge: PageEdge | undefined;
  /** push()'s buffer, made on the first push. */
  private buf: Buffer | undefined;
  private filled = 0;

  constructor(
    private readonly matcher: NeedleMatcher,
    private readonly sink: ScannerSink,
    private readonly chunkBytes: number,
  ) {
    // An escaped byte takes at most 6 source bytes (\u00XX); the escape that
    // triggers a window may be anywhere inside the escaped value.
    this.escWindow = 6 * Math.max(1, matcher.maxLength);
    this.defer = Math.max(this.escWindow, HEAD_BYTES);
    this.keep = Math.max(2 * matcher.maxLength, this.defer + this.escWindow);
    for (const n of matcher.needles) for (const b of n.bytes) this.needleBytes[b] = 1;
  }

  push(data: Buffer): void {
    const buf = (this.buf ??= Buffer.allocUnsafe(Math.max(this.chunkBytes, 2 * this.keep) + this.keep));
    let at = 0;
    while (at < data.length) {
      const n = Math.min(buf.length - this.filled, data.length - at);
      data.copy(buf, this.filled, at, at + n);
      this.filled += n;
      at += n;
      if (this.filled === buf.length) {
        const carried = this.scan(buf, false);
        buf.copy(buf, 0, buf.length - carried);
        this.filled = carried;
      }
    }
  }

  end(): void {
    this.scan(this.buf ? this.buf.subarray(0, this.filled) : Buffer.alloc(0), true);
  }

  /**
   * Scans `view`, which starts with the bytes the last call said to carry, and
   * returns how many bytes at its end the next view must start with.
   */
  scan(view: Buffer, final: boolean): number {
    const { base, carry } = this;
    const needles = this.matcher.needles;
    this.matcher.find(view, 0, view.length, (idx, start) => {
      if (start + needles[idx]!.bytes.length > carry) this.sink.hit(needles[idx]!, base + start, needles[idx]!.encoding);
    });
    const from = Math.max(0, this.processedTo - base);
    const limit = final ? view.length : Math.max(from, view.length - this.defer);
    this.escapes(view, from, limit);
    if (this.sink.stream) {
      for (const c of streamHeaderCandidates(view, from, limit)) {
        if (plausibleStream(view.subarray(c.offset, c.offset + HEAD_BYTES), c.kind)) this.sink.stream(base + c.offset, c.kind);
      }
    }
    this.processedTo = base + limit;
    this.pageEdges(view, final);
    if (final) return 0;
    const keep = Math.min(this.keep, view.length);
    this.base += view.length - keep;
    this.carry = keep;
    return keep;
  }

  /** Page edges whose bytes on both sides (one needle length) are in view. */
  private pageEdges(view: Buffer, final: boolean): void {
    const pages = this.sink.pages;
    if (!pages) return;
    const upTo = this.base + view.length - (final ? 0 : this.matcher.maxLength);
    for (;;) {
      if (!this.nextEdge) {
        const n = pages.edges.next();
        if (n.done) return;
        this.nextEdge = n.value;
      }
      const edge = this.nextEdge;
      if (edge.offset > upTo) return;
      this.nextEdge = undefined;
      const i = edge.offset - this.base;
      if (i < 0) continue; // before the data (cannot happen with a sane map)
      if (edge.end) pages.finder.pageEnd(view, i, edge.offset);
      if (edge.start) pages.finder.pageStart(view, i, edge.offset);
    }
  }

  /** Decodes windows around every escape in [from, limit) and looks for the needles in them. */
  private escapes(view: Buffer, from: number, limit: number): void {
    const w = this.escWindow;
    let winStart = -1;
    let winEnd = -1;
    const flush = () => {
      if (winStart >= 0) this.scanDecoded(view, winStart, winEnd);
    };
    // Next backslash and next percent sign, each searched natively and only once passed.
    let nextA = -2;
    let nextB = -2;
    for (let i = from; i < limit; i++) {
      if (nextA !== -1 && nextA < i) nextA = view.indexOf(0x5c, i);
      if (nextB !== -1 && nextB < i) nextB = view.indexOf(0x25, i);
      const next = nextA < 0 ? nextB : nextB < 0 ? nextA : Math.min(nextA, nextB);
      if (next < 0 || next >= limit) break;
      i = next;
      const { len, byte } = escapeAt(view, i, view.length);
      // Only an escape of a byte some needle holds can be part of an escaped value.
      if (!len || !this.needleBytes[byte]) continue;
      const s = Math.max(0, i - w);
      const e = Math.min(view.length, i + w);
      if (winStart >= 0 && s <= winEnd) winEnd = Math.max(winEnd, e);
      else {
        flush();
        winStart = s;
        winEnd = e;
      }
      i += len - 1;
    }
    flush();
  }

  private scanDecoded(view: Buffer, start: number, end: number): void {
    const d = decodeEscapes(view, start, end);
    const needles = this.matcher.needles;
    this.matcher.find(d.bytes, 0, d.bytes.length, (idx, at) => {
      const n = needles[idx]!;
      const srcStart = d.source(at).start;
      const srcEnd = d.source(at + n.bytes.length - 1).end;
      if (srcEnd - srcStart === n.bytes.length) return; // no escape inside: the plain pass reports it
      const key = `${idx}:${this.base + srcStart}`;
      if (this.seenEscaped.has(key)) return;
      if (this.seenEscaped.size < 10_000) this.seenEscaped.add(key);
      const kind = view.subarray(srcStart, srcEnd).includes(0x25) ? 'url-escape' : 'json-escape';
      this.sink.hit(n, this.base + srcStart, `${kind}:${n.encoding}`);
    });
  }
}

/**
 * Scans everything `read` returns, from offset 0 to its end, then inflates the
 * compressed streams it found (one level) and scans their output. Memory:
 * one chunk plus the overlap, and one inflate window at a time.
 */
export async function scanReader(
  read: PositionalReader,
  needles: LeakNeedle[] | NeedleMatcher,
  limits: Partial<ScanLimits> = {},
  opts: { pageMap?: PageMap; /** Known total size: a smaller buffer for small sources (git objects). */ size?: number } = {},
): Promise<SourceScan> {
  const lim = { ...DEFAULT_SCAN_LIMITS, ...limits };
  // One matcher for many small sources: building one costs a 64 KiB table.
  const matcher = needles instanceof NeedleMatcher ? needles : new NeedleMatcher(needles);
  const pageMap = opts.pageMap;
  const hits: ScanHit[] = [];
  const counts = new Map<LeakNeedle, number>();
  const addHit = (n: LeakNeedle, offset: number, encoding: string, detail?: string) => {
    const c = (counts.get(n) ?? 0) + 1;
    counts.set(n, c);
    if (c <= lim.maxHitsPerNeedle) hits.push({ credentialId: n.credentialId, encoding, offset, ...(detail ? { detail } : {}) });
  };
  const streams: Array<{ offset: number; kind: StreamKind }> = [];
  let streamsDropped = 0;
  const finder = pageMap ? new PageSplitFinder(matcher.needles) : undefined;
  const scanner = new ByteScanner(matcher, {
    hit: addHit,
    ...(pageMap && finder ? { pages: { edges: pageEdges(pageMap), finder } } : {}),
    stream: (offset, kind) => {
      if (streams.length < lim.maxStreams) streams.push({ offset, kind });
      else streamsDropped++;
    },
  }, lim.chunkBytes);
  // Reads land in place, in two buffers taken in turn: the next chunk is read into one while
  // the other is scanned (reads run off the main thread), and only the overlap is copied
  // across. Copying every chunk into the scanner and a fresh buffer per read cost more than
  // the needle search (0.67 s and 1.1 s of system time per GiB of guest memory). A failed read
  // is kept until the loop reaches it and thrown there, so a scan that throws first leaves no
  // unhandled rejection behind.
  const keep = scanner.keep;
  const room = opts.size !== undefined ? Math.min(lim.chunkBytes, opts.size + 1) : lim.chunkBytes;
  const bufs = [Buffer.allocUnsafe(keep + room), Buffer.allocUnsafe(keep + room)] as const;
  const readAhead = (into: Buffer, at: number) => read(at, into.length, into).then((chunk) => ({ chunk }), (err: unknown) => ({ err }));
  let pos = 0;
  let cur = 0;
  let carried = 0;
  let next = readAhead(bufs[0].subarray(keep), 0);
  for (;;) {
    const got = await next;
    if ('err' in got) throw got.err;
    const chunk = got.chunk;
    if (!chunk.length) break;
    if (chunk.length > room) throw new Error(`the source answered ${chunk.length} bytes where ${room} were asked for`);
    const here = bufs[cur]!;
    const there = bufs[1 - cur]!;
    // A reader may answer with a buffer of its own instead of filling the one it was given.
    if (chunk.buffer !== here.buffer || chunk.byteOffset !== here.byteOffset + keep) chunk.copy(here, keep);
    pos += chunk.length;
    next = readAhead(there.subarray(keep), pos);
    carried = scanner.scan(here.subarray(keep - carried, keep + chunk.length), false);
    here.copy(there, keep - carried, keep + chunk.length - carried, keep + chunk.length);
    cur = 1 - cur;
  }
  scanner.scan(bufs[cur]!.subarray(keep - carried, keep), true);
  for (const s of finder?.results() ?? []) {
    const where = (at: number) => (at >= 0 ? `the page edge at ${at}` : 'some page edge');
    addHit(s.needle, Math.max(s.headAt, s.tailAt), `${s.needle.encoding}+page-split`, `first ${s.k} bytes end a page (${where(s.tailAt)}), the rest starts another (${where(s.headAt)})`);
  }

  const notInflated: NonNullable<SourceScan['notInflated']> = [];
  let notInflatedCount = 0;
  const skip = (offset: number, kind: StreamKind, reason: string) => {
    notInflatedCount++;
    if (notInflated.length < MAX_NOT_INFLATED_LISTED) notInflated.push({ offset, kind, reason });
  };
  let inflatedBytes = 0;
  let inflatedStreams = 0;
  let coveredTo = 0; // compressed bytes of the last stream: candidates inside it are its own data
  for (const s of streams) {
    if (s.offset < coveredTo) continue;
    const room = lim.maxInflatedBytes - inflatedBytes;
    if (room <= 0) {
      skip(s.offset, s.kind, `not inflated: ${lim.maxInflatedBytes} decompressed bytes already scanned in this source (cap)`);
      continue;
    }
    const cap = Math.min(lim.maxStreamBytes, room);
    const hitInner = (n: LeakNeedle, innerOffset: number, enc: string) => addHit(n, s.offset, `${s.kind}>${enc}`, `at ${innerOffset} of the decompressed data`);
    // Most streams are small: inflate those in JS, with no zlib set-up per stream.
    let small: ReturnType<typeof inflateSmall> = null;
    for (const input of SMALL_STREAM_INPUT) {
      const head = await read(s.offset, input);
      small = inflateSmall(head, s.kind, Math.min(cap, SMALL_STREAM_OUTPUT));
      if (small || head.length < input) break;
    }
    if (small) {
      if (small.out.length) {
        const inner = new ByteScanner(matcher, { hit: hitInner }, small.out.length + 1);
        inner.push(small.out);
        inner.end();
        inflatedStreams++;
        inflatedBytes += small.out.length;
      }
      if (small.status === 'end') coveredTo = s.offset + small.inBytes;
      continue;
    }
    const inner = new ByteScanner(matcher, { hit: hitInner }, Math.min(lim.chunkBytes, cap + 1, 1024 * 1024));
    const r = await inflateAt(read, s.offset, s.kind, cap, (c) => inner.push(c));
    inner.end();
    if (r.outBytes > 0) {
      inflatedStreams++;
      inflatedBytes += r.outBytes;
      coveredTo = s.offset + r.inBytes;
    }
    if (r.capped) skip(s.offset, s.kind, `inflated only the first ${cap} bytes (cap)`);
  }
  if (streamsDropped) {
    notInflatedCount += streamsDropped;
  }
  const error = notInflatedCount
    ? `${notInflatedCount} compressed stream(s) not fully inflated because of the caps (${lim.maxStreamBytes} bytes per stream, ${lim.maxInflatedBytes} per source, ${lim.maxStreams} streams)`
    : undefined;
  return {
    bytes: pos,
    hits,
    inflated: { streams: inflatedStreams, bytes: inflatedBytes },
    ...(notInflatedCount ? { notInflated, notInflatedCount } : {}),
    ...(error ? { error } : {}),
  };
}

export function bufferReader(data: Buffer): PositionalReader {
  return async (position, length, into) => {
    const part = data.subarray(position, position + length);
    return into ? into.subarray(0, part.copy(into)) : part;
  };
}

/** Streams a file through scanReader; the file is read in chunks, never whole. */
export async function scanFile(file: string, needles: LeakNeedle[], limits: Partial<ScanLimits> = {}, pageMap?: PageMap): Promise<SourceScan> {
  const fh = await open(file, 'r');
  try {
    return await scanReader(async (position, length, into) => {
      const b = into ?? Buffer.allocUnsafe(length);
      const { bytesRead } = await fh.read(b, 0, Math.min(length, b.length), position);
      return b.subarray(0, bytesRead);
    }, needles, limits, { ...(pageMap ? { pageMap } : {}) });
  } finally {
    await fh.close();
  }
}
