// `factory hook subagent-start`: Claude Code (or Codex) runs it when a subagent
// starts, and the subagent waits for it, so it takes the lean path (main.ts): no
// schema library and no command table, only what this module imports. A spare
// fork booted ahead (spare-forks.ts) is ready in about a second; loading the whole
// CLI would add a third of that again.
import { FactoryError } from '../../../common/errors.js';
import type { Task } from '../../../common/domain.js';
import type { FactoryClient } from '../client.js';
import { printJson, type Io } from '../output.js';
import type { InteractiveAgent } from '../../../common/agent-session.js';
import { hookFields } from './routed-hooks.js';

/** The fields SubagentStart uses of the hook input (a subset of hook-commands.ts's HookInput). */
export interface SubagentStartInput {
  session_id: string;
  agent_id?: string | undefined;
  agent_type?: string | undefined;
}

/** The hook input checked as HookInput checks those fields (and cwd), without the schema library; names the first bad field. */
export function parseSubagentStartInput(raw: Buffer): SubagentStartInput {
  const f = hookFields(raw);
  const sessionId = f.id('session_id');
  f.text('cwd', 4096);
  const agentId = f.optionalId('agent_id');
  const agentType = f.text('agent_type', 128, { optional: true, min: 0 });
  return { session_id: sessionId, ...(agentId !== undefined ? { agent_id: agentId } : {}), ...(agentType !== undefined ? { agent_type: agentType } : {}) };
}

/** What a subagent receives at its start (SubagentStart's additionalContext). */
export function subagentContext(task: Task, parentTaskId: string, sessionId: string, agentId: string): string {
  return [
    `This subagent has a sandbox of its own: a throwaway VM from Factory in a Box (task ${task.id}), with a fresh copy of the repository`,
    `at ${task.baseCommit.slice(0, 12)} in /work/repo. Every command you run with the Bash tool runs there, not on this computer and not in`,
    `the session's sandbox (task ${parentTaskId}). Commit your work there; when you finish, your commits go into the session's sandbox`,
    `as branch factory/${sessionId}/${agentId}, and this sandbox is destroyed.`,
    '',
  ].join('\n');
}

/** SubagentStart: the subagent's own sandbox; a session without one gives none (its commands are refused or go to the session's). */
export async function cmdHookSubagentStart(client: FactoryClient, io: Io, input: SubagentStartInput, agent: InteractiveAgent = 'claude'): Promise<number> {
  if (!input.agent_id) throw new FactoryError('HookInputInvalid', 'the SubagentStart input has no agent_id');
  let r;
  try {
    // The agent type only names the sandbox: one with other characters is left out rather than refused.
    const agentType = input.agent_type && /^[A-Za-z0-9 ._:-]{1,128}$/.test(input.agent_type) ? input.agent_type : undefined;
    r = await client.call('sessions.subagentStart', { sessionId: input.session_id, agentId: input.agent_id, ...(agentType ? { agentType } : {}), ...(agent !== 'claude' ? { agent } : {}) });
  } catch (err) {
    if (err instanceof Error && err.name === 'SessionNotFound') return 0;
    throw err;
  }
  printJson(io, { hookSpecificOutput: { hookEventName: 'SubagentStart', additionalContext: subagentContext(r.task, r.parentTaskId, input.session_id, input.agent_id) } });
  return 0;
}
