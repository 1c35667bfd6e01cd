// The whole life of a task with real parts: a fixture repo, the real base image
// and QEMU (TCG here), SSH, the stage runner, pull-back, approve into the host
// repo (one commit of the reviewed tree on the base), the sandbox destroyed by
// the decision, and state reloaded by a second app instance.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { appPaths, type AppPaths } from '../../main/state/paths.js';
import { StateStore } from '../../main/state/state-store.js';
import { makeRepo, tempDir, type FixtureRepo } from '../support/repo.js';
import { testImage } from '../support/image.js';
import { waitForTask } from '../support/wait-for-task.js';
import { processAlive } from '../../main/vm/file-lock.js';
import { collectTerminalOutput } from '../support/test-app.js';

// A stand-in for the credential proxy: one guest forward and one variable for every guest command.
const extensionCalls: string[] = [];
const brokerExtension = {
  name: 'test-broker',
  async prepare(ctx: { taskId: string }) {
    extensionCalls.push(`prepare ${ctx.taskId}`);
    return {
      guestForwards: [{ guestAddress: '10.0.2.100', guestPort: 8080, command: 'printf FORWARDED-OK' }],
      guestEnv: { BROKER_PLACEHOLDER: 'placeholder-not-a-secret' },
    };
  },
  async beforeDestroy(ctx: { taskId: string; sandboxDir: string; qmp?: () => Promise<{ execute(c: string): Promise<unknown> }> }) {
    // The VM still runs here: its disk overlay exists and its own QMP client answers.
    const status = ctx.qmp ? ((await (await ctx.qmp()).execute('query-status')) as { status?: string }).status : 'no qmp';
    extensionCalls.push(`beforeDestroy ${ctx.taskId} overlay=${fs.existsSync(path.join(ctx.sandboxDir, 'overlay.qcow2'))} vm=${status}`);
  },
  async release(ctx: { taskId: string }) {
    extensionCalls.push(`release ${ctx.taskId}`);
  },
};

const MARKER_COMMAND = 'echo FACTORY-MARKER-$((6*7))';
const MARKER_OUTPUT = 'FACTORY-MARKER-42';

let dataDir: string;
let paths: AppPaths;
let repo: FixtureRepo;
let app: FactoryApp | undefined;
let output: Map<string, string>;

beforeAll(async () => {
  await testImage(); // built once into the shared image cache
  dataDir = tempDir('factory-data-');
  paths = appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir });
  repo = await makeRepo({
    files: {
      'README.md': '# Fixture\n',
      'src/app.txt': 'v1\n',
      '.factory/pipeline.json': JSON.stringify({
        env: { GREETING: 'hello from pipeline.json' },
        stages: {
          request: {
            command:
              'cat "$FACTORY_TASK_FILE"; echo "$GREETING"; echo "broker=$BROKER_PLACEHOLDER"; ' +
              'timeout 20 bash -c "cat < /dev/tcp/10.0.2.100/8080"; echo; id -un',
          },
          build: { command: `echo 'changed by the sandbox' >> README.md && ${MARKER_COMMAND}`, timeoutSeconds: 120 },
          test: { command: 'grep -q "changed by the sandbox" README.md && echo "tests: 1 passed"' },
        },
      }),
    },
  });
  app = await createFactoryApp({ host: 'web', paths, sandboxExtensions: [brokerExtension] });
  output = collectTerminalOutput(app);
});

afterAll(async () => {
  await app?.dispose();
  repo?.cleanup();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('task lifecycle in a real sandbox', () => {
  let taskId = '';
  let qemuPid = 0;
  let sandboxDir = '';

  it('runs all six stages, shows the marker live and brings the change back for review', async () => {
    const a = app!;
    const started = Date.now();
    const created = await a.api['tasks.create']({ repoPath: repo.dir, title: 'Append a line to the README' });
    taskId = created.id;
    expect(created.phase).toBe('creating');
    const t = await waitForTask(a, taskId, (x) => ['review', 'failed', 'cancelled'].includes(x.phase));
    expect(t.error).toBeUndefined();
    expect(t.phase).toBe('review');
    console.log(
      `task-lifecycle: review ready ${((Date.now() - started) / 1000).toFixed(1)} s after create; boot ${t.sandbox.bootMs} ms (${t.sandbox.accel}); ` +
        t.stages.map((s) => `${s.name} ${s.durationMs} ms`).join(', '),
    );
    expect(t.stages.map((s) => `${s.name}:${s.status}`)).toEqual([
      // plan, review and document are not configured: nothing ran, and they say so.
      'request:passed', 'plan:skipped', 'build:passed', 'test:passed', 'review:skipped', 'document:skipped',
    ]);
    for (const s of t.stages) expect(s.durationMs).toBeGreaterThanOrEqual(0);
    const build = t.stages.find((s) => s.name === 'build')!;
    expect(build.summary).toBe(MARKER_OUTPUT);
    expect(output.get(build.sessionId!)).toContain(MARKER_OUTPUT);
    // The request stage ran as the agent user and saw the task text and the config's env.
    const request = output.get(t.stages[0]!.sessionId!)!;
    expect(request).toContain('Append a line to the README');
    expect(request).toContain('hello from pipeline.json');
    expect(request).toContain('broker=placeholder-not-a-secret');
    expect(request).toContain('FORWARDED-OK');
    expect(extensionCalls).toEqual([`prepare ${taskId}`]);
    expect(t.stages[0]!.summary).toBe('agent');
    expect(t.stages.find((s) => s.name === 'test')!.summary).toBe('tests: 1 passed (test counts not recognised)');

    const review = await a.api['tasks.review']({ taskId });
    expect(review.files).toEqual([
      { path: 'README.md', status: 'modified', added: 1, removed: 0, binary: false, oldMode: 'file', newMode: 'file', size: expect.any(Number) },
    ]);
    expect(review.flags).toEqual([]);
    expect(review.confirmations).toEqual([]);
    expect(review.patch).toContain('+changed by the sandbox');
    // Every check ran and passed (an empty list would pass "every" without checking anything).
    expect(review.checks.map((c) => c.name)).toEqual(expect.arrayContaining(['size', 'refs', 'bundle verify', 'fsck', 'ancestry']));
    expect(review.checks.filter((c) => !c.ok)).toEqual([]);

    const record = (await new StateStore({ dir: paths.state }).loadTasks()).find((r) => r.task.id === taskId)!;
    qemuPid = record.qemuPid!;
    sandboxDir = record.sandboxDir!;
    expect(sandboxDir).toBe(path.join(paths.sandboxes, taskId));
    expect(processAlive(qemuPid)).toBe(true);
  });

  it('opens an interactive shell in the sandbox', async () => {
    const a = app!;
    const info = await a.api['terminal.openShell']({ taskId, cols: 100, rows: 30 });
    await a.api['terminal.write']({ sessionId: info.id, data: 'pwd; cat README.md; git --no-pager log --format=%s -1; echo SHELL-$((40+2))\n' });
    await expect.poll(() => output.get(info.id) ?? '', { timeout: 30_000 }).toContain('SHELL-42');
    expect(output.get(info.id)).toContain('changed by the sandbox');
    expect(output.get(info.id)).toMatch(/^\/work\/repo\r?$/m);
    expect(output.get(info.id)).toContain('factory: Append a line to the README'); // root's git may read the agent's repo
    await a.api['terminal.close']({ sessionId: info.id });
  });

  it('approves into a new branch without touching HEAD, index or working tree, and never overwrites', async () => {
    const a = app!;
    repo.write('untracked.txt', 'mine\n');
    const before = { head: repo.head(), branch: repo.git('symbolic-ref', 'HEAD'), status: repo.status() };
    const approved = await a.api['tasks.approve']({ taskId });
    expect(approved.phase).toBe('approved');
    expect(approved.decision).toMatchObject({ kind: 'approved', branch: `factory/${taskId}` });
    expect(repo.git('show', `factory/${taskId}:README.md`)).toBe('# Fixture\nchanged by the sandbox\n');
    // One new commit on the base lands, holding the reviewed tree; the sandbox's own commit stays out.
    const landed = repo.git('rev-parse', `refs/heads/factory/${taskId}`).trim();
    expect(approved.decision?.commit).toBe(landed);
    expect(repo.git('rev-list', '--parents', `${approved.baseCommit}..${landed}`).trim()).toBe(`${landed} ${approved.baseCommit}`);
    const review = await a.api['tasks.review']({ taskId });
    expect(review.history?.commits.map((c) => c.message.split('\n')[0])).toContain('factory: Append a line to the README');
    expect(() => repo.git('cat-file', '-e', review.headCommit)).toThrow();
    expect(repo.head()).toBe(before.head);
    expect(repo.git('symbolic-ref', 'HEAD')).toBe(before.branch);
    expect(repo.status()).toBe(before.status);
    expect(fs.readFileSync(path.join(repo.dir, 'README.md'), 'utf8')).toBe('# Fixture\n');
    await expect(a.api['tasks.approve']({ taskId })).rejects.toMatchObject({ name: 'NotInReview' });
  });

  it('destroys the sandbox after Approve without being asked: no QEMU process, no overlay, the leak check ran first', async () => {
    const a = app!;
    expect(qemuPid).toBeGreaterThan(0);
    // Nobody presses Destroy: the decision ends the sandbox (setting keepSandboxAfterDecisionMinutes is 0).
    const t = await waitForTask(a, taskId, (x) => x.sandbox.status === 'destroyed');
    expect(t.sandbox.keptUntil).toBeUndefined();
    expect(processAlive(qemuPid)).toBe(false);
    // The folder stays for its logs; the disk and keys are gone.
    const left = fs.readdirSync(sandboxDir);
    expect(left).toContain('serial.log');
    expect(left.filter((n) => n.endsWith('.qcow2') || n === 'keys')).toEqual([]);
    expect(extensionCalls).toEqual([`prepare ${taskId}`, `beforeDestroy ${taskId} overlay=true vm=running`, `release ${taskId}`]);
  });

  it('reloads tasks, stage results, decisions and stage logs in a second app instance', async () => {
    await app!.dispose();
    app = await createFactoryApp({ host: 'web', paths });
    const t = await app.api['tasks.get']({ taskId });
    expect(t.phase).toBe('approved');
    expect(t.decision?.kind).toBe('approved');
    expect(t.sandbox.status).toBe('destroyed');
    // Stage results as they were, not an empty list ("every" would pass on one).
    expect(t.stages.map((s) => `${s.name}:${s.status}`)).toEqual([
      // plan, review and document are not configured: nothing ran, and they say so.
      'request:passed', 'plan:skipped', 'build:passed', 'test:passed', 'review:skipped', 'document:skipped',
    ]);
    const build = t.stages.find((s) => s.name === 'build')!;
    // The diff that was approved stays readable.
    expect((await app.api['tasks.review']({ taskId })).files.map((f) => f.path)).toEqual(['README.md']);
    const replay = await app.api['terminal.attach']({ sessionId: build.sessionId! });
    expect(Buffer.from(replay.scrollback, 'base64').toString('utf8')).toContain(MARKER_OUTPUT);
  });
});
