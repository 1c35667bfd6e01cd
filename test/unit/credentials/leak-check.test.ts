import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MemorySecretStore } from '../../../main/credentials/keychain.js';
import { LeakChecker, needlesFor, scanFile } from '../../../main/credentials/leak-check.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-leak-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const SECRET = 'ghp_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8';

function fileWith(parts: Array<Buffer | string>): string {
  const f = path.join(dir, randomBytes(4).toString('hex'));
  writeFileSync(f, Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p))));
  return f;
}

describe('leak check', () => {
  it('finds a value straddling every chunk boundary position', async () => {
    const needles = needlesFor('gh', SECRET);
    for (let split = 1; split < SECRET.length; split += 7) {
      const chunk = 64;
      const f = fileWith([randomBytes(chunk - split).fill(0x2e), SECRET, randomBytes(100).fill(0x2e)]);
      const r = await scanFile(f, needles, { chunkBytes: chunk });
      expect(r.hits.filter((h) => h.encoding === 'raw').map((h) => h.offset), `split ${split}`).toEqual([chunk - split]);
    }
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
