// The life of a task as two tables: phase × event → phase, and the sandbox
// status that goes with it. The task service makes every phase and sandbox
// change through them, so a move that is not in a table (a retry of a task in
// review, a boot of a sandbox that runs) is refused with one error naming it.
import { FactoryError } from '../../common/errors.js';
import type { SandboxStatus, StageResult, Task, TaskPhase } from '../../common/domain.js';

/** Phases in which the task's background work runs (and a restart cuts it). */
export const ACTIVE_PHASES = ['creating', 'provisioning', 'seeding', 'running', 'pulling-back'] as const satisfies readonly TaskPhase[];
/** A QEMU process may exist for the sandbox. */
export const LIVE_SANDBOX = ['booting', 'running', 'stopping'] as const satisfies readonly SandboxStatus[];
/** Nothing of the sandbox runs: a fresh one may be booted for the task. */
export const GONE_SANDBOX = ['none', 'lost', 'destroyed'] as const satisfies readonly SandboxStatus[];

interface SandboxMove {
  from: readonly SandboxStatus[];
  to: SandboxStatus;
}

export const SANDBOX_LIFE = {
  /** QEMU is being started (first boot, or a fresh sandbox for a retry). */
  boot: { from: GONE_SANDBOX, to: 'booting' },
  /** SSH answers with the pinned host key. */
  booted: { from: ['booting'], to: 'running' },
  /** The boot ended before a VM existed (failure or cancel): nothing runs. */
  bootEnded: { from: ['booting'], to: 'none' },
  /** Teardown of a VM we started. */
  stop: { from: ['running'], to: 'stopping' },
  /** Teardown done, or the user threw away a lost sandbox: QEMU gone, disk deleted, logs kept. */
  stopped: { from: ['stopping', 'lost'], to: 'destroyed' },
  /** QEMU ended without being asked. */
  crashed: { from: ['running'], to: 'lost' },
  /** The app stopped (or was killed) while the sandbox lived; its leftovers are reaped at the next start. */
  appStopped: { from: LIVE_SANDBOX, to: 'lost' },
} as const satisfies Record<string, SandboxMove>;
export type SandboxEvent = keyof typeof SANDBOX_LIFE;

interface PhaseMove {
  from: readonly TaskPhase[];
  to: TaskPhase;
  /** The sandbox change that goes with this move. */
  sandbox?: SandboxEvent;
  /** The move is allowed only while the sandbox is in one of these. */
  requires?: readonly SandboxStatus[];
}

export const TASK_LIFE = {
  provision: { from: ['creating'], to: 'provisioning', sandbox: 'boot' },
  booted: { from: ['provisioning'], to: 'seeding', sandbox: 'booted' },
  seeded: { from: ['seeding'], to: 'running' },
  pipelinePassed: { from: ['running'], to: 'pulling-back' },
  pulledBack: { from: ['pulling-back'], to: 'review' },
  fail: { from: ACTIVE_PHASES, to: 'failed' },
  cancel: { from: ACTIVE_PHASES, to: 'cancelled' },
  /** The app stopped mid-way: shown as interrupted, retryable in a fresh sandbox. */
  interrupt: { from: ACTIVE_PHASES, to: 'interrupted' },
  approve: { from: ['review'], to: 'approved' },
  reject: { from: ['review'], to: 'rejected' },
  /** A quick sandbox ends (its shell closed, the user destroyed it, the app stopped): no pipeline, nothing to retry. */
  close: { from: ACTIVE_PHASES, to: 'closed' },
  /** Run again in the same sandbox, which must still run. */
  retry: { from: ['failed', 'cancelled'], to: 'running', requires: ['running'] },
  /** Run again in a fresh sandbox, re-seeded from the same seed, when the old one is gone. */
  retryFresh: { from: ['failed', 'cancelled', 'interrupted'], to: 'creating', requires: GONE_SANDBOX },
} as const satisfies Record<string, PhaseMove>;
export type TaskEvent = keyof typeof TASK_LIFE;

export interface LifeState {
  phase: TaskPhase;
  sandbox: SandboxStatus;
}

function has<T>(list: readonly T[], x: T): boolean {
  return list.includes(x);
}

/** The sandbox status after `event`, or an InvalidTransition error naming the move. */
export function nextSandbox(status: SandboxStatus, event: SandboxEvent): SandboxStatus {
  const move: SandboxMove = SANDBOX_LIFE[event];
  if (!has(move.from, status)) {
    throw new FactoryError('InvalidTransition', `sandbox ${event}: not allowed while the sandbox is ${status} (only from ${move.from.join(', ')})`);
  }
  return move.to;
}

/** Phase and sandbox status after `event`, or an InvalidTransition error naming the move. */
export function nextState(state: LifeState, event: TaskEvent): LifeState {
  const move: PhaseMove = TASK_LIFE[event];
  if (!has(move.from, state.phase)) {
    throw new FactoryError('InvalidTransition', `${event}: not allowed while the task is ${state.phase} (only from ${move.from.join(', ')})`);
  }
  if (move.requires && !has(move.requires, state.sandbox)) {
    throw new FactoryError('InvalidTransition', `${event}: not allowed while the sandbox is ${state.sandbox} (only when ${move.requires.join(' or ')})`);
  }
  if (move.sandbox && !has(SANDBOX_LIFE[move.sandbox].from, state.sandbox)) {
    throw new FactoryError('InvalidTransition', `${event}: not allowed while the sandbox is ${state.sandbox} (its ${move.sandbox} needs ${SANDBOX_LIFE[move.sandbox].from.join(', ')})`);
  }
  return { phase: move.to, sandbox: move.sandbox ? SANDBOX_LIFE[move.sandbox].to : state.sandbox };
}

/** True when some event of the table leads from `from` to `to` (a phase change made without naming its event). */
export function phaseMoveExists(from: TaskPhase, to: TaskPhase): boolean {
  return Object.values(TASK_LIFE).some((m: PhaseMove) => m.to === to && has(m.from, from));
}

export function sandboxMoveExists(from: SandboxStatus, to: SandboxStatus): boolean {
  return Object.values(SANDBOX_LIFE).some((m: SandboxMove) => m.to === to && has(m.from, from));
}

export function isActive(phase: TaskPhase): boolean {
  return has(ACTIVE_PHASES, phase);
}

export function isLive(status: SandboxStatus): boolean {
  return has(LIVE_SANDBOX, status);
}

export const INTERRUPTED_SUMMARY = 'interrupted: the app stopped';

/** The stages after a cancel: the running one cancelled, the ones that did not start skipped. */
export function cancelledStages(stages: StageResult[]): StageResult[] {
  return stages.map((s) => (s.status === 'running' ? { ...s, status: 'cancelled' as const } : s.status === 'pending' ? { ...s, status: 'skipped' as const } : s));
}

/**
 * The task as an interruption leaves it: the cut stage (running, or already
 * marked cancelled by the runner's abort) says so, later stages wait for a
 * retry, and the error says what Retry does.
 */
export function interruption(t: Pick<Task, 'stages' | 'setup'>, wasPhase: TaskPhase): Pick<Task, 'stages' | 'error' | 'setup'> {
  const cut = t.stages.findIndex((s) => s.status === 'running' || s.status === 'cancelled');
  return {
    // Setup cut off by the app stopping runs again in the fresh sandbox a retry gives.
    ...(t.setup?.status === 'running' ? { setup: { ...t.setup, status: 'interrupted' as const, summary: INTERRUPTED_SUMMARY } } : {}),
    stages: t.stages.map((s, i) => {
      if (i === cut) return { ...s, status: 'interrupted' as const, summary: INTERRUPTED_SUMMARY };
      if (cut >= 0 && i > cut && s.status === 'skipped') return { name: s.name, status: 'pending' as const };
      return s;
    }),
    error: { name: 'Interrupted', message: `the app stopped while the task was ${wasPhase}; Retry runs it again in a fresh sandbox` },
  };
}
