// The e2e tests drive the built renderer; build it once when it is missing.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

export function ensureRendererBuilt(root: string): void {
  if (existsSync(path.join(root, 'dist/renderer/index.html')) && !process.env.FACTORY_REBUILD_RENDERER) return;
  execFileSync('npx', ['vite', 'build', '--config', 'renderer/vite.config.ts', '--logLevel', 'warn'], { cwd: root, stdio: 'inherit' });
}
