// The folder of persisted terminal logs: per session `<id>.log` (rotated to
// `<id>.log.1`) and `<id>.json` with its metadata. Read back at start-up with a
// schema (disk is not trusted blindly), pruned by age, removed with their task.
// Writing is SessionLog's job; everything here runs once per session or once at
// start-up, never per output batch.
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { z } from 'zod';
import { TerminalInfo } from '../../common/domain.js';
import { utf8BoundaryFrom } from './flow-control.js';
import { readFileTail } from '../state/file-tail.js';

export const SESSION_ID_RE = /^[A-Za-z0-9._-]{1,128}$/;
const DAY_MS = 24 * 60 * 60 * 1000;

/** What a session's `.json` file next to its log holds. */
export const PersistedMeta = z.object({
  version: z.literal(1),
  info: TerminalInfo,
  createdAt: z.number(),
  /** When the session ended (absent while live, and in files written before it existed). */
  endedAt: z.number().optional(),
  /** Why the log on disk is incomplete, when it is. */
  logError: z.string().max(2000).optional(),
});
export type PersistedMeta = z.infer<typeof PersistedMeta>;

export interface RestoreResult {
  sessions: PersistedMeta[];
  /** Session ids whose files were deleted for being older than the retention. */
  pruned: string[];
  warnings: string[];
}

export class LogStore {
  constructor(readonly dir: string) {}

  logPath(id: string): string {
    return path.join(this.dir, `${id}.log`);
  }
  metaPath(id: string): string {
    return path.join(this.dir, `${id}.json`);
  }
  /** Every file a session may have on disk. */
  filesOf(id: string): string[] {
    const log = this.logPath(id);
    const meta = this.metaPath(id);
    return [log, `${log}.1`, meta, `${meta}.tmp`];
  }

  /**
   * Reads every session's metadata, marks sessions still 'live' on disk as lost
   * (their process ended without closing them), and deletes the files of
   * sessions whose last activity is older than `retentionDays` (0 keeps all),
   * including leftovers without readable metadata, judged by their file time.
   */
  restore(retentionDays: number, now: number): RestoreResult {
    const out: RestoreResult = { sessions: [], pruned: [], warnings: [] };
    let names: string[];
    try {
      names = fs.readdirSync(this.dir);
    } catch (err) {
      out.warnings.push(`terminal logs in ${this.dir} not read: ${(err as Error).message}`);
      return out;
    }
    // Nothing writes yet: a metadata temp file is what a crash or a full disk left mid-write.
    for (const name of names.filter((n) => n.endsWith('.json.tmp') && SESSION_ID_RE.test(n.slice(0, -'.json.tmp'.length)))) {
      try {
        fs.rmSync(path.join(this.dir, name), { force: true });
      } catch (err) {
        out.warnings.push(`half-written terminal log metadata ${name} not removed: ${(err as Error).message}`);
      }
    }
    const cutoff = retentionDays > 0 ? now - retentionDays * DAY_MS : -Infinity;
    const kept = new Set<string>();
    for (const name of names) {
      if (!name.endsWith('.json')) continue;
      const id = name.slice(0, -'.json'.length);
      if (!SESSION_ID_RE.test(id)) continue;
      let meta: PersistedMeta;
      try {
        meta = PersistedMeta.parse(JSON.parse(fs.readFileSync(path.join(this.dir, name), 'utf8')));
      } catch (err) {
        out.warnings.push(`ignoring unreadable terminal log metadata ${name}: ${(err as Error).message}`);
        continue;
      }
      if (meta.info.id !== id) continue;
      if ((meta.endedAt ?? meta.createdAt) < cutoff) {
        out.pruned.push(id);
        continue;
      }
      kept.add(id);
      if (meta.info.status === 'live') {
        meta = { ...meta, info: { ...meta.info, status: 'lost' } };
        try {
          writeFileAtomicSync(this.metaPath(id), JSON.stringify(meta));
        } catch (err) {
          out.warnings.push(`terminal log status of ${id} not saved: ${(err as Error).message}`);
        }
      }
      out.sessions.push(meta);
    }
    for (const id of out.pruned) this.removeSync(id, out.warnings);
    if (retentionDays > 0) this.pruneLeftovers(names, kept, cutoff, out);
    out.sessions.sort((a, b) => a.createdAt - b.createdAt);
    return out;
  }

  async remove(id: string): Promise<void> {
    await Promise.all(this.filesOf(id).map((f) => fsp.rm(f, { force: true })));
  }

  /** Last maxBytes of a session's log (spanning the rotated file when the current one is short). */
  readTail(id: string, maxBytes: number): Buffer {
    const parts: Buffer[] = [];
    let need = maxBytes;
    for (const file of [this.logPath(id), `${this.logPath(id)}.1`]) {
      if (need <= 0) break;
      const part = readFileTail(file, need);
      parts.unshift(part);
      need -= part.length;
    }
    const all = Buffer.concat(parts);
    return all.subarray(utf8BoundaryFrom(all, 0));
  }

  private removeSync(id: string, warnings: string[]): void {
    for (const f of this.filesOf(id)) {
      try {
        fs.rmSync(f, { force: true });
      } catch (err) {
        warnings.push(`old terminal log ${path.basename(f)} not removed: ${(err as Error).message}`);
      }
    }
  }

  /** Our files (by name) that belong to no kept session, e.g. a log whose metadata was never written. */
  private pruneLeftovers(names: string[], kept: Set<string>, cutoff: number, out: RestoreResult): void {
    for (const name of names) {
      const m = /^(.+?)\.(log|log\.1|json|json\.tmp)$/.exec(name);
      if (!m || !SESSION_ID_RE.test(m[1]!) || kept.has(m[1]!)) continue;
      const file = path.join(this.dir, name);
      try {
        const st = fs.lstatSync(file);
        if (st.isFile() && st.mtimeMs < cutoff) fs.rmSync(file, { force: true });
      } catch (err) {
        // Gone already (removed with its pruned session above) is what we wanted.
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') out.warnings.push(`old terminal log ${name} not removed: ${(err as Error).message}`);
      }
    }
  }
}

function writeFileAtomicSync(file: string, data: string): void {
  const tmp = `${file}.tmp`;
  try {
    fs.writeFileSync(tmp, data, { mode: 0o600 });
    fs.renameSync(tmp, file);
  } catch (err) {
    // A full disk fails mid-write: no partial temp file is left beside the old metadata.
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

