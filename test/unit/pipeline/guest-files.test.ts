// Several guest files in one round trip (writeGuestFiles): the script it sends
// runs here in a real bash with GNU coreutils, as the guest's would (the image
// is Debian), over a channel that is this computer's process. Hostile contents:
// a body that looks like the next file's length line, NUL bytes, no final
// newline, a multibyte character; and a stream cut short puts nothing in place.
import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { GuestSsh } from '../../../main/guest/guest-ssh.js';
import { writeGuestFiles } from '../../../main/pipeline/stage-runner.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'guest-files-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A "guest" that is bash here; `cut` drops stdin after that many bytes (a connection lost mid-way). */
function localGuest(cut?: number): GuestSsh {
  return {
    exec: async (command: string) => {
      const child = spawn('bash', ['-c', command], { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'] });
      const ch = new EventEmitter() as EventEmitter & { stderr: NodeJS.ReadableStream; end(b: Buffer): void };
      ch.stderr = child.stderr;
      child.stdout.on('data', (d) => ch.emit('data', d));
      child.on('close', (code) => {
        ch.emit('exit', code);
        ch.emit('close');
      });
      ch.end = (b: Buffer) => child.stdin.end(cut === undefined ? b : b.subarray(0, cut));
      return ch as never;
    },
    run: async () => ({ code: 0, stdout: '', stderr: '' }),
    putFile: async () => {},
    getFile: async () => 0,
  };
}

describe('guest files in one round trip', () => {
  it('writes each file exactly, whatever its bytes, then runs the line after', async () => {
    const a = path.join(dir, 'a', 'TASK.md');
    const b = path.join(dir, 'b', 'env');
    const tricky = 'line one\n12\nnot a length\n\0\0 NUL and é at the end';
    const env = Buffer.from([0x65, 0x78, 0x70, 0x0a, 0xc3, 0xa9]);
    await writeGuestFiles(localGuest(), [{ path: a, content: tricky }, { path: b, content: env }], `touch ${path.join(dir, 'after')}`);
    expect(fs.readFileSync(a, 'utf8')).toBe(tricky);
    expect(fs.readFileSync(b).equals(env)).toBe(true);
    expect(fs.existsSync(path.join(dir, 'after'))).toBe(true);
    expect(fs.readdirSync(path.join(dir, 'a'))).toEqual(['TASK.md']);
  });

  it('an empty file is a file', async () => {
    const a = path.join(dir, 'empty');
    const b = path.join(dir, 'full');
    await writeGuestFiles(localGuest(), [{ path: a, content: '' }, { path: b, content: 'x' }]);
    expect(fs.readFileSync(a, 'utf8')).toBe('');
    expect(fs.readFileSync(b, 'utf8')).toBe('x');
  });

  it('a stream cut short fails naming the files, puts none in place and runs nothing after', async () => {
    const a = path.join(dir, 'TASK.md');
    const b = path.join(dir, 'env');
    fs.writeFileSync(a, 'the old task\n');
    const write = writeGuestFiles(localGuest(20), [{ path: a, content: 'the new task, longer than the cut\n' }, { path: b, content: 'export X=1\n' }], `touch ${path.join(dir, 'after')}`);
    await expect(write).rejects.toThrow(/could not write .*TASK\.md and .*env in the sandbox \(exit 1\)/);
    expect(fs.readFileSync(a, 'utf8')).toBe('the old task\n');
    expect(fs.existsSync(b)).toBe(false);
    expect(fs.existsSync(path.join(dir, 'after'))).toBe(false);
  });
});
