// An environment layer end to end with real QEMU: a sandbox runs a setup step,
// its disk is frozen while it keeps running, the frozen disk becomes a layer,
// and a new sandbox boots on that layer. What the setup wrote is there; what
// the first sandbox wrote after the freeze is not (though that sandbox, when
// restarted, still has it); neither the layer nor the base image changes,
// however the sandboxes write to their disks.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appPaths } from '../../main/state/paths.js';
import type { BaseImage } from '../../main/vm/image-store.js';
import { LayerStore } from '../../main/vm/layer-store.js';
import { runCommand } from '../../main/vm/process-runner.js';
import { QemuDriver, sandboxFiles, type RunningVm } from '../../main/vm/qemu-driver.js';
import { testImage } from '../support/image.js';

async function sha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** qemu-img's view of a disk's backing chain, top first. -U: a running VM holds the top. */
async function backingChain(disk: string): Promise<Array<{ filename: string; backing?: string }>> {
  const r = await runCommand('qemu-img', ['info', '-U', '--backing-chain', '--output=json', disk]);
  expect(r.code, r.tail.join('\n')).toBe(0);
  return (JSON.parse(r.stdout) as Array<{ filename: string; 'backing-filename'?: string }>).map((i) => ({
    filename: i.filename,
    ...(i['backing-filename'] ? { backing: i['backing-filename'] } : {}),
  }));
}

describe('environment layers', () => {
  let image: BaseImage;
  let root: string;
  const driver = new QemuDriver({ snapshotsDir: appPaths().snapshots });

  beforeAll(async () => {
    image = await testImage();
    root = await mkdtemp(path.join(os.tmpdir(), 'env-layer-'));
  });
  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('a sandbox booted on a layer sees what setup wrote and nothing written after the freeze', async () => {
    const baseHash = await sha256(image.disk);
    const store = new LayerStore({ root: path.join(root, 'layers'), baseDisk: () => image.disk });
    let first: RunningVm | undefined;
    let second: RunningVm | undefined;
    try {
      first = await driver.start({ sandboxDir: path.join(root, 'sb1'), image });
      const snapshotBoot = `${first.bootMs} ms (${first.bootMode}, ${first.accel})`;
      const ssh = await first.ssh();
      // The setup step: a marker and ~100 MB of installed files, as root; then sync, as the caller must.
      const setup = await ssh.run(
        'mkdir -p /opt/env && echo installed > /opt/env/marker && yes factory-layer-payload | head -c 100000000 > /opt/env/payload && sync',
        { timeoutMs: 120_000 },
      );
      expect(setup.code, setup.stderr).toBe(0);

      const { disk: frozen } = await first.freezeDisk();
      const files = sandboxFiles(first.sandboxDir);
      expect(frozen).toBe(files.overlay);
      // The guest writes on, now into a new overlay on top of the frozen file, itself on the base.
      const active = path.join(first.sandboxDir, 'overlay-1.qcow2');
      expect(await backingChain(active)).toEqual([
        { filename: active, backing: frozen },
        { filename: frozen, backing: image.disk },
        { filename: image.disk },
      ]);
      // As the app does: the layer is committed (and can be found) while the setup's sandbox goes on.
      const layer = await store.commit({ key: 'repo-key-1', repo: '/home/user/project', imageVersion: image.version, summary: ['test setup'], frozenDisk: frozen });
      const layerHash = await sha256(layer.disk);
      console.log(`layer after a ~100 MB setup: ${(layer.sizeBytes / 1e6).toFixed(1)} MB on disk`);
      expect(layer.sizeBytes).toBeGreaterThan(100_000_000);
      expect(layer.sizeBytes).toBeLessThan(200_000_000);
      expect((await store.find('repo-key-1'))?.id).toBe(layer.id);
      const after = await ssh.run('echo task > /opt/env/after-freeze && sync && cat /opt/env/marker', { timeoutMs: 60_000 });
      expect(after).toMatchObject({ code: 0, stdout: 'installed\n' });
      ssh.close();
      await first.stop();
      expect(await sha256(layer.disk)).toBe(layerHash);

      // The task restarts its sandbox (app restart): it boots the newest disk of its chain, so it
      // still sees its own writes and writes on there, never into the frozen file the layer shares.
      first = await driver.start({ sandboxDir: path.join(root, 'sb1'), image });
      expect(first.bootMode).toBe('cold');
      const again = await first.ssh();
      const resumed = await again.run('cat /opt/env/after-freeze && echo more > /opt/env/marker && sync', { timeoutMs: 60_000 });
      expect(resumed).toMatchObject({ code: 0, stdout: 'task\n' });
      // A second freeze stacks one more file on the chain.
      const { disk: frozenAgain } = await first.freezeDisk();
      expect(frozenAgain).toBe(active);
      const top = path.join(first.sandboxDir, 'overlay-2.qcow2');
      expect((await backingChain(top)).map((d) => d.filename)).toEqual([top, active, frozen, image.disk]);
      expect((await again.run('cat /opt/env/marker')).stdout).toBe('more\n');
      again.close();
      await first.stop();
      await expect(first.freezeDisk()).rejects.toMatchObject({ name: 'SandboxStopped' });
      // The first sandbox's files go; the layer keeps its own link (or copy).
      await first.destroy();
      expect(await sha256(layer.disk)).toBe(layerHash);

      const found = await store.find('repo-key-1');
      expect(found?.id).toBe(layer.id);
      const release = store.acquire(found!.id);
      second = await driver.start({ sandboxDir: path.join(root, 'sb2'), image, backingDisk: found!.disk });
      console.log(`boot to SSH: base image ${snapshotBoot}; on the layer ${second.bootMs} ms (${second.bootMode}, ${second.accel})`);
      expect(second.bootMode).toBe('cold');
      expect(second.backingDisk).toBe(found!.disk);
      expect(await backingChain(sandboxFiles(second.sandboxDir).overlay)).toEqual([
        { filename: sandboxFiles(second.sandboxDir).overlay, backing: found!.disk },
        { filename: found!.disk, backing: image.disk },
        { filename: image.disk },
      ]);
      const ssh2 = await second.ssh();
      const seen = await ssh2.run('cat /opt/env/marker; stat -c %s /opt/env/payload; test -e /opt/env/after-freeze && echo LEAKED || echo absent', { timeoutMs: 60_000 });
      expect(seen).toMatchObject({ code: 0, stdout: 'installed\n100000000\nabsent\n' });
      // The task in the new sandbox overwrites and deletes what setup installed: its overlay takes it.
      const scribble = await ssh2.run('echo changed > /opt/env/marker && rm /opt/env/payload && sync && cat /opt/env/marker', { timeoutMs: 60_000 });
      expect(scribble.stdout).toBe('changed\n');
      ssh2.close();
      await second.destroy();
      release();

      expect(await sha256(layer.disk)).toBe(layerHash);
      expect(await sha256(image.disk)).toBe(baseHash);
      expect((await store.find('repo-key-1'))?.id).toBe(layer.id);
    } finally {
      await first?.destroy();
      await second?.destroy();
    }
  });
});
