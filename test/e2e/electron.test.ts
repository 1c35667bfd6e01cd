// The same path as web-ui.test.ts through the Electron app (preload bridge, IPC,
// hardened window). Runs where an Electron runtime is installed; elsewhere it is
// reported as skipped, with the reason printed.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { _electron, type ElectronApplication, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepo, type FixtureRepo } from '../support/repo.js';
import { ensureRendererBuilt } from './support/build.js';
import { qemuProcessesUnder } from './support/processes.js';
import { startTask, terminalScreenText, waitForAllStagesPassed } from './support/ui-driver.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function findElectron(): { path?: string; reason?: string } {
  try {
    const require = createRequire(path.join(root, 'package.json'));
    require.resolve('electron');
    const binary = require('electron') as unknown;
    if (typeof binary === 'string' && existsSync(binary)) return { path: binary };
    return { reason: 'the electron package is installed but its runtime binary is not (download failed or skipped)' };
  } catch {
    return { reason: 'no Electron runtime installed (the optional electron package is absent)' };
  }
}

const electron = findElectron();
if (!electron.path) console.log(`electron e2e skipped: ${electron.reason}`);

const MARKER = `ELECTRON-MARKER-${randomBytes(4).toString('hex')}`;

describe.skipIf(!electron.path)('Electron app end to end', () => {
  let dataDir: string;
  let app: ElectronApplication;
  let page: Page;
  let repo: FixtureRepo;

  beforeAll(async () => {
    ensureRendererBuilt(root);
    execFileSync('npx', ['tsc', '-p', 'tsconfig.electron.json'], { cwd: root, stdio: 'inherit' });
    execFileSync('npx', ['tsc', '-p', 'tsconfig.preload.json'], { cwd: root, stdio: 'inherit' });
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'factory-electron-data-'));
    app = await _electron.launch({
      executablePath: electron.path!,
      args: [root, ...(process.getuid?.() === 0 ? ['--no-sandbox'] : []), '--disable-gpu'],
      env: { ...process.env, FACTORY_DATA_DIR: dataDir } as Record<string, string>,
    });
    page = await app.firstWindow();
    repo = await makeRepo({
      files: {
        'hello.txt': 'hello\n',
        '.factory/pipeline.json': JSON.stringify({
          stages: { build: { command: `printf 'hello from the sandbox\\n' >> hello.txt && echo ${MARKER}` } },
        }),
      },
    });
  });

  afterAll(async () => {
    await app?.close().catch(() => {}); // teardown: what is already gone is fine
    const left = dataDir ? qemuProcessesUnder(dataDir) : [];
    for (const p of left) process.kill(p.pid, 'SIGKILL');
    repo?.cleanup();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    expect(left).toEqual([]);
  });

  it('is hardened: no Node in the page, window.open denied, the bridge present', async () => {
    expect(await page.evaluate(() => typeof (globalThis as { require?: unknown }).require)).toBe('undefined');
    expect(await page.evaluate(() => typeof (globalThis as { process?: unknown }).process)).toBe('undefined');
    expect(await page.evaluate(() => typeof window.factory?.call)).toBe('function');
    expect(await page.evaluate(() => window.open('https://example.com') === null)).toBe(true);
    const prefs = await app.evaluate(({ BrowserWindow }) => {
      const wp = BrowserWindow.getAllWindows()[0]!.webContents.getLastWebPreferences();
      return { contextIsolation: wp?.contextIsolation, sandbox: wp?.sandbox, nodeIntegration: wp?.nodeIntegration };
    });
    expect(prefs).toEqual({ contextIsolation: true, sandbox: true, nodeIntegration: false });
  });

  it('runs a task and approves it into the host repo', async () => {
    const headBefore = repo.head();
    const statusBefore = repo.status();
    const taskId = await startTask(page, repo.dir, 'Append a greeting');
    await waitForAllStagesPassed(page, taskId, 15 * 60_000);
    await page.getByTestId('terminal-tab-build').click();
    // The production build (no test hook): read the rows on screen; the stage's output is short.
    await expect.poll(() => terminalScreenText(page)).toContain(MARKER);
    await page.getByTestId('review-file').first().waitFor({ timeout: 60_000 });
    await page.getByTestId('approve-button').click();
    await expect.poll(() => page.getByTestId('decision').getAttribute('data-kind'), { timeout: 60_000 }).toBe('approved');
    expect(repo.git('show', `factory/${taskId}:hello.txt`)).toBe('hello\nhello from the sandbox\n');
    expect(repo.head()).toBe(headBefore);
    expect(repo.status()).toBe(statusBefore);
    // After Approve the sandbox is destroyed without asking (setting keepSandboxAfterDecisionMinutes is 0).
    await expect.poll(() => page.getByTestId('sandbox-status').getAttribute('data-status'), { timeout: 120_000 }).toBe('destroyed');
    expect(qemuProcessesUnder(dataDir)).toEqual([]);
    mkdirSync(path.join(root, 'test-results'), { recursive: true });
    await page.screenshot({ path: path.join(root, 'test-results/electron-destroyed.png') });
  });
});
