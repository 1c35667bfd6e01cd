import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  detectionProbeScript,
  detectTestCommand,
  formatTestCounts,
  parseDetectionProbe,
  parseTestCounts,
} from '../../../main/pipeline/agents/test-detect.js';

const files = (o: Record<string, string>) => new Map(Object.entries(o));

describe('detectTestCommand', () => {
  it('picks npm test when package.json has a real test script', () => {
    expect(detectTestCommand(files({ 'package.json': '{"scripts":{"test":"vitest run"}}' }))).toMatchObject({ command: 'npm test', runner: 'npm' });
    expect(detectTestCommand(files({ 'package.json': '{"scripts":{"test":"echo \\"Error: no test specified\\" && exit 1"}}' }))).toBeNull();
    expect(detectTestCommand(files({ 'package.json': '{not json' }))).toBeNull();
    expect(detectTestCommand(files({ 'package.json': '{"scripts":{"build":"tsc"}}', Makefile: 'test:\n\tnode t.js\n' }))).toMatchObject({ command: 'make test' });
  });

  it('knows cargo, go, pytest markers and make', () => {
    expect(detectTestCommand(files({ 'Cargo.toml': '[package]' }))?.command).toBe('cargo test');
    expect(detectTestCommand(files({ 'go.mod': 'module x' }))?.command).toBe('go test ./...');
    expect(detectTestCommand(files({ 'pyproject.toml': '[project]\nname="x"\n\n[tool.pytest.ini_options]\naddopts="-q"' }))).toMatchObject({ command: 'python3 -m pytest', runner: 'pytest' });
    expect(detectTestCommand(files({ 'pyproject.toml': '[project]\nname="x"' }))).toBeNull();
    expect(detectTestCommand(files({ 'setup.cfg': '[tool:pytest]\n' }))?.runner).toBe('pytest');
    expect(detectTestCommand(files({ 'tox.ini': '[pytest]\n' }))?.runner).toBe('pytest');
    expect(detectTestCommand(files({ 'conftest.py': '' }))?.runner).toBe('pytest');
    expect(detectTestCommand(files({ Makefile: 'all:\n\tcc x.c\ntest: all\n\t./a.out\n' }))?.command).toBe('make test');
    expect(detectTestCommand(files({ Makefile: 'TEST := 1\ntest:= x\n' }))).toBeNull();
    expect(detectTestCommand(files({}))).toBeNull();
  });

  it("a C library's tests in tests/Makefile (uthash's shape): make -C tests, unless the root Makefile has a test target", () => {
    const meta = JSON.stringify({ name: 'uthash', version: '2.3.0', description: 'hash tables for C' });
    expect(detectTestCommand(files({ 'package.json': meta, 'tests/Makefile': 'all:\n\t./do_tests\n' }))).toMatchObject({ command: 'make -C tests', tool: 'make', reason: 'tests/Makefile is present' });
    expect(detectTestCommand(files({ Makefile: 'test:\n\t./t\n', 'tests/Makefile': 'all:\n' }))?.command).toBe('make test');
    expect(detectTestCommand(files({ 'test/Makefile': 'all:\n' }))?.command).toBe('make -C test');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'detect-'));
    try {
      fs.mkdirSync(path.join(dir, 'tests'));
      fs.writeFileSync(path.join(dir, 'tests', 'Makefile'), 'all:\n\techo hi\n');
      const out = execFileSync('bash', ['-c', detectionProbeScript()], { cwd: dir, encoding: 'utf8' });
      expect([...parseDetectionProbe(out).keys()]).toEqual(['tests/Makefile']);
      // A tests folder that is a link elsewhere is not read.
      fs.renameSync(path.join(dir, 'tests'), path.join(dir, 'elsewhere'));
      fs.symlinkSync(path.join(dir, 'elsewhere'), path.join(dir, 'tests'));
      expect([...parseDetectionProbe(execFileSync('bash', ['-c', detectionProbeScript()], { cwd: dir, encoding: 'utf8' })).keys()]).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads a repository through the probe script and its parser (real bash)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'detect-'));
    try {
      fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ scripts: { test: 'node --test' } }));
      fs.writeFileSync(path.join(dir, 'Makefile'), 'test:\n\techo hi\n');
      fs.symlinkSync('/etc/passwd', path.join(dir, 'go.mod'));
      const out = execFileSync('bash', ['-c', detectionProbeScript()], { cwd: dir, encoding: 'utf8' });
      const probed = parseDetectionProbe(`${out}evil.txt\taGVsbG8=\n`);
      expect([...probed.keys()].sort()).toEqual(['Makefile', 'package.json']);
      expect(detectTestCommand(probed)?.command).toBe('npm test');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('parseTestCounts', () => {
  it('jest', () => {
    const out = 'PASS a.test.js\nFAIL b.test.js\nTest Suites: 1 failed, 1 passed, 2 total\nTests:       1 failed, 1 skipped, 5 passed, 7 total\nTime: 1s\n';
    expect(parseTestCounts(out)).toEqual({ passed: 5, failed: 1, skipped: 1, runner: 'jest', unit: 'tests' });
  });
  it('vitest, with colours', () => {
    const out = ' \x1b[2m Test Files \x1b[22m \x1b[1m\x1b[31m1 failed\x1b[39m\x1b[22m\x1b[2m | \x1b[22m\x1b[1m\x1b[32m2 passed\x1b[39m\x1b[22m\x1b[90m (3)\x1b[39m\n\x1b[2m      Tests \x1b[22m \x1b[1m\x1b[31m2 failed\x1b[39m\x1b[22m\x1b[2m | \x1b[22m\x1b[1m\x1b[32m10 passed\x1b[39m\x1b[22m\x1b[2m | \x1b[22m\x1b[33m1 skipped\x1b[39m\x1b[90m (13)\x1b[39m\n';
    expect(parseTestCounts(out)).toEqual({ passed: 10, failed: 2, skipped: 1, runner: 'vitest', unit: 'tests' });
  });
  it('pytest, verbose and quiet', () => {
    expect(parseTestCounts('x.py ..F\n===== 1 failed, 2 passed, 1 skipped, 1 xfailed in 0.12s =====\n')).toEqual({ passed: 2, failed: 1, skipped: 2, runner: 'pytest', unit: 'tests' });
    expect(parseTestCounts('...\n3 passed in 0.01s\n')).toMatchObject({ passed: 3, failed: 0, runner: 'pytest' });
    expect(parseTestCounts('E\n1 error in 0.05s\n')).toMatchObject({ passed: 0, failed: 1, runner: 'pytest' });
  });
  it('cargo adds up every test binary', () => {
    const out = 'running 2 tests\ntest result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\nrunning 1 test\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out\n';
    expect(parseTestCounts(out)).toEqual({ passed: 2, failed: 1, skipped: 1, runner: 'cargo', unit: 'tests' });
  });
  it('go: verbose tests, or packages without -v', () => {
    expect(parseTestCounts('=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n--- FAIL: TestB (0.00s)\n    --- SKIP: TestB/sub (0.00s)\nFAIL\nFAIL\tx\t0.01s\n')).toEqual({ passed: 1, failed: 1, skipped: 1, runner: 'go', unit: 'tests' });
    const out = 'ok  \texample.com/a\t0.002s\n--- FAIL: TestX (0.00s)\nFAIL\texample.com/b\t0.003s\n?   \texample.com/c\t[no test files]\nok  \texample.com/d\t(cached)\n';
    const c = parseTestCounts(out)!;
    expect(c).toEqual({ passed: 2, failed: 1, skipped: 1, runner: 'go', unit: 'packages' });
    expect(formatTestCounts(c)).toBe('2 passed, 1 failed, 1 skipped (packages)');
  });
  it('node --test, TAP and spec reporters', () => {
    expect(parseTestCounts('# tests 4\n# suites 0\n# pass 3\n# fail 1\n# cancelled 0\n# skipped 0\n# todo 0\n')).toEqual({ passed: 3, failed: 1, skipped: 0, runner: 'node', unit: 'tests' });
    expect(parseTestCounts('ℹ tests 2\nℹ pass 2\nℹ fail 0\nℹ skipped 1\n')).toEqual({ passed: 2, failed: 0, skipped: 1, runner: 'node', unit: 'tests' });
  });
  it('mocha', () => {
    expect(parseTestCounts('  4 passing (12ms)\n  1 pending\n  2 failing\n\n  1) x:\n')).toEqual({ passed: 4, failed: 2, skipped: 1, runner: 'mocha', unit: 'tests' });
  });
  it('the plain closing line', () => {
    expect(parseTestCounts('running\nsummary: 7 passed, 0 failed, 2 skipped\n')).toEqual({ passed: 7, failed: 0, skipped: 2, runner: 'plain', unit: 'tests' });
    expect(parseTestCounts('3 passed, 1 failed\n')).toMatchObject({ passed: 3, failed: 1, runner: 'plain' });
  });
  it('returns null when nothing looks like a summary', () => {
    expect(parseTestCounts('make: *** No rule to make target\n')).toBeNull();
    expect(parseTestCounts('')).toBeNull();
  });
});
