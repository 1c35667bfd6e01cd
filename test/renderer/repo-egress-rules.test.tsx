// The egress rules the user allowed for a repository from now on, in Settings:
// listed per repository, each with Remove; paths and names that came from a
// repository are shown as text with hidden characters escaped, never as markup.
// jsdom with a recording bridge in place of a host.
import { cleanup, fireEvent, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { type RepoEgressRules, type SettingsView } from '../../common/contract.js';
import { FactoryError } from '../../common/errors.js';
import type { EgressRule } from '../../common/egress.js';
import { mountWith, RecordingBridge, type Handlers } from './support/app-harness.js';

const files: EgressRule = { name: 'asked by the repository: files.example.org', host: 'files.example.org', port: 443, scheme: 'https' };
const mirror: EgressRule = { name: 'mirror', host: 'mirror.example.net', port: 80, scheme: 'http', methods: ['GET'], pathPrefixes: ['/pub/'], steps: ['setup'] };
// A repository path and a rule name as an attacker would pick them: markup, a bidi override, an escape sequence.
const hostilePath = '/home/me/<img src=x onerror=alert(1)>\u202egpj.exe';
const hostile: EgressRule = { name: '<b>trusted</b>\u001b[2J', host: 'evil.example.org', port: 443, scheme: 'https' };

function mount(handlers: Handlers) {
  const view: SettingsView = { defaultAgent: 'command', maxParallelTasks: 2, vmMemoryMb: 2048, vmCpus: 2, terminalLogRetentionDays: 30, egressRules: [], layerBudgetGb: 20, agents: ['command'] };
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true, version: '8' }, image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'web' }),
    'tasks.list': () => [],
    'terminal.list': () => [],
    'settings.get': () => view,
    ...handlers,
  });
  mountWith(bridge);
  fireEvent.click(screen.getByTestId('nav-settings'));
  return bridge;
}

afterEach(cleanup);

describe('egress rules allowed for a repository, in Settings', () => {
  it('lists them per repository and removes one with Remove', async () => {
    let remembered: RepoEgressRules[] = [{ repoPath: '/home/me/app', rules: [files, mirror] }];
    const bridge = mount({
      'egress.repoRules.list': () => remembered,
      'egress.repoRules.remove': ({ repoPath, rule }: { repoPath: string; rule: EgressRule }) =>
        (remembered = remembered.map((r) => (r.repoPath === repoPath ? { ...r, rules: r.rules.filter((x) => x.host !== rule.host) } : r))),
    });
    const section = await screen.findByTestId('repo-egress-rules');
    await within(section).findByTestId('repo-egress-rule-0-1');
    expect(within(section).getByTestId('repo-egress-0').textContent).toContain('/home/me/app');
    expect(within(section).getByTestId('repo-egress-rule-0-1').textContent).toContain('http://mirror.example.net:80 GET /pub/ (steps: setup)');
    fireEvent.click(within(section).getByRole('button', { name: 'Remove asked by the repository: files.example.org for /home/me/app' }));
    await waitFor(() => expect(within(section).queryByText(/files\.example\.org/)).toBeNull());
    expect(bridge.inputs('egress.repoRules.remove')).toEqual([{ repoPath: '/home/me/app', rule: files }]);
    expect(within(section).getByTestId('repo-egress-rule-0-0').textContent).toContain('mirror.example.net');
  });

  it('shows a hostile repository path and rule name escaped, as text', async () => {
    mount({ 'egress.repoRules.list': () => [{ repoPath: hostilePath, rules: [hostile] }] });
    const row = await screen.findByTestId('repo-egress-0');
    expect(row.querySelector('img, b')).toBeNull();
    expect(row.textContent).toContain('/home/me/<img src=x onerror=alert(1)>\\u{202e}gpj.exe');
    expect(row.textContent).toContain('<b>trusted</b>\\x1b[2J');
    expect(row.textContent).not.toMatch(/[\u202e\u001b]/);
  });

  it('says when nothing is remembered, and shows why a removal was refused', async () => {
    mount({ 'egress.repoRules.list': () => [] });
    expect((await screen.findByTestId('repo-egress-rules-empty')).textContent).toContain('No rules remembered');
    cleanup();
    mount({
      'egress.repoRules.list': () => [{ repoPath: '/home/me/app', rules: [files] }],
      'egress.repoRules.remove': () => { throw new FactoryError('NotFound', 'no rule for https://files.example.org:443 is remembered for the repository "/home/me/app"'); },
    });
    fireEvent.click(await screen.findByTestId('repo-egress-remove-0-0'));
    expect((await screen.findByTestId('repo-egress-rules-error')).textContent).toContain('no rule for https://files.example.org:443');
  });
});
