// A repository whose own setup fails, through the whole app with a real sandbox
// (the real base image under QEMU, the real setup script in the guest): the
// task fails at setup like a failing stage. Root commands run as root, the
// project's own as the agent user. The error names the step that
// failed and carries the last lines of its output, not a flood of earlier
// ones; what came after the failing command never ran, no stage ran, and no
// layer is made of the broken environment. Retry runs setup again before any
// stage. Nothing here needs the network.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FactoryApp } from '../../main/app.js';
import { testImage } from '../support/image.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { waitForTask } from '../support/wait-for-task.js';

let env: TestApp | undefined;
let app: FactoryApp;
let repo: FixtureRepo | undefined;
let output: Map<string, string>;

beforeAll(async () => {
  await testImage();
  env = await startTestApp('factory-setup-fail-', { settings: { maxParallelTasks: 1 } });
  ({ app, output } = env);
}, 10 * 60_000);

afterAll(async () => {
  await env?.dispose();
  repo?.cleanup();
});

describe('a setup that fails', () => {
  it('fails the task naming the step, with the last lines of its output; nothing after it runs and no layer is made', async () => {
    repo = await makeRepo({
      files: {
        'a.txt': 'a\n',
        '.factory/pipeline.json': JSON.stringify({
          environment: {
            rootSetup: 'echo "root step as $(id -un): preparing the toolchain"',
            setup: [
              'echo "project step as $(id -un)"',
              // 3,000 lines before the error: the task keeps the last lines, not the flood.
              'for i in $(seq 1 3000); do echo "noise line $i"; done',
              'echo "E: dependency left-pad is gone from the registry" >&2; exit 7',
              // Written so that only running it prints the marker (the step's header shows the command as written).
              'echo "NEVER-$((40 + 2))-RUNS"',
            ],
          },
        }),
      },
    });
    const created = await app.api['tasks.create']({ repoPath: repo.dir, title: 'Set up and fail', agent: 'command' });
    const t = await waitForTask(app, created.id, (x) => ['review', 'failed', 'cancelled', 'interrupted'].includes(x.phase), 10 * 60_000);

    expect(t.phase).toBe('failed');
    expect(t.error?.name).toBe('SetupFailed');
    // The card and the error say why: the first line of the failing step that names a cause.
    expect(t.error?.message).toBe('setup failed: project setup failed: E: dependency left-pad is gone from the registry');
    const detail = t.error?.detail ?? '';
    expect(detail).toContain('E: dependency left-pad is gone from the registry');
    expect(detail).toContain('project setup failed (exit status 7)');
    expect(detail).toContain('noise line 3000');
    expect(detail).not.toMatch(/noise line 1\r?\n/);
    expect(detail.split('\n').length).toBeLessThanOrEqual(25);

    expect(t.setup).toMatchObject({ status: 'failed', source: 'pipeline.json', step: 'project setup', summary: 'project setup failed: E: dependency left-pad is gone from the registry' });
    expect(t.setup?.durationMs).toBeGreaterThan(0);
    const log = output.get(t.setup!.sessionId!) ?? '';
    // Packages and root commands as root, the project's own install as the agent user.
    expect(log).toContain('root step as root: preparing the toolchain');
    expect(log).toContain('project step as agent');
    expect(log).toContain('E: dependency left-pad is gone from the registry');
    expect(log).not.toContain('NEVER-42-RUNS');

    for (const s of t.stages) expect(s.status, s.name).toBe('pending');
    // Layers live in the shared cache with other repositories' layers: none is this repository's.
    expect((await app.api['layers.list']({})).filter((l) => l.repo === t.repoPath)).toEqual([]);

    // Retry in the same sandbox starts from setup, not from a stage that would find no toolchain.
    const retried = await app.api['tasks.retry']({ taskId: t.id });
    expect(retried.setup).toEqual({ status: 'pending', source: 'pipeline.json', lines: t.setup!.lines, unsupported: [] });
    const again = await waitForTask(app, t.id, (x) => x.phase !== 'running' && x.phase !== 'pulling-back', 10 * 60_000);
    expect(again.phase).toBe('failed');
    expect(again.error?.name).toBe('SetupFailed');
    expect(again.setup).toMatchObject({ status: 'failed', step: 'project setup' });
    expect(again.setup?.sessionId).not.toBe(t.setup!.sessionId);
    expect(output.get(again.setup!.sessionId!) ?? '').toContain('root step as root: preparing the toolchain');
    for (const s of again.stages) expect(s.status, s.name).toBe('pending');
    await app.api['tasks.destroy']({ taskId: t.id });
  }, 15 * 60_000);
});
