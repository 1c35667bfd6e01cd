// The one-app-per-data-folder lock, taken by several apps started at the same
// moment: separate processes, as when a user's CLI commands and a tray start race.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { acquireInstanceLock, DataDirInUseError, LOCK_BIRTH_MS, LOCK_FILE, readPid, removeIfStill } from '../../../main/instance/instance-lock.js';
import { runnable } from '../../support/cli.js';

const lockModule = runnable(path.resolve(__dirname, '../../../main/instance/instance-lock.ts'));
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

/** link() as a file system without hard links answers it (vfat, exfat). */
function linkWithoutHardLinks(): never {
  throw Object.assign(new Error('link: operation not permitted'), { code: 'EPERM' });
}
const NO_HARD_LINKS = linkWithoutHardLinks.toString();

/**
 * `n` apps try the lock at the same instant; the one holding it keeps it until every
 * other app has answered. Returns what each said.
 * A real barrier, not a clock: each child says "ready", all are told "go" together once
 * every one is ready, and the holder releases only when its stdin closes, after the others
 * have answered. With a fixed start time and hold time a child slowed by a busy machine
 * could start after the holder had released and take the lock legitimately.
 * noHardLinks: their link() fails as on a file system without hard links.
 */
async function race(dataDir: string, n: number, noHardLinks = false): Promise<string[]> {
  const script = `
    const { acquireInstanceLock } = await import(${JSON.stringify(lockModule.url)});
    const { createInterface } = await import('node:readline');
    const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
    console.log('ready');
    await lines.next(); // "go"
    try {
      const lock = acquireInstanceLock(${JSON.stringify(dataDir)}${noHardLinks ? `, { link: ${NO_HARD_LINKS} }` : ''});
      console.log('held');
      await lines.next(); // stdin closes once every other app has answered
      lock.release();
    } catch (err) {
      console.log(err.name === 'DataDirInUse' ? 'in use' : 'error: ' + err.message);
    }
    process.exit(0);`;
  const children = Array.from({ length: n }, () => spawn(process.execPath, [...lockModule.nodeArgs, '--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] }));
  const lineOf = (child: (typeof children)[number], want: (line: string) => boolean) =>
    new Promise<string>((resolve, reject) => {
      let out = '';
      const onData = (d: Buffer) => {
        out += d;
        const line = out.split('\n').map((l) => l.trim()).find(want);
        if (line !== undefined) {
          child.stdout.off('data', onData);
          resolve(line);
        }
      };
      child.stdout.on('data', onData);
      child.on('exit', () => reject(new Error(`an app exited before it answered: ${out.trim()}`)));
    });
  await Promise.all(children.map((c) => lineOf(c, (l) => l === 'ready')));
  const answers = children.map((c) => lineOf(c, (l) => l !== 'ready' && l !== ''));
  for (const c of children) c.stdin.write('go\n');
  const said = await Promise.all(answers);
  const exited = children.map((c) => new Promise<void>((resolve) => (c.exitCode !== null ? resolve() : c.on('exit', () => resolve()))));
  for (const c of children) c.stdin.end();
  await Promise.all(exited);
  return said;
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

  it('is held by exactly one of several apps on a file system without hard links', async () => {
    for (let round = 0; round < 4; round++) {
      const dir = tempDir();
      if (round % 2 === 1) fs.writeFileSync(path.join(dir, LOCK_FILE), `${deadPid()}\n`);
      const said = await race(dir, 4, true);
      expect(said.filter((s) => s === 'held'), `round ${round}: ${said.join(', ')}`).toHaveLength(1);
      expect(said.filter((s) => s === 'in use')).toHaveLength(3);
      expect(fs.existsSync(path.join(dir, LOCK_FILE)), 'the holder removed its lock').toBe(false);
    }
  }, 60_000);

  it('waits for an empty lock another app is writing; an empty lock left long ago is stale', () => {
    const dir = tempDir();
    const file = path.join(dir, LOCK_FILE);
    const noLinks = { link: linkWithoutHardLinks };
    // Just created, pid not written yet: the "other app" writes it 300 ms later, while we wait.
    fs.writeFileSync(file, '');
    const writer = spawn(process.execPath, ['-e', `setTimeout(() => require('fs').writeFileSync(${JSON.stringify(file)}, process.pid + '\\n'), 300); setTimeout(() => {}, 10000)`]);
    const t0 = Date.now();
    expect(() => acquireInstanceLock(dir, noLinks)).toThrow(`(pid ${writer.pid})`);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
    writer.kill();
    fs.rmSync(file);
    // Empty and older than LOCK_BIRTH_MS: whoever made it died before writing.
    fs.writeFileSync(file, '');
    const old = new Date(Date.now() - LOCK_BIRTH_MS - 1000);
    fs.utimesSync(file, old, old);
    const lock = acquireInstanceLock(dir, noLinks);
    expect(readPid(file)).toBe(process.pid);
    lock.release();
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('a takeover removes only the lock it saw: never one another app made since, nor one being written', () => {
    // The race the concurrent rounds hit by chance on a busy machine, one step at a time: an app saw the
    // lock unreadable or gone, and by the time it holds the takeover mutex another app has just created
    // its lock (without hard links: empty, its pid not written yet). That lock must stay.
    const dir = tempDir();
    const file = path.join(dir, LOCK_FILE);
    fs.writeFileSync(file, '');
    removeIfStill(file, undefined);
    expect(fs.existsSync(file), 'an empty lock being written').toBe(true);
    fs.writeFileSync(file, `${process.ppid}\n`);
    removeIfStill(file, undefined);
    removeIfStill(file, deadPid());
    expect(readPid(file), 'a lock with another pid than the one seen').toBe(process.ppid);
    fs.rmSync(file);
    expect(() => removeIfStill(file, undefined), 'seen gone, still gone').not.toThrow();
    // What was seen, still there: removed.
    fs.writeFileSync(file, 'not a pid');
    removeIfStill(file, undefined);
    expect(fs.existsSync(file)).toBe(false);
    const dead = deadPid();
    fs.writeFileSync(file, `${dead}\n`);
    removeIfStill(file, dead);
    expect(fs.existsSync(file)).toBe(false);
  });

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
