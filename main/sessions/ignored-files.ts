// What git ignores stays out of a hooks session: the sync sends the sandbox only
// what `git status` lists, and an ignored file is where secrets live (`.env`).
// The file tools act on this computer, so without this step they would still
// hand such a file to the model: Read it, or Grep it, since a Grep glob overrides
// ripgrep's own ignore rules (`"glob": "*"` searches a git-ignored `.env`). Here,
// after the policy allowed a call:
// - Read, Edit, Write (and notebooks) of an ignored path are refused: reading it
//   would send it to the model, and a file written there never reaches the sandbox;
// - Grep over a folder gets every ignored entry under it left out by name
//   (`!**/<path>` globs after the model's own), and every repository nested in the
//   working tree (git does not enter it, the sync sends none of it, and ripgrep
//   would obey only its own ignore rules); it is refused when a name cannot be
//   written as such a glob. Given a glob of the model's, it also gets version-control
//   folders left out again: Claude Code's own exclusions of them come before the
//   model's globs, so `"glob": "*"` searched .git/config. Grep of an ignored file is
//   refused;
// - Glob and LS list names only, and go on as they are.
// Git runs with the host's safety options (host-git.ts); a git that cannot answer
// refuses the call (fail closed).
import fs from 'node:fs';
import { runGit } from '../git/host-git.js';
import { deny, fileToolTarget, mayTouchIgnored, printable, type Decision, type PolicyContext, type ToolCall } from './tool-policy.js';

/** More ignored entries than this under a Grep's folder are not written into its glob: the call is refused instead. */
export const MAX_EXCLUDED_ENTRIES = 2000;

/**
 * A name Claude Code passes through to ripgrep as one exclusion: it splits the glob
 * at white space and commas (outside braces), and these would be glob syntax.
 */
const NOT_IN_A_GLOB = /[\s,{}[\]*?\\!\p{Cc}]/u;

const GIT_TIMEOUT_MS = 15_000;

/** The folders Claude Code's Grep leaves out by itself (2.1.332), which a glob of the model's overrides. */
const VERSION_CONTROL_FOLDERS = ['.git', '.svn', '.hg', '.bzr', '.jj', '.sl'];

/** The decision, with what git ignores kept out of it. */
export async function withholdIgnored(call: ToolCall, ctx: PolicyContext, decision: Decision): Promise<Decision> {
  if (!mayTouchIgnored(call, decision)) return decision;
  try {
    return await withhold(call, ctx, decision);
  } catch (err) {
    return deny(call.tool_name, `${(err as Error).message}, so the call is not run`);
  }
}

async function withhold(call: ToolCall, ctx: PolicyContext, decision: Decision): Promise<Decision> {
  const name = call.tool_name;
  const target = fileToolTarget(call, ctx);
  if (!target) return decision;
  const top = fs.realpathSync.native(ctx.repoTop);
  if (target.rel !== '' && (await ignoredByGit(top, target.rel))) {
    const what = JSON.stringify(printable(target.rel));
    return name === 'Read' || name === 'NotebookRead' || name === 'Grep'
      ? deny(name, `git ignores ${what}, so it stays out of the sandbox and out of this session (such files hold secrets, like .env). If the task needs what it holds, ask the user`)
      : deny(name, `git ignores ${what}, so a file written here never reaches the sandbox; make it in the sandbox through the Bash tool, or ask the user to stop ignoring it`);
  }
  if (name !== 'Grep' || !fs.statSync(target.abs, { throwIfNoEntry: false })?.isDirectory()) return decision;
  const inside = target.rel === '' ? '' : `${target.rel}/`;
  const withheld = await withheldEntries(top);
  // A folder inside a nested repository: the exclusions below would start under it, and ripgrep would obey that repository's own rules.
  const nested = withheld.find((e) => e.endsWith('/') && inside.startsWith(e));
  if (nested !== undefined) return deny(name, `${JSON.stringify(printable(target.rel))} is in ${JSON.stringify(printable(nested))}, a repository nested in the working tree, which the sandbox does not get and whose ignored files Grep would search`);
  const entries = withheld.filter((e) => e.startsWith(inside));
  const odd = entries.find((e) => NOT_IN_A_GLOB.test(e));
  if (odd !== undefined || entries.length > MAX_EXCLUDED_ENTRIES) {
    const why = odd !== undefined ? `${JSON.stringify(printable(odd))}, whose name a Grep glob cannot leave out` : `${entries.length} entries, more than a Grep glob can leave out`;
    return deny(name, `git ignores ${why}, and Grep would search it; search with grep or rg through the Bash tool (in the sandbox, where ignored files are not), or give Grep a folder without them`);
  }
  const own = call.tool_input.glob;
  if (own !== undefined && typeof own !== 'string') return deny(name, 'its glob is not text');
  const ownGlob = own?.trim() ?? '';
  const excluded = [...entries, ...(ownGlob ? VERSION_CONTROL_FOLDERS : [])].map((e) => `!**/${e}`);
  if (excluded.length === 0) return decision;
  return {
    kind: 'rewrite',
    updatedInput: { ...call.tool_input, glob: [...(ownGlob ? [ownGlob] : []), ...excluded].join(' ') },
    why: `${[
      ...(entries.length ? [`${entries.length} path${entries.length === 1 ? '' : 's'} git ignores or does not enter`] : []),
      ...(ownGlob ? ['version-control folders'] : []),
    ].join(' and ')} left out of the search by Factory in a Box`,
  };
}

/** `git check-ignore`: whether the path (relative to the top) is ignored; tracked files never are. */
async function ignoredByGit(top: string, rel: string): Promise<boolean> {
  const r = await runGit(['check-ignore', '-q', '--', rel], { cwd: top, timeoutMs: GIT_TIMEOUT_MS });
  if (r.code === 0) return true;
  if (r.code === 1) return false;
  throw new Error(`git could not tell whether it ignores ${JSON.stringify(printable(rel))}: ${r.stderr.trim().slice(0, 300) || `exit ${r.code}`}`);
}

/**
 * What a Grep must leave out, relative to the top: the untracked paths an ignore
 * pattern matches (a folder the pattern matches is one entry ending in "/"), and the
 * repositories nested in the working tree (with every untracked file listed, the only
 * untracked entries that are folders). A name that is not UTF-8 could not be matched
 * by a glob written here, so it fails the call rather than slip through.
 */
async function withheldEntries(top: string): Promise<string[]> {
  // Not `ls-files --others --ignored --directory`: it also names a folder whose only file is tracked.
  const r = await runGit(['status', '--porcelain=v1', '-z', '--ignored=matching', '--untracked-files=all', '--no-renames', '--ignore-submodules=all'], { cwd: top, timeoutMs: GIT_TIMEOUT_MS, maxStdoutBytes: 4 * 1024 * 1024 });
  if (r.code !== 0 || r.truncated) throw new Error(`git could not list the files it ignores: ${r.truncated ? 'too many' : r.stderr.trim().slice(0, 300) || `exit ${r.code}`}`);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(r.stdoutBuffer);
  } catch {
    // Not UTF-8: such a name cannot be written into a glob that would match it.
    throw new Error('git ignores a file whose name is not UTF-8, which a Grep glob cannot leave out');
  }
  return text.split('\0').filter((e) => e.startsWith('!! ') || (e.startsWith('?? ') && e.endsWith('/'))).map((e) => e.slice(3));
}
