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

export interface TerminalTabsProps {
  task: Task;
  tabs: TerminalTab[];
  current: TerminalTab | undefined;
  panelId: string;
  /** The terminal's height in pixels, or null when the pane is collapsed (the tab bar stays). */
  height: number | null;
  onToggle: () => void;
  /** A tab was chosen while collapsed: show the terminal again. */
  onExpand: () => void;
}

export function TerminalTabs({ task, tabs, current, panelId, height, onToggle, onExpand }: TerminalTabsProps) {
  const controller = useController();
  const busy = useFactory((s) => s.busy[task.id]);
  const list = useRef<HTMLDivElement>(null);
  const sandboxUp = task.sandbox.status === 'running';
  const tabId = (t: TerminalTab) => `tab-${t.sessionId}`;
  const collapsed = height === null;

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
    onExpand();
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
                aria-controls={selected && !collapsed ? panelId : undefined}
                tabIndex={selected ? 0 : -1}
                className={selected ? 'tab active' : 'tab'}
                data-testid={t.testId ?? `terminal-tab-${t.kind === 'stage' ? t.label : t.sessionId}`}
                data-session-id={t.sessionId}
                // F6 into the terminals lands on the tab shown.
                data-region-focus={selected ? '' : undefined}
                onClick={() => {
                  controller.selectTab(task.id, t.sessionId);
                  onExpand();
                }}
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
            data-testid="terminal-collapse-button"
            aria-expanded={!collapsed}
            aria-controls={collapsed || !current ? undefined : panelId}
            title={collapsed ? 'Show the terminals (or choose a tab)' : 'Hide the terminals, leaving their tabs'}
            onClick={onToggle}
          >
            {collapsed ? 'Show terminals' : 'Hide terminals'}
          </button>
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
      {collapsed ? null : current ? (
        <div role="tabpanel" id={panelId} aria-labelledby={tabId(current)} className="terminal-panel" style={{ height }}>
          <TerminalSlot sessionId={current.sessionId} interactive={current.kind !== 'stage'} onLeave={() => focusTab(current.sessionId)} />
        </div>
      ) : (
        <p className="hint">No terminal output yet.</p>
      )}
    </div>
  );
}
