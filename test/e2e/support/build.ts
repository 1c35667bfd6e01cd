// The e2e tests drive a built renderer; (re)build it when it is missing or
// older than its sources, so a test never runs against a stale page.
// Two builds: the production one (dist/renderer, what ships and what the
// Electron host loads) and the e2e one (`vite build --mode e2e`, in its own
// folder), which adds the read-only test hook `window.__factoryTerminals`.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { E2E_RENDERER_DIR } from '../../../vite.config.js';

export { E2E_RENDERER_DIR };

function newestMtime(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

function ensureBuilt(root: string, mode: 'production' | 'e2e', outDir: string): string {
  const index = path.join(outDir, 'index.html');
  const builtAt = existsSync(index) ? statSync(index).mtimeMs : 0;
  const sourcesAt = Math.max(
    newestMtime(path.join(root, 'renderer')),
    newestMtime(path.join(root, 'common')),
    statSync(path.join(root, 'vite.config.ts')).mtimeMs,
  );
  if (builtAt < sourcesAt || process.env.FACTORY_REBUILD_RENDERER) {
    // NODE_ENV=production: under vitest it is 'test', which would build React's slower development bundle.
    execFileSync('npx', ['vite', 'build', '--config', 'vite.config.ts', '--mode', mode, '--logLevel', 'warn'], {
      cwd: root,
      stdio: 'inherit',
      env: { ...process.env, NODE_ENV: 'production' },
    });
  }
  return outDir;
}

/** The production renderer (dist/renderer): what ships, without test hooks. Returns its folder. */
export function ensureRendererBuilt(root: string): string {
  return ensureBuilt(root, 'production', path.join(root, 'dist/renderer'));
}

/** The e2e renderer, with the test hook the specs read terminals through. Returns its folder. */
export function ensureE2eRendererBuilt(root: string): string {
  return ensureBuilt(root, 'e2e', path.join(root, E2E_RENDERER_DIR));
}
