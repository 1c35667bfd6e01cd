// The Settings screen: every setting with an API, in human units, the host's
// refusal next to the field it names with what the user typed kept. jsdom with a
// recording bridge that answers as the host does (its own schema's messages).
import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { apiInputs, toWireError, fromWireError } from '../../common/contract.js';
import { FactoryError } from '../../common/errors.js';
import { fieldOfError, fieldValue, type SettingField } from '../../renderer/components/SettingsScreen.js';
import { mountWith, RecordingBridge } from './support/app-harness.js';

const SAVED = {
  defaultAgent: 'command', maxParallelTasks: 2, vmMemoryMb: 2048, vmCpus: 2, terminalLogRetentionDays: 30,
  egressRules: [], layerBudgetGb: 20, guestTrustsHostCertificates: true, agents: ['command', 'claude-code', 'codex'],
};

/** settings.set as the host answers it: the contract's schema first (its error as it crosses the wire), then the agent check. */
function hostSet(current: Record<string, unknown>) {
  return (input: unknown) => {
    const parsed = apiInputs['settings.set'].safeParse(input);
    if (!parsed.success) throw fromWireError(toWireError(parsed.error));
    const patch = parsed.data;
    if (patch.defaultAgent && !(current.agents as string[]).includes(patch.defaultAgent)) {
      throw new FactoryError('UnknownAgent', `no agent named "${patch.defaultAgent}"; available: command, claude-code, codex`);
    }
    Object.assign(current, patch);
    return { ...current };
  };
}

function mount() {
  const current: Record<string, unknown> = { ...SAVED };
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true }, image: { state: 'ready', version: 'v3' }, dataDir: '/data', host: 'web' }),
    'settings.get': () => ({ ...current }),
    'settings.set': hostSet(current),
    'tasks.list': () => [],
    'terminal.list': () => [],
  });
  mountWith(bridge);
  fireEvent.click(screen.getByTestId('nav-settings'));
  return { bridge, current };
}

const input = (key: string) => screen.getByTestId(`setting-${key}`) as HTMLInputElement;

afterEach(cleanup);

describe('the Settings screen', () => {
  it('shows every setting in human units, each with its label', async () => {
    mount();
    await screen.findByTestId('settings-form');
    expect(screen.getByLabelText('Tasks at the same time')).toBe(input('maxParallelTasks'));
    expect(input('maxParallelTasks').value).toBe('2');
    // 2048 MiB is shown as 2 GiB; never as a byte count.
    expect(input('vmMemoryMb').value).toBe('2');
    expect((screen.getByTestId('setting-vmMemoryMb-unit') as HTMLSelectElement).value).toBe('GiB');
    expect(input('vmCpus').value).toBe('2');
    expect((screen.getByLabelText('Default agent') as HTMLSelectElement).value).toBe('command');
    expect(input('terminalLogRetentionDays').value).toBe('30');
    expect(screen.getByTestId('setting-terminalLogRetentionDays-row').textContent).toContain('days');
    expect(input('layerBudgetGb').value).toBe('20');
    expect(screen.getByTestId('setting-layerBudgetGb-row').textContent).toContain('GiB');
    expect(input('guestTrustsHostCertificates').checked).toBe(true);
    // The egress editor is on the same screen.
    expect(screen.getByTestId('egress-rules-form')).toBeTruthy();
    expect(screen.getByTestId('settings-screen').textContent).not.toMatch(/\d{7,}/);
    expect(screen.getByTestId('settings-save').getAttribute('aria-disabled')).toBe('true');
  });

  it('shows the host\u2019s refusal next to the field, keeps the typed value, then saves the fix', async () => {
    const { bridge, current } = mount();
    await screen.findByTestId('settings-form');
    fireEvent.change(input('vmMemoryMb'), { target: { value: '100' } });
    fireEvent.change(screen.getByTestId('setting-vmMemoryMb-unit'), { target: { value: 'MiB' } });
    fireEvent.change(input('vmCpus'), { target: { value: '4' } });
    fireEvent.click(screen.getByTestId('settings-save'));
    const err = await screen.findByTestId('setting-vmMemoryMb-error');
    expect(err.textContent).toBe('Memory per sandbox: must be at least 256 MiB');
    expect(input('vmMemoryMb').getAttribute('aria-invalid')).toBe('true');
    expect(input('vmMemoryMb').getAttribute('aria-describedby')).toContain(err.id);
    // What the user typed is still there, in their unit; nothing was saved.
    expect(input('vmMemoryMb').value).toBe('100');
    expect((screen.getByTestId('setting-vmMemoryMb-unit') as HTMLSelectElement).value).toBe('MiB');
    expect(input('vmCpus').value).toBe('4');
    expect(current.vmMemoryMb).toBe(2048);
    expect(bridge.inputs('settings.set')).toEqual([{ vmMemoryMb: 100, vmCpus: 4 }]);

    fireEvent.change(input('vmMemoryMb'), { target: { value: '1.5' } });
    fireEvent.change(screen.getByTestId('setting-vmMemoryMb-unit'), { target: { value: 'GiB' } });
    fireEvent.click(screen.getByTestId('settings-save'));
    await screen.findByTestId('settings-saved');
    expect(bridge.inputs('settings.set').at(-1)).toEqual({ vmMemoryMb: 1536, vmCpus: 4 });
    expect(screen.queryByTestId('setting-vmMemoryMb-error')).toBeNull();
    // The saved value comes back from the host, in the unit that reads best.
    expect(input('vmMemoryMb').value).toBe('1536');
    expect((screen.getByTestId('setting-vmMemoryMb-unit') as HTMLSelectElement).value).toBe('MiB');
  });

  it('names the field for each limit the host keeps', async () => {
    mount();
    await screen.findByTestId('settings-form');
    const cases: Array<[string, string, string]> = [
      ['maxParallelTasks', '0', 'Tasks at the same time: must be at least 1'],
      ['vmCpus', '2.5', 'CPUs per sandbox: must be a whole number'],
      ['terminalLogRetentionDays', '-1', 'Keep terminal logs for: must be 0 (keep forever) or more'],
      ['layerBudgetGb', '5000', 'Disk for cached environments: must be at most 4096 GiB'],
    ];
    for (const [key, typed, message] of cases) {
      fireEvent.change(input(key), { target: { value: typed } });
      fireEvent.click(screen.getByTestId('settings-save'));
      expect((await screen.findByTestId(`setting-${key}-error`)).textContent).toBe(message);
      expect(input(key).value).toBe(typed);
      fireEvent.click(screen.getByTestId('settings-undo'));
    }
  });

  it('puts an unknown agent next to the agent field, and a toggle is sent as it is', async () => {
    const { bridge, current } = mount();
    await screen.findByTestId('settings-form');
    current.agents = ['command']; // the host lost an agent since the screen loaded
    fireEvent.change(screen.getByLabelText('Default agent'), { target: { value: 'codex' } });
    fireEvent.click(screen.getByTestId('settings-save'));
    expect((await screen.findByTestId('setting-defaultAgent-error')).textContent).toMatch(/^Default agent: no agent named "codex"/);
    fireEvent.click(screen.getByTestId('settings-undo'));
    fireEvent.click(input('guestTrustsHostCertificates'));
    fireEvent.click(screen.getByTestId('settings-save'));
    await screen.findByTestId('settings-saved');
    expect(bridge.inputs('settings.set').at(-1)).toEqual({ guestTrustsHostCertificates: false });
    expect(current.guestTrustsHostCertificates).toBe(false);
  });

  it('has one Save for the fields and the egress rules, names what is unsaved, and Esc discards it', async () => {
    const { bridge } = mount();
    await screen.findByTestId('settings-form');
    expect(screen.getAllByRole('button', { name: /^Save/ })).toHaveLength(1);
    expect(screen.getByTestId('settings-unsaved').textContent).toBe('No unsaved changes.');
    fireEvent.change(input('vmCpus'), { target: { value: '4' } });
    fireEvent.click(screen.getByTestId('egress-rule-add'));
    expect(screen.getByTestId('settings-unsaved').textContent).toBe('Unsaved: CPUs per sandbox, Default egress rules. Esc discards.');
    expect(screen.getByTestId('setting-vmCpus-row').getAttribute('data-changed')).toBe('true');
    expect(screen.getByTestId('setting-vmMemoryMb-row').getAttribute('data-changed')).toBe('false');
    // Esc from any field goes back to what is saved; the focus stays in the form, on Save.
    fireEvent.keyDown(input('vmCpus'), { key: 'Escape' });
    expect(input('vmCpus').value).toBe('2');
    expect(screen.queryByTestId('egress-rule-0')).toBeNull();
    expect(screen.getByTestId('settings-unsaved').textContent).toBe('No unsaved changes.');
    expect(document.activeElement).toBe(screen.getByTestId('settings-save'));
    // Both kinds of change go in one settings.set.
    fireEvent.change(input('vmCpus'), { target: { value: '3' } });
    fireEvent.click(screen.getByTestId('egress-rule-add'));
    fireEvent.change(screen.getByTestId('egress-rule-0-name'), { target: { value: 'mirror' } });
    fireEvent.change(screen.getByTestId('egress-rule-0-host'), { target: { value: 'mirror.example.org' } });
    fireEvent.click(screen.getByTestId('settings-save'));
    await screen.findByTestId('settings-saved');
    const sent = bridge.inputs('settings.set') as Array<Record<string, unknown>>;
    expect(sent).toHaveLength(1);
    expect(Object.keys(sent[0]!).sort()).toEqual(['egressRules', 'vmCpus']);
    expect(sent[0]!.vmCpus).toBe(3);
  });

  it('refuses what is not a number before asking the host', async () => {
    const { bridge } = mount();
    await screen.findByTestId('settings-form');
    fireEvent.change(input('vmCpus'), { target: { value: 'four' } });
    fireEvent.click(screen.getByTestId('settings-save'));
    expect((await screen.findByTestId('setting-vmCpus-error')).textContent).toBe('CPUs per sandbox: "four" is not a number');
    expect(bridge.inputs('settings.set')).toEqual([]);
  });

  it('shows a refusal that names no field in full, under the form', async () => {
    const bridge = new RecordingBridge({
      'system.status': () => ({ qemu: { ok: true }, image: { state: 'ready', version: 'v3' }, dataDir: '/data', host: 'web' }),
      'settings.get': () => ({ ...SAVED }),
      'settings.set': () => {
        throw new FactoryError('Error', 'settings.json: EACCES: permission denied');
      },
      'tasks.list': () => [],
      'terminal.list': () => [],
    });
    mountWith(bridge);
    fireEvent.click(screen.getByTestId('nav-settings'));
    fireEvent.change(await screen.findByTestId('setting-vmCpus'), { target: { value: '3' } });
    fireEvent.click(screen.getByTestId('settings-save'));
    expect((await screen.findByTestId('settings-error-message')).textContent).toBe('settings.json: EACCES: permission denied');
    await waitFor(() => expect(input('vmCpus').value).toBe('3'));
  });
});

describe('the field table', () => {
  // A setting another part adds later is one entry: here a time limit in minutes.
  const keep: SettingField = { key: 'maxParallelTasks', kind: 'number', unit: 'minutes', label: 'Keep a sandbox for', help: '' };

  it('reads what was typed for a new kind of entry, and finds the field a host error names', () => {
    expect(fieldValue(keep, { maxParallelTasks: ' 15 ' })).toEqual({ value: 15 });
    expect(fieldValue(keep, { maxParallelTasks: '' })).toEqual({ error: 'is empty' });
    expect(fieldValue(keep, { maxParallelTasks: '1e3' })).toEqual({ error: '"1e3" is not a number' });
    expect(fieldOfError({ name: 'InvalidInput', message: 'maxParallelTasks: must be at most 32' }, [keep])).toEqual({ field: keep, problem: 'must be at most 32' });
    expect(fieldOfError({ name: 'InvalidInput', message: 'vmCpus: must be at most 64' }, [keep])).toBeUndefined();
    // A message that merely starts with a word and a colon is not taken for a field.
    expect(fieldOfError({ name: 'Error', message: 'settings: could not write' }, [keep])).toBeUndefined();
  });
});
