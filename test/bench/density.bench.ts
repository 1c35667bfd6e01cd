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
//
// BENCH_WAYS=1 measures a task run N ways instead (issue 32), through the whole
// app on the Node fixture (Node and npm ci in its setup, 1 GiB guests, 6 parallel
// slots, no warm pool): 1, 3 and 6 ways, each from a fresh preparation, against 6 independent
// tasks on 6 repositories (each its own setup), every sandbox measured in review
// (after setup and its pipeline): the QEMU processes' Pss and the host's used
// memory added. Ready time: a way's first stage after the preparation's setup
// ended, against a fresh task's Start to its setup's end. Prints both as ratios.
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Task } from '../../common/domain.js';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { appPaths } from '../../main/state/paths.js';
import { SettingsSchema } from '../../main/state/settings.js';
import { AccelProbe } from '../../main/vm/accel-probe.js';
import { QemuDriver, type RunningVm } from '../../main/vm/qemu-driver.js';
import { egressRulesForThisNetwork } from '../support/egress-network.js';
import { testImage } from '../support/image.js';
import { makeNodeProject } from '../support/project-fixtures.js';
import { tempDir, type FixtureRepo } from '../support/repo.js';
import { waitForTask } from '../support/wait-for-task.js';
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

// ---------------------------------------------------------------------------
// BENCH_WAYS=1: a task run N ways against independent tasks.

const WAYS_MEMORY_MB = Number(process.env.BENCH_MEMORY_MB ?? 1024);
/** The pipeline of every task here: a build that commits one file, the fixture's real tests; the other stages as configured by default. */
const WAYS_PIPELINE = JSON.stringify({ agent: 'command', stages: { build: { command: 'echo "$FACTORY_TASK_ID" > done.txt && git add -A && git commit -qm done' }, test: { command: 'npm test' } } }, null, 2) + '\n';
const settled = (t: Task) => ['review', 'failed', 'cancelled', 'interrupted'].includes(t.phase);

/** The QEMU processes of these tasks (their command line names the task's sandbox folder). */
function qemuPids(taskIds: readonly string[]): number[] {
  const pids: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      if (/qemu-system/.test(cmd) && taskIds.some((id) => cmd.includes(`/${id}/`))) pids.push(Number(d));
    } catch {
      // Gone since the listing: not one of ours any more.
    }
  }
  return pids;
}

interface WaysRow {
  step: string;
  sandboxes: number;
  pss: number;
  rss: number;
  addedKiB: number;
  /** Start → setup ended (independent tasks), or the preparation's setup end → the way's first stage (ways 2..N). */
  readyMs: number[];
  /** A fan-out's way 1, the preparation: Start → setup ended, as a fresh task's. */
  prepMs: number[];
  bootMs: number[];
}

async function measureTasks(step: string, app: FactoryApp, ids: string[], before: Before): Promise<WaysRow> {
  const tasks = await Promise.all(ids.map((taskId) => app.api['tasks.get']({ taskId })));
  const bad = tasks.filter((t) => t.phase !== 'review');
  if (bad.length) throw new Error(`${step}: not in review: ${bad.map((t) => `${t.id} ${t.phase} ${JSON.stringify(t.error)}`).join('; ')}`);
  await sleep(idleSec);
  const pids = qemuPids(ids);
  if (pids.length !== ids.length) {
    const now = await Promise.all(ids.map((taskId) => app.api['tasks.get']({ taskId })));
    const names = readdirSync('/proc').flatMap((d) => {
      try {
        const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
        return cmd[0]?.includes('qemu-system') ? [`${d}: ${cmd.filter((a) => a.includes('sandbox')).slice(0, 2).join(' ')}`] : [];
      } catch {
        return []; // gone since the listing
      }
    });
    throw new Error(`${step}: ${pids.length} QEMU processes found for ${ids.length} tasks: ${now.map((t) => `${t.id} ${t.phase} ${t.sandbox.status}`).join(', ')}; QEMU: ${names.join(' | ')}`);
  }
  const sum = sumMemory(pids.map(processMemory));
  const othersGrew = pssOfOthers(new Set([process.pid, ...pids])) - before.othersKiB;
  const addedKiB = hostMemory().usedKiB - before.usedKiB - othersGrew;
  const prep = tasks.find((t) => t.fanout?.way === 1);
  const prepEnded = prep?.setup?.endedAt ? Date.parse(prep.setup.endedAt) : undefined;
  const startToSetupEnd = (t: Task) => (t.setup?.endedAt ? [Date.parse(t.setup.endedAt) - Date.parse(t.createdAt)] : []);
  const readyMs = tasks.flatMap((t) => {
    if (!t.fanout) return startToSetupEnd(t);
    if (t.fanout.way === 1) return [];
    const first = t.stages.find((x) => x.startedAt)?.startedAt;
    return first && prepEnded !== undefined ? [Date.parse(first) - prepEnded] : [];
  });
  const prepMs = prep ? startToSetupEnd(prep) : [];
  const bootMs = tasks.filter((t) => !t.fanout || t.fanout.way > 1).flatMap((t) => (t.sandbox.bootMs !== undefined ? [t.sandbox.bootMs] : []));
  const row: WaysRow = { step, sandboxes: ids.length, pss: sum.pssKiB, rss: sum.rssKiB, addedKiB, readyMs, prepMs, bootMs };
  console.log(
    `${step}: Pss ${mib(sum.pssKiB)} MiB (${mib(sum.pssKiB / ids.length)}/sandbox), Rss ${mib(sum.rssKiB)} MiB, added ${mib(addedKiB)} MiB, ` +
      `${prepMs.length ? `preparation Start → setup end ${(prepMs[0]! / 1000).toFixed(1)} s, ` : ''}ready ${readyMs.map((ms) => (ms / 1000).toFixed(1)).join(' ') || '—'} s, boot ${bootMs.map((ms) => (ms / 1000).toFixed(1)).join(' ') || '—'} s` +
      `${tasks.some((t) => t.sandbox.coldBootReason) ? `, cold: ${tasks.flatMap((t) => t.sandbox.coldBootReason ?? []).join('; ')}` : ''}`,
  );
  return row;
}

/** Ends tasks in review and waits until their sandboxes are gone. */
async function endTasks(app: FactoryApp, ids: string[]): Promise<void> {
  for (const taskId of ids) {
    const t = await app.api['tasks.get']({ taskId });
    if (t.phase === 'review') await app.api['tasks.reject']({ taskId });
    if (!['none', 'destroyed'].includes((await app.api['tasks.get']({ taskId })).sandbox.status)) await app.api['tasks.destroy']({ taskId });
  }
  for (let i = 0; i < 60 && qemuPids(ids).length; i++) await sleep(1);
}

async function waysMain(): Promise<void> {
  await testImage();
  const dataDir = tempDir('fways-bench-');
  const app = await createFactoryApp({
    host: 'web',
    paths: appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir }),
    // No warm pool: its idle sandboxes would count in the memory added, and would hand tasks VMs booted before them.
    settings: { egressRules: await egressRulesForThisNetwork(), maxParallelTasks: 6, vmMemoryMb: WAYS_MEMORY_MB, warmPoolSize: 0 },
  });
  const repos: FixtureRepo[] = [];
  const repo = async (name: string) => {
    // Its own file: another tree, so another layer, and its own setup.
    const r = await makeNodeProject({ extra: { '.factory/pipeline.json': WAYS_PIPELINE, 'NAME.txt': `${name}\n` } });
    repos.push(r);
    return r;
  };
  const waysRows: WaysRow[] = [];
  console.log(`fan-out density: guest ${WAYS_MEMORY_MB} MiB, ${os.cpus().length} host cores, host ${mib(hostMemory().totalKiB)} MiB, idle ${idleSec} s before each reading`);
  try {
    const only = process.env.BENCH_WAYS_ONLY?.split(',').map(Number);
    for (const ways of only ?? [1, 3, 6]) {
      const r = await repo(`ways-${ways}`);
      const before = readBefore();
      const created = await app.api['fanout.create']({ repoPath: r.dir, title: `bench ${ways} ways`, ways });
      const ids = created.ways.map((w) => w.taskId);
      await Promise.all(ids.map((id) => waitForTask(app, id, settled, 30 * 60_000)));
      waysRows.push(await measureTasks(`${ways} way${ways > 1 ? 's' : ''}`, app, ids, before));
      await app.api['fanout.rejectAll']({ group: created.group });
      await endTasks(app, ids);
    }
    // BENCH_WAYS_ONLY=3 (say) runs only those fan-outs, without the independent tasks.
    if (!only) {
      const independent = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => repo(`independent-${i}`)));
      const before = readBefore();
      const ids: string[] = [];
      for (const r of independent) ids.push((await app.api['tasks.create']({ repoPath: r.dir, title: 'bench independent' })).id);
      await Promise.all(ids.map((id) => waitForTask(app, id, settled, 40 * 60_000)));
      waysRows.push(await measureTasks('6 independent tasks', app, ids, before));
      await endTasks(app, ids);
    }
  } finally {
    // This run's layers go with its repositories; one still in use is left for the app's own cleanup (the run's figures matter more).
    for (const l of await app.api['layers.list']({})) if (repos.some((r) => r.dir === l.repo)) await app.api['layers.remove']({ id: l.id }).catch((err: Error) => console.error(`layer ${l.id} left: ${err.message}`));
    await app.dispose();
    for (const r of repos) r.cleanup();
    rmSync(dataDir, { recursive: true, force: true });
  }
  printWays(waysRows);
}

function printWays(list: WaysRow[]): void {
  const avg = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
  console.log('\n== fan-out density (MiB; added = host used after − before − others Δ; every sandbox in review) ==');
  console.log('| step | n | Pss sum | Pss/n | Rss sum | added | added/n | preparation Start → setup end (s) | ready (s, mean) |');
  console.log('| --- | --: | --: | --: | --: | --: | --: | --: | --: |');
  for (const r of list) console.log(`| ${r.step} | ${r.sandboxes} | ${mib(r.pss)} | ${mib(r.pss / r.sandboxes)} | ${mib(r.rss)} | ${mib(r.addedKiB)} | ${mib(r.addedKiB / r.sandboxes)} | ${r.prepMs.length ? (r.prepMs[0]! / 1000).toFixed(1) : '—'} | ${r.readyMs.length ? (avg(r.readyMs) / 1000).toFixed(1) : '—'} |`);
  const six = list.find((r) => r.step === '6 ways');
  const ind = list.find((r) => r.step === '6 independent tasks');
  const one = list.find((r) => r.step === '1 way');
  if (six && ind) {
    console.log(`\n6 ways vs 6 independent tasks: host used added ${(six.addedKiB / ind.addedKiB).toFixed(2)}×, Pss ${(six.pss / ind.pss).toFixed(2)}× (goal ≤ 0.5×: ${six.addedKiB <= 0.5 * ind.addedKiB ? 'met' : 'NOT met'})`);
  }
  const three = list.find((r) => r.step === '3 ways');
  if (one && three && six) console.log(`per sandbox, Pss: 1 way ${mib(one.pss)}, 3 ways ${mib(three.pss / 3)}, 6 ways ${mib(six.pss / 6)} MiB`);
  const wayReady = [...(three?.readyMs ?? []), ...(six?.readyMs ?? [])];
  if (one?.prepMs.length && wayReady.length) {
    const f = avg(one.prepMs);
    console.log(
      `ready: a way's first stage ${(avg(wayReady) / 1000).toFixed(2)} s (max ${(Math.max(...wayReady) / 1000).toFixed(2)} s) after the preparation, ` +
        `a fresh task's Start to setup end ${(f / 1000).toFixed(1)} s alone (${(avg(ind?.readyMs ?? []) / 1000).toFixed(1)} s with 6 at once): ${(avg(wayReady) / f).toFixed(3)}× ` +
        `(goal ≤ 1 s after the preparation: ${Math.max(...wayReady) <= 1000 ? 'met' : 'NOT met'})`,
    );
  }
}

(process.env.BENCH_WAYS === '1' ? waysMain() : main()).catch(async (err: Error) => {
  console.error(err.stack ?? err.message);
  await stopAll();
  process.exit(1);
});
