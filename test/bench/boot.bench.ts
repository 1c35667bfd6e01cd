// Boot benchmark, run with: bash test/support/with-keyring.sh npx tsx test/bench/boot.bench.ts
// One run, kinds of start alternating round by round, each split into phases:
//   raw restore   a bare qemu-system-x86_64 -incoming of the app's snapshot
//                 template (same command line, no driver), its identity
//                 (made beforehand) written into the identity port at once,
//                 until the forwarded port sends the SSH banner: a template's
//                 sshd listens only once it has a clone's host key;
//   app restore   QemuDriver.start() (snapshot) until an SSH shell channel has
//                 printed its first bytes;
//   app first shell  QemuDriver.start() (snapshot) asking for the first shell
//                 (a quick sandbox's): until that shell, relayed over the
//                 identity port before the SSH login, has printed its first bytes;
//   quick sandbox the whole app (no warm pool): sandboxes.quick() as the UI's
//                 button calls it, until its shell's session, attached as a
//                 viewer would, has its first bytes;
//   raw cold      a bare qemu-system-x86_64 booting the image, to the banner;
//   app cold      QemuDriver.start() booting cold, to the shell's first bytes.
// Prints a table of phases (median ms since the start was asked for) and the
// ratios. A new kind of start is one more entry in `kinds`. Then a task's
// Start taken from the warm pool against restores without it, alternating
// (support/pool-start.ts), and its ratios to the restores above.
// BENCH_ROUNDS (default 2); BENCH_COLD=0 leaves the cold kinds out, BENCH_POOL=0 the pool.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { generateSandboxKeys } from '../../main/ssh/sandbox-keys.js';
import { AccelProbe, type AccelChoice } from '../../main/vm/accel-probe.js';
import { createOverlay } from '../../main/vm/overlay.js';
import { firstSshBanner } from '../../main/guest/guest-agent.js';
import { identityMessage } from '../../main/guest/identity-channel.js';
import net from 'node:net';
import { appPaths } from '../../main/state/paths.js';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { freePort, QemuDriver, type RunningVm } from '../../main/vm/qemu-driver.js';
import type { SandboxSsh } from '../../main/ssh/sandbox-ssh.js';
import type { TerminalSource } from '../../main/terminal/types.js';
import { buildQemuArgs, tcgThreads, type QemuLaunchSpec } from '../../main/vm/qemu-args.js';
import { QmpClient } from '../../main/vm/qmp-client.js';
import { sandboxFiles } from '../../main/vm/sandbox-files.js';
import { templateRam } from '../../main/vm/snapshot-boot.js';
import { machineKey, templateKey } from '../../main/vm/warm-state.js';
import type { BaseImage } from '../../main/vm/image-store.js';
import { testImage } from '../support/image.js';
import { measurePoolStart, printPoolFigures } from './support/pool-start.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 2);
const withCold = process.env.BENCH_COLD !== '0';
// The app's default sandbox, as the pool starts it.
const MEMORY_MB = 1024;
const CPUS = 2;

/** One measured start: phase name → ms since the start was asked for, in order; the last is "ready". */
type Run = Array<{ name: string; atMs: number }>;

/**
 * CPU time QEMU used from its start until ready, per kind of start: the guest's
 * work, which unlike wall time hardly depends on what else the host runs.
 */
const qemuCpu = new Map<string, number[]>();
function noteQemuCpu(kind: string, pid: number | undefined): void {
  try {
    // utime and stime, fields 14 and 15, in clock ticks (100 per second on Linux).
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    const ms = (Number(fields[11]) + Number(fields[12])) * 10;
    qemuCpu.set(kind, [...(qemuCpu.get(kind) ?? []), ms]);
  } catch {
    // No /proc (not Linux): the wall times are still measured.
  }
}

interface BenchEnv {
  image: BaseImage;
  accel: AccelChoice;
  driver: QemuDriver;
  /** The app's snapshot template folder for this machine. */
  template: string;
  root: string;
}

/** A kind of start: what it is, and one measured start of it (cleaned up before it resolves). */
interface StartKind {
  name: string;
  run(env: BenchEnv, round: number): Promise<Run>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * Waits for the SSH banner on port, a new probe every 20 ms while earlier ones wait (as the app
 * does: a SYN sent before the guest's network is up is resent only 3 s later), while the child lives.
 */
async function waitBanner(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const exited = new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once('exit', r)));
  if (await firstSshBanner(port, { everyMs: 20, until: Date.now() + timeoutMs, stop: exited, probeTimeoutMs: 2000 })) return;
  throw new Error('raw QEMU never sent the SSH banner');
}

/** The command line of a hand-started VM in dir: the app's own (buildQemuArgs), with these keys and disk. */
function rawArgs(
  env: BenchEnv,
  dir: string,
  vm: { name: string; overlay: string; sshPort: number; keys: { authorizedKeys: string; hostKey: string } },
  extra: Partial<QemuLaunchSpec> = {},
): string[] {
  return buildQemuArgs({
    name: vm.name,
    accel: env.accel,
    tcgThreads: tcgThreads(CPUS),
    memoryMb: MEMORY_MB,
    cpus: CPUS,
    kernel: env.image.kernel,
    initrd: env.image.initrd,
    cmdline: env.image.manifest.kernelCmdline,
    overlay: vm.overlay,
    sshPort: vm.sshPort,
    guestForwards: [],
    serialLog: path.join(dir, 'serial.log'),
    qmpSocket: path.join(dir, 'qmp.sock'),
    identitySocket: path.join(dir, 'identity.sock'),
    pidFile: path.join(dir, 'qemu.pid'),
    fwCfg: [
      { name: 'authorized_keys', file: vm.keys.authorizedKeys },
      { name: 'ssh_host_ed25519_key', file: vm.keys.hostKey },
    ],
    ...extra,
  });
}

/** (a) The template restored by hand: the same command line as a clone, QMP only for what QEMU 7.2 needs. */
const rawRestore: StartKind = {
  name: 'raw restore → banner',
  async run(env, round) {
    const dir = path.join(env.root, `raw-restore-${round}`);
    await mkdir(dir, { recursive: true });
    const t = sandboxFiles(env.template);
    const overlay = path.join(dir, 'overlay.qcow2');
    await copyFile(t.overlay, overlay);
    const port = await freePort();
    const qmpSocket = path.join(dir, 'qmp.sock');
    const args = rawArgs(env, dir, { name: `bench-raw-${round}`, overlay, sshPort: port, keys: { authorizedKeys: t.authorizedKeys, hostKey: t.hostKey } }, {
      memory: { kind: 'file', path: templateRam(env.template), shared: false },
      qmpSocket,
    });
    const identity = identityMessage(generateSandboxKeys());
    const run: Run = [];
    const t0 = performance.now();
    const mark = (name: string) => run.push({ name, atMs: performance.now() - t0 });
    const child = spawn('qemu-system-x86_64', [...args, '-incoming', 'defer'], { stdio: 'ignore' });
    let identityPort: net.Socket | undefined;
    try {
      let qmp: QmpClient | undefined;
      while (!qmp) {
        qmp = await QmpClient.connect(qmpSocket, { timeoutMs: 2000 }).catch(() => undefined);
        if (!qmp) await sleep(10);
        if (child.exitCode !== null) throw new Error('raw QEMU exited');
      }
      mark('qmp');
      identityPort = await new Promise<net.Socket>((resolve, reject) => {
        const s = net.createConnection({ path: path.join(dir, 'identity.sock') }, () => resolve(s));
        s.once('error', reject);
      });
      identityPort.on('error', () => {});
      identityPort.write(identity);
      await qmp.execute('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: true }] });
      await qmp.execute('migrate-incoming', { uri: `exec:cat ${path.join(env.template, 'state')}` });
      while (((await qmp.execute('query-status')) as { status: string }).status === 'inmigrate') await sleep(10);
      mark('state loaded');
      await qmp.execute('cont');
      mark('cont');
      await waitBanner(port, child, 60_000);
      mark('ssh banner');
      noteQemuCpu(rawRestore.name, child.pid);
      qmp.close();
      return run;
    } finally {
      identityPort?.destroy();
      child.kill('SIGKILL');
      if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
    }
  },
};

/** (c, raw) The image booted by hand with the same devices and fw_cfg keys, to the banner. */
const rawCold: StartKind = {
  name: 'raw cold → banner',
  async run(env, round) {
    const dir = path.join(env.root, `raw-cold-${round}`);
    await mkdir(dir, { recursive: true });
    const overlay = path.join(dir, 'overlay.qcow2');
    await createOverlay(env.image.disk, overlay);
    const keys = generateSandboxKeys();
    await writeFile(path.join(dir, 'authorized_keys'), keys.clientPublicKey);
    await writeFile(path.join(dir, 'host_key'), keys.hostPrivateKey, { mode: 0o600 });
    const port = await freePort();
    const args = rawArgs(env, dir, {
      name: `bench-cold-${round}`,
      overlay,
      sshPort: port,
      keys: { authorizedKeys: path.join(dir, 'authorized_keys'), hostKey: path.join(dir, 'host_key') },
    });
    const t0 = performance.now();
    const child = spawn('qemu-system-x86_64', args, { stdio: 'ignore' });
    try {
      await waitBanner(port, child, 300_000);
      return [{ name: 'ssh banner', atMs: performance.now() - t0 }];
    } finally {
      child.kill('SIGKILL');
      if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
    }
  },
};

/**
 * The same clone's second shell and second login, right after the first: the
 * emulator has translated their code once, so these are what the restored
 * guest's SSH login and shell cost when nothing is cold any more.
 */
const warmRepeat = { login: [] as number[], shell: [] as number[] };
async function noteWarmRepeat(vm: Pick<RunningVm, 'ssh'>, ssh: SandboxSsh): Promise<void> {
  let t = performance.now();
  const shell = await ssh.shell({ cols: 80, rows: 24 });
  await new Promise<void>((resolve) => shell.once('data', () => resolve()));
  warmRepeat.shell.push(performance.now() - t);
  shell.close();
  t = performance.now();
  const second = await vm.ssh();
  warmRepeat.login.push(performance.now() - t);
  second.close();
}

/** (b, c) QemuDriver.start() as the app calls it, to an SSH shell channel's first bytes. */
function appStart(fastBoot: boolean): StartKind {
  return {
    name: fastBoot ? 'app restore → shell' : 'app cold → shell',
    async run(env, round) {
      const t0 = performance.now();
      const vm = await env.driver.start({ sandboxDir: path.join(env.root, `app-${round}-${fastBoot}`), image: env.image, fastBoot, memoryMb: MEMORY_MB, cpus: CPUS });
      const started = performance.now() - t0;
      try {
        if (fastBoot && vm.bootMode !== 'snapshot') throw new Error(`fast boot fell back: ${env.driver.lastFastBootError?.message}`);
        const ssh = await vm.ssh();
        const shell = await ssh.shell({ cols: 80, rows: 24 });
        const opened = performance.now() - t0;
        await new Promise<void>((resolve) => shell.once('data', () => resolve()));
        const ready = performance.now() - t0;
        noteQemuCpu(fastBoot ? 'app restore → shell' : 'app cold → shell', vm.pid);
        shell.close();
        if (fastBoot) await noteWarmRepeat(vm, ssh);
        ssh.close();
        const offset = (vm.spawnedAt ?? t0) - t0;
        return [
          { name: 'qemu spawned', atMs: offset },
          ...(vm.phases ?? []).map((p) => ({ name: p.name, atMs: p.atMs + offset })),
          { name: 'start() returned', atMs: started },
          { name: 'shell channel open', atMs: opened },
          { name: 'shell first bytes', atMs: ready },
        ];
      } finally {
        await vm.destroy();
      }
    },
  };
}

const firstShellStartReturned: number[] = [];
const firstShellCommand: number[] = [];
/** (b') QemuDriver.start() asking for the first shell, to that shell's first bytes (and on to start() returning). */
const appFirstShell: StartKind = {
  name: 'app restore → first shell',
  async run(env, round) {
    const t0 = performance.now();
    let firstBytes: Promise<number> | undefined;
    let shell: TerminalSource | undefined;
    let output = '';
    const vm = await env.driver.start({
      sandboxDir: path.join(env.root, `first-shell-${round}`),
      image: env.image,
      memoryMb: MEMORY_MB,
      cpus: CPUS,
      firstShell: {
        cols: 80,
        rows: 24,
        ready: (source) => {
          shell = source;
          firstBytes = new Promise((resolve) =>
            source.onData((chunk) => {
              output += chunk.toString('latin1');
              resolve(performance.now() - t0);
            }),
          );
        },
      },
    });
    const started = performance.now() - t0;
    try {
      if (vm.bootMode !== 'snapshot' || !firstBytes) throw new Error(`no first shell: ${env.driver.lastFastBootError?.message ?? 'the restore did not hand one over'}`);
      const ready = await firstBytes;
      noteQemuCpu('app restore → first shell', vm.pid);
      // What the user meets next: a first command (a program, not a builtin), typed to its output; the
      // emulator translates that path now.
      const typed = performance.now();
      shell!.write('uname -m\r');
      while (!/[\r\n]x86_64\r\n/.test(output)) {
        if (performance.now() - typed > 30_000) throw new Error(`the first command printed nothing within 30 s: ${JSON.stringify(output.slice(-200))}`);
        await sleep(5);
      }
      firstShellCommand.push(performance.now() - typed);
      shell?.kill();
      // start() returns once the SSH login is done too, after the shell's first bytes: printed apart.
      firstShellStartReturned.push(started);
      const offset = (vm.spawnedAt ?? t0) - t0;
      return [
        { name: 'qemu spawned', atMs: offset },
        // The SSH steps run beside the shell; the phases before it are the restore's.
        ...(vm.phases ?? []).filter((p) => !p.name.startsWith('ssh ')).map((p) => ({ name: p.name, atMs: p.atMs + offset })),
        { name: 'first shell first bytes', atMs: ready },
      ];
    } finally {
      await vm.destroy();
    }
  },
};

/** The app for quickSandbox, made once (its own data folder; the shared image and snapshot cache). */
let quickApp: { app: FactoryApp; dataDir: string } | undefined;
/** (b'') A quick sandbox's Start in the app, to its shell's first bytes as a viewer gets them. */
const quickSandbox: StartKind = {
  name: 'quick sandbox → shell',
  async run() {
    if (!quickApp) {
      const dataDir = await mkdtemp(path.join(os.tmpdir(), 'boot-bench-app-'));
      quickApp = { app: await createFactoryApp({ host: 'web', paths: appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir }), warmPool: false }), dataDir };
    }
    const { app } = quickApp;
    const run: Run = [];
    let sessionId = '';
    let gotBytes: () => void = () => {};
    const bytes = new Promise<void>((resolve) => (gotBytes = resolve));
    const t0 = performance.now();
    const mark = (name: string) => run.push({ name, atMs: performance.now() - t0 });
    const offEvents = app.onEvent((e) => {
      if (e.type !== 'terminal.opened' || e.info.kind !== 'shell' || sessionId) return;
      sessionId = e.info.id;
      mark('shell session opened');
      void app.api['terminal.attach']({ sessionId }).then((a) => a.scrollback.length && gotBytes());
    });
    const offData = app.onTerminalData((e) => e.sessionId === sessionId && gotBytes());
    try {
      const task = await app.api['sandboxes.quick']({});
      mark('quick() answered');
      try {
        await Promise.race([bytes, sleep(60_000).then(() => Promise.reject(new Error('no shell within 60 s')))]);
        mark('shell first bytes');
        return run.sort((a, b) => a.atMs - b.atMs);
      } finally {
        // Running first, so the destroy is not a cancelled boot; then nothing of it is left.
        for (let i = 0; i < 600 && (await app.api['tasks.get']({ taskId: task.id })).phase !== 'running'; i++) await sleep(50);
        await app.api['tasks.destroy']({ taskId: task.id });
      }
    } finally {
      offEvents();
      offData();
    }
  },
};

/** The kinds measured, in the order each round runs them. */
const kinds: StartKind[] = [rawRestore, appFirstShell, quickSandbox, appStart(true), ...(withCold ? [rawCold, appStart(false)] : [])];

function printTable(results: Map<string, Run[]>) {
  for (const [name, runs] of results) {
    if (!runs.length) continue;
    console.log(`\n${name} (median of ${runs.length}; ms since the start was asked for, and the step's own ms)`);
    const phases = runs[0]!.map((p) => p.name);
    let prev = 0;
    for (const phase of phases) {
      const at = median(runs.map((r) => r.find((p) => p.name === phase)?.atMs ?? NaN));
      console.log(`  ${phase.padEnd(28)} ${at.toFixed(0).padStart(7)}  +${(at - prev).toFixed(0).padStart(6)}`);
      prev = at;
    }
  }
}

async function main() {
  const image = await testImage();
  const accel = await AccelProbe.cached();
  const root = await mkdtemp(path.join(os.tmpdir(), 'boot-bench-'));
  const driver = new QemuDriver({ snapshotsDir: appPaths().snapshots });
  const version = (await driver.checkInstalled()).version ?? '';
  console.log(`image ${image.version}, accel ${accel.accel} (${accel.reason}), ${os.cpus().length} host cores, load ${os.loadavg()[0]!.toFixed(2)}`);
  await driver.prepareFastBoot(image, { memoryMb: MEMORY_MB, cpus: CPUS });
  const key = templateKey(machineKey({ accel, memoryMb: MEMORY_MB, cpus: CPUS, image, cmdline: image.manifest.kernelCmdline }, version, 'qemu-system-x86_64'));
  const template = path.join(appPaths().snapshots, key);
  await stat(path.join(template, 'ready'));
  const env: BenchEnv = { image, accel, driver, template, root };
  const results = new Map<string, Run[]>(kinds.map((k) => [k.name, []]));
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const kind of kinds) {
        try {
          const run = await kind.run(env, round);
          results.get(kind.name)!.push(run);
          console.log(`round ${round}: ${kind.name.padEnd(24)} ${(run.at(-1)!.atMs / 1000).toFixed(2)} s`);
        } catch (err) {
          // A starved emulated guest can fail to boot (e.g. its timer check); the other kinds still count.
          console.log(`round ${round}: ${kind.name.padEnd(24)} FAILED: ${(err as Error).message.split('\n')[0]}`);
        }
      }
    }
  } finally {
    await quickApp?.app.dispose();
    if (quickApp) await rm(quickApp.dataDir, { recursive: true, force: true });
    await rm(root, { recursive: true, force: true });
  }
  printTable(results);
  const total = (name: string) => median(results.get(name)?.map((r) => r.at(-1)!.atMs) ?? []);
  const ratio = (a: string, b: string) => (results.has(a) && results.has(b) ? `${(total(a) / total(b)).toFixed(2)}` : 'n/a');
  console.log('\n== boot benchmark ==');
  for (const k of kinds) console.log(`${k.name.padEnd(24)} ${(total(k.name) / 1000).toFixed(2)} s`);
  console.log(`app restore / raw restore: ${ratio('app restore → shell', 'raw restore → banner')}`);
  console.log(`app restore, first shell / raw restore: ${ratio('app restore → first shell', 'raw restore → banner')}`);
  console.log(`quick sandbox Start → shell / raw restore: ${ratio('quick sandbox → shell', 'raw restore → banner')}`);
  if (firstShellStartReturned.length) {
    console.log(`  (with the first shell, start() returned after its SSH login at ${median(firstShellStartReturned).toFixed(0)} ms, median of ${firstShellStartReturned.length})`);
    console.log(`  (a first command typed in the first shell, to its output: ${median(firstShellCommand).toFixed(0)} ms)`);
  }
  const restored = results.get('app restore → shell') ?? [];
  if (warmRepeat.login.length && restored.length) {
    // The identity is taken once, cold by nature; login and shell at the speed of their second time.
    const identity = median(restored.map((r) => r.find((p) => p.name === 'identity taken')?.atMs ?? NaN));
    const floor = identity + median(warmRepeat.login) + median(warmRepeat.shell);
    console.log(
      `the same clone's second login ${median(warmRepeat.login).toFixed(0)} ms, second shell (channel to first bytes) ${median(warmRepeat.shell).toFixed(0)} ms: ` +
        `app restore with login and shell already translated would be ${(floor / 1000).toFixed(2)} s, ${(floor / total('raw restore → banner')).toFixed(2)} of the raw restore`,
    );
  }
  for (const [name, ms] of qemuCpu) console.log(`QEMU CPU until ready, ${name.padEnd(22)} ${median(ms).toFixed(0)} ms (median of ${ms.length})`);
  console.log(`app restore / app cold:    ${ratio('app restore → shell', 'app cold → shell')}`);
  console.log(`raw restore / raw cold:    ${ratio('raw restore → banner', 'raw cold → banner')}`);
  console.log(`app cold / raw cold:       ${ratio('app cold → shell', 'raw cold → banner')}`);
  if (process.env.BENCH_POOL === '0') return;
  // A task's Start from the warm pool (through the provisioner, as the app does), against the same run's restores.
  const pool = await measurePoolStart({ rounds });
  printPoolFigures(pool);
  console.log(`pool take / raw restore:   ${(pool.medianPoolMs / total('raw restore → banner')).toFixed(2)}`);
  console.log(`pool take / app restore:   ${pool.ratio.toFixed(2)}`);
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
