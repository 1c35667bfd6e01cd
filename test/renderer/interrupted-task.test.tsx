// A task cut by the app stopping, as the user sees it after a restart: the
// cut stage and the task say "interrupted", and Retry is offered although the
// sandbox is gone. The bridge records calls in place of a host.
import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { STAGE_NAMES, type SandboxStatus, type Task, type TaskPhase } from '../../common/domain.js';
import { mountWith, RecordingBridge } from './support/app-harness.js';

function task(phase: TaskPhase, sandbox: SandboxStatus): Task {
  return {
    id: 't1', title: 'Add a greeting', repoPath: '/home/me/repo', baseRef: 'main', baseCommit: 'a'.repeat(40),
    branch: 'factory/t1', createdAt: '2026-01-01T00:00:00.000Z', phase, sandbox: { status: sandbox },
    stages: STAGE_NAMES.map((name, i) => ({
      name,
      status: i < 2 ? 'passed' : i === 2 ? (phase === 'interrupted' ? 'interrupted' : 'failed') : 'pending',
      ...(i === 2 ? { summary: 'interrupted: the app stopped' } : {}),
    })),
    ...(phase === 'interrupted' ? { error: { name: 'Interrupted', message: 'the app stopped while the task was running; Retry runs it again in a fresh sandbox' } } : {}),
  };
}

function mount(tasks: Task[]) {
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true }, image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'web' }),
    'tasks.list': () => tasks,
    'terminal.list': () => [],
    'audit.list': () => [],
    'leakcheck.get': () => null,
    'tasks.retry': () => ({ ...tasks[0]!, phase: 'creating', error: undefined }),
  });
  mountWith(bridge);
  return { calls: bridge.calls };
}

afterEach(cleanup);

describe('an interrupted task', () => {
  it('shows the cut stage and the task as interrupted and retries it in a fresh sandbox', async () => {
    const { calls } = mount([task('interrupted', 'lost')]);
    const stage = await screen.findByTestId('stage-t1-build');
    expect(stage.dataset.status).toBe('interrupted');
    // Its icon is the interrupted one (decoration: hidden from screen readers, the words say it).
    expect(stage.querySelector('svg.status-icon-interrupted')?.getAttribute('aria-hidden')).toBe('true');
    expect(stage.textContent).toContain('interrupted: the app stopped');
    expect(screen.getByTestId('task-phase-t1').textContent).toBe('interrupted');
    fireEvent.click(screen.getByTestId('task-select-t1'));
    expect((await screen.findByTestId('task-error')).textContent).toContain('Retry runs it again in a fresh sandbox');
    // Nothing runs: no Cancel; the sandbox is gone, yet Retry is offered.
    expect(screen.queryByTestId('cancel-button')).toBeNull();
    fireEvent.click(screen.getByTestId('retry-button'));
    await waitFor(() => expect(calls.find((c) => c.method === 'tasks.retry')?.input).toEqual({ taskId: 't1' }));
  });

  it('offers Retry for a failed task whose sandbox was lost, not for one the user destroyed', async () => {
    mount([task('failed', 'lost')]);
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    expect(screen.getByTestId('retry-button')).toBeTruthy();
    cleanup();
    mount([task('failed', 'destroyed')]);
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    expect(screen.getByTestId('task-detail')).toBeTruthy();
    expect(screen.queryByTestId('retry-button')).toBeNull();
  });
});
