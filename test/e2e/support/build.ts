// The e2e tests drive the built renderer; (re)build it when it is missing or
// older than its sources, so a test never runs against a stale page.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

function newestMtime(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

export function ensureRendererBuilt(root: string): void {
  const index = path.join(root, 'dist/renderer/index.html');
  const builtAt = existsSync(index) ? statSync(index).mtimeMs : 0;
  const sourcesAt = Math.max(newestMtime(path.join(root, 'renderer')), newestMtime(path.join(root, 'common')));
  if (builtAt >= sourcesAt && !process.env.FACTORY_REBUILD_RENDERER) return;
  execFileSync('npx', ['vite', 'build', '--config', 'vite.config.ts', '--logLevel', 'warn'], { cwd: root, stdio: 'inherit' });
}
