// What Approve lands: one new commit, made on the host in the quarantine
// repository, whose tree is the reviewed head's tree and whose only parent is
// the task's base. Its message is the app's, from what the user typed (the task
// text) and the app knows (task id, agent); nothing from the guest. Only this
// commit is then fetched into the user's repository, so no commit, message or
// object reachable only from the agent's history ever enters it.
import type { CommitIdentity } from '../git/commit-identity.js';
import { identityEnv } from '../git/commit-identity.js';
import type { GitLimits } from '../git/git-limits.js';
import { git } from '../git/host-git.js';

/** The ref in the quarantine repository that Approve fetches. */
export const LANDING_REF = 'refs/factory/landing';

const SUBJECT_CHARS = 72;
const MAX_BODY_CHARS = 4000;

/** The user's text as git message text: line breaks normalised, other control characters dropped. */
function plain(text: string): string {
  return text.replace(/\r\n?/g, '\n').replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '').trim();
}

export function landingMessage(task: { id: string; title: string; agent?: string | undefined }, agentCommits: number | undefined): string {
  const title = plain(task.title);
  const first = title.split('\n')[0]!.trim();
  const subject = first.length > SUBJECT_CHARS ? `${first.slice(0, SUBJECT_CHARS - 1)}…` : first || `Task ${task.id}`;
  const body = title === first && first.length <= SUBJECT_CHARS ? '' : `${title.slice(0, MAX_BODY_CHARS)}${title.length > MAX_BODY_CHARS ? '…' : ''}\n\n`;
  const commits =
    agentCommits === 1 ? "the agent's 1 commit and its message were"
    : `the agent's ${agentCommits ?? 'own'} commits and their messages were`;
  return (
    `${subject}\n\n${body}` +
    `Task ${task.id}, made by agent ${plain(task.agent ?? 'command')} in a Factory in a Box sandbox.\n` +
    `Approved after review: this commit holds the reviewed tree on the task's base; ${commits} not kept.\n`
  );
}

/** Makes the landing commit in the quarantine repository and points LANDING_REF at it; returns its id. */
export async function makeLandingCommit(opts: {
  qrepo: string; head: string; base: string; message: string; identity: CommitIdentity; limits: GitLimits; timeoutMs: number;
}): Promise<string> {
  const { qrepo, limits, timeoutMs } = opts;
  const run = (args: string[], extra: { input?: string; env?: Record<string, string> } = {}) =>
    git(args, { cwd: qrepo, env: { GIT_DIR: qrepo, ...extra.env }, limits, timeoutMs, errorName: 'ApproveFailed', ...(extra.input !== undefined ? { input: extra.input } : {}) });
  const tree = (await run(['rev-parse', '--verify', `${opts.head}^{tree}`])).stdout.trim();
  // No signing: a signing program the user set up for their own commits could ask for a passphrase nobody sees.
  const commit = (
    await run(['-c', 'i18n.commitEncoding=UTF-8', 'commit-tree', '--no-gpg-sign', tree, '-p', opts.base], { input: opts.message, env: identityEnv(opts.identity) })
  ).stdout.trim();
  await run(['update-ref', LANDING_REF, commit]);
  return commit;
}
