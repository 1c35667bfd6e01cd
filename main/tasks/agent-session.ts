// Agent sessions (issue 27): the agent's own interactive TUI (Claude Code,
// Codex) in a fresh sandbox, in the user's terminal (`factory claude`,
// `factory codex`) and the app's. The sandbox is a quick sandbox's (the pool),
// with the repository seeded at HEAD (and its uncommitted changes when asked);
// the agent runs as the agent user with the same broker environment as in a
// stage (the adapter's session()). When it exits, its work is committed and
// comes back for review exactly like a task's result. The task is of kind
// 'agent': no stages, the phases of a task (running while the agent runs).
import path from 'node:path';
import type { ClientChannel } from 'ssh2';
import { AGENT_TERMINAL_PREFIX, isAgentTerminal } from '../../common/agent-session.js';
import { FactoryError, type FactoryEvent } from '../../common/contract.js';
import type { Task, TerminalInfo } from '../../common/domain.js';
import { shellQuote } from '../../common/shell-quote.js';
import { GUEST_FACTORY_DIR, GUEST_REPO_DIR, KILL_AGENT_PROCESSES, asAgent, asAgentArgv } from '../guest/guest-shell.js';
import type { Logger } from '../log/logger.js';
import { renderCommand } from '../pipeline/agents/shell.js';
import type { AgentAdapter } from '../pipeline/agents/types.js';
import { commitGuestWork, writeGuestFile } from '../pipeline/stage-runner.js';
import type { TaskRecord } from '../state/state-store.js';
import type { ExitResult } from '../terminal/session.js';
import type { RegisterSessionOptions, TerminalSource } from '../terminal/types.js';
import { inspectRepo } from './host-repo.js';
import { beginEnding, onQuickVmExited, type QuickRuntime } from './quick-sandbox.js';
import type { QemuDriverPort, SandboxSshPort } from './sandbox-ports.js';
import { bootedSandboxInfo, checkAborted, type SandboxProvisioner } from './sandbox-provisioner.js';
import type { TaskBook } from './task-book.js';
import type { TaskEnvironment } from './task-environment.js';

/**
 * How long an agent session waits for its user once no terminal shows it (the
 * CLI's terminal was closed, its connection dropped): long enough to find the
 * session again (`factory claude --resume <id>`, the app) after a lost SSH
 * login or a closed laptop lid, short enough that a forgotten one does not hold
 * a VM's memory for the day. Then the agent is ended and its work goes to review.
 */
export const AGENT_SESSION_GRACE_MS = 10 * 60_000;

export interface AgentSessionInput {
  agent: string;
  repoPath: string;
  includeUncommitted?: boolean;
  /** The user's own arguments for the agent's CLI. */
  args?: string[];
  cols: number;
  rows: number;
}

/** What the app lends agent sessions: its terminals and its agents. */
export interface AgentSessionHost {
  terminals: {
    register(opts: RegisterSessionOptions): TerminalInfo;
    waitForExit(sessionId: string): Promise<ExitResult>;
    close(sessionId: string): void;
  };
  sourceForChannel: (channel: ClientChannel) => TerminalSource;
  adapter: (agentId: string) => AgentAdapter | undefined;
}

/** What the task service lends an agent session: its book, runtimes, provisioner and the review. */
export interface AgentSessionParts<Image> extends AgentSessionHost {
  book: TaskBook;
  runtimes: Map<string, QuickRuntime>;
  provisioner: SandboxProvisioner<Image>;
  environment: Pick<TaskEnvironment, 'rulesFor'>;
  qemu: Pick<QemuDriverPort<Image>, 'checkInstalled'>;
  teardown: (record: TaskRecord, rt: QuickRuntime) => Promise<void>;
  /** The work, committed, into quarantine and review (the pipeline's pull-back). */
  pullBack: (record: TaskRecord, ssh: SandboxSshPort) => Promise<void>;
  /** Cancelled by the user, or interrupted by the app stopping. */
  aborted: (record: TaskRecord) => Promise<void>;
  disposed: () => boolean;
  log: Logger;
}

/** Checks what the user can fix (agent, repository, QEMU), records the session, then boots and runs it in the background. */
export async function startAgentSession<Image>(parts: AgentSessionParts<Image>, input: AgentSessionInput): Promise<Task> {
  if (parts.disposed()) throw new FactoryError('ShuttingDown', 'the app is shutting down');
  const adapter = parts.adapter(input.agent);
  if (!adapter?.session) throw new FactoryError('UnknownAgent', `no agent named ${JSON.stringify(input.agent)} has an interactive session`);
  const repo = await inspectRepo(input.repoPath);
  const qemu = await parts.qemu.checkInstalled();
  if (!qemu.ok) {
    throw new FactoryError('QemuMissing', `QEMU is not installed. ${qemu.installHint ?? 'Install qemu-system and qemu-utils with your package manager.'}`);
  }
  const task: Task = {
    ...parts.book.newTask({
      title: `Agent session: ${adapter.displayName} in ${path.basename(repo.repoPath)}`,
      repoPath: repo.repoPath,
      baseRef: repo.baseRef,
      baseCommit: repo.baseCommit,
      agent: adapter.id,
      allowPush: false,
    }),
    stages: [],
    kind: 'agent',
  };
  await parts.provisioner.rememberSeed(task.id, !!input.includeUncommitted);
  const record: TaskRecord = { version: 1, task };
  await parts.book.add(record);
  const rt: QuickRuntime = { abort: new AbortController() };
  parts.runtimes.set(task.id, rt);
  rt.done = runSession(parts, record, rt, adapter, input).catch((err: unknown) => endSession(parts, record, rt, err));
  return { ...task };
}

async function runSession<Image>(parts: AgentSessionParts<Image>, record: TaskRecord, rt: QuickRuntime, adapter: AgentAdapter, input: AgentSessionInput): Promise<void> {
  const { book, provisioner } = parts;
  const signal = rt.abort.signal;
  // The seed reads the repository as it is now (its working tree, with --with-changes).
  const bundle = await provisioner.seedBundle(record.task);
  checkAborted(signal);
  const sandbox = (rt.sandbox = provisioner.open(record.task));
  await book.transition(record, 'provision', { sandbox: {} });
  const vm = await provisioner.boot(sandbox, signal, { egress: parts.environment.rulesFor(record.task) });
  void vm.exited
    .then(() => onQuickVmExited(parts, record, rt, sandbox))
    .catch((err: Error) => parts.log.warn("recording an agent session's sandbox end failed", { taskId: record.task.id, err }));
  await book.transition(record, 'booted', { sandbox: bootedSandboxInfo(vm) }, { sandboxDir: vm.sandboxDir, ...(vm.pid > 0 ? { qemuPid: vm.pid } : {}) });
  checkAborted(signal);
  await provisioner.seed(sandbox, record.task, bundle);
  checkAborted(signal);
  const ssh = sandbox.ssh;
  if (!ssh) throw new FactoryError('NoSandbox', `task ${record.task.id} has no running sandbox`);

  // The stage's environment (proxy, placeholder, quiet flags), the user's arguments, and the files the TUI needs first.
  const spec = adapter.session!({ cwd: GUEST_REPO_DIR, env: { ...sandbox.guestEnv }, args: input.args ?? [] });
  if (spec.files.length) {
    const writes = spec.files.map((f) => {
      if (f.path.startsWith('/') || f.path.split('/').includes('..')) throw new Error(`an agent session file must stay in the agent's home: ${f.path}`);
      return `mkdir -p "$HOME"/${shellQuote(path.posix.dirname(f.path))} && printf %s ${shellQuote(Buffer.from(f.content).toString('base64'))} | base64 -d > "$HOME"/${shellQuote(f.path)}`;
    });
    const r = await ssh.run(asAgent(['set -e', 'umask 077', ...writes].join('\n')), { timeoutMs: 60_000, maxBytes: 16 * 1024 });
    if (r.code !== 0) throw new FactoryError('SandboxError', `preparing ${adapter.displayName}'s files in the sandbox failed: ${r.stderr.trim().slice(0, 300)}`);
  }
  // The command line (with the placeholder) goes in a file, as a stage's does, not in the process list of the SSH login.
  const script = `${GUEST_FACTORY_DIR}/run/agent-session.sh`;
  await writeGuestFile(ssh, script, `${renderCommand({ cwd: spec.cwd, env: spec.env, argv: spec.argv })}\n`);
  const channel = await ssh.exec(asAgentArgv(['bash', script]), { pty: { cols: input.cols, rows: input.rows } });
  await book.transition(record, 'seeded');
  const info = parts.terminals.register({
    taskId: record.task.id,
    kind: 'shell',
    title: `${AGENT_TERMINAL_PREFIX}${adapter.displayName}`,
    cols: input.cols,
    rows: input.rows,
    source: parts.sourceForChannel(channel),
    persistLog: true,
  });
  const exit = await untilExitOrAbort(parts.terminals.waitForExit(info.id), signal, () => parts.terminals.close(info.id));
  checkAborted(signal);
  if (exit.lost && record.task.sandbox.status !== 'running') throw new FactoryError('NoSandbox', `the sandbox ended while ${adapter.displayName} ran`);
  // Whatever the agent left running (a closed terminal, a background job) stops before its work is committed.
  await ssh.run(KILL_AGENT_PROCESSES, { timeoutMs: 15_000 }).catch((err: unknown) => parts.log.warn("ending an agent session's processes failed", { taskId: record.task.id, err }));
  await commitGuestWork(ssh, record.task);
  checkAborted(signal);
  await book.transition(record, 'pipelinePassed');
  await parts.pullBack(record, ssh);
}

/**
 * The agent's exit, or the abort: then its terminal is closed (a hang-up) and the session ends at once,
 * not when the far side has let go. An agent that outlives the hang-up (or a guest that no longer answers)
 * held the channel open, the abort waited on it, and the app's shutdown with it, the sandbox still running;
 * whoever aborted tears the sandbox down, and everything in it with it.
 */
export async function untilExitOrAbort(exited: Promise<ExitResult>, signal: AbortSignal, hangUp: () => void): Promise<ExitResult> {
  let onAbort = () => {};
  const aborted = new Promise<never>((_resolve, reject) => {
    onAbort = () => {
      hangUp();
      reject(new FactoryError('Cancelled', 'the agent session was ended'));
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([exited, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * A session that ended early. Cancelled (the user, destroy) or interrupted (the
 * app stopping): recorded so; whoever aborted tears the VM down. Failed: the
 * sandbox stays for inspection, like a failed task's, and the task shows the error.
 */
async function endSession<Image>(parts: AgentSessionParts<Image>, record: TaskRecord, rt: QuickRuntime, err: unknown): Promise<void> {
  const step = await beginEnding(parts, record, rt, 'an agent session');
  if (rt.abort.signal.aborted) {
    await step('recording the end of an agent session', () => parts.aborted(record));
    return;
  }
  await step('recording the failure of an agent session', () => parts.book.fail(record, err));
}

export interface AgentSessionWatcherDeps {
  /** The task a terminal belongs to, to tell an agent session's terminal from another shell. */
  task: (taskId: string) => Task | undefined;
  terminal: (sessionId: string) => TerminalInfo | undefined;
  /** Ends a terminal session: the agent exits, and its work goes to review. */
  closeTerminal: (sessionId: string) => void;
  log: Logger;
  graceMs?: number;
}

/**
 * A closed terminal does not end an agent session at once: the agent runs on,
 * and ends after AGENT_SESSION_GRACE_MS unless someone attaches again (the CLI's
 * --resume, the app). A session that opened with nobody attached (the CLI went
 * away while the sandbox booted) waits the same.
 */
export class AgentSessionWatcher {
  private readonly timers = new Map<string, NodeJS.Timeout>();

  constructor(private readonly deps: AgentSessionWatcherDeps) {}

  onEvent(e: FactoryEvent): void {
    if (e.type === 'terminal.opened' && e.info.status === 'live' && this.isAgentSession(e.info)) this.arm(e.info.id);
    else if (e.type === 'terminal.status' && e.info.status !== 'live') this.disarm(e.info.id);
  }

  attached(sessionId: string): void {
    this.disarm(sessionId);
  }

  /** The viewer left (its connection closed or it detached): the grace period starts. */
  detached(sessionId: string): void {
    const info = this.deps.terminal(sessionId);
    if (info && info.status === 'live' && this.isAgentSession(info)) this.arm(sessionId);
  }

  dispose(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }

  private isAgentSession(info: TerminalInfo): boolean {
    return !!info.taskId && isAgentTerminal(info) && this.deps.task(info.taskId)?.kind === 'agent';
  }

  private arm(sessionId: string): void {
    this.disarm(sessionId);
    const timer = setTimeout(() => {
      this.timers.delete(sessionId);
      try {
        this.deps.closeTerminal(sessionId);
      } catch (err) {
        this.deps.log.warn('ending an agent session nobody came back to failed', { sessionId, err });
      }
    }, this.deps.graceMs ?? AGENT_SESSION_GRACE_MS);
    timer.unref();
    this.timers.set(sessionId, timer);
  }

  private disarm(sessionId: string): void {
    const t = this.timers.get(sessionId);
    if (t) clearTimeout(t);
    this.timers.delete(sessionId);
  }
}
