// A keyboard-only user in Chromium (scripted app behind the real web host): no
// mouse from the first key to the approval, focus visible at every step and
// landing somewhere sensible after each action; terminals let the focus go.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumMissingReason } from './support/browser.js';
import { focused, tabTo } from './support/keyboard.js';
import { ScriptedApp } from './support/scripted-app.js';
import { ScriptedUi } from './support/scripted-ui.js';
import { terminalText } from './support/ui-driver.js';

const missing = chromiumMissingReason();
if (missing) console.log(`keyboard skipped: ${missing}`);

describe.skipIf(!!missing)('keyboard only', () => {
  let ui: ScriptedUi;
  let taskId = '';

  beforeAll(async () => {
    const app = new ScriptedApp(40);
    // The approved task keeps its sandbox: the shell test opens one in it.
    app.keepMinutes = 30;
    ui = await ScriptedUi.start(app);
    await ui.browser.page.setViewportSize({ width: 1400, height: 900 });
  });
  afterAll(async () => {
    await ui?.close();
  });

  it('starts a task, opens its review and approves it without the mouse, focus visible at each step', async () => {
    const { page, problems } = ui.browser;
    await page.goto(ui.host.url);
    await page.getByTestId('qemu-status').waitFor();

    await tabTo(page, 'repo-path-input');
    await page.keyboard.type(ui.repo);
    await tabTo(page, 'task-text-input');
    await page.keyboard.type('Add a greeting to the README');
    await tabTo(page, 'start-button');
    await page.keyboard.press('Enter');

    // Focus lands on the new task's view, not on the page body.
    await expect.poll(async () => (await focused(page)).testId, { timeout: 10_000 }).toBe('task-title');
    expect((await focused(page)).invisible).toBeNull();
    taskId = (await page.getByTestId('task-detail').getAttribute('data-task-id'))!;
    await expect.poll(() => page.getByTestId(`task-phase-${taskId}`).textContent(), { timeout: 30_000 }).toBe('review');
    await page.getByTestId('review-file').first().waitFor();

    // The review comes first in the task view: Approve is a few Tab presses from the title.
    const presses = await tabTo(page, 'approve-button', { max: 12 });
    console.log(`keyboard: Approve reached with ${presses} Tab presses from the task title`);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByTestId('decision').getAttribute('data-kind')).toBe('approved');
    // Focus lands on the decision line that replaced the button.
    await expect.poll(async () => (await focused(page)).testId).toBe('decision');
    expect((await focused(page)).invisible).toBeNull();
    expect(ui.app.approvals).toEqual([{ taskId, confirm: undefined }]);
    expect(problems).toEqual([]);
  });

  it('moves between terminal tabs with the arrow keys; Esc and Tab leave a stage terminal', async () => {
    const { page } = ui.browser;
    // The tab list is one Tab stop: the selected tab.
    await tabTo(page, 'terminal-tab-document');
    await page.keyboard.press('Home');
    expect((await focused(page)).testId).toBe('terminal-tab-request');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    const f = await focused(page);
    expect([f.testId, f.role]).toEqual(['terminal-tab-build', 'tab']);
    expect(await page.getByTestId('terminal-tab-build').getAttribute('aria-selected')).toBe('true');
    await expect.poll(() => terminalText(page)).toContain('== build');

    // Into the terminal (past its toolbar)...
    await focusTerminal(page);
    expect((await focused(page)).invisible).toBeNull();
    // ...and Esc gives the focus back to its tab.
    await page.keyboard.press('Escape');
    expect(await focused(page)).toMatchObject({ testId: 'terminal-tab-build', inTerminal: false, invisible: null });

    // Tab and Shift+Tab pass through a read-only terminal instead of being typed into it.
    await focusTerminal(page);
    expect(await page.getByTestId('terminal-keys-hint').textContent()).toBe('Esc or Tab leaves');
    await page.keyboard.press('Shift+Tab');
    expect((await focused(page)).inTerminal).toBe(false);
    await focusTerminal(page);
    await page.keyboard.press('Tab');
    const after = await focused(page);
    expect(after.inTerminal).toBe(false);
    expect(after.invisible).toBeNull();
  });

  it('in a shell, Esc goes to the program until Ctrl+M turns on "Tab moves focus"; then Esc leaves', async () => {
    const { page } = ui.browser;
    await tabTo(page, 'shell-button', { backwards: true });
    await page.keyboard.press('Enter');
    // The new shell takes the focus, so the user can type at once.
    await expect.poll(async () => (await focused(page)).inTerminal).toBe(true);
    await expect.poll(() => terminalText(page)).toContain('root@sandbox');
    await page.keyboard.type('ls');
    await page.keyboard.press('Escape');
    await page.keyboard.press('Enter');
    // Esc reached the shell (a program like vi needs it) and the focus stayed.
    const sessionId = (await page.getByTestId('terminal-pane').getAttribute('data-session-id'))!;
    await expect.poll(() => ui.app.written.get(sessionId)).toBe('ls\x1b\r');
    expect((await focused(page)).inTerminal).toBe(true);

    expect(await page.getByTestId('terminal-keys-hint').textContent()).toBe('Ctrl+M: Tab moves focus');
    await page.keyboard.press('Control+m');
    expect(await page.getByTestId('terminal-tab-focus-button').getAttribute('aria-pressed')).toBe('true');
    await page.keyboard.press('Escape');
    const f = await focused(page);
    expect(f).toMatchObject({ role: 'tab', inTerminal: false, invisible: null });
    // Ctrl+M toggled the mode; it sent nothing (it is also Enter, ^M, to a terminal), nor did Esc.
    expect(ui.app.written.get(sessionId)).toBe('ls\x1b\r');

    // Back in the shell, Tab leaves too while the mode is on; Ctrl+M turns it off again.
    await focusTerminal(page);
    await page.keyboard.press('Tab');
    expect((await focused(page)).inTerminal).toBe(false);
    await page.keyboard.press('Shift+Tab');
    expect((await focused(page)).inTerminal).toBe(true);
    await page.keyboard.press('Control+m');
    expect(await page.getByTestId('terminal-tab-focus-button').getAttribute('aria-pressed')).toBe('false');
  });
});

/** From the focus before it (its tab, its toolbar), Tab into the terminal pane's input. */
async function focusTerminal(page: import('playwright-core').Page): Promise<void> {
  for (let n = 0; n < 8; n++) {
    await page.keyboard.press('Tab');
    if ((await focused(page)).inTerminal) return;
  }
  throw new Error('Tab never reached the terminal');
}
