// A headless app the CLI started in the background ends by itself once nothing
// runs for a while (issue 27): after a hooks session it would otherwise stay up
// with its warm-pool sandbox holding memory and nothing on screen saying so.
// "Something runs" is any task that is not finished or whose sandbox is up (a
// kept sandbox, a quick sandbox, a session's), or a base image being built.
// The pool does not count: it goes with the app.
import type { Task } from '../../common/domain.js';

/** Default time with nothing running before a CLI-started app ends: FACTORY_IDLE_EXIT_SEC, else 10 minutes. */
export function idleExitMs(env: NodeJS.ProcessEnv = process.env): number {
  const sec = Number(env.FACTORY_IDLE_EXIT_SEC);
  return (Number.isFinite(sec) && sec > 0 ? sec : 600) * 1000;
}

const ACTIVE_PHASES = new Set<Task['phase']>(['creating', 'provisioning', 'seeding', 'running', 'pulling-back']);
const UP = new Set<Task['sandbox']['status']>(['booting', 'running', 'stopping']);

/** What keeps the app from ending: tasks that run or hold a sandbox. */
export function runningTasks(tasks: Task[]): Task[] {
  return tasks.filter((t) => ACTIVE_PHASES.has(t.phase) || UP.has(t.sandbox.status));
}

export class IdleExit {
  private idleSince: number | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly opts: {
      afterMs: number;
      /** True while something runs. */
      busy: () => boolean;
      onIdle: () => void;
      now?: () => number;
    },
  ) {}

  /** Checks now and then every `everyMs`. */
  start(everyMs = Math.max(1000, Math.min(10_000, this.opts.afterMs / 6))): void {
    this.check();
    this.timer = setInterval(() => this.check(), everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** How long nothing has run, in ms (0 while something runs). */
  idleForMs(): number {
    return this.idleSince === undefined ? 0 : (this.opts.now ?? Date.now)() - this.idleSince;
  }

  check(): void {
    const now = (this.opts.now ?? Date.now)();
    if (this.opts.busy()) {
      this.idleSince = undefined;
      return;
    }
    this.idleSince ??= now;
    if (now - this.idleSince >= this.opts.afterMs) {
      this.stop();
      this.opts.onIdle();
    }
  }
}
