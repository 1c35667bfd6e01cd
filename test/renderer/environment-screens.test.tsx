// The Environments screen (cached layers, their budget) and the default egress
// rules in Settings, as a user reaches them from the header. jsdom with a
// recording bridge in place of a host.
import { cleanup, fireEvent, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { type SettingsView } from '../../common/contract.js';
import { FactoryError } from '../../common/errors.js';
import type { EgressRule } from '../../common/egress.js';
import type { LayerInfo } from '../../common/environment.js';
import { mountWith, RecordingBridge, type Handlers } from './support/app-harness.js';

const GiB = 1024 ** 3;
const layer = (over: Partial<LayerInfo> = {}): LayerInfo => ({
  id: 'l1', repo: '/home/me/repo', imageVersion: 'v1', createdAt: '2026-01-01T09:00:00.000Z', lastUsedAt: '2026-01-02T10:30:00.000Z',
  sizeBytes: 1.5 * GiB, summary: ['Node 22.12.0 (.nvmrc)', 'npm ci'], inUse: false, ...over,
});

const npm: EgressRule = { name: 'npm registry', host: 'registry.npmjs.org', port: 443, scheme: 'https', steps: ['setup', 'build'] };
const debian: EgressRule = { name: 'Debian', host: 'deb.debian.org', port: 80, scheme: 'http', methods: ['GET', 'HEAD'], pathPrefixes: ['/debian/'], steps: ['setup'] };

function mount(handlers: Handlers, settings: Partial<SettingsView> = {}) {
  let view: SettingsView = { defaultAgent: 'command', maxParallelTasks: 2, vmMemoryMb: 2048, vmCpus: 2, terminalLogRetentionDays: 30, egressRules: [npm, debian], layerBudgetGb: 20, agents: ['command'], ...settings };
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true, version: '8' }, image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'web' }),
    'tasks.list': () => [],
    'terminal.list': () => [],
    'settings.get': () => view,
    'settings.set': (change: Partial<SettingsView>) => (view = { ...view, ...change }),
    ...handlers,
  });
  mountWith(bridge);
  return bridge;
}

afterEach(cleanup);

describe('the Environments screen', () => {
  it('lists the cached layers with size, dates, the commit that made them, summary and use, and the total against the budget', async () => {
    const made = { commit: '0123456789abcdef0123456789abcdef01234567', tree: 'fedcba9876543210fedcba9876543210fedcba98' };
    mount({ 'layers.list': () => [layer({ made }), layer({ id: 'l2', repo: '/home/me/other', sizeBytes: 512 * 1024 ** 2, inUse: true })] });
    fireEvent.click(screen.getByTestId('nav-environments'));
    const row = await screen.findByTestId('layer-row-l1');
    expect([...row.querySelectorAll('td')].slice(0, 7).map((td) => td.textContent)).toEqual([
      '/home/me/repo', '1.5 GiB', '2026-01-02 10:30', '2026-01-01 09:00', 'commit 0123456789ab, tree fedcba987654', 'Node 22.12.0 (.nvmrc) · npm ci', '',
    ]);
    expect(screen.getByTestId('layer-made-l1').querySelector('span')?.getAttribute('title')).toBe(`commit ${made.commit}, tree ${made.tree}`);
    // A layer from before layers recorded it.
    expect(screen.getByTestId('layer-made-l2').textContent).toBe('not recorded');
    expect(screen.getByTestId('layer-row-l2').textContent).toContain('in use');
    await waitFor(() => expect(screen.getByTestId('layers-used').textContent).toBe('2.0 GiB used of 20 GiB'));
    expect(screen.getByTestId('nav-environments').getAttribute('aria-current')).toBe('page');
  });

  it('asks before deleting; Escape keeps the layer and gives the focus back to Delete', async () => {
    const bridge = mount({ 'layers.list': () => [layer()] });
    fireEvent.click(screen.getByTestId('nav-environments'));
    const del = await screen.findByRole('button', { name: 'Delete the cached environment of /home/me/repo' });
    fireEvent.click(del);
    const keep = screen.getByTestId('layer-keep-l1');
    expect(document.activeElement).toBe(keep); // the safe choice has the focus: Enter cannot delete
    fireEvent.keyDown(keep, { key: 'Escape' });
    expect(screen.queryByTestId('layer-confirm-l1')).toBeNull();
    expect(document.activeElement).toBe(del);
    expect(bridge.inputs('layers.remove')).toEqual([]);
  });

  it('deletes a layer after the confirmation and says one in use stays until its sandbox ends', async () => {
    let layers = [layer({ inUse: true })];
    const bridge = mount({
      'layers.list': () => layers,
      'layers.remove': ({ id }: { id: string }) => {
        layers = layers.filter((l) => l.id !== id);
      },
    });
    fireEvent.click(screen.getByTestId('nav-environments'));
    fireEvent.click(await screen.findByTestId('layer-delete-l1'));
    expect(screen.getByTestId('layer-confirm-l1').textContent).toContain('it stays on disk until that sandbox ends');
    fireEvent.click(screen.getByTestId('layer-delete-confirmed-l1'));
    await screen.findByTestId('layers-empty');
    expect(bridge.inputs('layers.remove')).toEqual([{ id: 'l1' }]);
    expect(document.activeElement).toBe(screen.getByTestId('environments-heading')); // not lost to the page body
  });

  it('shows a failed delete on its row and keeps the row', async () => {
    mount({
      'layers.list': () => [layer()],
      'layers.remove': () => {
        throw new FactoryError('InvalidInput', 'no layer "l1"');
      },
    });
    fireEvent.click(screen.getByTestId('nav-environments'));
    fireEvent.click(await screen.findByTestId('layer-delete-l1'));
    fireEvent.click(screen.getByTestId('layer-delete-confirmed-l1'));
    expect((await screen.findByTestId('layer-error-l1-message')).textContent).toBe('no layer "l1"');
    expect(screen.getByTestId('layer-row-l1')).toBeTruthy();
    await waitFor(() => expect(document.activeElement).toBe(screen.getByTestId('layer-delete-l1')));
  });

  it('saves a new budget, and refuses one that is not a number of GB without asking the host', async () => {
    const bridge = mount({ 'layers.list': () => [] });
    fireEvent.click(screen.getByTestId('nav-environments'));
    const input = (await screen.findByTestId('layer-budget-input')) as HTMLInputElement;
    await waitFor(() => expect(input.value).toBe('20'));
    fireEvent.change(input, { target: { value: '0.5' } });
    fireEvent.submit(screen.getByTestId('layer-budget-form'));
    expect((await screen.findByTestId('layer-budget-error-message')).textContent).toContain('layerBudgetGb');
    expect(bridge.inputs('settings.set')).toEqual([]);
    fireEvent.change(input, { target: { value: '40' } });
    fireEvent.submit(screen.getByTestId('layer-budget-form'));
    await screen.findByTestId('layer-budget-saved');
    expect(bridge.inputs('settings.set')).toEqual([{ layerBudgetGb: 40 }]);
    expect(screen.getByTestId('layers-used').textContent).toBe('0 KiB used of 40 GiB');
  });

  it('shows the error when the layers cannot be listed', async () => {
    mount({
      'layers.list': () => {
        throw new FactoryError('InvalidData', 'layers.json: not JSON');
      },
    });
    fireEvent.click(screen.getByTestId('nav-environments'));
    expect((await screen.findByTestId('layers-error-message')).textContent).toBe('layers.json: not JSON');
  });
});

describe('the default egress rules in Settings', () => {
  it('lists each rule with its steps as checkboxes, and saves an edit, a removal and a new rule', async () => {
    const bridge = mount({});
    fireEvent.click(screen.getByTestId('nav-settings'));
    const first = await screen.findByTestId('egress-rule-0');
    expect((within(first).getByRole('checkbox', { name: 'setup' }) as HTMLInputElement).checked).toBe(true);
    expect((within(first).getByRole('checkbox', { name: 'test' }) as HTMLInputElement).checked).toBe(false);
    expect((screen.getByTestId('egress-rule-1-paths') as HTMLInputElement).value).toBe('/debian/');
    // npm also in the test step; Debian removed; a new rule for every step.
    fireEvent.click(within(first).getByRole('checkbox', { name: 'test' }));
    fireEvent.click(screen.getByRole('button', { name: 'Remove rule 2 (Debian)' }));
    fireEvent.click(screen.getByTestId('egress-rule-add'));
    fireEvent.change(screen.getByTestId('egress-rule-1-name'), { target: { value: 'crates' } });
    fireEvent.change(screen.getByTestId('egress-rule-1-host'), { target: { value: 'Static.Crates.io' } });
    for (const s of ['request', 'plan', 'test', 'review', 'document']) fireEvent.click(screen.getByTestId(`egress-rule-1-step-${s}`));
    fireEvent.click(screen.getByTestId('settings-save'));
    await screen.findByTestId('settings-saved');
    expect(bridge.inputs('settings.set')).toEqual([
      {
        egressRules: [
          { ...npm, steps: ['setup', 'build', 'test'] },
          { name: 'crates', host: 'static.crates.io', port: 443, scheme: 'https' },
        ],
      },
    ]);
  });

  it('keeps a rule\'s address ranges through an edit, and sends new ones as typed', async () => {
    const mirror: EgressRule = { ...npm, name: 'mirror', host: 'npm.mirror.example', addresses: ['10.20.0.0/16'] };
    const bridge = mount({}, { egressRules: [mirror, debian] });
    fireEvent.click(screen.getByTestId('nav-settings'));
    expect(((await screen.findByTestId('egress-rule-0-addresses')) as HTMLInputElement).value).toBe('10.20.0.0/16');
    fireEvent.change(screen.getByTestId('egress-rule-1-addresses'), { target: { value: '192.168.5.0/24, fd00:1::/64' } });
    fireEvent.click(screen.getByTestId('settings-save'));
    await waitFor(() => expect(bridge.inputs('settings.set')).toHaveLength(1));
    const [sent] = bridge.inputs('settings.set') as Array<{ egressRules: EgressRule[] }>;
    expect(sent!.egressRules[0]!.addresses).toEqual(['10.20.0.0/16']);
    expect(sent!.egressRules[1]!.addresses).toEqual(['192.168.5.0/24', 'fd00:1::/64']);
  });

  it('names the rule the host refused and keeps the rows as typed', async () => {
    mount({
      'settings.set': () => {
        throw new FactoryError('InvalidInput', 'egressRules: rule "intranet": host intranet.example is on the block list');
      },
    });
    fireEvent.click(screen.getByTestId('nav-settings'));
    fireEvent.click(await screen.findByTestId('egress-rule-add'));
    fireEvent.change(screen.getByTestId('egress-rule-2-name'), { target: { value: 'intranet' } });
    fireEvent.change(screen.getByTestId('egress-rule-2-host'), { target: { value: 'intranet.example' } });
    fireEvent.click(screen.getByTestId('settings-save'));
    expect((await screen.findByTestId('egress-rules-error-message')).textContent).toBe('egressRules: rule "intranet": host intranet.example is on the block list');
    expect(screen.getByTestId('egress-rule-2').getAttribute('aria-invalid')).toBe('true');
    expect(screen.getByTestId('egress-rule-0').getAttribute('aria-invalid')).toBeNull();
    expect((screen.getByTestId('egress-rule-2-host') as HTMLInputElement).value).toBe('intranet.example');
  });

  it('refuses a rule with no step or a bad port before asking the host, naming it', async () => {
    const bridge = mount({});
    fireEvent.click(screen.getByTestId('nav-settings'));
    fireEvent.change(await screen.findByTestId('egress-rule-1-port'), { target: { value: '80x' } });
    fireEvent.click(screen.getByTestId('settings-save'));
    expect((await screen.findByTestId('egress-rules-error-message')).textContent).toMatch(/^rule 2 \("Debian"\): port: /);
    fireEvent.change(screen.getByTestId('egress-rule-1-port'), { target: { value: '80' } });
    fireEvent.click(screen.getByTestId('egress-rule-0-step-setup'));
    fireEvent.click(screen.getByTestId('egress-rule-0-step-build'));
    fireEvent.click(screen.getByTestId('settings-save'));
    await waitFor(() => expect(screen.getByTestId('egress-rules-error-message').textContent).toBe('rule 1 ("npm registry"): steps: choose at least one step'));
    expect(bridge.inputs('settings.set')).toEqual([]);
  });
});
