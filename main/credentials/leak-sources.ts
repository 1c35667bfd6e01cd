// Places outside the VM where its output ends up and a credential could hide:
// the terminal logs the host keeps of its stages and shells, and the work it
// returned (the quarantine: the objects indexed from its bundle, decompressed
// by git, and the packed bundle itself).
import type { Stats } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { runGit } from '../git/host-git.js';
import { NeedleMatcher, type LeakNeedle } from './leak-needles.js';
import { bufferReader, scanFile, scanReader, type ScanLimits, type SourceScan } from './leak-scan.js';

const TerminalMeta = z.object({
  version: z.literal(1),
  info: z.object({ id: z.string().regex(/^[A-Za-z0-9._-]{1,128}$/), taskId: z.string().optional(), kind: z.string() }),
});

/**
 * A folder's names, or a path's stat; none when the path does not exist (nothing
 * was ever written there). Any other failure is thrown: a source that cannot be
 * read must not pass for an absent one, or the leak check would call it clean.
 */
async function ifPresent<T>(read: () => Promise<T>, absent: T): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return absent;
    throw err;
  }
}

const readdirIfPresent = (dir: string) => ifPresent(() => readdir(dir), [] as string[]);
export const statIfPresent = (file: string) => ifPresent<Stats | null>(() => stat(file), null);

export async function taskTerminalLogs(logDir: string, taskId: string): Promise<string[]> {
  const names = await readdirIfPresent(logDir);
  const out: string[] = [];
  for (const name of names.filter((n) => n.endsWith('.json')).sort()) {
    let sessionId = name.slice(0, -'.json'.length);
    try {
      const meta = TerminalMeta.parse(JSON.parse(await readFile(path.join(logDir, name), 'utf8')));
      if (meta.info.taskId !== taskId || meta.info.kind === 'host') continue;
      sessionId = meta.info.id;
    } catch {
      // Unreadable metadata cannot say whose log it is: scan it too, rather than let
      // a log that may be this task's pass unread under a clean verdict.
    }
    if (!/^[A-Za-z0-9._-]+$/.test(sessionId) || sessionId.startsWith('.')) continue;
    for (const f of [`${sessionId}.log.1`, `${sessionId}.log`]) {
      if ((await statIfPresent(path.join(logDir, f)))?.isFile()) out.push(path.join(logDir, f));
    }
  }
  return out;
}

export interface ReturnedWorkLimits {
  /** Objects larger than this are not read (reported, so the verdict is incomplete). */
  maxObjectBytes: number;
  /** Bytes of object content per `git cat-file --batch` call. */
  batchBytes: number;
  /** Object bytes read in all (deltas can make a small bundle expand without end); the rest is reported. */
  maxObjectTotalBytes: number;
}

const DEFAULT_RETURNED_LIMITS: ReturnedWorkLimits = { maxObjectBytes: 64 * 1024 * 1024, batchBytes: 32 * 1024 * 1024, maxObjectTotalBytes: 2 * 1024 * 1024 * 1024 };

type Hit = SourceScan['hits'][number];

/** Object ids stored in the quarantine repository itself (its packs and loose objects, not the host's). */
async function ownObjectIds(repo: string): Promise<string[]> {
  const ids = new Set<string>();
  const packDir = path.join(repo, 'objects', 'pack');
  for (const idx of (await readdirIfPresent(packDir)).filter((n) => n.endsWith('.idx'))) {
    const r = await runGit(['show-index'], { cwd: repo, env: { GIT_DIR: repo }, input: await readFile(path.join(packDir, idx)) });
    if (r.code !== 0) throw new Error(`git show-index ${idx} failed: ${r.stderr.trim().slice(0, 200)}`);
    for (const line of r.stdout.split('\n')) {
      const id = line.split(' ')[1];
      if (id && /^[0-9a-f]{40,64}$/.test(id)) ids.add(id);
    }
  }
  for (const dir of await readdirIfPresent(path.join(repo, 'objects'))) {
    if (!/^[0-9a-f]{2}$/.test(dir)) continue;
    for (const rest of await readdirIfPresent(path.join(repo, 'objects', dir))) {
      if (/^[0-9a-f]{38,62}$/.test(rest)) ids.add(dir + rest);
    }
  }
  return [...ids];
}

/**
 * Scans the returned work in a task's quarantine folder: every object of the
 * quarantine repository decompressed by git (deltas resolved; blobs scanned
 * with the same decoders and one more level of inflation), and the packed
 * bundle as it came (zlib streams of its objects inflated). Never throws for
 * what it finds; an object it could not read makes `error` say so.
 */
export async function scanReturnedWork(dir: string, needles: LeakNeedle[], limits: Partial<ScanLimits & ReturnedWorkLimits> = {}): Promise<SourceScan & { note?: string }> {
  const lim = { ...DEFAULT_RETURNED_LIMITS, ...limits };
  const repo = path.join(dir, 'repo.git');
  const bundle = path.join(dir, 'result.bundle');
  const hasRepo = (await statIfPresent(path.join(repo, 'objects')))?.isDirectory() ?? false;
  const hasBundle = (await statIfPresent(bundle))?.isFile() ?? false;
  if (!hasRepo && !hasBundle) {
    return { bytes: 0, hits: [], note: 'no returned work in quarantine (nothing came back yet, or it was approved or rejected)' };
  }
  const hits: Hit[] = [];
  const errors: string[] = [];
  let bytes = 0;
  let inflated = { streams: 0, bytes: 0 };
  const notInflated: NonNullable<SourceScan['notInflated']> = [];
  let notInflatedCount = 0;
  const take = (r: SourceScan, detail: (h: Hit) => string) => {
    bytes += r.bytes;
    hits.push(...r.hits.map((h) => ({ ...h, detail: detail(h) })));
    inflated = { streams: inflated.streams + (r.inflated?.streams ?? 0), bytes: inflated.bytes + (r.inflated?.bytes ?? 0) };
    notInflated.push(...(r.notInflated ?? []).slice(0, Math.max(0, 20 - notInflated.length)));
    notInflatedCount += r.notInflatedCount ?? 0;
    if (r.error) errors.push(r.error);
  };

  if (hasRepo) {
    const env = { GIT_DIR: repo };
    const matcher = new NeedleMatcher(needles);
    const ids = await ownObjectIds(repo);
    const check = await runGit(['cat-file', '--batch-check=%(objectname) %(objecttype) %(objectsize)'], { cwd: repo, env, input: ids.join('\n') + '\n' });
    if (check.code !== 0) errors.push(`git cat-file --batch-check failed: ${check.stderr.trim().slice(0, 200)}`);
    const objects: Array<{ id: string; type: string; size: number }> = [];
    let planned = 0;
    let overTotal = 0;
    for (const line of check.stdout.split('\n')) {
      const m = /^([0-9a-f]{40,64}) (\w+) (\d+)$/.exec(line);
      if (!m) continue;
      const size = Number(m[3]);
      if (size > lim.maxObjectBytes) errors.push(`object ${m[1]} (${m[2]}, ${size} bytes) not read: over the ${lim.maxObjectBytes} byte cap`);
      else if (planned + size > lim.maxObjectTotalBytes) overTotal++;
      else {
        planned += size;
        objects.push({ id: m[1]!, type: m[2]!, size });
      }
    }
    if (overTotal) errors.push(`${overTotal} object(s) not read: ${lim.maxObjectTotalBytes} bytes of objects already read (cap)`);
    for (let i = 0; i < objects.length; ) {
      const batch = [objects[i++]!];
      let total = batch[0]!.size;
      while (i < objects.length && total + objects[i]!.size <= lim.batchBytes) total += objects[i]!.size, batch.push(objects[i++]!);
      const r = await runGit(['cat-file', '--batch'], {
        cwd: repo,
        env,
        input: batch.map((o) => o.id).join('\n') + '\n',
        maxStdoutBytes: total + batch.length * 100 + 1024,
      });
      if (r.code !== 0 || r.truncated) {
        errors.push(`git cat-file --batch failed for ${batch.length} object(s): ${r.stderr.trim().slice(0, 200) || 'output cut'}`);
        continue;
      }
      const out = r.stdoutBuffer;
      let p = 0;
      for (const o of batch) {
        const nl = out.indexOf(0x0a, p);
        const header = out.subarray(p, nl).toString('latin1');
        if (nl < 0 || !header.startsWith(`${o.id} ${o.type} ${o.size}`)) {
          errors.push(`git cat-file --batch answered out of step at object ${o.id}`);
          break;
        }
        const content = out.subarray(nl + 1, nl + 1 + o.size);
        p = nl + 1 + o.size + 1;
        take(await scanReader(bufferReader(content), matcher, limits, { size: content.length }), (h) => `object ${o.id} (${o.type}), byte ${h.offset}${h.detail ? `, ${h.detail}` : ''}`);
      }
    }
  }
  if (hasBundle) take(await scanFile(bundle, needles, limits), (h) => `packed bundle${h.detail ? `, ${h.detail}` : ''}`);
  return {
    bytes,
    hits,
    inflated,
    ...(notInflatedCount ? { notInflated, notInflatedCount } : {}),
    ...(errors.length ? { error: errors.slice(0, 5).join('; ') + (errors.length > 5 ? `; and ${errors.length - 5} more` : '') } : {}),
  };
}
