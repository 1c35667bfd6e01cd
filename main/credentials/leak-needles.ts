// What the leak check looks for, and how it finds many needles in one pass.
// A needle is one credential value in one fixed byte encoding; escaped forms
// (JSON \u, URL %XX, mixed with plain characters) cannot be listed as needles
// (2^n mixtures), so they are decoded in small windows around each escape and
// the needles are searched in the decoded bytes (decodeEscapes).

export interface LeakNeedle {
  credentialId: string;
  encoding: string;
  bytes: Buffer;
}

/** Shorter fragments than this would match by chance in gigabytes of memory. */
export const MIN_NEEDLE_BYTES = 12;

/** Base64 of `value` as it appears inside a longer base64 text, for each of the 3 alignments. */
function base64Fragments(value: Buffer, alphabet: 'base64' | 'base64url'): string[] {
  const out: string[] = [];
  for (let k = 0; k < 3; k++) {
    const padded = Buffer.concat([Buffer.alloc(k), value]);
    const enc = padded.toString(alphabet);
    const drop = [0, 2, 3][k]!; // leading characters that depend on the unknown bytes before
    const stable = 4 * Math.floor(padded.length / 3); // trailing characters depend on the bytes after
    out.push(enc.slice(drop, stable));
  }
  return out;
}

function utf16be(value: string): Buffer {
  return Buffer.from(value, 'utf16le').swap16();
}

/**
 * The fixed encodings of one value. Base64 fragments at every alignment also
 * match inside the base64 of any longer text holding the value (a basic-auth
 * header, a JSON file), so `basic-auth(user)` is only a more precise label.
 */
export function needlesFor(credentialId: string, value: string, opts: { basicUsernames?: string[] } = {}): LeakNeedle[] {
  const raw = Buffer.from(value, 'utf8');
  const hex = raw.toString('hex');
  const candidates: Array<[string, Buffer]> = [
    ['raw', raw],
    ['utf16le', Buffer.from(value, 'utf16le')],
    ['utf16be', utf16be(value)],
    ['hex', Buffer.from(hex, 'latin1')],
    ['hex-upper', Buffer.from(hex.toUpperCase(), 'latin1')],
  ];
  for (const user of opts.basicUsernames ?? []) {
    candidates.push([`basic-auth(${user})`, Buffer.from(Buffer.from(`${user}:${value}`).toString('base64'), 'latin1')]);
  }
  base64Fragments(raw, 'base64').forEach((f, i) => candidates.push([`base64@${i}`, Buffer.from(f, 'latin1')]));
  base64Fragments(raw, 'base64url').forEach((f, i) => candidates.push([`base64url@${i}`, Buffer.from(f, 'latin1')]));
  const seen = new Set<string>();
  const needles: LeakNeedle[] = [];
  for (const [encoding, bytes] of candidates) {
    if (bytes.length < MIN_NEEDLE_BYTES) continue;
    const key = bytes.toString('latin1');
    if (seen.has(key)) continue;
    seen.add(key);
    needles.push({ credentialId, encoding, bytes });
  }
  return needles;
}

/**
 * Wu–Manber multi-needle search: one pass over the data whatever the number of
 * needles, skipping ahead by up to (shortest needle - 2) bytes where no needle
 * can end. Forty `indexOf` passes measured ~40 MB/s here; this is one pass.
 */
export class NeedleMatcher {
  readonly needles: readonly LeakNeedle[];
  readonly maxLength: number;
  private readonly m: number;
  private readonly shift: Uint8Array;
  /** Needles whose first m bytes end with a given 3-gram hash (shift 0). */
  private readonly buckets = new Map<number, number[]>();

  constructor(needles: readonly LeakNeedle[]) {
    this.needles = needles;
    this.maxLength = Math.max(0, ...needles.map((n) => n.bytes.length));
    this.m = Math.min(...needles.map((n) => n.bytes.length));
    if (needles.length && this.m < 3) throw new Error('a needle must be at least 3 bytes long');
    const m = this.m;
    this.shift = new Uint8Array(1 << 16).fill(Math.min(255, Math.max(1, m - 2)));
    needles.forEach((n, idx) => {
      const p = n.bytes;
      for (let q = 3; q <= m; q++) {
        const h = hash3(p[q - 3]!, p[q - 2]!, p[q - 1]!);
        const s = m - q;
        if (s < this.shift[h]!) this.shift[h] = s;
        if (s === 0) {
          const list = this.buckets.get(h);
          if (list) list.push(idx);
          else this.buckets.set(h, [idx]);
        }
      }
    });
  }

  /** Calls onHit(needleIndex, start) for every needle lying entirely in buf[from, to). */
  find(buf: Uint8Array, from: number, to: number, onHit: (needle: number, start: number) => void): void {
    if (!this.needles.length) return;
    const m = this.m;
    const shift = this.shift;
    const view = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
    let pos = from + m - 1; // last byte of the window of the first m bytes
    while (pos < to) {
      const h = hash3(buf[pos - 2]!, buf[pos - 1]!, buf[pos]!);
      const s = shift[h]!;
      if (s > 0) {
        pos += s;
        continue;
      }
      const start = pos - m + 1;
      for (const idx of this.buckets.get(h) ?? []) {
        const n = this.needles[idx]!.bytes;
        if (start + n.length <= to && view.compare(n, 0, n.length, start, start + n.length) === 0) onHit(idx, start);
      }
      pos += 1;
    }
  }
}

function hash3(a: number, b: number, c: number): number {
  return ((a << 8) ^ (b << 4) ^ c ^ (a >> 3) * 97) & 0xffff;
}

const HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 10; i++) HEX[0x30 + i] = i;
for (let i = 0; i < 6; i++) {
  HEX[0x41 + i] = 10 + i;
  HEX[0x61 + i] = 10 + i;
}

const JSON_SIMPLE: Record<number, number> = { 0x22: 0x22, 0x5c: 0x5c, 0x2f: 0x2f, 0x62: 8, 0x66: 12, 0x6e: 10, 0x72: 13, 0x74: 9 };

function hex4(buf: Uint8Array, i: number, end: number): number {
  if (i + 4 > end) return -1;
  const a = HEX[buf[i]!]!, b = HEX[buf[i + 1]!]!, c = HEX[buf[i + 2]!]!, d = HEX[buf[i + 3]!]!;
  return a < 0 || b < 0 || c < 0 || d < 0 ? -1 : (a << 12) | (b << 8) | (c << 4) | d;
}

/**
 * The escape starting at buf[i] (a JSON `\` escape or a URL `%XX`): its length
 * and the first byte it decodes to; len 0 when none starts there.
 */
export function escapeAt(buf: Uint8Array, i: number, end: number): { len: number; byte: number } {
  const c = buf[i];
  if (c === 0x25) {
    if (i + 2 < end && HEX[buf[i + 1]!]! >= 0 && HEX[buf[i + 2]!]! >= 0) return { len: 3, byte: (HEX[buf[i + 1]!]! << 4) | HEX[buf[i + 2]!]! };
    return NONE;
  }
  if (c !== 0x5c || i + 1 >= end) return NONE;
  const d = buf[i + 1]!;
  if (d === 0x75) {
    const cp = hex4(buf, i + 2, end);
    if (cp < 0) return NONE;
    // The first UTF-8 byte of the character (a lone surrogate: a lead byte of 4-byte UTF-8).
    return { len: 6, byte: cp < 0x80 ? cp : cp < 0x800 ? 0xc0 | (cp >> 6) : cp >= 0xd800 && cp < 0xe000 ? 0xf0 : 0xe0 | (cp >> 12) };
  }
  return JSON_SIMPLE[d] !== undefined ? { len: 2, byte: JSON_SIMPLE[d]! } : NONE;
}
const NONE = { len: 0, byte: 0 };

export interface DecodedWindow {
  bytes: Buffer;
  /** Maps a decoded index to the input range [start, end) it came from. */
  source(index: number): { start: number; end: number };
}

/**
 * Decodes JSON escapes (\uXXXX with surrogate pairs, \/ \" \\ \b \f \n \r \t)
 * and URL %XX escapes in buf[start, end), leaving every other byte as it is.
 * A value escaped character by character, or only in places, decodes to its
 * plain bytes, where the fixed needles find it.
 */
export function decodeEscapes(buf: Uint8Array, start: number, end: number): DecodedWindow {
  const src = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const out = Buffer.allocUnsafe(end - start);
  // Segments: decoded start, source start, decoded length, source length (equal for plain runs).
  const seg: number[] = [];
  let n = 0;
  let i = start;
  let nextA = -2;
  let nextB = -2;
  const plain = (upTo: number) => {
    if (upTo <= i) return;
    src.copy(out, n, i, upTo);
    seg.push(n, i, upTo - i, upTo - i);
    n += upTo - i;
    i = upTo;
  };
  while (i < end) {
    if (nextA !== -1 && nextA < i) nextA = src.indexOf(0x5c, i);
    if (nextB !== -1 && nextB < i) nextB = src.indexOf(0x25, i);
    let next = nextA < 0 ? nextB : nextB < 0 ? nextA : Math.min(nextA, nextB);
    if (next < 0 || next >= end) next = end;
    plain(next);
    if (i >= end) break;
    let len = escapeAt(src, i, end).len;
    if (!len) {
      plain(i + 1);
      continue;
    }
    let bytes: Buffer;
    if (src[i] === 0x25) bytes = Buffer.of((HEX[src[i + 1]!]! << 4) | HEX[src[i + 2]!]!);
    else if (src[i + 1] === 0x75) {
      let cp = hex4(src, i + 2, end);
      // A surrogate pair is two escapes for one character.
      if (cp >= 0xd800 && cp < 0xdc00 && src[i + 6] === 0x5c && src[i + 7] === 0x75) {
        const lo = hex4(src, i + 8, end);
        if (lo >= 0xdc00 && lo < 0xe000) {
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          len = 12;
        }
      }
      bytes = Buffer.from(String.fromCodePoint(cp), 'utf8');
    } else bytes = Buffer.of(JSON_SIMPLE[src[i + 1]!]!);
    bytes.copy(out, n);
    seg.push(n, i, bytes.length, len);
    n += bytes.length;
    i += len;
  }
  return {
    bytes: out.subarray(0, n),
    source(index: number) {
      // Binary search for the segment holding the decoded index.
      let lo = 0;
      let hi = seg.length / 4 - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (seg[mid * 4]! <= index) lo = mid;
        else hi = mid - 1;
      }
      const [d, s, dl, sl] = [seg[lo * 4]!, seg[lo * 4 + 1]!, seg[lo * 4 + 2]!, seg[lo * 4 + 3]!];
      if (dl === sl) return { start: s + (index - d), end: s + (index - d) + 1 };
      return { start: s, end: s + sl };
    },
  };
}
