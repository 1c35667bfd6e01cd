// Two tasks at once in real sandboxes: one whose test stage fails (the pipeline
// stops, the exit status and output are shown, later stages are skipped) and one
// cancelled in the middle of a long stage (no agent process is left in the guest).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FactoryApp } from '../../main/app.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testImage } from '../support/image.js';
import { waitForTask } from '../support/wait-for-task.js';

let env: TestApp | undefined;
let app: FactoryApp;
const repos: FixtureRepo[] = [];
let output: Map<string, string>;

beforeAll(async () => {
  await testImage();
  env = await startTestApp('factory-data-', { settings: { maxParallelTasks: 2, vmMemoryMb: 768 } });
  ({ app, output } = env);
});

afterAll(async () => {
  await env?.dispose();
  for (const r of repos) r.cleanup();
});

describe('failing and cancelled pipelines', () => {
  it('stops at a failing stage with its exit status and output, and cancels a running stage', async () => {
    const failing = await makeRepo({
      files: {
        'a.txt': 'a\n',
        '.factory/pipeline.json': JSON.stringify({
          stages: { test: { command: 'echo "1 test ran"; echo "assertion failed: boom" >&2; exit 3' } },
        }),
      },
    });
    const slow = await makeRepo({
      files: {
        'b.txt': 'b\n',
        '.factory/pipeline.json': JSON.stringify({
          stages: { build: { command: 'cat uncommitted.txt; (sleep 500 &) ; echo STARTED-SLOW; sleep 600' } },
        }),
      },
    });
    repos.push(failing, slow);
    // Carried into the sandbox as one extra commit because the task asks for uncommitted changes.
    slow.write('uncommitted.txt', 'NOT-YET-COMMITTED\n');
    const [a, b] = await Promise.all([
      app.api['tasks.create']({ repoPath: failing.dir, title: 'fail please' }),
      app.api['tasks.create']({ repoPath: slow.dir, title: 'take forever', includeUncommitted: true }),
    ]);

    // The slow task reaches its build stage; then it is cancelled.
    const running = await waitForTask(app, b.id, (t) => t.stages[2]!.status === 'running' && !!t.stages[2]!.sessionId);
    // On a line of its own: the terminal's first line is the command, which names the marker too.
    await expect.poll(() => output.get(running.stages[2]!.sessionId!) ?? '', { timeout: 60_000 }).toMatch(/\nSTARTED-SLOW\r?\n/);
    expect(output.get(running.stages[2]!.sessionId!)).toContain('NOT-YET-COMMITTED');
    const cancelled = await app.api['tasks.cancel']({ taskId: b.id });
    expect(cancelled.phase).toBe('cancelled');
    expect(cancelled.stages.map((s) => s.status)).toEqual(['passed', 'skipped', 'cancelled', 'skipped', 'skipped', 'skipped']);
    // The sandbox stays for inspection, and no process of the agent user is left in it.
    expect(cancelled.sandbox.status).toBe('running');
    const shell = await app.api['terminal.openShell']({ taskId: b.id, cols: 120, rows: 30 });
    await app.api['terminal.write']({ sessionId: shell.id, data: 'echo AGENT-PROCS=$(pgrep -u agent | wc -l)\n' });
    await expect.poll(() => output.get(shell.id) ?? '', { timeout: 30_000 }).toMatch(/AGENT-PROCS=\d/);
    expect(output.get(shell.id)).toContain('AGENT-PROCS=0');

    const failed = await waitForTask(app, a.id, (t) => ['failed', 'review'].includes(t.phase));
    expect(failed.phase).toBe('failed');
    // No plan agent and no build step in this repository: skipped, with the reasons.
    expect(failed.stages.map((s) => s.status)).toEqual(['passed', 'skipped', 'skipped', 'failed', 'skipped', 'skipped']);
    expect(failed.stages[2]!.summary).toBe('no build step found');
    const test = failed.stages[3]!;
    expect(test.exitCode).toBe(3);
    expect(test.attempt).toBe(1);
    expect(test.summary).toBe('assertion failed: boom (test counts not recognised)');
    expect(failed.error).toMatchObject({ name: 'StageFailed', message: 'stage test failed with exit status 3: assertion failed: boom (test counts not recognised)' });
    // Under the error, the failure explained: its first assertion, not the log's raw end.
    expect(failed.error?.detail).toContain('First assertion:\nassertion failed: boom');
    await expect(app.api['tasks.review']({ taskId: a.id })).rejects.toMatchObject({ name: 'NoReview' });

    // A retry runs again from the failed stage in the same sandbox; earlier stages keep their results.
    const retried = await app.api['tasks.retry']({ taskId: a.id });
    expect(retried.phase).toBe('running');
    expect(retried.error).toBeUndefined();
    const again = await waitForTask(app, a.id, (t) => ['failed', 'review'].includes(t.phase));
    expect(again.phase).toBe('failed');
    expect(again.stages.slice(0, 3)).toEqual(failed.stages.slice(0, 3));
    expect(again.stages[3]).toMatchObject({ status: 'failed', exitCode: 3, attempt: 2 });
    expect(again.stages[3]!.sessionId).not.toBe(test.sessionId);
    // Each attempt's terminal, as a replay shows it: the command first, "exit status 3" last; the retry titled as attempt 2.
    for (const stage of [test, again.stages[3]!]) {
      const replay = Buffer.from((await app.api['terminal.attach']({ sessionId: stage.sessionId! })).scrollback, 'base64').toString('utf8');
      const lines = replay.replace(/\x1b\[[0-9;]*m/g, '').split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
      expect(lines[0]).toBe(`$ ${'echo "1 test ran"; echo "assertion failed: boom" >&2; exit 3'}`);
      expect(lines.at(-1)).toBe('exit status 3');
    }
    const titles = (await app.api['terminal.list']({ taskId: a.id })).filter((t) => t.kind === 'stage' && t.title.startsWith('test')).map((t) => t.title);
    expect(titles.sort()).toEqual(['test', 'test · attempt 2']);
    await expect(app.api['tasks.retry']({ taskId: a.id, fromStage: 'review' })).rejects.toThrow('cannot start at review: stage test has not passed');

    for (const id of [a.id, b.id]) expect((await app.api['tasks.destroy']({ taskId: id })).sandbox.status).toBe('destroyed');
  });
});
