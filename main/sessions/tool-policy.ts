// What the PreToolUse hook decides for each tool call of a Claude Code session
// whose hooks are installed (issue 27): a command never runs on this computer.
// Bash is routed: its command is replaced by `factory hook run <payload>`, which
// carries the original (base64, so no shell on this computer parses it) to the
// session's sandbox. File tools act on the user's working tree, inside the
// repository only, and never on files that tools on this computer run by
// themselves (.git, .claude, …). Every other tool is allowed only when it is
// known to run nothing here; an unknown tool is denied (fail closed), with a
// reason the model reads.
// Tools of the pinned Claude Code (2.1.332), read from its first request: Agent,
// Bash, Edit, ListAgents, Read, ReportFindings, ScheduleWakeup, Skill,
// ToolSearch, Workflow, DeferredToolPlaceholder, Write; deferred: CronCreate,
// CronDelete, CronList, EnterWorktree, ExitWorktree, Monitor, NotebookEdit,
// SendMessage, TaskStop, WebFetch, WebSearch.
import fs from 'node:fs';
import path from 'node:path';
import { escapeName } from '../../common/review-text.js';

export interface ToolCall {
  tool_name: string;
  tool_input: Record<string, unknown>;
  /** The session's current folder on this computer. */
  cwd: string;
  /** Set inside a subagent (Claude Code 2.1.332 sends it with each of the subagent's tool calls). */
  agent_id?: string | undefined;
}

export interface PolicyContext {
  /** The repository's top folder on this computer (the session's working tree). */
  repoTop: string;
  /** The command line that runs this CLI, as the hooks were installed with (e.g. `factory --data-dir …`). */
  via: string;
  sessionId: string;
}

export type Decision =
  | { kind: 'route'; updatedInput: Record<string, unknown> }
  | { kind: 'allow' }
  | { kind: 'deny'; reason: string };

/** What `factory hook run` receives: the command, the folder inside the repository, the subagent. */
export interface RoutedCommand {
  /** The session. */
  s: string;
  /** The shell line, as the model wrote it. */
  c: string;
  /** The folder relative to the repository's top ('' at the top). */
  d: string;
  /** The subagent whose command it is. */
  a?: string;
  /** The model's timeout for it, in seconds. */
  t?: number;
}

/** The routed word is one argument of the shell Claude Code starts: Linux takes at most 128 KiB in one. */
const MAX_ROUTED_WORD = 120 * 1024;

/** Known to run nothing on this computer: their effects stay in Claude Code's own conversation, or in routed commands. */
const RUNS_NOTHING_HERE = new Set([
  'Agent', 'Task', 'ListAgents', 'ReportFindings', 'ScheduleWakeup', 'ToolSearch', 'DeferredToolPlaceholder',
  'TaskStop', 'TaskOutput', 'BashOutput', 'KillShell', 'TodoWrite', 'WebSearch', 'CronCreate', 'CronDelete', 'CronList',
  'ExitPlanMode', 'EnterPlanMode', 'AskUserQuestion',
]);

const IN_SANDBOX = 'Run it in the session\'s sandbox with the Bash tool instead (every Bash command runs there)';

/** Tools denied by name, each with what to do instead. */
const DENIED: Record<string, string> = {
  WebFetch: 'WebFetch would fetch from this computer, outside the sandbox\'s proxy and its rules. Fetch with curl through the Bash tool: it runs in the sandbox, through the proxy',
  Monitor: `Monitor runs a command on this computer. ${IN_SANDBOX}, with run_in_background for a long wait`,
  Skill: 'a skill can run commands on this computer while it loads. Read the skill\'s files with the Read tool and run its commands with the Bash tool (they run in the sandbox)',
  Workflow: `a workflow runs a script on this computer. ${IN_SANDBOX}`,
  EnterWorktree: 'a worktree would be made on this computer. The sandbox has its own copy of the repository: use git there through the Bash tool',
  ExitWorktree: 'worktrees on this computer are not used in a sandboxed session',
  SendMessage: 'a message could make another Claude session on this computer, one without a sandbox, run it. Do the work here',
  LSP: 'a language server runs on this computer. Run the language tools through the Bash tool: they run in the sandbox',
};

/** Folders and files that tools on this computer run or obey by themselves: never written by the model, .git never read. */
const GUARDED = new Set(['.git', '.claude', '.mcp.json', '.husky', '.githooks', '.envrc', '.vscode', '.idea']);

/** The path parameter of each file tool. */
const FILE_TOOLS: Record<string, { param: string; writes: boolean }> = {
  Read: { param: 'file_path', writes: false },
  Edit: { param: 'file_path', writes: true },
  MultiEdit: { param: 'file_path', writes: true },
  Write: { param: 'file_path', writes: true },
  NotebookEdit: { param: 'notebook_path', writes: true },
  NotebookRead: { param: 'notebook_path', writes: false },
  Glob: { param: 'path', writes: false },
  Grep: { param: 'path', writes: false },
  LS: { param: 'path', writes: false },
};

export function decideToolUse(call: ToolCall, ctx: PolicyContext): Decision {
  const name = call.tool_name;
  if (name === 'Bash') return routeBash(call, ctx);
  const file = FILE_TOOLS[name];
  if (file) return decideFileTool(call, ctx, file);
  if (name === 'Agent' || name === 'Task') {
    if (call.tool_input.isolation !== undefined) return deny(name, 'its isolation option makes a git worktree on this computer. Start the agent without it: each subagent gets a sandbox of its own');
    return { kind: 'allow' };
  }
  if (RUNS_NOTHING_HERE.has(name)) return { kind: 'allow' };
  if (name.startsWith('mcp__')) return deny(name, `an MCP server runs on this computer, outside the sandbox. ${IN_SANDBOX}`);
  const why = DENIED[name];
  if (why) return deny(name, why);
  return deny(name, `Factory in a Box does not know whether ${name} runs anything on this computer, so it is kept off. ${IN_SANDBOX}`);
}

function deny(tool: string, why: string): Decision {
  return { kind: 'deny', reason: `Factory in a Box: this session works in a sandbox, so ${printable(tool)} is not run on this computer: ${why}.` };
}

function routeBash(call: ToolCall, ctx: PolicyContext): Decision {
  const command = call.tool_input.command;
  if (typeof command !== 'string' || command.length === 0) return deny('Bash', 'the call has no command');
  const timeoutMs = call.tool_input.timeout;
  const routed: RoutedCommand = { s: ctx.sessionId, c: command, d: folderInRepository(call.cwd, ctx.repoTop) };
  if (call.agent_id) routed.a = call.agent_id;
  if (typeof timeoutMs === 'number' && Number.isFinite(timeoutMs) && timeoutMs > 0) routed.t = Math.ceil(timeoutMs / 1000);
  else routed.t = call.tool_input.run_in_background === true ? 600 : 120;
  const line = routedCommandLine(ctx.via, routed);
  if (line.length - ctx.via.length > MAX_ROUTED_WORD) return deny('Bash', 'the command is too long to carry into the sandbox as it is: write it to a script file with the Write tool, then run the script with Bash');
  return { kind: 'route', updatedInput: { ...call.tool_input, command: line } };
}

/** The line Claude Code's shell runs: only the CLI and one base64url word, which no shell expands. */
export function routedCommandLine(via: string, routed: RoutedCommand): string {
  return `${via} hook run ${Buffer.from(JSON.stringify(routed)).toString('base64url')}`;
}

export function parseRoutedCommand(word: string): RoutedCommand {
  if (!/^[A-Za-z0-9_-]+$/.test(word) || word.length > MAX_ROUTED_WORD) throw new Error('not a routed command (expected one base64url word)');
  const v = JSON.parse(Buffer.from(word, 'base64url').toString('utf8')) as Partial<RoutedCommand>;
  if (typeof v.s !== 'string' || typeof v.c !== 'string' || typeof v.d !== 'string') throw new Error('not a routed command (fields missing)');
  if (v.d.split('/').includes('..') || v.d.startsWith('/')) throw new Error('the routed command\'s folder leaves the repository');
  if (v.a !== undefined && typeof v.a !== 'string') throw new Error('not a routed command (agent)');
  if (v.t !== undefined && (typeof v.t !== 'number' || !Number.isInteger(v.t) || v.t < 1)) throw new Error('not a routed command (timeout)');
  return { s: v.s, c: v.c, d: v.d, ...(v.a !== undefined ? { a: v.a } : {}), ...(v.t !== undefined ? { t: v.t } : {}) };
}

/** The session's folder inside the repository ('' when at the top or outside it: the command then runs at the top). */
function folderInRepository(cwd: string, repoTop: string): string {
  const rel = relativeInside(realish(cwd), realish(repoTop));
  return rel ?? '';
}

function decideFileTool(call: ToolCall, ctx: PolicyContext, tool: { param: string; writes: boolean }): Decision {
  const name = call.tool_name;
  const raw = call.tool_input[tool.param];
  // Glob and Grep search the session's folder when no path is given.
  if (raw === undefined && !tool.writes && (name === 'Glob' || name === 'Grep' || name === 'LS')) return decideFileTool({ ...call, tool_input: { ...call.tool_input, [tool.param]: call.cwd } }, ctx, tool);
  if (typeof raw !== 'string' || raw.length === 0 || raw.includes('\0')) return deny(name, `its ${tool.param} is missing or not a path`);
  const abs = path.resolve(call.cwd, raw);
  const rel = relativeInside(realish(abs), realish(ctx.repoTop));
  if (rel === undefined) return deny(name, `${JSON.stringify(printable(raw))} is outside the repository ${JSON.stringify(printable(ctx.repoTop))}; the session works on that repository only`);
  const parts = rel === '' ? [] : rel.split(path.sep);
  const guarded = parts.find((p) => GUARDED.has(p));
  if (guarded === '.git') return deny(name, `${JSON.stringify(printable(raw))} is inside .git, which holds the repository's config, hooks and credentials; use git through the Bash tool (in the sandbox)`);
  if (tool.writes && guarded) return deny(name, `${JSON.stringify(printable(raw))} is inside ${guarded}, which tools on this computer run or obey by themselves; change it in the sandbox through the Bash tool, where it comes back through the review`);
  return { kind: 'allow' };
}

/** `p` relative to `top` when it is inside it (symlinks resolved as far as the path exists), else undefined. */
function relativeInside(p: string, top: string): string | undefined {
  const rel = path.relative(top, p);
  if (rel === '') return '';
  if (rel.startsWith('..') || path.isAbsolute(rel)) return undefined;
  return rel;
}

/** The real path of the deepest existing ancestor, with the rest appended: a symlink anywhere on the way is followed. */
function realish(p: string): string {
  let head = path.resolve(p);
  const tail: string[] = [];
  for (;;) {
    try {
      return path.join(fs.realpathSync(head), ...tail.reverse());
    } catch {
      // A link that leads nowhere would be followed by a write: never inside.
      if (isLink(head)) return DANGLING;
      const parent = path.dirname(head);
      if (parent === head) return path.join(head, ...tail.reverse());
      tail.push(path.basename(head));
      head = parent;
    }
  }
}

const DANGLING = '\0 a link that leads nowhere';

function isLink(p: string): boolean {
  try {
    return fs.lstatSync(p).isSymbolicLink();
  } catch {
    // Not there at all: not a link.
    return false;
  }
}

/** A name from the model, safe to put in a message: hidden characters escaped (the review's own escaping), length capped. */
function printable(s: string): string {
  const clean = escapeName(s);
  return clean.length > 200 ? `${clean.slice(0, 200)}…` : clean;
}
