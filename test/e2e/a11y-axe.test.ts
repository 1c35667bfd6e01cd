// axe-core in Chromium on every screen a user meets (the scripted app behind the
// real web host): no critical and no serious violation on the landing page, the
// board with finished and failed tasks, a task's view, the review pane and the
// credentials screen. Each screen is also saved as a 1400×900 screenshot.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeViolations, screenshot, seriousViolations } from './support/axe.js';
import { chromiumMissingReason } from './support/browser.js';
import { FAILS, ScriptedApp } from './support/scripted-app.js';
import { ScriptedUi } from './support/scripted-ui.js';
import { startTask } from './support/ui-driver.js';

const missing = chromiumMissingReason();
if (missing) console.log(`a11y-axe skipped: ${missing}`);

describe.skipIf(!!missing)('accessibility of every screen (axe-core)', () => {
  let ui: ScriptedUi;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    ui = await ScriptedUi.start(new ScriptedApp(40));
    await ui.browser.page.setViewportSize({ width: 1400, height: 900 });
  });
  afterAll(async () => {
    await ui?.close();
  });

  const phase = (id: string) => ui.browser.page.getByTestId(`task-phase-${id}`).textContent();

  it('the landing page', async () => {
    const { page } = ui.browser;
    await page.goto(ui.host.url);
    await page.getByTestId('qemu-status').waitFor();
    await page.getByTestId('board-empty').waitFor();
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await screenshot(page, 'landing');
  });

  it('the board with an approved, a failed and a task in review, and the failed task view', async () => {
    const { page } = ui.browser;
    ids.approved = await startTask(page, ui.repo, 'Add a greeting to the README');
    await expect.poll(() => phase(ids.approved!), { timeout: 30_000 }).toBe('review');
    await page.getByTestId('approve-button').click();
    await expect.poll(() => page.getByTestId('decision').getAttribute('data-kind')).toBe('approved');
    ids.failed = await startTask(page, ui.repo, `${FAILS} Make the tests pass on Node 22`);
    await expect.poll(() => phase(ids.failed!), { timeout: 30_000 }).toBe('failed');
    ids.review = await startTask(page, ui.repo, 'Rename the config loader and update its callers');
    await expect.poll(() => phase(ids.review!), { timeout: 30_000 }).toBe('review');

    await page.getByTestId(`task-select-${ids.failed}`).click();
    await page.getByTestId('task-error').waitFor();
    await page.getByTestId('terminal-pane').waitFor();
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await screenshot(page, 'board');
    await page.getByTestId('task-detail').scrollIntoViewIfNeeded();
    await screenshot(page, 'task-failed');
  });

  it('the review pane', async () => {
    const { page } = ui.browser;
    await page.getByTestId(`task-select-${ids.review}`).click();
    await page.getByTestId('review-file').first().waitFor();
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await page.getByTestId('approve-button').scrollIntoViewIfNeeded();
    await screenshot(page, 'review');
  });

  it('the destroy confirmation', async () => {
    const { page } = ui.browser;
    await page.getByTestId(`task-select-${ids.approved}`).click();
    await page.getByTestId('destroy-button').click();
    await page.getByTestId('destroy-confirm').waitFor();
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await page.getByTestId('destroy-cancel-button').click();
  });

  it('the credentials screen', async () => {
    const { page, problems } = ui.browser;
    await page.getByTestId('nav-credentials').click();
    await page.getByTestId('credentials-screen').locator('table').waitFor();
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await screenshot(page, 'credentials');
    expect(problems).toEqual([]);
  });
});
