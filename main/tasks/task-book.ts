// The task records of this app run and every change to them. A change of phase
// or sandbox status is a move of the tables in task-life.ts (named by its
// event, or a plain patch that the tables allow); each change is saved and
// announced as task.updated.
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { FactoryError, type FactoryEvent } from '../../common/contract.js';
import type { ErrorInfo, SandboxInfo, Task } from '../../common/domain.js';
import { pendingStages } from '../pipeline/stage-runner.js';
import type { StateStore, TaskRecord } from '../state/state-store.js';
import { interruption, isActive, isLive, nextSandbox, nextState, phaseMoveExists, sandboxMoveExists, type SandboxEvent, type TaskEvent } from './task-life.js';
import { diskFullError } from '../state/disk-full.js';

/** A patch that goes with a move: the phase and sandbox status come from the table. */
export type MovePatch = Partial<Omit<Task, 'phase' | 'sandbox'>> & { sandbox?: Omit<SandboxInfo, 'status'> };
/** Host-only bookkeeping saved with the task (sandbox folder, QEMU pid, pull-back). */
export type RecordExtra = Partial<Omit<TaskRecord, 'task'>>;

export class TaskBook {
  private readonly records = new Map<string, TaskRecord>();

  constructor(private readonly deps: { store: StateStore; emit: (e: FactoryEvent) => void }) {}

  /**
   * Reads every saved record into the book (unreadable files are set aside by
   * the store). The app stopped since they were saved: a sandbox that lived is
   * lost (`reap` ends what is left of it first), and a task that was active is
   * interrupted, the stage that ran with it.
   */
  async loadAfterRestart(reap: (record: TaskRecord) => Promise<void>): Promise<void> {
    for (const record of await this.deps.store.loadTasks()) {
      this.records.set(record.task.id, record);
      const t = record.task;
      if (!isLive(t.sandbox.status) && !isActive(t.phase)) continue;
      if (isLive(t.sandbox.status)) {
        await reap(record);
        await this.sandboxMove(record, 'appStopped', { save: false });
      }
      // A quick sandbox has no pipeline to retry: its life ended with the app.
      if (isActive(t.phase)) {
        if (t.kind === 'quick') this.move(record, 'close');
        else this.move(record, 'interrupt', interruption(record.task, t.phase));
      }
      delete record.qemuPid;
      await this.deps.store.saveTask(record);
    }
  }

  /** A new task (not yet added) with an id no task of the book has, on its own branch, before anything ran. */
  newTask(t: Pick<Task, 'title' | 'repoPath' | 'baseRef' | 'baseCommit' | 'agent' | 'host'> & { allowPush: boolean }): Task {
    let id = newTaskId();
    while (this.records.has(id)) id = newTaskId();
    return {
      id,
      title: t.title,
      repoPath: t.repoPath,
      baseRef: t.baseRef,
      baseCommit: t.baseCommit,
      branch: `factory/${id}`,
      createdAt: new Date().toISOString(),
      phase: 'creating',
      sandbox: { status: 'none' },
      stages: pendingStages(),
      ...(t.agent !== undefined ? { agent: t.agent } : {}),
      ...(t.allowPush ? { allowPush: true } : {}),
      ...(t.host ? { host: t.host } : {}),
    };
  }

  async add(record: TaskRecord): Promise<void> {
    this.records.set(record.task.id, record);
    await this.persist(record);
  }

  get(taskId: string): TaskRecord {
    const r = this.records.get(taskId);
    if (!r) throw new FactoryError('TaskNotFound', `no task with id ${taskId}`);
    return r;
  }

  find(taskId: string): TaskRecord | undefined {
    return this.records.get(taskId);
  }

  tasks(): Task[] {
    return [...this.records.values()].map((r) => r.task).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async persist(record: TaskRecord): Promise<void> {
    this.deps.emit({ type: 'task.updated', task: { ...record.task } });
    await this.deps.store.saveTask(record);
  }

  /** A plain patch (stage results, a decision); a phase or sandbox change in it must be one the tables allow. */
  async update(record: TaskRecord, patch: Partial<Task>, extra: RecordExtra = {}): Promise<void> {
    const t = record.task;
    if (patch.phase && patch.phase !== t.phase && !phaseMoveExists(t.phase, patch.phase)) {
      throw new FactoryError('InvalidTransition', `task ${t.id}: no move from ${t.phase} to ${patch.phase}`);
    }
    const to = patch.sandbox?.status;
    if (to && to !== t.sandbox.status && !sandboxMoveExists(t.sandbox.status, to)) {
      throw new FactoryError('InvalidTransition', `task ${t.id}: no sandbox move from ${t.sandbox.status} to ${to}`);
    }
    record.task = { ...t, ...patch };
    Object.assign(record, extra);
    await this.persist(record);
  }

  /** Applies a move of the table in memory only (so a caller can claim it at once and save it later). */
  move(record: TaskRecord, event: TaskEvent, patch: MovePatch = {}): void {
    const t = record.task;
    const next = nextState({ phase: t.phase, sandbox: t.sandbox.status }, event);
    // A sandbox patch describes a new sandbox (boot): it replaces the old one's details.
    const sandbox = patch.sandbox ? { ...patch.sandbox, status: next.sandbox } : { ...t.sandbox, status: next.sandbox };
    record.task = { ...t, ...patch, phase: next.phase, sandbox };
  }

  async transition(record: TaskRecord, event: TaskEvent, patch: MovePatch = {}, extra: RecordExtra = {}): Promise<void> {
    this.move(record, event, patch);
    Object.assign(record, extra);
    await this.persist(record);
  }

  /** A sandbox change with no phase change (teardown, crash); `save: false` keeps it in memory. */
  async sandboxMove(record: TaskRecord, event: SandboxEvent, opts: { save?: boolean } = {}): Promise<void> {
    const sandbox = record.task.sandbox;
    record.task = { ...record.task, sandbox: { ...sandbox, status: nextSandbox(sandbox.status, event) } };
    if (opts.save !== false) await this.persist(record);
  }

  /** Forgets a task: its record leaves the book and the disk, and every UI is told. */
  async remove(taskId: string): Promise<void> {
    this.records.delete(taskId);
    await this.deps.store.deleteTask(taskId);
    this.deps.emit({ type: 'task.removed', taskId });
  }

  /** The task failed: its error is what the user reads. */
  async fail(record: TaskRecord, err: unknown): Promise<void> {
    await this.transition(record, 'fail', { error: toErrorInfo(err) });
  }
}

/** Short, lowercase, starts with a letter: fits the API id pattern and a branch name. */
export function newTaskId(): string {
  const alphabet = 'abcdefghijkmnpqrstuvwxyz23456789';
  const bytes = randomBytes(8);
  let id = alphabet[bytes[0]! % 24]!; // a letter first
  for (let i = 1; i < 8; i++) id += alphabet[bytes[i]! % alphabet.length]!;
  return id;
}

export function toErrorInfo(err: unknown): ErrorInfo {
  // A task cut by a full disk says so by name, whichever step wrote.
  const full = diskFullError(err);
  if (full) return { name: full.name, message: full.message, ...(full.detail ? { detail: full.detail } : {}) };
  if (err instanceof z.ZodError) return { name: 'InvalidData', message: err.issues[0]?.message ?? 'invalid data' };
  if (err instanceof Error) {
    const detail = (err as { detail?: unknown }).detail;
    return { name: err.name || 'Error', message: err.message, ...(typeof detail === 'string' ? { detail: detail.slice(0, 16_000) } : {}) };
  }
  return { name: 'Error', message: String(err) };
}
