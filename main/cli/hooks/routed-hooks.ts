// The two hooks on every command's path (issue 27): PreToolUse decides each tool
// call and rewrites Bash into `<via> hook run <payload>`; `hook run` carries the
// command to the session's sandbox. Claude Code starts a process for each, so
// this module and what it imports load no schema library and no command table
// (main.ts reaches it before anything else): a routed command must cost about
// what `factory exec` costs.
import { FactoryError } from '../../../common/errors.js';
import { decideToolUse, isFileTool, mayTouchIgnored, parseRoutedCommand, type Decision, type ToolCall } from '../../sessions/tool-policy.js';
import type { FactoryClient } from '../client.js';
import { printJson, UsageError, type Io } from '../output.js';

/** Claude Code's hook input is small; more than this is refused, not parsed. */
export const MAX_HOOK_INPUT_BYTES = 1024 * 1024;
/** Session and agent ids as Claude Code makes them; anything else is refused (they name files and branches). */
export const HOOK_ID_RE = /^[A-Za-z0-9._-]{1,128}$/;
/** How long the PreToolUse hook's decision may take (the process as a whole has 30 s, main.ts; Claude Code's limit is 120 s). */
const PRE_TOOL_USE_DEADLINE_MS = 25_000;

export async function readStdin(stream: NodeJS.ReadableStream = process.stdin): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of stream as AsyncIterable<Buffer>) {
    chunks.push(c);
    n += c.length;
    if (n > MAX_HOOK_INPUT_BYTES) break;
  }
  return Buffer.concat(chunks);
}

/** The hook gives up a little before Claude Code would kill it (a killed hook counts as a mere warning), saying so. */
export function withDeadline<T>(work: Promise<T>, ms: number, _which: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new FactoryError('HookTimeout', `no answer from the app within ${Math.round(ms / 1000)} s`)), ms);
    timer.unref();
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** Hook input as JSON, size-checked; names what is wrong. */
export function hookJson(raw: Buffer): unknown {
  if (raw.length > MAX_HOOK_INPUT_BYTES) throw new FactoryError('HookInputInvalid', `the hook input is larger than ${MAX_HOOK_INPUT_BYTES} bytes`);
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new FactoryError('HookInputInvalid', `the hook input on stdin is not JSON (${(err as Error).message})`);
  }
}

/** Checks of one hook input's fields, without a schema library; each names the first bad field. */
export function hookFields(raw: Buffer): {
  id(field: string): string;
  optionalId(field: string): string | undefined;
  text(field: string, max: number, opts?: { optional?: boolean; min?: number }): string | undefined;
  object(field: string): Record<string, unknown>;
} {
  const v = hookJson(raw);
  const bad = (field: string, what: string) => new FactoryError('HookInputInvalid', `the hook input's ${field}: ${what}`);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad('value', 'expected an object');
  const o = v as Record<string, unknown>;
  const idRule = 'must be 1 to 128 letters, digits, dots, dashes or underscores';
  const optionalId = (field: string): string | undefined => {
    const x = o[field];
    if (x === undefined) return undefined;
    if (typeof x !== 'string' || !HOOK_ID_RE.test(x)) throw bad(field, idRule);
    return x;
  };
  return {
    optionalId,
    id: (field) => {
      const x = optionalId(field);
      if (x === undefined) throw bad(field, idRule);
      return x;
    },
    text: (field, max, opts = {}) => {
      const x = o[field];
      const min = opts.min ?? 1;
      if (x === undefined && opts.optional) return undefined;
      if (typeof x !== 'string' || x.length < min || x.length > max) throw bad(field, `must be text of ${min} to ${max} characters`);
      return x;
    },
    object: (field) => {
      const x = o[field];
      if (typeof x !== 'object' || x === null || Array.isArray(x)) throw bad(field, 'expected an object');
      return x as Record<string, unknown>;
    },
  };
}

export interface PreToolUseInput extends ToolCall {
  session_id: string;
}

/** The fields PreToolUse uses of Claude Code's input (2.1.332 adds agent_id inside a subagent); others are ignored. */
export function parsePreToolUseInput(raw: Buffer): PreToolUseInput {
  const f = hookFields(raw);
  const sessionId = f.id('session_id');
  const cwd = f.text('cwd', 4096)!;
  const toolName = f.text('tool_name', 256)!;
  const toolInput = f.object('tool_input');
  const agentId = f.optionalId('agent_id');
  return { session_id: sessionId, cwd, tool_name: toolName, tool_input: toolInput, ...(agentId ? { agent_id: agentId } : {}) };
}

/** The app's calls these hooks make (a FactoryClient, or a test's stand-in). */
type RoutedHookClient = Pick<FactoryClient, 'call'>;

/**
 * PreToolUse: the decision for one tool call (tool-policy.ts). Bash is routed
 * to the sandbox through `<via> hook run`; a call the policy denies never runs
 * here, and the reason reaches the model. Without a sandbox for the session
 * (the app does not know it) nothing that would act on this computer is let through.
 */
export async function cmdHookPreToolUse(client: RoutedHookClient, io: Io, raw: Buffer, via: string): Promise<number> {
  const input = parsePreToolUseInput(raw);
  let decision: Decision;
  try {
    const info = await client.call('sessions.info', { sessionId: input.session_id });
    const ctx = { repoTop: info.repoPath, via, sessionId: input.session_id };
    decision = decideToolUse(input, ctx);
    // Loaded only when it applies: a routed Bash call (or a Glob) pays nothing for it (git's modules).
    if (mayTouchIgnored(input, decision)) decision = await (await import('../../sessions/ignored-files.js')).withholdIgnored(input, ctx, decision);
  } catch (err) {
    if (!(err instanceof Error && err.name === 'SessionNotFound')) throw err;
    // No sandbox: only what runs nothing here and touches no file goes on.
    const d = decideToolUse(input, { repoTop: '/nonexistent-repository', via, sessionId: input.session_id });
    decision = d.kind === 'allow' && !isFileTool(input.tool_name)
      ? d
      : { kind: 'deny', reason: `Factory in a Box: this session has no sandbox (the app has none recorded for it: the hooks were installed after it started, or its sandbox ended), so ${input.tool_name} is not run on this computer. Restart Claude Code in this repository: the session start gives it a sandbox.` };
  }
  printJson(io, { hookSpecificOutput: hookOutput(decision) });
  return 0;
}

function hookOutput(d: Decision): Record<string, unknown> {
  if (d.kind === 'route') return { hookEventName: 'PreToolUse', permissionDecision: 'allow', permissionDecisionReason: 'routed to the session\'s sandbox by Factory in a Box', updatedInput: d.updatedInput };
  if (d.kind === 'rewrite') return { hookEventName: 'PreToolUse', permissionDecision: 'allow', permissionDecisionReason: d.why, updatedInput: d.updatedInput };
  if (d.kind === 'deny') return { hookEventName: 'PreToolUse', permissionDecision: 'deny', permissionDecisionReason: d.reason };
  // Allowed: Claude Code's own permission rules and prompts decide as usual.
  return { hookEventName: 'PreToolUse' };
}

/** `factory hook run <payload>`: the routed command, run in the session's sandbox; its output and status pass through. */
export async function cmdHookRun(client: RoutedHookClient, io: Io, word: string): Promise<number> {
  let routed;
  try {
    routed = parseRoutedCommand(word);
  } catch (err) {
    throw new FactoryError('HookInputInvalid', `factory hook run: ${(err as Error).message}`);
  }
  const r = await client.call('sessions.run', {
    sessionId: routed.s,
    command: routed.c,
    dir: routed.d,
    ...(routed.a ? { agentId: routed.a } : {}),
    ...(routed.t ? { timeoutSec: Math.min(7200, routed.t) } : {}),
  });
  io.stdout.write(Buffer.from(r.stdout, 'base64'));
  io.stderr.write(Buffer.from(r.stderr, 'base64'));
  if (r.stdoutTruncated || r.stderrTruncated) io.stderr.write('\nfactory: the output was cut at 16 MiB per stream\n');
  if (r.timedOut) io.stderr.write(`\nfactory: the command was stopped after ${routed.t ?? 600} s in the sandbox\n`);
  if (r.exitCode !== null) return r.exitCode;
  return 128 + 9;
}

/**
 * `hook run <payload>` and `hook pre-tool-use --via <line>` as the CLI runs them.
 * PreToolUse fails closed: whatever goes wrong blocks the call (status 2), with why.
 */
export async function runRoutedHook(client: RoutedHookClient, io: Io, which: 'run' | 'pre-tool-use', arg: string | undefined): Promise<number> {
  if (which === 'run') {
    if (!arg) throw new UsageError('hook run: expected the routed command (one word)');
    return cmdHookRun(client, io, arg);
  }
  if (typeof arg !== 'string' || !arg.trim() || /[\n\r]/.test(arg)) throw new UsageError('hook pre-tool-use: --via must name the factory command line (one line)');
  const via = arg.trim();
  try {
    return await withDeadline((async () => cmdHookPreToolUse(client, io, await readStdin(io.stdin ?? process.stdin), via))(), PRE_TOOL_USE_DEADLINE_MS, which);
  } catch (err) {
    // Anything that went wrong blocks the call (status 2): a tool call is never let through by a failure.
    const e = err instanceof Error ? err : new Error(String(err));
    io.stderr.write(`factory: the PreToolUse hook could not decide, so the call is blocked: ${e.name}: ${e.message}\n`);
    return 2;
  }
}
