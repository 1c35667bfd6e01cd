// A host repository and a "sandbox" clone of it on branch factory/<id>, where a
// test writes what an agent (or an attacker) inside the sandbox would commit,
// bundles it and runs it through the real PullbackQuarantine.verify. Entries
// git's porcelain cannot make from Node (names that are not UTF-8, gitlinks,
// symlinks anywhere) go straight into the index with `update-index -z --index-info`.
import fs from 'node:fs';
import path from 'node:path';
import { PullbackQuarantine, type QuarantineOptions, type VerifiedPullback } from '../../main/pullback/quarantine.js';
import { gitIn, makeRepo, tempDir, type FixtureRepo } from './repo.js';
import { afterEach } from 'vitest';

export interface IndexEntry {
  mode: '100644' | '100755' | '120000' | '160000';
  /** Raw bytes allowed (any but NUL). */
  path: string | Buffer;
  /** Blob content (for 160000: omit and give `oid`, the submodule's commit). */
  content?: string | Buffer;
  oid?: string;
}

export interface GuestFixture {
  host: FixtureRepo;
  base: string;
  id: string;
  root: string;
  guest: {
    dir: string;
    write(rel: string, content: string | Buffer): void;
    remove(rel: string): void;
    /** Commits the working tree (git add -A). */
    commit(message: string): string;
    /** Adds entries to the index as they are (no working tree file needed). */
    stage(entries: IndexEntry[]): void;
    /** Commits the index only. */
    commitIndex(message: string): string;
    /** Bundles these revisions (by default the task branch since the base) into one file. */
    bundle(...revs: string[]): string;
  };
  quarantine(opts?: Partial<QuarantineOptions>): PullbackQuarantine;
  /** Bundles the task branch, places it in quarantine and verifies it. */
  verify(q?: PullbackQuarantine): Promise<VerifiedPullback>;
  cleanup(): void;
}

export async function guestFixture(opts: { id?: string; files?: Record<string, string>; root?: string; host?: FixtureRepo } = {}): Promise<GuestFixture> {
  const id = opts.id ?? 't1';
  // A given host is another fixture's (two ways of one task): that fixture cleans it up.
  const host = opts.host ?? (await makeRepo({ files: opts.files ?? { 'README.md': 'hello\n', 'src/a.txt': 'one\ntwo\nthree\n', 'old.txt': 'bye\n' } }));
  const base = host.head();
  const dir = tempDir('factory-guest-');
  gitIn(dir, ['clone', '-q', host.dir, '.']);
  gitIn(dir, ['checkout', '-q', '-b', `factory/${id}`]);
  const root = opts.root ?? tempDir('factory-quarantine-');
  const bundleFile = `${dir}.bundle`;
  const guest: GuestFixture['guest'] = {
    dir,
    write(rel, content) {
      fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
      fs.writeFileSync(path.join(dir, rel), content);
    },
    remove(rel) {
      fs.rmSync(path.join(dir, rel), { recursive: true, force: true });
    },
    commit(message) {
      gitIn(dir, ['add', '-A']);
      gitIn(dir, ['commit', '-q', '-m', message]);
      return gitIn(dir, ['rev-parse', 'HEAD']).trim();
    },
    stage(entries) {
      const lines = entries.map((e) => {
        const oid = e.oid ?? gitIn(dir, ['hash-object', '-w', '--stdin'], e.content ?? '').trim();
        return Buffer.concat([Buffer.from(`${e.mode} ${oid}\t`), Buffer.isBuffer(e.path) ? e.path : Buffer.from(e.path), Buffer.from([0])]);
      });
      gitIn(dir, ['update-index', '-z', '--index-info'], Buffer.concat(lines));
    },
    commitIndex(message) {
      gitIn(dir, ['commit', '-q', '-m', message]);
      return gitIn(dir, ['rev-parse', 'HEAD']).trim();
    },
    bundle(...revs) {
      gitIn(dir, ['bundle', 'create', '-q', bundleFile, ...(revs.length ? revs : [`refs/heads/factory/${id}`, `^${base}`])]);
      return bundleFile;
    },
  };
  const quarantine = (extra: Partial<QuarantineOptions> = {}) => new PullbackQuarantine({ root, maxBundleBytes: 64 * 1024 * 1024, ...extra });
  return {
    host,
    base,
    id,
    root,
    guest,
    quarantine,
    async verify(q = quarantine()) {
      const { bundlePath } = await q.prepare(id);
      fs.copyFileSync(guest.bundle(), bundlePath);
      return q.verify({ taskId: id, repoPath: host.dir, branch: `factory/${id}`, baseCommit: base, bundlePresent: true });
    },
    cleanup() {
      if (!opts.host) host.cleanup();
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(bundleFile, { force: true });
      if (!opts.root) fs.rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * A maker of guest fixtures for one test file: each fixture it makes is
 * cleaned up after the test that made it.
 */
export function guestFixtures(): (opts?: Parameters<typeof guestFixture>[0]) => Promise<GuestFixture> {
  const made: GuestFixture[] = [];
  afterEach(() => {
    while (made.length) made.pop()!.cleanup();
  });
  return async (opts) => {
    const f = await guestFixture(opts);
    made.push(f);
    return f;
  };
}
