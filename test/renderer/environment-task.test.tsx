// A task's environment on the board and in its view: the setup card, the setup
// terminal tab, the plan lines and unsupported config, and the destinations the
// sandbox was refused with their Allow actions. jsdom with a recording bridge.
import { act, cleanup, fireEvent, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { FactoryError } from '../../common/contract.js';
import { STAGE_NAMES, type SetupInfo, type Task, type TerminalInfo } from '../../common/domain.js';
import type { EgressRefusal, EgressRule } from '../../common/egress.js';
import { mountWith, RecordingBridge, type Handlers } from './support/app-harness.js';

function task(over: Partial<Task> = {}): Task {
  return {
    id: 't1', title: 'Build it', repoPath: '/home/me/repo', baseRef: 'main', baseCommit: 'a'.repeat(40),
    branch: 'factory/t1', createdAt: '2026-01-01T00:00:00.000Z', phase: 'running', sandbox: { status: 'running', accel: 'tcg' },
    stages: STAGE_NAMES.map((name) => ({ name, status: 'pending' as const })),
    ...over,
  };
}

const setup = (over: Partial<SetupInfo> = {}): SetupInfo => ({
  status: 'passed', source: 'detected', lines: ['Node 22.12.0 (.nvmrc)', 'npm ci (package-lock.json)'], unsupported: [],
  sessionId: 's-setup', durationMs: 61_000, ...over,
});

const refusal = (over: Partial<EgressRefusal> = {}): EgressRefusal => ({
  time: '2026-01-01T10:11:12.000Z', sandboxId: 't1', step: 'build', scheme: 'https', host: 'example.org', port: 443, reason: 'no rule allows it', ...over,
});

const term = (id: string, title: string, status: TerminalInfo['status']): TerminalInfo => ({ id, taskId: 't1', kind: 'stage', title, status, cols: 80, rows: 24 });

function mount(t: Task, handlers: Handlers = {}, terminals: TerminalInfo[] = []) {
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true, version: '8' }, image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'web' }),
    'tasks.list': () => [t],
    'terminal.list': () => terminals,
    'terminal.attach': ({ sessionId }: { sessionId: string }) => ({
      info: terminals.find((x) => x.id === sessionId) ?? term(sessionId, 'x', 'exited'),
      scrollback: btoa(`log of ${sessionId}\r\n`),
    }),
    'terminal.ack': () => undefined,
    'audit.list': () => [],
    'leakcheck.get': () => null,
    ...handlers,
  });
  mountWith(bridge);
  return bridge;
}

afterEach(cleanup);

describe('the setup card on the board', () => {
  it('sits before request and shows status, duration and why setup was skipped (a cached environment)', async () => {
    mount(task({ setup: setup({ status: 'skipped', summary: undefined, layer: { id: 'l1', reused: true }, durationMs: undefined }) }));
    const card = await screen.findByTestId('setup-t1');
    // A stage column's head shows a short name; its full name is the tooltip and what a screen reader reads.
    const headers = [...document.querySelectorAll('thead th')].map((th) => th.getAttribute('title') ?? th.textContent);
    expect(headers.slice(0, 3)).toEqual(['Task', 'setup', 'request']);
    expect(card.dataset.status).toBe('skipped');
    expect(screen.getByTestId('setup-summary-t1').textContent).toBe('cached environment');
  });

  it('names the step it failed at, with its exit status', async () => {
    mount(task({ phase: 'failed', setup: setup({ status: 'failed', step: 'npm ci', summary: 'ERR! 404 left-pad', exitCode: 1 }) }));
    const card = await screen.findByTestId('setup-t1');
    expect(card.textContent).toContain('exit status 1');
    expect(card.textContent).toContain('1m');
    expect(card.getAttribute('title')).toBe('setup: failed · 1 m 1 s · exit status 1 · failed at npm ci: ERR! 404 left-pad');
    expect(screen.getByTestId('setup-summary-t1').textContent).toBe('failed at npm ci: ERR! 404 left-pad');
  });

  it('shows nothing for a task made before environments existed', async () => {
    mount(task());
    const cell = await screen.findByTestId('setup-t1');
    expect(cell.tagName).toBe('TD');
    expect(cell.textContent).toBe('');
    expect(cell.querySelector('button')).toBeNull();
  });

  it('shows a summary from the repository with its hidden characters escaped, as text', async () => {
    mount(task({ setup: setup({ summary: 'ok\u202e<img src=x>' }) }));
    expect((await screen.findByTestId('setup-summary-t1')).textContent).toBe('ok\\u{202e}<img src=x>');
    expect(document.querySelector('img')).toBeNull();
  });
});

describe('the setup step in the task view', () => {
  it('follows the live setup terminal while it runs, as the first tab, reached from the card by keyboard', async () => {
    const running = task({ setup: setup({ status: 'running', step: 'Debian packages', durationMs: undefined }) });
    const bridge = mount(running, {}, [term('s-setup', 'setup', 'live')]);
    const card = await screen.findByTestId('setup-t1');
    card.focus();
    expect(document.activeElement).toBe(card);
    fireEvent.click(card); // Enter or Space on a focused button is a click
    await waitFor(() => expect(screen.getByTestId('terminal-pane').dataset.sessionId).toBe('s-setup'));
    const tabs = screen.getAllByRole('tab');
    expect(tabs[0]!.dataset.testid).toBe('terminal-tab-setup');
    expect(tabs[0]!.getAttribute('aria-selected')).toBe('true');
    expect(bridge.inputs('terminal.attach')).toContainEqual(expect.objectContaining({ sessionId: 's-setup' }));
  });

  it('replays the setup log after it ran, next to the stage tabs, with the arrow keys', async () => {
    const stages = task().stages.map((s) => (s.name === 'request' ? { ...s, status: 'passed' as const, sessionId: 's-request' } : s));
    mount(task({ setup: setup(), stages }), {}, [term('s-setup', 'setup', 'exited'), term('s-request', 'request', 'exited')]);
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    await waitFor(() => expect(screen.getByTestId('terminal-pane').dataset.sessionId).toBe('s-request'));
    fireEvent.keyDown(screen.getByTestId('terminal-tab-request'), { key: 'ArrowLeft' });
    await waitFor(() => expect(screen.getByTestId('terminal-pane').dataset.sessionId).toBe('s-setup'));
    expect(document.activeElement).toBe(screen.getByTestId('terminal-tab-setup'));
  });

  it('lists the plan lines and names the config it cannot honour as a warning', async () => {
    mount(task({ setup: setup({ source: 'devcontainer.json', unsupported: ['devcontainer feature "ghcr.io/devcontainers/features/node:1" (needs a container registry)'] }) }));
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    expect(screen.getByTestId('setup-details').textContent).toContain('from devcontainer.json');
    expect([...screen.getByTestId('setup-lines').querySelectorAll('li')].map((li) => li.textContent)).toEqual(['Node 22.12.0 (.nvmrc)', 'npm ci (package-lock.json)']);
    const warning = screen.getByTestId('setup-unsupported');
    expect(warning.getAttribute('role')).toBe('note');
    expect(warning.textContent).toContain('ghcr.io/devcontainers/features/node:1');
  });
});

describe('refused destinations', () => {
  it('shows each refusal and allows one for this task with the narrowest rule; the row then reads as allowed', async () => {
    const refused = refusal({ scheme: 'http', host: 'deb.example.org', port: 80, method: 'get', path: '/debian/pool/main/x.deb?x=1', step: 'setup' });
    const t = task({ egress: { allowed: [], refusals: [refused] } });
    const bridge = mount(t, {
      'egress.allow': ({ rule }: { rule: EgressRule }) => task({ egress: { allowed: [rule], refusals: [refused] } }),
    });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    const row = screen.getByTestId('refusal-0');
    expect(row.textContent).toContain('deb.example.org:80');
    expect(row.textContent).toContain('setup');
    expect(row.textContent).toContain('get /debian/pool/main/x.deb?x=1');
    expect(row.textContent).toContain('no rule allows it');
    const allow = within(row).getByRole('button', { name: 'Allow deb.example.org:80 for this task' });
    fireEvent.click(allow);
    await waitFor(() => expect(screen.getByTestId('refusal-allowed-0').textContent).toBe('allowed for this task'));
    expect(bridge.inputs('egress.allow')).toEqual([
      {
        taskId: 't1', scope: 'task',
        rule: { name: 'deb.example.org:80', host: 'deb.example.org', port: 80, scheme: 'http', steps: ['setup'], methods: ['GET'], pathPrefixes: ['/debian/'] },
      },
    ]);
    expect(screen.getByTestId('refusal-0').dataset.allowed).toBe('task');
  });

  it('always allows an https destination for the repository: host and port only, in the step it was refused in', async () => {
    const refused = refusal();
    const bridge = mount(task({ egress: { allowed: [], refusals: [refused] } }), { 'egress.allow': () => task({ egress: { allowed: [], refusals: [refused] } }) });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    fireEvent.click(screen.getByTestId('refusal-allow-repo-0'));
    await waitFor(() => expect(screen.getByTestId('refusal-allowed-0').textContent).toBe('allowed for this repository'));
    expect(bridge.inputs('egress.allow')).toEqual([{ taskId: 't1', scope: 'repository', rule: { name: 'example.org:443', host: 'example.org', port: 443, scheme: 'https', steps: ['build'] } }]);
  });

  it('says how many requests to a destination were refused when more than one', async () => {
    mount(task({ egress: { allowed: [], refusals: [refusal({ host: 'chatgpt.com', count: 4 }), refusal({ host: 'once.example.org' })] } }));
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    expect(screen.getByTestId('refusal-count-0').textContent).toBe(' × 4');
    expect(screen.queryByTestId('refusal-count-1')).toBeNull();
  });

  it('shows a refusal that arrives with task.updated', async () => {
    const bridge = mount(task());
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    expect(screen.queryByTestId('egress-refusals')).toBeNull();
    act(() => bridge.emit({ type: 'task.updated', task: task({ egress: { allowed: [], refusals: [refusal({ host: 'late.example.org' })] } }) }));
    expect(screen.getByTestId('refusal-0').textContent).toContain('late.example.org:443');
  });

  it("shows the host's refusal of an Allow on the row, which stays not allowed", async () => {
    mount(task({ egress: { allowed: [], refusals: [refusal({ host: 'x.example.org' })] } }), {
      'egress.allow': () => {
        throw new FactoryError('InvalidInput', 'rule "x.example.org:443": host is on the block list');
      },
    });
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    fireEvent.click(screen.getByTestId('refusal-allow-task-0'));
    expect((await screen.findByTestId('refusal-error-0-message')).textContent).toBe('rule "x.example.org:443": host is on the block list');
    expect(screen.getByTestId('refusal-0').dataset.allowed).toBe('no');
    expect((screen.getByTestId('refusal-allow-task-0') as HTMLButtonElement).disabled).toBe(false);
  });

  it('offers the range in Settings, not an Allow, for a host that resolved to a private address', async () => {
    const reason = 'destination mirror.lan refused: 10.1.2.3 is a loopback, private, link-local, metadata or reserved address';
    mount(task({ egress: { allowed: [], refusals: [refusal({ host: 'mirror.lan', reason })] } }));
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    expect((await screen.findByTestId('refusal-reserved-0')).textContent).toContain('mirror.lan resolved to 10.1.2.3: a rule for it must list that address range');
    expect(screen.queryByTestId('refusal-allow-task-0')).toBeNull();
    fireEvent.click(screen.getByTestId('refusal-open-rules-0'));
    expect(screen.getByTestId('nav-settings').getAttribute('aria-current')).toBe('page');
  });

  it('offers no Allow for a refusal in a step that does not exist, and escapes what the sandbox sent', async () => {
    mount(task({ egress: { allowed: [], refusals: [refusal({ step: 'nowhere' as never, host: 'evil\u0007.example', path: '/a\u202eb' })] } }));
    fireEvent.click(await screen.findByTestId('task-select-t1'));
    expect(screen.queryByTestId('refusal-allow-task-0')).toBeNull();
    expect(screen.getByTestId('refusal-unallowable-0').textContent).toContain('no known step');
    expect(screen.getByTestId('refusal-0').textContent).toContain('evil\\x07.example:443');
  });
});
