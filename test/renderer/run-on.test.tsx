// The new-task form's "Run on": offered only once sandbox hosts exist, and what
// the user picks is what tasks.create gets.
import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { STAGE_NAMES, type Task } from '../../common/domain.js';
import type { SandboxHostView } from '../../common/sandbox-hosts.js';
import { mountWith, RecordingBridge, type Handlers } from './support/app-harness.js';

const kvmBox: SandboxHostView = { name: 'kvm-box', destination: 'me@kvm-box', port: 22, keySource: 'agent', capacity: 4, storageDir: '/var/lib/factory-in-a-box', virtType: 'kvm', connected: true, lost: false, running: 1 };

function task(title: string): Task {
  return {
    id: 't1', title, repoPath: '/home/me/repo', baseRef: 'main', baseCommit: 'a'.repeat(40), branch: 'factory/t1',
    createdAt: '2026-01-01T00:00:00.000Z', phase: 'running', sandbox: { status: 'booting' },
    stages: STAGE_NAMES.map((name) => ({ name, status: 'pending' })),
  } as Task;
}

function mount(hosts: SandboxHostView[]) {
  const handlers: Handlers = {
    'system.status': () => ({ qemu: { ok: true }, image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'web' }),
    'tasks.list': () => [],
    'terminal.list': () => [],
    'hosts.list': () => hosts,
    'tasks.create': (input: { title: string }) => task(input.title),
  };
  const bridge = new RecordingBridge(handlers);
  mountWith(bridge);
  return bridge;
}

afterEach(cleanup);

describe('Run on, in the new-task form', () => {
  it('is not asked without sandbox hosts', async () => {
    const bridge = mount([]);
    await waitFor(() => expect(bridge.calls.some((c) => c.method === 'hosts.list')).toBe(true));
    expect(screen.queryByTestId('run-on-select')).toBeNull();
  });

  it('offers this machine, each host with its state and load, and any; sends the choice', async () => {
    const bridge = mount([kvmBox, { ...kvmBox, name: 'old-box', connected: false, lost: true, running: 0 }]);
    const select = (await screen.findByTestId('run-on-select')) as HTMLSelectElement;
    expect([...select.options].map((o) => [o.value, o.textContent])).toEqual([
      ['local', 'This machine'],
      ['kvm-box', 'kvm-box (connected, 1/4)'],
      ['old-box', 'old-box (lost, 0/4)'],
      ['any', 'Any (least loaded)'],
    ]);
    fireEvent.change(screen.getByTestId('repo-path-input'), { target: { value: '/home/me/repo' } });
    fireEvent.change(screen.getByTestId('task-text-input'), { target: { value: 'here' } });
    fireEvent.click(screen.getByTestId('start-button'));
    await waitFor(() => expect(bridge.calls.filter((c) => c.method === 'tasks.create')).toHaveLength(1));
    fireEvent.change(select, { target: { value: 'kvm-box' } });
    fireEvent.change(screen.getByTestId('task-text-input'), { target: { value: 'there' } });
    fireEvent.click(screen.getByTestId('start-button'));
    await waitFor(() => expect(bridge.calls.filter((c) => c.method === 'tasks.create')).toHaveLength(2));
    const creates = bridge.calls.filter((c) => c.method === 'tasks.create').map((c) => c.input as { title: string; host?: string });
    expect(creates.map((c) => [c.title, c.host])).toEqual([['here', undefined], ['there', 'kvm-box']]);
  });
});
