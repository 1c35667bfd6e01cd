// The leak check looks where a sandbox's output ends up on the host, not only
// at its disk and memory: the serial console log, the host's logs of the task's
// terminal sessions (real TerminalService, real processes in a pty) and the
// work it returned (a real bundle verified into the real quarantine).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import * as pty from 'node-pty';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemorySecretStore } from '../../../main/credentials/keychain.js';
import { LeakChecker } from '../../../main/credentials/leak-check.js';
import { taskTerminalLogs } from '../../../main/credentials/leak-sources.js';
import { PullbackQuarantine } from '../../../main/pullback/quarantine.js';
import { ptySource } from '../../../main/terminal/pty-source.js';
import { TerminalService } from '../../../main/terminal/terminal-service.js';
import { gitIn, makeRepo, tempDir, type FixtureRepo } from '../../support/repo.js';

const KEY = `ghp_${randomBytes(18).toString('hex')}`;

describe('leak check places', () => {
  let dir: string;
  const secrets = new MemorySecretStore();
  const checker = new LeakChecker({ secrets });
  const check = (sources: Parameters<LeakChecker['check']>[0]['sources']) => checker.check({ sandboxId: 't1', credentials: [{ id: 'gh' }], sources });

  beforeAll(async () => {
    dir = tempDir('fiab-leak-places-');
    await secrets.put('gh', KEY);
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('the serial console log: a guest that writes the key to its console is caught', async () => {
    const serial = path.join(dir, 'serial.log');
    const console_ = `[    1.234] factory-init: starting\r\n[    9.000] debug: token=${KEY}\r\n`;
    fs.writeFileSync(serial, console_);
    const r = await check({ workDir: dir, serialLog: serial });
    expect(r.verdict).toBe('leak');
    expect(r.hits).toEqual([{ credentialId: 'gh', encoding: 'raw', source: 'serial-log', offset: console_.indexOf(KEY) }]);
    fs.writeFileSync(serial, '[    1.234] factory-init: starting\r\n');
    expect((await check({ workDir: dir, serialLog: serial })).verdict).toBe('clean');
    const none = await check({ workDir: dir, serialLog: path.join(dir, 'absent.log') });
    expect(none.verdict).toBe('clean');
    expect(none.scanned).toEqual([{ source: 'serial log', bytes: 0, note: 'no serial log' }]);
  });

  it('terminal logs that cannot be listed are an error and unreadable metadata is scanned anyway; no folder is an empty one', async () => {
    const where = tempDir();
    try {
      expect(await taskTerminalLogs(path.join(where, 'never-written'), 't1')).toEqual([]);
      const notAFolder = path.join(where, 'terminals');
      fs.writeFileSync(notAFolder, 'a file where the log folder should be');
      await expect(taskTerminalLogs(notAFolder, 't1')).rejects.toMatchObject({ code: 'ENOTDIR' });
      // A log whose metadata cannot be read might be this task's: it is scanned, not skipped.
      const logs = path.join(where, 'logs');
      fs.mkdirSync(logs);
      fs.writeFileSync(path.join(logs, 'sess-1.json'), '{ not json');
      fs.writeFileSync(path.join(logs, 'sess-1.log'), 'output');
      expect(await taskTerminalLogs(logs, 't1')).toEqual([path.join(logs, 'sess-1.log')]);
    } finally {
      fs.rmSync(where, { recursive: true, force: true });
    }
  });

  it("the host's logs of the task's stages and sandbox shells, but not the user's own host shell", async () => {
    const logDir = path.join(dir, 'terminals');
    const terminals = new TerminalService({ logDir, emit: () => undefined, emitData: () => undefined, options: { maxLogBytes: 4096 } });
    const run = async (taskId: string, kind: 'stage' | 'shell' | 'host', script: string) => {
      // A short wait before exit: output still in the pty when its leader exits can be lost.
      const p = pty.spawn('bash', ['-c', `${script}; sleep 0.3`], { cols: 80, rows: 24, encoding: null as unknown as string });
      const info = terminals.register({ taskId, kind, title: kind, cols: 80, rows: 24, source: ptySource(p), persistLog: true });
      await terminals.waitForExit(info.id);
      return info.id;
    };
    const hexUpper = Buffer.from(KEY).toString('hex').toUpperCase();
    // A stage prints the key as upper-case hex, then enough output to rotate its log (the key is in <id>.log.1).
    const stage = await run('t1', 'stage', `printf '%s\\n' ${hexUpper}; sleep 0.3; head -c 6000 /dev/zero | tr '\\0' x; echo`);
    const shell = await run('t1', 'shell', `printf '{"k":"%s"}\\n' '${[...KEY].map((c) => `\\u00${c.charCodeAt(0).toString(16)}`).join('')}'`);
    await run('t1', 'host', `echo ${KEY}`); // the user's own shell on the host: not sandbox output
    await run('other-task', 'stage', `echo ${KEY}`);
    await terminals.dispose();

    const logs = await taskTerminalLogs(logDir, 't1');
    expect(logs.map((f) => path.basename(f)).sort()).toEqual([`${shell}.log`, `${stage}.log`, `${stage}.log.1`].sort());
    const r = await check({ workDir: dir, stageLogs: logs });
    expect(r.verdict).toBe('leak');
    expect(r.hits.map((h) => `${h.source} ${h.encoding} ${h.detail}`).sort()).toEqual(
      [`stage-log hex-upper ${stage}.log.1`, `stage-log json-escape:raw ${shell}.log`].sort(),
    );
    const clean = await check({ workDir: dir, stageLogs: await taskTerminalLogs(logDir, 'no-such-task') });
    expect(clean.verdict).toBe('clean');
    expect(clean.scanned[0]).toMatchObject({ source: 'stage logs', bytes: 0, note: 'no terminal logs kept for this task' });
  });

  describe('the returned work in quarantine', () => {
    let repo: FixtureRepo;
    let base: string;
    let quarantine: PullbackQuarantine;

    beforeAll(async () => {
      repo = await makeRepo({ files: { 'README.md': '# project\n' } });
      base = repo.head();
      quarantine = new PullbackQuarantine({ root: path.join(dir, 'quarantine') });
    });
    afterAll(() => repo.cleanup());

    /** What a sandbox sends back: the task branch as a bundle, verified into quarantine as pull-back does. */
    async function returned(taskId: string, work: (r: FixtureRepo) => void): Promise<string> {
      const work_ = tempDir('fiab-leak-work-');
      gitIn(work_, ['clone', '-q', repo.dir, '.']);
      gitIn(work_, ['checkout', '-q', '-b', `factory/${taskId}`]);
      const clone: FixtureRepo = { ...repo, dir: work_, git: (...a) => gitIn(work_, a), write: (rel, c) => fs.writeFileSync(path.join(work_, rel), c) };
      work(clone);
      gitIn(work_, ['add', '-A']);
      gitIn(work_, ['-c', 'user.name=agent', '-c', 'user.email=agent@sandbox.invalid', 'commit', '-q', '--allow-empty', '-m', `work of ${taskId}`]);
      const q = await quarantine.prepare(taskId);
      gitIn(work_, ['bundle', 'create', '-q', q.bundlePath, `factory/${taskId}`, `^${base}`]);
      fs.rmSync(work_, { recursive: true, force: true });
      await quarantine.verify({ taskId, repoPath: repo.dir, branch: `factory/${taskId}`, baseCommit: base, bundlePresent: true });
      return q.dir;
    }

    it('finds the key in a returned file, in a gzip file committed with it, and in a commit message, by object', async () => {
      const q = await returned('t-leaky', (r) => {
        r.write('config.env', `TOKEN=${KEY}\n`);
        fs.writeFileSync(path.join(r.dir, 'cache.json.gz'), gzipSync(Buffer.from(`{"auth":"${KEY}"}`)));
        r.git('add', '-A');
        r.git('-c', 'user.name=agent', '-c', 'user.email=a@b.invalid', 'commit', '-q', '-m', `save ${encodeURIComponent('?k=')}${[...KEY].map((c) => `%${c.charCodeAt(0).toString(16)}`).join('')}`);
      });
      expect(fs.existsSync(path.join(q, 'repo.git'))).toBe(true);
      const r = await check({ workDir: dir, returnedWork: q });
      expect(r.verdict).toBe('leak');
      const blob = (file: string) => gitIn(path.join(q, 'repo.git'), ['rev-parse', `refs/heads/factory/t-leaky:${file}`]).trim();
      const commit = gitIn(path.join(q, 'repo.git'), ['rev-parse', 'refs/heads/factory/t-leaky~1']).trim();
      const found = r.hits.map((h) => `${h.encoding} ${h.detail}`);
      expect(found).toContain(`raw object ${blob('config.env')} (blob), byte 6`);
      expect(found).toContain(`gzip>raw object ${blob('cache.json.gz')} (blob), byte 0, at 9 of the decompressed data`);
      expect(found).toContain(`url-escape:raw object ${commit} (commit), byte ${found.find((f) => f.startsWith('url-escape'))!.split('byte ')[1]}`);
      // The packed bundle as it came: its objects are zlib streams.
      expect(found.some((f) => /^zlib>raw packed bundle, at \d+ of the decompressed data$/.test(f))).toBe(true);
      expect(r.hits.every((h) => h.source === 'returned-work')).toBe(true);
      expect(r.scanned[0]).toMatchObject({ source: 'returned work' });
      expect(r.scanned[0]!.inflated!.streams).toBeGreaterThan(0);
      expect(JSON.stringify(r)).not.toContain(KEY);
    });

    it('clean returned work is clean, and no returned work is a note, not an error', async () => {
      const q = await returned('t-clean', (r) => r.write('notes.md', 'nothing secret here\n'));
      const r = await check({ workDir: dir, returnedWork: q });
      expect(r.verdict).toBe('clean');
      expect(r.scanned[0]!.bytes).toBeGreaterThan(100);
      const none = await check({ workDir: dir, returnedWork: path.join(dir, 'quarantine', 'never') });
      expect(none.verdict).toBe('clean');
      expect(none.scanned[0]!.note).toMatch(/no returned work in quarantine/);
    });

    it('an object over the size cap is not read, and the verdict says incomplete', async () => {
      const q = await returned('t-big', (r) => r.write('big.txt', 'y'.repeat(300_000)));
      const r = await new LeakChecker({ secrets, limits: { maxObjectBytes: 100_000 } }).check({ sandboxId: 't1', credentials: [{ id: 'gh' }], sources: { workDir: dir, returnedWork: q } });
      expect(r.verdict).toBe('incomplete');
      expect(r.scanned[0]!.error).toMatch(/object [0-9a-f]{40} \(blob, 300000 bytes\) not read: over the 100000 byte cap/);
      // Many objects that expand (deltas) stop at the total cap, said so too.
      const total = await new LeakChecker({ secrets, limits: { maxObjectTotalBytes: 1000 } }).check({ sandboxId: 't1', credentials: [{ id: 'gh' }], sources: { workDir: dir, returnedWork: q } });
      expect(total.verdict).toBe('incomplete');
      expect(total.scanned[0]!.error).toMatch(/\d+ object\(s\) not read: 1000 bytes of objects already read \(cap\)/);
    });
  });
});
