// Which stored credential an agent needs before it can start, in words the form
// and the task service share: a task whose agent has none is refused at Start,
// naming the fix, instead of failing minutes later at the model's door.
import { ANTHROPIC_KINDS, type CredentialKind, type CredentialRef } from './credentials.js';

interface AgentNeed {
  kinds: readonly CredentialKind[];
  /** The provider, as the message names it. */
  provider: string;
  /** What to store, in a few words. */
  what: string;
}

// A hooks session ('claude-session') needs none: Claude Code runs on this computer with its
// own sign-in, and only its commands run in the sandbox.
const NEEDS: Record<string, AgentNeed> = {
  'claude-code': { kinds: ANTHROPIC_KINDS, provider: 'Anthropic', what: 'an Anthropic API key or a Claude Code token (claude setup-token)' },
  codex: { kinds: ['openai'], provider: 'OpenAI', what: 'an OpenAI API key' },
};

/** The sentence naming the missing credential and its fix, or undefined when the agent has what it needs (or needs none). */
export function missingAgentCredential(agent: string, refs: readonly CredentialRef[]): string | undefined {
  const need = NEEDS[agent];
  if (!need || refs.some((r) => need.kinds.includes(r.kind))) return undefined;
  return `no ${need.provider} credential is stored: add ${need.what} in Credentials`;
}
