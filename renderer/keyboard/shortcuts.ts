// The app's keyboard shortcuts as data: what the matcher reads and what the
// "Keyboard shortcuts" list shows, so the two cannot disagree.
//
// Keys chosen not to clash with Chromium, Firefox or Electron's default menu
// (whose mnemonics are Alt+F/E/V/W/H): Alt plus a letter that none of them
// uses, Alt+Up/Down (Alt+Left/Right are Back/Forward), and no single
// character key, so a screen reader's quick keys and typing are never taken
// (WCAG 2.1.4).

export type ShortcutId = 'cycle-regions' | 'cycle-regions-back' | 'new-task' | 'next-task' | 'previous-task' | 'approve' | 'reject' | 'shortcuts-help';

export interface Shortcut {
  id: ShortcutId;
  /** As aria-keyshortcuts spells it (and the list shows it). */
  keys: string;
  does: string;
}

export const SHORTCUTS: readonly Shortcut[] = [
  { id: 'cycle-regions', keys: 'F6', does: 'Move to the next part of the window (header, new task, board, task, terminals, sandbox security), also out of a terminal' },
  { id: 'cycle-regions-back', keys: 'Shift+F6', does: 'Move to the previous part of the window' },
  { id: 'new-task', keys: 'Alt+N', does: 'New task: go to the task form' },
  { id: 'next-task', keys: 'Alt+ArrowDown', does: 'Select the next task on the board' },
  { id: 'previous-task', keys: 'Alt+ArrowUp', does: 'Select the previous task on the board' },
  { id: 'approve', keys: 'Alt+A', does: 'Approve the task in review (asks first)' },
  { id: 'reject', keys: 'Alt+R', does: 'Reject the task in review (asks first)' },
  { id: 'shortcuts-help', keys: 'Alt+/', does: 'Show this list' },
];

/** Shortcuts that live in one place rather than the whole window; listed with the others. */
export const LOCAL_SHORTCUTS: readonly { keys: string; does: string }[] = [
  { keys: 'Control+Enter', does: 'In the new task form: Start' },
  { keys: 'Escape', does: 'Leave a stage terminal, or cancel a confirmation' },
  { keys: 'Control+M', does: 'In a shell: turn "Tab moves focus" on or off' },
  { keys: 'ArrowUp / ArrowDown', does: 'On the terminal splitter: make the terminals taller or shorter; Enter hides or shows them' },
];

export function keysOf(id: ShortcutId): string {
  return SHORTCUTS.find((s) => s.id === id)!.keys;
}

/** Readable form of an aria-keyshortcuts value ("Alt+ArrowDown" → "Alt+↓"). */
export function keysLabel(keys: string): string {
  return keys.replace(/ArrowDown/g, '↓').replace(/ArrowUp/g, '↑').replace(/Control/g, 'Ctrl');
}

export type KeyLike = Pick<KeyboardEvent, 'type' | 'key' | 'code' | 'altKey' | 'ctrlKey' | 'metaKey' | 'shiftKey'>;

/** Where the key was pressed: typing into a field, or inside a terminal. */
export interface KeyPlace {
  typing: boolean;
  inTerminal: boolean;
}

/**
 * Which shortcut a keydown is, or null. Only F6 works everywhere; the others
 * never fire while the user types in a field or a terminal, where the key is
 * theirs. Letters match by physical key (code) so Alt+N works on any layout and
 * on a Mac, where Option+N types a dead key.
 */
export function matchShortcut(ev: KeyLike, place: KeyPlace): ShortcutId | null {
  if (ev.type !== 'keydown') return null;
  const noMods = !ev.altKey && !ev.ctrlKey && !ev.metaKey;
  if (ev.key === 'F6' && noMods) return ev.shiftKey ? 'cycle-regions-back' : 'cycle-regions';
  if (place.typing || place.inTerminal) return null;
  if (!ev.altKey || ev.ctrlKey || ev.metaKey || ev.shiftKey) return null;
  switch (ev.code) {
    case 'KeyN':
      return 'new-task';
    case 'KeyA':
      return 'approve';
    case 'KeyR':
      return 'reject';
    case 'Slash':
      return 'shortcuts-help';
    case 'ArrowDown':
      return 'next-task';
    case 'ArrowUp':
      return 'previous-task';
    default:
      return null;
  }
}

/** Ctrl+Enter (Cmd+Enter on a Mac) in the task form starts the task. */
export function isStartKey(ev: KeyLike): boolean {
  return ev.type === 'keydown' && ev.key === 'Enter' && !ev.altKey && !ev.shiftKey && (ev.ctrlKey !== ev.metaKey);
}

/** A field that takes typed text (where a letter or arrow key is the user's, not ours). */
export function isTypingTarget(el: Element | null): boolean {
  if (!el) return false;
  if (el instanceof HTMLTextAreaElement || el instanceof HTMLSelectElement) return true;
  if (el instanceof HTMLInputElement) {
    // Buttons in disguise take no text.
    return !['button', 'submit', 'reset', 'checkbox', 'radio', 'range', 'color', 'file', 'image'].includes(el.type);
  }
  return el instanceof HTMLElement && el.isContentEditable === true;
}

export function isInTerminal(el: Element | null): boolean {
  return !!el?.closest('.xterm');
}
