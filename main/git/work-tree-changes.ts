// What differs in a working tree from its HEAD: staged, unstaged and untracked
// files that are not ignored, read with `git status` (never writing the index).
// The seed's --with-changes and a hooks session's sync both start from it.
import fs from 'node:fs';
import path from 'node:path';
import { git } from './host-git.js';

export interface ChangedPath {
  path: string;
  deleted: boolean;
}

export async function uncommittedChanges(repoPath: string, timeoutMs = 60_000): Promise<ChangedPath[]> {
  const st = await git(['status', '--porcelain=v1', '-z', '--untracked-files=all', '--no-renames', '--ignore-submodules=all'], { cwd: repoPath, timeoutMs });
  const out: ChangedPath[] = [];
  for (const entry of st.stdout.split('\0')) {
    if (entry.length < 4) continue;
    const p = entry.slice(3);
    out.push({ path: p, deleted: !present(path.join(repoPath, p)) });
  }
  return out;
}

/** There, as a file, a folder or a link (even one that leads nowhere). */
function present(p: string): boolean {
  try {
    fs.lstatSync(p);
    return true;
  } catch {
    // Nothing there.
    return false;
  }
}
