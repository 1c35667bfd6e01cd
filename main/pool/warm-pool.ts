// The warm pool: sandboxes restored from the base image's snapshot, re-keyed
// and waiting for a task, so Start does not wait for QEMU. The pool starts them
// one at a time in the background (never two at once: QEMU under software
// emulation takes a core), within a memory budget shared with running
// sandboxes. A pooled VM is launched before its task exists: its proxy forward
// points at a socket in its own folder where nothing listens until a task
// takes it, so the guest reaches nothing meanwhile. Each is handed to one task
// only, and nothing of the pool outlives the app: dispose stops every pooled
// QEMU, and the next start kills and deletes whatever a crash left behind.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { PoolStatus } from '../../common/domain.js';
import type { Logger } from '../log/logger.js';
import type { Settings } from '../state/settings.js';
import type { PooledGuest } from '../sandbox/live-sandboxes.js';
import type { GuestForwardSpec, ImageStorePort, QemuDriverPort, RunningVmPort, SandboxSshPort, WarmMemoryPort } from '../sandbox/sandbox-ports.js';
import { effectiveBudgetMb, nextFill, poolStatus, usedMb, type PoolCounts } from './pool-budget.js';

/**
 * Written into a pooled sandbox's folder when a task takes it: from then on the folder is the task's. A `.log`
 * name, so every cleanup that keeps a sandbox's logs (the task's reaping of its folder) keeps it too.
 */
export const TAKEN_MARKER = 'pool-taken.log';
const SOCKET_NAME = 'proxy.sock';

/** A restored sandbox, waiting, then one task's. */
export interface PooledSandbox {
  /** Its folder (overlay, keys, sockets, logs): the task's sandbox folder once taken. */
  readonly dir: string;
  /** Where its proxy forward connects; the task's proxy listens here after the take. */
  readonly socketPath: string;
  /** The guest forwards QEMU was started with. */
  readonly guestForwards: GuestForwardSpec[];
  readonly memoryMb: number;
  readonly cpus: number;
  readonly vm: RunningVmPort;
  /** Its SSH connection, opened while it waited, and what was done in the guest then (nothing of any task). */
  readonly guest?: PooledGuest;
  /** Removes what the pool made outside the folder (a private socket folder); call once the VM has ended. */
  cleanup(): Promise<void>;
}

export interface WarmPoolDeps<Image> {
  /** The pool's folder: one sub-folder per pooled sandbox. */
  root: string;
  images: ImageStorePort<Image>;
  qemu: Pick<QemuDriverPort<Image>, 'start'>;
  settings: () => Pick<Settings, 'warmPoolSize' | 'warmPoolMemoryBudgetMb' | 'vmMemoryMb' | 'vmCpus' | 'guestTrustsHostCertificates'>;
  /** Guest memory of the task sandboxes running or booting now. */
  runningMemoryMb: () => number;
  /** The guest forwards a sandbox gets whose proxy will listen on socketPath (the credential broker's). */
  guestForwards: (socketPath: string) => GuestForwardSpec[];
  /** Whether a socket path can carry the proxy (length, characters QEMU and socat accept). */
  socketPathFits: (socketPath: string) => boolean;
  /** Kills the QEMU a folder's earlier run left (identified as that folder's QEMU only); resolves to the pids killed. */
  killLeftovers: (dir: string, knownPids: number[]) => Promise<number[]>;
  onStatus: (status: PoolStatus) => void;
  /**
   * Readies a waiting guest so the take has less to do (nothing of any task): e.g. a first login shell, and with
   * `certificates` (the guest trusts the host's, a setting) writes those and returns their env. Without it the
   * pool opens no connection and runs nothing in the guest.
   */
  warmGuest?: (ssh: SandboxSshPort, opts: { certificates: boolean }) => Promise<Record<string, string> | undefined>;
  log: Logger;
  bootTimeoutMs?: number;
  /** Wait before trying again after a pooled sandbox failed to start (default 60 s). */
  retryMs?: number;
  /**
   * Wait after a take before refilling (default 3 s): the refill's QEMU start would take the cores the task
   * needs for its first shell and its seeding.
   */
  refillDelayMs?: number;
  /** This computer's memory, for the default budget (os.totalmem() when absent). */
  totalMemoryBytes?: number;
}

export class WarmPool<Image = unknown> {
  private readonly ready: PooledSandbox[] = [];
  /** Spare forks started here and not yet claimed (startSpare). */
  private readonly spares = new Set<PooledSandbox>();
  private filling: Promise<void> | undefined;
  /** The folders of the sandboxes being started, so dispose can end them early. */
  private readonly starting = new Set<string>();
  private disposed = false;
  private failure: string | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private refillTimer: NodeJS.Timeout | undefined;
  private lastStatus = '';

  constructor(private readonly deps: WarmPoolDeps<Image>) {}

  /** Ends what a crashed run left in the pool's folder, then starts filling. */
  async start(): Promise<void> {
    await this.reap();
    this.poke();
  }

  /**
   * Hands a waiting sandbox of this size to one task, or undefined (pool empty,
   * or none of that size). Synchronous, so two takes never get the same one.
   */
  take(taskId: string, want: { memoryMb: number; cpus: number }): PooledSandbox | undefined {
    if (this.disposed) return undefined;
    const i = this.ready.findIndex((p) => p.memoryMb === want.memoryMb && p.cpus === want.cpus);
    if (i < 0) return undefined;
    const [taken] = this.ready.splice(i, 1);
    if (!taken) return undefined;
    this.markTaken(taken, taskId);
    this.announce();
    this.refillTimer ??= setTimeout(() => {
      this.refillTimer = undefined;
      this.poke();
    }, this.deps.refillDelayMs ?? 3000);
    this.refillTimer.unref();
    return taken;
  }

  private markTaken(taken: PooledSandbox, taskId: string): void {
    try {
      // The next start leaves a taken folder to its task's own records (its logs stay).
      writeFileSync(path.join(taken.dir, TAKEN_MARKER), JSON.stringify({ taskId }) + '\n', { mode: 0o600 });
    } catch (err) {
      this.deps.log.warn('marking a pooled sandbox as taken failed; a crash now would delete its logs', { taskId, err });
    }
  }

  /** Spare forks waiting now (startSpare). */
  get spareCount(): number {
    return this.spares.size;
  }

  /** Sandboxes waiting now. */
  get size(): number {
    return this.ready.length;
  }

  status(): PoolStatus {
    return poolStatus(this.counts(this.filling !== undefined), this.failure);
  }

  /**
   * Looks again (a take, a sandbox ended, settings changed): drops waiting
   * sandboxes the settings no longer want, and starts filling if it may.
   */
  poke(): void {
    if (this.disposed) return;
    this.trim();
    // Right after a take the refill waits (refillDelayMs); anything else waits for it too.
    if (!this.filling && !this.failure && !this.refillTimer && nextFill(this.counts(false)).fill) {
      this.filling = this.fillLoop().finally(() => {
        this.filling = undefined;
        this.announce();
      });
    }
    this.announce();
  }

  /** Stops filling and ends every pooled QEMU; resolves once they are gone. */
  async dispose(): Promise<void> {
    this.disposed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.refillTimer) clearTimeout(this.refillTimer);
    // A start under way is ended now rather than waited for.
    for (const dir of this.starting) await this.deps.killLeftovers(dir, []).catch((err: unknown) => this.deps.log.warn('ending a pooled sandbox being started failed', { dir, err }));
    await this.filling;
    await Promise.all(this.ready.splice(0).map((p) => this.discard(p)));
    await Promise.all([...this.spares].map((p) => this.discard(p)));
    this.spares.clear();
    this.announce();
  }

  private counts(filling: boolean): PoolCounts {
    const s = this.deps.settings();
    return {
      target: this.disposed ? 0 : s.warmPoolSize,
      ready: this.ready.length,
      filling,
      vmMemoryMb: s.vmMemoryMb,
      runningMb: this.deps.runningMemoryMb() + [...this.spares].reduce((mb, p) => mb + p.memoryMb, 0),
      budgetMb: effectiveBudgetMb(s.warmPoolMemoryBudgetMb, this.deps.totalMemoryBytes),
    };
  }

  private announce(): void {
    const status = this.status();
    const key = JSON.stringify(status);
    if (key === this.lastStatus) return;
    this.lastStatus = key;
    this.deps.onStatus(status);
  }

  /** Waiting sandboxes of another size than the settings now ask for, or more than wanted, are stopped. */
  private trim(): void {
    const s = this.deps.settings();
    // Also those that trust the host's certificates when the setting no longer says so.
    const surplus = this.ready.filter((p) => p.memoryMb !== s.vmMemoryMb || p.cpus !== s.vmCpus || (p.guest?.certificates !== undefined && !s.guestTrustsHostCertificates));
    const keep = this.ready.filter((p) => !surplus.includes(p));
    surplus.push(...keep.splice(Math.max(s.warmPoolSize, 0)));
    if (!surplus.length) return;
    this.ready.splice(0, this.ready.length, ...keep);
    for (const p of surplus) void this.discard(p);
  }

  /** One sandbox after another while the pool is short and the budget allows. */
  private async fillLoop(): Promise<void> {
    while (!this.disposed && !this.failure && nextFill(this.counts(false)).fill) {
      await this.fillOne();
      this.trim();
    }
  }

  private async fillOne(): Promise<void> {
    const s = this.deps.settings();
    try {
      // The image is built by the first task that needs it (with progress shown), not behind the user's back.
      if (this.deps.images.status().state !== 'ready') throw new Error('the base image is not built yet');
      const pooled = await this.startSandbox({ memoryMb: s.vmMemoryMb, cpus: s.vmCpus });
      if (this.disposed) {
        await this.discard(pooled);
        return;
      }
      this.ready.push(pooled);
      void pooled.vm.exited.then(() => this.endedWhileWaiting(pooled));
    } catch (err) {
      // A start cut by dispose (its QEMU killed) is no failure to report or retry.
      if (this.disposed) return;
      this.failed(err);
    }
  }

  /**
   * A sandbox of the pool's kind on a frozen disk and its memory (a spare fork
   * of a running sandbox, tasks/spare-forks.ts): started now, outside the
   * pool's count, handed on with claim() or ended with discardSpare() or with
   * the pool. Its memory counts in the budget while it waits. Rejects, leaving
   * nothing, when it cannot start.
   */
  async startSpare(on: { backingDisk: string; warm?: WarmMemoryPort; memoryMb: number; cpus: number }): Promise<PooledSandbox> {
    if (this.disposed) throw new Error('the pool was disposed');
    const spare = await this.startSandbox(on);
    if (this.disposed) {
      await this.discard(spare);
      throw new Error('the pool was disposed');
    }
    this.spares.add(spare);
    return spare;
  }

  /** Whether the memory budget has room for one more waiting sandbox of this size (a spare asks before it starts). */
  hasRoomFor(memoryMb: number): boolean {
    // What the budget already holds counts the pool's own waiting sandboxes too (pool-budget.ts).
    const c = this.counts(this.filling !== undefined);
    return !this.disposed && c.target > 0 && usedMb(c) + memoryMb <= c.budgetMb;
  }

  /** A spare handed to one task: its folder is the task's from now on (see take()). */
  claim(spare: PooledSandbox, taskId: string): void {
    this.spares.delete(spare);
    this.markTaken(spare, taskId);
  }

  /** Ends a spare no task took. */
  async discardSpare(spare: PooledSandbox): Promise<void> {
    this.spares.delete(spare);
    await this.discard(spare);
    this.poke();
  }

  /** Starts one pooled sandbox in a new folder of the pool's (on a layer when given); rejects, leaving nothing. */
  private async startSandbox(on: { memoryMb: number; cpus: number; backingDisk?: string; warm?: WarmMemoryPort }): Promise<PooledSandbox> {
    const s = this.deps.settings();
    const dir = path.join(this.deps.root, 'p' + randomBytes(6).toString('hex'));
    this.starting.add(dir);
    this.announce();
    let socketDir: string | undefined;
    const cleanup = async () => {
      if (socketDir) await rm(socketDir, { recursive: true, force: true });
    };
    try {
      const image = await this.deps.images.ensure();
      await mkdir(dir, { recursive: true, mode: 0o700 });
      let socketPath = path.join(dir, SOCKET_NAME);
      if (!this.deps.socketPathFits(socketPath)) {
        // Same fallback as the broker's: a private folder when the data folder's path cannot carry a socket.
        socketDir = await mkdtemp(path.join(os.tmpdir(), 'fiab-pool-'));
        socketPath = path.join(socketDir, SOCKET_NAME);
      }
      const guestForwards = this.deps.guestForwards(socketPath);
      if (this.disposed) throw new Error('the pool was disposed');
      const vm = await this.deps.qemu.start({
        sandboxDir: dir,
        image,
        memoryMb: on.memoryMb,
        cpus: on.cpus,
        guestForwards,
        ...(on.backingDisk ? { backingDisk: on.backingDisk } : {}),
        ...(on.backingDisk && on.warm ? { warm: on.warm } : {}),
        ...(this.deps.bootTimeoutMs ? { bootTimeoutMs: this.deps.bootTimeoutMs } : {}),
      });
      let guest: PooledGuest | undefined;
      try {
        if (this.deps.warmGuest) {
          const ssh = await vm.ssh();
          guest = { ssh };
          const env = await this.deps.warmGuest(ssh, { certificates: s.guestTrustsHostCertificates });
          if (s.guestTrustsHostCertificates) guest.certificates = env ?? {};
        }
      } catch (err) {
        guest?.ssh.close();
        await vm.destroy().catch(() => undefined); // its start failed as a whole: the error below says why
        throw err;
      }
      return { dir, socketPath, guestForwards, memoryMb: on.memoryMb, cpus: on.cpus, vm, cleanup, ...(guest ? { guest } : {}) };
    } catch (err) {
      await rm(dir, { recursive: true, force: true }).catch(() => undefined); // best effort: the next start reaps it
      await cleanup().catch(() => undefined); // a temp folder; the OS clears those too
      throw err;
    } finally {
      this.starting.delete(dir);
    }
  }

  /** A waiting sandbox whose QEMU ended by itself is dropped and replaced. */
  private endedWhileWaiting(p: PooledSandbox): void {
    const i = this.ready.indexOf(p);
    if (i < 0) return; // taken, or stopped by the pool itself
    this.ready.splice(i, 1);
    this.deps.log.warn('a pooled sandbox ended while waiting; it is replaced', { dir: p.dir, serial: p.vm.serialTail(20) });
    void this.discard(p);
    this.poke();
  }

  /** After a failed start the pool waits before trying again, saying why in its status. */
  private failed(err: unknown): void {
    const message = err instanceof Error ? err.message : String(err);
    this.failure = message.slice(0, 300);
    this.deps.log.warn('starting a pooled sandbox failed; trying again later', { err });
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.failure = undefined;
      this.poke();
    }, this.deps.retryMs ?? 60_000);
    this.retryTimer.unref();
  }

  /** Ends a pooled sandbox no task took and deletes its folder (nothing in it is anyone's). */
  private async discard(p: PooledSandbox): Promise<void> {
    try {
      p.guest?.ssh.close();
      await p.vm.destroy();
      await rm(p.dir, { recursive: true, force: true });
    } catch (err) {
      this.deps.log.warn('stopping a pooled sandbox failed; the next start reaps it', { dir: p.dir, err });
    } finally {
      await p.cleanup().catch((err: unknown) => this.deps.log.warn('removing a pooled socket folder failed', { err }));
    }
  }

  /**
   * The pool is never kept across runs: a QEMU a crashed run left in any of its
   * folders is killed; folders no task took are deleted, taken ones are left to
   * their task's records (which reap them and keep their logs).
   */
  private async reap(): Promise<void> {
    // No pool folder yet (a first start): nothing to reap.
    const names = await readdir(this.deps.root).catch(() => [] as string[]);
    for (const name of names) {
      const dir = path.join(this.deps.root, name);
      try {
        await this.deps.killLeftovers(dir, []);
      } catch (err) {
        // No process table: a folder whose QEMU may still run is not pulled from under it.
        this.deps.log.warn('looking for a pooled QEMU left behind failed; its folder is kept', { dir, err });
        continue;
      }
      // An entry that cannot be read as a folder holds no taken marker: it goes like any untaken one.
      const taken = (await readdir(dir).catch(() => [] as string[])).includes(TAKEN_MARKER);
      if (!taken) await rm(dir, { recursive: true, force: true });
    }
  }
}
