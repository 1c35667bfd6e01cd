// The UI as users get it, for measuring: the renderer built in production mode
// (vitest sets NODE_ENV=test, and the shared e2e build inherits it, which makes
// React's slower development build), served by the real web host with a
// scripted app behind it, in Chromium.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startWebHost, type WebHost } from '../../../main/host/web/web-host.js';
import { openBrowser, type OpenBrowser } from './browser.js';
import type { ScriptedApp } from './scripted-app.js';
import { projectRoot } from './scripted-ui.js';

const outDir = path.join(projectRoot, 'dist/renderer-production');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

function ensureProductionBuild(): void {
  const index = path.join(outDir, 'index.html');
  const builtAt = existsSync(index) ? statSync(index).mtimeMs : 0;
  const sourcesAt = Math.max(newestMtime(path.join(projectRoot, 'renderer')), newestMtime(path.join(projectRoot, 'common')));
  if (builtAt >= sourcesAt) return;
  execFileSync('npx', ['vite', 'build', '--config', 'vite.config.ts', '--outDir', outDir, '--emptyOutDir', '--logLevel', 'warn'], {
    cwd: projectRoot,
    stdio: 'inherit',
    env: { ...process.env, NODE_ENV: 'production' },
  });
}

export class ProductionUi {
  private constructor(
    readonly app: ScriptedApp,
    readonly host: WebHost,
    readonly browser: OpenBrowser,
    readonly repo: string,
  ) {}

  static async start(app: ScriptedApp): Promise<ProductionUi> {
    ensureProductionBuild();
    const host = await startWebHost(app, { staticDir: outDir });
    const browser = await openBrowser();
    const repo = mkdtempSync(path.join(os.tmpdir(), 'factory-ui-repo-'));
    mkdirSync(path.join(repo, '.git'));
    return new ProductionUi(app, host, browser, repo);
  }

  async close(): Promise<void> {
    await this.browser.close();
    await this.host.close();
    await this.app.dispose();
    rmSync(this.repo, { recursive: true, force: true });
  }
}
