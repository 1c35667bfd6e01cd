import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { asAgentArgv, exportLines, lastLine, plainText, shellQuote } from '../../../main/guest/guest-shell.js';
import { outcomeFromRun, type GuestRunResult } from '../../../main/pipeline/stage-executor.js';
import { pendingStages } from '../../../main/pipeline/stage-runner.js';

function run(partial: Partial<GuestRunResult> & { out?: string }): GuestRunResult {
  return { code: 0, sessionId: 's1', timedOut: false, cancelled: false, lost: false, durationMs: 1, tail: () => partial.out ?? '', ...partial };
}

describe('guest shell helpers', () => {
  it('quotes anything so bash sees it verbatim', () => {
    for (const s of ["it's", '$(rm -rf /)', '`x`', 'a\nb', '"; echo pwned', '\\', '']) {
      expect(execFileSync('bash', ['-c', `printf %s ${shellQuote(s)}`]).toString()).toBe(s);
    }
    expect(() => shellQuote('a\0b')).toThrow();
  });

  it('writes export lines a shell can source, refusing bad names', () => {
    const script = `${exportLines({ A: "x'y", B: '$HOME' })}\nprintf '%s|%s' "$A" "$B"`;
    expect(execFileSync('bash', ['-c', script]).toString()).toBe("x'y|$HOME");
    expect(() => exportLines({ 'A;rm': 'x' })).toThrow(/bad variable name/);
  });

  it('runs as the agent user with a clean environment', () => {
    const cmd = asAgentArgv(['bash', '/work/.factory/run/build-1.sh']);
    expect(cmd.startsWith('runuser -u agent -- env -i HOME=/home/agent ')).toBe(true);
    expect(cmd).toContain("'bash' '/work/.factory/run/build-1.sh'");
  });

  it('turns terminal output into one clean summary line', () => {
    expect(plainText('\x1b[1;32mok\x1b[0m\r\n\x1b]0;title\x07done\x07')).toBe('ok\ndone');
    expect(lastLine('first\n\n  last one  \n\n')).toBe('last one');
    expect(lastLine('x'.repeat(500)).length).toBe(200);
  });
});

describe('stage outcomes', () => {
  it('passes on exit 0 with the last line as summary', () => {
    expect(outcomeFromRun(run({ out: 'a\nall good\n' }), 10)).toMatchObject({ status: 'passed', exitCode: 0, summary: 'all good' });
  });
  it('fails with the exit status and the output tail', () => {
    const o = outcomeFromRun(run({ code: 3, out: 'compiling\nerror: boom\n' }), 10);
    expect(o).toMatchObject({ status: 'failed', exitCode: 3, summary: 'error: boom' });
    expect(o.detail).toContain('compiling');
  });
  it("gives a failed stage's tail as read: no spinner or progress frames, no npm noise", () => {
    const o = outcomeFromRun(run({ code: 1, out: '⠙\x1b[1G\x1b[0K[1/3] 10%\r[3/3] 100%\r\nnpm warn old lockfile\r\nerror: boom\r\nnpm error code 1\r\n' }), 10);
    expect(o.detail).toBe('[3/3] 100%\nerror: boom');
  });
  it('reports timeouts, cancellation and a lost link', () => {
    expect(outcomeFromRun(run({ code: null, timedOut: true }), 10).summary).toBe('timed out after 10 s');
    expect(outcomeFromRun(run({ code: null, cancelled: true }), 10).status).toBe('cancelled');
    expect(outcomeFromRun(run({ code: null, lost: true }), 10).summary).toMatch(/connection to the sandbox was lost/);
  });
  it('starts with six pending stages in order', () => {
    expect(pendingStages().map((s) => `${s.name}:${s.status}`).join(' ')).toBe(
      'request:pending plan:pending build:pending test:pending review:pending document:pending',
    );
  });
});
