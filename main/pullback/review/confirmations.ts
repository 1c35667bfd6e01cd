// What Approve needs a deliberate second step for: anything the review could
// not show or check ('unshown'), and possible secrets ('secrets'). Each is named
// in words; tasks.approve refuses until `confirm` names every kind present.
import { FactoryError } from '../../../common/errors.js';
import type { DiffFile, PullbackReview, ReviewConfirmation, ReviewConfirmationKind, SecretFinding } from '../../../common/review.js';
import { escapeName } from '../../../common/review-text.js';

const NAMES_IN_A_MESSAGE = 20;

const mib = (n: number) =>
  n >= 1024 * 1024 ? `${Math.round((n / (1024 * 1024)) * 10) / 10} MiB` : n >= 1024 ? `${Math.round((n / 1024) * 10) / 10} KiB` : `${n} byte`;
const count = (n: number, one: string, many = `${one}s`) => `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;

/**
 * Up to 20 names, escaped, changes to files that already existed first: a small
 * change to an existing file is what hides best behind many generated ones.
 */
export function nameList(files: ReadonlyArray<Pick<DiffFile, 'path' | 'status'>>, max = NAMES_IN_A_MESSAGE): string {
  const existing = files.filter((f) => f.status !== 'added' && f.status !== 'copied');
  const fresh = files.filter((f) => f.status === 'added' || f.status === 'copied');
  const ordered = [...existing, ...fresh];
  const shown = ordered.slice(0, max).map((f) => escapeName(f.path)).join(', ');
  return ordered.length > max ? `${shown} and ${count(ordered.length - max, 'more file')}` : shown;
}

export interface ConfirmationInputs {
  /** Files whose patch the capped patch does not show completely. */
  patchUnshown: ReadonlyArray<Pick<DiffFile, 'path' | 'status'>>;
  maxPatchBytes: number;
  /** Files past the listing cap. */
  filesOmitted: number;
  maxFiles: number;
  /** Files whose content was not checked (NUL bytes, encoding) within the read budget. */
  contentUnchecked: ReadonlyArray<Pick<DiffFile, 'path' | 'status'>>;
  /** Files whose added lines were not all scanned for secrets within the scan cap. */
  unscanned: ReadonlyArray<Pick<DiffFile, 'path' | 'status'>>;
  maxScanBytes: number;
  findings: readonly SecretFinding[];
  findingsOmitted: number;
  /** Why the values of the sandbox's credentials could not be checked, if they could not. */
  credentialsError?: string;
  /** Files the secret scan could not read in full (binary of no known compressed format, over a cap), with why. */
  notScanned?: ReadonlyArray<{ path: string; status: DiffFile['status']; reason: string }>;
}

export function buildConfirmations(i: ConfirmationInputs): ReviewConfirmation[] {
  const out: ReviewConfirmation[] = [];
  if (i.patchUnshown.length > 0) {
    out.push({
      kind: 'unshown',
      message: `the patch was cut at its ${mib(i.maxPatchBytes)} cap: ${count(i.patchUnshown.length, 'file')} not shown in it (in full): ${nameList(i.patchUnshown)}; open a file in the list to see its own patch`,
    });
  }
  if (i.filesOmitted > 0) {
    out.push({ kind: 'unshown', message: `${count(i.filesOmitted, 'changed file')} past the first ${i.maxFiles.toLocaleString('en-US')} are not listed at all (the totals count them)` });
  }
  if (i.contentUnchecked.length > 0) {
    out.push({ kind: 'unshown', message: `the content of ${count(i.contentUnchecked.length, 'file')} was not checked for NUL bytes and encoding (over the read budget): ${nameList(i.contentUnchecked)}` });
  }
  if (i.findings.length > 0) {
    const named = i.findings.slice(0, NAMES_IN_A_MESSAGE).map((f) => `${escapeName(f.path)}${f.line ? ` line ${f.line}` : ''} (${f.rule})`).join(', ');
    const total = i.findings.length + i.findingsOmitted;
    const more = total > NAMES_IN_A_MESSAGE ? ` and ${count(total - NAMES_IN_A_MESSAGE, 'more finding')}` : '';
    out.push({ kind: 'secrets', message: `${count(total, 'possible secret')} in added lines: ${named}${more}` });
  }
  if (i.unscanned.length > 0) {
    out.push({ kind: 'secrets', message: `${count(i.unscanned.length, 'file')} not scanned for secrets in full (over the ${mib(i.maxScanBytes)} scan cap): ${nameList(i.unscanned)}` });
  }
  if (i.notScanned && i.notScanned.length > 0) {
    const existing = i.notScanned.filter((f) => f.status !== 'added' && f.status !== 'copied');
    const ordered = [...existing, ...i.notScanned.filter((f) => f.status === 'added' || f.status === 'copied')];
    const named = ordered.slice(0, NAMES_IN_A_MESSAGE).map((f) => `${escapeName(f.path)} (${f.reason})`).join(', ');
    const more = ordered.length > NAMES_IN_A_MESSAGE ? ` and ${count(ordered.length - NAMES_IN_A_MESSAGE, 'more file')}` : '';
    out.push({ kind: 'secrets', message: `${count(ordered.length, 'file')} could not be scanned fully for secrets: ${named}${more}` });
  }
  if (i.credentialsError) {
    out.push({ kind: 'secrets', message: `the added lines could not be checked for the values of the sandbox's credentials: ${i.credentialsError}` });
  }
  return out;
}

/**
 * What Approve needs confirmed. A review written before confirmations existed
 * has none recorded, but its cut patch still counts.
 */
export function requiredConfirmations(review: PullbackReview): ReviewConfirmation[] {
  const list = [...review.confirmations];
  if (review.patchTruncated && !list.some((c) => c.kind === 'unshown')) {
    list.push({ kind: 'unshown', message: 'the patch was cut at its cap: the files at its end were not shown in full' });
  }
  if (review.filesOmitted > 0 && !list.some((c) => c.kind === 'unshown')) {
    list.push({ kind: 'unshown', message: `${count(review.filesOmitted, 'changed file')} are not listed` });
  }
  return list;
}

/** Throws ApproveNeedsConfirmation, naming what was not shown, unless `confirm` names every kind present. */
export function assertConfirmed(review: PullbackReview, confirm: readonly ReviewConfirmationKind[] | undefined): void {
  const required = requiredConfirmations(review);
  const missing = required.filter((c) => !(confirm ?? []).includes(c.kind));
  if (missing.length === 0) return;
  const kinds = [...new Set(missing.map((c) => c.kind))];
  throw new FactoryError(
    'ApproveNeedsConfirmation',
    `Approve needs a second, deliberate step: ${missing.map((c) => c.message).join('; ')}. ` +
      `Approve again confirming ${kinds.map((k) => `'${k}'`).join(' and ')} to accept it anyway.`,
    `confirm: ${kinds.join(', ')}`,
  );
}
