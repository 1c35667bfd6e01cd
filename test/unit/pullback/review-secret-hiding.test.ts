// A sandbox returns a token in a form a line-by-line match misses: in a file's
// name, gzip- or zlib-compressed, base64-encoded, written with escapes, or cut
// across two lines. The review's secret scan must still name it, masked, before
// Approve; and a file it cannot scan (binary, a decompression bomb) is named in
// a confirmation, not passed silently. The tokens are generated here (never real keys).
import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import zlib from 'node:zlib';
import type { PullbackReview } from '../../../common/review.js';
import { scanSecrets } from '../../../main/pullback/review/secret-scan.js';
import { guestFixtures } from '../../support/pullback-guest.js';

const fixture = guestFixtures();

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
function random(n: number, alphabet = ALNUM): string {
  return [...randomBytes(n)].map((b) => alphabet[b % alphabet.length]).join('');
}
const awsKeyId = () => `AKIA${random(16, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567')}`;
const githubToken = () => `ghp_${random(36)}`;

function secretsJson(review: PullbackReview): string {
  return JSON.stringify({ flags: review.flags, secrets: review.secrets, confirmations: review.confirmations });
}

const found = (review: PullbackReview) => review.secrets.map((s) => [s.path, s.line, s.rule]);
const secretConfirmations = (review: PullbackReview) => review.confirmations.filter((c) => c.kind === 'secrets').map((c) => c.message);

describe('the secret scan finds a token the returned work hid', () => {
  it('in the name of an added file, and in the name a file was renamed to', async () => {
    const { guest, verify } = await fixture();
    const github = githubToken();
    const aws = awsKeyId();
    guest.write(`notes/${github}.txt`, 'remember this\n');
    guest.remove('old.txt');
    guest.write(`keys/${aws}`, 'bye\n'); // old.txt's content: git sees a rename
    guest.commit('name the files');
    const { review } = await verify();
    expect(review.files.find((f) => f.path === `keys/${aws}`)?.status).toBe('renamed');
    expect(found(review)).toEqual(expect.arrayContaining([
      [`keys/${aws}`, 0, 'secretlint/aws:AWSAccessKeyID, in the file name'],
      [`notes/${github}.txt`, 0, 'secretlint/github:GITHUB_TOKEN, in the file name'],
    ]));
    const masked = review.secrets.map((s) => s.masked).join(' ');
    expect(masked).not.toContain(github);
    expect(masked).not.toContain(aws);
    expect(secretConfirmations(review).join('\n')).toContain('(secretlint/github:GITHUB_TOKEN, in the file name)');
  });

  it.each([
    { format: 'gzip', compress: (b: Buffer) => zlib.gzipSync(b) },
    { format: 'zlib', compress: (b: Buffer) => zlib.deflateSync(b) },
  ])('inside a $format file, which the review shows only as binary', async ({ format, compress }) => {
    const { guest, verify } = await fixture();
    const aws = awsKeyId();
    const github = githubToken();
    guest.write(`backup/env.${format}`, compress(Buffer.from(`# deploy settings\nregion = eu-west-1\naws_access_key_id = ${aws}\nGITHUB_TOKEN=${github}\n`)));
    guest.commit('back up the settings');
    const { review } = await verify();
    expect(review.files.find((f) => f.path === `backup/env.${format}`)?.notText).toBeDefined();
    expect(found(review)).toEqual(expect.arrayContaining([
      [`backup/env.${format}`, 0, `secretlint/aws:AWSAccessKeyID, in its ${format} content, line 3`],
      [`backup/env.${format}`, 0, `secretlint/github:GITHUB_TOKEN, in its ${format} content, line 4`],
    ]));
    expect(secretsJson(review)).not.toContain(aws);
    expect(secretsJson(review)).not.toContain(github);
    // Fully decompressed and scanned: nothing to say about it.
    expect(secretConfirmations(review).join('\n')).not.toContain('could not be scanned fully');
  });

  it('inside a zip file: in a deflated entry, a stored entry and an entry name', async () => {
    const { guest, verify } = await fixture();
    const aws = awsKeyId();
    const github = githubToken();
    const other = githubToken();
    guest.write('dist/bundle.zip', zipOf([
      { name: 'config/settings.ini', data: Buffer.from(`[aws]\nregion = eu-west-1\naws_access_key_id = ${aws}\n`.repeat(3)), deflate: true },
      { name: 'README.txt', data: Buffer.from(`token: ${github}\n`), deflate: false },
      { name: `keys/${other}`, data: Buffer.from('x'), deflate: false },
    ]));
    guest.commit('bundle');
    const { review } = await verify();
    expect(found(review)).toEqual(expect.arrayContaining([
      ['dist/bundle.zip', 0, 'secretlint/aws:AWSAccessKeyID, in its zip entry config/settings.ini, line 3'],
      ['dist/bundle.zip', 0, 'secretlint/github:GITHUB_TOKEN, in its zip entry README.txt, line 1'],
      ['dist/bundle.zip', 0, 'secretlint/github:GITHUB_TOKEN, in the name of a zip entry, line 3'],
    ]));
    for (const v of [aws, github, other]) expect(secretsJson(review)).not.toContain(v);
    expect(secretConfirmations(review).join('\n')).not.toContain('could not be scanned fully');
  });

  it.each([
    { name: 'standard base64', encode: (s: string) => Buffer.from(s).toString('base64'), how: 'decoded from base64' },
    // Leading bytes chosen so the url-safe alphabet shows ('-_-_').
    { name: 'url-safe base64', encode: (s: string) => Buffer.concat([Buffer.from([0xfb, 0xff, 0xbf]), Buffer.from(s)]).toString('base64url'), how: 'decoded from url-safe base64' },
  ])('written as $name', async ({ encode, how }) => {
    const { guest, verify } = await fixture();
    const github = githubToken();
    guest.write('deploy/values.yaml', `replicas: 2\nregistryAuth: "${encode(`token: ${github}`)}"\n`);
    guest.commit('values');
    const { review } = await verify();
    expect(found(review)).toContainEqual(['deploy/values.yaml', 2, `secretlint/github:GITHUB_TOKEN, ${how}`]);
    expect(secretsJson(review)).not.toContain(github);
  });

  it.each([
    { name: '\\x escapes', escape: (s: string) => [...Buffer.from(s)].map((b) => `\\x${b.toString(16).padStart(2, '0')}`).join('') },
    { name: '\\u escapes', escape: (s: string) => [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('') },
    { name: 'percent escapes', escape: (s: string) => [...Buffer.from(s)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('') },
  ])('written with $name', async ({ escape }) => {
    const { guest, verify } = await fixture();
    const aws = awsKeyId();
    guest.write('src/client.js', `// client\nconst keyId = "${escape(aws)}";\nmodule.exports = { keyId };\n`);
    guest.commit('client');
    const { review } = await verify();
    expect(found(review)).toContainEqual(['src/client.js', 2, 'secretlint/aws:AWSAccessKeyID, with its escapes decoded']);
    expect(secretsJson(review)).not.toContain(aws);
  });

  it('split across two lines by string concatenation, or cut where a line wraps', async () => {
    const { guest, verify } = await fixture();
    const aws = awsKeyId();
    const github = githubToken();
    guest.write('src/keys.ts', [
      '// keys',
      `export const keyId = "${aws.slice(0, 10)}" +`,
      `  "${aws.slice(10)}";`,
      '',
    ].join('\n'));
    guest.write('notes/token.txt', ['the token is', github.slice(0, 21), github.slice(21), 'do not share', ''].join('\n'));
    guest.commit('keys');
    const { review } = await verify();
    expect(found(review)).toEqual(expect.arrayContaining([
      ['notes/token.txt', 2, 'secretlint/github:GITHUB_TOKEN, joined with line 3'],
      ['src/keys.ts', 2, 'secretlint/aws:AWSAccessKeyID, joined with line 3'],
    ]));
    expect(secretsJson(review)).not.toContain(aws);
    expect(secretsJson(review)).not.toContain(github);
  });

  it('on one line as string concatenation ("AKIA" + "...")', async () => {
    const { guest, verify } = await fixture();
    const aws = awsKeyId();
    guest.write('src/aws.py', `KEY_ID = "${aws.slice(0, 4)}" + "${aws.slice(4, 12)}" + '${aws.slice(12)}'\n`);
    guest.commit('aws');
    const { review } = await verify();
    expect(found(review)).toContainEqual(['src/aws.py', 1, 'secretlint/aws:AWSAccessKeyID, with its string concatenation joined']);
    expect(secretsJson(review)).not.toContain(aws);
  });
});

describe('what the secret scan cannot read is confirmed, not passed', () => {
  it('a gzip bomb (1 GiB of zeros) stops at the cap, quickly, and Approve must confirm it', async () => {
    const { guest, verify } = await fixture();
    // Level 1: a second to make, 4.5 MiB on disk.
    const gz = zlib.createGzip({ level: 1 });
    const parts: Buffer[] = [];
    gz.on('data', (c: Buffer) => parts.push(c));
    const zero = Buffer.alloc(1024 * 1024);
    for (let i = 0; i < 1024; i++) if (!gz.write(zero)) await new Promise((r) => gz.once('drain', r));
    gz.end();
    await new Promise((r) => gz.once('end', r));
    const bomb = Buffer.concat(parts);
    guest.write('data/zeros.gz', bomb);
    guest.commit('data');
    // The scan itself: decompresses up to its cap and stops.
    const started = Date.now();
    const alone = await scanSecrets({
      paths: ['data/zeros.gz'], added: { byFile: new Map(), firstUnread: 1 }, credentials: [], maxFindings: 10,
      files: [{ path: 'data/zeros.gz', status: 'added', newMode: 'file', binary: true, size: bomb.length }],
      readContent: async () => new Map([[0, bomb]]),
    });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(alone.notScanned.map((n) => n.reason)).toEqual(['gzip: only its first 8 MiB decompressed were scanned (the cap; it holds more)']);
    // And the whole review (git's own work on a 4.5 MiB file included).
    const { review } = await verify();
    const message = secretConfirmations(review).find((m) => m.includes('could not be scanned fully'));
    expect(message).toBe('1 file could not be scanned fully for secrets: data/zeros.gz (gzip: only its first 8 MiB decompressed were scanned (the cap; it holds more))');
  }, 60_000);

  it('a zip bomb stops at the same cap, entry by entry', async () => {
    const zip = zipOf([
      { name: 'zeros.bin', data: Buffer.alloc(12 * 1024 * 1024), deflate: true },
      { name: 'more.bin', data: Buffer.alloc(1024), deflate: true },
    ]);
    const started = Date.now();
    const r = await scanSecrets({
      paths: ['bomb.zip'], added: { byFile: new Map(), firstUnread: 1 }, credentials: [], maxFindings: 10,
      files: [{ path: 'bomb.zip', status: 'added', newMode: 'file', binary: true, size: zip.length }],
      readContent: async () => new Map([[0, zip]]),
    });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(r.notScanned).toEqual([{
      path: 'bomb.zip', status: 'added',
      reason: 'zip entry zeros.bin: only its first 8 MiB were scanned (the cap; it holds more); zip entry more.bin and after: past the 8 MiB cap for decompressed content',
    }]);
  });

  it('a binary file of no known compressed format is named, with why', async () => {
    const { guest, verify } = await fixture();
    const github = githubToken();
    // An image-like file: binary throughout, a token among its bytes.
    guest.write('assets/logo.bin', Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 13]), randomBytes(2048), Buffer.from(github), randomBytes(512)]));
    guest.write('README.md', 'hello\nwith a logo\n');
    guest.commit('logo');
    const { review } = await verify();
    expect(secretConfirmations(review)).toContain(
      '1 file could not be scanned fully for secrets: assets/logo.bin (binary, not a known compressed format: only its text-like bytes were scanned)',
    );
    expect(() => assertNeedsSecrets(review)).not.toThrow();
  });
});

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(b: Buffer): number {
  let c = 0xffffffff;
  for (const x of b) c = CRC_TABLE[(c ^ x) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A zip file as archivers write it: local headers, data, central directory, end record. */
function zipOf(entries: Array<{ name: string; data: Buffer; deflate: boolean }>): Buffer {
  const locals: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const body = e.deflate ? zlib.deflateRawSync(e.data) : e.data;
    const name = Buffer.from(e.name);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(e.deflate ? 8 : 0, 8);
    local.writeUInt32LE(crc32(e.data), 14);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(e.data.length, 22);
    local.writeUInt16LE(name.length, 26);
    const dir = Buffer.alloc(46);
    dir.writeUInt32LE(0x02014b50, 0);
    dir.writeUInt16LE(20, 4);
    dir.writeUInt16LE(20, 6);
    dir.writeUInt16LE(e.deflate ? 8 : 0, 10);
    dir.writeUInt32LE(crc32(e.data), 16);
    dir.writeUInt32LE(body.length, 20);
    dir.writeUInt32LE(e.data.length, 24);
    dir.writeUInt16LE(name.length, 28);
    dir.writeUInt32LE(offset, 42);
    locals.push(local, name, body);
    central.push(dir, name);
    offset += local.length + name.length + body.length;
  }
  const dirBytes = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(dirBytes.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, dirBytes, end]);
}

function assertNeedsSecrets(review: PullbackReview) {
  if (!review.confirmations.some((c) => c.kind === 'secrets')) throw new Error('Approve would not ask to confirm secrets');
}
