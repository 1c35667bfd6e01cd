// F6 and Shift+F6 move between the window's regions, as in VS Code and the
// browsers: each region is a landmark container with a data-region name, met
// in document order; focus goes to the region's own starting point
// (data-region-focus), else its first focusable element, else the region.

/** The region after (or before) `current` in `order`, wrapping; from outside any region, the first (or last). */
export function nextRegion(order: readonly string[], current: string | null, backwards: boolean): string | null {
  if (order.length === 0) return null;
  const at = current === null ? -1 : order.indexOf(current);
  if (at < 0) return backwards ? order[order.length - 1]! : order[0]!;
  const step = backwards ? -1 : 1;
  return order[(at + step + order.length) % order.length]!;
}

const FOCUSABLE = 'a[href], button:not([disabled]), input:not([disabled]):not([type="hidden"]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

function shown(el: HTMLElement): boolean {
  // jsdom lays nothing out: there every element counts as shown.
  if (navigator.userAgent.includes('jsdom')) return !el.closest('[hidden]');
  return el.getClientRects().length > 0 && el.getBoundingClientRect().height > 0;
}

export function regionsIn(root: ParentNode): HTMLElement[] {
  return [...root.querySelectorAll<HTMLElement>('[data-region]')].filter(shown);
}

/** Where focus goes when the user arrives in a region. */
export function regionStart(region: HTMLElement): HTMLElement {
  const own = region.querySelector<HTMLElement>('[data-region-focus]');
  if (own && shown(own)) {
    // A container (a board row) names where to start: its first focusable element.
    if (own.matches(FOCUSABLE) || own.hasAttribute('tabindex')) return own;
    const inner = [...own.querySelectorAll<HTMLElement>(FOCUSABLE)].find(shown);
    if (inner) return inner;
  }
  const first = [...region.querySelectorAll<HTMLElement>(FOCUSABLE)].find(shown);
  if (first) return first;
  if (!region.hasAttribute('tabindex')) region.tabIndex = -1;
  return region;
}

/** Moves the focus to the next (or previous) region; returns the region's name, or null when there is none. */
export function cycleRegion(doc: Document, backwards: boolean): string | null {
  const regions = regionsIn(doc);
  const names = regions.map((r) => r.dataset.region!);
  const here = (doc.activeElement?.closest('[data-region]') as HTMLElement | null)?.dataset.region ?? null;
  const name = nextRegion(names, here, backwards);
  if (name === null) return null;
  const target = regionStart(regions[names.indexOf(name)]!);
  target.focus();
  target.scrollIntoView?.({ block: 'nearest' });
  return name;
}

/** The task after (or before) `current` in the board's order, not wrapping; the first (or last) when none is selected. */
export function neighbourTask(ids: readonly string[], current: string | undefined, backwards: boolean): string | undefined {
  if (ids.length === 0) return undefined;
  const at = current === undefined ? -1 : ids.indexOf(current);
  if (at < 0) return backwards ? ids[ids.length - 1] : ids[0];
  return ids[Math.min(ids.length - 1, Math.max(0, at + (backwards ? -1 : 1)))];
}
