// The repositories a user started tasks in, and the path being typed, kept in
// localStorage so a reload forgets neither. What is read back is checked: the
// storage is shared with every page of the origin and may hold anything.

export const RECENT_REPOS_KEY = 'factory.recentRepos';
export const REPO_DRAFT_KEY = 'factory.repoPathDraft';
export const RECENT_REPOS_MAX = 5;
/** Longer than any real path (PATH_MAX is 4096); anything longer is not a path we stored. */
const MAX_PATH_CHARS = 4096;

function storage(): Storage | undefined {
  try {
    return globalThis.localStorage ?? undefined;
  } catch {
    return undefined; // storage disabled (privacy settings): the form works, it just forgets
  }
}

function plausiblePath(p: unknown): p is string {
  // No control characters: a stored path is shown as a button label and put into the input.
  return typeof p === 'string' && p.trim() !== '' && p.length <= MAX_PATH_CHARS && !/[\u0000-\u001f\u007f]/.test(p);
}

/** The last paths used, newest first; garbage in storage reads as no history. */
export function loadRecentRepos(): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(storage()?.getItem(RECENT_REPOS_KEY) ?? '[]');
  } catch {
    return [];
  }
  if (!Array.isArray(parsed)) return [];
  return [...new Set(parsed.filter(plausiblePath))].slice(0, RECENT_REPOS_MAX);
}

/** Puts `repoPath` first (once), keeps five, and returns the new list. */
export function rememberRepo(repoPath: string): string[] {
  const p = repoPath.trim();
  if (!plausiblePath(p)) return loadRecentRepos();
  const next = [p, ...loadRecentRepos().filter((r) => r !== p)].slice(0, RECENT_REPOS_MAX);
  try {
    storage()?.setItem(RECENT_REPOS_KEY, JSON.stringify(next));
  } catch {
    // quota or disabled storage: the history is a convenience
  }
  return next;
}

export function loadRepoDraft(): string {
  const d = storage()?.getItem(REPO_DRAFT_KEY) ?? '';
  return plausiblePath(d) ? d : '';
}

export function saveRepoDraft(repoPath: string): void {
  try {
    if (repoPath) storage()?.setItem(REPO_DRAFT_KEY, repoPath.slice(0, MAX_PATH_CHARS));
    else storage()?.removeItem(REPO_DRAFT_KEY);
  } catch {
    // as above
  }
}
