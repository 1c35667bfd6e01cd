// Booted-VM snapshots for fast sandbox starts: one folder per machine
// configuration (image, QEMU version, accel, memory, CPUs) holding the disk
// overlay and memory state of a guest saved right after it answered SSH, plus
// the template's SSH keys (host-only, 0600). Made once, atomically (temp folder
// + rename), under a lock so concurrent starts share one.
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { lockUnlessReady } from './file-lock.js';

/** What a template was made from, kept in its meta.json. */
export interface TemplateMeta {
  /** The base image disk its overlay is on. */
  baseDisk?: string;
  /** The machine key its memory needs (warm-state.ts machineKey). */
  machine?: string;
  /** What its guest was made to run (warm-state.ts TEMPLATE_VERSION). */
  version?: number;
}

export class SnapshotStore {
  private readonly dir: string;
  private readonly pending = new Map<string, Promise<string>>();

  constructor(opts: { dir: string }) {
    this.dir = path.resolve(opts.dir);
  }

  /** The template folder for key, made by `make(tempDir)` if missing. */
  ensure(key: string, make: (tempDir: string) => Promise<void>, meta: TemplateMeta = {}): Promise<string> {
    const final = path.join(this.dir, key);
    if (existsSync(path.join(final, 'ready'))) return Promise.resolve(final);
    let p = this.pending.get(key);
    if (!p) {
      p = this.create(key, final, make, meta).finally(() => this.pending.delete(key));
      this.pending.set(key, p);
    }
    return p;
  }

  /** Forgets a template that failed to restore (e.g. made by another QEMU). */
  async discard(key: string): Promise<void> {
    await rm(path.join(this.dir, key), { recursive: true, force: true });
  }

  /**
   * Removes templates no start can use any more, each a disk overlay and up to
   * the guest's whole memory: those whose base image is gone (replaced by a
   * newer build), those of this machine made to run an older (or newer)
   * template version, and those from before templates recorded their machine.
   * An app of another version sharing the folder would make its own again.
   */
  private async pruneOrphans(made: TemplateMeta) {
    for (const name of await readdir(this.dir)) {
      if (name.startsWith('.')) continue;
      const meta = await readFile(path.join(this.dir, name, 'meta.json'), 'utf8').then(
        (t) => JSON.parse(t) as TemplateMeta,
        () => undefined,
      );
      // No meta.json: not (yet) a template this store finished; left alone.
      if (!meta) continue;
      const imageGone = !!meta.baseDisk && !existsSync(meta.baseDisk);
      const superseded = made.machine !== undefined && (meta.machine === undefined || (meta.machine === made.machine && meta.version !== made.version));
      if (imageGone || superseded) await rm(path.join(this.dir, name), { recursive: true, force: true });
    }
  }

  private async create(key: string, final: string, make: (tempDir: string) => Promise<void>, meta: TemplateMeta): Promise<string> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const lock = path.join(this.dir, `.${key}.lock`);
    if (await lockUnlessReady(lock, () => (existsSync(path.join(final, 'ready')) ? final : undefined), 500)) return final;
    try {
      await rm(final, { recursive: true, force: true });
      const tmp = path.join(this.dir, `.tmp-${key}-${process.pid}-${Date.now()}`);
      try {
        await mkdir(tmp, { mode: 0o700 });
        await make(tmp);
        await writeFile(path.join(tmp, 'meta.json'), JSON.stringify({ created: new Date().toISOString(), ...meta }) + '\n');
        await writeFile(path.join(tmp, 'ready'), new Date().toISOString() + '\n');
        await rename(tmp, final);
        await this.pruneOrphans(meta);
      } catch (err) {
        await rm(tmp, { recursive: true, force: true });
        throw err;
      }
      return final;
    } finally {
      await rm(lock, { force: true });
    }
  }
}

