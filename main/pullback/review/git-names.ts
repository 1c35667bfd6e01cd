// Path names from git are bytes, not UTF-8. Decoding them with replacement
// characters would show two different names (say "a\xff" and "a\xfe") as the
// same string, so a change could hide behind another file's name. Invalid bytes
// become lone surrogates U+DC80..U+DCFF instead (Python's "surrogateescape"):
// valid UTF-8 never decodes to a surrogate, so the mapping is one to one and
// reversible, survives JSON and structured clone, and escapeName() shows those
// bytes as \xNN.
import { isUtf8 } from 'node:buffer';

const ESCAPE_BASE = 0xdc00;

/** Length of the valid UTF-8 sequence starting at `i`, or 0 when the byte there does not start one. */
function sequenceLength(b: Buffer, i: number): number {
  const c = b[i]!;
  if (c < 0x80) return 1;
  const cont = (k: number) => i + k < b.length && (b[i + k]! & 0xc0) === 0x80;
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    if (!cont(1) || !cont(2)) return 0;
    const c1 = b[i + 1]!;
    if (c === 0xe0 && c1 < 0xa0) return 0; // overlong
    if (c === 0xed && c1 >= 0xa0) return 0; // UTF-16 surrogates are not valid UTF-8
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    const c1 = b[i + 1]!;
    if (c === 0xf0 && c1 < 0x90) return 0; // overlong
    if (c === 0xf4 && c1 >= 0x90) return 0; // above U+10FFFF
    return 4;
  }
  return 0;
}

/** A git path (any bytes but NUL) as a string, faithfully: invalid bytes become U+DC80+byte. */
export function decodeGitName(bytes: Buffer): string {
  if (isUtf8(bytes)) return bytes.toString('utf8');
  let out = '';
  let i = 0;
  while (i < bytes.length) {
    const n = sequenceLength(bytes, i);
    if (n === 0) {
      out += String.fromCharCode(ESCAPE_BASE + bytes[i]!);
      i += 1;
    } else {
      out += bytes.subarray(i, i + n).toString('utf8');
      i += n;
    }
  }
  return out;
}

/** The bytes of a name decoded by decodeGitName (the exact inverse). */
export function encodeGitName(name: string): Buffer {
  const parts: Buffer[] = [];
  let run = '';
  for (let i = 0; i < name.length; i++) {
    const u = name.charCodeAt(i);
    if (u >= 0xd800 && u <= 0xdbff && i + 1 < name.length) {
      const next = name.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        run += name[i]! + name[i + 1]!;
        i++;
        continue;
      }
    }
    if (u >= 0xdc80 && u <= 0xdcff) {
      parts.push(Buffer.from(run, 'utf8'), Buffer.from([u - ESCAPE_BASE]));
      run = '';
      continue;
    }
    if (u >= 0xd800 && u <= 0xdfff) throw new Error(`not a decoded git name: lone surrogate U+${u.toString(16).toUpperCase()}`);
    run += name[i]!;
  }
  parts.push(Buffer.from(run, 'utf8'));
  return Buffer.concat(parts);
}

/** Whether the name's bytes are valid UTF-8, so it can be passed to git as a command-line argument. */
export function isArgvSafe(name: string): boolean {
  return !/[\ud800-\udfff]/.test(name.replace(/[\ud800-\udbff][\udc00-\udfff]/g, '')) && !name.includes('\0');
}

/** Splits a `-z` output buffer at NUL bytes (the final terminator yields no empty tail). */
export function splitNul(buf: Buffer): Buffer[] {
  const parts: Buffer[] = [];
  let start = 0;
  for (;;) {
    const end = buf.indexOf(0, start);
    if (end < 0) break;
    parts.push(buf.subarray(start, end));
    start = end + 1;
  }
  if (start < buf.length) parts.push(buf.subarray(start));
  return parts;
}
