// Other forms of a line of returned work that the secret scan reads too, since
// a token need not be written plainly: base64 (standard or url-safe), \xNN /
// \uNNNN / %NN escapes, string concatenation ("AKIA" + "..."), and a token cut
// in two at the end of a line. Each form is bounded by the line it comes from,
// so the scan's cost stays linear in what it reads.

export interface LineForm {
  text: string;
  /** How it was made from the line, said after the rule ("decoded from base64"). */
  how: string;
}

/** A base64 run shorter than this cannot hold a token worth naming (20 bytes take 28 characters). */
const MIN_BASE64_RUN = 24;
/** Runs decoded per line: a line of many short runs is prose or code, not an encoded blob. */
const MAX_RUNS_PER_LINE = 16;
/** Escapes in a line before it is decoded (a line with one or two is ordinary code). */
const MIN_ESCAPES = 6;

const BASE64_RUN = /[A-Za-z0-9+/_-]{24,}={0,2}/g;
const ESCAPE = /\\x[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\u\{[0-9A-Fa-f]{1,6}\}|%[0-9A-Fa-f]{2}/g;
/** A closing quote, a concatenation operator (or none: "a" "b"), an opening quote. */
const CONCAT = /["'`]\s{0,8}(?:\+|\.\.?|&|\|\|)?\s{0,8}["'`]/g;

/** Whether decoded bytes read as text (a key, a config line), not noise from decoding an identifier. */
function readsAsText(bytes: Buffer): boolean {
  if (bytes.length < 12) return false;
  let printable = 0;
  for (const b of bytes) if ((b >= 0x20 && b < 0x7f) || b === 0x0a || b === 0x0d || b === 0x09) printable++;
  return printable / bytes.length >= 0.9;
}

/** The base64 runs of a line, decoded, that read as text. */
function base64Forms(line: string): LineForm[] {
  const out: LineForm[] = [];
  BASE64_RUN.lastIndex = 0;
  let runs = 0;
  for (let m = BASE64_RUN.exec(line); m; m = BASE64_RUN.exec(line)) {
    if (m[0].length < MIN_BASE64_RUN) continue;
    if (++runs > MAX_RUNS_PER_LINE) break;
    // Node reads both alphabets (+/ and -_); a run of one case or of digits only is a word or a number.
    const run = m[0];
    if (!/[A-Z]/.test(run) || !/[a-z]/.test(run)) continue;
    const bytes = Buffer.from(run, 'base64');
    if (readsAsText(bytes)) out.push({ text: bytes.toString('utf8'), how: `decoded from ${/[-_]/.test(run) ? 'url-safe base64' : 'base64'}` });
  }
  return out;
}

/** The line with its \xNN, \uNNNN and %NN escapes decoded (bytes as UTF-8), when it has enough of them. */
function escapeForm(line: string): LineForm | null {
  ESCAPE.lastIndex = 0;
  let n = 0;
  while (ESCAPE.exec(line) && ++n < MIN_ESCAPES);
  if (n < MIN_ESCAPES) return null;
  const bytes: number[] = [];
  let last = 0;
  const plain = (s: string) => {
    for (const b of Buffer.from(s, 'utf8')) bytes.push(b);
  };
  ESCAPE.lastIndex = 0;
  for (let m = ESCAPE.exec(line); m; m = ESCAPE.exec(line)) {
    plain(line.slice(last, m.index));
    const e = m[0];
    if (e[0] === '%' || e[1] === 'x') bytes.push(parseInt(e.slice(-2), 16));
    else {
      const cp = parseInt(e[2] === '{' ? e.slice(3, -1) : e.slice(2), 16);
      plain(cp <= 0x10ffff && !(cp >= 0xd800 && cp < 0xe000) ? String.fromCodePoint(cp) : '\ufffd');
    }
    last = m.index + e.length;
  }
  plain(line.slice(last));
  return { text: Buffer.from(bytes).toString('utf8'), how: 'with its escapes decoded' };
}

/** The line with string concatenation taken out ("AKIA" + "ABC" reads "AKIAABC"). */
function concatForm(line: string): LineForm | null {
  CONCAT.lastIndex = 0;
  if (!CONCAT.test(line)) return null;
  CONCAT.lastIndex = 0;
  const joined = line.replace(CONCAT, '');
  return joined === line ? null : { text: joined, how: 'with its string concatenation joined' };
}

/** Every other form of a line worth scanning (none for most lines). */
export function lineForms(line: string): LineForm[] {
  const out = base64Forms(line);
  const escaped = escapeForm(line);
  if (escaped) out.push(escaped);
  const concat = concatForm(line);
  if (concat) out.push(concat);
  return out;
}

/** Characters either side of the seam of two joined lines: more than any token the rules know. */
const SEAM_CHARS = 256;
const TOKEN_END = /[A-Za-z0-9+/=_-]{4,}$/;
const TOKEN_START = /^[A-Za-z0-9+/=_-]{4,}/;
// Two strings concatenated across the line end: a closing quote (and an
// operator) ending the first line, an (operator and an) opening quote starting
// the second.
const END_QUOTE = /["'`]\s{0,8}(?:\+|\.\.?|&|\|\|)?\s*$/;
const START_QUOTE = /^\s*(?:\+|\.\.?|&|\|\|)?\s{0,8}["'`]/;

/**
 * Two adjacent lines joined where a token could have been cut between them:
 * two strings concatenated, a string continued with a backslash, or a token
 * wrapped as it is. The first must end, and the second start, with token
 * characters. `seam` is where the second begins in `text`; a finding counts
 * only when it spans it. Null when the lines cannot hold a cut token.
 */
export function joinAtSeam(first: string, second: string): { text: string; seam: number } | null {
  let a: string;
  let b: string;
  if (END_QUOTE.test(first) && START_QUOTE.test(second)) {
    a = first.replace(END_QUOTE, '');
    b = second.replace(START_QUOTE, '');
  } else if (first.endsWith('\\')) {
    a = first.slice(0, -1);
    b = second;
  } else {
    a = first.trimEnd();
    b = second.trimStart();
  }
  const left = a.slice(-SEAM_CHARS);
  if (!TOKEN_END.test(left) || !TOKEN_START.test(b)) return null;
  return { text: left + b.slice(0, SEAM_CHARS), seam: left.length };
}
