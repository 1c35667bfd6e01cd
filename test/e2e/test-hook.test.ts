// The read-only terminal test hook `window.__factoryTerminals` exists only in
// the e2e build of the renderer: the production build (dist/renderer, what
// ships and what the Electron host loads) has no trace of it in its code, and a
// page served from it has no such global, while its terminals still show their
// output. The e2e build, served from its own folder, has the hook.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startWebHost, type WebHost } from '../../main/host/web/web-host.js';
import { chromiumMissingReason, openBrowser, type OpenBrowser } from './support/browser.js';
import { E2E_RENDERER_DIR, ensureE2eRendererBuilt, ensureRendererBuilt } from './support/build.js';
import { SCRIPTED_MARKER, ScriptedApp } from './support/scripted-app.js';
import { projectRoot } from './support/scripted-ui.js';
import { startTask, terminalScreenText, terminalText, waitForAllStagesPassed } from './support/ui-driver.js';

const HOOK = '__factoryTerminals';

/** The code a browser runs: scripts, pages and styles (source maps carry the sources as text, not code). */
function codeFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile() && /\.(js|mjs|html|css)$/.test(e.name)) out.push(path.join(e.parentPath, e.name));
  }
  return out;
}

describe('the terminal test hook is left out of the production build', () => {
  it('the production JS has no trace of it; the e2e build in its own folder has it', () => {
    const prod = ensureRendererBuilt(projectRoot);
    const e2e = ensureE2eRendererBuilt(projectRoot);
    expect(path.relative(projectRoot, e2e)).toBe(E2E_RENDERER_DIR);
    const prodFiles = codeFiles(prod);
    // The build is real: the terminal registry is in it.
    expect(prodFiles.some((f) => readFileSync(f, 'utf8').includes('factory-terminal-host'))).toBe(true);
    expect(prodFiles.filter((f) => readFileSync(f, 'utf8').includes(HOOK))).toEqual([]);
    expect(codeFiles(e2e).some((f) => readFileSync(f, 'utf8').includes(HOOK))).toBe(true);
  });
});

const missing = chromiumMissingReason();
if (missing) console.log(`test-hook page checks skipped: ${missing}`);

describe.skipIf(!!missing)('a page from each build', () => {
  let host: WebHost | undefined;
  let browser: OpenBrowser | undefined;
  let repo: string | undefined;
  afterEach(async () => {
    await browser?.close();
    await host?.close();
    if (repo) rmSync(repo, { recursive: true, force: true });
  });

  async function openBuild(staticDir: string) {
    const app = new ScriptedApp(60);
    host = await startWebHost(app, { staticDir });
    browser = await openBrowser();
    repo = mkdtempSync(path.join(os.tmpdir(), 'factory-hook-repo-'));
    mkdirSync(path.join(repo, '.git'));
    const { page } = browser;
    await page.goto(host.url);
    const taskId = await startTask(page, repo, 'Say hello');
    await waitForAllStagesPassed(page, taskId, 30_000);
    await page.getByTestId('terminal-tab-build').click();
    return page;
  }

  it('production: no hook on the page, and the terminal still shows the stage output', async () => {
    const page = await openBuild(ensureRendererBuilt(projectRoot));
    await expect.poll(() => terminalScreenText(page)).toContain(SCRIPTED_MARKER);
    expect(await page.evaluate((name) => name in window, HOOK)).toBe(false);
    await expect(terminalText(page)).rejects.toThrow(/__factoryTerminals is missing: serve the e2e build/);
    expect(browser!.problems).toEqual([]);
  });

  it('e2e: the hook reads the terminal', async () => {
    const page = await openBuild(ensureE2eRendererBuilt(projectRoot));
    await expect.poll(() => terminalText(page)).toContain(SCRIPTED_MARKER);
    expect(await page.evaluate((name) => typeof (window as unknown as Record<string, unknown>)[name], HOOK)).toBe('object');
  });
});
