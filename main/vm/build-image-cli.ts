// Builds (or finds) the sandbox base image in the app's image cache, printing
// progress. Used by the test script and `npm start`: npx tsx main/vm/build-image-cli.ts
import { appPaths } from '../state/paths.js';
import { ImageStore, type BaseImage } from './image-store.js';
import { QemuDriver } from './qemu-driver.js';
import { vmSettingsFromEnv } from './vm-settings.js';

/** Also makes the booted snapshot fast starts restore (skip with --no-snapshot). */
async function prepareSnapshot(image: BaseImage) {
  if (process.argv.includes('--no-snapshot')) return;
  const started = Date.now();
  try {
    if (await new QemuDriver(vmSettingsFromEnv(process.env, appPaths())).prepareFastBoot(image)) {
      console.log(`fast-boot snapshot ready (${((Date.now() - started) / 1000).toFixed(0)} s)`);
    }
  } catch (err) {
    // Sandboxes still boot without it, only slower.
    console.log(`fast-boot snapshot not made: ${(err as Error).message.split('\n')[0]}`);
  }
}

async function main() {
  const store = new ImageStore({ imagesDir: appPaths().images });
  const before = store.status();
  if (before.state === 'ready') {
    const image = await store.ensure();
    console.log(`base image ${image.version} ready in ${image.dir}`);
    await prepareSnapshot(image);
    return;
  }
  console.log(`building base image ${store.version} (first use; a few minutes)`);
  let lastStep = '';
  const started = Date.now();
  const image = await store.ensure((s) => {
    if (s.state !== 'building') return;
    const line = `[${String(Math.round((s.progress ?? 0) * 100)).padStart(3)}%] ${s.step ?? ''}`;
    if (s.step !== lastStep) {
      lastStep = s.step ?? '';
      console.log(`${line}  (${((Date.now() - started) / 1000).toFixed(0)} s)`);
    }
  });
  const m = image.manifest;
  console.log(
    `base image ${image.version} ready in ${image.dir} after ${((Date.now() - started) / 1000).toFixed(0)} s: ` +
      `kernel ${m.kernelRelease}, ${m.packages.length} packages, disk ${(m.files.disk.bytes / 1e6).toFixed(0)} MB, ` +
      m.agentClis.map((c) => `${c.name} ${c.version}`).join(', '),
  );
  await prepareSnapshot(image);
}

main().catch((err: Error) => {
  console.error(`error: ${err.message}`);
  process.exit(1);
});
