// Process start benchmark, run with: bash test/support/with-keyring.sh npx tsx test/bench/process-start.bench.ts
// Work that starts many short processes inside one running sandbox (restored from
// the image's snapshot, as the app starts one), alternately with the guest's
// address randomisation on (the kernel's default, the baseline) and off (how the
// app boots a guest under TCG: `norandmaps`). QEMU's TCG keys the code it has
// translated by guest virtual address, so with randomisation each process start
// translates ld.so, libc and the program again. Both settings in the same VM,
// switched with the guest's kernel.randomize_va_space between runs; each workload
// is timed inside the guest (bash's EPOCHREALTIME), so SSH's own cost is left out.
// Prints the median of each and the ratio off / on. Under KVM there is no
// translation: the bench says so and measures anyway.
// BENCH_ROUNDS (default 3).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { appPaths } from '../../main/state/paths.js';
import { AccelProbe } from '../../main/vm/accel-probe.js';
import { QemuDriver } from '../../main/vm/qemu-driver.js';
import { testImage } from '../support/image.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 3);

/** Guest shell loops, each a kind of work a stage does (their output is discarded; a failure stops the bench). */
const workloads: Record<string, string> = {
  'login shell ×10': 'for i in 1 2 3 4 5 6 7 8 9 10; do bash -lic exit >/dev/null 2>&1; done',
  'coreutils ×40': 'for i in $(seq 10); do ls / >/dev/null; cat /etc/hostname >/dev/null; wc -l /etc/passwd >/dev/null; date >/dev/null; done',
  'agent CLIs ×2': 'for i in 1 2; do claude --version >/dev/null && codex --version >/dev/null || exit 1; done',
  'git commit ×5': 'd=$(mktemp -d) && cd "$d" && git init -q && for i in 1 2 3 4 5; do echo $i > f$i; git add f$i; git -c user.name=b -c user.email=b@b commit -qm $i; done; git status --short; cd / && rm -rf "$d"',
};

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

async function main() {
  const image = await testImage();
  const accel = await AccelProbe.cached();
  const root = await mkdtemp(path.join(os.tmpdir(), 'process-start-bench-'));
  const vm = await new QemuDriver({ snapshotsDir: appPaths().snapshots }).start({ sandboxDir: path.join(root, 'vm'), image, memoryMb: 1024, cpus: 2 });
  console.log(`image ${image.version}, accel ${accel.accel}, ${os.cpus().length} host cores, load ${os.loadavg()[0]!.toFixed(2)}, boot ${vm.bootMode}`);
  if (accel.accel !== 'tcg') console.log('not TCG: nothing is translated, so the two settings should measure alike');
  const ssh = await vm.ssh();
  const times = new Map<string, { on: number[]; off: number[] }>(Object.keys(workloads).map((w) => [w, { on: [], off: [] }]));
  try {
    const booted = (await ssh.run('cat /proc/sys/kernel/randomize_va_space')).stdout.trim();
    console.log(`the guest booted with kernel.randomize_va_space=${booted}`);
    for (let round = 1; round <= rounds; round++) {
      for (const setting of round % 2 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
        const set = await ssh.run(`echo ${setting === 'on' ? 2 : 0} > /proc/sys/kernel/randomize_va_space`);
        if (set.code !== 0) throw new Error(`could not switch randomisation ${setting}: ${set.stderr}`);
        for (const [name, script] of Object.entries(workloads)) {
          const r = await ssh.run(`bash -c 't0=$EPOCHREALTIME; ( ${script} ) || exit 1; t1=$EPOCHREALTIME; echo "ms $t0 $t1"'`, { timeoutMs: 300_000 });
          // EPOCHREALTIME uses the locale's decimal separator.
          const m = /^ms (\d+[.,]\d+) (\d+[.,]\d+)$/m.exec(r.stdout);
          if (r.code !== 0 || !m) throw new Error(`${name} failed (${r.code}): ${r.stdout}${r.stderr}`);
          const seconds = (t: string) => Number(t.replace(',', '.'));
          const ms = (seconds(m[2]!) - seconds(m[1]!)) * 1000;
          times.get(name)![setting].push(ms);
          console.log(`round ${round}: randomisation ${setting.padEnd(3)} ${name.padEnd(18)} ${ms.toFixed(0).padStart(6)} ms`);
        }
      }
    }
  } finally {
    ssh.close();
    await vm.destroy();
    await rm(root, { recursive: true, force: true });
  }
  console.log('\n== process start benchmark ==');
  for (const [name, t] of times) {
    const on = median(t.on);
    const off = median(t.off);
    console.log(`${name.padEnd(18)} randomised ${on.toFixed(0).padStart(6)} ms, fixed ${off.toFixed(0).padStart(6)} ms, fixed / randomised ${(off / on).toFixed(2)}`);
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
