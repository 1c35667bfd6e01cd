// The credential broker writes its records (leak reports, what a sandbox's
// routes could use) with writeAtomic. Two writes of the same record at once
// (a leak check before destroy while the user runs it again) must both land,
// the file ending whole as one of them, with no temporary file left behind.
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { writeAtomic } from '../../../main/credentials/ref-store.js';
import { tempDir } from '../../support/repo.js';

const dirs: string[] = [];
afterEach(() => {
  while (dirs.length) fs.rmSync(dirs.pop()!, { recursive: true, force: true });
});

describe('writeAtomic', () => {
  it('survives concurrent writes of the same file', async () => {
    const dir = tempDir('factory-atomic-');
    dirs.push(dir);
    const file = path.join(dir, 'leakchecks', 'task1.json');
    const bodies = Array.from({ length: 16 }, (_, i) => JSON.stringify({ run: i, pad: 'x'.repeat(64 * 1024) }) + '\n');
    const results = await Promise.allSettled(bodies.map((b) => writeAtomic(file, b)));
    expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    expect(bodies).toContain(fs.readFileSync(file, 'utf8'));
    expect(fs.readdirSync(path.dirname(file))).toEqual(['task1.json']);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
  });
});
