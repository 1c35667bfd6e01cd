// Size checks on the quarantine repository, by object id, before anything
// reads object contents: every object the result brings (reachable from its
// head and not from the base) with its type and uncompressed size, counted
// against the caps; then every blob the diff is about to read, on both sides
// (a result can also make the diff read a huge file of the host's, e.g. by
// deleting it or adding it again under a new name). git answers sizes from
// object headers (for a delta, from the delta's header) without inflating.
import { FactoryError } from '../../common/errors.js';
import { formatBytes, type GitLimits } from '../git/git-limits.js';
import { firstLine, git, limitMessage, runGit } from '../git/host-git.js';
import type { PackCaps } from './pack-scan.js';

interface Sized { id: string; type: string; size: number }

function rejected(message: string): FactoryError {
  return new FactoryError('PullbackRejected', message);
}

async function sizes(qrepo: string, ids: string[], limits: GitLimits, timeoutMs: number): Promise<Sized[]> {
  if (ids.length === 0) return [];
  const r = await git(['cat-file', '--batch-check=%(objectname) %(objecttype) %(objectsize)'], {
    cwd: qrepo, env: { GIT_DIR: qrepo }, input: ids.join('\n') + '\n', timeoutMs, limits, maxStdoutBytes: ids.length * 100 + 1024,
    errorName: 'PullbackRejected',
  });
  if (r.truncated) throw rejected('git cat-file answered more than expected; the sizes could not all be checked');
  return r.stdout.split('\n').filter(Boolean).map((line) => {
    const [id, type, size] = line.split(' ');
    if (type === 'missing' || !size) throw rejected(`the result refers to object ${id} that it does not carry`);
    return { id: id!, type: type!, size: Number(size) };
  });
}

/** The path under which the result holds `id` (for messages), quoted. */
async function pathOf(qrepo: string, id: string, head: string, base: string, limits: GitLimits, timeoutMs: number): Promise<string> {
  const r = await runGit(['rev-list', '--objects', head, '--not', base], { cwd: qrepo, env: { GIT_DIR: qrepo }, limits, timeoutMs });
  const line = r.stdout.split('\n').find((l) => l.startsWith(`${id} `));
  return line ? ` at ${JSON.stringify(line.slice(id.length + 1))}` : '';
}

function overObjectCap(what: string, o: Sized, cap: number): FactoryError {
  return rejected(`${what}, which is ${o.size} bytes (${formatBytes(o.size)}), over the cap of ${cap} bytes per object (${formatBytes(cap)})`);
}

/**
 * Lists every object the result brings and counts it against the caps; also
 * proves the result complete (rev-list fails on a missing object).
 */
export async function checkResultObjects(opts: {
  qrepo: string; head: string; base: string; caps: PackCaps; limits: GitLimits; timeoutMs: number;
}): Promise<{ objects: number; totalBytes: number }> {
  const { qrepo, head, base, caps, limits, timeoutMs } = opts;
  const listing = await runGit(['rev-list', '--objects', '--no-object-names', head, '--not', base], {
    cwd: qrepo, env: { GIT_DIR: qrepo }, limits, timeoutMs, maxStdoutBytes: (caps.maxObjects + 1) * 65,
  });
  if (listing.truncated) throw rejected(`the result holds more than ${caps.maxObjects} objects, the cap`);
  if (listing.limitExceeded) throw rejected(`the result's objects could not be listed: ${limitMessage(['rev-list'], listing)}`);
  if (listing.code !== 0) throw rejected(`the bundle is incomplete: ${firstLine(listing.stderr) || `exit ${listing.code}`}`);
  const ids = listing.stdout.split('\n').filter(Boolean);
  if (ids.length > caps.maxObjects) throw rejected(`the result holds ${ids.length} objects, over the cap of ${caps.maxObjects}`);
  let total = 0;
  for (const o of await sizes(qrepo, ids, limits, timeoutMs)) {
    if (o.size > caps.maxObjectBytes) {
      throw overObjectCap(`the result brings ${o.type} ${o.id}${await pathOf(qrepo, o.id, head, base, limits, timeoutMs)}`, o, caps.maxObjectBytes);
    }
    total += o.size;
    if (total > caps.maxTotalBytes) {
      throw rejected(`the result's objects add up to more than ${caps.maxTotalBytes} bytes (${formatBytes(caps.maxTotalBytes)}), the cap in total`);
    }
  }
  return { objects: ids.length, totalBytes: total };
}

/** Every blob `git diff base head` will read, old and new side, must fit the per-object cap. */
export async function checkDiffBlobs(opts: {
  qrepo: string; head: string; base: string; maxObjectBytes: number; limits: GitLimits; timeoutMs: number;
}): Promise<{ blobs: number; largestBytes: number }> {
  const { qrepo, head, base, maxObjectBytes, limits, timeoutMs } = opts;
  const raw = await git(['diff', '--raw', '-z', '--no-renames', '--no-abbrev', '--no-ext-diff', '--no-textconv', base, head], {
    cwd: qrepo, env: { GIT_DIR: qrepo }, limits, timeoutMs, errorName: 'PullbackRejected',
  });
  // ":oldmode newmode oldid newid status" NUL path NUL
  const parts = raw.stdout.split('\0');
  const pathById = new Map<string, string>();
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const m = /^:(\d{6}) (\d{6}) ([0-9a-f]+) ([0-9a-f]+) /.exec(parts[i]!);
    if (!m) break;
    for (const [mode, id] of [[m[1]!, m[3]!], [m[2]!, m[4]!]] as const) {
      if (/^(100644|100755|120000)$/.test(mode) && !/^0+$/.test(id) && !pathById.has(id)) pathById.set(id, parts[i + 1]!);
    }
  }
  let largest = 0;
  for (const o of await sizes(qrepo, [...pathById.keys()], limits, timeoutMs)) {
    if (o.size > maxObjectBytes) {
      throw overObjectCap(`the diff would read ${o.type} ${o.id} at ${JSON.stringify(pathById.get(o.id))}`, o, maxObjectBytes);
    }
    largest = Math.max(largest, o.size);
  }
  return { blobs: pathById.size, largestBytes: largest };
}
