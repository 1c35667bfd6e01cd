// How long a sandbox outlives the decision on its task. After Approve or Reject
// it is destroyed at once, or kept for inspection until a deadline (setting
// keepSandboxAfterDecisionMinutes) saved on the task, so the card can say until
// when and a restart knows it. Destroying goes through the task service's own
// destroy: the same teardown, with the leak check that runs before it.
import type { Task } from '../../common/domain.js';
import type { Logger } from '../log/logger.js';
import { isLive } from './task-life.js';

export interface SandboxLifetimeDeps {
  /** Minutes to keep a sandbox after a decision (0: destroy at once). */
  keepMinutes: () => number;
  /** The task service's destroy (teardown with its leak check; a lost sandbox's leftovers reaped). */
  destroy: (taskId: string) => Promise<unknown>;
  /** Saves the deadline on the task's sandbox (shown on the card). */
  setKeptUntil: (taskId: string, keptUntil: string) => Promise<void>;
  log: Pick<Logger, 'warn' | 'info'>;
  now?: () => number;
}

const DECIDED: readonly Task['phase'][] = ['approved', 'rejected'];

export class SandboxLifetime {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly inFlight = new Set<Promise<void>>();
  private disposed = false;

  constructor(private readonly deps: SandboxLifetimeDeps) {}

  /** The task was just approved or rejected: destroy its sandbox now, or keep it until the deadline. */
  async afterDecision(task: Task): Promise<void> {
    if (!hasSandbox(task)) return;
    const minutes = this.deps.keepMinutes();
    // A lost sandbox (QEMU died) has nothing to inspect: its leftovers go now.
    if (minutes <= 0 || !isLive(task.sandbox.status)) {
      this.destroyNow(task.id, 'decided');
      return;
    }
    const until = new Date(this.now() + minutes * 60_000).toISOString();
    await this.deps.setKeptUntil(task.id, until);
    this.schedule(task.id, until);
  }

  /**
   * At start: decided tasks whose sandbox was kept, or left lost by the restart.
   * A deadline still ahead keeps a sandbox that still runs; anything else is
   * destroyed now (a restart ends every VM, so what is left are leftovers).
   */
  resume(tasks: readonly Task[]): void {
    for (const t of tasks) {
      if (!DECIDED.includes(t.phase) || !hasSandbox(t)) continue;
      const until = t.sandbox.keptUntil;
      if (until && isLive(t.sandbox.status) && Date.parse(until) > this.now()) this.schedule(t.id, until);
      else if (until || t.sandbox.status === 'lost') this.destroyNow(t.id, until ? 'deadline passed or sandbox gone after a restart' : 'lost after a restart');
    }
  }

  /** The sandbox went another way (the user destroyed it, the task was removed): no timer for it. */
  forget(taskId: string): void {
    const t = this.timers.get(taskId);
    if (t) clearTimeout(t);
    this.timers.delete(taskId);
  }

  /** Timers stop; destroys already under way finish. The app's shutdown tears down what is still kept. */
  async dispose(): Promise<void> {
    this.disposed = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    await Promise.all([...this.inFlight]);
  }

  /** Deadlines waiting, by task id (for the tests and the log). */
  pending(): string[] {
    return [...this.timers.keys()];
  }

  private schedule(taskId: string, until: string): void {
    this.forget(taskId);
    const ms = Math.max(0, Date.parse(until) - this.now());
    const timer = setTimeout(() => {
      this.timers.delete(taskId);
      this.destroyNow(taskId, `kept until ${until}`);
    }, ms);
    // A kept sandbox never keeps the process alive on its own.
    timer.unref?.();
    this.timers.set(taskId, timer);
  }

  private destroyNow(taskId: string, why: string): void {
    if (this.disposed) return;
    this.forget(taskId);
    const work = this.deps
      .destroy(taskId)
      .then(() => this.deps.log.info('sandbox destroyed after the decision', { taskId, why }))
      // The task may have been removed meanwhile; the log keeps why a sandbox was not destroyed.
      .catch((err: unknown) => this.deps.log.warn('destroying the sandbox after the decision failed', { taskId, why, err }))
      .finally(() => this.inFlight.delete(work));
    this.inFlight.add(work);
  }

  private now(): number {
    return this.deps.now?.() ?? Date.now();
  }
}

function hasSandbox(t: Task): boolean {
  return t.sandbox.status !== 'none' && t.sandbox.status !== 'destroyed';
}
