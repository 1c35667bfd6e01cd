// What a key pressed inside a terminal does before xterm.js sees it: the keys
// that move the focus out (focus-keys.ts), copy with a selection, paste through
// the browser's paste event, and the search shortcut (Ctrl+Shift or Cmd).
import type { Terminal } from '@xterm/xterm';
import { focusKeyAction } from './focus-keys.js';

export interface TerminalKeyContext {
  term: Terminal;
  interactive: boolean;
  tabMovesFocus: boolean;
  toggleTabMovesFocus: () => void;
  /** Esc left the terminal: the view moves the focus somewhere sensible. */
  leave: () => void;
  openSearch: (() => void) | null;
}

/** xterm.js's custom key handler: false keeps the key from xterm.js. */
export function handleTerminalKey(ev: KeyboardEvent, ctx: TerminalKeyContext): boolean {
  if (ev.type !== 'keydown') return true;
  switch (focusKeyAction(ev, ctx)) {
    case 'toggle-tab-focus':
      ev.preventDefault();
      ctx.toggleTabMovesFocus();
      return false;
    case 'leave':
      ev.preventDefault();
      ctx.term.blur();
      ctx.leave();
      return false;
    case 'tab-out':
      // Not handled by xterm.js, so the browser moves the focus as for any other element.
      return false;
    case 'region':
      // Not sent to the program: the page's F6 handler moves to the next region.
      return false;
    default:
      break;
  }
  const mac = typeof navigator !== 'undefined' && /Mac|iPhone|iPad/.test(navigator.platform);
  const mod = mac ? ev.metaKey && !ev.ctrlKey : ev.ctrlKey && ev.shiftKey && !ev.metaKey;
  if (!mod) return true;
  switch (ev.code) {
    case 'KeyC':
      if (ctx.term.hasSelection()) {
        // No clipboard permission: the selection stays selected.
        void navigator.clipboard?.writeText(ctx.term.getSelection()).catch(() => {});
        ev.preventDefault();
      }
      return false;
    case 'KeyV':
      // Let the browser fire its paste event; xterm.js turns it into input.
      return false;
    case 'KeyF':
      if (ctx.openSearch) {
        ev.preventDefault();
        ctx.openSearch();
        return false;
      }
      return true;
    default:
      return true;
  }
}
