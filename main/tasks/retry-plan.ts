// What a retry runs: from which stage, with which stage results kept. Pure, so
// every refusal is checked before the task is touched.
import { FactoryError } from '../../common/errors.js';
import { STAGE_NAMES, type SetupInfo, type StageName, type StageResult, type Task } from '../../common/domain.js';

export interface RetryPlan {
  start: StageName;
  /** Stages before `start` as they were (passed); `start` and later pending again (keeping their attempt count). */
  stages: StageResult[];
  /** Setup did not finish (failed, cancelled, cut): it runs again before the first stage, its card pending again. */
  setup?: SetupInfo;
}

/**
 * From `fromStage`, or by default the stage that failed, was cancelled or was
 * cut by the app stopping (the first stage when none did). With
 * `overrideReview`, a failed review counts as passed (marked so) and the
 * document stage runs. In a fresh sandbox (`fresh`: the old one is gone), every
 * stage runs again from the first: what the earlier stages changed lived in the
 * old sandbox, and going on from a later stage would bring back a result without it.
 */
export function planRetry(task: Task, fromStage?: StageName, opts: { overrideReview?: boolean; fresh?: boolean } = {}): RetryPlan {
  if (task.kind === 'quick') {
    throw new FactoryError('NotRetryable', `${task.id} is a quick sandbox: it has no pipeline to run again; start another quick sandbox`);
  }
  if (task.kind === 'agent') {
    throw new FactoryError('NotRetryable', `${task.id} is an agent session: it has no pipeline to run again; start another session`);
  }
  if (task.phase !== 'failed' && task.phase !== 'cancelled' && task.phase !== 'interrupted') {
    throw new FactoryError('NotRetryable', `task ${task.id} is ${task.phase}; only a failed, cancelled or interrupted task can be retried`);
  }
  let stages = task.stages;
  if (opts.fresh) {
    // Found by the soak (seed 20261203): a task cut during its test stage, retried from there in a
    // fresh sandbox, came back with no change at all: its build's files had gone with the old sandbox.
    const first = STAGE_NAMES[0]!;
    const why = `task ${task.id}'s sandbox is gone, and with it what its earlier stages changed: a retry in a fresh sandbox runs every stage again from ${first}`;
    if (opts.overrideReview) throw new FactoryError('NotRetryable', `${why}; the review can be overridden only while its sandbox runs`);
    if (fromStage && fromStage !== first) throw new FactoryError('NotRetryable', `${why}, not from ${fromStage}`);
    fromStage = first;
  }
  if (opts.overrideReview) {
    // The user accepts the change the review stage refused: it counts as passed, marked as overridden.
    const review = stages.find((s) => s.name === 'review');
    if (review?.status !== 'failed') throw new FactoryError('InvalidInput', `the review of task ${task.id} did not fail; there is nothing to override`);
    if (fromStage && fromStage !== 'document') throw new FactoryError('InvalidInput', 'an overridden review goes on with the document stage');
    fromStage = 'document';
    const summary = `overridden by the user: ${review.summary ?? 'review failed'}`.slice(0, 240);
    stages = stages.map((s) => (s.name === 'review' ? { ...s, status: 'passed' as const, summary } : s));
  }
  const start = fromStage ?? stages.find((s) => s.status === 'failed' || s.status === 'cancelled' || s.status === 'interrupted')?.name ?? 'request';
  const from = STAGE_NAMES.indexOf(start);
  for (const s of stages) {
    if (s.name === start) break;
    // A stage skipped for having nothing to do counts as done; one skipped after a failure comes after that failure.
    if (s.status !== 'passed' && s.status !== 'skipped') throw new FactoryError('InvalidInput', `cannot start at ${start}: stage ${s.name} has not passed`);
  }
  const setup = setupAgain(task.setup);
  return {
    start,
    stages: stages.map((s) => (STAGE_NAMES.indexOf(s.name) >= from ? { name: s.name, status: 'pending' as const, ...(s.attempt ? { attempt: s.attempt } : {}) } : s)),
    ...(setup ? { setup } : {}),
  };
}

/** A setup that did not pass (or was skipped) starts over: the plan's lines stay, its run's details go. */
function setupAgain(setup: SetupInfo | undefined): SetupInfo | undefined {
  if (!setup || setup.status === 'passed' || setup.status === 'skipped') return undefined;
  return { status: 'pending', source: setup.source, lines: setup.lines, unsupported: setup.unsupported };
}
