import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { PullbackQuarantine, readBundleHeader } from '../../../main/pullback/quarantine.js';
import { parseRawNumstat } from '../../../main/pullback/review/listing.js';
import { guestFixtures } from '../../support/pullback-guest.js';
import { gitIn, type FixtureRepo } from '../../support/repo.js';

const fixture = guestFixtures();

/** A host repo with one commit and a "guest" clone of it on branch factory/<id>; bundles up to 1 MiB. */
async function setup(id = 't1') {
  const f = await fixture({ id });
  return { host: f.host, base: f.base, guest: f.guest, root: f.root, quarantine: f.quarantine({ maxBundleBytes: 1024 * 1024 }) };
}

async function place(q: PullbackQuarantine, id: string, bundleFile: string | Buffer) {
  const { bundlePath } = await q.prepare(id);
  if (typeof bundleFile === 'string') fs.copyFileSync(bundleFile, bundlePath);
  else fs.writeFileSync(bundlePath, bundleFile);
}

function verifyArgs(host: FixtureRepo, base: string, id = 't1') {
  return { taskId: id, repoPath: host.dir, branch: `factory/${id}`, baseCommit: base, bundlePresent: true };
}

function approveArgs(host: FixtureRepo, base: string, v: { headCommit: string; bundleSha256: string }) {
  return { taskId: 't1', repoPath: host.dir, branch: 'factory/t1', baseCommit: base, headCommit: v.headCommit, bundleSha256: v.bundleSha256, message: 'the task\n' };
}

describe('pull-back verification', () => {
  it('accepts a bundle of exactly the task branch and computes its diff', async () => {
    const { host, base, guest, quarantine } = await setup();
    guest.write('src/a.txt', 'one\n2\nthree\nfour\n');
    guest.write('new file.txt', 'fresh\n');
    guest.write('bin.dat', Buffer.from([0, 1, 2, 3, 0, 255]));
    fs.rmSync(path.join(guest.dir, 'old.txt'));
    const head = guest.commit('change');
    await place(quarantine, 't1', guest.bundle('refs/heads/factory/t1', `^${base}`));
    const v = await quarantine.verify(verifyArgs(host, base));
    expect(v.headCommit).toBe(head);
    expect(v.empty).toBe(false);
    const files = Object.fromEntries(v.review.files.map((f) => [f.path, f]));
    expect(files['src/a.txt']).toMatchObject({ status: 'modified', added: 2, removed: 1, binary: false });
    expect(files['new file.txt']).toMatchObject({ status: 'added', added: 1, removed: 0 });
    expect(files['old.txt']).toMatchObject({ status: 'deleted', removed: 1 });
    expect(files['bin.dat']).toMatchObject({ status: 'added', binary: true });
    expect(v.review.added).toBe(3);
    expect(v.review.patch).toContain('+four');
    expect(v.review.patchTruncated).toBe(false);
    expect(v.review.checks.every((c) => c.ok)).toBe(true);
    // The host repo did not receive the objects.
    expect(() => gitIn(host.dir, ['cat-file', '-e', head])).toThrow();
  });

  it('caps the patch and says so', async () => {
    const { host, base, guest, root } = await setup();
    guest.write('big.txt', 'x'.repeat(100) + '\n' + 'line\n'.repeat(5000));
    guest.commit('big');
    const q = new PullbackQuarantine({ root, maxPatchBytes: 1000 });
    await place(q, 't1', guest.bundle('refs/heads/factory/t1', `^${base}`));
    const v = await q.verify(verifyArgs(host, base));
    expect(v.review.patchTruncated).toBe(true);
    expect(Buffer.byteLength(v.review.patch)).toBeLessThanOrEqual(1000);
    expect(v.review.files[0]).toMatchObject({ path: 'big.txt', added: 5001 });
  });

  it('refuses a bundle with an extra ref', async () => {
    const { host, base, guest, quarantine } = await setup();
    guest.write('x.txt', 'x\n');
    guest.commit('x');
    gitIn(guest.dir, ['branch', 'sneaky']);
    await place(quarantine, 't1', guest.bundle('refs/heads/factory/t1', 'refs/heads/sneaky', `^${base}`));
    await expect(quarantine.verify(verifyArgs(host, base))).rejects.toThrow(/must carry exactly refs\/heads\/factory\/t1; it carries: .*sneaky/);
  });

  it('refuses a bundle whose ref has the wrong name', async () => {
    const { host, base, guest, quarantine } = await setup();
    guest.write('x.txt', 'x\n');
    guest.commit('x');
    gitIn(guest.dir, ['branch', '-m', 'factory/other']);
    await place(quarantine, 't1', guest.bundle('refs/heads/factory/other', `^${base}`));
    await expect(quarantine.verify(verifyArgs(host, base))).rejects.toThrow(/it carries: refs\/heads\/factory\/other/);
  });

  it('refuses something that is not a bundle', async () => {
    const { host, base, quarantine } = await setup();
    await place(quarantine, 't1', Buffer.from('#!/bin/sh\nrm -rf /\n\n'));
    await expect(quarantine.verify(verifyArgs(host, base))).rejects.toThrow(/not a git bundle/);
    await place(quarantine, 't1', Buffer.from('# v2 git bundle\n' + 'a'.repeat(40) + ' refs/heads/factory/t1\n\nnot a pack'));
    await expect(quarantine.verify(verifyArgs(host, base))).rejects.toThrow(/PullbackRejected|verify failed|integrity|prerequisite|lacks/i);
  });

  it('refuses a bundle over the size cap', async () => {
    const { host, base, guest, root } = await setup();
    guest.write('noise.bin', Buffer.from(Array.from({ length: 20_000 }, () => Math.floor(Math.random() * 256))));
    guest.commit('noise');
    const q = new PullbackQuarantine({ root, maxBundleBytes: 4096 });
    await place(q, 't1', guest.bundle('refs/heads/factory/t1', `^${base}`));
    await expect(q.verify(verifyArgs(host, base))).rejects.toThrow(/over the 4096 byte cap/);
  });

  it('refuses a bundle whose prerequisite the host does not have', async () => {
    const { host, base, guest, quarantine } = await setup();
    guest.write('a.txt', 'a\n');
    const unknown = guest.commit('only in the guest');
    guest.write('b.txt', 'b\n');
    guest.commit('on top');
    await place(quarantine, 't1', guest.bundle('refs/heads/factory/t1', `^${unknown}`));
    await expect(quarantine.verify(verifyArgs(host, base))).rejects.toThrow(/bundle verify failed|lacks/i);
  });

  it('refuses objects that fail fsck', async () => {
    const { host, base, guest, quarantine } = await setup();
    const tree = gitIn(guest.dir, ['rev-parse', `${base}^{tree}`]).trim();
    // A commit with a malformed author line: git itself would never write it.
    const bad = gitIn(guest.dir, ['hash-object', '-t', 'commit', '-w', '--literally', '--stdin'],
      `tree ${tree}\nparent ${base}\nauthor broken <no-end 1 +0000\ncommitter A <a@b> 1 +0000\n\nbad\n`).trim();
    gitIn(guest.dir, ['update-ref', 'refs/heads/factory/t1', bad]);
    await place(quarantine, 't1', guest.bundle('refs/heads/factory/t1', `^${base}`));
    await expect(quarantine.verify(verifyArgs(host, base))).rejects.toThrow(/integrity check/);
  });

  it('refuses a branch that does not descend from the base', async () => {
    const { host, base, guest, quarantine } = await setup();
    gitIn(guest.dir, ['checkout', '-q', '--orphan', 'tmp']);
    guest.write('z.txt', 'z\n');
    guest.commit('unrelated root');
    gitIn(guest.dir, ['branch', '-f', 'factory/t1', 'tmp']);
    await place(quarantine, 't1', guest.bundle('refs/heads/factory/t1'));
    await expect(quarantine.verify(verifyArgs(host, base))).rejects.toThrow(/does not descend from the base/);
  });

  it('parses bundle headers and git -z listings', async () => {
    const { base, guest } = await setup();
    guest.write('x.txt', 'x\n');
    const head = guest.commit('x');
    const h = await readBundleHeader(guest.bundle('refs/heads/factory/t1', `^${base}`));
    expect(h.refs).toEqual([{ sha: head, name: 'refs/heads/factory/t1' }]);
    expect(h.prerequisites).toEqual([base]);
    const oid = (c: string) => c.repeat(40);
    const raw = Buffer.from(
      `:100644 100644 ${oid('a')} ${oid('a')} R100\0a\0b\0:100644 100644 ${oid('b')} ${oid('c')} M\0c d\0:000000 100755 ${oid('0')} ${oid('d')} A\0x.bin\0` +
        '0\t0\t\0a\0b\0' + '1\t0\tc d\0' + '-\t-\tx.bin\0',
    );
    expect(parseRawNumstat(raw)).toEqual([
      { status: 'renamed', path: 'b', oldPath: 'a', added: 0, removed: 0, binary: false, oldMode: 'file', newMode: 'file', oldOid: oid('a'), newOid: oid('a') },
      { status: 'modified', path: 'c d', added: 1, removed: 0, binary: false, oldMode: 'file', newMode: 'file', oldOid: oid('b'), newOid: oid('c') },
      { status: 'added', path: 'x.bin', added: 0, removed: 0, binary: true, oldMode: 'none', newMode: 'executable', oldOid: oid('0'), newOid: oid('d') },
    ]);
  });
});

describe('approve', () => {
  it('creates the branch with the change and leaves HEAD, index and working tree alone', async () => {
    const { host, base, guest, quarantine } = await setup();
    // A dirty host repo: a staged change and an untracked file must survive untouched.
    host.write('README.md', 'edited on the host\n');
    host.git('add', 'README.md');
    host.write('scratch.txt', 'mine\n');
    host.write('src/a.txt', 'unstaged\n');
    const before = { head: host.head(), symbolic: host.git('symbolic-ref', 'HEAD'), status: host.status(), diffCached: host.git('diff', '--cached') };
    guest.write('feature.txt', 'done\n');
    const head = guest.commit('feature');
    await place(quarantine, 't1', guest.bundle('refs/heads/factory/t1', `^${base}`));
    const v = await quarantine.verify(verifyArgs(host, base));
    const res = await quarantine.approve(approveArgs(host, base, v));
    // One new commit on the base with the reviewed tree: the sandbox's own commit stays out.
    expect(res.branch).toBe('factory/t1');
    expect(host.git('rev-parse', 'refs/heads/factory/t1', 'factory/t1^{tree}', 'factory/t1^').trim().split('\n'))
      .toEqual([res.commit, gitIn(guest.dir, ['rev-parse', `${head}^{tree}`]).trim(), base]);
    expect(host.git('log', '-1', '--format=%B', 'factory/t1').trim()).toBe('the task');
    expect(() => host.git('cat-file', '-e', head)).toThrow();
    expect(host.git('show', 'factory/t1:feature.txt')).toBe('done\n');
    expect(host.head()).toBe(before.head);
    expect(host.git('symbolic-ref', 'HEAD')).toBe(before.symbolic);
    expect(host.status()).toBe(before.status);
    expect(host.git('diff', '--cached')).toBe(before.diffCached);
    expect(fs.readFileSync(path.join(host.dir, 'scratch.txt'), 'utf8')).toBe('mine\n');
    expect(fs.existsSync(path.join(host.dir, '.git', 'FETCH_HEAD'))).toBe(false);
    expect(fs.existsSync(quarantine.dirFor('t1'))).toBe(false);
  });

  it('refuses when the branch exists and never overwrites it', async () => {
    const { host, base, guest, quarantine } = await setup();
    host.git('branch', 'factory/t1', base);
    guest.write('feature.txt', 'done\n');
    guest.commit('feature');
    await place(quarantine, 't1', guest.bundle('refs/heads/factory/t1', `^${base}`));
    const v = await quarantine.verify(verifyArgs(host, base));
    await expect(
      quarantine.approve(approveArgs(host, base, v)),
    ).rejects.toMatchObject({ name: 'BranchExists' });
    expect(host.git('rev-parse', 'refs/heads/factory/t1').trim()).toBe(base);
  });

  it('refuses a bundle that changed after verification', async () => {
    const { host, base, guest, quarantine } = await setup();
    guest.write('feature.txt', 'done\n');
    guest.commit('feature');
    await place(quarantine, 't1', guest.bundle('refs/heads/factory/t1', `^${base}`));
    const v = await quarantine.verify(verifyArgs(host, base));
    fs.appendFileSync(path.join(quarantine.dirFor('t1'), 'result.bundle'), 'x');
    await expect(
      quarantine.approve(approveArgs(host, base, v)),
    ).rejects.toThrow(/changed or vanished/);
    expect(() => host.git('rev-parse', '--verify', '--quiet', 'refs/heads/factory/t1')).toThrow();
  });
});
