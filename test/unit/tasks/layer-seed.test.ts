// Seeding a task on a cached environment: the repository that setup ran in
// (with whatever it planted in .git) is never used; only its install folders
// move into the task's fresh clone. Run by a real bash on folders standing in
// for the guest's (root is only needed in the guest, for files a root setup
// step owns).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { layerCarryScript } from '../../../main/tasks/sandbox-provisioner.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function put(root: string, files: Record<string, string>): void {
  for (const [rel, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    fs.writeFileSync(path.join(root, rel), content);
  }
}

function folders() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'layer-seed-'));
  dirs.push(dir);
  const old = path.join(dir, 'layer-repo');
  const repo = path.join(dir, 'repo');
  const outside = path.join(dir, 'outside');
  fs.mkdirSync(outside);
  return { dir, old, repo, outside };
}

const carry = (installDirs: string[], where: { old: string; repo: string }) => spawnSync('bash', ['-c', layerCarryScript(installDirs, where)], { encoding: 'utf8' });

describe('seeding on a cached environment', () => {
  it('moves only the named install folders into the fresh clone, at any depth, and deletes the rest of the old repository', () => {
    const { old, repo } = folders();
    put(old, {
      '.git/hooks/post-checkout': '#!/bin/sh\necho planted\n',
      '.git/config': '[core]\n\thooksPath = /tmp/hooks\n',
      'package.json': '{}',
      'node_modules/a/index.js': 'a',
      'node_modules/a/node_modules/b/index.js': 'b',
      'packages/p/node_modules/c/index.js': 'c',
      '.venv/bin/python': 'py',
      'build/out.js': 'built by setup',
      'src/main.js': 'changed by setup',
    });
    put(repo, { '.git/config': '[core]\n', 'package.json': '{}', 'packages/p/index.js': 'p', 'src/main.js': 'as committed' });
    const r = carry(['node_modules', '.venv'], { old, repo });
    expect(r.status, r.stderr).toBe(0);
    expect(fs.readFileSync(path.join(repo, 'node_modules/a/index.js'), 'utf8')).toBe('a');
    expect(fs.readFileSync(path.join(repo, 'node_modules/a/node_modules/b/index.js'), 'utf8')).toBe('b');
    expect(fs.readFileSync(path.join(repo, 'packages/p/node_modules/c/index.js'), 'utf8')).toBe('c');
    expect(fs.readFileSync(path.join(repo, '.venv/bin/python'), 'utf8')).toBe('py');
    // The clone's own files and .git stay as the clone made them.
    expect(fs.readFileSync(path.join(repo, 'src/main.js'), 'utf8')).toBe('as committed');
    expect(fs.readFileSync(path.join(repo, '.git/config'), 'utf8')).toBe('[core]\n');
    expect(fs.existsSync(path.join(repo, '.git/hooks'))).toBe(false);
    expect(fs.existsSync(path.join(repo, 'build'))).toBe(false);
    expect(fs.existsSync(old)).toBe(false);
  });

  it('never replaces what the clone has, never moves into a folder outside it, and never looks under a .git', () => {
    const { old, repo, outside } = folders();
    put(old, {
      'vendor/node_modules/x.js': 'from the layer',
      'link/node_modules/y.js': 'through a link',
      '.git/node_modules/z.js': 'under .git',
      'sub/.git/node_modules/w.js': 'under a nested .git',
    });
    put(repo, { 'vendor/node_modules/x.js': 'as committed' });
    fs.symlinkSync(outside, path.join(repo, 'link'));
    const r = carry(['node_modules'], { old, repo });
    expect(r.status, r.stderr).toBe(0);
    expect(fs.readFileSync(path.join(repo, 'vendor/node_modules/x.js'), 'utf8')).toBe('as committed');
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(fs.existsSync(path.join(repo, '.git'))).toBe(false);
    expect(fs.existsSync(path.join(repo, 'sub'))).toBe(false);
    expect(fs.existsSync(old)).toBe(false);
  });

  it('ignores a name that is a path or .git, and does nothing without an old repository', () => {
    const { old, repo, outside } = folders();
    const script = layerCarryScript(['../outside', '.git', '..', 'a b', 'node_modules'], { old, repo });
    expect(script).not.toContain('outside');
    expect(script).not.toContain("-name '.git' -o");
    fs.mkdirSync(repo);
    const r = carry(['node_modules'], { old, repo });
    expect(r.status, r.stderr).toBe(0);
    expect(fs.readdirSync(repo)).toEqual([]);
    expect(fs.readdirSync(outside)).toEqual([]);
  });
});
