// Every added or changed line of the returned work, with its line number in the
// new file: one `git diff -U0 --text` over the quarantine's objects (so binary
// and NUL-holding files are read as lines too), capped, parsed by counting each
// hunk's lines so no content line is ever taken for a header.
import { firstLine, runGit } from '../../git/host-git.js';
import { DIFF_OPTIONS, firstIncompleteFile, patchSections, rejected, type ChangedFile } from './listing.js';

export interface AddedLines {
  /** Added lines per file index of the listing: new-file line numbers and text. */
  byFile: Map<number, { lines: number[]; texts: string[] }>;
  /** Index of the first file whose lines were not all read (the output cap cut it); files.length when none. */
  firstUnread: number;
}

/** Parses a `-U0` patch of the listed files (in listing order). */
export function parseAddedLines(files: ReadonlyArray<Pick<ChangedFile, 'oldMode' | 'newMode'>>, patch: string, cut: boolean): AddedLines {
  const sectionFile: number[] = [];
  files.forEach((f, i) => {
    for (let s = patchSections(f); s > 0; s--) sectionFile.push(i);
  });
  const byFile: AddedLines['byFile'] = new Map();
  const lines = patch.split('\n');
  if (cut) lines.pop(); // the last line may be partial
  let section = -1;
  let file = -1;
  let minus = 0;
  let plus = 0;
  let newLine = 0;
  for (const line of lines) {
    if (minus > 0 || plus > 0) {
      const c = line.charCodeAt(0);
      if (c === 0x2b /* + */ && plus > 0) {
        let entry = byFile.get(file);
        if (!entry) byFile.set(file, (entry = { lines: [], texts: [] }));
        entry.lines.push(newLine++);
        entry.texts.push(line.slice(1));
        plus--;
        continue;
      }
      if (c === 0x2d /* - */ && minus > 0) {
        minus--;
        continue;
      }
      if (c === 0x20 /* context, not with -U0 */) {
        newLine++;
        minus = Math.max(0, minus - 1);
        plus = Math.max(0, plus - 1);
        continue;
      }
      if (c === 0x5c /* \ No newline at end of file */) continue;
      throw rejected('the patch of the returned work does not match its own hunk headers');
    }
    if (line.startsWith('diff --git ')) {
      section++;
      file = sectionFile[section] ?? -1;
      if (file < 0) throw rejected('the patch of the returned work has more files than its listing');
      continue;
    }
    const hunk = /^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(line);
    if (hunk) {
      minus = hunk[1] === undefined ? 1 : Number(hunk[1]);
      newLine = Number(hunk[2]);
      plus = hunk[3] === undefined ? 1 : Number(hunk[3]);
    }
    // Anything else is a header line (index, modes, ---/+++, rename, "\ No newline").
  }
  return { byFile, firstUnread: firstIncompleteFile(files, patch, cut) };
}

/** Runs the -U0 diff (capped at maxBytes) and parses it. */
export async function readAddedLines(
  qrepo: string, base: string, head: string, files: ChangedFile[], opts: { timeoutMs: number; maxBytes: number },
): Promise<AddedLines> {
  const r = await runGit(['diff', ...DIFF_OPTIONS, '-U0', '--text', '--no-prefix', base, head], {
    cwd: qrepo, env: { GIT_DIR: qrepo }, timeoutMs: opts.timeoutMs, maxStdoutBytes: opts.maxBytes,
  });
  if (r.code !== 0 && !r.truncated) throw rejected(`could not read the added lines: ${firstLine(r.stderr) || `exit ${r.code}`}`);
  return parseAddedLines(files, r.stdoutBuffer.toString('utf8'), r.truncated);
}
