// Building guest shell commands safely. Everything interpolated is either
// validated by the caller (ids, commit hashes) or single-quoted here.
import { shellQuote } from '../../common/shell-quote.js';

export { shellQuote };

export const GUEST_REPO_DIR = '/work/repo';
export const GUEST_OUT_DIR = '/work/out';
export const GUEST_FACTORY_DIR = '/work/.factory';
export const GUEST_TASK_FILE = '/work/TASK.md';
export const GUEST_ENV_FILE = '/work/.factory/env.sh';
export const GUEST_AGENT_USER = 'agent';
export const GUEST_AGENT_HOME = '/home/agent';
/**
 * node-gyp (11.4 and later) builds native addons against the headers setup installs with
 * Node instead of downloading them from nodejs.org, which a sandbox cannot reach. The
 * image's sshd_config sets the same for every SSH session (a unit test keeps them equal),
 * and so does the first shell's console (console-subs.pl).
 */
export const GUEST_NODE_GYP_DIR = { name: 'npm_package_config_node_gyp_nodedir', value: '/usr/local' } as const;
export const GUEST_NODE_GYP_ENV = `${GUEST_NODE_GYP_DIR.name}=${GUEST_NODE_GYP_DIR.value}`;

/**
 * A command line that runs `argv` as the unprivileged agent user with a clean,
 * known environment (runuser would otherwise keep root's). Used by the stage
 * runner and by agent adapters alike.
 */
export function asAgentArgv(argv: string[]): string {
  return [
    'runuser', '-u', GUEST_AGENT_USER, '--',
    'env', '-i',
    `HOME=${GUEST_AGENT_HOME}`, `USER=${GUEST_AGENT_USER}`, `LOGNAME=${GUEST_AGENT_USER}`,
    'PATH=/usr/local/bin:/usr/bin:/bin', 'TERM=xterm-256color', 'LANG=C.UTF-8', GUEST_NODE_GYP_ENV,
    ...argv.map(shellQuote),
  ].join(' ');
}

/** Runs a bash script as the agent user (see asAgentArgv). */
export function asAgent(script: string): string {
  return asAgentArgv(['bash', '-c', script]);
}

/** Kills every process of the agent user in the guest (used on cancel and timeout). */
export const KILL_AGENT_PROCESSES = `runuser -u ${GUEST_AGENT_USER} -- bash -c 'kill -KILL -1' ; true`;

/** `export NAME='value'` lines for a sourced env file; names must already be validated. */
export function exportLines(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([k, v]) => {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) throw new Error(`bad variable name ${k}`);
      return `export ${k}=${shellQuote(v)}`;
    })
    .join('\n');
}

/** Strips terminal escape sequences and control characters from guest output for one-line summaries. */
export function plainText(s: string): string {
  return s
    .replace(/\x1b\[[0-?]*[ -/]*[@-~]/g, '')
    .replace(/\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g, '')
    .replace(/\x1b[@-Z\\-_]/g, '')
    .replace(/\r\n/g, '\n')
    .replace(/\r/g, '\n')
    .replace(/[\x00-\x08\x0b-\x1f\x7f]/g, '');
}

/** The last non-empty line of some output, cleaned and capped. */
export function lastLine(s: string, max = 200): string {
  const lines = plainText(s).split('\n').map((l) => l.trim()).filter(Boolean);
  const line = lines[lines.length - 1] ?? '';
  return line.length > max ? line.slice(0, max - 1) + '…' : line;
}
