// Shell rendering of agent commands. The prompt never enters the command line:
// it is a file redirected to stdin. Every other word is quoted where a shell would read it specially.
import { shellWord } from '../../../common/shell-quote.js';
import type { AgentCommandSpec } from './types.js';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

export function assertEnvName(name: string): void {
  if (!ENV_NAME.test(name)) throw new Error(`not an environment variable name: ${JSON.stringify(name).slice(0, 80)}`);
}

/**
 * One line for `bash -c` (or an SSH exec): cd into cwd, then exec the argv with
 * the given env, stdin from the prompt file. `exec` makes the agent the
 * process the pty/ssh channel signals on cancel.
 */
export function renderCommand(spec: AgentCommandSpec): string {
  if (spec.argv.length === 0) throw new Error('agent command has no program');
  const envWords = Object.entries(spec.env).map(([k, v]) => {
    assertEnvName(k);
    return `${k}=${shellWord(v)}`;
  });
  const parts = ['cd', shellWord(spec.cwd), '&&', 'exec'];
  if (envWords.length > 0) parts.push('env', ...envWords);
  parts.push(...spec.argv.map(shellWord));
  if (spec.stdinFile !== undefined) parts.push('<', shellWord(spec.stdinFile));
  return parts.join(' ');
}

/** Checks that every name the adapter needs from the broker is present and returns env in a stable order. */
export function requireBrokerEnv(
  adapterName: string,
  brokerEnv: readonly string[],
  env: Record<string, string>,
): Record<string, string> {
  const missing = brokerEnv.filter((n) => typeof env[n] !== 'string' || env[n] === '');
  if (missing.length > 0) {
    throw new Error(`${adapterName} needs ${missing.join(', ')} from the credential broker; none was given`);
  }
  for (const k of Object.keys(env)) assertEnvName(k);
  return env;
}
