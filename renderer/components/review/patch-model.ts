// A unified patch as rows a virtualised view can draw one at a time: split once,
// long lines cut into fixed-width continuation rows (so no row is a megabyte of
// text and every row has the same height), and the row of each file's header.
// Pure: no DOM, no React.
import { escapeContentLine } from '../../../common/review-text.js';

/** Characters per row; a longer line continues on the next rows (marked). */
export const ROW_CHARS = 1000;

export type LineKind = 'header' | 'file' | 'hunk' | 'add' | 'del' | 'ctx' | 'meta';

export interface PatchModel {
  /** The patch as given; lines are read from it on demand (no string per line). */
  text: string;
  lineCount: number;
  /** Line i is text[lineStart[i], lineStart[i + 1] - 1): the "\n" before the next start is left out. */
  lineStart: Int32Array;
  rowCount: number;
  /** Row → line and the line offset it starts at; absent when every line fits one row (row = line). */
  rowLine?: Int32Array;
  rowStart?: Int32Array;
  /** The widest row, in characters (for the horizontal extent). */
  maxCols: number;
  /** The row of each file's `diff --git` header, by the file's path as git stores it. */
  fileRows: Map<string, number>;
  /** Per line: its number in the old and in the new file (0: none, e.g. a header or the other side's line). */
  oldLine: Int32Array;
  newLine: Int32Array;
  /** The largest line number, for the width of the numbers' columns. */
  maxLineNo: number;
}

export interface PatchRow {
  /** The text of this row (a part of the line when the line is long). */
  text: string;
  line: string;
  /** 0-based line index in the patch. */
  lineIndex: number;
  /** This row continues the line of the row above. */
  continued: boolean;
}

export function lineKind(line: string): LineKind {
  const c = line.charCodeAt(0);
  if (c === 0x2b /* + */) return line.startsWith('+++ ') ? 'file' : 'add';
  if (c === 0x2d /* - */) return line.startsWith('--- ') ? 'file' : 'del';
  if (c === 0x20 || line === '') return 'ctx';
  if (line.startsWith('@@')) return 'hunk';
  if (line.startsWith('diff ')) return 'header';
  return 'meta';
}

/** Where a line is cut into rows; never between the halves of a surrogate pair. */
function cuts(text: string, from: number, to: number): number[] {
  const starts: number[] = [];
  let at = from;
  while (at < to) {
    starts.push(at - from);
    let next = at + ROW_CHARS;
    const high = text.charCodeAt(next - 1);
    if (next < to && high >= 0xd800 && high <= 0xdbff) next -= 1;
    at = next;
  }
  return starts.length ? starts : [0];
}

export function lineAt(model: Pick<PatchModel, 'text' | 'lineStart' | 'lineCount'>, i: number): string {
  return i < model.lineCount ? model.text.slice(model.lineStart[i]!, model.lineStart[i + 1]! - 1) : '';
}

export function buildPatchModel(patch: string): PatchModel {
  // Offsets, not split(): 700,000 line strings would cost tens of MB and long GC pauses while scrolling.
  let lineCount = 0;
  for (let at = patch.indexOf('\n'); at !== -1; at = patch.indexOf('\n', at + 1)) lineCount++;
  if (patch.length && !patch.endsWith('\n')) lineCount++;
  const lineStart = new Int32Array(lineCount + 1);
  for (let i = 1, at = 0; i <= lineCount; i++) {
    const nl = patch.indexOf('\n', at);
    at = nl === -1 ? patch.length + 1 : nl + 1;
    lineStart[i] = at;
  }
  const base = { text: patch, lineCount, lineStart };
  const len = (i: number) => lineStart[i + 1]! - 1 - lineStart[i]!;
  let long = false;
  let maxCols = 0;
  for (let i = 0; i < lineCount; i++) maxCols = Math.max(maxCols, len(i));
  if (maxCols > ROW_CHARS) long = true;
  maxCols = Math.min(maxCols, ROW_CHARS);
  let rowCount = lineCount;
  let rowLine: Int32Array | undefined;
  let rowStart: Int32Array | undefined;
  let rowOf = (i: number) => i;
  if (long) {
    const starts: number[][] = [];
    for (let i = 0; i < lineCount; i++) starts.push(len(i) > ROW_CHARS ? cuts(patch, lineStart[i]!, lineStart[i]! + len(i)) : [0]);
    rowCount = starts.reduce((n, st) => n + st.length, 0);
    rowLine = new Int32Array(rowCount);
    rowStart = new Int32Array(rowCount);
    const firstRow = new Int32Array(lineCount);
    let r = 0;
    starts.forEach((st, i) => {
      firstRow[i] = r;
      for (const at of st) {
        rowLine![r] = i;
        rowStart![r] = at;
        r++;
      }
    });
    rowOf = (i: number) => firstRow[i]!;
  }
  const fileRows = new Map<string, number>();
  const line = (i: number) => lineAt(base, i);
  for (let i = 0; i < lineCount; i++) {
    const at = lineStart[i]!;
    if (patch.charCodeAt(at) !== 0x64 /* d */ || !patch.startsWith('diff --git ', at)) continue;
    const p = headerPath(line, lineCount, i);
    if (p !== undefined && !fileRows.has(p)) fileRows.set(p, rowOf(i));
  }
  return { ...base, rowCount, ...(rowLine ? { rowLine, rowStart } : {}), maxCols, fileRows, ...lineNumbers(patch, lineStart, lineCount) };
}

const HUNK_HEADER = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

/**
 * Old and new line numbers from the hunk headers. A hunk's own counts say where
 * it ends, so a removed line that reads "-- x" (shown "--- x") or an added
 * "++ x" is content, not a file header; a line the counts do not expect ends the hunk.
 */
function lineNumbers(patch: string, lineStart: Int32Array, lineCount: number): Pick<PatchModel, 'oldLine' | 'newLine' | 'maxLineNo'> {
  const oldLine = new Int32Array(lineCount);
  const newLine = new Int32Array(lineCount);
  let oldNo = 0;
  let newNo = 0;
  let oldLeft = 0;
  let newLeft = 0;
  let maxLineNo = 0;
  for (let i = 0; i < lineCount; i++) {
    const at = lineStart[i]!;
    const c = patch.charCodeAt(at);
    if (oldLeft > 0 || newLeft > 0) {
      if (c === 0x20 /* ' ' */ && oldLeft > 0 && newLeft > 0) {
        oldLine[i] = oldNo++;
        newLine[i] = newNo++;
        oldLeft--;
        newLeft--;
        continue;
      }
      if (c === 0x2d /* - */ && oldLeft > 0) {
        oldLine[i] = oldNo++;
        oldLeft--;
        continue;
      }
      if (c === 0x2b /* + */ && newLeft > 0) {
        newLine[i] = newNo++;
        newLeft--;
        continue;
      }
      if (c === 0x5c /* \ No newline at end of file */) continue;
      oldLeft = newLeft = 0;
    }
    if (c !== 0x40 /* @ */) continue;
    const m = HUNK_HEADER.exec(patch.slice(at, Math.min(at + 80, lineStart[i + 1]! - 1)));
    if (!m) continue;
    oldNo = Number(m[1]);
    oldLeft = m[2] === undefined ? 1 : Number(m[2]);
    newNo = Number(m[3]);
    newLeft = m[4] === undefined ? 1 : Number(m[4]);
    maxLineNo = Math.max(maxLineNo, oldNo + oldLeft, newNo + newLeft);
  }
  return { oldLine, newLine, maxLineNo };
}

export function patchRow(model: PatchModel, row: number): PatchRow {
  if (!model.rowLine) {
    const line = lineAt(model, row);
    return { text: line, line, lineIndex: row, continued: false };
  }
  const lineIndex = model.rowLine[row]!;
  const line = lineAt(model, lineIndex);
  const start = model.rowStart![row]!;
  const next = row + 1 < model.rowCount && model.rowLine[row + 1] === lineIndex ? model.rowStart![row + 1]! : line.length;
  return { text: line.slice(start, next), line, lineIndex, continued: start > 0 };
}

export interface Segment {
  text: string;
  /** An escape standing for a hidden or control character (drawn apart from literal text). */
  escape: boolean;
}

/** A row's text as plain runs and escapes, so a literal "\u{202e}" in the content and an escaped U+202E look different. */
export function segments(text: string): Segment[] {
  if (escapeContentLine(text) === text) return [{ text, escape: false }];
  const out: Segment[] = [];
  let plain = '';
  for (const ch of text) {
    const shown = escapeContentLine(ch);
    if (shown === ch) {
      plain += ch;
      continue;
    }
    if (plain) out.push({ text: plain, escape: false });
    plain = '';
    out.push({ text: shown, escape: true });
  }
  if (plain) out.push({ text: plain, escape: false });
  return out;
}

/**
 * The new path of the file whose `diff --git` header is at line i: from its
 * `rename to` / `copy to` / `+++ b/` / `--- a/` lines, else from the header
 * itself when both sides name the same path. Undefined when it cannot be told.
 */
export function headerPath(lineOf: (i: number) => string, count: number, i: number): string | undefined {
  let minus: string | undefined;
  for (let j = i + 1; j < count && j < i + 12; j++) {
    const l = lineOf(j);
    if (l.startsWith('diff --git ') || l.startsWith('@@')) break;
    for (const prefix of ['rename to ', 'copy to ']) {
      if (l.startsWith(prefix)) return unquoted(l.slice(prefix.length));
    }
    if (l.startsWith('+++ ')) {
      const p = unquoted(l.slice(4));
      if (p !== undefined && p !== '/dev/null') return stripPrefix(p, 'b/');
    }
    if (l.startsWith('--- ')) {
      const p = unquoted(l.slice(4));
      if (p !== undefined && p !== '/dev/null') minus = stripPrefix(p, 'a/');
    }
  }
  if (minus !== undefined) return minus;
  const rest = lineOf(i).slice('diff --git '.length);
  if (rest.startsWith('"')) {
    const a = unquoteGitPath(rest);
    const b = a && rest[a.end] === ' ' ? unquoted(rest.slice(a.end + 1)) : undefined;
    return b === undefined ? undefined : stripPrefix(b, 'b/');
  }
  // "a/P b/P": the same path twice, so the split is where the halves agree.
  const half = (rest.length - 1) / 2;
  if (Number.isInteger(half) && rest[half] === ' ' && rest.startsWith('a/') && rest.slice(2, half) === rest.slice(half + 3)) {
    return rest.slice(2, half);
  }
  return undefined;
}

function stripPrefix(p: string, prefix: string): string {
  return p.startsWith(prefix) ? p.slice(prefix.length) : p;
}

/** A path as git prints it: as is, or C-quoted when it holds special bytes. Trailing tab (git's marker for spaces) dropped. */
function unquoted(s: string): string | undefined {
  if (!s.startsWith('"')) return s.endsWith('\t') ? s.slice(0, -1) : s;
  const q = unquoteGitPath(s);
  return q && q.end >= s.trimEnd().length ? q.value : undefined;
}

const SIMPLE_ESCAPES: Record<string, number> = { a: 7, b: 8, f: 12, n: 10, r: 13, t: 9, v: 11, '\\': 0x5c, '"': 0x22 };

/** Length of the valid UTF-8 sequence at `i`, or 0 when the byte there does not start one. */
function sequenceLength(b: number[], i: number): number {
  const c = b[i]!;
  if (c < 0x80) return 1;
  const cont = (k: number) => i + k < b.length && (b[i + k]! & 0xc0) === 0x80;
  const c1 = b[i + 1] ?? 0;
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) return cont(1) && cont(2) && !(c === 0xe0 && c1 < 0xa0) && !(c === 0xed && c1 >= 0xa0) ? 3 : 0;
  if (c >= 0xf0 && c <= 0xf4) return cont(1) && cont(2) && cont(3) && !(c === 0xf0 && c1 < 0x90) && !(c === 0xf4 && c1 >= 0x90) ? 4 : 0;
  return 0;
}

/**
 * A git name's bytes as the host names them: UTF-8, and each byte that is not
 * UTF-8 as the lone surrogate U+DC80+byte ("surrogateescape"), so two names
 * differing only in invalid bytes stay two names.
 */
export function decodeGitBytes(b: number[]): string {
  let out = '';
  const dec = new TextDecoder();
  for (let i = 0; i < b.length; ) {
    const n = sequenceLength(b, i);
    if (n === 0) out += String.fromCharCode(0xdc00 + b[i++]!);
    else {
      out += dec.decode(new Uint8Array(b.slice(i, i + n)));
      i += n;
    }
  }
  return out;
}

/** git's C-style quoting ("a/caf\303\251") back to the path; `end` is the index after the closing quote. */
export function unquoteGitPath(s: string): { value: string; end: number } | undefined {
  if (s[0] !== '"') return undefined;
  const bytes: number[] = [];
  const enc = new TextEncoder();
  for (let i = 1; i < s.length; i++) {
    const c = s[i]!;
    if (c === '"') return { value: decodeGitBytes(bytes), end: i + 1 };
    if (c !== '\\') {
      const cp = s.codePointAt(i)!;
      const ch = String.fromCodePoint(cp);
      bytes.push(...enc.encode(ch));
      i += ch.length - 1;
      continue;
    }
    const e = s[++i];
    if (e === undefined) return undefined;
    if (e in SIMPLE_ESCAPES) bytes.push(SIMPLE_ESCAPES[e]!);
    else if (/^[0-3][0-7]{2}$/.test(s.slice(i, i + 3))) {
      bytes.push(parseInt(s.slice(i, i + 3), 8));
      i += 2;
    } else return undefined;
  }
  return undefined;
}
