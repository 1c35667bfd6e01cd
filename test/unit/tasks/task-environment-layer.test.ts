// Which cached layer a task boots on, and what a new layer records: only the
// tree the plan was keyed on gets one. A task seeded with uncommitted changes
// runs setup on other files, so it neither boots on the layer nor makes one,
// and a plan saved before layers were keyed on the tree gets none.
import { describe, expect, it } from 'vitest';
import type { Task } from '../../../common/domain.js';
import type { EnvironmentPlanPort, LayerStorePort } from '../../../main/tasks/environment-ports.js';
import { TaskEnvironment } from '../../../main/tasks/task-environment.js';
import { SettingsSchema } from '../../../main/state/settings.js';

const COMMIT = 'c'.repeat(40);
const TREE = 'e'.repeat(40);
const SETTINGS = SettingsSchema.parse({});

function environment() {
  const committed: Array<Parameters<LayerStorePort['commit']>[0]> = [];
  const layers: LayerStorePort = {
    find: async (key) => (key === 'key-1' ? { id: 'l1', disk: '/layers/l1/disk.qcow2', createdAt: '2026-01-01T00:00:00.000Z' } : undefined),
    acquire: () => () => {},
    commit: async (input) => {
      committed.push(input);
      return { id: 'l2', disk: '/layers/l2/disk.qcow2', createdAt: '2026-01-01T00:00:00.000Z' };
    },
    evict: async () => [],
    list: async () => ({ layers: [], broken: [] }),
    isInUse: () => false,
    remove: async () => {},
  };
  const env = new TaskEnvironment({
    planEnvironment: async () => { throw new Error('not planned here'); },
    layers,
    egress: { setStep: () => {}, allowEgress: () => {} },
    settings: () => SETTINGS,
    setSettings: () => SETTINGS,
    imageVersion: () => 'image-1',
    workDir: () => '/nonexistent',
  });
  return { env, committed };
}

const plan = (over: Partial<EnvironmentPlanPort> = {}): EnvironmentPlanPort => ({
  source: 'pipeline.json', summary: ['make'], env: {}, egressRequests: [], unsupported: [], cacheKey: 'key-1',
  steps: [{ name: 'project setup', user: 'agent', script: 'make\n', display: 'make', timeoutSeconds: 60 }],
  commit: COMMIT, tree: TREE, installDirs: ['node_modules'], ...over,
});

describe('a task and the cached layer of its plan', () => {
  it('boots on the layer only when its seed is the commit the plan was made at', async () => {
    const { env } = environment();
    expect((await env.layerFor(plan(), COMMIT))?.layer.id).toBe('l1');
    // Uncommitted changes: the seed is a commit on top, other files.
    expect(await env.layerFor(plan(), 'd'.repeat(40))).toBeUndefined();
    expect(env.layerAllowed(plan(), 'd'.repeat(40))).toBe(false);
    expect(await env.layerFor(plan(), undefined)).toBeUndefined();
    // A plan saved before layers were keyed on the tree.
    const { commit: _c, tree: _t, ...old } = plan();
    expect(await env.layerFor(old, COMMIT)).toBeUndefined();
    expect(env.layerAllowed(old, COMMIT)).toBe(false);
  });

  it('records the commit and tree that made a new layer', async () => {
    const { env, committed } = environment();
    await env.commitLayer({ repoPath: '/home/me/repo' } as Task, plan(), { disk: '/sandbox/overlay.qcow2' });
    expect(committed[0]).toMatchObject({ key: 'key-1', repo: '/home/me/repo', made: { commit: COMMIT, tree: TREE } });
    const { commit: _c, tree: _t, ...old } = plan();
    await expect(env.commitLayer({ repoPath: '/home/me/repo' } as Task, old, { disk: '/sandbox/overlay.qcow2' })).rejects.toThrow(/predates/);
  });
});
