// QemuDriver behaviour that needs no guest: a missing QEMU, the free-port race
// retry, and cleanup after a failed start. A stand-in qemu script plays QEMU.
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { QemuDriver, readTail, sandboxFiles } from '../../../main/vm/qemu-driver.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});
async function tempDir() {
  const d = await mkdtemp(path.join(os.tmpdir(), 'qemu-driver-'));
  dirs.push(d);
  return d;
}
const tcg = async () => ({ accel: 'tcg' as const, cpu: 'max', reason: 'test' });

async function fakeImage(dir: string) {
  const disk = path.join(dir, 'base.qcow2');
  const { runCommand } = await import('../../../main/vm/process-runner.js');
  const r = await runCommand('qemu-img', ['create', '-q', '-f', 'qcow2', disk, '64M']);
  expect(r.code).toBe(0);
  return { disk, kernel: path.join(dir, 'vmlinuz'), initrd: path.join(dir, 'initrd.img'), cmdline: 'console=ttyS0' };
}

describe('QemuDriver', () => {
  it('says how to install QEMU when it is missing', async () => {
    const driver = new QemuDriver({ qemuBinary: '/nonexistent/qemu-system-x86_64', accel: tcg, snapshotsDir: false });
    const status = await driver.checkInstalled();
    expect(status.ok).toBe(false);
    expect(status.installHint).toMatch(/apt-get install qemu-system-x86 qemu-utils|brew install qemu/);
    const dir = await tempDir();
    await expect(driver.start({ sandboxDir: path.join(dir, 'sb'), image: await fakeImage(dir) })).rejects.toMatchObject({
      name: 'QemuNotInstalled',
      message: expect.stringMatching(/install QEMU with/),
    });
  });

  it('reports the real QEMU version when installed', async () => {
    const status = await new QemuDriver({ accel: tcg }).checkInstalled();
    expect(status).toMatchObject({ ok: true, version: expect.stringMatching(/^\d+\.\d+/) });
  });

  it('retries on another port when the SSH forward port was taken, then fails cleanly', async () => {
    const dir = await tempDir();
    const calls = path.join(dir, 'calls');
    const fake = path.join(dir, 'fake-qemu');
    await writeFile(
      fake,
      `#!/bin/sh
[ "$1" = "--version" ] && { echo "QEMU emulator version 9.9.9"; exit 0; }
for a in "$@"; do case "$a" in user,*) echo "$a" >> '${calls}';; esac; done
echo "qemu-system-x86_64: -netdev user: Could not set up host forwarding rule 'tcp:127.0.0.1:1-:22'" >&2
exit 1
`,
    );
    await chmod(fake, 0o755);
    const sandboxDir = path.join(dir, 'sb');
    const driver = new QemuDriver({ qemuBinary: fake, accel: tcg, snapshotsDir: false });
    await expect(driver.start({ sandboxDir, image: await fakeImage(dir), bootTimeoutMs: 20_000 })).rejects.toMatchObject({
      name: 'SandboxBootFailed',
      message: expect.stringMatching(/exited with code 1 before the sandbox answered SSH: .*Could not set up host forwarding rule/),
    });
    const netdevs = (await readFile(calls, 'utf8')).trim().split('\n');
    expect(netdevs.length).toBe(4);
    const ports = netdevs.map((n) => /hostfwd=tcp:127\.0\.0\.1:(\d+)-:22/.exec(n)?.[1]);
    expect(ports.every(Boolean)).toBe(true);
    // Nothing but the logs remains of a failed start.
    const files = sandboxFiles(sandboxDir);
    expect(existsSync(files.overlay)).toBe(false);
    expect(existsSync(files.keysDir)).toBe(false);
    expect(existsSync(files.serialLog)).toBe(true);
  });

  it('reads the serial tail of the current boot only, without control characters', async () => {
    const dir = await tempDir();
    const log = path.join(dir, 'serial.log');
    await writeFile(log, 'old boot line\n');
    const offset = (await readFile(log)).length;
    await writeFile(log, 'old boot line\nfirst\r\n\x1b[31mred\x1b[0m\x07\nlast\n');
    expect(readTail(log, offset, 10)).toBe('first\nred\nlast');
    expect(readTail(log, offset, 1)).toBe('last');
    expect(readTail(path.join(dir, 'missing'), 0, 5)).toBe('');
  });
});
