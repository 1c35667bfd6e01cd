// Claude Code sessions and their sandboxes (issue 11, the session hooks).
// start: a task with the 'claude-session' agent for the repository at the
// session's cwd, ready when its sandbox is seeded and set up (a resumed
// session gets its own sandbox back). check (Stop, after every turn): the leak
// check only — the session goes on using the sandbox. end (SessionEnd): the
// leak check, then pull-back into review and destroy. A check that is not
// clean (a leak, an incomplete scan, an error) keeps the sandbox (quarantined,
// never reaped, not destroyed by a later end) for inspection. The reaper
// destroys the sandbox of a session whose process has been gone for the grace
// period.
import { FactoryError } from '../../common/contract.js';
import { workTreeTop } from '../git/host-git.js';
import type { LeakReport } from '../../common/credentials.js';
import type { ExecResult } from '../../common/contract.js';
import type { Task } from '../../common/domain.js';
import { execInSandbox } from '../exec/sandbox-exec.js';
import type { GuestSsh } from '../guest/guest-ssh.js';
import { SESSION_AGENT, type SessionHoldExecutor } from './session-hold.js';
import { processAlive } from './session-process.js';
import type { SessionRecord, SessionStore } from './session-store.js';
import { WorkingTreeSync, type SyncResult } from './working-tree-sync.js';

/**
 * How a routed command runs in the sandbox (as the agent user, argv only: the
 * command is never parsed by a shell on this computer): the stages'
 * environment (proxy settings, placeholders) when there is one, the session's
 * folder inside the repository, then the model's shell line.
 */
const ROUTED_SCRIPT = 'if [ -r /work/.factory/env.sh ]; then set -a; . /work/.factory/env.sh; set +a; fi; cd -- "$1" 2>/dev/null || cd /work/repo; exec bash -c "$2"';

export interface RunInput {
  sessionId: string;
  command: string;
  /** The folder relative to the repository's top. */
  dir: string;
  agentId?: string | undefined;
  timeoutSec?: number | undefined;
}

export interface SessionPorts {
  createTask(input: { repoPath: string; title: string; agent: string }): Promise<Task>;
  /** Throws TaskNotFound for an unknown id. */
  getTask(taskId: string): Task;
  cancelTask(taskId: string): Promise<Task>;
  destroyTask(taskId: string): Promise<Task>;
  leakCheck(taskId: string): Promise<LeakReport>;
  /** The live SSH connection of a task's sandbox; throws NoSandbox when it has none. */
  sandboxSsh(taskId: string): Pick<GuestSsh, 'exec'>;
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
        return { task: await this.waitReady(task.id), resumed: true };
      }
      // Kept after a leak finding: refused while the sandbox is there; once the user destroyed it, a new one.
      if (known.state === 'quarantined' && task && LIVE.has(task.sandbox.status)) {
        throw new FactoryError('InvalidTransition', `session ${input.sessionId}'s sandbox (task ${known.taskId}) is kept for inspection after a leak finding; destroy it in the app first`);
      }
      await store.remove(input.sessionId);
    }
    const repoPath = await repoTop(input.cwd);
    const task = await this.deps.ports.createTask({ repoPath, title: `Claude Code session ${input.sessionId}`, agent: SESSION_AGENT });
    await store.put({ sessionId: input.sessionId, taskId: task.id, repoPath, createdAt: new Date().toISOString(), state: 'active', ...pidOf(input) });
    this.deps.log.info('a Claude Code session got a sandbox', { sessionId: input.sessionId, taskId: task.id });
    return { task: await this.waitReady(task.id), resumed: false };
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
    const taskId = record.taskId;
    const ssh = this.deps.ports.sandboxSsh(taskId);
    let sync = this.syncs.get(taskId);
    if (!sync) this.syncs.set(taskId, (sync = new WorkingTreeSync(record.repoPath)));
    const synced = await sync.sync(ssh);
    const dir = input.dir === '' ? '/work/repo' : `/work/repo/${input.dir}`;
    const result = await execInSandbox(ssh, { argv: ['bash', '-c', ROUTED_SCRIPT, 'factory-routed', dir, input.command], ...(input.timeoutSec ? { timeoutSec: input.timeoutSec } : {}) });
    return { ...result, sync: synced, taskId };
  }

  /** Stop: the leak check only. */
  async check(sessionId: string): Promise<{ task: Task; report: LeakReport }> {
    const record = this.record(sessionId);
    const report = await this.checkOrKeep(record);
    return { task: this.deps.ports.getTask(record.taskId), report };
  }

  /**
   * The leak check, failing closed: a check that did not complete and find
   * nothing (a leak, caps exceeded, an error) keeps the sandbox for inspection.
   */
  private async checkOrKeep(record: SessionRecord): Promise<LeakReport> {
    let report: LeakReport;
    try {
      report = await this.deps.ports.leakCheck(record.taskId);
    } catch (err) {
      await this.quarantine(record, `the leak check failed: ${String(err)}`);
      throw err;
    }
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
      report = await this.checkOrKeep(record);
      if (report.verdict !== 'clean') return { report, destroyed: false };
    }
    // Kept after an earlier check that was not clean: a clean check now does not undo that; the user destroys it.
    if (LIVE.has(task.sandbox.status) && this.deps.store.get(record.sessionId)?.state === 'quarantined') return { ...(report ? { report } : {}), destroyed: false };
    if (hold.release(record.taskId)) await this.waitFinished(record.taskId);
    await ports.destroyTask(record.taskId);
    this.syncs.delete(record.taskId);
    await store.remove(record.sessionId);
    this.goneSince.delete(record.sessionId);
    return { ...(report ? { report } : {}), destroyed: true };
  }

  /** Kept for inspection: the held stage is stopped, the sandbox stays, the reaper leaves it alone. */
  private async quarantine(record: SessionRecord, why: string): Promise<void> {
    if (record.state !== 'quarantined') await this.deps.store.put({ ...record, state: 'quarantined' });
    this.deps.log.warn(`${why} in a session sandbox; it is kept for inspection`, { sessionId: record.sessionId, taskId: record.taskId });
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
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  private async waitFinished(taskId: string): Promise<void> {
    const deadline = Date.now() + 5 * 60_000;
    while (!FINISHED.has(this.deps.ports.getTask(taskId).phase) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
  }
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
