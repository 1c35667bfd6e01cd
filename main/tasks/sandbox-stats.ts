// Samples every running sandbox's QEMU process every 2 s and keeps the last few
// minutes per task (a ring buffer), for the UI's sparklines and the header's total.
// Sampling stops when the sandbox stops or its process is gone; what was kept stays
// until the task is removed, so a finished task still shows how it ran.
import { SANDBOX_SAMPLE_INTERVAL_MS, SANDBOX_SAMPLES_KEPT, type SandboxSample, type SandboxStats } from '../../common/sandbox-stats.js';
import { clockTicks, cpuPercent, readGuestMemory, readProcessCounters, type ProcessCounters } from '../vm/vm-stats.js';

export interface SandboxStatsOptions {
  /** The pid of the task's QEMU while its sandbox runs. */
  pidOf: (taskId: string) => number | undefined;
  /** Called with each new sample, and the guest's RAM size when QEMU's command line says. */
  onSample: (taskId: string, sample: SandboxSample, guestMemoryBytes?: number) => void;
  intervalMs?: number;
  capacity?: number;
  /** Replaceable for tests of the bookkeeping; the real readers of /proc by default. */
  read?: (pid: number) => Promise<ProcessCounters | undefined>;
  guestMemory?: (pid: number) => Promise<number | undefined>;
  ticksPerSecond?: () => Promise<number>;
  warn?: (message: string, meta?: Record<string, unknown>) => void;
}

interface Watched {
  live: boolean;
  pid?: number;
  last?: ProcessCounters;
  guestMemoryBytes?: number;
  samples: SandboxSample[];
}

export class SandboxStatsMonitor {
  private readonly byTask = new Map<string, Watched>();
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private readonly intervalMs: number;
  private readonly capacity: number;

  constructor(private readonly opts: SandboxStatsOptions) {
    this.intervalMs = opts.intervalMs ?? SANDBOX_SAMPLE_INTERVAL_MS;
    this.capacity = opts.capacity ?? SANDBOX_SAMPLES_KEPT;
  }

  /** Starts sampling a task's sandbox (again, after a retry gives it a new one). */
  watch(taskId: string): void {
    const w = this.byTask.get(taskId);
    if (w?.live) return;
    // A new sandbox of the same task: its samples continue the old ones, its counters start afresh.
    this.byTask.set(taskId, { live: true, samples: w?.samples ?? [] });
    this.timer ??= setInterval(() => void this.tick(), this.intervalMs);
    this.timer.unref?.();
  }

  /** Stops sampling (the sandbox stopped); the samples stay. */
  stop(taskId: string): void {
    const w = this.byTask.get(taskId);
    if (w) w.live = false;
    this.idle();
  }

  /** Drops a task's samples (the task was removed). */
  forget(taskId: string): void {
    this.byTask.delete(taskId);
    this.idle();
  }

  stats(taskId: string): SandboxStats {
    const w = this.byTask.get(taskId);
    return {
      taskId,
      intervalMs: this.intervalMs,
      live: w?.live ?? false,
      samples: [...(w?.samples ?? [])],
      ...(w?.guestMemoryBytes !== undefined ? { guestMemoryBytes: w.guestMemoryBytes } : {}),
    };
  }

  dispose(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.byTask.clear();
  }

  /** One round over the live sandboxes; a round still reading when the next is due is not doubled. */
  async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      const hz = await (this.opts.ticksPerSecond ?? clockTicks)();
      for (const [taskId, w] of this.byTask) {
        if (w.live) await this.sampleOne(taskId, w, hz);
      }
    } finally {
      this.ticking = false;
    }
  }

  private async sampleOne(taskId: string, w: Watched, hz: number): Promise<void> {
    const pid = this.opts.pidOf(taskId);
    if (pid === undefined) return; // booting: no QEMU yet
    if (pid !== w.pid) {
      w.pid = pid;
      w.last = undefined;
      const size = await (this.opts.guestMemory ?? readGuestMemory)(pid);
      if (size !== undefined) w.guestMemoryBytes = size;
    }
    let now: ProcessCounters | undefined;
    try {
      now = await (this.opts.read ?? readProcessCounters)(pid);
    } catch (err) {
      this.opts.warn?.('a sandbox could not be sampled', { taskId, pid, err: String(err) });
      return;
    }
    // The sandbox stopped (or a retry replaced it) while /proc was read: the view already
    // shows it stopped, and a sample now would be drawn after that.
    if (!this.current(taskId, w)) return;
    // The process is gone, or the pid now belongs to another process: this sandbox is over.
    if (!now || (w.last && w.last.startTicks !== now.startTicks)) {
      w.live = false;
      this.idle();
      return;
    }
    const prev = w.last;
    w.last = now;
    const cpu = prev ? cpuPercent(prev, now, hz) : undefined;
    if (cpu === undefined) return; // the first reading only sets the baseline
    const sample: SandboxSample = { at: now.at, cpuPercent: Math.round(cpu * 10) / 10, pssBytes: now.pssBytes, rssBytes: now.rssBytes };
    w.samples.push(sample);
    if (w.samples.length > this.capacity) w.samples.splice(0, w.samples.length - this.capacity);
    this.opts.onSample(taskId, sample, w.guestMemoryBytes);
  }

  /** Whether `w` is still the task's live sandbox (it may have stopped, or been replaced, during a read). */
  private current(taskId: string, w: Watched): boolean {
    return w.live && this.byTask.get(taskId) === w;
  }

  private idle(): void {
    if (this.timer && ![...this.byTask.values()].some((w) => w.live)) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}
