// A task's setup step between seeding and the pipeline: skipped (with the
// reason) when there is nothing to set up or the sandbox booted on a cached
// layer; otherwise run (setup-step.ts), and on success the sandbox's disk (and
// memory) becomes the repository's layer for the next task.
import { FactoryError } from '../../common/errors.js';
import type { SetupInfo } from '../../common/domain.js';
import type { Logger } from '../log/logger.js';
import type { TaskRecord } from '../state/state-store.js';
import type { LiveSandbox } from '../sandbox/live-sandboxes.js';
import type { SetupRunner } from './setup-step.js';
import type { TaskBook } from './task-book.js';
import type { TaskEnvironment } from './task-environment.js';
import type { LayerPort } from './environment-ports.js';

export interface SetupPhaseDeps {
  book: TaskBook;
  environment: TaskEnvironment;
  setup: SetupRunner;
  log: Pick<Logger, 'warn'>;
}

export interface SetupPhaseRun {
  record: TaskRecord;
  sandbox: LiveSandbox | undefined;
  signal: AbortSignal;
  plan: Awaited<ReturnType<TaskEnvironment['load']>>;
  /** Whether the sandbox may become the repository's layer (it holds the tree the plan was keyed on). */
  cacheable?: boolean;
  /** Why this run may not become a layer whatever the seed (set up again in a sandbox an earlier setup left behind). */
  notCacheable?: string;
  /** The cached layer the sandbox booted on, if any. */
  cached?: { id: string; createdAt: string };
  /** The task whose running sandbox this one was forked from (set up there already). */
  forkedFrom?: string;
  /** The fork was that sandbox's spare, made while it was idle (spare-forks.ts). */
  forkedSpare?: boolean;
  /** Records a cancelled or interrupted run (the task service's own ending). */
  aborted: () => Promise<void>;
  /** Runs once the layer is made, before the setup is recorded as passed (what waits on that waits for it too). */
  layerMade?: (layer: LayerPort) => Promise<void>;
}

/** True when the pipeline may run; false when the task failed or was stopped here (already recorded). */
export async function runSetupPhase(deps: SetupPhaseDeps, run: SetupPhaseRun): Promise<boolean> {
  const { record, sandbox, plan, cached } = run;
  const task = () => record.task;
  const base: SetupInfo = task().setup ?? deps.environment.initialSetup(plan);
  const setSetup = (patch: Partial<SetupInfo>) => deps.book.update(record, { setup: { ...(task().setup ?? base), ...patch } });
  const now = () => new Date().toISOString();
  // A fork is what its parent was, set up or not: no setup of its own.
  if (run.forkedFrom !== undefined) {
    await setSetup({ status: 'skipped', summary: `forked from the sandbox of task ${run.forkedFrom}${run.forkedSpare ? ' (its spare fork, of its state when last idle)' : ''}, set up there`, startedAt: now(), endedAt: now() });
    return true;
  }
  if (!plan.steps.length) {
    await setSetup({ status: 'skipped', summary: 'nothing to set up: no environment in the repository config and nothing detected', startedAt: now(), endedAt: now() });
    return true;
  }
  if (cached) {
    await setSetup({ status: 'skipped', summary: `cached environment from ${cached.createdAt.slice(0, 16).replace('T', ' ')}`, layer: { id: cached.id, reused: true }, startedAt: now(), endedAt: now() });
    return true;
  }
  if (!sandbox?.ssh || !sandbox.vm) throw new FactoryError('NoSandbox', `task ${task().id} has no running sandbox`);
  deps.environment.setStep(task().id, 'setup');
  const startedAt = now();
  await setSetup({ status: 'running', startedAt, summary: plan.steps.map((s) => s.name).join(' → ') });
  const result = await deps.setup.run({
    taskId: task().id,
    ssh: sandbox.ssh,
    steps: plan.steps,
    env: { ...plan.env, ...sandbox.guestEnv },
    signal: run.signal,
    onSession: (sessionId) => void setSetup({ sessionId }).catch((err: Error) => deps.log.warn('saving the setup session failed', { taskId: task().id, err })),
  });
  const ended = { endedAt: now(), durationMs: result.durationMs, ...(result.sessionId ? { sessionId: result.sessionId } : {}) };
  if (result.status !== 'passed') {
    await setSetup({ status: result.status, summary: result.summary, exitCode: result.exitCode, ...(result.step ? { step: result.step } : {}), ...ended });
    if (result.status === 'cancelled') {
      await run.aborted();
      return false;
    }
    await deps.book.transition(record, 'fail', { error: { name: 'SetupFailed', message: `setup failed: ${result.summary}`, detail: result.detail } });
    return false;
  }
  let made: LayerPort | undefined;
  let note = '';
  try {
    // Nothing setup started runs on in the layer (its memory is saved too), nor in this task, alike.
    await deps.setup.endLeftovers(sandbox.ssh);
    if (run.notCacheable) throw new Error(run.notCacheable);
    if (!run.cacheable) throw new Error('the seed is not the commit the environment was planned at (uncommitted changes)');
    // What setup wrote must be on the disk before it is frozen into the layer; empty caches make the saved memory small.
    const sync = await sandbox.ssh.run('sync && { echo 3 > /proc/sys/vm/drop_caches || true; }', { timeoutMs: 120_000 });
    if (sync.code !== 0) throw new Error(`sync in the sandbox failed: ${sync.stderr.trim().slice(0, 200)}`);
    if (!sandbox.vm.freezeDisk) throw new Error('this sandbox driver cannot freeze its disk');
    const frozen = await sandbox.vm.freezeDisk({ memory: true });
    if (frozen.memoryError) deps.log.warn('the layer is kept without its memory (the next task boots cold)', { taskId: task().id, err: new Error(frozen.memoryError) });
    made = await deps.environment.commitLayer(task(), plan, frozen);
  } catch (err) {
    // The task goes on without a cached layer: the next one runs setup again.
    note = ' (not cached: ' + (err instanceof Error ? err.message : String(err)).slice(0, 160) + ')';
    deps.log.warn('caching the environment failed', { taskId: task().id, err });
  }
  // The layer stands either way: what failed here is done later, or not at all.
  if (made && run.layerMade) {
    const { id } = made;
    await run.layerMade(made).catch((err: unknown) => deps.log.warn('the step after making the layer failed (the layer stands)', { taskId: task().id, layer: id, err }));
  }
  await setSetup({ status: 'passed', summary: `${plan.steps.length} step${plan.steps.length === 1 ? '' : 's'} in ${(result.durationMs / 1000).toFixed(1)} s${note}`, ...(made ? { layer: { id: made.id, reused: false } } : {}), ...ended });
  return true;
}
