// The layout at the window sizes people use (1280×800, 1920×1080, and a small
// 1000×700), in Chromium with the scripted app behind the real web host: the
// board's setup and six stage cells all show beside the task column with no
// sideways scroll (not the page, not the board), a new task's terminal is in
// the window after Start, and Approve is on screen once the review is open. The
// new-task form's buttons stay on one line next to a long repository name.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STAGE_NAMES } from '../../common/domain.js';
import { screenshot } from './support/axe.js';
import { chromiumMissingReason } from './support/browser.js';
import { HELD, ScriptedApp } from './support/scripted-app.js';
import { HOSTILE_REVIEW } from './support/scripted-reviews.js';
import { ScriptedUi } from './support/scripted-ui.js';
import { openNewTask, startTask } from './support/ui-driver.js';

const missing = chromiumMissingReason();
if (missing) console.log(`layout skipped: ${missing}`);

const SIZES = [
  { width: 1280, height: 800 },
  { width: 1920, height: 1080 },
  { width: 1000, height: 700 },
] as const;

describe.skipIf(!!missing)('layout at 1280×800, 1920×1080 and 1000×700', () => {
  let ui: ScriptedUi;
  let reviewId = '';
  let longId = '';

  beforeAll(async () => {
    ui = await ScriptedUi.start(new ScriptedApp(40));
  });
  afterAll(async () => {
    await ui?.close();
  });

  it('has a board with a long-titled task and a task in review', async () => {
    const { page } = ui.browser;
    await page.goto(ui.host.url);
    await page.setViewportSize(SIZES[0]);
    // Held: its result waits, so it stays a running task whose terminal is the pane to see.
    longId = await startTask(page, ui.repo, `Replace the hand-written argument parser in the command line tool with a well-kept library and keep every flag ${HELD}`);
    // After Start the form folds and the new task's terminal is in the window, not below the fold.
    expect(await page.getByTestId('new-task-form').isHidden()).toBe(true);
    const term = await page.getByTestId('terminal-pane').evaluate((e) => ({ top: e.getBoundingClientRect().top, innerHeight }));
    expect(term.top).toBeLessThan(term.innerHeight - 200);
    reviewId = await startTask(page, ui.repo, `${HOSTILE_REVIEW} Add an invoice export`);
    await expect.poll(() => page.getByTestId(`task-phase-${reviewId}`).textContent(), { timeout: 30_000 }).toBe('review');
  });

  for (const size of SIZES) {
    it(`${size.width}×${size.height}: setup and all six stage columns show, nothing scrolls sideways`, async () => {
      const { page } = ui.browser;
      await page.setViewportSize(size);
      await page.evaluate(() => window.scrollTo(0, 0));
      const m = await page.evaluate(({ stages, longId }) => {
        const board = document.querySelector('[data-testid="stage-board"]')!.getBoundingClientRect();
        const heads = [...document.querySelectorAll<HTMLElement>('[data-testid="stage-board"] thead th')].slice(1);
        const scroller = document.querySelector('[data-testid="stage-board"] .board-scroll')!;
        const title = document.querySelector(`[data-testid="task-select-${longId}"]`) as HTMLElement;
        return {
          pageOverflow: document.documentElement.scrollWidth - innerWidth,
          boardOverflow: scroller.scrollWidth - scroller.clientWidth,
          // Every element wider than its scroll box, anywhere in the window: none may need a sideways scroll.
          wide: [...document.querySelectorAll<HTMLElement>('.side, .detail, .board-scroll')]
            .filter((e) => e.scrollWidth > e.clientWidth + 1)
            .map((e) => `${e.className}: ${e.scrollWidth} in ${e.clientWidth}`),
          heads: heads.map((h) => h.title),
          cut: heads
            .map((h) => ({ name: h.title, r: h.getBoundingClientRect() }))
            .filter(({ r }) => r.left < board.left || r.right > Math.min(board.right, innerWidth) || r.width < 30)
            .map(({ name, r }) => `${name}: ${Math.round(r.left)}..${Math.round(r.right)} of board ${Math.round(board.left)}..${Math.round(board.right)}`),
          stages,
          // A long title stays on one line (the full title is its tooltip).
          titleLines: Math.round(title.getBoundingClientRect().height / (parseFloat(getComputedStyle(title).fontSize) * 1.4)),
          titleTooltip: title.title,
        };
      }, { stages: [...STAGE_NAMES], longId });
      expect(m.heads).toEqual(['setup', ...STAGE_NAMES]);
      expect(m.pageOverflow).toBeLessThanOrEqual(0);
      expect(m.boardOverflow).toBeLessThanOrEqual(0);
      expect(m.wide).toEqual([]);
      expect(m.cut).toEqual([]);
      expect(m.titleLines).toBe(1);
      expect(m.titleTooltip).toContain('keep every flag');
      await screenshot(page, `board-${size.width}x${size.height}`);
    });

    it(`${size.width}×${size.height}: opening a task in review from the board shows Approve in the window`, async () => {
      const { page } = ui.browser;
      await page.setViewportSize(size);
      await page.evaluate(() => window.scrollTo(0, 0));
      // Opening the task from the board shows its review, Approve included, without scrolling by hand.
      await page.getByTestId(`task-select-${reviewId}`).click();
      await page.getByTestId('review-file').first().waitFor();
      await page.waitForTimeout(100);
      const box = await page.getByTestId('approve-button').evaluate((e) => {
        const r = e.getBoundingClientRect();
        const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
        return { top: r.top, bottom: r.bottom, innerHeight, onTop: hit === e || e.contains(hit) };
      });
      expect(box.top).toBeGreaterThanOrEqual(0);
      expect(box.bottom).toBeLessThanOrEqual(box.innerHeight);
      expect(box.onTop).toBe(true); // not hidden under something else
      await screenshot(page, `review-${size.width}x${size.height}`);
    });
  }

  it('the new-task form keeps each button and the keep box on one line next to a long repository name, at every size', async () => {
    const { page } = ui.browser;
    await openNewTask(page);
    await page.getByTestId('repo-path-input').fill('/home/me/src/the-billing-service-with-a-rather-long-repository-name');
    // The button names the repository in full (its accessible name); only what shows may be cut.
    expect(await page.getByTestId('quick-sandbox-button').textContent()).toContain('the-billing-service-with-a-rather-long-repository-name');
    for (const size of SIZES) {
      await page.setViewportSize(size);
      await page.getByTestId('quick-sandbox-button').scrollIntoViewIfNeeded();
      const m = await page.evaluate(() => {
        // Lines an element's text takes: the tops of its text's boxes, those within 8 px of each other as one.
        const lines = (e: Element) => {
          const tops: number[] = [];
          const walk = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
          for (let n = walk.nextNode(); n; n = walk.nextNode()) {
            if (!n.textContent?.trim()) continue;
            const r = document.createRange();
            r.selectNodeContents(n);
            tops.push(...[...r.getClientRects()].filter((b) => b.width > 0).map((b) => b.top));
          }
          return tops.sort((a, b) => a - b).filter((t, i) => i === 0 || t - tops[i - 1]! > 8).length;
        };
        const form = document.querySelector('[data-testid="new-task-form"]')!;
        const actions = [...form.querySelectorAll<HTMLElement>('.actions > button, .actions > label')];
        const side = document.querySelector('.side')!;
        return {
          lines: Object.fromEntries(actions.map((e) => [e.dataset.testid ?? e.querySelector('[data-testid]')?.getAttribute('data-testid'), lines(e)])),
          sideOverflow: side.scrollWidth - side.clientWidth,
        };
      });
      expect(Object.keys(m.lines)).toEqual(['start-button', 'quick-sandbox-button', 'agent-session-button', 'quick-sandbox-keep']);
      expect(m.lines, `${size.width}×${size.height}`).toEqual({ 'start-button': 1, 'quick-sandbox-button': 1, 'agent-session-button': 1, 'quick-sandbox-keep': 1 });
      expect(m.sideOverflow).toBeLessThanOrEqual(0);
      await screenshot(page, `form-long-repo-${size.width}x${size.height}`);
    }
  });
});
