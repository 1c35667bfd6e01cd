// Every git the host runs goes through runGit, under kernel limits set by
// prlimit before git starts. These tests run real git into those limits.
import { afterEach, describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  HOST_GIT_LIMITS, boundGitUnder, boundedGitCommand, effectiveLimits, guestDataLimits, stricter,
} from '../../../main/git/git-limits.js';
import { git, runGit } from '../../../main/git/host-git.js';
import { tempDir } from '../../support/repo.js';

const MiB = 1024 * 1024;
const dirs: string[] = [];
afterEach(() => {
  while (dirs.length) fs.rmSync(dirs.pop()!, { recursive: true, force: true });
});

/** Two files of random one-digit lines: git's line diff on them costs seconds of CPU per MiB. */
function diffCpuBomb(bytes: number): { dir: string; a: string; b: string } {
  const dir = tempDir('factory-cpu-');
  dirs.push(dir);
  const lines = (n: number) => Buffer.from(Array.from(crypto.randomBytes(n), (x) => `${x % 10}\n`).join(''));
  fs.writeFileSync(path.join(dir, 'a'), lines(bytes / 2));
  fs.writeFileSync(path.join(dir, 'b'), lines(bytes / 2));
  return { dir, a: 'a', b: 'b' };
}

describe('bounded git', () => {
  it('stops a git that passes its CPU bound and says so', async () => {
    const { dir, a, b } = diffCpuBomb(1 * MiB);
    const args = ['diff', '--no-index', '--numstat', a, b];
    const started = Date.now();
    const r = await runGit(args, { cwd: dir, limits: { ...HOST_GIT_LIMITS, cpuSeconds: 1 }, timeoutMs: 120_000 });
    expect(r.signal).toBe('SIGXCPU');
    expect(r.limitExceeded).toBe('cpu');
    expect(Date.now() - started).toBeLessThan(60_000);
    await expect(git(args, { cwd: dir, limits: { ...HOST_GIT_LIMITS, cpuSeconds: 1 }, timeoutMs: 120_000 })).rejects.toMatchObject({
      name: 'GitLimitExceeded',
      message: expect.stringMatching(/^git diff a exceeded its CPU time bound of 1 s: killed by SIGXCPU$/),
    });
  }, 180_000);

  it('stops a git that passes its memory bound and says so', async () => {
    const dir = tempDir('factory-mem-');
    dirs.push(dir);
    // hash-object reads all of stdin into memory first.
    const r = await runGit(['hash-object', '--stdin'], { cwd: dir, input: Buffer.alloc(96 * MiB), limits: { addressSpaceBytes: 64 * MiB, cpuSeconds: 60 } });
    expect(r.code).not.toBe(0);
    expect(r.limitExceeded).toBe('memory');
    const withAlloc = await runGit(['hash-object', '--stdin'], { cwd: dir, input: Buffer.alloc(8 * MiB), limits: { ...HOST_GIT_LIMITS, allocBytes: 4 * MiB } });
    expect(withAlloc.stderr).toMatch(/over limit 4194304/);
    expect(withAlloc.limitExceeded).toBe('memory');
    // The same work within the bounds succeeds: the limits are not a blanket failure.
    const fine = await runGit(['hash-object', '--stdin'], { cwd: dir, input: Buffer.alloc(8 * MiB), limits: { addressSpaceBytes: 256 * MiB, cpuSeconds: 60 } });
    expect(fine.code).toBe(0);
    expect(fine.stdout.trim()).toMatch(/^[0-9a-f]{40}$/);
  });

  it('refuses to run git unbounded when prlimit is missing, naming it', async () => {
    const dir = tempDir('factory-nopath-');
    dirs.push(dir);
    fs.symlinkSync(execFileSync('sh', ['-c', 'command -v git']).toString().trim(), path.join(dir, 'git'));
    const saved = process.env.PATH;
    process.env.PATH = dir;
    try {
      await expect(runGit(['--version'])).rejects.toMatchObject({
        name: 'GitUnavailable',
        message: expect.stringMatching(/prlimit \(util-linux\) was not found/),
      });
    } finally {
      process.env.PATH = saved;
    }
    expect((await runGit(['--version'])).code).toBe(0);
  });

  it('lets callers and guest-data folders make the bounds stricter, never looser', () => {
    const loose = { addressSpaceBytes: 64 * 1024 * MiB, cpuSeconds: 100_000 };
    expect(effectiveLimits({ limits: loose })).toMatchObject({ addressSpaceBytes: HOST_GIT_LIMITS.addressSpaceBytes, cpuSeconds: HOST_GIT_LIMITS.cpuSeconds });
    const root = tempDir('factory-guestroot-');
    dirs.push(root);
    const guest = guestDataLimits({ maxObjectBytes: 10 * MiB, maxDiffTextBytes: MiB, cpuSeconds: 7 });
    boundGitUnder(root, guest);
    const inside = path.join(root, 'task', 'repo.git');
    for (const opts of [{ cwd: inside }, { cwd: '/', gitDir: inside }, { cwd: root, gitDir: 'task/repo.git' }]) {
      expect(effectiveLimits({ ...opts, limits: loose })).toEqual(stricter(HOST_GIT_LIMITS, guest));
    }
    // A sibling whose name merely starts with the root's is not inside it.
    expect(effectiveLimits({ cwd: `${root}-other` })).toEqual(stricter(HOST_GIT_LIMITS));
    expect(effectiveLimits({ cwd: inside, limits: { addressSpaceBytes: 32 * MiB, cpuSeconds: 3 } })).toMatchObject({
      addressSpaceBytes: 32 * MiB, cpuSeconds: 3, allocBytes: guest.allocBytes,
    });
  });

  it('bounds git with a shell ulimit where prlimit does not exist (macOS)', () => {
    const cmd = boundedGitCommand({ addressSpaceBytes: 512 * MiB, cpuSeconds: 9, allocBytes: 5 * MiB }, ['--version'], 'darwin');
    expect(cmd.command).toBe('/bin/sh');
    expect(cmd.env).toEqual({ GIT_ALLOC_LIMIT: String(5 * MiB) });
    const r = spawnSync(cmd.command, cmd.args, { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^git version /);
    // The same script, asked to report its limit instead of running git.
    const probe = spawnSync(cmd.command, [...cmd.args.slice(0, 4), 'sh', '-c', 'ulimit -t'], { encoding: 'utf8' });
    expect(probe.stdout.trim()).toBe('9');
  });
});
