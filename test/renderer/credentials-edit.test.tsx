// Editing a stored credential on the Credentials screen, in jsdom with a
// recording bridge in place of a host (the host's own refusal is tested in
// test/integration/credentials-destination.test.ts).
import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import type { CredentialRef } from '../../common/credentials.js';
import { mountWith, RecordingBridge } from './support/app-harness.js';
import { CredentialsScreen } from '../../renderer/components/CredentialsScreen.js';


const stored: CredentialRef = {
  id: 'custom-1',
  kind: 'custom-header',
  label: 'Search API',
  target: { upstream: 'https://search.example', header: 'x-search-key' },
  createdAt: '2026-01-01T00:00:00Z',
  updatedAt: '2026-01-01T00:00:00Z',
};

function mount() {
  let refs = [stored];
  const bridge = new RecordingBridge({
    'credentials.list': () => refs,
    'credentials.set': (input: { label: string; target?: CredentialRef['target'] }) => {
      refs = [{ ...stored, label: input.label, target: { ...stored.target, ...input.target } }];
      return refs[0];
    },
  });
  mountWith(bridge, <CredentialsScreen />);
  return bridge;
}

const byId = (id: string) => screen.getByTestId(id) as HTMLInputElement;

afterEach(cleanup);

describe('editing a credential', () => {
  it('asks for the value again, and says why, as soon as the user changes where it is sent', async () => {
    const bridge = mount();
    fireEvent.click(await screen.findByTestId('credential-edit-custom-1'));
    expect(byId('credential-edit-value-custom-1').required).toBe(false);
    expect(screen.queryByTestId('credential-edit-why-custom-1')).toBeNull();

    fireEvent.change(byId('credential-edit-upstream-custom-1'), { target: { value: 'https://attacker.example' } });
    expect(byId('credential-edit-value-custom-1').required).toBe(true);
    expect(screen.getByTestId('credential-edit-why-custom-1').textContent).toMatch(/changed where this credential is sent\. Enter its value again/);
    expect(byId('credential-edit-save-custom-1').disabled).toBe(true);

    fireEvent.change(byId('credential-edit-value-custom-1'), { target: { value: 'the-value-again-123' } });
    expect(byId('credential-edit-save-custom-1').disabled).toBe(false);
    fireEvent.click(byId('credential-edit-save-custom-1'));
    await waitFor(() => expect(bridge.calls.some((c) => c.method === 'credentials.set')).toBe(true));
    expect(bridge.calls.find((c) => c.method === 'credentials.set')!.input).toMatchObject({
      id: 'custom-1',
      value: 'the-value-again-123',
      target: { upstream: 'https://attacker.example', header: 'x-search-key' },
    });
    // The form closes once the save has finished (the call above is recorded before it does), and the value goes with it.
    await waitFor(() => expect(screen.queryByTestId('credential-edit-value-custom-1')).toBeNull());
    expect(document.body.innerHTML).not.toContain('the-value-again-123');
  });

  it('a changed header counts as a new destination; the same URL with a slash and a new label do not', async () => {
    const bridge = mount();
    fireEvent.click(await screen.findByTestId('credential-edit-custom-1'));
    fireEvent.change(byId('credential-edit-header-custom-1'), { target: { value: 'authorization' } });
    expect(byId('credential-edit-value-custom-1').required).toBe(true);
    fireEvent.change(byId('credential-edit-header-custom-1'), { target: { value: 'X-Search-Key' } });
    fireEvent.change(byId('credential-edit-upstream-custom-1'), { target: { value: 'https://search.example/' } });
    fireEvent.change(byId('credential-edit-label-custom-1'), { target: { value: 'Renamed' } });
    expect(byId('credential-edit-value-custom-1').required).toBe(false);
    expect(byId('credential-edit-save-custom-1').disabled).toBe(false);
    fireEvent.click(byId('credential-edit-save-custom-1'));
    await waitFor(() => expect(bridge.calls.some((c) => c.method === 'credentials.set')).toBe(true));
    const sent = bridge.calls.find((c) => c.method === 'credentials.set')!.input;
    expect(sent).toMatchObject({ id: 'custom-1', label: 'Renamed' });
    expect(sent).not.toHaveProperty('value');
  });
});
