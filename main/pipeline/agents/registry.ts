// The agents a task can choose by name. 'command' (run the configured stage
// commands) is not an adapter: the stage runner handles it itself.
import { ClaudeCodeAdapter, type ClaudeCodeAdapterOptions } from './claude-code.js';
import { CodexAdapter, type CodexAdapterOptions } from './codex.js';
import { CustomCommandAdapter, type CustomCommandOptions } from './custom-command.js';
import type { AgentAdapter } from './types.js';

export interface AgentRegistryOptions {
  claudeCode?: ClaudeCodeAdapterOptions;
  codex?: CodexAdapterOptions;
  /** A custom agent is listed only when configured. */
  custom?: CustomCommandOptions;
}

export function builtInAgents(opts: AgentRegistryOptions = {}): Map<string, AgentAdapter> {
  const agents = new Map<string, AgentAdapter>();
  const add = (a: AgentAdapter) => agents.set(a.id, a);
  add(new ClaudeCodeAdapter(opts.claudeCode));
  add(new CodexAdapter(opts.codex));
  if (opts.custom) add(new CustomCommandAdapter(opts.custom));
  return agents;
}
