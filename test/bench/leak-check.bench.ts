// Leak check benchmark, run with: bash test/support/with-keyring.sh npx tsx test/bench/leak-check.bench.ts
// One running 1 GiB sandbox (restored from the image's snapshot, as the app
// starts one), checked alternately the two ways the app can read its memory:
//   live   read in place from QEMU's process, the VM paused meanwhile (the app's way on Linux);
//   dump   QMP dump-guest-memory into the sandbox folder, then the file scanned (the baseline,
//          and the app's way where the direct read is not possible).
// Both scan the disk overlay and the serial log too, as the app's check does. Prints the
// median of each, the ratio live / dump, and how long the guest was paused.
// BENCH_ROUNDS (default 3).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MemorySecretStore } from '../../main/credentials/keychain.js';
import { dumpGuestMemoryWith, LeakChecker, type LeakCheckSources, type QmpExecutor } from '../../main/credentials/leak-check.js';
import { sandboxFiles } from '../../main/vm/sandbox-files.js';
import { appPaths } from '../../main/state/paths.js';
import { QemuDriver } from '../../main/vm/qemu-driver.js';
import { testImage } from '../support/image.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const MEMORY_MB = 1024;

async function main() {
  const image = await testImage();
  const root = await mkdtemp(path.join(os.tmpdir(), 'leak-check-bench-'));
  const sandboxDir = path.join(root, 'vm');
  const vm = await new QemuDriver({ snapshotsDir: appPaths().snapshots }).start({ sandboxDir, image, memoryMb: MEMORY_MB, cpus: 2 });
  const secrets = new MemorySecretStore();
  await secrets.put('k', `sk-ant-api03-${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`);
  const checker = new LeakChecker({ secrets });
  const own = await vm.qmp();
  // Paused time: from the stop the check sends to its cont, or the dump's whole run (QEMU stops the VM for it).
  let pausedFrom = 0;
  let paused = 0;
  const qmp: QmpExecutor = {
    async execute(command, args) {
      if (command === 'stop' || command === 'dump-guest-memory') pausedFrom = performance.now();
      const r = await own.execute(command, args);
      if (command === 'cont' || command === 'dump-guest-memory') paused += performance.now() - pausedFrom;
      return r;
    },
  };
  const common = { workDir: sandboxDir, overlayPath: sandboxFiles(sandboxDir).overlay, serialLog: path.join(sandboxDir, 'serial.log') };
  const kinds: Record<'live' | 'dump', LeakCheckSources> = {
    live: { ...common, liveMemory: { qmp: async () => qmp, qemuPid: vm.pid } },
    dump: { ...common, dumpMemory: (f) => dumpGuestMemoryWith(qmp, f) },
  };
  const times = { live: [] as number[], dump: [] as number[] };
  const pauses = { live: [] as number[], dump: [] as number[] };
  console.log(`image ${image.version}, ${os.cpus().length} host cores, load ${os.loadavg()[0]!.toFixed(2)}, guest ${MEMORY_MB} MiB, boot ${vm.bootMode}`);
  try {
    // The guest's page cache filled a little, as after a stage.
    const ssh = await vm.ssh();
    await ssh.run('cat /usr/bin/* > /dev/null 2>&1; true', { timeoutMs: 300_000 });
    ssh.close();
    for (let round = 1; round <= rounds; round++) {
      for (const kind of ['live', 'dump'] as const) {
        paused = 0;
        const t0 = performance.now();
        const report = await checker.check({ sandboxId: 'bench', credentials: [{ id: 'k' }], sources: kinds[kind] });
        const ms = performance.now() - t0;
        const memory = report.scanned.find((s) => s.source === 'guest memory');
        if (report.verdict !== 'clean' || memory?.note) throw new Error(`${kind}: ${report.verdict} ${JSON.stringify(report.scanned)}`);
        times[kind].push(ms);
        pauses[kind].push(paused);
        console.log(`round ${round} ${kind}: ${(ms / 1000).toFixed(2)} s, guest paused ${(paused / 1000).toFixed(2)} s, ${(report.scanned.reduce((a, s) => a + s.bytes, 0) / 1024 ** 2).toFixed(0)} MiB scanned`);
      }
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    console.log(`\nmedian leak check of a ${MEMORY_MB} MiB sandbox: live ${(med(times.live) / 1000).toFixed(2)} s (paused ${(med(pauses.live) / 1000).toFixed(2)} s), dump ${(med(times.dump) / 1000).toFixed(2)} s (paused ${(med(pauses.dump) / 1000).toFixed(2)} s)`);
    console.log(`live / dump: ${(med(times.live) / med(times.dump)).toFixed(2)}`);
  } finally {
    await vm.destroy();
    await rm(root, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
