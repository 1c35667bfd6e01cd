// The warm pool's part of the boot bench (boot.bench.ts). In one run and alternating, a task's Start to a shell-ready sandbox (boot
// through the provisioner with the real credential broker, then SSH and a shell
// channel that has printed its first bytes), (a) taking a sandbox from the warm
// pool and (b) restoring the image's snapshot without the pool. Each timed
// start waits until the pool is idle, so neither measures against a refill.
// Returns each, per phase, and the ratio; printPoolFigures prints them.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CredentialBroker, proxySocketPathFits } from '../../../main/credentials/broker.js';
import { KeychainStore } from '../../../main/credentials/keychain.js';
import { proxyGuestForward } from '../../../main/credentials/routes.js';
import { createFileLogger } from '../../../main/log/logger.js';
import { WarmPool } from '../../../main/pool/warm-pool.js';
import { appPaths } from '../../../main/state/paths.js';
import { SettingsSchema } from '../../../main/state/settings.js';
import { LiveSandboxes } from '../../../main/sandbox/live-sandboxes.js';
import { SandboxProvisioner, warmPooledGuest } from '../../../main/tasks/sandbox-provisioner.js';
import { ImageStore } from '../../../main/vm/image-store.js';
import { killLeftoverQemu } from '../../../main/vm/leftover-qemu.js';
import { QemuDriver } from '../../../main/vm/qemu-driver.js';
import { vmSettingsFromEnv } from '../../../main/vm/vm-settings.js';
import { testImage } from '../../support/image.js';

/** One Start, per phase: boot (pool take or restore, with the proxy), SSH connection, first bytes of a shell. */
export interface StartPhases {
  bootMs: number;
  sshMs: number;
  shellMs: number;
  totalMs: number;
}

export interface PoolStartFigures {
  fromPool: StartPhases[];
  restore: StartPhases[];
  /** Median Start → shell-ready from the pool over the median of the same run's snapshot restores. */
  ratio: number;
  medianPoolMs: number;
  medianRestoreMs: number;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

async function until(check: () => boolean, what: string, timeoutMs = 300_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Measures Start → shell-ready from the warm pool and from a snapshot restore without it, alternating, in one run. */
export async function measurePoolStart(opts: { rounds?: number; log?: (line: string) => void } = {}): Promise<PoolStartFigures> {
  const rounds = opts.rounds ?? 3;
  const log = opts.log ?? ((line: string) => console.log(line));
  await testImage();
  const data = await mkdtemp(path.join(os.tmpdir(), 'fpb-'));
  // The shared image cache and snapshots; everything else in a scratch data folder.
  const paths = appPaths({ ...process.env, FACTORY_DATA_DIR: data });
  const images = new ImageStore({ imagesDir: paths.images });
  const qemu = new QemuDriver(vmSettingsFromEnv(process.env, paths));
  const settings = SettingsSchema.parse({ warmPoolSize: 1 });
  const logger = createFileLogger({ dir: paths.logs });
  const live = new LiveSandboxes();
  const broker = new CredentialBroker({ paths, secrets: new KeychainStore(), log: logger.child('credentials') });
  const pool = new WarmPool({
    root: path.join(paths.data, 'pool'),
    images,
    qemu,
    settings: () => settings,
    runningMemoryMb: () => live.memoryMb(),
    guestForwards: (p) => [proxyGuestForward(p)],
    socketPathFits: proxySocketPathFits,
    killLeftovers: killLeftoverQemu,
    onStatus: () => {},
    // As app.ts wires it: the waiting guest gets its SSH connection and the host's certificates.
    warmGuest: (ssh, o) => warmPooledGuest(ssh, o),
    log: logger.child('pool'),
  });
  const provisioner = (withPool: boolean) =>
    new SandboxProvisioner({
      paths,
      settings: () => settings,
      images,
      qemu,
      live,
      emit: () => {},
      extensions: [broker],
      killLeftovers: killLeftoverQemu,
      log: logger.child('sandboxes'),
      ...(withPool ? { pool } : {}),
    });
  const pooled = provisioner(true);
  const plain = provisioner(false);
  const fromPool: StartPhases[] = [];
  const restore: StartPhases[] = [];

  const start = async (p: SandboxProvisioner, taskId: string): Promise<{ phases: StartPhases; mode: string }> => {
    const sandbox = p.open({ id: taskId, repoPath: '', allowPush: false });
    const t0 = performance.now();
    const vm = await p.boot(sandbox, new AbortController().signal);
    const t1 = performance.now();
    const ssh = await p.connect(sandbox);
    const t2 = performance.now();
    const shell = await ssh.shell({ cols: 80, rows: 24 });
    await new Promise<void>((resolve) => shell.once('data', () => resolve()));
    const t3 = performance.now();
    shell.close();
    await p.teardown(sandbox);
    const mode = sandbox.sandboxDir.startsWith(path.join(paths.data, 'pool')) ? 'pool' : (vm as { bootMode?: string }).bootMode ?? '?';
    return { phases: { bootMs: t1 - t0, sshMs: t2 - t1, shellMs: t3 - t2, totalMs: t3 - t0 }, mode };
  };
  const show = (label: string, ph: StartPhases) =>
    `${label} ${(ph.totalMs / 1000).toFixed(3)} s (boot ${ph.bootMs.toFixed(0)} ms, ssh ${ph.sshMs.toFixed(0)} ms, shell ${ph.shellMs.toFixed(0)} ms)`;

  log(`accel: FACTORY_ACCEL=${process.env.FACTORY_ACCEL ?? '(probe)'}, ${os.cpus().length} host cores, load ${os.loadavg()[0]!.toFixed(2)}`);
  try {
    // The snapshot template exists before anything is timed (its first making is not a start).
    await qemu.prepareFastBoot(await images.ensure(), { memoryMb: settings.vmMemoryMb, cpus: settings.vmCpus });
    await pool.start();
    for (let round = 1; round <= rounds; round++) {
      // Alternate which goes first; each timed start begins with the pool full and idle.
      for (const which of round % 2 ? (['pool', 'restore'] as const) : (['restore', 'pool'] as const)) {
        await until(() => pool.size === 1 && pool.status().state === 'ready', 'the pool is full and idle');
        if (which === 'pool') {
          const r = await start(pooled, `bench-pool-${round}`);
          if (r.mode !== 'pool') throw new Error('the pooled start did not take from the pool');
          fromPool.push(r.phases);
          log(show(`round ${round}: from the pool           `, r.phases));
        } else {
          const r = await start(plain, `bench-restore-${round}`);
          restore.push(r.phases);
          log(show(`round ${round}: ${r.mode} restore, no pool`, r.phases));
        }
      }
    }
  } finally {
    await pool.dispose();
    await broker.dispose();
    await rm(data, { recursive: true, force: true });
  }
  const medianPoolMs = median(fromPool.map((p) => p.totalMs));
  const medianRestoreMs = median(restore.map((p) => p.totalMs));
  return { fromPool, restore, ratio: medianPoolMs / medianRestoreMs, medianPoolMs, medianRestoreMs };
}

/** Prints the figures of measurePoolStart: phase medians and the ratio. */
export function printPoolFigures(f: PoolStartFigures, log: (line: string) => void = (l) => console.log(l)): void {
  const med = (xs: StartPhases[], k: keyof StartPhases) => median(xs.map((x) => x[k])).toFixed(0);
  log(`\nwarm pool (median of ${f.fromPool.length})  boot    ssh   shell   total (ms)`);
  for (const [label, xs] of [['from the pool ', f.fromPool], ['snapshot, no pool', f.restore]] as const) {
    log(`  ${label.padEnd(18)} ${med(xs, 'bootMs').padStart(6)} ${med(xs, 'sshMs').padStart(6)} ${med(xs, 'shellMs').padStart(6)} ${med(xs, 'totalMs').padStart(7)}`);
  }
  log(`Start → shell-ready from the pool: ${(f.medianPoolMs / 1000).toFixed(3)} s; snapshot restore without it: ${(f.medianRestoreMs / 1000).toFixed(3)} s; ratio ${f.ratio.toFixed(2)} (goal: ≤ 0.3 s from the pool)`);
}
