// A warm environment layer end to end with real QEMU: after its setup a
// sandbox's disk and memory are saved at one instant, and a new sandbox on that
// layer resumes the saved guest instead of booting. It sees what setup wrote,
// answers SSH only with its own new keys, and has the current time. A saved
// memory of another machine, or a damaged one, is not used: the sandbox boots
// cold on the layer as before. The layer's sandboxes map its memory from one
// file (made once from the saved stream), so what they only read is held once.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, cp, mkdir, mkdtemp, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectGuest } from '../../main/guest/guest-agent.js';
import { appPaths } from '../../main/state/paths.js';
import type { BaseImage } from '../../main/vm/image-store.js';
import { LayerStore, type FoundLayer } from '../../main/vm/layer-store.js';
import { QemuDriver, type RunningVm } from '../../main/vm/qemu-driver.js';
import { qemuIdentityArgs, readKeys, sandboxFiles } from '../../main/vm/sandbox-files.js';
import { warmFiles } from '../../main/vm/warm-state.js';
import { hasWarmRam, warmRamFiles } from '../../main/vm/warm-ram.js';
import { testImage } from '../support/image.js';

describe('warm environment layers', () => {
  let image: BaseImage;
  let root: string;
  let store: LayerStore;
  let layer: FoundLayer;
  let frozenAt = 0;
  let layerMachineId = '';
  const driver = new QemuDriver({ snapshotsDir: appPaths().snapshots });
  const vms: RunningVm[] = [];
  const timings: string[] = [];

  beforeAll(async () => {
    image = await testImage();
    root = await mkdtemp(path.join(os.tmpdir(), 'env-warm-'));
    store = new LayerStore({ root: path.join(root, 'layers'), baseDisk: () => image.disk });
    // The setup's sandbox: it installs something, then its disk and memory are frozen together.
    const first = await driver.start({ sandboxDir: path.join(root, 'setup'), image });
    vms.push(first);
    const ssh = await first.ssh();
    const setup = await ssh.run('mkdir -p /opt/env && echo installed > /opt/env/marker && sync; echo 3 > /proc/sys/vm/drop_caches', { timeoutMs: 120_000 });
    expect(setup.code, setup.stderr).toBe(0);
    layerMachineId = (await ssh.run('cat /etc/machine-id')).stdout.trim();
    expect(layerMachineId).toMatch(/^[0-9a-f]{32}$/);
    const frozen = await first.freezeDisk({ memory: true });
    frozenAt = Date.now();
    expect(frozen.memoryError).toBeUndefined();
    expect(frozen.memory).toBeDefined();
    // Guest memory is the guest's secrets too: only the owner may read the saved state.
    expect((await stat(warmFiles(frozen.memory!.dir).state)).mode & 0o077).toBe(0);
    // The setup's sandbox runs on after the pause: its session still works and writes go to the new overlay.
    const after = await ssh.run('echo task > /opt/env/after-freeze && sync && cat /opt/env/marker', { timeoutMs: 60_000 });
    expect(after).toMatchObject({ code: 0, stdout: 'installed\n' });
    ssh.close();
    const committed = await store.commit({ key: 'repo-key', repo: '/home/user/project', imageVersion: image.version, summary: ['test setup'], frozenDisk: frozen.disk, memory: frozen.memory! });
    expect(committed.memory?.machineKey).toBe(frozen.memory!.machineKey);
    const stateBytes = (await stat(warmFiles(path.join(committed.dir, 'warm')).state)).size;
    timings.push(`memory state ${(stateBytes / 1e6).toFixed(0)} MB, layer ${(committed.sizeBytes / 1e6).toFixed(0)} MB on disk`);
    await first.destroy();
    layer = (await store.find('repo-key'))!;
    expect(layer.warm).toBeDefined();
  }, 400_000);

  /** A copy of the layer's warm folder named `name`, with one of its files (`pick`) cut to half its size. */
  async function damagedCopy(name: string, pick: (dir: string) => string): Promise<string> {
    const copy = path.join(root, name);
    await cp(layer.warm!.dir, copy, { recursive: true });
    const file = pick(copy);
    await chmod(file, 0o600);
    await truncate(file, Math.floor((await stat(file)).size / 2));
    return copy;
  }

  afterAll(async () => {
    for (const vm of vms) await vm.destroy().catch(() => {}); // teardown: what is already gone is fine
    console.log(timings.join('\n'));
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('a new sandbox on the layer resumes the saved guest with its own keys and the current time', async () => {
    // The restored clock must be set, not resumed from the freeze: make the gap plain.
    if (Date.now() - frozenAt < 15_000) await new Promise((r) => setTimeout(r, 15_000 - (Date.now() - frozenAt)));
    // What an app killed while making the layer's RAM file leaves: its loader QEMU, paused, and a part-written file.
    const stale = path.join(layer.warm!.dir, 'ram-loader-0badc0de');
    await mkdir(stale, { recursive: true });
    await writeFile(path.join(layer.warm!.dir, 'ram.0badc0de.tmp'), 'partial');
    const loader = spawn('qemu-system-x86_64', [...qemuIdentityArgs(stale), '-machine', 'none', '-S', '-display', 'none', '-nodefaults'], { stdio: 'ignore' });
    const loaderGone = new Promise((r) => loader.once('exit', r));
    await expect.poll(() => existsSync(sandboxFiles(stale).pidFile)).toBe(true);
    const vm = await driver.start({ sandboxDir: path.join(root, 'warm'), image, backingDisk: layer.disk, warm: layer.warm! });
    vms.push(vm);
    timings.push(`boot to SSH on the layer, warm: ${vm.bootMs} ms (${vm.bootMode}, ${vm.accel})`);
    expect(driver.lastWarmBootError).toBeUndefined();
    expect(driver.lastWarmShareError).toBeUndefined();
    expect(vm.bootMode).toBe('snapshot');
    expect(vm.coldBootReason).toBeUndefined();
    // The first start made the layer's shared RAM file from its stream, and runs on it; what the killed app left is gone.
    expect(await hasWarmRam(layer.warm!.dir)).toBe(true);
    await loaderGone;
    expect(existsSync(stale) || existsSync(path.join(layer.warm!.dir, 'ram.0badc0de.tmp'))).toBe(false);
    expect(await readFile(`/proc/${vm.pid}/maps`, 'utf8')).toContain(warmRamFiles(layer.warm!.dir).ram);
    expect(vm.backingDisk).toBe(layer.disk);
    const ssh = await vm.ssh();
    const seen = await ssh.run('cat /opt/env/marker; test -e /opt/env/after-freeze && echo LEAKED || echo absent; date +%s', { timeoutMs: 60_000 });
    expect(seen.code).toBe(0);
    const [marker, leak, guestNow] = seen.stdout.trim().split('\n');
    expect(marker).toBe('installed');
    expect(leak).toBe('absent');
    expect(Math.abs(Number(guestNow) * 1000 - Date.now())).toBeLessThan(5_000);
    ssh.close();

    // An attacker holding the layer's saved client key is refused, even pinning the new host key.
    const saved = await readKeys(warmFiles(layer.warm!.dir).guest);
    const own = await readKeys(sandboxFiles(vm.sandboxDir));
    expect(own.clientPublicKey).not.toBe(saved.clientPublicKey);
    expect(own.hostPublicKey).not.toBe(saved.hostPublicKey);
    await expect(connectGuest({ port: vm.sshPort, keys: { ...saved, hostPublicKey: own.hostPublicKey } }, { readyTimeoutMs: 15_000 })).rejects.toThrow(/authentication/i);
    // And the old host key is no longer the guest's: a client pinning it does not get in either.
    await expect(connectGuest({ port: vm.sshPort, keys: { ...own, hostPublicKey: saved.hostPublicKey } }, { readyTimeoutMs: 15_000 })).rejects.toThrow();
    const fresh = await connectGuest({ port: vm.sshPort, keys: own }, { readyTimeoutMs: 15_000 });
    expect((await fresh.run('cat /opt/env/marker')).stdout).toBe('installed\n');
    fresh.close();
    await vm.destroy();
  }, 200_000);

  it('two sandboxes on the layer hold the pages they only read once: both map its RAM file, shared', async () => {
    const [a, b] = await Promise.all([
      driver.start({ sandboxDir: path.join(root, 'share-a'), image, backingDisk: layer.disk, warm: layer.warm! }),
      driver.start({ sandboxDir: path.join(root, 'share-b'), image, backingDisk: layer.disk, warm: layer.warm! }),
    ]);
    vms.push(a, b);
    expect(driver.lastWarmShareError).toBeUndefined();
    for (const vm of [a, b]) {
      const ssh = await vm.ssh();
      // Each its own guest: a write in one is not seen by the other, and each reads what setup wrote.
      const r = await ssh.run(`cat /opt/env/marker && echo ${path.basename(vm.sandboxDir)} > /opt/env/own && cat /etc/machine-id`, { timeoutMs: 60_000 });
      expect(r.stdout.split('\n')[0]).toBe('installed');
      ssh.close();
    }
    const ids = await Promise.all([a, b].map(async (vm) => { const ssh = await vm.ssh(); const r = await ssh.run('cat /opt/env/own /etc/machine-id'); ssh.close(); return r.stdout; }));
    expect(ids[0]).toMatch(/^share-a\n/);
    expect(ids[1]).toMatch(/^share-b\n/);
    expect(ids[0]!.split('\n')[1]).not.toBe(ids[1]!.split('\n')[1]);
    // The RAM file's mapping in each QEMU: pages both only read are the page cache's, counted as shared.
    const ram = warmRamFiles(layer.warm!.dir).ram;
    const sharedKiB = async (pid: number) => {
      const smaps = await readFile(`/proc/${pid}/smaps`, 'utf8');
      const at = smaps.split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/).find((m) => m.split('\n')[0]!.endsWith(ram));
      // Dirty too: the file was just written, and its pages may not have reached the disk yet.
      const kib = (field: string) => Number(new RegExp(`\\n${field}:\\s+(\\d+) kB`).exec(at ?? '')?.[1] ?? 0);
      return kib('Shared_Clean') + kib('Shared_Dirty');
    };
    const shared = await Promise.all([sharedKiB(a.pid), sharedKiB(b.pid)]);
    timings.push(`layer RAM shared by two sandboxes: ${shared.map((k) => (k / 1024).toFixed(0)).join(' and ')} MiB`);
    for (const k of shared) expect(k).toBeGreaterThan(16 * 1024);
    await Promise.all([a.destroy(), b.destroy()]);
  }, 300_000);

  it('a damaged shared form (devices cut short) is dropped and the stream restores instead', async () => {
    const copy = await damagedCopy('damaged-devices-warm', (dir) => warmRamFiles(dir).devices);
    const vm = await driver.start({ sandboxDir: path.join(root, 'damaged-devices'), image, backingDisk: layer.disk, warm: { dir: copy, machineKey: layer.warm!.machineKey, shared: true } });
    vms.push(vm);
    expect(vm.bootMode).toBe('snapshot');
    expect(driver.lastWarmShareError?.message).toMatch(/QEMU (exited|killed)|load|migrat/i);
    expect(await hasWarmRam(copy)).toBe(false);
    const ssh = await vm.ssh();
    expect((await ssh.run('cat /opt/env/marker')).stdout).toBe('installed\n');
    ssh.close();
    await vm.destroy();
  }, 300_000);

  it('a saved memory of another machine (other memory size) is not used: the sandbox boots cold on the layer', async () => {
    const vm = await driver.start({ sandboxDir: path.join(root, 'other-machine'), image, memoryMb: 1536, backingDisk: layer.disk, warm: layer.warm! });
    vms.push(vm);
    timings.push(`boot to SSH on the layer, cold: ${vm.bootMs} ms (${vm.bootMode}, ${vm.accel})`);
    expect(vm.bootMode).toBe('cold');
    expect(driver.lastWarmBootError?.message).toMatch(/another machine/);
    // The task says why this start was slow, and what makes the next ones fast again.
    expect(vm.coldBootReason).toMatch(/^booted cold on the cached environment: its saved memory was made for another setup .*delete the environment/);
    const ssh = await vm.ssh();
    const seen = await ssh.run("cat /opt/env/marker; free -m | awk '/Mem:/ {print $2}'; cat /etc/machine-id");
    const [marker, totalMb, machineId] = seen.stdout.trim().split('\n');
    expect(marker).toBe('installed');
    // Booted cold on the layer's disk, it still takes an identity of its own, not the setup sandbox's.
    expect(machineId).toMatch(/^[0-9a-f]{32}$/);
    expect(machineId).not.toBe(layerMachineId);
    // The guest really has the smaller memory it was started with, not the saved machine's 2 GiB.
    expect(Number(totalMb)).toBeGreaterThan(1000);
    expect(Number(totalMb)).toBeLessThan(1536);
    ssh.close();
    await vm.destroy();
  }, 300_000);

  it('a damaged memory state (cut short) falls back to a cold boot on the layer, leaving no process behind', async () => {
    const damaged = await damagedCopy('damaged-warm', (dir) => warmFiles(dir).state);
    const vm = await driver.start({ sandboxDir: path.join(root, 'damaged'), image, backingDisk: layer.disk, warm: { dir: damaged, machineKey: layer.warm!.machineKey } });
    vms.push(vm);
    expect(vm.bootMode).toBe('cold');
    // The reason is QEMU's own (it exits when the state cannot be loaded), not just a closed connection.
    expect(driver.lastWarmBootError?.message).toMatch(/QEMU (exited|killed)[^:]*: .*(load|migrat|incoming)/i);
    timings.push(`damaged state refused: ${driver.lastWarmBootError?.message.split('\n')[0]}`);
    expect(vm.coldBootReason).toMatch(/^booted cold: the cached environment's saved memory could not be restored \(.*QEMU (exited|killed)/);
    const ssh = await vm.ssh();
    expect((await ssh.run('cat /opt/env/marker')).stdout).toBe('installed\n');
    ssh.close();
    // Only the cold-booted QEMU of this folder runs.
    const ours = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.includes('factory-damaged'));
    expect(ours).toHaveLength(1);
    await vm.destroy();
  }, 300_000);
});
