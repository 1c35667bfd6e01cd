// Starting a sandbox on an environment layer, and restarting one whose disk
// was frozen, without a guest: a stand-in QEMU records its command line and
// what qemu-img says about the disk it was given, then fails like QEMU.
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCommand } from '../../../main/vm/process-runner.js';
import { coldBootNote, QemuDriver } from '../../../main/vm/qemu-driver.js';
import { activeDisk, nextDisk, sandboxDisks, sandboxFiles } from '../../../main/vm/sandbox-files.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});
const tcg = async () => ({ accel: 'tcg' as const, cpu: 'max', reason: 'test' });

async function qemuImg(...args: string[]) {
  const r = await runCommand('qemu-img', args);
  expect(r.code, r.tail.join('\n')).toBe(0);
}

async function setup() {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'qemu-layer-'));
  dirs.push(dir);
  const image = { disk: path.join(dir, 'base.qcow2'), kernel: path.join(dir, 'vmlinuz'), initrd: path.join(dir, 'initrd.img'), cmdline: 'console=ttyS0' };
  await qemuImg('create', '-q', '-f', 'qcow2', image.disk, '64M');
  const layer = path.join(dir, 'layer.qcow2');
  await qemuImg('create', '-q', '-f', 'qcow2', '-b', image.disk, '-F', 'qcow2', layer);
  // Stand-in QEMU: one line per run with its arguments, then the backing file of the disk it was given.
  const log = path.join(dir, 'runs');
  const qemu = path.join(dir, 'qemu-system-x86_64');
  await writeFile(
    qemu,
    `#!/bin/sh
[ "$1" = "--version" ] && { echo "QEMU emulator version 9.9.9"; exit 0; }
disk=; prev=
for a in "$@"; do [ "$prev" = "-drive" ] && disk=\${a#file=} && disk=\${disk%%,if=*}; prev=$a; done
printf '%s\\0' "$@" >> '${log}'; echo >> '${log}'
printf 'BACKING=%s\\n' "$(qemu-img info -U --output=json "$disk" | sed -n 's/.*"backing-filename": "\\(.*\\)".*/\\1/p')" >> '${log}'
echo 'qemu-system-x86_64: stand-in stops here' >&2
exit 1
`,
  );
  await chmod(qemu, 0o755);
  const runs = async () =>
    (await readFile(log, 'utf8').catch(() => ''))
      .split('\n')
      .filter(Boolean)
      .reduce<Array<{ args: string[]; backing?: string }>>((out, line) => {
        if (line.startsWith('BACKING=')) out.at(-1)!.backing = line.slice('BACKING='.length);
        else out.push({ args: line.split('\0').slice(0, -1) });
        return out;
      }, []);
  return { dir, image, layer, qemu, runs };
}

const driveFile = (args: string[]) => /^file=(.*?),if=virtio/.exec(args[args.indexOf('-drive') + 1] ?? '')?.[1];

describe('QemuDriver on an environment layer', () => {
  it('boots cold on an overlay backed by the layer, never restoring the base image snapshot', async () => {
    const { dir, image, layer, qemu, runs } = await setup();
    const driver = new QemuDriver({ qemuBinary: qemu, accel: tcg, snapshotsDir: path.join(dir, 'snapshots') });
    const sandboxDir = path.join(dir, 'sb');
    await expect(driver.start({ sandboxDir, image, backingDisk: layer, bootTimeoutMs: 20_000 })).rejects.toMatchObject({
      message: expect.stringMatching(/stand-in stops here/),
    });
    const all = await runs();
    // No template boot and no -incoming: the image's memory would not match the layer's disk.
    expect(all).toHaveLength(1);
    expect(all[0]!.args).not.toContain('-incoming');
    expect(driveFile(all[0]!.args)).toBe(sandboxFiles(sandboxDir).overlay);
    expect(all[0]!.backing).toBe(layer);
    expect(existsSync(path.join(dir, 'snapshots'))).toBe(false);
    expect(driver.lastFastBootError).toBeUndefined();
  });

  it('refuses a layer disk that is missing, a folder or a symlink, before starting anything', async () => {
    const { dir, image, layer, qemu, runs } = await setup();
    const driver = new QemuDriver({ qemuBinary: qemu, accel: tcg, snapshotsDir: false });
    const link = path.join(dir, 'link.qcow2');
    await symlink(layer, link);
    for (const [disk, why] of [
      [path.join(dir, 'gone.qcow2'), /gone\.qcow2 to boot on is missing/],
      [dir, /to boot on is not a regular file/],
      [link, /link\.qcow2 to boot on is not a regular file/],
    ] as const) {
      await expect(driver.start({ sandboxDir: path.join(dir, 'sb'), image, backingDisk: disk })).rejects.toThrow(why);
    }
    expect(await runs()).toEqual([]);
  });

  it('restarts a sandbox whose disk was frozen on the newest disk of its chain, not on the frozen one', async () => {
    const { dir, image, qemu, runs } = await setup();
    const sandboxDir = path.join(dir, 'sb');
    await mkdir(sandboxDir);
    const files = sandboxFiles(sandboxDir);
    // Two freezes happened: overlay.qcow2 ← overlay-1 ← overlay-2 (the guest writes to overlay-2).
    await qemuImg('create', '-q', '-f', 'qcow2', '-b', image.disk, '-F', 'qcow2', files.overlay);
    const one = path.join(sandboxDir, 'overlay-1.qcow2');
    const two = path.join(sandboxDir, 'overlay-2.qcow2');
    await qemuImg('create', '-q', '-f', 'qcow2', '-b', files.overlay, '-F', 'qcow2', one);
    await qemuImg('create', '-q', '-f', 'qcow2', '-b', one, '-F', 'qcow2', two);
    const driver = new QemuDriver({ qemuBinary: qemu, accel: tcg, snapshotsDir: path.join(dir, 'snapshots') });
    await expect(driver.start({ sandboxDir, image, bootTimeoutMs: 20_000 })).rejects.toThrow(/stand-in stops here/);
    const all = await runs();
    expect(all).toHaveLength(1);
    expect(driveFile(all[0]!.args)).toBe(two);
    expect(all[0]!.backing).toBe(one);
    // A failed restart keeps the sandbox's disks.
    expect(sandboxDisks(files)).toEqual([files.overlay, one, two]);
  });

  it('a sandbox folder holding later disks but not the first starts fresh on the image, without them', async () => {
    const { dir, image, qemu, runs } = await setup();
    const sandboxDir = path.join(dir, 'sb');
    await mkdir(sandboxDir);
    const files = sandboxFiles(sandboxDir);
    const stale = path.join(sandboxDir, 'overlay-1.qcow2');
    await qemuImg('create', '-q', '-f', 'qcow2', '-b', path.join(dir, 'gone.qcow2'), '-F', 'qcow2', '-u', stale, '64M');
    const driver = new QemuDriver({ qemuBinary: qemu, accel: tcg, snapshotsDir: false });
    await expect(driver.start({ sandboxDir, image, bootTimeoutMs: 20_000 })).rejects.toThrow(/stand-in stops here/);
    const all = await runs();
    expect(driveFile(all[0]!.args)).toBe(files.overlay);
    expect(all[0]!.backing).toBe(image.disk);
    expect(existsSync(stale)).toBe(false);
  });

  it('orders a sandbox chain by number and ignores files that only look like part of it', async () => {
    const { dir } = await setup();
    const sandboxDir = path.join(dir, 'sb');
    await mkdir(sandboxDir);
    const files = sandboxFiles(sandboxDir);
    expect(sandboxDisks(files)).toEqual([]);
    expect(activeDisk(files)).toBe(files.overlay);
    expect(nextDisk(files)).toBe(path.join(sandboxDir, 'overlay-1.qcow2'));
    for (const name of ['overlay.qcow2', 'overlay-2.qcow2', 'overlay-10.qcow2', 'overlay-01.qcow2', 'overlay-0.qcow2', 'overlay-x.qcow2', 'overlay-3.qcow2.tmp', 'overlay--1.qcow2']) {
      await writeFile(path.join(sandboxDir, name), '');
    }
    expect(sandboxDisks(files).map((f) => path.basename(f))).toEqual(['overlay.qcow2', 'overlay-2.qcow2', 'overlay-10.qcow2']);
    expect(activeDisk(files)).toBe(path.join(sandboxDir, 'overlay-10.qcow2'));
    expect(nextDisk(files)).toBe(path.join(sandboxDir, 'overlay-11.qcow2'));
  });
});

describe('what a task is told when its saved memory was not restored', () => {
  it('names what was not restored and QEMU’s reason, on one printable line', () => {
    const note = coldBootNote('layer', new Error('QEMU exited with code 1: qemu-system-x86_64: load of migration failed\n\x1b[31mInvalid argument\x1b[0m'));
    expect(note).toMatch(/^booted cold: the cached environment's saved memory could not be restored \(QEMU exited with code 1: .*load of migration failed .*Invalid argument.*\)$/);
    expect(note).not.toMatch(/[^\x20-\x7e]/);
    expect(coldBootNote('image', new Error('snapshot state did not load in time'))).toBe("booted cold: the image's snapshot could not be restored (snapshot state did not load in time)");
  });

  it('caps a long reason and still closes it', () => {
    const note = coldBootNote('image', new Error(`QEMU exited: ${'x'.repeat(5000)}`));
    expect(note.length).toBeLessThanOrEqual(400);
    expect(note.endsWith('…)')).toBe(true);
  });
});
