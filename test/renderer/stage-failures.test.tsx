// A failed stage's card gives one reason, and a retried stage reads as a
// numbered attempt (card and terminal tab), in jsdom with a recording bridge.
import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { STAGE_NAMES, type StageResult, type Task, type TerminalInfo } from '../../common/domain.js';
import { mountWith, RecordingBridge } from './support/app-harness.js';

function task(test: Partial<StageResult>, over: Partial<Task> = {}): Task {
  return {
    id: 't1', title: 'Make the tests pass', repoPath: '/home/me/repo', baseRef: 'main', baseCommit: 'a'.repeat(40),
    branch: 'factory/t1', createdAt: '2026-01-01T00:00:00.000Z', phase: 'failed', sandbox: { status: 'running', accel: 'tcg' },
    stages: STAGE_NAMES.map((name, i): StageResult => {
      if (name === 'test') return { name, status: 'failed', exitCode: 3, sessionId: 's-test', ...test };
      return i < 3 ? { name, status: 'passed', durationMs: 1000, sessionId: `s-${name}` } : { name, status: 'skipped' };
    }),
    ...over,
  };
}

const stageTerminal = (id: string, title: string, exitCode: number): TerminalInfo => ({
  id, taskId: 't1', kind: 'stage', title, status: 'exited', exitCode, cols: 80, rows: 24,
});

function mount(t: Task, terminals: TerminalInfo[] = []) {
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true, version: '8' }, accel: 'tcg', image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'web' }),
    'tasks.list': () => [t],
    'terminal.list': () => terminals,
    'terminal.attach': ({ sessionId }: { sessionId: string }) => ({
      info: terminals.find((x) => x.id === sessionId) ?? stageTerminal(sessionId, 'x', 0),
      scrollback: btoa(`log of ${sessionId}\r\n`),
    }),
    'terminal.ack': () => undefined,
    'audit.list': () => [],
    'leakcheck.get': () => null,
  });
  mountWith(bridge);
  return bridge;
}

afterEach(cleanup);

describe('a failed stage card', () => {
  it('says the exit status once and the last output line as the reason', async () => {
    mount(task({ summary: '1 failing' }));
    const card = await screen.findByTestId('stage-t1-test');
    expect(card.textContent).toContain('exit status 3');
    expect(card.textContent?.match(/exit/g)).toHaveLength(1);
    expect(screen.getByTestId('stage-summary-t1-test').textContent).toBe('1 failing');
  });

  it('does not repeat the exit status of a task saved with the old "exit 3: ..." summary', async () => {
    mount(task({ summary: 'exit 3: assertion failed: boom' }));
    const card = await screen.findByTestId('stage-t1-test');
    expect(card.textContent?.match(/exit/g)).toHaveLength(1);
    expect(screen.getByTestId('stage-summary-t1-test').textContent).toBe('assertion failed: boom');
    expect(card.getAttribute('title')).toBe('test: failed · exit status 3 · assertion failed: boom');
  });

  it('shows no empty reason when the old summary was only "exit 3"', async () => {
    mount(task({ summary: 'exit 3' }));
    const card = await screen.findByTestId('stage-t1-test');
    expect(card.textContent?.match(/exit/g)).toHaveLength(1);
    expect(screen.queryByTestId('stage-summary-t1-test')).toBeNull();
  });

  it('keeps a reason that only looks like another exit status', async () => {
    mount(task({ summary: 'exit 31 tests skipped' }));
    expect((await screen.findByTestId('stage-summary-t1-test')).textContent).toBe('exit 31 tests skipped');
  });
});

describe('a retried stage', () => {
  it('reads "attempt 2" on its card and "test · attempt 2" on its tab; the first run is "test · attempt 1"', async () => {
    const t = task({ status: 'failed', attempt: 2, sessionId: 's-test-2', summary: '1 failing' });
    mount(t, [stageTerminal('s-test-1', 'test', 3), stageTerminal('s-test-2', 'test · attempt 2', 3)]);
    expect((await screen.findByTestId('stage-attempt-t1-test')).textContent).toBe('attempt 2');
    fireEvent.click(screen.getByTestId('task-select-t1'));
    const tab = await screen.findByTestId('terminal-tab-test');
    expect(tab.textContent).toContain('test · attempt 2');
    await waitFor(() => expect(screen.getByTestId('terminal-tab-s-test-1').textContent).toContain('test · attempt 1'));
    const labels = screen.getAllByRole('tab').map((el) => el.firstChild?.textContent?.trim());
    expect(new Set(labels).size).toBe(labels.length);
  });

  it('a first attempt shows no attempt number', async () => {
    mount(task({ attempt: 1, summary: '1 failing' }));
    await screen.findByTestId('stage-t1-test');
    expect(screen.queryByTestId('stage-attempt-t1-test')).toBeNull();
  });
});
