// Look rather than read (issue 13): a task's stage timeline and its sandbox's CPU
// and memory. jsdom with a recording bridge in place of a host; the sampler itself
// reads real processes in test/unit/vm/vm-stats.test.ts.
import { act, cleanup, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { STAGE_NAMES, type Task } from '../../common/domain.js';
import type { SandboxSample } from '../../common/sandbox-stats.js';
import { sparkPoints } from '../../renderer/components/ResourceSpark.js';
import { timelineRows } from '../../renderer/components/StageTimeline.js';
import { mountWith, RecordingBridge, type Handlers } from './support/app-harness.js';

const MiB = 2 ** 20;
const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const iso = (s: number) => new Date(T0 + s * 1000).toISOString();

function task(patch: Partial<Task> = {}): Task {
  return {
    id: 't1', title: 'Add a greeting', repoPath: '/home/me/repo', baseRef: 'main', baseCommit: 'a'.repeat(40), branch: 'factory/t1',
    createdAt: iso(0), phase: 'running', sandbox: { status: 'running', accel: 'tcg' },
    stages: STAGE_NAMES.map((name) => ({ name, status: 'pending' as const })),
    ...patch,
  };
}

/** setup 10 s, request 5 s, plan failed after 20 s on its second attempt; the rest never ran. */
function failedPlan(): Task {
  return task({
    phase: 'failed',
    setup: { status: 'passed', source: 'detected', lines: [], unsupported: [], startedAt: iso(0), endedAt: iso(10), durationMs: 10_000 },
    stages: STAGE_NAMES.map((name) =>
      name === 'request'
        ? { name, status: 'passed' as const, startedAt: iso(10), endedAt: iso(15), durationMs: 5000 }
        : name === 'plan'
          ? { name, status: 'failed' as const, startedAt: iso(20), endedAt: iso(40), durationMs: 20_000, exitCode: 3, attempt: 2 }
          : { name, status: 'pending' as const },
    ),
  });
}

function mount(handlers: Handlers) {
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true, version: '8.2.2' }, image: { state: 'ready', version: 'v3' }, dataDir: '/data', host: 'web' }),
    'settings.get': () => ({ defaultAgent: 'command', maxParallelTasks: 2, vmMemoryMb: 1024, vmCpus: 2, agents: ['command'] }),
    'tasks.list': () => [],
    'terminal.list': () => [],
    'audit.list': () => [],
    'leakcheck.get': () => null,
    ...handlers,
  });
  const controller = mountWith(bridge);
  return { bridge, controller };
}

afterEach(cleanup);

describe('the stage timeline', () => {
  it('lists setup and the six stages with their state and duration, bars on one time axis', async () => {
    const { controller } = mount({ 'tasks.list': () => [failedPlan()] });
    await waitFor(() => expect(controller.store.getState().tasks.t1).toBeTruthy());
    act(() => controller.open('t1'));
    const timeline = await screen.findByTestId('stage-timeline');
    // The text alternative: one list item per step, in order, saying what happened.
    const items = within(timeline).getAllByRole('listitem').map((li) => li.textContent);
    expect(items).toEqual([
      'setup passed in 10.0 s',
      'request passed in 5.0 s',
      'plan failed in 20.0 s · attempt 2',
      'build pending',
      'test pending',
      'review pending',
      'document pending',
    ]);
    expect(timeline.getAttribute('aria-label')).toBe('Stage timeline, 40.0 s from the first step to the last');
    expect(screen.getByTestId('timeline-plan').dataset.status).toBe('failed');
    // Bars are proportional: plan starts at 20 of 40 s and takes half the span.
    const bar = (name: string) => screen.getByTestId(`timeline-bar-${name}`).style;
    expect(bar('plan').left).toBe('50%');
    expect(bar('plan').width).toBe('50%');
    expect(bar('setup').width).toBe('25%');
    expect(bar('request').left).toBe('25%');
    expect(screen.queryByTestId('timeline-bar-build')).toBeNull();
  });

  it('grows the running stage live', async () => {
    const started = Date.now() - 2000;
    const running = task({
      stages: STAGE_NAMES.map((name) =>
        name === 'request' ? { name, status: 'running' as const, startedAt: new Date(started).toISOString() } : { name, status: 'pending' as const },
      ),
    });
    const { controller } = mount({ 'tasks.list': () => [running], 'tasks.stats': () => ({ taskId: 't1', intervalMs: 2000, live: true, samples: [] }) });
    await waitFor(() => expect(controller.store.getState().tasks.t1).toBeTruthy());
    act(() => controller.open('t1'));
    const row = await screen.findByTestId('timeline-request');
    const first = Number(row.dataset.ms);
    expect(first).toBeGreaterThanOrEqual(2000);
    expect(row.textContent).toMatch(/running for \d+\.\d s/);
    // The clock moves on with nothing from the host: the bar and its text follow.
    await waitFor(() => expect(Number(screen.getByTestId('timeline-request').dataset.ms)).toBeGreaterThanOrEqual(first + 900), { timeout: 5000 });
  });

  it('ends a finished stage at its end, and never draws a bar backwards when the clock stepped back', () => {
    const t = task({
      stages: STAGE_NAMES.map((name) =>
        name === 'request'
          ? { name, status: 'passed' as const, startedAt: iso(10), durationMs: 4000 }
          : name === 'plan'
            ? { name, status: 'passed' as const, startedAt: iso(20), endedAt: iso(19) }
            : { name, status: 'pending' as const },
      ),
    });
    const rows = timelineRows(t, T0 + 999_000);
    expect(rows[0]).toEqual({ name: 'request', status: 'passed', start: T0 + 10_000, end: T0 + 14_000 });
    expect(rows[1]!.end).toBe(rows[1]!.start);
  });

  it('shows nothing before any step started, and nothing for a quick sandbox', async () => {
    const { controller } = mount({ 'tasks.list': () => [task({ sandbox: { status: 'booting' } })] });
    await waitFor(() => expect(controller.store.getState().tasks.t1).toBeTruthy());
    act(() => controller.open('t1'));
    await screen.findByTestId('task-detail');
    expect(screen.queryByTestId('stage-timeline')).toBeNull();
  });
});

describe('a sandbox\u2019s CPU and memory', () => {
  const sample = (s: number, cpu: number, mib: number): SandboxSample => ({ at: T0 + s * 1000, cpuPercent: cpu, pssBytes: mib * MiB, rssBytes: (mib + 40) * MiB });

  it('loads the samples so far, follows live ones, and puts the current value in words', async () => {
    const { bridge, controller } = mount({
      'tasks.list': () => [task()],
      'tasks.stats': () => ({ taskId: 't1', intervalMs: 2000, live: true, guestMemoryBytes: 1024 * MiB, samples: [sample(2, 90, 300), sample(4, 120, 410)] }),
    });
    await waitFor(() => expect(controller.store.getState().tasks.t1).toBeTruthy());
    act(() => controller.open('t1'));
    expect((await screen.findByTestId('resource-now')).textContent).toBe('CPU 120% · 410 MiB');
    expect(bridge.inputs('tasks.stats')).toEqual([{ taskId: 't1' }]);
    act(() => bridge.emit({ type: 'sandbox.stats', taskId: 't1', sample: sample(6, 43.4, 612) }));
    expect(screen.getByTestId('resource-now').textContent).toBe('CPU 43% · 612 MiB');
    // The graphs have words too: what they show, now and at the peak.
    expect(screen.getByTestId('spark-cpu').getAttribute('aria-label')).toBe('CPU over the last 4 s: now 43%, peak 120% of one core');
    expect(screen.getByTestId('spark-mem').getAttribute('aria-label')).toBe('Memory over the last 4 s: now 612 MiB, peak 612 MiB of a 1.0 GiB guest');
    expect(screen.getByTestId('spark-cpu').querySelector('polyline')!.getAttribute('points')!.split(' ')).toHaveLength(3);
    // The header adds what the running sandboxes hold on the host now.
    expect(screen.getByTestId('sandbox-memory-in-use').textContent).toBe(' · 612 MiB in use');

    // The sandbox stops: the last values stay, marked as such, and the header total goes.
    act(() => bridge.emit({ type: 'task.updated', task: task({ phase: 'failed', sandbox: { status: 'destroyed' } }) }));
    expect(screen.getByTestId('resource-spark').dataset.state).toBe('stopped');
    expect(screen.getByTestId('resource-now').textContent).toBe('last: CPU 43% · 612 MiB');
    expect(screen.queryByTestId('sandbox-memory-in-use')).toBeNull();
    // A removed task's samples go with it.
    act(() => bridge.emit({ type: 'task.removed', taskId: 't1' }));
    expect(controller.store.getState().stats.t1).toBeUndefined();
  });

  it('says it is measuring until the first sample, then shows it with the guest size', async () => {
    const { bridge, controller } = mount({ 'tasks.list': () => [task()], 'tasks.stats': () => ({ taskId: 't1', intervalMs: 2000, live: true, samples: [] }) });
    await waitFor(() => expect(controller.store.getState().tasks.t1).toBeTruthy());
    act(() => controller.open('t1'));
    expect((await screen.findByTestId('resource-spark')).dataset.state).toBe('waiting');
    expect(screen.getByTestId('resource-spark').textContent).toBe('CPU and memory: measuring…');
    // The guest's size comes with the live samples too (the history was asked before QEMU was measured).
    act(() => bridge.emit({ type: 'sandbox.stats', taskId: 't1', sample: sample(2, 5, 200), guestMemoryBytes: 2048 * MiB }));
    act(() => bridge.emit({ type: 'sandbox.stats', taskId: 't1', sample: sample(4, 7, 210) }));
    expect(screen.getByTestId('resource-now').textContent).toBe('CPU 7% · 210 MiB');
    expect(screen.getByTestId('spark-mem').getAttribute('aria-label')).toBe('Memory over the last 2 s: now 210 MiB, peak 210 MiB of a 2.0 GiB guest');
  });

  it('shows nothing for a running sandbox the host does not measure', async () => {
    const { bridge, controller } = mount({ 'tasks.list': () => [task()], 'tasks.stats': () => ({ taskId: 't1', intervalMs: 2000, live: false, samples: [] }) });
    await waitFor(() => expect(controller.store.getState().tasks.t1).toBeTruthy());
    act(() => controller.open('t1'));
    await waitFor(() => expect(bridge.inputs('tasks.stats')).toHaveLength(1));
    await screen.findByTestId('sandbox-status');
    expect(screen.queryByTestId('resource-spark')).toBeNull();
  });

  it('keeps live samples that arrived while the history was asked for', async () => {
    let answer!: (v: unknown) => void;
    const { bridge, controller } = mount({
      'tasks.list': () => [task()],
      'tasks.stats': () => new Promise((r) => (answer = r)),
    });
    await waitFor(() => expect(controller.store.getState().tasks.t1).toBeTruthy());
    act(() => controller.open('t1'));
    await waitFor(() => expect(bridge.inputs('tasks.stats')).toHaveLength(1));
    act(() => bridge.emit({ type: 'sandbox.stats', taskId: 't1', sample: sample(6, 10, 500) }));
    await act(async () => answer({ taskId: 't1', intervalMs: 2000, live: true, samples: [sample(2, 1, 100), sample(4, 2, 200)] }));
    expect(controller.store.getState().stats.t1!.samples.map((s) => s.cpuPercent)).toEqual([1, 2, 10]);
    expect(screen.getByTestId('resource-now').textContent).toBe('CPU 10% · 500 MiB');
  });

  it('scales a spark into its box whatever the values (negative, huge, a single one)', () => {
    expect(sparkPoints([5], 100)).toBe('');
    expect(sparkPoints([0, 100], 100, 10, 12)).toBe('0.0,11.0 10.0,1.0');
    expect(sparkPoints([-5, 1e12], 100, 10, 12)).toBe('0.0,11.0 10.0,1.0');
    expect(sparkPoints([0, 0], 0, 10, 12)).toBe('0.0,11.0 10.0,11.0');
  });
});

