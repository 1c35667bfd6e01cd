// Boot benchmark, run with: npx tsx test/bench/boot.bench.ts
// In the same run and alternating: (a) QemuDriver.start() until an SSH shell
// channel has printed its first bytes, booting cold and restoring the booted
// snapshot (fast boot), and (b) a raw qemu-system-x86_64 command booting the
// same image with the same keys until the forwarded port sends the SSH banner.
// Prints each, the ratios, and the disk a fresh overlay uses (du).
import { spawn } from 'node:child_process';
import { mkdtemp, mkdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { generateSandboxKeys } from '../../main/ssh/sandbox-keys.js';
import { AccelProbe } from '../../main/vm/accel-probe.js';
import { createOverlay } from '../../main/vm/overlay.js';
import { probeSshBanner } from '../../main/guest/guest-agent.js';
import { appPaths } from '../../main/state/paths.js';
import { freePort, QemuDriver } from '../../main/vm/qemu-driver.js';
import { testImage } from '../support/image.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 2);

async function duBytes(file: string): Promise<number> {
  return (await stat(file)).blocks * 512;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

async function main() {
  const image = await testImage();
  const accel = await AccelProbe.cached();
  const root = await mkdtemp(path.join(os.tmpdir(), 'boot-bench-'));
  // Fast boot on, with the app's snapshot folder, as the app runs it.
  const driver = new QemuDriver({ snapshotsDir: appPaths().snapshots });
  const driverMs: number[] = [];
  const snapshotMs: number[] = [];
  const rawMs: number[] = [];
  let overlayFresh = 0;
  let overlayApparent = 0;
  let overlayAfterBoot = 0;
  console.log(`image ${image.version}, accel ${accel.accel} (${accel.reason}), ${os.cpus().length} host cores, load ${os.loadavg()[0]!.toFixed(2)}`);

  try {
    for (let round = 1; round <= rounds; round++) {
      // (b) raw QEMU: same image, same devices, same fw_cfg keys, no driver.
      {
        const dir = path.join(root, `raw-${round}`);
        await mkdir(dir, { recursive: true });
        const overlay = path.join(dir, 'overlay.qcow2');
        await createOverlay(image.disk, overlay);
        if (round === 1) {
          overlayFresh = await duBytes(overlay);
          overlayApparent = (await stat(overlay)).size;
        }
        const keys = generateSandboxKeys();
        await writeFile(path.join(dir, 'authorized_keys'), keys.clientPublicKey);
        await writeFile(path.join(dir, 'host_key'), keys.hostPrivateKey, { mode: 0o600 });
        const port = await freePort();
        const t0 = performance.now();
        const child = spawn('qemu-system-x86_64', [
          '-nodefaults', '-display', 'none', '-machine', 'pc', '-accel', accel.accel, '-cpu', accel.cpu, '-smp', '2', '-m', '2048',
          '-kernel', image.kernel, '-initrd', image.initrd, '-append', image.cmdline,
          '-drive', `file=${overlay},if=virtio,format=qcow2`,
          '-netdev', `user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:${port}-:22`, '-device', 'virtio-net-pci,netdev=n0',
          '-device', 'virtio-rng-pci', '-serial', `file:${path.join(dir, 'serial.log')}`,
          '-fw_cfg', `name=opt/factory/authorized_keys,file=${path.join(dir, 'authorized_keys')}`,
          '-fw_cfg', `name=opt/factory/ssh_host_ed25519_key,file=${path.join(dir, 'host_key')}`,
        ], { stdio: 'ignore' });
        const deadline = Date.now() + 300_000;
        let ok = false;
        while (Date.now() < deadline && child.exitCode === null) {
          if (await probeSshBanner(port, 2000)) {
            ok = true;
            break;
          }
          await new Promise((r) => setTimeout(r, 100));
        }
        const ms = performance.now() - t0;
        if (round === 1) overlayAfterBoot = await duBytes(overlay);
        child.kill('SIGKILL');
        await new Promise((r) => child.once('exit', r));
        if (!ok) throw new Error('raw QEMU never answered SSH');
        rawMs.push(ms);
        console.log(`round ${round}: raw qemu-system-x86_64 to SSH banner   ${(ms / 1000).toFixed(2)} s`);
      }
      // (a) through the driver, to a shell channel that has printed something.
      for (const fastBoot of [false, true]) {
        if (fastBoot && round === 1) await driver.prepareFastBoot(image);
        const t0 = performance.now();
        const vm = await driver.start({ sandboxDir: path.join(root, `driver-${round}-${fastBoot}`), image, fastBoot });
        const ssh = await vm.ssh();
        const shell = await ssh.shell({ cols: 80, rows: 24 });
        await new Promise<void>((resolve) => shell.once('data', () => resolve()));
        const ms = performance.now() - t0;
        (fastBoot ? snapshotMs : driverMs).push(ms);
        console.log(`round ${round}: QemuDriver.start() ${vm.bootMode} to shell-ready SSH ${(ms / 1000).toFixed(2)} s (bootMs ${vm.bootMs})`);
        if (fastBoot && vm.bootMode !== 'snapshot') console.log(`  fast boot fell back: ${driver.lastFastBootError?.message}`);
        shell.close();
        ssh.close();
        const stopT0 = performance.now();
        await vm.destroy();
        console.log(`round ${round}: destroy() ${(performance.now() - stopT0).toFixed(0)} ms`);
      }
    }
  } finally {
    await rm(root, { recursive: true, force: true });
  }

  const d = median(driverMs);
  const f = median(snapshotMs);
  const r = median(rawMs);
  console.log('\n== boot benchmark ==');
  console.log(`raw qemu-system-x86_64 → SSH banner (median of ${rounds}):              ${(r / 1000).toFixed(2)} s`);
  console.log(`QemuDriver cold boot → shell-ready SSH (median of ${rounds}):          ${(d / 1000).toFixed(2)} s  ratio ${(d / r).toFixed(2)}`);
  console.log(`QemuDriver snapshot restore → shell-ready SSH (median of ${rounds}):   ${(f / 1000).toFixed(2)} s  ratio ${(f / r).toFixed(2)}`);
  console.log(`fresh overlay: ${(overlayFresh / 1024).toFixed(0)} KiB used (du), ${(overlayApparent / 1024).toFixed(0)} KiB apparent; after boot to SSH: ${(overlayAfterBoot / 1024 / 1024).toFixed(1)} MiB used`);
  console.log(`base image disk: ${(image.manifest.files.disk.bytes / 1e6).toFixed(0)} MB qcow2, ${(image.manifest.files.disk.virtualBytes / 2 ** 30).toFixed(0)} GiB virtual`);
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
