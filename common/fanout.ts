// A task run N ways (issue 32): one preparation, N sandboxes booted from it, each
// a task of its own (own identity, proxy, placeholders, audit log) tagged with its
// group and way. The comparison a user picks the best way from is computed here,
// purely, from the ways' tasks and reviews, so the host and the UI agree on it.
import { z } from 'zod';
import { EgressRule } from './egress.js';
import { MAX_WAYS, type PullbackReview, type Task, type TaskPhase } from './domain.js';
import { ReviewConfirmationKind } from './review.js';

export { MAX_WAYS };

const groupId = z.string().regex(/^fan-[a-z0-9]{8}$/, 'must be a fan-out group id (fan-xxxxxxxx)');
const agentName = z.string().min(1).max(64).regex(/^[a-z0-9-]+$/, 'must be lowercase letters, digits or dashes');

export const fanoutApiInputs = {
  /** Runs a task N ways: one preparation (seed + setup, frozen), then N sandboxes from it; `agents` names each way's agent (one name: all ways). */
  'fanout.create': z
    .object({
      repoPath: z.string().min(1).max(4096),
      title: z.string().trim().min(1, 'the task text is empty').max(20_000),
      ways: z.number().int('must be a whole number').min(1, 'must be at least 1').max(MAX_WAYS, `must be at most ${MAX_WAYS}`),
      agents: z.array(agentName).min(1).max(MAX_WAYS).optional(),
      baseRef: z.string().min(1).max(256).optional(),
      egressApproval: z.object({ rules: z.array(EgressRule).max(64), remember: z.boolean() }).optional(),
    })
    .refine((v) => !v.agents || v.agents.length === 1 || v.agents.length === v.ways, { message: 'agents: name one agent for every way, or one for all', path: ['agents'] }),
  /** The ways side by side: stages, durations, test counts, review verdict, lines and files changed, tokens and cost, leak check. */
  'fanout.compare': z.object({ group: groupId }),
  /** Approves one way (the usual confirmations); every other way is rejected or ended, its sandbox destroyed. */
  'fanout.approve': z.object({ group: groupId, way: z.number().int().min(1).max(MAX_WAYS), confirm: z.array(ReviewConfirmationKind).max(8).optional() }),
  /** Ends every way: those in review are rejected, running ones cancelled, and their sandboxes destroyed. */
  'fanout.rejectAll': z.object({ group: groupId }),
  /** The diff from way `from`'s result to way `to`'s, both in review: what one did that the other did not. */
  'fanout.diff': z.object({ group: groupId, from: z.number().int().min(1).max(MAX_WAYS), to: z.number().int().min(1).max(MAX_WAYS) }),
};

/** Where a way is, in the comparison's words: queued covers waiting for the preparation and for a parallel slot. */
export type WayState = 'queued' | 'running' | 'review' | 'approved' | 'rejected' | 'failed' | 'cancelled';

export interface WayComparison {
  way: number;
  taskId: string;
  agent: string | undefined;
  state: WayState;
  phase: TaskPhase;
  /** Whether this way's sandbox is the one that was prepared (set up and frozen) for the others. */
  preparation: boolean;
  stages: Array<{ name: string; status: string; durationMs?: number; summary?: string }>;
  /** The test stage's counts, when its runner printed them. */
  tests?: { passed: number; failed: number };
  /** The review stage: passed (approve), failed (blocked), or not run; and its first line. */
  reviewVerdict?: { status: string; summary?: string };
  /** From the pulled-back review: lines added and removed, files touched. */
  change?: { added: number; removed: number; files: number };
  tokens?: { input: number; output: number };
  costUsd?: number;
  /** The leak check's verdict, when one ran. */
  leakCheck?: string;
  error?: { name: string; message: string };
}

export interface FanoutComparison {
  group: string;
  title: string;
  repoPath: string;
  ways: WayComparison[];
}

export interface WaysDiff {
  group: string;
  from: number;
  to: number;
  /** The patch (capped, credential values masked), text from the sandboxes: shown escaped. */
  diff: { patch: string; patchTruncated: boolean };
}

export interface FanoutApiOutputs {
  'fanout.diff': WaysDiff;
  'fanout.create': FanoutComparison;
  'fanout.compare': FanoutComparison;
  'fanout.approve': FanoutComparison;
  'fanout.rejectAll': FanoutComparison;
}

export function wayState(phase: TaskPhase, started: boolean): WayState {
  switch (phase) {
    case 'creating':
      return started ? 'running' : 'queued';
    case 'provisioning':
    case 'seeding':
    case 'running':
    case 'pulling-back':
      return 'running';
    case 'review':
    case 'approved':
    case 'rejected':
    case 'failed':
    case 'cancelled':
      return phase;
    default:
      // interrupted (the app stopped) and closed (not a pipeline task) count as failed ways.
      return 'failed';
  }
}

/** "12 passed, 1 failed: adds numbers" (the test stage's line) → its counts. */
export function testCounts(summary: string | undefined): { passed: number; failed: number } | undefined {
  if (!summary) return undefined;
  const passed = /(\d+) passed/.exec(summary);
  const failed = /(\d+) failed/.exec(summary);
  if (!passed && !failed) return undefined;
  return { passed: passed ? Number(passed[1]) : 0, failed: failed ? Number(failed[1]) : 0 };
}

/** One way's column, from its task, its review (when it has one) and its leak check verdict. */
export function compareWay(task: Task, review: PullbackReview | undefined, leakVerdict?: string): WayComparison {
  const tag = task.fanout;
  const test = task.stages.find((s) => s.name === 'test');
  const reviewStage = task.stages.find((s) => s.name === 'review');
  const tokens = task.stages.reduce<{ input: number; output: number } | undefined>(
    (sum, s) => (s.tokens ? { input: (sum?.input ?? 0) + s.tokens.input, output: (sum?.output ?? 0) + s.tokens.output } : sum),
    undefined,
  );
  const cost = task.stages.reduce<number | undefined>((sum, s) => (s.costUsd !== undefined ? (sum ?? 0) + s.costUsd : sum), undefined);
  const counts = test && test.status !== 'pending' && test.status !== 'skipped' ? testCounts(test.summary) : undefined;
  return {
    way: tag?.way ?? 1,
    taskId: task.id,
    agent: task.agent,
    state: wayState(task.phase, task.sandbox.status !== 'none'),
    phase: task.phase,
    preparation: !!task.setup?.layer && !task.setup.layer.reused,
    stages: task.stages.map((s) => ({ name: s.name, status: s.status, ...(s.durationMs !== undefined ? { durationMs: s.durationMs } : {}), ...(s.summary ? { summary: s.summary } : {}) })),
    ...(counts ? { tests: counts } : {}),
    ...(reviewStage && reviewStage.status !== 'pending' ? { reviewVerdict: { status: reviewStage.status, ...(reviewStage.summary ? { summary: reviewStage.summary } : {}) } } : {}),
    ...(review ? { change: { added: review.added, removed: review.removed, files: review.files.length + review.filesOmitted } } : {}),
    ...(tokens ? { tokens } : {}),
    ...(cost !== undefined ? { costUsd: cost } : {}),
    ...(leakVerdict ? { leakCheck: leakVerdict } : {}),
    ...(task.error ? { error: { name: task.error.name, message: task.error.message } } : {}),
  };
}
