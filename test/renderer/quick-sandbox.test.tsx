// The Quick sandbox button and browser notifications, as the user meets them in
// the web UI. The host is a bridge that records calls and pushes the events a
// test gives it; jsdom has no Notification API, so a recording one stands in for
// the browser's (the real one is exercised in Chromium by test/e2e/quick-sandbox.test.ts).
import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { act } from 'react';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FactoryEvent } from '../../common/contract.js';
import type { Task, TerminalInfo } from '../../common/domain.js';
import { mountWith, RecordingBridge, type Handlers } from './support/app-harness.js';

function quick(over: Partial<Task> = {}): Task {
  return {
    id: 'q1', title: 'quick sandbox', repoPath: '', baseRef: '', baseCommit: '', branch: 'factory/q1',
    createdAt: '2026-01-01T00:00:00.000Z', phase: 'creating', sandbox: { status: 'none' }, stages: [], kind: 'quick', ...over,
  };
}
function pipelineTask(over: Partial<Task> = {}): Task {
  return { ...quick({ id: 't1', title: 'Add a greeting', repoPath: '/home/me/repo', kind: undefined, phase: 'running', sandbox: { status: 'running' } }), ...over };
}

class RecordingNotification {
  static permission: NotificationPermission = 'default';
  static asked = 0;
  static shown: Array<{ title: string; body?: string; tag?: string }> = [];
  static requestPermission(): Promise<NotificationPermission> {
    RecordingNotification.asked++;
    return Promise.resolve(RecordingNotification.permission);
  }
  onclick: (() => void) | null = null;
  constructor(title: string, opts: { body?: string; tag?: string } = {}) {
    RecordingNotification.shown.push({ title, ...opts });
  }
}

beforeEach(() => {
  RecordingNotification.permission = 'default';
  RecordingNotification.asked = 0;
  RecordingNotification.shown = [];
  (globalThis as { Notification?: unknown }).Notification = RecordingNotification;
});
afterEach(() => {
  cleanup();
  delete (globalThis as { Notification?: unknown }).Notification;
  localStorage.clear();
});

/** `over` replaces handlers; `emit` pushes an event from inside one (before its answer). */
function mount(tasks: Task[], host: 'web' | 'electron' = 'web', over: Record<string, (input: any, emit: (e: FactoryEvent) => void) => unknown> = {}) {
  const shell: TerminalInfo = { id: 's1', taskId: 'q1', kind: 'shell', title: 'shell', status: 'live', cols: 100, rows: 30 };
  const handlers: Handlers = {
    'system.status': () => ({ qemu: { ok: true }, image: { state: 'ready', version: 'v1' }, dataDir: '/data', host }),
    'tasks.list': () => tasks,
    'terminal.list': () => [],
    'settings.get': () => ({ defaultAgent: 'command', maxParallelTasks: 2, vmMemoryMb: 1024, vmCpus: 1, terminalLogRetentionDays: 30, egressRules: [], layerBudgetGb: 20, agents: ['command'] }),
    'audit.list': () => [],
    'leakcheck.get': () => null,
    'sandboxes.quick': (input) => quick({ ...(input.repoPath ? { repoPath: input.repoPath, title: 'quick sandbox: repo' } : {}), ...(input.keep ? { keep: true } : {}) }),
    'terminal.openShell': () => shell,
    'terminal.attach': ({ sessionId }) => ({ info: { ...shell, id: sessionId }, scrollback: '' }),
  };
  // Every listener hears the events (the terminals' registry subscribes too once a tab shows).
  const bridge = new RecordingBridge(handlers);
  for (const [method, h] of Object.entries(over)) handlers[method] = (input) => h(input, (e) => bridge.emit(e));
  mountWith(bridge);
  return { calls: bridge.calls as Array<{ method: string; input: any }>, push: (e: FactoryEvent) => act(() => bridge.emit(e)) };
}

describe('the Quick sandbox button', () => {
  it('starts a quick sandbox, shows it on the board without stages, and opens its shell once it runs', async () => {
    const { calls, push } = mount([]);
    fireEvent.click(await screen.findByTestId('quick-sandbox-button'));
    await waitFor(() => expect(calls.filter((c) => c.method === 'sandboxes.quick')).toEqual([{ method: 'sandboxes.quick', input: {} }]));
    expect((await screen.findByTestId('quick-cell-q1')).textContent).toContain('quick sandbox');
    expect(screen.queryByTestId('stage-q1-build')).toBeNull();
    // Booting: no shell yet; another task's shell is not this one's.
    push({ type: 'task.updated', task: quick({ phase: 'provisioning', sandbox: { status: 'booting' } }) });
    push({ type: 'terminal.opened', info: { id: 'other', taskId: 'q0', kind: 'shell', title: 'shell', status: 'live', cols: 100, rows: 30 } });
    expect(calls.some((c) => c.method === 'terminal.openShell')).toBe(false);
    push({ type: 'task.updated', task: quick({ phase: 'running', sandbox: { status: 'running' } }) });
    await waitFor(() => expect(calls.filter((c) => c.method === 'terminal.openShell').map((c) => c.input.taskId)).toEqual(['q1']));
    await waitFor(() => expect(screen.getByTestId('terminal-tab-s1').getAttribute('aria-selected')).toBe('true'));
    // A later update does not open a second shell.
    push({ type: 'task.updated', task: quick({ phase: 'running', sandbox: { status: 'running', accel: 'kvm' } }) });
    expect(calls.filter((c) => c.method === 'terminal.openShell')).toHaveLength(1);
    expect(screen.getByTestId('quick-cell-q1').textContent).toContain('shell open until you exit it');
    // The click asked the browser whether it may notify.
    expect(RecordingNotification.asked).toBe(1);
  });

  it('shows the shell that opened while it boots (restored from a snapshot) and never opens one itself', async () => {
    const { calls, push } = mount([]);
    fireEvent.click(await screen.findByTestId('quick-sandbox-button'));
    await screen.findByTestId('quick-cell-q1');
    push({ type: 'task.updated', task: quick({ phase: 'provisioning', sandbox: { status: 'booting' } }) });
    push({ type: 'terminal.opened', info: { id: 'early', taskId: 'q1', kind: 'shell', title: 'shell', status: 'live', cols: 100, rows: 30 } });
    await waitFor(() => expect(screen.getByTestId('terminal-tab-early').getAttribute('aria-selected')).toBe('true'));
    await waitFor(() => expect(calls.filter((c) => c.method === 'terminal.attach').map((c) => c.input.sessionId)).toContain('early'));
    push({ type: 'task.updated', task: quick({ phase: 'seeding', sandbox: { status: 'booting' } }) });
    push({ type: 'task.updated', task: quick({ phase: 'running', sandbox: { status: 'running' } }) });
    await waitFor(() => expect(screen.getByTestId('quick-cell-q1').textContent).toContain('shell open until you exit it'));
    expect(calls.some((c) => c.method === 'terminal.openShell')).toBe(false);
    expect(screen.getByTestId('terminal-tab-early').getAttribute('aria-selected')).toBe('true');
  });

  it('shows a shell that opened before the button’s answer came, and opens none itself', async () => {
    const early: TerminalInfo = { id: 'early', taskId: 'q1', kind: 'shell', title: 'shell', status: 'live', cols: 100, rows: 30 };
    const { calls, push } = mount([], 'web', {
      'sandboxes.quick': (_input, emit) => {
        emit({ type: 'terminal.opened', info: early });
        return quick({ phase: 'provisioning', sandbox: { status: 'booting' } });
      },
    });
    fireEvent.click(await screen.findByTestId('quick-sandbox-button'));
    await waitFor(() => expect(screen.getByTestId('terminal-tab-early').getAttribute('aria-selected')).toBe('true'));
    push({ type: 'task.updated', task: quick({ phase: 'running', sandbox: { status: 'running' } }) });
    await waitFor(() => expect(screen.getByTestId('quick-cell-q1').textContent).toContain('shell open until you exit it'));
    expect(calls.some((c) => c.method === 'terminal.openShell')).toBe(false);
  });

  it('seeds the repository typed in the form and names it on the button', async () => {
    const { calls } = mount([]);
    fireEvent.change(await screen.findByTestId('repo-path-input'), { target: { value: '/home/me/repo' } });
    const button = screen.getByTestId('quick-sandbox-button');
    expect(button.textContent).toBe('Quick sandbox with repo');
    fireEvent.click(button);
    await waitFor(() => expect(calls.find((c) => c.method === 'sandboxes.quick')?.input).toEqual({ repoPath: '/home/me/repo' }));
  });

  it('asks for a kept sandbox when the user ticks "Keep until I destroy it", and says on the board that it stays', async () => {
    const { calls, push } = mount([]);
    const keep = (await screen.findByTestId('quick-sandbox-keep')) as HTMLInputElement;
    // Off unless asked: a quick sandbox goes away with its shell by default.
    expect(keep.checked).toBe(false);
    expect(screen.getByTestId('quick-sandbox-button').getAttribute('title')).toContain('exiting the shell destroys it');
    fireEvent.click(keep);
    expect(screen.getByTestId('quick-sandbox-button').getAttribute('title')).toContain('stays until you destroy it');
    fireEvent.change(screen.getByTestId('repo-path-input'), { target: { value: '/home/me/repo' } });
    fireEvent.click(screen.getByTestId('quick-sandbox-button'));
    await waitFor(() => expect(calls.filter((c) => c.method === 'sandboxes.quick').map((c) => c.input)).toEqual([{ repoPath: '/home/me/repo', keep: true }]));
    push({ type: 'task.updated', task: quick({ repoPath: '/home/me/repo', keep: true, phase: 'running', sandbox: { status: 'running' } }) });
    await waitFor(() => expect(screen.getByTestId('quick-cell-q1').textContent).toContain('kept until you destroy it'));
    // Unticked again, the next one is the throwaway kind: no keep sent.
    fireEvent.click(keep);
    fireEvent.change(screen.getByTestId('repo-path-input'), { target: { value: '' } });
    fireEvent.click(screen.getByTestId('quick-sandbox-button'));
    await waitFor(() => expect(calls.filter((c) => c.method === 'sandboxes.quick').map((c) => c.input).at(-1)).toEqual({}));
  });

  it('a quick sandbox that failed opens no shell and offers no Retry', async () => {
    const { calls, push } = mount([]);
    fireEvent.click(await screen.findByTestId('quick-sandbox-button'));
    await screen.findByTestId('quick-cell-q1');
    push({ type: 'task.updated', task: quick({ phase: 'failed', error: { name: 'SandboxBootFailed', message: 'no boot' } }) });
    push({ type: 'task.updated', task: quick({ phase: 'running', sandbox: { status: 'running' } }) });
    expect(calls.some((c) => c.method === 'terminal.openShell')).toBe(false);
    expect(screen.queryByTestId('retry-button')).toBeNull();
  });
});

describe('browser notifications', () => {
  it('tell of a task that reaches review or fails, once permission is granted', async () => {
    RecordingNotification.permission = 'granted';
    const { push } = mount([pipelineTask()]);
    await screen.findByTestId('task-row-t1');
    await waitFor(() => expect(screen.getByTestId('qemu-status')).toBeTruthy());
    push({ type: 'task.updated', task: pipelineTask({ phase: 'pulling-back' }) });
    expect(RecordingNotification.shown).toEqual([]);
    push({ type: 'task.updated', task: pipelineTask({ phase: 'review' }) });
    push({ type: 'task.updated', task: pipelineTask({ phase: 'review' }) });
    push({ type: 'task.updated', task: pipelineTask({ id: 't2', phase: 'failed', error: { name: 'StageFailed', message: 'tests failed' } }) });
    expect(RecordingNotification.shown).toEqual([{ title: 'Ready for review', body: 'Add a greeting', tag: 'review-t1' }]);
    // t2 was first seen failed (no earlier state in this window): nothing to announce.
    push({ type: 'task.updated', task: pipelineTask({ id: 't3', phase: 'running' }) });
    push({ type: 'task.updated', task: pipelineTask({ id: 't3', phase: 'failed', error: { name: 'StageFailed', message: 'tests failed' } }) });
    expect(RecordingNotification.shown.at(-1)).toEqual({ title: 'Task failed', body: 'Add a greeting: tests failed', tag: 'failed-t3' });
  });

  it('stay silent without permission, and in Electron (its main process notifies)', async () => {
    RecordingNotification.permission = 'denied';
    const web = mount([pipelineTask()]);
    await screen.findByTestId('task-row-t1');
    web.push({ type: 'task.updated', task: pipelineTask({ phase: 'review' }) });
    cleanup();
    RecordingNotification.permission = 'granted';
    const electron = mount([pipelineTask()], 'electron');
    await screen.findByTestId('task-row-t1');
    await waitFor(() => expect(screen.getByTestId('qemu-status')).toBeTruthy());
    electron.push({ type: 'task.updated', task: pipelineTask({ phase: 'review' }) });
    expect(RecordingNotification.shown).toEqual([]);
  });
});
