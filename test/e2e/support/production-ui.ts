// The UI as users get it, for measuring: the production renderer (dist/renderer,
// built with NODE_ENV=production: vitest's NODE_ENV=test would give React's slower
// development build), served by the real web host with a scripted app behind it,
// in Chromium.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startWebHost, type WebHost } from '../../../main/host/web/web-host.js';
import { openBrowser, type OpenBrowser } from './browser.js';
import { ensureRendererBuilt } from './build.js';
import type { ScriptedApp } from './scripted-app.js';
import { projectRoot } from './scripted-ui.js';

export class ProductionUi {
  private constructor(
    readonly app: ScriptedApp,
    readonly host: WebHost,
    readonly browser: OpenBrowser,
    readonly repo: string,
  ) {}

  static async start(app: ScriptedApp): Promise<ProductionUi> {
    const host = await startWebHost(app, { staticDir: ensureRendererBuilt(projectRoot) });
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
