// Retry after a failed setup, in Chromium against the web host serving the real
// app with a real sandbox (QEMU, the base image, the real setup script): the
// setup card turns red with its reason, Retry runs setup again in the same
// sandbox (a new setup run, its own terminal), and no stage runs on an
// environment that was never made.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { startWebHost, type WebHost } from '../../main/host/web/web-host.js';
import { appPaths } from '../../main/state/paths.js';
import { testImage } from '../support/image.js';
import { makeRepo, tempDir, type FixtureRepo } from '../support/repo.js';
import { describeViolations, screenshot, seriousViolations } from './support/axe.js';
import { chromiumMissingReason, openBrowser, type OpenBrowser } from './support/browser.js';
import { ensureE2eRendererBuilt } from './support/build.js';
import { which } from './support/processes.js';
import { startTask, terminalText } from './support/ui-driver.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const skipReason = chromiumMissingReason() ?? (which('qemu-system-x86_64') ? undefined : 'qemu-system-x86_64 is not installed');
if (skipReason) console.log(`setup-retry skipped: ${skipReason}`);

describe.skipIf(!!skipReason)('Retry after a failed setup (real sandbox)', () => {
  let dataDir: string;
  let app: FactoryApp;
  let host: WebHost;
  let browser: OpenBrowser;
  let repo: FixtureRepo;

  beforeAll(async () => {
    await testImage();
    const staticDir = ensureE2eRendererBuilt(root);
    dataDir = tempDir('factory-e2e-setup-retry-');
    app = await createFactoryApp({ host: 'web', paths: appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir }), settings: { maxParallelTasks: 1 } });
    host = await startWebHost(app, { staticDir });
    browser = await openBrowser();
    await browser.page.setViewportSize({ width: 1280, height: 800 });
    // A setup that fails the same way each time it runs, counting its runs in the guest.
    repo = await makeRepo({
      files: {
        'a.txt': 'a\n',
        '.factory/pipeline.json': JSON.stringify({
          environment: { setup: ['n=$(( $(cat /tmp/setup-runs 2>/dev/null || echo 0) + 1 )); echo $n > /tmp/setup-runs; echo "setup run $n"', 'echo "E: left-pad is gone" >&2; exit 7'] },
          stages: { build: { command: 'echo BUILD-RAN' } },
        }),
      },
    });
  }, 10 * 60_000);

  afterAll(async () => {
    await browser?.close();
    await host?.close();
    await app?.dispose();
    repo?.cleanup();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('shows the failed setup, and Retry runs setup again before any stage', async () => {
    const { page, problems } = browser;
    await page.goto(host.url);
    const id = await startTask(page, repo.dir, 'Set up and fail');
    await expect.poll(() => page.getByTestId(`task-phase-${id}`).textContent(), { timeout: 10 * 60_000, interval: 1000 }).toBe('failed');
    const card = page.getByTestId(`setup-${id}`);
    expect(await card.getAttribute('data-status')).toBe('failed');
    expect(await card.getAttribute('title')).toContain('E: left-pad is gone');
    expect(await page.getByTestId('task-error-title').textContent()).toBeTruthy();
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      expect(describeViolations(await seriousViolations(page)), scheme).toEqual([]);
      await screenshot(page, scheme === 'light' ? 'setup-failed-1280x800' : 'setup-failed-dark-1280x800');
    }
    await page.emulateMedia({ colorScheme: 'light' });
    const firstSession = (await app.api['tasks.get']({ taskId: id })).setup?.sessionId;

    await page.getByTestId('retry-button').click();
    // Setup runs again (its second run in this sandbox), then fails as before; no stage ran.
    await expect
      .poll(async () => {
        const s = (await app.api['tasks.get']({ taskId: id })).setup?.sessionId;
        return !!s && s !== firstSession;
      }, { timeout: 60_000 })
      .toBe(true);
    await expect.poll(() => page.getByTestId(`task-phase-${id}`).textContent(), { timeout: 10 * 60_000, interval: 1000 }).toBe('failed');
    expect(await card.getAttribute('data-status')).toBe('failed');
    await card.click();
    await expect.poll(() => terminalText(page), { timeout: 30_000 }).toContain('setup run 2');
    expect(await terminalText(page)).not.toContain('BUILD-RAN');
    const t = await app.api['tasks.get']({ taskId: id });
    expect(t.error?.name, JSON.stringify({ error: t.error, setup: t.setup, phase: t.phase })).toBe('SetupFailed');
    for (const s of t.stages) expect(s.status, s.name).toBe('pending');
    await app.api['tasks.destroy']({ taskId: id });
    expect(problems).toEqual([]);
  }, 20 * 60_000);
});
