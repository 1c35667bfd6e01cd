// The Credentials screen and the sandbox security panel in jsdom, against a
// recording host: values are write-only and a leak is shown loudly.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import type { CredentialRef, LeakReport } from '../../../common/credentials.js';
import type { CredentialCall } from '../../../renderer/credentials/client.js';
import { CredentialsScreen } from '../../../renderer/credentials/CredentialsScreen.js';
import { LeakCheckBadge, SandboxSecurity } from '../../../renderer/credentials/SandboxSecurity.js';

afterEach(cleanup);

function recordingHost() {
  const calls: Array<{ method: string; input: unknown }> = [];
  const refs: CredentialRef[] = [];
  const call = (async (method: string, input: Record<string, unknown>) => {
    calls.push({ method, input });
    const now = '2026-01-01T00:00:00.000Z';
    switch (method) {
      case 'credentials.list':
        return [...refs];
      case 'credentials.set': {
        const ref = { id: 'anthropic-1', kind: input.kind, label: input.label, target: input.target, createdAt: now, updatedAt: now } as CredentialRef;
        refs.splice(0, refs.length, ref);
        return ref;
      }
      case 'credentials.delete':
        refs.splice(0);
        return { deleted: true };
      case 'credentials.test':
        return { id: input.id, stored: true, ...(input.callUpstream ? { upstream: { ok: true, status: 200, message: 'api.anthropic.com accepted the credential (HTTP 200)' } } : {}) };
      case 'audit.list':
        return [{ time: now, sandboxId: 't1', method: 'POST', host: 'api.anthropic.com', path: '/v1/messages', rule: 'anthropic', status: 200, bytesIn: 10, bytesOut: 20, durationMs: 5 }];
      case 'leakcheck.get':
        return null;
      default:
        throw new Error(`unexpected ${method}`);
    }
  }) as unknown as CredentialCall;
  return { call, calls, refs };
}

describe('CredentialsScreen', () => {
  it('adds a credential through a password field that is cleared after saving, then tests and deletes it', async () => {
    const host = recordingHost();
    render(<CredentialsScreen call={host.call} />);
    const value = screen.getByTestId('credential-value') as HTMLInputElement;
    expect(value.type).toBe('password');
    fireEvent.change(value, { target: { value: 'sk-ant-secret' } });
    fireEvent.click(screen.getByTestId('credential-save'));
    await screen.findByTestId('credential-anthropic-1');
    expect(host.calls.find((c) => c.method === 'credentials.set')!.input).toMatchObject({ kind: 'anthropic', value: 'sk-ant-secret', target: { upstream: 'https://api.anthropic.com' } });
    expect(value.value).toBe('');
    expect(document.body.textContent).not.toContain('sk-ant-secret');
    fireEvent.click(screen.getByText('Test with service'));
    expect((await screen.findByTestId('credential-anthropic-1-result')).textContent).toContain('accepted the credential');
    fireEvent.click(screen.getByText('Delete'));
    await waitFor(() => expect(screen.queryByTestId('credential-anthropic-1')).toBeNull());
  });
});

describe('sandbox security', () => {
  const base: LeakReport = { sandboxId: 't1', at: 'x', verdict: 'clean', scanned: [{ source: 'disk overlay', bytes: 1 }, { source: 'guest memory', bytes: 1 }], credentialIds: ['gh'], hits: [], durationMs: 1 };
  it('shows a leak as a security failure naming credential, place and encoding', () => {
    render(<LeakCheckBadge report={{ ...base, verdict: 'leak', hits: [{ credentialId: 'gh', encoding: 'raw', source: 'memory', offset: 5 }] }} />);
    const badge = screen.getByTestId('leakcheck-badge');
    expect(badge.getAttribute('role')).toBe('alert');
    expect(badge.textContent).toContain('SECURITY FAILURE');
    expect(badge.textContent).toContain('gh in memory as raw');
  });
  it('shows the audit log of the sandbox', async () => {
    const host = recordingHost();
    render(<SandboxSecurity call={host.call} taskId="t1" />);
    expect((await screen.findByTestId('audit-table')).textContent).toContain('POST api.anthropic.com/v1/messages');
    await waitFor(() => expect(screen.getByTestId('leakcheck-badge').textContent).toContain('not run'));
  });
});
