// TCG threads benchmark, run with: bash test/support/with-keyring.sh npx tsx test/bench/tcg-threads.bench.ts
// Two sandboxes restored at once, as two tasks run by default, each doing the same
// guest work (the agent CLIs starting, git committing and packing a tree, tar with
// gzip) at the same time; rounds alternate QEMU's multi-threaded TCG (a host thread
// per vCPU) with one thread per sandbox. Then one sandbox alone, the same way.
// Prints, per kind, the median wall time of the work and the CPU both QEMUs used
// for it, and the ratios against multi measured in this run (qemu-args.ts, tcgThreads).
// BENCH_ROUNDS (default 3).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { appPaths } from '../../main/state/paths.js';
import type { TcgThreads } from '../../main/vm/qemu-args.js';
import { QemuDriver, type RunningVm } from '../../main/vm/qemu-driver.js';
import { testImage } from '../support/image.js';
import { pidCpu } from '../support/process-cpu.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const CPUS = 2;
const WORK = [
  'for i in 1 2 3; do claude --version; codex --version; done >/dev/null 2>&1',
  'rm -rf /tmp/w && mkdir /tmp/w && cd /tmp/w && git init -q && cp -r /usr/share/doc /usr/share/perl5 . && git add -A',
  'cd /tmp/w && git -c user.email=b@e -c user.name=b commit -qm w && git log --stat >/dev/null && git gc -q',
  'tar czf /tmp/w.tgz -C /usr/share perl5 doc && mkdir -p /tmp/x && tar xzf /tmp/w.tgz -C /tmp/x',
].join(' && ');

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Measured {
  wallS: number;
  cpuS: number;
}

async function measure(threads: TcgThreads, sandboxes: number, root: string): Promise<Measured> {
  const driver = new QemuDriver({ snapshotsDir: appPaths().snapshots, tcgThreads: threads });
  const image = await testImage();
  const vms: RunningVm[] = [];
  try {
    for (let i = 0; i < sandboxes; i++) vms.push(await driver.start({ sandboxDir: path.join(root, `${threads}-${sandboxes}-${i}`), image, cpus: CPUS, memoryMb: 1024 }));
    const sshs = await Promise.all(vms.map((vm) => vm.ssh()));
    const before = vms.map((vm) => pidCpu(vm.pid));
    const t0 = performance.now();
    const results = await Promise.all(sshs.map((ssh) => ssh.run(WORK, { timeoutMs: 600_000 })));
    const wallS = (performance.now() - t0) / 1000;
    const cpuS = vms.reduce((sum, vm, i) => sum + pidCpu(vm.pid) - before[i]!, 0);
    for (const r of results) if (r.code !== 0) throw new Error(`guest work failed (${r.code}): ${r.stderr.slice(0, 400)}`);
    for (const ssh of sshs) ssh.close();
    return { wallS, cpuS };
  } finally {
    await Promise.all(vms.map((vm) => vm.destroy()));
  }
}

const root = await mkdtemp(path.join(os.tmpdir(), 'tcg-threads-bench-'));
try {
  console.log(`${os.availableParallelism()} cores here; ${rounds} rounds; each sandbox ${CPUS} vCPUs`);
  for (const sandboxes of [2, 1]) {
    const runs: Record<TcgThreads, Measured[]> = { multi: [], single: [] };
    for (let r = 0; r < rounds; r++) {
      // Alternating, and each round starting with the other kind, so drift in the machine's load falls on both.
      for (const threads of (r % 2 ? ['single', 'multi'] : ['multi', 'single']) satisfies TcgThreads[]) {
        const m = await measure(threads, sandboxes, root);
        runs[threads].push(m);
        console.log(`  ${sandboxes} sandbox(es), thread=${threads}: work ${m.wallS.toFixed(1)} s, QEMU CPU ${m.cpuS.toFixed(1)} s`);
      }
    }
    const medianOf = (threads: TcgThreads, of: keyof Measured) => median(runs[threads].map((m) => m[of]));
    const wall = { multi: medianOf('multi', 'wallS'), single: medianOf('single', 'wallS') };
    const cpu = { multi: medianOf('multi', 'cpuS'), single: medianOf('single', 'cpuS') };
    console.log(
      `${sandboxes} sandbox(es) at once: multi ${wall.multi.toFixed(1)} s / ${cpu.multi.toFixed(1)} CPU-s, single ${wall.single.toFixed(1)} s / ${cpu.single.toFixed(1)} CPU-s;` +
        ` single/multi wall ${(wall.single / wall.multi).toFixed(2)}, CPU ${(cpu.single / cpu.multi).toFixed(2)}`,
    );
  }
} finally {
  await rm(root, { recursive: true, force: true });
}
process.exit(0);
