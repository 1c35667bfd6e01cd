// The test stage: which command runs a repository's tests when the config does
// not say (npm, cargo, go, pytest, make), and how many tests passed or failed
// according to the runner's closing lines. Inputs come from the repository and
// the guest, so both are treated as untrusted text: capped, never executed here.
import { logLines } from '../log-lines.js';

export interface DetectedTestCommand {
  command: string;
  runner: 'npm' | 'cargo' | 'go' | 'pytest' | 'make';
  /** The program that must be installed in the sandbox to run it. */
  tool: 'npm' | 'cargo' | 'go' | 'pytest' | 'make';
  /** Which file decided it, for the stage log ("package.json has a test script"). */
  reason: string;
}

/** Files the detector looks at, relative to the repository root. */
export const TEST_DETECTION_FILES = [
  'package.json',
  'Cargo.toml',
  'go.mod',
  'pytest.ini',
  'pyproject.toml',
  'setup.cfg',
  'tox.ini',
  'conftest.py',
  'Makefile',
  'makefile',
  'GNUmakefile',
  // A C library's tests often live in their own folder (uthash: `cd tests && make`).
  'tests/Makefile',
  'test/Makefile',
] as const;

export const MAX_DETECTION_FILE_BYTES = 64 * 1024;

// `npm init` writes this placeholder; it is not a test suite.
const NPM_PLACEHOLDER = /no test specified/i;

export type RepoFiles = ReadonlyMap<string, string>;

export function detectTestCommand(files: RepoFiles): DetectedTestCommand | null {
  const pkg = files.get('package.json');
  if (pkg !== undefined) {
    const test = npmScript(pkg, 'test');
    if (test && !NPM_PLACEHOLDER.test(test)) return { command: 'npm test', runner: 'npm', tool: 'npm', reason: 'package.json has a test script' };
  }
  if (files.has('Cargo.toml')) return { command: 'cargo test', runner: 'cargo', tool: 'cargo', reason: 'Cargo.toml is present' };
  if (files.has('go.mod')) return { command: 'go test ./...', runner: 'go', tool: 'go', reason: 'go.mod is present' };
  const pytestReason = pytestMarker(files);
  if (pytestReason) return { command: 'python3 -m pytest', runner: 'pytest', tool: 'pytest', reason: pytestReason };
  for (const name of ['GNUmakefile', 'makefile', 'Makefile']) {
    const text = files.get(name);
    if (text !== undefined && /^test\s*:(?!=)/m.test(text)) return { command: 'make test', runner: 'make', tool: 'make', reason: `${name} has a test target` };
  }
  for (const dir of ['tests', 'test']) {
    if (files.has(`${dir}/Makefile`)) return { command: `make -C ${dir}`, runner: 'make', tool: 'make', reason: `${dir}/Makefile is present` };
  }
  return null;
}

/** A package.json script's text, or null when absent, empty or the file is not JSON. */
export function npmScript(text: string, name: string): string | null {
  try {
    const pkg = JSON.parse(text) as { scripts?: Record<string, unknown> } | null;
    const scripts = pkg?.scripts;
    const test = scripts && typeof scripts === 'object' && Object.prototype.hasOwnProperty.call(scripts, name) ? scripts[name] : undefined;
    return typeof test === 'string' && test.trim() !== '' ? test : null;
  } catch {
    // A package.json that is not JSON has no test script to detect; another probe may still find one.
    return null;
  }
}

function pytestMarker(files: RepoFiles): string | null {
  if (files.has('pytest.ini')) return 'pytest.ini is present';
  if (files.has('conftest.py')) return 'conftest.py is present';
  if (/^\[tool\.pytest(\.ini_options)?\]/m.test(files.get('pyproject.toml') ?? '')) return 'pyproject.toml has [tool.pytest.ini_options]';
  if (/^\[tool:pytest\]/m.test(files.get('setup.cfg') ?? '')) return 'setup.cfg has [tool:pytest]';
  if (/^\[pytest\]/m.test(files.get('tox.ini') ?? '')) return 'tox.ini has [pytest]';
  return null;
}

/**
 * A guest script that prints each detection file that exists as
 * `name<TAB>base64(first 64 KiB)`, one per line, for parseDetectionProbe.
 */
export function detectionProbeScript(): string {
  return [
    `for f in ${TEST_DETECTION_FILES.join(' ')}; do`,
    `  if [ -f "$f" ] && [ ! -L "$f" ] && [ ! -L "\${f%/*}" ]; then printf '%s\\t' "$f"; head -c ${MAX_DETECTION_FILE_BYTES} -- "$f" | base64 -w0; echo; fi`,
    'done',
  ].join('\n');
}

export function parseDetectionProbe(stdout: string): Map<string, string> {
  const known = new Set<string>(TEST_DETECTION_FILES);
  const files = new Map<string, string>();
  for (const line of stdout.split('\n')) {
    const tab = line.indexOf('\t');
    if (tab <= 0) continue;
    const name = line.slice(0, tab);
    if (!known.has(name)) continue;
    const b64 = line.slice(tab + 1).trim();
    if (!/^[A-Za-z0-9+/=]*$/.test(b64) || b64.length > (MAX_DETECTION_FILE_BYTES * 4) / 3 + 8) continue;
    files.set(name, Buffer.from(b64, 'base64').toString('utf8'));
  }
  return files;
}

export interface TestCounts {
  passed: number;
  failed: number;
  skipped: number;
  /** Which runner's summary was read. */
  runner: TestRunnerName;
  /** 'packages' when only `go test` package lines were printed. */
  unit: 'tests' | 'packages';
}

export type TestRunnerName = 'cargo' | 'jest' | 'vitest' | 'node' | 'tap' | 'uvu' | 'pytest' | 'mocha' | 'go' | 'ctest' | 'automake' | 'plain';

export const MAX_TEST_OUTPUT_CHARS = 4 * 1024 * 1024;

/**
 * Reads the counts from a test run's output, or null when no summary is
 * recognised. The output is replayed first (log-lines), so progress frames and
 * spinners are gone; a runner that printed several summaries (one per
 * workspace or test binary) has them added up.
 */
export function parseTestCounts(output: string): TestCounts | null {
  if (output.length > MAX_TEST_OUTPUT_CHARS) output = output.slice(-MAX_TEST_OUTPUT_CHARS);
  const lines = logLines(output);
  return (
    cargo(lines) ??
    jest(lines) ??
    vitest(lines) ??
    tapSummary(lines) ??
    nodeTest(lines) ??
    uvu(lines) ??
    pytest(lines) ??
    mocha(lines) ??
    ctest(lines) ??
    goTest(lines) ??
    automake(lines) ??
    plain(lines) ??
    tapLines(lines)
  );
}

/** One line for the board: "12 passed, 1 failed, 2 skipped". */
export function formatTestCounts(c: TestCounts): string {
  const parts = [`${c.passed} passed`, `${c.failed} failed`];
  if (c.skipped) parts.push(`${c.skipped} skipped`);
  const text = parts.join(', ');
  return c.unit === 'packages' ? `${text} (packages)` : text;
}

function num(s: string | undefined): number {
  const n = Number.parseInt(s ?? '0', 10);
  return Number.isFinite(n) ? Math.min(n, 1e9) : 0;
}

/** "3 passed, 1 failed" style item lists: returns word → count. */
function items(text: string, sep: RegExp): Map<string, number> {
  const out = new Map<string, number>();
  for (const part of text.split(sep)) {
    const m = /^\s*(\d+)\s+([a-z]+)/i.exec(part);
    if (m) out.set(m[2]!.toLowerCase(), (out.get(m[2]!.toLowerCase()) ?? 0) + num(m[1]));
  }
  return out;
}

function counts(runner: TestRunnerName): TestCounts {
  return { passed: 0, failed: 0, skipped: 0, runner, unit: 'tests' };
}

/** Adds up every line one runner prints once per run (a workspace, a test binary). */
function summed(lines: string[], runner: TestRunnerName, read: (line: string) => [number, number, number] | null): TestCounts | null {
  let seen = false;
  const c = counts(runner);
  for (const l of lines) {
    const r = read(l);
    if (!r) continue;
    seen = true;
    c.passed += r[0];
    c.failed += r[1];
    c.skipped += r[2];
  }
  return seen ? c : null;
}

function cargo(lines: string[]): TestCounts | null {
  return summed(lines, 'cargo', (l) => {
    const m = /^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored/.exec(l.trim());
    return m ? [num(m[1]), num(m[2]), num(m[3])] : null;
  });
}

function jest(lines: string[]): TestCounts | null {
  return summed(lines, 'jest', (l) => {
    const m = /^\s*Tests:\s+(.*\d+ total)\s*$/.exec(l);
    if (!m) return null;
    const it = items(m[1]!, /,/);
    return [it.get('passed') ?? 0, it.get('failed') ?? 0, (it.get('skipped') ?? 0) + (it.get('todo') ?? 0)];
  });
}

function vitest(lines: string[]): TestCounts | null {
  return summed(lines, 'vitest', (l) => {
    const m = /^\s*Tests\s+((?:\d+ \w+(?: \| )?)+)\s*\(\d+\)\s*$/.exec(l);
    if (!m) return null;
    const it = items(m[1]!, /\|/);
    return [it.get('passed') ?? 0, it.get('failed') ?? 0, (it.get('skipped') ?? 0) + (it.get('todo') ?? 0)];
  });
}

/** node-tap's closing "# { total: 4, pass: 2, fail: 1, skip: 1 }" (v15 and later), or "# failed 1 of 4 tests" (older). */
function tapSummary(lines: string[]): TestCounts | null {
  for (let i = lines.length - 1; i >= 0; i--) {
    const l = lines[i]!.trim();
    const m = /^# \{ total: \d+(?:, \w+: \d+)* \}$/.exec(l);
    if (m) {
      const it = new Map([...l.matchAll(/(\w+): (\d+)/g)].map((x) => [x[1]!, num(x[2])]));
      return { ...counts('tap'), passed: it.get('pass') ?? 0, failed: it.get('fail') ?? 0, skipped: (it.get('skip') ?? 0) + (it.get('todo') ?? 0) };
    }
    const old = /^# failed (\d+) of (\d+) tests?$/.exec(l);
    if (old) return { ...counts('tap'), passed: num(old[2]) - num(old[1]), failed: num(old[1]) };
  }
  return null;
}

/** node:test's TAP and spec reporters ("# pass 2", "ℹ pass 2"), and tape's TAP; one block per run. */
function nodeTest(lines: string[]): TestCounts | null {
  let seen = false;
  const c = counts('node');
  let block: Map<string, number> | null = null;
  const flush = () => {
    if (block?.has('pass')) {
      seen = true;
      c.passed += block.get('pass')!;
      c.failed += block.get('fail') ?? 0;
      c.skipped += (block.get('skipped') ?? 0) + (block.get('skip') ?? 0) + (block.get('todo') ?? 0);
    }
    block = null;
  };
  for (const l of lines) {
    const m = /^\s*(?:#|ℹ)\s+(tests|suites|pass|fail|cancelled|skipped|skip|todo|duration_ms)\s+([\d.]+)\s*$/.exec(l);
    if (!m) {
      if (l.trim() !== '') flush();
      continue;
    }
    block ??= new Map();
    // A word seen again starts the next run's block.
    if (block.has(m[1]!)) {
      flush();
      block = new Map();
    }
    block.set(m[1]!, num(m[2]));
  }
  flush();
  return seen ? c : null;
}

/** uvu: "Total: 3", "Passed: 2", "Skipped: 1" (Total leaves the skipped out). */
function uvu(lines: string[]): TestCounts | null {
  let seen = false;
  const c = counts('uvu');
  for (let i = 0; i < lines.length; i++) {
    const total = /^\s*Total:\s+(\d+)\s*$/.exec(lines[i]!);
    const passed = total && /^\s*Passed:\s+(\d+)\s*$/.exec(lines[i + 1] ?? '');
    if (!total || !passed) continue;
    const skipped = /^\s*Skipped:\s+(\d+)\s*$/.exec(lines[i + 2] ?? '');
    seen = true;
    c.passed += num(passed[1]);
    c.failed += Math.max(0, num(total[1]) - num(passed[1]));
    c.skipped += num(skipped?.[1]);
  }
  return seen ? c : null;
}

function pytest(lines: string[]): TestCounts | null {
  for (let i = lines.length - 1; i >= 0; i--) {
    const l = lines[i]!.trim().replace(/^=+\s*|\s*=+$/g, '');
    const m = /^((?:\d+ [a-z]+(?:, )?)+) in [\d.]+s(?: \([\d:.]+\))?$/.exec(l);
    if (!m) continue;
    const it = items(m[1]!, /,/);
    if (!['passed', 'failed', 'error', 'errors', 'skipped', 'xfailed', 'xpassed', 'deselected'].some((k) => it.has(k))) continue;
    return {
      passed: (it.get('passed') ?? 0) + (it.get('xpassed') ?? 0),
      failed: (it.get('failed') ?? 0) + (it.get('error') ?? 0) + (it.get('errors') ?? 0),
      skipped: (it.get('skipped') ?? 0) + (it.get('xfailed') ?? 0),
      runner: 'pytest',
      unit: 'tests',
    };
  }
  return null;
}

/** mocha: "2 passing (12ms)", then "1 pending" and "1 failing" when there are any; one block per run. */
function mocha(lines: string[]): TestCounts | null {
  let seen = false;
  const c = counts('mocha');
  let inBlock = false;
  for (const l of lines) {
    let m = /^\s*(\d+) passing \(/.exec(l);
    if (m) {
      seen = true;
      inBlock = true;
      c.passed += num(m[1]);
      continue;
    }
    if (!inBlock) continue;
    m = /^\s*(\d+) (failing|pending)\s*$/.exec(l);
    if (m && m[2] === 'failing') c.failed += num(m[1]);
    else if (m) c.skipped += num(m[1]);
    else if (l.trim() !== '') inBlock = false;
  }
  return seen ? c : null;
}

/** ctest: "67% tests passed, 1 tests failed out of 3". */
function ctest(lines: string[]): TestCounts | null {
  return summed(lines, 'ctest', (l) => {
    const m = /^\s*\d+% tests passed, (\d+) tests? failed out of (\d+)\s*$/.exec(l);
    return m ? [num(m[2]) - num(m[1]), num(m[1]), 0] : null;
  });
}

function goTest(lines: string[]): TestCounts | null {
  const c = counts('go');
  let tests = 0;
  for (const l of lines) {
    const m = /^\s*--- (PASS|FAIL|SKIP): /.exec(l);
    if (!m) continue;
    tests++;
    if (m[1] === 'PASS') c.passed++;
    else if (m[1] === 'FAIL') c.failed++;
    else c.skipped++;
  }
  if (tests > 0 && c.passed > 0) return c;
  // Without -v only failures print per test; count packages instead.
  const p: TestCounts = { ...counts('go'), unit: 'packages' };
  let pkgs = 0;
  for (const l of lines) {
    if (/^ok\s+\S+\s+(?:[\d.]+s|\(cached\))/.test(l)) {
      p.passed++;
      pkgs++;
    } else if (/^FAIL\s+\S+\s+(?:[\d.]+s|\[build failed\]|\[setup failed\])/.test(l)) {
      p.failed++;
      pkgs++;
    } else if (/^\?\s+\S+\s+\[no test files\]/.test(l)) {
      p.skipped++;
      pkgs++;
    }
  }
  if (pkgs > 0) return p;
  return tests > 0 ? c : null;
}

/** Automake's `make check`: "# TOTAL: 3", "# PASS: 2", "# SKIP: 0", "# XFAIL: 0", "# FAIL: 1", "# XPASS: 0", "# ERROR: 0". */
function automake(lines: string[]): TestCounts | null {
  const at = lines.findLastIndex((l) => /^# TOTAL:\s+\d+\s*$/.test(l));
  if (at < 0) return null;
  const it = new Map<string, number>();
  for (const l of lines.slice(at + 1, at + 8)) {
    const m = /^# (PASS|SKIP|XFAIL|FAIL|XPASS|ERROR):\s+(\d+)\s*$/.exec(l);
    if (m) it.set(m[1]!, num(m[2]));
  }
  if (!it.has('PASS')) return null;
  const get = (k: string) => it.get(k) ?? 0;
  return { ...counts('automake'), passed: get('PASS') + get('XFAIL'), failed: get('FAIL') + get('XPASS') + get('ERROR'), skipped: get('SKIP') };
}

function plain(lines: string[]): TestCounts | null {
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = /^\s*(?:[A-Za-z]+:\s*)?(\d+) passed, (\d+) failed(?:, (\d+) skipped)?\s*$/.exec(lines[i]!);
    if (m) return { passed: num(m[1]), failed: num(m[2]), skipped: num(m[3]), runner: 'plain', unit: 'tests' };
  }
  return null;
}

/** TAP with no closing counts (tape and friends print none on some paths): the top-level ok / not ok lines. */
function tapLines(lines: string[]): TestCounts | null {
  if (!lines.some((l) => /^TAP version \d+\s*$/.test(l))) return null;
  const c = counts('tap');
  let seen = false;
  for (const l of lines) {
    const m = /^(not ok|ok) \d+\b(.*)$/.exec(l);
    if (!m) continue;
    seen = true;
    if (/#\s*(?:SKIP|TODO)\b/i.test(m[2]!)) c.skipped++;
    else if (m[1] === 'ok') c.passed++;
    else c.failed++;
  }
  return seen ? c : null;
}
