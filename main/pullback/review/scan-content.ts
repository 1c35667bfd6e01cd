// The content of returned files the line scan cannot read as text: a gzip or
// zlib file, or the deflated or stored entries of a zip (and their names), is
// inflated by the leak check's inflater with an output cap, so a bomb stops at
// the cap, and the text it holds is handed to the secret scan as lines. A binary file of no known compressed format, or
// one over a cap, is named as not scanned, never passed silently.
import { escapeName } from '../../../common/review-text.js';
import { inflateAt, plausibleStream, type StreamKind } from '../../credentials/leak-inflate.js';
import type { ChangedFile } from './listing.js';
import { readBlobs } from './objects.js';

export interface ContentScanLimits {
  /** A compressed file larger than this is not read. */
  maxFileBytes: number;
  /** Bytes of such files read in all. */
  maxReadBytes: number;
  /** Decompressed bytes scanned per file: past it the rest is not scanned. */
  maxInflatedBytes: number;
  /** Decompressed bytes scanned in all. */
  maxInflatedTotal: number;
}

export const DEFAULT_CONTENT_SCAN_LIMITS: ContentScanLimits = {
  maxFileBytes: 16 * 1024 * 1024,
  maxReadBytes: 64 * 1024 * 1024,
  maxInflatedBytes: 8 * 1024 * 1024,
  maxInflatedTotal: 32 * 1024 * 1024,
};

/** What the scan needs of a listed file to decide whether its content needs this. */
export type ScanFile = Pick<ChangedFile, 'path' | 'oldPath' | 'status' | 'newMode' | 'notText' | 'binary' | 'size'>;

/** Reads the new content of the listed files with these indexes (each at most its size). */
export type ContentReader = (indexes: readonly number[]) => Promise<Map<number, Buffer>>;

export interface ContentText {
  file: number;
  /** Lines of the decoded content (1-based numbers in `lineNumbers`). */
  texts: string[];
  lineNumbers: number[];
  /** How the content was read ("its gzip content"). */
  how: string;
}

export interface NotScanned {
  file: number;
  reason: string;
}

const mib = (n: number) => `${Math.round((n / (1024 * 1024)) * 10) / 10} MiB`;

/** A file whose lines, read with --text, may not show its content: binary, or not UTF-8. */
export function needsContentScan(f: ScanFile): boolean {
  if (f.newMode !== 'file' && f.newMode !== 'executable') return false;
  if (f.status === 'deleted' || !f.size) return false;
  return f.binary || f.notText === 'nul-byte' || f.notText === 'invalid-utf8';
}

/** The compressed format the content starts with, if any. */
export function compressedKind(data: Buffer): StreamKind | null {
  if (data.length >= 10 && data[0] === 0x1f && data[1] === 0x8b && data[2] === 8 && (data[3]! & 0xe0) === 0) return 'gzip';
  if (data.length >= 3 && data[0] === 0x78 && (data[0] * 256 + data[1]!) % 31 === 0 && plausibleStream(data.subarray(0, 4096), 'zlib')) return 'zlib';
  return null;
}

/** UTF-16 text: a byte order mark, or the NUL of every other byte where ASCII would be. */
function isUtf16(data: Buffer): boolean {
  if (data.length < 4 || data.length % 2) return false;
  if ((data[0] === 0xff && data[1] === 0xfe) || (data[0] === 0xfe && data[1] === 0xff)) return true;
  const sample = data.subarray(0, Math.min(data.length, 4096));
  let le = 0;
  let be = 0;
  for (let i = 0; i + 1 < sample.length; i += 2) {
    if (sample[i + 1] === 0 && sample[i] !== 0) le++;
    if (sample[i] === 0 && sample[i + 1] !== 0) be++;
  }
  const pairs = sample.length / 2;
  return le / pairs >= 0.9 || be / pairs >= 0.9;
}

/**
 * Decoded bytes as lines: NUL and other control runs (tar headers, padding)
 * become one space each, so a token between them reads as a word and a
 * megabyte of zeros as one short line; empty lines are dropped.
 */
export function textLines(text: string, out: ContentText): void {
  let n = 0;
  for (const raw of text.split('\n')) {
    n++;
    const line = raw.replace(/[\0-\x08\x0b-\x1f\x7f]+/g, ' ');
    if (!line.trim()) continue;
    out.texts.push(line);
    out.lineNumbers.push(n);
  }
}

/** Entries read from one zip file; more are named as not scanned. */
export const MAX_ZIP_ENTRIES = 10_000;

interface ZipEntry {
  name: string;
  method: number;
  encrypted: boolean;
  /** Where its data starts and ends in the file. */
  start: number;
  end: number;
}

/**
 * The entries of a zip file, from its central directory (local headers only
 * locate the data), with every offset and size checked against the file.
 */
export function zipEntries(data: Buffer): { entries: ZipEntry[]; more: number } | { problem: string } {
  let eocd = -1;
  for (let at = data.length - 22; at >= Math.max(0, data.length - 22 - 0xffff); at--) {
    if (data.readUInt32LE(at) === 0x06054b50) {
      eocd = at;
      break;
    }
  }
  if (eocd < 0) return { problem: 'zip: no end of central directory' };
  const count = data.readUInt16LE(eocd + 10);
  const dirSize = data.readUInt32LE(eocd + 12);
  const dirStart = data.readUInt32LE(eocd + 16);
  if (count === 0xffff || dirStart === 0xffffffff) return { problem: 'zip64, which the scan does not read' };
  if (dirStart + dirSize > eocd) return { problem: 'zip: its central directory lies outside the file' };
  const entries: ZipEntry[] = [];
  let at = dirStart;
  for (let n = 0; n < Math.min(count, MAX_ZIP_ENTRIES); n++) {
    if (at + 46 > dirStart + dirSize || data.readUInt32LE(at) !== 0x02014b50) return { problem: 'zip: a central directory entry is malformed' };
    const flags = data.readUInt16LE(at + 8);
    const method = data.readUInt16LE(at + 10);
    const size = data.readUInt32LE(at + 20);
    const nameLength = data.readUInt16LE(at + 28);
    const next = at + 46 + nameLength + data.readUInt16LE(at + 30) + data.readUInt16LE(at + 32);
    const local = data.readUInt32LE(at + 42);
    if (next > dirStart + dirSize || local + 30 > data.length || data.readUInt32LE(local) !== 0x04034b50) return { problem: 'zip: an entry points outside the file' };
    const start = local + 30 + data.readUInt16LE(local + 26) + data.readUInt16LE(local + 28);
    if (start + size > data.length) return { problem: 'zip: an entry\'s data runs past the end of the file' };
    entries.push({ name: data.subarray(at + 46, at + 46 + nameLength).toString('utf8'), method, encrypted: (flags & 1) === 1, start, end: start + size });
    at = next;
  }
  return { entries, more: Math.max(0, count - MAX_ZIP_ENTRIES) };
}

/** Inflates one compressed file into text lines, up to `maxOut` bytes of output. */
async function inflated(data: Buffer, kind: StreamKind, maxOut: number, offset = 0): Promise<{ bytes: Buffer; capped: boolean; error?: string }> {
  const chunks: Buffer[] = [];
  const r = await inflateAt(async (position, length) => data.subarray(position, position + length), offset, kind, maxOut, (c) => chunks.push(Buffer.from(c)));
  return { bytes: Buffer.concat(chunks), capped: r.capped, ...(r.error ? { error: r.error } : {}) };
}

/**
 * For every file that needs it: its content as text lines to scan, or why it
 * was not (fully) scanned. Reads within the limits, in listing order.
 */
export async function contentToScan(
  files: readonly ScanFile[], read: ContentReader, limits: ContentScanLimits = DEFAULT_CONTENT_SCAN_LIMITS,
): Promise<{ texts: ContentText[]; notScanned: NotScanned[] }> {
  const texts: ContentText[] = [];
  const notScanned: NotScanned[] = [];
  const wanted: number[] = [];
  let readBudget = limits.maxReadBytes;
  files.forEach((f, i) => {
    if (!needsContentScan(f)) return;
    const size = f.size!;
    if (size > limits.maxFileBytes) notScanned.push({ file: i, reason: `binary, ${mib(size)}: over the ${mib(limits.maxFileBytes)} cap` });
    else if (size > readBudget) notScanned.push({ file: i, reason: `binary: past the ${mib(limits.maxReadBytes)} read budget` });
    else {
      readBudget -= size;
      wanted.push(i);
    }
  });
  const contents = wanted.length ? await read(wanted) : new Map<number, Buffer>();
  let inflateBudget = limits.maxInflatedTotal;
  for (const i of wanted) {
    const f = files[i]!;
    const data = contents.get(i);
    if (!data) {
      notScanned.push({ file: i, reason: 'its content could not be read' });
      continue;
    }
    if (data.length >= 30 && data.readUInt32LE(0) === 0x04034b50) {
      const zip = zipEntries(data);
      if ('problem' in zip) {
        notScanned.push({ file: i, reason: zip.problem });
        continue;
      }
      const problems: string[] = [];
      let fileBudget = limits.maxInflatedBytes;
      const names: ContentText = { file: i, texts: [], lineNumbers: [], how: 'in the name of a zip entry' };
      for (const [n, entry] of zip.entries.entries()) {
        names.texts.push(entry.name);
        names.lineNumbers.push(n + 1);
        const label = `zip entry ${escapeName(entry.name.slice(0, 200))}`;
        if (entry.encrypted) problems.push(`${label} is encrypted`);
        else if (entry.method !== 0 && entry.method !== 8) problems.push(`${label} uses compression method ${entry.method}`);
        else {
          const cap = Math.min(fileBudget, inflateBudget);
          if (cap <= 0) {
            problems.push(`${label} and after: past the ${mib(limits.maxInflatedBytes)} cap for decompressed content`);
            break;
          }
          let bytes: Buffer;
          let capped = false;
          if (entry.method === 0) {
            bytes = data.subarray(entry.start, Math.min(entry.end, entry.start + cap));
            capped = entry.end - entry.start > cap;
          } else {
            // Raw deflate: the inflater's zlib reading skips two header bytes, so it starts two before the data.
            const r = await inflated(data.subarray(0, entry.end), 'zlib', cap, entry.start - 2);
            bytes = r.bytes;
            capped = r.capped;
            if (r.error) problems.push(`${label} does not decompress in full (${r.error})`);
          }
          fileBudget -= bytes.length;
          inflateBudget -= bytes.length;
          const out: ContentText = { file: i, texts: [], lineNumbers: [], how: `in its ${label}` };
          textLines(bytes.toString('utf8'), out);
          texts.push(out);
          if (capped) problems.push(`${label}: only its first ${mib(bytes.length)} were scanned (the cap; it holds more)`);
        }
      }
      texts.push(names);
      if (zip.more) problems.push(`${zip.more} entries past the first ${MAX_ZIP_ENTRIES}`);
      if (problems.length) notScanned.push({ file: i, reason: problems.length > 3 ? `${problems.slice(0, 3).join('; ')}; and ${problems.length - 3} more` : problems.join('; ') });
      continue;
    }
    const kind = compressedKind(data);
    if (kind) {
      const cap = Math.min(limits.maxInflatedBytes, inflateBudget);
      if (cap <= 0) {
        notScanned.push({ file: i, reason: `${kind}: past the ${mib(limits.maxInflatedTotal)} budget for decompressed content` });
        continue;
      }
      const r = await inflated(data, kind, cap);
      inflateBudget -= r.bytes.length;
      const out: ContentText = { file: i, texts: [], lineNumbers: [], how: `in its ${kind} content` };
      textLines(r.bytes.toString('utf8'), out);
      texts.push(out);
      if (r.capped) notScanned.push({ file: i, reason: `${kind}: only its first ${mib(r.bytes.length)} decompressed were scanned (the cap; it holds more)` });
      else if (r.error) notScanned.push({ file: i, reason: `${kind}: it does not decompress in full (${r.error})` });
      else if (compressedKind(r.bytes.subarray(0, 4096))) notScanned.push({ file: i, reason: `${kind} of compressed content: the inner layer was not decompressed` });
      continue;
    }
    // UTF-16 text: the line scan reads it with its NULs taken out.
    if (isUtf16(data)) continue;
    // Not UTF-8 and no NUL: text in a legacy encoding, whose ASCII the line scan reads.
    if (f.notText === 'invalid-utf8' && !data.includes(0)) continue;
    notScanned.push({ file: i, reason: 'binary, not a known compressed format: only its text-like bytes were scanned' });
  }
  notScanned.sort((a, b) => a.file - b.file);
  return { texts, notScanned };
}

/** Reads listed files' new content from the quarantine repository (sizes already checked). */
export function blobContentReader(qrepo: string, files: ReadonlyArray<Pick<ChangedFile, 'newOid' | 'size'>>, timeoutMs: number): ContentReader {
  return async (indexes) => {
    const byOid = new Map<string, number[]>();
    for (const i of indexes) {
      const oid = files[i]!.newOid;
      byOid.set(oid, [...(byOid.get(oid) ?? []), i]);
    }
    const out = new Map<number, Buffer>();
    await readBlobs(qrepo, [...byOid.keys()].map((oid) => ({ oid, size: files[byOid.get(oid)![0]!]!.size ?? 0 })), (oid, data) => {
      const copy = Buffer.from(data);
      for (const i of byOid.get(oid) ?? []) out.set(i, copy);
    }, { timeoutMs });
    return out;
  };
}
