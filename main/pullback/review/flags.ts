// Flags shown above the diff for what a changed file is rather than what it
// says: symlinks, submodules, git and tool config, the executable bit, files
// that run code later, names that do not show what they are, content that
// cannot be shown as text. Pure functions over the listing and what was read.
import path from 'node:path';
import type { ReviewFlag } from '../../../common/review.js';
import { escapeName, isUnsafeName } from '../../../common/review-text.js';
import type { ChangedFile } from './listing.js';
import { INSTALL_SCRIPTS, rulesFor } from './sensitive-paths.js';
import { describeUrl, type SubmoduleEntry } from './submodules.js';

/** Where a symlink points, and whether that is outside the repository (or inside its .git folder). */
export function symlinkVerdict(linkPath: string, target: string): { resolved: string; outside: boolean; intoGit: boolean } {
  if (target.startsWith('/') || /^[A-Za-z]:[\\/]/.test(target) || target.startsWith('\\\\') || target.startsWith('~')) {
    return { resolved: target, outside: true, intoGit: false };
  }
  // Resolved against the link's own folder, as the OS does.
  const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(linkPath), target));
  const outside = resolved === '..' || resolved.startsWith('../');
  const intoGit = !outside && /^\.git(\/|$)/i.test(resolved);
  return { resolved, outside, intoGit };
}

function nameFlag(f: ChangedFile, name: string): ReviewFlag {
  const severe = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]/.test(name);
  return {
    kind: 'unsafe-name',
    severity: severe ? 'danger' : 'warning',
    path: f.path,
    message: `the name ${escapeName(name)} holds characters that are invisible, reorder text, break lines, are not UTF-8 or end it in blanks; shown escaped`,
  };
}

function scriptsOf(content: Buffer | undefined): { scripts: Record<string, string>; error?: string } {
  if (!content) return { scripts: {} };
  try {
    const json = JSON.parse(content.toString('utf8')) as { scripts?: unknown };
    const scripts = json && typeof json === 'object' && json.scripts && typeof json.scripts === 'object' ? (json.scripts as Record<string, unknown>) : {};
    return { scripts: Object.fromEntries(Object.entries(scripts).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)])) };
  } catch (err) {
    return { scripts: {}, error: (err as Error).message };
  }
}

/** package.json: which scripts were added, changed or removed; install-time ones run without asking. */
function packageScriptFlags(f: ChangedFile, configs: Map<string, Buffer>): ReviewFlag[] {
  if (f.newMode === 'none') return [];
  const next = configs.get(f.newOid);
  const where = escapeName(f.path);
  if (!next) return [{ kind: 'runs-code', severity: 'warning', path: f.path, message: `${where}: too large to compare its scripts; check them yourself` }];
  const before = f.oldMode === 'none' ? { scripts: {} } : scriptsOf(configs.get(f.oldOid));
  const after = scriptsOf(next);
  if (after.error) return [{ kind: 'runs-code', severity: 'warning', path: f.path, message: `${where} is not valid JSON (${after.error.slice(0, 120)}); its scripts could not be compared` }];
  const names = new Set([...Object.keys(before.scripts), ...Object.keys(after.scripts)]);
  const changed = [...names].filter((n) => before.scripts[n] !== after.scripts[n]).sort();
  if (changed.length === 0) return [];
  const install = changed.filter((n) => INSTALL_SCRIPTS.has(n));
  const list = changed.map((n) => escapeName(n)).slice(0, 20).join(', ') + (changed.length > 20 ? ` and ${changed.length - 20} more` : '');
  return [{
    kind: 'runs-code',
    severity: install.length > 0 ? 'danger' : 'warning',
    path: f.path,
    message: install.length > 0
      ? `${where}: install scripts changed (${install.map(escapeName).join(', ')}): they run on npm install; scripts changed: ${list}`
      : `${where}: scripts changed: ${list}`,
  }];
}

export interface FlagInputs {
  files: ChangedFile[];
  /** package.json contents by object id (content.ts). */
  configs: Map<string, Buffer>;
  /** The submodules of the new .gitmodules at the repository's root (when it or a gitlink changed). */
  gitmodules?: { entries: SubmoduleEntry[]; error?: string };
}

export function fileFlags({ files, configs, gitmodules }: FlagInputs): ReviewFlag[] {
  const flags: ReviewFlag[] = [];
  const urlOfPath = new Map((gitmodules?.entries ?? []).filter((e) => e.path !== undefined).map((e) => [e.path!, e.url]));
  for (const f of files) {
    const where = escapeName(f.path);
    for (const name of new Set([f.path, ...(f.oldPath !== undefined ? [f.oldPath] : [])])) {
      if (isUnsafeName(name)) flags.push(nameFlag(f, name));
    }
    if (f.newMode === 'symlink') {
      if (f.linkTarget === undefined) {
        flags.push({ kind: 'symlink', severity: 'danger', path: f.path, message: `symlink ${where}: its target (${f.size ?? '?'} bytes) is too long to show` });
      } else {
        const v = symlinkVerdict(f.path, f.linkTarget);
        const target = escapeName(f.linkTarget);
        flags.push(
          v.outside
            ? { kind: 'symlink', severity: 'danger', path: f.path, message: `symlink ${where} → ${target}: points outside the repository` }
            : v.intoGit
              ? { kind: 'symlink', severity: 'danger', path: f.path, message: `symlink ${where} → ${target}: points into the .git folder` }
              : { kind: 'symlink', severity: 'warning', path: f.path, message: `symlink ${where} → ${target}: stays inside the repository (${escapeName(v.resolved)})` },
        );
      }
    }
    if (f.newMode === 'submodule') {
      const url = describeUrl(urlOfPath.get(f.path));
      flags.push({ kind: 'submodule', severity: url.severity, path: f.path, message: `submodule ${where} at commit ${f.newOid.slice(0, 12)}: ${url.text}` });
    }
    if (f.path.toLowerCase() === '.gitmodules' && f.newMode !== 'none') {
      if (gitmodules?.error) flags.push({ kind: 'submodule', severity: 'danger', path: f.path, message: `${where} changed and could not be read: ${escapeName(gitmodules.error)}` });
      for (const e of gitmodules?.entries ?? []) {
        const url = describeUrl(e.url);
        flags.push({ kind: 'submodule', severity: url.severity, path: f.path, message: `${where} changed: submodule ${escapeName(e.name)} (path ${escapeName(e.path ?? '?')}) → ${url.text}` });
        if (e.update?.startsWith('!')) {
          flags.push({ kind: 'submodule', severity: 'danger', path: f.path, message: `${where}: submodule ${escapeName(e.name)} sets update to a command (${escapeName(e.update)})` });
        }
      }
    }
    if (f.newMode === 'executable' && f.oldMode !== 'executable') {
      flags.push({ kind: 'exec-bit', severity: 'warning', path: f.path, message: f.oldMode === 'file' ? `${where} became executable` : `${where} is a new executable file` });
    } else if (f.oldMode === 'executable' && f.newMode === 'file') {
      flags.push({ kind: 'exec-bit', severity: 'warning', path: f.path, message: `${where} is no longer executable` });
    }
    if (f.newMode !== 'none') {
      for (const rule of rulesFor(f.path)) flags.push({ kind: rule.kind, severity: rule.severity, path: f.path, message: `${where}: ${rule.why}` });
      if (path.posix.basename(f.path).toLowerCase() === 'package.json') flags.push(...packageScriptFlags(f, configs));
    }
    if (f.notText) {
      const why = f.notText === 'nul-byte' ? 'it holds NUL bytes' : f.notText === 'invalid-utf8' ? 'it is not valid UTF-8' : 'it is too large';
      flags.push({
        kind: 'not-text',
        severity: f.newMode === 'executable' ? 'danger' : 'warning',
        path: f.path,
        message: `${where} (${f.size ?? '?'} bytes${f.newMode === 'executable' ? ', executable' : ''}) cannot be shown as text: ${why}; open it to see its leading bytes`,
      });
    }
  }
  return flags;
}

/** Most severe first; otherwise in the order found. */
export function sortFlags(flags: ReviewFlag[]): ReviewFlag[] {
  return [...flags.filter((f) => f.severity === 'danger'), ...flags.filter((f) => f.severity !== 'danger')];
}
