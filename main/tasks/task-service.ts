// The life of a task (DESIGN.md): create → provision → seed → pipeline →
// pull-back → review → approve/reject, plus cancel and destroy. Every change is
// persisted and announced as task.updated. Several tasks run at once, up to the
// limit in settings. After an app restart, tasks whose VM was running are
// marked with sandbox 'lost' and any QEMU process left behind is killed.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { FactoryError, type FactoryEvent } from '../../common/contract.js';
import type { ReviewConfirmationKind, ReviewFileDetail } from '../../common/review.js';
import { PullbackReview, type ErrorInfo, type StageName, type StageResult, type Task, type TaskPhase } from '../../common/domain.js';
import { loadPipelineConfig, type PipelineConfig } from '../pipeline/config.js';
import { GUEST_OUT_DIR, GUEST_REPO_DIR, asAgent, shellQuote } from '../pipeline/guest-shell.js';
import { PipelineRunner, pendingStages } from '../pipeline/stage-runner.js';
import { exportTaskBundle } from '../pullback/guest-export.js';
import type { PullbackQuarantine } from '../pullback/quarantine.js';
import { assertConfirmed } from '../pullback/review/confirmations.js';
import type { AppPaths } from '../state/paths.js';
import type { Settings } from '../state/settings.js';
import { writeFileAtomic, type StateStore, type TaskRecord } from '../state/state-store.js';
import { createSeedBundle, inspectRepo } from './host-repo.js';
import type { GuestForwardSpec, ImageStorePort, QmpPort, QemuDriverPort, RunningVmPort, SandboxExtension, SandboxSshPort } from './sandbox-ports.js';

export interface TaskServiceDeps<Image> {
  paths: AppPaths;
  store: StateStore;
  settings: () => Settings;
  images: ImageStorePort<Image>;
  qemu: QemuDriverPort<Image>;
  runner: PipelineRunner;
  quarantine: PullbackQuarantine;
  emit: (e: FactoryEvent) => void;
  /** Per-sandbox add-ons (credential proxy, ...), prepared before boot and released after the VM ends. */
  extensions?: SandboxExtension[];
  /** Guest boot limit; the driver's default when absent. */
  bootTimeoutMs?: number;
}

export interface CreateTaskInput {
  repoPath: string;
  title: string;
  baseRef?: string;
  includeUncommitted?: boolean;
  agent?: string;
  /** Git push through the proxy to refs/heads/factory/<id>/* (default off). */
  allowPush?: boolean;
}

interface Runtime {
  abort: AbortController;
  vm?: RunningVmPort;
  ssh?: SandboxSshPort;
  /** Settles when the task's background work (provision → pull-back) has ended. */
  done?: Promise<void>;
  /** Environment from the sandbox extensions for every guest command. */
  guestEnv: Record<string, string>;
  /** Extensions prepared for this sandbox, released when its VM is gone. */
  extensions: SandboxExtension[];
  /** The repository is cloned in the guest (a retry needs it). */
  seeded?: boolean;
  /** Set when we end the VM ourselves, so its exit is not taken for a crash. */
  tearingDown?: boolean;
}

const ACTIVE_PHASES: TaskPhase[] = ['creating', 'provisioning', 'seeding', 'running', 'pulling-back'];
const MAX_SEED_BUNDLE_BYTES = 2 * 1024 * 1024 * 1024;

/** Short, lowercase, starts with a letter: fits the API id pattern and a branch name. */
export function newTaskId(): string {
  const alphabet = 'abcdefghijkmnpqrstuvwxyz23456789';
  const bytes = randomBytes(8);
  let id = alphabet[bytes[0]! % 24]!; // a letter first
  for (let i = 1; i < 8; i++) id += alphabet[bytes[i]! % alphabet.length]!;
  return id;
}

/** A counting semaphore: the parallel-task limit. */
class Slots {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly limit: () => number) {}
  async acquire(signal: AbortSignal): Promise<() => void> {
    while (this.active >= this.limit()) {
      await new Promise<void>((resolve) => {
        const wake = () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
        // A cancelled waiter leaves the queue, so a release always wakes a live one.
        const onAbort = () => {
          const i = this.waiting.indexOf(wake);
          if (i >= 0) this.waiting.splice(i, 1);
          resolve();
        };
        this.waiting.push(wake);
        signal.addEventListener('abort', onAbort, { once: true });
      });
      if (signal.aborted) throw new FactoryError('Cancelled', 'the task was cancelled before it started');
    }
    this.active++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.active--;
      this.waiting.shift()?.();
    };
  }
}

export class TaskService<Image = unknown> {
  private readonly records = new Map<string, TaskRecord>();
  private readonly runtimes = new Map<string, Runtime>();
  private readonly reviews = new Map<string, PullbackReview>();
  private readonly slots: Slots;
  private disposed = false;

  constructor(private readonly deps: TaskServiceDeps<Image>) {
    this.slots = new Slots(() => deps.settings().maxParallelTasks);
  }

  /** Loads persisted tasks; anything that was in flight when the app stopped is marked as such. */
  async init(): Promise<void> {
    for (const record of await this.deps.store.loadTasks()) {
      this.records.set(record.task.id, record);
      const t = record.task;
      const wasLive = ['booting', 'running', 'stopping'].includes(t.sandbox.status);
      if (wasLive) await this.cleanupLeftovers(record);
      if (wasLive || ACTIVE_PHASES.includes(t.phase)) {
        const interrupted = ACTIVE_PHASES.includes(t.phase);
        record.task = {
          ...t,
          sandbox: wasLive ? { ...t.sandbox, status: 'lost' } : t.sandbox,
          ...(interrupted
            ? {
                phase: 'failed' as const,
                stages: t.stages.map((s) => (s.status === 'running' ? { ...s, status: 'failed' as const, summary: 'interrupted: the app stopped' } : s)),
                error: { name: 'Interrupted', message: `the app stopped while the task was ${t.phase}; its sandbox is gone` },
              }
            : {}),
        };
        delete record.qemuPid;
        await this.deps.store.saveTask(record);
      }
    }
  }

  list(): Task[] {
    return [...this.records.values()].map((r) => r.task).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  get(taskId: string): Task {
    return this.record(taskId).task;
  }

  /** Validates everything the user can fix before a task exists, then starts it in the background. */
  async create(input: CreateTaskInput): Promise<Task> {
    if (this.disposed) throw new FactoryError('ShuttingDown', 'the app is shutting down');
    const title = input.title.trim();
    if (!title) throw new FactoryError('InvalidInput', 'title: the task text is empty');
    const repo = await inspectRepo(input.repoPath, input.baseRef);
    const config = await loadPipelineConfig(repo.repoPath, repo.baseCommit);
    const agent = input.agent ?? config.agent ?? this.deps.settings().defaultAgent;
    const qemu = await this.deps.qemu.checkInstalled();
    if (!qemu.ok) {
      throw new FactoryError('QemuMissing', `QEMU is not installed. ${qemu.installHint ?? 'Install qemu-system and qemu-utils with your package manager.'}`);
    }
    let id = newTaskId();
    while (this.records.has(id)) id = newTaskId();
    const task: Task = {
      id,
      title,
      repoPath: repo.repoPath,
      baseRef: repo.baseRef,
      baseCommit: repo.baseCommit,
      branch: `factory/${id}`,
      createdAt: new Date().toISOString(),
      phase: 'creating',
      sandbox: { status: 'none' },
      stages: pendingStages(),
      agent,
      ...(input.allowPush ? { allowPush: true } : {}),
    };
    // Fails here, not in the background, when the agent is unknown.
    this.deps.runner.executorFor(task, config);
    const record: TaskRecord = { version: 1, task };
    this.records.set(id, record);
    await this.persist(record);
    const runtime: Runtime = { abort: new AbortController(), guestEnv: {}, extensions: [] };
    this.runtimes.set(id, runtime);
    runtime.done = this.drive(record, runtime, config, !!input.includeUncommitted).catch(() => undefined);
    return { ...task };
  }

  /** Stops the running stage (the agent's processes in the guest are killed); the sandbox stays for inspection. */
  async cancel(taskId: string): Promise<Task> {
    const record = this.record(taskId);
    const runtime = this.runtimes.get(taskId);
    if (runtime && ACTIVE_PHASES.includes(record.task.phase)) {
      runtime.abort.abort();
      await runtime.done;
    }
    return { ...this.record(taskId).task };
  }

  /**
   * Runs a failed or cancelled task's pipeline again in the same sandbox, from
   * `fromStage` (default: the stage that failed or was cancelled); earlier
   * stages keep their results.
   */
  async retry(taskId: string, fromStage?: StageName, opts: { overrideReview?: boolean } = {}): Promise<Task> {
    const record = this.record(taskId);
    let t = record.task;
    if (t.phase !== 'failed' && t.phase !== 'cancelled') {
      throw new FactoryError('NotRetryable', `task ${taskId} is ${t.phase}; only a failed or cancelled task can be retried`);
    }
    const rt = this.runtimes.get(taskId);
    if (!rt?.vm || !rt.ssh || !rt.seeded || t.sandbox.status !== 'running') {
      throw new FactoryError('NoSandbox', `task ${taskId} has no running, seeded sandbox to retry in`);
    }
    if (opts.overrideReview) {
      // The user accepts the change the review stage refused: it counts as passed, marked as overridden.
      const review = t.stages.find((s) => s.name === 'review');
      if (review?.status !== 'failed') throw new FactoryError('InvalidInput', `the review of task ${taskId} did not fail; there is nothing to override`);
      if (fromStage && fromStage !== 'document') throw new FactoryError('InvalidInput', 'an overridden review goes on with the document stage');
      fromStage = 'document';
      const summary = `overridden by the user: ${review.summary ?? 'review failed'}`.slice(0, 240);
      t = { ...t, stages: t.stages.map((s) => (s.name === 'review' ? { ...s, status: 'passed' as const, summary } : s)) };
    }
    const start = fromStage ?? t.stages.find((s) => s.status === 'failed' || s.status === 'cancelled')?.name ?? 'request';
    for (const s of t.stages) {
      if (s.name === start) break;
      if (s.status !== 'passed') throw new FactoryError('InvalidInput', `cannot start at ${start}: stage ${s.name} has not passed`);
    }
    // Claimed synchronously, so a second retry call is refused above.
    const before = record.task;
    const { error: _previousError, ...rest } = t;
    record.task = { ...rest, phase: 'running' };
    let config: PipelineConfig;
    try {
      await rt.done;
      config = await loadPipelineConfig(t.repoPath, t.baseCommit);
    } catch (err) {
      record.task = before;
      throw err;
    }
    // A fresh abort controller: the old one may have fired (cancel).
    rt.abort = new AbortController();
    await this.persist(record);
    rt.done = (async () => {
      let release: (() => void) | undefined;
      try {
        release = await this.slots.acquire(rt.abort.signal);
        await this.runPipelineAndPullback(record, rt, config, start);
      } catch (err) {
        if (rt.abort.signal.aborted) await this.update(record, { phase: 'cancelled' });
        else await this.fail(record, err);
      } finally {
        release?.();
      }
    })();
    return { ...record.task };
  }

  /** Ends the VM and deletes its overlay; a result in review stays approvable. */
  async destroy(taskId: string): Promise<Task> {
    const record = this.record(taskId);
    const runtime = this.runtimes.get(taskId);
    if (runtime) {
      runtime.abort.abort();
      await runtime.done;
      await this.teardown(record, runtime);
      this.runtimes.delete(taskId);
    } else if (['booting', 'running', 'stopping'].includes(record.task.sandbox.status)) {
      await this.cleanupLeftovers(record);
      await this.update(record, { sandbox: { ...record.task.sandbox, status: 'destroyed' } });
    }
    await fsp.rm(this.workDir(taskId), { recursive: true, force: true });
    return { ...this.record(taskId).task };
  }

  async review(taskId: string): Promise<PullbackReview> {
    const record = this.record(taskId);
    const cached = this.reviews.get(taskId);
    if (cached) return cached;
    if (!record.pullback || !['review', 'approved', 'rejected'].includes(record.task.phase)) {
      throw new FactoryError('NoReview', `task ${taskId} has no result to review (it is ${record.task.phase})`);
    }
    const file = this.reviewJsonPath(taskId);
    try {
      const review = PullbackReview.parse(JSON.parse(await fsp.readFile(file, 'utf8')));
      this.reviews.set(taskId, review);
      return review;
    } catch {
      throw new FactoryError('NoReview', `the review of task ${taskId} could not be read from ${file}`);
    }
  }

  /**
   * One file of a result in review: its own patch and leading bytes, for what the
   * whole patch could not show. Only files of the review, while it is in quarantine.
   */
  async reviewFile(taskId: string, filePath: string): Promise<ReviewFileDetail> {
    const review = await this.review(taskId);
    const record = this.record(taskId);
    if (record.task.phase !== 'review' || !record.pullback) {
      throw new FactoryError('NotInReview', `task ${taskId} is ${record.task.phase}; its files can be opened only while it is in review`);
    }
    // Listed or not (past the listing cap), the quarantine decides whether the file is part of the result.
    return this.deps.quarantine.fileDetail({ taskId, baseCommit: review.baseCommit, headCommit: record.pullback.headCommit, path: filePath });
  }

  /**
   * Creates the branch. When the review could not show or check everything
   * (its confirmations), `confirm` must name every kind of them: the user's
   * deliberate second step; otherwise ApproveNeedsConfirmation names what was not shown.
   */
  async approve(taskId: string, opts: { confirm?: readonly ReviewConfirmationKind[] } = {}): Promise<Task> {
    const record = this.record(taskId);
    if (record.task.phase !== 'review' || !record.pullback) {
      throw new FactoryError('NotInReview', `task ${taskId} is ${record.task.phase}; only a task in review can be approved`);
    }
    if (record.pullback.empty) {
      throw new FactoryError('NothingToApprove', 'the sandbox brought back no change; there is nothing to approve (reject it instead)');
    }
    assertConfirmed(await this.review(taskId), opts.confirm);
    const res = await this.deps.quarantine.approve({
      taskId,
      repoPath: record.task.repoPath,
      branch: record.task.branch,
      headCommit: record.pullback.headCommit,
      bundleSha256: record.pullback.bundleSha256,
    });
    await this.update(record, {
      phase: 'approved',
      decision: { kind: 'approved', at: new Date().toISOString(), branch: res.branch, commit: res.commit },
    });
    return { ...record.task };
  }

  async reject(taskId: string): Promise<Task> {
    const record = this.record(taskId);
    if (record.task.phase !== 'review') {
      throw new FactoryError('NotInReview', `task ${taskId} is ${record.task.phase}; only a task in review can be rejected`);
    }
    await this.deps.quarantine.discard(taskId);
    await this.update(record, { phase: 'rejected', decision: { kind: 'rejected', at: new Date().toISOString() } });
    return { ...record.task };
  }

  /** The environment the sandbox extensions gave this task's sandbox (placeholders only), for agent adapters. */
  guestEnv(taskId: string): Record<string, string> {
    return { ...(this.runtimes.get(taskId)?.guestEnv ?? {}) };
  }

  /** The QMP client of a task's running VM (e.g. for a leak check's memory dump), if the driver offers one. */
  qmpFor(taskId: string): (() => Promise<QmpPort>) | undefined {
    const vm = this.runtimes.get(taskId)?.vm;
    if (!vm || typeof vm.qmp !== 'function') return undefined;
    return () => vm.qmp!();
  }

  /** The live SSH connection of a task's sandbox (for interactive shells). */
  sandboxSsh(taskId: string): SandboxSshPort {
    this.record(taskId);
    const ssh = this.runtimes.get(taskId)?.ssh;
    if (!ssh) throw new FactoryError('NoSandbox', `task ${taskId} has no running sandbox`);
    return ssh;
  }

  /** Last accel the driver chose, for system.status. */
  lastAccel(): string | undefined {
    return [...this.records.values()].map((r) => r.task.sandbox.accel).filter(Boolean).pop();
  }

  /** Tears down every sandbox: nothing is left running. */
  async dispose(): Promise<void> {
    this.disposed = true;
    const live = [...this.runtimes.entries()];
    for (const [, rt] of live) rt.abort.abort();
    await Promise.all(
      live.map(async ([id, rt]) => {
        await rt.done;
        const record = this.records.get(id);
        if (record) await this.teardown(record, rt).catch(() => undefined);
        this.runtimes.delete(id);
      }),
    );
    await this.deps.store.flush();
  }

  // ---------------------------------------------------------------------------

  private record(taskId: string): TaskRecord {
    const r = this.records.get(taskId);
    if (!r) throw new FactoryError('TaskNotFound', `no task with id ${taskId}`);
    return r;
  }

  private workDir(taskId: string): string {
    return path.join(this.deps.paths.data, 'work', taskId);
  }

  /** The verified review, kept with the state so it stays readable after approve, reject or a restart. */
  private reviewJsonPath(taskId: string): string {
    return path.join(this.deps.paths.state, 'reviews', `${taskId}.json`);
  }

  private sandboxDir(taskId: string): string {
    return path.join(this.deps.paths.sandboxes, taskId);
  }

  private async persist(record: TaskRecord): Promise<void> {
    this.deps.emit({ type: 'task.updated', task: { ...record.task } });
    await this.deps.store.saveTask(record);
  }

  private async update(record: TaskRecord, patch: Partial<Task>, extra: Partial<Omit<TaskRecord, 'task'>> = {}): Promise<void> {
    record.task = { ...record.task, ...patch };
    Object.assign(record, extra);
    await this.persist(record);
  }

  private async fail(record: TaskRecord, err: unknown, phase: TaskPhase = 'failed'): Promise<void> {
    const error: ErrorInfo = toErrorInfo(err);
    await this.update(record, { phase, error });
  }

  /** The background part of a task's life. */
  private async drive(record: TaskRecord, rt: Runtime, config: PipelineConfig, includeUncommitted: boolean): Promise<void> {
    const signal = rt.abort.signal;
    const task = () => record.task;
    let release: (() => void) | undefined;
    try {
      release = await this.slots.acquire(signal);
      // Seed bundle first: it reads the host repo as it is now.
      const seed = await createSeedBundle({
        repoPath: task().repoPath,
        baseCommit: task().baseCommit,
        branch: task().branch,
        workDir: this.workDir(task().id),
        includeUncommitted,
      });
      if (fs.statSync(seed.bundlePath).size > MAX_SEED_BUNDLE_BYTES) throw new FactoryError('RepoTooLarge', 'the repository bundle is over 2 GiB');
      this.checkAborted(signal);

      await this.update(record, { phase: 'provisioning', sandbox: { status: 'booting' } });
      // A first-use image build takes minutes; a cancel must not wait for it (the build goes on and is cached).
      const image = await abortable(this.deps.images.ensure((status) => this.deps.emit({ type: 'image.progress', status })), signal);
      this.checkAborted(signal);
      const settings = this.deps.settings();
      const guestForwards: GuestForwardSpec[] = [];
      for (const ext of this.deps.extensions ?? []) {
        rt.extensions.push(ext);
        const prepared = await ext.prepare({ taskId: task().id, sandboxDir: this.sandboxDir(task().id) });
        guestForwards.push(...(prepared.guestForwards ?? []));
        Object.assign(rt.guestEnv, prepared.guestEnv ?? {});
      }
      this.checkAborted(signal);
      const vm = await this.deps.qemu.start({
        sandboxDir: this.sandboxDir(task().id),
        image,
        memoryMb: settings.vmMemoryMb,
        cpus: settings.vmCpus,
        ...(guestForwards.length ? { guestForwards } : {}),
        ...(this.deps.bootTimeoutMs ? { bootTimeoutMs: this.deps.bootTimeoutMs } : {}),
      });
      rt.vm = vm;
      void vm.exited.then(() => this.onVmExited(record, rt));
      await this.update(
        record,
        { sandbox: { status: 'running', accel: vm.accel, sshPort: vm.sshPort, bootMs: vm.bootMs } },
        { sandboxDir: vm.sandboxDir, qemuPid: vm.pid },
      );
      this.checkAborted(signal);

      await this.update(record, { phase: 'seeding' });
      rt.ssh = await vm.ssh();
      await this.seed(rt.ssh, task(), seed.bundlePath, rt.guestEnv.FACTORY_GIT_URL);
      rt.seeded = true;
      await fsp.rm(seed.bundlePath, { force: true });
      this.checkAborted(signal);

      await this.runPipelineAndPullback(record, rt, config);
    } catch (err) {
      if (signal.aborted) {
        await this.update(record, {
          phase: 'cancelled',
          stages: record.task.stages.map((s) => (s.status === 'running' ? { ...s, status: 'cancelled' as const } : s.status === 'pending' ? { ...s, status: 'skipped' as const } : s)),
        });
      } else {
        await this.fail(record, err);
      }
    } finally {
      release?.();
    }
  }

  /** Pipeline (whole, or from one stage on a retry), then pull-back into quarantine and review. */
  private async runPipelineAndPullback(record: TaskRecord, rt: Runtime, config: PipelineConfig, startAt?: StageName): Promise<void> {
    const task = () => record.task;
    const ssh = rt.ssh;
    if (!ssh) throw new FactoryError('NoSandbox', `task ${task().id} has no running sandbox`);
    await this.update(record, { phase: 'running' });
    const outcome = await this.deps.runner.run({
      task: task(),
      config,
      ssh,
      signal: rt.abort.signal,
      guestEnv: rt.guestEnv,
      ...(startAt ? { startAt, previous: task().stages } : {}),
      onStages: (stages: StageResult[]) => {
        void this.update(record, { stages }).catch(() => undefined);
      },
    });
    if (outcome.status === 'cancelled') {
      await this.update(record, { phase: 'cancelled', stages: outcome.stages });
      return;
    }
    if (outcome.status === 'failed') {
      await this.update(record, { phase: 'failed', stages: outcome.stages, ...(outcome.error ? { error: outcome.error } : {}) });
      return;
    }

    await this.update(record, { phase: 'pulling-back', stages: outcome.stages });
    const q = await this.deps.quarantine.prepare(task().id);
    const exported = await exportTaskBundle({
      ssh,
      branch: task().branch,
      baseCommit: task().baseCommit,
      bundlePath: q.bundlePath,
      maxBytes: this.deps.quarantine.maxBundleBytes,
    });
    const verified = await this.deps.quarantine.verify({
      taskId: task().id,
      repoPath: task().repoPath,
      branch: task().branch,
      baseCommit: task().baseCommit,
      bundlePresent: exported.bundlePresent,
    });
    await writeFileAtomic(this.reviewJsonPath(task().id), JSON.stringify(verified.review));
    this.reviews.set(task().id, verified.review);
    await this.update(
      record,
      { phase: 'review' },
      { pullback: { headCommit: verified.headCommit, bundleSha256: verified.bundleSha256, bundleBytes: verified.review.bundleBytes, empty: verified.empty } },
    );
  }

  private checkAborted(signal: AbortSignal): void {
    if (signal.aborted) throw new FactoryError('Cancelled', 'the task was cancelled');
  }

  /**
   * Upload the seed bundle and clone it as the agent user on the task branch.
   * With a git route through the credential proxy, its URL (placeholder only)
   * becomes the remote `upstream`, so `git fetch upstream` works in the sandbox.
   */
  private async seed(ssh: SandboxSshPort, task: Task, bundlePath: string, upstreamUrl?: string): Promise<void> {
    const prep = await ssh.run(
      `set -e; mkdir -p ${GUEST_REPO_DIR} ${GUEST_OUT_DIR} /work/.factory; chown agent:agent ${GUEST_REPO_DIR} ${GUEST_OUT_DIR}; chmod 755 /work /work/.factory; git config --system --replace-all safe.directory ${GUEST_REPO_DIR}`,
      { timeoutMs: 30_000 },
    );
    if (prep.code !== 0) throw new FactoryError('SeedFailed', `preparing /work in the sandbox failed: ${prep.stderr.trim().slice(0, 500)}`);
    await ssh.putFile(bundlePath, '/work/seed.bundle');
    const cloneAsAgent = asAgent(
      [
        'set -e',
        `git clone -q -b ${shellQuote(task.branch)} /work/seed.bundle ${GUEST_REPO_DIR}`,
        `cd ${GUEST_REPO_DIR}`,
        'git remote remove origin',
        ...(upstreamUrl ? [`git remote add upstream ${shellQuote(upstreamUrl)}`] : []),
        'git rev-parse HEAD',
      ].join('\n'),
    );
    // The bundle is only needed for the clone; it would otherwise take space in the overlay.
    const clone = await ssh.run(`chmod 644 /work/seed.bundle && ${cloneAsAgent}; rc=$?; rm -f /work/seed.bundle; exit $rc`, {
      timeoutMs: 10 * 60_000,
      maxBytes: 64 * 1024,
    });
    if (clone.code !== 0) throw new FactoryError('SeedFailed', `cloning the repository in the sandbox failed: ${clone.stderr.trim().slice(0, 500)}`);
  }

  private async onVmExited(record: TaskRecord, rt: Runtime): Promise<void> {
    // Destroy sets its own status; an exit nobody asked for means the sandbox is gone.
    if (this.runtimes.get(record.task.id) !== rt || rt.tearingDown) return;
    if (record.task.sandbox.status === 'running') {
      rt.ssh?.close();
      rt.ssh = undefined;
      delete record.qemuPid;
      await this.update(record, { sandbox: { ...record.task.sandbox, status: 'lost' } });
      await this.releaseExtensions(record.task.id, rt);
    }
  }

  private async releaseExtensions(taskId: string, rt: Runtime): Promise<void> {
    const exts = rt.extensions.splice(0);
    await Promise.all(exts.map((e) => e.release({ taskId }).catch(() => undefined)));
  }

  private async teardown(record: TaskRecord, rt: Runtime): Promise<void> {
    rt.tearingDown = true;
    if (!rt.vm) {
      await this.releaseExtensions(record.task.id, rt);
      if (record.task.sandbox.status === 'booting') await this.update(record, { sandbox: { status: 'destroyed' } });
      return;
    }
    await this.update(record, { sandbox: { ...record.task.sandbox, status: 'stopping' } });
    for (const ext of rt.extensions) {
      if (!ext.beforeDestroy) continue;
      const qmp = this.qmpFor(record.task.id);
      await ext.beforeDestroy({ taskId: record.task.id, sandboxDir: rt.vm.sandboxDir, ...(qmp ? { qmp } : {}) }).catch(() => undefined);
    }
    try {
      rt.ssh?.close();
    } catch {
      /* already closed */
    }
    rt.ssh = undefined;
    await rt.vm.destroy();
    rt.vm = undefined;
    await this.releaseExtensions(record.task.id, rt);
    delete record.qemuPid;
    delete record.sandboxDir;
    await this.update(record, { sandbox: { ...record.task.sandbox, status: 'destroyed' } });
  }

  /** After a crash: kill the task's QEMU if it still runs, delete its disk, keep its logs. */
  private async cleanupLeftovers(record: TaskRecord): Promise<void> {
    const dir = record.sandboxDir ?? this.sandboxDir(record.task.id);
    const pids = new Set<number>();
    if (record.qemuPid) pids.add(record.qemuPid);
    for (const name of await fsp.readdir(dir).catch(() => [] as string[])) {
      if (!name.endsWith('.pid')) continue;
      const n = Number((await fsp.readFile(path.join(dir, name), 'utf8').catch(() => '')).trim());
      if (Number.isInteger(n) && n > 1) pids.add(n);
    }
    for (const pid of pids) {
      // Only a QEMU started for this sandbox: a recycled pid must never be killed.
      const cmdline = await fsp.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      if (cmdline.includes('qemu') && cmdline.includes(dir)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
    }
    for (const name of await fsp.readdir(dir).catch(() => [] as string[])) {
      if (name.endsWith('.log')) continue;
      await fsp.rm(path.join(dir, name), { recursive: true, force: true });
    }
    delete record.qemuPid;
  }
}

function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    p.catch(() => undefined); // its later failure must not surface as an unhandled rejection
    return Promise.reject(new FactoryError('Cancelled', 'the task was cancelled'));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new FactoryError('Cancelled', 'the task was cancelled'));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

export function toErrorInfo(err: unknown): ErrorInfo {
  if (err instanceof z.ZodError) return { name: 'InvalidData', message: err.issues[0]?.message ?? 'invalid data' };
  if (err instanceof Error) {
    const detail = (err as { detail?: unknown }).detail;
    return { name: err.name || 'Error', message: err.message, ...(typeof detail === 'string' ? { detail: detail.slice(0, 16_000) } : {}) };
  }
  return { name: 'Error', message: String(err) };
}
