// Boots a real sandbox from the built base image (TCG here), talks to it over
// SSH with the pinned host key, and checks teardown leaves nothing running.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSandboxKeys } from '../../main/ssh/sandbox-keys.js';
import { HostKeyMismatchError, SandboxSsh } from '../../main/ssh/sandbox-ssh.js';
import type { BaseImage } from '../../main/vm/image-store.js';
import { appPaths } from '../../main/state/paths.js';
import { processAlive } from '../../main/vm/file-lock.js';
import { findLeftoverQemu, killLeftoverQemu } from '../../main/vm/leftover-qemu.js';
import { QemuDriver, sandboxFiles, type RunningVm } from '../../main/vm/qemu-driver.js';
import { testImage } from '../support/image.js';

/** Pids of processes whose command line mentions the folder (by /proc, not by name). */
function processesUsing(dir: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(dir)) out.push(Number(entry));
    } catch {
      // gone
    }
  }
  return out;
}

describe('sandbox VM', () => {
  let image: BaseImage;
  let root: string;
  // Fast boot from the shared snapshot cache, as the app does.
  const snapshotsDir = appPaths().snapshots;
  const driver = new QemuDriver({ snapshotsDir });

  beforeAll(async () => {
    image = await testImage();
    root = await mkdtemp(path.join(os.tmpdir(), 'vm-boot-'));
  });
  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('boots, runs commands over SSH with the pinned key, and is gone after destroy', async () => {
    const sandboxDir = path.join(root, 'sb1');
    // A host service on loopback that restrict=on must keep away from the guest.
    const loopback = http.createServer((_q, r) => r.end('host-secret'));
    await new Promise<void>((r) => loopback.listen(0, '127.0.0.1', r));
    const loopbackPort = (loopback.address() as { port: number }).port;

    let vm: RunningVm | undefined;
    try {
      vm = await driver.start({
        sandboxDir,
        image,
        fastBoot: false,
        guestForwards: [{ guestAddress: '10.0.2.100', guestPort: 9000, command: 'echo forwarded-ok' }],
      });
      console.log(`booted in ${vm.bootMs} ms with ${vm.accel}, pid ${vm.pid}, ssh 127.0.0.1:${vm.sshPort}`);
      expect(vm.bootMode).toBe('cold');
      expect(processAlive(vm.pid)).toBe(true);
      expect(Number(readFileSync(sandboxFiles(sandboxDir).pidFile, 'utf8').trim())).toBe(vm.pid);

      const ssh = await vm.ssh();
      const r = await ssh.run('echo hello; id -u agent; stat -c %U /work; command -v git bash curl claude; hostname');
      expect(r).toMatchObject({ code: 0, stderr: '' });
      expect(r.stdout.split('\n')).toEqual(['hello', '1000', 'agent', '/usr/bin/git', '/usr/bin/bash', '/usr/bin/curl', '/usr/local/bin/claude', 'factory-sandbox', '']);
      expect((await ssh.run('exit 7')).code).toBe(7);

      // The shell tab's login shell: root's PATH as Debian sets it, with no program started by the login
      // scripts for it (`id -u` and `mesg n`, slow after a restore); the agent's login shell as usual.
      const login = await ssh.run(`bash -lc 'echo "$PATH"'; runuser -l agent -c 'echo "$PATH"'; grep -nE '"[$][(]id -u[)]"|^mesg' /etc/profile /root/.profile; echo "grep $?"`);
      expect(login.stdout.split('\n')).toEqual(['/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', '/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games', 'grep 1', '']);

      // guestfwd: each guest connection gets its own command; nothing else across.
      const fwd = await ssh.run('cat < /dev/tcp/10.0.2.100/9000', { timeoutMs: 30_000 });
      expect(fwd.stdout.trim()).toBe('forwarded-ok');
      const blocked = await ssh.run(`curl -sS -m 5 http://10.0.2.2:${loopbackPort}/ || echo unreachable`, { timeoutMs: 30_000 });
      expect(blocked.stdout).not.toContain('host-secret');
      expect(blocked.stdout).toContain('unreachable');

      // run() caps output; getFile refuses what exceeds its cap and leaves nothing behind.
      const big = await ssh.run('head -c 100000 /dev/zero | tr "\\0" x', { maxBytes: 1000 });
      expect(big.stdout.startsWith('x'.repeat(1000))).toBe(true);
      expect(big.stdout).toMatch(/output truncated: 99000 more bytes/);
      const local = path.join(root, 'up.txt');
      await writeFile(local, 'payload\n');
      await ssh.putFile(local, '/tmp/up.txt');
      const back = path.join(root, 'back.txt');
      expect(await ssh.getFile('/tmp/up.txt', back, { maxBytes: 100 })).toBe(8);
      expect(await readFile(back, 'utf8')).toBe('payload\n');
      await ssh.run('head -c 5000 /dev/zero > /tmp/big');
      const tooBig = path.join(root, 'big');
      await expect(ssh.getFile('/tmp/big', tooBig, { maxBytes: 4096 })).rejects.toThrow(/over the 4096-byte limit/);
      expect(existsSync(tooBig)).toBe(false);

      // As the unprivileged agent user, with a pty.
      const agent = await vm.ssh({ username: 'agent' });
      expect((await agent.run('id -un; cd /work && touch x && echo ok')).stdout).toBe('agent\nok\n');
      agent.close();
      ssh.close();

      // The same port with any other host key is refused.
      const clientKey = readFileSync(sandboxFiles(sandboxDir).clientKey, 'utf8');
      await expect(
        SandboxSsh.connect({ port: vm.sshPort, privateKey: clientKey, hostPublicKey: generateSandboxKeys().hostPublicKey }),
      ).rejects.toBeInstanceOf(HostKeyMismatchError);
      // ...and an unknown client key cannot log in.
      await expect(
        SandboxSsh.connect({
          port: vm.sshPort,
          privateKey: generateSandboxKeys().clientPrivateKey,
          hostPublicKey: readFileSync(sandboxFiles(sandboxDir).hostPublicKey, 'utf8').trim(),
        }),
      ).rejects.toThrow(/authentication/i);
    } finally {
      loopback.close();
      await vm?.destroy();
    }
    expect(processAlive(vm!.pid)).toBe(false);
    expect(processesUsing(sandboxDir)).toEqual([]);
    const files = sandboxFiles(sandboxDir);
    expect(existsSync(files.overlay)).toBe(false);
    expect(existsSync(files.keysDir)).toBe(false);
    expect(existsSync(files.qmpSocket)).toBe(false);
    expect(existsSync(files.pidFile)).toBe(false);
    expect(readFileSync(files.serialLog, 'utf8')).toContain('factory-init: starting sshd');
  });

  it('a sandbox left running by an app that died is found by its folder and killed, and nothing else is', async () => {
    const sandboxDir = path.join(root, 'sb-orphan');
    const neighbourDir = path.join(root, 'sb-orphan-2');
    const vm = await driver.start({ sandboxDir, image, memoryMb: 512, fastBoot: false });
    let neighbour: RunningVm | undefined;
    try {
      neighbour = await driver.start({ sandboxDir: neighbourDir, image, memoryMb: 512, fastBoot: false });
      // What a restarted app knows: the folder and, from its record, maybe a pid (here the neighbour's, as after pid reuse).
      expect(await findLeftoverQemu(sandboxDir, [neighbour.pid])).toEqual([vm.pid]);
      expect(await killLeftoverQemu(sandboxDir, [neighbour.pid])).toEqual([vm.pid]);
      await vm.exited;
      expect(processAlive(vm.pid)).toBe(false);
      expect(processAlive(neighbour.pid)).toBe(true);
      const ssh = await neighbour.ssh();
      expect((await ssh.run('echo still-here')).stdout).toBe('still-here\n');
      ssh.close();
      expect(await findLeftoverQemu(sandboxDir)).toEqual([]);
    } finally {
      await vm.destroy();
      await neighbour?.destroy();
    }
    expect(await findLeftoverQemu(neighbourDir, [neighbour!.pid])).toEqual([]);
  });

  it('a guest that does not come up in time fails with the serial tail and leaves no process', async () => {
    const sandboxDir = path.join(root, 'sb-never');
    // No root device: the initramfs waits forever; without "quiet" the kernel talks on the console.
    const broken = { ...image, cmdline: image.cmdline.replace(/\bquiet\b/, '').replace('root=/dev/vda', 'root=/dev/vdz') };
    const started = Date.now();
    const err = await driver.start({ sandboxDir, image: broken, bootTimeoutMs: 8000, fastBoot: false }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.name).toBe('SandboxBootTimeout');
    expect(err?.message).toMatch(/did not answer SSH within 8 s/);
    expect(err?.message).toMatch(/--- last serial console lines ---\n[\s\S]*\S/);
    // Kernel lines from the guest's console (which ones depends on how far a loaded host got in 8 s).
    expect(err?.message).toMatch(/--- last serial console lines ---\n(?:.*\n)*\[\s*\d+\.\d+\] \S/);
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(processesUsing(sandboxDir)).toEqual([]);
    expect(existsSync(sandboxFiles(sandboxDir).overlay)).toBe(false);
    expect(existsSync(sandboxFiles(sandboxDir).keysDir)).toBe(false);
    expect(existsSync(sandboxFiles(sandboxDir).pidFile)).toBe(false);
  });

  it('fast boot restores a booted snapshot, each clone with its own keys and the current time', async () => {
    const dirs = [path.join(root, 'clone-a'), path.join(root, 'clone-b')];
    const vms: RunningVm[] = [];
    expect(await driver.prepareFastBoot(image)).toBe(true);
    // The saved guest clock stops when its template is saved: once that is 20 s
    // old, a clone whose clock was not set is 20 s behind and the check below fails.
    const templates = readdirSync(snapshotsDir)
      .map((name) => path.join(snapshotsDir, name))
      .filter((dir) => existsSync(path.join(dir, 'ready')) && readFileSync(path.join(dir, 'meta.json'), 'utf8').includes(JSON.stringify(path.resolve(image.disk))));
    expect(templates.length).toBeGreaterThan(0);
    const newest = Math.max(...templates.map((dir) => statSync(path.join(dir, 'state')).mtimeMs));
    if (Date.now() - newest < 20_000) await new Promise((r) => setTimeout(r, 20_000 - (Date.now() - newest)));
    try {
      for (const sandboxDir of dirs) {
        const vm = await driver.start({
          sandboxDir,
          image,
          guestForwards: [{ guestAddress: '10.0.2.100', guestPort: 9000, command: 'echo clone-forward' }],
        });
        vms.push(vm);
        console.log(`${path.basename(sandboxDir)}: ${vm.bootMode} start in ${vm.bootMs} ms` + (driver.lastFastBootError ? ` (fast boot failed: ${driver.lastFastBootError.message})` : ''));
        expect(vm.bootMode).toBe('snapshot');
        const ssh = await vm.ssh();
        const r = await ssh.run('date +%s; cat < /dev/tcp/10.0.2.100/9000; id -un agent');
        ssh.close();
        const [guestNow, fwd, user] = r.stdout.trim().split('\n');
        expect(Math.abs(Number(guestNow) - Date.now() / 1000)).toBeLessThan(5);
        expect(fwd).toBe('clone-forward');
        expect(user).toBe('agent');
        const agent = await vm.ssh({ username: 'agent' });
        expect((await agent.run('id -un')).stdout).toBe('agent\n');
        agent.close();
      }
      const [a, b] = dirs.map((d) => readFileSync(sandboxFiles(d).hostPublicKey, 'utf8'));
      expect(a).not.toBe(b);
      // One clone's client key does not open the other.
      await expect(
        SandboxSsh.connect({
          port: vms[1]!.sshPort,
          privateKey: readFileSync(sandboxFiles(dirs[0]!).clientKey, 'utf8'),
          hostPublicKey: b!.trim(),
        }),
      ).rejects.toThrow(/authentication/i);
      // Nor do the template's keys: its client key is refused and its host key no longer presented.
      for (const template of templates) {
        const t = sandboxFiles(template);
        await expect(
          SandboxSsh.connect({ port: vms[0]!.sshPort, privateKey: readFileSync(t.clientKey, 'utf8'), hostPublicKey: a!.trim() }),
        ).rejects.toThrow(/authentication/i);
        await expect(
          SandboxSsh.connect({ port: vms[0]!.sshPort, privateKey: readFileSync(sandboxFiles(dirs[0]!).clientKey, 'utf8'), hostPublicKey: readFileSync(t.hostPublicKey, 'utf8').trim() }),
        ).rejects.toBeInstanceOf(HostKeyMismatchError);
      }
      // Each clone is its folder's QEMU for crash cleanup.
      for (const [i, vm] of vms.entries()) expect(await findLeftoverQemu(dirs[i]!)).toEqual([vm.pid]);
    } finally {
      for (const vm of vms) await vm.destroy();
    }
    for (const vm of vms) expect(processAlive(vm.pid)).toBe(false);
    for (const d of dirs) {
      expect(processesUsing(d)).toEqual([]);
      expect(existsSync(sandboxFiles(d).overlay)).toBe(false);
    }
  });
});
