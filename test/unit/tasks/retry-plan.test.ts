// What Retry runs, decided before the task is touched: which stage it starts
// at, which results it keeps, and what it refuses.
import { describe, expect, it } from 'vitest';
import { STAGE_NAMES, type StageResult, type StageStatus, type Task, type TaskPhase } from '../../../common/domain.js';
import { planRetry } from '../../../main/tasks/retry-plan.js';

function task(phase: TaskPhase, statuses: StageStatus[]): Task {
  return {
    id: 'abcdefgh',
    title: 't',
    repoPath: '/r',
    baseRef: 'main',
    baseCommit: 'a'.repeat(40),
    branch: 'factory/abcdefgh',
    createdAt: new Date(0).toISOString(),
    phase,
    sandbox: { status: 'lost' },
    stages: STAGE_NAMES.map((name, i): StageResult => ({ name, status: statuses[i] ?? 'pending', summary: `${name} result`, sessionId: `s-${name}` })),
  };
}

describe('planRetry', () => {
  it('starts an interrupted task at the stage that was cut, keeping what passed before it', () => {
    const plan = planRetry(task('interrupted', ['passed', 'passed', 'interrupted', 'pending']));
    expect(plan.start).toBe('build');
    expect(plan.stages.slice(0, 2)).toEqual([
      { name: 'request', status: 'passed', summary: 'request result', sessionId: 's-request' },
      { name: 'plan', status: 'passed', summary: 'plan result', sessionId: 's-plan' },
    ]);
    // The cut stage and those after it start over: no summary or session of the run that was cut.
    expect(plan.stages.slice(2)).toEqual(['build', 'test', 'review', 'document'].map((name) => ({ name, status: 'pending' })));
  });

  it('in a fresh sandbox runs every stage again: what earlier stages changed went with the old one', () => {
    // Found by the soak (seed 20261203): cut during test and retried from there, a task brought back no change.
    const cut = task('interrupted', ['passed', 'passed', 'passed', 'interrupted', 'pending']);
    const plan = planRetry(cut, undefined, { fresh: true });
    expect(plan.start).toBe('request');
    expect(plan.stages.map((s) => s.status)).toEqual(['pending', 'pending', 'pending', 'pending', 'pending', 'pending']);
    expect(() => planRetry(cut, 'test', { fresh: true })).toThrow(/sandbox is gone, and with it what its earlier stages changed: a retry in a fresh sandbox runs every stage again from request, not from test/);
    const blocked = task('failed', ['passed', 'passed', 'passed', 'passed', 'failed', 'skipped']);
    expect(() => planRetry(blocked, undefined, { fresh: true, overrideReview: true })).toThrow(/the review can be overridden only while its sandbox runs/);
  });

  it('starts at the failed or cancelled stage, or at the first one when none is', () => {
    expect(planRetry(task('failed', ['passed', 'passed', 'passed', 'failed', 'skipped', 'skipped'])).start).toBe('test');
    expect(planRetry(task('cancelled', ['passed', 'cancelled', 'skipped'])).start).toBe('plan');
    // Interrupted before any stage ran (waiting for a slot, booting, seeding).
    expect(planRetry(task('interrupted', [])).start).toBe('request');
  });

  it('runs setup again when it failed or was cancelled, its card pending with the plan kept and the failed run gone', () => {
    const failedSetup = {
      ...task('failed', []),
      setup: { status: 'failed' as const, source: 'detected' as const, lines: ['npm ci (package-lock.json)'], unsupported: [], summary: 'npm ci failed', step: 'npm ci', sessionId: 's-setup', exitCode: 101, durationMs: 85_000 },
    };
    const plan = planRetry(failedSetup);
    expect(plan.start).toBe('request');
    expect(plan.setup).toEqual({ status: 'pending', source: 'detected', lines: ['npm ci (package-lock.json)'], unsupported: [] });
    expect(planRetry({ ...failedSetup, phase: 'cancelled', setup: { ...failedSetup.setup, status: 'cancelled' } }).setup?.status).toBe('pending');
    // A stage cannot be chosen past a setup that never finished: none of them passed.
    expect(() => planRetry(failedSetup, 'build')).toThrow('cannot start at build: stage request has not passed');
    // A setup that passed or was skipped is not run again.
    for (const status of ['passed', 'skipped'] as const) {
      expect(planRetry({ ...task('failed', ['passed', 'failed']), setup: { ...failedSetup.setup, status } }).setup).toBeUndefined();
    }
  });

  it('starts where asked when every earlier stage passed', () => {
    expect(planRetry(task('failed', ['passed', 'passed', 'passed', 'failed']), 'plan').start).toBe('plan');
    expect(() => planRetry(task('failed', ['passed', 'passed', 'passed', 'failed']), 'review')).toThrow('cannot start at review: stage test has not passed');
  });

  it.each(['creating', 'provisioning', 'seeding', 'running', 'pulling-back', 'review', 'approved', 'rejected'] as TaskPhase[])(
    'refuses a task that is %s',
    (phase) => {
      expect(() => planRetry(task(phase, ['passed']))).toThrow(
        expect.objectContaining({ name: 'NotRetryable', message: `task abcdefgh is ${phase}; only a failed, cancelled or interrupted task can be retried` }),
      );
    },
  );

  it('overrides a failed review: it counts as passed, marked so, and the document stage runs', () => {
    const plan = planRetry(task('failed', ['passed', 'passed', 'passed', 'passed', 'failed', 'skipped']), undefined, { overrideReview: true });
    expect(plan.start).toBe('document');
    expect(plan.stages[4]).toMatchObject({ name: 'review', status: 'passed', summary: 'overridden by the user: review result' });
    expect(plan.stages[5]).toEqual({ name: 'document', status: 'pending' });
  });

  it('refuses to override a review that did not fail, or to go on elsewhere than the document stage', () => {
    expect(() => planRetry(task('failed', ['passed', 'passed', 'passed', 'failed']), undefined, { overrideReview: true })).toThrow('did not fail; there is nothing to override');
    expect(() => planRetry(task('failed', ['passed', 'passed', 'passed', 'passed', 'failed']), 'test', { overrideReview: true })).toThrow(
      'an overridden review goes on with the document stage',
    );
  });
});
