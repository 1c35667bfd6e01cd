// Reading files of the user's repository at a commit (never the working tree:
// the sandbox runs what was committed). The repository is untrusted input, so
// every path is checked, only regular files are read (a symlink, a folder or a
// submodule is refused by name), and every read is capped before git runs.
import { FactoryError } from '../../common/errors.js';
import { runGit } from './host-git.js';

const TIMEOUT_MS = 15_000;
const MAX_PATHS = 256;

export interface RepoEntry {
  /** 'file' = regular or executable file; 'symlink', 'folder', 'submodule' are refused by the readers. */
  kind: 'file' | 'symlink' | 'folder' | 'submodule';
  blob: string;
  size: number;
}

/** Throws unless `commit` is a full object id. */
export function assertCommitId(commit: string): void {
  if (!/^[0-9a-f]{40}(?:[0-9a-f]{24})?$/.test(commit)) throw new FactoryError('InvalidInput', `not a commit id: ${JSON.stringify(commit).slice(0, 80)}`);
}

/** Why a repository-relative path is not acceptable, or undefined when it is. */
export function repoPathProblem(p: string): string | undefined {
  if (p.length === 0) return 'is empty';
  if (p.length > 1024) return 'is longer than 1024 characters';
  if (/[\x00-\x1f\x7f]/.test(p)) return 'contains a control character';
  if (p.startsWith('/')) return 'must be relative to the repository';
  if (p.includes('\\')) return 'must use / between folders';
  const parts = p.split('/');
  if (parts.some((s) => s === '..')) return "must not contain '..'";
  if (parts.some((s) => s === '' || s === '.')) return 'has an empty or "." segment';
  return undefined;
}

function checkPath(p: string): void {
  const problem = repoPathProblem(p);
  if (problem) throw new FactoryError('InvalidInput', `repository path ${JSON.stringify(p).slice(0, 120)} ${problem}`);
}

const KIND_BY_MODE: Record<string, RepoEntry['kind']> = {
  '100644': 'file',
  '100755': 'file',
  '120000': 'symlink',
  '040000': 'folder',
  '160000': 'submodule',
};

/** The entries at `paths` in `commit` (absent paths are left out), with one or two git runs whatever their number. */
export async function repoEntries(repoPath: string, commit: string, paths: readonly string[]): Promise<Map<string, RepoEntry>> {
  assertCommitId(commit);
  if (paths.length > MAX_PATHS) throw new FactoryError('InvalidInput', `${paths.length} paths asked at once; at most ${MAX_PATHS}`);
  paths.forEach(checkPath);
  const out = new Map<string, RepoEntry>();
  if (paths.length === 0) return out;
  const wanted = new Set(paths);
  const env = { GIT_LITERAL_PATHSPECS: '1' };
  const ls = await runGit(['ls-tree', '-l', '-z', '--full-tree', commit, '--', ...wanted], {
    cwd: repoPath, timeoutMs: TIMEOUT_MS, env, maxStdoutBytes: 4 * 1024 * 1024,
  });
  if (ls.code !== 0 || ls.truncated) throw new FactoryError('GitFailed', `could not list files of ${commit.slice(0, 12)}: ${ls.stderr.trim() || 'output too large'}`);
  for (const record of ls.stdout.split('\0')) {
    const m = /^(\d{6}) (\w+) ([0-9a-f]+) +(-|\d+)\t([\s\S]+)$/.exec(record);
    if (!m || !wanted.has(m[5]!)) continue;
    out.set(m[5]!, { kind: KIND_BY_MODE[m[1]!] ?? 'file', blob: m[3]!, size: m[4] === '-' ? 0 : Number(m[4]) });
  }
  // ls-tree leaves out a folder named together with a path inside it: ask for the ones still missing.
  const missing = [...wanted].filter((p) => !out.has(p));
  if (missing.length > 0) {
    const check = await runGit(['cat-file', '--batch-check'], {
      cwd: repoPath, timeoutMs: TIMEOUT_MS, input: missing.map((p) => `${commit}:${p}\n`).join(''),
    });
    if (check.code !== 0) throw new FactoryError('GitFailed', `could not look up files of ${commit.slice(0, 12)}: ${check.stderr.trim()}`);
    check.stdout.split('\n').forEach((line, i) => {
      const m = /^([0-9a-f]+) (tree|commit) /.exec(line);
      if (m && missing[i] !== undefined) out.set(missing[i]!, { kind: m[2] === 'tree' ? 'folder' : 'submodule', blob: m[1]!, size: 0 });
    });
  }
  return out;
}

function refuseNonFile(path: string, entry: RepoEntry): void {
  if (entry.kind !== 'file') {
    throw new FactoryError('InvalidInput', `${path} is a ${entry.kind} in the repository, expected a regular file`);
  }
}

/** The blob id of each path at `commit` (null when absent); a folder, symlink or submodule is refused. */
export async function blobIds(repoPath: string, commit: string, paths: readonly string[]): Promise<Map<string, string | null>> {
  const entries = await repoEntries(repoPath, commit, paths);
  const out = new Map<string, string | null>();
  for (const p of paths) {
    const e = entries.get(p);
    if (e) refuseNonFile(p, e);
    out.set(p, e ? e.blob : null);
  }
  return out;
}

/** The bytes of `path` at `commit`; null when absent. Refuses a non-file and a file over `maxBytes` (checked before reading). */
export async function readRepoFile(repoPath: string, commit: string, path: string, maxBytes: number): Promise<Buffer | null> {
  const entry = (await repoEntries(repoPath, commit, [path])).get(path);
  if (!entry) return null;
  return readEntry(repoPath, path, entry, maxBytes);
}

/** Reads an entry found by repoEntries (saves the lookup when several files are read). */
export async function readEntry(repoPath: string, path: string, entry: RepoEntry, maxBytes: number): Promise<Buffer> {
  refuseNonFile(path, entry);
  if (entry.size > maxBytes) {
    throw new FactoryError('InvalidInput', `${path} is ${entry.size} bytes, over the ${maxBytes} byte limit`);
  }
  const blob = await runGit(['cat-file', 'blob', entry.blob], { cwd: repoPath, timeoutMs: TIMEOUT_MS, maxStdoutBytes: maxBytes + 1 });
  if (blob.code !== 0 && !blob.truncated) throw new FactoryError('GitFailed', `could not read ${path}: ${blob.stderr.trim()}`);
  if (blob.truncated || blob.stdoutBuffer.length > maxBytes) {
    throw new FactoryError('InvalidInput', `${path} is over the ${maxBytes} byte limit`);
  }
  return blob.stdoutBuffer;
}
