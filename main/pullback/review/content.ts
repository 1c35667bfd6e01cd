// What each changed file's new content is: its size, whether the review can show
// it as text (no NUL byte, valid UTF-8, not over the cap), a symlink's target.
// Sizes come first; content is read only below the caps and within a budget,
// and files past the budget are reported, never passed as text silently.
import { isUtf8 } from 'node:buffer';
import path from 'node:path';
import { decodeGitName } from './git-names.js';
import type { ChangedFile } from './listing.js';
import { objectInfo, readBlobs } from './objects.js';

/** A symlink target longer than this is not read (PATH_MAX on Linux). */
export const MAX_LINK_TARGET_BYTES = 4096;
/** Config files whose content the flags look at (package.json scripts): read up to this size. */
export const MAX_CONFIG_BYTES = 1024 * 1024;

export interface ContentOptions {
  timeoutMs: number;
  /** New content over this many bytes is 'too-large' to show as text. */
  textCap: number;
  /** Total bytes read to check content; files past it are returned as unchecked. */
  checkBudget: number;
}

export interface ContentResult {
  /** Files whose content could not be checked within the budget. */
  unchecked: ChangedFile[];
  /** Content of the config files the flags need (package.json, old and new), by object id. */
  configs: Map<string, Buffer>;
}

const isBlobMode = (m: ChangedFile['newMode']) => m === 'file' || m === 'executable' || m === 'symlink';

/** Whether the flags need this file's content (old and new): package manifests whose scripts run on install. */
export function needsConfigContent(f: Pick<ChangedFile, 'path'>): boolean {
  return path.posix.basename(f.path).toLowerCase() === 'package.json';
}

/** Fills in size, notText and linkTarget of every file (in place). */
export async function inspectContent(qrepo: string, files: ChangedFile[], opts: ContentOptions): Promise<ContentResult> {
  const wanted = new Set<string>();
  for (const f of files) {
    if (isBlobMode(f.newMode)) wanted.add(f.newOid);
    if (needsConfigContent(f) && isBlobMode(f.oldMode)) wanted.add(f.oldOid);
  }
  const info = await objectInfo(qrepo, wanted, opts.timeoutMs);

  const toRead = new Map<string, number>();
  const configOids = new Set<string>();
  let budget = opts.checkBudget;
  const unchecked: ChangedFile[] = [];
  for (const f of files) {
    if (f.newMode === 'none') {
      f.size = 0;
      continue;
    }
    if (f.newMode === 'submodule') continue; // a commit id in another repository: no content here
    const size = info.get(f.newOid)?.size;
    if (size === undefined) continue; // cannot happen after the connectivity check; shown without a size
    f.size = size;
    if (f.newMode === 'symlink') {
      if (size <= MAX_LINK_TARGET_BYTES) toRead.set(f.newOid, size);
      continue;
    }
    if (needsConfigContent(f)) {
      for (const oid of [f.oldOid, f.newOid]) {
        const s = info.get(oid)?.size;
        if (s !== undefined && s <= MAX_CONFIG_BYTES) {
          toRead.set(oid, s);
          configOids.add(oid);
        }
      }
    }
    if (size > opts.textCap) {
      f.notText = 'too-large';
      continue;
    }
    // git found a NUL byte in the first 8000 bytes ("-" in numstat): no need to read it again.
    if (f.binary) {
      f.notText = 'nul-byte';
      continue;
    }
    if (toRead.has(f.newOid)) continue;
    if (size > budget) {
      unchecked.push(f);
      continue;
    }
    budget -= size;
    toRead.set(f.newOid, size);
  }

  const textOf = new Map<string, ChangedFile['notText'] | null>();
  const configs = new Map<string, Buffer>();
  const linkTargets = new Map<string, string>();
  const symlinkOids = new Set(files.filter((f) => f.newMode === 'symlink').map((f) => f.newOid));
  await readBlobs(
    qrepo,
    [...toRead].map(([oid, size]) => ({ oid, size })),
    (oid, data) => {
      textOf.set(oid, data.includes(0) ? 'nul-byte' : isUtf8(data) ? null : 'invalid-utf8');
      if (configOids.has(oid)) configs.set(oid, Buffer.from(data));
      if (symlinkOids.has(oid)) linkTargets.set(oid, decodeGitName(data));
    },
    { timeoutMs: opts.timeoutMs },
  );
  for (const f of files) {
    if (f.newMode === 'symlink') {
      const target = linkTargets.get(f.newOid);
      if (target !== undefined) f.linkTarget = target;
    } else if (isBlobMode(f.newMode) && !f.notText) {
      const verdict = textOf.get(f.newOid);
      if (verdict) f.notText = verdict;
    }
  }
  return { unchecked, configs };
}
