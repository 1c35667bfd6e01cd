// Sandboxes on a "remote" host: libvirt on this machine reached only through
// an OpenSSH server on 127.0.0.1 (test/support/remote-host.ts), standing in for
// a user's KVM box. The guest boots under libvirt, its SSH is reached through
// the host, its proxy address comes back across the same SSH connection to a
// socket on "the user's machine", and nothing is left on the host afterwards.
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proxyGuestForward } from '../../main/credentials/routes.js';
import type { LibvirtSandboxDriver } from '../../main/remote/libvirt-sandbox-driver.js';
import { SshHost } from '../../main/remote/ssh-host.js';
import { VolumeStore } from '../../main/remote/volume-store.js';
import type { BaseImage } from '../../main/vm/image-store.js';
import { TCG_CACHE_MB } from '../../main/vm/qemu-args.js';
import { testImage } from '../support/image.js';
import { startRemoteHost, type RemoteHostRig } from '../support/remote-host.js';

let rig: RemoteHostRig;
let driver: LibvirtSandboxDriver;
let home: string;
let homeServer: http.Server;
const seenAtHome: string[] = [];

async function onHost(cmd: string): Promise<string> {
  const r = await rig.exec(cmd);
  return r.stdout;
}

beforeAll(async () => {
  rig = await startRemoteHost({ ownImages: true });
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'remote-home-'));
  // The app's proxy socket on the user's machine (a plain HTTP server on a unix socket here).
  homeServer = http.createServer((req, res) => {
    seenAtHome.push(`${req.method} ${req.url}`);
    res.end('answered at home\n');
  });
  await new Promise<void>((r) => homeServer.listen(path.join(home, 'proxy.sock'), r));
  driver = rig.sandboxDriver();
});

afterAll(async () => {
  await driver?.reap().catch(() => undefined); // teardown: the test's own checks said what failed
  homeServer?.close();
  await rig?.stop();
  if (home) fs.rmSync(home, { recursive: true, force: true });
});

describe('a sandbox host reached over SSH', () => {
  it('refuses a host whose key is not pinned, showing its fingerprint', async () => {
    const err = await SshHost.connect({ name: 'rig', host: '127.0.0.1', port: rig.port, username: 'root', privateKey: rig.privateKey }).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'RemoteHostKeyUnknown' });
    expect((err as Error).message).toContain(rig.hostKeyFingerprint);
  });

  it('refuses loudly a host whose key changed (someone in the middle)', async () => {
    const other = 'SHA256:' + 'A'.repeat(43);
    const err = await SshHost.connect({ name: 'rig', host: '127.0.0.1', port: rig.port, username: 'root', privateKey: rig.privateKey, hostKeyFingerprint: other }).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'RemoteHostKeyChanged' });
    expect((err as Error).message).toMatch(/CHANGED/);
    expect((err as Error).message).toContain(rig.hostKeyFingerprint);
  });

  it('checks the host as Settings would: libvirt with QEMU, socat, the storage folder and its free space', async () => {
    const check = await driver.checkHost();
    expect(check.problems).toEqual([]);
    expect(check.qemu).toMatch(/^\d+\.\d+/);
    expect(check.freeBytes).toBeGreaterThan(1024 ** 3);
    // Whether libvirt offers KVM there comes from libvirt itself (here it may say so even though tests use TCG).
    expect(typeof check.kvm).toBe('boolean');
    // The line the check reads the daemon's version from (too old to emulate is a problem to show).
    expect(await onHost('virsh -q -c qemu:///system version --daemon')).toMatch(/^Running against daemon: \d+\.\d+/m);
  });

  it('runs commands on the host in the C locale, whatever the host’s own, since it reads what they say', async () => {
    const host = await rig.connect();
    expect((await host.run(['sh', '-c', 'printf "%s|%s" "$LC_ALL" "$(locale 2>/dev/null | grep ^LC_MESSAGES=)"'])).stdout).toBe('C|LC_MESSAGES="C"');
  });

  it('boots the base image under libvirt, reaches the guest through the host and leaves nothing at teardown', async () => {
    const image = await testImage();
    const sandboxDir = path.join(home, 'sandboxes', 'rmtboot1');
    const vm = await driver.start({ sandboxDir, image, memoryMb: 1024, cpus: 1, guestForwards: [proxyGuestForward(path.join(home, 'proxy.sock'))] });
    try {
      expect(await onHost('virsh -q -c qemu:///system list --name')).toContain('fiab-rmtboot1');
      // Uploaded once, content-addressed by the manifest, verified: read-only files in images/<sha256>.
      expect(await onHost(`ls ${rig.storageDir}/images`)).toMatch(/^[0-9a-f]{64}\n$/);
      const qemuArgs = await onHost("ps -o args= -C qemu-system-x86_64 | grep -F 'guest=fiab-rmtboot1'");
      expect(qemuArgs).toContain('restrict=on');
      // Software emulation here: the CPU with AVX2 the agent binaries need, as locally.
      expect(qemuArgs).toMatch(/-cpu max\b/);
      expect(qemuArgs).toMatch(new RegExp(`-accel tcg,tb-size=${TCG_CACHE_MB}\\b`));
      expect(qemuArgs).toMatch(/hostfwd=tcp:127\.0\.0\.1:\d+-:22/);
      expect(qemuArgs).not.toMatch(/virtfs|9p|-fsdev/);

      const ssh = await vm.ssh();
      const r = await ssh.run('uname -r; cat /sys/firmware/qemu_fw_cfg/by_name/opt/factory/authorized_keys/raw', { timeoutMs: 60_000 });
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(vm.keys.clientPublicKey.trim());

      // The guest's proxy address reaches the socket on the user's machine, across the host.
      const viaProxy = await ssh.run('curl -s -m 20 http://10.0.2.100/from-guest', { timeoutMs: 60_000 });
      expect(viaProxy.stdout).toBe('answered at home\n');
      expect(seenAtHome).toContain('GET /from-guest');
      // restrict=on: the host's own services (its sshd) are not reachable from the guest.
      const out = await ssh.run(`curl -s -m 5 telnet://10.0.2.2:${rig.port} </dev/null; echo rc=$?`, { timeoutMs: 60_000 });
      expect(out.stdout).not.toContain('SSH-2.0');
      ssh.close();
    } finally {
      await vm.destroy();
    }
    expect(await onHost('virsh -q -c qemu:///system list --all --name')).not.toContain('fiab-rmtboot1');
    expect(await onHost(`ls -A ${rig.storageDir}/sandboxes`)).toBe('');
  });

  it('two apps putting the same image on the host at once both get it, in one folder, and leave no upload behind', async () => {
    // A small image (three files and its manifest): what is tested is two uploads meeting, not their size.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'two-apps-image-'));
    const file = (name: string, content: string) => {
      fs.writeFileSync(path.join(dir, name), content);
      return { name, sha256: createHash('sha256').update(content).digest('hex'), bytes: content.length };
    };
    const files = { disk: { ...file('disk.qcow2', 'disk'), format: 'qcow2' as const, virtualBytes: 4 }, kernel: file('vmlinuz', 'kernel'), initrd: file('initrd.img', 'initrd') };
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({ files, made: randomUUID() }));
    const image = { dir, disk: path.join(dir, 'disk.qcow2'), kernel: path.join(dir, 'vmlinuz'), initrd: path.join(dir, 'initrd.img'), manifest: { files } };
    const storage = path.join(path.dirname(rig.storageDir), 'storage-two-apps');
    const [a, b] = await Promise.all([SshHost.connect(rig.sshTarget()), SshHost.connect(rig.sshTarget())]);
    try {
      // Each app has its own store (its own record of uploads under way) and its own connection.
      const [x, y] = await Promise.all([new VolumeStore(storage).ensureBase(a, image as BaseImage), new VolumeStore(storage).ensureBase(b, image as BaseImage)]);
      expect(y).toEqual(x);
      expect(await onHost(`ls -A ${storage}/images`)).toBe(`${x.hash}\n`);
      expect(await onHost(`cat ${x.kernel} ${x.dir}/complete`)).toBe('kernel');
    } finally {
      a.close();
      b.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a dropped connection ends the sandbox, and reconnecting removes what was left running', async () => {
    const image = await testImage();
    const vm = await driver.start({ sandboxDir: path.join(home, 'sandboxes', 'rmtlost1'), image, memoryMb: 1024, cpus: 1 });
    expect(await onHost('virsh -q -c qemu:///system list --name')).toContain('fiab-rmtlost1');
    await rig.dropConnections();
    await vm.exited;
    expect(vm.hasExited).toBe(true);
    // The guest kept running on the host while nobody was connected.
    expect(await onHost('virsh -q -c qemu:///system list --name')).toContain('fiab-rmtlost1');
    expect(await driver.reap()).toEqual(['fiab-rmtlost1']);
    expect(await onHost('virsh -q -c qemu:///system list --all --name')).not.toContain('fiab-rmtlost1');
    expect(await onHost(`ls -A ${rig.storageDir}/sandboxes`)).toBe('');
  });
});
