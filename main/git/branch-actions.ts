// The next steps on an approved branch, run on the host in the user's
// repository: what checking it out would change, the checkout itself, a push
// with the user's own git and credentials, and the user's editor. Every command
// gets its arguments as an array (never a shell). Branch and remote names come
// from the repository, so they are untrusted: checked with git's own ref rules,
// and a name starting with a dash (an option in disguise) is refused outright.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { FactoryError } from '../../common/errors.js';
import type { BranchInfo, PushResult } from '../../common/domain.js';
import { firstLine, runGit } from './host-git.js';

const CONTROL = /[\u0000-\u001f\u007f]/;
const SHOWN_DIRTY = 20;
const MAX_PUSH_OUTPUT = 64 * 1024;
const PUSH_TIMEOUT_MS = 5 * 60_000;

/** A name safe to hand to git as a branch or remote: git's ref rules, and never an option. */
export async function checkRefName(kind: 'branch' | 'remote', name: string): Promise<void> {
  const shown = JSON.stringify(name.slice(0, 120));
  if (!name) throw new FactoryError('InvalidRefName', `the ${kind} name is empty`);
  if (name.startsWith('-')) throw new FactoryError('InvalidRefName', `the ${kind} name ${shown} starts with a dash; git would take it for an option`);
  if (CONTROL.test(name)) throw new FactoryError('InvalidRefName', `the ${kind} name ${shown} contains a control character`);
  if (name.length > 255) throw new FactoryError('InvalidRefName', `the ${kind} name ${shown}… is longer than 255 characters`);
  // git's own rules: a branch is refs/heads/<name>; a remote is valid when refs/remotes/<name>/x is (as git's valid_remote_name).
  const ref = kind === 'branch' ? `refs/heads/${name}` : `refs/remotes/${name}/x`;
  const r = await runGit(['check-ref-format', ref], { timeoutMs: 15_000 });
  if (r.code !== 0) throw new FactoryError('InvalidRefName', `the ${kind} name ${shown} is not a valid git ${kind} name (git check-ref-format)`);
}

/** The approved branch as the repository has it now: what a checkout would change, and where it could be pushed. */
export async function branchInfo(repoPath: string, branch: string): Promise<BranchInfo> {
  await checkRefName('branch', branch);
  const git = (args: string[]) => runGit(args, { cwd: repoPath, timeoutMs: 30_000 });
  const bare = (await git(['rev-parse', '--is-bare-repository'])).stdout.trim() === 'true';
  const exists = (await git(['rev-parse', '--verify', '--quiet', `refs/heads/${branch}^{commit}`])).code === 0;
  const head = await git(['symbolic-ref', '--quiet', '--short', 'HEAD']);
  const currentBranch = head.code === 0 ? head.stdout.trim() : undefined;
  let dirty: string[] = [];
  if (!bare) {
    // Tracked files only: untracked ones stay as they are across a checkout (git refuses if one would be overwritten).
    const st = await git(['status', '--porcelain=v1', '-z', '--untracked-files=no', '--no-renames']);
    if (st.code !== 0) throw new FactoryError('GitFailed', `git status failed in ${repoPath}: ${firstLine(st.stderr)}`);
    dirty = st.stdout.split('\0').filter((e) => e.length > 3).map((e) => e.slice(3));
  }
  const remotesOut = await git(['remote']);
  const remotes: string[] = [];
  for (const name of remotesOut.stdout.split('\n').filter(Boolean)) {
    // A remote whose name git would take for an option, or that is not a valid name, is not offered.
    if (await checkRefName('remote', name).then(() => true, () => false)) remotes.push(name);
  }
  return {
    branch,
    exists,
    ...(currentBranch !== undefined ? { currentBranch } : {}),
    checkedOut: currentBranch === branch,
    bare,
    dirty: dirty.slice(0, SHOWN_DIRTY),
    dirtyMore: Math.max(0, dirty.length - SHOWN_DIRTY),
    remotes,
  };
}

/** Switches the work tree to the branch; refused while tracked files have uncommitted changes (named). */
export async function checkoutBranch(repoPath: string, branch: string): Promise<BranchInfo> {
  const before = await branchInfo(repoPath, branch);
  if (before.bare) throw new FactoryError('InvalidInput', `${repoPath} is a bare repository: it has no work tree to check ${branch} out into`);
  if (!before.exists) throw new FactoryError('NotFound', `branch ${branch} is not in ${repoPath} (deleted since it was approved?)`);
  if (before.checkedOut) return before;
  if (before.dirty.length) {
    const more = before.dirtyMore ? ` and ${before.dirtyMore} more` : '';
    throw new FactoryError('WorkTreeDirty', `${repoPath} has uncommitted changes in ${before.dirty.map((f) => JSON.stringify(f)).join(', ')}${more}; commit or stash them before checking out ${branch}`);
  }
  // The name was checked above; --no-guess keeps git from making a branch out of a remote's.
  const r = await runGit(['switch', '--quiet', '--no-guess', branch], { cwd: repoPath, timeoutMs: 120_000 });
  if (r.code !== 0) throw new FactoryError('GitFailed', `git switch ${branch} failed in ${repoPath}: ${firstLine(r.stderr)}`, r.stderr.slice(0, 16_000));
  return branchInfo(repoPath, branch);
}

/**
 * `git push -- <remote> refs/heads/<branch>:refs/heads/<branch>` with the
 * user's own git, config and credential helpers (not the app's locked-down git:
 * this is the push they would type). No prompt can be answered here, so git is
 * told not to ask; it fails with its own words instead.
 */
export async function pushBranch(repoPath: string, remote: string, branch: string): Promise<PushResult> {
  await checkRefName('remote', remote);
  const info = await branchInfo(repoPath, branch);
  if (!info.remotes.includes(remote)) {
    throw new FactoryError('InvalidInput', `${repoPath} has no remote named ${JSON.stringify(remote.slice(0, 120))} (it has ${info.remotes.join(', ') || 'none'})`);
  }
  if (!info.exists) throw new FactoryError('NotFound', `branch ${branch} is not in ${repoPath} (deleted since it was approved?)`);
  const ref = `refs/heads/${branch}`;
  const { code, output, timedOut } = await runUserGit(['push', '--', remote, `${ref}:${ref}`], repoPath);
  if (code !== 0) {
    const why = timedOut ? `took longer than ${PUSH_TIMEOUT_MS / 60_000} minutes and was stopped` : `exited with status ${code}`;
    throw new FactoryError('PushFailed', `git push ${remote} ${branch} ${why}`, output);
  }
  return { remote, branch, output };
}

/** Starts the user's editor on the repository: `command` with the path as its one argument, detached. */
export async function openEditor(command: string, repoPath: string): Promise<{ command: string }> {
  if (!path.isAbsolute(repoPath)) throw new FactoryError('InvalidPath', `the repository path ${JSON.stringify(repoPath)} is not absolute`);
  await new Promise<void>((resolve, reject) => {
    const child = spawn(command, [repoPath], { cwd: repoPath, detached: true, stdio: 'ignore', shell: false });
    child.once('error', (err: NodeJS.ErrnoException) =>
      reject(new FactoryError('EditorFailed', `the editor command ${JSON.stringify(command)} could not be run (${err.code ?? err.message}); set editorCommand to your editor`)),
    );
    child.once('spawn', () => {
      child.unref();
      resolve();
    });
  });
  return { command };
}

/** git as the user runs it (their config, hooks and credential helpers), stdout and stderr together, made printable. */
function runUserGit(args: string[], cwd: string): Promise<{ code: number | null; output: string; timedOut: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } });
    const chunks: Buffer[] = [];
    let bytes = 0;
    const take = (b: Buffer) => {
      if (bytes < MAX_PUSH_OUTPUT) chunks.push(b.subarray(0, MAX_PUSH_OUTPUT - bytes));
      bytes += b.length;
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, PUSH_TIMEOUT_MS);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new FactoryError('GitFailed', `git could not be run: ${err.message}`));
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      const cut = bytes > MAX_PUSH_OUTPUT ? `\n[output cut at ${MAX_PUSH_OUTPUT / 1024} KiB]` : '';
      resolve({ code, output: printable(Buffer.concat(chunks).toString('utf8')) + cut, timedOut });
    });
  });
}

/** What a remote says is untrusted: progress carriage returns become new lines, other control characters a visible mark. */
export function printable(text: string): string {
  return text
    .replace(/\r\n?/g, '\n')
    .replace(/\n{2,}/g, '\n')
    .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '\ufffd')
    .trim();
}
