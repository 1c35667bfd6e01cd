// The sandbox base image for tests: built once into the image cache
// (FACTORY_CACHE_DIR when set, so test runs share it) and reused after.
import { appPaths } from '../../main/state/paths.js';
import { ImageStore, type BaseImage } from '../../main/vm/image-store.js';

let pending: Promise<BaseImage> | undefined;

export function testImage(): Promise<BaseImage> {
  pending ??= new ImageStore({ imagesDir: appPaths().images }).ensure((s) => {
    if (s.state === 'building' && s.step) process.stderr.write(`[image ${Math.round((s.progress ?? 0) * 100)}%] ${s.step}\n`);
  });
  return pending;
}
