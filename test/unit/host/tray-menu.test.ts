// The tray's menu as data: what a user sees in the tray for a task list with
// tasks in several phases, quick sandboxes with and without a repository, and
// hostile titles and folder names.
import { describe, expect, it } from 'vitest';
import { elapsed, menuLabel, MAX_LABEL, recentRepos, trayMenu, type TrayItem } from '../../../main/host/tray-menu.js';
import { taskNotice, type Task } from '../../../common/domain.js';

const NOW = new Date('2026-03-01T12:00:00Z');

function task(id: string, over: Partial<Task> = {}): Task {
  return {
    id,
    title: `task ${id}`,
    repoPath: `/home/me/src/${id}`,
    baseRef: 'main',
    baseCommit: 'a'.repeat(40),
    branch: `factory/${id}`,
    createdAt: '2026-03-01T11:00:00Z',
    phase: 'running',
    sandbox: { status: 'running' },
    stages: [],
    ...over,
  };
}

/** The menu as lines a test can read: labels, submenus indented, actions after an arrow. */
function lines(items: TrayItem[], indent = ''): string[] {
  return items.flatMap((i) => {
    if (i.kind === 'separator') return [`${indent}---`];
    if (i.kind === 'label') return [`${indent}${i.label}`];
    if (i.kind === 'action') return [`${indent}${i.label} -> ${JSON.stringify(i.action)}`];
    return [`${indent}${i.label}`, ...lines(i.items, indent + '  ')];
  });
}

describe('trayMenu', () => {
  it('lists running sandboxes newest first with where they are and for how long, then quick sandbox and recent repositories', () => {
    const tasks: Task[] = [
      task('build1', { createdAt: '2026-03-01T10:54:30Z', stages: [{ name: 'request', status: 'passed' }, { name: 'build', status: 'running' }] }),
      task('setup1', { createdAt: '2026-03-01T11:58:00Z', phase: 'running', setup: { status: 'running', source: 'detected', lines: [], unsupported: [] } }),
      task('review1', { createdAt: '2026-03-01T09:00:00Z', phase: 'review', sandbox: { status: 'running' } }),
      task('failed1', { createdAt: '2026-03-01T08:00:00Z', phase: 'failed', sandbox: { status: 'destroyed' } }),
      task('gone1', { createdAt: '2026-03-01T07:00:00Z', phase: 'approved', sandbox: { status: 'destroyed' } }),
      task('quick1', { createdAt: '2026-03-01T11:59:48Z', kind: 'quick', title: 'quick sandbox', repoPath: '', baseCommit: '', stages: [] }),
      task('quick2', { createdAt: '2026-03-01T11:59:50Z', kind: 'quick', title: 'quick sandbox: web', repoPath: '/home/me/src/web', phase: 'provisioning', sandbox: { status: 'booting' } }),
      task('closed1', { createdAt: '2026-03-01T11:59:55Z', kind: 'quick', title: 'quick sandbox', repoPath: '', phase: 'closed', sandbox: { status: 'destroyed' } }),
    ];
    expect(lines(trayMenu({ tasks, now: NOW }))).toEqual([
      'Running sandboxes (5)',
      'quick sandbox: web — booting, 10 s',
      '  Open -> {"type":"open","taskId":"quick2"}',
      '  Destroy -> {"type":"destroy","taskId":"quick2"}',
      'quick sandbox — shell, 12 s',
      '  Open -> {"type":"open","taskId":"quick1"}',
      '  Destroy -> {"type":"destroy","taskId":"quick1"}',
      'task setup1 — setup, 2 min',
      '  Open -> {"type":"open","taskId":"setup1"}',
      '  Destroy -> {"type":"destroy","taskId":"setup1"}',
      'task build1 — build, 1 h 05 min',
      '  Open -> {"type":"open","taskId":"build1"}',
      '  Destroy -> {"type":"destroy","taskId":"build1"}',
      'task review1 — review, 3 h 00 min',
      '  Open -> {"type":"open","taskId":"review1"}',
      '  Destroy -> {"type":"destroy","taskId":"review1"}',
      '---',
      'Quick sandbox -> {"type":"quick"}',
      'Quick sandbox (keep until destroyed) -> {"type":"quick","keep":true}',
      'Quick sandbox with a repository',
      '  web (…/src) -> {"type":"quick","repoPath":"/home/me/src/web"}',
      '  setup1 (…/src) -> {"type":"quick","repoPath":"/home/me/src/setup1"}',
      '  build1 (…/src) -> {"type":"quick","repoPath":"/home/me/src/build1"}',
      '  review1 (…/src) -> {"type":"quick","repoPath":"/home/me/src/review1"}',
      '  failed1 (…/src) -> {"type":"quick","repoPath":"/home/me/src/failed1"}',
      'Quick sandbox with a repository (keep until destroyed)',
      '  web (…/src) -> {"type":"quick","repoPath":"/home/me/src/web","keep":true}',
      '  setup1 (…/src) -> {"type":"quick","repoPath":"/home/me/src/setup1","keep":true}',
      '  build1 (…/src) -> {"type":"quick","repoPath":"/home/me/src/build1","keep":true}',
      '  review1 (…/src) -> {"type":"quick","repoPath":"/home/me/src/review1","keep":true}',
      '  failed1 (…/src) -> {"type":"quick","repoPath":"/home/me/src/failed1","keep":true}',
      'New task… -> {"type":"newTask"}',
      '---',
      'Show window -> {"type":"show"}',
      'Quit -> {"type":"quit"}',
    ]);
  });

  it('offers a kept quick sandbox next to the throwaway one, and shows a running kept one as kept', () => {
    const tasks = [
      task('k1', { createdAt: '2026-03-01T11:59:00Z', kind: 'quick', keep: true, title: 'quick sandbox', repoPath: '' }),
      task('q1', { createdAt: '2026-03-01T11:58:00Z', kind: 'quick', title: 'quick sandbox', repoPath: '' }),
    ];
    const menu = lines(trayMenu({ tasks, now: NOW }));
    expect(menu.slice(0, 7)).toEqual([
      'Running sandboxes (2)',
      'quick sandbox — kept, 1 min',
      '  Open -> {"type":"open","taskId":"k1"}',
      '  Destroy -> {"type":"destroy","taskId":"k1"}',
      'quick sandbox — shell, 2 min',
      '  Open -> {"type":"open","taskId":"q1"}',
      '  Destroy -> {"type":"destroy","taskId":"q1"}',
    ]);
    const quick = menu.filter((l) => l.startsWith('Quick sandbox'));
    expect(quick).toEqual(['Quick sandbox -> {"type":"quick"}', 'Quick sandbox (keep until destroyed) -> {"type":"quick","keep":true}']);
  });

  it('with no tasks says so and offers no recent repositories', () => {
    expect(lines(trayMenu({ tasks: [], now: NOW }))).toEqual([
      'No running sandboxes',
      '---',
      'Quick sandbox -> {"type":"quick"}',
      'Quick sandbox (keep until destroyed) -> {"type":"quick","keep":true}',
      'New task… -> {"type":"newTask"}',
      '---',
      'Show window -> {"type":"show"}',
      'Quit -> {"type":"quit"}',
    ]);
  });

  it('lists a repository once, newest first, at most as many as asked', () => {
    const tasks = [
      task('a', { repoPath: '/r/one', createdAt: '2026-03-01T01:00:00Z' }),
      task('b', { repoPath: '/r/two', createdAt: '2026-03-01T02:00:00Z' }),
      task('c', { repoPath: '/r/one', createdAt: '2026-03-01T03:00:00Z' }),
      task('d', { repoPath: '', createdAt: '2026-03-01T04:00:00Z', kind: 'quick' }),
      task('e', { repoPath: '/r/three', createdAt: '2026-03-01T00:00:00Z' }),
    ];
    expect(recentRepos(tasks, 5)).toEqual(['/r/one', '/r/two', '/r/three']);
    expect(recentRepos(tasks, 2)).toEqual(['/r/one', '/r/two']);
  });

  it('a title or folder name cannot add lines, reorder text, hide characters or run on forever', () => {
    const hostile = [
      task('nl', { title: 'fix it\nQuit\r\n\tnow' }),
      task('rlo', { title: 'invoice \u202Egpj.exe', createdAt: '2026-03-01T11:00:01Z' }),
      task('zw', { title: 'a\u200Bb\u2066c\u0000d\u009be', createdAt: '2026-03-01T11:00:02Z' }),
      task('long', { title: 'x'.repeat(5000), createdAt: '2026-03-01T11:00:03Z' }),
      task('amp', { title: 'Tom & Jerry', repoPath: '/r/a&b\nc', createdAt: '2026-03-01T11:00:04Z' }),
    ];
    const menu = trayMenu({ tasks: hostile, now: NOW });
    const all = lines(menu).map((l) => l.split(' -> ')[0]!);
    for (const l of all) {
      expect(l).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/);
      expect([...l.trim()].length).toBeLessThanOrEqual(MAX_LABEL + 2); // '&&' doubling
    }
    expect(all).toContain('fix it Quit now — running, 1 h 00 min');
    expect(all).toContain('Tom && Jerry — running, 59 min');
    expect(all).toContain('  a&&b c (…/r)');
    expect(all.find((l) => l.startsWith('xxx'))).toBe('x'.repeat(MAX_LABEL - 1) + '…');
    expect(menuLabel('invoice \u202Egpj.exe')).toBe('invoice gpj.exe');
  });

  it('reads elapsed time plainly, and a clock that went back as 0 s', () => {
    expect(elapsed('2026-03-01T11:59:59Z', NOW)).toBe('1 s');
    expect(elapsed('2026-03-01T11:00:00Z', NOW)).toBe('1 h 00 min');
    expect(elapsed('2026-03-01T12:05:00Z', NOW)).toBe('0 s');
    expect(elapsed('not a date', NOW)).toBe('0 s');
  });
});

describe('taskNotice', () => {
  it('tells of a task that just reached review or failed, not of one first seen so or unchanged', () => {
    const running = task('t1', { title: 'Add\na  greeting' });
    expect(taskNotice(running, { ...running, phase: 'review' })).toEqual({ title: 'Ready for review', body: 'Add a greeting', tag: 'review-t1' });
    expect(taskNotice(running, { ...running, phase: 'failed', error: { name: 'X', message: 'tests\nfailed' } })).toEqual({ title: 'Task failed', body: 'Add a greeting: tests failed', tag: 'failed-t1' });
    expect(taskNotice(undefined, { ...running, phase: 'review' })).toBeUndefined();
    expect(taskNotice({ phase: 'review' }, { ...running, phase: 'review' })).toBeUndefined();
    expect(taskNotice(running, { ...running, phase: 'pulling-back' })).toBeUndefined();
    expect(taskNotice(running, { ...running, phase: 'closed' })).toBeUndefined();
    expect(taskNotice(running, { ...running, phase: 'review', title: 'y'.repeat(500) })?.body).toHaveLength(80);
  });
});
