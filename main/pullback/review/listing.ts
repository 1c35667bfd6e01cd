// The complete list of changed files between the base and the returned head:
// one `git diff --raw --numstat -z` (modes, object ids, status, both names of a
// rename, line counts), parsed from bytes so no name is lost or merged.
import type { DiffFile, FileMode } from '../../../common/review.js';
import { FactoryError } from '../../../common/errors.js';
import { git } from '../../git/host-git.js';
import { decodeGitName, splitNul } from './git-names.js';

/** A changed file with what the review needs internally (object ids), beyond what it shows. */
export interface ChangedFile extends DiffFile {
  oldOid: string;
  newOid: string;
}

/** Options every diff of the review uses, so listings and patches list the same pairs in the same order. */
export const DIFF_OPTIONS: readonly string[] = [
  '--no-ext-diff', '--no-textconv', '--no-color', '-M',
  // The user's own git config must not hide a submodule change or reorder files.
  '--ignore-submodules=none', '--submodule=short', '-O/dev/null',
];

/** The most bytes a listing may take (over 300 bytes per file at 200,000 files); more is refused. */
const MAX_LISTING_BYTES = 64 * 1024 * 1024;

export function modeOf(octal: string): FileMode {
  switch (octal) {
    case '000000': return 'none';
    case '120000': return 'symlink';
    case '160000': return 'submodule';
    case '100755': return 'executable';
    default: return 'file'; // 100644 and the old group-writable 100664
  }
}

function statusOf(letter: string): DiffFile['status'] {
  switch (letter) {
    case 'A': return 'added';
    case 'M': return 'modified';
    case 'D': return 'deleted';
    case 'R': return 'renamed';
    case 'C': return 'copied';
    case 'T': return 'type-changed';
    default: return 'other';
  }
}

/** The error the quarantine refuses a result with (PullbackError's name, without importing the quarantine). */
export function rejected(message: string): FactoryError {
  return new FactoryError('PullbackRejected', message);
}

const RAW_META = /^:(\d{6}) (\d{6}) ([0-9a-f]{40,64}) ([0-9a-f]{40,64}) ([A-Z])(\d*)$/;
const NUMSTAT = /^(-|\d+)\t(-|\d+)\t$/;

/**
 * Parses `git diff --raw --numstat -z` output: first every raw entry
 * (":old new oid oid STATUS\0path\0", renames and copies "...\0old\0new\0"),
 * then one numstat entry per raw entry, in the same order
 * ("A\tR\tpath\0", renames "A\tR\t\0old\0new\0", binary "-\t-").
 */
export function parseRawNumstat(out: Buffer): ChangedFile[] {
  const parts = splitNul(out);
  const files: ChangedFile[] = [];
  let i = 0;
  while (i < parts.length && parts[i]![0] === 0x3a /* ':' */) {
    const meta = RAW_META.exec(parts[i++]!.toString('latin1'));
    if (!meta) throw rejected('git diff --raw printed a line the review cannot read');
    const [, oldMode, newMode, oldOid, newOid, letter] = meta as unknown as [string, string, string, string, string, string];
    const twoNames = letter === 'R' || letter === 'C';
    if (i + (twoNames ? 2 : 1) > parts.length) throw rejected('git diff --raw ended in the middle of an entry');
    const first = decodeGitName(parts[i++]!);
    const second = twoNames ? decodeGitName(parts[i++]!) : undefined;
    files.push({
      path: second ?? first,
      ...(second !== undefined ? { oldPath: first } : {}),
      status: statusOf(letter),
      added: 0,
      removed: 0,
      binary: false,
      oldMode: modeOf(oldMode),
      newMode: modeOf(newMode),
      oldOid,
      newOid,
    });
  }
  for (const file of files) {
    const head = parts[i++];
    if (!head) throw rejected('git diff --numstat listed fewer files than --raw');
    // The path follows the second tab; for a rename it is empty and two names follow.
    const secondTab = head.indexOf(0x09, head.indexOf(0x09) + 1);
    const counts = NUMSTAT.exec(head.subarray(0, secondTab + 1).toString('latin1'));
    if (secondTab < 0 || !counts) throw rejected('git diff --numstat printed a line the review cannot read');
    let name = head.subarray(secondTab + 1);
    if (name.length === 0) {
      i++; // the old name
      name = parts[i++] ?? Buffer.alloc(0);
    }
    if (decodeGitName(name) !== file.path) throw rejected('git diff --numstat and --raw disagree on the files');
    file.binary = counts[1] === '-' && counts[2] === '-';
    file.added = file.binary ? 0 : Number(counts[1]);
    file.removed = file.binary ? 0 : Number(counts[2]);
  }
  if (i !== parts.length) throw rejected('git diff --numstat listed more files than --raw');
  return files;
}

/** Every changed file from base to head in the quarantine repository. */
export async function listChanges(qrepo: string, base: string, head: string, timeoutMs: number): Promise<ChangedFile[]> {
  const r = await git(['diff', ...DIFF_OPTIONS, '--no-abbrev', '--raw', '--numstat', '-z', base, head], {
    cwd: qrepo, env: { GIT_DIR: qrepo }, timeoutMs, maxStdoutBytes: MAX_LISTING_BYTES, errorName: 'PullbackRejected',
  });
  if (r.truncated) throw rejected(`the list of changed files is over ${MAX_LISTING_BYTES / (1024 * 1024)} MiB; the result is refused`);
  return parseRawNumstat(r.stdoutBuffer);
}

/** Patch sections git writes for one file: a change between file, symlink and submodule is a deletion plus a creation. */
export function patchSections(f: Pick<DiffFile, 'oldMode' | 'newMode'>): number {
  const kind = (m: FileMode | undefined) => (m === 'executable' ? 'file' : m);
  return f.oldMode !== 'none' && f.newMode !== 'none' && kind(f.oldMode) !== kind(f.newMode) ? 2 : 1;
}

/**
 * Which files a patch (cut or not) shows completely: the patch lists files in the
 * listing's order, each starting with "diff --git " (content lines always start
 * with ' ', '+', '-' or '\', and git quotes names with newlines). Returns the
 * index of the first file not shown completely, or files.length when all are.
 */
export function firstIncompleteFile(files: ReadonlyArray<Pick<DiffFile, 'oldMode' | 'newMode'>>, patch: string, cut: boolean): number {
  if (!cut) return files.length;
  let headers = 0;
  for (let at = patch.startsWith('diff --git ') ? 0 : patch.indexOf('\ndiff --git '); at >= 0; at = patch.indexOf('\ndiff --git ', at + 1)) headers++;
  // The file holding the last header seen was cut (or ends exactly at the cut: counted as cut all the same).
  let seen = 0;
  for (let i = 0; i < files.length; i++) {
    seen += patchSections(files[i]!);
    if (seen >= headers) return i;
  }
  return files.length;
}
