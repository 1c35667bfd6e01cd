// The seam between the pipeline and whatever does the work of a stage. The
// command executor runs the stage's command from .factory/pipeline.json; agent
// adapters (Claude Code, Codex, ...) implement the same interface and are picked
// per task by name. The runner owns ordering, statuses, timing, cancellation and
// the terminal sessions; an executor only decides what to run and how to read it.
import type { StageName, StageResult, Task } from '../../common/domain.js';
import { lastLine } from '../guest/guest-shell.js';
import type { GuestSsh } from '../guest/guest-ssh.js';
import type { PipelineConfig, StageConfig } from './config.js';

export type { GuestSsh };

export interface GuestRunOptions {
  /** The command line the terminal's first line shows (the script by default); never the prompt or a secret. */
  display?: string;
  /** Title of the terminal session (the stage name by default). */
  title?: string;
  /** Extra environment on top of the task's FACTORY_* variables and the config's env. */
  env?: Record<string, string>;
  timeoutSeconds?: number;
  /** Raw output as it arrives (e.g. an adapter parsing stream-json); the terminal gets it too. */
  onOutput?: (chunk: Buffer) => void;
}

export interface GuestRunResult {
  code: number | null;
  sessionId: string;
  timedOut: boolean;
  cancelled: boolean;
  /** The SSH link went away under the process. */
  lost: boolean;
  durationMs: number;
  /** The last output as plain text. */
  tail(maxBytes: number): string;
}

export interface StageRunContext {
  task: Task;
  stage: StageName;
  config: PipelineConfig;
  stageConfig: StageConfig;
  signal: AbortSignal;
  ssh: GuestSsh;
  /**
   * Runs a bash script in /work/repo as the agent user, with a pty, as a
   * persisted terminal session the UI shows live. FACTORY_TASK, FACTORY_TASK_ID,
   * FACTORY_TASK_FILE, FACTORY_STAGE, FACTORY_BRANCH, FACTORY_BASE_COMMIT and the
   * config's env are set.
   */
  runInSandbox(script: string, opts?: GuestRunOptions): Promise<GuestRunResult>;
}

export interface StageOutcome {
  status: 'passed' | 'failed' | 'cancelled';
  exitCode: number | null;
  /** One line for the board card. */
  summary: string;
  sessionId?: string;
  /** Longer text for the task's error when the stage failed (e.g. the output tail). */
  detail?: string;
  tokens?: StageResult['tokens'];
  costUsd?: number;
}

export interface StageExecutor {
  /** The agent name tasks choose it by ('command', 'claude-code', ...). */
  readonly name: string;
  runStage(ctx: StageRunContext): Promise<StageOutcome>;
}

/** Runs the stage's configured (or default) command. */
export class CommandStageExecutor implements StageExecutor {
  readonly name = 'command';

  async runStage(ctx: StageRunContext): Promise<StageOutcome> {
    const r = await ctx.runInSandbox(ctx.stageConfig.command, {
      display: ctx.stageConfig.command,
      title: ctx.stage,
      env: ctx.stageConfig.env,
      timeoutSeconds: ctx.stageConfig.timeoutSeconds,
    });
    return outcomeFromRun(r, ctx.stageConfig.timeoutSeconds);
  }
}

/** The usual reading of a guest run: exit 0 passes, anything else fails with the output tail. */
export function outcomeFromRun(r: GuestRunResult, timeoutSeconds: number | undefined): StageOutcome {
  const tail = r.tail(4096);
  const last = lastLine(tail);
  if (r.cancelled) return { status: 'cancelled', exitCode: r.code, summary: 'cancelled', sessionId: r.sessionId };
  if (r.timedOut) {
    return { status: 'failed', exitCode: r.code, summary: `timed out after ${timeoutSeconds ?? '?'} s`, sessionId: r.sessionId, detail: tail };
  }
  if (r.lost) return { status: 'failed', exitCode: null, summary: 'the connection to the sandbox was lost', sessionId: r.sessionId, detail: tail };
  if (r.code === 0) return { status: 'passed', exitCode: 0, summary: last || 'ok', sessionId: r.sessionId };
  // The exit status is its own field (the card shows it once); the summary is the reason.
  return {
    status: 'failed',
    exitCode: r.code,
    summary: (last || (r.code === null ? 'ended by a signal, with no output' : 'no output')).slice(0, 240),
    sessionId: r.sessionId,
    detail: tail,
  };
}
