// The warm pool in the header: ready/target, off, or paused by the memory
// budget, following the host's pool.status events. jsdom with a recording
// bridge in place of a host; the pool itself runs in test/integration/warm-pool.
import { act, cleanup, screen } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import type { PoolStatus } from '../../common/domain.js';
import { mountWith, RecordingBridge } from './support/app-harness.js';

const memory = { memoryUsedMb: 2048, memoryBudgetMb: 12288 };

function mount(pool: PoolStatus | undefined) {
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true, version: '8.2.2' }, image: { state: 'ready', version: 'v3' }, dataDir: '/data', host: 'web', ...(pool ? { pool } : {}) }),
    'tasks.list': () => [],
    'terminal.list': () => [],
    'credentials.list': () => [],
    'audit.list': () => [],
    'leakcheck.get': () => null,
  });
  mountWith(bridge);
  return bridge;
}

afterEach(cleanup);

describe('the pool in the header', () => {
  it('shows ready/target and follows the pool as a task takes a sandbox and it refills', async () => {
    const bridge = mount({ state: 'ready', ready: 1, target: 1, ...memory });
    const pill = await screen.findByTestId('pool-status');
    expect(pill.textContent).toBe('Pool: 1 ready / 1');
    expect(pill.getAttribute('title')).toContain('2048 of 12288 MiB');
    act(() => bridge.emit({ type: 'pool.status', status: { state: 'filling', ready: 0, target: 1, ...memory } }));
    expect(screen.getByTestId('pool-status').textContent).toBe('Pool: 0 ready / 1, filling');
    act(() => bridge.emit({ type: 'pool.status', status: { state: 'ready', ready: 1, target: 1, ...memory } }));
    expect(screen.getByTestId('pool-status').dataset.state).toBe('ready');
  });

  it('says off, and says when the memory budget stops it, with the figures on hover', async () => {
    const bridge = mount({ state: 'off', ready: 0, target: 0, ...memory });
    expect((await screen.findByTestId('pool-status')).textContent).toBe('Pool: off');
    const reason = 'memory budget: 11264 MiB of 12288 MiB held, one more needs 2048 MiB';
    act(() => bridge.emit({ type: 'pool.status', status: { state: 'paused', ready: 0, target: 2, reason, ...memory } }));
    const pill = screen.getByTestId('pool-status');
    expect(pill.textContent).toBe('Pool: paused: memory budget');
    expect(pill.getAttribute('title')).toContain(reason);
  });

  it('shows nothing for a host without a pool', async () => {
    mount(undefined);
    await screen.findByTestId('qemu-status');
    expect(screen.queryByTestId('pool-status')).toBeNull();
  });
});
