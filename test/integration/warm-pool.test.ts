// The warm pool with real parts: the app with the real base image, QEMU (TCG
// here), the real credential broker over the real keychain, and a fixture
// repository. A pooled sandbox waits restored; inside it, the proxy address
// reaches nothing until a task takes it. The task that takes it runs its
// stages in it, and its guest's request through the proxy is answered by that
// task's own proxy. The pool refills; a pooled QEMU a crashed run left is
// killed at the next start; disposing the app leaves no pooled QEMU in the
// process table.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PoolStatus } from '../../common/domain.js';
import type { EgressRefusal } from '../../common/egress.js';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { connectGuest } from '../../main/guest/guest-agent.js';
import { TAKEN_MARKER } from '../../main/pool/warm-pool.js';
import { appPaths, type AppPaths } from '../../main/state/paths.js';
import { StateStore } from '../../main/state/state-store.js';
import { commandLineOf, isOurQemu } from '../../main/vm/leftover-qemu.js';
import { readKeys, sandboxFiles } from '../../main/vm/sandbox-files.js';
import { testImage } from '../support/image.js';
import { requireSecretService } from '../support/keyring.js';
import { makeRepo, tempDir, type FixtureRepo } from '../support/repo.js';
import { waitForTask } from '../support/wait-for-task.js';
import { collectTerminalOutput } from '../support/test-app.js';

// What a guest sees when it asks the proxy address: the HTTP status (000 when nothing answered) and curl's exit status.
const ASK_PROXY = `curl -sS -m 20 -o /dev/null -w 'proxy=%{http_code}' -x http://10.0.2.100:80 http://blocked.example/; echo " rc=$?"`;

let dataDir: string;
let paths: AppPaths;
let repo: FixtureRepo;
let app: FactoryApp | undefined;
let output: Map<string, string>;
const refusals: EgressRefusal[] = [];

async function poolStatus(a: FactoryApp): Promise<PoolStatus> {
  const status = await a.api['system.status']({});
  if (!status.pool) throw new Error('system.status has no pool');
  return status.pool;
}

/** The waiting sandboxes' folders (not taken by a task). */
function waitingDirs(): string[] {
  const root = path.join(paths.data, 'pool');
  return fs
    .readdirSync(root)
    .map((n) => path.join(root, n))
    .filter((d) => fs.existsSync(sandboxFiles(d).overlay) && !fs.existsSync(path.join(d, TAKEN_MARKER)));
}

function qemuPidOf(dir: string): number {
  return Number(fs.readFileSync(sandboxFiles(dir).pidFile, 'utf8').trim());
}

async function untilPoolReady(a: FactoryApp, notIn: string[] = []): Promise<string> {
  let dir: string | undefined;
  await expect
    .poll(
      async () => {
        const s = await poolStatus(a);
        dir = waitingDirs().find((d) => !notIn.includes(d));
        return s.ready === 1 && dir !== undefined && fs.existsSync(sandboxFiles(dir).pidFile);
      },
      { timeout: 240_000, interval: 250 },
    )
    .toBe(true);
  return dir!;
}

/** The SSH port QEMU forwards for a folder, read from its command line in the process table. */
async function sshPortOf(pid: number): Promise<number> {
  const command = (await commandLineOf(pid)) ?? '';
  const port = /hostfwd=tcp:127\.0\.0\.1:(\d+)-:22/.exec(command)?.[1];
  if (!port) throw new Error(`no SSH forward in ${command}`);
  return Number(port);
}

beforeAll(async () => {
  requireSecretService();
  await testImage();
  dataDir = tempDir('fwp-'); // short: the proxy socket lives in the pooled sandbox's folder
  paths = appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir });
  repo = await makeRepo({
    files: {
      'README.md': '# Pool fixture\n',
      '.factory/pipeline.json': JSON.stringify({
        stages: {
          request: { command: `${ASK_PROXY}; git -C /work/repo log --format=%s -1` },
          build: { command: 'echo built-in-pool >> README.md && echo BUILD-$((6*7))' },
          test: { command: 'grep -q built-in-pool README.md && echo "tests: 1 passed"' },
        },
      }),
    },
  });
  app = await createFactoryApp({ host: 'web', paths, settings: { warmPoolSize: 1 }, warmPool: true });
  output = collectTerminalOutput(app);
  app.onEvent((e) => {
    if (e.type === 'egress.refused') refusals.push(e.refusal);
  });
}, 600_000);

afterAll(async () => {
  await app?.dispose();
  repo?.cleanup();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('the warm pool with real sandboxes', () => {
  let pooledDir = '';
  let pooledPid = 0;

  it('keeps one sandbox restored and waiting, whose proxy address reaches nothing before a task takes it', async () => {
    pooledDir = await untilPoolReady(app!);
    pooledPid = qemuPidOf(pooledDir);
    expect(await isOurQemu(pooledPid, pooledDir)).toBe(true);
    expect(await poolStatus(app!)).toMatchObject({ state: 'ready', ready: 1, target: 1 });
    // Nothing listens where its proxy forward points.
    expect(fs.existsSync(path.join(pooledDir, 'proxy.sock'))).toBe(false);
    // Someone inside the waiting guest tries the proxy address: nothing answers.
    const ssh = await connectGuest({ port: await sshPortOf(pooledPid), keys: await readKeys(sandboxFiles(pooledDir)) });
    try {
      const r = await ssh.run(ASK_PROXY, { timeoutMs: 60_000 });
      expect(r.stdout).toContain('proxy=000');
      expect(r.stdout).not.toMatch(/rc=0\b/);
    } finally {
      ssh.close();
    }
    expect(refusals).toEqual([]);
  });

  it('a task takes it, runs its stages there, and its guest reaches its own proxy', async () => {
    const a = app!;
    const created = await a.api['tasks.create']({ repoPath: repo.dir, title: 'Build in a pooled sandbox' });
    const t = await waitForTask(a, created.id, (x) => ['review', 'failed', 'cancelled'].includes(x.phase));
    expect(t.error).toBeUndefined();
    expect(t.stages.map((s) => `${s.name}:${s.status}`)).toEqual(['request:passed', 'plan:skipped', 'build:passed', 'test:passed', 'review:skipped', 'document:skipped']);
    const record = (await new StateStore({ dir: paths.state }).loadTasks()).find((r) => r.task.id === created.id)!;
    // The very VM that waited in the pool.
    expect(record.sandboxDir).toBe(pooledDir);
    expect(record.qemuPid).toBe(pooledPid);
    expect(JSON.parse(fs.readFileSync(path.join(pooledDir, TAKEN_MARKER), 'utf8'))).toEqual({ taskId: created.id });
    console.log(`warm-pool: task booted in ${t.sandbox.bootMs} ms from the pool`);
    // Its boot is the take (the proxy, no QEMU start), not the pooled VM's own start before.
    expect(t.sandbox.bootMs).toBeLessThan(5000);
    // The guest's request was answered by this task's proxy (a refusal of a host it was not allowed), seeded repo in place.
    const request = output.get(t.stages[0]!.sessionId!)!;
    expect(request).toContain('proxy=403');
    expect(request).toContain(repo.git('log', '--format=%s', '-1').trim());
    expect(refusals.map((r) => `${r.sandboxId} ${r.host}`)).toEqual([`${created.id} blocked.example`]);
    expect((await a.api['tasks.review']({ taskId: created.id })).patch).toContain('+built-in-pool');

    // The pool refilled with another sandbox, in another folder.
    const next = await untilPoolReady(a, [pooledDir]);
    expect(next).not.toBe(pooledDir);
    expect(qemuPidOf(next)).not.toBe(pooledPid);

    await a.api['tasks.destroy']({ taskId: created.id });
    expect(await commandLineOf(pooledPid)).toBeUndefined();
    // Its logs stay in its folder, as any sandbox's do.
    expect(fs.readdirSync(pooledDir)).toContain('serial.log');
  });

  it('a pooled QEMU that a crashed run left is killed at the next start, and its folder deleted', async () => {
    // The first app stands for a run that crashed: a second one starts on the same data while its pooled VM runs.
    const leftDir = await untilPoolReady(app!);
    const leftPid = qemuPidOf(leftDir);
    const second = await createFactoryApp({ host: 'web', paths, settings: { warmPoolSize: 0 }, warmPool: true });
    try {
      await expect.poll(() => commandLineOf(leftPid), { timeout: 30_000 }).toBeUndefined();
      await expect.poll(() => fs.existsSync(leftDir), { timeout: 30_000 }).toBe(false);
      // The taken folder of the first task keeps its logs.
      expect(fs.readdirSync(pooledDir)).toContain('serial.log');
      expect(await poolStatus(second)).toMatchObject({ state: 'off', ready: 0, target: 0 });
    } finally {
      await second.dispose();
    }
  });

  it('disposing the app leaves no pooled QEMU in the process table', async () => {
    const a = app!;
    // The second app's settings (pool off) are the same file: on again, the first app's pool starts another.
    await a.api['settings.set']({ warmPoolSize: 1 });
    const dir = await untilPoolReady(a);
    const pid = qemuPidOf(dir);
    expect(await isOurQemu(pid, dir)).toBe(true);
    await a.dispose();
    app = undefined;
    expect(await commandLineOf(pid)).toBeUndefined();
    expect(waitingDirs()).toEqual([]);
    // No QEMU of any folder of this data dir runs (ps lists every command line).
    const { execFileSync } = await import('node:child_process');
    const ps = execFileSync('ps', ['-ww', '-eo', 'command='], { encoding: 'utf8' });
    expect(ps.split('\n').filter((l) => /qemu-system/.test(l) && l.includes(dataDir))).toEqual([]);
  });
});
