// A task's terminals as real tabs (WAI-ARIA tabs pattern): one tab stop for the
// tab list (roving tabindex), arrow keys, Home and End move between tabs and
// show them; the shell buttons sit outside the tab list. Esc in a terminal
// brings the focus back to its tab.
import { useRef, type KeyboardEvent } from 'react';
import type { Task } from '../../common/domain.js';
import { useController, useFactory } from '../state/context.js';
import { TerminalSlot } from './TerminalSlot.js';

export interface TerminalTab {
  sessionId: string;
  label: string;
  kind: 'stage' | 'shell' | 'host';
  state?: string;
  testId?: string;
}

export function TerminalTabs({ task, tabs, current }: { task: Task; tabs: TerminalTab[]; current: TerminalTab | undefined }) {
  const controller = useController();
  const busy = useFactory((s) => s.busy[task.id]);
  const list = useRef<HTMLDivElement>(null);
  const sandboxUp = task.sandbox.status === 'running';
  const tabId = (t: TerminalTab) => `tab-${t.sessionId}`;
  const panelId = `terminal-panel-${task.id}`;

  // Compared as data, not put in a selector: no escaping to get right (and jsdom has no CSS.escape).
  const focusTab = (sessionId: string) =>
    [...(list.current?.querySelectorAll<HTMLElement>('[role="tab"]') ?? [])].find((el) => el.dataset.sessionId === sessionId)?.focus();
  const onKeyDown = (e: KeyboardEvent<HTMLDivElement>) => {
    const at = tabs.findIndex((t) => t.sessionId === current?.sessionId);
    const next =
      e.key === 'ArrowRight' ? (at + 1) % tabs.length
      : e.key === 'ArrowLeft' ? (at - 1 + tabs.length) % tabs.length
      : e.key === 'Home' ? 0
      : e.key === 'End' ? tabs.length - 1
      : -1;
    if (next < 0 || !tabs[next]) return;
    e.preventDefault();
    controller.selectTab(task.id, tabs[next].sessionId);
    focusTab(tabs[next].sessionId);
  };

  return (
    <div className="terminals">
      <div className="tabs-bar">
        <div className="tabs" role="tablist" aria-label="Terminals" ref={list} onKeyDown={onKeyDown}>
          {tabs.map((t) => {
            const selected = current?.sessionId === t.sessionId;
            return (
              <button
                key={t.sessionId}
                id={tabId(t)}
                type="button"
                role="tab"
                aria-selected={selected}
                aria-controls={selected ? panelId : undefined}
                tabIndex={selected ? 0 : -1}
                className={selected ? 'tab active' : 'tab'}
                data-testid={t.testId ?? `terminal-tab-${t.kind === 'stage' ? t.label : t.sessionId}`}
                data-session-id={t.sessionId}
                onClick={() => controller.selectTab(task.id, t.sessionId)}
              >
                {t.label} <span className="muted">{t.state}</span>
              </button>
            );
          })}
        </div>
        <div className="tab-actions">
          <button
            type="button"
            className="tab add"
            data-testid="shell-button"
            disabled={!sandboxUp || busy === 'shell'}
            title={sandboxUp ? 'Open an interactive shell inside the sandbox' : 'The sandbox is not running'}
            onClick={() => void controller.openShell(task.id)}
          >
            + Shell
          </button>
          <button
            type="button"
            className="tab add"
            data-testid="host-shell-button"
            disabled={busy === 'host shell'}
            title={`Open a shell on this computer in ${task.repoPath} (e.g. to inspect the approved branch)`}
            onClick={() => void controller.openHostShell(task.id)}
          >
            Host shell
          </button>
        </div>
      </div>
      {current ? (
        <div role="tabpanel" id={panelId} aria-labelledby={tabId(current)} className="terminal-panel">
          <TerminalSlot sessionId={current.sessionId} interactive={current.kind !== 'stage'} onLeave={() => focusTab(current.sessionId)} />
        </div>
      ) : (
        <p className="hint">No terminal output yet.</p>
      )}
    </div>
  );
}
