// The one-app-per-data-folder lock, taken by several apps started at the same
// moment: separate processes, as when a user's CLI commands and a tray start race.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { acquireInstanceLock, DataDirInUseError, LOCK_FILE, readPid } from '../../../main/host/socket/instance-lock.js';

const lockModule = path.resolve(__dirname, '../../../main/host/socket/instance-lock.ts');
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'fiab-lock-'));
  dirs.push(d);
  return d;
}

/** A pid that no process has now: a child that has exited. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

/** `n` apps try the lock at the same instant; each holding it keeps it a moment. Returns what each said. */
async function race(dataDir: string, n: number): Promise<string[]> {
  const at = Date.now() + 700;
  const script = `
    const { acquireInstanceLock } = await import(${JSON.stringify(lockModule)});
    while (Date.now() < ${at}) {}
    try {
      const lock = acquireInstanceLock(${JSON.stringify(dataDir)});
      console.log('held');
      await new Promise((r) => setTimeout(r, 600));
      lock.release();
    } catch (err) {
      console.log(err.name === 'DataDirInUse' ? 'in use' : 'error: ' + err.message);
    }`;
  const children = Array.from({ length: n }, () =>
    new Promise<string>((resolve) => {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      child.on('exit', () => resolve(out.trim()));
    }),
  );
  return Promise.all(children);
}

describe('instance lock', () => {
  it('is held by exactly one of several apps started at once, on a fresh folder and over a stale lock', async () => {
    for (let round = 0; round < 6; round++) {
      const dir = tempDir();
      if (round % 2 === 1) fs.writeFileSync(path.join(dir, LOCK_FILE), `${deadPid()}\n`);
      const said = await race(dir, 4);
      expect(said.filter((s) => s === 'held'), `round ${round}: ${said.join(', ')}`).toHaveLength(1);
      expect(said.filter((s) => s === 'in use')).toHaveLength(3);
      expect(fs.existsSync(path.join(dir, LOCK_FILE)), 'the holder removed its lock').toBe(false);
    }
  }, 60_000);

  it('names the live holder; takes over a stale or unreadable lock; release leaves a later owner alone', () => {
    const dir = tempDir();
    const file = path.join(dir, LOCK_FILE);
    const first = acquireInstanceLock(dir);
    expect(readPid(file)).toBe(process.pid);
    fs.writeFileSync(file, `${process.ppid}\n`); // another live process holds it now
    expect(() => acquireInstanceLock(dir)).toThrow(DataDirInUseError);
    expect(() => acquireInstanceLock(dir)).toThrow(`(pid ${process.ppid})`);
    first.release();
    expect(readPid(file), 'a lock another app took over stays').toBe(process.ppid);

    fs.writeFileSync(file, `${deadPid()}\n`);
    acquireInstanceLock(dir).release();
    fs.writeFileSync(file, 'not a pid');
    const taken = acquireInstanceLock(dir);
    expect(readPid(file)).toBe(process.pid);
    taken.release();
    expect(fs.existsSync(file)).toBe(false);
    expect(fs.readdirSync(dir), 'nothing else is left in the data folder').toEqual([]);
  });
});
