// Claude Code sessions and their sandboxes (issue 11, the session hooks).
// start: a task with the 'claude-session' agent for the repository at the
// session's cwd, ready when its sandbox is seeded and set up (a resumed
// session gets its own sandbox back). check (Stop, after every turn): the leak
// check only — the session goes on using the sandbox. end (SessionEnd): the
// leak check, then pull-back into review and destroy. A check that is not
// clean (a leak, an incomplete scan, an error) keeps the sandbox (quarantined,
// never reaped, not destroyed by a later end) for inspection. The reaper
// destroys the sandbox of a session whose process has been gone for the grace
// period. Every check is recorded with its task (session-checks.ts): the card
// shows a verdict per turn, and each subagent's under its session.
import { FactoryError } from '../../common/contract.js';
import { workTreeTop } from '../git/host-git.js';
import type { LeakReport } from '../../common/credentials.js';
import type { ExecResult } from '../../common/contract.js';
import type { InteractiveAgent } from '../../common/agent-session.js';
import { interactiveAgentName, type HookSession, type Task } from '../../common/domain.js';
import { execInSandbox } from '../exec/sandbox-exec.js';
import { asAgent, shellQuote } from '../guest/guest-shell.js';
import { commitGuestWork } from '../pipeline/stage-runner.js';
import type { GuestSsh } from '../guest/guest-ssh.js';
import { SESSION_AGENT, type SessionHoldExecutor } from './session-hold.js';
import { checkFromError, checkFromReport, newHookSession, withCheck, type CheckHook } from './session-checks.js';
import { processAlive } from './session-process.js';
import type { SessionRecord, SessionStore } from './session-store.js';
import { routedFolderKey, routedScript } from './routed-script.js';
import { WorkingTreeSync, type SyncResult } from './working-tree-sync.js';
import { drainedOrClosed } from '../streams/drained.js';

const ROUTED_SCRIPT = routedScript();

export interface SubagentInput {
  sessionId: string;
  agentId: string;
  agentType?: string | undefined;
  agent?: InteractiveAgent | undefined;
}

/** The most a subagent's work may weigh on its way into the session's sandbox (a git bundle, guest to guest). */
const SUBAGENT_BUNDLE_MAX_BYTES = 512 * 1024 * 1024;

export interface RunInput {
  sessionId: string;
  command: string;
  /** The folder relative to the repository's top. */
  dir: string;
  agentId?: string | undefined;
  timeoutSec?: number | undefined;
}

export interface SessionPorts {
  createTask(input: { repoPath: string; title: string; agent: string; session: HookSession }): Promise<Task>;
  /** Throws TaskNotFound for an unknown id. */
  getTask(taskId: string): Task;
  cancelTask(taskId: string): Promise<Task>;
  destroyTask(taskId: string): Promise<Task>;
  leakCheck(taskId: string): Promise<LeakReport>;
  /** The live SSH connection of a task's sandbox; throws NoSandbox when it has none. */
  sandboxSsh(taskId: string): GuestSsh;
  /** The session's sandbox is ready: it keeps a spare fork for its subagents (none when the warm pool is off). */
  keepSpareFork?(taskId: string): void;
  /** Ends the session's spare fork and makes no more (a sandbox kept for inspection forks nothing). */
  dropSpareFork?(taskId: string): Promise<void>;
  /** Changes a task's session record (saved with the task, shown on its card); throws TaskNotFound. */
  noteSession(taskId: string, change: (session: HookSession | undefined) => HookSession): Promise<unknown>;
}

export interface SessionServiceDeps {
  store: SessionStore;
  hold: SessionHoldExecutor;
  ports: SessionPorts;
  /** How long a session's process must have been gone before its sandbox is destroyed. */
  graceMs: number;
  alive?: (pid: number, start?: string) => boolean;
  log: { info(m: string, meta?: Record<string, unknown>): void; warn(m: string, meta?: Record<string, unknown>): void };
  readyTimeoutMs?: number;
}

export interface StartInput {
  sessionId: string;
  cwd: string;
  source?: string | undefined;
  pid?: number | undefined;
  pidStart?: string | undefined;
  agent?: InteractiveAgent | undefined;
}

const FINISHED = new Set(['review', 'approved', 'rejected', 'failed', 'cancelled', 'interrupted']);
const LIVE = new Set(['booting', 'running']);

export class SessionService {
  private goneSince = new Map<string, number>();
  private starting = new Map<string, Promise<{ task: Task; resumed: boolean }>>();
  private timer: NodeJS.Timeout | undefined;
  /** Per sandbox (task id): what of the working tree it has been sent. */
  private syncs = new Map<string, WorkingTreeSync>();
  private reaping: Promise<void> | undefined;

  constructor(private readonly deps: SessionServiceDeps) {}

  start(input: StartInput): Promise<{ task: Task; resumed: boolean }> {
    // Claude Code may fire SessionStart twice for one session (startup, then clear): one sandbox.
    const running = this.starting.get(input.sessionId);
    if (running) return running;
    const p = this.doStart(input).finally(() => this.starting.delete(input.sessionId));
    this.starting.set(input.sessionId, p);
    return p;
  }

  private async doStart(input: StartInput): Promise<{ task: Task; resumed: boolean }> {
    const { store } = this.deps;
    const known = store.get(input.sessionId);
    if (known) {
      const task = this.tryGet(known.taskId);
      if (task && LIVE.has(task.sandbox.status) && !FINISHED.has(task.phase)) {
        await store.put({ ...known, ...pidOf(input) });
        this.goneSince.delete(input.sessionId);
        return { task: await this.readyForSubagents(task.id), resumed: true };
      }
      // Kept after a leak finding: refused while the sandbox is there; once the user destroyed it, a new one.
      if (known.state === 'quarantined' && task && LIVE.has(task.sandbox.status)) {
        throw new FactoryError('InvalidTransition', `session ${input.sessionId}'s sandbox (task ${known.taskId}) is kept for inspection after a leak finding; destroy it in the app first`);
      }
      await store.remove(input.sessionId);
    }
    const repoPath = await repoTop(input.cwd);
    const task = await this.deps.ports.createTask({ repoPath, title: `${interactiveAgentName(input.agent)} session ${input.sessionId}`, agent: SESSION_AGENT, session: newHookSession(input.sessionId, undefined, input.agent) });
    await store.put({ sessionId: input.sessionId, taskId: task.id, repoPath, createdAt: new Date().toISOString(), state: 'active', ...pidOf(input) });
    this.deps.log.info('a Claude Code session got a sandbox', { sessionId: input.sessionId, taskId: task.id });
    return { task: await this.readyForSubagents(task.id), resumed: false };
  }

  /** The session's sandbox once ready, keeping a spare fork from then on so a subagent's comes at once. */
  private async readyForSubagents(taskId: string): Promise<Task> {
    const task = await this.waitReady(taskId);
    this.deps.ports.keepSpareFork?.(taskId);
    return task;
  }

  /** The session's sandbox and repository (the PreToolUse hook needs the repository to judge file paths). */
  info(sessionId: string): { taskId: string; repoPath: string } {
    const r = this.record(sessionId);
    return { taskId: r.taskId, repoPath: r.repoPath };
  }

  /**
   * A command the PreToolUse hook routed: the working tree's changes go into the
   * sandbox first (one way), then the command runs there; its output and exit
   * status come back. A quarantined session runs nothing.
   */
  async run(input: RunInput): Promise<ExecResult & { sync: SyncResult; taskId: string }> {
    const record = this.record(input.sessionId);
    if (record.state === 'quarantined') throw new FactoryError('InvalidTransition', `session ${input.sessionId}'s sandbox (task ${record.taskId}) is kept for inspection after a leak check that was not clean; it runs no more commands`);
    // A subagent's command runs in its own sandbox or nowhere: never in the session's, whose
    // files and branch the subagent was not given. The session's own commands run there.
    const child = input.agentId ? record.agents?.[input.agentId] : undefined;
    if (input.agentId && !(child && this.liveTask(child))) {
      throw new FactoryError(
        'NoSandbox',
        `subagent ${input.agentId} of session ${input.sessionId} has no running sandbox of its own (its SubagentStart did not give it one, or it was kept after a leak check); its commands run nowhere else`,
      );
    }
    const taskId = child ?? record.taskId;
    const ssh = this.deps.ports.sandboxSsh(taskId);
    let sync = this.syncs.get(taskId);
    if (!sync) this.syncs.set(taskId, (sync = new WorkingTreeSync(record.repoPath)));
    // The working tree's changes travel with the command: one guest process, not two or three.
    const carry = await sync.take(ssh);
    const dir = input.dir === '' ? '/work/repo' : `/work/repo/${input.dir}`;
    let feedError: unknown;
    const feed = carry.feed;
    let result: ExecResult;
    try {
      result = await execInSandbox(
        ssh,
        { argv: ['bash', '-c', ROUTED_SCRIPT, 'factory-routed', dir, input.command, feed ? '1' : '0', routedFolderKey(input.agentId, this.deps.ports.getTask(taskId).session?.agent), ...carry.remove], ...(input.timeoutSec ? { timeoutSec: input.timeoutSec } : {}) },
        undefined,
        (channel) => (feed ? feed(channel).catch((err: unknown) => ((feedError = err), Promise.reject(err))) : (channel.end(), Promise.resolve())),
      );
    } catch (err) {
      carry.rollback();
      throw err;
    }
    const stderr = Buffer.from(result.stderr, 'base64').toString('utf8');
    if (feedError !== undefined || (result.exitCode === 125 && stderr.includes('FACTORY_SYNC_FAILED'))) {
      carry.rollback();
      if (feedError instanceof FactoryError) throw feedError;
      throw new FactoryError('SyncFailed', `carrying the working tree's changes into the sandbox failed, so the command did not run: ${(feedError ? String(feedError) : stderr).trim().slice(0, 300)}`);
    }
    const synced = { sent: carry.sent, removed: carry.removed, bytes: carry.bytes };
    return { ...result, sync: synced, taskId };
  }

  /**
   * SubagentStart: a sandbox of the subagent's own, forked from the session's
   * running one by the task service (fresh from the repository when it cannot
   * be), ready when this returns. It takes a slot of the
   * parallel-task limit like any task and waits for one past it.
   */
  async subagentStart(input: SubagentInput): Promise<{ task: Task; parentTaskId: string }> {
    const record = this.record(input.sessionId);
    if (record.state === 'quarantined') throw new FactoryError('InvalidTransition', `session ${input.sessionId}'s sandbox is kept for inspection after a leak check that was not clean; it starts no subagent sandbox`);
    const known = record.agents?.[input.agentId];
    if (known && this.liveTask(known)) return { task: await this.waitReady(known), parentTaskId: record.taskId };
    const kind = input.agentType ? `${input.agentType} ` : '';
    const task = await this.deps.ports.createTask({
      repoPath: record.repoPath,
      title: `${interactiveAgentName(input.agent)} subagent ${kind}${input.agentId} of session ${input.sessionId}`,
      agent: SESSION_AGENT,
      session: newHookSession(input.sessionId, { parentTaskId: record.taskId, agentId: input.agentId, ...(input.agentType ? { agentType: input.agentType } : {}) }, input.agent),
    });
    const now = this.record(input.sessionId);
    await this.deps.store.put({ ...now, agents: { ...now.agents, [input.agentId]: task.id } });
    this.deps.log.info('a Claude Code subagent got a sandbox', { sessionId: input.sessionId, agentId: input.agentId, taskId: task.id });
    return { task: await this.waitReady(task.id), parentTaskId: record.taskId };
  }

  /**
   * SubagentStop: the leak check of the subagent's sandbox; when clean, its work
   * (committed, and what it left uncommitted) goes into the session's sandbox as
   * branch factory/<session>/<agent>, guest to guest as a git bundle that this
   * computer only passes on, and the subagent's sandbox is destroyed. A check
   * that is not clean keeps it for inspection and brings nothing over.
   */
  async subagentStop(input: SubagentInput): Promise<{ report?: LeakReport; branch?: string; commits: number; destroyed: boolean }> {
    const record = this.record(input.sessionId);
    const childId = record.agents?.[input.agentId];
    if (!childId) return { commits: 0, destroyed: false };
    const child = this.tryGet(childId);
    if (!child || !this.liveTask(childId)) {
      await this.forgetAgent(input.sessionId, input.agentId);
      return { commits: 0, destroyed: false };
    }
    // The subagent ran during the session's turn in progress: the one after the last Stop.
    const turn = (this.tryGet(record.taskId)?.session?.turns ?? 0) + 1;
    let report: LeakReport;
    try {
      report = await this.deps.ports.leakCheck(childId);
    } catch (err) {
      await this.noteCheck(childId, input.sessionId, 'SubagentStop', err, turn);
      throw err;
    }
    await this.noteCheck(childId, input.sessionId, 'SubagentStop', report, turn);
    if (report.verdict !== 'clean') {
      // Kept for inspection: no longer the session's (its end must not destroy it), its hold stopped as for a kept session.
      this.deps.log.warn('the leak check of a subagent sandbox was not clean; it is kept for inspection', { sessionId: input.sessionId, agentId: input.agentId, taskId: childId });
      await this.forgetAgent(input.sessionId, input.agentId);
      // A task that already ended cannot be cancelled: its sandbox is kept either way.
      await this.deps.ports.cancelTask(childId).catch(() => undefined);
      await this.noteOutcome(childId, input.sessionId, { kind: 'kept', reason: report.verdict === 'leak' ? `the leak check found ${findingWords(report)}` : 'the leak check could not scan everything' });
      return { report, commits: 0, destroyed: false };
    }
    let branch: string | undefined;
    let commits = 0;
    try {
      const childSsh = this.deps.ports.sandboxSsh(childId);
      const head = await commitGuestWork(childSsh, child);
      if (head !== child.baseCommit) {
        branch = `factory/${input.sessionId}/${input.agentId}`;
        commits = await carryBranch(childSsh, this.deps.ports.sandboxSsh(record.taskId), child.baseCommit, branch);
      }
    } catch (err) {
      await this.noteOutcome(childId, input.sessionId, { kind: 'kept', reason: `its work could not be brought over (${err instanceof Error ? err.message : String(err)}); its sandbox goes when the session ends` });
      throw err;
    }
    await this.noteOutcome(childId, input.sessionId, branch ? { kind: 'merged', branch, commits } : { kind: 'no-work' });
    await this.deps.ports.destroyTask(childId);
    this.syncs.delete(childId);
    await this.forgetAgent(input.sessionId, input.agentId);
    return { report, ...(branch ? { branch } : {}), commits, destroyed: true };
  }

  private async forgetAgent(sessionId: string, agentId: string): Promise<void> {
    const now = this.deps.store.get(sessionId);
    if (!now?.agents?.[agentId]) return;
    const agents = { ...now.agents };
    delete agents[agentId];
    await this.deps.store.put({ ...now, agents });
  }

  private liveTask(taskId: string): boolean {
    const t = this.tryGet(taskId);
    return !!t && LIVE.has(t.sandbox.status) && !FINISHED.has(t.phase);
  }

  /** Stop: the leak check only. */
  async check(sessionId: string): Promise<{ task: Task; report: LeakReport }> {
    const record = this.record(sessionId);
    const report = await this.checkOrKeep(record, 'Stop');
    return { task: this.deps.ports.getTask(record.taskId), report };
  }

  /**
   * The leak check, failing closed: a check that did not complete and find
   * nothing (a leak, caps exceeded, an error) keeps the sandbox for inspection.
   */
  private async checkOrKeep(record: SessionRecord, hook: CheckHook): Promise<LeakReport> {
    let report: LeakReport;
    try {
      report = await this.deps.ports.leakCheck(record.taskId);
    } catch (err) {
      await this.noteCheck(record.taskId, record.sessionId, hook, err);
      await this.quarantine(record, `the leak check failed: ${String(err)}`);
      throw err;
    }
    await this.noteCheck(record.taskId, record.sessionId, hook, report);
    if (report.verdict !== 'clean') await this.quarantine(record, report.verdict === 'leak' ? 'a leak check found a credential' : 'the leak check could not scan everything');
    return report;
  }

  /** SessionEnd: the leak check, then (clean) the work into review and the sandbox destroyed. */
  async end(sessionId: string): Promise<{ task: Task; report?: LeakReport; destroyed: boolean }> {
    const record = this.record(sessionId);
    const result = await this.teardown(record);
    return { task: this.deps.ports.getTask(record.taskId), ...result };
  }

  private async teardown(record: SessionRecord): Promise<{ report?: LeakReport; destroyed: boolean }> {
    const { ports, hold, store } = this.deps;
    const task = this.tryGet(record.taskId);
    if (!task) {
      await store.remove(record.sessionId);
      return { destroyed: false };
    }
    let report: LeakReport | undefined;
    if (task.sandbox.status === 'running') {
      report = await this.checkOrKeep(record, 'SessionEnd');
      if (report.verdict !== 'clean') return { report, destroyed: false };
    }
    // Kept after an earlier check that was not clean: a clean check now does not undo that; the user destroys it.
    if (LIVE.has(task.sandbox.status) && this.deps.store.get(record.sessionId)?.state === 'quarantined') return { ...(report ? { report } : {}), destroyed: false };
    // Subagents whose stop never came: their sandboxes go with the session's (kept ones, after a finding, are no longer listed).
    for (const childId of Object.values(record.agents ?? {})) {
      if (!this.liveTask(childId)) continue;
      try {
        await ports.destroyTask(childId);
        await this.noteOutcome(childId, record.sessionId, { kind: 'ended', reason: 'no SubagentStop came before the session ended; its sandbox went with the session, its work was not brought over' });
      } catch (err) {
        this.deps.log.warn('destroying a subagent sandbox failed', { taskId: childId, err: String(err) });
      }
    }
    if (hold.release(record.taskId)) await this.waitFinished(record.taskId);
    await ports.destroyTask(record.taskId);
    this.syncs.delete(record.taskId);
    await store.remove(record.sessionId);
    this.goneSince.delete(record.sessionId);
    return { ...(report ? { report } : {}), destroyed: true };
  }

  /**
   * Records a check with the task it scanned: Stop counts the next turn,
   * SessionEnd follows the last one, SubagentStop gives the session's turn.
   * The record is what the card shows; the verdict, not the record, decides:
   * a record that cannot be saved is logged and the hook goes on.
   */
  private async noteCheck(taskId: string, sessionId: string, hook: CheckHook, result: unknown, subagentTurn?: number): Promise<void> {
    const report = isLeakReport(result) ? result : undefined;
    await this.deps.ports
      .noteSession(taskId, (s) => {
        const session = s ?? newHookSession(sessionId);
        const turn = hook === 'Stop' ? session.turns + 1 : hook === 'SessionEnd' ? session.turns : (subagentTurn ?? 0);
        return withCheck(session, report ? checkFromReport(report, { hook, turn }) : checkFromError(result, { hook, turn }));
      })
      .catch((err: unknown) => this.deps.log.warn('recording a leak check with its task failed', { taskId, hook, err: String(err) }));
  }

  /** What became of a subagent's sandbox, on its card. */
  private async noteOutcome(taskId: string, sessionId: string, outcome: NonNullable<HookSession['subagent']>['outcome']): Promise<void> {
    await this.deps.ports
      .noteSession(taskId, (s) => {
        const session = s ?? newHookSession(sessionId);
        return session.subagent ? { ...session, subagent: { ...session.subagent, outcome } } : session;
      })
      .catch((err: unknown) => this.deps.log.warn("recording a subagent's outcome with its task failed", { taskId, err: String(err) }));
  }

  /** Kept for inspection: the held stage is stopped, the sandbox stays, the reaper leaves it alone. */
  private async quarantine(record: SessionRecord, why: string): Promise<void> {
    if (record.state !== 'quarantined') await this.deps.store.put({ ...record, state: 'quarantined' });
    this.deps.log.warn(`${why} in a session sandbox; it is kept for inspection`, { sessionId: record.sessionId, taskId: record.taskId });
    // A spare forked before the finding holds what was found too: it goes now, not with the kept sandbox.
    await this.deps.ports.dropSpareFork?.(record.taskId).catch((err: unknown) => this.deps.log.warn('ending the spare fork of a kept session sandbox failed', { taskId: record.taskId, err }));
    // A task that already ended cannot be cancelled: kept is what matters, and it is recorded above.
    await this.deps.ports.cancelTask(record.taskId).catch(() => undefined);
  }

  /** Checks at once and then every intervalMs. */
  startReaper(intervalMs = Math.max(500, Math.min(15_000, this.deps.graceMs / 4))): void {
    void this.reap();
    this.timer = setInterval(() => void this.reap(), intervalMs);
    this.timer.unref();
  }

  async dispose(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.reaping;
  }

  /** One pass: sandboxes of sessions whose process has been gone for the grace period are torn down. */
  reap(now = Date.now()): Promise<void> {
    this.reaping ??= this.reapOnce(now).finally(() => (this.reaping = undefined));
    return this.reaping;
  }

  private async reapOnce(now: number): Promise<void> {
    const alive = this.deps.alive ?? processAlive;
    for (const record of this.deps.store.all()) {
      if (record.state === 'quarantined' && !this.starting.has(record.sessionId)) {
        // The user destroyed the kept sandbox (or removed its task): nothing is left to keep.
        const task = this.tryGet(record.taskId);
        if (!task || !LIVE.has(task.sandbox.status)) await this.deps.store.remove(record.sessionId);
        continue;
      }
      if (record.state !== 'active' || record.pid === undefined || this.starting.has(record.sessionId)) continue;
      if (alive(record.pid, record.pidStart)) {
        this.goneSince.delete(record.sessionId);
        continue;
      }
      const since = this.goneSince.get(record.sessionId) ?? now;
      this.goneSince.set(record.sessionId, since);
      if (now - since < this.deps.graceMs) continue;
      this.deps.log.info("reaping the sandbox of a Claude Code session whose process is gone", { sessionId: record.sessionId, taskId: record.taskId, pid: record.pid });
      await this.teardown(record).catch((err: unknown) => this.deps.log.warn('reaping a session sandbox failed', { sessionId: record.sessionId, err: String(err) }));
    }
  }

  private record(sessionId: string): SessionRecord {
    const r = this.deps.store.get(sessionId);
    if (!r) throw new FactoryError('SessionNotFound', `no sandbox is recorded for Claude Code session ${sessionId}`);
    return r;
  }

  private tryGet(taskId: string): Task | undefined {
    try {
      return this.deps.ports.getTask(taskId);
    } catch {
      // TaskNotFound: the task was removed; the caller treats it as gone.
      return undefined;
    }
  }

  /** Until the sandbox is seeded, set up and held for the session; a task that failed on the way throws its error. */
  private async waitReady(taskId: string): Promise<Task> {
    const deadline = Date.now() + (this.deps.readyTimeoutMs ?? 15 * 60_000);
    for (;;) {
      const task = this.deps.ports.getTask(taskId);
      if (this.deps.hold.holding(taskId)) return task;
      if (FINISHED.has(task.phase)) {
        const e = task.error;
        throw e ? FactoryError.carried(e.name, `the session's sandbox did not get ready: ${e.message}`, e.detail) : new FactoryError('NoSandbox', `the session's sandbox did not get ready (task ${taskId} is ${task.phase})`);
      }
      if (Date.now() > deadline) throw new FactoryError('SandboxBootTimeout', `the session's sandbox (task ${taskId}) was not ready in time`);
      // In-memory reads: a short step, as a spare fork is ready in about a second.
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  private async waitFinished(taskId: string): Promise<void> {
    const deadline = Date.now() + 5 * 60_000;
    while (!FINISHED.has(this.deps.ports.getTask(taskId).phase) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
  }
}

function isLeakReport(x: unknown): x is LeakReport {
  return typeof x === 'object' && x !== null && 'verdict' in x && Array.isArray((x as LeakReport).scanned) && Array.isArray((x as LeakReport).hits);
}

/** The credentials a check found, by name (never a value): "anthropic (memory), github (overlay)". */
function findingWords(report: LeakReport): string {
  const seen = [...new Set(report.hits.map((h) => `${h.credentialId} (${h.source})`))];
  if (!seen.length) return 'a credential';
  return seen.length > 3 ? `${seen.slice(0, 3).join(', ')} and ${seen.length - 3} more` : seen.join(', ');
}

function pidOf(input: StartInput): Pick<SessionRecord, 'pid' | 'pidStart'> {
  return { ...(input.pid !== undefined ? { pid: input.pid } : {}), ...(input.pidStart !== undefined ? { pidStart: input.pidStart } : {}) };
}

/** The repository the session works in: the top of the git work tree at its cwd. */
async function repoTop(cwd: string): Promise<string> {
  const top = await workTreeTop(cwd);
  if (!top) throw new FactoryError('NotAGitRepository', `the session's folder ${JSON.stringify(cwd)} is not inside a git repository`);
  return top;
}

/**
 * The subagent's commits since `base` as branch `branch` of the session's
 * sandbox: a bundle made in one guest, fetched in the other. The bytes pass
 * through this computer unread, within SUBAGENT_BUNDLE_MAX_BYTES. Returns how
 * many commits came over.
 */
async function carryBranch(from: Pick<GuestSsh, 'exec'>, to: Pick<GuestSsh, 'exec'>, base: string, branch: string): Promise<number> {
  if (!/^[0-9a-f]{40,64}$/.test(base)) throw new FactoryError('SandboxError', 'the subagent\'s base is not a commit id');
  const make = await from.exec(asAgent(`cd /work/repo && git bundle create -q - ${base}..HEAD`));
  const take = await to.exec(
    asAgent(
      [
        'set -e',
        'cd /work/repo',
        'f=$(mktemp)',
        'trap \'rm -f "$f"\' EXIT',
        'cat > "$f"',
        `git fetch -q "$f" HEAD:refs/heads/${shellQuote(branch.replace(/^refs\/heads\//, ''))}`,
        `git rev-list --count ${base}..${shellQuote(branch)}`,
      ].join('\n'),
    ),
  );
  let sent = 0;
  let makeErr = '';
  let takeOut = '';
  let takeErr = '';
  make.stderr.on('data', (d: Buffer) => (makeErr = (makeErr + d.toString('utf8')).slice(-1000)));
  take.on('data', (d: Buffer) => (takeOut = (takeOut + d.toString('utf8')).slice(-1000)));
  take.stderr.on('data', (d: Buffer) => (takeErr = (takeErr + d.toString('utf8')).slice(-1000)));
  const exit = (ch: typeof make) => new Promise<number | null>((resolve) => {
    let code: number | null = null;
    ch.on('exit', (c: number | null) => (code = c));
    ch.on('close', () => resolve(code));
  });
  const made = exit(make);
  const taken = exit(take);
  for await (const chunk of make as AsyncIterable<Buffer>) {
    sent += chunk.length;
    if (sent > SUBAGENT_BUNDLE_MAX_BYTES) {
      make.close();
      take.close();
      throw new FactoryError('SandboxError', `the subagent's work is larger than ${SUBAGENT_BUNDLE_MAX_BYTES / (1024 * 1024)} MiB as a bundle; it was not brought over and its sandbox is kept`);
    }
    if (!take.write(chunk)) await drainedOrClosed(take);
  }
  take.end();
  const [mc, tc] = await Promise.all([made, taken]);
  if (mc !== 0) throw new FactoryError('SandboxError', `bundling the subagent's work failed (exit ${mc}): ${makeErr.trim().slice(0, 300)}`);
  if (tc !== 0) throw new FactoryError('SandboxError', `bringing the subagent's work into the session's sandbox failed (exit ${tc}): ${takeErr.trim().slice(0, 300)}`);
  return Number(takeOut.trim().split('\n').pop()) || 0;
}
