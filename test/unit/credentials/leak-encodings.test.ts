// The leak check against the forms a key takes when a tool, a runtime or an
// upstream writes it down: each form is planted in otherwise clean bytes and
// must be found under its name; the same bytes without the key stay clean.
import { randomBytes } from 'node:crypto';
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { inflateSmall, plausibleStream } from '../../../main/credentials/leak-inflate.js';
import { needlesFor } from '../../../main/credentials/leak-needles.js';
import { bufferReader, scanReader } from '../../../main/credentials/leak-scan.js';

// '>' and '?' make the key's base64 hold '+' and '/', so base64url differs from it.
const KEY = 'sk-live-Qw>7?zR2xT9v>mK4?pL8nB3c';
const needles = needlesFor('api', KEY, { basicUsernames: ['x-access-token'] });

function jsonEscapeAll(s: string, upper = false): string {
  return [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).map((e) => (upper ? e.toUpperCase().replace('\\U', '\\u') : e)).join('');
}
const jsonEscapeMixed = (s: string) => [...s].map((c, i) => (i % 3 === 1 ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}` : c)).join('');
const urlAll = (s: string, lower = false) => [...Buffer.from(s)].map((b) => `%${b.toString(16).padStart(2, '0')}`).map((e) => (lower ? e : e.toUpperCase())).join('');
const urlMixed = (s: string) => [...s].map((c, i) => (i % 2 ? `%${c.charCodeAt(0).toString(16).toUpperCase()}` : c)).join('');

/** Text around the planted bytes: JSON and URLs with their own escapes, binary noise. */
function surround(planted: Buffer | string): Buffer {
  const p = typeof planted === 'string' ? Buffer.from(planted) : planted;
  return Buffer.concat([
    randomBytes(3000),
    Buffer.from('{"url":"https:\\/\\/example.com\\/a%20b","note":"caf\\u00e9","k":"'),
    p,
    Buffer.from('"}\n'),
    randomBytes(2000),
  ]);
}

async function encodingsFound(data: Buffer, limits = {}): Promise<string[]> {
  const r = await scanReader(bufferReader(data), needles, limits);
  return r.hits.map((h) => h.encoding);
}

describe('leak check encodings', () => {
  const b64 = (s: Buffer | string) => Buffer.from(s).toString('base64');
  const cases: Array<[string, (key: string) => Buffer | string, string]> = [
    ['the key as it is', (k) => k, 'raw'],
    ['UTF-16LE (a Windows or JavaScript string)', (k) => Buffer.from(k, 'utf16le'), 'utf16le'],
    ['UTF-16BE', (k) => Buffer.from(k, 'utf16le').swap16(), 'utf16be'],
    ['lowercase hex', (k) => Buffer.from(k).toString('hex'), 'hex'],
    ['uppercase hex', (k) => Buffer.from(k).toString('hex').toUpperCase(), 'hex-upper'],
    ['base64, aligned', (k) => b64(k), 'base64@0'],
    ['base64 after one byte', (k) => b64('x' + k), 'base64@1'],
    ['base64 after two bytes', (k) => b64('xy' + k), 'base64@2'],
    ['URL-safe base64, aligned', (k) => Buffer.from(k).toString('base64url'), 'base64url@0'],
    ['URL-safe base64 after one byte', (k) => Buffer.from('x' + k).toString('base64url'), 'base64url@1'],
    ['URL-safe base64 after two bytes', (k) => Buffer.from('xy' + k).toString('base64url'), 'base64url@2'],
    ['a basic-auth header', (k) => `Authorization: Basic ${b64(`x-access-token:${k}`)}`, 'basic-auth(x-access-token)'],
    ['JSON, every character \\u-escaped', (k) => jsonEscapeAll(k), 'json-escape:raw'],
    ['JSON, every character \\u-escaped with upper-case hex', (k) => jsonEscapeAll(k, true), 'json-escape:raw'],
    ['JSON, some characters \\u-escaped', (k) => jsonEscapeMixed(k), 'json-escape:raw'],
    ['JSON string of its base64 (a / written as \\/)', (k) => JSON.stringify(b64('xy' + k)).replaceAll('/', '\\/'), 'json-escape:base64@2'],
    ['URL-encoded, every byte', (k) => urlAll(k), 'url-escape:raw'],
    ['URL-encoded, every byte, lower-case hex', (k) => urlAll(k, true), 'url-escape:raw'],
    ['URL-encoded where needed (encodeURIComponent)', (k) => encodeURIComponent(k), 'url-escape:raw'],
    ['URL-encoded, every other character', (k) => urlMixed(k), 'url-escape:raw'],
    ['gzip of a config file', (k) => zlib.gzipSync(Buffer.from(`token = "${k}"\n`.repeat(3))), 'gzip>raw'],
    ['gzip with a file name in its header', (k) => gzipWithName(`{"key":"${k}"}`), 'gzip>raw'],
    ['zlib (a git object)', (k) => zlib.deflateSync(Buffer.from(`blob 60\0key=${k}\n`)), 'zlib>raw'],
    ['zlib at the fastest level', (k) => zlib.deflateSync(Buffer.from(`k=${k}`.repeat(50)), { level: 1 }), 'zlib>raw'],
    ['zlib at the best level', (k) => zlib.deflateSync(Buffer.from(`k=${k}`), { level: 9 }), 'zlib>raw'],
    ['gzip of uppercase hex', (k) => zlib.gzipSync(Buffer.from(Buffer.from(k).toString('hex').toUpperCase())), 'gzip>hex-upper'],
    ['gzip of JSON with escapes', (k) => zlib.gzipSync(Buffer.from(`{"k":"${jsonEscapeMixed(k)}"}`)), 'gzip>json-escape:raw'],
  ];
  for (const [what, write, encoding] of cases) {
    it(`finds the key written as ${what}`, async () => {
      expect(await encodingsFound(surround(write(KEY)))).toContain(encoding);
    });
  }

  it('finds nothing in the same surroundings without the key (controls: a near miss written in every form)', async () => {
    // One character in the middle changed (base64 needles leave out up to two
    // bytes at either end, whose characters depend on the bytes around them).
    const near = KEY.slice(0, 16) + (KEY[16] === 'A' ? 'B' : 'A') + KEY.slice(17);
    for (const [what, write] of cases) expect(await encodingsFound(surround(write(near))), what).toEqual([]);
    expect(await encodingsFound(surround(KEY.slice(0, 20)))).toEqual([]);
  });

  it('names the place inside decompressed data and never the value', async () => {
    const gz = zlib.gzipSync(Buffer.from(`${'x'.repeat(5000)}${KEY}`));
    const data = Buffer.concat([randomBytes(777), gz, randomBytes(100)]);
    const r = await scanReader(bufferReader(data), needles);
    const hit = r.hits.find((h) => h.encoding === 'gzip>raw');
    expect(hit).toMatchObject({ offset: 777, detail: 'at 5000 of the decompressed data' });
    expect(r.inflated!.streams).toBeGreaterThanOrEqual(1);
    expect(JSON.stringify(r)).not.toContain(KEY);
  });

  it('a key behind the per-stream cap is reported as not scanned, not as clean', async () => {
    // 8 MiB of zeros compress to ~8 KiB: a small bomb with the key at its end.
    const bomb = zlib.gzipSync(Buffer.concat([Buffer.alloc(8 * 1024 * 1024), Buffer.from(KEY)]));
    const data = Buffer.concat([randomBytes(100), bomb]);
    const capped = await scanReader(bufferReader(data), needles, { maxStreamBytes: 1024 * 1024 });
    expect(capped.hits).toEqual([]);
    expect(capped.error).toMatch(/1 compressed stream\(s\) not fully inflated because of the caps/);
    expect(capped.notInflated).toEqual([{ offset: 100, kind: 'gzip', reason: `inflated only the first ${1024 * 1024} bytes (cap)` }]);
    const whole = await scanReader(bufferReader(data), needles, { maxStreamBytes: 16 * 1024 * 1024 });
    expect(whole.hits.map((h) => h.encoding)).toEqual(['gzip>raw']);
    expect(whole.error).toBeUndefined();
  });

  it('many bombs stop at the total cap and are listed as not inflated', async () => {
    const one = zlib.deflateSync(Buffer.alloc(2 * 1024 * 1024));
    const data = Buffer.concat(Array.from({ length: 10 }, () => Buffer.concat([randomBytes(64), one])));
    const r = await scanReader(bufferReader(data), needles, { maxInflatedBytes: 5 * 1024 * 1024 });
    expect(r.inflated!.bytes).toBe(5 * 1024 * 1024);
    expect(r.notInflatedCount).toBe(8);
    expect(r.notInflated!.filter((n) => /cap/.test(n.reason))).toHaveLength(8);
    expect(r.error).toMatch(/8 compressed stream\(s\) not fully inflated/);
  });
});

describe('the small-stream inflater', () => {
  it('gives what zlib compressed, for stored, fixed and dynamic blocks and several blocks in a row', () => {
    const text = Buffer.from(Array.from({ length: 4000 }, (_, i) => `line ${i} ${i % 7 ? 'x' : KEY}\n`).join(''));
    const payloads = [Buffer.alloc(0), Buffer.from('a'), randomBytes(1000), text.subarray(0, 3000), text, randomBytes(70_000)];
    for (const p of payloads) {
      for (const level of [0, 1, 6, 9]) {
        for (const kind of ['zlib', 'gzip'] as const) {
          const z = kind === 'zlib' ? zlib.deflateSync(p, { level }) : zlib.gzipSync(p, { level });
          const r = inflateSmall(Buffer.concat([z, randomBytes(50)]), kind, 1 << 20);
          const what = `${p.length} bytes, level ${level}, ${kind}`;
          expect(r?.status, what).toBe('end');
          expect(Buffer.compare(r!.out, p), what).toBe(0);
          expect(plausibleStream(z.subarray(0, 512), kind), what).toBe(true);
        }
      }
    }
  });

  it('hands streams that need more input or more room back to zlib, and says when data is not deflate', () => {
    const big = zlib.deflateSync(randomBytes(100_000), { level: 0 });
    expect(inflateSmall(big.subarray(0, 8192), 'zlib', 1 << 20)).toBeNull();
    expect(inflateSmall(zlib.deflateSync(Buffer.alloc(300_000)), 'zlib', 256 * 1024)).toBeNull();
    const bad = Buffer.from([0x78, 0x9c, 0xff, 0xff, 0xff, 0xff]); // block type 3 does not exist
    expect(inflateSmall(bad, 'zlib', 1024)?.status).toBe('bad');
  });
});

function gzipWithName(text: string): Buffer {
  const plain = zlib.gzipSync(Buffer.from(text));
  // FNAME flag and a NUL-terminated name after the 10-byte header.
  const header = Buffer.from(plain.subarray(0, 10));
  header[3] = header[3]! | 8;
  return Buffer.concat([header, Buffer.from('secrets.json\0'), plain.subarray(10)]);
}
