// The terminal pane's height and whether it is collapsed, kept in localStorage
// so a reload keeps them. What is read back is checked: the storage is shared
// with every page of the origin and may hold anything.

export const TERMINAL_PANE_KEY = 'factory.terminalPane';
/** Below this the terminal's toolbar and a few rows no longer fit. */
export const PANE_MIN = 200;
export const PANE_MAX = 1200;
export const PANE_DEFAULT = 360;
/** One arrow key press; Page Up/Down move five. */
export const PANE_STEP = 40;

export interface PaneState {
  height: number;
  collapsed: boolean;
}

export function clampHeight(h: number, max = PANE_MAX): number {
  if (!Number.isFinite(h)) return PANE_DEFAULT;
  return Math.round(Math.min(Math.max(PANE_MIN, max), Math.max(PANE_MIN, h)));
}

/** The largest height that still leaves room above the pane in a window this tall. */
export function maxHeightFor(windowHeight: number): number {
  return clampHeight(windowHeight - 160);
}

function storage(): Storage | undefined {
  try {
    return globalThis.localStorage ?? undefined;
  } catch {
    return undefined; // storage disabled: the pane works, it just forgets
  }
}

export function loadPane(): PaneState {
  try {
    const v: unknown = JSON.parse(storage()?.getItem(TERMINAL_PANE_KEY) ?? 'null');
    if (v && typeof v === 'object') {
      const { height, collapsed } = v as Record<string, unknown>;
      return {
        height: typeof height === 'number' ? clampHeight(height) : PANE_DEFAULT,
        collapsed: collapsed === true,
      };
    }
  } catch {
    // Not JSON: as if nothing was stored.
  }
  return { height: PANE_DEFAULT, collapsed: false };
}

export function savePane(state: PaneState): void {
  try {
    storage()?.setItem(TERMINAL_PANE_KEY, JSON.stringify({ height: clampHeight(state.height), collapsed: state.collapsed }));
  } catch {
    // Full or disabled: the pane keeps its state until the page is reloaded.
  }
}

/** What a key on the splitter does to the pane: a new height, a toggle, or nothing. Up makes the terminals taller. */
export function splitterKey(key: string, state: PaneState, max: number): PaneState | null {
  const by = (d: number): PaneState => ({ collapsed: false, height: clampHeight(state.height + d, max) });
  switch (key) {
    case 'ArrowUp':
      return by(PANE_STEP);
    case 'ArrowDown':
      return by(-PANE_STEP);
    case 'PageUp':
      return by(5 * PANE_STEP);
    case 'PageDown':
      return by(-5 * PANE_STEP);
    case 'Home':
      return { collapsed: false, height: PANE_MIN };
    case 'End':
      return { collapsed: false, height: clampHeight(max, max) };
    case 'Enter':
      return { ...state, collapsed: !state.collapsed };
    default:
      return null;
  }
}
