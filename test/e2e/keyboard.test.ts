// A keyboard-only user in Chromium (scripted app behind the real web host): no
// mouse from the first key to the approval, focus visible at every step and
// landing somewhere sensible after each action; terminals let the focus go;
// F6 moves between the window's regions; shortcuts start, move, approve and
// reject (asking first); the terminal pane resizes and collapses by keyboard.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepo, type FixtureRepo } from '../support/repo.js';
import { describeViolations, screenshot, seriousViolations } from './support/axe.js';
import { chromiumMissingReason } from './support/browser.js';
import { focused, tabTo } from './support/keyboard.js';
import { ScriptedApp } from './support/scripted-app.js';
import { ScriptedUi } from './support/scripted-ui.js';
import { terminalText } from './support/ui-driver.js';

const missing = chromiumMissingReason();
if (missing) console.log(`keyboard skipped: ${missing}`);

describe.skipIf(!!missing)('keyboard only', () => {
  let ui: ScriptedUi;
  let repo: FixtureRepo;
  let taskId = '';
  let secondId = '';
  let shellSession = '';

  beforeAll(async () => {
    const app = new ScriptedApp(40);
    // The approved task keeps its sandbox: the shell test opens one in it.
    app.keepMinutes = 30;
    // Approve creates the branch in a real repository, as the host does.
    app.realBranches = true;
    repo = await makeRepo({ files: { 'README.md': 'hello\n' } });
    ui = await ScriptedUi.start(app);
    await ui.browser.page.setViewportSize({ width: 1400, height: 900 });
  });
  afterAll(async () => {
    await ui?.close();
    repo?.cleanup();
  });

  it('starts a task, opens its review and approves it without the mouse, focus visible at each step', async () => {
    const { page, problems } = ui.browser;
    await page.goto(ui.host.url);
    await page.getByTestId('qemu-status').waitFor();

    await tabTo(page, 'repo-path-input');
    await page.keyboard.type(repo.dir);
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
    // A file's changes in split view, by keyboard: line numbers on both sides, focus visible throughout.
    await tabTo(page, 'review-file-view', { max: 12 });
    await page.keyboard.press('Enter');
    await page.getByTestId('file-diff').waitFor();
    await tabTo(page, 'diff-split', { max: 6 });
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByTestId('file-diff').getAttribute('data-mode')).toBe('split');
    expect(await page.getByTestId('diff-split').getAttribute('aria-pressed')).toBe('true');
    const numbers = await page.locator('[data-testid="file-diff"] .diff-line-old-num, [data-testid="file-diff"] .diff-line-new-num').count();
    expect(numbers).toBeGreaterThan(0);
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await screenshot(page, 'review-split-1400x900');
    await page.getByTestId('task-title').focus();

    const presses = await tabTo(page, 'approve-button', { max: 24 });
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
    const sessionId = (shellSession = (await page.getByTestId('terminal-pane').getAttribute('data-session-id'))!);
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

  it('F6 moves through every region and back with Shift+F6, also out of a focused shell, which gets nothing', async () => {
    const { page } = ui.browser;
    // The shell from the test before still has the focus ("Tab moves focus" off: Tab and Esc are the shell's).
    expect((await focused(page)).inTerminal).toBe(true);
    const written = ui.app.written.get(shellSession);
    const order = ['header', 'new-task', 'board', 'task', 'terminals', 'security'];
    const forward: string[] = [];
    for (let n = 0; n < order.length; n++) {
      await page.keyboard.press('F6');
      forward.push(await regionOf(page));
      expect((await focused(page)).invisible).toBeNull();
    }
    // From the terminals, on to the sandbox's security panel below them, and round.
    expect(forward).toEqual(['security', ...order.slice(0, 5)]);
    // F6 went to the page, not to the program (it would have been ESC [17~).
    expect(ui.app.written.get(shellSession)).toBe(written);
    const back: string[] = [];
    for (let n = 0; n < order.length; n++) {
      await page.keyboard.press('Shift+F6');
      back.push(await regionOf(page));
      expect((await focused(page)).invisible).toBeNull();
    }
    expect(back).toEqual(['task', 'board', 'new-task', 'header', 'security', 'terminals']);
    // Each region starts somewhere sensible: the selected task's card, the task's title, the terminal tab shown.
    await pressUntilRegion(page, 'board');
    expect((await focused(page)).testId).toBe(`task-select-${taskId}`);
    await page.keyboard.press('F6');
    expect((await focused(page)).testId).toBe('task-title');
    await page.keyboard.press('F6');
    expect((await focused(page)).role).toBe('tab');
    // Out of a read-only stage terminal too, backwards.
    await page.keyboard.press('Home');
    await focusTerminal(page);
    await page.keyboard.press('Shift+F6');
    expect(await focused(page)).toMatchObject({ testId: 'task-title', inTerminal: false, invisible: null });
  });

  it('Alt+N goes to the task form and Ctrl+Enter starts the task; Alt+Down and Alt+Up move between tasks', async () => {
    const { page } = ui.browser;
    await page.keyboard.press('Alt+KeyN');
    // The repository is still filled in from the last task: the task text is what is left to type.
    expect(await focused(page)).toMatchObject({ testId: 'task-text-input', invisible: null });
    await page.keyboard.type('Fix the typo in the README');
    await page.keyboard.press('Control+Enter');
    await expect.poll(async () => (await focused(page)).testId, { timeout: 10_000 }).toBe('task-title');
    secondId = (await page.getByTestId('task-detail').getAttribute('data-task-id'))!;
    expect(secondId).not.toBe(taskId);
    // Its stages run on timers: once it is in review, its review panel (Approve, Reject) cannot appear
    // between two of the key presses below and change where Shift+Tab lands.
    await expect.poll(() => page.getByTestId(`task-phase-${secondId}`).textContent(), { timeout: 30_000 }).toBe('review');
    await page.getByTestId('review-file').first().waitFor();
    expect((await focused(page)).testId).toBe('task-title');

    // Newest first on the board: down is the first task, up the new one again, and no further.
    await page.keyboard.press('Alt+ArrowDown');
    await expect.poll(() => page.getByTestId('task-detail').getAttribute('data-task-id')).toBe(taskId);
    expect(await focused(page)).toMatchObject({ testId: `task-select-${taskId}`, invisible: null });
    expect(await page.getByTestId(`task-row-${taskId}`).getAttribute('class')).toBe('selected');
    await page.keyboard.press('Alt+ArrowUp');
    await expect.poll(() => page.getByTestId('task-detail').getAttribute('data-task-id')).toBe(secondId);
    expect((await focused(page)).testId).toBe(`task-select-${secondId}`);
    await page.keyboard.press('Alt+ArrowUp');
    expect(await page.getByTestId('task-detail').getAttribute('data-task-id')).toBe(secondId);

    // The board is one Tab stop (a grid): Tab leaves it from any cell, arrows move inside, Enter opens a stage.
    const inGrid = () => page.evaluate(() => !!document.activeElement?.closest('[data-testid="stage-board"] table[role="grid"]'));
    await page.keyboard.press('Tab');
    expect(await inGrid()).toBe(false);
    await page.keyboard.press('Shift+Tab');
    expect(await focused(page)).toMatchObject({ testId: `task-select-${secondId}`, invisible: null });
    await page.keyboard.press('ArrowRight'); // no setup step here: straight to request
    expect(await focused(page)).toMatchObject({ testId: `stage-${secondId}-request`, invisible: null });
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowDown');
    expect(await focused(page)).toMatchObject({ testId: `stage-${taskId}-plan`, invisible: null });
    await page.keyboard.press('Tab');
    expect(await inGrid()).toBe(false);
    await page.keyboard.press('Shift+Tab');
    expect((await focused(page)).testId).toBe(`stage-${taskId}-plan`);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByTestId('task-detail').getAttribute('data-task-id')).toBe(taskId);
    await expect.poll(() => page.getByTestId('terminal-tab-plan').getAttribute('aria-selected')).toBe('true');
    // Back where the next test expects to start: the newest task selected.
    await page.keyboard.press('Alt+ArrowUp');
    await expect.poll(() => page.getByTestId('task-detail').getAttribute('data-task-id')).toBe(secondId);
  });

  it('Alt+A asks first: Esc cancels and nothing is approved; Enter on the focused Approve creates the branch', async () => {
    const { page, problems } = ui.browser;
    await expect.poll(() => page.getByTestId(`task-phase-${secondId}`).textContent(), { timeout: 30_000 }).toBe('review');
    await page.getByTestId('review-file').first().waitFor();
    expect(await page.getByTestId('approve-button').getAttribute('aria-keyshortcuts')).toBe('Alt+A');
    // After a mouse click too, the button the shortcut focuses shows its ring; Approve is shown once, not in a danger box.
    await page.getByTestId('review-summary').click();
    await page.keyboard.press('Alt+KeyA');
    expect(await focused(page)).toMatchObject({ testId: 'approve-confirmed-button', invisible: null });
    expect(await page.getByTestId('approve-button').isHidden()).toBe(true);
    expect(await page.getByTestId('approve-confirm').getAttribute('class')).toContain('tone-primary');
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await page.keyboard.press('Escape');
    expect(await page.getByTestId('approve-confirm').count()).toBe(0);
    expect(await focused(page)).toMatchObject({ testId: 'approve-button', invisible: null });
    expect(ui.app.approvals.map((a) => a.taskId)).toEqual([taskId]);
    expect(() => repo.git('rev-parse', '--verify', '--quiet', `refs/heads/factory/${secondId}`)).toThrow();

    await page.keyboard.press('Alt+KeyA');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByTestId('decision').getAttribute('data-kind')).toBe('approved');
    await expect.poll(async () => (await focused(page)).testId).toBe('decision');
    expect(repo.git('rev-parse', '--verify', `refs/heads/factory/${secondId}`).trim()).toMatch(/^[0-9a-f]{40}$/);
    expect(problems).toEqual([]);
  });

  it('the terminal splitter resizes by keyboard, collapses with Approve in view, survives a reload; Alt+R asks before rejecting', async () => {
    const { page, problems } = ui.browser;
    await page.keyboard.press('Alt+KeyN');
    await page.keyboard.type('Rename the config loader');
    await page.keyboard.press('Control+Enter');
    await expect.poll(async () => (await focused(page)).testId, { timeout: 10_000 }).toBe('task-title');
    const thirdId = (await page.getByTestId('task-detail').getAttribute('data-task-id'))!;
    await expect.poll(() => page.getByTestId(`task-phase-${thirdId}`).textContent(), { timeout: 30_000 }).toBe('review');
    await page.getByTestId('review-file').first().waitFor();

    await pressUntilRegion(page, 'terminals');
    await tabTo(page, 'terminal-splitter', { backwards: true });
    const splitter = page.getByTestId('terminal-splitter');
    const before = await paneSize(page);
    expect(Number(await splitter.getAttribute('aria-valuenow'))).toBe(before.panel);
    await page.keyboard.press('ArrowUp');
    await page.keyboard.press('ArrowUp');
    await page.keyboard.press('ArrowDown');
    await expect.poll(async () => (await paneSize(page)).panel).toBe(before.panel + 40);
    expect(Number(await splitter.getAttribute('aria-valuenow'))).toBe(before.panel + 40);
    // The terminal fitted itself to the taller pane: its screen grew too.
    await expect.poll(async () => (await paneSize(page)).screen).toBeGreaterThan(before.screen);

    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByTestId('terminal-pane').count()).toBe(0);
    expect(await splitter.getAttribute('aria-valuenow')).toBe('0');
    expect(await page.getByTestId('terminal-collapse-button').getAttribute('aria-expanded')).toBe('false');
    // The tabs stay, one key from the terminal; and with the terminals out of the way Approve is in the window.
    expect(await page.getByTestId('terminal-tab-document').count()).toBe(1);
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await page.getByTestId('task-title').evaluate((e) => e.scrollIntoView({ block: 'start' }));
    expect(await inViewAndOnTop(page, 'approve-button')).toBe(true);

    await page.reload();
    await page.getByTestId('qemu-status').waitFor();
    await page.keyboard.press('Alt+ArrowDown');
    await expect.poll(() => page.getByTestId('task-detail').getAttribute('data-task-id')).toBe(thirdId);
    expect(await page.getByTestId('terminal-region').getAttribute('data-collapsed')).toBe('true');
    expect(await page.getByTestId('terminal-pane').count()).toBe(0);
    await pressUntilRegion(page, 'terminals');
    await page.keyboard.press('Enter');
    await expect.poll(async () => (await paneSize(page)).panel).toBe(before.panel + 40);
    // The mouse drags it too: up makes the terminals taller, and the height is kept.
    const grip = (await splitter.boundingBox())!;
    await page.mouse.move(grip.x + grip.width / 2, grip.y + grip.height / 2);
    await page.mouse.down();
    await page.mouse.move(grip.x + grip.width / 2, grip.y + grip.height / 2 - 100, { steps: 5 });
    await page.mouse.up();
    await expect.poll(async () => (await paneSize(page)).panel).toBe(before.panel + 140);
    expect(await page.evaluate(() => JSON.parse(localStorage.getItem('factory.terminalPane') ?? '{}'))).toEqual({ height: before.panel + 140, collapsed: false });

    await page.getByTestId('review-file').first().waitFor();
    expect(await page.getByTestId('reject-button').getAttribute('aria-keyshortcuts')).toBe('Alt+R');
    await page.keyboard.press('Alt+KeyR');
    expect(await focused(page)).toMatchObject({ testId: 'reject-confirmed-button', invisible: null });
    await page.keyboard.press('Escape');
    expect(await focused(page)).toMatchObject({ testId: 'reject-button', invisible: null });
    expect(await page.getByTestId(`task-phase-${thirdId}`).textContent()).toBe('review');
    await page.keyboard.press('Alt+KeyR');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByTestId('decision').getAttribute('data-kind')).toBe('rejected');
    expect(() => repo.git('rev-parse', '--verify', '--quiet', `refs/heads/factory/${thirdId}`)).toThrow();
    expect(problems).toEqual([]);
  });

  it('lists the shortcuts (Alt+/ or the header button); Esc closes the list', async () => {
    const { page } = ui.browser;
    await page.keyboard.press('Alt+Slash');
    const dialog = page.getByTestId('shortcuts-dialog');
    await expect.poll(() => dialog.isVisible()).toBe(true);
    expect(await focused(page)).toMatchObject({ testId: 'shortcuts-close-button', invisible: null });
    const rows = await page.getByTestId('shortcut-row').allTextContents();
    for (const keys of ['F6', 'Alt+N', 'Ctrl+Enter', 'Alt+↓', 'Alt+↑', 'Alt+A', 'Alt+R']) expect(rows.some((r) => r.startsWith(keys))).toBe(true);
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await page.keyboard.press('Escape');
    await expect.poll(() => dialog.isVisible()).toBe(false);
    // The header's button opens the same list.
    await page.getByTestId('shortcuts-button').click();
    await expect.poll(() => dialog.isVisible()).toBe(true);
    await page.getByTestId('shortcuts-close-button').click();
    await expect.poll(() => dialog.isVisible()).toBe(false);
  });
});

/** The data-region of the focused element. */
async function regionOf(page: import('playwright-core').Page): Promise<string> {
  return page.evaluate(() => document.activeElement?.closest('[data-region]')?.getAttribute('data-region') ?? 'none');
}

async function pressUntilRegion(page: import('playwright-core').Page, region: string): Promise<void> {
  for (let n = 0; n < 6; n++) {
    await page.keyboard.press('F6');
    if ((await regionOf(page)) === region) return;
  }
  throw new Error(`F6 never reached the ${region} region`);
}

/** Heights of the terminal panel and of the xterm.js screen inside it. */
async function paneSize(page: import('playwright-core').Page): Promise<{ panel: number; screen: number }> {
  return page.evaluate(() => ({
    panel: Math.round(document.querySelector('.terminal-panel')?.getBoundingClientRect().height ?? 0),
    screen: Math.round(document.querySelector('.terminal-panel .xterm-screen')?.getBoundingClientRect().height ?? 0),
  }));
}

async function inViewAndOnTop(page: import('playwright-core').Page, testId: string): Promise<boolean> {
  return page.getByTestId(testId).evaluate((e) => {
    const r = e.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return r.top >= 0 && r.bottom <= innerHeight && (hit === e || e.contains(hit));
  });
}

/** From the focus before it (its tab, its toolbar), Tab into the terminal pane's input. */
async function focusTerminal(page: import('playwright-core').Page): Promise<void> {
  for (let n = 0; n < 8; n++) {
    await page.keyboard.press('Tab');
    if ((await focused(page)).inTerminal) return;
  }
  throw new Error('Tab never reached the terminal');
}
