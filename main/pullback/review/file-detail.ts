// One file of a review on request: its own patch (capped) and the leading bytes
// of its new content, escaped, read from the quarantine's objects after a size
// check. For the files the whole patch could not show, and for content the
// review cannot show as text.
import { FactoryError } from '../../../common/errors.js';
import type { ReviewFileDetail } from '../../../common/review.js';
import { escapeBytes, escapeName } from '../../../common/review-text.js';
import { firstLine, git, limitMessage, runGit } from '../../git/host-git.js';
import { isArgvSafe } from './git-names.js';
import { longestValue, maskValuesInBytes, maskValuesInText, type CredentialValue } from './mask-values.js';
import { DIFF_OPTIONS, listChanges, type ChangedFile } from './listing.js';
import { objectInfo, readBlobHead } from './objects.js';

export const LEADING_BYTES = 512;
/** Blobs bigger than this are not opened for their leading bytes (git may have to rebuild them whole). */
export const MAX_DETAIL_BLOB_BYTES = 64 * 1024 * 1024;

const isBlob = (m: ChangedFile['newMode']) => m === 'file' || m === 'executable' || m === 'symlink';

async function emptyBlob(qrepo: string, timeoutMs: number): Promise<string> {
  const r = await git(['hash-object', '-t', 'blob', '-w', '--stdin'], { cwd: qrepo, env: { GIT_DIR: qrepo }, timeoutMs, input: '' });
  return r.stdout.trim();
}

/** The file's patch: by pathspec when its names can be git arguments, else as the diff of its two blobs. */
async function filePatch(qrepo: string, base: string, head: string, f: ChangedFile, opts: { timeoutMs: number; maxPatchBytes: number }) {
  const run = { cwd: qrepo, env: { GIT_DIR: qrepo }, timeoutMs: opts.timeoutMs, maxStdoutBytes: opts.maxPatchBytes };
  const names = [f.path, ...(f.oldPath !== undefined ? [f.oldPath] : [])];
  let r;
  if (names.every(isArgvSafe)) {
    r = await runGit(['diff', ...DIFF_OPTIONS, '--patch', base, head, '--', ...names.map((n) => `:(literal)${n}`)], run);
  } else if (isBlob(f.oldMode ?? 'none') || isBlob(f.newMode ?? 'none')) {
    // A name that is not UTF-8 cannot be passed as an argument: diff the blobs themselves.
    const empty = !isBlob(f.oldMode ?? 'none') || !isBlob(f.newMode ?? 'none') ? await emptyBlob(qrepo, opts.timeoutMs) : '';
    const a = isBlob(f.oldMode ?? 'none') ? f.oldOid : empty;
    const b = isBlob(f.newMode ?? 'none') ? f.newOid : empty;
    r = await runGit(['diff', '--no-ext-diff', '--no-textconv', '--no-color', a, b], run);
    if (r.code === 0 || r.truncated) r = { ...r, stdout: `# ${escapeName(f.path)}: the diff of its old and new content\n${r.stdout}` };
  } else {
    return { patch: `-Subproject commit ${f.oldOid}\n+Subproject commit ${f.newOid}\n`, patchTruncated: false };
  }
  if (r.limitExceeded) throw new FactoryError('ReviewFileFailed', `could not compute the patch of ${escapeName(f.path)}: ${limitMessage(['diff', '--patch'], r)}`);
  if (r.code !== 0 && !r.truncated) throw new FactoryError('ReviewFileFailed', `could not compute the patch of ${escapeName(f.path)}: ${firstLine(r.stderr) || `exit ${r.code}`}`);
  return { patch: r.stdout, patchTruncated: r.truncated };
}

export async function reviewFileDetail(
  qrepo: string, base: string, head: string, filePath: string,
  opts: { timeoutMs: number; maxPatchBytes: number; credentials?: readonly CredentialValue[] },
): Promise<ReviewFileDetail> {
  const values = opts.credentials ?? [];
  // The review showed names with the sandbox's credential values masked: match them that way.
  const shown = (name: string | undefined) => (name === undefined ? undefined : maskValuesInText(name, values));
  const files = await listChanges(qrepo, base, head, opts.timeoutMs);
  const f = files.find((x) => shown(x.path) === filePath) ?? files.find((x) => shown(x.oldPath) === filePath);
  if (!f) throw new FactoryError('NotInReview', `no file named ${escapeName(filePath)} changed in this result`);
  const { patch, patchTruncated } = await filePatch(qrepo, base, head, f, opts);

  let size = 0;
  let leadingBytes = '';
  let note: string | undefined;
  if (isBlob(f.newMode ?? 'none')) {
    size = (await objectInfo(qrepo, [f.newOid], opts.timeoutMs)).get(f.newOid)?.size ?? 0;
    if (size > MAX_DETAIL_BLOB_BYTES) {
      note = `the content (${size} bytes) is over the ${MAX_DETAIL_BLOB_BYTES} byte cap for opening a single file; its leading bytes were not read`;
    } else {
      // Read a value's length further, so that a value across the cut is masked whole.
      const head = await readBlobHead(qrepo, f.newOid, Math.min(size, LEADING_BYTES + longestValue(values)), opts.timeoutMs);
      leadingBytes = escapeBytes(maskValuesInBytes(head, values).subarray(0, LEADING_BYTES));
    }
  } else if (f.newMode === 'none') {
    note = 'the file was deleted: it has no new content';
  } else {
    note = `a submodule: the new content is commit ${f.newOid} of another repository`;
  }
  return { path: shown(f.path)!, size, patch: maskValuesInText(patch, values, patchTruncated), patchTruncated, leadingBytes, ...(note ? { note } : {}) };
}
