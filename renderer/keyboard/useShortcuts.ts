// The window's keyboard shortcuts (shortcuts.ts): one keydown listener on the
// document. A terminal hands F6 to the page (focus-keys.ts); every other
// shortcut stays quiet while the user types in a field or a terminal.
import { useEffect } from 'react';
import type { FactoryController } from '../state/controller.js';
import { useController } from '../state/context.js';
import { cycleRegion, neighbourTask } from './regions.js';
import { isInTerminal, isTypingTarget, matchShortcut, type ShortcutId } from './shortcuts.js';

export function useShortcuts(): void {
  const controller = useController();
  useEffect(() => {
    const onKey = (ev: KeyboardEvent) => {
      const el = document.activeElement;
      const id = matchShortcut(ev, { typing: isTypingTarget(el), inTerminal: isInTerminal(el) });
      if (id && runShortcut(controller, id)) ev.preventDefault();
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, [controller]);
}

/** Runs a shortcut; false when it does not apply here (the key then does what it would have done). */
export function runShortcut(controller: FactoryController, id: ShortcutId): boolean {
  const store = controller.store;
  const s = store.getState();
  // The shortcuts list is modal: behind it nothing can take the focus.
  if (s.shortcutsOpen) return false;
  switch (id) {
    case 'cycle-regions':
    case 'cycle-regions-back':
      return cycleRegion(document, id === 'cycle-regions-back') !== null;
    case 'new-task':
      if (s.view !== 'tasks') controller.showView('tasks');
      store.setState({ formOpen: true, formFocus: (store.getState().formFocus ?? 0) + 1 });
      return true;
    case 'next-task':
    case 'previous-task': {
      if (s.view !== 'tasks') return false;
      // The board's rows as shown (its filter and archive applied), top to bottom.
      const ids = [...document.querySelectorAll<HTMLElement>('[data-testid="stage-board"] tbody tr[data-testid^="task-row-"]')].map((r) =>
        r.dataset.testid!.slice('task-row-'.length),
      );
      const next = neighbourTask(ids, s.selectedTaskId, id === 'previous-task');
      if (!next) return false;
      controller.select(next);
      const card = [...document.querySelectorAll<HTMLElement>('[data-testid^="task-select-"]')].find((b) => b.dataset.testid === `task-select-${next}`);
      card?.focus();
      card?.scrollIntoView?.({ block: 'nearest' });
      return true;
    }
    case 'approve':
    case 'reject': {
      const task = s.selectedTaskId ? s.tasks[s.selectedTaskId] : undefined;
      if (s.view !== 'tasks' || !task || task.phase !== 'review' || task.decision || !s.reviews[task.id] || s.busy[task.id]) return false;
      store.setState({ decisionAsk: { taskId: task.id, kind: id, n: (s.decisionAsk?.n ?? 0) + 1 } });
      return true;
    }
    case 'shortcuts-help':
      store.setState({ shortcutsOpen: true });
      return true;
  }
}
