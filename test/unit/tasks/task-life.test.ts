// The task life as a table: every move the tables allow gives the phase and
// sandbox status they name, and every other (phase or sandbox status) × event
// pair, generated as the complement of the tables, is refused with an error
// that names the move.
import { describe, expect, it } from 'vitest';
import { SandboxStatus, TaskPhase } from '../../../common/domain.js';
import {
  SANDBOX_LIFE,
  TASK_LIFE,
  cancelledStages,
  interruption,
  nextSandbox,
  nextState,
  phaseMoveExists,
  sandboxMoveExists,
  type SandboxEvent,
  type TaskEvent,
} from '../../../main/tasks/task-life.js';

const PHASES = TaskPhase.options;
const SANDBOXES = SandboxStatus.options;
const TASK_EVENTS = Object.keys(TASK_LIFE) as TaskEvent[];
const SANDBOX_EVENTS = Object.keys(SANDBOX_LIFE) as SandboxEvent[];

// The table as the design states it, written out again by hand: a change to
// task-life.ts that is not also made here fails.
const EXPECTED_PHASE_MOVES: Record<TaskEvent, string> = {
  provision: 'creating → provisioning',
  booted: 'provisioning → seeding',
  seeded: 'seeding → running',
  pipelinePassed: 'running → pulling-back',
  pulledBack: 'pulling-back → review',
  fail: 'creating provisioning seeding running pulling-back → failed',
  cancel: 'creating provisioning seeding running pulling-back → cancelled',
  interrupt: 'creating provisioning seeding running pulling-back → interrupted',
  approve: 'review → approved',
  reject: 'review → rejected',
  close: 'creating provisioning seeding running pulling-back → closed',
  retry: 'failed cancelled → running',
  retryFresh: 'failed cancelled interrupted → creating',
};
const EXPECTED_SANDBOX_MOVES: Record<SandboxEvent, string> = {
  boot: 'none lost destroyed → booting',
  booted: 'booting → running',
  bootEnded: 'booting → none',
  stop: 'running → stopping',
  stopped: 'stopping lost → destroyed',
  crashed: 'running → lost',
  appStopped: 'booting running stopping → lost',
};

/** Sandbox statuses in which a phase move is allowed (its guard and its sandbox move both hold). */
function sandboxesAllowing(event: TaskEvent): SandboxStatus[] {
  const move = TASK_LIFE[event] as { requires?: readonly SandboxStatus[]; sandbox?: SandboxEvent };
  return SANDBOXES.filter(
    (s) => (!move.requires || move.requires.includes(s)) && (!move.sandbox || (SANDBOX_LIFE[move.sandbox].from as readonly string[]).includes(s)),
  );
}

describe('the phase table', () => {
  it('holds exactly the moves of the design', () => {
    const written = Object.fromEntries(TASK_EVENTS.map((e) => [e, `${TASK_LIFE[e].from.join(' ')} → ${TASK_LIFE[e].to}`]));
    expect(written).toEqual(EXPECTED_PHASE_MOVES);
    const sandboxWritten = Object.fromEntries(SANDBOX_EVENTS.map((e) => [e, `${SANDBOX_LIFE[e].from.join(' ')} → ${SANDBOX_LIFE[e].to}`]));
    expect(sandboxWritten).toEqual(EXPECTED_SANDBOX_MOVES);
  });

  it('only the boot and retry moves touch or need the sandbox', () => {
    expect(sandboxesAllowing('provision')).toEqual(['none', 'destroyed', 'lost']);
    expect(sandboxesAllowing('booted')).toEqual(['booting']);
    expect(sandboxesAllowing('retry')).toEqual(['running']);
    expect(sandboxesAllowing('retryFresh')).toEqual(['none', 'destroyed', 'lost']);
    for (const e of TASK_EVENTS.filter((x) => !['provision', 'booted', 'retry', 'retryFresh'].includes(x))) expect(sandboxesAllowing(e)).toEqual(SANDBOXES);
  });

  const allowed: Array<[TaskEvent, TaskPhase, SandboxStatus]> = [];
  const refused: Array<[TaskEvent, TaskPhase, SandboxStatus]> = [];
  for (const event of TASK_EVENTS) {
    for (const phase of PHASES) {
      for (const sandbox of SANDBOXES) {
        const ok = (TASK_LIFE[event].from as readonly string[]).includes(phase) && sandboxesAllowing(event).includes(sandbox);
        (ok ? allowed : refused).push([event, phase, sandbox]);
      }
    }
  }

  it('has both allowed and refused moves to check', () => {
    // 13 events × 12 phases × 6 sandbox statuses
    expect(allowed.length + refused.length).toBe(936);
    expect(allowed.length).toBe(165);
  });

  it.each(allowed)('%s from %s (sandbox %s) is allowed', (event, phase, sandbox) => {
    const move = TASK_LIFE[event] as { to: TaskPhase; sandbox?: SandboxEvent };
    const next = nextState({ phase, sandbox }, event);
    expect(next.phase).toBe(move.to);
    expect(next.sandbox).toBe(move.sandbox ? SANDBOX_LIFE[move.sandbox].to : sandbox);
    expect(phaseMoveExists(phase, next.phase)).toBe(true);
  });

  it.each(refused)('%s from %s (sandbox %s) is refused', (event, phase, sandbox) => {
    expect(() => nextState({ phase, sandbox }, event)).toThrow(expect.objectContaining({ name: 'InvalidTransition', message: expect.stringContaining(event) }));
  });

  it('refuses every phase pair no event joins, including staying put', () => {
    const joined = new Set(TASK_EVENTS.flatMap((e) => TASK_LIFE[e].from.map((f) => `${f}>${TASK_LIFE[e].to}`)));
    let refusedPairs = 0;
    for (const from of PHASES) {
      for (const to of PHASES) {
        expect(phaseMoveExists(from, to)).toBe(joined.has(`${from}>${to}`));
        if (!joined.has(`${from}>${to}`)) refusedPairs++;
      }
    }
    expect(refusedPairs).toBe(144 - joined.size);
    // What the founders' bug report needed: nothing leaves review but a decision; nothing leaves a decision.
    expect(PHASES.filter((p) => phaseMoveExists('review', p))).toEqual(['approved', 'rejected']);
    expect(PHASES.filter((p) => phaseMoveExists('approved', p) || phaseMoveExists('rejected', p))).toEqual([]);
  });
});

describe('the sandbox table', () => {
  const allowed: Array<[SandboxEvent, SandboxStatus]> = [];
  const refused: Array<[SandboxEvent, SandboxStatus]> = [];
  for (const event of SANDBOX_EVENTS) {
    for (const s of SANDBOXES) ((SANDBOX_LIFE[event].from as readonly string[]).includes(s) ? allowed : refused).push([event, s]);
  }

  it('has both allowed and refused moves to check', () => {
    expect(allowed.length).toBe(12);
    expect(refused.length).toBe(7 * 6 - 12);
  });

  it.each(allowed)('%s from %s is allowed', (event, status) => {
    expect(nextSandbox(status, event)).toBe(SANDBOX_LIFE[event].to);
    expect(sandboxMoveExists(status, SANDBOX_LIFE[event].to)).toBe(true);
  });

  it.each(refused)('%s from %s is refused', (event, status) => {
    expect(() => nextSandbox(status, event)).toThrow(expect.objectContaining({ name: 'InvalidTransition', message: expect.stringContaining(`while the sandbox is ${status}`) }));
  });

  it('never boots a sandbox that may still run', () => {
    for (const s of ['booting', 'running', 'stopping'] as const) expect(() => nextSandbox(s, 'boot')).toThrow(/not allowed/);
  });
});

describe('what a cut or a cancel leaves of the stages', () => {
  const stages = [
    { name: 'request' as const, status: 'passed' as const, summary: 'ok' },
    { name: 'plan' as const, status: 'running' as const },
    { name: 'build' as const, status: 'pending' as const },
  ];

  it('an interruption marks the running stage and the task, and leaves later stages to a retry', () => {
    const cut = interruption({ stages }, 'running');
    expect(cut.stages.map((s) => s.status)).toEqual(['passed', 'interrupted', 'pending']);
    expect(cut.stages[1]!.summary).toBe('interrupted: the app stopped');
    expect(cut.error).toEqual({ name: 'Interrupted', message: 'the app stopped while the task was running; Retry runs it again in a fresh sandbox' });
  });

  it('an interruption seen through the runner\'s abort (cancelled, then skipped) reads the same', () => {
    const aborted = [stages[0]!, { ...stages[1]!, status: 'cancelled' as const }, { ...stages[2]!, status: 'skipped' as const }];
    expect(interruption({ stages: aborted }, 'running').stages.map((s) => s.status)).toEqual(['passed', 'interrupted', 'pending']);
  });

  it('an interruption before any stage ran leaves the stages as they are', () => {
    const waiting = stages.map((s) => ({ name: s.name, status: 'pending' as const }));
    expect(interruption({ stages: waiting }, 'provisioning').stages).toEqual(waiting);
  });

  it('an interruption during setup marks setup interrupted, and a finished setup stays as it was', () => {
    const waiting = stages.map((s) => ({ name: s.name, status: 'pending' as const }));
    const running = { status: 'running' as const, source: 'detected' as const, lines: ['npm ci'], unsupported: [] };
    expect(interruption({ stages: waiting, setup: running }, 'seeding').setup).toMatchObject({ status: 'interrupted', summary: 'interrupted: the app stopped' });
    expect(interruption({ stages, setup: { ...running, status: 'passed' } }, 'running').setup).toBeUndefined();
  });

  it('a cancel marks the running stage cancelled and the rest skipped', () => {
    expect(cancelledStages(stages).map((s) => s.status)).toEqual(['passed', 'cancelled', 'skipped']);
  });
});
