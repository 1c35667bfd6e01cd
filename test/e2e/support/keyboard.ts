// Driving the page with the keyboard only, checking at every step that the
// focused element shows it (a focus ring a sighted keyboard user can see).
import type { Page } from 'playwright-core';

export interface Focused {
  /** data-testid of the focused element, or of the nearest ancestor that has one. */
  testId: string | null;
  tag: string;
  role: string | null;
  /** Inside an xterm.js terminal (its hidden textarea has the focus). */
  inTerminal: boolean;
  /** Why the focus is not visible, or null when it is. */
  invisible: string | null;
}

export async function focused(page: Page): Promise<Focused> {
  return page.evaluate(() => {
    const el = document.activeElement as HTMLElement | null;
    if (!el || el === document.body || el === document.documentElement) {
      return { testId: null, tag: 'body', role: null, inTerminal: false, invisible: 'focus is on the page body' };
    }
    const ring = (e: Element) => {
      const cs = getComputedStyle(e);
      return (cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) > 0) || cs.boxShadow !== 'none';
    };
    const pane = el.closest('.factory-terminal');
    const inTerminal = !!el.closest('.xterm');
    let invisible: string | null = null;
    if (inTerminal) {
      // xterm.js focuses a hidden textarea: the ring is drawn around the pane.
      if (!pane || !ring(pane)) invisible = 'a focused terminal shows no ring around its pane';
    } else if (!el.matches(':focus-visible')) invisible = `${el.tagName} is focused but not :focus-visible`;
    else if (!ring(el)) invisible = `${el.tagName} is :focus-visible but draws no outline`;
    const r = el.getBoundingClientRect();
    if (!invisible && !inTerminal && (r.bottom < 0 || r.top > innerHeight || r.width === 0 || r.height === 0)) {
      invisible = `${el.tagName} is focused outside the viewport`;
    }
    return {
      testId: el.closest('[data-testid]')?.getAttribute('data-testid') ?? null,
      tag: el.tagName,
      role: el.getAttribute('role'),
      inTerminal,
      invisible,
    };
  });
}

/**
 * Presses Tab (or Shift+Tab) until the element with `testId` has the focus,
 * failing if any step lands on something that does not show its focus.
 * Returns how many presses it took.
 */
export async function tabTo(page: Page, testId: string, opts: { max?: number; backwards?: boolean } = {}): Promise<number> {
  const seen: string[] = [];
  for (let n = 1; n <= (opts.max ?? 40); n++) {
    await page.keyboard.press(opts.backwards ? 'Shift+Tab' : 'Tab');
    const f = await focused(page);
    seen.push(f.inTerminal ? `terminal(${f.testId})` : `${f.tag}:${f.testId}`);
    if (f.invisible) throw new Error(`after ${n} Tab presses: ${f.invisible} (path: ${seen.join(' > ')})`);
    if (f.testId === testId && !f.inTerminal) return n;
  }
  throw new Error(`${testId} not reached with Tab (path: ${seen.join(' > ')})`);
}
