// The seam between the pipeline and whatever does the work of a stage. The
// command executor runs the stage's command from .factory/pipeline.json; agent
// adapters (Claude Code, Codex, ...) implement the same interface and are picked
// per task by name. The runner owns ordering, statuses, timing, cancellation and
// the terminal sessions; an executor only decides what to run and how to read it.
import type { StageName, StageResult, Task } from '../../common/domain.js';
import type { GuestSsh } from '../guest/guest-ssh.js';
import type { PipelineConfig, StageConfig } from './config.js';
import { NOTHING_TO_DO, decideBuild, decideTest, probeRepo, type ProbeOptions, type StageDecision } from './default-stages.js';
import { explainTestFailure, readTestReport, uncountedSummary } from './agents/test-failures.js';
import { readableTail, summaryLine } from './log-lines.js';

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
  /** 'skipped': the stage found nothing to do; the summary says why. It does not stop the pipeline. */
  status: 'passed' | 'failed' | 'cancelled' | 'skipped';
  exitCode: number | null;
  /** One line for the board card (for a skipped stage, the reason). */
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

/**
 * Runs the stage's configured command. A stage the repository did not
 * configure runs what the sandbox's work tree calls for (build and test are
 * detected), or is skipped with the reason, or fails when the repository needs
 * a tool the sandbox lacks.
 */
export class CommandStageExecutor implements StageExecutor {
  readonly name = 'command';

  /** `probe` points the repository probe elsewhere (tests on the host). */
  constructor(private readonly opts: { probe?: ProbeOptions } = {}) {}

  async runStage(ctx: StageRunContext): Promise<StageOutcome> {
    const { stage, stageConfig } = ctx;
    if (!stageConfig.isDefault || stage === 'request') return this.runCommand(ctx, stageConfig.command, stageConfig.command);
    const nothing = NOTHING_TO_DO[stage];
    if (nothing) return skippedOutcome(nothing);
    const probe = await probeRepo(ctx.ssh, { ...this.opts.probe, env: stageConfig.env });
    const decision: StageDecision = stage === 'test' ? decideTest(probe) : decideBuild(probe);
    if (decision.kind === 'skip') return skippedOutcome(decision.reason);
    if (decision.kind === 'fail') return { status: 'failed', exitCode: null, summary: decision.reason };
    return this.runCommand(ctx, decision.command, `${decision.command}   # detected: ${decision.reason}`);
  }

  private async runCommand(ctx: StageRunContext, command: string, display: string): Promise<StageOutcome> {
    const r = await ctx.runInSandbox(command, {
      display,
      title: ctx.stage,
      env: ctx.stageConfig.env,
      timeoutSeconds: ctx.stageConfig.timeoutSeconds,
    });
    const outcome = outcomeFromRun(r, ctx.stageConfig.timeoutSeconds);
    if (ctx.stage !== 'test' || (outcome.status !== 'passed' && outcome.status !== 'failed') || r.timedOut || r.lost) return outcome;
    // The counts and failed names describe the run; the exit status alone decided it.
    const output = r.tail(64 * 1024);
    const report = readTestReport(output);
    // A failure explains itself: the failing names and the first assertion, not the log's raw end.
    const detail = outcome.status === 'failed' ? { detail: explainTestFailure(output, report) } : {};
    return { ...outcome, summary: report.text || uncountedSummary(outcome.summary), ...detail };
  }
}

/** A stage that found nothing to do: skipped, with the reason as its summary. */
export function skippedOutcome(reason: string): StageOutcome {
  return { status: 'skipped', exitCode: null, summary: reason };
}

/** The usual reading of a guest run: exit 0 passes, anything else fails with the output tail. */
export function outcomeFromRun(r: GuestRunResult, timeoutSeconds: number | undefined): StageOutcome {
  const tail = r.tail(4096);
  const last = summaryLine(tail);
  // What a person reads under the error: the end of the log without progress frames or npm noise.
  const readable = readableTail(tail);
  if (r.cancelled) return { status: 'cancelled', exitCode: r.code, summary: 'cancelled', sessionId: r.sessionId };
  if (r.timedOut) {
    return { status: 'failed', exitCode: r.code, summary: `timed out after ${timeoutSeconds ?? '?'} s`, sessionId: r.sessionId, detail: readable };
  }
  if (r.lost) return { status: 'failed', exitCode: null, summary: 'the connection to the sandbox was lost', sessionId: r.sessionId, detail: readable };
  if (r.code === 0) return { status: 'passed', exitCode: 0, summary: last || 'ok', sessionId: r.sessionId };
  // The exit status is its own field (the card shows it once); the summary is the reason.
  return {
    status: 'failed',
    exitCode: r.code,
    summary: (last || (r.code === null ? 'ended by a signal, with no output' : 'no output')).slice(0, 240),
    sessionId: r.sessionId,
    detail: readable,
  };
}
