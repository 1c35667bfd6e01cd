// Submodules in the returned work: the URL each one is fetched from decides what
// runs when someone runs `git submodule update`. `ext::` runs a command, `file::`
// and local paths read repositories on this machine, other `x::` transports run
// a remote helper; a URL starting with '-' can be taken for an option.
import { escapeName } from '../../../common/review-text.js';
import { runGit } from '../../git/host-git.js';
import { splitNul } from './git-names.js';

export interface SubmoduleEntry {
  name: string;
  url?: string;
  path?: string;
  update?: string;
}

/** .gitmodules bigger than this is not parsed (flagged as such). */
export const MAX_GITMODULES_BYTES = 1024 * 1024;

/**
 * The submodule entries of a .gitmodules blob (`<rev>:.gitmodules` or an object
 * id), parsed by git itself with includes off. `error` when git cannot read it.
 */
export async function readGitmodules(qrepo: string, blob: string, timeoutMs: number): Promise<{ entries: SubmoduleEntry[]; error?: string }> {
  const r = await runGit(['config', '-z', '--no-includes', '--blob', blob, '--list'], {
    cwd: qrepo, env: { GIT_DIR: qrepo }, timeoutMs, maxStdoutBytes: 4 * MAX_GITMODULES_BYTES,
  });
  if (r.code !== 0 || r.truncated) return { entries: [], error: r.stderr.trim().split('\n')[0] || `exit ${r.code}` };
  const byName = new Map<string, SubmoduleEntry>();
  for (const part of splitNul(r.stdoutBuffer)) {
    const text = part.toString('utf8');
    const nl = text.indexOf('\n');
    const key = nl < 0 ? text : text.slice(0, nl);
    const value = nl < 0 ? '' : text.slice(nl + 1);
    if (!key.startsWith('submodule.')) continue;
    const dot = key.lastIndexOf('.');
    const name = key.slice('submodule.'.length, dot);
    const variable = key.slice(dot + 1);
    const entry = byName.get(name) ?? { name };
    if (variable === 'url' || variable === 'path' || variable === 'update') entry[variable] = value;
    byName.set(name, entry);
  }
  return { entries: [...byName.values()] };
}

export interface UrlVerdict {
  severity: 'warning' | 'danger';
  note: string;
}

/** What fetching from this URL can do. */
export function classifySubmoduleUrl(url: string): UrlVerdict {
  if (/[\u0000-\u001f\u007f]/.test(url)) return { severity: 'danger', note: 'the URL holds control characters' };
  if (url.startsWith('-')) return { severity: 'danger', note: "the URL starts with '-', which git could take for an option" };
  const transport = /^([A-Za-z][A-Za-z0-9+.-]*)::/.exec(url)?.[1]?.toLowerCase();
  if (transport === 'ext') return { severity: 'danger', note: 'ext:: runs a command on your machine when the submodule is fetched' };
  if (transport === 'fd') return { severity: 'danger', note: 'fd:: talks to file descriptors of the process that runs git' };
  if (transport === 'file') return { severity: 'danger', note: 'file:: reads a repository from a path on your machine' };
  if (transport) return { severity: 'danger', note: `${transport}:: runs the remote helper git-remote-${transport}` };
  if (/^file:/i.test(url)) return { severity: 'danger', note: 'file:// reads a repository from a path on your machine' };
  if (url.startsWith('/') || url.startsWith('~') || /^[A-Za-z]:[\\/]/.test(url) || url.startsWith('\\\\')) {
    return { severity: 'danger', note: 'a path on your machine' };
  }
  if (url.startsWith('./') || url.startsWith('../')) return { severity: 'warning', note: "relative to the repository's own remote" };
  if (/^https:\/\//i.test(url)) return { severity: 'warning', note: 'fetched over https' };
  if (/^(http|git):\/\//i.test(url)) return { severity: 'warning', note: 'fetched unencrypted' };
  if (/^ssh:\/\//i.test(url) || /^[^/:]+@[^/:]+:/.test(url)) return { severity: 'warning', note: 'fetched over ssh' };
  return { severity: 'warning', note: 'an unusual URL' };
}

/** "URL (note)" for a flag message, escaped. */
export function describeUrl(url: string | undefined): UrlVerdict & { text: string } {
  if (url === undefined) return { severity: 'warning', note: 'no URL in .gitmodules', text: 'no URL in .gitmodules' };
  const v = classifySubmoduleUrl(url);
  return { ...v, text: `${escapeName(url)} (${v.note})` };
}
