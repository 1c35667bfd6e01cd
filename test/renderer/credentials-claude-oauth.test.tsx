// The Credentials screen with a Claude Code subscription token, in jsdom with a
// recording bridge in place of a host (the host side is tested in
// test/unit/credentials/claude-oauth-*.test.ts): the kind in the form with the
// help that says where the token comes from, and which of an API key and a
// subscription token sandboxes use, which the user can change.
import { cleanup, fireEvent, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import type { CredentialRef, CredentialSetInput } from '../../common/credentials.js';
import { CredentialsScreen } from '../../renderer/components/CredentialsScreen.js';
import { mountWith, RecordingBridge } from './support/app-harness.js';

const TOKEN = 'sk-ant-oat01-typed-into-the-form-0123456789';
const at = '2026-01-01T00:00:00Z';
const apiKey: CredentialRef = { id: 'anthropic-1', kind: 'anthropic', label: 'Work API key', target: { upstream: 'https://api.anthropic.com' }, createdAt: at, updatedAt: at };
const sub: CredentialRef = { id: 'sub-1', kind: 'claude-code-oauth', label: 'My Max plan', target: { upstream: 'https://api.anthropic.com' }, createdAt: at, updatedAt: at };

/** A bridge that keeps references the way the host does (one preferred at a time). */
function mount(initial: CredentialRef[]) {
  let refs = [...initial];
  const bridge = new RecordingBridge({
    'credentials.list': () => refs,
    'credentials.set': (input: CredentialSetInput) => {
      const old = refs.find((r) => r.id === input.id);
      const ref: CredentialRef = {
        ...(old ?? { id: `${input.kind}-new`, createdAt: at, updatedAt: at, target: { upstream: 'https://api.anthropic.com' } }),
        kind: input.kind, label: input.label, ...(input.preferred ? { preferred: true } : {}),
      };
      refs = [...refs.filter((r) => r.id !== ref.id).map((r) => (input.preferred ? { ...r, preferred: undefined } : r)), ref];
      return ref;
    },
  });
  mountWith(bridge, <CredentialsScreen />);
  return bridge;
}

afterEach(cleanup);

describe('a Claude Code subscription token on the Credentials screen', () => {
  it('the form offers the kind, says to run `claude setup-token`, and sends the token once without showing it', async () => {
    const bridge = mount([]);
    await screen.findByTestId('credentials-empty');
    const kind = screen.getByTestId('credential-kind') as HTMLSelectElement;
    expect([...kind.options].map((o) => o.textContent)).toContain('Claude Code subscription token');
    expect(screen.getByTestId('credential-kind-help').textContent).not.toContain('setup-token');

    fireEvent.change(kind, { target: { value: 'claude-code-oauth' } });
    const help = screen.getByTestId('credential-kind-help').textContent!;
    expect(help).toContain('run claude setup-token');
    expect(help).toContain('CLAUDE_CODE_OAUTH_TOKEN');
    expect(help).toContain('Authorization: Bearer');
    // Nothing to type but the label and the token: the upstream is api.anthropic.com.
    expect(screen.queryByTestId('credential-upstream')).toBeNull();

    fireEvent.change(screen.getByTestId('credential-label'), { target: { value: 'My Max plan' } });
    fireEvent.change(screen.getByTestId('credential-value'), { target: { value: TOKEN } });
    expect((screen.getByTestId('credential-value') as HTMLInputElement).type).toBe('password');
    fireEvent.click(screen.getByTestId('credential-save'));
    await screen.findByTestId('credential-row-claude-code-oauth-new');
    expect(bridge.calls.filter((c) => c.method === 'credentials.set').map((c) => c.input)).toEqual([{ kind: 'claude-code-oauth', label: 'My Max plan', value: TOKEN }]);
    expect(within(screen.getByTestId('credential-row-claude-code-oauth-new')).getByText('Claude Code subscription token')).toBeTruthy();
    // The row can show before the save has resolved; the form empties once it has, and the token goes with it.
    await waitFor(() => expect((screen.getByTestId('credential-value') as HTMLInputElement).value).toBe(''));
    expect(document.body.innerHTML).not.toContain(TOKEN);
  });

  it('with an API key and a subscription token it says the API key is used, and the user can choose the subscription', async () => {
    const bridge = mount([sub, apiKey]);
    const note = await screen.findByTestId('anthropic-choice');
    expect(note.textContent).toContain('Sandboxes use “Work API key” (Anthropic API key) for Claude');
    expect(note.textContent).toContain('an API key is used before a subscription token unless you choose otherwise');
    expect(note.textContent).toContain('Not used: “My Max plan”');
    expect(screen.getByTestId('credential-in-use-anthropic-1')).toBeTruthy();
    expect(screen.queryByTestId('credential-prefer-anthropic-1')).toBeNull();

    fireEvent.click(screen.getByTestId('credential-prefer-sub-1'));
    await waitFor(() => expect(screen.getByTestId('anthropic-choice').textContent).toContain('Sandboxes use “My Max plan” (Claude Code subscription token) for Claude: you chose it'));
    // Choosing is not a change of where a value goes: no value is sent or asked for.
    expect(bridge.calls.find((c) => c.method === 'credentials.set')!.input).toEqual({ id: 'sub-1', kind: 'claude-code-oauth', label: 'My Max plan', preferred: true });
    expect(screen.getByTestId('credential-in-use-sub-1')).toBeTruthy();
    expect(screen.getByTestId('credential-prefer-anthropic-1')).toBeTruthy();
  });

  it('a subscription token alone is named by its kind, with no choice to show', async () => {
    mount([sub]);
    const row = await screen.findByTestId('credential-row-sub-1');
    expect(within(row).getByText('Claude Code subscription token')).toBeTruthy();
    expect(screen.queryByTestId('anthropic-choice')).toBeNull();
    expect(screen.queryByTestId('credential-prefer-sub-1')).toBeNull();
  });
});
