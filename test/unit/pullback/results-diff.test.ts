// The diff between two ways of one task: both results verified into quarantine
// by the real PullbackQuarantine, then one head diffed against the other with
// the other's objects lent for the one command. Hostile content stays text for
// the view to escape, each sandbox's credential values are masked, the cap cuts
// the patch and says so, and neither quarantine repository is changed.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { diffBetweenResults } from '../../../main/pullback/review/results-diff.js';
import { guestFixtures } from '../../support/pullback-guest.js';

const fixture = guestFixtures();
const refsOf = (qrepo: string) => execFileSync('git', ['for-each-ref', '--format=%(refname) %(objectname)'], { env: { ...process.env, GIT_DIR: qrepo }, encoding: 'utf8' });

describe('the diff between two ways', () => {
  it("shows what way 2 did differently from way 1, masks both sandboxes' keys, and changes neither quarantine", async () => {
    const one = await fixture({ id: 'w1' });
    const two = await fixture({ id: 'w2', host: one.host, root: one.root });
    one.guest.write('src/a.txt', 'one\ntwo\nthree\nfour from way 1\n');
    one.guest.write('shared.txt', 'the same in both\n');
    one.guest.commit('way 1');
    two.guest.write('src/a.txt', 'one\ntwo\nthree\nfour from way 2 \u202e}{\n');
    two.guest.write('shared.txt', 'the same in both\n');
    two.guest.write('only-two.txt', 'key sk-way-two-placeholder-value in a file\n');
    two.guest.commit('way 2');
    const q = one.quarantine();
    const v1 = await one.verify(q);
    const v2 = await two.verify(q);
    const a = { qrepo: path.join(q.dirFor('w1'), 'repo.git'), head: v1.headCommit };
    const b = { qrepo: path.join(q.dirFor('w2'), 'repo.git'), head: v2.headCommit };
    const before = [refsOf(a.qrepo), refsOf(b.qrepo)];
    const d = await diffBetweenResults(a, b, { timeoutMs: 30_000, maxPatchBytes: 1024 * 1024, credentials: [{ id: 'anthropic', value: 'sk-way-two-placeholder-value' }] });
    expect(d.patchTruncated).toBe(false);
    expect(d.patch).toContain('-four from way 1');
    // The bidi character stays in the text: the view escapes it (as the review's patch does).
    expect(d.patch).toContain('+four from way 2 \u202e}{');
    expect(d.patch).toContain('diff --git a/only-two.txt b/only-two.txt');
    expect(d.patch).not.toContain('shared.txt');
    expect(d.patch).not.toContain('sk-way-two-placeholder-value');
    expect([refsOf(a.qrepo), refsOf(b.qrepo)]).toEqual(before);
    // The other way round is the reverse change.
    const back = await diffBetweenResults(b, a, { timeoutMs: 30_000, maxPatchBytes: 1024 * 1024 });
    expect(back.patch).toContain('+four from way 1');
  });

  it('cuts the diff at its cap and says so', async () => {
    const one = await fixture({ id: 'w1' });
    const two = await fixture({ id: 'w2', host: one.host, root: one.root });
    one.guest.write('big.txt', 'way one line\n'.repeat(2000));
    one.guest.commit('way 1');
    two.guest.write('big.txt', 'way two line\n'.repeat(2000));
    two.guest.commit('way 2');
    const q = one.quarantine();
    const [v1, v2] = [await one.verify(q), await two.verify(q)];
    const d = await diffBetweenResults({ qrepo: path.join(q.dirFor('w1'), 'repo.git'), head: v1.headCommit }, { qrepo: path.join(q.dirFor('w2'), 'repo.git'), head: v2.headCommit }, { timeoutMs: 30_000, maxPatchBytes: 4096 });
    expect(d.patchTruncated).toBe(true);
    expect(Buffer.byteLength(d.patch)).toBeLessThanOrEqual(4096);
  });

  it('refuses a head that is not a commit id, running nothing', async () => {
    await expect(diffBetweenResults({ qrepo: '/nowhere', head: '--output=/tmp/x' }, { qrepo: '/nowhere', head: 'a'.repeat(40) }, { timeoutMs: 1000, maxPatchBytes: 1024 })).rejects.toThrow(/bad head commit/);
  });
});
