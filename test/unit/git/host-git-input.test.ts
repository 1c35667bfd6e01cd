// runGit can stream a file to git's stdin (the quarantine feeds a sandbox's
// bundle to index-pack that way). A sandbox's bundle that git refuses after a
// few bytes must not leave the file open on the host, run after run.
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { runGit } from '../../../main/git/host-git.js';
import { tempDir } from '../../support/repo.js';

const dirs: string[] = [];
afterEach(() => {
  while (dirs.length) fs.rmSync(dirs.pop()!, { recursive: true, force: true });
});

/** How many of this process's file descriptors are open on `file` (Linux /proc). */
function openOn(file: string): number {
  let n = 0;
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      if (fs.readlinkSync(path.join('/proc/self/fd', fd)) === file) n++;
    } catch {
      // closed between the listing and the readlink
    }
  }
  return n;
}

describe.runIf(process.platform === 'linux')('runGit with a file as input', () => {
  it('closes the file when git stops reading it early', async () => {
    const dir = tempDir('factory-input-');
    dirs.push(dir);
    // Far more than a pipe holds, and not a pack: index-pack refuses it at the first bytes.
    const file = path.join(dir, 'result.bundle');
    fs.writeFileSync(file, Buffer.alloc(16 * 1024 * 1024, 0x41));
    const repo = path.join(dir, 'repo.git');
    await runGit(['init', '--quiet', '--bare', repo]);
    for (let i = 0; i < 3; i++) {
      const r = await runGit(['index-pack', '--stdin'], { cwd: repo, env: { GIT_DIR: repo }, inputFile: { path: file } });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/pack/i);
    }
    // A stream's close is asynchronous: wait for it, not for a fixed time.
    await expect.poll(() => openOn(file), { timeout: 15_000, interval: 20 }).toBe(0);
  });

  it('still streams the whole file when git reads it all', async () => {
    const dir = tempDir('factory-input-');
    dirs.push(dir);
    const file = path.join(dir, 'blob');
    fs.writeFileSync(file, Buffer.alloc(3 * 1024 * 1024, 0x42));
    const r = await runGit(['hash-object', '--stdin'], { cwd: dir, inputFile: { path: file, start: 1024 * 1024 } });
    const expected = await runGit(['hash-object', '--stdin'], { cwd: dir, input: Buffer.alloc(2 * 1024 * 1024, 0x42) });
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(expected.stdout.trim());
  });
});
