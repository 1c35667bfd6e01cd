// Status up front (issue 13): the header says what the machine can do, and a
// missing keychain says how to fix it before anyone types a key. jsdom with a
// recording bridge in place of a host; the host's probe itself runs against the
// real Secret Service in test/integration (system.status).
import { act, cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { FactoryError } from '../../common/errors.js';
import { STAGE_NAMES, type Task } from '../../common/domain.js';
import { mountWith, RecordingBridge, type Handlers } from './support/app-harness.js';

const LOCKED = { ok: false, error: { name: 'KeychainUnavailable', message: 'the OS keychain cannot be used (DBus error: no Secret Service).' } };

function status(keychain: unknown) {
  return () => ({ qemu: { ok: true, version: '8.2.2' }, accel: 'kvm', image: { state: 'ready', version: 'v3' }, keychain, dataDir: '/data', host: 'web' });
}

function task(id: string, sandbox: Task['sandbox']['status']): Task {
  return {
    id, title: `task ${id}`, repoPath: '/home/me/repo', baseRef: 'main', baseCommit: 'a'.repeat(40), branch: `factory/${id}`,
    createdAt: '2026-01-01T00:00:00.000Z', phase: sandbox === 'destroyed' ? 'approved' : 'running', sandbox: { status: sandbox },
    stages: STAGE_NAMES.map((name) => ({ name, status: 'pending' })),
  } as Task;
}

function mount(handlers: Handlers) {
  const bridge = new RecordingBridge({
    'tasks.list': () => [],
    'terminal.list': () => [],
    'credentials.list': () => [],
    'audit.list': () => [],
    'leakcheck.get': () => null,
    ...handlers,
  });
  mountWith(bridge);
  return bridge;
}

afterEach(cleanup);

describe('the header', () => {
  it('shows QEMU, the accelerator, the image and an available keychain', async () => {
    mount({ 'system.status': status({ ok: true }) });
    expect((await screen.findByTestId('keychain-status')).dataset.state).toBe('available');
    expect(screen.getByTestId('qemu-status').textContent).toContain('8.2.2');
    expect(screen.getByTestId('accel').textContent).toContain('Hardware acceleration (KVM)');
    expect(screen.getByTestId('image-status').dataset.state).toBe('ready');
  });

  it('says the keychain is unavailable and how to fix it', async () => {
    mount({ 'system.status': status(LOCKED) });
    const pill = await screen.findByTestId('keychain-status');
    expect(pill.dataset.state).toBe('unavailable');
    expect(screen.getByTestId('keychain-fix').textContent).toMatch(/Unlock or start the keychain/);
    expect(pill.getAttribute('title')).toContain('no Secret Service');
  });

  it('counts the running sandboxes and their guest memory, and follows them as they stop', async () => {
    const bridge = mount({
      'system.status': status({ ok: true }),
      'settings.get': () => ({ defaultAgent: 'command', parallelTasks: 2, vmMemoryMb: 1536, vmCpus: 2, agents: [] }),
      'tasks.list': () => [task('a', 'running'), task('b', 'booting'), task('c', 'destroyed'), task('d', 'none')],
    });
    await waitFor(() => expect(screen.getByTestId('sandbox-usage').dataset.count).toBe('2'));
    await waitFor(() => expect(screen.getByTestId('sandbox-usage').textContent).toBe('2 sandboxes, 3 GiB'));
    act(() => bridge.emit({ type: 'task.updated', task: task('a', 'destroyed') }));
    expect(screen.getByTestId('sandbox-usage').textContent).toBe('1 sandbox, 1.5 GiB');
    act(() => bridge.emit({ type: 'task.updated', task: task('b', 'lost') }));
    expect(screen.getByTestId('sandbox-usage').textContent).toBe('0 sandboxes');
  });
});

describe('the Credentials screen with no keychain', () => {
  it('says how to fix it before anyone types, and checks again on request', async () => {
    let keychain: unknown = LOCKED;
    const bridge = mount({ 'system.status': () => status(keychain)() });
    fireEvent.click(await screen.findByTestId('nav-credentials'));
    const box = await screen.findByTestId('keychain-error');
    expect(screen.getByTestId('keychain-error-title').textContent).toBe('The keychain cannot be used');
    expect(screen.getByTestId('keychain-error-help').textContent).toMatch(/Unlock or start the keychain/);
    expect(box.textContent).not.toMatch(/KeychainUnavailable:/);
    expect((screen.getByTestId('credential-value') as HTMLInputElement).value).toBe('');
    keychain = { ok: true };
    const before = bridge.inputs('system.status').length;
    fireEvent.click(screen.getByTestId('keychain-recheck'));
    await waitFor(() => expect(screen.queryByTestId('keychain-unavailable')).toBeNull());
    expect(bridge.inputs('system.status').length).toBe(before + 1);
  });

  it('keeps the typed value when the save fails, with the error titled and explained', async () => {
    const bridge = mount({
      'system.status': status({ ok: true }),
      'credentials.set': () => {
        throw new FactoryError('KeychainUnavailable', 'the OS keychain cannot be used (locked).');
      },
    });
    fireEvent.click(await screen.findByTestId('nav-credentials'));
    fireEvent.change(await screen.findByTestId('credential-label'), { target: { value: 'Work key' } });
    fireEvent.change(screen.getByTestId('credential-value'), { target: { value: 'sk-ant-typed-once' } });
    fireEvent.click(screen.getByTestId('credential-save'));
    await screen.findByTestId('credential-form-error');
    expect(screen.getByTestId('credential-form-error-title').textContent).toBe('The keychain cannot be used');
    expect((screen.getByTestId('credential-value') as HTMLInputElement).value).toBe('sk-ant-typed-once');
    expect((screen.getByTestId('credential-label') as HTMLInputElement).value).toBe('Work key');
    // The failure is news about the keychain: the status is asked again, so the screen says it up front too.
    await waitFor(() => expect(bridge.inputs('system.status').length).toBe(2));
  });
});
