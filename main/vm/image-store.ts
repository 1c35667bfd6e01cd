// Base images on the user's machine: imagesDir/<version>/ with manifest.json,
// vmlinuz, initrd.img and disk.qcow2, read-only once built. A build goes to a
// temporary folder next to it and is renamed into place, so a half-built image
// is never seen; a lock file keeps two processes from building it twice.
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { ImageStatus } from '../../common/domain.js';
import { ImageBuilder, type BuildProgress } from './image-builder.js';
import { parseManifest, type ImageManifest } from './image-manifest.js';
import { findRecipeDir, loadRecipe, type LoadedRecipe } from './image-recipe.js';
import { lockUnlessReady, processAlive } from './file-lock.js';
import { stderrLogger, type Logger } from '../log/logger.js';

export interface BaseImage {
  version: string;
  dir: string;
  disk: string;
  kernel: string;
  initrd: string;
  /** Kernel command line the image was built for. */
  cmdline: string;
  manifest: ImageManifest;
}

export interface ImageStoreOptions {
  imagesDir: string;
  /** vm-images/<name> folder; found next to the app by default. */
  recipeDir?: string;
  builder?: { build(recipe: LoadedRecipe, outDir: string, onProgress: (p: BuildProgress) => void): Promise<ImageManifest> };
  /** How often a waiting process checks another process's build. */
  lockPollMs?: number;
  /** The app log; stderr for warnings when absent (the image CLI). */
  log?: Logger;
}

export class ImageStore {
  private readonly imagesDir: string;
  private readonly recipe: LoadedRecipe;
  private readonly builder: NonNullable<ImageStoreOptions['builder']>;
  private readonly lockPollMs: number;
  private readonly log: Logger;
  private building: Promise<BaseImage> | undefined;
  private current: ImageStatus;

  constructor(opts: ImageStoreOptions) {
    this.imagesDir = path.resolve(opts.imagesDir);
    this.recipe = loadRecipe(opts.recipeDir ?? findRecipeDir());
    this.builder = opts.builder ?? new ImageBuilder();
    this.lockPollMs = opts.lockPollMs ?? 2000;
    this.log = opts.log ?? stderrLogger('images');
    this.current = { state: 'missing', version: this.recipe.version };
  }

  get version(): string {
    return this.recipe.version;
  }

  get imageDir(): string {
    return path.join(this.imagesDir, this.recipe.version);
  }

  status(): ImageStatus {
    if (this.current.state === 'building' || this.current.state === 'failed') return { ...this.current };
    if (existsSync(path.join(this.imageDir, 'manifest.json'))) return { state: 'ready', version: this.version, progress: 1 };
    return { state: 'missing', version: this.version };
  }

  /** The ready image, building it first if needed. Concurrent calls share one build. */
  ensure(onProgress?: (s: ImageStatus) => void): Promise<BaseImage> {
    const ready = this.tryLoad();
    if (ready) return Promise.resolve(ready);
    if (!this.building) {
      this.building = this.buildLocked(onProgress).finally(() => {
        this.building = undefined;
      });
    } else if (onProgress) {
      onProgress(this.status());
    }
    return this.building;
  }

  private emit(status: ImageStatus, onProgress?: (s: ImageStatus) => void) {
    this.current = status;
    onProgress?.({ ...status });
  }

  private tryLoad(): BaseImage | undefined {
    const dir = this.imageDir;
    const manifestFile = path.join(dir, 'manifest.json');
    if (!existsSync(manifestFile)) return undefined;
    const manifest = parseManifest(JSON.parse(readFileSync(manifestFile, 'utf8')), manifestFile);
    if (manifest.version !== this.version) throw new Error(`${manifestFile}: version ${manifest.version} does not match folder ${this.version}`);
    return {
      version: manifest.version,
      dir,
      disk: path.join(dir, manifest.files.disk.name),
      kernel: path.join(dir, manifest.files.kernel.name),
      initrd: path.join(dir, manifest.files.initrd.name),
      cmdline: manifest.kernelCmdline,
      manifest,
    };
  }

  private async buildLocked(onProgress?: (s: ImageStatus) => void): Promise<BaseImage> {
    await mkdir(this.imagesDir, { recursive: true });
    const lockFile = path.join(this.imagesDir, `.${this.version}.lock`);
    this.emit({ state: 'building', version: this.version, progress: 0, step: 'starting' }, onProgress);
    try {
      // Wait for another process's build, or take the lock ourselves.
      const built = await lockUnlessReady(lockFile, () => this.tryLoad(), this.lockPollMs, () =>
        this.emit({ state: 'building', version: this.version, progress: 0, step: 'waiting for another process building this image' }, onProgress),
      );
      if (built) {
        this.emit({ state: 'ready', version: this.version, progress: 1 }, onProgress);
        return built;
      }
      try {
        await this.cleanStaleBuilds();
        const tmp = path.join(this.imagesDir, `.build-${this.version}-${process.pid}-${Date.now()}`);
        try {
          await this.builder.build(this.recipe, tmp, (p) =>
            this.emit({ state: 'building', version: this.version, progress: Math.min(0.99, p.progress), step: p.step }, onProgress),
          );
          await makeReadOnly(tmp);
          await rename(tmp, this.imageDir);
          await this.pruneOtherVersions();
        } catch (err) {
          // The build's error is the one to report; a folder left here is removed as stale by the next build.
          await rm(tmp, { recursive: true, force: true }).catch((e: unknown) => this.log.warn('removing a failed image build failed', { dir: tmp, err: e }));
          throw err;
        }
      } finally {
        await rm(lockFile, { force: true });
      }
      const image = this.tryLoad();
      if (!image) throw new Error(`image ${this.version} was built but its manifest is missing`);
      this.emit({ state: 'ready', version: this.version, progress: 1 }, onProgress);
      return image;
    } catch (err) {
      this.emit({ state: 'failed', version: this.version, error: (err as Error).message }, onProgress);
      throw err;
    }
  }

  /**
   * Removes older builds of this recipe once a new one is in place. A running
   * QEMU keeps its open base file, so sandboxes already running are unharmed.
   */
  private async pruneOtherVersions() {
    const prefix = `${this.recipe.recipe.name}-r`;
    for (const name of await readdir(this.imagesDir)) {
      if (!name.startsWith(prefix) || name === this.version) continue;
      const dir = path.join(this.imagesDir, name);
      // The new image is in place; an old one that stays only takes disk space, and the next build tries again.
      await chmod(dir, 0o755).catch(() => undefined); // the rm below reports the failure that matters
      await rm(dir, { recursive: true, force: true }).catch((err: unknown) => this.log.warn('removing an old image version failed', { dir, err }));
    }
  }

  /** Removes leftovers of builds whose process is gone. */
  private async cleanStaleBuilds() {
    for (const name of await readdir(this.imagesDir)) {
      const m = /^\.build-.*-(\d+)-\d+$/.exec(name);
      if (m && !processAlive(Number(m[1]))) await rm(path.join(this.imagesDir, name), { recursive: true, force: true });
    }
  }
}



async function makeReadOnly(dir: string) {
  for (const name of await readdir(dir)) {
    const full = path.join(dir, name);
    const st = await stat(full);
    if (st.isDirectory()) await makeReadOnly(full);
    else await chmod(full, 0o444);
  }
  await chmod(dir, 0o555);
}
