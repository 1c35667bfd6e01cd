// The one API contract between the UI and the host, served by both the Electron
// IPC adapter and the web host (HTTP + WebSocket). Every method takes one object
// argument, validated with the schema below at the host boundary, and returns a
// promise. Errors cross as {error:{name,message,detail}} and are rethrown as Errors.
import { z } from 'zod';
import { INTERACTIVE_AGENTS } from './agent-session.js';
import { EditorCommand, MAX_KEEP_MINUTES, StageName } from './domain.js';
import { ReviewConfirmationKind, type ReviewFileDetail } from './review.js';
import { credentialApiInputs, type CredentialApiOutputs, type CredentialEvent, type LeakReport } from './credentials.js';
import { FactoryError, fromWireError, type WireError } from './errors.js';
import { EgressRule } from './egress.js';
import { fanoutApiInputs, type FanoutApiOutputs } from './fanout.js';
import { HostCheckInput, HostName, HostSaveInput, SshAlias, type HostCheckResult, type SandboxHostView, type SshConfigHost } from './sandbox-hosts.js';
import type { LayerInfo, TaskPreflight } from './environment.js';
import type { SandboxSample, SandboxStats } from './sandbox-stats.js';
import type {
  BranchInfo,
  PullbackReview,
  PushResult,
  SystemStatus,
  Task,
  TerminalInfo,
  ImageStatus,
  PoolStatus,
} from './domain.js';

const id = z.string().min(1).max(128).regex(/^[A-Za-z0-9._-]+$/, 'must be letters, digits, dot, dash or underscore');
/** The terminal sizes the app accepts: the API's inputs, a session's resize, a sandbox's first shell. */
export const TERMINAL_SIZE = { cols: { min: 2, max: 1000 }, rows: { min: 1, max: 500 } } as const;
/** The accepted range in words, for messages that refuse a size. */
export const TERMINAL_SIZE_RANGE = `cols ${TERMINAL_SIZE.cols.min}..${TERMINAL_SIZE.cols.max}, rows ${TERMINAL_SIZE.rows.min}..${TERMINAL_SIZE.rows.max}`;
export function terminalSizeFits(cols: number, rows: number): boolean {
  const { cols: c, rows: r } = TERMINAL_SIZE;
  return Number.isInteger(cols) && Number.isInteger(rows) && cols >= c.min && cols <= c.max && rows >= r.min && rows <= r.max;
}
const dims = {
  cols: z.number().int().min(TERMINAL_SIZE.cols.min).max(TERMINAL_SIZE.cols.max),
  rows: z.number().int().min(TERMINAL_SIZE.rows.min).max(TERMINAL_SIZE.rows.max),
};

export const apiInputs = {
  'system.status': z.object({}),
  // What runs, and whether the app ends by itself (factory status); quit ends the app (factory quit).
  'system.activity': z.object({}),
  'system.quit': z.object({}),
  /** How this install puts the `factory` command line on PATH (Settings shows it). */
  'system.cliInstall': z.object({}),
  'image.ensure': z.object({}),

  'tasks.list': z.object({}),
  'tasks.get': z.object({ taskId: id }),
  'tasks.create': z.object({
    repoPath: z.string().min(1).max(4096),
    title: z.string().trim().min(1, 'the task text is empty').max(20_000),
    baseRef: z.string().min(1).max(256).optional(),
    includeUncommitted: z.boolean().optional(),
    agent: z.string().max(64).optional(),
    /** Lets the sandbox push new branches under refs/heads/factory/<task-id>/ through the proxy (default off). */
    allowPush: z.boolean().optional(),
    /** Where the sandbox runs: 'local' (default), a sandbox host's name, or 'any' (least loaded against capacity). */
    host: z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'must be local, any or a sandbox host name').optional(),
    /**
     * Which of the repository's own egress requests (tasks.preflight) the user allows;
     * nothing the repository asks for is added without this. `remember` keeps them for
     * the repository from now on.
     */
    egressApproval: z.object({ rules: z.array(EgressRule).max(64), remember: z.boolean() }).optional(),
  }),
  /** One of a task's artifacts (its text, at most 1 MiB). */
  'tasks.artifact': z.object({ taskId: id, name: z.string().min(1).max(128).regex(/^[A-Za-z0-9._-]+$/, 'must be a plain file name') }),
  /** What Start will do for this repository: its environment and the egress it asks for. Creates nothing. */
  'tasks.preflight': z.object({ repoPath: z.string().min(1).max(4096), baseRef: z.string().min(1).max(256).optional(), agent: z.string().max(64).optional() }),
  'tasks.cancel': z.object({ taskId: id }),
  /** The sandbox's recent CPU and memory samples (its QEMU process, on the host); live ones follow as sandbox.stats events. */
  'tasks.stats': z.object({ taskId: id }),
  'tasks.destroy': z.object({ taskId: id }),
  /** Removes a task that is not running: its sandbox, review and quarantine, its record and its terminal logs. */
  'tasks.remove': z.object({ taskId: id }),
  'tasks.review': z.object({ taskId: id }),
  /** The full review, or one file of it: its own patch and leading bytes (for files the whole patch could not show). */
  'tasks.reviewFile': z.object({ taskId: id, path: z.string().min(1).max(4096) }),
  /**
   * Approve is refused (ApproveNeedsConfirmation) while the review has confirmations
   * whose kinds are not all named here: the user's deliberate second step.
   */
  'tasks.approve': z.object({ taskId: id, confirm: z.array(ReviewConfirmationKind).max(8).optional() }),
  'tasks.reject': z.object({ taskId: id }),
  /** Runs a failed or cancelled task's pipeline again in its sandbox, from a stage (default: the one that failed). */
  'tasks.retry': z.object({
    taskId: id,
    fromStage: StageName.optional(),
    /** The user overrides a review that failed (e.g. blocked the change): it counts as passed and the pipeline goes on after it. */
    overrideReview: z.boolean().optional(),
  }),

  /** Lets a running task's sandbox reach a destination it was refused: for this task, or for its repository from now on. */
  'egress.allow': z.object({
    taskId: id,
    rule: EgressRule,
    scope: z.enum(['task', 'repository']),
  }),
  /** The rules remembered per repository ("for this repository from now on"), and revoking one: later tasks start without it. */
  'egress.repoRules.list': z.object({}),
  'egress.repoRules.remove': z.object({ repoPath: z.string().min(1).max(4096), rule: EgressRule }),
  /** Cached environment layers: list, and delete one (a sandbox running on it keeps it until it ends). */
  'layers.list': z.object({}),
  'layers.remove': z.object({ id }),

  /** User settings (not secrets) and the agents a task may choose. */
  'settings.get': z.object({}),
  /** Changes some settings; an unknown default agent is refused by name. */
  'settings.set': z.object({
    defaultAgent: z.string().min(1).max(64).regex(/^[a-z0-9-]+$/, 'must be lowercase letters, digits or dashes').optional(),
    maxParallelTasks: z.number().int('must be a whole number').min(1, 'must be at least 1').max(32, 'must be at most 32').optional(),
    vmMemoryMb: z.number().int('must be a whole number of MiB').min(256, 'must be at least 256 MiB').max(65536, 'must be at most 64 GiB').optional(),
    /** The most guest memory a repository's environment.memoryMb may ask for. */
    vmMemoryMaxMb: z.number().int('must be a whole number of MiB').min(256, 'must be at least 256 MiB').max(65536, 'must be at most 64 GiB').optional(),
    vmCpus: z.number().int('must be a whole number').min(1, 'must be at least 1').max(64, 'must be at most 64').optional(),
    /** Days a finished terminal's log is kept (applied at the next start); 0 keeps logs forever. */
    terminalLogRetentionDays: z.number().int('must be a whole number of days').min(0, 'must be 0 (keep forever) or more').max(3650, 'must be at most 3650 days').optional(),
    /** Default egress rules of every sandbox (package registries per step). */
    egressRules: z.array(EgressRule).max(200).optional(),
    /** Disk budget of cached environment layers; the least recently used go first. */
    layerBudgetGb: z.number().min(1, 'must be at least 1 GiB').max(4096, 'must be at most 4096 GiB').optional(),
    /** Sandboxes trust the certificate authorities this computer trusts (behind a TLS-inspecting proxy). */
    guestTrustsHostCertificates: z.boolean().optional(),
    /** Minutes a sandbox is kept for inspection after Approve or Reject (0: destroyed at once). */
    keepSandboxAfterDecisionMinutes: z.number().int().min(0).max(MAX_KEEP_MINUTES).optional(),
    /** The program "Open in editor" runs with the repository path as its one argument. */
    editorCommand: EditorCommand.optional(),
    /** Sandboxes kept restored and waiting for a task; 0 turns the warm pool off. */
    warmPoolSize: z.number().int().min(0).max(16).optional(),
    /** Guest memory running and pooled sandboxes may hold before the pool stops refilling; 0: half of the computer's. */
    warmPoolMemoryBudgetMb: z.number().int().min(0).max(4 * 1024 * 1024).optional(),
  }),
  /** Sandbox hosts (issue 14): the configured ones with their live state. */
  'hosts.list': z.object({}),
  /** Connects with a draft host: its presented host key, and once that is verified, what libvirt there offers. Saves nothing. */
  'hosts.check': HostCheckInput,
  /** Adds or changes a host; hostKeyFingerprint must be the one the host presents now (pinned from then on). */
  'hosts.save': HostSaveInput,
  /** Removes a host; refused while a sandbox runs there, naming its tasks. */
  'hosts.remove': z.object({ name: HostName }),
  /** The address, user, port and key an alias of the user's SSH config stands for (ssh -G), to fill the host form. Saves nothing. */
  'hosts.fromSshConfig': z.object({ alias: SshAlias }),
  /** Hides a finished task from the board (listed under "Archived"), or restores it. A running task cannot be archived. */
  'tasks.archive': z.object({ taskId: id, archived: z.boolean() }),
  // The next steps on an approved task, on the host with the user's own git (main/git/branch-actions.ts).
  /** The approved branch as the repository has it now: the current branch, uncommitted files, remotes. */
  'tasks.branchInfo': z.object({ taskId: id }),
  /** Checks the approved branch out in the repository; refused while tracked files have uncommitted changes. */
  'tasks.checkout': z.object({ taskId: id }),
  /** `git push <remote> factory/<id>` with the user's git and credentials; the remote must be one of the repository's. */
  'tasks.push': z.object({ taskId: id, remote: z.string().min(1).max(256) }),
  /** Runs the editorCommand setting with the repository path as its one argument. */
  'tasks.openEditor': z.object({ taskId: id }),

  'terminal.list': z.object({ taskId: id.optional() }),
  'terminal.openShell': z.object({ taskId: id, ...dims }),
  /** A shell on the host, as the user, in the task's host repository (to inspect an approved branch). */
  'terminal.openHostShell': z.object({ taskId: id, ...dims }),
  /** Returns the session's scrollback (base64) so a reopened tab replays, then continues live. */
  'terminal.attach': z.object({ sessionId: id }),
  'terminal.write': z.object({ sessionId: id, data: z.string().max(1 << 20) }),
  'terminal.resize': z.object({ sessionId: id, ...dims }),
  /** The renderer acknowledges bytes after xterm.js parsed them (flow control). */
  'terminal.ack': z.object({ sessionId: id, bytes: z.number().int().min(0).max(1 << 30) }),
  'terminal.close': z.object({ sessionId: id }),

  // The factory CLI (issue 11): a command in a task's sandbox as the agent user in the
  // repository, with stdout and stderr apart and the exit status (main/exec/sandbox-exec.ts).
  'tasks.exec': z.object({
    taskId: id,
    argv: z.array(z.string().max(65_536).refine((w) => !w.includes('\0'), 'a word cannot contain a NUL byte')).min(1, 'no command given').max(4096),
    /** Standard input for the command (base64), closed after it; absent: empty. */
    stdin: z.string().max(16 * 1024 * 1024).regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64').optional(),
    /** The command is killed after this many seconds (default 600). */
    timeoutSec: z.number().int().min(1).max(86_400).optional(),
  }),
  /**
   * A quick sandbox (issue 11): a fresh VM, optionally with a repository seeded, no
   * pipeline. The caller opens its shell with terminal.openShell once it runs; closing
   * the last shell destroys it unless `keep`. Serves the tray, the UI and `factory sandbox`.
   */
  'sandboxes.quick': z.object({ repoPath: z.string().min(1).max(4096).optional(), keep: z.boolean().optional() }),
  /**
   * An agent session (issue 27): the agent's own interactive TUI (Claude Code or Codex)
   * in a fresh sandbox, the repository seeded at HEAD (with its uncommitted changes when
   * asked), keys through the proxy as in a stage. Its terminal (kind 'shell', titled
   * 'agent: <name>') opens once the sandbox runs; when the agent exits, its work goes to
   * review like a task's. Serves `factory claude`, `factory codex` and the UI.
   */
  'sandboxes.agent': z.object({
    agent: z.enum(['claude-code', 'codex']),
    repoPath: z.string().min(1).max(4096),
    includeUncommitted: z.boolean().optional(),
    /** The user's own arguments for the agent's CLI. */
    args: z.array(z.string().max(8192)).max(256).optional(),
    ...dims,
  }),
  /** A viewer that will not acknowledge any more (a CLI that printed and left): the session stops waiting for it. */
  'terminal.detach': z.object({ sessionId: id }),

  // Claude Code session hooks (issue 11, main/sessions/): a sandbox per session. start
  // provisions (or, for a known session, reconnects) and returns once it is seeded and set
  // up; check runs the leak check (Stop); end runs it, then pulls the work back and
  // destroys the sandbox (SessionEnd). pid/pidStart: the session's process, for the reaper.
  'sessions.start': z.object({
    sessionId: id,
    cwd: z.string().min(1).max(4096),
    source: z.string().max(32).optional(),
    pid: z.number().int().positive().optional(),
    pidStart: z.string().max(32).regex(/^[0-9]+$/).optional(),
    /** Whose session: names the sandbox (Claude Code when absent). */
    agent: z.enum(INTERACTIVE_AGENTS).optional(),
  }),
  'sessions.check': z.object({ sessionId: id }),
  'sessions.end': z.object({ sessionId: id }),
  // The PreToolUse hook (issue 27): info gives the session's sandbox and repository; run
  // carries the working tree's changes into the sandbox, then runs a routed command there.
  'sessions.info': z.object({ sessionId: id }),
  'sessions.run': z.object({
    sessionId: id,
    command: z.string().min(1).max(256 * 1024),
    dir: z.string().max(4096).refine((d) => !d.startsWith('/') && !d.split('/').includes('..'), 'must stay inside the repository'),
    agentId: id.optional(),
    timeoutSec: z.number().int().min(1).max(7200).optional(),
  }),
  // SubagentStart / SubagentStop: a sandbox per subagent; its work comes back into the session's as a branch.
  'sessions.subagentStart': z.object({
    sessionId: id,
    agentId: id,
    agentType: z.string().max(128).regex(/^[A-Za-z0-9 ._:-]*$/, 'must be letters, digits, space, dot, colon, dash or underscore').optional(),
    agent: z.enum(INTERACTIVE_AGENTS).optional(),
  }),
  'sessions.subagentStop': z.object({ sessionId: id, agentId: id }),

  // Credential broker (issue 3): credentials.list/set/delete/test, audit.list,
  // leakcheck.run/get — defined in common/credentials.ts, implemented by
  // CredentialBroker.api() (main/credentials/broker.ts). Values are write-only.
  ...credentialApiInputs,
  // fanout.create/compare/approve/rejectAll — a task run N ways, common/fanout.ts.
  ...fanoutApiInputs,
} as const;

export type ApiMethod = keyof typeof apiInputs;

/** The egress rules the user allowed for one repository from now on. */
export interface RepoEgressRules {
  repoPath: string;
  rules: EgressRule[];
}
export type ApiInput<M extends ApiMethod> = z.input<(typeof apiInputs)[M]>;

export interface ApiOutputs extends CredentialApiOutputs, FanoutApiOutputs {
  'system.status': SystemStatus;
  'system.activity': SystemActivity;
  'system.quit': void;
  'system.cliInstall': CliInstall;
  'image.ensure': ImageStatus;
  'tasks.list': Task[];
  'tasks.get': Task;
  'tasks.create': Task;
  'tasks.preflight': TaskPreflight;
  'tasks.artifact': { name: string; text: string; truncated: boolean };
  'egress.allow': Task;
  /** Per repository, its remembered rules (repositories in path order). */
  'egress.repoRules.list': RepoEgressRules[];
  /** What is left after the removal. */
  'egress.repoRules.remove': RepoEgressRules[];
  'layers.list': LayerInfo[];
  'layers.remove': void;
  'tasks.cancel': Task;
  'tasks.stats': SandboxStats;
  'tasks.destroy': Task;
  'tasks.remove': void;
  'tasks.review': PullbackReview;
  'tasks.reviewFile': ReviewFileDetail;
  'tasks.approve': Task;
  'tasks.reject': Task;
  'tasks.retry': Task;
  'tasks.archive': Task;
  'tasks.branchInfo': BranchInfo;
  'tasks.checkout': BranchInfo;
  'tasks.push': PushResult;
  'tasks.openEditor': { command: string };
  'settings.get': SettingsView;
  'settings.set': SettingsView;
  'hosts.list': SandboxHostView[];
  'hosts.check': HostCheckResult;
  'hosts.save': SandboxHostView[];
  'hosts.remove': SandboxHostView[];
  'hosts.fromSshConfig': SshConfigHost;
  'terminal.list': TerminalInfo[];
  'terminal.openShell': TerminalInfo;
  'terminal.openHostShell': TerminalInfo;
  'terminal.attach': { info: TerminalInfo; scrollback: string };
  'terminal.write': void;
  'terminal.resize': void;
  'terminal.ack': void;
  'terminal.close': void;
  'tasks.exec': ExecResult;
  'terminal.detach': void;
  'sandboxes.quick': Task;
  'sandboxes.agent': Task;
  'sessions.start': { task: Task; resumed: boolean };
  'sessions.check': { task: Task; report: LeakReport };
  'sessions.end': { task: Task; report?: LeakReport; destroyed: boolean };
  'sessions.info': { taskId: string; repoPath: string };
  'sessions.subagentStart': { task: Task; parentTaskId: string };
  'sessions.subagentStop': { report?: LeakReport; branch?: string; commits: number; destroyed: boolean };
  'sessions.run': ExecResult & { taskId: string; sync: { sent: number; removed: number; bytes: number } };
}

/** What runs in the app now (factory status). */
export interface SystemActivity {
  pid: number;
  host: 'electron' | 'web';
  /** Set for an app the CLI started in the background: it ends after this long with nothing running. */
  idleExit?: { afterSec: number; idleForSec: number };
  running: Array<{ id: string; title: string; phase: string; sandbox: string; agent: string }>;
  /** The warm pool; spares: forks of hooks sessions' sandboxes waiting for a subagent (absent from an older app). */
  pool?: { ready: number; target: number; spares?: number };
  /**
   * What the app holds that could grow with the work it has done: Node's live timers and
   * handles (sockets, child processes, watchers), and the listeners of its event and terminal
   * fan-outs. The soak checks none of them grows with the number of tasks finished.
   */
  resources?: { timers: number; handles: number; eventListeners: number; terminalListeners: number };
}

/** What `tasks.exec` returns: each stream base64, capped (the flag says when a cap cut it). */
/** How the `factory` command line reaches PATH for this install (system.cliInstall). */
export interface CliInstall {
  /** packaged: the app's launcher script; appimage: a script that runs the AppImage; source: a clone or the web host. */
  how: 'packaged' | 'appimage' | 'source';
  /** The launcher script in the packaged app's resources. */
  launcherPath?: string;
  /** `factory` on PATH already reaches this install (the deb links it into /usr/bin). */
  onPath: boolean;
  /** The exact shell command that puts `factory` on PATH. */
  command: string;
}

export interface ExecResult {
  exitCode: number | null;
  /** The signal that ended the command, when one did (e.g. 'KILL' after the time limit). */
  signal?: string;
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  timedOut: boolean;
}

/** The settings as the UI sees them, with the agent names a task may choose ('command' runs pipeline.json's commands). */
export interface SettingsView {
  defaultAgent: string;
  maxParallelTasks: number;
  vmMemoryMb: number;
  /** Absent from an older host. */
  vmMemoryMaxMb?: number;
  vmCpus: number;
  terminalLogRetentionDays: number;
  egressRules: EgressRule[];
  layerBudgetGb: number;
  /** Absent from hosts that predate it. */
  guestTrustsHostCertificates?: boolean;
  keepSandboxAfterDecisionMinutes?: number;
  editorCommand?: string;
  /** Optional: a host without the warm pool (or an older one) leaves them out. */
  warmPoolSize?: number;
  warmPoolMemoryBudgetMb?: number;
  agents: string[];
}

/** Service-shaped API: what the renderer calls and what the hosts implement. */
export type FactoryApi = {
  [M in ApiMethod]: (input: ApiInput<M>) => Promise<ApiOutputs[M]>;
};

/** Events pushed from the host to every UI. Terminal bytes travel separately (see TerminalDataEvent). */
export type FactoryEvent =
  | { type: 'task.updated'; task: Task }
  | { type: 'task.removed'; taskId: string }
  | { type: 'image.progress'; status: ImageStatus }
  | { type: 'pool.status'; status: PoolStatus }
  | { type: 'terminal.opened'; info: TerminalInfo }
  | { type: 'terminal.status'; info: TerminalInfo }
  /** A new sample of a running sandbox's QEMU process (every 2 s while it runs). */
  | { type: 'sandbox.stats'; taskId: string; sample: SandboxSample; guestMemoryBytes?: number }
  | CredentialEvent;

/** Terminal output: raw bytes for one session, batched by the host. */
export interface TerminalDataEvent {
  sessionId: string;
  data: Uint8Array;
}

/** What the preload exposes as window.factory and the web transport implements. */
export interface FactoryBridge {
  call<M extends ApiMethod>(method: M, input: ApiInput<M>): Promise<ApiOutputs[M]>;
  onEvent(listener: (event: FactoryEvent) => void): () => void;
  onTerminalData(listener: (event: TerminalDataEvent) => void): () => void;
  /** Electron only: the path of a folder dropped on the window. */
  pathForFile?(file: File): string;
  /** Electron only: the native folder picker; undefined when the user cancels. */
  pickRepoFolder?(): Promise<string | undefined>;
  /** Electron only: the tray's "New task…" asks the UI to start one (with a folder when one was picked). */
  onNewTaskRequest?(listener: (request: { repoPath?: string }) => void): () => void;
}

// FactoryError and the wire's error shape live in errors.ts (no schema library: the CLI's hooks load it fast); exported here too.
export { FactoryError, fromWireError, type WireError };


export function toWireError(err: unknown): WireError {
  if (err instanceof z.ZodError) {
    const first = err.issues[0];
    const where = first?.path.length ? first.path.join('.') : 'input';
    return { error: { name: 'InvalidInput', message: `${where}: ${first?.message ?? 'invalid'}` } };
  }
  if (err instanceof Error) {
    const detail = (err as { detail?: unknown }).detail;
    return {
      error: {
        name: err.name || 'Error',
        message: err.message,
        ...(typeof detail === 'string' ? { detail } : {}),
      },
    };
  }
  return { error: { name: 'Error', message: String(err) } };
}


/** Validates an untrusted call at a host boundary; throws ZodError or FactoryError. */
export function parseCall(method: string, input: unknown): { method: ApiMethod; input: unknown } {
  if (!Object.prototype.hasOwnProperty.call(apiInputs, method)) {
    throw new FactoryError('UnknownMethod', `no API method named ${JSON.stringify(method).slice(0, 80)}`);
  }
  const m = method as ApiMethod;
  return { method: m, input: apiInputs[m].parse(input ?? {}) };
}
