// Secrets in the returned work's added lines: secretlint's recommended rules (a
// maintained rule set: cloud and API keys, private keys, tokens, connection
// strings), a high-entropy assignment check the rule set lacks, and the exact
// value of every credential the sandbox used. Values never leave this module:
// findings carry a masked form only.
import { lintSource } from '@secretlint/core';
import { rules as recommendedRules } from '@secretlint/secretlint-rule-preset-recommend';
import type { SecretFinding } from '../../../common/review.js';
import { escapeContentLine } from '../../../common/review-text.js';
import type { AddedLines } from './added-lines.js';
import { contentToScan, DEFAULT_CONTENT_SCAN_LIMITS, type ContentReader, type ContentScanLimits, type ScanFile } from './scan-content.js';
import { joinAtSeam, lineForms } from './scan-forms.js';

/**
 * The recommended rules one by one, so that one can be left out: the
 * comment filter would let the returned work switch the scan off with a
 * "secretlint-disable" comment of its own (the preset ignores `disabled`).
 * AWS access key ids are scanned too (off by default in the rule).
 */
const RULES = recommendedRules
  .filter((r) => r.meta.id !== '@secretlint/secretlint-rule-filter-comments')
  .map((r) => ({
    id: r.meta.id,
    rule: r,
    ...(r.meta.id === '@secretlint/secretlint-rule-aws' ? { options: { enableIDScanRule: true } } : {}),
  })) as unknown as Parameters<typeof lintSource>[0]['options']['config']['rules'];

/** Lines handed to secretlint at once (several files' added lines joined). */
const CHUNK_CHARS = 1024 * 1024;

/** Shannon entropy in bits per character. */
export function entropy(s: string): number {
  const counts = new Map<string, number>();
  for (const c of s) counts.set(c, (counts.get(c) ?? 0) + 1);
  let h = 0;
  for (const n of counts.values()) {
    const p = n / s.length;
    h -= p * Math.log2(p);
  }
  return h;
}

// A line of the returned work may be megabytes of "token=token=..." or of
// spaces: the patterns find only the name and the operator (bounded
// repetitions), and the value is read on by hand and skipped, so the work
// stays linear in the line's length.
const ASSIGNMENT = /(?:secret|token|passw(?:or)?d|pwd|api[_-]?key|apikey|access[_-]?key|auth[_-]?key|credential|private[_-]?key|signing[_-]?key)[A-Za-z0-9_.-]{0,40}["']?\s{0,8}(?::=|=>|=|:)\s{0,8}["'`]?/gi;
const BEARER = /\bbearer\s{1,8}/gi;
const HINT = /secret|token|passw|pwd|api[_-]?key|apikey|access[_-]?key|auth[_-]?key|credential|private[_-]?key|signing[_-]?key|bearer/i;
const VALUE_CHAR = /[A-Za-z0-9+/=_\-.~]/;

/** A long random-looking value assigned to a secret-sounding name (or sent as a bearer token). */
export function highEntropyAssignments(line: string): Array<{ start: number; value: string }> {
  const hits: Array<{ start: number; value: string }> = [];
  if (!HINT.test(line)) return hits; // one cheap test for the many lines without a keyword
  for (const re of [ASSIGNMENT, BEARER]) {
    re.lastIndex = 0;
    for (let m = re.exec(line); m; m = re.exec(line)) {
      const start = m.index + m[0].length;
      let end = start;
      while (end < line.length && VALUE_CHAR.test(line[end]!)) end++;
      re.lastIndex = Math.max(end, m.index + 1);
      const value = line.slice(start, end).replace(/[.~]+$/, '');
      if (value.length < 20 || value.length > 4096) continue;
      if (re === ASSIGNMENT && /[.~]/.test(value)) continue; // a dotted reference (process.env.X), not a literal
      if (!/[0-9]/.test(value) || !/[A-Za-z]/.test(value) || entropy(value) < 3.5) continue;
      hits.push({ start, value });
    }
  }
  return hits;
}

/** A secret as it may be shown: a few leading characters at most, the rest starred, and its length. */
export function maskSecret(value: string, opts: { keep?: boolean } = {}): string {
  const pem = /^-----BEGIN [A-Z0-9 ]{1,40}-----/.exec(value);
  if (pem) return `${pem[0]}****** (${value.length} characters)`;
  const keep = opts.keep === false ? 0 : value.length >= 16 ? 4 : value.length >= 10 ? 2 : 0;
  return `${escapeContentLine(value.slice(0, keep))}${'*'.repeat(Math.max(6, Math.min(12, value.length - keep)))} (${value.length} characters)`;
}

export interface ScanSecretsInput {
  paths: readonly string[];
  added: AddedLines;
  /** Values of the credentials the sandbox could use (from the keychain). */
  credentials: ReadonlyArray<{ id: string; value: string }>;
  maxFindings: number;
  /**
   * The listed files, in the order of `paths`. When given, new names (added,
   * renamed, copied) are scanned as text, and the content of binary files is
   * read through `readContent`: compressed content is decompressed and scanned,
   * anything else is returned in `notScanned`.
   */
  files?: readonly ScanFile[];
  readContent?: ContentReader;
  contentLimits?: Partial<ContentScanLimits>;
  /** Characters of decoded and joined forms scanned in all; past it the rest is named in `notScanned`. */
  maxFormChars?: number;
}

/** A file whose content was not (fully) scanned, and why. */
export interface NotScannedFile {
  path: string;
  status: ScanFile['status'];
  reason: string;
}

export interface ScanSecretsResult {
  findings: SecretFinding[];
  omitted: number;
  /** Files the scan could not read in full (binary, over a cap); empty without `files`. */
  notScanned: NotScannedFile[];
}

const MAX_FORM_CHARS = 32 * 1024 * 1024;

/** One piece of text handed to the rules, and where it came from. */
interface Unit {
  file: number;
  /** Line in the new file; 0 for a file's name or its decompressed content. */
  line: number;
  /** Said after the rule when the text is not the line as written. */
  how?: string;
  /** For two joined lines: where the second starts; only findings across it count. */
  seam?: number;
}

const NAMED_STATUSES = new Set<ScanFile['status']>(['added', 'renamed', 'copied']);

export async function scanSecrets(input: ScanSecretsInput): Promise<ScanSecretsResult> {
  const findings: SecretFinding[] = [];
  const seen = new Set<string>();
  let omitted = 0;
  /** Rules found on each line as written: a joined pair does not name them again. */
  const onLine = new Set<string>();
  const add = (file: number, line: number, rule: string, masked: string, u?: Unit, base?: string) => {
    if (u && base) {
      if (u.seam !== undefined) {
        if (onLine.has(`${file}\0${line}\0${base}`) || onLine.has(`${file}\0${line + 1}\0${base}`)) return;
      } else if (!u.how) onLine.add(`${file}\0${line}\0${base}`);
    }
    const key = `${file}\0${line}\0${rule}`;
    if (seen.has(key)) return;
    seen.add(key);
    if (findings.length >= input.maxFindings) {
      omitted++;
      return;
    }
    findings.push({ path: input.paths[file]!, line, rule, masked });
  };
  const credentials = input.credentials.filter((c) => c.value.length >= 4);
  const ruleOf = (rule: string, u: Unit) => (u.how ? `${rule}, ${u.how}` : rule);

  let chunk: string[] = [];
  let units: Unit[] = [];
  let starts: number[] = [];
  let chars = 0;
  /** The unit a content offset falls in. */
  const unitAt = (offset: number): number => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  const acrossSeam = (k: number, from: number, to: number) => {
    const seam = units[k]!.seam;
    if (seam === undefined) return true;
    return from - starts[k]! < seam && to - starts[k]! > seam;
  };
  const flush = async () => {
    if (chunk.length === 0) return;
    const content = chunk.join('\n');
    const result = await lintSource({
      source: { filePath: 'added-lines.txt', content, contentType: 'text', ext: '.txt' },
      options: { config: { rules: RULES }, noPhysicFilePath: true, maskSecrets: true },
    });
    // In text order, so a line's own findings are known before a joined pair's.
    for (const m of [...result.messages].sort((x, y) => x.range[0] - y.range[0])) {
      const k = unitAt(m.range[0]);
      const u = units[k];
      if (!u || !acrossSeam(k, m.range[0], m.range[1])) continue;
      const rule = `${m.ruleId.replace('@secretlint/secretlint-rule-', 'secretlint/')}:${m.messageId}`;
      const matched = content.slice(m.range[0], m.range[1]);
      // A match that is (or holds) one of the sandbox's credentials shows none of its characters.
      const own = credentials.some((c) => matched.includes(c.value) || c.value.includes(matched));
      add(u.file, u.line, ruleOf(rule, u), maskSecret(matched, own ? { keep: false } : {}), u, rule);
    }
    // The entropy check adds what the rule set did not already name.
    for (let k = 0; k < chunk.length; k++) {
      for (const hit of highEntropyAssignments(chunk[k]!)) {
        const start = starts[k]! + hit.start;
        const end = start + hit.value.length;
        if (!acrossSeam(k, start, end)) continue;
        if (result.messages.some((m) => m.range[0] < end && start < m.range[1])) continue;
        const own = credentials.some((c) => hit.value.includes(c.value) || c.value.includes(hit.value));
        add(units[k]!.file, units[k]!.line, ruleOf('entropy:assignment', units[k]!), maskSecret(hit.value, own ? { keep: false } : {}), units[k], 'entropy:assignment');
      }
    }
    chunk = [];
    units = [];
    starts = [];
    chars = 0;
  };
  const push = async (text: string, u: Unit) => {
    for (const c of credentials) {
      let at = text.indexOf(c.value, u.seam === undefined ? 0 : Math.max(0, u.seam - c.value.length + 1));
      if (u.seam !== undefined && at >= u.seam) at = -1;
      if (at >= 0) add(u.file, u.line, ruleOf(`credential:${c.id}`, u), `${maskSecret(c.value, { keep: false })}: the value of credential "${escapeContentLine(c.id)}"`, u, `credential:${c.id}`);
    }
    starts.push(chars);
    chunk.push(text);
    units.push(u);
    chars += text.length + 1;
    if (chars >= CHUNK_CHARS) await flush();
  };

  const notScanned: NotScannedFile[] = [];
  const files = input.files;
  let formChars = input.maxFormChars ?? MAX_FORM_CHARS;
  const formsCapped = new Set<number>();
  /** Decoded forms of a line, within the budget; pushed after the file's own lines so a multi-line key stays whole. */
  const formsOf = (text: string, u: Unit, into: Array<[string, Unit]>) => {
    if (formChars <= 0) {
      formsCapped.add(u.file);
      return;
    }
    for (const form of lineForms(text)) {
      formChars -= form.text.length;
      into.push([form.text, { ...u, how: u.how ? `${u.how}, ${form.how}` : form.how }]);
    }
  };
  const pushAll = async (list: Array<[string, Unit]>) => {
    for (const [text, u] of list) await push(text, u);
  };

  if (files) {
    const names: Array<[string, Unit]> = [];
    for (let i = 0; i < files.length; i++) {
      if (!NAMED_STATUSES.has(files[i]!.status)) continue;
      const u = { file: i, line: 0, how: 'in the file name' };
      names.push([input.paths[i]!, u]);
      formsOf(input.paths[i]!, u, names);
    }
    await pushAll(names);
  }

  for (const [file, { lines, texts }] of [...input.added.byFile].sort((a, b) => a[0] - b[0])) {
    const extra: Array<[string, Unit]> = [];
    for (let k = 0; k < texts.length; k++) {
      const line = lines[k]!;
      // UTF-16 text (read with --text) has a NUL beside every ASCII character:
      // the line is scanned as it is and once more with the NULs taken out.
      const forms = texts[k]!.includes('\0') ? [texts[k]!, texts[k]!.replace(/\0/g, '')] : [texts[k]!];
      for (const text of forms) {
        await push(text, { file, line });
        formsOf(text, { file, line }, extra);
      }
      // A token cut at the end of this line and continued on the next one.
      if (k + 1 < texts.length && lines[k + 1] === line + 1 && formChars > 0) {
        const joined = joinAtSeam(forms.at(-1)!, texts[k + 1]!.replace(/\0/g, ''));
        if (joined) {
          formChars -= joined.text.length;
          extra.push([joined.text, { file, line, how: `joined with line ${line + 1}`, seam: joined.seam }]);
        }
      }
    }
    await pushAll(extra);
  }

  if (files && input.readContent) {
    const limits = { ...DEFAULT_CONTENT_SCAN_LIMITS, ...input.contentLimits };
    const content = await contentToScan(files, input.readContent, limits);
    for (const t of content.texts) {
      const extra: Array<[string, Unit]> = [];
      for (let k = 0; k < t.texts.length; k++) {
        const u = { file: t.file, line: 0, how: `${t.how}, line ${t.lineNumbers[k]}` };
        await push(t.texts[k]!, u);
        formsOf(t.texts[k]!, u, extra);
      }
      await pushAll(extra);
    }
    for (const n of content.notScanned) notScanned.push({ path: input.paths[n.file]!, status: files[n.file]!.status, reason: n.reason });
  }
  await flush();
  for (const file of formsCapped) {
    if (files) notScanned.push({ path: input.paths[file]!, status: files[file]!.status, reason: `its decoded forms (base64, escapes) are past the ${Math.round((input.maxFormChars ?? MAX_FORM_CHARS) / (1024 * 1024))} MiB cap` });
  }
  findings.sort((a, b) => (a.path === b.path ? a.line - b.line : a.path < b.path ? -1 : 1));
  return { findings, omitted, notScanned };
}
