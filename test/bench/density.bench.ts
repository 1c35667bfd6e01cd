// Density benchmark, run with: npx tsx test/bench/density.bench.ts
// How much host memory sandboxes take, started as the app starts them
// (QemuDriver.start(), fast restore, the default guest memory and CPUs of the
// settings). In one run: 1 sandbox (the baseline), then N (BENCH_SANDBOXES,
// default 10), each measured idle (BENCH_IDLE_SEC, default 30 s, after the last
// start) and after a stage in every guest (reads the disk, compresses a few MB,
// allocates and frees 128 MiB, then exits; measured BENCH_SETTLE_SEC, default
// 10 s, later). Figures: the sum of the QEMU processes' Pss and Rss
// (/proc/<pid>/smaps_rollup; of it, transparent huge pages and the TCG
// translation cache) and the host's used memory (MemTotal −
// MemAvailable) before and after. Nothing on the host is dropped or reset.
// KSM is measured as found; as root with KSM off, the N sandboxes are measured
// once more with KSM on (BENCH_KSM=0 skips it), and KSM's knobs are put back.
// BENCH_MEMORY_MB overrides the guest memory. Every VM is stopped at the end,
// also on error or Ctrl+C.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { appPaths } from '../../main/state/paths.js';
import { SettingsSchema } from '../../main/state/settings.js';
import { AccelProbe } from '../../main/vm/accel-probe.js';
import { QemuDriver, type RunningVm } from '../../main/vm/qemu-driver.js';
import { testImage } from '../support/image.js';
import { hostMemory, ksmState, mib, processMemory, pssOfOthers, setKsm, sumMemory, type ProcessMemory } from '../support/host-memory.js';

const defaults = SettingsSchema.parse({});
const count = Number(process.env.BENCH_SANDBOXES ?? 10);
const idleSec = Number(process.env.BENCH_IDLE_SEC ?? 30);
const settleSec = Number(process.env.BENCH_SETTLE_SEC ?? 10);
const memoryMb = Number(process.env.BENCH_MEMORY_MB ?? defaults.vmMemoryMb);
const cpus = defaults.vmCpus;
const tryKsm = process.env.BENCH_KSM !== '0';

/** Touches memory and the page cache the way a short build step does, then exits. */
const STAGE = [
  'find / -xdev >/dev/null 2>&1',
  'cat /usr/bin/* 2>/dev/null | head -c 8000000 | gzip -c >/dev/null',
  'dd if=/dev/zero of=/dev/null bs=64M count=2 2>/dev/null',
  'echo stage-done',
].join('; ');

/** The host before sandboxes start: its used memory and what every other process holds (Pss). */
interface Before {
  usedKiB: number;
  othersKiB: number;
}

interface Row {
  step: string;
  sandboxes: number;
  usedBeforeKiB: number;
  usedAfterKiB: number;
  /** The host's used memory added, less what other processes grew by meanwhile (the machine is shared). */
  addedKiB: number;
  othersGrewKiB: number;
  sum: ProcessMemory;
  guestUsedMiB: number[];
}

function readBefore(): Before {
  return { usedKiB: hostMemory().usedKiB, othersKiB: pssOfOthers(new Set([process.pid])) };
}

const rows: Row[] = [];
const live = new Set<RunningVm>();
const sleep = (s: number) => new Promise((r) => setTimeout(r, s * 1000));

async function stopAll(): Promise<void> {
  const vms = [...live];
  live.clear();
  const results = await Promise.allSettled(vms.map((vm) => vm.destroy()));
  for (const r of results) if (r.status === 'rejected') console.error(`destroy failed: ${(r.reason as Error).message}`);
}

async function guestUsed(vm: RunningVm): Promise<number> {
  const ssh = await vm.ssh({ username: 'root' });
  try {
    const r = await ssh.run("free -m | awk '/^Mem:/ { print $3 + $6 }'", { timeoutMs: 60_000 });
    return Number(r.stdout.trim());
  } finally {
    ssh.close();
  }
}

async function stage(vm: RunningVm): Promise<void> {
  const ssh = await vm.ssh();
  try {
    const r = await ssh.run(STAGE, { timeoutMs: 600_000 });
    if (r.code !== 0 || !r.stdout.includes('stage-done')) throw new Error(`stage failed in ${vm.sandboxDir}: exit ${r.code} ${r.stderr.slice(-300)}`);
  } finally {
    ssh.close();
  }
}

async function measure(step: string, vms: RunningVm[], before: Before): Promise<Row> {
  const guestUsedMiB = await Promise.all(vms.map(guestUsed));
  const sum = sumMemory(vms.map((vm) => processMemory(vm.pid)));
  const usedAfterKiB = hostMemory().usedKiB;
  const othersGrewKiB = pssOfOthers(new Set([process.pid, ...vms.map((vm) => vm.pid)])) - before.othersKiB;
  const addedKiB = usedAfterKiB - before.usedKiB - othersGrewKiB;
  const row: Row = { step, sandboxes: vms.length, usedBeforeKiB: before.usedKiB, usedAfterKiB, addedKiB, othersGrewKiB, sum, guestUsedMiB };
  rows.push(row);
  const n = vms.length;
  console.log(
    `${step}: Pss ${mib(sum.pssKiB)} MiB (${mib(sum.pssKiB / n)}/sandbox), Rss ${mib(sum.rssKiB)} MiB, THP ${mib(sum.anonHugeKiB)} MiB, TCG code ${mib(sum.jitKiB)} MiB, KSM ${mib(sum.ksmKiB)} MiB, ` +
      `host used ${mib(before.usedKiB)} → ${mib(usedAfterKiB)} MiB, other processes ${othersGrewKiB >= 0 ? '+' : ''}${mib(othersGrewKiB)} MiB, ` +
      `added by the sandboxes ${mib(addedKiB)} MiB (${mib(addedKiB / n)}/sandbox), guest used+cache ${guestUsedMiB.join(' ')} MiB`,
  );
  return row;
}

async function startSandboxes(driver: QemuDriver, image: Awaited<ReturnType<typeof testImage>>, root: string, prefix: string, n: number): Promise<RunningVm[]> {
  const vms: RunningVm[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const vm = await driver.start({ sandboxDir: path.join(root, `${prefix}-${i}`), image, memoryMb, cpus });
    live.add(vm);
    vms.push(vm);
    if (vm.bootMode !== 'snapshot') console.log(`  ${prefix}-${i} booted cold: ${driver.lastFastBootError?.message ?? 'no snapshot'}`);
    console.log(`  ${prefix}-${i} ${vm.bootMode} in ${((performance.now() - t0) / 1000).toFixed(1)} s, pid ${vm.pid}`);
  }
  return vms;
}

async function waitForKsm(maxSec: number): Promise<void> {
  // Two full scans merge what is identical; stop early once merging levels off.
  const start = ksmState()!;
  let last = -1;
  for (let t = 0; t < maxSec; t += 5) {
    await sleep(5);
    const s = ksmState()!;
    if (s.fullScans - start.fullScans >= 2 && s.pagesSharing === last) return;
    last = s.pagesSharing;
  }
}

function printTable(): void {
  const head = ['step', 'n', 'Pss sum', 'Pss/n', 'Rss sum', 'THP', 'TCG code', 'KSM', 'used before', 'used after', 'others Δ', 'added', 'added/n'];
  const lines = rows.map((r) => {
    const added = r.addedKiB;
    return [r.step, String(r.sandboxes), mib(r.sum.pssKiB), mib(r.sum.pssKiB / r.sandboxes), mib(r.sum.rssKiB), mib(r.sum.anonHugeKiB), mib(r.sum.jitKiB), mib(r.sum.ksmKiB), mib(r.usedBeforeKiB), mib(r.usedAfterKiB), mib(r.othersGrewKiB), mib(added), mib(added / r.sandboxes)];
  });
  const width = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const fmt = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(width[i]!) : c.padStart(width[i]!))).join(' | ')} |`;
  console.log('\n== density benchmark (MiB; added = used after − used before − others Δ, the Pss other processes gained meanwhile) ==');
  console.log(fmt(head));
  console.log(`|${width.map((w, i) => (i === 0 ? ` ${'-'.repeat(w)} ` : ` ${'-'.repeat(w - 1)}: `)).join('|')}|`);
  for (const l of lines) console.log(fmt(l));
  const base = rows.find((r) => r.step === '1 idle');
  const many = rows.find((r) => r.step === `${count} idle`);
  if (base && many) {
    const added = many.addedKiB;
    const perOne = base.addedKiB > 0 ? `, host used added ${(added / count / base.addedKiB).toFixed(2)}×` : ' (the host reading of 1 sandbox was lost in other work)';
    console.log(`\n${count} idle vs 1 idle, per sandbox: Pss ${(many.sum.pssKiB / count / base.sum.pssKiB).toFixed(2)}×${perOne}`);
    console.log(`goal: ${count} idle sandboxes add under 3 GiB to the host's used memory: ${mib(added)} MiB added (${added < 3 * 1024 * 1024 ? 'met' : 'NOT met'}); Pss sum ${mib(many.sum.pssKiB)} MiB`);
  }
}

async function main() {
  const image = await testImage();
  const accel = await AccelProbe.cached();
  const driver = new QemuDriver({ snapshotsDir: appPaths().snapshots });
  const ksm = ksmState();
  console.log(`image ${image.version}, accel ${accel.accel}, guest ${memoryMb} MiB × ${cpus} CPUs, ${os.cpus().length} host cores, load ${os.loadavg()[0]!.toFixed(2)}`);
  console.log(`host: ${mib(hostMemory().totalKiB)} MiB, THP ${readThp()}, KSM ${ksm ? `run=${ksm.run}` : 'absent'}`);
  const root = await mkdtemp(path.join(os.tmpdir(), 'density-bench-'));
  // The snapshot is made once, before anything is measured.
  await driver.prepareFastBoot(image, { memoryMb, cpus });
  try {
    let before = readBefore();
    const one = await startSandboxes(driver, image, root, 'one', 1);
    await sleep(idleSec);
    await measure('1 idle', one, before);
    await stage(one[0]!);
    await sleep(settleSec);
    await measure('1 after stage', one, before);
    await stopAll();
    await sleep(3);

    before = readBefore();
    const many = await startSandboxes(driver, image, root, 'many', count);
    await sleep(idleSec);
    await measure(`${count} idle`, many, before);
    const t0 = performance.now();
    await Promise.all(many.map(stage));
    console.log(`  stage in ${count} guests at once: ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    await sleep(settleSec);
    await measure(`${count} after stage`, many, before);

    if (tryKsm && ksm && ksm.run === 0 && process.getuid?.() === 0) {
      // Fast scanning for the measurement only; the knobs go back right after.
      const restore = setKsm({ run: 1, pagesToScan: 20_000, sleepMillisecs: 20 });
      try {
        const t1 = performance.now();
        await waitForKsm(180);
        const s = ksmState()!;
        console.log(`  KSM on for ${((performance.now() - t1) / 1000).toFixed(0)} s: pages_shared ${s.pagesShared}, pages_sharing ${s.pagesSharing}`);
        await measure(`${count} after stage, KSM on`, many, before);
      } finally {
        restore();
      }
    } else if (tryKsm) {
      console.log(`KSM not measured on: ${!ksm ? 'no KSM' : ksm.run !== 0 ? `already run=${ksm.run}` : 'not root'}`);
    }
  } finally {
    await stopAll();
    await rm(root, { recursive: true, force: true });
  }
  printTable();
}

function readThp(): string {
  try {
    return /\[(\w+)\]/.exec(readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8'))?.[1] ?? '?';
  } catch {
    return 'absent';
  }
}

for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    console.error(`${sig}: stopping ${live.size} sandboxes`);
    void stopAll().finally(() => process.exit(130));
  });
}

main().catch(async (err: Error) => {
  console.error(err.stack ?? err.message);
  await stopAll();
  process.exit(1);
});
