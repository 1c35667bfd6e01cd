// Renderer components in jsdom, with a recording bridge in place of a host.
import { act, cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { FactoryError } from '../../common/contract.js';
import { STAGE_NAMES, type PullbackReview, type Task } from '../../common/domain.js';
import { mountWith, RecordingBridge, type Handlers } from './support/app-harness.js';

function task(over: Partial<Task> = {}): Task {
  return {
    id: 't1', title: 'Add a greeting', repoPath: '/home/me/repo', baseRef: 'main', baseCommit: 'a'.repeat(40),
    branch: 'factory/t1', createdAt: '2026-01-01T00:00:00.000Z', phase: 'running', sandbox: { status: 'running', accel: 'tcg' },
    stages: STAGE_NAMES.map((name, i) => ({
      name,
      status: i < 2 ? 'passed' : i === 2 ? 'running' : 'pending',
      ...(i < 2 ? { durationMs: 1500 + i, sessionId: `s-${name}` } : i === 2 ? { sessionId: 's-build' } : {}),
    })),
    ...over,
  } as Task;
}


const baseHandlers = {
  'system.status': () => ({
    qemu: { ok: false, installHint: 'sudo apt-get install qemu-system-x86 qemu-utils' },
    image: { state: 'building', version: 'v1', progress: 0.4, step: 'mmdebstrap' },
    dataDir: '/data',
    host: 'web',
  }),
  'tasks.list': () => [],
  'terminal.list': () => [],
  'terminal.attach': ({ sessionId }: { sessionId: string }) => ({
    info: { id: sessionId, kind: 'stage', title: 'x', status: 'live', cols: 80, rows: 24 },
    scrollback: btoa(`scrollback of ${sessionId}\r\n`),
  }),
  'terminal.ack': () => undefined,
  'audit.list': () => [],
  'leakcheck.get': () => null,
};

function mount(handlers: Handlers = {}) {
  const bridge = new RecordingBridge({ ...baseHandlers, ...handlers });
  const controller = mountWith(bridge);
  return { bridge, controller };
}

afterEach(cleanup);

describe('renderer', () => {
  it('shows the QEMU install hint and the image build progress', async () => {
    mount();
    expect((await screen.findByTestId('qemu-install-hint')).textContent).toContain('sudo apt-get install qemu-system-x86');
    expect(screen.getByTestId('image-status').dataset.state).toBe('building');
    expect((screen.getByTestId('image-progress') as HTMLProgressElement).value).toBeCloseTo(0.4);
    expect(screen.getByTestId('image-status').textContent).toContain('mmdebstrap');
  });

  it('draws a row per task with every stage, its status and duration, and follows events', async () => {
    const { bridge } = mount({ 'tasks.list': () => [task()] });
    const cell = await screen.findByTestId('stage-t1-plan');
    expect(cell.dataset.status).toBe('passed');
    // The cell shows the short duration; its tooltip the full one.
    expect(cell.textContent).toContain('1.5s');
    expect(cell.getAttribute('title')).toContain('plan: passed · 1.5 s');
    expect(screen.getByTestId('stage-t1-build').dataset.status).toBe('running');
    expect(screen.getByTestId('stage-t1-document').dataset.status).toBe('pending');
    act(() => bridge.emit({ type: 'task.updated', task: task({ phase: 'failed', stages: task().stages.map((s) => (s.name === 'build' ? { ...s, status: 'failed', exitCode: 3 } : s)) }) }));
    expect(screen.getByTestId('stage-t1-build').dataset.status).toBe('failed');
    expect(screen.getByTestId('stage-t1-build').textContent).toContain('exit status 3');
  });

  it('opens the running stage terminal, and a finished stage log when its cell is clicked', async () => {
    const { bridge } = mount({ 'tasks.list': () => [task()] });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    await waitFor(() => expect(screen.getByTestId('terminal-pane').dataset.sessionId).toBe('s-build'));
    await waitFor(() => expect(bridge.calls.some((c) => c.method === 'terminal.attach' && (c.input as { sessionId: string }).sessionId === 's-build')).toBe(true));
    fireEvent.click(screen.getByTestId('stage-t1-request'));
    await waitFor(() => expect(screen.getByTestId('terminal-pane').dataset.sessionId).toBe('s-request'));
    expect(screen.getByTestId('terminal-tab-request').getAttribute('aria-selected')).toBe('true');
  });

  it('shows a create error with its name and message next to the form', async () => {
    mount({
      'tasks.create': () => {
        throw new FactoryError('NotAGitRepository', '/tmp/x is not a git repository', 'fatal: not a git repository');
      },
    });
    fireEvent.change(screen.getByTestId('repo-path-input'), { target: { value: '/tmp/x' } });
    fireEvent.change(screen.getByTestId('task-text-input'), { target: { value: 'do it' } });
    fireEvent.click(screen.getByTestId('start-button'));
    expect((await screen.findByTestId('new-task-error-name')).textContent).toBe('NotAGitRepository');
    expect(screen.getByTestId('new-task-error-message').textContent).toBe('/tmp/x is not a git repository');
    expect(screen.getByTestId('new-task-error-detail').textContent).toBe('fatal: not a git repository');
  });

  it('explains in the browser that a dropped folder needs its path typed', async () => {
    mount();
    const file = new File(['x'], 'my-repo');
    fireEvent.drop(screen.getByTestId('drop-zone'), { dataTransfer: { files: [file] } });
    expect((await screen.findByTestId('drop-note')).textContent).toContain('type the repository path');
  });

  it('renders the review as escaped text and approves', async () => {
    const review: PullbackReview = {
      taskId: 't1', branch: 'factory/t1', baseCommit: 'a'.repeat(40), headCommit: 'b'.repeat(40),
      files: [{ path: 'src/<img src=x>.ts', status: 'modified', added: 1, removed: 1, binary: false }],
      added: 1, removed: 1, patch: '--- a/x\n+++ b/x\n-old\n+<script>alert(1)</script>', patchTruncated: false,
      bundleBytes: 100, checks: [{ name: 'only expected ref', ok: true, message: 'refs/heads/factory/t1' }],
      filesOmitted: 0, flags: [], secrets: [], confirmations: [],
    };
    const { bridge } = mount({
      'tasks.list': () => [task({ phase: 'review' })],
      'tasks.review': () => review,
      'tasks.approve': () => task({ phase: 'approved', decision: { kind: 'approved', at: 'now', branch: 'factory/t1' } }),
    });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    const patch = await screen.findByTestId('review-patch');
    expect(patch.textContent).toContain('<script>alert(1)</script>');
    expect(document.querySelector('script')).toBeNull();
    expect(document.querySelector('img')).toBeNull();
    expect(patch.querySelector('.diff-add')?.textContent).toBe('+<script>alert(1)</script>');
    expect(patch.querySelector('.diff-del')?.textContent).toBe('-old');
    expect(screen.getByTestId('review-file').dataset.path).toBe('src/<img src=x>.ts');
    fireEvent.click(screen.getByTestId('approve-button'));
    expect((await screen.findByTestId('decision')).dataset.kind).toBe('approved');
    expect(bridge.calls.find((c) => c.method === 'tasks.approve')?.input).toEqual({ taskId: 't1' });
  });

  it('shows a failed task error with the serial console detail, and a failed destroy', async () => {
    mount({
      'tasks.list': () => [
        task({ phase: 'failed', error: { name: 'BootTimeout', message: 'the guest did not answer SSH within 90 s', detail: '[ 1.0] Kernel panic' } }),
      ],
      'tasks.destroy': () => {
        throw FactoryError.carried('DestroyFailed', 'qemu did not exit');
      },
    });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    expect(screen.getByTestId('task-error-name').textContent).toBe('BootTimeout');
    expect(screen.getByTestId('task-error-detail').textContent).toBe('[ 1.0] Kernel panic');
    fireEvent.click(screen.getByTestId('destroy-button'));
    fireEvent.click(screen.getByTestId('destroy-confirmed-button'));
    expect((await screen.findByTestId('action-error-name')).textContent).toBe('DestroyFailed');
    expect(screen.getByTestId('action-error-message').textContent).toBe('destroy: qemu did not exit');
  });

  it("heads a task's error banner with the registry's title and help, not the internal name", async () => {
    mount({
      'tasks.list': () => [
        task({ phase: 'failed', error: { name: 'StageFailed', message: 'build exited with status 2' } }),
        task({ id: 't2', phase: 'failed', error: { name: 'QemuMissing', message: 'QEMU is not installed. apt-get install qemu-system-x86' } }),
      ],
    });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    expect(screen.getByTestId('task-error-title').textContent).toBe('A stage failed');
    expect(screen.getByTestId('task-error-help').textContent).toMatch(/^A pipeline stage ended with an error\. Its terminal log shows what happened/);
    expect(screen.getByTestId('task-error-message').textContent).toBe('build exited with status 2');
    expect(screen.getByTestId('task-error').querySelector('strong')?.textContent).not.toContain('StageFailed');
    fireEvent.click(screen.getByTestId('task-select-t2'));
    expect(screen.getByTestId('task-error-title').textContent).toBe('QEMU is not installed');
    expect(screen.getByTestId('task-error-help').textContent).toMatch(/Install qemu-system and qemu-utils/);
  });

  it('shows an error name the registry does not know (an older or hostile host) with the generic title, as text', async () => {
    mount({
      'tasks.list': () => [task({ phase: 'failed', error: { name: '<img src=x onerror=alert(1)>', message: 'odd' } })],
    });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    expect(screen.getByTestId('task-error-title').textContent).toBe('Something went wrong');
    expect(screen.getByTestId('task-error-name').textContent).toBe('<img src=x onerror=alert(1)>');
    expect(document.querySelector('img')).toBeNull();
  });

  it('saves a credential without ever showing its value, and lists only the reference', async () => {
    const SECRET = 'sk-ant-very-secret-value-123';
    const refs: unknown[] = [];
    const { bridge } = mount({
      'credentials.list': () => [...refs],
      'credentials.set': (input: { kind: string; label: string }) => {
        const ref = { id: 'anthropic-1', kind: input.kind, label: input.label, target: { upstream: 'https://api.anthropic.com' }, createdAt: '2026-01-01T00:00:00Z', updatedAt: '2026-01-01T00:00:00Z' };
        refs.push(ref);
        return ref;
      },
    });
    fireEvent.click(screen.getByTestId('nav-credentials'));
    await screen.findByTestId('credentials-empty');
    fireEvent.change(screen.getByTestId('credential-label'), { target: { value: 'My key' } });
    fireEvent.change(screen.getByTestId('credential-value'), { target: { value: SECRET } });
    expect((screen.getByTestId('credential-value') as HTMLInputElement).type).toBe('password');
    fireEvent.click(screen.getByTestId('credential-save'));
    await screen.findByTestId('credential-row-anthropic-1');
    expect(bridge.calls.find((c) => c.method === 'credentials.set')?.input).toMatchObject({ kind: 'anthropic', label: 'My key', value: SECRET });
    // The row can show before the save has resolved; the form empties once it has.
    await waitFor(() => expect((screen.getByTestId('credential-value') as HTMLInputElement).value).toBe(''));
    expect(document.body.innerHTML).not.toContain(SECRET);
  });

  it('shows a leak as a loud security failure on the sandbox', async () => {
    mount({
      'tasks.list': () => [task()],
      'leakcheck.get': () => ({
        sandboxId: 't1', at: '2026-01-01T00:00:00Z', verdict: 'leak', credentialIds: ['anthropic-1'], durationMs: 10,
        scanned: [{ source: 'overlay', bytes: 100 }, { source: 'memory', bytes: 200 }],
        hits: [{ credentialId: 'anthropic-1', encoding: 'base64', source: 'memory', offset: 4096 }],
      }),
      'audit.list': () => [
        { time: '2026-01-01T00:00:01Z', sandboxId: 't1', method: 'POST', host: 'api.anthropic.com', path: '/v1/messages', rule: 'anthropic', status: 200, bytesIn: 10, bytesOut: 20, durationMs: 5 },
      ],
    });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    const report = await screen.findByTestId('leak-report');
    expect(report.dataset.verdict).toBe('leak');
    expect(report.getAttribute('role')).toBe('alert');
    expect(report.textContent).toContain('SECURITY FAILURE');
    expect(screen.getByTestId('leak-hits').textContent).toContain('anthropic-1 as base64 in guest memory at offset 4096');
    expect(screen.getByTestId('audit-log').textContent).toContain('/v1/messages');
  });
  it('sends the agent chosen in the new-task form, and nothing when left to the default', async () => {
    const { bridge } = mount({ 'tasks.create': (input: { repoPath: string; title: string }) => task({ id: 't9', title: input.title }) });
    const select = screen.getByTestId('agent-select') as HTMLSelectElement;
    expect([...select.options].map((o) => o.value)).toEqual(['', 'command', 'claude-code', 'codex']);
    fireEvent.change(screen.getByTestId('repo-path-input'), { target: { value: '/home/me/repo' } });
    fireEvent.change(screen.getByTestId('task-text-input'), { target: { value: 'first' } });
    fireEvent.click(screen.getByTestId('start-button'));
    await waitFor(() => expect(bridge.calls.filter((c) => c.method === 'tasks.create')).toHaveLength(1));
    fireEvent.change(select, { target: { value: 'claude-code' } });
    fireEvent.change(screen.getByTestId('task-text-input'), { target: { value: 'second' } });
    fireEvent.click(screen.getByTestId('start-button'));
    await waitFor(() => expect(bridge.calls.filter((c) => c.method === 'tasks.create')).toHaveLength(2));
    const creates = bridge.calls.filter((c) => c.method === 'tasks.create').map((c) => c.input);
    expect(creates).toEqual([
      { repoPath: '/home/me/repo', title: 'first' },
      { repoPath: '/home/me/repo', title: 'second', agent: 'claude-code' },
    ]);
  });
  it('sends allowPush only when the push checkbox is ticked (off by default)', async () => {
    const { bridge } = mount({ 'tasks.create': (input: { title: string }) => task({ id: 't8', title: input.title }) });
    const box = screen.getByTestId('allow-push-checkbox') as HTMLInputElement;
    expect(box.checked).toBe(false);
    expect(box.closest('label')!.textContent).toBe('Allow push to factory/<id>/* through the proxy');
    fireEvent.change(screen.getByTestId('repo-path-input'), { target: { value: '/home/me/repo' } });
    fireEvent.change(screen.getByTestId('task-text-input'), { target: { value: 'may push' } });
    fireEvent.click(box);
    fireEvent.click(screen.getByTestId('start-button'));
    await waitFor(() => expect(bridge.calls.find((c) => c.method === 'tasks.create')?.input).toEqual({ repoPath: '/home/me/repo', title: 'may push', allowPush: true }));
  });

  it("shows each stage's summary line, tokens, cost and test counts on its card, and the task's agent", async () => {
    const stages = task().stages.map((s) =>
      s.name === 'plan'
        ? { ...s, summary: 'Add greeting.txt with a hello line', tokens: { input: 12_345, output: 678 }, costUsd: 0.04321 }
        : s.name === 'build'
          ? { ...s, status: 'passed' as const, summary: '<b>Added</b> greeting.txt', tokens: { input: 900, output: 40 }, costUsd: 1.5 }
          : s.name === 'test'
            ? { ...s, status: 'passed' as const, summary: '12 passed, 0 failed after 1 repair round', sessionId: 's-test' }
            : s,
    );
    mount({ 'tasks.list': () => [task({ agent: 'claude-code', stages })] });
    expect((await screen.findByTestId('stage-summary-t1-plan')).textContent).toBe('Add greeting.txt with a hello line');
    expect(screen.getByTestId('stage-usage-t1-plan').textContent).toBe('12k in · 678 out · $0.0432');
    expect(screen.getByTestId('stage-usage-t1-build').textContent).toBe('900 in · 40 out · $1.50');
    // Agent text is shown as text, never as markup.
    expect(screen.getByTestId('stage-summary-t1-build').textContent).toBe('<b>Added</b> greeting.txt');
    expect(screen.getByTestId('stage-summary-t1-build').querySelector('b')).toBeNull();
    expect(screen.getByTestId('stage-summary-t1-test').textContent).toBe('12 passed, 0 failed after 1 repair round');
    expect(screen.queryByTestId('stage-usage-t1-test')).toBeNull();
    expect(screen.getByTestId('task-agent-t1').textContent).toContain('claude-code');
  });

  it("lists every session of a stage (the test stage's repair rounds) as tabs of the task", async () => {
    const stages = task().stages.map((s) => (s.name === 'test' ? { ...s, status: 'passed' as const, sessionId: 's-test-2' } : s));
    const term = (id: string, title: string) => ({ id, taskId: 't1', kind: 'stage', title, status: 'exited', exitCode: 0, cols: 80, rows: 24 });
    mount({
      'tasks.list': () => [task({ phase: 'review', stages })],
      'terminal.list': () => [term('s-test-1', 'test'), term('s-repair-1', 'test-repair'), term('s-test-2', 'test (after repair 1)')],
    });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    await waitFor(() => expect(screen.getByTestId('terminal-tab-s-repair-1')).toBeTruthy());
    expect(screen.getByTestId('terminal-tab-s-test-1').textContent).toContain('test');
    expect(screen.getByTestId('terminal-tab-test').dataset.sessionId).toBe('s-test-2');
    fireEvent.click(screen.getByTestId('terminal-tab-s-repair-1'));
    await waitFor(() => expect(screen.getByTestId('terminal-pane').dataset.sessionId).toBe('s-repair-1'));
  });
  it('names the default agent from the settings and makes the chosen one the default', async () => {
    let defaultAgent = 'command';
    const view = () => ({ defaultAgent, maxParallelTasks: 2, vmMemoryMb: 1024, vmCpus: 2, agents: ['command', 'claude-code', 'codex'] });
    const { bridge } = mount({
      'settings.get': view,
      'settings.set': (input: { defaultAgent: string }) => {
        if (input.defaultAgent === 'codex') throw new FactoryError('UnknownAgent', 'no agent named "codex"');
        defaultAgent = input.defaultAgent;
        return view();
      },
    });
    const select = screen.getByTestId('agent-select') as HTMLSelectElement;
    await waitFor(() => expect(select.options[0]!.textContent).toBe('Default (repository, else Command)'));
    expect(screen.queryByTestId('set-default-agent')).toBeNull();
    fireEvent.change(select, { target: { value: 'claude-code' } });
    fireEvent.click(screen.getByTestId('set-default-agent'));
    await waitFor(() => expect(select.options[0]!.textContent).toBe('Default (repository, else Claude Code)'));
    expect(bridge.calls.find((c) => c.method === 'settings.set')!.input).toEqual({ defaultAgent: 'claude-code' });
    expect(screen.queryByTestId('set-default-agent')).toBeNull(); // the choice is the default now
    fireEvent.change(select, { target: { value: 'codex' } });
    fireEvent.click(screen.getByTestId('set-default-agent'));
    expect((await screen.findByTestId('settings-error-message')).textContent).toBe('no agent named "codex"');
  });
  it('opens a host shell in the task repository only when its button is pressed, as a tab of the task', async () => {
    const { bridge } = mount({
      'tasks.list': () => [task({ phase: 'approved', sandbox: { status: 'destroyed' } })],
      'terminal.openHostShell': ({ taskId, cols, rows }: { taskId: string; cols: number; rows: number }) => ({ id: 'h1', taskId, kind: 'host', title: 'host: repo', status: 'live', cols, rows }),
    });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    expect((screen.getByTestId('shell-button') as HTMLButtonElement).disabled).toBe(true); // no sandbox to open a shell in
    const button = screen.getByTestId('host-shell-button') as HTMLButtonElement;
    expect(button.disabled).toBe(false);
    expect(bridge.calls.some((c) => c.method === 'terminal.openHostShell')).toBe(false);
    fireEvent.click(button);
    await waitFor(() => expect(bridge.calls.find((c) => c.method === 'terminal.openHostShell')?.input).toEqual({ taskId: 't1', cols: 100, rows: 30 }));
    expect((await screen.findByTestId('terminal-tab-h1')).getAttribute('aria-selected')).toBe('true');
  });
  it('offers to override a failed review and retries with the override', async () => {
    const stages = task().stages.map((s) =>
      s.name === 'review' ? { ...s, status: 'failed' as const, summary: 'review blocked the change: no tests' } : s.name === 'document' ? { ...s, status: 'skipped' as const } : { ...s, status: 'passed' as const },
    );
    const { bridge } = mount({ 'tasks.list': () => [task({ phase: 'failed', stages })], 'tasks.retry': () => task({ phase: 'running' }) });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    fireEvent.click(await screen.findByTestId('override-review-button'));
    await waitFor(() => expect(bridge.calls.find((c) => c.method === 'tasks.retry')?.input).toEqual({ taskId: 't1', overrideReview: true }));
  });
});
