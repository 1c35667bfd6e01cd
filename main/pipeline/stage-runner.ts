// Runs the six stages of a task in its sandbox, in order. Each stage's work is
// done by a StageExecutor (the configured command, or an agent adapter); every
// guest process runs as the agent user with a pty in /work/repo and its output
// is a persisted terminal session. A failing stage stops the pipeline (later
// stages become skipped); after the last stage any changes left in the work
// tree are committed on the task branch so the pull-back sees them.
import path from 'node:path';
import type { ClientChannel } from 'ssh2';
import { FactoryError } from '../../common/errors.js';
import { STAGE_NAMES, type ErrorInfo, type StageName, type StageResult, type Task, type TerminalInfo } from '../../common/domain.js';
import { stderrLogger, type Logger } from '../log/logger.js';
import type { RegisterSessionOptions, TerminalSource } from '../terminal/types.js';
import type { PipelineConfig } from './config.js';
import { prepareArtifactsDirScript } from './artifacts.js';
import { attemptTitle, framedSource, stageHeader } from './stage-frame.js';
import {
  GUEST_ENV_FILE,
  GUEST_FACTORY_DIR,
  GUEST_REPO_DIR,
  GUEST_TASK_FILE,
  KILL_AGENT_PROCESSES,
  asAgent,
  asAgentArgv,
  exportLines,
  plainText,
  shellQuote,
} from '../guest/guest-shell.js';
import type { GuestRunOptions, GuestRunResult, GuestSsh, StageExecutor, StageOutcome } from './stage-executor.js';

/** The parts of TerminalService the runner uses. */
export interface StageTerminals {
  register(opts: RegisterSessionOptions): TerminalInfo;
  waitForExit(sessionId: string): Promise<{ code: number | null; lost: boolean }>;
  tail(sessionId: string, maxBytes: number): string;
  close(sessionId: string): void;
}

export interface PipelineRunnerDeps {
  terminals: StageTerminals;
  sourceForChannel: (channel: ClientChannel) => TerminalSource;
  /** Executors by agent name; 'command' must be present. */
  executors: ReadonlyMap<string, StageExecutor>;
  ptySize?: { cols: number; rows: number };
  /** The app log; stderr for warnings when absent. */
  log?: Logger;
}

export interface PipelineRunInput {
  task: Task;
  config: PipelineConfig;
  ssh: GuestSsh;
  signal: AbortSignal;
  /** Environment every guest command gets (e.g. the credential broker's placeholders); the repo config cannot override it. */
  guestEnv?: Record<string, string>;
  /** Called with the full stage list after every change. */
  onStages(stages: StageResult[]): void;
  /** Re-run from this stage (a retry); earlier stages keep their results from `previous`. */
  startAt?: StageName;
  previous?: StageResult[];
  /**
   * Called before each stage starts (e.g. to set the proxy's egress step). An
   * error from it fails that stage with its message.
   */
  beforeStage?: (stage: StageName) => void | Promise<void>;
}

export interface PipelineRunOutcome {
  status: 'passed' | 'failed' | 'cancelled';
  stages: StageResult[];
  failedStage?: StageName;
  error?: ErrorInfo;
  /** The task branch's head in the guest after the final commit (passed runs only). */
  headCommit?: string;
}

const MAX_TASK_TEXT_BYTES = 64 * 1024;

/**
 * Every stage's environment before the repo config's own: no pager, and a
 * commit identity for agents that commit (the agent user has no git config,
 * and git refuses to guess one). The repo's pipeline.json env may override both.
 */
export const NON_INTERACTIVE_ENV: Readonly<Record<string, string>> = {
  PAGER: 'cat',
  GIT_PAGER: 'cat',
  SYSTEMD_PAGER: '',
  LESS: '-FRX',
  GIT_TERMINAL_PROMPT: '0',
  GIT_AUTHOR_NAME: 'Factory agent',
  GIT_AUTHOR_EMAIL: 'agent@factory.invalid',
  GIT_COMMITTER_NAME: 'Factory agent',
  GIT_COMMITTER_EMAIL: 'agent@factory.invalid',
};

export function pendingStages(): StageResult[] {
  return STAGE_NAMES.map((name) => ({ name, status: 'pending' as const }));
}

export class PipelineRunner {
  private readonly pty: { cols: number; rows: number };

  private readonly log: Logger;

  constructor(private readonly deps: PipelineRunnerDeps) {
    this.log = deps.log ?? stderrLogger('pipeline');
    if (!deps.executors.has('command')) throw new Error('the command executor is required');
    this.pty = deps.ptySize ?? { cols: 120, rows: 32 };
  }

  /** Picks the executor: the task's agent, else the repo config's, else 'command'. */
  executorFor(task: Task, config: PipelineConfig): StageExecutor {
    const name = task.agent ?? config.agent ?? 'command';
    const executor = this.deps.executors.get(name);
    if (!executor) {
      throw new FactoryError('UnknownAgent', `no agent named ${JSON.stringify(name)}; available: ${[...this.deps.executors.keys()].join(', ')}`);
    }
    return executor;
  }

  async run(input: PipelineRunInput): Promise<PipelineRunOutcome> {
    const { task, config, ssh, signal } = input;
    const stages = pendingStages();
    const startIndex = input.startAt ? STAGE_NAMES.indexOf(input.startAt) : 0;
    if (startIndex < 0) throw new FactoryError('InvalidInput', `no stage named ${input.startAt}`);
    for (let i = 0; i < startIndex; i++) {
      const prev = input.previous?.find((p) => p.name === stages[i]!.name);
      // A stage skipped for having nothing to do ran; one skipped after a failure never started (the failure comes first).
      if (prev?.status !== 'passed' && prev?.status !== 'skipped') {
        throw new FactoryError('InvalidInput', `cannot start at ${input.startAt}: stage ${stages[i]!.name} has not passed`);
      }
      stages[i] = { ...prev };
    }
    const publish = () => input.onStages(stages.map((s) => ({ ...s })));
    const executor = this.executorFor(task, config);
    await this.prepareGuest(input);
    let runCounter = 0;

    for (let i = startIndex; i < stages.length; i++) {
      const stage = stages[i]!;
      if (signal.aborted) {
        this.skipFrom(stages, i, 'cancelled');
        publish();
        return { status: 'cancelled', stages };
      }
      const started = Date.now();
      // A retry is the stage's next attempt; a retry plan keeps the count on the pending stage.
      stage.attempt = (input.previous?.find((p) => p.name === stage.name)?.attempt ?? 0) + 1;
      stage.status = 'running';
      stage.startedAt = new Date(started).toISOString();
      publish();

      const runInSandbox = (script: string, opts: GuestRunOptions = {}) =>
        this.runInSandbox(input, stage.name, stage.attempt ?? 1, ++runCounter, script, opts, (sessionId) => {
          stage.sessionId = sessionId;
          publish();
        });
      let outcome: StageOutcome;
      try {
        await input.beforeStage?.(stage.name);
        outcome = await executor.runStage({
          task,
          stage: stage.name,
          config,
          stageConfig: config.stages[stage.name],
          signal,
          ssh,
          runInSandbox,
        });
      } catch (err) {
        outcome = signal.aborted
          ? { status: 'cancelled', exitCode: null, summary: 'cancelled' }
          : { status: 'failed', exitCode: null, summary: `error: ${err instanceof Error ? err.message : String(err)}`.slice(0, 240) };
      }
      const ended = Date.now();
      Object.assign(stage, {
        status: outcome.status,
        endedAt: new Date(ended).toISOString(),
        durationMs: ended - started,
        exitCode: outcome.exitCode,
        summary: outcome.summary,
        ...(outcome.sessionId ? { sessionId: outcome.sessionId } : {}),
        ...(outcome.tokens ? { tokens: outcome.tokens } : {}),
        ...(outcome.costUsd !== undefined ? { costUsd: outcome.costUsd } : {}),
      });
      if (outcome.status !== 'passed' && outcome.status !== 'skipped') {
        this.skipFrom(stages, i + 1, 'skipped');
        publish();
        if (outcome.status === 'cancelled') return { status: 'cancelled', stages };
        return {
          status: 'failed',
          stages,
          failedStage: stage.name,
          error: {
            name: 'StageFailed',
            message: `stage ${stage.name} failed${outcome.exitCode !== null && outcome.exitCode !== undefined ? ` with exit status ${outcome.exitCode}` : ''}: ${outcome.summary}`,
            ...(outcome.detail ? { detail: outcome.detail } : {}),
          },
        };
      }
      publish();
    }

    const headCommit = await this.commitWork(input);
    return { status: 'passed', stages, headCommit };
  }

  private skipFrom(stages: StageResult[], from: number, firstStatus: 'cancelled' | 'skipped') {
    for (let j = from; j < stages.length; j++) {
      stages[j]!.status = j === from && firstStatus === 'cancelled' ? 'cancelled' : 'skipped';
    }
  }

  /** TASK.md and the shared environment file every stage sources. */
  private async prepareGuest(input: PipelineRunInput): Promise<void> {
    const { task, config } = input;
    let text = task.title;
    if (Buffer.byteLength(text) > MAX_TASK_TEXT_BYTES) text = Buffer.from(text).subarray(0, MAX_TASK_TEXT_BYTES).toString('utf8');
    const env = [
      '# Written by Factory in a Box for every stage.',
      exportLines({
        FACTORY_TASK_ID: task.id,
        FACTORY_TASK_FILE: GUEST_TASK_FILE,
        FACTORY_BRANCH: task.branch,
        FACTORY_BASE_COMMIT: task.baseCommit,
        FACTORY_BASE_REF: task.baseRef,
      }),
      `FACTORY_TASK="$(cat ${GUEST_TASK_FILE})"; export FACTORY_TASK`,
      // Stages run under a pty with nobody at the keyboard: a pager (git diff,
      // git log, man) would wait for a key until the stage times out.
      exportLines(NON_INTERACTIVE_ENV),
      exportLines(config.env),
      exportLines(input.guestEnv ?? {}),
      '',
    ].join('\n');
    // Scratch files (plan, review) go in the artifacts folder, outside the repository, unless the repository asks to commit them.
    await writeGuestFiles(
      input.ssh,
      [
        { path: GUEST_TASK_FILE, content: text.endsWith('\n') ? text : text + '\n' },
        { path: GUEST_ENV_FILE, content: env },
      ],
      prepareArtifactsDirScript(),
    );
  }

  private putText(input: PipelineRunInput, remotePath: string, content: string): Promise<void> {
    return writeGuestFile(input.ssh, remotePath, content);
  }

  private async runInSandbox(
    input: PipelineRunInput,
    stage: StageName,
    attempt: number,
    n: number,
    script: string,
    opts: GuestRunOptions,
    onSession: (sessionId: string) => void,
  ): Promise<GuestRunResult> {
    const { ssh, signal, task } = input;
    if (signal.aborted) throw new FactoryError('Cancelled', 'the task was cancelled');
    const remote = `${GUEST_FACTORY_DIR}/run/${stage}-${n}.sh`;
    await this.putText(
      input,
      remote,
      [`. ${GUEST_ENV_FILE}`, exportLines({ FACTORY_STAGE: stage, FACTORY_STAGE_ATTEMPT: String(attempt), ...(opts.env ?? {}) }), `cd ${GUEST_REPO_DIR} || exit 97`, script, ''].join('\n'),
    );
    const started = Date.now();
    const channel = await ssh.exec(asAgentArgv(['bash', remote]), { pty: this.pty });
    let timedOut = false;
    let cancelled = false;
    const framed = framedSource(tee(this.deps.sourceForChannel(channel), opts.onOutput), stageHeader(opts.display ?? script), (code, lost) => ({
      code,
      lost,
      timedOut,
      cancelled,
      ...(opts.timeoutSeconds !== undefined ? { timeoutSeconds: opts.timeoutSeconds } : {}),
    }));
    const info = this.deps.terminals.register({
      taskId: task.id,
      kind: 'stage',
      title: attemptTitle(opts.title ?? stage, attempt),
      cols: this.pty.cols,
      rows: this.pty.rows,
      source: framed.source,
      persistLog: true,
    });
    onSession(info.id);

    const kill = async () => {
      this.deps.terminals.close(info.id);
      // The stage's terminal is closed already, so the stage ends either way; an agent left running is worth a line.
      await ssh.run(KILL_AGENT_PROCESSES, { timeoutMs: 15_000 }).catch((err: unknown) =>
        this.log.warn("killing a stage's agent processes failed", { taskId: task.id, stage, err }),
      );
    };
    const timer = opts.timeoutSeconds
      ? setTimeout(() => {
          timedOut = true;
          void kill();
        }, opts.timeoutSeconds * 1000)
      : undefined;
    const onAbort = () => {
      cancelled = true;
      void kill();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const exit = await this.deps.terminals.waitForExit(info.id);
      return {
        code: exit.code,
        sessionId: info.id,
        timedOut,
        cancelled,
        lost: exit.lost,
        durationMs: Date.now() - started,
        // The program's own output: the host's header and exit line are not part of its summary.
        tail: framed.tail,
      };
    } finally {
      if (timer) clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  }

  private commitWork(input: PipelineRunInput): Promise<string> {
    return commitGuestWork(input.ssh, input.task);
  }
}

/**
 * Commits whatever is left in the guest's work tree on the task branch, as the
 * agent user; returns its head. The end of a pipeline and of an agent session.
 */
export async function commitGuestWork(ssh: GuestSsh, task: Pick<Task, 'title' | 'id' | 'branch'>): Promise<string> {
  const subject = `factory: ${plainText(task.title.split('\n')[0]!).slice(0, 72)}`;
  const body = `Task ${task.id}, made in a Factory in a Box sandbox.`;
  const script = [
    'set -e',
    `cd ${GUEST_REPO_DIR}`,
    `if [ "$(git symbolic-ref -q HEAD)" != ${shellQuote(`refs/heads/${task.branch}`)} ]; then echo "FACTORY_WRONG_BRANCH $(git symbolic-ref -q --short HEAD || echo detached)"; exit 3; fi`,
    'git -c core.hooksPath=/dev/null add -A',
    'if ! git diff --cached --quiet; then',
    `  git -c core.hooksPath=/dev/null -c user.name='Factory in a Box' -c user.email=factory@localhost commit -q --no-verify -m ${shellQuote(subject)} -m ${shellQuote(body)}`,
    'fi',
    'echo "FACTORY_HEAD $(git rev-parse HEAD)"',
  ].join('\n');
  const r = await ssh.run(asAgent(script), { timeoutMs: 5 * 60_000, maxBytes: 64 * 1024 });
  const wrong = /FACTORY_WRONG_BRANCH (\S+)/.exec(r.stdout);
  if (wrong) {
    throw new FactoryError('PipelineError', `the pipeline left /work/repo on ${wrong[1]!.slice(0, 100)} instead of ${task.branch}; nothing was committed`);
  }
  const head = /FACTORY_HEAD ([0-9a-f]{40,64})/.exec(r.stdout);
  if (r.code !== 0 || !head) {
    throw new FactoryError('PipelineError', `committing the work in the sandbox failed: ${plainText(r.stderr).trim().slice(0, 500) || `exit ${r.code}`}`);
  }
  return head[1]!;
}

/**
 * Writes a root-owned, world-readable file in the guest in one round trip
 * (content on the exec channel's stdin; the parent folder is created).
 */
export function writeGuestFile(ssh: GuestSsh, remotePath: string, content: string | Buffer): Promise<void> {
  const dir = path.posix.dirname(remotePath);
  const tmp = `${remotePath}.tmp`;
  const command = `umask 022 && mkdir -p ${shellQuote(dir)} && cat > ${shellQuote(tmp)} && mv -f ${shellQuote(tmp)} ${shellQuote(remotePath)}`;
  return pipeToGuest(ssh, command, typeof content === 'string' ? Buffer.from(content, 'utf8') : content, remotePath);
}

/**
 * Writes several such files, then runs `then` (a guest shell line), all in one
 * round trip: under emulation each SSH exec costs a few hundred milliseconds.
 * On stdin each file is its length in bytes on a line of its own, then its
 * bytes; GNU head -c, which the image has, reads no more than it is asked for
 * from a pipe. A file whose bytes fall short is not put in place.
 */
export function writeGuestFiles(ssh: GuestSsh, files: Array<{ path: string; content: string | Buffer }>, then?: string): Promise<void> {
  const script = ['umask 022'];
  for (const f of files) {
    const tmp = shellQuote(`${f.path}.tmp`);
    script.push(`mkdir -p ${shellQuote(path.posix.dirname(f.path))}`, 'IFS= read -r n', `head -c "$n" > ${tmp}`, `[ "$(wc -c < ${tmp})" -eq "$n" ]`);
  }
  for (const f of files) script.push(`mv -f ${shellQuote(`${f.path}.tmp`)} ${shellQuote(f.path)}`);
  if (then) script.push(then);
  const stdin = files.flatMap((f) => {
    const body = typeof f.content === 'string' ? Buffer.from(f.content, 'utf8') : f.content;
    return [Buffer.from(`${body.length}\n`), body];
  });
  return pipeToGuest(ssh, script.join(' && '), Buffer.concat(stdin), files.map((f) => f.path).join(' and '));
}

/** Runs a guest command with `stdin`, closed after it; throws naming `what` unless it exits 0. */
async function pipeToGuest(ssh: GuestSsh, command: string, stdin: Buffer, what: string): Promise<void> {
  const channel = await ssh.exec(command);
  let stderr = '';
  const code = await new Promise<number | null>((resolve) => {
    let exit: number | null = null;
    channel.on('exit', (c: number | null) => {
      exit = typeof c === 'number' ? c : null;
    });
    channel.stderr.on('data', (d: Buffer) => {
      if (stderr.length < 2000) stderr += d.toString('utf8');
    });
    channel.on('data', () => undefined);
    channel.on('error', () => undefined);
    channel.on('close', () => resolve(exit));
    channel.end(stdin);
  });
  if (code !== 0) {
    const why = plainText(stderr).trim().slice(0, 300);
    throw new FactoryError('SandboxError', `could not write ${what} in the sandbox (exit ${code})${why ? `: ${why}` : ''}`);
  }
}

/** Wraps a source so an observer sees the raw output too. */
function tee(source: TerminalSource, observer?: (chunk: Buffer) => void): TerminalSource {
  if (!observer) return source;
  return {
    onData: (listener) =>
      source.onData((chunk) => {
        try {
          observer(chunk);
        } catch {
          /* an observer's bug must not break the terminal */
        }
        listener(chunk);
      }),
    onExit: (l) => source.onExit(l),
    write: (d) => source.write(d),
    resize: (c, r) => source.resize(c, r),
    pause: () => source.pause(),
    resume: () => source.resume(),
    kill: () => source.kill(),
  };
}
