// Persistence of tasks, their stage results, decisions and sandbox bookkeeping.
// One JSON file per task under the state dir, written atomically (temp file,
// fsync, rename, fsync of the directory), validated with zod on load. Each write
// keeps the version it replaces as `<id>.json.bak`. A file that fails to parse is
// renamed aside (`*.corrupt-<time>`) and reported, and its backup, when that one
// reads, takes its place: never silently dropped, reset or overwritten.
import fs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { Task } from '../../common/domain.js';

/** What the host remembers about a task beyond what the UI sees. */
export const TaskRecord = z.object({
  version: z.literal(1),
  task: Task,
  /** The sandbox folder (overlay, keys, pidfile) while one exists. */
  sandboxDir: z.string().optional(),
  /** QEMU's pid while the VM runs; used to clean up after a crash of the app. */
  qemuPid: z.number().int().positive().optional(),
  /** Set after a verified pull-back: head commit and bundle digest held in quarantine. */
  pullback: z
    .object({
      headCommit: z.string().regex(/^[0-9a-f]{40,64}$/),
      bundleSha256: z.string().regex(/^[0-9a-f]{64}$/),
      bundleBytes: z.number().int().nonnegative(),
      empty: z.boolean(),
    })
    .optional(),
});
export type TaskRecord = z.infer<typeof TaskRecord>;

export interface StateProblem {
  file: string;
  error: string;
  /** Where the unreadable file was moved so nothing is lost. */
  keptAs?: string;
  /** The backup whose content now stands in for it (the version before the last write). */
  restoredFrom?: string;
}

/** The previous version of a state file, kept by each write. */
export function backupOf(file: string): string {
  return `${file}.bak`;
}

/** Moves an unreadable state file aside under a dated name; undefined when it could not be moved. */
export async function moveAside(file: string): Promise<string | undefined> {
  const keptAs = `${file}.corrupt-${new Date().toISOString().replace(/[:.]/g, '-')}`;
  try {
    await fs.rename(file, keptAs);
    return keptAs;
  } catch {
    return undefined;
  }
}

const MAX_STATE_FILE_BYTES = 8 * 1024 * 1024;
const SAFE_ID = /^[A-Za-z0-9._-]{1,128}$/;

function tempNameFor(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${Date.now()}.${Math.random().toString(36).slice(2)}.tmp`);
}

/**
 * Points `<file>.bak` at the current content of `file` (a hard link, renamed into
 * place, so the backup is whole or the old one; a copy where links are refused).
 */
async function keepBackup(file: string): Promise<void> {
  const tmp = tempNameFor(file);
  try {
    await fs.link(file, tmp);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return; // nothing to keep yet
    try {
      await fs.copyFile(file, tmp);
    } catch {
      await fs.rm(tmp, { force: true });
      return; // a backup is a help, not a condition of the write
    }
  }
  try {
    await fs.rename(tmp, backupOf(file));
  } catch {
    // a backup is a help, not a condition of the write
  } finally {
    // rename(2) between two links of one file does nothing and leaves `tmp`: the case after a
    // crash between this backup and the write's own rename. Gone either way.
    await fs.rm(tmp, { force: true });
  }
}

export async function writeFileAtomic(file: string, data: string | Buffer, opts: { backup?: boolean } = {}): Promise<void> {
  const dir = path.dirname(file);
  await fs.mkdir(dir, { recursive: true });
  const tmp = tempNameFor(file);
  const handle = await fs.open(tmp, 'w', 0o600);
  try {
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (err) {
    // A full disk fails here: the partial temp file goes, the old file stays as it was.
    await fs.rm(tmp, { force: true });
    throw err;
  }
  if (opts.backup) await keepBackup(file);
  try {
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  // The rename is durable only once the directory entry is on disk.
  try {
    const dirHandle = await fs.open(dir, 'r');
    try {
      await dirHandle.sync();
    } finally {
      await dirHandle.close();
    }
  } catch {
    // Some platforms cannot fsync a directory; the rename is still atomic.
  }
}

/** One task record from `file`, checked against its schema, its size cap and its file name. */
async function readRecord(file: string, name: string): Promise<TaskRecord> {
  const stat = await fs.stat(file);
  if (stat.size > MAX_STATE_FILE_BYTES) throw new Error(`file is ${stat.size} bytes, over the ${MAX_STATE_FILE_BYTES} byte cap`);
  const parsed = TaskRecord.safeParse(JSON.parse(await fs.readFile(file, 'utf8')));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${issue?.path.join('.') || 'record'}: ${issue?.message ?? 'invalid'}`);
  }
  if (`${parsed.data.task.id}.json` !== name) throw new Error(`task id ${parsed.data.task.id} does not match the file name`);
  return parsed.data;
}

export class StateStore {
  private readonly tasksDir: string;
  /** Writes to one file are chained so an older snapshot never lands after a newer one. */
  private readonly writeChains = new Map<string, Promise<void>>();
  readonly problems: StateProblem[] = [];

  constructor(opts: { dir: string }) {
    this.tasksDir = path.join(opts.dir, 'tasks');
  }

  /** Loads every task record; unreadable ones are moved aside, replaced by their backup when it reads, and listed in `problems`. */
  async loadTasks(): Promise<TaskRecord[]> {
    await fs.mkdir(this.tasksDir, { recursive: true });
    const all = await fs.readdir(this.tasksDir);
    // A write cut by a crash leaves its temp file; it never became state (the rename did not
    // happen), and at load nothing of this process writes yet (one app per data folder).
    for (const n of all.filter((n) => n.startsWith('.') && n.endsWith('.tmp'))) await fs.rm(path.join(this.tasksDir, n), { force: true });
    const names = all.filter((n) => n.endsWith('.json') && !n.startsWith('.'));
    const records: TaskRecord[] = [];
    for (const name of names.sort()) {
      const file = path.join(this.tasksDir, name);
      try {
        records.push(await readRecord(file, name));
      } catch (err) {
        const problem: StateProblem = { file, error: err instanceof Error ? err.message : String(err) };
        const backup = await readRecord(backupOf(file), name).catch(() => undefined);
        problem.keptAs = await moveAside(file);
        if (backup && problem.keptAs) {
          // The backup becomes the record again (written back, so the next write keeps it as its backup).
          await writeFileAtomic(file, JSON.stringify(backup, null, 2) + '\n');
          problem.restoredFrom = backupOf(file);
          records.push(backup);
        }
        this.problems.push(problem);
      }
    }
    return records;
  }

  saveTask(record: TaskRecord): Promise<void> {
    const id = record.task.id;
    if (!SAFE_ID.test(id)) return Promise.reject(new Error(`unsafe task id ${JSON.stringify(id)}`));
    const data = JSON.stringify(TaskRecord.parse(record), null, 2) + '\n';
    return this.chain(id, () => writeFileAtomic(this.fileFor(id), data, { backup: true }));
  }

  deleteTask(id: string): Promise<void> {
    if (!SAFE_ID.test(id)) return Promise.reject(new Error(`unsafe task id ${JSON.stringify(id)}`));
    const file = this.fileFor(id);
    return this.chain(id, async () => {
      await fs.rm(file, { force: true });
      await fs.rm(backupOf(file), { force: true });
    });
  }

  /** Resolves once every pending write has landed. */
  async flush(): Promise<void> {
    await Promise.allSettled([...this.writeChains.values()]);
  }

  private fileFor(id: string): string {
    return path.join(this.tasksDir, `${id}.json`);
  }

  private chain(id: string, op: () => Promise<void>): Promise<void> {
    const prev = this.writeChains.get(id) ?? Promise.resolve();
    // The earlier write's failure went to its own caller; this write goes ahead regardless.
    const next = prev.catch(() => undefined).then(op);
    this.writeChains.set(id, next);
    // Only the bookkeeping of the chain; the failure itself is the caller's, through `next`.
    void next.finally(() => {
      if (this.writeChains.get(id) === next) this.writeChains.delete(id);
    }).catch(() => undefined);
    return next;
  }
}
