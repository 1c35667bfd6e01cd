// A sandbox kept for inspection after the decision, with real parts: the base
// image under QEMU, a one-stage pipeline, Reject, then the deadline. With the
// setting at one minute, the sandbox still runs after Reject and the task says
// until when; when that time comes, QEMU ends and the task says it was destroyed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { appPaths, type AppPaths } from '../../main/state/paths.js';
import { StateStore } from '../../main/state/state-store.js';
import { processAlive } from '../../main/vm/file-lock.js';
import { testImage } from '../support/image.js';
import { makeRepo, tempDir, type FixtureRepo } from '../support/repo.js';
import { waitForTask } from '../support/wait-for-task.js';

let dataDir: string;
let paths: AppPaths;
let repo: FixtureRepo;
let app: FactoryApp | undefined;

beforeAll(async () => {
  await testImage();
  dataDir = tempDir('factory-data-');
  paths = appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir });
  repo = await makeRepo({
    files: {
      'README.md': '# Fixture\n',
      '.factory/pipeline.json': JSON.stringify({ stages: { build: { command: "echo 'kept' >> README.md" }, test: { command: 'true' } } }),
    },
  });
  app = await createFactoryApp({ host: 'web', paths, settings: { keepSandboxAfterDecisionMinutes: 1 } });
});

afterAll(async () => {
  await app?.dispose();
  repo?.cleanup();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('a sandbox kept after the decision', () => {
  it('still runs after Reject, says until when, and is destroyed when that time comes', async () => {
    const a = app!;
    const { id: taskId } = await a.api['tasks.create']({ repoPath: repo.dir, title: 'Append a line' });
    const inReview = await waitForTask(a, taskId, (x) => ['review', 'failed', 'cancelled'].includes(x.phase));
    expect(inReview.error).toBeUndefined();
    expect(inReview.phase).toBe('review');
    const record = (await new StateStore({ dir: paths.state }).loadTasks()).find((r) => r.task.id === taskId)!;
    const qemuPid = record.qemuPid!;
    expect(processAlive(qemuPid)).toBe(true);

    const decidedAt = Date.now();
    const rejected = await a.api['tasks.reject']({ taskId });
    expect(rejected.sandbox.status).toBe('running');
    const keptUntil = Date.parse(rejected.sandbox.keptUntil!);
    expect(keptUntil - decidedAt).toBeGreaterThanOrEqual(59_000);
    expect(keptUntil - decidedAt).toBeLessThanOrEqual(61_000);
    // Saved with the task, so a restart knows the deadline.
    const saved = (await new StateStore({ dir: paths.state }).loadTasks()).find((r) => r.task.id === taskId)!;
    expect(saved.task.sandbox.keptUntil).toBe(rejected.sandbox.keptUntil);
    // Still there for inspection: QEMU runs and a command in the sandbox answers.
    await new Promise((r) => setTimeout(r, 20_000));
    expect(processAlive(qemuPid)).toBe(true);
    const exec = await a.api['tasks.exec']({ taskId, argv: ['tail', '-n1', 'README.md'] });
    expect(Buffer.from(exec.stdout, 'base64').toString('utf8')).toBe('kept\n');

    // Every update from the deadline on no longer says "kept until": the first one with the deadline gone is checked too.
    const leaving = await waitForTask(a, taskId, (x) => x.sandbox.keptUntil === undefined, 5 * 60_000);
    expect(leaving.sandbox.status).toBe('running');
    const gone = await waitForTask(a, taskId, (x) => x.sandbox.status === 'destroyed', 5 * 60_000);
    const destroyedAfter = Date.now() - decidedAt;
    console.log(`sandbox-kept: destroyed ${(destroyedAfter / 1000).toFixed(1)} s after Reject (kept for 60 s)`);
    expect(destroyedAfter).toBeGreaterThanOrEqual(59_000);
    expect(gone.sandbox.keptUntil).toBeUndefined();
    expect(processAlive(qemuPid)).toBe(false);
    const left = fs.readdirSync(path.join(paths.sandboxes, taskId));
    expect(left.filter((n) => n.endsWith('.qcow2'))).toEqual([]);
  }, 20 * 60_000);
});
