// Runs sandboxes under QEMU: one qcow2 overlay on the read-only base image,
// direct kernel boot, user-mode network with restrict=on, SSH forwarded on
// 127.0.0.1, per-sandbox SSH keys handed in through fw_cfg, a QMP socket for
// control. start() returns only once SSH answers with the pinned host key.
// Where snapshots live and whether to use them come from the caller (app.ts):
// the driver reads no app paths and no environment.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { lstat, mkdir, rm } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { FactoryError } from '../../common/errors.js';
import { generateSandboxKeys, type SandboxKeys } from '../ssh/sandbox-keys.js';
import type { SandboxSsh } from '../ssh/sandbox-ssh.js';
import { AccelProbe, type AccelChoice, type ForcedAccel } from './accel-probe.js';
import type { BaseImage } from './image-store.js';
import { createOverlay } from './overlay.js';
import { runCommand } from './process-runner.js';
import { buildQemuArgs, tcgThreads, type GuestForward, type TcgThreads } from './qemu-args.js';
import { QemuVm, type FrozenDisk, type LaunchContext, type StartPhase } from './qemu-vm.js';
import { activeDisk, identitySocketFor, qemuGuestName, readKeys, sandboxDisks, qmpSocketFor, sandboxFiles, writeKeys, type SandboxFiles } from './sandbox-files.js';
import type { QmpClient } from './qmp-client.js';
import { appendMarker } from './serial-log.js';
import { shellQuote } from '../../common/shell-quote.js';
import { FirstShellLostError, resumeRestored, SnapshotBoot, type FirstShell } from './snapshot-boot.js';
import { machineKey, warmFiles, warmProblem, type WarmMemory } from './warm-state.js';
import { dropWarmRam, hasWarmRam, makeWarmRam, warmRamFiles } from './warm-ram.js';
import { SnapshotStore } from './snapshot-store.js';

export type { GuestForward } from './qemu-args.js';
export type { FrozenDisk } from './qemu-vm.js';
export type { WarmMemory } from './warm-state.js';
export { sandboxFiles } from './sandbox-files.js';

export interface QemuDriverOptions {
  qemuBinary?: string;
  qemuImgBinary?: string;
  /** Chooses the accelerator; the cached real probe by default (honouring forceAccel). */
  accel?: () => Promise<AccelChoice>;
  /** Use this accelerator without probing (FACTORY_ACCEL, read by the caller). */
  forceAccel?: ForcedAccel;
  /**
   * Where booted-VM snapshots for fast starts are kept; without it (or false)
   * every sandbox boots cold.
   */
  snapshotsDir?: string | false;
  /** How TCG runs the vCPUs; by default by this machine's cores (qemu-args.ts, tcgThreads). */
  tcgThreads?: TcgThreads;
}

export interface StartOptions {
  sandboxDir: string;
  image: Pick<BaseImage, 'disk' | 'kernel' | 'initrd'> & { cmdline?: string; manifest?: { kernelCmdline?: string } };
  memoryMb?: number;
  cpus?: number;
  bootTimeoutMs?: number;
  /** guest address:port → a command QEMU spawns per guest connection (stdin/stdout = the connection) */
  guestForwards?: GuestForward[];
  /** Restore a booted snapshot of the image instead of booting (default true when the driver has snapshots; falls back to booting). */
  fastBoot?: boolean;
  /**
   * A layer's disk (itself backed by image.disk) for the new overlay to be
   * backed by instead of the base image. The image's memory snapshot would not
   * match that disk, so the sandbox then boots cold with the image's kernel.
   */
  backingDisk?: string;
  /**
   * The layer's memory saved with its disk (warm-state.ts): with backingDisk,
   * restored instead of booting when it belongs to this very machine
   * (machineKey); any failure falls back to a cold boot on the layer.
   */
  warm?: WarmMemory;
  /**
   * A restore of the image's snapshot starts this shell (root's login shell) in the guest as soon
   * as the guest has its identity and hands it to ready() before the SSH login, which under
   * emulation costs more than the restore (guest-console.ts). Cold boots and warm layers start
   * none. Once it is handed out, a failure rejects instead of falling back to a cold boot.
   */
  firstShell?: FirstShell;
}

export interface RunningVm {
  pid: number;
  accel: string;
  sshPort: number;
  bootMs: number;
  sandboxDir: string;
  /** 'snapshot' when restored from a saved memory state (the image's, or a warm layer's), else 'cold'. */
  bootMode: 'cold' | 'snapshot';
  /** The layer disk the sandbox's overlay was made on (start's backingDisk), when one was given. */
  backingDisk: string | undefined;
  /** Why it booted cold although a saved memory was there to restore (coldBootNote); shown with the task. */
  coldBootReason?: string | undefined;
  /**
   * The disk written so far becomes a read-only file; writes go on in a new overlay. Run `sync` in the
   * guest first (and drop its caches when saving memory). With memory: the guest's memory of the same instant too.
   */
  freezeDisk(opts?: { memory?: boolean }): Promise<FrozenDisk>;
  /** New connection, host key pinned, per-sandbox client key. */
  ssh(opts?: { username?: string }): Promise<SandboxSsh>;
  /** The VM's own QMP client (a QMP socket serves one client at a time). */
  qmp(): Promise<QmpClient>;
  /** QMP quit, SIGKILL on timeout; resolves when the process has ended. */
  stop(): Promise<void>;
  /** stop() and delete overlay, keys, sockets; keeps the logs. */
  destroy(): Promise<void>;
  serialTail(lines: number): string;
  exited: Promise<void>;
  /** The steps of the start, in ms since QEMU was spawned (the boot bench prints them). */
  readonly phases?: readonly StartPhase[];
  /** performance.now() when QEMU was spawned. */
  readonly spawnedAt?: number;
}

type InstallStatus = { ok: boolean; version?: string; installHint?: string };

const DEFAULT_CMDLINE = 'root=/dev/vda rw rootfstype=ext4 console=ttyS0 net.ifnames=0 init=/sbin/factory-init panic=-1 quiet';
const PORT_ATTEMPTS = 4;

export class QemuDriver {
  private readonly qemuBinary: string;
  private readonly qemuImgBinary: string;
  private readonly tcgThreads: QemuDriverOptions['tcgThreads'];
  private readonly chooseAccel: () => Promise<AccelChoice>;
  private readonly snapshots: SnapshotBoot | undefined;
  private installed: InstallStatus | undefined;

  /** Why the last start() did not restore a snapshot (for diagnostics). */
  lastFastBootError: Error | undefined;
  /** Why the last start() given a warm layer did not restore it (for diagnostics). */
  lastWarmBootError: Error | undefined;
  /** Why a layer's memory was last restored from its stream instead of its shared RAM file (for diagnostics). */
  lastWarmShareError: Error | undefined;
  /** Layers' shared RAM files being made (warm-ram.ts), by warm folder: one conversion each. */
  private readonly warmRamMaking = new Map<string, Promise<void>>();
  /** Warm folders whose shared form failed in this run: their stream is used from then on. */
  private readonly warmRamRefused = new Set<string>();

  constructor(opts: QemuDriverOptions = {}) {
    this.qemuBinary = opts.qemuBinary ?? 'qemu-system-x86_64';
    this.qemuImgBinary = opts.qemuImgBinary ?? 'qemu-img';
    this.tcgThreads = opts.tcgThreads;
    const forced = opts.forceAccel;
    this.chooseAccel = opts.accel ?? (() => AccelProbe.cached({ qemuBinary: this.qemuBinary, ...(forced ? { forced } : {}) }));
    this.snapshots = opts.snapshotsDir
      ? new SnapshotBoot(new SnapshotStore({ dir: opts.snapshotsDir }), {
          qemuBinary: this.qemuBinary,
          launch: (ctx, keys, how) => this.launch(ctx, keys, how),
          coldBoot: (ctx, keys, timeoutMs, totalTimeoutMs) => this.coldBoot(ctx, keys, timeoutMs, totalTimeoutMs),
          createOverlay: (baseDisk, overlay) => this.createOverlay(baseDisk, overlay),
        })
      : undefined;
  }

  static installHint(platform: NodeJS.Platform = process.platform): string {
    if (platform === 'darwin') return 'install QEMU with: brew install qemu';
    return 'install QEMU with: sudo apt-get install qemu-system-x86 qemu-utils (Debian/Ubuntu) or sudo dnf install qemu-system-x86 qemu-img (Fedora)';
  }

  async checkInstalled(): Promise<InstallStatus> {
    const hint = QemuDriver.installHint();
    for (const bin of [this.qemuBinary, this.qemuImgBinary]) {
      try {
        const r = await runCommand(bin, ['--version'], { timeoutMs: 15_000 });
        if (r.code !== 0) return { ok: false, installHint: `${bin} --version failed; ${hint}` };
      } catch {
        return { ok: false, installHint: `${bin} is not installed; ${hint}` };
      }
    }
    const r = await runCommand(this.qemuBinary, ['--version'], { timeoutMs: 15_000 });
    const version = /version\s+([0-9][^\s]*)/i.exec(r.stdout)?.[1];
    return { ok: true, ...(version ? { version } : {}) };
  }

  /** checkInstalled(), remembered once QEMU was found (a missing QEMU is checked again next time). */
  private async ensureInstalled(): Promise<InstallStatus & { version: string }> {
    if (!this.installed?.ok) this.installed = await this.checkInstalled();
    if (!this.installed.ok) throw new FactoryError('QemuMissing', `QEMU is not available: ${this.installed.installHint}`);
    return { ...this.installed, version: this.installed.version ?? '' };
  }

  async start(opts: StartOptions): Promise<RunningVm> {
    const installed = await this.ensureInstalled();
    const backingDisk = opts.backingDisk === undefined ? undefined : await checkBackingDisk(opts.backingDisk);
    const accel = await this.chooseAccel();
    const sandboxDir = path.resolve(opts.sandboxDir);
    const files = sandboxFiles(sandboxDir);
    await mkdir(sandboxDir, { recursive: true, mode: 0o700 });
    await mkdir(files.keysDir, { recursive: true, mode: 0o700 });
    const overlayExisted = existsSync(files.overlay);
    // Later disks of a chain whose first disk is gone are of no use (and would be booted).
    if (!overlayExisted) for (const stale of sandboxDisks(files)) await rm(stale, { force: true });
    const keys = generateSandboxKeys(path.basename(sandboxDir));
    await writeKeys(files, keys);
    const ctx = this.context(accel, opts.image, { memoryMb: opts.memoryMb, cpus: opts.cpus }, files, opts.guestForwards ?? []);
    const bootTimeoutMs = opts.bootTimeoutMs ?? (accel.accel === 'tcg' ? 180_000 : 60_000);
    const started = Date.now();
    this.lastWarmBootError = undefined;
    // Why a saved memory offered for this start was not restored, if one was not.
    let notRestored: string | undefined;
    const cleanFailedStart = async () => {
      await rm(files.keysDir, { recursive: true, force: true });
      await rm(ctx.qmpSocket, { force: true });
      await rm(ctx.identitySocket, { force: true });
      await rm(files.pidFile, { force: true });
      if (!overlayExisted) await rm(files.overlay, { force: true });
    };

    if (opts.warm && backingDisk && !overlayExisted) {
      try {
        const vm = await this.restoreWarm(ctx, keys, backingDisk, opts.warm, installed.version, Math.min(bootTimeoutMs, 60_000));
        vm.bootMs = Date.now() - started;
        vm.backingDisk = backingDisk;
        return vm;
      } catch (err) {
        this.lastWarmBootError = err as Error;
        notRestored = coldBootNote('layer', err as Error);
        await rm(files.overlay, { force: true });
      }
    }

    // A fresh sandbox restores the image's booted snapshot when one can be had;
    // anything going wrong there falls back to a normal boot.
    if (this.snapshots && opts.fastBoot !== false && !overlayExisted && !backingDisk) {
      try {
        const vm = await this.snapshots.start(ctx, keys, installed.version, Math.min(bootTimeoutMs, 60_000), opts.firstShell);
        vm.bootMs = Date.now() - started;
        return vm;
      } catch (err) {
        if (err instanceof FirstShellLostError) {
          await cleanFailedStart();
          throw err;
        }
        this.lastFastBootError = err as Error;
        notRestored = coldBootNote('image', err as Error);
        await rm(files.overlay, { force: true });
      }
    }

    if (!existsSync(files.overlay)) await this.createOverlay(backingDisk ?? opts.image.disk, files.overlay);
    try {
      const vm = await this.coldBoot(ctx, keys, started + bootTimeoutMs - Date.now(), bootTimeoutMs);
      // A layer's disk holds the machine id of the sandbox it was made in: a cold boot on it takes
      // a new identity as a restore does, or two sandboxes of one layer would share it.
      if (backingDisk) {
        try {
          await vm.rekey(keys, Math.max(10_000, started + bootTimeoutMs - Date.now()));
        } catch (err) {
          await vm.kill();
          throw err;
        }
      }
      vm.bootMs = Date.now() - started;
      vm.backingDisk = backingDisk;
      vm.coldBootReason = notRestored;
      return vm;
    } catch (err) {
      await cleanFailedStart();
      throw err;
    }
  }

  /**
   * Restores a layer's saved memory on an overlay of the layer's disk, with
   * the fw_cfg files and keys it was saved with, then gives the guest keys.
   * Rejects (the VM killed) when the state is of another machine or fails.
   */
  private async restoreWarm(ctx: LaunchContext, keys: SandboxKeys, layerDisk: string, warm: WarmMemory, qemuVersion: string, timeoutMs: number): Promise<QemuVm> {
    const savedKeys = await this.warmKeys(ctx, warm, qemuVersion);
    const saved = warmFiles(warm.dir);
    if (warm.shared && !this.warmRamRefused.has(warm.dir)) {
      try {
        return await this.restoreWarmShared(ctx, keys, layerDisk, warm.dir, savedKeys, timeoutMs);
      } catch (err) {
        // The stream still restores: this layer's sandboxes just do not share its pages in this run.
        this.lastWarmShareError = err as Error;
        this.warmRamRefused.add(warm.dir);
        await dropWarmRam(warm.dir).catch(() => {}); // Read-only or gone: the stream is used either way.
        await rm(ctx.files.overlay, { force: true });
      }
    }
    await this.createOverlay(layerDisk, ctx.files.overlay);
    const vm = await this.launch(ctx, savedKeys, { fwCfgFiles: saved.fwCfg, incomingState: saved.state, bootMode: 'snapshot' });
    await resumeRestored(vm, keys, timeoutMs);
    return vm;
  }

  /**
   * A layer's memory restored as a template clone's is (warm-ram.ts): its RAM file mapped privately,
   * its devices loaded with x-ignore-shared; the file is made from the stream by the first start
   * that needs it (the others of this app wait for that one), then re-keyed as any warm restore.
   */
  private async restoreWarmShared(ctx: LaunchContext, keys: SandboxKeys, layerDisk: string, warmDir: string, savedKeys: SandboxKeys, timeoutMs: number): Promise<QemuVm> {
    await this.ensureWarmRam(ctx, warmDir, layerDisk, savedKeys, timeoutMs);
    const f = warmRamFiles(warmDir);
    await this.createOverlay(layerDisk, ctx.files.overlay);
    const vm = await this.launch({ ...ctx, memory: { kind: 'file', path: f.ram, shared: false } }, savedKeys, {
      fwCfgFiles: warmFiles(warmDir).fwCfg,
      incomingState: f.devices,
      deferIncoming: true,
      bootMode: 'snapshot',
    });
    await resumeRestored(vm, keys, timeoutMs, { deferredState: f.devices });
    return vm;
  }

  /** The keys a layer's memory was saved with; rejects when that memory is of another machine or damaged. */
  private async warmKeys(ctx: LaunchContext, warm: WarmMemory, qemuVersion: string): Promise<SandboxKeys> {
    const expected = machineKey(ctx, qemuVersion, this.qemuBinary);
    if (warm.machineKey !== expected) throw new OtherMachineError(`the layer's memory is of another machine (${warm.machineKey}, this one is ${expected})`);
    const problem = await warmProblem(warm.dir);
    if (problem) throw new Error(problem);
    return readKeys(warmFiles(warm.dir).guest);
  }

  /** The layer's shared RAM file, made once (the other starts of this app wait for the one making it). */
  private async ensureWarmRam(ctx: LaunchContext, warmDir: string, layerDisk: string, savedKeys: SandboxKeys, timeoutMs: number): Promise<void> {
    if (await hasWarmRam(warmDir)) return;
    let making = this.warmRamMaking.get(warmDir);
    if (!making) {
      // Forgotten once settled, either way: a failure is the awaiting callers' to report.
      making = makeWarmRam({ launch: (c, k, how) => this.launch(c, k, how), createOverlay: (b, o) => this.createOverlay(b, o) }, ctx, warmDir, layerDisk, savedKeys, timeoutMs).finally(() =>
        this.warmRamMaking.delete(warmDir),
      );
      this.warmRamMaking.set(warmDir, making);
    }
    await making;
  }

  /**
   * Makes a layer's shared RAM file now rather than in the first start on it: for a task run N
   * ways, while the ways still wait, so they do not start beside that conversion. Rejects with the
   * reason when it cannot (the layer's starts then make it or use the stream, as before).
   */
  async shareLayerMemory(opts: { image: StartOptions['image']; memoryMb?: number; cpus?: number; backingDisk: string; warm: WarmMemory }): Promise<void> {
    if (!opts.warm.shared || this.warmRamRefused.has(opts.warm.dir)) return;
    const installed = await this.ensureInstalled();
    // The loader has a folder of its own in the layer's.
    const ctx = await this.machineContext(opts.image, opts);
    const savedKeys = await this.warmKeys(ctx, opts.warm, installed.version);
    await this.ensureWarmRam(ctx, opts.warm.dir, await checkBackingDisk(opts.backingDisk), savedKeys, 60_000);
  }

  /**
   * Makes the booted snapshot that fast starts restore, so the first sandbox
   * does not pay for it. Resolves to false when fast boot is off.
   */
  async prepareFastBoot(image: StartOptions['image'], opts: { memoryMb?: number; cpus?: number } = {}): Promise<boolean> {
    if (!this.snapshots) return false;
    const installed = await this.ensureInstalled();
    // Its own folder comes from the snapshot store.
    const ctx = await this.machineContext(image, opts);
    await this.snapshots.prepare(ctx, installed.version);
    return true;
  }

  /** A launch context where only the machine matters (size, devices, accelerator), not a sandbox's folder. */
  private async machineContext(image: StartOptions['image'], size: { memoryMb?: number | undefined; cpus?: number | undefined }): Promise<LaunchContext> {
    return this.context(await this.chooseAccel(), image, size, sandboxFiles(path.resolve('/nonexistent')), []);
  }

  private context(
    accel: AccelChoice,
    image: StartOptions['image'],
    size: { memoryMb?: number | undefined; cpus?: number | undefined },
    files: SandboxFiles,
    guestForwards: GuestForward[],
  ): LaunchContext {
    return {
      accel,
      files,
      sandboxDir: path.dirname(files.overlay),
      image,
      memoryMb: size.memoryMb ?? 2048,
      cpus: size.cpus ?? 2,
      guestForwards,
      qmpSocket: qmpSocketFor(files),
      identitySocket: identitySocketFor(files),
      cmdline: image.cmdline ?? image.manifest?.kernelCmdline ?? DEFAULT_CMDLINE,
    };
  }

  private createOverlay(baseDisk: string, overlay: string): Promise<void> {
    return createOverlay(baseDisk, overlay, { qemuImg: this.qemuImgBinary });
  }

  /**
   * Boots from the kernel, retrying on another port if QEMU could not bind the
   * SSH forward (another process took the free port first).
   */
  private async coldBoot(ctx: LaunchContext, keys: SandboxKeys, timeoutMs: number, totalTimeoutMs: number): Promise<QemuVm> {
    const deadline = Date.now() + timeoutMs;
    const taken = new Set<number>();
    let lastError: Error | undefined;
    for (let attempt = 1; attempt <= PORT_ATTEMPTS; attempt++) {
      const vm = await this.launch(ctx, keys, { fwCfgFiles: ctx.files, bootMode: 'cold', avoidPorts: taken });
      try {
        await vm.waitForSsh(Math.max(deadline - Date.now(), 1000), totalTimeoutMs);
        return vm;
      } catch (err) {
        await vm.kill();
        lastError = err as Error;
        if (vm.portWasTaken() && attempt < PORT_ATTEMPTS) {
          taken.add(vm.sshPort);
          continue;
        }
        break;
      }
    }
    throw lastError ?? new Error('QEMU did not start');
  }

  /** Spawns QEMU for ctx (no waiting). */
  private async launch(
    ctx: LaunchContext,
    keys: SandboxKeys,
    how: { fwCfgFiles: SandboxFiles; incomingState?: string; deferIncoming?: boolean; bootMode: 'cold' | 'snapshot'; avoidPorts?: ReadonlySet<number> },
  ): Promise<QemuVm> {
    const { files } = ctx;
    const sshPort = await freePort(how.avoidPorts);
    await rm(ctx.qmpSocket, { force: true });
    await rm(ctx.identitySocket, { force: true });
    await rm(files.pidFile, { force: true });
    const serialOffset = await appendMarker(files.serialLog, `${how.bootMode} boot ${new Date().toISOString()} accel=${ctx.accel.accel}`);
    const args = buildQemuArgs({
      name: qemuGuestName(ctx.sandboxDir),
      accel: ctx.accel,
      tcgThreads: this.tcgThreads ?? tcgThreads(ctx.cpus),
      memoryMb: ctx.memoryMb,
      ...(ctx.memory ? { memory: ctx.memory } : {}),
      cpus: ctx.cpus,
      kernel: ctx.image.kernel,
      initrd: ctx.image.initrd,
      cmdline: ctx.cmdline,
      // After freezeDisk() the guest writes to a newer file of the chain; a restart boots that one.
      overlay: activeDisk(files),
      sshPort,
      guestForwards: ctx.guestForwards,
      serialLog: files.serialLog,
      qmpSocket: ctx.qmpSocket,
      identitySocket: ctx.identitySocket,
      pidFile: files.pidFile,
      fwCfg: [
        { name: 'authorized_keys', file: how.fwCfgFiles.authorizedKeys },
        { name: 'ssh_host_ed25519_key', file: how.fwCfgFiles.hostKey },
      ],
    });
    if (how.incomingState) args.push('-incoming', how.deferIncoming ? 'defer' : `exec:cat ${shellQuote(how.incomingState)}`);
    return new QemuVm({
      sandboxDir: ctx.sandboxDir,
      files,
      qmpSocket: ctx.qmpSocket,
      identitySocket: ctx.identitySocket,
      keys,
      accel: ctx.accel,
      sshPort,
      serialOffset,
      bootMode: how.bootMode,
      fwCfgFiles: how.fwCfgFiles,
      machineKey: machineKey(ctx, this.installed?.version ?? '', this.qemuBinary),
      child: spawn(this.qemuBinary, args, { stdio: ['ignore', 'ignore', 'pipe'] }),
    });
  }
}

/** The absolute path of a layer disk given to start(), refused unless it is a regular file. */
async function checkBackingDisk(disk: string): Promise<string> {
  const resolved = path.resolve(disk);
  const st = await lstat(resolved).catch(() => undefined);
  if (!st?.isFile()) throw new Error(`the layer disk ${resolved} to boot on is ${st ? 'not a regular file' : 'missing'}`);
  return resolved;
}

/** A TCP port free on 127.0.0.1 right now, other than those in avoid. */
export async function freePort(avoid: ReadonlySet<number> = new Set()): Promise<number> {
  for (let i = 0; ; i++) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = net.createServer();
      server.unref();
      server.on('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const addr = server.address();
        server.close(() => (addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
      });
    });
    if (!avoid.has(port) || i >= 20) return port;
  }
}

/** A saved memory state made for another machine key: expected after an update, not a fault. */
class OtherMachineError extends Error {}

/** Longest reason kept: a QEMU error quoted in it can run long. */
const MAX_NOTE_CHARS = 400;

/** What the user is told when a start that could have restored memory booted cold instead. */
export function coldBootNote(saved: 'layer' | 'image', err: Error): string {
  if (saved === 'layer' && err instanceof OtherMachineError) {
    return "booted cold on the cached environment: its saved memory was made for another setup (QEMU, memory size, CPUs or this app's version); delete the environment on the Environments screen and the next task's setup saves it anew";
  }
  const what = saved === 'layer' ? "the cached environment's saved memory" : "the image's snapshot";
  // QEMU's own words may be in the message: one line of printable text, capped.
  const why = err.message.replace(/[^\x20-\x7e]+/g, ' ').trim();
  const note = `booted cold: ${what} could not be restored (${why})`;
  return note.length > MAX_NOTE_CHARS ? `${note.slice(0, MAX_NOTE_CHARS - 2)}…)` : note;
}
