// The agents' scratch files kept with a task: listed by name and size, opened on
// request, their text from the sandbox shown as text with hidden characters
// escaped; a failed read says why on the row. jsdom with a recording bridge.
import { cleanup, fireEvent, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { FactoryError } from '../../common/errors.js';
import { STAGE_NAMES, type Task } from '../../common/domain.js';
import { mountWith, RecordingBridge, type Handlers } from './support/app-harness.js';

const task: Task = {
  id: 't1', title: 'Plan it', repoPath: '/home/me/repo', baseRef: 'main', baseCommit: 'a'.repeat(40),
  branch: 'factory/t1', createdAt: '2026-01-01T00:00:00.000Z', phase: 'review', sandbox: { status: 'running' },
  stages: STAGE_NAMES.map((name) => ({ name, status: 'passed' as const })),
  artifacts: [
    { name: 'PLAN.md', bytes: 42, truncated: false },
    { name: 'REVIEW.md', bytes: 1048576, truncated: true },
  ],
};

function mount(handlers: Handlers = {}) {
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true, version: '8' }, image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'web' }),
    'tasks.list': () => [task],
    'terminal.list': () => [],
    'audit.list': () => [],
    'leakcheck.get': () => null,
    'tasks.review': () => { throw new FactoryError('NoReview', 'not yet'); },
    ...handlers,
  });
  mountWith(bridge);
  return bridge;
}

afterEach(cleanup);

describe('a task\'s artifacts', () => {
  it('lists each with its size, and shows its text on request with hidden characters escaped', async () => {
    const bridge = mount({ 'tasks.artifact': ({ name }: { name: string }) => ({ name, text: `# Plan\n\u202eevil\u0007\n`, truncated: false }) });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    const list = await screen.findByTestId('task-artifacts');
    expect(within(list).getByTestId('artifact-REVIEW.md').textContent).toContain('cut at the size limit');
    const show = within(list).getByRole('button', { name: 'Show PLAN.md' });
    fireEvent.click(show);
    const text = await within(list).findByLabelText('PLAN.md text');
    expect(text.textContent).toBe('# Plan\n\\u{202e}evil\\x07\n');
    expect(bridge.inputs('tasks.artifact')).toEqual([{ taskId: 't1', name: 'PLAN.md' }]);
    expect(show.getAttribute('aria-expanded')).toBe('true');
    fireEvent.click(show);
    await waitFor(() => expect(within(list).queryByLabelText('PLAN.md text')).toBeNull());
  });

  it('says on the row why an artifact could not be read', async () => {
    mount({ 'tasks.artifact': () => { throw new FactoryError('NotFound', 'task t1 has no artifact named "PLAN.md"'); } });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    fireEvent.click(await screen.findByRole('button', { name: 'Show PLAN.md' }));
    expect((await screen.findByTestId('artifact-error-PLAN.md')).textContent).toContain('no artifact named');
  });
});
