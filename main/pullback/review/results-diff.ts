// The diff between two verified results still in quarantine (two ways of a task
// run N ways): git diff of one result's head against the other's, in the first
// quarantine repository with the second's objects lent for the one command (no
// repository is changed). The same options, caps and masking as a review's
// patch: both sandboxes' credential values masked, the patch cut at its cap.
import path from 'node:path';
import { FactoryError } from '../../../common/errors.js';
import { firstLine, limitMessage, runGit } from '../../git/host-git.js';
import { DIFF_OPTIONS } from './listing.js';
import { maskValuesInText, type CredentialValue } from './mask-values.js';

const SHA = /^[0-9a-f]{40}$/;

export interface QuarantinedResult {
  /** The quarantine's bare repository. */
  qrepo: string;
  /** The verified head commit. */
  head: string;
}

export async function diffBetweenResults(
  from: QuarantinedResult,
  to: QuarantinedResult,
  opts: { timeoutMs: number; maxPatchBytes: number; credentials?: readonly CredentialValue[] },
): Promise<{ patch: string; patchTruncated: boolean }> {
  if (!SHA.test(from.head) || !SHA.test(to.head)) throw new FactoryError('InvalidInput', 'bad head commit');
  const r = await runGit(['diff', ...DIFF_OPTIONS, '--patch', from.head, to.head], {
    cwd: from.qrepo,
    // Both quarantines lend the host repository's objects already (their alternates); this adds the other result's.
    env: { GIT_DIR: from.qrepo, GIT_ALTERNATE_OBJECT_DIRECTORIES: path.join(to.qrepo, 'objects') },
    timeoutMs: opts.timeoutMs,
    maxStdoutBytes: opts.maxPatchBytes,
  });
  if (r.limitExceeded) throw new FactoryError('ReviewFileFailed', `could not compute the diff between the two results: ${limitMessage(['diff', '--patch'], r)}`);
  if (r.code !== 0 && !r.truncated) throw new FactoryError('ReviewFileFailed', `could not compute the diff between the two results: ${firstLine(r.stderr) || `exit ${r.code}`}`);
  return { patch: maskValuesInText(r.stdout, opts.credentials ?? [], r.truncated), patchTruncated: r.truncated };
}
