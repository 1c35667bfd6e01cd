// A Claude Code session's leak checks on the board and in its task view, and
// its subagents' sandboxes nested under it (issue 27, sections 3 and 5), in
// jsdom with a recording bridge.
import { cleanup, fireEvent, screen, within } from '@testing-library/react';
import axe from 'axe-core';
import { afterEach, describe, expect, it } from 'vitest';
import { STAGE_NAMES, type HookSession, type SessionCheck, type Task } from '../../common/domain.js';
import { taskOrder } from '../../renderer/state/store.js';
import { mountWith, RecordingBridge } from './support/app-harness.js';

function task(id: string, createdAt: string, over: Partial<Task> = {}): Task {
  return {
    id, title: `Task ${id}`, repoPath: '/home/me/repo', baseRef: 'main', baseCommit: 'a'.repeat(40),
    branch: `factory/${id}`, createdAt, phase: 'running', sandbox: { status: 'running', accel: 'tcg' },
    stages: STAGE_NAMES.map((name) => ({ name, status: 'pending' as const })),
    agent: 'claude-session',
    ...over,
  };
}

const MIB = 2 ** 20;
const clean = (turn: number, bytes: number): SessionCheck => ({
  turn, hook: 'Stop', at: `2026-01-01T10:0${turn}:00.000Z`, verdict: 'clean', durationMs: 1200,
  scanned: { sources: 6, bytes, limited: [] }, findings: [], findingCount: 0,
});

/** Three turns: the first clean, the second found a key in the guest's disk, the third could not finish. */
const threeTurns: HookSession = {
  sessionId: 'sess-1',
  turns: 3,
  checks: [
    clean(1, 12 * MIB),
    {
      turn: 2, hook: 'Stop', at: '2026-01-01T10:02:00.000Z', verdict: 'leak', durationMs: 2500,
      scanned: { sources: 7, bytes: 300 * MIB, limited: [] },
      findings: [{ credentialId: 'anthropic-api-key', source: 'disk', encoding: 'base64' }], findingCount: 1,
    },
    {
      turn: 3, hook: 'Stop', at: '2026-01-01T10:03:00.000Z', verdict: 'error',
      scanned: { sources: 0, bytes: 0, limited: [] }, findings: [], findingCount: 0, error: 'the guest agent did not answer',
    },
  ],
};

function mount(tasks: Task[]) {
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true, version: '8' }, accel: 'tcg', image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'web' }),
    'tasks.list': () => tasks,
    'terminal.list': () => [],
    'audit.list': () => [],
    'leakcheck.get': () => null,
  });
  mountWith(bridge);
  return bridge;
}

/** The board's task rows, top to bottom, by task id. */
function rowOrder(): string[] {
  return screen.getAllByTestId(/^task-row-/).map((r) => r.getAttribute('data-testid')!.slice('task-row-'.length));
}

afterEach(cleanup);

describe('a Claude Code session in its task view', () => {
  it('lists each turn with its verdict and what it scanned, newest first; the bad ones marked and named', async () => {
    mount([task('s1', '2026-01-01T10:00:00.000Z', { title: 'Claude Code session sess-1', session: threeTurns })]);
    fireEvent.click(await screen.findByTestId('task-select-s1'));
    const section = await screen.findByTestId('session-checks');
    expect(within(section).getByRole('heading').textContent).toContain('3 recorded · 3 turns · 2 not clean');
    const items = within(section).getAllByTestId('session-check');
    expect(items.map((i) => [i.getAttribute('data-turn'), i.getAttribute('data-verdict')])).toEqual([
      ['3', 'error'],
      ['2', 'leak'],
      ['1', 'clean'],
    ]);
    const [third, second, first] = items;

    expect(first.textContent).toContain('Turn 1');
    expect(first.textContent).toContain('clean');
    expect(first.textContent).toContain('scanned 6 sources, 12 MiB in ');
    expect(first.className).not.toContain('bad');

    expect(second.className).toContain('bad');
    expect(second.textContent).toContain('Turn 2');
    expect(second.textContent).toContain('leak found: anthropic-api-key in disk (base64)');
    expect(second.textContent).toContain('scanned 7 sources, 300 MiB');

    // A check that could not finish blocked the hook: marked, with why, and "nothing scanned".
    expect(third.className).toContain('bad');
    expect(third.textContent).toContain('Turn 3');
    expect(third.textContent).toContain('the check could not finish: the guest agent did not answer');
    expect(third.textContent).toContain('· nothing scanned');
    expect(third.textContent).not.toContain('scanned nothing');
    expect(within(third).getByText('⚠', { exact: false }).getAttribute('aria-hidden')).toBe('true');
    expect(third.querySelector('time')?.getAttribute('dateTime')).toBe('2026-01-01T10:03:00.000Z');
  });

  it('names the sources a cap cut short on an incomplete check', async () => {
    const session: HookSession = {
      sessionId: 'sess-2', turns: 1,
      checks: [{
        turn: 1, hook: 'Stop', at: '2026-01-01T10:01:00.000Z', verdict: 'incomplete',
        scanned: { sources: 5, bytes: 2 * 1024 * MIB, limited: [{ source: 'memory', reason: 'size cap' }] }, findings: [], findingCount: 0,
      }],
    };
    mount([task('s2', '2026-01-01T10:00:00.000Z', { session })]);
    fireEvent.click(await screen.findByTestId('task-select-s2'));
    const item = (await screen.findAllByTestId('session-check'))[0];
    expect(item.className).toContain('bad');
    expect(item.textContent).toContain('incomplete: not scanned in full: memory (size cap)');
    expect(item.textContent).toContain('scanned 5 sources, 2.0 GiB; caps reached: memory');
  });

  it('shows the latest ten checks of a long session and the rest on request', async () => {
    const checks = Array.from({ length: 14 }, (_, i) => clean(i + 1, MIB));
    mount([task('s3', '2026-01-01T10:00:00.000Z', { session: { sessionId: 'sess-3', turns: 14, checks } })]);
    fireEvent.click(await screen.findByTestId('task-select-s3'));
    expect((await screen.findAllByTestId('session-check')).map((i) => i.getAttribute('data-turn'))).toEqual(['14', '13', '12', '11', '10', '9', '8', '7', '6', '5']);
    const more = screen.getByTestId('session-checks-more');
    expect(more.getAttribute('aria-expanded')).toBe('false');
    fireEvent.click(more);
    expect(screen.getAllByTestId('session-check')).toHaveLength(14);
    expect(more.getAttribute('aria-expanded')).toBe('true');
  });
});

describe('a Claude Code session on the board', () => {
  it('keeps a check that was not clean as the card\'s news after later clean turns', async () => {
    const session: HookSession = { ...threeTurns, checks: [threeTurns.checks[0], threeTurns.checks[1], clean(3, MIB)] };
    mount([task('s1', '2026-01-01T10:00:00.000Z', { session })]);
    const line = await screen.findByTestId('session-line-s1');
    expect(line.textContent).toContain('3 turns');
    const verdict = screen.getByTestId('session-verdict-s1');
    expect(verdict.getAttribute('data-verdict')).toBe('leak');
    expect(verdict.className).toBe('check-bad');
    expect(verdict.textContent).toContain('Turn 2: leak found: anthropic-api-key');
  });

  it('says the newest verdict when every check was clean, and when none ran yet', async () => {
    mount([
      task('s1', '2026-01-01T10:00:00.000Z', { session: { sessionId: 'a', turns: 2, checks: [clean(1, MIB), clean(2, MIB)] } }),
      task('s2', '2026-01-01T11:00:00.000Z', { session: { sessionId: 'b', turns: 0, checks: [] } }),
    ]);
    const verdict = await screen.findByTestId('session-verdict-s1');
    expect(verdict.textContent).toBe('Turn 2: clean');
    expect(verdict.className).toBe('check-ok');
    expect(screen.getByTestId('session-line-s2').textContent).toContain('no leak check yet');
  });

  it("names the agent whose session it is: Codex's, or Claude Code's", async () => {
    mount([
      task('s1', '2026-01-01T10:00:00.000Z', { session: { sessionId: 'a', agent: 'codex', turns: 1, checks: [clean(1, MIB)] } }),
      task('s2', '2026-01-01T11:00:00.000Z', { session: { sessionId: 'b', turns: 0, checks: [] } }),
    ]);
    expect((await screen.findByTestId('session-line-s1')).textContent).toMatch(/^Codex session · 1 turn · /);
    expect(screen.getByTestId('session-line-s2').textContent).toMatch(/^Claude Code session · 0 turns/);
  });
});

describe('subagents on the board', () => {
  const parent = (id: string, createdAt: string) => task(id, createdAt, { title: `Session ${id}`, session: { sessionId: id, turns: 1, checks: [clean(1, MIB)] } });
  const sub = (id: string, parentTaskId: string, createdAt: string, extra: Partial<NonNullable<HookSession['subagent']>> = {}): Task =>
    task(id, createdAt, { title: `Subagent ${id}`, session: { sessionId: parentTaskId, turns: 0, checks: [], subagent: { parentTaskId, agentId: `ag-${id}`, ...extra } } });

  it('sit right under their session, newest first, whatever the order they were created in', async () => {
    mount([
      parent('p1', '2026-01-01T10:00:00.000Z'),
      task('x', '2026-01-01T10:30:00.000Z'),
      parent('p2', '2026-01-01T11:00:00.000Z'),
      sub('c1', 'p1', '2026-01-01T11:10:00.000Z', { agentType: 'Explore' }),
      sub('c2', 'p1', '2026-01-01T11:20:00.000Z'),
      sub('c3', 'p2', '2026-01-01T11:30:00.000Z'),
      task('y', '2026-01-01T12:00:00.000Z'),
    ]);
    await screen.findByTestId('task-row-p1');
    expect(rowOrder()).toEqual(['y', 'p2', 'c3', 'x', 'p1', 'c2', 'c1']);
    const line = screen.getByTestId('subagent-line-c1');
    expect(line.hasAttribute('data-nested')).toBe(true);
    expect(line.textContent).toContain('Subagent of Session p1');
    expect(line.textContent).toContain('subagent Explore ag-c1');
    expect(line.textContent).toContain('no SubagentStop check yet');
  });

  it('says where a finished subagent\'s work went, or why its sandbox was kept', async () => {
    const stop = (verdict: SessionCheck['verdict']): SessionCheck => ({ ...clean(1, MIB), hook: 'SubagentStop', verdict, findings: verdict === 'leak' ? [{ credentialId: 'gh', source: 'disk', encoding: 'raw' }] : [], findingCount: verdict === 'leak' ? 1 : 0 });
    const merged = sub('c1', 'p1', '2026-01-01T11:00:00.000Z', { outcome: { kind: 'merged', branch: 'factory/p1/ag-c1', commits: 2 } });
    merged.session!.checks = [stop('clean')];
    const kept = sub('c2', 'p1', '2026-01-01T11:05:00.000Z', { outcome: { kind: 'kept', reason: 'the leak check found gh in disk' } });
    kept.session!.checks = [stop('leak')];
    mount([parent('p1', '2026-01-01T10:00:00.000Z'), merged, kept]);
    expect((await screen.findByTestId('subagent-outcome-c1')).textContent).toBe("its work is branch factory/p1/ag-c1 in the session's sandbox (2 commits)");
    expect(screen.getByTestId('subagent-verdict-c1').getAttribute('data-verdict')).toBe('clean');
    const bad = screen.getByTestId('subagent-verdict-c2');
    expect(bad.className).toBe('check-bad');
    expect(bad.textContent).toContain('leak found: gh in disk (raw)');
    expect(screen.getByTestId('subagent-outcome-c2').textContent).toBe('sandbox kept: the leak check found gh in disk');
  });

  it('opens its session from the subagent\'s task view', async () => {
    mount([parent('p1', '2026-01-01T10:00:00.000Z'), sub('c1', 'p1', '2026-01-01T11:00:00.000Z')]);
    fireEvent.click(await screen.findByTestId('task-select-c1'));
    const summary = await screen.findByTestId('subagent-summary');
    expect(summary.textContent).toContain('Subagent ag-c1 of Session p1');
    fireEvent.click(within(summary).getByTestId('subagent-parent'));
    expect((await screen.findByTestId('session-checks')).getAttribute('aria-labelledby')).toBe('session-checks-head-p1');
  });

  it('still shows every task when a damaged record makes parents a cycle, or names itself or a missing task', async () => {
    const tasks = [
      sub('a', 'b', '2026-01-01T10:00:00.000Z'),
      sub('b', 'c', '2026-01-01T11:00:00.000Z'),
      sub('c', 'a', '2026-01-01T12:00:00.000Z'),
      sub('self', 'self', '2026-01-01T13:00:00.000Z'),
      sub('orphan', 'gone', '2026-01-01T14:00:00.000Z'),
      task('plain', '2026-01-01T09:00:00.000Z'),
    ];
    mount(tasks);
    await screen.findByTestId('task-row-plain');
    const rows = rowOrder();
    expect([...rows].sort()).toEqual(['a', 'b', 'c', 'orphan', 'plain', 'self']);
    // Not nested where there is nothing to nest under: a missing session, or itself.
    expect(screen.getByTestId('subagent-line-self').hasAttribute('data-nested')).toBe(false);
    expect(screen.getByTestId('subagent-line-orphan').hasAttribute('data-nested')).toBe(false);
    expect(screen.getByTestId('subagent-line-orphan').textContent).toContain('Subagent: ');
  });
});

describe('the session card and its checks under axe (jsdom: structure, names and roles; colour contrast needs a browser)', () => {
  it('has no serious or critical violation on the board with a session and a subagent, nor in the checks list', async () => {
    const subagent = task('c1', '2026-01-01T11:00:00.000Z', {
      title: 'Subagent c1',
      session: { sessionId: 'sess-1', turns: 0, checks: [{ ...threeTurns.checks[1]!, hook: 'SubagentStop' }], subagent: { parentTaskId: 's1', agentId: 'ag1', agentType: 'Explore', outcome: { kind: 'kept', reason: 'the leak check found a key' } } },
    });
    mount([task('s1', '2026-01-01T10:00:00.000Z', { title: 'Claude Code session sess-1', session: threeTurns }), subagent]);
    await screen.findByTestId('subagent-line-c1');
    fireEvent.click(screen.getByTestId('task-select-s1'));
    await screen.findByTestId('session-checks');
    const serious = async (el: Element) => {
      const r = await axe.run(el, { resultTypes: ['violations'], rules: { 'color-contrast': { enabled: false } } });
      return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').flatMap((v) => v.nodes.map((n) => `${v.id}: ${n.target.join(' ')}`));
    };
    expect(await serious(screen.getByTestId('stage-board'))).toEqual([]);
    expect(await serious(screen.getByTestId('session-checks'))).toEqual([]);
  });
});

describe('taskOrder', () => {
  const t = (id: string, at: string, parentTaskId?: string): Task =>
    task(id, at, parentTaskId ? { session: { sessionId: 's', turns: 0, checks: [], subagent: { parentTaskId, agentId: id } } } : {});
  const ids = (tasks: Task[]) => taskOrder(Object.fromEntries(tasks.map((x) => [x.id, x]))).map((x) => x.id);

  it('puts a subagent of a subagent under its own parent, depth first', () => {
    expect(ids([t('p', '1'), t('q', '2'), t('c', '3', 'p'), t('gc', '4', 'c'), t('c2', '5', 'p')])).toEqual(['q', 'p', 'c2', 'c', 'gc']);
  });

  it('lists each task once, a cycle included, in creation order from the newest', () => {
    const out = ids([t('a', '1', 'b'), t('b', '2', 'a'), t('z', '0')]);
    expect(out).toEqual(['b', 'a', 'z']);
  });
});
