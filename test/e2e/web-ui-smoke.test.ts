// The UI in Chromium against the real web host, with a scripted app behind it:
// fast checks of what the real end-to-end test cannot isolate (CSP, the token
// leaving the address bar, escaping of hostile text, the no-repo error).
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWebHost } from '../../main/host/web/web-host.js';
import { chromiumMissingReason } from './support/browser.js';
import { HOSTILE_PATCH_LINE, SCRIPTED_MARKER, ScriptedApp } from './support/scripted-app.js';
import { openNewTask, startTask, terminalText, typeInTerminal, waitForAllStagesPassed } from './support/ui-driver.js';
import { projectRoot, ScriptedUi, staticDir } from './support/scripted-ui.js';

const missing = chromiumMissingReason();
if (missing) console.log(`web-ui-smoke skipped: ${missing}`);

describe.skipIf(!!missing)('web UI with a scripted app', () => {
  let ui: ScriptedUi;

  beforeAll(async () => {
    const app = new ScriptedApp(120);
    // The sandbox outlives the approval, so its shell and Destroy can be used after it.
    app.keepMinutes = 30;
    ui = await ScriptedUi.start(app);
  });
  afterAll(async () => {
    await ui?.close();
  });

  it('runs the whole flow: token handling, board, terminal, escaped diff, approve, destroy', async () => {
    const { page, problems } = ui.browser;
    await page.goto(ui.host.url);
    await page.getByTestId('qemu-status').waitFor();
    // The token left the address bar but stays in the tab's sessionStorage.
    expect(page.url()).not.toContain('token');
    expect(await page.evaluate(() => sessionStorage.getItem('factory.token'))).toBe(ui.host.token);

    const taskId = await startTask(page, ui.repo, 'Say hello');
    await waitForAllStagesPassed(page, taskId, 30_000);
    await page.getByTestId('terminal-tab-build').click();
    await expect.poll(() => terminalText(page)).toContain(SCRIPTED_MARKER);

    await page.getByTestId('review-panel').getByTestId('review-file').first().waitFor();
    expect(await page.getByTestId('review-file').first().getAttribute('data-path')).toBe('hello.txt');
    const patch = (await page.getByTestId('review-patch').textContent()) ?? '';
    expect(patch).toContain(HOSTILE_PATCH_LINE); // shown as text...
    expect(await page.evaluate(() => (window as { __pwned?: number }).__pwned)).toBeUndefined(); // ...never run
    expect(await page.locator('.patch .diff-add').count()).toBeGreaterThanOrEqual(2);

    await page.getByTestId('approve-button').click();
    await expect.poll(() => page.getByTestId('decision').getAttribute('data-kind')).toBe('approved');

    await page.getByTestId('shell-button').click();
    await typeInTerminal(page, 'echo hi\r');
    await expect.poll(() => terminalText(page)).toContain('you typed: echo hi');

    await page.getByTestId('destroy-button').click();
    await page.getByTestId('destroy-confirmed-button').click();
    await expect.poll(() => page.getByTestId('sandbox-status').getAttribute('data-status')).toBe('destroyed');
    mkdirSync(path.join(projectRoot, 'test-results'), { recursive: true });
    await page.screenshot({ path: path.join(projectRoot, 'test-results/web-ui-smoke.png'), fullPage: true });
    expect(problems).toEqual([]);
  });

  it('shows a clear error for a path that is not a repository', async () => {
    const { page } = ui.browser;
    // The form folds away once a task exists: open it as a user would.
    await openNewTask(page);
    await page.getByTestId('repo-path-input').fill(path.join(ui.repo, 'nope'));
    await page.getByTestId('task-text-input').fill('anything');
    await page.getByTestId('start-button').click();
    await expect.poll(() => page.getByTestId('new-task-error-name').textContent()).toBe('NotAGitRepository');
    expect(await page.getByTestId('new-task-error-message').textContent()).toContain('is not a git repository');
  });

  // The terminal registry re-attaches on reconnect (renderer/terminal); this checks it end to end.
  it('reconnects after the host restarts, reloads the board and replays the terminal', async () => {
    const { page } = ui.browser;
    await expect.poll(() => terminalText(page)).toContain('you typed: echo hi');
    const { port, token } = ui.host;
    await ui.host.close();
    await expect.poll(() => page.getByTestId('connection-status').count()).toBe(1);
    // Output produced while the page is disconnected must show up after the reconnect (scrollback replay).
    const sessionId = (await page.getByTestId('terminal-pane').getAttribute('data-session-id'))!;
    await ui.app.api['terminal.write']({ sessionId, data: 'while-away\r' });
    ui.host = await startWebHost(ui.app, { staticDir, port, token });
    await expect.poll(() => page.getByTestId('connection-status').count(), { timeout: 15_000 }).toBe(0);
    await expect.poll(() => terminalText(page)).toContain('you typed: while-away');
    expect(await terminalText(page)).toContain('you typed: echo hi');
    expect(await page.locator('[data-testid^="task-row-"]').count()).toBe(1);
  });

  it('shows what to do when the page is opened without its token', async () => {
    const page = await ui.browser.context.newPage();
    await page.goto(`http://127.0.0.1:${ui.host.port}/`);
    await page.getByTestId('no-token').waitFor();
    await page.close();
  });
});
