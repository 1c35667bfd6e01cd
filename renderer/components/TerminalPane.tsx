// The task's terminals as a pane below the main one (F6 region "terminals"),
// behind a splitter (WAI-ARIA window splitter): drag it, or focus it and use
// the arrow keys (Up: taller), Page Up/Down, Home/End; Enter or the
// Hide/Show button collapses and expands the pane. Collapsed, the tab bar
// stays and a tab brings the terminal back. Height and state survive a
// reload (localStorage); the terminal re-fits itself to the new size
// (TerminalView's resize observer).
import { useEffect, useRef, useState, type KeyboardEvent, type PointerEvent } from 'react';
import type { Task } from '../../common/domain.js';
import { clampHeight, loadPane, maxHeightFor, savePane, splitterKey, type PaneState } from '../keyboard/terminal-pane.js';
import { TerminalTabs, type TerminalTab } from './TerminalTabs.js';

function windowMax(): number {
  return maxHeightFor(typeof window === 'undefined' ? 900 : window.innerHeight);
}

export function TerminalPane({ task, tabs, current }: { task: Task; tabs: TerminalTab[]; current: TerminalTab | undefined }) {
  const [pane, setPane] = useState<PaneState>(loadPane);
  const [max, setMax] = useState(windowMax);
  const drag = useRef<{ y: number; height: number } | null>(null);
  const panelId = `terminal-panel-${task.id}`;

  useEffect(() => {
    const onResize = () => setMax(windowMax());
    window.addEventListener('resize', onResize);
    return () => window.removeEventListener('resize', onResize);
  }, []);

  const update = (next: PaneState) => {
    setPane(next);
    savePane(next);
  };
  const height = clampHeight(pane.height, max);

  const onKeyDown = (e: KeyboardEvent<HTMLDivElement>) => {
    const next = splitterKey(e.key, { ...pane, height }, max);
    if (!next) return;
    e.preventDefault();
    update(next);
  };
  const onPointerDown = (e: PointerEvent<HTMLDivElement>) => {
    if (e.button !== 0) return;
    e.preventDefault();
    e.currentTarget.setPointerCapture?.(e.pointerId);
    e.currentTarget.focus();
    drag.current = { y: e.clientY, height: pane.collapsed ? 0 : height };
  };
  const onPointerMove = (e: PointerEvent<HTMLDivElement>) => {
    if (!drag.current) return;
    // Dragging up makes the terminals taller.
    setPane({ collapsed: false, height: clampHeight(drag.current.height + drag.current.y - e.clientY, max) });
  };
  const onPointerUp = (e: PointerEvent<HTMLDivElement>) => {
    if (!drag.current) return;
    drag.current = null;
    e.currentTarget.releasePointerCapture?.(e.pointerId);
    savePane(pane);
  };

  return (
    <div className="terminal-pane" data-region="terminals" data-testid="terminal-region" data-collapsed={pane.collapsed} role="region" aria-label="Terminals">
      <div
        className="splitter"
        role="separator"
        aria-orientation="horizontal"
        aria-label="Terminal pane height"
        aria-controls={pane.collapsed || !current ? undefined : panelId}
        aria-valuemin={0}
        aria-valuemax={max}
        aria-valuenow={pane.collapsed ? 0 : height}
        aria-valuetext={pane.collapsed ? 'terminals hidden' : `terminals ${height} pixels high`}
        aria-keyshortcuts="ArrowUp ArrowDown Enter"
        tabIndex={0}
        title="Drag, or use the arrow keys, to resize the terminals; Enter hides or shows them"
        data-testid="terminal-splitter"
        onKeyDown={onKeyDown}
        onPointerDown={onPointerDown}
        onPointerMove={onPointerMove}
        onPointerUp={onPointerUp}
        onPointerCancel={onPointerUp}
      />
      <TerminalTabs
        task={task}
        tabs={tabs}
        current={current}
        panelId={panelId}
        height={pane.collapsed ? null : height}
        onToggle={() => update({ ...pane, height, collapsed: !pane.collapsed })}
        onExpand={() => pane.collapsed && update({ ...pane, height, collapsed: false })}
      />
    </div>
  );
}
