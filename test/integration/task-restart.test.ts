// The app is killed in the middle of a stage, the way a crash or `kill -9`
// ends it: the web host runs as its own process with real QEMU, a task's build
// stage is sleeping in its sandbox, and the process gets SIGKILL. The QEMU it
// started lives on as an orphan. A new app on the same data dir must reap that
// QEMU, keep every task record, show the task and the cut stage as
// interrupted, and on Retry boot a fresh sandbox, seed it from the same base
// commit and finish the pipeline from the stage that was cut.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Task } from '../../common/domain.js';
import { qemuProcessesUnder } from '../e2e/support/processes.js';
import { startAppProcess, type AppProcess } from '../support/app-process.js';
import { testImage } from '../support/image.js';
import { makeRepo, tempDir, type FixtureRepo } from '../support/repo.js';

let dataDir: string;
let repo: FixtureRepo;
const apps: AppProcess[] = [];

// The build stage sleeps on its first attempt (FACTORY_STAGE_ATTEMPT), where the
// app is killed; the retry, in a fresh sandbox, runs every stage again and the
// build (attempt 2) finishes.
const PIPELINE = {
  stages: {
    plan: { command: 'echo PLAN-DONE' },
    build: {
      command: [
        'echo "HEAD=$(git rev-parse HEAD)"',
        'if [ "$FACTORY_STAGE_ATTEMPT" = 1 ]; then echo BUILD-SLEEPING; sleep 900; fi',
        'echo "built in a fresh sandbox" >> README.md',
        'echo BUILD-DONE',
      ].join('\n'),
    },
    test: { command: 'grep -q "built in a fresh sandbox" README.md && echo "tests: 1 passed"' },
  },
};

/** Whether the stage printed the marker on a line of its own (its terminal's first lines show the script, which names it too). */
function printed(log: string, marker: string): boolean {
  return new RegExp(`(^|\\n)${marker}\\r?(\\n|$)`).test(log);
}

async function poll<T>(what: string, read: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 8 * 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await read();
    if (done(last)) return last;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last seen: ${JSON.stringify(last).slice(0, 2000)}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function scrollback(app: AppProcess, sessionId: string): Promise<string> {
  const r = await app.call<{ scrollback: string }>('terminal.attach', { sessionId });
  return Buffer.from(r.scrollback, 'base64').toString('utf8');
}

function savedRecord(taskId: string): { qemuPid?: number; task: Task } {
  return JSON.parse(fs.readFileSync(path.join(dataDir, 'state', 'tasks', `${taskId}.json`), 'utf8'));
}

/** Alive and not a zombie (a killed orphan may linger as one until it is reaped). */
function running(pid: number): boolean {
  try {
    return !execFileSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' }).trim().startsWith('Z');
  } catch {
    return false; // ps exits 1 when there is no such process
  }
}

beforeAll(async () => {
  await testImage();
  dataDir = tempDir('factory-restart-');
  repo = await makeRepo({ files: { 'README.md': '# Fixture\n', '.factory/pipeline.json': JSON.stringify(PIPELINE) } });
});

afterAll(async () => {
  for (const app of apps) app.kill('SIGKILL');
  await Promise.all(apps.map((a) => a.exited));
  // Only the QEMU processes of this test's data dir, by pid.
  for (const q of dataDir ? qemuProcessesUnder(dataDir) : []) process.kill(q.pid, 'SIGKILL');
  repo?.cleanup();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('the app killed mid-stage', () => {
  it('comes back with the task interrupted, reaps the orphaned QEMU, and Retry finishes it in a fresh sandbox', async () => {
    const first = await startAppProcess({ dataDir });
    apps.push(first);
    await first.call('settings.set', { maxParallelTasks: 1, vmMemoryMb: 768 });
    const cut = await first.call<Task>('tasks.create', { repoPath: repo.dir, title: 'Build it' });
    // A second task waits for the only slot; it has no sandbox yet when the app dies.
    const queued = await first.call<Task>('tasks.create', { repoPath: repo.dir, title: 'Wait your turn' });

    const sleeping = await poll(
      'the build stage to sleep',
      async () => {
        const t = await first.call<Task>('tasks.get', { taskId: cut.id });
        const build = t.stages[2]!;
        return { t, log: build.status === 'running' && build.sessionId ? await scrollback(first, build.sessionId) : '' };
      },
      ({ t, log }) => printed(log, 'BUILD-SLEEPING') || ['failed', 'cancelled', 'review'].includes(t.phase),
    );
    expect(sleeping.t.phase).toBe('running');
    expect(sleeping.log).toContain(`HEAD=${cut.baseCommit}`);
    const before = sleeping.t;
    expect((await first.call<Task>('tasks.get', { taskId: queued.id })).phase).toBe('creating');
    const oldQemu = savedRecord(cut.id).qemuPid!;
    expect(oldQemu).toBeGreaterThan(0);
    expect(running(oldQemu)).toBe(true);

    first.kill('SIGKILL');
    expect(await first.exited).toBe('SIGKILL');
    // Nothing tore the sandbox down: its QEMU outlives the app.
    expect(running(oldQemu)).toBe(true);
    expect(qemuProcessesUnder(dataDir).map((q) => q.pid)).toEqual([oldQemu]);

    const restarting = Date.now();
    const second = await startAppProcess({ dataDir });
    const restartMs = Date.now() - restarting;
    apps.push(second);
    // The restart reaped it before serving.
    expect(running(oldQemu)).toBe(false);
    expect(qemuProcessesUnder(dataDir)).toEqual([]);

    // Every task record is there, none set aside as unreadable.
    const listed = await second.call<Task[]>('tasks.list');
    expect(listed.map((t) => t.id).sort()).toEqual([cut.id, queued.id].sort());
    expect(fs.readdirSync(path.join(dataDir, 'state', 'tasks')).filter((n) => n.includes('corrupt'))).toEqual([]);

    const interrupted = listed.find((t) => t.id === cut.id)!;
    expect(interrupted.phase).toBe('interrupted');
    expect(interrupted.sandbox.status).toBe('lost');
    expect(interrupted.error).toMatchObject({ name: 'Interrupted' });
    expect(interrupted.stages.map((s) => s.status)).toEqual(['passed', 'passed', 'interrupted', 'pending', 'pending', 'pending']);
    expect(interrupted.stages[2]).toMatchObject({ summary: 'interrupted: the app stopped', sessionId: before.stages[2]!.sessionId });
    expect(listed.find((t) => t.id === queued.id)).toMatchObject({ phase: 'interrupted', sandbox: { status: 'none' } });
    expect(savedRecord(cut.id).qemuPid).toBeUndefined();
    // The cut stage's log survived the kill.
    expect(printed(await scrollback(second, before.stages[2]!.sessionId!), 'BUILD-SLEEPING')).toBe(true);

    const retrying = Date.now();
    const retried = await second.call<Task>('tasks.retry', { taskId: cut.id });
    expect(retried.phase).toBe('creating');
    const done = await poll(
      'the retried task to finish',
      () => second.call<Task>('tasks.get', { taskId: cut.id }),
      (t) => ['review', 'failed', 'cancelled', 'interrupted'].includes(t.phase),
    );
    expect(done.error).toBeUndefined();
    expect(done.phase).toBe('review');
    console.log(
      `task-restart: new app serving ${restartMs} ms after start (orphan reaped); retry to review ${((Date.now() - retrying) / 1000).toFixed(1)} s; ` +
        `fresh sandbox boot ${done.sandbox.bootMs} ms (${done.sandbox.accel})`,
    );
    // In the fresh sandbox every stage ran again: what request and plan left lived in the first one.
    for (const i of [0, 1]) expect(done.stages[i]!.startedAt! > before.stages[i]!.startedAt!, done.stages[i]!.name).toBe(true);
    // review and document are not configured: skipped, with the reason.
    expect(done.stages.map((s) => s.status)).toEqual(['passed', 'passed', 'passed', 'passed', 'skipped', 'skipped']);
    const build = done.stages[2]!;
    expect(build.sessionId).not.toBe(before.stages[2]!.sessionId);
    const buildLog = await scrollback(second, build.sessionId!);
    // The same base commit, in a sandbox without the first one's /tmp.
    expect(buildLog).toContain(`HEAD=${cut.baseCommit}`);
    expect(printed(buildLog, 'BUILD-DONE')).toBe(true);
    expect(printed(buildLog, 'BUILD-SLEEPING')).toBe(false);

    // A fresh QEMU runs it, and the review shows what the build stage changed.
    const newQemu = savedRecord(cut.id).qemuPid!;
    expect(newQemu).not.toBe(oldQemu);
    expect(running(newQemu)).toBe(true);
    expect(done.sandbox.status).toBe('running');
    const review = await second.call<{ files: Array<{ path: string; added: number }> }>('tasks.review', { taskId: cut.id });
    expect(review.files).toEqual([expect.objectContaining({ path: 'README.md', added: 1 })]);

    for (const id of [cut.id, queued.id]) await second.call('tasks.destroy', { taskId: id });
    expect(running(newQemu)).toBe(false);
    second.kill('SIGTERM');
    expect(await second.exited).toBe(0);
    expect(qemuProcessesUnder(dataDir)).toEqual([]);
  });
});
