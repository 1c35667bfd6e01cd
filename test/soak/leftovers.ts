// What a soak run may not leave behind: processes, sockets, overlays,
// quarantines and temp files that no live task owns, and any credential value
// anywhere in the data folder.
import { lstatSync, readdirSync, readFileSync, readlinkSync, type Stats } from 'node:fs';
import path from 'node:path';
import { needlesFor } from '../../main/credentials/leak-needles.js';
import { scanFile } from '../../main/credentials/leak-scan.js';

export interface Leftover {
  kind: 'process' | 'socket' | 'overlay' | 'quarantine' | 'temp';
  what: string;
}

/** Every file under dir (not following links), with its stat. */
export function walk(dir: string): Array<{ file: string; stat: Stats }> {
  return entries(dir).flatMap((e) => (e.stat.isDirectory() ? walk(e.file) : [e]));
}

/** One folder's entries with their lstat; what goes away between the listing and the stat is left out. */
function entries(dir: string): Array<{ name: string; file: string; stat: Stats }> {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.flatMap((name) => {
    const file = path.join(dir, name);
    try {
      return [{ name, file, stat: lstatSync(file) }];
    } catch {
      return [];
    }
  });
}

/** QEMU, socat, ssh and git processes whose command line or working folder names one of `roots`. */
export function processesUnder(roots: string[]): Array<{ pid: number; command: string }> {
  const found: Array<{ pid: number; command: string }> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let command: string;
    let cwd = '';
    try {
      command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      if (/^\S*\s*$/.test(command) && readFileSync(`/proc/${entry}/stat`, 'utf8').includes(') Z ')) continue; // a zombie its parent will reap
      cwd = readlinkSync(`/proc/${entry}/cwd`);
    } catch {
      continue;
    }
    const program = path.basename(command.split(' ')[0] ?? '');
    if (!/^(qemu-system-\S+|socat|ssh|git|git-\S+)$/.test(program)) continue;
    if (roots.some((r) => command.includes(r) || cwd === r || cwd.startsWith(`${r}/`))) found.push({ pid: Number(entry), command: command.slice(0, 300) });
  }
  return found;
}

/**
 * A temp name as the app's writers make them: `<file>.tmp` and `.<file>.<pid>...tmp`
 * (atomic writes), `<dir>.tmp-XXXXXX` (mkdtemp beside the final folder), `.tmp-<id>`
 * and `tmp-<id>` (stores building a folder before renaming it into place).
 */
export function isTempName(name: string): boolean {
  return /^\.?tmp-|\.tmp$|\.tmp[-.]/.test(name);
}

/**
 * Leftovers in the data folder once no task is live: sockets (the running app's
 * own factory.sock aside), sandbox overlays, quarantines and temp files or
 * folders (a temp folder is named once, not file by file; an empty one too).
 */
export function leftoversIn(dataDir: string, opts: { appRunning: boolean }): Leftover[] {
  const out: Leftover[] = [];
  const visit = (dir: string) => {
    for (const { name, file, stat } of entries(dir)) {
      const rel = path.relative(dataDir, file);
      if (isTempName(name)) out.push({ kind: 'temp', what: stat.isDirectory() ? `${rel}/` : rel });
      else if (stat.isDirectory()) visit(file);
      else if (stat.isSocket()) {
        if (!(opts.appRunning && rel === 'factory.sock')) out.push({ kind: 'socket', what: rel });
      } else if (/\.(qcow2|overlay)$/.test(rel) && rel.startsWith('sandboxes')) out.push({ kind: 'overlay', what: rel });
      else if (/(^|\/)quarantine(\/|$)/.test(rel)) out.push({ kind: 'quarantine', what: rel });
    }
  };
  visit(dataDir);
  return out;
}

/** Files in the data folder that hold the credential value in any form the leak check knows (plain, base64, escaped, gzipped...). */
export async function credentialHits(dataDir: string, credentialId: string, value: string): Promise<string[]> {
  const needles = needlesFor(credentialId, value);
  const hits: string[] = [];
  for (const { file, stat } of walk(dataDir)) {
    if (!stat.isFile()) continue;
    const scan = await scanFile(file, needles).catch(() => undefined);
    if (scan && scan.hits.length) hits.push(path.relative(dataDir, file));
  }
  return hits;
}

/** Bytes under dir, by the sizes of its files. */
export function bytesUnder(dir: string, skip: (rel: string) => boolean = () => false): number {
  let n = 0;
  for (const { file, stat } of walk(dir)) if (!skip(path.relative(dir, file))) n += stat.blocks * 512;
  return n;
}

/** A process that exists and is not a zombie. */
export function alive(pid: number): boolean {
  try {
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
  } catch {
    return false;
  }
}
