// The keyboard's pure logic (which key is which shortcut, where it must stay
// quiet, region and task order, the splitter's keys and stored state) and the
// shortcuts in the app in jsdom: Approve and Reject ask first, Esc cancels.
import { act, cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cycleRegion, neighbourTask, nextRegion } from '../../renderer/keyboard/regions.js';
import { isInTerminal, isStartKey, isTypingTarget, matchShortcut, SHORTCUTS, type KeyLike } from '../../renderer/keyboard/shortcuts.js';
import { clampHeight, loadPane, PANE_DEFAULT, PANE_MIN, savePane, splitterKey, TERMINAL_PANE_KEY } from '../../renderer/keyboard/terminal-pane.js';
import { focusKeyAction } from '../../renderer/terminal/focus-keys.js';
import { handleTerminalKey, type TerminalKeyContext } from '../../renderer/terminal/terminal-keys.js';
import { openReview, review } from './support/review-harness.js';

const key = (over: Partial<KeyLike>): KeyLike => ({ type: 'keydown', key: '', code: '', altKey: false, ctrlKey: false, metaKey: false, shiftKey: false, ...over });
const free = { typing: false, inTerminal: false };

describe('which key is which shortcut', () => {
  it('reads F6 and Shift+F6 everywhere, in a field and in a terminal too', () => {
    for (const place of [free, { typing: true, inTerminal: false }, { typing: false, inTerminal: true }]) {
      expect(matchShortcut(key({ key: 'F6', code: 'F6' }), place)).toBe('cycle-regions');
      expect(matchShortcut(key({ key: 'F6', code: 'F6', shiftKey: true }), place)).toBe('cycle-regions-back');
    }
    // Ctrl+F6 or Alt+F6 are someone else's (the window manager's, the browser's).
    expect(matchShortcut(key({ key: 'F6', ctrlKey: true }), free)).toBeNull();
    expect(matchShortcut(key({ key: 'F6', altKey: true }), free)).toBeNull();
    expect(matchShortcut(key({ type: 'keyup', key: 'F6' }), free)).toBeNull();
  });

  it('reads Alt+letters by the physical key, so a Mac (Option+N types a dead key) and other layouts work', () => {
    expect(matchShortcut(key({ key: 'n', code: 'KeyN', altKey: true }), free)).toBe('new-task');
    expect(matchShortcut(key({ key: '˜', code: 'KeyN', altKey: true }), free)).toBe('new-task');
    expect(matchShortcut(key({ key: 'å', code: 'KeyA', altKey: true }), free)).toBe('approve');
    expect(matchShortcut(key({ key: 'r', code: 'KeyR', altKey: true }), free)).toBe('reject');
    expect(matchShortcut(key({ key: 'ArrowDown', code: 'ArrowDown', altKey: true }), free)).toBe('next-task');
    expect(matchShortcut(key({ key: 'ArrowUp', code: 'ArrowUp', altKey: true }), free)).toBe('previous-task');
    expect(matchShortcut(key({ key: '/', code: 'Slash', altKey: true }), free)).toBe('shortcuts-help');
  });

  it('stays quiet while the user types in a field or a terminal, and for keys that type characters', () => {
    const altA = key({ key: 'a', code: 'KeyA', altKey: true });
    expect(matchShortcut(altA, { typing: true, inTerminal: false })).toBeNull();
    expect(matchShortcut(altA, { typing: false, inTerminal: true })).toBeNull();
    // AltGr is Ctrl+Alt on Windows: it types characters (AltGr+Q is @ on a German keyboard).
    expect(matchShortcut(key({ key: 'ä', code: 'KeyA', altKey: true, ctrlKey: true }), free)).toBeNull();
    expect(matchShortcut(key({ key: 'A', code: 'KeyA', altKey: true, shiftKey: true }), free)).toBeNull();
    // No single character key is a shortcut (WCAG 2.1.4): a screen reader's quick keys stay its own.
    for (const k of ['a', 'n', 'j', 'k', '?', '/']) expect(matchShortcut(key({ key: k, code: `Key${k.toUpperCase()}` }), free)).toBeNull();
    // Alt+Left and Alt+Right are Back and Forward.
    expect(matchShortcut(key({ key: 'ArrowLeft', code: 'ArrowLeft', altKey: true }), free)).toBeNull();
  });

  it('lists every shortcut with its keys once', () => {
    expect(new Set(SHORTCUTS.map((s) => s.keys)).size).toBe(SHORTCUTS.length);
    expect(SHORTCUTS.map((s) => s.id)).toEqual(['cycle-regions', 'cycle-regions-back', 'new-task', 'next-task', 'previous-task', 'approve', 'reject', 'shortcuts-help']);
  });

  it('starts with Ctrl+Enter or Cmd+Enter, not Enter, Shift+Enter or Ctrl+Cmd+Enter', () => {
    expect(isStartKey(key({ key: 'Enter', ctrlKey: true }))).toBe(true);
    expect(isStartKey(key({ key: 'Enter', metaKey: true }))).toBe(true);
    expect(isStartKey(key({ key: 'Enter' }))).toBe(false);
    expect(isStartKey(key({ key: 'Enter', shiftKey: true, ctrlKey: true }))).toBe(false);
    expect(isStartKey(key({ key: 'Enter', ctrlKey: true, metaKey: true }))).toBe(false);
  });

  it('knows a field that takes text from a control that does not, and an element inside a terminal', () => {
    document.body.innerHTML = `
      <input id="text"><input id="search" type="search"><input id="box" type="checkbox"><input id="btn" type="button">
      <textarea id="area"></textarea><select id="sel"></select><div id="edit" contenteditable="true"></div><button id="b"></button>
      <div class="xterm"><textarea id="xt"></textarea></div>`;
    const el = (id: string) => document.getElementById(id);
    expect(['text', 'search', 'area', 'sel'].map((id) => isTypingTarget(el(id)))).toEqual([true, true, true, true]);
    expect(['box', 'btn', 'b'].map((id) => isTypingTarget(el(id)))).toEqual([false, false, false]);
    // jsdom does not compute isContentEditable; the browser does (checked in Chromium by the e2e).
    expect(isTypingTarget(null)).toBe(false);
    expect(isInTerminal(el('xt'))).toBe(true);
    expect(isInTerminal(el('b'))).toBe(false);
  });
});

describe('a terminal lets F6 go to the page', () => {
  it('reports F6 as "region" in a stage log and in a shell, whether or not Tab moves focus', () => {
    for (const opts of [
      { interactive: false, tabMovesFocus: false },
      { interactive: true, tabMovesFocus: false },
      { interactive: true, tabMovesFocus: true },
    ]) {
      expect(focusKeyAction(new KeyboardEvent('keydown', { key: 'F6' }), opts)).toBe('region');
      expect(focusKeyAction(new KeyboardEvent('keydown', { key: 'F6', shiftKey: true }), opts)).toBe('region');
    }
    // Ctrl+F6 is the program's.
    expect(focusKeyAction(new KeyboardEvent('keydown', { key: 'F6', ctrlKey: true }), { interactive: true, tabMovesFocus: false })).toBeNull();
  });

  it('keeps F6 from xterm.js (which would send it to the program and stop it) without cancelling it', () => {
    // Only `term` is a stand-in: handleTerminalKey touches it only to blur or copy, neither of which F6 does.
    const ctx: TerminalKeyContext = { term: {} as TerminalKeyContext['term'], interactive: true, tabMovesFocus: false, toggleTabMovesFocus: () => {}, leave: () => {}, openSearch: null };
    const f6 = new KeyboardEvent('keydown', { key: 'F6', cancelable: true });
    expect(handleTerminalKey(f6, ctx)).toBe(false);
    expect(f6.defaultPrevented).toBe(false);
  });
});

describe('region and task order', () => {
  it('cycles through the regions forwards and backwards, wrapping, and starts at an end from outside', () => {
    const order = ['header', 'new-task', 'board', 'task', 'terminals'];
    const seen: string[] = [];
    let at: string | null = null;
    for (let i = 0; i < 6; i++) seen.push((at = nextRegion(order, at, false))!);
    expect(seen).toEqual([...order, 'header']);
    expect(nextRegion(order, 'header', true)).toBe('terminals');
    expect(nextRegion(order, null, true)).toBe('terminals');
    expect(nextRegion(order, 'gone', false)).toBe('header');
    expect(nextRegion([], null, false)).toBeNull();
  });

  it('moves the focus to each region in document order: its named start, its first control, or itself', () => {
    document.body.innerHTML = `
      <header data-region="header"><button id="nav">Tasks</button></header>
      <section data-region="board"><table><tr><td><button id="first">one</button></td></tr><tr data-region-focus><td><button id="sel">two</button></td></tr></table></section>
      <section data-region="task"><p>Select a task</p></section>
      <section data-region="hidden" hidden><button>x</button></section>
      <div data-region="terminals"><button id="off" disabled>x</button><button id="tab" tabindex="-1" data-region-focus>build</button></div>`;
    const names: string[] = [];
    for (let i = 0; i < 5; i++) names.push(`${cycleRegion(document, false)}:${document.activeElement?.id || document.activeElement?.tagName}`);
    expect(names).toEqual(['header:nav', 'board:sel', 'task:SECTION', 'terminals:tab', 'header:nav']);
    expect(cycleRegion(document, true)).toBe('terminals');
    expect(cycleRegion(document, true)).toBe('task');
  });

  it('picks the next and previous task without wrapping, the first or last when none is selected', () => {
    const ids = ['a', 'b', 'c'];
    expect(neighbourTask(ids, 'a', false)).toBe('b');
    expect(neighbourTask(ids, 'c', false)).toBe('c');
    expect(neighbourTask(ids, 'a', true)).toBe('a');
    expect(neighbourTask(ids, undefined, false)).toBe('a');
    expect(neighbourTask(ids, 'archived', true)).toBe('c');
    expect(neighbourTask([], 'a', false)).toBeUndefined();
  });
});

describe('the terminal splitter', () => {
  beforeEach(() => localStorage.clear());

  it('makes the terminals taller with Up, shorter with Down, within bounds; Enter collapses and expands', () => {
    const s = { height: 360, collapsed: false };
    expect(splitterKey('ArrowUp', s, 700)).toEqual({ height: 400, collapsed: false });
    expect(splitterKey('ArrowDown', s, 700)).toEqual({ height: 320, collapsed: false });
    expect(splitterKey('PageUp', s, 500)).toEqual({ height: 500, collapsed: false });
    expect(splitterKey('ArrowDown', { height: PANE_MIN, collapsed: false }, 700)).toEqual({ height: PANE_MIN, collapsed: false });
    expect(splitterKey('Home', s, 700)).toEqual({ height: PANE_MIN, collapsed: false });
    expect(splitterKey('End', s, 700)).toEqual({ height: 700, collapsed: false });
    expect(splitterKey('Enter', s, 700)).toEqual({ height: 360, collapsed: true });
    // Resizing a collapsed pane shows it again.
    expect(splitterKey('ArrowUp', { height: 360, collapsed: true }, 700)).toEqual({ height: 400, collapsed: false });
    expect(splitterKey('a', s, 700)).toBeNull();
  });

  it('keeps its state across a reload and reads garbage in storage as the default', () => {
    savePane({ height: 480, collapsed: true });
    expect(loadPane()).toEqual({ height: 480, collapsed: true });
    for (const junk of ['{', 'null', '"x"', '{"height":"1e9","collapsed":"yes"}', '{"height":1e300}', '{"height":-5}']) {
      localStorage.setItem(TERMINAL_PANE_KEY, junk);
      const p = loadPane();
      expect(p.collapsed).toBe(false);
      expect(p.height).toBeGreaterThanOrEqual(PANE_MIN);
      expect(p.height).toBeLessThanOrEqual(1200);
    }
    expect(clampHeight(Number.NaN)).toBe(PANE_DEFAULT);
  });
});

describe('approve and reject by shortcut, in the app', () => {
  afterEach(() => cleanup());

  it('Alt+A asks first with the focus on Approve; Esc cancels and nothing is approved; Enter approves', async () => {
    const { bridge } = await openReview({ 'tasks.review': () => review() });
    await act(async () => {
      fireEvent.keyDown(document.body, { key: 'a', code: 'KeyA', altKey: true });
    });
    const confirm = await screen.findByTestId('approve-confirmed-button');
    expect(document.activeElement).toBe(confirm);
    fireEvent.keyDown(confirm, { key: 'Escape' });
    expect(screen.queryByTestId('approve-confirm')).toBeNull();
    expect(document.activeElement).toBe(screen.getByTestId('approve-button'));
    expect(bridge.calls.filter((c) => c.method === 'tasks.approve')).toEqual([]);

    fireEvent.keyDown(document.body, { key: 'a', code: 'KeyA', altKey: true });
    fireEvent.click(await screen.findByTestId('approve-confirmed-button'));
    await waitFor(() => expect(bridge.calls.filter((c) => c.method === 'tasks.approve')).toEqual([{ method: 'tasks.approve', input: { taskId: 't1' } }]));
  });

  it('Alt+R asks before rejecting; Alt+A does nothing while the user types in a field or the shortcuts list is open', async () => {
    const { bridge, controller } = await openReview({ 'tasks.review': () => review(), 'tasks.reject': () => ({}) });
    act(() => controller.store.setState({ shortcutsOpen: true }));
    fireEvent.keyDown(document.body, { key: 'a', code: 'KeyA', altKey: true });
    expect(screen.queryByTestId('approve-confirm')).toBeNull();
    act(() => controller.store.setState({ shortcutsOpen: false }));
    const field = screen.getByTestId('task-text-input');
    field.focus();
    fireEvent.keyDown(field, { key: 'a', code: 'KeyA', altKey: true });
    expect(screen.queryByTestId('approve-confirm')).toBeNull();
    field.blur();
    fireEvent.keyDown(document.body, { key: 'r', code: 'KeyR', altKey: true });
    const confirm = await screen.findByTestId('reject-confirmed-button');
    expect(document.activeElement).toBe(confirm);
    expect(bridge.calls.some((c) => c.method === 'tasks.reject')).toBe(false);
    fireEvent.click(screen.getByTestId('reject-cancel-button'));
    expect(document.activeElement).toBe(screen.getByTestId('reject-button'));
    expect(bridge.calls.some((c) => c.method === 'tasks.reject')).toBe(false);
  });
});
