// Agent sessions (issue 27): how the CLI, the app and the UI tell an agent
// session's terminal from the other shells of its task.
import type { TerminalInfo } from './domain.js';

/**
 * The interactive agents: whose hooks `factory hooks install` writes and whose
 * sessions get a sandbox. No runtime import here: the hooks' lean path loads it.
 */
export const INTERACTIVE_AGENTS = ['claude', 'codex'] as const;
export type InteractiveAgent = (typeof INTERACTIVE_AGENTS)[number];

/** The agent's terminal is titled this and the agent's name (e.g. 'agent: Claude Code'). */
export const AGENT_TERMINAL_PREFIX = 'agent: ';

export function isAgentTerminal(info: Pick<TerminalInfo, 'kind' | 'title'>): boolean {
  return info.kind === 'shell' && info.title.startsWith(AGENT_TERMINAL_PREFIX);
}
