// The life of a task (DESIGN.md): create → provision → seed → pipeline → pull-back
// → review → approve/reject, plus cancel, retry, destroy and remove. Every phase and
// sandbox change goes through the tables in task-life.ts, is persisted and announced.
// The sandbox itself (seed, boot, teardown, leftovers) is the provisioner's. After a
// restart, active tasks are interrupted; Retry runs them in a fresh sandbox.
import fsp from 'node:fs/promises';
import { type FactoryEvent } from '../../common/contract.js';
import { FactoryError } from '../../common/errors.js';
import type { ReviewConfirmationKind, ReviewFileDetail } from '../../common/review.js';
import { isQuickSandbox, type FanoutTag, type HookSession, type PullbackReview, type StageName, type StageResult, type Task } from '../../common/domain.js';
import type { EgressRefusal, EgressRule } from '../../common/egress.js';
import type { TaskPreflight } from '../../common/environment.js';
import type { CredentialRef } from '../../common/credentials.js';
import { missingAgentCredential } from '../../common/agent-credentials.js';
import { loadPipelineConfig, type PipelineConfig } from '../pipeline/config.js';
import type { PipelineRunner } from '../pipeline/stage-runner.js';
import type { PullbackQuarantine } from '../pullback/quarantine.js';
import type { Logger } from '../log/logger.js';
import type { AppPaths } from '../state/paths.js';
import type { Settings } from '../state/settings.js';
import type { StateStore, TaskRecord } from '../state/state-store.js';
import { inspectRepo } from './host-repo.js';
import type { LiveSandbox } from '../sandbox/live-sandboxes.js';
import { planRetry } from './retry-plan.js';
import type { QemuDriverPort, SandboxSshPort } from '../sandbox/sandbox-ports.js';
import { bootedSandboxInfo, checkAborted, type SandboxProvisioner } from './sandbox-provisioner.js';
import type { SetupRunner } from './setup-step.js';
import type { TaskEnvironment } from './task-environment.js';
import type { LayerPort } from './environment-ports.js';
import { Slots } from './slots.js';
import { stoppedVmError } from './stopped-vm-error.js';
import { TaskBook } from './task-book.js';
import { cancelledStages, interruption, isActive, isLive } from './task-life.js';
import { startQuickSandbox, type FirstShellSink, type QuickInput } from './quick-sandbox.js';
import { startAgentSession, type AgentSessionHost, type AgentSessionInput } from './agent-session.js';
import { SandboxLifetime } from './sandbox-lifetime.js';
import { setArchived } from './task-archive.js';
import { TaskReviews } from './task-review.js';
import { runSetupPhase } from './setup-phase.js';
import { adoptForkedRepo, forkPoint, type ForkPoint } from './sandbox-fork.js';
import type { PooledSandbox } from '../pool/warm-pool.js';

export interface TaskServiceDeps<Image> {
  paths: AppPaths;
  store: StateStore;
  settings: () => Settings;
  /** Only asked whether QEMU is installed, before a task is created; the provisioner boots. */
  qemu: Pick<QemuDriverPort<Image>, 'checkInstalled'>;
  provisioner: SandboxProvisioner<Image>;
  runner: PipelineRunner;
  quarantine: PullbackQuarantine;
  /** The repository's environment: plan, egress, cached layers. */
  environment: TaskEnvironment;
  setup: SetupRunner;
  emit: (e: FactoryEvent) => void;
  log: Logger;
  /** Where a quick sandbox's first shell goes when its restore starts one (first-shells.ts). */
  firstShell?: FirstShellSink;
  /** Terminals and agents for agent sessions (agent-session.ts); without them none can start. */
  agentSessions?: AgentSessionHost;
  /** The stored credentials (references only): an agent without its own is refused at Start. Absent: not checked. */
  credentials?: () => Promise<CredentialRef[]>;
  /** What other services keep of a task (terminal logs, leak check records), dropped when it is removed. */
  forgetTask?: (taskId: string) => Promise<void>;
}

export interface CreateTaskInput {
  repoPath: string;
  title: string;
  baseRef?: string;
  includeUncommitted?: boolean;
  agent?: string;
  /** A Claude Code session's sandbox (hooks mode) or a subagent's: its record of leak checks starts with the task. */
  session?: HookSession;
  /** Git push through the proxy to refs/heads/factory/<id>/* (default off). */
  allowPush?: boolean;
  /** Where the sandbox runs: 'local' (default), a sandbox host's name or 'any' (issue 14). */
  host?: string;
  /** The repository's own egress requests the user approved at Start. */
  egressApproval?: { rules: EgressRule[]; remember: boolean };
  /** One way of a task run N ways (main/fanout/): tagged so the board and the comparison group it. */
  fanout?: FanoutTag;
  /** Held back (shown queued, no slot taken) until this settles: a way waits for its group's preparation; a rejection fails it. */
  startGate?: Promise<void>;
}

/** A task's background work in this app run, and the sandbox it runs in. */
interface Runtime {
  abort: AbortController;
  /** Settles when the task's background work (provision → pull-back) has ended. */
  done?: Promise<void>;
  sandbox?: LiveSandbox;
  /** Releases the cached layer the sandbox boots on (eviction and delete keep it until then). */
  releaseLayer?: () => void;
}

export class TaskService<Image = unknown> {
  private readonly book: TaskBook;
  private readonly runtimes = new Map<string, Runtime>();
  /** The result from the pull-back on: review, artifacts, approve and reject (task-review.ts). */
  private readonly reviews: TaskReviews;
  private readonly slots: Slots;
  /** After Approve or Reject: destroy the sandbox, or keep it until a deadline (sandbox-lifetime.ts). */
  private readonly lifetime: SandboxLifetime;
  private readonly destroying = new Map<string, Promise<Task>>();
  private disposed = false;
  /** Calls that end by registering a run (create, retry, a quick sandbox, an agent session): dispose waits for them. */
  private readonly starting = new Set<Promise<unknown>>();

  constructor(private readonly deps: TaskServiceDeps<Image>) {
    this.slots = new Slots(() => deps.settings().maxParallelTasks);
    this.book = new TaskBook({ store: deps.store, emit: deps.emit });
    this.lifetime = new SandboxLifetime({
      keepMinutes: () => deps.settings().keepSandboxAfterDecisionMinutes,
      destroy: (taskId) => this.destroy(taskId),
      setKeptUntil: async (taskId, keptUntil) => {
        const record = this.record(taskId);
        await this.book.update(record, { sandbox: { ...record.task.sandbox, keptUntil } });
      },
      log: deps.log,
    });
    this.reviews = new TaskReviews({ paths: deps.paths, book: this.book, quarantine: deps.quarantine, log: deps.log, afterDecision: (task) => this.lifetime.afterDecision(task) });
  }

  /** Loads persisted tasks; what was active when the app stopped is interrupted, and its QEMU reaped. */
  async init(): Promise<void> {
    await this.book.loadAfterRestart((record) =>
      this.deps.provisioner.reapLeftovers(record.task.id, {
        sandboxDir: record.sandboxDir ?? this.sandboxDir(record.task.id),
        ...(record.qemuPid ? { qemuPid: record.qemuPid } : {}),
      }),
    );
    // A pull-back the crash cut left a partial quarantine that nothing would ever read.
    // Found by the soak (issue 30, seed 3): the app SIGKILLed while a task was pulling back.
    for (const task of this.book.tasks()) {
      await this.reviews.dropUnreviewable(this.record(task.id)).catch((err: unknown) => this.deps.log.warn('removing a stale quarantine failed', { taskId: task.id, err }));
    }
    this.lifetime.resume(this.book.tasks());
  }

  list(): Task[] {
    return this.book.tasks();
  }

  get(taskId: string): Task {
    return this.record(taskId).task;
  }

  /** Validates everything the user can fix before a task exists, then starts it in the background. */
  create(input: CreateTaskInput): Promise<Task> {
    return this.admit(() => this.createAndStart(input));
  }

  private async createAndStart(input: CreateTaskInput): Promise<Task> {
    const title = input.title.trim();
    if (!title) throw new FactoryError('InvalidInput', 'title: the task text is empty');
    const repo = await inspectRepo(input.repoPath, input.baseRef);
    const config = await loadPipelineConfig(repo.repoPath, repo.baseCommit);
    const agent = input.agent ?? config.agent ?? this.deps.settings().defaultAgent;
    await this.checkAgentCredential(agent);
    const qemu = await this.deps.qemu.checkInstalled();
    if (!qemu.ok) {
      throw new FactoryError('QemuMissing', `QEMU is not installed. ${qemu.installHint ?? 'Install qemu-system and qemu-utils with your package manager.'}`);
    }
    const plan = await this.deps.environment.plan(repo.repoPath, repo.baseCommit, config);
    const task = this.book.newTask({ ...repo, title, agent, allowPush: !!input.allowPush, ...(input.host ? { host: input.host } : {}) });
    if (input.session) task.session = input.session;
    const id = task.id;
    // Fails here, not in the background, when the agent is unknown.
    this.deps.runner.executorFor(task, config);
    task.egress = this.deps.environment.approve(repo.repoPath, plan, input.egressApproval);
    task.setup = this.deps.environment.initialSetup(plan);
    if (input.fanout) task.fanout = input.fanout;
    // A fresh sandbox for a retry must get the same seed and environment: both are kept from the start.
    await this.deps.provisioner.rememberSeed(id, !!input.includeUncommitted);
    await this.deps.environment.save(id, plan);
    const record: TaskRecord = { version: 1, task };
    await this.book.add(record);
    const runtime: Runtime = { abort: new AbortController() };
    this.runtimes.set(id, runtime);
    runtime.done = this.background(record, runtime, (signal) => this.provisionAndRun(record, runtime, signal, config), input.startGate);
    return { ...task };
  }

  /** A quick sandbox (quick-sandbox.ts): a fresh VM and a shell, optionally a repository seeded, no pipeline. */
  quick(input: QuickInput): Promise<Task> {
    const d = this.deps;
    return this.admit(() => startQuickSandbox({ ...this.sandboxParts(), ...(d.firstShell ? { firstShell: d.firstShell } : {}) }, input));
  }

  /**
   * Runs a call that ends by registering a task's run, unless the service is shutting down. Dispose
   * waits for the calls under way: a run registered after it aborted the others would go on writing
   * the task's state after the app ended (into a data folder that may be gone by then).
   */
  private admit<T>(start: () => Promise<T>): Promise<T> {
    if (this.disposed) return Promise.reject(new FactoryError('ShuttingDown', 'the app is shutting down'));
    const started = start();
    this.starting.add(started);
    const settled = () => void this.starting.delete(started);
    started.then(settled, settled);
    return started;
  }

  /** What a sandbox started outside the pipeline (quick sandbox, agent session) needs of the service. */
  private sandboxParts() {
    const d = this.deps;
    return {
      book: this.book,
      runtimes: this.runtimes,
      provisioner: d.provisioner,
      environment: d.environment,
      qemu: d.qemu,
      log: d.log,
      disposed: () => this.disposed,
      teardown: (r: TaskRecord, rt: Runtime) => this.teardown(r, rt),
    };
  }

  /** An agent session (agent-session.ts): the agent's TUI in a fresh sandbox, its work to review when it exits. */
  async agentSession(input: AgentSessionInput): Promise<Task> {
    const d = this.deps;
    if (!d.agentSessions) throw new FactoryError('NoSandbox', 'this app runs no agent sessions');
    const sessions = d.agentSessions;
    return this.admit(async () => {
      await this.checkAgentCredential(input.agent);
      return startAgentSession(
        {
          ...sessions,
          ...this.sandboxParts(),
          pullBack: (r, ssh) => this.reviews.pullBack(r, ssh),
          aborted: (r) => this.aborted(r),
        },
        input,
      );
    });
  }

  /** What Start would do for a repository: its environment, the egress it asks for, whether setup is cached, the agent and what it lacks. */
  async preflight(input: { repoPath: string; baseRef?: string; agent?: string }): Promise<TaskPreflight> {
    const repo = await inspectRepo(input.repoPath, input.baseRef);
    const config = await loadPipelineConfig(repo.repoPath, repo.baseCommit);
    const plan = await this.deps.environment.plan(repo.repoPath, repo.baseCommit, config);
    const name = input.agent || config.agent || this.deps.settings().defaultAgent;
    const credentialMissing = await this.agentCredentialMissing(name);
    return { ...(await this.deps.environment.preflight(repo.repoPath, plan)), agent: { name, ...(credentialMissing ? { credentialMissing } : {}) } };
  }

  /** The missing credential of an agent in words, when credentials are known here. */
  private async agentCredentialMissing(agent: string): Promise<string | undefined> {
    return this.deps.credentials ? missingAgentCredential(agent, await this.deps.credentials()) : undefined;
  }

  /** Refuses an agent that could not sign in to its model provider: named now, not after setup. */
  private async checkAgentCredential(agent: string): Promise<void> {
    const missing = await this.agentCredentialMissing(agent);
    if (missing) throw new FactoryError('AgentCredentialMissing', `${agent}: ${missing}`);
  }

  /** Lets a task's sandbox reach a destination (live), for the task or its repository from now on. */
  async allowEgress(taskId: string, rule: EgressRule, scope: 'task' | 'repository'): Promise<Task> {
    const record = this.record(taskId);
    await this.book.update(record, { egress: this.deps.environment.allow(record.task, rule, scope) });
    return { ...record.task };
  }

  /** A destination the task's sandbox was refused (from the broker): shown on the task with its Allow. */
  noteRefusal(taskId: string, refusal: EgressRefusal): void {
    const record = this.book.find(taskId);
    if (!record) return;
    this.book
      .update(record, { egress: this.deps.environment.withRefusal(record.task, refusal) })
      .catch((err: Error) => this.deps.log.warn('recording an egress refusal failed', { taskId, err }));
  }

  /** Stops the running stage (the agent's processes in the guest are killed); the sandbox stays for inspection. */
  async cancel(taskId: string): Promise<Task> {
    const record = this.record(taskId);
    const runtime = this.runtimes.get(taskId);
    if (runtime && isActive(record.task.phase)) {
      runtime.abort.abort();
      await runtime.done;
    }
    return { ...this.record(taskId).task };
  }

  /**
   * Runs a failed, cancelled or interrupted task's pipeline again from
   * `fromStage` (default: the stage that failed, was cancelled or cut);
   * earlier stages keep their results. In the same sandbox while it runs;
   * when it is gone (the app stopped, QEMU died), in a fresh one seeded like the first.
   */
  retry(taskId: string, fromStage?: StageName, opts: { overrideReview?: boolean } = {}): Promise<Task> {
    return this.admit(() => this.retryNow(taskId, fromStage, opts));
  }

  private async retryNow(taskId: string, fromStage: StageName | undefined, opts: { overrideReview?: boolean }): Promise<Task> {
    const record = this.record(taskId);
    const t = record.task;
    const old = this.runtimes.get(taskId);
    const sb = old?.sandbox;
    const inPlace = !!sb?.vm && !!sb.ssh && sb.seeded && t.sandbox.status === 'running';
    if (!inPlace && isLive(t.sandbox.status) && ['failed', 'cancelled', 'interrupted'].includes(t.phase)) {
      throw new FactoryError('NoSandbox', `task ${taskId} has no running, seeded sandbox to retry in (it is ${t.sandbox.status}); destroy it to retry in a fresh one`);
    }
    const plan = planRetry(t, fromStage, { ...opts, fresh: !inPlace });
    // Claimed synchronously, so a second retry call is refused above.
    const before = record.task;
    const { error: _previousError, ...rest } = t;
    record.task = rest;
    try {
      this.book.move(record, inPlace ? 'retry' : 'retryFresh', { stages: plan.stages, ...(plan.setup ? { setup: plan.setup } : {}) });
    } catch (err) {
      record.task = before;
      throw err;
    }
    let config: PipelineConfig;
    try {
      await old?.done;
      if (!inPlace) await this.deps.provisioner.checkSeed(t);
      config = await loadPipelineConfig(t.repoPath, t.baseCommit);
      if (!inPlace) await this.deps.provisioner.clearForFresh(taskId, sb, record.sandboxDir ?? this.sandboxDir(taskId));
    } catch (err) {
      record.task = before;
      throw err;
    }
    await this.book.persist(record);
    // A fresh abort controller: the old one may have fired (cancel).
    const rt: Runtime = inPlace ? Object.assign(old!, { abort: new AbortController() }) : { abort: new AbortController() };
    this.runtimes.set(taskId, rt);
    rt.done = this.background(record, rt, (signal) =>
      !inPlace
        ? this.provisionAndRun(record, rt, signal, config, plan.start)
        : plan.setup
          ? this.setUpAgainAndRun(record, rt, config)
          : this.runPipelineAndPullback(record, rt, config, plan.start),
    );
    return { ...record.task };
  }

  /** Ends the VM and deletes its overlay and the task's seed; a result in review stays approvable. One at a time per task. */
  destroy(taskId: string): Promise<Task> {
    const under = this.destroying.get(taskId);
    if (under) return under;
    const work = this.destroyOnce(taskId).finally(() => this.destroying.delete(taskId));
    this.destroying.set(taskId, work);
    return work;
  }

  /** Changes the record of a Claude Code session's task (its leak checks, a subagent's outcome); saved and announced. */
  async noteSession(taskId: string, change: (session: HookSession | undefined) => HookSession): Promise<Task> {
    const record = this.record(taskId);
    await this.book.update(record, { session: change(record.task.session) });
    return { ...record.task };
  }

  /** Hides a task that is not running from the board, or restores it (task-archive.ts). */
  async archive(taskId: string, archived: boolean): Promise<Task> {
    return setArchived(this.book, this.record(taskId), archived);
  }

  private async destroyOnce(taskId: string): Promise<Task> {
    const record = this.record(taskId);
    this.lifetime.forget(taskId);
    // Its deadline no longer holds: the sandbox goes now (no update says "kept until" while it stops).
    if (record.task.sandbox.keptUntil) {
      const { keptUntil: _done, ...sandbox } = record.task.sandbox;
      await this.book.update(record, { sandbox });
    }
    const runtime = this.runtimes.get(taskId);
    if (runtime) {
      runtime.abort.abort();
      await runtime.done;
      await this.teardown(record, runtime);
      this.runtimes.delete(taskId);
    }
    if (record.task.sandbox.status === 'lost') {
      await this.deps.provisioner.reapLeftovers(taskId, { sandboxDir: record.sandboxDir ?? this.sandboxDir(taskId) });
      delete record.sandboxDir;
      await this.book.sandboxMove(record, 'stopped');
    }
    await fsp.rm(this.workDir(taskId), { recursive: true, force: true });
    // A quick sandbox has nothing after its sandbox: destroying it ends it.
    if (isQuickSandbox(record.task) && isActive(record.task.phase)) await this.book.transition(record, 'close');
    return { ...this.record(taskId).task };
  }

  /**
   * Removes a task that is not running, with its sandbox (and its serial log), review,
   * quarantine and seed; what other services keep of it goes too (forgetTask). The branch an approval made stays.
   */
  async remove(taskId: string): Promise<void> {
    const record = this.record(taskId);
    if (isActive(record.task.phase)) throw new FactoryError('TaskActive', `task ${taskId} is ${record.task.phase}; cancel it before removing it`);
    await this.destroy(taskId);
    // Destroy keeps the sandbox's folder for its serial log; removing the task takes its logs too.
    await fsp.rm(record.sandboxDir ?? this.sandboxDir(taskId), { recursive: true, force: true });
    await this.reviews.remove(taskId);
    await this.book.remove(taskId);
    await this.deps.forgetTask?.(taskId);
  }

  async review(taskId: string): Promise<PullbackReview> {
    return this.reviews.review(this.record(taskId));
  }

  /** One file of a result in review, while it is in quarantine: its own patch and leading bytes. */
  async reviewFile(taskId: string, filePath: string): Promise<ReviewFileDetail> {
    return this.reviews.file(this.record(taskId), filePath);
  }

  /** The diff from one result in review to another (two ways of one task). */
  async diffResults(fromTaskId: string, toTaskId: string): Promise<{ patch: string; patchTruncated: boolean }> {
    return this.reviews.diffBetween(this.record(fromTaskId), this.record(toTaskId));
  }

  /** Creates the branch; `confirm` names what the review could not show (task-review.ts). */
  async approve(taskId: string, opts: { confirm?: readonly ReviewConfirmationKind[] } = {}): Promise<Task> {
    return this.reviews.approve(this.record(taskId), opts);
  }

  async reject(taskId: string): Promise<Task> {
    return this.reviews.reject(this.record(taskId));
  }

  /** One artifact's text (task-review.ts). */
  async artifact(taskId: string, name: string): Promise<{ name: string; text: string; truncated: boolean }> {
    return this.reviews.artifact(this.record(taskId), name);
  }

  /** A hooks session's sandbox is ready: it keeps a spare fork for its subagents from now on (when the warm pool is on). */
  keepSpareFork(taskId: string): void {
    this.deps.provisioner.spares?.keep(taskId);
  }

  /** Ends the sandbox's spare fork and makes no more. */
  async dropSpareFork(taskId: string): Promise<void> {
    await this.deps.provisioner.spares?.drop(taskId);
  }

  /** The live SSH connection of a task's sandbox (for interactive shells). */
  sandboxSsh(taskId: string): SandboxSshPort {
    this.record(taskId);
    const ssh = this.deps.provisioner.live.ssh(taskId);
    if (!ssh) throw new FactoryError('NoSandbox', `task ${taskId} has no running sandbox`);
    // Every use of a hooks session's sandbox makes its spare fork stale.
    return this.deps.provisioner.spares?.track(taskId, ssh) ?? ssh;
  }

  /** Last accel the driver chose, for system.status. */
  lastAccel(): string | undefined {
    return this.book.tasks().map((t) => t.sandbox.accel).filter(Boolean).pop();
  }

  /** Tears down every sandbox: nothing is left running. Active tasks are interrupted, retryable after a restart. */
  async dispose(): Promise<void> {
    this.disposed = true;
    await this.lifetime.dispose();
    // The runs under way stop first (a retry waits for its task's last run to end), then the calls
    // still starting one finish, and what they registered is stopped with the rest.
    for (const rt of this.runtimes.values()) rt.abort.abort();
    await Promise.allSettled(this.starting);
    const live = [...this.runtimes.entries()];
    for (const [, rt] of live) rt.abort.abort();
    await Promise.all(
      live.map(async ([id, rt]) => {
        await rt.done;
        const record = this.book.find(id);
        // Shutting down goes on: the next start reaps what this teardown left.
        if (record) await this.teardown(record, rt).catch((err: Error) => this.deps.log.warn('teardown at shutdown failed', { taskId: id, err }));
        this.runtimes.delete(id);
      }),
    );
    await this.deps.store.flush();
  }

  // ---------------------------------------------------------------------------

  private record(taskId: string): TaskRecord {
    return this.book.get(taskId);
  }

  private workDir(taskId: string): string {
    return this.deps.provisioner.workDir(taskId);
  }

  private sandboxDir(taskId: string): string {
    return this.deps.provisioner.sandboxDir(taskId);
  }

  /** The end of a run that was aborted: cancelled by the user, or interrupted by the app stopping. */
  private async aborted(record: TaskRecord, stages: StageResult[] = record.task.stages): Promise<void> {
    if (this.disposed) {
      await this.book.transition(record, 'interrupt', interruption({ ...record.task, stages }, record.task.phase));
      return;
    }
    await this.book.transition(record, 'cancel', { stages: cancelledStages(stages) });
  }

  /** Runs a task's background work in a slot of the parallel limit; its end, however it comes, is recorded. */
  private background(record: TaskRecord, rt: Runtime, work: (signal: AbortSignal) => Promise<void>, gate?: Promise<void>): Promise<void> {
    return (async () => {
      let release: (() => void) | undefined;
      try {
        if (gate) await untilAborted(gate, rt.abort.signal);
        release = await this.slots.acquire(rt.abort.signal);
        await work(rt.abort.signal);
      } catch (err) {
        await this.endRun(record, rt, err);
      } finally {
        release?.();
      }
    })();
  }

  /**
   * Seed bundle, a sandbox, seeding, then the pipeline (from `startAt` when a
   * retry gives the task a fresh sandbox).
   */
  private async provisionAndRun(record: TaskRecord, rt: Runtime, signal: AbortSignal, config: PipelineConfig, startAt?: StageName): Promise<void> {
    const task = () => record.task;
    const provisioner = this.deps.provisioner;
    // A subagent's sandbox is forked from its session's running one when it can be: no seed, no setup.
    const fork = await this.forkFromParent(task());
    checkAborted(signal);
    // Seed bundle first: it reads the host repo as it is now (a retry reuses the first one).
    const bundlePath = fork ? undefined : await provisioner.seedBundle(task());
    checkAborted(signal);

    const env = this.deps.environment;
    const plan = await env.load(task().id);
    // A layer only for the tree it was made from: a seed with uncommitted changes is another tree.
    const seedCommit = fork ? undefined : await provisioner.seedCommit(task().id);
    const cached = fork ? undefined : await env.layerFor(plan, seedCommit);
    rt.releaseLayer?.();
    rt.releaseLayer = cached?.release;

    const sandbox = (rt.sandbox = provisioner.open(task()));
    await this.book.transition(record, 'provision', { sandbox: {} });
    const onLayer = fork
      ? { backingDisk: fork.backingDisk, ...(fork.warm ? { warm: fork.warm } : {}), ...(fork.memoryMb ? { memoryMb: fork.memoryMb } : {}), ...(fork.spare ? { spare: fork.spare } : {}) }
      : cached
        ? { backingDisk: cached.layer.disk, ...(cached.layer.warm ? { warm: cached.layer.warm } : {}) }
        : {};
    let vm;
    try {
      vm = await this.bootWatched(record, rt, sandbox, signal, { ...(plan.memoryMb ? { memoryMb: plan.memoryMb } : {}), ...onLayer });
    } finally {
      await fork?.dropMemory().catch((err: unknown) => this.deps.log.warn('removing a fork’s saved memory failed', { taskId: task().id, err }));
    }
    await this.book.transition(
      record,
      'booted',
      { sandbox: bootedSandboxInfo(vm) },
      // A remote sandbox has no local process to reap (pid 0).
      { sandboxDir: vm.sandboxDir, ...(vm.pid > 0 ? { qemuPid: vm.pid } : {}) },
    );
    checkAborted(signal);

    let adopted: Promise<void> | undefined;
    if (bundlePath) await provisioner.seed(sandbox, task(), bundlePath, cached ? { onLayer: { installDirs: plan.installDirs ?? [] } } : {});
    // A fork has the session's repository as it was: its work is what comes after the session's HEAD then.
    // It is taken over while the pipeline prepares the guest (under emulation each is a round trip of
    // a few hundred milliseconds); the first stage waits for it, and fails with it.
    else {
      const ssh = await provisioner.connect(sandbox);
      adopted = adoptForkedRepo(ssh, task().branch, sandbox.guestEnv.FACTORY_GIT_URL).then((baseCommit) => this.book.update(record, { baseCommit }));
      adopted.catch(() => undefined); // awaited before the first stage, which fails with it
      sandbox.seeded = true;
    }
    checkAborted(signal);
    await this.book.transition(record, 'seeded');
    const preparesWays = task().fanout?.way === 1 && task().fanout!.ways > 1;
    const ready = await runSetupPhase({ book: this.book, environment: env, setup: this.deps.setup, log: this.deps.log }, {
      record,
      sandbox: rt.sandbox,
      signal: rt.abort.signal,
      plan,
      cacheable: !fork && env.layerAllowed(plan, seedCommit),
      ...(cached ? { cached: cached.layer } : {}),
      ...(fork ? { forkedFrom: task().session?.subagent?.parentTaskId ?? '', forkedSpare: !!fork.spare } : {}),
      aborted: () => this.aborted(record),
      // The preparation of N ways: the layer's memory in its shared form before the ways, waiting on
      // this setup, start together (else the first of them makes it while the others wait).
      ...(preparesWays ? { layerMade: (made: LayerPort) => this.deps.provisioner.shareLayerMemory(made, plan.memoryMb) } : {}),
    });
    if (!ready) return;
    if (preparesWays && task().setup?.layer?.reused === false) {
      await this.moveOntoLayer(record, rt, signal, plan, seedCommit);
    }
    await this.runPipelineAndPullback(record, rt, config, startAt, adopted);
  }

  /** Boots the task's sandbox; a QEMU that ends unasked is then recorded as the sandbox's loss. */
  private async bootWatched(record: TaskRecord, rt: Runtime, sandbox: LiveSandbox, signal: AbortSignal, opts: Parameters<SandboxProvisioner['boot']>[2]) {
    const vm = await this.deps.provisioner.boot(sandbox, signal, { egress: this.deps.environment.rulesFor(record.task), ...opts });
    void vm.exited
      .then(() => this.onVmExited(record, rt, sandbox))
      .catch((err: Error) => this.deps.log.warn("recording its sandbox's end failed", { taskId: record.task.id, err }));
    return vm;
  }

  /**
   * Way 1 of a task run N ways, once its setup made the layer the other ways boot on: its sandbox
   * is replaced by one restored from that layer, as theirs are, and seeded afresh. It then maps the
   * layer's memory with them instead of keeping all that its setup touched (no balloon gives the
   * guest's freed pages back): about 800 MiB less of a 1 GiB guest. The pipeline has not started;
   * a layer that is gone already (evicted) leaves the sandbox as it is.
   */
  private async moveOntoLayer(record: TaskRecord, rt: Runtime, signal: AbortSignal, plan: Awaited<ReturnType<TaskEnvironment['load']>>, seedCommit: string | undefined): Promise<void> {
    const task = () => record.task;
    const cached = await this.deps.environment.layerFor(plan, seedCommit);
    if (!cached) return;
    const provisioner = this.deps.provisioner;
    const sandboxDir = record.sandboxDir ?? this.sandboxDir(task().id);
    // The old sandbox goes as any does (its extensions' last look, its disk; it held no layer), then a
    // fresh one in its folder, on the layer held since before (no eviction in between).
    await this.teardown(record, rt);
    rt.releaseLayer = cached.release;
    await provisioner.reapLeftovers(task().id, { sandboxDir });
    checkAborted(signal);
    const sandbox = (rt.sandbox = provisioner.open(task()));
    await this.book.update(record, { sandbox: { status: 'booting' } });
    const vm = await this.bootWatched(record, rt, sandbox, signal, {
      ...(plan.memoryMb ? { memoryMb: plan.memoryMb } : {}),
      backingDisk: cached.layer.disk,
      ...(cached.layer.warm ? { warm: cached.layer.warm } : {}),
    });
    await this.book.update(record, { sandbox: { ...bootedSandboxInfo(vm), status: 'running' } }, { sandboxDir: vm.sandboxDir, ...(vm.pid > 0 ? { qemuPid: vm.pid } : {}) });
    checkAborted(signal);
    await provisioner.seed(sandbox, task(), await provisioner.seedBundle(task()), { onLayer: { installDirs: plan.installDirs ?? [] } });
    this.deps.log.info('the preparation of a task run N ways moved onto its layer', { taskId: task().id, layer: cached.layer.id });
  }

  /**
   * A subagent's fork point: its session's spare fork while that is still the sandbox's
   * state (spare-forks.ts), else its session's running local sandbox, frozen with its memory.
   * Undefined (a fresh sandbox from the repository) when there is none or it cannot be
   * forked (a remote sandbox, a driver without freezing): the reason is logged.
   */
  private async forkFromParent(task: Task): Promise<(ForkPoint & { spare?: PooledSandbox }) | undefined> {
    const parentId = task.session?.subagent?.parentTaskId;
    if (!parentId) return undefined;
    const parent = this.runtimes.get(parentId)?.sandbox;
    if (!parent?.vm || this.book.find(parentId)?.task.sandbox.status !== 'running') {
      this.deps.log.info('the session has no running sandbox to fork: the subagent gets a fresh one', { taskId: task.id, parentTaskId: parentId });
      return undefined;
    }
    const spare = await this.deps.provisioner.spares?.take(parentId, task.id);
    if (spare) return { backingDisk: spare.backingDisk, memoryMb: spare.memoryMb, spare: spare.pooled, dropMemory: async () => {} };
    try {
      return await forkPoint(parent);
    } catch (err) {
      this.deps.log.warn('forking the session’s sandbox failed: the subagent gets a fresh one', { taskId: task.id, parentTaskId: parentId, err });
      return undefined;
    }
  }

  /** A retry in the sandbox whose setup did not finish: setup runs again there, then the whole pipeline. */
  private async setUpAgainAndRun(record: TaskRecord, rt: Runtime, config: PipelineConfig): Promise<void> {
    const ready = await runSetupPhase({ book: this.book, environment: this.deps.environment, setup: this.deps.setup, log: this.deps.log }, {
      record,
      sandbox: rt.sandbox,
      signal: rt.abort.signal,
      plan: await this.deps.environment.load(record.task.id),
      // What the first setup left (files, processes it started) would go into the layer: the next task sets up afresh.
      notCacheable: 'set up again in the sandbox of a setup that did not finish',
      aborted: () => this.aborted(record),
    });
    if (ready) await this.runPipelineAndPullback(record, rt, config);
  }

  private async endRun(record: TaskRecord, rt: Runtime, err: unknown): Promise<void> {
    // The run is over either way: a failure to record a step is logged, never an
    // unhandled rejection, and never keeps the next step (the task's end) from happening.
    const step = (what: string, work: () => Promise<void>) =>
      work().catch((e: unknown) => this.deps.log.warn(`${what} failed`, { taskId: record.task.id, err: e }));
    const sb = rt.sandbox;
    // The boot ended before a VM existed: nothing runs, the extensions go now.
    if (sb && !sb.vm && record.task.sandbox.status === 'booting') {
      await step('tearing down a sandbox that never booted', async () => {
        await this.deps.provisioner.teardown(sb);
        await this.book.sandboxMove(record, 'bootEnded');
      });
    }
    const why = rt.abort.signal.aborted ? err : await stoppedVmError(record.task.phase, sb?.vm, err);
    await step('recording the end of its run', () => (rt.abort.signal.aborted ? this.aborted(record) : this.book.fail(record, why)));
    // A run cut while pulling back leaves nothing to review.
    await step('removing the quarantine of a run that ended without a review', () => this.reviews.dropUnreviewable(record));
  }

  /** Pipeline (whole, or from one stage on a retry), then pull-back into quarantine and review. */
  private async runPipelineAndPullback(record: TaskRecord, rt: Runtime, config: PipelineConfig, startAt?: StageName, before?: Promise<void>): Promise<void> {
    const task = () => record.task;
    const ssh = rt.sandbox?.ssh;
    if (!ssh) throw new FactoryError('NoSandbox', `task ${task().id} has no running sandbox`);
    // The environment's own variables (pipeline.json environment.env, devcontainer containerEnv) reach every stage.
    const plan = await this.deps.environment.load(task().id).catch(() => undefined);
    const outcome = await this.deps.runner.run({
      task: task(),
      config: plan && Object.keys(plan.env).length ? { ...config, env: { ...plan.env, ...config.env } } : config,
      ssh,
      signal: rt.abort.signal,
      guestEnv: rt.sandbox?.guestEnv ?? {},
      beforeStage: async (stage: StageName) => {
        await before;
        await this.deps.environment.setStep(task().id, stage);
      },
      ...(startAt ? { startAt, previous: task().stages } : {}),
      onStages: (stages: StageResult[]) => {
        // The next update or the end of the run saves the stages again; until then the log keeps the trace.
        this.book.update(record, { stages }).catch((err: Error) => this.deps.log.warn('saving a stage update failed', { taskId: task().id, err }));
      },
    });
    await this.reviews.keepArtifacts(record, ssh);
    if (outcome.status === 'cancelled') return this.aborted(record, outcome.stages);
    if (outcome.status === 'failed') {
      await this.book.transition(record, 'fail', { stages: outcome.stages, ...(outcome.error ? { error: outcome.error } : {}) });
      return;
    }

    await this.book.transition(record, 'pipelinePassed', { stages: outcome.stages });
    await this.reviews.pullBack(record, ssh);
  }

  private async onVmExited(record: TaskRecord, rt: Runtime, sandbox: LiveSandbox): Promise<void> {
    // Destroy sets its own status; an exit nobody asked for means the sandbox is gone.
    if (this.runtimes.get(record.task.id) !== rt || rt.sandbox !== sandbox || sandbox.tearingDown) return;
    if (record.task.sandbox.status !== 'running') return;
    delete record.qemuPid;
    await this.book.sandboxMove(record, 'crashed');
    await this.deps.provisioner.afterCrash(sandbox);
  }

  private async teardown(record: TaskRecord, rt: Runtime): Promise<void> {
    const sandbox = rt.sandbox;
    if (!sandbox) return;
    const status = record.task.sandbox.status;
    if (status === 'running') await this.book.sandboxMove(record, 'stop');
    await this.deps.provisioner.teardown(sandbox);
    rt.sandbox = undefined;
    rt.releaseLayer?.();
    rt.releaseLayer = undefined;
    if (status !== 'running' && status !== 'lost') return;
    delete record.qemuPid;
    delete record.sandboxDir;
    await this.book.sandboxMove(record, 'stopped');
  }
}

/** Waits for `gate`, or throws Cancelled as soon as the signal aborts (a queued way that is cancelled stops waiting). */
function untilAborted(gate: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(new FactoryError('Cancelled', 'the task was cancelled before it started'));
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(new FactoryError('Cancelled', 'the task was cancelled before it started'));
    signal.addEventListener('abort', onAbort, { once: true });
    gate.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
