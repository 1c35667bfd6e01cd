// The hook events we install and their time limits. A module of its own, with no
// runtime imports: the lean hook path (main.ts) reads it on every SubagentStart
// without loading the settings writer or the whole CLI.
import type { InteractiveAgent } from '../../../common/agent-session.js';

/** Claude Code event → our subcommand and its time limit (seconds): provisioning may boot a VM under software emulation. */
export const HOOK_EVENTS = {
  SessionStart: { sub: 'session-start', timeout: 900 },
  // Every tool call: the hook decides within 30 s itself; `|| exit 2` makes any failure of it block the call.
  PreToolUse: { sub: 'pre-tool-use', timeout: 120, matcher: '*' },
  // A subagent's own sandbox may wait for a slot of the parallel-task limit, then boot.
  SubagentStart: { sub: 'subagent-start', timeout: 900 },
  SubagentStop: { sub: 'subagent-stop', timeout: 600 },
  Stop: { sub: 'stop', timeout: 300 },
  SessionEnd: { sub: 'session-end', timeout: 600 },
} as const;
export type HookEvent = keyof typeof HOOK_EVENTS;

/**
 * Codex's events (the pinned 0.171): the same names and input as Claude Code's.
 * Codex cuts SessionEnd hooks at 3 s whatever they ask for; a hook that times
 * out or fails counts as no decision, so the time limits are kept under Codex's.
 */
export const CODEX_HOOK_EVENTS = {
  ...HOOK_EVENTS,
  SessionEnd: { sub: 'session-end', timeout: 3 },
} as const satisfies Record<HookEvent, { sub: string; timeout: number; matcher?: string }>;

export function hookEvents(agent: InteractiveAgent): Record<HookEvent, { sub: string; timeout: number; matcher?: string }> {
  return agent === 'codex' ? CODEX_HOOK_EVENTS : HOOK_EVENTS;
}

/**
 * How long the hook may wait, in ms: under the agent's own limit for it (the
 * settings' timeout; for SessionEnd also CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS,
 * 60 s unless set), so it says why it gives up instead of being killed.
 */
export function hookDeadlineMs(which: string, env: NodeJS.ProcessEnv = process.env, agent: InteractiveAgent = 'claude'): number {
  let limitS: number = Object.values(hookEvents(agent)).find((e) => e.sub === which)?.timeout ?? 60;
  if (which === 'session-end' && agent === 'claude') {
    const envMs = Number(env.CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS);
    limitS = Math.min(limitS, Number.isFinite(envMs) && envMs > 0 ? envMs / 1000 : 60);
  }
  return Math.max(1, limitS - Math.min(20, limitS / 4)) * 1000;
}
