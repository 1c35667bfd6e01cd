// What the PreToolUse hook decides for each tool call of a Claude Code session
// whose hooks are installed (issue 27): a command never runs on this computer.
// Bash is routed: its command is replaced by `factory hook run <payload>`, which
// carries the original (base64, so no shell on this computer parses it) to the
// session's sandbox. File tools act on the user's working tree, inside the
// repository only, and never on files that tools on this computer run by
// themselves (.git, .claude, …). Every other tool is allowed only when it is
// known to run nothing here; an unknown tool is denied (fail closed), with a
// reason the model reads.
// What git ignores is kept out by a second step, ignored-files.ts (it runs git).
// Tools of the pinned Claude Code (2.1.332), read from its first request: Agent,
// Bash, Edit, Glob, Grep, ListAgents, Read, ReportFindings, ScheduleWakeup, Skill,
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
  /** Runs here, with its input changed (a Grep told to leave out what git ignores). */
  | { kind: 'rewrite'; updatedInput: Record<string, unknown>; why: string }
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

/**
 * Folders and files that tools on this computer run or obey by themselves: never
 * written by the model (.git is not read either). Claude Code's own list of
 * such paths (2.1.332) and a few more; compared without case (a case-insensitive
 * disk, as macOS's, makes `.GIT` the same folder), ignoring the characters a
 * file system drops. `.codex` too: its hooks.json and config.toml run programs
 * here for a later Codex session.
 */
const GUARDED_FOLDERS = new Set(['.git', '.claude', '.codex', '.husky', '.githooks', '.vscode', '.idea', '.cargo', '.devcontainer', '.yarn', '.mvn', '.direnv']);
const GUARDED_FILES = new Set([
  '.mcp.json', '.envrc', '.gitconfig', '.gitmodules', '.bashrc', '.bash_profile', '.bash_login', '.profile', '.zshrc', '.zshenv', '.zprofile',
  '.zlogin', '.ripgreprc', '.npmrc', '.yarnrc', '.yarnrc.yml', '.pnpmfile.cjs', 'bunfig.toml', '.bazelrc', '.bazelversion', '.bazeliskrc',
  '.pre-commit-config.yaml', 'lefthook.yml', 'lefthook.yaml', '.lefthook.yml', '.lefthook.yaml', 'lefthook-local.yml', '.devcontainer.json',
  'pyrightconfig.json', 'gradle-wrapper.properties', 'maven-wrapper.properties',
]);
/** `.config/git` is git's own config folder. */
const GUARDED_PAIRS = [['.config', 'git']];

/** A path part as the file system compares it: no case, no zero-width characters, no trailing dots or spaces. */
function folded(part: string): string {
  return part
    .replace(/[\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]/g, '')
    .replace(/[. ]+$/, (m) => (part.replace(/[. ]+$/, '') === '' ? m : ''))
    .replace(/ı/g, 'i')
    .replace(/ſ/g, 's')
    .toLowerCase();
}

/** The guarded folder or file on `parts` (folded), if any. */
function guardedPart(parts: string[]): string | undefined {
  const f = parts.map(folded);
  const folder = f.slice(0, -1).find((p) => GUARDED_FOLDERS.has(p)) ?? (GUARDED_FOLDERS.has(f[f.length - 1] ?? '') ? f[f.length - 1] : undefined);
  if (folder) return folder;
  const last = f[f.length - 1];
  if (last !== undefined && (GUARDED_FILES.has(last) || last.startsWith('.pnp.'))) return last;
  for (let i = 0; i + 1 < f.length; i++) if (GUARDED_PAIRS.some(([a, b]) => f[i] === a && f[i + 1] === b)) return `${f[i]}/${f[i + 1]}`;
  return undefined;
}

/**
 * Writing `config` or `HEAD` beside the other (or beside objects/ and refs/), or
 * anything inside a folder that holds both files, would make a git repository
 * that git on this computer obeys (its config can name programs to run).
 */
function plantsGitDir(abs: string, top: string): boolean {
  const isFile = (p: string) => fs.statSync(p, { throwIfNoEntry: false })?.isFile() === true;
  const gitLike = (dir: string) => isFile(path.join(dir, 'HEAD')) && isFile(path.join(dir, 'config'));
  const name = folded(path.basename(abs));
  const dir = path.dirname(abs);
  if (name === 'config' || name === 'head') {
    const other = path.join(dir, name === 'config' ? 'HEAD' : 'config');
    if (isFile(other) || (fs.existsSync(path.join(dir, 'objects')) && fs.existsSync(path.join(dir, 'refs')))) return true;
  }
  for (let d = dir; d.startsWith(top) && d !== top; d = path.dirname(d)) if (gitLike(d)) return true;
  return false;
}

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

/** A tool that reads or writes files on this computer (its path is judged against the repository). */
export function isFileTool(name: string): boolean {
  return Object.hasOwn(FILE_TOOLS, name);
}

/**
 * Whether what git ignores must still be kept out of an allowed call (ignored-files.ts):
 * a file tool that reads or writes content. Glob and LS list names only.
 */
export function mayTouchIgnored(call: ToolCall, decision: Decision): boolean {
  return decision.kind === 'allow' && isFileTool(call.tool_name) && call.tool_name !== 'Glob' && call.tool_name !== 'LS';
}

export function decideToolUse(call: ToolCall, ctx: PolicyContext): Decision {
  const name = call.tool_name;
  if (name === 'Bash') return routeBash(call, ctx);
  // Own properties only: a tool named "constructor" or "__proto__" must not find Object's.
  const file = isFileTool(name) ? FILE_TOOLS[name] : undefined;
  if (file) return decideFileTool(call, ctx, file);
  if (name === 'Agent' || name === 'Task') {
    if (call.tool_input.isolation !== undefined) return deny(name, 'its isolation option makes a git worktree on this computer. Start the agent without it: each subagent gets a sandbox of its own');
    return { kind: 'allow' };
  }
  if (RUNS_NOTHING_HERE.has(name)) return { kind: 'allow' };
  if (name.startsWith('mcp__')) return deny(name, `an MCP server runs on this computer, outside the sandbox. ${IN_SANDBOX}`);
  const why = Object.hasOwn(DENIED, name) ? DENIED[name] : undefined;
  if (why) return deny(name, why);
  return deny(name, `Factory in a Box does not know whether ${name} runs anything on this computer, so it is kept off. ${IN_SANDBOX}`);
}

export function deny(tool: string, why: string): Decision {
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

/**
 * The path a file tool acts on, as given (Glob, Grep and LS search the session's folder
 * when none is), or undefined when it is missing or not a path.
 */
function pathParam(call: ToolCall, tool: { param: string; writes: boolean }): string | undefined {
  const given = call.tool_input[tool.param];
  const name = call.tool_name;
  const raw = given === undefined && !tool.writes && (name === 'Glob' || name === 'Grep' || name === 'LS') ? call.cwd : given;
  return typeof raw === 'string' && raw.length > 0 && !raw.includes('\0') ? raw : undefined;
}

/**
 * Where a file tool's call acts, inside the repository: its path relative to the top
 * (symlinks followed as far as the path exists; '' for the top itself), or undefined
 * for another tool or a path outside (which decideToolUse denies).
 */
export function fileToolTarget(call: ToolCall, ctx: PolicyContext): { rel: string; abs: string } | undefined {
  const tool = isFileTool(call.tool_name) ? FILE_TOOLS[call.tool_name] : undefined;
  const raw = tool ? pathParam(call, tool) : undefined;
  if (raw === undefined) return undefined;
  const abs = realish(path.resolve(call.cwd, raw));
  const rel = relativeInside(abs, realish(ctx.repoTop));
  return rel === undefined ? undefined : { rel, abs };
}

function decideFileTool(call: ToolCall, ctx: PolicyContext, tool: { param: string; writes: boolean }): Decision {
  const name = call.tool_name;
  const raw = pathParam(call, tool);
  if (raw === undefined) return deny(name, `its ${tool.param} is missing or not a path`);
  const abs = path.resolve(call.cwd, raw);
  const rel = relativeInside(realish(abs), realish(ctx.repoTop));
  if (rel === undefined) return deny(name, `${JSON.stringify(printable(raw))} is outside the repository ${JSON.stringify(printable(ctx.repoTop))}; the session works on that repository only`);
  const parts = rel === '' ? [] : rel.split(path.sep);
  // .git anywhere on the way (any case): neither read nor written.
  if (parts.some((p) => folded(p) === '.git')) return deny(name, `${JSON.stringify(printable(raw))} is inside .git, which holds the repository's config, hooks and credentials; use git through the Bash tool (in the sandbox)`);
  const guarded = guardedPart(parts);
  if (tool.writes && guarded) return deny(name, `${JSON.stringify(printable(raw))} is ${guarded}, or inside it, which tools on this computer run or obey by themselves; change it in the sandbox through the Bash tool, where it comes back through the review`);
  if (tool.writes && plantsGitDir(path.join(realish(ctx.repoTop), rel), realish(ctx.repoTop))) return deny(name, `writing ${JSON.stringify(printable(raw))} would make a git repository that git on this computer would obey; make it in the sandbox through the Bash tool`);
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
      return path.join(fs.realpathSync.native(head), ...tail.reverse());
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
export function printable(s: string): string {
  const clean = escapeName(s);
  return clean.length > 200 ? `${clean.slice(0, 200)}…` : clean;
}
