// The test stage reads real runners' output, as the sandbox's terminal gives
// it: colours, progress repaints, npm's spinner. Each sample in
// test/fixtures/runner-output/ was printed by that runner version under a pty
// (see the README there), on a tiny suite where one test fails on purpose.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseTestCounts } from '../../../main/pipeline/agents/test-detect.js';
import { explainTestFailure, readTestReport, uncountedSummary } from '../../../main/pipeline/agents/test-failures.js';
import { readableTail, summaryLine } from '../../../main/pipeline/log-lines.js';

const DIR = path.join(import.meta.dirname, '../../fixtures/runner-output');
const sample = (name: string) => fs.readFileSync(path.join(DIR, name), 'utf8');

// [file, runner, passed, failed, skipped, failed test's name (or none)]
const COUNTED: [string, string, number, number, number, string?][] = [
  ['mocha-3.5.3-fail.txt', 'mocha', 2, 1, 1, 'add adds strings wrongly'],
  ['mocha-3.5.3-pass.txt', 'mocha', 2, 0, 0],
  ['npm-11-mocha-3.5.3-fail.txt', 'mocha', 2, 1, 1, 'add adds strings wrongly'],
  ['jest-30.5.2-fail.txt', 'jest', 2, 1, 1, 'add › adds strings wrongly'],
  ['vitest-4.1.12-fail.txt', 'vitest', 2, 1, 1, 'add > adds strings wrongly'],
  ['tap-21.8.0-fail.txt', 'tap', 2, 1, 1, 'adds strings wrongly'],
  ['tap-21.8.0-reporter-tap-fail.txt', 'tap', 2, 1, 1, 'adds strings wrongly'],
  ['node-20-test-spec-fail.txt', 'node', 2, 1, 1, 'adds strings wrongly'],
  ['node-20-test-tap-fail.txt', 'node', 2, 1, 1, 'adds strings wrongly'],
  ['uvu-0.5.6-fail.txt', 'uvu', 2, 1, 1, 'adds strings wrongly'],
  ['npm-11-uvu-0.5.6-fail.txt', 'uvu', 2, 1, 1, 'adds strings wrongly'],
  ['pytest-7.2.1-fail.txt', 'pytest', 2, 1, 1, 'test_calc.py::test_adds_strings_wrongly'],
  ['go-1.19-v-fail.txt', 'go', 1, 1, 1, 'TestAddNegatives'],
  ['ctest-3.25.1-fail.txt', 'ctest', 2, 1, 0, 'adds_negative'],
  ['make-counted-fail.txt', 'plain', 2, 1, 0, 'test2'],
];

describe('each runner, as it printed under a terminal', () => {
  it.each(COUNTED)('%s: %s counts and the failed test by name', (file, runner, passed, failed, skipped, name) => {
    const report = readTestReport(sample(file));
    expect(report.counts).toMatchObject({ runner, passed, failed, skipped, unit: 'tests' });
    expect(report.failedNames).toEqual(name ? [name] : []);
    expect(report.text).toBe(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}${name ? `: ${name}` : ''}`);
  });

  it('go test without -v: packages are counted and the failing test is still named', () => {
    expect(readTestReport(sample('go-1.19-fail.txt')).text).toBe('0 passed, 1 failed (packages): TestAddNegatives');
    expect(readTestReport(sample('go-1.19-pass.txt')).text).toBe('1 passed, 0 failed (packages)');
  });

  it('a make suite that prints no count is not counted; the card says so after its last line', () => {
    for (const file of ['make-uncounted-pass.txt', 'make-uncounted-fail.txt']) expect(parseTestCounts(sample(file))).toBeNull();
    expect(uncountedSummary(summaryLine(sample('make-uncounted-fail.txt')))).toBe('Files test2.out and test2.ans differ (test counts not recognised)');
    expect(uncountedSummary('')).toBe('test counts not recognised');
  });

  it("npm's spinner frame after the runner's output never becomes the card's line", () => {
    for (const file of ['npm-11-uvu-0.5.6-fail.txt', 'npm-11-mocha-3.5.3-fail.txt']) {
      expect(sample(file)).toContain('⠙');
      expect(summaryLine(sample(file))).not.toMatch(/[\u2800-\u28ff]/);
    }
    expect(summaryLine(sample('npm-11-uvu-0.5.6-fail.txt'))).toBe('Duration:  1.81ms');
  });
});

describe('summaries added up across runs', () => {
  it('an npm workspaces run: one node --test block per workspace', () => {
    const one = (p: number, f: number) => `ℹ tests ${p + f}\nℹ suites 0\nℹ pass ${p}\nℹ fail ${f}\nℹ cancelled 0\nℹ skipped 0\nℹ todo 0\nℹ duration_ms 50\n`;
    expect(parseTestCounts(`> a@1.0.0 test\n${one(3, 0)}\n> b@1.0.0 test\n${one(2, 1)}`)).toMatchObject({ runner: 'node', passed: 5, failed: 1 });
  });

  it('jest, mocha and uvu print one summary per run', () => {
    expect(parseTestCounts('Tests:       2 passed, 2 total\nTests:       1 failed, 3 passed, 4 total\n')).toMatchObject({ passed: 5, failed: 1 });
    expect(parseTestCounts('  2 passing (5ms)\n\n  3 passing (4ms)\n  1 failing\n')).toMatchObject({ runner: 'mocha', passed: 5, failed: 1 });
    expect(parseTestCounts('  Total:     3\n  Passed:    3\n  Skipped:   0\n\n  Total:     2\n  Passed:    1\n  Skipped:   1\n')).toMatchObject({ runner: 'uvu', passed: 4, failed: 1, skipped: 1 });
  });

  it("automake's make check summary and bare TAP", () => {
    expect(parseTestCounts('PASS: t1\nFAIL: t2\n# TOTAL: 3\n# PASS:  2\n# SKIP:  0\n# XFAIL: 0\n# FAIL:  1\n# XPASS: 0\n# ERROR: 0\n')).toMatchObject({ runner: 'automake', passed: 2, failed: 1 });
    expect(readTestReport('TAP version 13\nok 1 - one\nnot ok 2 - two\nok 3 - three # SKIP later\n1..3\n')).toMatchObject({ counts: { runner: 'tap', passed: 1, failed: 1, skipped: 1 } });
    expect(parseTestCounts('TAP version 13\n# tests 2\n# pass  2\n\n# ok\n')).toMatchObject({ passed: 2, failed: 0 });
  });
});

describe("explainTestFailure: a failed run's explanation from real runners' output", () => {
  // Each runner's real output (colours, progress frames, npm's spinner and trailer included).
  it.each([
    ['npm-11-mocha-3.5.3-fail.txt', 'Failing: add adds strings wrongly', ["AssertionError [ERR_ASSERTION]: '12' == 3"]],
    ['node-20-test-spec-fail.txt', 'Failing: adds strings wrongly', ['AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:', "'12' !== 3"]],
    ['jest-30.5.2-fail.txt', 'Failing: add › adds strings wrongly', ['expect(received).toBe(expected) // Object.is equality', 'Expected: 3', 'Received: "12"']],
    ['vitest-4.1.12-fail.txt', 'Failing: add > adds strings wrongly', ["AssertionError: expected '12' to be 3 // Object.is equality", '- Expected:', '3', '+ Received:', '"12"']],
    ['pytest-7.2.1-fail.txt', 'Failing: test_calc.py::test_adds_strings_wrongly', ["E       AssertionError: assert '12' == 3", "E        +  where '12' = add('1', '2')"]],
    ['npm-11-uvu-0.5.6-fail.txt', 'Failing: adds strings wrongly', ['Expected values to be strictly equal:  (is)', '++3   [number]  (Expected)', '--12  [string]  (Actual)']],
    ['go-1.19-fail.txt', 'Failing: TestAddNegatives', ['calc_test.go:13: Add(-1, -2) = -3, want -4']],
  ])('%s: the failing names, then the first assertion alone', (file, names, assertion) => {
    const text = explainTestFailure(sample(file));
    expect(text).toBe(`${names}\n\nFirst assertion:\n${assertion.join('\n')}`);
    // No escape, spinner frame, stack frame, code excerpt or npm line is left.
    expect(text).not.toMatch(/\x1b|[\u2800-\u28ff]|^\s*at |\d+ \||^npm /m);
  });

  it("a run that names no test and states no assertion explains itself with the log's readable end", () => {
    const text = explainTestFailure(sample('make-uncounted-fail.txt'));
    expect(text.split('\n').at(-1)).toBe('Files test2.out and test2.ans differ');
    expect(text).not.toMatch(/\x1b|make(?:\[\d+\])?: \*\*\*/);
  });
});

describe('readableTail: the end of a failed log, as read', () => {
  it('drops progress frames, npm noise and trailers, and runs of blank lines; keeps the last lines', () => {
    const raw = '⠋\x1b[1G⠙\x1b[1G\x1b[0Kcompiling 10%\rcompiling 100%\r\nnpm warn deprecated x@1\r\n\r\n\r\n\r\nboom: it broke\r\nnpm error Test failed.  See above for more details.\r\n';
    expect(readableTail(raw)).toBe('compiling 100%\n\nboom: it broke');
    expect(readableTail(Array.from({ length: 100 }, (_, i) => `line ${i}`).join('\n'), 3)).toBe('line 97\nline 98\nline 99');
  });
});
