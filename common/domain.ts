// Domain types shared by every process. Pure TypeScript: no Node, no DOM.
import { z } from 'zod';
import { EgressRefusal, EgressRule } from './egress.js';

export const STAGE_NAMES = ['request', 'plan', 'build', 'test', 'review', 'document'] as const;
export const StageName = z.enum(STAGE_NAMES);
export type StageName = z.infer<typeof StageName>;

/** 'interrupted': the app stopped while the stage ran; a retry runs it again in a fresh sandbox. */
export const StageStatus = z.enum(['pending', 'running', 'passed', 'failed', 'skipped', 'cancelled', 'interrupted']);
export type StageStatus = z.infer<typeof StageStatus>;

export const StageResult = z.object({
  name: StageName,
  status: StageStatus,
  startedAt: z.string().optional(),
  endedAt: z.string().optional(),
  durationMs: z.number().optional(),
  exitCode: z.number().nullable().optional(),
  /** One line the board shows on the card (agent summary, test counts, error). */
  summary: z.string().optional(),
  /** Terminal session that carried this stage's output (its log survives restarts). */
  sessionId: z.string().optional(),
  tokens: z.object({ input: z.number(), output: z.number() }).optional(),
  costUsd: z.number().optional(),
  /** Which run of the stage this is: 1 the first time, 2 after one retry, ... */
  attempt: z.number().int().min(1).optional(),
});
export type StageResult = z.infer<typeof StageResult>;

// A task's environment: the setup step before the pipeline and its egress.
export const EnvironmentSource = z.enum(['pipeline.json', 'devcontainer.json', 'detected', 'none']);
export type EnvironmentSource = z.infer<typeof EnvironmentSource>;

/** The setup step before the pipeline: its own terminal, status and duration on the board. */
export const SetupInfo = z.object({
  status: StageStatus,
  source: EnvironmentSource,
  /** What the plan is made of: "Node 22.12.0 (.nvmrc)", "Debian: gcc make", "npm ci (package-lock.json)". */
  lines: z.array(z.string()),
  /** Parts of the repository's config the sandbox cannot honour, by name. */
  unsupported: z.array(z.string()),
  /** One line for the board: what ran, why it was skipped, or where it failed. */
  summary: z.string().optional(),
  /** The step running or the one that failed ("Debian packages", "npm ci", ...). */
  step: z.string().optional(),
  sessionId: z.string().optional(),
  startedAt: z.string().optional(),
  endedAt: z.string().optional(),
  durationMs: z.number().optional(),
  exitCode: z.number().nullable().optional(),
  /** The cached environment layer the sandbox booted on (reused) or the one its setup made. */
  layer: z.object({ id: z.string(), reused: z.boolean() }).optional(),
});
export type SetupInfo = z.infer<typeof SetupInfo>;

/** What the sandbox may reach beyond the model APIs, and what it was refused (distinct destinations, newest last). */
export const TaskEgress = z.object({
  /** Rules the user added for this task (from the repository's requests or a refusal's Allow). */
  allowed: z.array(EgressRule),
  refusals: z.array(EgressRefusal),
});
export type TaskEgress = z.infer<typeof TaskEgress>;

/** Where a task is in its life (DESIGN.md, "Life of a task"). */
export const TaskPhase = z.enum([
  'creating',
  'provisioning',
  'seeding',
  'running',
  'pulling-back',
  'review',
  'approved',
  'rejected',
  'failed',
  'cancelled',
  /** The app stopped while the task was active; its sandbox is gone and a retry gives it a fresh one. */
  'interrupted',
  /** A quick sandbox that ended (its shell closed, or the user destroyed it): nothing of it runs. */
  'closed',
]);
export type TaskPhase = z.infer<typeof TaskPhase>;

export const SandboxStatus = z.enum(['none', 'booting', 'running', 'stopping', 'destroyed', 'lost']);
export type SandboxStatus = z.infer<typeof SandboxStatus>;

export const SandboxInfo = z.object({
  status: SandboxStatus,
  /** kvm | hvf | tcg, as chosen by the accel probe. */
  accel: z.string().optional(),
  sshPort: z.number().optional(),
  bootMs: z.number().optional(),
  /** Why the sandbox booted cold although a saved memory was there to restore (one line, capped by the host). */
  coldBootReason: z.string().max(1000).optional(),
  /** After Approve or Reject the sandbox is kept for inspection until this time (ISO), then destroyed. */
  keptUntil: z.string().optional(),
  /** The sandbox host it runs on (issue 14); absent for this machine. */
  host: z.string().optional(),
});
export type SandboxInfo = z.infer<typeof SandboxInfo>;

export const ErrorInfo = z.object({
  name: z.string(),
  message: z.string(),
  /** Extra lines worth showing (e.g. the last serial console lines of a guest that never booted). */
  detail: z.string().optional(),
});
export type ErrorInfo = z.infer<typeof ErrorInfo>;

export const Decision = z.object({
  kind: z.enum(['approved', 'rejected']),
  at: z.string(),
  branch: z.string().optional(),
  commit: z.string().optional(),
});
export type Decision = z.infer<typeof Decision>;

/** The most ways a task may be run (issue 32, common/fanout.ts). */
export const MAX_WAYS = 8;

/** What a task of a fan-out group carries: its group, which way it is, and how many ways there are. */
export const FanoutTag = z.object({
  group: z.string(),
  way: z.number().int().min(1).max(MAX_WAYS),
  ways: z.number().int().min(1).max(MAX_WAYS),
});
export type FanoutTag = z.infer<typeof FanoutTag>;

/** The leak checks of a Claude Code session's sandbox kept with its task: the newest, so a long session's record stays small. */
export const SESSION_CHECKS_KEPT = 200;

/**
 * One leak check of a Claude Code session's sandbox (issue 27): after a turn
 * (Stop), at the session's end, or at a subagent's stop. What was found is
 * named, never shown: the credential's name, where and in which form.
 */
export const SessionCheck = z.object({
  /** Stop: the turn it followed (1, 2, ...); SessionEnd: the last turn; SubagentStop: the session's turn in progress. */
  turn: z.number().int().min(0),
  hook: z.enum(['Stop', 'SessionEnd', 'SubagentStop']),
  at: z.string(),
  /** 'error': the check could not finish; like 'leak' and 'incomplete' it blocks the hook and keeps the sandbox. */
  verdict: z.enum(['clean', 'leak', 'incomplete', 'error']),
  durationMs: z.number().optional(),
  /** Sources scanned, their bytes, and those not scanned in full (a cap reached, an error) with why. */
  scanned: z.object({ sources: z.number().int().min(0), bytes: z.number().min(0), limited: z.array(z.object({ source: z.string(), reason: z.string() })) }),
  /** The first findings (credential name, source, encoding); findingCount counts them all. */
  findings: z.array(z.object({ credentialId: z.string(), source: z.string(), encoding: z.string() })),
  findingCount: z.number().int().min(0),
  /** Why a check could not finish. */
  error: z.string().optional(),
});
export type SessionCheck = z.infer<typeof SessionCheck>;

/** What became of a subagent's sandbox at SubagentStop (or when its session ended first). */
export const SubagentOutcome = z.object({
  /** merged: its work is branch `branch` of the session's sandbox; no-work: nothing to bring; kept: kept for inspection; ended: went with its session. */
  kind: z.enum(['merged', 'no-work', 'kept', 'ended']),
  branch: z.string().optional(),
  commits: z.number().int().min(0).optional(),
  reason: z.string().optional(),
});
export type SubagentOutcome = z.infer<typeof SubagentOutcome>;

/** A task that is a Claude Code session's sandbox (hooks mode), or one of its subagents'. */
export const HookSession = z.object({
  /** The agent's session id. */
  sessionId: z.string(),
  /** Whose session: Codex's, or Claude Code's when absent. */
  agent: z.literal('codex').optional(),
  /** Stop checks so far (turns), also those no longer in `checks`. */
  turns: z.number().int().min(0),
  /** Oldest first, the last SESSION_CHECKS_KEPT. */
  checks: z.array(SessionCheck),
  /** Set on a subagent's sandbox: its session's task, Claude Code's agent id and type, and how it ended. */
  subagent: z
    .object({ parentTaskId: z.string(), agentId: z.string(), agentType: z.string().optional(), outcome: SubagentOutcome.optional() })
    .optional(),
});
export type HookSession = z.infer<typeof HookSession>;

/** Whose session or agent sandbox a card names: Codex's, else Claude Code's (the only other interactive agent). */
export function interactiveAgentName(agent: string | undefined): 'Codex' | 'Claude Code' {
  return agent === 'codex' ? 'Codex' : 'Claude Code';
}

export const Task = z.object({
  id: z.string(),
  title: z.string(),
  repoPath: z.string(),
  baseRef: z.string(),
  baseCommit: z.string(),
  /** Branch name used inside the sandbox and, after approval, in the host repo. */
  branch: z.string(),
  createdAt: z.string(),
  phase: TaskPhase,
  sandbox: SandboxInfo,
  stages: z.array(StageResult),
  error: ErrorInfo.optional(),
  decision: Decision.optional(),
  /** Agent chosen for the task (issue 4); 'command' runs the pipeline.json commands. */
  agent: z.string().optional(),
  /** Git push through the credential proxy, only to new branches under refs/heads/factory/<id>/; off unless the user turned it on. */
  allowPush: z.boolean().optional(),
  /** The setup step before the pipeline (absent on tasks made before environments existed). */
  setup: SetupInfo.optional(),
  /** Egress the user added for this task, and destinations the sandbox was refused. */
  egress: TaskEgress.optional(),
  /** The agents' scratch files (plan, review) copied out of the sandbox: kept with the task, not in its branch. */
  artifacts: z.array(z.object({ name: z.string(), bytes: z.number(), truncated: z.boolean() })).optional(),
  /**
   * 'quick': a sandbox in one click (tray, UI, `factory sandbox`): a fresh VM and a shell,
   * optionally a repository seeded, no pipeline. 'agent': an agent session (`factory claude`,
   * `factory codex`): the agent's own TUI in a fresh sandbox, its work to review when it exits.
   * Absent: a task with a pipeline.
   */
  kind: z.enum(['pipeline', 'quick', 'agent']).optional(),
  /** A quick sandbox the user keeps after its shell closes (until they destroy it). */
  keep: z.boolean().optional(),
  /** Hidden from the board (listed under "Archived", restorable) since then (ISO). */
  archivedAt: z.string().optional(),
  /** A Claude Code session's sandbox (hooks mode) or a subagent's: its per-turn leak checks (main/sessions/). */
  session: HookSession.optional(),
  /** Where its sandbox runs: 'local', or a sandbox host's name (absent: local). At creation 'any' may be asked for. */
  host: z.string().max(32).optional(),
  /** One way of a task run N ways (common/fanout.ts): its group and which way. */
  fanout: FanoutTag.optional(),
});
export type Task = z.infer<typeof Task>;

/** Longest a sandbox is kept after a decision (setting keepSandboxAfterDecisionMinutes). */
export const MAX_KEEP_MINUTES = 24 * 60;

/** One program (a name on PATH or a path): no shell, so no arguments, quotes or control characters. */
export const EditorCommand = z
  .string()
  .min(1)
  .max(1024)
  .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), 'must not contain control characters')
  .refine((s) => !s.startsWith('-'), 'must not start with a dash')
  .refine((s) => s.trim() === s, 'must not start or end with a space');

/** A task's approved branch as the host repository has it now (the next steps after Approve). */
export interface BranchInfo {
  branch: string;
  /** The branch exists in the repository. */
  exists: boolean;
  /** The branch HEAD is on now (absent: detached HEAD, or a bare repository). */
  currentBranch?: string;
  checkedOut: boolean;
  bare: boolean;
  /** Tracked files with uncommitted changes (first 20), and how many more there are. */
  dirty: string[];
  dirtyMore: number;
  /** The repository's remotes whose names are safe to pass to git. */
  remotes: string[];
}

/** What a push printed (git's own output, stdout and stderr together). */
export interface PushResult {
  remote: string;
  branch: string;
  output: string;
}

/** True for a quick sandbox (no pipeline; destroyed when its shell closes unless kept). */
export function isQuickSandbox(task: Pick<Task, 'kind'>): boolean {
  return task.kind === 'quick';
}

// The review of a result (files, flags, secrets, what Approve must confirm) lives in review.ts.
export { DiffFile, PullbackReview } from './review.js';

export const TerminalKind = z.enum(['stage', 'shell', 'host']);
export const TerminalStatus = z.enum(['live', 'exited', 'lost']);
export const TerminalInfo = z.object({
  id: z.string(),
  taskId: z.string().optional(),
  kind: TerminalKind,
  title: z.string(),
  status: TerminalStatus,
  exitCode: z.number().nullable().optional(),
  cols: z.number(),
  rows: z.number(),
});
export type TerminalInfo = z.infer<typeof TerminalInfo>;

export const ImageStatus = z.object({
  state: z.enum(['missing', 'building', 'ready', 'failed']),
  version: z.string(),
  /** 0..1 while building. */
  progress: z.number().optional(),
  step: z.string().optional(),
  error: z.string().optional(),
});
export type ImageStatus = z.infer<typeof ImageStatus>;

/** Whether the OS keychain answers (a lookup of a probe entry, never a stored value); the error says why not. */
export const KeychainStatus = z.object({ ok: z.boolean(), error: ErrorInfo.optional() });
export type KeychainStatus = z.infer<typeof KeychainStatus>;

/** The warm pool of sandboxes waiting for a task (main/pool): what the header shows. */
export const PoolStatus = z.object({
  /** off: warmPoolSize is 0; paused: the memory budget allows no more; failed: the last start failed, tried again later. */
  state: z.enum(['off', 'filling', 'ready', 'paused', 'failed']),
  ready: z.number().int().min(0),
  target: z.number().int().min(0),
  reason: z.string().optional(),
  /** Guest memory of running, pooled and starting sandboxes, against the pool's budget. */
  memoryUsedMb: z.number().int().min(0),
  memoryBudgetMb: z.number().int().min(0),
});
export type PoolStatus = z.infer<typeof PoolStatus>;

export const SystemStatus = z.object({
  qemu: z.object({ ok: z.boolean(), version: z.string().optional(), installHint: z.string().optional() }),
  accel: z.string().optional(),
  image: ImageStatus,
  /** Optional so a host that cannot probe (or an older one) still answers; the header then shows nothing. */
  keychain: KeychainStatus.optional(),
  dataDir: z.string(),
  host: z.enum(['electron', 'web']),
  /** Optional: a host without a pool (or an older one) leaves it out. */
  pool: PoolStatus.optional(),
  /** State files (task records, settings) that could not be read at start: kept aside, and the backup used when one read. */
  stateProblems: z
    .array(z.object({ file: z.string(), error: z.string(), keptAs: z.string().optional(), restoredFrom: z.string().optional() }))
    .optional(),
});
export type SystemStatus = z.infer<typeof SystemStatus>;

/** What a desktop notification says about a task, or undefined when this update is not worth one. */
export interface TaskNotice {
  title: string;
  body: string;
  /** One notice per task and outcome: a later one with the same tag replaces it. */
  tag: string;
}

/**
 * A task that just reached review or failed (its phase changed to one of them
 * in this update) deserves a notification; a task first seen in that phase (a
 * reload, a restart) does not: the user already knew. Texts are cut short.
 */
export function taskNotice(before: Pick<Task, 'phase'> | undefined, after: Task): TaskNotice | undefined {
  if (!before || before.phase === after.phase) return undefined;
  const name = after.title.replace(/\s+/g, ' ').trim().slice(0, 80);
  if (after.phase === 'review') return { title: 'Ready for review', body: name, tag: `review-${after.id}` };
  if (after.phase === 'failed') {
    const why = after.error?.message.replace(/\s+/g, ' ').trim().slice(0, 160);
    return { title: 'Task failed', body: why ? `${name}: ${why}` : name, tag: `failed-${after.id}` };
  }
  return undefined;
}
