// Two sandboxes restored from the same booted snapshot (real QEMU, the cached
// base image, the app's template) must share no secret and no identity: what
// one sandbox's agent learns of its own guest (host key, authorized client key,
// machine id, kernel random output) must tell it nothing about a sibling's.
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readdirSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appPaths } from '../../main/state/paths.js';
import type { BaseImage } from '../../main/vm/image-store.js';
import { QemuDriver, type RunningVm } from '../../main/vm/qemu-driver.js';
import { templateRam } from '../../main/vm/snapshot-boot.js';
import { testImage } from '../support/image.js';
import { presentedHostKey } from '../support/presented-host-key.js';
import { qemuProcessesUnder } from '../e2e/support/processes.js';

/** SHA256 of the host key the sshd on port presents. */
async function presentedFingerprint(port: number): Promise<string> {
  return createHash('sha256').update(await presentedHostKey(port)).digest('base64');
}

async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

describe('clones of one snapshot', () => {
  let image: BaseImage;
  let root: string;
  const driver = new QemuDriver({ snapshotsDir: appPaths().snapshots });

  beforeAll(async () => {
    image = await testImage();
    root = await mkdtemp(path.join(os.tmpdir(), 'clone-identity-'));
  });
  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('differ in host key, authorized client key, machine id and random output right after start', async () => {
    expect(await driver.prepareFastBoot(image)).toBe(true);
    const vms: RunningVm[] = [];
    const seen: Array<{ hostKey: string; authorized: string; machineId: string; random: string }> = [];
    try {
      for (const name of ['clone-a', 'clone-b']) {
        const vm = await driver.start({ sandboxDir: path.join(root, name), image });
        vms.push(vm);
        expect(vm.bootMode, `fast boot failed: ${driver.lastFastBootError?.message}`).toBe('snapshot');
        const ssh = await vm.ssh();
        // The first thing a task could do: read the kernel's random output.
        const r = await ssh.run('head -c 32 /dev/urandom | od -An -tx1 | tr -d " \\n"; echo; cat /root/.ssh/authorized_keys; cat /etc/machine-id 2>&1');
        ssh.close();
        // A second login waits until sshd serves the clone's own host key; then look at what it serves.
        const agent = await vm.ssh({ username: 'agent' });
        agent.close();
        const [random, authorized, machineId] = r.stdout.split('\n');
        seen.push({ hostKey: await presentedFingerprint(vm.sshPort), authorized: authorized!, machineId: machineId!, random: random! });
      }
      const [a, b] = seen as [(typeof seen)[0], (typeof seen)[0]];
      expect(a.random).toMatch(/^[0-9a-f]{64}$/);
      expect(a.authorized).toMatch(/^ssh-ed25519 /);
      expect(a.hostKey).not.toBe(b.hostKey);
      expect(a.authorized).not.toBe(b.authorized);
      expect(a.random).not.toBe(b.random);
      expect(a.machineId).toMatch(/^[0-9a-f]{32}$/);
      expect(b.machineId).toMatch(/^[0-9a-f]{32}$/);
      expect(a.machineId).not.toBe(b.machineId);
    } finally {
      for (const vm of vms) await vm.destroy();
    }
  });

  it("a clone writing all over its memory leaves the template's RAM file as it was", async () => {
    expect(await driver.prepareFastBoot(image)).toBe(true);
    const snapshots = appPaths().snapshots;
    // Every template's time of last change before the clone starts (the cache holds one per machine size).
    const changed = new Map(readdirSync(snapshots).map((n) => path.join(snapshots, n)).filter((d) => existsSync(templateRam(d))).map((d) => [templateRam(d), statSync(templateRam(d)).mtimeMs]));
    const writerDir = path.join(root, 'writer');
    const vm = await driver.start({ sandboxDir: writerDir, image });
    let ram: string;
    let hash: string;
    try {
      expect(vm.bootMode).toBe('snapshot');
      // The template this clone maps, from its QEMU's command line: the one file to hash (the others are not mapped).
      const [qemu] = qemuProcessesUnder(writerDir);
      ram = /mem-path=([^,\s]+)/.exec(qemu?.cmdline ?? '')?.[1] ?? '';
      expect(changed.has(ram), `the clone maps ${ram || 'no file'}`).toBe(true);
      expect(statSync(ram).mtimeMs).toBe(changed.get(ram));
      hash = await sha256File(ram);
      const ssh = await vm.ssh();
      // 256 MiB of random bytes in a memory file system, and the page cache dropped: guest pages everywhere rewritten.
      const r = await ssh.run('head -c 268435456 /dev/urandom > /dev/shm/fill && sync && echo 3 > /proc/sys/vm/drop_caches && echo filled', { timeoutMs: 300_000 });
      ssh.close();
      expect(r.stdout.trim()).toBe('filled');
    } finally {
      await vm.destroy();
    }
    expect(await sha256File(ram)).toBe(hash);
    expect(statSync(ram).mtimeMs).toBe(changed.get(ram));
  }, 600_000);
});
