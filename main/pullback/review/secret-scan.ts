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
}

export async function scanSecrets(input: ScanSecretsInput): Promise<{ findings: SecretFinding[]; omitted: number }> {
  const findings: SecretFinding[] = [];
  const seen = new Set<string>();
  let omitted = 0;
  const add = (file: number, line: number, rule: string, masked: string) => {
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

  let chunk: string[] = [];
  let where: Array<[number, number]> = [];
  let chars = 0;
  const flush = async () => {
    if (chunk.length === 0) return;
    const content = chunk.join('\n');
    const result = await lintSource({
      source: { filePath: 'added-lines.txt', content, contentType: 'text', ext: '.txt' },
      options: { config: { rules: RULES }, noPhysicFilePath: true, maskSecrets: true },
    });
    for (const m of result.messages) {
      const at = where[m.loc.start.line - 1];
      if (!at) continue;
      const rule = `${m.ruleId.replace('@secretlint/secretlint-rule-', 'secretlint/')}:${m.messageId}`;
      const matched = content.slice(m.range[0], m.range[1]);
      // A match that is (or holds) one of the sandbox's credentials shows none of its characters.
      const own = credentials.some((c) => matched.includes(c.value) || c.value.includes(matched));
      add(at[0], at[1], rule, maskSecret(matched, own ? { keep: false } : {}));
    }
    // The entropy check adds what the rule set did not already name.
    let offset = 0;
    for (let k = 0; k < chunk.length; k++) {
      for (const hit of highEntropyAssignments(chunk[k]!)) {
        const start = offset + hit.start;
        const end = start + hit.value.length;
        if (result.messages.some((m) => m.range[0] < end && start < m.range[1])) continue;
        const own = credentials.some((c) => hit.value.includes(c.value) || c.value.includes(hit.value));
        add(where[k]![0], where[k]![1], 'entropy:assignment', maskSecret(hit.value, own ? { keep: false } : {}));
      }
      offset += chunk[k]!.length + 1;
    }
    chunk = [];
    where = [];
    chars = 0;
  };

  for (const [file, { lines, texts }] of [...input.added.byFile].sort((a, b) => a[0] - b[0])) {
    for (let k = 0; k < texts.length; k++) {
      const line = lines[k]!;
      // UTF-16 text (read with --text) has a NUL beside every ASCII character:
      // the line is scanned as it is and once more with the NULs taken out.
      const forms = texts[k]!.includes('\0') ? [texts[k]!, texts[k]!.replace(/\0/g, '')] : [texts[k]!];
      for (const text of forms) {
        for (const c of credentials) {
          if (text.includes(c.value)) add(file, line, `credential:${c.id}`, `${maskSecret(c.value, { keep: false })}: the value of credential "${escapeContentLine(c.id)}"`);
        }
        chunk.push(text);
        where.push([file, line]);
        chars += text.length + 1;
      }
      if (chars >= CHUNK_CHARS) await flush();
    }
  }
  await flush();
  findings.sort((a, b) => (a.path === b.path ? a.line - b.line : a.path < b.path ? -1 : 1));
  return { findings, omitted };
}
