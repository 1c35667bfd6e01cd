// Test counts and failed test names from the real output of `node --test`
// (run here on a small suite, both reporters), and from output a hostile
// sandbox prints to dress up its names.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_FAILED_NAMES, MAX_NAME_CHARS, parseFailedTestNames, readTestReport } from '../../../main/pipeline/agents/test-failures.js';

const SUITE = `
const { test, describe, it } = require('node:test');
const assert = require('node:assert');
test('adds numbers', () => assert.strictEqual(1 + 1, 3));
test('subtracts', () => assert.strictEqual(2 - 1, 1));
describe('parser', () => {
  it('reads nested input', () => assert.ok(false));
  it('reads flat input', () => {});
});
test('later', { skip: true }, () => {});
test('not yet', { todo: true }, () => assert.ok(false));
`;

let dir: string;
/** The real runner's output (it exits 1: two tests fail). */
function nodeTest(reporter: 'tap' | 'spec'): string {
  try {
    execFileSync(process.execPath, ['--test', `--test-reporter=${reporter}`], { cwd: dir, encoding: 'utf8', stdio: 'pipe' });
  } catch (err) {
    const e = err as { stdout: string; status: number };
    expect(e.status).toBe(1);
    return e.stdout;
  }
  throw new Error('the suite was expected to fail');
}

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'node-test-'));
  fs.writeFileSync(path.join(dir, 'suite.test.js'), SUITE);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('node --test output, as the runner prints it', () => {
  it('TAP: counts, and the failed leaves by name (not their suite, not a todo)', () => {
    const out = nodeTest('tap');
    expect(out).toContain('not ok 1 - adds numbers');
    const report = readTestReport(out);
    expect(report.counts).toMatchObject({ passed: 2, failed: 2, runner: 'node' });
    expect(report.failedNames).toEqual(['adds numbers', 'reads nested input']);
    expect(report.text).toMatch(/^2 passed, 2 failed, \d+ skipped: adds numbers, reads nested input$/);
  });

  it('spec, as under a terminal with colours and CRLF: the same names', () => {
    const out = nodeTest('spec');
    const terminal = out.replace(/\n/g, '\r\n').replace(/✖/g, '\x1b[31m✖\x1b[39m');
    expect(readTestReport(terminal).failedNames).toEqual(['adds numbers', 'reads nested input']);
    // Without the closing "failing tests:" list (a cut tail) the tree still gives the leaves.
    const cut = out.slice(0, out.indexOf('✖ failing tests:'));
    expect(parseFailedTestNames(cut, 'node')).toEqual(['adds numbers', 'reads nested input']);
  });

  it('a passing run names nobody', () => {
    expect(readTestReport('# tests 3\n# pass 3\n# fail 0\n').text).toBe('3 passed, 0 failed');
  });
});

describe('other runners name their failures', () => {
  it('pytest, cargo and go', () => {
    expect(readTestReport('FAILED tests/test_math.py::test_add - assert 2 == 3\n===== 1 failed, 4 passed in 0.12s =====\n').text).toBe(
      '4 passed, 1 failed: tests/test_math.py::test_add',
    );
    expect(readTestReport('test math::adds ... FAILED\ntest math::subs ... ok\ntest result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured\n').text).toBe(
      '1 passed, 1 failed: math::adds',
    );
    expect(readTestReport('--- PASS: TestSub (0.00s)\n--- FAIL: TestAdd (0.00s)\nFAIL\n').text).toBe('1 passed, 1 failed: TestAdd');
  });
});

describe('hostile output', () => {
  it('escape sequences and control characters never reach a name', () => {
    const out = 'not ok 1 - \x1b]0;pwned\x07evil\x1b[2J\u202etxt.exe\x00\x08 name\n# pass 0\n# fail 1\n';
    const [name] = readTestReport(out).failedNames;
    // As a terminal shows it: the backspace steps back over the "e".
    expect(name).toBe('eviltxt.ex name');
    expect(name).not.toMatch(/[\x00-\x1f\x7f\u202e]/);
  });

  it('names are cut short and their number capped; the line says how many more failed', () => {
    const lines = Array.from({ length: 500 }, (_, i) => `not ok ${i + 1} - ${i} ${'x'.repeat(1000)}`);
    const report = readTestReport(`${lines.join('\n')}\n# pass 0\n# fail 500\n`);
    expect(report.failedNames.length).toBe(MAX_FAILED_NAMES);
    expect(Math.max(...report.failedNames.map((n) => n.length))).toBeLessThanOrEqual(MAX_NAME_CHARS);
    expect(report.text.length).toBeLessThanOrEqual(240);
    expect(report.text).toMatch(/^0 passed, 500 failed: 0 x+…, 1 x+…, 2 x+… and 497 more$/);
  });

  it('a flood of output is read from its end, within a bound', () => {
    const flood = 'not ok 1 - early failure\n' + 'y'.repeat(3 * 1024 * 1024) + '\nnot ok 2 - late failure\n# pass 0\n# fail 2\n';
    const started = Date.now();
    expect(parseFailedTestNames(flood, 'node')).toEqual(['late failure']);
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
