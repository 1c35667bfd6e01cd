// What Approve must make the user confirm: the host's confirmations, plus any
// the review's own facts call for that the host did not list (a cut patch, files
// not listed, secrets), so Approve is never one click while something is unseen.
import { escapeName } from '../../../common/review-text.js';
import type { PullbackReview, ReviewConfirmation } from '../../../common/review.js';
import { plural } from './format.js';

const NAMED = 5;

function named(paths: string[]): string {
  const shown = paths.slice(0, NAMED).map(escapeName).join(', ');
  return paths.length > NAMED ? `${shown} and ${(paths.length - NAMED).toLocaleString('en')} more` : shown;
}

/** `unshownPaths`: the files the cut patch does not hold, or not all of (the one the cut fell in). */
export function requiredConfirmations(review: PullbackReview, unshownPaths: string[]): ReviewConfirmation[] {
  const out = [...review.confirmations];
  const has = (kind: ReviewConfirmation['kind']) => out.some((c) => c.kind === kind);
  if (!has('unshown')) {
    const parts: string[] = [];
    if (review.patchTruncated) {
      parts.push(
        `the patch was cut at its size limit${unshownPaths.length ? `; not in it, or not all of it: ${plural(unshownPaths.length, 'file')} (${named(unshownPaths)})` : ''}`,
      );
    }
    if (review.filesOmitted > 0) parts.push(`${plural(review.filesOmitted, 'changed file')} were not listed at all`);
    if (parts.length) out.push({ kind: 'unshown', message: parts.join('; ') });
  }
  if (!has('secrets') && review.secrets.length) {
    const where = review.secrets.map((s) => `${s.path}:${s.line}`);
    out.push({ kind: 'secrets', message: `${plural(review.secrets.length, 'possible secret')} in the returned work: ${named(where)}` });
  }
  return out;
}
