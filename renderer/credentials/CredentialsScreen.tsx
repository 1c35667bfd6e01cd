// Add, replace, delete and test credentials. Values are write-only: the input
// is a password field that is cleared after saving, and nothing the host sends
// back ever contains a value (the API has no method that returns one).
import { useCallback, useEffect, useState, type FormEvent } from 'react';
import type { CredentialKind, CredentialRef, CredentialTestResult } from '../../common/credentials.js';
import type { ErrorInfo } from '../../common/domain.js';
import { ErrorBox } from '../components/ErrorBox.js';
import type { CredentialCall } from './client.js';

const KIND_LABELS: Record<CredentialKind, string> = {
  anthropic: 'Anthropic API',
  openai: 'OpenAI API',
  git: 'Git host token (e.g. GitHub)',
  'custom-header': 'Custom header rule',
};
const DEFAULT_UPSTREAM: Record<CredentialKind, string> = {
  anthropic: 'https://api.anthropic.com',
  openai: 'https://api.openai.com',
  git: 'https://github.com',
  'custom-header': 'https://',
};

function errorInfo(err: unknown): ErrorInfo {
  return err instanceof Error ? { name: err.name || 'Error', message: err.message } : { name: 'Error', message: String(err) };
}

interface Draft {
  id?: string;
  kind: CredentialKind;
  label: string;
  value: string;
  upstream: string;
  header: string;
  format: 'raw' | 'bearer' | 'basic';
}

const emptyDraft = (kind: CredentialKind = 'anthropic'): Draft => ({ kind, label: KIND_LABELS[kind], value: '', upstream: DEFAULT_UPSTREAM[kind], header: '', format: 'raw' });

export function CredentialsScreen({ call }: { call: CredentialCall }) {
  const [refs, setRefs] = useState<CredentialRef[]>([]);
  const [draft, setDraft] = useState<Draft>(emptyDraft());
  const [error, setError] = useState<ErrorInfo>();
  const [saving, setSaving] = useState(false);
  const [results, setResults] = useState<Record<string, CredentialTestResult | ErrorInfo>>({});

  const reload = useCallback(async () => {
    try {
      setRefs(await call('credentials.list', {}));
    } catch (err) {
      setError(errorInfo(err));
    }
  }, [call]);
  useEffect(() => {
    void reload();
  }, [reload]);

  const onSubmit = async (e: FormEvent) => {
    e.preventDefault();
    setError(undefined);
    setSaving(true);
    try {
      const target: Record<string, unknown> = { upstream: draft.upstream.trim() };
      if (draft.kind === 'custom-header') Object.assign(target, { header: draft.header.trim(), format: draft.format });
      await call('credentials.set', {
        ...(draft.id ? { id: draft.id } : {}),
        kind: draft.kind,
        label: draft.label,
        ...(draft.value ? { value: draft.value } : {}),
        target,
      });
      setDraft(emptyDraft(draft.kind)); // the value leaves the page as soon as it is stored
      await reload();
    } catch (err) {
      setError(errorInfo(err));
    } finally {
      setSaving(false);
    }
  };

  const test = async (id: string, callUpstream: boolean) => {
    try {
      const r = await call('credentials.test', { id, callUpstream });
      setResults((s) => ({ ...s, [id]: r }));
    } catch (err) {
      setResults((s) => ({ ...s, [id]: errorInfo(err) }));
    }
  };

  const remove = async (ref: CredentialRef) => {
    try {
      await call('credentials.delete', { id: ref.id });
      await reload();
    } catch (err) {
      setError(errorInfo(err));
    }
  };

  return (
    <section className="credentials" data-testid="credentials-screen">
      <h2>Credentials</h2>
      <p className="hint">
        Stored in the OS keychain. Sandboxes never see them: their requests go through the app's proxy, which adds the key.
      </p>
      {error ? <ErrorBox error={error} testId="credentials-error" /> : null}
      <table data-testid="credentials-list">
        <thead>
          <tr>
            <th>Name</th>
            <th>For</th>
            <th>Sent to</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {refs.length === 0 ? (
            <tr>
              <td colSpan={4} className="muted">
                No credentials yet.
              </td>
            </tr>
          ) : null}
          {refs.map((ref) => {
            const r = results[ref.id];
            return (
              <tr key={ref.id} data-testid={`credential-${ref.id}`}>
                <td>
                  {ref.label}
                  <div className="hint">
                    <code>{ref.id}</code>
                  </div>
                </td>
                <td>{KIND_LABELS[ref.kind]}</td>
                <td>
                  <code>{ref.target.upstream}</code>
                  {ref.target.header ? (
                    <div className="hint">
                      header <code>{ref.target.header}</code>
                    </div>
                  ) : null}
                </td>
                <td>
                  <div className="actions">
                    <button type="button" className="small secondary" onClick={() => void test(ref.id, false)}>
                      Check keychain
                    </button>
                    <button type="button" className="small secondary" onClick={() => void test(ref.id, true)}>
                      Test with service
                    </button>
                    <button
                      type="button"
                      className="small secondary"
                      onClick={() =>
                        setDraft({ id: ref.id, kind: ref.kind, label: ref.label, value: '', upstream: ref.target.upstream, header: ref.target.header ?? '', format: ref.target.format ?? 'raw' })
                      }
                    >
                      Replace…
                    </button>
                    <button type="button" className="small danger" onClick={() => void remove(ref)}>
                      Delete
                    </button>
                  </div>
                  {r ? (
                    <div className="hint" data-testid={`credential-${ref.id}-result`}>
                      {'stored' in r
                        ? `${r.stored ? 'In the keychain' : 'Missing from the keychain'}${r.upstream ? ` — ${r.upstream.message}` : ''}`
                        : `${r.name}: ${r.message}`}
                    </div>
                  ) : null}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>

      <form onSubmit={onSubmit} data-testid="credential-form" autoComplete="off">
        <h3>{draft.id ? `Replace ${draft.id}` : 'Add a credential'}</h3>
        <label>
          For
          <select
            value={draft.kind}
            disabled={Boolean(draft.id)}
            onChange={(e) => setDraft(emptyDraft(e.target.value as CredentialKind))}
            data-testid="credential-kind"
          >
            {(Object.keys(KIND_LABELS) as CredentialKind[]).map((k) => (
              <option key={k} value={k}>
                {KIND_LABELS[k]}
              </option>
            ))}
          </select>
        </label>
        <label>
          Name
          <input type="text" value={draft.label} onChange={(e) => setDraft({ ...draft, label: e.target.value })} data-testid="credential-label" />
        </label>
        <label>
          Sent only to
          <input type="text" value={draft.upstream} onChange={(e) => setDraft({ ...draft, upstream: e.target.value })} data-testid="credential-upstream" />
        </label>
        {draft.kind === 'custom-header' ? (
          <>
            <label>
              Header
              <input type="text" value={draft.header} onChange={(e) => setDraft({ ...draft, header: e.target.value })} data-testid="credential-header" />
            </label>
            <label>
              Written as
              <select value={draft.format} onChange={(e) => setDraft({ ...draft, format: e.target.value as Draft['format'] })}>
                <option value="raw">the value itself</option>
                <option value="bearer">Bearer value</option>
                <option value="basic">Basic auth</option>
              </select>
            </label>
          </>
        ) : null}
        <label>
          {draft.id ? 'New value (leave empty to keep the stored one)' : 'Value'}
          <input
            type="password"
            autoComplete="new-password"
            spellCheck={false}
            value={draft.value}
            onChange={(e) => setDraft({ ...draft, value: e.target.value })}
            data-testid="credential-value"
          />
        </label>
        <div className="actions">
          <button type="submit" disabled={saving || (!draft.id && !draft.value)} data-testid="credential-save">
            {draft.id ? 'Save' : 'Add'}
          </button>
          {draft.id ? (
            <button type="button" className="secondary" onClick={() => setDraft(emptyDraft())}>
              Cancel
            </button>
          ) : null}
        </div>
      </form>
    </section>
  );
}
