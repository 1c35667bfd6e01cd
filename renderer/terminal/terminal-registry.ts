// xterm.js instances keyed by terminal session id. Terminal bytes go from the
// bridge straight into xterm.js here, never through React state; React views
// only mount an instance's element into their pane. Instances outlive their
// view (switching tabs does not replay), up to a small number kept hidden.
//
// Flow control: bytes are acknowledged in term.write's callback, i.e. after
// xterm.js parsed them, so the host pauses the source when the renderer falls
// behind (see main/terminal/flow-control.ts).
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { SearchAddon } from '@xterm/addon-search';
import { Unicode11Addon } from '@xterm/addon-unicode11';
import type { WebglAddon } from '@xterm/addon-webgl';
import type { FactoryBridge, FactoryEvent, TerminalDataEvent } from '../../common/contract.js';
import { AckBatcher } from './ack-batcher.js';
import { DEFAULT_OPTIONS, SEARCH_DECORATIONS, type TerminalRegistryOptions, type TerminalSnapshot } from './registry-options.js';
import { loadRenderer } from './renderer-choice.js';
import { handleTerminalKey } from './terminal-keys.js';
import { terminalTail, terminalText } from './terminal-text.js';
import { WritePacer } from './write-pacer.js';

export type { TerminalPhase, TerminalRegistryOptions, TerminalSnapshot } from './registry-options.js';
export type { TerminalRendererKind } from './renderer-choice.js';

interface Entry {
  sessionId: string;
  term: Terminal;
  fit: FitAddon;
  search: SearchAddon;
  webgl: WebglAddon | null;
  host: HTMLDivElement | null;
  opened: boolean;
  interactive: boolean;
  /** Bumped on every attach so a late answer to an older attach is ignored. */
  generation: number;
  acks: AckBatcher;
  pacer: WritePacer;
  refs: number;
  lastUsed: number;
  resizeTimer: ReturnType<typeof setTimeout> | null;
  snapshot: TerminalSnapshot;
  listeners: Set<() => void>;
  searchResults: { index: number; count: number };
  onSearchOpen: (() => void) | null;
  onLeave: (() => void) | null;
  /** Typed before the attach answered (a shell just opened): sent once it is live, in order. */
  pendingInput: string;
}

/** What is kept of input typed while a terminal attaches (a paste included); more is dropped, and the pane says so. */
const MAX_PENDING_INPUT = 64 * 1024;

export class TerminalRegistry {
  private readonly entries = new Map<string, Entry>();
  /** Sessions whose instance was dropped while still live: keep acknowledging so the host is never held up. */
  private readonly draining = new Map<string, AckBatcher>();
  private readonly opts: TerminalRegistryOptions;
  private readonly offs: Array<() => void> = [];
  private disposed = false;
  private tabMovesFocus = false;

  constructor(
    private readonly bridge: FactoryBridge,
    options: Partial<TerminalRegistryOptions> = {},
  ) {
    this.opts = { ...DEFAULT_OPTIONS, ...options, terminalOptions: { ...DEFAULT_OPTIONS.terminalOptions, ...options.terminalOptions } };
    this.offs.push(bridge.onTerminalData((e) => this.onData(e)));
    this.offs.push(bridge.onEvent((e) => this.onEvent(e)));
    // The web transport reconnects after a drop; bytes sent meanwhile are gone, so replay.
    const withState = bridge as FactoryBridge & { onConnectionState?: (l: (s: string) => void) => () => void };
    if (typeof withState.onConnectionState === 'function') {
      let wasDown = false;
      this.offs.push(
        withState.onConnectionState((s) => {
          if (s === 'closed') wasDown = true;
          else if (s === 'open' && wasDown) {
            wasDown = false;
            this.reattachAll();
          }
        }),
      );
    }
  }

  /** Takes a reference to the session's instance, creating and attaching it if needed. */
  acquire(sessionId: string, opts: { interactive?: boolean } = {}): TerminalSnapshot {
    this.assertUsable();
    let e = this.entries.get(sessionId);
    if (!e) {
      e = this.create(sessionId);
      this.entries.set(sessionId, e);
      this.draining.get(sessionId)?.flush();
      this.draining.delete(sessionId);
      this.attach(e);
    }
    e.refs++;
    e.lastUsed = Date.now();
    if (opts.interactive !== undefined) this.applyInteractive(e, opts.interactive);
    return e.snapshot;
  }

  /** Drops a reference; unreferenced instances stay hidden until evicted. */
  release(sessionId: string): void {
    const e = this.entries.get(sessionId);
    if (!e) return;
    e.refs = Math.max(0, e.refs - 1);
    e.lastUsed = Date.now();
    this.evict();
  }

  /** Puts the session's terminal into `container` (opening xterm.js on first use) and fits it. */
  mount(sessionId: string, container: HTMLElement): void {
    const e = this.must(sessionId);
    if (!e.host) {
      e.host = container.ownerDocument.createElement('div');
      e.host.className = 'factory-terminal-host';
    }
    container.appendChild(e.host);
    if (!e.opened) {
      e.term.open(e.host);
      e.opened = true;
      e.webgl = loadRenderer(e.term, e.host, this.opts.webgl, (renderer) => {
        if (renderer === 'dom') e.webgl = null;
        this.update(e, { renderer });
      });
    } else {
      e.term.refresh(0, e.term.rows - 1);
    }
    this.fit(sessionId);
  }

  /** Takes the terminal out of its pane; the instance keeps receiving and acknowledging bytes. */
  unmount(sessionId: string): void {
    const e = this.entries.get(sessionId);
    e?.host?.remove();
  }

  /** Fits the terminal to its pane; the new size goes to the host pty (debounced). */
  fit(sessionId: string): void {
    const e = this.entries.get(sessionId);
    if (!e?.host?.isConnected) return;
    try {
      const dims = e.fit.proposeDimensions();
      if (!dims || !Number.isFinite(dims.cols) || !Number.isFinite(dims.rows)) return;
      const cols = Math.max(2, Math.min(1000, dims.cols));
      const rows = Math.max(1, Math.min(500, dims.rows));
      if (cols !== e.term.cols || rows !== e.term.rows) e.term.resize(cols, rows);
    } catch {
      /* not measurable yet (hidden pane) */
    }
  }

  /** Whether keyboard input and paste go to the session (off for stage output). */
  setInteractive(sessionId: string, interactive: boolean): void {
    const e = this.entries.get(sessionId);
    if (e) this.applyInteractive(e, interactive);
  }

  focus(sessionId: string): void {
    this.entries.get(sessionId)?.term.focus();
  }

  subscribe(sessionId: string, listener: () => void): () => void {
    const e = this.entries.get(sessionId);
    if (!e) return () => {};
    e.listeners.add(listener);
    return () => e.listeners.delete(listener);
  }

  snapshot(sessionId: string): TerminalSnapshot | null {
    return this.entries.get(sessionId)?.snapshot ?? null;
  }

  // --- search, clipboard ------------------------------------------------------

  findNext(sessionId: string, query: string, opts: { caseSensitive?: boolean; regex?: boolean } = {}): boolean {
    const e = this.entries.get(sessionId);
    if (!e || !query) return false;
    return e.search.findNext(query, { ...opts, decorations: SEARCH_DECORATIONS });
  }

  findPrevious(sessionId: string, query: string, opts: { caseSensitive?: boolean; regex?: boolean } = {}): boolean {
    const e = this.entries.get(sessionId);
    if (!e || !query) return false;
    return e.search.findPrevious(query, { ...opts, decorations: SEARCH_DECORATIONS });
  }

  clearSearch(sessionId: string): void {
    const e = this.entries.get(sessionId);
    if (!e) return;
    e.search.clearDecorations();
    e.term.clearSelection();
  }

  searchResults(sessionId: string): { index: number; count: number } {
    return this.entries.get(sessionId)?.searchResults ?? { index: -1, count: 0 };
  }

  /** Called when the user presses the search shortcut inside the terminal. */
  onSearchRequested(sessionId: string, handler: (() => void) | null): void {
    const e = this.entries.get(sessionId);
    if (e) e.onSearchOpen = handler;
  }

  /** Called when the user presses Esc to leave the terminal; the view moves the focus somewhere sensible. */
  onLeaveRequested(sessionId: string, handler: (() => void) | null): void {
    const e = this.entries.get(sessionId);
    if (e) e.onLeave = handler;
  }

  /** Turns "Tab moves focus" on or off for every terminal (Ctrl+M in a terminal does the same). */
  setTabMovesFocus(on: boolean): void {
    this.tabMovesFocus = on;
    for (const e of this.entries.values()) this.update(e, { tabMovesFocus: on });
  }

  selection(sessionId: string): string {
    const e = this.entries.get(sessionId);
    return e && e.term.hasSelection() ? e.term.getSelection() : '';
  }

  /** Pastes text as typed input (bracketed paste when the program asked for it). */
  paste(sessionId: string, text: string): void {
    const e = this.entries.get(sessionId);
    if (!e || !e.interactive) return;
    if (e.opened) e.term.paste(text);
    else this.input(sessionId, text.replace(/\r?\n/g, '\r'));
  }

  /** Sends input as if typed (e.g. a "send Ctrl-C" button: input(id, '\x03')). */
  input(sessionId: string, data: string): void {
    const e = this.entries.get(sessionId);
    if (!e || !e.interactive) return;
    // Not known yet whether the session is live: the keys wait for the attach answer, as a
    // terminal's would for its shell, instead of being lost.
    if (e.snapshot.info === null && e.snapshot.phase === 'attaching') {
      if (e.pendingInput.length + data.length > MAX_PENDING_INPUT) {
        this.update(e, { error: 'input typed before the terminal attached was too long; type it again' });
        return;
      }
      e.pendingInput += data;
      return;
    }
    if (e.snapshot.info?.status !== 'live') return;
    // What the keystroke answers (a prompt after Ctrl+C) must not wait behind a flood's pacing.
    e.pacer.userInput();
    this.bridge.call('terminal.write', { sessionId, data }).catch((err: unknown) => this.update(e, { error: messageOf(err) }));
  }

  /** The terminal buffer as plain text (scrollback + screen), e.g. for tests and "copy all". */
  text(sessionId: string): string {
    const e = this.entries.get(sessionId);
    return e ? terminalText(e.term) : '';
  }

  /** The last rows of the buffer as plain text (cheap enough to poll). */
  tail(sessionId: string, rows: number): string {
    const e = this.entries.get(sessionId);
    return e ? terminalTail(e.term, rows) : '';
  }

  /** Re-attaches every instance (after the transport reconnected): reset, replay, continue live. */
  reattachAll(): void {
    for (const e of this.entries.values()) this.attach(e);
  }

  sessions(): string[] {
    return [...this.entries.keys()];
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const off of this.offs.splice(0)) off();
    for (const e of this.entries.values()) this.destroy(e);
    this.entries.clear();
    for (const d of this.draining.values()) d.flush();
    this.draining.clear();
  }

  // --- internals ---------------------------------------------------------------

  private create(sessionId: string): Entry {
    const term = new Terminal({
      ...this.opts.terminalOptions,
      scrollback: this.opts.scrollbackLines,
      // unicode11 and search decorations are "proposed" APIs in xterm.js.
      allowProposedApi: true,
    });
    const fit = new FitAddon();
    const search = new SearchAddon();
    term.loadAddon(fit);
    term.loadAddon(search);
    try {
      term.loadAddon(new Unicode11Addon());
      term.unicode.activeVersion = '11';
    } catch {
      /* older widths are fine */
    }
    const acks = new AckBatcher((bytes) => this.sendAck(sessionId, bytes), this.opts.ack);
    const e: Entry = {
      sessionId,
      term,
      fit,
      search,
      webgl: null,
      host: null,
      opened: false,
      interactive: true,
      generation: 0,
      acks,
      pacer: new WritePacer((data, parsed) => term.write(data, parsed), (bytes) => acks.add(bytes), this.opts.pacing),
      refs: 0,
      lastUsed: Date.now(),
      resizeTimer: null,
      snapshot: { sessionId, phase: 'attaching', info: null, error: null, renderer: 'none', tabMovesFocus: this.tabMovesFocus },
      listeners: new Set(),
      searchResults: { index: -1, count: 0 },
      onSearchOpen: null,
      onLeave: null,
      pendingInput: '',
    };
    search.onDidChangeResults((r) => {
      e.searchResults = { index: r.resultIndex, count: r.resultCount };
      this.update(e, {});
    });
    term.onData((data) => this.input(sessionId, data));
    term.onResize(({ cols, rows }) => {
      if (e.resizeTimer) clearTimeout(e.resizeTimer);
      e.resizeTimer = setTimeout(() => {
        e.resizeTimer = null;
        if (e.snapshot.info?.status !== 'live') return;
        this.bridge.call('terminal.resize', { sessionId, cols, rows }).catch(() => {
          /* the session may have ended meanwhile; its status event says so */
        });
      }, 50);
    });
    term.attachCustomKeyEventHandler((ev) => this.onKey(e, ev));
    return e;
  }

  private attach(e: Entry): void {
    const gen = ++e.generation;
    e.acks.reset();
    // Output held or unparsed is part of the scrollback the attach answer replays,
    // and belongs to the old account on the host.
    e.pacer.discard();
    this.update(e, { phase: 'attaching', error: null });
    this.bridge
      .call('terminal.attach', { sessionId: e.sessionId })
      .then(({ info, scrollback }) => {
        if (gen !== e.generation || !this.entries.has(e.sessionId)) return;
        // A re-attach replays everything: start from a clean screen.
        if (gen > 1) e.term.reset();
        // Not mounted yet: draw at the session's size until the pane fits it.
        if (!e.host?.isConnected && info.cols >= 2 && info.rows >= 1) e.term.resize(info.cols, info.rows);
        const bytes = base64ToBytes(scrollback);
        if (bytes.length > 0) e.term.write(bytes);
        this.update(e, { phase: 'attached', info });
        const typed = e.pendingInput;
        e.pendingInput = '';
        if (typed) this.input(e.sessionId, typed);
        // The pane may have been fitted before the session was known to be live.
        if (info.status === 'live' && (e.term.cols !== info.cols || e.term.rows !== info.rows) && e.host?.isConnected) {
          // A session that ended meanwhile has no size to set; the next fit sends it again.
          this.bridge.call('terminal.resize', { sessionId: e.sessionId, cols: e.term.cols, rows: e.term.rows }).catch(() => {});
        }
      })
      .catch((err: unknown) => {
        if (gen !== e.generation) return;
        e.pendingInput = '';
        this.update(e, { phase: 'failed', error: messageOf(err) });
      });
  }

  private onData(ev: TerminalDataEvent): void {
    const e = this.entries.get(ev.sessionId);
    if (!e) {
      this.draining.get(ev.sessionId)?.add(ev.data.byteLength);
      return;
    }
    // Before the attach answer arrives, bytes are part of the scrollback it carries
    // (the host flushes pending output into it; the transport is ordered).
    if (e.snapshot.phase !== 'attached') return;
    e.pacer.push(ev.data);
  }

  private onEvent(ev: FactoryEvent): void {
    if (ev.type !== 'terminal.status' && ev.type !== 'terminal.opened') return;
    const e = this.entries.get(ev.info.id);
    if (e) {
      if (ev.info.status !== 'live') {
        // The session ended: its last output shows now, not at the end of a flood interval.
        e.pacer.flush();
        e.acks.flush();
      }
      this.update(e, { info: ev.info });
    }
    if (ev.info.status !== 'live') this.draining.delete(ev.info.id);
  }

  private sendAck(sessionId: string, bytes: number): void {
    this.bridge.call('terminal.ack', { sessionId, bytes }).catch(() => {
      /* ended or disconnected: nothing to hold up any more */
    });
  }

  private onKey(e: Entry, ev: KeyboardEvent): boolean {
    return handleTerminalKey(ev, {
      term: e.term,
      interactive: e.interactive,
      tabMovesFocus: this.tabMovesFocus,
      toggleTabMovesFocus: () => this.setTabMovesFocus(!this.tabMovesFocus),
      leave: () => e.onLeave?.(),
      openSearch: e.onSearchOpen,
    });
  }

  private applyInteractive(e: Entry, interactive: boolean): void {
    e.interactive = interactive;
    e.term.options.disableStdin = !interactive;
    e.term.options.cursorBlink = interactive;
  }

  private evict(): void {
    const hidden = [...this.entries.values()].filter((e) => e.refs === 0).sort((a, b) => a.lastUsed - b.lastUsed);
    while (hidden.length > this.opts.maxHidden) {
      const e = hidden.shift()!;
      this.entries.delete(e.sessionId);
      this.destroy(e);
      // Still live: the host keeps counting what it sends us; keep acknowledging.
      const ended = e.snapshot.info !== null && e.snapshot.info.status !== 'live';
      if (!ended) this.draining.set(e.sessionId, new AckBatcher((bytes) => this.sendAck(e.sessionId, bytes), this.opts.ack));
    }
  }

  private destroy(e: Entry): void {
    e.generation++;
    // Output held or unparsed never will be parsed here: acknowledge it, or the
    // host would count it against a still-live session forever.
    e.acks.add(e.pacer.close());
    e.acks.flush();
    if (e.resizeTimer) clearTimeout(e.resizeTimer);
    e.listeners.clear();
    e.host?.remove();
    e.term.dispose();
  }

  private update(e: Entry, patch: Partial<TerminalSnapshot>): void {
    e.snapshot = { ...e.snapshot, ...patch };
    for (const l of [...e.listeners]) l();
  }

  private must(sessionId: string): Entry {
    const e = this.entries.get(sessionId);
    if (!e) throw new Error(`terminal ${sessionId} is not acquired`);
    return e;
  }

  private assertUsable(): void {
    if (this.disposed) throw new Error('the terminal registry is disposed');
  }
}

export function base64ToBytes(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
