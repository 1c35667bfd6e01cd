import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { createSeedBundle, inspectRepo } from '../../../main/tasks/host-repo.js';
import { gitIn, makeRepo, tempDir } from '../../support/repo.js';

const dirs: string[] = [];
afterEach(() => {
  while (dirs.length) fs.rmSync(dirs.pop()!, { recursive: true, force: true });
});
function scratch(): string {
  const d = tempDir();
  dirs.push(d);
  return d;
}

describe('repo validation', () => {
  it('rejects a path that does not exist', async () => {
    await expect(inspectRepo(path.join(scratch(), 'nope'))).rejects.toMatchObject({ name: 'NotAGitRepository', message: expect.stringContaining('does not exist') });
  });

  it('rejects a folder that is not a git repository', async () => {
    const dir = scratch();
    await expect(inspectRepo(dir)).rejects.toMatchObject({ name: 'NotAGitRepository', message: `${dir} is not a git repository` });
  });

  it('rejects a repository with no commits', async () => {
    const repo = await makeRepo({ dir: path.join(scratch(), 'r') });
    await expect(inspectRepo(repo.dir)).rejects.toMatchObject({ name: 'EmptyRepository', message: expect.stringContaining('has no commits yet') });
  });

  it('rejects an unknown or option-like base ref', async () => {
    const repo = await makeRepo({ dir: path.join(scratch(), 'r'), files: { a: 'a\n' } });
    await expect(inspectRepo(repo.dir, 'nope')).rejects.toMatchObject({ name: 'InvalidBaseRef', message: expect.stringContaining('base ref nope was not found') });
    await expect(inspectRepo(repo.dir, '--output=/tmp/x')).rejects.toMatchObject({ name: 'InvalidInput' });
  });

  it('resolves the top level and the base commit from a sub-folder', async () => {
    const repo = await makeRepo({ dir: path.join(scratch(), 'r'), files: { 'sub/a': 'a\n' } });
    const first = repo.head();
    repo.write('b', 'b\n');
    repo.commit('second');
    const r = await inspectRepo(path.join(repo.dir, 'sub'));
    expect(r).toMatchObject({ repoPath: fs.realpathSync(repo.dir), baseRef: 'HEAD', baseCommit: repo.head(), bare: false });
    expect((await inspectRepo(repo.dir, 'HEAD~1')).baseCommit).toBe(first);
  });
});

describe('seed bundle', () => {
  it('carries the base commit on the task branch without touching the host repo', async () => {
    const repo = await makeRepo({ dir: path.join(scratch(), 'r'), files: { a: 'a\n' } });
    const refsBefore = repo.git('for-each-ref');
    const work = scratch();
    const seed = await createSeedBundle({ repoPath: repo.dir, baseCommit: repo.head(), branch: 'factory/abc', workDir: work });
    expect(seed.seedCommit).toBe(repo.head());
    const clone = path.join(scratch(), 'clone');
    gitIn(work, ['clone', '-q', '-b', 'factory/abc', seed.bundlePath, clone]);
    expect(gitIn(clone, ['rev-parse', 'HEAD']).trim()).toBe(repo.head());
    expect(repo.git('for-each-ref')).toBe(refsBefore);
  });

  it('adds uncommitted changes as one extra commit, read from disk without filters', async () => {
    const repo = await makeRepo({ dir: path.join(scratch(), 'r'), files: { a: 'a\n', gone: 'x\n', 'run.sh': 'echo\n' } });
    repo.write('a', 'changed\n');
    repo.write('new/untracked.txt', 'new\n');
    fs.rmSync(path.join(repo.dir, 'gone'));
    fs.chmodSync(path.join(repo.dir, 'run.sh'), 0o755);
    repo.write('.gitignore', 'ignored.log\n');
    repo.write('ignored.log', 'noise\n');
    repo.git('add', '.gitignore');
    const statusBefore = repo.status();
    const work = scratch();
    const seed = await createSeedBundle({ repoPath: repo.dir, baseCommit: repo.head(), branch: 'factory/abc', workDir: work, includeUncommitted: true });
    expect(seed.seedCommit).not.toBe(repo.head());
    const clone = path.join(scratch(), 'clone');
    gitIn(work, ['clone', '-q', '-b', 'factory/abc', seed.bundlePath, clone]);
    expect(fs.readFileSync(path.join(clone, 'a'), 'utf8')).toBe('changed\n');
    expect(fs.readFileSync(path.join(clone, 'new/untracked.txt'), 'utf8')).toBe('new\n');
    expect(fs.existsSync(path.join(clone, 'gone'))).toBe(false);
    expect(fs.existsSync(path.join(clone, 'ignored.log'))).toBe(false);
    expect(fs.statSync(path.join(clone, 'run.sh')).mode & 0o111).not.toBe(0);
    expect(gitIn(clone, ['rev-parse', 'HEAD~1']).trim()).toBe(repo.head());
    expect(repo.status()).toBe(statusBefore);
  });
});
