// The board's filter in storage (issue 13): what a reload reads back is checked,
// since every page of the origin shares localStorage and may have put anything
// there; a phase always falls under one state filter (jsdom's real localStorage).
import { afterEach, describe, expect, it } from 'vitest';
import { TaskPhase } from '../../common/domain.js';
import { BOARD_FILTER_KEY, loadBoardFilter, NO_FILTER, saveBoardFilter, STATE_FILTERS, stateGroup } from '../../renderer/state/board-filter.js';
import { clockTime, sandboxWords } from '../../renderer/components/sandbox-words.js';

afterEach(() => localStorage.clear());

describe('board filter in storage', () => {
  it('reads back what was saved', () => {
    saveBoardFilter({ state: 'review', repo: '/home/me/project' });
    expect(loadBoardFilter()).toEqual({ state: 'review', repo: '/home/me/project' });
  });

  it('reads garbage, unknown states and hostile paths as no filter', () => {
    for (const raw of ['{', 'null', '42', '"review"', '[]', JSON.stringify({ state: 'everything', repo: 7 }), JSON.stringify({ state: '__proto__', repo: '/a\u001b[2J' })]) {
      localStorage.setItem(BOARD_FILTER_KEY, raw);
      expect(loadBoardFilter(), raw).toEqual(NO_FILTER);
    }
    localStorage.setItem(BOARD_FILTER_KEY, JSON.stringify({ state: 'failed', repo: 'x'.repeat(5000) }));
    expect(loadBoardFilter()).toEqual({ state: 'failed', repo: '' });
  });

  it('puts every phase under one of the state filters', () => {
    for (const phase of TaskPhase.options) expect(STATE_FILTERS).toContain(stateGroup(phase));
    expect(stateGroup('interrupted')).toBe('failed');
    expect(stateGroup('pulling-back')).toBe('running');
  });
});

describe('sandbox words on the card', () => {
  it('says until when a kept sandbox runs, and nothing of a deadline once it is gone', () => {
    const until = new Date(2026, 2, 4, 9, 5).toISOString();
    expect(clockTime(until)).toBe('09:05');
    expect(sandboxWords({ status: 'running', keptUntil: until })).toBe('sandbox kept until 09:05');
    expect(sandboxWords({ status: 'destroyed', keptUntil: until })).toBe('sandbox destroyed');
    expect(sandboxWords({ status: 'running' })).toBe('sandbox running');
  });
});
