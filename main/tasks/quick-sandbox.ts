// Quick sandboxes (issue 11): a sandbox in one click from the tray, the UI or
// `factory sandbox`. A fresh VM, optionally with a repository seeded, no setup and
// no pipeline; it runs until its last shell closes (then it is destroyed) or, when
// kept, until the user destroys it. It is a task of kind 'quick' in the same book,
// so the board, the tray, destroy and the restart reaper treat it like any other.
import path from 'node:path';
import { type FactoryEvent } from '../../common/contract.js';
import { FactoryError } from '../../common/errors.js';
import { isQuickSandbox, type Task, type TerminalInfo } from '../../common/domain.js';
import type { Logger } from '../log/logger.js';
import type { TaskRecord } from '../state/state-store.js';
import type { TerminalSource } from '../terminal/types.js';
import { inspectRepo } from './host-repo.js';
import type { LiveSandbox } from '../sandbox/live-sandboxes.js';
import type { QemuDriverPort } from '../sandbox/sandbox-ports.js';
import { bootedSandboxInfo, checkAborted, type SandboxProvisioner } from './sandbox-provisioner.js';
import type { TaskBook } from './task-book.js';
import type { TaskEnvironment } from './task-environment.js';

/** What the task service lends a quick sandbox: its book, its runtimes and its teardown. */
export interface QuickParts<Image> {
  book: TaskBook;
  runtimes: Map<string, QuickRuntime>;
  provisioner: SandboxProvisioner<Image>;
  environment: Pick<TaskEnvironment, 'rulesFor'>;
  qemu: Pick<QemuDriverPort<Image>, 'checkInstalled'>;
  teardown: (record: TaskRecord, rt: QuickRuntime) => Promise<void>;
  disposed: () => boolean;
  log: Logger;
  /** Makes a terminal session of a first shell the guest started as it restored (first-shells.ts). */
  firstShell?: FirstShellSink;
}

export type FirstShellSink = (taskId: string, shell: TerminalSource, size: { cols: number; rows: number }) => void;

/** The size a first shell starts at, the UI's default; whoever takes it resizes it to theirs. */
const FIRST_SHELL_SIZE = { cols: 100, rows: 30 };

/** The task service's Runtime, as far as a quick sandbox uses it. */
export interface QuickRuntime {
  abort: AbortController;
  done?: Promise<void>;
  sandbox?: LiveSandbox;
}

export interface QuickInput {
  repoPath?: string;
  keep?: boolean;
}

export const QUICK_TITLE = 'quick sandbox';

/** Checks what the user can fix (the repository, QEMU), records the sandbox, then boots it in the background. */
export async function startQuickSandbox<Image>(parts: QuickParts<Image>, input: QuickInput): Promise<Task> {
  if (parts.disposed()) throw new FactoryError('ShuttingDown', 'the app is shutting down');
  const repo = input.repoPath !== undefined ? await inspectRepo(input.repoPath) : undefined;
  const qemu = await parts.qemu.checkInstalled();
  if (!qemu.ok) {
    throw new FactoryError('QemuMissing', `QEMU is not installed. ${qemu.installHint ?? 'Install qemu-system and qemu-utils with your package manager.'}`);
  }
  const task: Task = {
    ...parts.book.newTask({
      title: repo ? `${QUICK_TITLE}: ${path.basename(repo.repoPath)}` : QUICK_TITLE,
      // No repository: empty strings, so nothing (git route, host shell) takes a folder for it.
      repoPath: repo?.repoPath ?? '',
      baseRef: repo?.baseRef ?? '',
      baseCommit: repo?.baseCommit ?? '',
      allowPush: false,
    }),
    stages: [],
    kind: 'quick',
    ...(input.keep ? { keep: true } : {}),
  };
  if (repo) await parts.provisioner.rememberSeed(task.id, false);
  const record: TaskRecord = { version: 1, task };
  await parts.book.add(record);
  const rt: QuickRuntime = { abort: new AbortController() };
  parts.runtimes.set(task.id, rt);
  rt.done = bootQuick(parts, record, rt, !!repo).catch((err: unknown) => endQuick(parts, record, rt, err));
  return { ...task };
}

async function bootQuick<Image>(parts: QuickParts<Image>, record: TaskRecord, rt: QuickRuntime, seeded: boolean): Promise<void> {
  const { book, provisioner } = parts;
  const signal = rt.abort.signal;
  const bundle = seeded ? await provisioner.seedBundle(record.task) : undefined;
  checkAborted(signal);
  const sandbox = (rt.sandbox = provisioner.open(record.task));
  await book.transition(record, 'provision', { sandbox: {} });
  // Without a repository to seed, the shell is all a quick sandbox is for: a restore starts it before its SSH login.
  const sink = seeded ? undefined : parts.firstShell;
  const firstShell = sink && { ...FIRST_SHELL_SIZE, ready: (shell: TerminalSource) => sink(record.task.id, shell, FIRST_SHELL_SIZE) };
  const vm = await provisioner.boot(sandbox, signal, { egress: parts.environment.rulesFor(record.task), ...(firstShell ? { firstShell } : {}) });
  void vm.exited
    .then(() => onQuickVmExited(parts, record, rt, sandbox))
    .catch((err: Error) => parts.log.warn("recording a quick sandbox's end failed", { taskId: record.task.id, err }));
  await book.transition(record, 'booted', { sandbox: bootedSandboxInfo(vm) }, { sandboxDir: vm.sandboxDir, qemuPid: vm.pid });
  checkAborted(signal);
  if (bundle) await provisioner.seed(sandbox, record.task, bundle);
  else await provisioner.connect(sandbox);
  checkAborted(signal);
  await book.transition(record, 'seeded');
}

/**
 * A boot that ended early. Cancelled (destroy, shutdown): closed, and whoever
 * aborted tears the VM down. Failed: the VM goes now (a quick sandbox keeps
 * nothing to inspect) and the task shows the error.
 */
async function endQuick<Image>(parts: QuickParts<Image>, record: TaskRecord, rt: QuickRuntime, err: unknown): Promise<void> {
  const step = await beginEnding(parts, record, rt, 'a quick sandbox');
  if (rt.abort.signal.aborted) {
    await step('closing a quick sandbox', () => parts.book.transition(record, 'close'));
    return;
  }
  if (rt.sandbox?.vm) await step('tearing down a quick sandbox that failed', () => parts.teardown(record, rt));
  await step('recording the failure of a quick sandbox', () => parts.book.fail(record, err));
}

/** One step of ending a runtime early: its failure is logged, never thrown, so the steps after it still run. */
export type EndingStep = (what: string, work: () => Promise<void>) => Promise<void>;

/**
 * The start of ending a quick runtime early (a quick sandbox, an agent session):
 * a sandbox still booting that has no VM yet is torn down and its boot ended.
 * Returns the step runner for the rest of the ending.
 */
export async function beginEnding<Image>(parts: Pick<QuickParts<Image>, 'log' | 'provisioner' | 'book'>, record: TaskRecord, rt: QuickRuntime, what: string): Promise<EndingStep> {
  const step: EndingStep = (doing, work) => work().catch((e: unknown) => parts.log.warn(`${doing} failed`, { taskId: record.task.id, err: e }));
  const sb = rt.sandbox;
  if (sb && !sb.vm && record.task.sandbox.status === 'booting') {
    await step(`tearing down ${what} that never booted`, async () => {
      await parts.provisioner.teardown(sb);
      await parts.book.sandboxMove(record, 'bootEnded');
    });
  }
  return step;
}

/** QEMU ended: recorded as a crash unless the sandbox was being torn down (also an agent session's). */
export async function onQuickVmExited<Image>(parts: Pick<QuickParts<Image>, 'runtimes' | 'book' | 'provisioner'>, record: TaskRecord, rt: QuickRuntime, sandbox: LiveSandbox): Promise<void> {
  // Destroy sets its own status; an exit nobody asked for means the sandbox is gone (its shell ends with it).
  if (parts.runtimes.get(record.task.id) !== rt || rt.sandbox !== sandbox || sandbox.tearingDown) return;
  if (record.task.sandbox.status !== 'running') return;
  delete record.qemuPid;
  await parts.book.sandboxMove(record, 'crashed');
  await parts.provisioner.afterCrash(sandbox);
}

export interface QuickWatcherDeps {
  task: (taskId: string) => Task | undefined;
  destroy: (taskId: string) => Promise<unknown>;
  terminals: (taskId: string) => TerminalInfo[];
  /** Ends a terminal session (its source is killed; its status event follows). */
  closeTerminal: (sessionId: string) => void;
  log: Logger;
  /** A quick sandbox nobody opened a shell in is destroyed after this long (the UI or CLI that asked went away). */
  unopenedMs?: number;
}

/**
 * Watches the app's events: when the last shell of a quick sandbox that is not
 * kept ends (the user typed exit, closed the tab, the CLI's shell ended), the
 * sandbox is destroyed; so is one that runs with no shell opened for a while.
 */
export class QuickSandboxWatcher {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly ending = new Set<string>();

  constructor(private readonly deps: QuickWatcherDeps) {}

  onEvent(e: FactoryEvent): void {
    if (e.type === 'terminal.status' && e.info.kind === 'shell' && e.info.taskId && e.info.status !== 'live') {
      const taskId = e.info.taskId;
      if (this.deps.terminals(taskId).some((t) => t.kind === 'shell' && t.status === 'live')) return;
      this.end(taskId, 'its last shell closed');
    } else if (e.type === 'task.updated' && isQuickSandbox(e.task) && !e.task.keep) {
      const id = e.task.id;
      const running = e.task.phase === 'running' && e.task.sandbox.status === 'running';
      const shells = running ? this.deps.terminals(id).filter((t) => t.kind === 'shell') : [];
      if (shells.length && !shells.some((t) => t.status === 'live')) {
        // Its first shell opened while it started and ended before it ran (exited, or its CLI went).
        this.end(id, 'its last shell closed');
      } else if (running && !this.timers.has(id)) {
        const timer = setTimeout(() => {
          this.timers.delete(id);
          if (!this.deps.terminals(id).some((t) => t.kind === 'shell')) this.end(id, 'no shell was opened in it');
        }, this.deps.unopenedMs ?? 5 * 60_000);
        timer.unref();
        this.timers.set(id, timer);
      } else if (e.task.phase !== 'running') {
        this.clear(id);
      }
    }
  }

  /**
   * The viewer of a session left for good (a CLI that exited or was killed). A
   * quick sandbox's shell without its user would keep the sandbox alive with
   * nobody to exit it: the shell ends, and with it the sandbox (unless kept).
   */
  viewerLeft(info: TerminalInfo): void {
    if (info.kind !== 'shell' || !info.taskId || info.status !== 'live') return;
    const task = this.deps.task(info.taskId);
    if (!task || !isQuickSandbox(task) || task.keep) return;
    try {
      this.deps.closeTerminal(info.id);
    } catch (err) {
      this.deps.log.warn('closing the shell of a quick sandbox failed', { taskId: info.taskId, err });
    }
  }

  dispose(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }

  private clear(taskId: string): void {
    const t = this.timers.get(taskId);
    if (t) clearTimeout(t);
    this.timers.delete(taskId);
  }

  private end(taskId: string, why: string): void {
    const task = this.deps.task(taskId);
    if (!task || !isQuickSandbox(task) || task.keep || task.phase !== 'running' || this.ending.has(taskId)) return;
    this.ending.add(taskId);
    this.clear(taskId);
    void this.deps
      .destroy(taskId)
      .catch((err: unknown) => this.deps.log.warn('destroying a quick sandbox failed', { taskId, why, err }))
      .finally(() => this.ending.delete(taskId));
  }
}
