// Which tests failed, by name, from a test run's output, and the one line the
// board shows for a test stage: "12 passed, 1 failed: adds numbers". The
// output comes from the sandbox, so it is untrusted: read capped, names
// stripped of escape and control characters and cut short, a bounded list.
// The counts only describe the run; the exit status alone decides the stage.
import { firstAssertion, logLines, readableTail } from '../log-lines.js';
import { formatTestCounts, parseTestCounts, type TestCounts } from './test-detect.js';

/** The most output read for names (the tail: runners print their failures last). */
export const MAX_NAME_SCAN_CHARS = 1024 * 1024;
export const MAX_FAILED_NAMES = 20;
export const MAX_NAME_CHARS = 120;
/** Names shown on the card; the rest are counted ("and 3 more"). */
const SHOWN_NAMES = 3;

const ESCAPES = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]/g;
// C0, DEL, C1, and the Unicode controls that reorder or hide text.
const CONTROLS = /[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;

/** A test name as the card may show it: one line, no escapes or controls, capped. */
export function cleanTestName(raw: string): string {
  const name = raw.replace(ESCAPES, '').replace(CONTROLS, '').replace(/\s+/g, ' ').trim();
  return name.length > MAX_NAME_CHARS ? `${name.slice(0, MAX_NAME_CHARS - 1)}…` : name;
}

function outputLines(output: string): string[] {
  if (output.length > MAX_NAME_SCAN_CHARS) output = output.slice(-MAX_NAME_SCAN_CHARS);
  // Replayed as a terminal showed it: progress frames and spinners are gone.
  return logLines(output);
}

interface Entry {
  indent: number;
  name: string;
  ok: boolean;
}

/**
 * The failed leaves of a tree of results given by indentation (node's TAP and
 * spec reporters): a failed suite whose own children failed is not itself named.
 */
function failedLeaves(entries: Entry[]): string[] {
  const names: string[] = [];
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    if (e.ok) continue;
    // Children print before their parent, more indented, back to the previous sibling.
    let hasFailedChild = false;
    for (let j = i - 1; j >= 0 && entries[j]!.indent > e.indent; j--) {
      if (!entries[j]!.ok) hasFailedChild = true;
    }
    if (!hasFailedChild) names.push(e.name);
  }
  return names;
}

function nodeTap(lines: string[]): string[] {
  const entries: Entry[] = [];
  for (const l of lines) {
    const m = /^(\s*)(not ok|ok) \d+(?: - (.*))?$/.exec(l);
    if (!m) continue;
    let name = m[3] ?? '';
    const todo = /\s#\s*TODO\b/i.test(name);
    name = name.replace(/\s#\s*(?:SKIP|TODO)\b.*$/i, '').replace(/\s#\s*time=\S+$/, '');
    entries.push({ indent: m[1]!.length, name, ok: m[2] === 'ok' || todo });
  }
  return failedLeaves(entries);
}

const TODO = /\s#\s*TODO\b/i;

function nodeSpec(lines: string[]): string[] {
  const strip = (s: string) => s.replace(/\s\(\d+(?:\.\d+)?m?s\)(?:\s#.*)?$/, '');
  // The closing "failing tests:" list names exactly the failed leaves.
  const listAt = lines.findIndex((l) => /^\s*✖ failing tests:\s*$/.test(l));
  if (listAt >= 0) {
    return lines.slice(listAt + 1).flatMap((l) => {
      const m = /^✖ (.+)$/.exec(l);
      return m && !TODO.test(m[1]!) ? [strip(m[1]!)] : [];
    });
  }
  const entries: Entry[] = [];
  for (const l of lines) {
    const m = /^(\s*)([✖✔﹣])\s(.+)$/.exec(l);
    // A failing todo test does not fail the run.
    if (m) entries.push({ indent: m[1]!.length, name: strip(m[3]!), ok: m[2] !== '✖' || TODO.test(m[3]!) });
  }
  return failedLeaves(entries);
}

function pytestNames(lines: string[]): string[] {
  return lines.flatMap((l) => {
    const m = /^(?:FAILED|ERROR) (\S+?)(?: - .*)?$/.exec(l.trim());
    return m ? [m[1]!] : [];
  });
}

function cargoNames(lines: string[]): string[] {
  return lines.flatMap((l) => {
    const m = /^test (\S+) \.\.\. FAILED$/.exec(l.trim());
    return m ? [m[1]!] : [];
  });
}

function goNames(lines: string[]): string[] {
  return lines.flatMap((l) => {
    const m = /^\s*--- FAIL: (\S+) \(/.exec(l);
    return m ? [m[1]!] : [];
  });
}

/** mocha: the numbered titles after "N failing" ("1) add adds strings wrongly:", maybe over several lines). */
function mochaNames(lines: string[]): string[] {
  const start = lines.findIndex((l) => /^\s*\d+ failing\s*$/.test(l));
  if (start < 0) return [];
  const names: string[] = [];
  for (let i = start + 1; i < lines.length; i++) {
    const m = /^\s*\d+\) (.*)$/.exec(lines[i]!);
    if (!m) continue;
    const parts = [m[1]!.trim()];
    // mocha 4 and later put each suite on its own line; the test's title ends with ':'.
    for (let j = i + 1; !parts.at(-1)!.endsWith(':') && j < lines.length && j <= i + 5; j++) parts.push(lines[j]!.trim());
    if (parts.at(-1)!.endsWith(':')) names.push(parts.join(' ').slice(0, -1));
  }
  return names;
}

/** jest: "● add › adds strings wrongly" headings (not a suite that failed to run). */
function jestNames(lines: string[]): string[] {
  return lines.flatMap((l) => {
    const m = /^\s*● (.+)$/.exec(l);
    return m && !/^Test suite failed to run/.test(m[1]!) ? [m[1]!.trim()] : [];
  });
}

/** vitest: "FAIL  add.test.js > add > adds strings wrongly". */
function vitestNames(lines: string[]): string[] {
  return lines.flatMap((l) => {
    const m = /^\s*FAIL\s+\S+ > (.+)$/.exec(l);
    return m ? [m[1]!.trim()] : [];
  });
}

/** uvu: `FAIL  suite  "test name"` (the suite is left out for the default one). */
function uvuNames(lines: string[]): string[] {
  return lines.flatMap((l) => {
    const m = /^\s*FAIL\s+(?:(\S.*?)\s+)?"(.+)"\s*$/.exec(l);
    return m ? [m[1] ? `${m[1]} > ${m[2]}` : m[2]!] : [];
  });
}

/**
 * node-tap: its base reporter's "✖ test > assertion" lines, or in TAP the
 * failed subtests that hold the failed assertions (named by the test, not by
 * "should be equal").
 */
function tapNames(lines: string[]): string[] {
  const base = lines.flatMap((l) => {
    const m = /^✖ (.+)$/.exec(l);
    return m ? [m[1]!.replace(/ > [^>]*$/, '')] : [];
  });
  if (base.length > 0) return base;
  const entries: (Entry & { leaf: boolean })[] = [];
  for (const l of lines) {
    const m = /^(\s*)(not ok|ok) \d+(?: - (.*))?$/.exec(l);
    if (!m) continue;
    const indent = m[1]!.length;
    const name = (m[3] ?? '').replace(/\s#\s*(?:SKIP|TODO)\b.*$/i, '').replace(/\s#\s*time=\S+$/, '');
    const leaf = entries.length === 0 || entries.at(-1)!.indent <= indent;
    entries.push({ indent, name, ok: m[2] === 'ok' || TODO.test(m[3] ?? ''), leaf });
  }
  const names: string[] = [];
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    if (e.ok || e.leaf) continue;
    let failedLeafChild = false;
    let failedInnerChild = false;
    for (let j = i - 1; j >= 0 && entries[j]!.indent > e.indent; j--) {
      if (entries[j]!.ok) continue;
      if (entries[j]!.leaf) failedLeafChild = true;
      else failedInnerChild = true;
    }
    if (failedLeafChild && !failedInnerChild) names.push(e.name);
  }
  return names;
}

/** ctest: the list after "The following tests FAILED:" ("2 - adds_negative (Failed)"). */
function ctestNames(lines: string[]): string[] {
  const start = lines.findIndex((l) => /^The following tests FAILED:\s*$/.test(l));
  if (start < 0) return [];
  return lines.slice(start + 1).flatMap((l) => {
    const m = /^\s*\d+ - (.+?) \([^()]*\)\s*$/.exec(l);
    return m ? [m[1]!] : [];
  });
}

/** Automake and plain harnesses: "FAIL: test2". */
function makeNames(lines: string[]): string[] {
  return lines.flatMap((l) => {
    const m = /^(?:FAIL|ERROR|XPASS): (\S.*)$/.exec(l.trim());
    return m ? [m[1]!] : [];
  });
}

/** The failed tests' names, in order, without duplicates, capped; [] when the runner names none. */
export function parseFailedTestNames(output: string, runner?: TestCounts['runner']): string[] {
  const lines = outputLines(output);
  let raw: string[];
  switch (runner) {
    case 'pytest':
      raw = pytestNames(lines);
      break;
    case 'cargo':
      raw = cargoNames(lines);
      break;
    case 'go':
      raw = goNames(lines);
      break;
    case 'mocha':
      raw = mochaNames(lines);
      break;
    case 'jest':
      raw = jestNames(lines);
      break;
    case 'vitest':
      raw = vitestNames(lines);
      break;
    case 'uvu':
      raw = uvuNames(lines);
      break;
    case 'tap':
      raw = tapNames(lines);
      break;
    case 'ctest':
      raw = ctestNames(lines);
      break;
    case 'automake':
    case 'plain':
      raw = makeNames(lines);
      break;
    default: {
      // node's reporters (also behind npm test); the spec list when both appear.
      const spec = nodeSpec(lines);
      raw = spec.length > 0 ? spec : nodeTap(lines);
    }
  }
  const seen = new Set<string>();
  for (const r of raw) {
    const name = cleanTestName(r);
    if (name !== '' && !seen.has(name)) seen.add(name);
    if (seen.size >= MAX_FAILED_NAMES) break;
  }
  return [...seen];
}

export interface TestReport {
  counts: TestCounts | null;
  failedNames: string[];
  /** "12 passed, 1 failed: adds numbers", or '' when the runner printed no summary we know. */
  text: string;
}

/**
 * The card's line for a run whose counts could not be read: it still passed or
 * failed by its exit status; the line says so, after what the run printed last.
 */
export function uncountedSummary(last: string): string {
  const note = 'test counts not recognised';
  return (last ? `${last} (${note})` : note).slice(0, 240);
}

/** Counts and failed names from a test run's output, and the card's line. */
export function readTestReport(output: string): TestReport {
  const counts = parseTestCounts(output);
  const failedNames = counts && counts.failed > 0 ? parseFailedTestNames(output, counts.runner) : [];
  let text = counts ? formatTestCounts(counts) : '';
  if (failedNames.length > 0) {
    // Each shown name gets its share of the line, so "and N more" always fits.
    const shown = failedNames
      .slice(0, SHOWN_NAMES)
      .map((n) => (n.length > 50 ? `${n.slice(0, 49)}…` : n))
      .join(', ');
    const more = (counts?.failed ?? failedNames.length) - Math.min(SHOWN_NAMES, failedNames.length);
    text += `: ${shown}${more > 0 ? ` and ${more} more` : ''}`;
  }
  return { counts, failedNames, text: text.slice(0, 240) };
}

/**
 * A failed test run explained in a few lines: which tests failed, by name, and
 * the first assertion's message with its expected and actual values; the log's
 * readable end when the runner printed neither. Progress frames, spinners,
 * colours and package-manager noise are gone (log-lines replays the output).
 */
export function explainTestFailure(output: string, report: TestReport = readTestReport(output)): string {
  const parts: string[] = [];
  if (report.failedNames.length > 0) {
    const more = (report.counts?.failed ?? report.failedNames.length) - report.failedNames.length;
    parts.push(`Failing: ${report.failedNames.join('; ')}${more > 0 ? ` and ${more} more` : ''}`);
  }
  const assertion = firstAssertion(output.length > MAX_NAME_SCAN_CHARS ? output.slice(-MAX_NAME_SCAN_CHARS) : output);
  if (assertion) parts.push(`First assertion:\n${assertion}`);
  return parts.length > 0 ? parts.join('\n\n') : readableTail(output);
}
