import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MemorySecretStore } from '../../../main/credentials/keychain.js';
import { gzipSync } from 'node:zlib';
import { LeakChecker, needlesFor, scanFile } from '../../../main/credentials/leak-check.js';
import { bufferReader, scanReader } from '../../../main/credentials/leak-scan.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-leak-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const SECRET = 'ghp_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8';

function fileWith(parts: Array<Buffer | string>): string {
  const f = path.join(dir, randomBytes(4).toString('hex'));
  writeFileSync(f, Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p))));
  return f;
}

describe('leak check', () => {
  it('finds a value straddling every chunk boundary position, plain, escaped or compressed, exactly once', async () => {
    const needles = needlesFor('gh', SECRET);
    const escaped = [...SECRET].map((c, i) => (i % 2 ? `\\u00${c.charCodeAt(0).toString(16)}` : c)).join('');
    const gz = gzipSync(Buffer.from(`token=${SECRET}`));
    // Small chunks: the scanner's buffer then holds a few kilobytes, so every
    // placement below crosses several chunk boundaries at every position.
    for (const [planted, encoding] of [[Buffer.from(SECRET), 'raw'], [Buffer.from(escaped), 'json-escape:raw'], [gz, 'gzip>raw']] as const) {
      for (let at = 0; at < 12_000; at += 13) {
        const data = Buffer.concat([Buffer.alloc(at, 0x2e), planted, Buffer.alloc(300, 0x2e)]);
        // Read in place, and from a reader that answers with buffers of its own.
        for (const read of [bufferReader(data), async (p: number, n: number) => data.subarray(p, p + n)]) {
          const r = await scanReader(read, needles, { chunkBytes: 64 });
          expect(r.hits.map((h) => `${h.encoding}@${h.offset}`), `${encoding} at ${at}`).toEqual([`${encoding}@${at}`]);
        }
      }
    }
  });

  it('a source that fails while the previous chunk is scanned fails the scan, with its own error', async () => {
    // The next chunk is read ahead while one is scanned: its failure must surface here, not go unhandled.
    const data = Buffer.alloc(64 * 1024, 0x2e);
    const reads: number[] = [];
    const failing = async (position: number, length: number) => {
      reads.push(position);
      if (position > 0) throw new Error('the VM exited mid-read');
      return data.subarray(position, position + length);
    };
    await expect(scanReader(failing, needlesFor('gh', SECRET), { chunkBytes: 16 * 1024 })).rejects.toThrow('the VM exited mid-read');
    expect(reads).toEqual([0, 16 * 1024]);
  });

  it('finds the encodings a credential takes: UTF-16, hex, base64 at any alignment, basic-auth header', async () => {
    const needles = needlesFor('gh', SECRET, { basicUsernames: ['x-access-token'] });
    const cases: Array<[string, Buffer]> = [
      ['utf16le', Buffer.from(SECRET, 'utf16le')],
      ['hex', Buffer.from(Buffer.from(SECRET).toString('hex'))],
      ['basic-auth(x-access-token)', Buffer.from(`Authorization: Basic ${Buffer.from(`x-access-token:${SECRET}`).toString('base64')}`)],
    ];
    for (let k = 0; k < 3; k++) {
      cases.push([`base64@${k}`, Buffer.from(Buffer.concat([Buffer.from('xyz'.slice(0, k)), Buffer.from(SECRET), Buffer.from('tail')]).toString('base64'))]);
    }
    for (const [encoding, bytes] of cases) {
      const f = fileWith([randomBytes(5000).fill(0x20), bytes, randomBytes(3000).fill(0x20)]);
      const r = await scanFile(f, needles, { chunkBytes: 1024 });
      expect(r.hits.map((h) => h.encoding), encoding).toContain(encoding);
    }
  });

  it('reports clean on data without the value, and never puts the value in the report', async () => {
    const secrets = new MemorySecretStore();
    await secrets.put('gh', SECRET);
    const clean = fileWith([randomBytes(200_000), SECRET.slice(0, 20), randomBytes(1000)]);
    const dirty = fileWith([randomBytes(100_000), Buffer.from(SECRET, 'utf16le')]);
    const checker = new LeakChecker({ secrets });
    const ok = await checker.check({ sandboxId: 's', credentials: [{ id: 'gh' }], sources: { workDir: dir, files: [clean] } });
    expect(ok.verdict).toBe('clean');
    expect(ok.scanned[0]!.bytes).toBe(201_020);
    const bad = await checker.check({ sandboxId: 's', credentials: [{ id: 'gh' }], sources: { workDir: dir, files: [dirty] } });
    expect(bad.verdict).toBe('leak');
    expect(bad.hits[0]).toMatchObject({ credentialId: 'gh', encoding: 'utf16le', source: 'file', offset: 100_000 });
    expect(JSON.stringify(bad)).not.toContain(SECRET);
    const missing = await checker.check({ sandboxId: 's', credentials: [{ id: 'nope' }], sources: { workDir: dir, files: [clean] } });
    expect(missing.verdict).toBe('incomplete');
    const failedDump = await checker.check({
      sandboxId: 's',
      credentials: [{ id: 'gh' }],
      sources: { workDir: dir, dumpMemory: async () => { throw new Error('no QMP'); } },
    });
    expect(failedDump.verdict).toBe('incomplete');
    expect(failedDump.scanned[0]!.error).toMatch(/memory dump failed: no QMP/);
  });
});
