// The host repository a task starts from: validation (is it a repo, does it
// have commits, does the base ref exist) and the seed bundle that carries the
// base into the sandbox. The seed is built in a scratch bare repo that borrows
// the host's objects, so the host repo gains no refs, objects or index changes.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { FactoryError } from '../../common/errors.js';
import { firstLine, git, runGit } from '../git/host-git.js';
import { APP_IDENTITY, identityEnv } from '../git/commit-identity.js';
import { uncommittedChanges } from '../git/work-tree-changes.js';

export interface InspectedRepo {
  /** The work tree's top level (or the git dir of a bare repo). */
  repoPath: string;
  baseRef: string;
  baseCommit: string;
  bare: boolean;
}

export async function inspectRepo(repoPathIn: string, baseRefIn?: string): Promise<InspectedRepo> {
  const abs = path.resolve(repoPathIn);
  const stat = await fsp.stat(abs).catch(() => null);
  if (!stat) throw new FactoryError('NotAGitRepository', `${abs} does not exist`);
  if (!stat.isDirectory()) throw new FactoryError('NotAGitRepository', `${abs} is not a folder`);

  const probe = await runGit(['rev-parse', '--is-bare-repository', '--show-toplevel'], { cwd: abs, timeoutMs: 15_000 });
  if (probe.code !== 0) {
    const why = firstLine(probe.stderr);
    if (/dubious ownership/.test(probe.stderr)) {
      throw new FactoryError('NotAGitRepository', `${abs} is owned by another user; git refuses it (${why})`);
    }
    throw new FactoryError('NotAGitRepository', `${abs} is not a git repository`, why || undefined);
  }
  const [isBare, top] = probe.stdout.trim().split('\n');
  const bare = isBare === 'true';
  let repoPath: string;
  if (bare) {
    repoPath = (await git(['rev-parse', '--path-format=absolute', '--git-dir'], { cwd: abs })).stdout.trim();
  } else {
    repoPath = top ?? abs;
  }

  const baseRef = baseRefIn?.trim() || 'HEAD';
  if (baseRef.startsWith('-') || /[\s\0]/.test(baseRef) || baseRef.length > 256) {
    throw new FactoryError('InvalidInput', `base ref ${JSON.stringify(baseRef.slice(0, 80))} is not a valid ref name`);
  }
  const resolved = await runGit(['rev-parse', '--verify', '--quiet', `${baseRef}^{commit}`], { cwd: repoPath, timeoutMs: 15_000 });
  if (resolved.code !== 0) {
    if (baseRef === 'HEAD') {
      const any = await runGit(['rev-list', '-n', '1', '--all'], { cwd: repoPath, timeoutMs: 15_000 });
      if (!any.stdout.trim()) {
        throw new FactoryError('EmptyRepository', `${repoPath} has no commits yet; make a first commit, then start the task`);
      }
      throw new FactoryError('InvalidBaseRef', `HEAD of ${repoPath} does not point at a commit (unborn branch); choose a base ref`);
    }
    throw new FactoryError('InvalidBaseRef', `base ref ${baseRef} was not found in ${repoPath}`);
  }
  return { repoPath, baseRef, baseCommit: resolved.stdout.trim(), bare };
}

const AUTHOR_ENV = identityEnv(APP_IDENTITY);

/**
 * Writes `<workDir>/seed.bundle` holding refs/heads/<branch> at the base commit,
 * or at one extra commit on top of it with the working tree's uncommitted
 * changes (contents taken as they are on disk: no clean filters run).
 */
export async function createSeedBundle(opts: {
  repoPath: string;
  baseCommit: string;
  branch: string;
  workDir: string;
  includeUncommitted?: boolean;
}): Promise<{ bundlePath: string; seedCommit: string; uncommittedFiles: number }> {
  const { repoPath, baseCommit, branch, workDir } = opts;
  await fsp.mkdir(workDir, { recursive: true });
  const scratch = path.join(workDir, 'seed.git');
  await fsp.rm(scratch, { recursive: true, force: true });
  const hostObjects = (await git(['rev-parse', '--path-format=absolute', '--git-path', 'objects'], { cwd: repoPath })).stdout.trim();
  await git(['init', '--quiet', '--bare', scratch]);
  await fsp.writeFile(path.join(scratch, 'objects', 'info', 'alternates'), hostObjects + '\n');
  const env = { GIT_DIR: scratch };

  let seedCommit = baseCommit;
  let uncommittedFiles = 0;
  if (opts.includeUncommitted) {
    const changes = await uncommittedChanges(repoPath);
    uncommittedFiles = changes.length;
    if (changes.length > 0) {
      const index = path.join(workDir, 'seed.index');
      const idxEnv = { ...env, GIT_INDEX_FILE: index };
      await git(['read-tree', baseCommit], { cwd: scratch, env: idxEnv });
      const lines: string[] = [];
      for (const c of changes) {
        if (c.deleted) {
          lines.push(`0 ${'0'.repeat(40)}\t${c.path}`);
          continue;
        }
        const full = path.join(repoPath, c.path);
        const st = fs.lstatSync(full);
        let sha: string;
        let mode: string;
        if (st.isSymbolicLink()) {
          sha = (await git(['hash-object', '-w', '--stdin'], { cwd: scratch, env, input: fs.readlinkSync(full) })).stdout.trim();
          mode = '120000';
        } else if (st.isFile()) {
          sha = (await git(['hash-object', '-w', '--no-filters', '--stdin'], { cwd: scratch, env, input: fs.readFileSync(full) })).stdout.trim();
          mode = st.mode & 0o111 ? '100755' : '100644';
        } else {
          continue; // directories (nested repos) and special files are not carried
        }
        lines.push(`${mode} ${sha}\t${c.path}`);
      }
      await git(['update-index', '-z', '--index-info'], { cwd: scratch, env: idxEnv, input: lines.join('\0') + '\0' });
      const tree = (await git(['write-tree'], { cwd: scratch, env: idxEnv })).stdout.trim();
      seedCommit = (
        await git(['commit-tree', tree, '-p', baseCommit, '-m', 'Uncommitted changes from the host working tree'], {
          cwd: scratch,
          env: { ...env, ...AUTHOR_ENV },
        })
      ).stdout.trim();
    }
  }
  await git(['update-ref', `refs/heads/${branch}`, seedCommit, ''], { cwd: scratch, env });
  const bundlePath = path.join(workDir, 'seed.bundle');
  await git(['bundle', 'create', '--quiet', bundlePath, `refs/heads/${branch}`], { cwd: scratch, env, timeoutMs: 10 * 60_000 });
  await fsp.rm(scratch, { recursive: true, force: true });
  await fsp.rm(path.join(workDir, 'seed.index'), { force: true });
  return { bundlePath, seedCommit, uncommittedFiles };
}

/**
 * Checks that a task's host repository is still the git repository the task
 * started from (the folder may have been deleted, moved or replaced since):
 * it exists and git finds its top level (or git dir, when bare) right there,
 * not in some parent folder.
 */
export async function checkHostRepo(repoPath: string): Promise<void> {
  const stat = await fsp.stat(repoPath).catch(() => null);
  if (!stat?.isDirectory()) throw new FactoryError('NotAGitRepository', `${repoPath} no longer exists`);
  const probe = await runGit(['rev-parse', '--is-bare-repository', '--absolute-git-dir'], { cwd: repoPath, timeoutMs: 15_000 });
  if (probe.code !== 0) throw new FactoryError('NotAGitRepository', `${repoPath} is no longer a git repository`, firstLine(probe.stderr) || undefined);
  const [isBare, gitDir] = probe.stdout.trim().split('\n');
  let root = gitDir ?? '';
  if (isBare !== 'true') {
    const top = await runGit(['rev-parse', '--show-toplevel'], { cwd: repoPath, timeoutMs: 15_000 });
    root = top.code === 0 ? top.stdout.trim() : '';
  }
  // Unresolvable: compare the path as given (git's answer then decides).
  const real = await fsp.realpath(repoPath).catch(() => repoPath);
  if (root !== repoPath && root !== real) {
    throw new FactoryError('NotAGitRepository', `${repoPath} is no longer the top of a git repository${root ? ` (git finds ${root})` : ''}`);
  }
}

/**
 * A remote URL as read from a repository's (untrusted) config, reduced to what
 * the credential proxy may use: only https URLs count, and a user name or token
 * embedded in the URL is dropped (never used, never sent anywhere), as are a
 * query and a fragment. Anything else (ssh, scp-style, file, http) gives undefined.
 */
export function httpsRemoteUrl(raw: string | undefined): string | undefined {
  const s = raw?.trim();
  if (!s || s.length > 2048 || /[\s\0]/.test(s)) return undefined;
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    // Not a URL (scp-style ssh remote): by contract, undefined.
    return undefined;
  }
  if (url.protocol !== 'https:' || !url.hostname) return undefined;
  url.username = '';
  url.password = '';
  url.search = '';
  url.hash = '';
  return url.toString();
}

/** The https URL of the repository's `origin` remote (see httpsRemoteUrl); undefined when there is none or git fails. */
export async function originHttpsUrl(repoPath: string): Promise<string | undefined> {
  // Git failing here means no usable remote: the task runs without a git route, as documented above.
  const r = await runGit(['config', '--get', 'remote.origin.url'], { cwd: repoPath, timeoutMs: 15_000, maxStdoutBytes: 8192 }).catch(() => undefined);
  if (!r || r.code !== 0 || r.truncated) return undefined;
  return httpsRemoteUrl(r.stdout);
}
