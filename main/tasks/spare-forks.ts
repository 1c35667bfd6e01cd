// Spare forks (issue 27): a hooks session keeps one fork of its sandbox booted
// ahead, so a subagent's sandbox is ready in about a second instead of the
// fork's five (freeze, restore, re-key). A spare is only ever handed out while
// it is exactly the session's state: it is made when the session's sandbox has
// been idle a while (nothing of the app's using it: no routed command, exec,
// shell or carry), and any use of that sandbox after the fork makes it stale.
// At the take a stale spare is ended and the subagent gets a fork of the
// sandbox as it is then (sandbox-fork.ts), as before. A spare is a warm-pool
// sandbox on the fork's disk and memory: it waits with no proxy behind its
// forward, counts in the pool's memory budget, is made only while the pool is
// on, and goes with the pool (and is reaped after a crash) like any pooled one.
// Each spare freezes the session's disk once more (one more file in its
// chain), so a session makes at most MAX_SPARES_PER_SESSION.
import type { Logger } from '../log/logger.js';
import type { PooledSandbox } from '../pool/warm-pool.js';
import type { LiveSandbox } from '../sandbox/live-sandboxes.js';
import type { SandboxSshPort, WarmMemoryPort } from '../sandbox/sandbox-ports.js';
import type { ForkPoint } from './sandbox-fork.js';

export const MAX_SPARES_PER_SESSION = 12;

/** What spare forks need of the warm pool. */
export interface SparePoolPort {
  hasRoomFor(memoryMb: number): boolean;
  startSpare(on: { backingDisk: string; warm?: WarmMemoryPort; memoryMb: number; cpus: number }): Promise<PooledSandbox>;
  claim(spare: PooledSandbox, taskId: string): void;
  discardSpare(spare: PooledSandbox): Promise<void>;
}

export interface SpareForksDeps {
  pool: SparePoolPort;
  /** The session's running local sandbox, or undefined when it has none (then no spare is made). */
  parent(taskId: string): LiveSandbox | undefined;
  /** Freezes the parent's disk and memory (sandbox-fork.ts). */
  forkPoint(parent: LiveSandbox): Promise<ForkPoint>;
  cpus(): number;
  log: Logger;
  /** How long the session's sandbox must have been unused before a spare is made (default 3 s). */
  idleMs?: number;
}

/** A spare handed to a subagent: its VM, and the session's disk it was forked on. */
export interface TakenSpare {
  pooled: PooledSandbox;
  backingDisk: string;
  memoryMb: number;
}

interface Spare {
  pooled: PooledSandbox;
  backingDisk: string;
  memoryMb: number;
  /** The session's generation it was forked at. */
  generation: number;
}

interface SessionSpares {
  /** Bumped by every use of the session's sandbox through the app. */
  generation: number;
  /** Uses under way (open channels, commands running). */
  active: number;
  spare?: Spare;
  /** A spare being made, and the generation it is of. */
  making?: { generation: number; done: Promise<void> };
  made: number;
  timer?: NodeJS.Timeout;
}

export class SpareForks {
  private readonly sessions = new Map<string, SessionSpares>();
  private disposed = false;

  constructor(private readonly deps: SpareForksDeps) {}

  /** Keeps a spare fork of this sandbox from now until drop() (its session's sandbox is ready). */
  keep(taskId: string): void {
    if (this.disposed || this.sessions.has(taskId)) return;
    this.sessions.set(taskId, { generation: 0, active: 0, made: 0 });
    this.schedule(taskId);
  }

  /** Whether this sandbox keeps a spare (for tests and the board). */
  keeps(taskId: string): boolean {
    return this.sessions.has(taskId);
  }

  /**
   * The app's way into a sandbox that keeps a spare: every use makes the spare
   * stale, and a new one is made once the sandbox has been idle again.
   */
  track(taskId: string, ssh: SandboxSshPort): SandboxSshPort {
    const s = this.sessions.get(taskId);
    if (!s) return ssh;
    const begin = () => {
      s.generation++;
      s.active++;
      if (s.timer) clearTimeout(s.timer);
      s.timer = undefined;
    };
    const end = () => {
      s.active = Math.max(0, s.active - 1);
      if (s.active === 0) this.schedule(taskId);
    };
    const settle = <T>(p: Promise<T>): Promise<T> => {
      begin();
      return p.finally(end);
    };
    const channel = <C extends { once(event: 'close', l: () => void): unknown }>(p: Promise<C>): Promise<C> => {
      begin();
      return p.then(
        (ch) => {
          ch.once('close', end);
          return ch;
        },
        (err: unknown) => {
          end();
          throw err;
        },
      );
    };
    return {
      exec: (command, opts) => channel(ssh.exec(command, opts)),
      shell: (opts) => channel(ssh.shell(opts)),
      run: (command, opts) => settle(ssh.run(command, opts)),
      putFile: (local, remote) => settle(ssh.putFile(local, remote)),
      getFile: (remote, local, opts) => settle(ssh.getFile(remote, local, opts)),
      close: () => ssh.close(),
    };
  }

  /**
   * The spare of this sandbox for one task when it is still exactly the
   * sandbox's state (a spare being made of the current state is waited for);
   * undefined otherwise, a stale one ended.
   */
  async take(parentId: string, taskId: string): Promise<TakenSpare | undefined> {
    const s = this.sessions.get(parentId);
    if (!s) return undefined;
    if (s.making && s.making.generation === s.generation && s.active === 0) await s.making.done;
    const spare = s.spare;
    if (!spare) return undefined;
    s.spare = undefined;
    if (spare.generation !== s.generation || s.active > 0) {
      this.deps.log.info('the spare fork was older than the session’s sandbox: the subagent gets a fork of it now', { parentTaskId: parentId, taskId });
      // Not waited for: the subagent's fork need not wait for the stale one's QEMU to quit.
      void this.deps.pool.discardSpare(spare.pooled).catch((err: unknown) => this.deps.log.warn('ending a stale spare fork failed', { parentTaskId: parentId, err }));
      return undefined;
    }
    this.deps.pool.claim(spare.pooled, taskId);
    // The next subagent gets a spare too.
    this.schedule(parentId);
    return { pooled: spare.pooled, backingDisk: spare.backingDisk, memoryMb: spare.memoryMb };
  }

  /** The sandbox is ending: its spare goes, none is made any more. */
  async drop(taskId: string): Promise<void> {
    const s = this.sessions.get(taskId);
    if (!s) return;
    this.sessions.delete(taskId);
    if (s.timer) clearTimeout(s.timer);
    await s.making?.done;
    // A spare finished after the delete ended itself (make() sees the session gone).
    if (s.spare) await this.deps.pool.discardSpare(s.spare.pooled);
    s.spare = undefined;
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    await Promise.all([...this.sessions.keys()].map((id) => this.drop(id)));
  }

  private schedule(taskId: string): void {
    const s = this.sessions.get(taskId);
    if (!s || this.disposed) return;
    if (s.timer) clearTimeout(s.timer);
    s.timer = setTimeout(() => {
      s.timer = undefined;
      void this.make(taskId);
    }, this.deps.idleMs ?? 3000);
    s.timer.unref();
  }

  /** Makes a spare of the sandbox's current state when it has none of it, the pool is on and has room. */
  private async make(taskId: string): Promise<void> {
    const s = this.sessions.get(taskId);
    if (!s || this.disposed || s.making || s.active > 0) return;
    if (s.spare?.generation === s.generation) return;
    if (s.made >= MAX_SPARES_PER_SESSION) return;
    const parent = this.deps.parent(taskId);
    const memoryMb = parent?.memoryMb;
    if (!parent || !memoryMb || !this.deps.pool.hasRoomFor(memoryMb)) return;
    const generation = s.generation;
    let finish = () => {};
    s.making = { generation, done: new Promise<void>((r) => (finish = r)) };
    const stale = s.spare;
    s.spare = undefined;
    let point: ForkPoint | undefined;
    try {
      if (stale) await this.deps.pool.discardSpare(stale.pooled);
      s.made++;
      point = await this.deps.forkPoint(parent);
      const pooled = await this.deps.pool.startSpare({
        backingDisk: point.backingDisk,
        ...(point.warm ? { warm: point.warm } : {}),
        memoryMb: point.memoryMb ?? memoryMb,
        cpus: this.deps.cpus(),
      });
      if (this.sessions.get(taskId) !== s || this.disposed) {
        await this.deps.pool.discardSpare(pooled);
        return;
      }
      s.spare = { pooled, backingDisk: point.backingDisk, memoryMb: point.memoryMb ?? memoryMb, generation };
      this.deps.log.info('a spare fork of the session’s sandbox is ready for its next subagent', { taskId, generation, current: s.generation });
    } catch (err) {
      this.deps.log.warn('making a spare fork of the session’s sandbox failed; a subagent gets a fork when it starts', { taskId, err });
    } finally {
      await point?.dropMemory().catch((err: unknown) => this.deps.log.warn('removing a spare fork’s saved memory failed', { taskId, err }));
      s.making = undefined;
      finish();
    }
    // Used while the spare was made: make one of the state after that use, once idle again.
    if (this.sessions.get(taskId) === s && s.spare && s.spare.generation !== s.generation && s.active === 0) this.schedule(taskId);
  }
}
