// Runs the six stages with a coding agent, through the stage runner's
// StageExecutor seam: request shows the task, plan/build/document/review run
// the agent with the stage's prompt, test runs the repo's test command and
// feeds failures back to the agent for a bounded number of repair rounds, and
// review fails on a blocking verdict in REVIEW.md. The agent's output is parsed
// by its adapter (schemas, caps); the board gets its summary, tokens and cost.
import { randomBytes } from 'node:crypto';
import type { Task } from '../../../common/domain.js';
import { runGit } from '../../git/host-git.js';
import { GUEST_AGENT_HOME, GUEST_REPO_DIR, GUEST_TASK_FILE, KILL_AGENT_PROCESSES, asAgent } from '../../guest/guest-shell.js';
import type { PipelineConfig } from '../config.js';
import type { GuestRunResult, StageExecutor, StageOutcome, StageRunContext } from '../stage-executor.js';
import { capText, firstLine } from './json-lines.js';
import { SCRATCH_COMMITTED_NOTE, SCRATCH_KEPT_NOTE, promptOverridePath, stagePrompt, type PromptStage, type PromptVars } from './prompts.js';
import { parseReviewVerdict } from './review-verdict.js';
import { shellWord } from '../../../common/shell-quote.js';
import { renderCommand } from './shell.js';
import { GUEST_ARTIFACTS_DIR } from '../artifacts.js';
import { decideTest, probeRepo } from '../default-stages.js';
import { skippedOutcome } from '../stage-executor.js';
import { summaryLine } from '../log-lines.js';
import { readTestReport, uncountedSummary } from './test-failures.js';
import type { AgentAdapter, AgentEvent, AgentOutcome, AgentTokens } from './types.js';

export interface AgentStageExecutorOptions {
  /** Failed test runs fed back to the agent before the stage fails (default 2). */
  maxRepairRounds?: number;
  maxTurns?: number;
  model?: string;
  /**
   * Plan and review file names (defaults PLAN.md, REVIEW.md): in the artifacts
   * folder, or in the repository when its config sets commitScratchFiles.
   */
  planFile?: string;
  reviewFile?: string;
  /** Where scratch files go when they are not committed (the guest's artifacts folder). */
  artifactsDir?: string;
  /** Guest layout; tests on the host point these elsewhere. */
  repoDir?: string;
  taskFile?: string;
  promptDir?: string;
  /** Wraps a script to run as the agent user over ssh.run (default: runuser -u agent). */
  asAgent?: (script: string) => string;
  /** Sees every parsed agent event (e.g. for a progress line). */
  onEvent?: (task: Task, stage: string, event: AgentEvent) => void;
}

export interface AgentStageExecutorDeps {
  adapter: AgentAdapter;
  /** The placeholder environment the credential broker gives this task's sandbox. */
  guestEnv: (task: Task) => Record<string, string> | Promise<Record<string, string>>;
}

const MAX_FILE_READ = 256 * 1024;
const MAX_PROMPT_OVERRIDE_BYTES = 64 * 1024;
const REPAIR_OUTPUT_BYTES = 8 * 1024;

interface AgentRun {
  run: GuestRunResult;
  outcome: AgentOutcome;
}

export class AgentStageExecutor implements StageExecutor {
  readonly name: string;
  private readonly opts: Required<Omit<AgentStageExecutorOptions, 'maxTurns' | 'model' | 'onEvent'>> &
    Pick<AgentStageExecutorOptions, 'maxTurns' | 'model' | 'onEvent'>;

  constructor(
    private readonly deps: AgentStageExecutorDeps,
    opts: AgentStageExecutorOptions = {},
  ) {
    this.name = deps.adapter.id;
    this.opts = {
      maxRepairRounds: Math.max(0, Math.min(10, opts.maxRepairRounds ?? 2)),
      planFile: opts.planFile ?? 'PLAN.md',
      reviewFile: opts.reviewFile ?? 'REVIEW.md',
      artifactsDir: opts.artifactsDir ?? GUEST_ARTIFACTS_DIR,
      repoDir: opts.repoDir ?? GUEST_REPO_DIR,
      taskFile: opts.taskFile ?? GUEST_TASK_FILE,
      promptDir: opts.promptDir ?? `${GUEST_AGENT_HOME}/.factory-prompts`,
      asAgent: opts.asAgent ?? asAgent,
      maxTurns: opts.maxTurns,
      model: opts.model,
      onEvent: opts.onEvent,
    };
  }

  async runStage(ctx: StageRunContext): Promise<StageOutcome> {
    switch (ctx.stage) {
      case 'request':
        return this.request(ctx);
      case 'test':
        return this.test(ctx);
      case 'review':
        return this.review(ctx);
      case 'plan':
        return this.plan(ctx);
      case 'build':
        return this.build(ctx);
      default:
        return this.agentStage(ctx, ctx.stage, {});
    }
  }

  private async request(ctx: StageRunContext): Promise<StageOutcome> {
    const r = await ctx.runInSandbox(
      [
        `cat ${shellWord(this.opts.taskFile)}`,
        'echo',
        'echo "Base: $FACTORY_BASE_REF ($FACTORY_BASE_COMMIT), branch $FACTORY_BRANCH"',
        `echo "Agent: ${this.deps.adapter.displayName}"`,
      ].join('\n'),
      { display: `cat ${shellWord(this.opts.taskFile)}   # the task, as ${this.deps.adapter.displayName} gets it`, title: 'request', timeoutSeconds: 120 },
    );
    const failed = runFailure(r, 120);
    if (failed) return failed;
    return { status: 'passed', exitCode: r.code, summary: firstLine(ctx.task.title, 200) || 'task written', sessionId: r.sessionId };
  }

  private async plan(ctx: StageRunContext): Promise<StageOutcome> {
    const planFile = await this.freshScratchFile(ctx, this.opts.planFile);
    const out = await this.agentStage(ctx, 'plan', {});
    if (out.status !== 'passed') return out;
    const plan = await this.readRepoFile(ctx, planFile);
    if (plan === null) {
      return { ...out, status: 'failed', summary: `the agent wrote no ${planFile}` };
    }
    // The card shows the plan's first line (markdown heading marks dropped).
    const head = firstLine(plan.replace(/^\s*#+\s*/gm, ''), 200);
    return { ...out, summary: head || out.summary };
  }

  /**
   * The build stage is for changing the repository. An agent whose tools were all
   * refused exits 0 and says it finished; green with an empty diff would hide that,
   * so a build that changed nothing (no commit, no file) fails with the agent's own
   * words: its last reported problem, else its last message.
   */
  private async build(ctx: StageRunContext): Promise<StageOutcome> {
    const before = await this.workTreeState(ctx);
    let problems: string[] = [];
    const out = await this.agentStage(ctx, 'build', {}, (outcome) => (problems = outcome.result.problems ?? []));
    if (out.status !== 'passed' || before === null) return out;
    const after = await this.workTreeState(ctx);
    if (after === null || after !== before) return out;
    const words = problems.length
      ? `; it reported: ${problems[problems.length - 1]}`
      : out.summary && out.summary !== 'done'
        ? `; it said: ${out.summary}`
        : ' and said nothing about why';
    return {
      ...out,
      status: 'failed',
      summary: capText(`the agent changed nothing in the repository${words}`, 240),
      ...(problems.length ? { detail: problems.join('\n') } : {}),
    };
  }

  /**
   * HEAD and the tree of the whole work tree (untracked files too, ignored ones not),
   * written through a copy of the index so the repository's own index is untouched;
   * null when the sandbox cannot say (then nothing is decided from it).
   */
  private async workTreeState(ctx: StageRunContext): Promise<string | null> {
    const script = [
      `cd ${shellWord(this.opts.repoDir)} || exit 1`,
      'idx=$(mktemp) || exit 1',
      'trap \'rm -f "$idx"\' EXIT',
      'git_dir=$(git rev-parse --git-dir) || exit 1',
      '[ -f "$git_dir/index" ] && cp "$git_dir/index" "$idx"',
      'head=$(git rev-parse -q --verify HEAD) || head=none',
      'GIT_INDEX_FILE="$idx" git -c core.hooksPath=/dev/null add -A >/dev/null 2>&1 || exit 1',
      'tree=$(GIT_INDEX_FILE="$idx" git write-tree) || exit 1',
      'echo "state $head $tree"',
    ].join('\n');
    const r = await ctx.ssh.run(this.opts.asAgent(script), { timeoutMs: 120_000, maxBytes: 4096 });
    const m = /^state (\S+) ([0-9a-f]{40,64})$/m.exec(r.stdout);
    return r.code === 0 && m ? `${m[1]} ${m[2]}` : null;
  }

  private async review(ctx: StageRunContext): Promise<StageOutcome> {
    const reviewFile = await this.freshScratchFile(ctx, this.opts.reviewFile);
    const out = await this.agentStage(ctx, 'review', {});
    if (out.status !== 'passed') return out;
    const text = await this.readRepoFile(ctx, reviewFile);
    if (text === null) return { ...out, status: 'failed', summary: `the agent wrote no ${reviewFile}` };
    const verdict = parseReviewVerdict(text);
    if (verdict.verdict === 'approve') return { ...out, summary: `approved: ${out.summary}`.slice(0, 240) };
    if (verdict.verdict === 'block') {
      return { ...out, status: 'failed', summary: `review blocked the change: ${out.summary}`.slice(0, 240), detail: capText(text, 8000) };
    }
    return { ...out, status: 'failed', summary: `${reviewFile}: ${verdict.line}`, detail: capText(text, 8000) };
  }

  private async test(ctx: StageRunContext): Promise<StageOutcome> {
    let command: string | null = ctx.stageConfig.isDefault ? null : ctx.stageConfig.command;
    let reason = 'configured in .factory/pipeline.json';
    if (command === null) {
      const probe = await probeRepo(ctx.ssh, { repoDir: this.opts.repoDir, asAgent: this.opts.asAgent, env: ctx.stageConfig.env });
      const decision = decideTest(probe);
      if (decision.kind === 'skip') return skippedOutcome(decision.reason);
      // The sandbox lacks the runner: no repair round can fix that, so the stage fails with the reason.
      if (decision.kind === 'fail') return { status: 'failed', exitCode: null, summary: decision.reason };
      command = decision.command;
      reason = `detected: ${decision.reason}`;
    }
    const totals = emptyTotals();
    for (let round = 0; ; round++) {
      // The host's header line shows the command and why it was chosen.
      const r = await ctx.runInSandbox(command, {
        display: `${command}   # ${reason}`,
        title: round === 0 ? 'test' : `test (after repair ${round})`,
        env: ctx.stageConfig.env,
        timeoutSeconds: ctx.stageConfig.timeoutSeconds,
      });
      const failed = runFailure(r, ctx.stageConfig.timeoutSeconds);
      if (failed && (r.cancelled || r.lost)) return withTotals(failed, totals);
      const tail = r.tail(64 * 1024);
      // Counts and failed names describe the run; the exit status alone decides it.
      const countText = readTestReport(tail).text;
      if (!failed && r.code === 0) {
        const summary = [countText || uncountedSummary(`${command} passed`), round > 0 ? `after ${round} repair round${round > 1 ? 's' : ''}` : ''].filter(Boolean).join(' ');
        return withTotals({ status: 'passed', exitCode: 0, summary, sessionId: r.sessionId }, totals);
      }
      const why = failed?.summary ?? `exit ${r.code ?? 'signal'}${countText ? ` (${countText})` : `: ${uncountedSummary(summaryLine(tail))}`}`;
      if (round >= this.opts.maxRepairRounds) {
        return withTotals(
          {
            status: 'failed',
            exitCode: r.code,
            summary: `tests failed: ${why}${round > 0 ? ` after ${round} repair round${round > 1 ? 's' : ''}` : ''}`.slice(0, 240),
            sessionId: r.sessionId,
            detail: tail.slice(-4096),
          },
          totals,
        );
      }
      const repair = await this.agentStage(ctx, 'test-repair', {
        testCommand: command,
        testOutput: tail.slice(-REPAIR_OUTPUT_BYTES),
        round: String(round + 1),
      });
      addTotals(totals, repair);
      if (repair.status !== 'passed') return withTotals({ ...repair, summary: `repair round ${round + 1}: ${repair.summary}`.slice(0, 240) }, totals);
    }
  }

  /** One agent run with the stage's prompt; its parsed result decides the outcome. */
  private async agentStage(
    ctx: StageRunContext,
    stage: PromptStage,
    extra: Partial<PromptVars>,
    onOutcome?: (outcome: AgentOutcome) => void,
  ): Promise<StageOutcome> {
    const env = await this.deps.guestEnv(ctx.task);
    const override = ctx.stageConfig.prompt ?? (await this.repoPromptOverride(ctx, stage));
    const vars: PromptVars = {
      task: ctx.task.title,
      taskId: ctx.task.id,
      branch: ctx.task.branch,
      baseRef: ctx.task.baseRef,
      baseCommit: ctx.task.baseCommit,
      repoDir: this.opts.repoDir,
      taskFile: this.opts.taskFile,
      planFile: this.scratchPath(ctx, this.opts.planFile),
      reviewFile: this.scratchPath(ctx, this.opts.reviewFile),
      testCommand: 'the repository tests',
      testOutput: '',
      round: '',
      scratchNote: commitsScratchFiles(ctx.config) ? SCRATCH_COMMITTED_NOTE : SCRATCH_KEPT_NOTE,
      ...extra,
    };
    const prompt = stagePrompt(stage, vars, override).text;
    const { run, outcome } = await this.runAgent(ctx, stage, prompt, env);
    onOutcome?.(outcome);
    return agentOutcome(run, outcome, ctx.stageConfig.timeoutSeconds);
  }

  private async runAgent(ctx: StageRunContext, stage: string, prompt: string, env: Record<string, string>): Promise<AgentRun> {
    const adapter = this.deps.adapter;
    const promptFile = `${this.opts.promptDir}/${ctx.task.id}-${stage}-${randomBytes(4).toString('hex')}.md`;
    const spec = adapter.command({ promptFile, cwd: this.opts.repoDir, env, maxTurns: this.opts.maxTurns, model: this.opts.model });
    // The prompt travels inside the uploaded script as a quoted here-document
    // (no expansion), is written to a file, and reaches the agent on stdin.
    const delimiter = `FACTORY_PROMPT_${randomBytes(16).toString('hex')}`;
    const body = prompt.endsWith('\n') ? prompt : `${prompt}\n`;
    const script = [
      `mkdir -p ${shellWord(this.opts.promptDir)}`,
      `cat > ${shellWord(promptFile)} <<'${delimiter}'`,
      `${body}${delimiter}`,
      renderCommand(spec),
      '',
    ].join('\n');
    const parser = adapter.createParser();
    let killed = false;
    // The header shows the agent's command line, not the prompt inside the script.
    const commandLine = [...spec.argv.map(shellWord), ...(spec.stdinFile !== undefined ? ['<', shellWord(spec.stdinFile)] : [])].join(' ');
    const run = await ctx.runInSandbox(script, {
      display: `${commandLine}   # ${adapter.displayName}`,
      title: stage,
      timeoutSeconds: ctx.stageConfig.timeoutSeconds,
      onOutput: (chunk) => {
        for (const event of parser.push(chunk)) this.opts.onEvent?.(ctx.task, stage, event);
        if (parser.overflowed && !killed) {
          // An endless stream: stop the agent rather than read forever.
          killed = true;
          // If this kill fails the stage's time-out still ends the agent; the run is failed as overflowed either way.
          void ctx.ssh.run(KILL_AGENT_PROCESSES, { timeoutMs: 15_000 }).catch(() => undefined);
        }
      },
    });
    const { events, outcome } = parser.end();
    for (const event of events) this.opts.onEvent?.(ctx.task, stage, event);
    return { run, outcome };
  }

  /**
   * `.factory/prompts/<stage>.md` at the base commit, or null. Read from the
   * host repository (the commit the sandbox was seeded from, like
   * pipeline.json): no guest round trip before every agent run. The guest's
   * clone answers when the host repository no longer has the commit.
   */
  private async repoPromptOverride(ctx: StageRunContext, stage: PromptStage): Promise<string | null> {
    const spec = `${ctx.task.baseCommit}:${promptOverridePath(stage)}`;
    if (!/^[0-9a-f]{7,64}$/.test(ctx.task.baseCommit)) return null;
    const fromHost = await hostPromptOverride(ctx.task.repoPath, ctx.task.baseCommit, spec);
    if (fromHost !== undefined) return fromHost;
    const r = await ctx.ssh.run(
      this.opts.asAgent(`cd ${shellWord(this.opts.repoDir)} && git cat-file -e ${shellWord(spec)} 2>/dev/null && git show ${shellWord(spec)} | head -c 65536`),
      { maxBytes: 128 * 1024, timeoutMs: 30_000 },
    );
    return r.code === 0 && r.stdout.trim() !== '' ? r.stdout : null;
  }

  /** Where a scratch file goes: the artifacts folder, or the repository when its config commits scratch files. */
  private scratchPath(ctx: StageRunContext, name: string): string {
    return commitsScratchFiles(ctx.config) || name.includes('/') ? name : `${this.opts.artifactsDir}/${name}`;
  }

  /**
   * The scratch file's path, with what an earlier attempt left there removed,
   * so a verdict or plan is never read from a run that did not write it.
   * A file in the repository is left alone (it may be committed there).
   */
  private async freshScratchFile(ctx: StageRunContext, name: string): Promise<string> {
    const file = this.scratchPath(ctx, name);
    if (file !== name) await ctx.ssh.run(this.opts.asAgent(`rm -f -- ${shellWord(file)}`), { timeoutMs: 30_000 });
    return file;
  }

  /** A file the agent wrote (in the repository, or an absolute path), capped; null when absent. Symlinks are not followed. */
  private async readRepoFile(ctx: StageRunContext, relPath: string): Promise<string | null> {
    const r = await ctx.ssh.run(
      this.opts.asAgent(
        `cd ${shellWord(this.opts.repoDir)} && f=${shellWord(relPath)} && [ -f "$f" ] && [ ! -L "$f" ] && head -c ${MAX_FILE_READ} -- "$f"`,
      ),
      { maxBytes: MAX_FILE_READ + 1024, timeoutMs: 30_000 },
    );
    return r.code === 0 ? r.stdout : null;
  }
}

/** The repository's config asks for the plan and review files in the branch (pipeline.json `commitScratchFiles`). */
function commitsScratchFiles(config: PipelineConfig): boolean {
  return config.commitScratchFiles === true;
}

/** The override from the host repository: text, null when absent, undefined when the repository cannot answer. */
async function hostPromptOverride(repoPath: string, commit: string, spec: string): Promise<string | null | undefined> {
  try {
    const has = await runGit(['cat-file', '-e', `${commit}^{commit}`], { cwd: repoPath, timeoutMs: 15_000 });
    if (has.code !== 0) return undefined;
    const type = await runGit(['cat-file', '-t', spec], { cwd: repoPath, timeoutMs: 15_000 });
    if (type.code !== 0 || type.stdout.trim() !== 'blob') return null;
    const blob = await runGit(['cat-file', 'blob', spec], { cwd: repoPath, timeoutMs: 15_000, maxStdoutBytes: MAX_PROMPT_OVERRIDE_BYTES });
    if (blob.code !== 0 && !blob.truncated) return undefined;
    return blob.stdout.trim() !== '' ? blob.stdout : null;
  } catch {
    // The repository cannot answer (moved, git failed): the caller then uses the guest's copy of the prompt.
    return undefined;
  }
}

function runFailure(r: GuestRunResult, timeoutSeconds: number | undefined): StageOutcome | null {
  if (r.cancelled) return { status: 'cancelled', exitCode: r.code, summary: 'cancelled', sessionId: r.sessionId };
  if (r.timedOut) {
    return { status: 'failed', exitCode: r.code, summary: `timed out after ${timeoutSeconds ?? '?'} s`, sessionId: r.sessionId, detail: r.tail(4096) };
  }
  if (r.lost) return { status: 'failed', exitCode: null, summary: 'the connection to the sandbox was lost', sessionId: r.sessionId, detail: r.tail(4096) };
  return null;
}

/** The stage outcome of one agent run: the process status and the parsed result must both be good. */
export function agentOutcome(run: GuestRunResult, outcome: AgentOutcome, timeoutSeconds?: number): StageOutcome {
  const res = outcome.result;
  const usage = { ...(res.tokens ? { tokens: res.tokens } : {}), ...(res.costUsd !== undefined ? { costUsd: res.costUsd } : {}) };
  const failed = runFailure(run, timeoutSeconds);
  if (failed) return { ...failed, ...usage };
  if (!res.ok) {
    return {
      status: 'failed',
      exitCode: run.code,
      summary: capText(res.error ?? 'the agent reported a failure', 240),
      sessionId: run.sessionId,
      detail: run.tail(4096),
      ...usage,
    };
  }
  if (run.code !== 0) {
    const last = summaryLine(run.tail(4096));
    return { status: 'failed', exitCode: run.code, summary: `agent exited with status ${run.code ?? 'signal'}${last ? `: ${last}` : ''}`.slice(0, 240), sessionId: run.sessionId, detail: run.tail(4096), ...usage };
  }
  const stats = outcome.stats;
  const note = stats.malformed || stats.oversize ? ` [${stats.malformed + stats.oversize} unreadable output lines skipped]` : '';
  return { status: 'passed', exitCode: 0, summary: capText(`${firstLine(res.summary, 200) || 'done'}${note}`, 240), sessionId: run.sessionId, ...usage };
}

interface Totals {
  tokens: AgentTokens;
  costUsd: number;
  any: boolean;
}

function emptyTotals(): Totals {
  return { tokens: { input: 0, output: 0 }, costUsd: 0, any: false };
}

function addTotals(t: Totals, o: StageOutcome): void {
  if (o.tokens) {
    t.tokens.input += o.tokens.input;
    t.tokens.output += o.tokens.output;
    t.any = true;
  }
  if (o.costUsd !== undefined) {
    t.costUsd += o.costUsd;
    t.any = true;
  }
}

function withTotals(o: StageOutcome, t: Totals): StageOutcome {
  if (!t.any) return o;
  return { ...o, tokens: { ...t.tokens }, costUsd: Math.round(t.costUsd * 1e6) / 1e6 };
}
