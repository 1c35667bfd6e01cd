// Environment layers: the disk of a sandbox after its setup ran, kept read-only
// so the next task on the same repository (same cache key) boots on it:
// base image ← layer ← task overlay. One folder per layer under the root:
// disk.qcow2 (0444) and layer.json, the json written last. A commit builds the
// folder under a dot-name and renames it into place, so a crash leaves nothing
// that find() returns. A layer is only handed out when its disk is still a
// read-only qcow2 whose backing file is the expected base image.
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { chmod, copyFile, link, lstat, mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { jsonOrUndefined } from '../../common/json.js';
import { writeFileAtomic } from '../state/state-store.js';
import { runCommand } from './process-runner.js';
import { warmFileList, warmProblem, type WarmMemory } from './warm-state.js';
import { warmRamFiles } from './warm-ram.js';

export const LayerMeta = z.strictObject({
  id: z.string().regex(/^[a-z0-9-]{1,64}$/),
  key: z.string().regex(/^[A-Za-z0-9_-]{1,128}$/),
  /** The repository as shown to the user (its path on the host). */
  repo: z.string().max(4096),
  imageVersion: z.string().min(1).max(200),
  createdAt: z.iso.datetime(),
  lastUsedAt: z.iso.datetime(),
  /** Real bytes on disk (allocated blocks), not the qcow2 virtual size. */
  sizeBytes: z.number().int().nonnegative(),
  summary: z.array(z.string().max(500)).max(200),
  /** The commit whose setup made the layer and its tree: the key covers the tree, so only that tree gets the layer. */
  made: z.strictObject({ commit: z.string().regex(/^[0-9a-f]{40,64}$/), tree: z.string().regex(/^[0-9a-f]{40,64}$/) }).optional(),
  /** The guest's memory was saved with the disk (files under warm/) on this machine (machineKey). */
  memory: z.strictObject({ machineKey: z.string().regex(/^[0-9a-f]{16}$/) }).optional(),
});
export type LayerMeta = z.infer<typeof LayerMeta>;

export interface Layer extends LayerMeta {
  dir: string;
  disk: string;
}

/** A layer as find() hands it out: with its memory state only when all of its files are there. */
export interface FoundLayer extends Layer {
  warm?: WarmMemory;
}

/** A folder under the root that is not a usable layer (reported, removable with remove(id)). */
export interface BrokenLayer {
  id: string;
  reason: string;
}

export interface LayerStoreOptions {
  /** The folder of the layers (the app passes <cache>/layers). */
  root: string;
  /** The base image disk a layer of this image version must be backed by. */
  baseDisk: (imageVersion: string) => string | Promise<string>;
  qemuImg?: string;
  /** Told why a layer was not handed out or a folder is not a layer. */
  onRefused?: (id: string, reason: string) => void;
  now?: () => Date;
}

const DISK = 'disk.qcow2';
const META = 'layer.json';
const WARM = 'warm';
const ID_PATTERN = /^[a-z0-9-]{1,64}$/;

export class LayerStore {
  private readonly root: string;
  private readonly inUse = new Map<string, number>();
  private readonly now: () => Date;

  constructor(private readonly opts: LayerStoreOptions) {
    this.root = path.resolve(opts.root);
    this.now = opts.now ?? (() => new Date());
  }

  /**
   * Takes the frozen disk of a sandbox into a new layer: hard link when on the
   * same filesystem, else a copy; fsync; 0444; layer.json last; then the
   * folder is renamed into place. Older layers of the same key not in use go.
   */
  async commit(input: { key: string; repo: string; imageVersion: string; summary: string[]; frozenDisk: string; memory?: WarmMemory; made?: { commit: string; tree: string } }): Promise<Layer> {
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    const id = `${this.now().getTime().toString(36)}-${randomBytes(6).toString('hex')}`;
    const tmp = path.join(this.root, `.tmp-${id}`);
    const final = path.join(this.root, id);
    const source = await lstat(input.frozenDisk).catch(() => undefined);
    if (!source?.isFile()) throw new Error(`the frozen disk ${input.frozenDisk} is not a regular file`);
    try {
      await mkdir(tmp, { mode: 0o700 });
      const disk = path.join(tmp, DISK);
      try {
        await link(input.frozenDisk, disk);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
        await copyFile(input.frozenDisk, disk, constants.COPYFILE_EXCL);
      }
      await fsyncFile(disk);
      await chmod(disk, 0o444);
      // Memory that cannot be kept leaves a layer that boots cold, as one committed without it.
      const warm = input.memory ? await takeWarm(input.memory.dir, path.join(tmp, WARM)).then(() => true, (err: Error) => {
        this.opts.onRefused?.(id, err.message);
        return false;
      }) : false;
      if (!warm) await rm(path.join(tmp, WARM), { recursive: true, force: true });
      const at = this.now().toISOString();
      const meta = LayerMeta.parse({
        id,
        key: input.key,
        repo: input.repo,
        imageVersion: input.imageVersion,
        createdAt: at,
        lastUsedAt: at,
        sizeBytes: await layerBytes(tmp),
        // Lines come from the repository's config: shown, never trusted to be short or printable.
        summary: input.summary.slice(0, 200).map((line) => line.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ').slice(0, 500)),
        ...(input.made ? { made: { commit: input.made.commit, tree: input.made.tree } } : {}),
        ...(warm && input.memory ? { memory: { machineKey: input.memory.machineKey } } : {}),
      });
      // Checked before it can be found: a disk on another base is never a layer.
      const problem = (await this.checkDisk(disk, meta)) ?? (await this.checkConsistent(disk));
      if (problem) throw new Error(`the frozen disk cannot be a layer: ${problem}`);
      await writeFileAtomic(path.join(tmp, META), JSON.stringify(meta, null, 2) + '\n');
      await fsyncDir(tmp);
      await rename(tmp, final);
      await fsyncDir(this.root);
      for (const other of (await this.list()).layers) if (other.key === input.key && other.id !== id) await this.remove(other.id).catch(() => {}); // find() takes the newest; evict() removes an older one left here
      return { ...meta, dir: final, disk: path.join(final, DISK), ...(warm && input.memory ? { warm: { dir: path.join(final, WARM), machineKey: input.memory.machineKey, shared: true } } : {}) };
    } catch (err) {
      await chmod(path.join(tmp, DISK), 0o644).catch(() => {}); // lets the rm below delete the read-only disk; err is what matters
      await rm(tmp, { recursive: true, force: true });
      throw err;
    }
  }

  /** The newest sound layer for key, its last use set to now; undefined (and reported) when none can be used. */
  async find(key: string): Promise<FoundLayer | undefined> {
    const candidates = (await this.list()).layers.filter((l) => l.key === key).sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    for (const layer of candidates) {
      const problem = await this.checkDisk(layer.disk, layer);
      if (problem) {
        this.opts.onRefused?.(layer.id, problem);
        continue;
      }
      const touched: LayerMeta = { ...stripPaths(layer), lastUsedAt: this.now().toISOString() };
      await writeFileAtomic(path.join(layer.dir, META), JSON.stringify(touched, null, 2) + '\n');
      // A layer whose memory files are gone or damaged still boots (cold) on its disk.
      const warmDir = path.join(layer.dir, WARM);
      const memoryProblem = layer.memory ? await warmProblem(warmDir) : 'no memory state';
      if (layer.memory && memoryProblem) this.opts.onRefused?.(layer.id, `its memory state is not used: ${memoryProblem}`);
      const warm = layer.memory && !memoryProblem ? { warm: { dir: warmDir, machineKey: layer.memory.machineKey, shared: true } } : {};
      return { ...touched, dir: layer.dir, disk: layer.disk, ...warm };
    }
    return undefined;
  }

  /** Every layer (by last use, newest first) and every folder that is not one, with why. */
  async list(): Promise<{ layers: Layer[]; broken: BrokenLayer[] }> {
    const names = await readdir(this.root).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [] as string[];
      throw err;
    });
    const layers: Layer[] = [];
    const broken: BrokenLayer[] = [];
    for (const name of names) {
      if (name.startsWith('.')) continue; // commits in progress (or left by a crash)
      const dir = path.join(this.root, name);
      const result = await readLayer(dir, name);
      if ('reason' in result) {
        broken.push({ id: name, reason: result.reason });
        this.opts.onRefused?.(name, result.reason);
      } else layers.push(result);
    }
    layers.sort((a, b) => b.lastUsedAt.localeCompare(a.lastUsedAt));
    return { layers, broken };
  }

  /** Marks a layer as used by a running sandbox until the returned function is called. */
  acquire(id: string): () => void {
    checkId(id);
    this.inUse.set(id, (this.inUse.get(id) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = (this.inUse.get(id) ?? 1) - 1;
      if (n > 0) this.inUse.set(id, n);
      else this.inUse.delete(id);
    };
  }

  /** Whether a running sandbox holds the layer. */
  isInUse(id: string): boolean {
    return this.inUse.has(id);
  }

  /** Deletes a layer (or a broken folder). Refuses one in use and any id that is not a plain layer name. */
  async remove(id: string): Promise<void> {
    checkId(id);
    if (this.inUse.has(id)) throw new Error(`layer ${id} is in use by a running sandbox`);
    const dir = path.join(this.root, id);
    const st = await lstat(dir).catch(() => undefined);
    if (!st) return;
    if (!st.isDirectory()) throw new Error(`layer ${id} is not a folder`);
    // The json goes first: a half-removed folder is then broken, never found.
    await rm(path.join(dir, META), { force: true });
    await rm(dir, { recursive: true, force: true });
  }

  /**
   * Removes least recently used layers (broken folders first) until the total
   * is within budgetBytes; never one in use or `keep`. Returns the removed ids.
   */
  async evict(budgetBytes: number, keep?: string): Promise<string[]> {
    if (!Number.isFinite(budgetBytes) || budgetBytes < 0) throw new Error(`layer budget ${budgetBytes} is not a byte count`);
    const removed: string[] = [];
    await this.removeStaleCommits();
    const { layers, broken } = await this.list();
    for (const b of broken) {
      if (this.inUse.has(b.id) || b.id === keep) continue;
      await this.remove(b.id);
      removed.push(b.id);
    }
    // A layer removed meanwhile (another app instance) takes no space.
    const sized = await Promise.all(layers.map(async (l) => ({ id: l.id, lastUsedAt: l.lastUsedAt, bytes: await layerBytes(l.dir).catch(() => 0) })));
    let total = sized.reduce((sum, l) => sum + l.bytes, 0);
    for (const l of sized.sort((a, b) => a.lastUsedAt.localeCompare(b.lastUsedAt))) {
      if (total <= budgetBytes) break;
      if (this.inUse.has(l.id) || l.id === keep) continue;
      await this.remove(l.id);
      removed.push(l.id);
      total -= l.bytes;
    }
    return removed;
  }

  /** Commit folders left by a crash (older than an hour: no commit takes that long). */
  private async removeStaleCommits(): Promise<void> {
    for (const name of await readdir(this.root).catch(() => [] as string[])) {
      if (!name.startsWith('.tmp-')) continue;
      const st = await lstat(path.join(this.root, name)).catch(() => undefined);
      if (st && this.now().getTime() - st.mtimeMs > 3_600_000) await rm(path.join(this.root, name), { recursive: true, force: true });
    }
  }

  /** qemu-img check: 0 is clean, 3 only leaked clusters (space, no harm); anything else is not a whole disk. */
  private async checkConsistent(disk: string): Promise<string | undefined> {
    const r = await runCommand(this.opts.qemuImg ?? 'qemu-img', ['check', '-q', '-f', 'qcow2', disk], { timeoutMs: 300_000 });
    if (r.code === 0 || r.code === 3) return undefined;
    return `qemu-img check found it damaged (exit ${r.code}): ${r.tail.filter(Boolean).slice(0, 3).join(' / ')}`;
  }

  /** Why the disk cannot be used as this layer, or undefined when it can. */
  private async checkDisk(disk: string, meta: Pick<LayerMeta, 'imageVersion'>): Promise<string | undefined> {
    const st = await lstat(disk).catch(() => undefined);
    if (!st?.isFile()) return `${DISK} is missing or not a regular file`;
    if ((st.mode & 0o222) !== 0) return `${DISK} is writable (mode ${(st.mode & 0o777).toString(8)}), so it may have changed`;
    const expected = path.resolve(await this.opts.baseDisk(meta.imageVersion));
    // No -U: a process holding the disk open for writing makes this fail, which is a refusal too.
    const r = await runCommand(this.opts.qemuImg ?? 'qemu-img', ['info', '--output=json', disk], { timeoutMs: 30_000 });
    if (r.code !== 0) return `qemu-img info failed: ${r.tail.slice(-3).join(' / ')}`;
    const info = QemuImgInfo.safeParse(jsonOrUndefined(r.stdout));
    if (!info.success) return 'qemu-img info gave an unexpected answer';
    const i = info.data;
    if (i.format !== 'qcow2') return `${DISK} is ${i.format}, not qcow2`;
    if (i['format-specific']?.data?.['data-file'] !== undefined) return `${DISK} keeps its data in another file`;
    if (i['format-specific']?.data?.corrupt === true) return `${DISK} is marked corrupt by QEMU`;
    const backing = i['full-backing-filename'] ?? i['backing-filename'];
    if (!backing) return `${DISK} has no backing file (expected the base image ${expected})`;
    if (path.resolve(backing) !== expected) return `${DISK} is backed by ${backing}, not the base image ${expected}`;
    if (i['backing-filename-format'] !== 'qcow2') return `${DISK}'s backing file format is ${i['backing-filename-format'] ?? 'not recorded'}, not qcow2`;
    return undefined;
  }
}

const QemuImgInfo = z.object({
  format: z.string(),
  'backing-filename': z.string().optional(),
  'full-backing-filename': z.string().optional(),
  'backing-filename-format': z.string().optional(),
  'format-specific': z.object({ data: z.object({ 'data-file': z.unknown().optional(), corrupt: z.boolean().optional() }).loose().optional() }).loose().optional(),
});


function checkId(id: string): void {
  if (typeof id !== 'string' || !ID_PATTERN.test(id)) throw new Error(`${JSON.stringify(String(id).slice(0, 80))} is not a layer id`);
}

function stripPaths(layer: Layer): LayerMeta {
  const { dir: _dir, disk: _disk, ...meta } = layer;
  return meta;
}

async function readLayer(dir: string, name: string): Promise<Layer | { reason: string }> {
  const st = await lstat(dir).catch(() => undefined);
  if (!st?.isDirectory()) return { reason: 'not a folder' };
  if (!ID_PATTERN.test(name)) return { reason: 'the folder name is not a layer id' };
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(path.join(dir, META), 'utf8'));
  } catch (err) {
    return { reason: (err as NodeJS.ErrnoException).code === 'ENOENT' ? `${META} is missing` : `${META} is unreadable: ${(err as Error).message}` };
  }
  const meta = LayerMeta.safeParse(raw);
  if (!meta.success) return { reason: `${META} is invalid: ${meta.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}` };
  if (meta.data.id !== name) return { reason: `${META} names layer ${meta.data.id}, not its folder ${name}` };
  return { ...meta.data, dir, disk: path.join(dir, DISK) };
}

/** Links (or copies) every file of a warm state folder to, fsynced and read-only. */
async function takeWarm(from: string, to: string): Promise<void> {
  const problem = await warmProblem(from);
  if (problem) throw new Error(`the memory state cannot be kept: ${problem}`);
  for (const rel of warmFileList(from)) {
    const target = path.join(to, rel);
    await mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
    try {
      await link(path.join(from, rel), target);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
      await copyFile(path.join(from, rel), target, constants.COPYFILE_EXCL);
    }
    await fsyncFile(target);
    // Keys stay owner-only; nothing here is written again.
    await chmod(target, 0o400);
  }
  for (const sub of [...new Set(warmFileList(from).map((rel) => path.dirname(path.join(to, rel))))]) await fsyncDir(sub);
}

/** Bytes a layer folder takes: its disk and, when there, its memory state. */
async function layerBytes(dir: string): Promise<number> {
  let total = await diskBytes(path.join(dir, DISK));
  // A layer without saved memory has no warm files: they count nothing.
  for (const rel of warmFileList(path.join(dir, WARM))) total += await diskBytes(path.join(dir, WARM, rel)).catch(() => 0);
  // The RAM file its sandboxes share (warm-ram.ts), once made: as large as the memory in use; not made, nothing.
  for (const file of Object.values(warmRamFiles(path.join(dir, WARM)))) total += await diskBytes(file).catch(() => 0);
  return total;
}

/** Bytes the file really takes on disk (allocated blocks). */
export async function diskBytes(file: string): Promise<number> {
  const st = await stat(file);
  return st.blocks * 512;
}

async function fsyncFile(file: string): Promise<void> {
  const fh = await open(file, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

