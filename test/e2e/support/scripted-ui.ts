// The UI in Chromium against the real web host with a scripted app behind it,
// plus a folder that passes for a repository: what the fast UI specs share.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startWebHost, type WebHost } from '../../../main/host/web/web-host.js';
import { openBrowser, type OpenBrowser } from './browser.js';
import { E2E_RENDERER_DIR, ensureE2eRendererBuilt } from './build.js';
import type { ScriptedApp } from './scripted-app.js';

export const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
/** The e2e build of the renderer (with the test hook the specs read terminals through). */
export const staticDir = path.join(projectRoot, E2E_RENDERER_DIR);

export class ScriptedUi {
  private constructor(
    readonly app: ScriptedApp,
    public host: WebHost,
    readonly browser: OpenBrowser,
    readonly repo: string,
  ) {}

  static async start(app: ScriptedApp): Promise<ScriptedUi> {
    ensureE2eRendererBuilt(projectRoot);
    const host = await startWebHost(app, { staticDir });
    const browser = await openBrowser();
    const repo = mkdtempSync(path.join(os.tmpdir(), 'factory-ui-repo-'));
    mkdirSync(path.join(repo, '.git'));
    return new ScriptedUi(app, host, browser, repo);
  }

  async close(): Promise<void> {
    await this.browser.close();
    await this.host.close();
    await this.app.dispose();
    rmSync(this.repo, { recursive: true, force: true });
  }
}
