// A task's sandbox from birth to death, without the task's bookkeeping: the
// seed bundle (kept so a fresh sandbox gets the same seed), boot (image,
// per-sandbox extensions, QEMU), seeding the guest, teardown, and the cleanup of
// what a killed app left behind. The task service decides when; this does how.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { type FactoryEvent } from '../../common/contract.js';
import { FactoryError } from '../../common/errors.js';
import type { SandboxInfo, Task } from '../../common/domain.js';
import type { EgressRule } from '../../common/egress.js';
import { GUEST_OUT_DIR, GUEST_REPO_DIR, asAgent, shellQuote } from '../guest/guest-shell.js';
import type { Logger } from '../log/logger.js';
import type { AppPaths } from '../state/paths.js';
import type { Settings } from '../state/settings.js';
import { writeFileAtomic } from '../state/state-store.js';
import { createSeedBundle } from './host-repo.js';
import { GUEST_BUNDLE, GUEST_CERT_ENV, GUEST_HOST_CERTS, hostCertificateBundle } from '../guest/guest-certificates.js';
import { writeGuestFile } from '../pipeline/stage-runner.js';
import type { LiveSandbox, LiveSandboxes } from '../sandbox/live-sandboxes.js';
import type { PooledSandbox } from '../pool/warm-pool.js';
import { forkPoint } from './sandbox-fork.js';
import { SpareForks, type SparePoolPort } from './spare-forks.js';
import type { FirstShellRequest, GuestForwardSpec, ImageStorePort, QemuDriverPort, QmpPort, RunningVmPort, SandboxExtension, SandboxSshPort, WarmMemoryPort } from '../sandbox/sandbox-ports.js';

export interface SandboxProvisionerDeps<Image> {
  paths: AppPaths;
  settings: () => Settings;
  images: ImageStorePort<Image>;
  qemu: QemuDriverPort<Image>;
  live: LiveSandboxes;
  emit: (e: FactoryEvent) => void;
  /** Per-sandbox add-ons (credential proxy, ...), prepared before boot and released after the VM ends. */
  extensions?: SandboxExtension[];
  /**
   * Where a task's sandbox runs (issue 14): the driver of the sandbox host it is placed on, or
   * undefined for this machine (`qemu`). Placement may connect to hosts, so it is asked at boot.
   */
  placeSandbox?: (task: LiveSandbox['task']) => Promise<QemuDriverPort<Image> | undefined>;
  /** Guest boot limit; the driver's default when absent. */
  bootTimeoutMs?: number;
  /**
   * Kills what an earlier app run left running for a sandbox folder (its pidfile
   * and the pids given), only processes the VM layer identifies as that folder's
   * VM, and waits until they are gone; resolves to the pids killed.
   */
  killLeftovers: (sandboxDir: string, knownPids: number[]) => Promise<number[]>;
  log: Logger;
  /** The warm pool (main/pool): a sandbox without a layer takes a waiting VM of its size instead of starting one. */
  pool?: WarmPoolPort;
  /** How long a hooks session's sandbox is unused before its spare fork is made (spare-forks.ts). */
  spareIdleMs?: number;
}

/** What the provisioner needs of the warm pool (spare forks of hooks sessions' sandboxes too). */
export interface WarmPoolPort extends SparePoolPort {
  /** A waiting VM of this size for this task only, or undefined. */
  take(taskId: string, want: { memoryMb: number; cpus: number }): PooledSandbox | undefined;
  /** Guest memory was freed, or a boot may have built the image: the pool looks again. */
  poke(): void;
}

const MAX_SEED_BUNDLE_BYTES = 2 * 1024 * 1024 * 1024;

/** What a task was seeded with, so a fresh sandbox gets the same: kept next to the bundle. */
const SeedOptions = z.object({
  includeUncommitted: z.boolean(),
  /** The commit the bundle holds, once made: the base commit, or one on top with the uncommitted changes. */
  seedCommit: z.string().regex(/^[0-9a-f]{40,64}$/).optional(),
});
type SeedOptions = z.infer<typeof SeedOptions>;

export class SandboxProvisioner<Image = unknown> {
  /** Spare forks of hooks sessions' sandboxes, for their subagents (when there is a warm pool). */
  readonly spares: SpareForks | undefined;

  constructor(private readonly deps: SandboxProvisionerDeps<Image>) {
    const pool = deps.pool;
    this.spares = pool
      ? new SpareForks({
          pool,
          parent: (taskId) => {
            const sandbox = deps.live.get(taskId);
            return sandbox?.vm && sandbox.ssh && !sandbox.tearingDown ? sandbox : undefined;
          },
          forkPoint,
          cpus: () => deps.settings().vmCpus,
          log: deps.log,
          ...(deps.spareIdleMs !== undefined ? { idleMs: deps.spareIdleMs } : {}),
        })
      : undefined;
  }

  get live(): LiveSandboxes {
    return this.deps.live;
  }

  /** Host-side scratch of a task (its seed); deleted when the task's sandbox is destroyed. */
  workDir(taskId: string): string {
    return path.join(this.deps.paths.data, 'work', taskId);
  }

  sandboxDir(taskId: string): string {
    return path.join(this.deps.paths.sandboxes, taskId);
  }

  /** Called once when the task is created: how its seed is to be made. */
  async rememberSeed(taskId: string, includeUncommitted: boolean): Promise<void> {
    await this.writeSeedOptions(taskId, { includeUncommitted });
  }

  /**
   * The task's seed bundle: the one made before when it is still there, else a
   * new one. A seed with uncommitted changes cannot be made again (the working
   * tree has moved on), so it is kept until the task's sandbox is destroyed.
   */
  async seedBundle(task: Pick<Task, 'id' | 'repoPath' | 'baseCommit' | 'branch'>): Promise<string> {
    const workDir = this.workDir(task.id);
    const opts = await this.readSeedOptions(task.id);
    const bundlePath = path.join(workDir, 'seed.bundle');
    // seedCommit is written only once the bundle is complete: a bundle without it was cut by a kill.
    if (opts.seedCommit && fs.existsSync(bundlePath)) return bundlePath;
    if (opts.seedCommit && opts.seedCommit !== task.baseCommit) {
      throw new FactoryError('SeedMissing', `the seed of task ${task.id} (base commit and uncommitted changes) is gone from ${workDir}; start a new task`);
    }
    // Seeded once already: only the base commit, never the working tree as it is now.
    const includeUncommitted = opts.seedCommit ? false : opts.includeUncommitted;
    const seed = await createSeedBundle({ repoPath: task.repoPath, baseCommit: task.baseCommit, branch: task.branch, workDir, includeUncommitted });
    if (fs.statSync(seed.bundlePath).size > MAX_SEED_BUNDLE_BYTES) {
      await fsp.rm(seed.bundlePath, { force: true });
      throw new FactoryError('RepoTooLarge', 'the repository bundle is over 2 GiB');
    }
    await this.writeSeedOptions(task.id, { ...opts, seedCommit: seed.seedCommit });
    return seed.bundlePath;
  }

  /** The commit the task's seed bundle holds, once made (the base commit, or one on top with uncommitted changes). */
  async seedCommit(taskId: string): Promise<string | undefined> {
    return (await this.readSeedOptions(taskId)).seedCommit;
  }

  /** Throws what seedBundle would when the seed cannot be had again, without making it. */
  async checkSeed(task: Pick<Task, 'id' | 'baseCommit'>): Promise<void> {
    const opts = await this.readSeedOptions(task.id);
    if (opts.seedCommit && opts.seedCommit !== task.baseCommit && !fs.existsSync(path.join(this.workDir(task.id), 'seed.bundle'))) {
      throw new FactoryError('SeedMissing', `the seed of task ${task.id} (base commit and uncommitted changes) is gone from ${this.workDir(task.id)}; start a new task`);
    }
  }

  /** Before a fresh sandbox: what is left of the old one (a VM that died in this run, its disk, its extensions) goes. */
  async clearForFresh(taskId: string, old: LiveSandbox | undefined, sandboxDir: string): Promise<void> {
    if (old) await this.teardown(old);
    await this.reapLeftovers(taskId, { sandboxDir });
  }

  /** Registers the task's sandbox (replacing a gone one), so extensions and shells find it while it boots. */
  open(task: LiveSandbox['task']): LiveSandbox {
    return this.deps.live.open(task, this.sandboxDir(task.id));
  }

  /**
   * A layer just made on this machine, in the form its sandboxes share (its RAM in one file) before
   * any of them starts. Layers are local only; a driver that cannot does nothing.
   */
  async shareLayerMemory(layer: { disk: string; warm?: WarmMemoryPort }, memoryMb?: number): Promise<void> {
    if (!layer.warm || !this.deps.qemu.shareLayerMemory) return;
    const image = await this.ensureImage();
    await this.deps.qemu.shareLayerMemory({ image, memoryMb: memoryMb ?? this.deps.settings().vmMemoryMb, cpus: this.deps.settings().vmCpus, backingDisk: layer.disk, warm: layer.warm });
  }

  /** The base image, its first build's progress shown. */
  private ensureImage(): Promise<Image> {
    return this.deps.images.ensure((status) => this.deps.emit({ type: 'image.progress', status }));
  }

  /** Base image (a first build may take minutes; a cancel does not wait), extensions, then QEMU. */
  async boot(
    sandbox: LiveSandbox,
    signal: AbortSignal,
    opts: { egress?: EgressRule[]; backingDisk?: string; warm?: WarmMemoryPort; memoryMb?: number; firstShell?: FirstShellRequest; spare?: PooledSandbox } = {},
  ): Promise<RunningVmPort> {
    const started = Date.now();
    const image = await abortable(this.ensureImage(), signal);
    checkAborted(signal);
    const settings = this.deps.settings();
    const driver = (await this.deps.placeSandbox?.(sandbox.task)) ?? this.deps.qemu;
    checkAborted(signal);
    const local = driver === this.deps.qemu;
    // The repository's ask, already held to the user's cap, or the setting.
    const memoryMb = opts.memoryMb ?? settings.vmMemoryMb;
    // This machine's memory: what the warm pool's budget counts.
    if (local) sandbox.memoryMb = memoryMb;
    // A layer needs its own disk under the VM, and the pool is on this machine:
    // only a local sandbox on the bare image can come from the pool.
    // A spare fork (already the task's) is taken like a pooled VM.
    let pooled = opts.spare ?? (opts.backingDisk || !local ? undefined : this.deps.pool?.take(sandbox.taskId, { memoryMb, cpus: settings.vmCpus }));
    if (pooled) {
      sandbox.sandboxDir = pooled.dir;
      sandbox.poolCleanup = pooled.cleanup;
    }
    const handed = pooled?.guest;
    const guestForwards: GuestForwardSpec[] = [];
    try {
      for (const ext of this.deps.extensions ?? []) {
        sandbox.extensions.push(ext);
        const prepared = await ext.prepare({
          taskId: sandbox.taskId,
          sandboxDir: sandbox.sandboxDir,
          ...(opts.egress ? { egress: opts.egress } : {}),
          ...(pooled ? { socketPath: pooled.socketPath } : {}),
        });
        guestForwards.push(...(prepared.guestForwards ?? []));
        Object.assign(sandbox.guestEnv, prepared.guestEnv ?? {});
      }
      checkAborted(signal);
      if (pooled && sameForwards(guestForwards, pooled.guestForwards)) {
        // The task's boot is the take, not the pooled VM's own start long before.
        pooled.vm.bootMs = Date.now() - started;
        sandbox.vm = pooled.vm;
        // Its SSH connection and what the pool already did in the guest come with it.
        if (handed) sandbox.pooledGuest = handed;
        return sandbox.vm;
      }
    } catch (err) {
      // Not yet the task's VM: nobody else would end it.
      handed?.ssh.close();
      if (pooled) await pooled.vm.destroy().catch((e: unknown) => this.deps.log.warn('stopping an unused pooled sandbox failed', { taskId: sandbox.taskId, err: e }));
      throw err;
    }
    if (pooled) {
      // Its QEMU reaches other forwards than the extensions now give (an extension added one): start one as usual, in its folder.
      this.deps.log.warn("a pooled sandbox's guest forwards differ from the task's; starting a new one", { taskId: sandbox.taskId });
      handed?.ssh.close();
      await pooled.vm.destroy();
      pooled = undefined;
    }
    sandbox.vm = await driver.start({
      sandboxDir: sandbox.sandboxDir,
      image,
      memoryMb,
      cpus: settings.vmCpus,
      ...(guestForwards.length ? { guestForwards } : {}),
      ...(opts.backingDisk ? { backingDisk: opts.backingDisk } : {}),
      ...(opts.backingDisk && opts.warm ? { warm: opts.warm } : {}),
      // Only a restore starts it; a pooled sandbox's SSH is warm already, so its shell comes over SSH.
      ...(opts.firstShell ? { firstShell: opts.firstShell } : {}),
      ...(this.deps.bootTimeoutMs ? { bootTimeoutMs: this.deps.bootTimeoutMs } : {}),
    });
    // The image may have just been built: the pool can fill now.
    this.deps.pool?.poke();
    return sandbox.vm;
  }

  /**
   * Uploads the seed bundle and clones it as the agent user on the task branch.
   * With a git route through the credential proxy, its URL (placeholder only)
   * becomes the remote `upstream`, so `git fetch upstream` works in the sandbox.
   */
  async seed(sandbox: LiveSandbox, task: Pick<Task, 'id' | 'branch' | 'baseCommit'>, bundlePath: string, opts: { onLayer?: { installDirs: string[] } } = {}): Promise<void> {
    const ssh = await this.connect(sandbox);
    await seedGuest(ssh, task.branch, bundlePath, sandbox.guestEnv.FACTORY_GIT_URL, opts.onLayer);
    sandbox.seeded = true;
    // A seed of the base commit alone can be made again; it would only take space.
    const seeded = await this.readSeedOptions(task.id);
    if (seeded.seedCommit === task.baseCommit) await fsp.rm(bundlePath, { force: true });
  }

  /** SSH to the booted guest, which then trusts what this computer trusts (when the setting says so). */
  async connect(sandbox: LiveSandbox): Promise<SandboxSshPort> {
    if (!sandbox.vm) throw new FactoryError('NoSandbox', `task ${sandbox.taskId} has no running sandbox to connect to`);
    // A pooled VM's connection, opened while it waited, is used once; a closed one is replaced.
    const handed = sandbox.pooledGuest;
    sandbox.pooledGuest = undefined;
    const reuse = handed && !(handed.ssh as { isClosed?: boolean }).isClosed ? handed : undefined;
    if (handed && !reuse) handed.ssh.close();
    const ssh = (sandbox.ssh = reuse?.ssh ?? (await sandbox.vm.ssh()));
    const trust = this.deps.settings().guestTrustsHostCertificates;
    if (trust && reuse?.certificates !== undefined) Object.assign(sandbox.guestEnv, reuse.certificates);
    else if (trust) Object.assign(sandbox.guestEnv, (await trustHostCertificates(ssh)) ?? {});
    return ssh;
  }

  /** Ends the VM (extensions' last look first), deletes its disk and keys, releases the extensions. */
  async teardown(sandbox: LiveSandbox): Promise<void> {
    sandbox.tearingDown = true;
    const vm = sandbox.vm;
    if (vm && !sandbox.extensions.every((e) => !e.beforeDestroy)) {
      const qmp: (() => Promise<QmpPort>) | undefined = typeof vm.qmp === 'function' ? () => vm.qmp!() : undefined;
      for (const ext of sandbox.extensions) {
        // beforeDestroy must not throw (port contract); if one does, the teardown goes on and the log says so.
        await ext.beforeDestroy?.({ taskId: sandbox.taskId, sandboxDir: vm.sandboxDir, ...(qmp ? { qmp, qemuPid: vm.pid } : {}) })
          .catch((err: unknown) => this.deps.log.warn('a sandbox extension failed before destroy', { taskId: sandbox.taskId, extension: ext.name, err }));
      }
    }
    this.dropSsh(sandbox);
    try {
      if (vm) await vm.destroy();
    } finally {
      // A disk that could not be deleted (the next start reaps it) must not keep the
      // extensions (the credential proxy) open or the sandbox registered.
      sandbox.vm = undefined;
      await this.releaseExtensions(sandbox);
      this.deps.live.close(sandbox);
    }
  }

  /** After QEMU ended by itself: no connection, no extensions. */
  async afterCrash(sandbox: LiveSandbox): Promise<void> {
    this.dropSsh(sandbox);
    await this.releaseExtensions(sandbox);
  }

  /** The VM is gone (or never came): the extensions go, and so does what the pool made for it; its memory is free. */
  async releaseExtensions(sandbox: LiveSandbox): Promise<void> {
    await this.spares?.drop(sandbox.taskId);
    const exts = sandbox.extensions.splice(0);
    // release must not throw (port contract); one failing must not keep the others, and the log says which.
    await Promise.all(
      exts.map((e) =>
        e.release({ taskId: sandbox.taskId }).catch((err: unknown) => this.deps.log.warn('a sandbox extension failed to release', { taskId: sandbox.taskId, extension: e.name, err })),
      ),
    );
    const cleanup = sandbox.poolCleanup;
    sandbox.poolCleanup = undefined;
    await cleanup?.().catch((err: unknown) => this.deps.log.warn("removing a pooled sandbox's socket folder failed", { taskId: sandbox.taskId, err }));
    sandbox.memoryMb = undefined;
    this.deps.pool?.poke();
  }

  /**
   * After the app was killed: ends the QEMU it left for this sandbox (only a
   * process identified as that, never a recycled pid) and waits until it is
   * gone, then deletes the sandbox's disk, keys and sockets. Logs stay.
   */
  async reapLeftovers(taskId: string, opts: { sandboxDir?: string; qemuPid?: number } = {}): Promise<void> {
    const dir = opts.sandboxDir ?? this.sandboxDir(taskId);
    try {
      await this.deps.killLeftovers(dir, opts.qemuPid ? [opts.qemuPid] : []);
    } catch (err) {
      // Nothing could be identified (no process table): leave the disk to a later start rather than pull it from under a VM.
      this.deps.log.warn('looking for a QEMU left behind failed; its disk is kept', { taskId, sandboxDir: dir, err });
      return;
    }
    // No folder: nothing was left behind.
    for (const name of await fsp.readdir(dir).catch(() => [] as string[])) {
      if (name.endsWith('.log')) continue;
      await fsp.rm(path.join(dir, name), { recursive: true, force: true });
    }
  }

  private dropSsh(sandbox: LiveSandbox): void {
    try {
      sandbox.ssh?.close();
    } catch {
      // Already closed.
    }
    sandbox.ssh = undefined;
  }

  private async readSeedOptions(taskId: string): Promise<SeedOptions> {
    const file = path.join(this.workDir(taskId), 'seed.json');
    let raw: string;
    try {
      raw = await fsp.readFile(file, 'utf8');
    } catch {
      throw new FactoryError('SeedMissing', `the seed of task ${taskId} is gone (${file} is missing); start a new task`);
    }
    let parsed: SeedOptions | undefined;
    try {
      parsed = SeedOptions.parse(JSON.parse(raw));
    } catch (err) {
      const why = err instanceof z.ZodError ? err.issues[0]?.message : (err as Error).message;
      throw new FactoryError('SeedMissing', `the seed record of task ${taskId} in ${file} is unreadable: ${why}`);
    }
    return parsed;
  }

  private async writeSeedOptions(taskId: string, opts: SeedOptions): Promise<void> {
    await writeFileAtomic(path.join(this.workDir(taskId), 'seed.json'), JSON.stringify(opts) + '\n');
  }
}

/** Where the repository of a cached layer waits while a task's fresh clone takes its install folders. */
const LAYER_REPO_DIR = '/work/.layer-repo';

/**
 * The clone as the agent user. No git config but the repository's own (the image's and the home
 * folder's may come from a layer's setup), no hook (a layer's core.hooksPath or its template), and
 * no template: the new .git holds nothing the layer had.
 */
function cloneScript(branch: string, upstreamUrl?: string): string {
  return [
    'set -e',
    'export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null',
    `git -c core.hooksPath=/dev/null clone -q --template= -b ${shellQuote(branch)} /work/seed.bundle ${GUEST_REPO_DIR}`,
    `cd ${GUEST_REPO_DIR}`,
    'git -c core.hooksPath=/dev/null remote remove origin',
    ...(upstreamUrl ? [`git -c core.hooksPath=/dev/null remote add upstream ${shellQuote(upstreamUrl)}`] : []),
    'git rev-parse HEAD',
  ].join('\n');
}

/**
 * On a cached environment layer the repository that setup ran in is there, with its .git (hooks,
 * config) and work tree as setup left them. None of it is used: it is moved aside before the fresh
 * clone, and afterwards only the install folders the plan names (node_modules, .venv, ...) move from
 * it into the clone, by rename, where the clone has nothing of that name and the place is inside the
 * clone; then it is deleted. No git command runs in it. As root: a root setup step may own them.
 */
export function layerCarryScript(installDirs: string[], where: { old?: string; repo?: string } = {}): string {
  const old = where.old ?? LAYER_REPO_DIR;
  const repo = where.repo ?? GUEST_REPO_DIR;
  const names = installDirs.filter((n) => /^[A-Za-z0-9._-]{1,100}$/.test(n) && n !== '.' && n !== '..' && n !== '.git');
  const match = names.map((n) => `-name ${shellQuote(n)}`).join(' -o ');
  return [
    'set -eu',
    `old=${shellQuote(old)}; repo=${shellQuote(repo)}`,
    '[ -d "$old" ] && [ ! -L "$old" ] || exit 0',
    ...(names.length ? [
      'cd "$old"',
      // -P: no symlink is followed; nothing under a .git is looked at.
      `find -P . -name .git -prune -o -type d \\( ${match} \\) -print0 -prune | while IFS= read -r -d '' rel; do`,
      '  rel=${rel#./}; target="$repo/$rel"',
      '  { [ -e "$target" ] || [ -L "$target" ]; } && continue',
      '  parent=$(realpath -e -- "$(dirname -- "$target")" 2>/dev/null) || continue',
      '  case "$parent/" in "$repo"/*) ;; *) continue ;; esac',
      '  mv -T -- "$old/$rel" "$parent/$(basename -- "$target")"',
      'done',
      'cd /',
    ] : []),
    'rm -rf -- "$old"',
  ].join('\n');
}

async function seedGuest(ssh: SandboxSshPort, branch: string, bundlePath: string, upstreamUrl?: string, layer?: { installDirs: string[] }): Promise<void> {
  // On a layer, the repository setup ran in is moved aside (a rename: nothing of it runs) so the clone starts in an empty folder.
  const aside = layer ? `rm -rf ${LAYER_REPO_DIR}; if [ -e ${GUEST_REPO_DIR} ] || [ -L ${GUEST_REPO_DIR} ]; then mv -T ${GUEST_REPO_DIR} ${LAYER_REPO_DIR}; fi; ` : '';
  const prep = await ssh.run(
    `set -e; ${aside}mkdir -p ${GUEST_REPO_DIR} ${GUEST_OUT_DIR} /work/.factory; chown agent:agent ${GUEST_REPO_DIR} ${GUEST_OUT_DIR}; chmod 755 /work /work/.factory; git config --system --replace-all safe.directory ${GUEST_REPO_DIR}`,
    { timeoutMs: 30_000 },
  );
  if (prep.code !== 0) throw new FactoryError('SeedFailed', `preparing /work in the sandbox failed: ${prep.stderr.trim().slice(0, 500)}`);
  await ssh.putFile(bundlePath, '/work/seed.bundle');
  // The bundle is only needed for the clone; it would otherwise take space in the overlay.
  const clone = await ssh.run(`chmod 644 /work/seed.bundle && ${asAgent(cloneScript(branch, upstreamUrl))}; rc=$?; rm -f /work/seed.bundle; exit $rc`, {
    timeoutMs: 10 * 60_000,
    maxBytes: 64 * 1024,
  });
  if (clone.code !== 0) throw new FactoryError('SeedFailed', `cloning the repository in the sandbox failed: ${clone.stderr.trim().slice(0, 500)}`);
  if (!layer) return;
  const carry = await ssh.run(`bash -c ${shellQuote(layerCarryScript(layer.installDirs))}`, { timeoutMs: 10 * 60_000, maxBytes: 64 * 1024 });
  if (carry.code !== 0) throw new FactoryError('SeedFailed', `taking the install folders from the cached environment failed: ${carry.stderr.trim().slice(0, 500)}`);
}

/**
 * The guest trusts what this computer trusts (guest-certificates.ts): the host's bundle written in the guest, and
 * the environment that points tools at it; undefined (nothing written) on a host without a bundle. Nothing in it is
 * a task's: the warm pool does it before a task takes the VM.
 */
export async function trustHostCertificates(ssh: SandboxSshPort): Promise<Record<string, string> | undefined> {
  const bundle = await hostCertificateBundle();
  if (!bundle) return undefined;
  await writeGuestFile(ssh, GUEST_HOST_CERTS, bundle);
  await writeGuestFile(ssh, GUEST_BUNDLE, bundle);
  return { ...GUEST_CERT_ENV };
}

/**
 * What the warm pool does in a guest while it waits: a login shell runs once (its files, paged out by the snapshot
 * restore, are read now rather than at the task's first shell), then the host's certificates when asked.
 */
export async function warmPooledGuest(ssh: SandboxSshPort, opts: { certificates: boolean }): Promise<Record<string, string> | undefined> {
  const shell = await ssh.run('bash -lc true', { timeoutMs: 60_000 });
  if (shell.code !== 0) throw new Error(`a first login shell in the pooled sandbox failed: ${shell.stderr.trim().slice(0, 200)}`);
  return opts.certificates ? trustHostCertificates(ssh) : undefined;
}

/** The same guest forwards, in the same order. */
function sameForwards(a: GuestForwardSpec[], b: GuestForwardSpec[]): boolean {
  return a.length === b.length && a.every((f, i) => f.guestAddress === b[i]?.guestAddress && f.guestPort === b[i]?.guestPort && f.command === b[i]?.command);
}

/** What a task records about its sandbox once the VM is up. */
export function bootedSandboxInfo(vm: RunningVmPort): Omit<SandboxInfo, 'status'> {
  return {
    accel: vm.accel,
    sshPort: vm.sshPort,
    bootMs: vm.bootMs,
    ...(vm.coldBootReason ? { coldBootReason: vm.coldBootReason } : {}),
    ...(vm.host ? { host: vm.host } : {}),
  };
}

export function checkAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new FactoryError('Cancelled', 'the task was cancelled');
}

function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    p.catch(() => undefined); // its later failure must not surface as an unhandled rejection
    return Promise.reject(new FactoryError('Cancelled', 'the task was cancelled'));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new FactoryError('Cancelled', 'the task was cancelled'));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
