// `factory hook session-start|stop|session-end`: what Claude Code runs (see
// settings-file.ts). Each reads Claude Code's hook input (JSON on stdin) and
// asks the app. The rule for teardown: Stop fires after every turn, while the
// session still uses its sandbox, so Stop only runs the leak check; SessionEnd
// runs it and then destroys the sandbox (the work goes to review first). They
// fail closed: only a check that completed and found nothing exits 0. A leak, a
// check that could not scan everything, an error, an unreachable app or a
// timeout exits 2 with what happened on stderr (Claude Code's "blocking"
// status: on Stop, Claude is told; on SessionEnd, the user sees it), and the
// app keeps the sandbox for inspection.
import { z } from 'zod';
import { FactoryError } from '../../../common/contract.js';
import type { LeakReport } from '../../../common/credentials.js';
import type { Task } from '../../../common/domain.js';
import { sessionProcess } from '../../sessions/session-process.js';
import type { FactoryClient } from '../client.js';
import { plain, printJson, type Io } from '../output.js';
import { HOOK_ID_RE, hookJson } from './routed-hooks.js';
import type { InteractiveAgent } from '../../../common/agent-session.js';

// The hooks on every command's path live in routed-hooks.ts (a lean module); their callers and tests find them here too.
export { cmdHookPreToolUse, cmdHookRun, readStdin, withDeadline } from './routed-hooks.js';
// So are SubagentStart (subagent-start-hook.ts) and the failure report all hooks share (hook-failed.ts).
export { hookFailed } from './hook-failed.js';
export { cmdHookSubagentStart, subagentContext } from './subagent-start-hook.js';

/** The fields we use of Claude Code's hook input; others are ignored. */
export const HookInput = z.object({
  session_id: z.string().regex(HOOK_ID_RE, 'must be 1 to 128 letters, digits, dots, dashes or underscores'),
  cwd: z.string().min(1).max(4096),
  source: z.string().max(32).optional(),
  hook_event_name: z.string().max(64).optional(),
  stop_hook_active: z.boolean().optional(),
  /** SubagentStart/SubagentStop, and every tool call inside a subagent (Claude Code 2.1.332). */
  agent_id: z.string().regex(HOOK_ID_RE, 'must be 1 to 128 letters, digits, dots, dashes or underscores').optional(),
  agent_type: z.string().max(128).optional(),
});
export type HookInput = z.infer<typeof HookInput>;

/** Claude Code's hook input (JSON on stdin), checked against `schema` (the fields an event's hook uses). */
export function parseHookInput(raw: Buffer): HookInput;
export function parseHookInput<S extends z.ZodType>(raw: Buffer, schema: S): z.infer<S>;
export function parseHookInput(raw: Buffer, schema: z.ZodType = HookInput): unknown {
  const parsed = schema.safeParse(hookJson(raw));
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    throw new FactoryError('HookInputInvalid', `the hook input's ${first.path.join('.') || 'value'}: ${first.message}`);
  }
  return parsed.data;
}

/** What Claude receives at the start of the session (SessionStart's stdout becomes context). */
export function sessionContext(task: Task, resumed: boolean): string {
  const t = task.id;
  return [
    `${resumed ? 'This session reconnected to its sandbox' : 'This session has its own sandbox'}: a throwaway VM from Factory in a Box (task ${t}),`,
    `with a copy of this repository at ${task.baseCommit.slice(0, 12)} in /work/repo on branch ${task.branch}.`,
    'Every command you run with the Bash tool runs in that sandbox, in the matching folder of /work/repo, as its agent user;',
    'nothing runs on this computer. Before each command, the files you changed here (with Edit or Write) are copied into the sandbox.',
    'Files the command changes stay in the sandbox: commit the work there (git commit through Bash). When the session ends, the',
    `sandbox's work comes back for review: the user sees it with \`factory diff ${t}\` or in the app and approves it into a branch.`,
    'Tools that would run something on this computer (WebFetch, MCP servers, skills, worktrees) are refused; fetch with curl through Bash.',
    '',
  ].join('\n');
}

function describeLeak(taskId: string, report: LeakReport): string {
  const lines = [`factory: LEAK: the leak check of session sandbox ${taskId} found a credential; the sandbox is kept for inspection (see the app):`];
  for (const h of report.hits) lines.push(`  credential ${plain(h.credentialId)} in ${h.source} (${plain(h.encoding)}${h.detail ? `, ${plain(h.detail)}` : ''})`);
  return lines.join('\n') + '\n';
}

function describeIncomplete(taskId: string, report: LeakReport): string {
  const parts = report.scanned.filter((s) => s.error).map((s) => `${plain(s.source)}: ${plain(s.error!)}`);
  return (
    `factory: LEAK CHECK INCOMPLETE: the leak check of session sandbox ${taskId} could not scan everything (${parts.join('; ') || 'incomplete'}), ` +
    `so it cannot say the sandbox is clean. The sandbox is kept for inspection and its work was not sent to review (see the app, or factory show ${taskId})\n`
  );
}

export async function cmdHookStart(client: FactoryClient, io: Io, input: HookInput, agent: InteractiveAgent = 'claude'): Promise<number> {
  const proc = sessionProcess();
  const r = await client.call('sessions.start', {
    sessionId: input.session_id,
    cwd: input.cwd,
    ...(agent !== 'claude' ? { agent } : {}),
    ...(input.source ? { source: input.source } : {}),
    pid: proc.pid,
    ...(proc.start ? { pidStart: proc.start } : {}),
  });
  if (io.json) printJson(io, { hookSpecificOutput: { hookEventName: 'SessionStart', additionalContext: sessionContext(r.task, r.resumed) } });
  else io.stdout.write(sessionContext(r.task, r.resumed));
  return 0;
}

export async function cmdHookStop(client: FactoryClient, io: Io, input: HookInput): Promise<number> {
  let r;
  try {
    r = await client.call('sessions.check', { sessionId: input.session_id });
  } catch (err) {
    // A session that started before the hooks were installed has no sandbox: nothing to check.
    if (err instanceof Error && err.name === 'SessionNotFound') return 0;
    throw err;
  }
  if (r.report.verdict === 'clean') return 0;
  io.stderr.write(r.report.verdict === 'leak' ? describeLeak(r.task.id, r.report) : describeIncomplete(r.task.id, r.report));
  // Claude was told once (stop_hook_active): exit 2 again would keep it from ever stopping. The sandbox stays kept either way.
  return input.stop_hook_active ? 1 : 2;
}

export async function cmdHookEnd(client: FactoryClient, io: Io, input: HookInput): Promise<number> {
  let r;
  try {
    r = await client.call('sessions.end', { sessionId: input.session_id });
  } catch (err) {
    if (err instanceof Error && err.name === 'SessionNotFound') return 0;
    throw err;
  }
  if (io.json) printJson(io, r);
  if (r.report?.verdict === 'leak') {
    io.stderr.write(describeLeak(r.task.id, r.report));
    return 2;
  }
  if (r.report?.verdict === 'incomplete') {
    io.stderr.write(describeIncomplete(r.task.id, r.report));
    return 2;
  }
  if (!r.destroyed) {
    // An earlier check of this session was not clean: the sandbox stays until the user destroys it.
    io.stderr.write(`factory: session sandbox ${r.task.id} is kept for inspection: an earlier leak check of this session was not clean; its work was not sent to review (see the app, or factory show ${r.task.id})\n`);
    return 2;
  }
  io.stderr.write(`factory: session sandbox ${r.task.id} destroyed; its work: factory diff ${r.task.id} (task ${r.task.phase})\n`);
  return 0;
}

/** SubagentStop: the leak check of the subagent's sandbox, its work into the session's, the sandbox destroyed; fails closed like Stop. */
export async function cmdHookSubagentStop(client: FactoryClient, io: Io, input: HookInput): Promise<number> {
  if (!input.agent_id) throw new FactoryError('HookInputInvalid', 'the SubagentStop input has no agent_id');
  let r;
  try {
    r = await client.call('sessions.subagentStop', { sessionId: input.session_id, agentId: input.agent_id });
  } catch (err) {
    if (err instanceof Error && err.name === 'SessionNotFound') return 0;
    throw err;
  }
  if (r.report && r.report.verdict !== 'clean') {
    const taskId = r.report.sandboxId;
    io.stderr.write(r.report.verdict === 'leak' ? describeLeak(taskId, r.report) : describeIncomplete(taskId, r.report));
    return input.stop_hook_active ? 1 : 2;
  }
  if (r.branch) io.stderr.write(`factory: the subagent's ${r.commits} commit(s) are in the session's sandbox as branch ${r.branch}; its sandbox was destroyed\n`);
  return 0;
}
