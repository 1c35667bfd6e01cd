// One terminal pane: mounts the session's xterm.js instance from the registry,
// fits it to the pane, and offers search and copy/paste. Only metadata (phase,
// status, errors, search counts) is React state; bytes never are.
import '@xterm/xterm/css/xterm.css';
import './terminal.css';
import { useCallback, useEffect, useRef, useState, useSyncExternalStore, type KeyboardEvent } from 'react';
import type { FactoryBridge } from '../../common/contract.js';
import { terminalRegistryFor } from './shared-registry.js';
import type { TerminalRegistry, TerminalSnapshot } from './terminal-registry.js';

export interface TerminalViewProps {
  sessionId: string;
  /** How the view reaches the host (window.factory, the WebSocket bridge, ...). */
  transport: FactoryBridge;
  /** Accept keyboard input and paste (false for stage output). Default true. */
  interactive?: boolean;
  /** Use this registry instead of the shared one for `transport`. */
  registry?: TerminalRegistry;
  autoFocus?: boolean;
  className?: string;
  /** Where focus goes when the user presses Esc to leave the terminal (default: the pane itself). */
  onLeave?: () => void;
}

const EMPTY: TerminalSnapshot = { sessionId: '', phase: 'attaching', info: null, error: null, renderer: 'none', tabMovesFocus: false };

export function TerminalView({ sessionId, transport, interactive = true, registry, autoFocus = true, className, onLeave }: TerminalViewProps) {
  const reg = registry ?? terminalRegistryFor(transport);
  const viewport = useRef<HTMLDivElement>(null);
  const pane = useRef<HTMLDivElement>(null);
  const leave = useRef(onLeave);
  leave.current = onLeave;
  const [searchOpen, setSearchOpen] = useState(false);
  const [acquired, setAcquired] = useState(0);

  useEffect(() => {
    const el = viewport.current;
    if (!el) return;
    reg.acquire(sessionId, { interactive });
    reg.mount(sessionId, el);
    setAcquired((n) => n + 1);
    if (autoFocus) reg.focus(sessionId);
    reg.onSearchRequested(sessionId, () => setSearchOpen(true));
    reg.onLeaveRequested(sessionId, () => (leave.current ? leave.current() : pane.current?.focus()));
    let frame = 0;
    const ro =
      typeof ResizeObserver === 'function'
        ? new ResizeObserver(() => {
            cancelAnimationFrame(frame);
            frame = requestAnimationFrame(() => reg.fit(sessionId));
          })
        : null;
    ro?.observe(el);
    return () => {
      ro?.disconnect();
      cancelAnimationFrame(frame);
      reg.onSearchRequested(sessionId, null);
      reg.onLeaveRequested(sessionId, null);
      reg.unmount(sessionId);
      reg.release(sessionId);
    };
    // interactive changes are applied by the effect below without remounting.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [reg, sessionId]);

  useEffect(() => {
    if (acquired > 0) reg.setInteractive(sessionId, interactive);
  }, [reg, sessionId, interactive, acquired]);

  // `acquired` is a deliberate dependency: subscribe again once the registry holds this session's terminal.
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const subscribe = useCallback((l: () => void) => reg.subscribe(sessionId, l), [reg, sessionId, acquired]);
  const snap = useSyncExternalStore(subscribe, () => reg.snapshot(sessionId) ?? EMPTY);

  const status = snap.info?.status;
  const copy = () => {
    const text = reg.selection(sessionId);
    // No clipboard permission: the selection stays selected for Ctrl+Shift+C.
    if (text) void navigator.clipboard?.writeText(text).catch(() => {});
    reg.focus(sessionId);
  };
  const paste = () => {
    void navigator.clipboard
      ?.readText()
      .then((t) => reg.paste(sessionId, t))
      .catch(() => {})
      .finally(() => reg.focus(sessionId));
  };

  return (
    <div
      ref={pane}
      tabIndex={-1}
      className={`factory-terminal${className ? ` ${className}` : ''}`}
      data-testid="terminal-pane"
      data-session-id={sessionId}
      data-phase={snap.phase}
      data-status={status ?? ''}
      data-renderer={snap.renderer}
    >
      <div className="factory-terminal-toolbar">
        <span className={`factory-terminal-status factory-terminal-status-${status ?? snap.phase}`} data-testid="terminal-status">
          {statusText(snap)}
        </span>
        <span className="factory-terminal-spacer" />
        <span className="factory-terminal-keys" data-testid="terminal-keys-hint">
          {interactive && !snap.tabMovesFocus ? 'Ctrl+M: Tab moves focus' : 'Esc or Tab leaves'}
        </span>
        <button
          type="button"
          aria-pressed={snap.tabMovesFocus}
          title="Tab moves focus (Ctrl+M in the terminal): Tab and Esc leave the terminal instead of going to it"
          data-testid="terminal-tab-focus-button"
          onClick={() => reg.setTabMovesFocus(!snap.tabMovesFocus)}
        >
          Tab moves focus
        </button>
        <button type="button" title="Search (Ctrl+Shift+F)" data-testid="terminal-search-button" onClick={() => setSearchOpen((o) => !o)}>
          Search
        </button>
        <button type="button" title="Copy selection (Ctrl+Shift+C)" onClick={copy}>
          Copy
        </button>
        {interactive ? (
          <button type="button" title="Paste (Ctrl+Shift+V)" onClick={paste} disabled={status !== 'live'}>
            Paste
          </button>
        ) : null}
      </div>
      <div className="factory-terminal-viewport" ref={viewport}>
        {searchOpen ? <SearchBox registry={reg} sessionId={sessionId} onClose={() => setSearchOpen(false)} /> : null}
      </div>
      {snap.error ? (
        <div className="factory-terminal-error" role="alert" data-testid="terminal-error">
          {snap.error}
        </div>
      ) : null}
    </div>
  );
}

function statusText(s: TerminalSnapshot): string {
  if (s.phase === 'failed') return 'unavailable';
  if (s.phase === 'attaching' || !s.info) return 'connecting…';
  switch (s.info.status) {
    case 'live':
      return 'live';
    case 'exited':
      return s.info.exitCode === null || s.info.exitCode === undefined ? 'exited' : `exited (${s.info.exitCode})`;
    case 'lost':
      return 'connection lost';
  }
}

function SearchBox({ registry, sessionId, onClose }: { registry: TerminalRegistry; sessionId: string; onClose: () => void }) {
  const input = useRef<HTMLInputElement>(null);
  const [query, setQuery] = useState('');
  const [caseSensitive, setCaseSensitive] = useState(false);
  const [found, setFound] = useState<boolean | null>(null);
  const subscribe = useCallback((l: () => void) => registry.subscribe(sessionId, l), [registry, sessionId]);
  // Counts as a primitive string so the snapshot is stable between renders.
  const counts = useSyncExternalStore(subscribe, () => {
    const r = registry.searchResults(sessionId);
    return `${r.index}/${r.count}`;
  });
  const [index, count] = counts.split('/').map(Number) as [number, number];

  useEffect(() => {
    input.current?.focus();
    return () => registry.clearSearch(sessionId);
  }, [registry, sessionId]);

  const run = (backwards: boolean, q = query) => {
    const ok = backwards
      ? registry.findPrevious(sessionId, q, { caseSensitive })
      : registry.findNext(sessionId, q, { caseSensitive });
    setFound(q ? ok : null);
  };
  const onKey = (e: KeyboardEvent<HTMLInputElement>) => {
    if (e.key === 'Enter') {
      e.preventDefault();
      run(e.shiftKey);
    } else if (e.key === 'Escape') {
      e.preventDefault();
      onClose();
      registry.focus(sessionId);
    }
  };

  return (
    <div className="factory-terminal-search" data-testid="terminal-search">
      <input
        ref={input}
        type="search"
        placeholder="Find"
        aria-label="Find in terminal"
        data-testid="terminal-search-input"
        value={query}
        spellCheck={false}
        onChange={(e) => {
          setQuery(e.target.value);
          run(false, e.target.value);
        }}
        onKeyDown={onKey}
      />
      <span className="factory-terminal-search-count" data-testid="terminal-search-count">
        {found === false ? 'no results' : count > 0 ? `${index + 1} of ${count}` : ''}
      </span>
      <label title="Match case">
        <input type="checkbox" checked={caseSensitive} onChange={(e) => setCaseSensitive(e.target.checked)} />
        Aa
      </label>
      <button type="button" title="Previous (Shift+Enter)" onClick={() => run(true)}>
        ↑
      </button>
      <button type="button" title="Next (Enter)" onClick={() => run(false)}>
        ↓
      </button>
      <button
        type="button"
        title="Close (Escape)"
        onClick={() => {
          onClose();
          registry.focus(sessionId);
        }}
      >
        ×
      </button>
    </div>
  );
}
