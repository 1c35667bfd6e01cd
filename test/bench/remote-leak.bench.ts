// Remote leak check benchmark, run with: npx tsx test/bench/remote-leak.bench.ts
// In one run and alternating: the leak check of a 1 GiB guest (a) on this
// machine (memory read from QEMU's process as the app does, overlay and serial
// log, scanned in Node) and (b) on the "remote" host (test/support/remote-host.ts:
// libvirt behind an OpenSSH server on 127.0.0.1; virsh dump --memory-only, then
// the perl scanner there from salted digests). Both look for the same
// credential. Prints each duration, the bytes scanned and the ratio.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MemorySecretStore } from '../../main/credentials/keychain.js';
import { dumpGuestMemoryWith, LeakChecker, type LeakCheckSources } from '../../main/credentials/leak-check.js';
import { sandboxFiles } from '../../main/vm/sandbox-files.js';
import { QemuDriver } from '../../main/vm/qemu-driver.js';
import { testImage } from '../support/image.js';
import { startRemoteHost } from '../support/remote-host.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 1);

async function main() {
  const image = await testImage();
  const rig = await startRemoteHost();
  const root = await mkdtemp(path.join(os.tmpdir(), 'remote-leak-bench-'));
  const remote = rig.sandboxDriver();
  const local = new QemuDriver({ snapshotsDir: false });
  const secrets = new MemorySecretStore();
  await secrets.put('k', `sk-ant-api03-${'x'.repeat(8)}${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`);
  const checker = new LeakChecker({ secrets });
  const size = { memoryMb: 1024, cpus: 1 };
  console.log(`image ${image.version}, ${os.cpus().length} host cores, load ${os.loadavg()[0]!.toFixed(2)}`);
  const times = { remote: [] as number[], local: [] as number[] };
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const kind of ['local', 'remote'] as const) {
        const sandboxDir = path.join(root, `${kind}${round}`);
        let sources: LeakCheckSources;
        let vm: { destroy(): Promise<void> };
        if (kind === 'local') {
          const lvm = await local.start({ sandboxDir, image, ...size });
          vm = lvm;
          const qmp = () => lvm.qmp();
          sources = {
            workDir: sandboxDir,
            overlayPath: sandboxFiles(sandboxDir).overlay,
            serialLog: path.join(sandboxDir, 'serial.log'),
            liveMemory: { qmp, qemuPid: lvm.pid },
            dumpMemory: async (f) => dumpGuestMemoryWith(await qmp(), f),
          };
        } else {
          const rvm = await remote.start({ sandboxDir, image, ...size });
          vm = rvm;
          sources = { workDir: sandboxDir, remote: rvm.leakSource() };
        }
        try {
          const t0 = performance.now();
          const report = await checker.check({ sandboxId: `${kind}${round}`, credentials: [{ id: 'k' }], sources });
          const ms = performance.now() - t0;
          times[kind].push(ms);
          const bytes = report.scanned.reduce((a, s) => a + s.bytes, 0);
          console.log(`round ${round} ${kind}: ${(ms / 1000).toFixed(1)} s, ${(bytes / 1024 ** 2).toFixed(0)} MiB scanned, verdict ${report.verdict}${report.scanned.some((s) => s.error) ? ` (${report.scanned.filter((s) => s.error).map((s) => s.error).join('; ')})` : ''}`);
        } finally {
          await vm.destroy();
        }
      }
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    console.log(`median leak check of a 1 GiB guest: remote ${(med(times.remote) / 1000).toFixed(1)} s, local ${(med(times.local) / 1000).toFixed(1)} s, ratio remote / local ${(med(times.remote) / med(times.local)).toFixed(2)}`);
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
