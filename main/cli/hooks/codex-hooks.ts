// Codex's hooks (the pinned 0.171) through the Claude Code hook code: Codex
// sends the same events with the same input fields (session_id, cwd, agent_id,
// tool_name, tool_input, stop_hook_active) and reads the same answers
// (hookSpecificOutput.permissionDecision "deny" with a reason, or "allow" with
// updatedInput, which rewrites the call). What differs is translated here:
// - Codex's shell tool (exec_command, also inside code mode's `exec`) reaches
//   the hook as tool_name "Bash" with {command}: routed as Claude Code's Bash is.
// - apply_patch edits files here, like Write: each file the patch names is
//   judged as a Write of it (inside the repository, never a guarded file,
//   never .codex, whose hooks.json and config.toml Codex obeys).
// - view_image reads a file here: judged as a Read of its path.
// - a namespaced tool arrives with its namespace glued to its name
//   ("collaborationspawn_agent"); the subagent, goal, clock and question tools
//   run nothing here and go on undecided; the MCP resource tools reach MCP
//   servers that run here and are denied as MCP tools are.
// - the shell call's workdir arrives as the hook's cwd (routed to the matching
//   folder of /work/repo, or its top when outside the repository); Codex puts
//   no time limit on a command, so a routed one gets 30 minutes, not 2.
// - a failed hook lets the call run in Codex (also status 2 without a reason
//   on stderr), so every failure here answers status 2 with its reason.
// - SessionStart's context tells Codex its own tool names.
import path from 'node:path';
import type { FactoryClient } from '../client.js';
import { UsageError, type Io } from '../output.js';
import type { HookInput } from './hook-commands.js';
// The PreToolUse path loads no more than Claude Code's lean one (main.ts): hook-commands (zod, the contract) only for SessionStart.
import { cmdHookPreToolUse, hookJson, readStdin, withDeadline } from './routed-hooks.js';

/** As for Claude Code: the decision within 25 s, well under the hook's 120 s (main.ts ends the process at 30 s). */
const PRE_TOOL_USE_DEADLINE_MS = 25_000;

/** What the hook writes on stdout, captured to be read back. */
function capture(io: Io): { io: Io; text: () => string } {
  const chunks: string[] = [];
  const stdout = { write: (c: string | Uint8Array) => (chunks.push(typeof c === 'string' ? c : Buffer.from(c).toString('utf8')), true) } as unknown as NodeJS.WritableStream;
  return { io: { ...io, stdout }, text: () => chunks.join('') };
}

/** The files an apply_patch patch adds, updates, deletes or moves to, as written in it. */
export function patchFiles(patch: string): string[] {
  const files: string[] = [];
  for (const line of patch.split('\n')) {
    const m = /^\*\*\* (?:Add File|Update File|Delete File|Move to): (.*)$/.exec(line.replace(/\r$/, ''));
    if (m) files.push(m[1]!.trim());
  }
  return files;
}

type Json = Record<string, unknown>;

/** Codex 0.171's tools that act only on its own conversation, agents or timers: nothing runs here, so no decision. */
const RUNS_NOTHING_HERE = new Set([
  'spawn_agent', 'wait_agent', 'send_message', 'followup_task', 'interrupt_agent', 'list_agents',
  'create_goal', 'get_goal', 'update_goal', 'sleep', 'clock__curr_time', 'curr_time', 'wait',
  'request_user_input', 'request_user_input_async', 'send_message_to_user_async',
]);
/** The namespaces Codex glues to a tool's name in the hook input. */
const NAMESPACES = ['collaboration', 'clock', 'functions'];
/** Tools that talk to the MCP servers Codex starts on this computer. */
const MCP_RESOURCE_TOOLS = new Set(['list_mcp_resources', 'list_mcp_resource_templates', 'read_mcp_resource']);
/** Codex sets no time limit on a shell command; the sandbox stops a routed one after this. */
const ROUTED_TIMEOUT_MS = 30 * 60_000;

/** A Codex tool that runs nothing here (its namespace may be glued to its name). */
export function runsNothingHere(name: string): boolean {
  if (RUNS_NOTHING_HERE.has(name)) return true;
  return NAMESPACES.some((n) => name.startsWith(n) && RUNS_NOTHING_HERE.has(name.slice(n.length)));
}

/** The Claude Code-shaped calls that stand for one Codex tool call, or why it cannot be judged. */
export function claudeCallsFor(input: Json): Json[] | { deny: string } {
  const toolInput = (typeof input.tool_input === 'object' && input.tool_input !== null ? input.tool_input : {}) as Json;
  if (input.tool_name === 'apply_patch') {
    const patch = toolInput.command ?? toolInput.input ?? toolInput.patch;
    const files = typeof patch === 'string' ? patchFiles(patch) : [];
    if (files.length === 0) return { deny: 'Factory in a Box: this apply_patch names no file it could check, so it is not applied on this computer. Write the patch with *** Add File / *** Update File / *** Delete File lines.' };
    const cwd = typeof input.cwd === 'string' ? input.cwd : '/';
    const own = files.find((f) => path.resolve(cwd, f).split(path.sep).some((part) => part.replace(/[. ]+$/, '').toLowerCase() === '.codex'));
    if (own !== undefined) return { deny: `Factory in a Box: ${JSON.stringify(own.slice(0, 200))} is inside .codex, whose hooks and config Codex on this computer obeys (a changed hooks.json turns the hooks off until reviewed), so the patch is not applied. Change it in the sandbox through exec_command, where it comes back through the review.` };
    return files.map((file_path) => ({ ...input, tool_name: 'Write', tool_input: { file_path } }));
  }
  if (input.tool_name === 'view_image') return [{ ...input, tool_name: 'Read', tool_input: { file_path: toolInput.path } }];
  // Judged as MCP tools are (denied: the server runs here).
  if (typeof input.tool_name === 'string' && MCP_RESOURCE_TOOLS.has(input.tool_name)) return [{ ...input, tool_name: `mcp__${input.tool_name}` }];
  // The routed command's limit in the sandbox, taken out of the rewritten input again (Codex's shell tool has no such field).
  if (input.tool_name === 'Bash') return [{ ...input, tool_input: { ...toolInput, timeout: ROUTED_TIMEOUT_MS } }];
  return [input];
}

type HookAnswer = { hookSpecificOutput?: { permissionDecision?: string; permissionDecisionReason?: string } };

/**
 * PreToolUse for Codex: each Claude Code-shaped call through the same decision
 * (cmdHookPreToolUse); one denial denies the Codex call. A routed Bash answer
 * passes as it is (Codex reads the same shape).
 */
export async function cmdCodexPreToolUse(client: FactoryClient, io: Io, raw: Buffer, via: string): Promise<number> {
  const input = hookJson(raw);
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return codexDeny(io, "Factory in a Box: the hook input is not an object, so the call is not run on this computer.");
  if (typeof (input as Json).tool_name === 'string' && runsNothingHere((input as Json).tool_name as string)) {
    io.stdout.write(JSON.stringify({ hookSpecificOutput: { hookEventName: 'PreToolUse' } }) + '\n');
    return 0;
  }
  const calls = claudeCallsFor(input as Json);
  if (!Array.isArray(calls)) return codexDeny(io, calls.deny);
  const answers: string[] = [];
  for (const call of calls) {
    const out = capture(io);
    const code = await cmdHookPreToolUse(client, out.io, Buffer.from(JSON.stringify(call)), via);
    if (code !== 0) return code;
    const answer = JSON.parse(out.text()) as HookAnswer;
    const d = answer.hookSpecificOutput;
    if (d?.permissionDecision === 'deny') {
      const filePath = (call.tool_input as Json).file_path;
      const file = filePath !== undefined && call.tool_name !== (input as Json).tool_name ? ` (${String((input as Json).tool_name)}, checked as ${String(call.tool_name)} of ${JSON.stringify(filePath)})` : '';
      // The reason names Claude Code where it tells the user what to restart.
      return codexDeny(io, `${(d.permissionDecisionReason ?? 'denied').replaceAll('Claude Code', 'Codex')}${file}`);
    }
    const updated = (d as { updatedInput?: Json } | undefined)?.updatedInput;
    if (updated) delete updated.timeout;
    answers.push(JSON.stringify(answer) + '\n');
  }
  // One call: its answer as it is (a routed Bash, or no decision). Several (a patch's files), all allowed: no decision.
  io.stdout.write(calls.length === 1 ? answers[0]! : JSON.stringify({ hookSpecificOutput: { hookEventName: 'PreToolUse' } }) + '\n');
  return 0;
}

/** `hook pre-tool-use --agent codex --via <line>`: whatever goes wrong blocks the call, with status 2 and why on stderr (Codex needs both). */
export async function runCodexPreToolUse(client: FactoryClient, io: Io, via: string | undefined): Promise<number> {
  if (typeof via !== 'string' || !via.trim() || /[\n\r]/.test(via)) throw new UsageError('hook pre-tool-use: --via must name the factory command line (one line)');
  try {
    return await withDeadline((async () => cmdCodexPreToolUse(client, io, await readStdin(io.stdin ?? process.stdin), via.trim()))(), PRE_TOOL_USE_DEADLINE_MS, 'pre-tool-use');
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    io.stderr.write(`factory: the PreToolUse hook could not decide, so the call is blocked: ${e.name}: ${e.message}\n`);
    return 2;
  }
}

function codexDeny(io: Io, reason: string): number {
  io.stdout.write(JSON.stringify({ hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: 'deny', permissionDecisionReason: reason } }) + '\n');
  return 0;
}

/** What Codex calls the tools the session context names. */
const CODEX_TOOLS =
  'In Codex: "the Bash tool" above is your shell tool (exec_command, also when called from code mode\'s exec), and "Edit or Write" is apply_patch, ' +
  'which changes the files here. A command\'s workdir inside this repository becomes the matching folder of /work/repo (outside it, the top of /work/repo). ' +
  'A command runs for at most 30 minutes there, and write_stdin does not reach it: run commands that need no input.';

/** SessionStart for Codex: the sandbox as for Claude Code, with the context as JSON (Codex's SessionStart output) naming Codex's tools. */
export async function cmdCodexHookStart(client: FactoryClient, io: Io, input: HookInput): Promise<number> {
  const out = capture({ ...io, json: true });
  const { cmdHookStart } = await import('./hook-commands.js');
  const code = await cmdHookStart(client, out.io, input, 'codex');
  const answer = JSON.parse(out.text()) as { hookSpecificOutput: { additionalContext: string } };
  answer.hookSpecificOutput.additionalContext += CODEX_TOOLS + '\n';
  io.stdout.write(JSON.stringify(answer) + '\n');
  return code;
}
