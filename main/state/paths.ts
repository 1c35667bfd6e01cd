// One place that decides where the app keeps things on the user's machine, the
// same under Electron and the web host. Tests and CI point them elsewhere with
// FACTORY_DATA_DIR / FACTORY_CACHE_DIR.
import envPaths from 'env-paths';
import path from 'node:path';

export interface AppPaths {
  /** Settings, state, one folder per sandbox. */
  data: string;
  /** Built base images, one folder per image version; read-only once built. */
  cache: string;
  sandboxes: string;
  images: string;
  /** Booted-VM snapshots for fast sandbox starts, derived from the images. */
  snapshots: string;
  state: string;
  logs: string;
}

export function appPaths(env: NodeJS.ProcessEnv = process.env): AppPaths {
  const defaults = envPaths('factory-in-a-box', { suffix: '' });
  const data = env.FACTORY_DATA_DIR ? path.resolve(env.FACTORY_DATA_DIR) : defaults.data;
  const cache = env.FACTORY_CACHE_DIR ? path.resolve(env.FACTORY_CACHE_DIR) : defaults.cache;
  return {
    data,
    cache,
    sandboxes: path.join(data, 'sandboxes'),
    images: path.join(cache, 'images'),
    snapshots: path.join(cache, 'snapshots'),
    state: path.join(data, 'state'),
    logs: path.join(data, 'logs'),
  };
}
