// Real git repositories for tests: a temp folder, files, commits.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface FixtureRepo {
  dir: string;
  git(...args: string[]): string;
  write(rel: string, content: string): void;
  commit(message: string): string;
  head(): string;
  /** `git status --porcelain` (including untracked files), for before/after comparisons. */
  status(): string;
  cleanup(): void;
}

const GIT_ENV = {
  GIT_AUTHOR_NAME: 'Fixture',
  GIT_AUTHOR_EMAIL: 'fixture@example.invalid',
  GIT_COMMITTER_NAME: 'Fixture',
  GIT_COMMITTER_EMAIL: 'fixture@example.invalid',
  GIT_CONFIG_NOSYSTEM: '1',
};

export function gitIn(dir: string, args: string[], input?: string | Buffer): string {
  return execFileSync('git', args, {
    cwd: dir,
    env: { ...process.env, ...GIT_ENV },
    input,
    maxBuffer: 64 * 1024 * 1024,
  }).toString('utf8');
}

export function tempDir(prefix = 'factory-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Creates a repo on branch main; with `files` it makes one commit holding them (unless `commit: false`). */
export async function makeRepo(opts: { files?: Record<string, string>; commit?: boolean; dir?: string } = {}): Promise<FixtureRepo> {
  const dir = opts.dir ?? tempDir('factory-repo-');
  fs.mkdirSync(dir, { recursive: true });
  gitIn(dir, ['init', '-q', '-b', 'main']);
  const repo: FixtureRepo = {
    dir,
    git: (...args) => gitIn(dir, args),
    write(rel, content) {
      const file = path.join(dir, rel);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, content);
    },
    commit(message) {
      gitIn(dir, ['add', '-A']);
      gitIn(dir, ['commit', '-q', '--allow-empty', '-m', message]);
      return repo.head();
    },
    head: () => gitIn(dir, ['rev-parse', 'HEAD']).trim(),
    status: () => gitIn(dir, ['status', '--porcelain', '--untracked-files=all']),
    cleanup: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
  for (const [rel, content] of Object.entries(opts.files ?? {})) repo.write(rel, content);
  if (opts.files && opts.commit !== false) repo.commit('initial');
  return repo;
}
