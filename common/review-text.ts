// Showing untrusted names and text so that what the user reads is what is there:
// control characters, bidi overrides and invisible characters become visible
// escapes. Shared by the quarantine (which flags them) and the renderer (which
// shows them). Pure TypeScript: no Node, no DOM.

/** Bidi controls: they reorder what is shown (Trojan Source, CVE-2021-42574). */
const BIDI = new Set([0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069]);

/** Characters that render as nothing (or as a blank) and can hide or fake text. */
function isInvisible(cp: number): boolean {
  return (
    cp === 0x00ad || // soft hyphen
    cp === 0x034f || // combining grapheme joiner
    cp === 0x115f || cp === 0x1160 || // Hangul fillers
    cp === 0x17b4 || cp === 0x17b5 ||
    cp === 0x180e || // Mongolian vowel separator
    (cp >= 0x200b && cp <= 0x200d) || // zero width space / non-joiner / joiner
    (cp >= 0x2060 && cp <= 0x2064) || // word joiner, invisible operators
    cp === 0x3164 || cp === 0xffa0 || // Hangul fillers
    cp === 0xfeff || // zero width no-break space (BOM)
    (cp >= 0xfff9 && cp <= 0xfffb) || // interlinear annotation
    (cp >= 0xe0000 && cp <= 0xe007f) || // tag characters
    (cp >= 0xe0100 && cp <= 0xe01ef) // variation selectors 17-256: can carry any byte unseen after a visible character
  );
}

function isControl(cp: number): boolean {
  return cp < 0x20 || cp === 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp === 0x2028 || cp === 0x2029;
}

export type HiddenCharKind = 'bidi' | 'invisible' | 'control';

export interface HiddenChar {
  /** Index in the string (UTF-16 code units). */
  index: number;
  codePoint: number;
  kind: HiddenCharKind;
}

function classify(cp: number): HiddenCharKind | undefined {
  if (BIDI.has(cp)) return 'bidi';
  if (isControl(cp)) return 'control';
  if (isInvisible(cp)) return 'invisible';
  return undefined;
}

/** A lone surrogate U+DC80..U+DCFF stands for an invalid byte of a git name (see main/pullback/review/git-names.ts). */
function isEscapedByte(cp: number): boolean {
  return cp >= 0xdc80 && cp <= 0xdcff;
}

function escapeByte(b: number): string {
  if (b === 0x0a) return '\\n';
  if (b === 0x0d) return '\\r';
  if (b === 0x09) return '\\t';
  return `\\x${b.toString(16).padStart(2, '0')}`;
}

// \xNN only ever means a byte (ASCII controls, or a byte that is not UTF-8);
// a character from U+0080 on is \u{...}, so the two can never be confused.
function escapeCodePoint(cp: number): string {
  if (cp < 0x80) return escapeByte(cp);
  if (isEscapedByte(cp)) return escapeByte(cp - 0xdc00);
  return `\\u{${cp.toString(16)}}`;
}

/**
 * A path or name as it may be shown: backslash doubled, control, bidi and
 * invisible characters as escapes, bytes that are not UTF-8 as \xNN, and
 * trailing blanks made visible.
 * The result contains none of those characters, so what is shown is what is there.
 */
export function escapeName(name: string): string {
  let out = '';
  for (const ch of name) {
    const cp = ch.codePointAt(0)!;
    if (ch === '\\') out += '\\\\';
    else if (classify(cp) || (cp >= 0xd800 && cp <= 0xdfff)) out += escapeCodePoint(cp);
    else out += ch;
  }
  // Blanks at the end cannot be seen: spaces, and the other Unicode spaces (no-break, ideographic, ...).
  const trailing = /[ \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+$/.exec(out);
  if (trailing) {
    out = out.slice(0, trailing.index) + [...trailing[0]].map((c) => (c === ' ' ? '\\x20' : escapeCodePoint(c.codePointAt(0)!))).join('');
  }
  return out;
}

/** Whether a name needs escaping to be shown faithfully (anything escapeName changes but a backslash). */
export function isUnsafeName(name: string): boolean {
  return escapeName(name) !== name.replace(/\\/g, '\\\\');
}

/**
 * Hidden characters in a line of content: bidi controls, invisible characters,
 * and control characters other than tab (and a final CR).
 */
export function hiddenChars(line: string): HiddenChar[] {
  const found: HiddenChar[] = [];
  let index = 0;
  for (const ch of line) {
    const cp = ch.codePointAt(0)!;
    const kind = classify(cp);
    const allowed = cp === 0x09 || (cp === 0x0d && index === line.length - 1);
    if (kind && !allowed) found.push({ index, codePoint: cp, kind });
    index += ch.length;
  }
  return found;
}

/** A line of content as it may be shown: hidden characters (but tab) as escapes. */
export function escapeContentLine(line: string): string {
  let out = '';
  for (const ch of line) {
    const cp = ch.codePointAt(0)!;
    out += cp !== 0x09 && classify(cp) ? escapeCodePoint(cp) : ch;
  }
  return out;
}

/**
 * A line of content for a terminal, where there is no styling to set an escape
 * apart and a tab is one more character that moves the cursor: as
 * escapeContentLine, and tab as \t too. The result has no character a terminal
 * acts on or hides (no C0, DEL, C1, bidi or invisible character).
 */
export function escapeTerminalLine(line: string): string {
  return escapeContentLine(line).replace(/\t/g, '\\t');
}

/**
 * JSON text with every hidden character a terminal would act on or hide (DEL,
 * C1, bidi, invisible, line separators) written as \uXXXX: the same JSON value,
 * but safe to print. JSON.stringify escapes only C0; the rest can appear only
 * inside its strings, where an escape means the same character.
 */
export function escapeJsonText(json: string): string {
  // Candidates by range (one pass, no per-character loop over a large patch), decided by classify.
  return json.replace(JSON_CANDIDATES, (ch) =>
    classify(ch.codePointAt(0)!) ? [...Array(ch.length).keys()].map((i) => `\\u${ch.charCodeAt(i).toString(16).padStart(4, '0')}`).join('') : ch,
  );
}
const JSON_CANDIDATES = /[\u007f-\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\u3164\ufeff\uffa0\ufff9-\ufffb]|\udb40[\udc00-\udfff]/g;

/** "U+202E (bidi)"-style description of a hidden character, for flags. */
export function describeHiddenChar(c: HiddenChar): string {
  return `U+${c.codePoint.toString(16).toUpperCase().padStart(4, '0')} (${c.kind})`;
}

/** Bytes as text: printable ASCII as is, backslash doubled, everything else as \n, \t, \r or \xNN. */
export function escapeBytes(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) {
    if (b === 0x5c) out += '\\\\';
    else if (b >= 0x20 && b < 0x7f) out += String.fromCharCode(b);
    else out += escapeByte(b);
  }
  return out;
}
