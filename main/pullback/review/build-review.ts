// The review of a verified result: every changed file (with modes, sizes and
// symlink targets), totals over all of them, the capped patch, flags above the
// diff, secrets in added lines and in the agent's commit messages, the agent's
// commits (none of which lands), and what Approve must have confirmed because
// the review could not show or check it. Everything is read from the
// quarantine repository's objects, never from the packed bundle.
import type { PullbackReview, ReviewFlag } from '../../../common/review.js';
import { describeHiddenChar, escapeName, hiddenChars } from '../../../common/review-text.js';
import { firstLine, limitMessage, runGit } from '../../git/host-git.js';
import { readAddedLines, type AddedLines } from './added-lines.js';
import { readAgentHistory } from './commits.js';
import { buildConfirmations } from './confirmations.js';
import { inspectContent } from './content.js';
import { fileFlags, sortFlags } from './flags.js';
import { DIFF_OPTIONS, firstIncompleteFile, listChanges, rejected, type ChangedFile } from './listing.js';
import { objectInfo } from './objects.js';
import { maskValuesDeep, maskValuesInText } from './mask-values.js';
import { blobContentReader } from './scan-content.js';
import { scanSecrets } from './secret-scan.js';
import { MAX_GITMODULES_BYTES, readGitmodules, type SubmoduleEntry } from './submodules.js';

export interface ReviewBuildOptions {
  timeoutMs: number;
  maxPatchBytes: number;
  /** Files listed in the review; the rest are counted in filesOmitted. */
  maxReviewFiles: number;
  /** Cap of the -U0 patch the secret scan reads. */
  maxScanBytes: number;
  /** Bytes read in all to check content for NUL bytes and encoding. */
  contentCheckBytes: number;
  maxSecretFindings: number;
  /** The values of the credentials the sandbox could use (never stored, never shown). */
  credentials?: () => Promise<Array<{ id: string; value: string }>>;
}

export type ReviewDiff = Pick<
  PullbackReview,
  'files' | 'filesOmitted' | 'added' | 'removed' | 'patch' | 'patchTruncated' | 'flags' | 'secrets' | 'confirmations' | 'history'
>;

/** Hidden characters flagged per file before one line sums up the rest. */
const HIDDEN_FLAGS_PER_FILE = 20;

/** The root .gitmodules, in any case: a case-insensitive disk opens `.GITMODULES` as `.gitmodules`. */
export const isGitmodules = (f: Pick<ChangedFile, 'path' | 'newMode'>) => f.path.toLowerCase() === '.gitmodules' && (f.newMode === 'file' || f.newMode === 'executable');

/** The new .gitmodules at the root, parsed by git, when it or a submodule changed. */
async function gitmodulesOf(qrepo: string, head: string, files: ChangedFile[], timeoutMs: number): Promise<{ entries: SubmoduleEntry[]; error?: string } | undefined> {
  const changed = files.filter(isGitmodules).sort((a, b) => Number(b.path === '.gitmodules') - Number(a.path === '.gitmodules'))[0];
  if (!changed && !files.some((f) => f.newMode === 'submodule')) return undefined;
  let oid = changed?.newOid;
  if (!oid) {
    const resolved = await runGit(['rev-parse', '--verify', '--quiet', `${head}:.gitmodules`], { cwd: qrepo, env: { GIT_DIR: qrepo }, timeoutMs });
    oid = resolved.stdout.trim();
    if (resolved.code !== 0 || !/^[0-9a-f]{40,64}$/.test(oid)) return { entries: [] };
  }
  const size = (await objectInfo(qrepo, [oid], timeoutMs)).get(oid)?.size ?? Infinity;
  if (size > MAX_GITMODULES_BYTES) return { entries: [], error: `it is ${size} bytes, over the ${MAX_GITMODULES_BYTES} byte cap` };
  return readGitmodules(qrepo, oid, timeoutMs);
}

function hiddenCharFlags(files: ChangedFile[], added: AddedLines): ReviewFlag[] {
  const flags: ReviewFlag[] = [];
  for (const [index, { lines, texts }] of added.byFile) {
    const f = files[index]!;
    if (f.notText === 'nul-byte') continue; // binary content: its "lines" are noise, and it is flagged as not text
    let flagged = 0;
    let more = 0;
    for (let k = 0; k < texts.length; k++) {
      const found = hiddenChars(texts[k]!);
      if (found.length === 0) continue;
      if (flagged >= HIDDEN_FLAGS_PER_FILE) {
        more++;
        continue;
      }
      flagged++;
      const kinds = [...new Set(found.map(describeHiddenChar))].slice(0, 4).join(', ');
      flags.push({
        kind: 'hidden-chars',
        severity: found.some((c) => c.kind === 'bidi') ? 'danger' : 'warning',
        path: f.path,
        line: lines[k]!,
        message: `${escapeName(f.path)} line ${lines[k]}: ${kinds} in an added line; what it shows may not be what it does`,
      });
    }
    if (more > 0) {
      flags.push({ kind: 'hidden-chars', severity: 'warning', path: f.path, message: `${escapeName(f.path)}: ${more} more added lines with hidden characters` });
    }
  }
  return flags;
}

export async function buildReviewDiff(qrepo: string, base: string, head: string, opts: ReviewBuildOptions): Promise<ReviewDiff> {
  const { timeoutMs } = opts;
  const files = await listChanges(qrepo, base, head, timeoutMs);
  const content = await inspectContent(qrepo, files, { timeoutMs, textCap: opts.maxPatchBytes, checkBudget: opts.contentCheckBytes });
  const gitmodules = await gitmodulesOf(qrepo, head, files, timeoutMs);

  const patch = await runGit(['diff', ...DIFF_OPTIONS, '--patch', base, head], {
    cwd: qrepo, env: { GIT_DIR: qrepo }, timeoutMs, maxStdoutBytes: opts.maxPatchBytes,
  });
  if (patch.limitExceeded) throw rejected(`could not compute the patch: ${limitMessage(['diff', '--patch'], patch)}`);
  if (patch.code !== 0 && !patch.truncated) throw rejected(`could not compute the patch: ${firstLine(patch.stderr) || `exit ${patch.code}`}`);
  const firstCut = firstIncompleteFile(files, patch.stdout, patch.truncated);

  const added = await readAddedLines(qrepo, base, head, files, { timeoutMs, maxBytes: opts.maxScanBytes });
  let credentials: Array<{ id: string; value: string }> = [];
  let credentialsError: string | undefined;
  try {
    credentials = (await opts.credentials?.()) ?? [];
  } catch (err) {
    credentialsError = (err as Error).message;
  }
  const inFiles = await scanSecrets({
    paths: files.map((f) => f.path), added, credentials, maxFindings: opts.maxSecretFindings,
    // New names, and binary content (decompressed where it is gzip or zlib), are scanned too.
    files, readContent: blobContentReader(qrepo, files, timeoutMs),
  });
  // The agent's messages do not land, but a secret in one was still exposed: it is found and confirmed like one in a file.
  const { history, scan } = await readAgentHistory(qrepo, base, head, { timeoutMs });
  const inMessages = await scanSecrets({ ...scan, credentials, maxFindings: Math.max(0, opts.maxSecretFindings - inFiles.findings.length) });
  const commitOf = new Map(history.commits.map((c, i) => [scan.paths[i]!, c.id]));
  const secrets = {
    findings: [...inFiles.findings, ...inMessages.findings.map((s) => ({ ...s, commit: commitOf.get(s.path)! }))],
    omitted: inFiles.omitted + inMessages.omitted,
  };

  const flags = sortFlags([
    ...fileFlags({ files, configs: content.configs, ...(gitmodules ? { gitmodules } : {}) }),
    ...hiddenCharFlags(files, added),
    ...secrets.findings.map((s): ReviewFlag => ({
      kind: 'secret', severity: 'danger', path: s.path, ...(s.line ? { line: s.line } : {}),
      message: `${escapeName(s.path)}${s.line ? ` line ${s.line}` : ''}: possible secret (${s.rule}): ${s.masked}`,
    })),
  ]);
  // A message cut by its cap must not show the beginning of a credential's value either.
  for (const c of history.commits) c.message = maskValuesInText(c.message, credentials, c.messageCut);
  const listed = files.slice(0, opts.maxReviewFiles);
  // The sandbox's own credential values never reach the review, wherever the returned work put them.
  return maskValuesDeep<ReviewDiff>({
    files: listed.map(({ oldOid: _old, newOid: _new, ...shown }) => shown),
    filesOmitted: files.length - listed.length,
    added: files.reduce((n, f) => n + f.added, 0),
    removed: files.reduce((n, f) => n + f.removed, 0),
    patch: maskValuesInText(patch.stdout, credentials, patch.truncated),
    patchTruncated: patch.truncated,
    flags,
    secrets: secrets.findings,
    confirmations: buildConfirmations({
      patchUnshown: files.slice(firstCut),
      maxPatchBytes: opts.maxPatchBytes,
      filesOmitted: files.length - listed.length,
      maxFiles: opts.maxReviewFiles,
      contentUnchecked: content.unchecked,
      unscanned: files.slice(added.firstUnread).filter((f) => f.newMode !== 'none'),
      maxScanBytes: opts.maxScanBytes,
      findings: secrets.findings,
      findingsOmitted: secrets.omitted,
      notScanned: inFiles.notScanned,
      ...(credentialsError ? { credentialsError } : {}),
    }),
    history,
  }, credentials);
}
