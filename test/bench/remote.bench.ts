// Remote sandbox benchmark, run with: npx tsx test/bench/remote.bench.ts
// In one run and alternating: Start → shell-ready (an SSH shell channel in the
// guest has printed its first bytes) for (a) the local QemuDriver, cold boot
// and fast boot (the booted snapshot, as the app runs it), and (b) the libvirt
// driver on the "remote" host (test/support/remote-host.ts: libvirt behind an
// OpenSSH server on 127.0.0.1, type='qemu' here, so TCG on both sides). The
// first remote start also uploads the base image; it is reported apart.
// Prints each and the ratios remote / local.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { RunningVmPort } from '../../main/sandbox/sandbox-ports.js';
import { appPaths } from '../../main/state/paths.js';
import { QemuDriver } from '../../main/vm/qemu-driver.js';
import { testImage } from '../support/image.js';
import { startRemoteHost } from '../support/remote-host.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 2);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Start → the first bytes of a shell in the guest. */
async function shellReady(start: () => Promise<RunningVmPort>): Promise<{ ms: number; vm: RunningVmPort }> {
  const t0 = performance.now();
  const vm = await start();
  const ssh = await vm.ssh();
  const ch = await ssh.shell({ cols: 80, rows: 24 });
  await new Promise<void>((resolve) => ch.once('data', () => resolve()));
  const ms = performance.now() - t0;
  ch.close();
  ssh.close();
  return { ms, vm };
}

async function main() {
  const image = await testImage();
  const rig = await startRemoteHost();
  const root = await mkdtemp(path.join(os.tmpdir(), 'remote-bench-'));
  const remote = rig.sandboxDriver();
  const cold = new QemuDriver({ snapshotsDir: false });
  const fast = new QemuDriver({ snapshotsDir: appPaths().snapshots });
  const size = { memoryMb: 1024, cpus: 1 };
  const times = { remote: [] as number[], cold: [] as number[], fast: [] as number[] };
  console.log(`image ${image.version}, ${os.cpus().length} host cores, load ${os.loadavg()[0]!.toFixed(2)}`);
  try {
    const t0 = performance.now();
    await remote.volumes.ensureBase(await rig.connect(), image);
    console.log(`first use of the host: base image uploaded and verified in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    for (let round = 1; round <= rounds; round++) {
      for (const [kind, driver] of [['remote', remote], ['cold', cold], ['fast', fast]] as const) {
        const { ms, vm } = await shellReady(() => driver.start({ sandboxDir: path.join(root, `${kind}${round}`), image, ...size }));
        times[kind].push(ms);
        console.log(`round ${round} ${kind}: ${(ms / 1000).toFixed(2)} s to shell-ready`);
        await vm.destroy();
      }
    }
    const m = { remote: median(times.remote), cold: median(times.cold), fast: median(times.fast) };
    console.log(`median start → shell-ready: remote ${(m.remote / 1000).toFixed(2)} s, local cold ${(m.cold / 1000).toFixed(2)} s, local fast ${(m.fast / 1000).toFixed(2)} s`);
    console.log(`ratio remote / local cold ${(m.remote / m.cold).toFixed(2)}, remote / local fast ${(m.remote / m.fast).toFixed(2)}`);
  } finally {
    await remote.reap().catch(() => undefined); // teardown: the test's own checks said what failed
    await rig.stop();
    await rm(root, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
