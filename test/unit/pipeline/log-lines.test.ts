// What a card's line is chosen from: the log as the terminal left it. A user
// whose project's tests run behind npm sees the runner's own last line, never
// a spinner frame, a repainted progress block or npm's warnings.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { firstCauseLine, logLines, logText, meaningfulLines, summaryLine } from '../../../main/pipeline/log-lines.js';

const sample = (name: string) => fs.readFileSync(path.join(import.meta.dirname, '../../fixtures/runner-output', name), 'utf8');

describe('logLines: the output as the terminal left it', () => {
  it("npm's braille spinner, drawn at column 1 and erased, leaves nothing", () => {
    expect(logLines('⠋\x1b[1G⠙\x1b[1G⠹\x1b[1G\x1b[0K> x@1.0.0 test\r\n')).toEqual(['> x@1.0.0 test', '']);
    // Already stripped of escapes elsewhere: the frames still go.
    expect(logLines('⠙⠹⠸\nok')).toEqual(['', 'ok']);
  });

  it('a CR-overwritten progress line keeps only what was written last; a |/-\\ spinner goes', () => {
    expect(logLines('collecting ... \rcollected 4 items   \r\n')).toEqual(['collected 4 items', '']);
    expect(logLines('building |\rbuilding /\rbuilding done\n')).toEqual(['building done', '']);
    expect(logLines('|\r/\r-\r\\\r\nnext\n')).toEqual(['', 'next', '']);
  });

  it('a progress block repainted by moving the cursor up is shown once, as last drawn', () => {
    const frame = (n: number) => `RUNS a.test.js\r\nAsserts: ${n} pass\r\n`;
    const out = `${frame(0)}\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K\x1b[G${frame(1)}\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K\x1b[Gdone\r\n`;
    expect(logLines(out).filter(Boolean)).toEqual(['done']);
    // node-tap 21's real output: its repainted "Asserts:" block appears in the end as it was left.
    const tap = logLines(sample('tap-21.8.0-fail.txt')).filter((l) => l.startsWith('Asserts:'));
    expect(tap.length).toBeLessThanOrEqual(3);
    expect(tap.at(-1)).toMatch(/^Asserts:\s+2 pass\s+1 fail\s+1 skip/);
  });

  it("jest's RUNS lines, drawn and erased while it works, do not stay", () => {
    const lines = logLines(sample('jest-30.5.2-fail.txt'));
    expect(lines.some((l) => l.includes('RUNS'))).toBe(false);
    expect(lines).toContain('Tests:       1 failed, 1 skipped, 2 passed, 4 total');
  });

  it('colours, titles and other escapes are removed; plain text is unchanged', () => {
    expect(logText('\x1b]0;title\x07\x1b[31mred\x1b[0m \x1b(Bplain\r\n')).toBe('red plain\n');
    expect(logText('a\n\tb\nc')).toBe('a\n\tb\nc');
  });

  it('hostile cursor moves stay within bounds, and a flood is replayed quickly', () => {
    expect(logLines('\x1b[999999999B\x1b[999999999Cx').join('\n').length).toBeLessThan(5000);
    const started = Date.now();
    const flood = '\x1b[32m.\x1b[0m'.repeat(300_000) + '\r\n' + 'progress 1%\r'.repeat(50_000) + 'done\n';
    const lines = logLines(flood);
    expect(lines.at(-2)).toBe('done');
    expect(Date.now() - started).toBeLessThan(3000);
  });
});

describe('summaryLine: the line a card shows', () => {
  it("is the runner's last line when npm's spinner follows it (the uvu card that read ⠙)", () => {
    expect(summaryLine(sample('npm-11-uvu-0.5.6-fail.txt'))).toBe('Duration:  1.81ms');
  });

  it("skips npm's warnings and its after-failure trailer, and stack frames", () => {
    const out = [
      'npm warn deprecated inflight@1.0.6: This module is not supported',
      'Error: Cannot find module ./lib',
      '    at Module._resolveFilename (node:internal/modules/cjs/loader:1145:15)',
      'npm error Lifecycle script `test` failed with error:',
      'npm error code 1',
      'npm error path /work/repo',
      'npm error command failed',
      'npm error command sh -c node test.js',
      'npm notice New major version of npm available!',
      '',
    ].join('\n');
    expect(summaryLine(out)).toBe('Error: Cannot find module ./lib');
    expect(meaningfulLines(out)).not.toContain('npm notice New major version of npm available!');
  });

  it("keeps npm's own error when that is all there is", () => {
    expect(summaryLine('npm error Missing script: "test"\nnpm error\nnpm error To see a list of scripts, run:\nnpm error   npm run\n')).toBe('npm error   npm run');
    expect(firstCauseLine('npm error Missing script: "test"\nnpm error\nnpm error To see a list of scripts, run:\n')).toBe('npm error Missing script: "test"');
    expect(summaryLine('npm error code 1\nnpm error command failed\n')).toBe('npm error code 1');
  });

  it("yarn's and pnpm's trailers are not the summary either", () => {
    expect(summaryLine('3 failing\nerror Command failed with exit code 1.\ninfo Visit https://yarnpkg.com/en/docs/cli/run for documentation about this command.\n')).toBe('3 failing');
    expect(summaryLine('Tests: 1 failed, 1 total\n ELIFECYCLE  Test failed. See above for more details.\n')).toBe('Tests: 1 failed, 1 total');
  });

  it("make -C's directory lines are not the summary", () => {
    expect(summaryLine("make: Entering directory '/work/repo/tests'\ncc -o test1 test1.c\nall 3 match\nmake: Leaving directory '/work/repo/tests'\n")).toBe('all 3 match');
  });

  it('is empty for output with no text, and capped', () => {
    expect(summaryLine('⠙\x1b[1G\x1b[0K\r\n\r\n')).toBe('');
    expect(summaryLine('x'.repeat(500), 50)).toHaveLength(50);
  });
});

describe('firstCauseLine: the first line of an error', () => {
  it('is the first line that reads as an error, not the last one', () => {
    const out = 'compiling\nsrc/a.c:3:1: error: expected ; before }\nsrc/a.c:9:1: error: unknown type\nmake: *** [Makefile:2: all] Error 1\n';
    expect(firstCauseLine(out)).toBe('src/a.c:3:1: error: expected ; before }');
    expect(summaryLine(out)).toBe('src/a.c:9:1: error: unknown type');
    expect(firstCauseLine('all good\n')).toBe('all good');
  });
});
