// The Agent session button as the user meets it in the web UI: with a repository
// in the form, it asks the app for an agent session, shows it on the board as
// "Agent session" with its agent named, and selects the agent's terminal when it opens.
import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { act } from 'react';
import { afterEach, describe, expect, it } from 'vitest';
import type { FactoryEvent } from '../../common/contract.js';
import type { Task } from '../../common/domain.js';
import { mountWith, RecordingBridge, type Handlers } from './support/app-harness.js';

function session(over: Partial<Task> = {}): Task {
  return {
    id: 'a1', title: 'Agent session: Claude Code in repo', repoPath: '/home/me/repo', baseRef: 'main', baseCommit: 'c'.repeat(40), branch: 'factory/a1',
    createdAt: '2026-01-01T00:00:00.000Z', phase: 'creating', sandbox: { status: 'none' }, stages: [], kind: 'agent', agent: 'claude-code', ...over,
  };
}

afterEach(() => {
  cleanup();
  localStorage.clear();
});

function mount() {
  const handlers: Handlers = {
    'system.status': () => ({ qemu: { ok: true }, image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'web' }),
    'tasks.list': () => [],
    'terminal.list': () => [],
    'settings.get': () => ({ defaultAgent: 'claude-code', maxParallelTasks: 2, vmMemoryMb: 1024, vmCpus: 1, terminalLogRetentionDays: 30, egressRules: [], layerBudgetGb: 20, agents: ['claude-code', 'codex'] }),
    'audit.list': () => [],
    'leakcheck.get': () => null,
    'sandboxes.agent': () => session(),
    'terminal.attach': ({ sessionId }) => ({ info: { id: sessionId, taskId: 'a1', kind: 'shell', title: 'agent: Claude Code', status: 'live', cols: 100, rows: 30 }, scrollback: '' }),
  };
  const bridge = new RecordingBridge(handlers);
  mountWith(bridge);
  return { calls: bridge.calls as Array<{ method: string; input: any }>, push: (e: FactoryEvent) => act(() => bridge.emit(e)) };
}

describe('the Agent session button', () => {
  it('needs a repository, starts a session with it, and shows the agent terminal when it opens', async () => {
    const { calls, push } = mount();
    const button = (await screen.findByTestId('agent-session-button')) as HTMLButtonElement;
    expect(button.disabled).toBe(true);
    fireEvent.change(screen.getByTestId('repo-path-input'), { target: { value: '/home/me/repo' } });
    expect(button.disabled).toBe(false);
    fireEvent.click(button);
    await waitFor(() => expect(calls.find((c) => c.method === 'sandboxes.agent')?.input).toEqual({ agent: 'claude-code', repoPath: '/home/me/repo', cols: 100, rows: 30 }));
    const cell = await screen.findByTestId('agent-cell-a1');
    expect(cell.textContent).toContain('Agent session · Claude Code');
    expect(screen.queryByTestId('stage-a1-build')).toBeNull();
    push({ type: 'task.updated', task: session({ phase: 'running', sandbox: { status: 'running' } }) });
    push({ type: 'terminal.opened', info: { id: 's9', taskId: 'a1', kind: 'shell', title: 'agent: Claude Code', status: 'live', cols: 100, rows: 30 } });
    await waitFor(() => expect(screen.getByTestId('terminal-tab-s9').getAttribute('aria-selected')).toBe('true'));
    expect(screen.getByTestId('agent-cell-a1').textContent).toContain('running until you exit it');
  });
});
