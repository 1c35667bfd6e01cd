// A full disk said plainly: the error a real full file system gives (a small
// tmpfs, as root) becomes DiskFull naming the folder; other errors pass through.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { diskFullError } from '../../../main/state/disk-full.js';
import { writeFileAtomic } from '../../../main/state/state-store.js';
import { toErrorInfo } from '../../../main/tasks/task-book.js';
import { tempDir } from '../../support/repo.js';

const made: string[] = [];
afterAll(() => {
  for (const d of made) fs.rmSync(d, { recursive: true, force: true });
});

describe('diskFullError', () => {
  it.runIf(process.platform === 'linux' && process.getuid?.() === 0)('names the folder of a real ENOSPC and what to free', async (ctx) => {
    // Found by the soak (seed 1): creating a task on a full data folder answered "ENOSPC: no space left on device, write".
    const dir = tempDir('factory-full-');
    made.push(dir);
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { stdio: 'ignore' });
    } catch {
      ctx.skip('mounting a tmpfs is not allowed here (no CAP_SYS_ADMIN)');
    }
    try {
      const err = await writeFileAtomic(path.join(dir, 'state', 'x.json'), 'x'.repeat(256 * 1024)).then(() => undefined, (e: unknown) => e);
      expect((err as NodeJS.ErrnoException).code).toBe('ENOSPC');
      const full = diskFullError(err, dir)!;
      expect(full.name).toBe('DiskFull');
      expect(full.message).toContain(dir);
      expect(full.message).toMatch(/free space/);
      // A task's error says the same, by name.
      expect(toErrorInfo(err)).toMatchObject({ name: 'DiskFull', message: expect.stringMatching(/No space left on the disk/) });
    } finally {
      execFileSync('umount', [dir], { stdio: 'ignore' });
    }
  });

  it('knows a full disk from a tool that only said so (qemu-img, git), and nothing else', () => {
    const tool = Object.assign(new Error('qemu-img create failed'), { detail: 'qemu-img: error while writing: No space left on device' });
    expect(diskFullError(tool, '/data')).toMatchObject({ name: 'DiskFull', message: expect.stringContaining('/data') });
    expect(diskFullError(new Error('EACCES: permission denied'), '/data')).toBeUndefined();
    expect(diskFullError('plain text', '/data')).toBeUndefined();
  });
});
