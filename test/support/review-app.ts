// An app with one task in review, as the task service leaves it after a
// pull-back: a real result verified into the app's own quarantine and its task
// recorded in review. The VM layer is absent (no VM is needed once a result is
// in quarantine) and says so if called.
import fs from 'node:fs';
import path from 'node:path';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { PullbackQuarantine } from '../../main/pullback/quarantine.js';
import { appPaths, type AppPaths } from '../../main/state/paths.js';
import { StateStore } from '../../main/state/state-store.js';
import type { Task } from '../../common/domain.js';
import type { PullbackReview } from '../../common/review.js';
import { guestFixture, type GuestFixture } from './pullback-guest.js';
import { tempDir } from './repo.js';

const noVm = {
  images: { status: () => ({ state: 'missing' as const, version: 'test' }), ensure: async () => { throw new Error('no VM in this test'); } },
  qemu: { checkInstalled: async () => ({ ok: true, version: '8' }), start: async () => { throw new Error('no VM in this test'); } },
};

/** A task of the app in review, holding the fixture's result in the app's quarantine. */
export async function inReview(
  fx: GuestFixture,
  paths: AppPaths,
  opts: { review?: (r: PullbackReview) => PullbackReview; task?: Partial<Task>; cleanups: Array<() => Promise<void> | void> },
): Promise<FactoryApp> {
  const q = new PullbackQuarantine({ root: path.join(paths.data, 'quarantine') });
  const v = await fx.verify(q);
  fs.mkdirSync(path.join(paths.state, 'reviews'), { recursive: true });
  fs.writeFileSync(path.join(paths.state, 'reviews', `${fx.id}.json`), JSON.stringify(opts.review ? opts.review(v.review) : v.review));
  await new StateStore({ dir: paths.state }).saveTask({
    version: 1,
    task: {
      id: fx.id, title: 'a task', repoPath: fx.host.dir, baseRef: 'HEAD', baseCommit: fx.base, branch: `factory/${fx.id}`,
      createdAt: new Date().toISOString(), phase: 'review', sandbox: { status: 'destroyed' },
      stages: [{ name: 'build', status: 'passed' }],
      ...opts.task,
    },
    pullback: { headCommit: v.headCommit, bundleSha256: v.bundleSha256, bundleBytes: v.review.bundleBytes, empty: false },
  });
  const app = await createFactoryApp({ host: 'web', paths, vm: noVm });
  opts.cleanups.push(() => app.dispose());
  return app;
}

/** A guest fixture and the app folders of one test, both removed by `cleanups`. */
export async function reviewSetup(id: string, cleanups: Array<() => Promise<void> | void>): Promise<{ fx: GuestFixture; paths: AppPaths }> {
  const fx = await guestFixture({ id });
  const dataDir = tempDir('factory-data-');
  cleanups.push(() => fx.cleanup(), () => fs.rmSync(dataDir, { recursive: true, force: true }));
  return { fx, paths: appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') }) };
}
