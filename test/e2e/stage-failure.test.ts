// A task whose tests fail, in Chromium against the real web host (scripted app
// behind it, writing the host's header and exit lines with the runner's own
// code): the failed stage's terminal says what ran and how it ended, the card
// gives one reason, the banner a human title, and Retry runs attempt 2.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumMissingReason } from './support/browser.js';
import { FAILS, ScriptedApp } from './support/scripted-app.js';
import { ScriptedUi } from './support/scripted-ui.js';
import { startTask, terminalText } from './support/ui-driver.js';

const missing = chromiumMissingReason();
if (missing) console.log(`stage-failure skipped: ${missing}`);

describe.skipIf(!!missing)('a failing stage explains itself', () => {
  let ui: ScriptedUi;

  beforeAll(async () => {
    ui = await ScriptedUi.start(new ScriptedApp(40));
    await ui.browser.page.setViewportSize({ width: 1400, height: 900 });
  });
  afterAll(async () => {
    await ui?.close();
  });

  it('shows the command and "exit status 3", one reason, a human title, and Retry as attempt 2', async () => {
    const { page, problems } = ui.browser;
    await page.goto(ui.host.url);
    await page.getByTestId('qemu-status').waitFor();
    const id = await startTask(page, ui.repo, `${FAILS} Make the tests pass on Node 22`);
    await expect.poll(() => page.getByTestId(`task-phase-${id}`).textContent(), { timeout: 30_000 }).toBe('failed');

    // The failed stage's terminal: the command first, the exit line last.
    await page.getByTestId(`stage-${id}-test`).click();
    await expect.poll(() => page.getByTestId('terminal-pane').getAttribute('data-session-id')).toBeTruthy();
    await expect.poll(async () => (await terminalText(page)).trim().split('\n').at(-1)?.trim()).toBe('exit status 3');
    const lines = (await terminalText(page)).split('\n').map((l) => l.trim()).filter(Boolean);
    expect(lines[0]).toBe('$ npm test');
    expect(lines).toContain('1 failing');

    // The card: the exit status once, and the reason.
    const card = page.getByTestId(`stage-${id}-test`);
    expect((await card.textContent())?.match(/exit/g)).toHaveLength(1);
    expect(await page.getByTestId(`stage-summary-${id}-test`).textContent()).toBe('1 failing');

    // The banner: the registry's human title, not the error's code name.
    expect(await page.getByTestId('task-error-title').textContent()).toBe('A stage failed');

    // Retry: the test stage runs again as attempt 2, on the card and on its tab; the first run keeps its own tab.
    await page.getByTestId('retry-button').click();
    await expect.poll(() => page.getByTestId(`task-phase-${id}`).textContent(), { timeout: 30_000 }).toBe('review');
    expect(await page.getByTestId(`stage-attempt-${id}-test`).textContent()).toBe('attempt 2');
    await page.getByTestId(`stage-${id}-test`).click();
    await expect.poll(() => page.getByTestId('terminal-tab-test').textContent()).toContain('test · attempt 2');
    const tabs = (await page.getByRole('tab').allTextContents()).filter((t) => t.startsWith('test'));
    expect(tabs.map((t) => t.split(' exited')[0]!.trim())).toEqual(['test · attempt 2', 'test · attempt 1']);
    await expect.poll(async () => (await terminalText(page)).trim().split('\n').at(-1)?.trim()).toBe('passed');
    expect(problems).toEqual([]);
  });
});
