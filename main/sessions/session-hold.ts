// The stage executor of a Claude Code session's task ('claude-session'). The
// session works in the sandbox itself (factory exec), so the pipeline only
// prepares it: provision, seed, setup, then the request stage holds until the
// session ends (SessionEnd releases it) or the task is cancelled or destroyed.
// The later stages are skipped and the usual pull-back brings the session's
// commits into review, so `factory diff` and the app's review show them.
import type { StageExecutor, StageOutcome, StageRunContext } from '../pipeline/stage-executor.js';

export const SESSION_AGENT = 'claude-session';

export class SessionHoldExecutor implements StageExecutor {
  readonly name = SESSION_AGENT;
  private holds = new Map<string, () => void>();

  /** True while the task's sandbox is ready and held for its session. */
  holding(taskId: string): boolean {
    return this.holds.has(taskId);
  }

  /** Lets the held stage end: the pipeline goes on to pull-back and review. */
  release(taskId: string): boolean {
    const done = this.holds.get(taskId);
    done?.();
    return !!done;
  }

  async runStage(ctx: StageRunContext): Promise<StageOutcome> {
    if (ctx.stage !== 'request') return { status: 'skipped', exitCode: null, summary: 'a Claude Code session did the work in this sandbox' };
    const id = ctx.task.id;
    const ended = await new Promise<'released' | 'aborted'>((resolve) => {
      if (ctx.signal.aborted) return resolve('aborted');
      const onAbort = () => finish('aborted');
      const finish = (how: 'released' | 'aborted') => {
        this.holds.delete(id);
        ctx.signal.removeEventListener('abort', onAbort);
        resolve(how);
      };
      ctx.signal.addEventListener('abort', onAbort);
      this.holds.set(id, () => finish('released'));
    });
    if (ended === 'aborted') return { status: 'cancelled', exitCode: null, summary: 'the Claude Code session was stopped' };
    return { status: 'passed', exitCode: 0, summary: 'the Claude Code session ended' };
  }
}
