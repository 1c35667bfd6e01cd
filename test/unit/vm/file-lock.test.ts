// Two app instances (or a test run and the app) building the same image or snapshot:
// one takes the lock and builds, the other waits for its result; a lock left by a
// process that died is taken over instead of blocking forever.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { lockUnlessReady } from '../../../main/vm/file-lock.js';
import { tempDir } from '../../support/repo.js';

let dir: string;
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A pid no process has now: one that ran and ended. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '0']).pid!;
}

describe('lockUnlessReady', () => {
  it('returns the finished work without taking the lock', async () => {
    dir = tempDir('flock-');
    const lock = path.join(dir, '.x.lock');
    expect(await lockUnlessReady(lock, () => 'built', 10)).toBe('built');
    expect(fs.existsSync(lock)).toBe(false);
  });

  it('takes a free lock, writing its pid, and returns undefined', async () => {
    dir = tempDir('flock-');
    const lock = path.join(dir, '.x.lock');
    expect(await lockUnlessReady(lock, () => undefined, 10)).toBeUndefined();
    expect(fs.readFileSync(lock, 'utf8')).toBe(String(process.pid));
  });

  it('returns work finished between its look and taking the lock, and lets the lock go', async () => {
    dir = tempDir('flock-');
    const lock = path.join(dir, '.x.lock');
    let looks = 0;
    expect(await lockUnlessReady(lock, () => (++looks === 2 ? 'built meanwhile' : undefined), 10)).toBe('built meanwhile');
    expect(looks).toBe(2);
    expect(fs.existsSync(lock)).toBe(false);
  });

  it("waits while a live process holds the lock and returns that process's work once it is there", async () => {
    dir = tempDir('flock-');
    const lock = path.join(dir, '.x.lock');
    fs.writeFileSync(lock, String(process.ppid));
    let waits = 0;
    let result: string | undefined;
    const got = await lockUnlessReady(lock, () => result, 5, () => {
      waits++;
      if (waits === 3) result = 'built by the other';
    });
    expect(got).toBe('built by the other');
    expect(waits).toBe(3);
    expect(fs.readFileSync(lock, 'utf8')).toBe(String(process.ppid));
  });

  it('takes over a lock whose process has died', async () => {
    dir = tempDir('flock-');
    const lock = path.join(dir, '.x.lock');
    fs.writeFileSync(lock, String(deadPid()));
    let waits = 0;
    expect(await lockUnlessReady(lock, () => undefined, 5, () => waits++)).toBeUndefined();
    expect(waits).toBe(1);
    expect(fs.readFileSync(lock, 'utf8')).toBe(String(process.pid));
  });
});
