// Claude Code chosen with no Anthropic credential stored, in Chromium against the
// web host serving the real app (real keychain, real git; no VM is needed, since
// nothing may start): the form names the missing credential under the agent
// before Start, Start creates nothing and points at the fix, the fix opens
// Credentials, and once a credential is stored the note is gone.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { startWebHost, type WebHost } from '../../main/host/web/web-host.js';
import { appPaths } from '../../main/state/paths.js';
import { makeRepo, tempDir, type FixtureRepo } from '../support/repo.js';
import { describeViolations, screenshot, seriousViolations } from './support/axe.js';
import { chromiumMissingReason, openBrowser, type OpenBrowser } from './support/browser.js';
import { ensureE2eRendererBuilt } from './support/build.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const missing = chromiumMissingReason();
if (missing) console.log(`agent-credential skipped: ${missing}`);

// Nothing here may boot: a call to the VM layer fails the spec.
const noVm = {
  images: { status: () => ({ state: 'ready' as const, version: 'test' }), ensure: async () => { throw new Error('no VM may start in this test'); } },
  qemu: { checkInstalled: async () => ({ ok: true, version: '8' }), start: async () => { throw new Error('no VM may start in this test'); } },
};

describe.skipIf(!!missing)('an agent without its credential', () => {
  let dataDir: string;
  let app: FactoryApp;
  let host: WebHost;
  let browser: OpenBrowser;
  let repo: FixtureRepo;
  const stored: string[] = [];

  beforeAll(async () => {
    const staticDir = ensureE2eRendererBuilt(root);
    dataDir = tempDir('factory-e2e-cred-');
    app = await createFactoryApp({ host: 'web', paths: appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') }), vm: noVm });
    host = await startWebHost(app, { staticDir });
    browser = await openBrowser();
    await browser.page.setViewportSize({ width: 1280, height: 800 });
    repo = await makeRepo({ files: { 'README.md': '# r\n' } });
  }, 120_000);

  afterAll(async () => {
    for (const id of stored) await app.api['credentials.delete']({ id }).catch(() => {}); // teardown: already deleted is fine
    await browser?.close();
    await host?.close();
    await app?.dispose();
    repo?.cleanup();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('is named before Start, Start creates nothing and offers the fix, and a stored key clears it', async () => {
    const { page, problems } = browser;
    await page.goto(host.url);
    // The empty app's first step: no model credential yet, so it offers Credentials or the Command agent.
    await expect.poll(() => page.getByTestId('board-empty').locator('li').first().textContent()).toContain('or use the Command agent, which needs none');
    expect(await page.getByTestId('first-run-credentials').count()).toBe(1);
    await page.getByTestId('repo-path-input').fill(repo.dir);
    await page.getByTestId('task-text-input').fill('Add a greeting');
    // The Command agent (the default) needs no credential, and says what it will skip.
    expect(await page.getByTestId('agent-credential-missing').count()).toBe(0);
    expect(await page.getByTestId('agent-does').textContent()).toContain('a stage without a command (plan, review, document) is skipped');

    await page.getByTestId('agent-select').selectOption('claude-code');
    const note = page.getByTestId('agent-credential-missing');
    await expect.poll(() => note.textContent()).toContain(
      'No Anthropic credential is stored: add an Anthropic API key or a Claude Code token (claude setup-token) in Credentials.',
    );
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      expect(describeViolations(await seriousViolations(page)), scheme).toEqual([]);
      await screenshot(page, scheme === 'light' ? 'agent-credential-missing-1280' : 'agent-credential-missing-1280-dark');
    }
    await page.emulateMedia({ colorScheme: 'light' });

    // Start: nothing is created, and the focus goes to the note that says why.
    await page.getByTestId('start-button').click();
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute('data-testid'))).toBe('agent-credential-missing');
    expect(await app.api['tasks.list']({})).toEqual([]);

    // The fix: Credentials opens, from the keyboard.
    await page.getByTestId('open-credentials').focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('heading', { name: 'Credentials' }).count()).toBeGreaterThan(0);

    // A credential stored (as the screen would): back in the form, the note is gone and Start creates the task.
    const cred = await app.api['credentials.set']({ kind: 'anthropic', label: 'Anthropic', value: 'sk-ant-e2e-not-a-real-key' });
    stored.push(cred.id);
    await page.getByTestId('nav-tasks').click();
    // The repository path is kept across screens; the task text is typed again.
    expect(await page.getByTestId('repo-path-input').inputValue()).toBe(repo.dir);
    await page.getByTestId('task-text-input').fill('Add a greeting');
    await page.getByTestId('agent-select').selectOption('claude-code');
    await expect.poll(() => note.count()).toBe(0);
    expect(await page.getByTestId('agent-does').textContent()).toContain('Claude Code plans, builds');
    await page.getByTestId('start-button').click();
    await expect.poll(async () => (await app.api['tasks.list']({})).map((t) => t.agent)).toEqual(['claude-code']);
    expect(problems).toEqual([]);
  }, 120_000);
});
