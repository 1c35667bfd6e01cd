// The next steps after Approve, on real git repositories in temp folders: what a
// checkout would change, the checkout (refused over uncommitted changes), a push
// to a local bare repository with the user's git, and the editor. A repository
// is untrusted: remotes and branches named to look like options or to carry
// control characters must never reach git as anything but refused names.
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { branchInfo, checkRefName, checkoutBranch, openEditor, printable, pushBranch } from '../../../main/git/branch-actions.js';
import { gitIn, makeRepo, tempDir, type FixtureRepo } from '../../support/repo.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

const BRANCH = 'factory/abcdefgh';

/** A repository on main with an approved-like branch holding one more commit, and a bare "origin" beside it. */
async function approvedRepo(): Promise<{ repo: FixtureRepo; bare: string }> {
  const repo = await makeRepo({ files: { 'a.txt': 'main\n' } });
  cleanups.push(repo.cleanup);
  repo.git('branch', BRANCH);
  repo.git('switch', '-q', BRANCH);
  repo.write('a.txt', 'from the sandbox\n');
  repo.commit('work');
  repo.git('switch', '-q', 'main');
  const bare = tempDir('factory-bare-');
  cleanups.push(() => fs.rmSync(bare, { recursive: true, force: true }));
  gitIn(bare, ['init', '-q', '--bare']);
  repo.git('remote', 'add', 'origin', bare);
  return { repo, bare };
}

describe('branch and remote names from the repository', () => {
  it('accepts ordinary names and refuses options, control characters and what git refuses', async () => {
    await checkRefName('branch', BRANCH);
    await checkRefName('remote', 'origin');
    await checkRefName('remote', 'my-fork.2');
    for (const [kind, name, why] of [
      ['branch', '--upload-pack=touch pwned', /starts with a dash/],
      // git's own rules allow these two: only the dash rule stops them.
      ['branch', '--upload-pack=x', /starts with a dash/],
      ['remote', '--receive-pack=touch pwned', /starts with a dash/],
      ['remote', '-o', /starts with a dash/],
      ['branch', 'factory/a\nb', /control character/],
      ['remote', 'ori\u001b[31mgin', /control character/],
      ['branch', 'x\u007f', /control character/],
      ['branch', 'a..b', /not a valid git branch name/],
      ['branch', 'a/.hidden', /not a valid git branch name/],
      ['branch', 'x.lock', /not a valid git branch name/],
      ['remote', 'a b', /not a valid git remote name/],
      ['remote', 'a:b', /not a valid git remote name/],
      ['branch', '', /empty/],
      ['branch', 'x'.repeat(300), /longer than 255/],
    ] as const) {
      await expect(checkRefName(kind, name), `${kind} ${JSON.stringify(name)}`).rejects.toMatchObject({ name: 'InvalidRefName', message: expect.stringMatching(why) });
    }
  });
});

describe('check out the approved branch', () => {
  it('says what it changes first, refuses while tracked files are changed (naming them), then switches', async () => {
    const { repo } = await approvedRepo();
    repo.write('a.txt', 'my own unfinished edit\n');
    repo.write('notes.txt', 'untracked, stays as it is\n');
    const info = await branchInfo(repo.dir, BRANCH);
    expect(info).toMatchObject({ branch: BRANCH, exists: true, currentBranch: 'main', checkedOut: false, bare: false, dirty: ['a.txt'], dirtyMore: 0, remotes: ['origin'] });
    await expect(checkoutBranch(repo.dir, BRANCH)).rejects.toMatchObject({ name: 'WorkTreeDirty', message: expect.stringContaining('"a.txt"') });
    // Nothing moved: still on main with the user's edit.
    expect(repo.git('symbolic-ref', '--short', 'HEAD').trim()).toBe('main');
    expect(fs.readFileSync(path.join(repo.dir, 'a.txt'), 'utf8')).toBe('my own unfinished edit\n');
    // A staged change counts too.
    repo.git('add', 'a.txt');
    await expect(checkoutBranch(repo.dir, BRANCH)).rejects.toMatchObject({ name: 'WorkTreeDirty' });
    repo.git('reset', '-q', '--hard');
    const after = await checkoutBranch(repo.dir, BRANCH);
    expect(after).toMatchObject({ currentBranch: BRANCH, checkedOut: true, dirty: [] });
    expect(fs.readFileSync(path.join(repo.dir, 'a.txt'), 'utf8')).toBe('from the sandbox\n');
    expect(fs.readFileSync(path.join(repo.dir, 'notes.txt'), 'utf8')).toBe('untracked, stays as it is\n');
  });

  it('names at most 20 changed files and counts the rest', async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 25; i++) files[`f${String(i).padStart(2, '0')}.txt`] = 'x\n';
    const repo = await makeRepo({ files });
    cleanups.push(repo.cleanup);
    repo.git('branch', BRANCH);
    for (const f of Object.keys(files)) repo.write(f, 'changed\n');
    const info = await branchInfo(repo.dir, BRANCH);
    expect(info.dirty).toHaveLength(20);
    expect(info.dirtyMore).toBe(5);
    await expect(checkoutBranch(repo.dir, BRANCH)).rejects.toThrow(/and 5 more; commit or stash them/);
  });

  it('says when the branch was deleted since the approval', async () => {
    const { repo } = await approvedRepo();
    repo.git('branch', '-q', '-D', BRANCH);
    expect((await branchInfo(repo.dir, BRANCH)).exists).toBe(false);
    await expect(checkoutBranch(repo.dir, BRANCH)).rejects.toMatchObject({ name: 'NotFound' });
  });
});

describe('push the approved branch', () => {
  it("pushes factory/<id> to the chosen remote with the user's git and shows git's output", async () => {
    const { repo, bare } = await approvedRepo();
    const res = await pushBranch(repo.dir, 'origin', BRANCH);
    expect(gitIn(bare, ['rev-parse', `refs/heads/${BRANCH}`]).trim()).toBe(repo.git('rev-parse', BRANCH).trim());
    // Only that branch: main was not pushed along.
    expect(gitIn(bare, ['for-each-ref', '--format=%(refname)']).trim()).toBe(`refs/heads/${BRANCH}`);
    expect(res).toMatchObject({ remote: 'origin', branch: BRANCH });
    expect(res.output).toContain(`[new branch]      ${BRANCH} -> ${BRANCH}`);
  });

  it("fails with git's own words when the remote refuses", async () => {
    const { repo, bare } = await approvedRepo();
    const hook = path.join(bare, 'hooks', 'pre-receive');
    fs.writeFileSync(hook, '#!/bin/sh\necho "policy: no factory branches here \x1b[31mred\x1b[0m"\nexit 1\n', { mode: 0o755 });
    const err = await pushBranch(repo.dir, 'origin', BRANCH).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'PushFailed', message: `git push origin ${BRANCH} exited with status 1` });
    const detail = (err as { detail: string }).detail;
    expect(detail).toContain('remote: policy: no factory branches here');
    expect(detail).toContain('pre-receive hook declined');
    // The remote's escape sequences arrive as visible marks, not as terminal commands.
    expect(detail).not.toContain('\x1b');
    expect(detail).toContain('\ufffd[31mred');
  });

  it('refuses remotes named as options or with control characters, and runs nothing they carry', async () => {
    const { repo, bare } = await approvedRepo();
    const marker = path.join(repo.dir, 'PWNED');
    // Written straight into the config, as a hostile repository could have them.
    for (const name of [`--upload-pack=touch ${marker}`, `--receive-pack=touch ${marker}`, 'evil\u0007bell']) {
      repo.git('config', `remote.${name}.url`, bare);
    }
    const info = await branchInfo(repo.dir, BRANCH);
    expect(info.remotes).toEqual(['origin']);
    for (const name of [`--receive-pack=touch ${marker}`, `--upload-pack=touch ${marker}`, 'evil\u0007bell', '-o']) {
      await expect(pushBranch(repo.dir, name, BRANCH)).rejects.toMatchObject({ name: 'InvalidRefName' });
    }
    // A well-formed name that is not one of the repository's remotes (a URL or path in disguise) is refused too.
    await expect(pushBranch(repo.dir, 'elsewhere', BRANCH)).rejects.toMatchObject({ name: 'InvalidInput', message: expect.stringContaining('(it has origin)') });
    expect(fs.existsSync(marker)).toBe(false);
    expect(gitIn(bare, ['for-each-ref']).trim()).toBe('');
  });

  it('refuses a hostile branch name before git sees it', async () => {
    const { repo } = await approvedRepo();
    await expect(pushBranch(repo.dir, 'origin', '--upload-pack=x')).rejects.toMatchObject({ name: 'InvalidRefName' });
    await expect(checkoutBranch(repo.dir, '-b\u0000x')).rejects.toMatchObject({ name: 'InvalidRefName' });
  });
});

describe('open in editor', () => {
  it('runs the editor command with the repository path as its one argument, never through a shell', async () => {
    const dir = tempDir('factory-editor-');
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    // A repository folder whose name a shell would expand or split.
    const repoDir = path.join(dir, 'my repo $(touch SHELL-RAN); echo x');
    fs.mkdirSync(repoDir);
    const out = path.join(dir, 'argv.json');
    const editor = path.join(dir, 'fake-editor');
    fs.writeFileSync(editor, `#!${process.execPath}\nrequire('fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify(process.argv.slice(2)));\n`, { mode: 0o755 });
    expect(await openEditor(editor, repoDir)).toEqual({ command: editor });
    await expect.poll(() => fs.existsSync(out), { timeout: 15_000 }).toBe(true);
    expect(JSON.parse(fs.readFileSync(out, 'utf8'))).toEqual([repoDir]);
    expect(fs.existsSync(path.join(repoDir, 'SHELL-RAN'))).toBe(false);
    expect(fs.existsSync(path.join(dir, 'SHELL-RAN'))).toBe(false);
  });

  it('names an editor that is not installed', async () => {
    const dir = tempDir('factory-editor-');
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    await expect(openEditor('no-such-editor-here', dir)).rejects.toMatchObject({ name: 'EditorFailed', message: expect.stringContaining('"no-such-editor-here" could not be run (ENOENT)') });
    await expect(openEditor('code', 'relative/path')).rejects.toMatchObject({ name: 'InvalidPath' });
  });
});

describe('printable', () => {
  it('turns progress carriage returns into lines and other control characters into marks', () => {
    expect(printable('Counting 50%\rCounting 100%\r\nok\u0000\u001b]0;title\u0007\n')).toBe('Counting 50%\nCounting 100%\nok\ufffd\ufffd]0;title\ufffd');
  });
});
