// A task run three ways, compared and decided in Chromium through the web host
// (the scripted app behind it serves the fan-out API through the real fan-out
// service; way 3's tests fail). The board shows one row with three lanes; the
// comparison has no serious or critical axe violation in either colour scheme;
// with the keyboard only, the user moves between the ways, shows the diff
// between ways 1 and 2, opens way 2 and its diff, and approves it: way 2 alone
// lands, the others end, the failed way stays with its failure.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeViolations, screenshot, seriousViolations } from './support/axe.js';
import { chromiumMissingReason } from './support/browser.js';
import { focused, tabTo } from './support/keyboard.js';
import { failsWay, ScriptedApp } from './support/scripted-app.js';
import { ScriptedUi } from './support/scripted-ui.js';
import { openNewTask } from './support/ui-driver.js';

const missing = chromiumMissingReason();
if (missing) console.log(`fanout-compare skipped: ${missing}`);

describe.skipIf(!!missing)('a task run three ways, compared in Chromium', () => {
  let ui: ScriptedUi;
  let app: ScriptedApp;

  beforeAll(async () => {
    app = new ScriptedApp(40);
    ui = await ScriptedUi.start(app);
    await ui.browser.page.setViewportSize({ width: 1400, height: 900 });
  });
  afterAll(async () => {
    await ui?.close();
  });

  it('is axe clean, and with the keyboard alone moves between ways, opens a diff and approves one', async () => {
    const { page, problems } = ui.browser;
    await page.goto(ui.host.url);
    await openNewTask(page);
    await page.getByTestId('repo-path-input').fill(ui.repo);
    await page.getByTestId('task-text-input').fill(`Add a sum helper ${failsWay(3)}`);
    await page.getByTestId('ways-input').fill('3');
    await page.getByTestId('start-button').click();

    const compare = page.getByTestId('fanout-compare');
    await compare.waitFor();
    const group = (await compare.getAttribute('data-group'))!;
    expect(group).toMatch(/^fan-[a-z0-9]{8}$/);
    const ways = async () => (await app.api['tasks.list']({})).filter((t) => t.fanout?.group === group).sort((a, b) => a.fanout!.way - b.fanout!.way);
    expect((await ways()).map((t) => t.fanout!.way)).toEqual([1, 2, 3]);
    const [id1, id2, id3] = (await ways()).map((t) => t.id) as [string, string, string];

    // One board row for the three ways, a lane each.
    const cell = page.getByTestId(`fanout-cell-${group}`);
    expect(await cell.getByTestId(/^fanout-lane-/).count()).toBe(3);
    expect(await page.getByTestId(`task-select-${id2}`).count()).toBe(0);

    const state = (way: number) => page.getByTestId(`fanout-way-${way}`).getAttribute('data-state');
    await expect.poll(async () => [await state(1), await state(2), await state(3)], { timeout: 30_000 }).toEqual(['review', 'review', 'failed']);
    await expect.poll(() => cell.getByTestId('fanout-lane-3').getAttribute('data-phase')).toBe('failed');
    expect(await page.getByTestId('fanout-tests-1').textContent()).toBe('4 passed, 0 failed');
    expect(await page.getByTestId('fanout-tests-2').textContent()).toBe('5 passed, 0 failed');
    expect(await page.getByTestId('fanout-tests-3').textContent()).toBe('3 passed, 1 failed');
    expect(await page.getByTestId('fanout-error-3').textContent()).toContain('StageFailed');
    // A failed way has nothing to approve.
    expect(await page.getByTestId('fanout-approve-3').count()).toBe(0);

    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      await compare.scrollIntoViewIfNeeded();
      expect(describeViolations(await seriousViolations(page)), scheme).toEqual([]);
      await screenshot(page, scheme === 'light' ? 'fanout-compare' : 'fanout-compare-dark');
    }
    await page.emulateMedia({ colorScheme: 'light' });

    // Keyboard only from here. The way headings are one Tab stop; arrows move between them.
    await tabTo(page, 'fanout-way-1');
    const keys: Array<[string, string]> = [['ArrowRight', 'fanout-way-2'], ['ArrowRight', 'fanout-way-3'], ['ArrowRight', 'fanout-way-3'], ['Home', 'fanout-way-1'], ['End', 'fanout-way-3'], ['ArrowLeft', 'fanout-way-2']];
    for (const [key, to] of keys) {
      await page.keyboard.press(key);
      const f = await focused(page);
      expect(f.testId, `after ${key}`).toBe(to);
      expect(f.invisible, `after ${key}`).toBeNull();
    }
    // The diff between the two ways in review (way 1 to way 2, as offered), from the keyboard.
    expect(await page.getByTestId('ways-diff-from').inputValue()).toBe('1');
    expect(await page.getByTestId('ways-diff-to').inputValue()).toBe('2');
    await tabTo(page, 'ways-diff-show', { max: 20 });
    expect((await focused(page)).invisible).toBeNull();
    await page.keyboard.press('Enter');
    const between = page.getByTestId('ways-diff-patch');
    await expect.poll(() => between.textContent()).toContain('+hello, factory (way 2)');
    expect(await between.textContent()).toContain('-hello, factory (way 1)');
    expect(await page.getByTestId('ways-diff-summary').textContent()).toBe("What way 2 has that way 1 has not: lines with − are way 1's, lines with + way 2's.");
    // The scripted result's markup is text in this view too, never run.
    expect(await between.textContent()).toContain('+<script>window.__pwned = 1</script>');
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(describeViolations(await seriousViolations(page)), 'diff between ways').toEqual([]);
    await screenshot(page, 'fanout-ways-diff');
    await tabTo(page, 'fanout-way-2', { max: 20, backwards: true });

    // Enter opens way 2: its view, its review with the diff.
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByTestId('task-detail').getAttribute('data-task-id')).toBe(id2);
    await page.getByTestId('review-file').first().waitFor();
    await tabTo(page, 'review-file-view', { max: 80 });
    await page.keyboard.press('Enter');
    await page.getByTestId('file-diff').waitFor();
    expect(describeViolations(await seriousViolations(page)), 'way 2 opened').toEqual([]);

    // Approve way 2: a confirm step whose confirm button takes the focus.
    await tabTo(page, 'fanout-approve-2', { max: 80, backwards: true });
    await page.keyboard.press('Enter');
    await page.getByTestId('fanout-confirm').waitFor();
    expect(await page.getByTestId('fanout-confirm').textContent()).toContain('Approve way 2?');
    expect((await focused(page)).testId).toBe('fanout-confirmed');
    expect(app.approvals).toEqual([]);
    await page.keyboard.press('Enter');

    await expect.poll(async () => [await state(1), await state(2), await state(3)]).toEqual(['rejected', 'approved', 'failed']);
    expect(app.approvals.map((a) => a.taskId)).toEqual([id2]);
    const after = new Map((await ways()).map((t) => [t.id, t]));
    expect(after.get(id1)!.phase).toBe('rejected');
    expect(after.get(id1)!.sandbox.status).toBe('destroyed');
    expect(after.get(id3)!.phase).toBe('failed');
    expect(after.get(id3)!.error?.name).toBe('StageFailed');
    // Decided: no Approve and no Reject all left.
    expect(await page.getByTestId(/^fanout-approve-/).count()).toBe(0);
    expect(await page.getByTestId('fanout-reject-all').count()).toBe(0);
    expect(describeViolations(await seriousViolations(page)), 'decided').toEqual([]);
    expect(problems).toEqual([]);
  });
});
