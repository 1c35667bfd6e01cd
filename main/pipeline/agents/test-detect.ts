// The test stage: which command runs a repository's tests when the config does
// not say (npm, cargo, go, pytest, make), and how many tests passed or failed
// according to the runner's closing lines. Inputs come from the repository and
// the guest, so both are treated as untrusted text: capped, never executed here.

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
    `  if [ -f "$f" ] && [ ! -L "$f" ]; then printf '%s\\t' "$f"; head -c ${MAX_DETECTION_FILE_BYTES} -- "$f" | base64 -w0; echo; fi`,
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
  runner: 'cargo' | 'jest' | 'vitest' | 'node' | 'pytest' | 'mocha' | 'go' | 'plain';
  /** 'packages' when only `go test` package lines were printed. */
  unit: 'tests' | 'packages';
}

export const MAX_TEST_OUTPUT_CHARS = 4 * 1024 * 1024;

const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]/g;

/** Reads the counts from a test run's output (the last summary wins), or null when none is recognised. */
export function parseTestCounts(output: string): TestCounts | null {
  if (output.length > MAX_TEST_OUTPUT_CHARS) output = output.slice(-MAX_TEST_OUTPUT_CHARS);
  const lines = output.replace(ANSI, '').replace(/\r/g, '').split('\n');
  return cargo(lines) ?? jest(lines) ?? vitest(lines) ?? nodeTest(lines) ?? pytest(lines) ?? mocha(lines) ?? goTest(lines) ?? plain(lines);
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

function cargo(lines: string[]): TestCounts | null {
  let seen = false;
  const c: TestCounts = { passed: 0, failed: 0, skipped: 0, runner: 'cargo', unit: 'tests' };
  for (const l of lines) {
    const m = /^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored/.exec(l.trim());
    if (!m) continue;
    seen = true; // one line per test binary: add them up
    c.passed += num(m[1]);
    c.failed += num(m[2]);
    c.skipped += num(m[3]);
  }
  return seen ? c : null;
}

function jest(lines: string[]): TestCounts | null {
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = /^\s*Tests:\s+(.*\d+ total)\s*$/.exec(lines[i]!);
    if (!m) continue;
    const it = items(m[1]!, /,/);
    return { passed: it.get('passed') ?? 0, failed: it.get('failed') ?? 0, skipped: (it.get('skipped') ?? 0) + (it.get('todo') ?? 0), runner: 'jest', unit: 'tests' };
  }
  return null;
}

function vitest(lines: string[]): TestCounts | null {
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = /^\s*Tests\s+((?:\d+ \w+(?: \| )?)+)\s*\(\d+\)\s*$/.exec(lines[i]!);
    if (!m) continue;
    const it = items(m[1]!, /\|/);
    return { passed: it.get('passed') ?? 0, failed: it.get('failed') ?? 0, skipped: (it.get('skipped') ?? 0) + (it.get('todo') ?? 0), runner: 'vitest', unit: 'tests' };
  }
  return null;
}

function nodeTest(lines: string[]): TestCounts | null {
  const get = (word: string): number | undefined => {
    for (let i = lines.length - 1; i >= 0; i--) {
      const m = new RegExp(`^\\s*(?:#|ℹ)\\s+${word}\\s+(\\d+)\\s*$`).exec(lines[i]!);
      if (m) return num(m[1]);
    }
    return undefined;
  };
  const pass = get('pass');
  const fail = get('fail');
  if (pass === undefined || fail === undefined) return null;
  return { passed: pass, failed: fail, skipped: (get('skipped') ?? 0) + (get('todo') ?? 0), runner: 'node', unit: 'tests' };
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

function mocha(lines: string[]): TestCounts | null {
  let passing: number | undefined;
  let failing = 0;
  let pending = 0;
  for (const l of lines) {
    let m = /^\s*(\d+) passing \(/.exec(l);
    if (m) {
      passing = num(m[1]);
      failing = 0;
      pending = 0;
      continue;
    }
    m = /^\s*(\d+) failing\s*$/.exec(l);
    if (m && passing !== undefined) failing = num(m[1]);
    m = /^\s*(\d+) pending\s*$/.exec(l);
    if (m && passing !== undefined) pending = num(m[1]);
  }
  return passing === undefined ? null : { passed: passing, failed: failing, skipped: pending, runner: 'mocha', unit: 'tests' };
}

function goTest(lines: string[]): TestCounts | null {
  const c: TestCounts = { passed: 0, failed: 0, skipped: 0, runner: 'go', unit: 'tests' };
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
  const p: TestCounts = { passed: 0, failed: 0, skipped: 0, runner: 'go', unit: 'packages' };
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

function plain(lines: string[]): TestCounts | null {
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = /^\s*(?:[A-Za-z]+:\s*)?(\d+) passed, (\d+) failed(?:, (\d+) skipped)?\s*$/.exec(lines[i]!);
    if (m) return { passed: num(m[1]), failed: num(m[2]), skipped: num(m[3]), runner: 'plain', unit: 'tests' };
  }
  return null;
}
