// The app is killed (SIGKILL, like a crash) while a task's stage runs in a
// sandbox on a "remote" host (libvirt behind the OpenSSH stand-in of
// test/support/remote-host.ts). The domain lives on there. A new app on the
// same data dir must connect to the host, remove that domain and its folder
// (overlay, keys, sockets), and show the task interrupted so it can be retried.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../common/domain.js';
import { startAppProcess, type AppProcess } from '../support/app-process.js';
import { testImage } from '../support/image.js';
import { startRemoteHost, type RemoteHostRig } from '../support/remote-host.js';
import { makeRepo, tempDir, type FixtureRepo } from '../support/repo.js';

const VIRSH = 'virsh -q -c qemu:///system';

async function poll<T>(what: string, read: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 8 * 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const last = await read();
    if (done(last)) return last;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last seen: ${JSON.stringify(last).slice(0, 2000)}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

describe('an app restart with a sandbox on a remote host', () => {
  let rig: RemoteHostRig;
  let dataDir: string;
  let repo: FixtureRepo;
  const apps: AppProcess[] = [];

  beforeAll(async () => {
    await testImage();
    rig = await startRemoteHost();
    dataDir = tempDir('frr-');
    repo = await makeRepo({ files: { 'README.md': '# Fixture\n', '.factory/pipeline.json': JSON.stringify({ stages: { request: { command: 'echo started; sleep 900' } } }) } });
    // The host as Settings keeps it (the settings file of the data dir).
    fs.writeFileSync(
      path.join(dataDir, 'settings.json'),
      JSON.stringify({
        vmMemoryMb: 1024,
        sandboxHosts: [rig.hostSetting(1)],
      }),
    );
  });

  afterAll(async () => {
    for (const app of apps) {
      app.kill('SIGTERM');
      await app.exited;
    }
    repo?.cleanup();
    await rig?.stop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('a killed app leaves its domain; the next start removes it and its folder, and the task is interrupted', async () => {
    const first = await startAppProcess({ dataDir });
    apps.push(first);
    const created = await first.call<Task>('tasks.create', { repoPath: repo.dir, title: 'Cut by a crash', host: 'rig' });
    const running = await poll('the stage to run on the host', () => first.call<Task>('tasks.get', { taskId: created.id }), (t) => t.stages[0]?.status === 'running' || ['failed', 'review', 'cancelled'].includes(t.phase));
    expect(running.stages[0]?.status, first.output().slice(-3000)).toBe('running');
    expect(running.sandbox.host).toBe('rig');
    const domain = `fiab-${created.id}`;

    first.kill('SIGKILL');
    await first.exited;
    // Nothing at home ended it: the domain runs on, its folder holds the overlay.
    expect((await rig.exec(`${VIRSH} list --name`)).stdout).toContain(domain);
    expect((await rig.exec(`ls -A ${rig.storageDir}/sandboxes`)).stdout).toContain(domain);

    const second = await startAppProcess({ dataDir });
    apps.push(second);
    await poll('the host to be cleared', async () => (await rig.exec(`${VIRSH} list --all --name; ls -A ${rig.storageDir}/sandboxes`)).stdout, (out) => !out.includes(domain), 5 * 60_000);
    expect((await rig.exec(`ls -A ${rig.storageDir}/sandboxes`)).stdout).toBe('');
    const after = await second.call<Task>('tasks.get', { taskId: created.id });
    expect(after.phase).toBe('interrupted');
    expect(after.sandbox.status).toBe('lost');
    expect(after.error).toMatchObject({ name: 'Interrupted' });
  });
});
