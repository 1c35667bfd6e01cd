// Why a task's sandbox started slowly, as the user sees it: a start that could
// have restored saved memory but booted cold says why under the sandbox line.
// The bridge answers in place of a host.
import { cleanup, fireEvent, screen } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { STAGE_NAMES, type SandboxInfo, type Task } from '../../common/domain.js';
import { mountWith, RecordingBridge } from './support/app-harness.js';

function task(id: string, sandbox: SandboxInfo): Task {
  return {
    id, title: `Task ${id}`, repoPath: '/home/me/repo', baseRef: 'main', baseCommit: 'a'.repeat(40),
    branch: `factory/${id}`, createdAt: '2026-01-01T00:00:00.000Z', phase: 'running', sandbox,
    stages: STAGE_NAMES.map((name, i) => ({ name, status: i === 0 ? 'running' : 'pending' })),
  };
}

function mount(tasks: Task[]) {
  mountWith(
    new RecordingBridge({
      'system.status': () => ({ qemu: { ok: true }, image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'web' }),
      'tasks.list': () => tasks,
      'terminal.list': () => [],
      'audit.list': () => [],
      'leakcheck.get': () => null,
    }),
  );
}

afterEach(cleanup);

describe('a sandbox that booted cold although saved memory was there', () => {
  it('says why under the sandbox line, as text', async () => {
    const reason = "booted cold: the cached environment's saved memory could not be restored (QEMU exited with code 1: <b>load of migration failed</b>)";
    mount([task('t1', { status: 'running', accel: 'tcg', bootMs: 9400, coldBootReason: reason }), task('t2', { status: 'running', accel: 'tcg', bootMs: 700 })]);
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    const shown = await screen.findByTestId('cold-boot-reason');
    expect(shown.textContent).toBe(reason);
    // The QEMU words are text, never markup.
    expect(shown.querySelector('b')).toBeNull();
    expect(screen.getByTestId('sandbox-status').textContent).toContain('booted in');
    // A start that restored its memory (or had none to restore) says nothing more.
    fireEvent.click(screen.getByTestId('task-select-t2'));
    await screen.findByText('Task t2', { selector: 'h2' });
    expect(screen.queryByTestId('cold-boot-reason')).toBeNull();
  });
});
