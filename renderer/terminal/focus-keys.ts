// Keys that move the keyboard focus out of a terminal instead of into it, so a
// terminal never traps a keyboard user (WCAG 2.1.2). As in VS Code, Ctrl+M
// toggles "Tab moves focus": while it is on, Tab and Shift+Tab leave the
// terminal and Esc hands focus back to the page. A read-only terminal (stage
// output) takes no input, so there they always do. F6 (Shift+F6) always goes
// to the page, which moves to the next (previous) region of the window, as
// VS Code does for its terminal.

export type FocusKeyAction = 'toggle-tab-focus' | 'leave' | 'tab-out' | 'region' | null;

export function focusKeyAction(ev: KeyboardEvent, opts: { interactive: boolean; tabMovesFocus: boolean }): FocusKeyAction {
  if (ev.type !== 'keydown') return null;
  const plain = !ev.ctrlKey && !ev.altKey && !ev.metaKey;
  if (ev.key === 'F6' && plain) return 'region';
  if (ev.code === 'KeyM' && ev.ctrlKey && !ev.altKey && !ev.metaKey && !ev.shiftKey) return 'toggle-tab-focus';
  const releases = !opts.interactive || opts.tabMovesFocus;
  if (!releases) return null;
  if (ev.key === 'Escape' && plain && !ev.shiftKey) return 'leave';
  if (ev.key === 'Tab' && plain) return 'tab-out';
  return null;
}
