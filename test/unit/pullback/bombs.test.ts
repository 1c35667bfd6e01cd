// A sandbox returns a result bundle built to exhaust the host: a pack of a few
// hundred bytes whose delta declares a blob of 256 MiB or 2 GiB. The real
// PullbackQuarantine.verify must refuse it, naming the object, its declared
// size and the cap, while every git process it starts stays small and the
// whole refusal stays quick. The peak RSS of each git child is measured with
// GNU time around the real git (test/support/git-rss.ts).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { HOST_GIT_LIMITS } from '../../../main/git/git-limits.js';
import { runGit } from '../../../main/git/host-git.js';
import { PullbackQuarantine, readBundleHeader } from '../../../main/pullback/quarantine.js';
import { installGitRssProbe, largest, type GitRssProbe } from '../../support/git-rss.js';
import { buildBundle, buildPack, commitObject, deltaBombBundle, objectId, treeObject } from '../../support/pack-bomb.js';
import { gitIn, makeRepo, tempDir } from '../../support/repo.js';

const MiB = 1024 * 1024;
/** The bound stated for every git child while a bomb is being refused. */
const GIT_CHILD_RSS_BOUND_KIB = 128 * 1024;
/** Wall-clock bound for the whole refusal. */
const REFUSAL_TIME_BOUND_MS = 15_000;

let probe: GitRssProbe;
beforeAll(async () => {
  probe = installGitRssProbe();
  // The probe sits between prlimit and git: it sees the limit git really runs under.
  const r = await runGit(['--version'], { limits: { ...HOST_GIT_LIMITS, addressSpaceBytes: 1024 * MiB } });
  expect(r.code).toBe(0);
  expect(probe.runs().map((x) => x.addressLimit)).toEqual([String(1024 * 1024)]);
  probe.reset();
});
afterAll(() => probe.restore());

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

async function hostAndQuarantine(id: string) {
  const host = await makeRepo({ files: { 'README.md': 'hello\n', 'src/a.txt': 'one\n' } });
  const root = tempDir('factory-quarantine-');
  cleanups.push(() => {
    host.cleanup();
    fs.rmSync(root, { recursive: true, force: true });
  });
  const quarantine = new PullbackQuarantine({ root });
  const args = { taskId: id, repoPath: host.dir, branch: `factory/${id}`, baseCommit: host.head(), bundlePresent: true };
  return { host, quarantine, args };
}

function describeRuns(): string {
  return probe.runs().map((r) => `${r.maxRssKiB} KiB ${r.elapsedS}s exit ${r.exitStatus}: ${r.command.slice(0, 100)}`).join('\n');
}

describe('delta bombs in a returned bundle', () => {
  for (const [label, size] of [['256 MiB', 256 * MiB], ['2 GiB', 2048 * MiB]] as const) {
    it(`refuses a bundle whose delta declares a ${label} blob, with every git child small and quick`, async () => {
      const id = `bomb${size}`;
      const { host, quarantine, args } = await hostAndQuarantine(id);
      const { bundle, bombId } = deltaBombBundle({ base: args.baseCommit, ref: `refs/heads/${args.branch}`, resultSize: size });
      expect(bundle.length).toBeLessThan(16 * 1024);
      const { bundlePath } = await quarantine.prepare(id);
      fs.writeFileSync(bundlePath, bundle);

      probe.reset();
      const started = Date.now();
      const outcome = await quarantine.verify(args).then(() => null, (e: unknown) => e as Error);
      const elapsed = Date.now() - started;
      const runs = probe.runs();
      const peak = largest(runs);
      console.log(`${label} bomb (${bundle.length} byte bundle): ${elapsed} ms, ${runs.length} git runs, peak ${peak?.maxRssKiB} KiB\n${describeRuns()}`);

      expect(outcome, 'the bomb must be refused').toBeInstanceOf(Error);
      expect(outcome!.name).toBe('PullbackRejected');
      // Names the object, its declared size and the cap.
      expect(outcome!.message).toMatch(new RegExp(`declares ${size} bytes`));
      expect(outcome!.message).toMatch(/cap of \d+ bytes per object/);
      expect(outcome!.message).toMatch(/pack object 4 of 4 \(a blob, delta on pack object 3/);
      for (const r of runs) expect(r.maxRssKiB, `${r.command}\n${describeRuns()}`).toBeLessThan(GIT_CHILD_RSS_BOUND_KIB);
      expect(elapsed).toBeLessThan(REFUSAL_TIME_BOUND_MS);
      // Nothing reached the host repository.
      expect(() => gitIn(host.dir, ['cat-file', '-e', bombId])).toThrow();
      expect(() => gitIn(host.dir, ['rev-parse', '--verify', '--quiet', `refs/heads/${args.branch}`])).toThrow();
    }, 300_000);
  }
});

/** A bare repo (outside any quarantine folder) whose host objects the bomb builds on. */
async function bombRepo(size: number, root = tempDir('factory-bomb-')) {
  const { host, args } = await hostAndQuarantine(`raw${size}`);
  const { bundle, head } = deltaBombBundle({ base: args.baseCommit, ref: `refs/heads/${args.branch}`, resultSize: size });
  const file = path.join(root, 'result.bundle');
  fs.writeFileSync(file, bundle);
  const repo = path.join(root, 'repo.git');
  gitIn(root, ['init', '-q', '--bare', repo]);
  fs.writeFileSync(path.join(repo, 'objects', 'info', 'alternates'), path.join(host.dir, '.git', 'objects') + '\n');
  cleanups.push(() => fs.rmSync(root, { recursive: true, force: true }));
  return { host, args, file, repo, head, packOffset: (await readBundleHeader(file)).packOffset };
}

describe('git itself stays bounded on a bomb, even without the pre-scan', () => {
  for (const [label, size] of [['256 MiB', 256 * MiB], ['2 GiB', 2048 * MiB]] as const) {
    it(`index-pack of the ${label} bomb under the quarantine's bounds dies at its allocation limit, small`, async () => {
      const { quarantine } = await hostAndQuarantine(`ip${size}`);
      const { file, repo, packOffset } = await bombRepo(size);
      probe.reset();
      const r = await runGit(['index-pack', '--stdin', '--fix-thin', '--strict'], {
        cwd: repo, env: { GIT_DIR: repo }, inputFile: { path: file, start: packOffset }, limits: quarantine.gitLimits,
      });
      const [run] = probe.runs();
      console.log(`index-pack, ${label} bomb, quarantine bounds: exit ${r.code} ${r.signal ?? ''}, ${run?.maxRssKiB} KiB, ${run?.elapsedS}s: ${r.stderr.trim()}`);
      expect(r.code).not.toBe(0);
      expect(r.limitExceeded).toBe('memory');
      expect(r.stderr).toMatch(new RegExp(`attempting to allocate ${size + 1} over limit ${quarantine.gitLimits.allocBytes}`));
      expect(run!.addressLimit).toBe(String(Math.floor(quarantine.gitLimits.addressSpaceBytes / 1024)));
      expect(run!.maxRssKiB).toBeLessThan(GIT_CHILD_RSS_BOUND_KIB);
    }, 120_000);

    it(`index-pack of the ${label} bomb under an address-space limit alone fails to allocate, small`, async () => {
      const { file, repo, packOffset } = await bombRepo(size);
      const limit = 192 * MiB;
      probe.reset();
      const r = await runGit(['index-pack', '--stdin', '--fix-thin', '--strict'], {
        cwd: repo, env: { GIT_DIR: repo }, inputFile: { path: file, start: packOffset }, limits: { addressSpaceBytes: limit, cpuSeconds: 60 },
      });
      const [run] = probe.runs();
      console.log(`index-pack, ${label} bomb, ${limit / MiB} MiB address space only: exit ${r.code}, ${run?.maxRssKiB} KiB: ${r.stderr.trim()}`);
      expect(r.stderr).not.toMatch(/over limit/);
      expect(r.limitExceeded).toBe('memory');
      expect(run!.addressLimit).toBe(String(limit / 1024));
      expect(run!.maxRssKiB).toBeLessThan(limit / 1024);
    }, 120_000);
  }

  it('a diff that would read the 256 MiB bomb inside a quarantine folder is bounded without being asked', async () => {
    const size = 256 * MiB;
    const { quarantine } = await hostAndQuarantine('diffbomb');
    // Built outside the quarantine (unbounded, as the old code did), then moved in.
    const { repo, head, args, file, packOffset } = await bombRepo(size);
    gitIn(repo, ['index-pack', '--stdin', '--fix-thin'], fs.readFileSync(file).subarray(packOffset));
    const inside = path.join(quarantine.dirFor('diffbomb'), 'repo.git');
    fs.mkdirSync(path.dirname(inside), { recursive: true });
    fs.renameSync(repo, inside);
    probe.reset();
    const r = await runGit(['diff', '--no-ext-diff', '--no-textconv', '--patch', args.baseCommit, head], { cwd: inside, env: { GIT_DIR: inside } });
    const [run] = probe.runs();
    console.log(`git diff --patch over the 256 MiB bomb in a quarantine folder: exit ${r.code}, ${run?.maxRssKiB} KiB: ${r.stderr.trim()}`);
    expect(r.limitExceeded).toBe('memory');
    expect(run!.maxRssKiB).toBeLessThan(GIT_CHILD_RSS_BOUND_KIB);
  }, 120_000);
});

describe('a diff bomb in a returned bundle', () => {
  it('refuses a result whose diff would burn CPU past its bound, saying so', async () => {
    const digits = () => Array.from(crypto.randomBytes(512 * 1024), (x) => `${x % 10}\n`).join('');
    const host = await makeRepo({ files: { 'data.txt': digits() } });
    const root = tempDir('factory-quarantine-');
    const guest = tempDir('factory-guest-');
    cleanups.push(() => [host.dir, root, guest].forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
    const quarantine = new PullbackQuarantine({ root, gitCpuSeconds: 1 });
    gitIn(guest, ['clone', '-q', host.dir, '.']);
    gitIn(guest, ['checkout', '-q', '-b', 'factory/cpu']);
    fs.writeFileSync(path.join(guest, 'data.txt'), digits()); // 1 MiB of one-digit lines, all different
    gitIn(guest, ['-c', 'user.name=A', '-c', 'user.email=a@b', 'commit', '-qam', 'rewrite']);
    const bundleFile = `${guest}.bundle`;
    cleanups.push(() => fs.rmSync(bundleFile, { force: true }));
    gitIn(guest, ['bundle', 'create', '-q', bundleFile, 'refs/heads/factory/cpu', `^${host.head()}`]);
    const { bundlePath } = await quarantine.prepare('cpu');
    fs.copyFileSync(bundleFile, bundlePath);
    probe.reset();
    const started = Date.now();
    const err = await quarantine.verify({ taskId: 'cpu', repoPath: host.dir, branch: 'factory/cpu', baseCommit: host.head(), bundlePresent: true })
      .then(() => null, (e: Error) => e);
    console.log(`diff CPU bomb: ${Date.now() - started} ms: ${err?.message}\n${describeRuns()}`);
    expect(err).toMatchObject({ name: 'PullbackRejected' });
    expect(err!.message).toMatch(/^the review could not be computed: git diff .*exceeded its CPU time bound of 1 s/);
  }, 120_000);
});

describe('objects the pack does not carry, checked by id before the diff', () => {
  /** A host repo whose base commit has big.bin (3 MiB), and a branch the base does not contain with other.bin (3 MiB). */
  async function hostWithBigFiles(id: string) {
    const host = await makeRepo({ files: { 'README.md': 'hello\n' } });
    fs.writeFileSync(path.join(host.dir, 'big.bin'), crypto.randomBytes(3 * MiB));
    const base = host.commit('assets');
    host.git('checkout', '-q', '-b', 'elsewhere');
    const other = crypto.randomBytes(3 * MiB);
    fs.writeFileSync(path.join(host.dir, 'other.bin'), other);
    host.commit('not in the base');
    host.git('checkout', '-q', 'main');
    const root = tempDir('factory-quarantine-');
    cleanups.push(() => {
      host.cleanup();
      fs.rmSync(root, { recursive: true, force: true });
    });
    const quarantine = new PullbackQuarantine({ root, resultCaps: { maxObjectBytes: 2 * MiB } });
    const args = { taskId: id, repoPath: host.dir, branch: `factory/${id}`, baseCommit: base, bundlePresent: true };
    return { host, base, quarantine, args, otherId: objectId('blob', other), bigId: host.git('rev-parse', `${base}:big.bin`).trim() };
  }

  /** A hand-made result: one commit on the base whose tree is `files` (ids only; the pack carries just the commit and tree). */
  async function place(q: PullbackQuarantine, id: string, base: string, files: Array<{ name: string; id: string }>) {
    const tree = treeObject(files);
    const commit = commitObject(objectId('tree', tree), base, 'reuse what the host has');
    const head = objectId('commit', commit);
    const pack = buildPack([{ kind: 'full', type: 'commit', data: commit }, { kind: 'full', type: 'tree', data: tree }]);
    const { bundlePath } = await q.prepare(id);
    fs.writeFileSync(bundlePath, buildBundle({ base, head, ref: `refs/heads/factory/${id}`, pack }));
  }

  it('refuses a result that borrows a host object over the cap it never sent', async () => {
    const { quarantine, args, base, otherId, bigId } = await hostWithBigFiles('borrow');
    await place(quarantine, 'borrow', base, [{ name: 'README.md', id: objectId('blob', Buffer.from('hello\n')) }, { name: 'big.bin', id: bigId }, { name: 'copy.bin', id: otherId }]);
    await expect(quarantine.verify(args)).rejects.toThrow(
      `the result brings blob ${otherId} at "copy.bin", which is 3145728 bytes (3 MiB), over the cap of 2097152 bytes per object (2 MiB)`,
    );
  });

  it('refuses a result whose diff would read a host file over the cap (here: by deleting it)', async () => {
    const { quarantine, args, base, bigId } = await hostWithBigFiles('delete');
    await place(quarantine, 'delete', base, [{ name: 'README.md', id: objectId('blob', Buffer.from('hello\n')) }]);
    await expect(quarantine.verify(args)).rejects.toThrow(
      `the diff would read blob ${bigId} at "big.bin", which is 3145728 bytes (3 MiB), over the cap of 2097152 bytes per object (2 MiB)`,
    );
  });
});

describe('ordinary results under the caps', () => {
  it('still accepts a result with a few files and a real 5 MiB binary file', async () => {
    const id = 'ordinary';
    const { host, quarantine, args } = await hostAndQuarantine(id);
    const guest = tempDir('factory-guest-');
    cleanups.push(() => fs.rmSync(guest, { recursive: true, force: true }));
    gitIn(guest, ['clone', '-q', host.dir, '.']);
    gitIn(guest, ['checkout', '-q', '-b', args.branch]);
    fs.writeFileSync(path.join(guest, 'README.md'), 'hello\nmore\n');
    fs.mkdirSync(path.join(guest, 'assets'));
    const binary = crypto.randomBytes(5 * MiB);
    fs.writeFileSync(path.join(guest, 'assets', 'model.bin'), binary);
    fs.writeFileSync(path.join(guest, 'src', 'b.ts'), 'export const b = 1;\n'.repeat(2000));
    gitIn(guest, ['add', '-A']);
    gitIn(guest, ['-c', 'user.name=A', '-c', 'user.email=a@b', 'commit', '-q', '-m', 'work']);
    const bundleFile = path.join(guest, '..', `${path.basename(guest)}.bundle`);
    cleanups.push(() => fs.rmSync(bundleFile, { force: true }));
    gitIn(guest, ['bundle', 'create', '-q', bundleFile, `refs/heads/${args.branch}`, `^${args.baseCommit}`]);
    const { bundlePath } = await quarantine.prepare(id);
    fs.copyFileSync(bundleFile, bundlePath);

    probe.reset();
    const v = await quarantine.verify(args);
    const files = Object.fromEntries(v.review.files.map((f) => [f.path, f]));
    expect(files['assets/model.bin']).toMatchObject({ status: 'added', binary: true });
    expect(files['src/b.ts']).toMatchObject({ status: 'added', added: 2000 });
    expect(files['README.md']).toMatchObject({ status: 'modified', added: 1 });
    expect(v.review.checks.every((c) => c.ok)).toBe(true);
    const res = await quarantine.approve({
      taskId: id, repoPath: host.dir, branch: args.branch, baseCommit: args.baseCommit, headCommit: v.headCommit, bundleSha256: v.bundleSha256, message: 'work\n',
    });
    // One new commit holding the reviewed tree lands, not the sandbox's own.
    expect(gitIn(host.dir, ['rev-parse', args.branch, `${args.branch}^{tree}`, `${args.branch}^`]).trim().split('\n'))
      .toEqual([res.commit, gitIn(guest, ['rev-parse', 'HEAD^{tree}']).trim(), args.baseCommit]);
    expect(gitIn(host.dir, ['rev-parse', `${args.branch}:assets/model.bin`]).trim()).toBe(objectId('blob', binary));
    console.log(`ordinary result: ${probe.runs().length} git runs, peak ${largest(probe.runs())?.maxRssKiB} KiB\n${describeRuns()}`);
    // Every git that read the sandbox's data (approve's fetch included) ran under the quarantine's bounds.
    const readers = probe.runs().filter((r) => /^git (bundle verify|index-pack|cat-file|rev-list|merge-base|diff|commit-tree|fetch)/.test(r.command));
    expect(readers.map((r) => r.command.split(' ').slice(0, 2).join(' '))).toEqual(expect.arrayContaining(['git index-pack', 'git diff', 'git commit-tree', 'git fetch']));
    for (const r of readers) expect(r.addressLimit, r.command).toBe(String(Math.floor(quarantine.gitLimits.addressSpaceBytes / 1024)));
  }, 120_000);
});
