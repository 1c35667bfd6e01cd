// The host side of pull-back. A bundle from a sandbox is untrusted: it lands in
// a quarantine folder per task, is verified there, and its diff is computed in a
// quarantine bare repository that borrows the host repo's objects read-only
// (objects/info/alternates). Nothing in the host repository changes until the
// user approves, and even then only new objects and one new branch ref appear:
// HEAD, the index and the working tree are never touched, and an existing
// branch is never overwritten. What lands is one commit the host makes with
// the reviewed tree on the base (landing.ts), never the agent's history.
//
// Every step is bounded in memory and time: the pack is scanned for what it
// declares before git reads it (pack-scan.ts), every git in the quarantine
// folder runs under the guest-data bounds (git-limits.ts), and object sizes
// are checked again by id before the diff reads any content (object-caps.ts).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { FactoryError } from '../../common/errors.js';
import type { PullbackReview } from '../../common/domain.js';
import { MAX_REVIEW_FILES, type ReviewFileDetail } from '../../common/review.js';
import { DEFAULT_GUEST_DATA_CAPS, boundGitUnder, formatBytes, guestDataLimits, type GitLimits } from '../git/git-limits.js';
import { firstLine, git, limitMessage, runGit } from '../git/host-git.js';
import { commitIdentity } from '../git/commit-identity.js';
import { LANDING_REF, makeLandingCommit } from './landing.js';
import { checkDiffBlobs, checkResultObjects } from './object-caps.js';
import { scanPack, type PackCaps } from './pack-scan.js';
import { diffBetweenResults } from './review/results-diff.js';
import type { CredentialValue } from './review/mask-values.js';
import { buildReviewDiff, type ReviewDiff } from './review/build-review.js';
import { reviewFileDetail } from './review/file-detail.js';

export const DEFAULT_MAX_BUNDLE_BYTES = 256 * 1024 * 1024;
export const DEFAULT_MAX_PATCH_BYTES = 2 * 1024 * 1024;
/** What a result may hold, uncompressed: per object, in total, and how many objects. */
export const DEFAULT_RESULT_CAPS: PackCaps = {
  maxObjectBytes: DEFAULT_GUEST_DATA_CAPS.maxObjectBytes,
  maxTotalBytes: 1024 * 1024 * 1024,
  maxObjects: 1_000_000,
};
/** The -U0 patch the secret scan reads, and the bytes read to check content (NUL bytes, encoding). */
export const DEFAULT_MAX_SCAN_BYTES = 32 * 1024 * 1024;
export const DEFAULT_CONTENT_CHECK_BYTES = 256 * 1024 * 1024;
const MAX_SECRET_FINDINGS = 1000;
const MAX_BUNDLE_HEADER_BYTES = 1024 * 1024;
const SHA = /^[0-9a-f]{40}$|^[0-9a-f]{64}$/;

export interface VerifiedPullback {
  review: PullbackReview;
  headCommit: string;
  bundleSha256: string;
  empty: boolean;
}

export interface BundleHeader {
  version: 2 | 3;
  prerequisites: string[];
  refs: Array<{ sha: string; name: string }>;
  objectFormat: 'sha1' | 'sha256';
  /** Byte offset where the packfile starts. */
  packOffset: number;
}

export class PullbackError extends FactoryError {
  constructor(message: string, detail?: string) {
    super('PullbackRejected', message, detail);
  }
}

/** Parses a git bundle header (v2 or v3) from untrusted bytes, with a cap. */
export async function readBundleHeader(file: string): Promise<BundleHeader> {
  const fh = await fsp.open(file, 'r');
  let buf: Buffer;
  try {
    buf = Buffer.alloc(MAX_BUNDLE_HEADER_BYTES);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    buf = buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
  const end = buf.indexOf('\n\n');
  if (end < 0) throw new PullbackError('not a git bundle (no header end found in the first MiB)');
  const lines = buf.subarray(0, end).toString('utf8').split('\n');
  const sig = lines.shift();
  const version = sig === '# v2 git bundle' ? 2 : sig === '# v3 git bundle' ? 3 : null;
  if (version === null) throw new PullbackError('not a git bundle (bad signature)');
  const prerequisites: string[] = [];
  const refs: Array<{ sha: string; name: string }> = [];
  let objectFormat: BundleHeader['objectFormat'] = 'sha1';
  for (const line of lines) {
    if (version === 3 && line.startsWith('@')) {
      const cap = line.slice(1);
      if (cap !== 'object-format=sha1' && cap !== 'object-format=sha256') {
        throw new PullbackError(`bundle uses an unsupported capability: ${cap.slice(0, 80)}`);
      }
      objectFormat = cap === 'object-format=sha256' ? 'sha256' : 'sha1';
      continue;
    }
    if (line.startsWith('-')) {
      const sha = line.slice(1).split(' ')[0] ?? '';
      if (!SHA.test(sha)) throw new PullbackError('bundle has a malformed prerequisite line');
      prerequisites.push(sha);
      continue;
    }
    const m = /^([0-9a-f]{40}|[0-9a-f]{64}) (\S+)$/.exec(line);
    if (!m) throw new PullbackError('bundle has a malformed ref line');
    refs.push({ sha: m[1]!, name: m[2]! });
  }
  const idLength = objectFormat === 'sha256' ? 64 : 40;
  if ([...prerequisites, ...refs.map((r) => r.sha)].some((id) => id.length !== idLength)) {
    throw new PullbackError(`bundle mixes object ids of another length than ${objectFormat} uses`);
  }
  return { version, prerequisites, refs, objectFormat, packOffset: end + 2 };
}

async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Streams the bundle's packfile into `git index-pack --strict` (fsck of every object), bounded. */
async function indexPackStrict(repoDir: string, bundle: string, offset: number, timeoutMs: number, limits: GitLimits): Promise<void> {
  const args = ['index-pack', '--stdin', '--fix-thin', '--strict'];
  const r = await runGit(args, { cwd: repoDir, env: { GIT_DIR: repoDir }, inputFile: { path: bundle, start: offset }, timeoutMs, limits, maxStdoutBytes: 4096 });
  if (r.limitExceeded) throw new PullbackError(`the bundle's objects could not be checked: ${limitMessage(args, r)}`, r.stderr.trim() || undefined);
  if (r.timedOut) throw new PullbackError(`the bundle's objects could not be checked within ${timeoutMs} ms`);
  if (r.code !== 0) {
    throw new PullbackError(`the bundle's objects failed the integrity check: ${firstLine(r.stderr) || `exit ${r.code ?? r.signal}`}`, r.stderr.trim() || undefined);
  }
}

export interface QuarantineOptions {
  /** Folder holding one quarantine folder per task (under the data dir). */
  root: string;
  maxBundleBytes?: number;
  maxPatchBytes?: number;
  gitTimeoutMs?: number;
  /** Caps on what a result holds uncompressed (defaults: DEFAULT_RESULT_CAPS). */
  resultCaps?: Partial<PackCaps>;
  /** Text files above this are diffed as binary (default 4 MiB). */
  maxDiffTextBytes?: number;
  /** CPU seconds for each git process on guest data (default 60). */
  gitCpuSeconds?: number;
  /** Files listed in a review (default MAX_REVIEW_FILES); the rest are counted and Approve must confirm them. */
  maxReviewFiles?: number;
  /** Cap of the added lines the secret scan reads (default 32 MiB of -U0 patch). */
  maxScanBytes?: number;
  /** Bytes read in all to check new content for NUL bytes and encoding (default 256 MiB). */
  contentCheckBytes?: number;
  /**
   * The values of the credentials a task's sandbox could use, for the secret
   * scan (the credential broker, from the keychain). Never stored or shown.
   */
  credentialValues?: (taskId: string) => Promise<Array<{ id: string; value: string }>>;
}

export class PullbackQuarantine {
  readonly maxBundleBytes: number;
  private readonly maxPatchBytes: number;
  private readonly timeoutMs: number;
  readonly caps: PackCaps;
  /** The bounds of every git that reads this quarantine's data. */
  readonly gitLimits: GitLimits;

  constructor(private readonly opts: QuarantineOptions) {
    this.maxBundleBytes = opts.maxBundleBytes ?? DEFAULT_MAX_BUNDLE_BYTES;
    this.maxPatchBytes = opts.maxPatchBytes ?? DEFAULT_MAX_PATCH_BYTES;
    this.timeoutMs = opts.gitTimeoutMs ?? 120_000;
    this.caps = { ...DEFAULT_RESULT_CAPS, ...opts.resultCaps };
    this.gitLimits = guestDataLimits({
      maxObjectBytes: this.caps.maxObjectBytes,
      maxDiffTextBytes: opts.maxDiffTextBytes ?? DEFAULT_GUEST_DATA_CAPS.maxDiffTextBytes,
      cpuSeconds: opts.gitCpuSeconds ?? DEFAULT_GUEST_DATA_CAPS.cpuSeconds,
    });
    // Any git working in the quarantine folder (the diff, the review's scans) gets these bounds.
    boundGitUnder(opts.root, this.gitLimits);
  }

  dirFor(taskId: string): string {
    if (!/^[A-Za-z0-9._-]{1,128}$/.test(taskId) || taskId.startsWith('.')) throw new FactoryError('InvalidInput', `unsafe task id ${taskId}`);
    return path.join(this.opts.root, taskId);
  }

  /** Where the downloaded bundle must be written before verify(). */
  async prepare(taskId: string): Promise<{ dir: string; bundlePath: string }> {
    const dir = this.dirFor(taskId);
    await fsp.rm(dir, { recursive: true, force: true });
    await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
    return { dir, bundlePath: path.join(dir, 'result.bundle') };
  }

  async discard(taskId: string): Promise<void> {
    await fsp.rm(this.dirFor(taskId), { recursive: true, force: true });
  }

  /**
   * Verifies the quarantined bundle for a task and computes its diff against the
   * base. `bundlePath` absent means the sandbox reported no change (branch == base).
   */
  async verify(opts: { taskId: string; repoPath: string; branch: string; baseCommit: string; bundlePresent: boolean }): Promise<VerifiedPullback> {
    const { taskId, repoPath, branch, baseCommit } = opts;
    const dir = this.dirFor(taskId);
    const bundle = path.join(dir, 'result.bundle');
    const ref = `refs/heads/${branch}`;
    const checks: PullbackReview['checks'] = [];
    if (!opts.bundlePresent) {
      checks.push({ name: 'changes', ok: true, message: 'the task branch is identical to the base commit: nothing came back' });
      return {
        review: emptyReview(taskId, branch, baseCommit, checks),
        headCommit: baseCommit,
        bundleSha256: createHash('sha256').digest('hex'),
        empty: true,
      };
    }

    // 1. Size cap (the download already enforces it; a bundle put there some other way must obey it too).
    const stat = await fsp.stat(bundle).catch(() => null);
    if (!stat?.isFile()) throw new PullbackError('no bundle in quarantine');
    if (stat.size > this.maxBundleBytes) throw new PullbackError(`bundle is ${stat.size} bytes, over the ${this.maxBundleBytes} byte cap`);
    checks.push({ name: 'size', ok: true, message: `${stat.size} bytes (cap ${this.maxBundleBytes})` });

    // 2. Header: exactly the expected ref. Prerequisites are not limited to the base:
    //    bundle verify (4) needs them present, and ancestry (7) ties the result to the base.
    const header = await readBundleHeader(bundle);
    if (header.refs.length !== 1 || header.refs[0]!.name !== ref) {
      const names = header.refs.map((r) => r.name).join(', ').slice(0, 300) || 'none';
      throw new PullbackError(`bundle must carry exactly ${ref}; it carries: ${names}`);
    }
    const headCommit = header.refs[0]!.sha;
    checks.push({ name: 'refs', ok: true, message: `only ${ref}` });

    // 3. Quarantine repo that sees the host's objects read-only.
    const qrepo = await this.makeQuarantineRepo(dir, repoPath);

    // 4. git bundle verify: well-formed and every prerequisite present.
    const verify = await runGit(['bundle', 'verify', bundle], { cwd: qrepo, timeoutMs: this.timeoutMs, env: { GIT_DIR: qrepo }, limits: this.gitLimits });
    if (verify.limitExceeded) throw new PullbackError(limitMessage(['bundle', 'verify'], verify));
    if (verify.code !== 0) {
      throw new PullbackError(`git bundle verify failed: ${firstLine(verify.stderr) || `exit ${verify.code}`}`, verify.stderr.trim() || undefined);
    }
    checks.push({ name: 'bundle verify', ok: true, message: 'well-formed, prerequisites present' });

    // 5. What the pack declares, before any git reads it: a delta bomb stops here.
    const scan = await scanPack(bundle, header.packOffset, header.objectFormat === 'sha256' ? 32 : 20, this.caps);
    checks.push({
      name: 'sizes',
      ok: true,
      message: `${scan.objects} objects, ${formatBytes(scan.totalBytes)} uncompressed, largest ${formatBytes(scan.largestBytes)} ` +
        `(caps ${formatBytes(this.caps.maxObjectBytes)} per object, ${formatBytes(this.caps.maxTotalBytes)} in total)`,
    });

    // 6. Objects fsck'ed as they are indexed into the quarantine repo, under the guest-data bounds.
    const limits = this.gitLimits;
    await indexPackStrict(qrepo, bundle, header.packOffset, this.timeoutMs, limits);
    await git(['update-ref', ref, headCommit, ''], { cwd: qrepo, env: { GIT_DIR: qrepo }, limits, errorName: 'PullbackRejected' });
    const type = await runGit(['cat-file', '-t', headCommit], { cwd: qrepo, env: { GIT_DIR: qrepo }, limits });
    if (type.limitExceeded) throw new PullbackError(limitMessage(['cat-file', '-t'], type));
    if (type.stdout.trim() !== 'commit') throw new PullbackError(`${ref} does not point at a commit`);
    // Everything reachable from the head down to the base must be present (no dangling links),
    // and each object the result brings is counted again, by id, against the caps.
    const objects = await checkResultObjects({ qrepo, head: headCommit, base: baseCommit, caps: this.caps, limits, timeoutMs: this.timeoutMs });
    checks.push({ name: 'fsck', ok: true, message: `every object passed git fsck checks; ${objects.objects} new objects, ${formatBytes(objects.totalBytes)}` });

    // 7. The result must build on the base.
    const ancestor = await runGit(['merge-base', '--is-ancestor', baseCommit, headCommit], { cwd: qrepo, env: { GIT_DIR: qrepo }, limits });
    if (ancestor.limitExceeded) throw new PullbackError(limitMessage(['merge-base'], ancestor));
    if (ancestor.code !== 0) throw new PullbackError(`${ref} does not descend from the base commit ${baseCommit.slice(0, 12)}`);
    checks.push({ name: 'ancestry', ok: true, message: `descends from ${baseCommit.slice(0, 12)}` });

    // 8. Every blob the diff will read (either side) must fit the per-object cap.
    await checkDiffBlobs({ qrepo, head: headCommit, base: baseCommit, maxObjectBytes: this.caps.maxObjectBytes, limits, timeoutMs: this.timeoutMs });
    const diff = await this.diff(qrepo, baseCommit, headCommit, taskId).catch((e: unknown) => {
      // A diff that hits its memory or CPU bound (a diff bomb) refuses the result, saying so.
      if (e instanceof FactoryError && e.name === 'GitLimitExceeded') throw new PullbackError(`the review could not be computed: ${e.message}`, e.detail);
      throw e;
    });
    const bundleSha256 = await sha256File(bundle);
    return {
      review: {
        taskId,
        branch,
        baseCommit,
        headCommit,
        ...diff,
        bundleBytes: stat.size,
        checks,
      },
      headCommit,
      bundleSha256,
      empty: false,
    };
  }

  /**
   * Approve: one new commit with the reviewed head's tree on the base, made in
   * the quarantine repository (landing.ts), is copied into the host repo as the
   * branch, refusing if it exists. Only `git fetch` of that one commit (objects,
   * no ref updates, no FETCH_HEAD) and `git update-ref <ref> <sha> ''` touch the
   * host repo: the agent's own commits and anything only they reach stay out.
   */
  async approve(opts: {
    taskId: string; repoPath: string; branch: string; baseCommit: string; headCommit: string; bundleSha256: string;
    /** The landed commit's message (landingMessage: trusted text only). */
    message: string;
  }): Promise<{ branch: string; commit: string }> {
    const { taskId, repoPath, branch, headCommit, baseCommit } = opts;
    if (!SHA.test(headCommit)) throw new FactoryError('InvalidInput', 'bad head commit');
    if (!SHA.test(baseCommit)) throw new FactoryError('InvalidInput', 'bad base commit');
    const ref = `refs/heads/${branch}`;
    await git(['check-ref-format', ref], { errorName: 'InvalidInput' });
    const dir = this.dirFor(taskId);
    const bundle = path.join(dir, 'result.bundle');
    const qrepo = path.join(dir, 'repo.git');
    const digest = await sha256File(bundle).catch(() => null);
    if (digest !== opts.bundleSha256) throw new PullbackError('the quarantined bundle changed or vanished since it was verified; pull back again');

    const exists = await runGit(['rev-parse', '--verify', '--quiet', ref], { cwd: repoPath });
    if (exists.code === 0) {
      throw new FactoryError('BranchExists', `branch ${branch} already exists in ${repoPath}; it was left as it is (delete or rename it, then approve again)`);
    }
    const commit = await makeLandingCommit({
      qrepo, head: headCommit, base: baseCommit, message: opts.message, identity: await commitIdentity(repoPath), limits: this.gitLimits, timeoutMs: this.timeoutMs,
    });
    await git(
      ['-c', 'transfer.fsckObjects=true', '-c', 'fetch.fsckObjects=true', 'fetch', '--quiet', '--no-tags', '--no-write-fetch-head',
        '--no-recurse-submodules', '--no-auto-gc', qrepo, LANDING_REF],
      // It reads the quarantine's objects: the same bounds (upload-pack there reads its own config, written by makeQuarantineRepo).
      { cwd: repoPath, timeoutMs: this.timeoutMs, limits: this.gitLimits, errorName: 'ApproveFailed' },
    );
    // '' as the old value: git refuses if the ref appeared meanwhile.
    const created = await runGit(['update-ref', '-m', `factory: approve task ${taskId}`, ref, commit, ''], { cwd: repoPath });
    if (created.code !== 0) {
      throw new FactoryError('BranchExists', `branch ${branch} could not be created without overwriting: ${firstLine(created.stderr)}`);
    }
    await this.discard(taskId);
    return { branch, commit };
  }

  private async makeQuarantineRepo(dir: string, repoPath: string): Promise<string> {
    const qrepo = path.join(dir, 'repo.git');
    await fsp.rm(qrepo, { recursive: true, force: true });
    const hostObjects = await git(['rev-parse', '--path-format=absolute', '--git-path', 'objects'], { cwd: repoPath, errorName: 'NotAGitRepository' });
    await git(['init', '--quiet', '--bare', qrepo]);
    // Our own bare repo: its config is ours, the host repo only lends objects.
    await fsp.writeFile(path.join(qrepo, 'objects', 'info', 'alternates'), hostObjects.stdout.trim() + '\n');
    // Git started inside it without our `-c` options (upload-pack during approve) still keeps its caches small.
    await fsp.appendFile(path.join(qrepo, 'config'), configText(this.gitLimits.config ?? {}));
    return qrepo;
  }

  /**
   * One file of the verified result in quarantine: its own patch and its leading
   * bytes. Only while the result is in quarantine (before approve or reject).
   */
  async fileDetail(opts: { taskId: string; baseCommit: string; headCommit: string; path: string }): Promise<ReviewFileDetail> {
    const qrepo = path.join(this.dirFor(opts.taskId), 'repo.git');
    if (!fs.existsSync(qrepo)) throw new FactoryError('NoReview', `the result of task ${opts.taskId} is no longer in quarantine`);
    // The sandbox's credential values are masked in what is shown: without them, nothing is shown.
    const credentials = await (this.opts.credentialValues?.(opts.taskId) ?? Promise.resolve([])).catch((err: Error) => {
      throw new FactoryError('ReviewFileFailed', `the file is not shown: the values of the sandbox's credentials, masked in it, could not be read (${err.message})`);
    });
    return reviewFileDetail(qrepo, opts.baseCommit, opts.headCommit, opts.path, { timeoutMs: this.timeoutMs, maxPatchBytes: this.maxPatchBytes, credentials });
  }

  /**
   * The diff from one verified result to another (two ways of one task), both still in
   * quarantine: capped like a patch, both sandboxes' credential values masked.
   */
  async diffBetween(from: { taskId: string; headCommit: string }, to: { taskId: string; headCommit: string }): Promise<{ patch: string; patchTruncated: boolean }> {
    const qrepoOf = (taskId: string) => {
      const qrepo = path.join(this.dirFor(taskId), 'repo.git');
      if (!fs.existsSync(qrepo)) throw new FactoryError('NoReview', `the result of task ${taskId} is no longer in quarantine`);
      return qrepo;
    };
    const values = async (taskId: string) =>
      (await (this.opts.credentialValues?.(taskId) ?? Promise.resolve([])).catch((err: Error) => {
        throw new FactoryError('ReviewFileFailed', `the diff is not shown: the values of the sandboxes' credentials, masked in it, could not be read (${err.message})`);
      })) as CredentialValue[];
    return diffBetweenResults(
      { qrepo: qrepoOf(from.taskId), head: from.headCommit },
      { qrepo: qrepoOf(to.taskId), head: to.headCommit },
      { timeoutMs: this.timeoutMs, maxPatchBytes: this.maxPatchBytes, credentials: [...(await values(from.taskId)), ...(await values(to.taskId))] },
    );
  }

  /** The review's content: complete file list and totals, capped patch, flags, secrets, confirmations. */
  private async diff(qrepo: string, base: string, head: string, taskId: string): Promise<ReviewDiff> {
    const credentialValues = this.opts.credentialValues;
    return buildReviewDiff(qrepo, base, head, {
      timeoutMs: this.timeoutMs,
      maxPatchBytes: this.maxPatchBytes,
      maxReviewFiles: this.opts.maxReviewFiles ?? MAX_REVIEW_FILES,
      maxScanBytes: this.opts.maxScanBytes ?? DEFAULT_MAX_SCAN_BYTES,
      contentCheckBytes: this.opts.contentCheckBytes ?? DEFAULT_CONTENT_CHECK_BYTES,
      maxSecretFindings: MAX_SECRET_FINDINGS,
      ...(credentialValues ? { credentials: () => credentialValues(taskId) } : {}),
    });
  }
}

/** `a.b=v` settings as git config file text. */
function configText(settings: Readonly<Record<string, string>>): string {
  const sections = new Map<string, string[]>();
  for (const [key, value] of Object.entries(settings)) {
    const dot = key.lastIndexOf('.');
    const lines = sections.get(key.slice(0, dot)) ?? [];
    lines.push(`\t${key.slice(dot + 1)} = ${value}`);
    sections.set(key.slice(0, dot), lines);
  }
  return [...sections].map(([section, lines]) => `[${section}]\n${lines.join('\n')}\n`).join('');
}

function emptyReview(taskId: string, branch: string, baseCommit: string, checks: PullbackReview['checks']): PullbackReview {
  return { taskId, branch, baseCommit, headCommit: baseCommit, files: [], added: 0, removed: 0, patch: '', patchTruncated: false, bundleBytes: 0, checks, filesOmitted: 0, flags: [], secrets: [], confirmations: [] };
}
