// QemuDriver behaviour that needs no guest: a missing QEMU, the free-port race
// retry, and cleanup after a failed start. A stand-in qemu script plays QEMU.
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { QemuDriver, sandboxFiles } from '../../../main/vm/qemu-driver.js';
import { readTail } from '../../../main/vm/serial-log.js';

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

/** A stand-in QEMU that records its arguments (one line per run, NUL-separated) and fails like QEMU with stderrLine. */
async function recordingQemu(dir: string, stderrLine: string) {
  const log = path.join(dir, 'runs');
  const file = path.join(dir, 'qemu-system-x86_64');
  await writeFile(
    file,
    `#!/bin/sh
[ "$1" = "--version" ] && { echo "QEMU emulator version 9.9.9"; exit 0; }
printf '%s\\0' "$@" >> '${log}'; echo >> '${log}'
echo '${stderrLine}' >&2
exit 1
`,
  );
  await chmod(file, 0o755);
  return {
    path: file,
    runs: async () => (await readFile(log, 'utf8').catch(() => '')).split('\n').filter(Boolean).map((l) => l.split('\0').slice(0, -1)),
  };
}

function argAfter(args: string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
}

describe('QemuDriver', () => {
  it('says how to install QEMU when it is missing', async () => {
    const driver = new QemuDriver({ qemuBinary: '/nonexistent/qemu-system-x86_64', accel: tcg, snapshotsDir: false });
    const status = await driver.checkInstalled();
    expect(status.ok).toBe(false);
    expect(status.installHint).toMatch(/apt-get install qemu-system-x86 qemu-utils|brew install qemu/);
    const dir = await tempDir();
    await expect(driver.start({ sandboxDir: path.join(dir, 'sb'), image: await fakeImage(dir) })).rejects.toMatchObject({
      name: 'QemuMissing',
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
    const ports = netdevs.map((n) => Number(/hostfwd=tcp:127\.0\.0\.1:(\d+)-:22/.exec(n)?.[1]));
    expect(ports.every((p) => p > 0 && p < 65536)).toBe(true);
    // Each retry uses a port not tried before.
    expect(new Set(ports).size).toBe(4);
    // Nothing but the logs remains of a failed start.
    const files = sandboxFiles(sandboxDir);
    expect(existsSync(files.overlay)).toBe(false);
    expect(existsSync(files.keysDir)).toBe(false);
    expect(existsSync(files.pidFile)).toBe(false);
    expect(existsSync(files.qmpSocket)).toBe(false);
    expect(readFileSync(files.serialLog, 'utf8').match(/=== factory: cold boot /g)).toHaveLength(4);
  });

  it('uses the accelerator it is given instead of probing, and reads no environment itself', async () => {
    const dir = await tempDir();
    const fake = await recordingQemu(dir, 'qemu-system-x86_64: -accel kvm: could not access KVM kernel module: No such file or directory');
    const saved = { accel: process.env.FACTORY_ACCEL, fast: process.env.FACTORY_FAST_BOOT };
    // Set to values that would change the run if the driver still read them.
    process.env.FACTORY_ACCEL = 'tcg';
    process.env.FACTORY_FAST_BOOT = '1';
    try {
      const driver = new QemuDriver({ qemuBinary: fake.path, forceAccel: { accel: 'kvm', reason: 'user asked for KVM' } });
      await expect(driver.start({ sandboxDir: path.join(dir, 'sb'), image: await fakeImage(dir), bootTimeoutMs: 20_000 })).rejects.toMatchObject({
        name: 'SandboxBootFailed',
        message: expect.stringMatching(/could not access KVM/),
      });
    } finally {
      for (const [k, v] of [['FACTORY_ACCEL', saved.accel], ['FACTORY_FAST_BOOT', saved.fast]] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
    const runs = await fake.runs();
    // One cold boot (no snapshot dir was given, so no template boot first) with -accel kvm -cpu host.
    expect(runs).toHaveLength(1);
    expect(argAfter(runs[0]!, '-accel')).toBe('kvm');
    expect(argAfter(runs[0]!, '-cpu')).toBe('host');
    expect(argAfter(runs[0]!, '-pidfile')).toBe(sandboxFiles(path.join(dir, 'sb')).pidFile);
  });

  it('falls back to a cold boot when the snapshot template cannot be made, and keeps no half template', async () => {
    const dir = await tempDir();
    const fake = await recordingQemu(dir, 'qemu-system-x86_64: cannot set up guest memory: Cannot allocate memory');
    const snapshotsDir = path.join(dir, 'snapshots');
    const driver = new QemuDriver({ qemuBinary: fake.path, accel: tcg, snapshotsDir });
    const sandboxDir = path.join(dir, 'sb');
    await expect(driver.start({ sandboxDir, image: await fakeImage(dir), bootTimeoutMs: 20_000 })).rejects.toMatchObject({
      name: 'SandboxBootFailed',
      message: expect.stringMatching(/Cannot allocate memory/),
    });
    expect(driver.lastFastBootError?.message).toMatch(/Cannot allocate memory/);
    const pidFiles = (await fake.runs()).map((r) => argAfter(r, '-pidfile'));
    // First the template (in the snapshot store's temporary folder), then this sandbox, cold.
    expect(pidFiles).toHaveLength(2);
    expect(path.relative(snapshotsDir, pidFiles[0]!)).toMatch(/^\.tmp-[0-9a-f]{16}-\d+-\d+\/qemu\.pid$/);
    expect(pidFiles[1]).toBe(sandboxFiles(sandboxDir).pidFile);
    expect(readdirSync(snapshotsDir)).toEqual([]);
    expect(existsSync(sandboxFiles(sandboxDir).overlay)).toBe(false);
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
