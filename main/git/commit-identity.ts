// Who the commit Approve lands is by: the user's own git identity for the
// repository (user.name and user.email, as `git commit` there would use them),
// or the app's when the repository has none or git would not take it.
import { runGit } from './host-git.js';

export interface CommitIdentity {
  name: string;
  email: string;
}

export const APP_IDENTITY: CommitIdentity = { name: 'Factory in a Box', email: 'factory@localhost' };

const MAX_IDENTITY_CHARS = 256;

async function configValue(repoPath: string, key: string): Promise<string | undefined> {
  const r = await runGit(['config', '--get', key], { cwd: repoPath, timeoutMs: 15_000, maxStdoutBytes: 4096 });
  const value = r.stdout.trim();
  // git refuses (or silently edits) names with angle brackets or line breaks: such a value is not used.
  if (r.code !== 0 || r.truncated || !value || value.length > MAX_IDENTITY_CHARS || /[<>\u0000-\u001f\u007f]/.test(value)) return undefined;
  return value;
}

export async function commitIdentity(repoPath: string): Promise<CommitIdentity> {
  const name = await configValue(repoPath, 'user.name');
  const email = await configValue(repoPath, 'user.email');
  return name && email ? { name, email } : APP_IDENTITY;
}

/** The environment that makes git author and commit as `who`. */
export function identityEnv(who: CommitIdentity): Record<string, string> {
  return { GIT_AUTHOR_NAME: who.name, GIT_AUTHOR_EMAIL: who.email, GIT_COMMITTER_NAME: who.name, GIT_COMMITTER_EMAIL: who.email };
}
