// Start asks what the task's environment will be first: the environment lines,
// a cached environment, and the egress the repository asks for (untrusted, off
// unless the user allows it). jsdom with a recording bridge.
import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { FactoryError } from '../../common/errors.js';
import { STAGE_NAMES, type Task } from '../../common/domain.js';
import type { EgressRule } from '../../common/egress.js';
import type { TaskPreflight } from '../../common/environment.js';
import { mountWith, RecordingBridge, type Handlers } from './support/app-harness.js';

const created = (title: string): Task => ({
  id: 't1', title, repoPath: '/home/me/repo', baseRef: 'main', baseCommit: 'a'.repeat(40), branch: 'factory/t1',
  createdAt: '2026-01-01T00:00:00.000Z', phase: 'creating', sandbox: { status: 'none' }, stages: STAGE_NAMES.map((name) => ({ name, status: 'pending' as const })),
});

const pypi: EgressRule = { name: 'Python index', host: 'pypi.org', port: 443, scheme: 'https', steps: ['setup'] };
const mirror: EgressRule = { name: 'Company mirror', host: 'mirror.example.com', port: 80, scheme: 'http', methods: ['GET'], pathPrefixes: ['/pkgs/'], steps: ['setup', 'build'] };
const known: EgressRule = { name: 'Maven', host: 'repo.maven.apache.org', port: 443, scheme: 'https' };

const preflight = (over: Partial<TaskPreflight> = {}): TaskPreflight => ({
  source: 'detected', lines: ['Node 22.12.0 (.nvmrc)', 'npm ci (package-lock.json)'], unsupported: [], egressRequests: [], cached: false, ...over,
});

function mount(handlers: Handlers) {
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true, version: '8' }, image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'web' }),
    'tasks.list': () => [],
    'terminal.list': () => [],
    'audit.list': () => [],
    'leakcheck.get': () => null,
    'tasks.create': (input: { title: string }) => created(input.title),
    ...handlers,
  });
  mountWith(bridge);
  return bridge;
}

function fill(repo = '/home/me/repo', text = 'Fix the build') {
  fireEvent.change(screen.getByTestId('repo-path-input'), { target: { value: repo } });
  fireEvent.change(screen.getByTestId('task-text-input'), { target: { value: text } });
}

afterEach(cleanup);

describe('Start with a repository that asks for egress', () => {
  it('shows each request as untrusted, off by default, and creates with exactly the rules chosen', async () => {
    const bridge = mount({ 'tasks.preflight': () => preflight({ egressRequests: [{ rule: pypi, allowedAlways: false }, { rule: mirror, allowedAlways: false }] }) });
    fill();
    fireEvent.click(screen.getByTestId('start-button'));
    const heading = await screen.findByTestId('preflight-heading');
    expect(bridge.inputs('tasks.preflight')).toEqual([{ repoPath: '/home/me/repo' }]);
    expect(bridge.inputs('tasks.create')).toEqual([]); // nothing is created before the user decides
    await waitFor(() => expect(document.activeElement).toBe(heading));
    expect(screen.getByTestId('egress-requests').textContent).toContain('untrusted');
    expect(screen.getByTestId('egress-request-1').textContent).toContain('http://mirror.example.com:80 · GET /pkgs/… · steps: setup, build');
    expect((screen.getByTestId('egress-deny-0') as HTMLInputElement).checked).toBe(true);
    expect((screen.getByTestId('egress-deny-1') as HTMLInputElement).checked).toBe(true);
    expect(screen.getByTestId('start-button').textContent).toBe('Start with these choices');
    fireEvent.click(screen.getByTestId('egress-allow-1'));
    fireEvent.click(screen.getByTestId('egress-remember'));
    fireEvent.click(screen.getByTestId('start-button'));
    await waitFor(() => expect(bridge.inputs('tasks.create')).toHaveLength(1));
    expect(bridge.inputs('tasks.create')[0]).toEqual({ repoPath: '/home/me/repo', title: 'Fix the build', egressApproval: { rules: [mirror], remember: true } });
    expect(bridge.inputs('tasks.preflight')).toHaveLength(1);
  });

  it('sends an empty approval when the user allows nothing', async () => {
    const bridge = mount({ 'tasks.preflight': () => preflight({ egressRequests: [{ rule: pypi, allowedAlways: false }] }) });
    fill();
    fireEvent.click(screen.getByTestId('start-button'));
    await screen.findByTestId('egress-requests');
    fireEvent.click(screen.getByTestId('start-button'));
    await waitFor(() => expect(bridge.inputs('tasks.create')).toEqual([{ repoPath: '/home/me/repo', title: 'Fix the build', egressApproval: { rules: [], remember: false } }]));
  });

  it('shows a request already allowed always as such, pre-checked, and goes straight on', async () => {
    const bridge = mount({ 'tasks.preflight': () => preflight({ egressRequests: [{ rule: known, allowedAlways: true }] }) });
    fill();
    fireEvent.click(screen.getByTestId('start-button'));
    await waitFor(() => expect(bridge.inputs('tasks.create')).toEqual([{ repoPath: '/home/me/repo', title: 'Fix the build', egressApproval: { rules: [known], remember: false } }]));
    expect((screen.getByTestId('egress-allow-0') as HTMLInputElement).checked).toBe(true);
    expect(screen.getByTestId('egress-request-0').textContent).toContain('you allowed it always for this repository');
  });

  it('is operated with the keyboard: named radio groups, a named checkbox, Enter submits', async () => {
    const bridge = mount({ 'tasks.preflight': () => preflight({ egressRequests: [{ rule: pypi, allowedAlways: false }] }) });
    fill();
    fireEvent.click(screen.getByTestId('start-button'));
    await screen.findByTestId('egress-requests');
    const radios = screen.getAllByRole('radio');
    expect(radios.map((r) => (r.closest('label') as HTMLElement).textContent)).toEqual(['Not allowed', 'Allow for this task']);
    expect(screen.getByRole('group', { name: /Python index/ })).toBeTruthy();
    expect(screen.getByRole('checkbox', { name: 'Remember for this repository' })).toBeTruthy();
    // Space on a focused radio selects it (a click in jsdom); Enter submits the form.
    radios[1]!.focus();
    fireEvent.click(radios[1]!);
    fireEvent.submit(screen.getByTestId('new-task-form'));
    await waitFor(() => expect(bridge.inputs('tasks.create')).toEqual([{ repoPath: '/home/me/repo', title: 'Fix the build', egressApproval: { rules: [pypi], remember: false } }]));
  });

  it('asks again when the repository path changes, and for the next task', async () => {
    let n = 0;
    const bridge = mount({ 'tasks.preflight': () => preflight({ lines: [`plan ${++n}`] }) });
    fill();
    fireEvent.click(screen.getByTestId('start-button'));
    await waitFor(() => expect(bridge.inputs('tasks.create')).toHaveLength(1));
    expect(screen.getByTestId('preflight-lines').textContent).toBe('plan 1');
    fill('/home/me/other', 'Second');
    expect(screen.queryByTestId('preflight')).toBeNull();
    fireEvent.click(screen.getByTestId('start-button'));
    await waitFor(() => expect(bridge.inputs('tasks.create')).toHaveLength(2));
    expect(bridge.inputs('tasks.preflight')).toEqual([{ repoPath: '/home/me/repo' }, { repoPath: '/home/me/other' }]);
  });
});

describe('Start shows the environment', () => {
  it('lists the lines, the unsupported config and that setup will be skipped on a cached environment', async () => {
    mount({ 'tasks.preflight': () => preflight({ cached: true, unsupported: ['devcontainer "dockerComposeFile" (no containers in a sandbox)'] }) });
    fill();
    fireEvent.click(screen.getByTestId('start-button'));
    expect((await screen.findByTestId('preflight-cached')).textContent).toBe('setup will be skipped: cached environment');
    expect([...screen.getByTestId('preflight-lines').querySelectorAll('li')].map((li) => li.textContent)).toEqual(['Node 22.12.0 (.nvmrc)', 'npm ci (package-lock.json)']);
    expect(screen.getByTestId('preflight-unsupported').textContent).toContain('dockerComposeFile');
  });

  it('shows a bad config with the field the host named, creates nothing and keeps what the user typed', async () => {
    const bridge = mount({
      'tasks.preflight': () => {
        throw new FactoryError('InvalidPipelineConfig', '.factory/pipeline.json: environment.node: "22.x.y" is not a version range');
      },
    });
    fill('/home/me/repo', 'Keep this text');
    fireEvent.click(screen.getByTestId('start-button'));
    expect((await screen.findByTestId('new-task-error-message')).textContent).toBe('.factory/pipeline.json: environment.node: "22.x.y" is not a version range');
    expect(screen.getByTestId('new-task-error-title').textContent).toBe('Invalid pipeline config');
    expect(bridge.inputs('tasks.create')).toEqual([]);
    expect((screen.getByTestId('task-text-input') as HTMLTextAreaElement).value).toBe('Keep this text');
    expect((screen.getByTestId('repo-path-input') as HTMLInputElement).value).toBe('/home/me/repo');
  });

  it('shows what the repository wrote as text, hidden characters escaped', async () => {
    mount({
      'tasks.preflight': () =>
        preflight({ lines: ['<img src=x onerror=alert(1)>'], egressRequests: [{ rule: { ...pypi, name: 'safe\u202etxt.exe', host: 'evil.example' }, allowedAlways: false }] }),
    });
    fill();
    fireEvent.click(screen.getByTestId('start-button'));
    expect((await screen.findByTestId('preflight-lines')).textContent).toBe('<img src=x onerror=alert(1)>');
    expect(document.querySelector('img')).toBeNull();
    expect(screen.getByTestId('egress-request-0').textContent).toContain('safe\\u{202e}txt.exe');
  });
});
