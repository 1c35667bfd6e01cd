// Building guest shell commands safely. Everything interpolated is either
// validated by the caller (ids, commit hashes) or single-quoted here.

export const GUEST_REPO_DIR = '/work/repo';
export const GUEST_OUT_DIR = '/work/out';
export const GUEST_FACTORY_DIR = '/work/.factory';
export const GUEST_TASK_FILE = '/work/TASK.md';
export const GUEST_AGENT_USER = 'agent';
export const GUEST_AGENT_HOME = '/home/agent';

/** POSIX single-quote: safe for any byte string except NUL. */
export function shellQuote(s: string): string {
  if (s.includes('\0')) throw new Error('a shell argument cannot contain NUL');
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * Runs a bash script as the unprivileged agent user with a clean, known
 * environment (runuser keeps root's otherwise). Used by the stage runner and by
 * agent adapters alike.
 */
export function asAgent(script: string): string {
  return [
    'runuser', '-u', GUEST_AGENT_USER, '--',
    'env', '-i',
    `HOME=${GUEST_AGENT_HOME}`, `USER=${GUEST_AGENT_USER}`, `LOGNAME=${GUEST_AGENT_USER}`,
    'PATH=/usr/local/bin:/usr/bin:/bin', 'TERM=xterm-256color', 'LANG=C.UTF-8',
    'bash', '-c', shellQuote(script),
  ].join(' ');
}

/** Kills every process of the agent user in the guest (used on cancel and timeout). */
export const KILL_AGENT_PROCESSES = `runuser -u ${GUEST_AGENT_USER} -- bash -c 'kill -KILL -1' ; true`;
