// A sandbox returns a 2 MiB patch of 700,000 short lines, in Chromium through
// the web host (scripted app behind it), with the renderer built as users get
// it. The review must open quickly and stay responsive while the user scrolls:
// measured in the page, printed, and bounded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { chromiumMissingReason } from './support/browser.js';
import { HELD, ScriptedApp } from './support/scripted-app.js';
import { HUGE_PATCH_BYTES, HUGE_PATCH_LINES, HUGE_REVIEW } from './support/scripted-reviews.js';
import { ProductionUi } from './support/production-ui.js';
import { startTask } from './support/ui-driver.js';

const missing = chromiumMissingReason();
if (missing) console.log(`review-huge skipped: ${missing}`);

/** Patch rows as drawn, in today's virtualised view or a plain one (so the spec can measure either). */
const ROW = '[data-testid="review-patch"] .vrows-sizer > div, pre[data-testid="review-patch"] > div';

// Bounds a plain (non-virtualised) patch view misses by far: it builds 700,000
// nodes first, and the page did not even take the click within 30 s. Measured
// here with the virtualised view on 2 busy cores (load 7–15): first paint
// 0.25–0.6 s, median event-to-paint 12–50 ms, worst under 0.25 s.
const FIRST_PAINT_MS = 3_000;
const MEDIAN_LATENCY_MS = 100;
const WORST_LATENCY_MS = 1_000;

interface Figures {
  latencies: number[];
  frames: number[];
  blanks: number;
  /** Main-thread tasks over 50 ms while scrolling (ms each). */
  longTasks: number[];
}

function stats(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)] ?? NaN, worst: s[s.length - 1] ?? NaN, n: s.length };
}

/** In the page: time from a click on the task to the first patch rows painted. */
async function armFirstPaint(page: Page, taskId: string): Promise<void> {
  await page.evaluate(
    ({ select, row }) => {
      const w = window as unknown as { __review: { click: number; rows: number; paint: number } };
      w.__review = { click: 0, rows: 0, paint: 0 };
      document.addEventListener('click', (e) => {
        if ((e.target as Element).closest(select)) w.__review.click = e.timeStamp;
      }, { capture: true });
      const mo = new MutationObserver(() => {
        if (w.__review.rows || !document.querySelector(row)?.textContent?.startsWith('diff --git a/gen/0.txt')) return;
        w.__review.rows = performance.now();
        mo.disconnect();
        // A message posted from a frame callback runs after that frame is painted.
        requestAnimationFrame(() => {
          const ch = new MessageChannel();
          ch.port1.onmessage = () => (w.__review.paint = performance.now());
          ch.port2.postMessage(0);
        });
      });
      mo.observe(document.body, { childList: true, subtree: true });
    },
    { select: `[data-testid="task-select-${taskId}"]`, row: ROW },
  );
}

/** In the page: for each wheel or key event, the time to the next painted frame, and whether rows were under the box's middle then. */
async function armScrollProbe(page: Page): Promise<void> {
  await page.evaluate((row) => {
    const w = window as unknown as { __scroll: Figures & { stop: boolean } };
    const box = document.querySelector('[data-testid="review-patch"]')!;
    w.__scroll = { latencies: [], frames: [], blanks: 0, longTasks: [], stop: false };
    let last = 0;
    const frame = (t: number) => {
      if (last) w.__scroll.frames.push(t - last);
      last = t;
      if (!w.__scroll.stop) requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
    const answer = (e: Event) => {
      const start = e.timeStamp;
      requestAnimationFrame(() => {
        const ch = new MessageChannel();
        ch.port1.onmessage = () => {
          w.__scroll.latencies.push(performance.now() - start);
          const r = box.getBoundingClientRect();
          const hit = document.elementFromPoint(r.left + 60, r.top + r.height / 2);
          if (!hit?.closest(row)) w.__scroll.blanks++;
        };
        ch.port2.postMessage(0);
      });
    };
    // Listeners stay from the first call on; each call starts a fresh record.
    if ((w as { __probed?: boolean }).__probed) return;
    (w as { __probed?: boolean }).__probed = true;
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) w.__scroll.longTasks.push(e.duration);
    }).observe({ type: 'longtask' });
    window.addEventListener('wheel', answer, { passive: true, capture: true });
    window.addEventListener('keydown', answer, { capture: true });
  }, ROW);
}

async function takeScrollFigures(page: Page): Promise<Figures> {
  await page.waitForTimeout(300); // the last events' frames
  return page.evaluate(() => {
    const w = window as unknown as { __scroll: Figures & { stop: boolean } };
    w.__scroll.stop = true;
    const { latencies, frames, blanks, longTasks } = w.__scroll;
    w.__scroll = { latencies: [], frames: [], blanks: 0, longTasks: [], stop: true };
    return { latencies, frames, blanks, longTasks };
  });
}

describe.skipIf(!!missing)('review of a 2 MiB, 700,000-line patch in Chromium', () => {
  let ui: ProductionUi;

  beforeAll(async () => {
    ui = await ProductionUi.start(new ScriptedApp(40));
  });
  afterAll(async () => {
    await ui?.close();
  });

  it('paints the review quickly and answers wheel and keys while scrolling', async () => {
    const { page, problems } = ui.browser;
    await page.goto(ui.host.url);
    // The huge result comes back while another task is on screen; the user then opens it with a click.
    const hugeId = await startTask(page, ui.repo, `${HUGE_REVIEW} ${HELD} regenerate the fixtures`);
    const smallId = await startTask(page, ui.repo, 'something small');
    await expect.poll(() => page.getByTestId(`task-phase-${smallId}`).textContent(), { timeout: 30_000 }).toBe('review');
    await page.locator(ROW).first().waitFor(); // the small one's review is drawn: the next rows are the huge one's
    await expect.poll(() => ui.app.isHeld(hugeId), { timeout: 30_000 }).toBe(true);
    ui.app.release(hugeId);
    await expect.poll(() => page.getByTestId(`task-phase-${hugeId}`).textContent(), { timeout: 30_000 }).toBe('review');
    const review = await ui.app.api['tasks.review']({ taskId: hugeId }); // computed before the user looks, as at pull-back
    expect(review.patch.length).toBe(HUGE_PATCH_BYTES);
    expect(review.patch.split('\n').length - 1).toBe(HUGE_PATCH_LINES);

    await armFirstPaint(page, hugeId);
    await page.getByTestId(`task-select-${hugeId}`).click();
    await page.waitForFunction(() => (window as unknown as { __review: { paint: number } }).__review.paint > 0, null, { timeout: 120_000, polling: 100 });
    const first = await page.evaluate(() => (window as unknown as { __review: { click: number; rows: number; paint: number } }).__review);
    const firstPaint = first.paint - first.click;
    const drawn = await page.locator(ROW).count();
    console.log(`review-huge: first paint ${firstPaint.toFixed(0)} ms after the click (rows in the DOM ${(first.rows - first.click).toFixed(0)} ms); ${drawn} rows drawn of ${HUGE_PATCH_LINES}`);

    const box = page.getByTestId('review-patch');
    await box.scrollIntoViewIfNeeded();
    const rect = (await box.boundingBox())!;
    await page.mouse.move(rect.x + rect.width / 2, rect.y + rect.height / 2);
    await armScrollProbe(page);
    for (let i = 0; i < 60; i++) await page.mouse.wheel(0, 700 + (i % 7) * 300);
    const wheel = await takeScrollFigures(page);

    await box.focus();
    await armScrollProbe(page);
    for (let i = 0; i < 40; i++) {
      await page.keyboard.press('PageDown');
      await page.waitForTimeout(33); // a held key repeats about 30 times a second
    }
    await page.keyboard.press('End');
    const keys = await takeScrollFigures(page);
    await expect.poll(() => page.locator(ROW).filter({ hasText: /^\+Z$/ }).count(), { timeout: 10_000 }).toBe(1);

    const w = stats(wheel.latencies);
    const k = stats(keys.latencies);
    const f = stats([...wheel.frames, ...keys.frames]);
    console.log(
      `review-huge: wheel event to paint median ${w.median.toFixed(1)} ms, worst ${w.worst.toFixed(1)} ms (${w.n} events, ${wheel.blanks} blank); ` +
        `key event to paint median ${k.median.toFixed(1)} ms, worst ${k.worst.toFixed(1)} ms (${k.n} events, ${keys.blanks} blank); ` +
        `frame interval while scrolling median ${f.median.toFixed(1)} ms, worst ${f.worst.toFixed(1)} ms; ` +
        `long tasks: ${[...wheel.longTasks, ...keys.longTasks].map((d) => d.toFixed(0)).join(', ') || 'none'}`,
    );

    expect(firstPaint).toBeLessThan(FIRST_PAINT_MS);
    expect(drawn).toBeLessThan(200);
    expect(w.n).toBe(60);
    expect(k.n).toBe(41);
    expect(w.median).toBeLessThan(MEDIAN_LATENCY_MS);
    expect(k.median).toBeLessThan(MEDIAN_LATENCY_MS);
    expect(Math.max(w.worst, k.worst)).toBeLessThan(WORST_LATENCY_MS);
    expect(wheel.blanks + keys.blanks).toBe(0);
    expect(problems).toEqual([]);
  });
});
