// The remote leak scanner (perl, as a sandbox host runs it) on files here: it
// gets only salted digests and must find what the local scan finds in the
// encodings it covers, at the same offsets, exactly once, across its chunk
// boundaries, without hashing windows it cannot match and without going
// quadratic on long runs. perl is a real dependency of a Debian host; it runs
// here unchanged.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync, openSync, writeSync, closeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { needlesFor, scanFile } from '../../../main/credentials/leak-check.js';
import type { LeakNeedle } from '../../../main/credentials/leak-needles.js';
import { parseScanAnswer, scanSpec, type RemoteLabel } from '../../../main/remote/remote-leak.js';
import { perlFile } from '../../../main/guest/guest-perl.js';

const run = promisify(execFile);
const dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-rleak-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const script = path.join(dir, 'scan.pl');
writeFileSync(script, perlFile('remote-leak-scan.pl'), { mode: 0o500 });

const SECRET = `sk-ant-api03-${randomBytes(30).toString('base64url')}`;
/** Encodings the host scanner covers (the local one also covers escaped, compressed and page-split forms). */
const COVERED = /^(raw|utf16le|utf16be|hex|hex-upper|base64(url)?@[0-2]|basic-auth\(.*\))$/;

function file(data: Buffer): string {
  const f = path.join(dir, randomBytes(4).toString('hex'));
  writeFileSync(f, data);
  return f;
}

async function remoteScan(files: Partial<Record<RemoteLabel, string>>, needles: LeakNeedle[], opts: { chunkBytes?: number; maxWindows?: number } = {}) {
  const spec = scanSpec(needles, opts);
  const specFile = file(Buffer.from(spec.text));
  const labels = Object.keys(files) as RemoteLabel[];
  const r = await run('perl', [script, specFile, ...labels.map((l) => `${l}=${files[l]}`)], { maxBuffer: 8 << 20 });
  const windows = Number(/^windows (\d+)$/m.exec(r.stdout)?.[1]);
  return { spec, scans: parseScanAnswer(r.stdout, spec, labels), windows, stdout: r.stdout };
}

const hitsOf = (s: { hits: Array<{ encoding: string; offset: number }> } | undefined) => (s?.hits ?? []).map((h) => `${h.encoding}@${h.offset}`).sort();

describe('remote leak scan (perl on the host, salted digests only)', () => {
  it('finds every covered encoding where the local scan finds it, and nothing in clean data', async () => {
    const needles = needlesFor('anthropic', SECRET, { basicUsernames: ['x-access-token'] });
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const parts: Buffer[] = [
      randomBytes(5000),
      Buffer.from(`x-api-key: ${SECRET}\r\n`),
      randomBytes(3000),
      Buffer.from(SECRET, 'utf16le'),
      Buffer.alloc(777),
      Buffer.from(SECRET, 'utf16le').swap16(),
      Buffer.from(`\0hex=${Buffer.from(SECRET).toString('hex')};HEX=${Buffer.from(SECRET).toString('hex').toUpperCase()}\n`),
      // Inside longer base64 texts, at each of the three alignments.
      ...[0, 1, 2].map((k) => Buffer.from(`data:${b64('x'.repeat(k) + `{"key":"${SECRET}"}`)}\n`)),
      Buffer.from(`Authorization: Basic ${b64(`x-access-token:${SECRET}`)}\n`),
      Buffer.from(`url=${Buffer.from('yy' + SECRET + 'z').toString('base64url')}\n`),
      randomBytes(4096),
    ];
    const planted = file(Buffer.concat(parts));
    const clean = file(Buffer.concat([randomBytes(200_000), Buffer.from('sk-ant-api03-not-the-key-'.repeat(50))]));
    const local = await scanFile(planted, needles);
    const expected = hitsOf({ hits: local.hits.filter((h) => COVERED.test(h.encoding)) });
    expect(expected.length).toBeGreaterThanOrEqual(10);
    for (const enc of ['raw', 'utf16le', 'utf16be', 'hex', 'hex-upper', 'base64@0', 'base64@1', 'base64@2', 'basic-auth(x-access-token)']) {
      expect(expected.some((e) => e.startsWith(`${enc}@`)), enc).toBe(true);
    }
    const { scans, spec } = await remoteScan({ memory: planted, disk: clean }, needles);
    expect(spec.uncovered).toEqual([]);
    expect(hitsOf(scans.get('memory'))).toEqual(expected);
    expect(scans.get('memory')!.bytes).toBe(Buffer.concat(parts).length);
    expect(scans.get('disk')!.hits).toEqual([]);
    expect(scans.get('disk')!.error).toBeUndefined();
  });

  it('hands the host no value: the spec holds no needle nor any 8-byte piece of one', () => {
    const needles = needlesFor('anthropic', SECRET, { basicUsernames: ['x-access-token'] });
    const a = scanSpec(needles);
    const b = scanSpec(needles);
    for (const n of needles) {
      for (let i = 0; i + 8 <= n.bytes.length; i++) expect(Buffer.from(a.text).includes(n.bytes.subarray(i, i + 8))).toBe(false);
    }
    // A fresh salt per check: the same needles never give the same digests twice.
    const digests = (t: string) => t.split("\n").filter((l) => l.startsWith("needle ")).flatMap((l) => l.split(" ").slice(6));
    expect(digests(a.text).filter((d) => digests(b.text).includes(d))).toEqual([]);
  });

  it('finds a value straddling every chunk boundary position exactly once, plain and UTF-16', async () => {
    const needles = needlesFor('k', SECRET);
    for (const [planted, enc] of [[Buffer.from(SECRET), 'raw'], [Buffer.from(SECRET, 'utf16le'), 'utf16le'], [Buffer.from(SECRET, 'utf16le').swap16(), 'utf16be']] as const) {
      const offsets: number[] = [];
      const data: Buffer[] = [];
      let at = 0;
      // Placements at every position modulo the chunk (and the carry), separated by a byte outside every class.
      for (let k = 0; k < 300; k++) {
        const gap = Buffer.alloc(1 + (k % 7), 0x20);
        data.push(gap, planted);
        at += gap.length;
        offsets.push(at);
        at += planted.length;
      }
      const { scans } = await remoteScan({ memory: file(Buffer.concat(data)) }, needles, { chunkBytes: 97 });
      const found = (scans.get('memory')?.hits ?? []).filter((h) => h.encoding === enc);
      // 20 hits are listed per needle; the count line says how many there were.
      expect(found.map((h) => h.offset)).toEqual(offsets.slice(0, 20));
    }
  });

  it('counts overlapping occurrences in one run, and hashes nothing in runs shorter than the needle (1-byte runs)', async () => {
    const value = 'abcabcabcabcabcabc'; // 18 bytes, periodic: occurrences overlap
    const needles = needlesFor('p', value).filter((n) => n.encoding === 'raw');
    const { scans, stdout } = await remoteScan({ memory: file(Buffer.from('abcabcabcabcabcabcabcabcabc')) }, needles);
    expect(scans.get('memory')!.hits.map((h) => h.offset)).toEqual([0, 3, 6, 9]);
    expect(stdout).toMatch(/^count memory 0 4$/m);

    const short = file(Buffer.from('a b c d '.repeat(100_000) + 'abcabcabcabcabcab-'.repeat(1000)));
    const r = await remoteScan({ memory: short }, needles);
    expect(r.windows).toBe(0);
    expect(r.scans.get('memory')!.hits).toEqual([]);

    // Graphic runs one shorter than the needle, ended by other bytes or NUL, plain and UTF-16: no run is
    // even looked into; the one whole value after them is found once, where it is.
    const wideNeedles = needlesFor('p', value).filter((n) => ['raw', 'utf16le', 'utf16be'].includes(n.encoding));
    const almost = value.slice(0, -1);
    // (\x01 between the parts: a NUL then UTF-16LE text would make one wide character more.)
    const layout = Buffer.concat(
      [
        Buffer.from(`${almost}\x01`.repeat(20_000)),
        Buffer.from(`${almost}\0`.repeat(20_000)),
        Buffer.from(`${almost}\x01`.repeat(20_000), 'utf16le'),
        Buffer.from(`${almost}\x01`.repeat(20_000), 'utf16le').swap16(),
      ].flatMap((part) => [part, Buffer.from([1])]),
    );
    const nearMisses = await remoteScan({ memory: file(Buffer.concat([layout, Buffer.from(`${value}\x01`)])) }, wideNeedles);
    expect(nearMisses.windows).toBe(1);
    expect(nearMisses.stdout).toMatch(/^source memory bytes \d+ runs 1 ok$/m);
    expect(hitsOf(nearMisses.scans.get('memory'))).toEqual([`raw@${layout.length}`]);
  });

  it('stops at the window cap and says so: the verdict cannot be clean', async () => {
    const needles = needlesFor('k', SECRET);
    const { scans } = await remoteScan({ memory: file(Buffer.alloc(2 << 20, 0x41)) }, needles, { maxWindows: 10_000 });
    expect(scans.get('memory')!.error).toMatch(/cap/);
  });

  it('a missing serial log is a note, a missing disk an error', async () => {
    const needles = needlesFor('k', SECRET);
    const { scans } = await remoteScan({ disk: path.join(dir, 'nope.qcow2'), serial: path.join(dir, 'nope.log') }, needles);
    expect(scans.get('serial')).toMatchObject({ bytes: 0, note: 'no serial log' });
    expect(scans.get('disk')!.error).toMatch(/missing/);
  });

  it('is linear in the data: 64 MiB of random alphanumeric runs takes about four times 16 MiB, not sixteen', async () => {
    const needles = needlesFor('k', SECRET);
    const alnum = Buffer.from('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-');
    const make = (mib: number) => {
      const f = path.join(dir, `runs-${mib}`);
      const fd = openSync(f, 'w');
      const block = Buffer.alloc(1 << 20);
      for (let m = 0; m < mib; m++) {
        const rnd = randomBytes(block.length);
        for (let i = 0; i < block.length; i++) {
          // Runs of the key's alphabet (16 long on average, some hundreds), separated by a NUL.
          block[i] = rnd[i]! < 16 ? 0 : alnum[rnd[i]! & 63]!;
        }
        writeSync(fd, block);
      }
      closeSync(fd);
      return f;
    };
    const timed = async (f: string) => {
      const t = Date.now();
      const r = await remoteScan({ memory: f }, needles);
      return { ms: Date.now() - t, ...r };
    };
    const small = await timed(make(16));
    const big = await timed(make(64));
    expect(big.scans.get('memory')!.bytes).toBe(64 << 20);
    expect(big.scans.get('memory')!.error).toBeUndefined();
    // Windows grow with the data, and so does the time (a quadratic scan would take 16x).
    expect(big.windows / Math.max(1, small.windows)).toBeLessThan(5);
    expect(big.ms / small.ms).toBeLessThan(8);
    console.log(`remote scan: 16 MiB ${small.ms} ms (${small.windows} windows), 64 MiB ${big.ms} ms (${big.windows} windows)`);
  }, 300_000);
});
