// Credentials: references only. A value is typed into a password field, sent to
// the host once (which puts it in the OS keychain) and never shown or read back.
import { useEffect, useState, type FormEvent } from 'react';
import { anthropicCredentialInUse, CREDENTIAL_KINDS, type AnthropicChoice, type CredentialKind, type CredentialRef, type CredentialSetInput, type CredentialTestResult } from '../../common/credentials.js';
import type { ErrorInfo } from '../../common/domain.js';
import { useController, useFactory } from '../state/context.js';
import { toErrorInfo } from '../state/store.js';
import { ErrorBox } from './ErrorBox.js';

const KIND_LABEL: Record<CredentialKind, string> = {
  anthropic: 'Anthropic API key',
  'claude-code-oauth': 'Claude Code subscription token',
  openai: 'OpenAI API key',
  git: 'Git host token',
  'custom-header': 'Custom header rule',
};

/** What to paste for each kind, shown under the form. */
function KindHelp({ kind }: { kind: CredentialKind }) {
  if (kind === 'claude-code-oauth') {
    return (
      <p className="hint" data-testid="credential-kind-help">
        For a Claude Pro or Max subscription: run <code>claude setup-token</code> on a computer where you can sign in to
        Claude in a browser, and paste the token it prints (it starts with <code>sk-ant-oat01-</code>). Sandboxes get a
        placeholder in <code>CLAUDE_CODE_OAUTH_TOKEN</code>; the app's proxy sends the real token to api.anthropic.com
        as <code>Authorization: Bearer</code>.
      </p>
    );
  }
  if (kind === 'anthropic') {
    return (
      <p className="hint" data-testid="credential-kind-help">
        An API key from the Anthropic Console (it starts with <code>sk-ant-api</code>). Signing in with a Claude
        subscription instead? Choose “{KIND_LABEL['claude-code-oauth']}”.
      </p>
    );
  }
  return null;
}

/** With several Anthropic credentials stored: which one sandboxes use, and why. */
function AnthropicChoiceNote({ choice }: { choice: AnthropicChoice }) {
  return (
    <p className="note" data-testid="anthropic-choice">
      Sandboxes use “{choice.ref.label}” ({KIND_LABEL[choice.ref.kind]}) for Claude: {choice.reason}. Not used:{' '}
      {choice.unused.map((r) => `“${r.label}”`).join(', ')}. Choose another with “Use for Claude”.
    </p>
  );
}

export function CredentialsScreen() {
  const controller = useController();
  const credentials = useFactory((s) => s.credentials);
  const keychain = useFactory((s) => s.status?.keychain);
  const [error, setError] = useState<ErrorInfo>();
  const [checking, setChecking] = useState(false);
  const choice = credentials ? anthropicCredentialInUse(credentials) : undefined;

  useEffect(() => {
    controller.loadCredentials().catch((err) => setError(toErrorInfo(err)));
  }, [controller]);

  return (
    <section className="credentials" data-testid="credentials-screen">
      <h2>Credentials</h2>
      <p className="hint">
        Values are stored in the OS keychain and are write-only: the app never shows them again, and they never enter a
        sandbox. Sandboxes reach these services through the app's proxy, which adds the credential.
      </p>
      {keychain && !keychain.ok ? (
        // Said before anyone types a key, not only as the error of a save.
        <div className="keychain-unavailable" data-testid="keychain-unavailable">
          <ErrorBox testId="keychain-error" error={keychain.error ?? { name: 'KeychainUnavailable', message: 'the OS keychain did not answer.' }} />
          <button
            type="button"
            className="secondary small"
            data-testid="keychain-recheck"
            disabled={checking}
            onClick={() => {
              setChecking(true);
              void controller.refreshStatus().finally(() => setChecking(false));
            }}
          >
            {checking ? 'Checking…' : 'Check the keychain again'}
          </button>
        </div>
      ) : null}
      {error ? <ErrorBox testId="credentials-error" error={error} /> : null}
      {choice && choice.unused.length > 0 ? <AnthropicChoiceNote choice={choice} /> : null}
      {credentials === undefined ? null : credentials.length === 0 ? (
        <p className="hint" data-testid="credentials-empty">
          No credentials yet.
        </p>
      ) : (
        <table className="credential-table">
          <thead>
            <tr>
              <th>Label</th>
              <th>For</th>
              <th>Upstream</th>
              <th>Updated</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {credentials.map((c) => (
              <CredentialRow key={c.id} credential={c} choice={choice} />
            ))}
          </tbody>
        </table>
      )}
      <CredentialForm />
    </section>
  );
}

function CredentialRow({ credential, choice }: { credential: CredentialRef; choice: AnthropicChoice | undefined }) {
  const controller = useController();
  const [editing, setEditing] = useState(false);
  const [result, setResult] = useState<CredentialTestResult>();
  const [error, setError] = useState<ErrorInfo>();
  const [busy, setBusy] = useState(false);

  /** True when `fn` succeeded; a failure shows its error here. */
  const run = async (fn: () => Promise<void>): Promise<boolean> => {
    setBusy(true);
    setError(undefined);
    try {
      await fn();
      return true;
    } catch (err) {
      setError(toErrorInfo(err));
      if (toErrorInfo(err).name === 'KeychainUnavailable') void controller.refreshStatus();
      return false;
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <tr data-testid={`credential-row-${credential.id}`}>
        <td>{credential.label}</td>
        <td>
          {KIND_LABEL[credential.kind]}
          {choice && choice.unused.length > 0 && choice.ref.id === credential.id ? (
            <span className="muted" data-testid={`credential-in-use-${credential.id}`}> · used for Claude</span>
          ) : null}
        </td>
        <td>
          <code>{credential.target.upstream}</code>
        </td>
        <td className="muted">{credential.updatedAt.slice(0, 16).replace('T', ' ')}</td>
        <td className="actions">
          <button type="button" className="secondary small" disabled={busy} onClick={() => void run(async () => setResult(await controller.testCredential(credential.id, true)))}>
            Test
          </button>
          {choice?.unused.some((r) => r.id === credential.id) ? (
            <button
              type="button"
              className="secondary small"
              data-testid={`credential-prefer-${credential.id}`}
              disabled={busy}
              onClick={() => void run(() => controller.saveCredential({ id: credential.id, kind: credential.kind, label: credential.label, preferred: true }))}
            >
              Use for Claude
            </button>
          ) : null}
          <button type="button" className="secondary small" data-testid={`credential-edit-${credential.id}`} onClick={() => setEditing((r) => !r)}>
            Edit
          </button>
          <button
            type="button"
            className="danger small"
            data-testid={`credential-delete-${credential.id}`}
            disabled={busy}
            onClick={() => void run(() => controller.deleteCredential(credential.id))}
          >
            Delete
          </button>
        </td>
      </tr>
      {editing || result || error ? (
        <tr>
          <td colSpan={5}>
            {editing ? <CredentialEditForm credential={credential} busy={busy} onSave={(input) => run(async () => {
              await controller.saveCredential(input);
              setEditing(false);
            })} /> : null}
            {result ? (
              <p data-testid={`credential-test-${credential.id}`} className={result.stored && result.upstream?.ok !== false ? 'ok' : 'bad'}>
                {result.stored ? 'Stored in the keychain.' : 'Not found in the keychain.'}{' '}
                {result.upstream ? `Upstream: ${result.upstream.ok ? 'accepted' : 'refused'}${result.upstream.status ? ` (HTTP ${result.upstream.status})` : ''} — ${result.upstream.message}` : ''}
              </p>
            ) : null}
            {error ? <ErrorBox testId={`credential-error-${credential.id}`} error={error} /> : null}
          </td>
        </tr>
      ) : null}
    </>
  );
}

/** Same URL however it is spelled (a trailing slash, upper-case host). */
function sameUrl(a: string, b: string): boolean {
  try {
    return new URL(a).href === new URL(b).href;
  } catch {
    return a === b;
  }
}

/**
 * Edit a stored credential. Where its value goes (upstream, header, basic-auth
 * user) can change only together with the value: the host refuses otherwise
 * (CredentialValueRequired), and the form says so before anyone tries.
 */
function CredentialEditForm({ credential, busy, onSave }: { credential: CredentialRef; busy: boolean; onSave: (input: CredentialSetInput) => Promise<boolean> }) {
  const t = credential.target;
  const [label, setLabel] = useState(credential.label);
  const [upstream, setUpstream] = useState(t.upstream);
  const [header, setHeader] = useState(t.header ?? '');
  const [username, setUsername] = useState(t.username ?? '');
  const [value, setValue] = useState('');
  const id = credential.id;
  const moved =
    !sameUrl(upstream.trim(), t.upstream) ||
    (credential.kind === 'custom-header' && header.trim().toLowerCase() !== (t.header ?? '').toLowerCase()) ||
    (credential.kind === 'git' && username.trim() !== (t.username ?? ''));
  const target: NonNullable<CredentialSetInput['target']> = {
    upstream: upstream.trim(),
    ...(credential.kind === 'custom-header' && header.trim() ? { header: header.trim() } : {}),
    ...(credential.kind === 'git' && username.trim() ? { username: username.trim() } : {}),
  };
  return (
    <form
      className="inline-form"
      data-testid={`credential-edit-form-${id}`}
      onSubmit={(e) => {
        e.preventDefault();
        // A failed save keeps the typed value, so the user can retry once the keychain answers.
        void onSave({ id, kind: credential.kind, label, ...(value ? { value } : {}), target }).then((ok) => ok && setValue(''));
      }}
    >
      <label>
        Label
        <input type="text" data-testid={`credential-edit-label-${id}`} value={label} onChange={(e) => setLabel(e.target.value)} />
      </label>
      <label>
        Upstream (https://…)
        <input type="text" data-testid={`credential-edit-upstream-${id}`} value={upstream} onChange={(e) => setUpstream(e.target.value)} />
      </label>
      {credential.kind === 'custom-header' ? (
        <label>
          Header
          <input type="text" data-testid={`credential-edit-header-${id}`} value={header} onChange={(e) => setHeader(e.target.value)} />
        </label>
      ) : null}
      {credential.kind === 'git' ? (
        <label>
          User name
          <input type="text" data-testid={`credential-edit-username-${id}`} value={username} onChange={(e) => setUsername(e.target.value)} />
        </label>
      ) : null}
      <label>
        {moved ? 'Value (required)' : 'New value (optional)'}
        <input
          type="password"
          autoComplete="off"
          data-testid={`credential-edit-value-${id}`}
          placeholder={moved ? 'enter the value again' : 'leave empty to keep the stored value'}
          required={moved}
          aria-describedby={moved ? `credential-edit-why-${id}` : undefined}
          value={value}
          onChange={(e) => setValue(e.target.value)}
        />
      </label>
      {moved ? (
        <p className="note" id={`credential-edit-why-${id}`} data-testid={`credential-edit-why-${id}`}>
          You changed where this credential is sent. Enter its value again: a stored value is never sent to a new
          destination unless the person changing it knows the value.
        </p>
      ) : null}
      <button type="submit" className="small" data-testid={`credential-edit-save-${id}`} disabled={busy || !label.trim() || (moved && !value)}>
        Save
      </button>
    </form>
  );
}

function CredentialForm() {
  const controller = useController();
  const [kind, setKind] = useState<CredentialKind>('anthropic');
  const [label, setLabel] = useState('');
  const [value, setValue] = useState('');
  const [upstream, setUpstream] = useState('');
  const [header, setHeader] = useState('');
  const [username, setUsername] = useState('');
  const [error, setError] = useState<ErrorInfo>();
  const [saved, setSaved] = useState<string>();
  const [busy, setBusy] = useState(false);
  const needsUpstream = kind === 'git' || kind === 'custom-header';

  const onSubmit = async (e: FormEvent) => {
    e.preventDefault();
    setError(undefined);
    setSaved(undefined);
    setBusy(true);
    const target: NonNullable<CredentialSetInput['target']> = {
      ...(upstream.trim() ? { upstream: upstream.trim() } : {}),
      ...(kind === 'custom-header' && header.trim() ? { header: header.trim() } : {}),
      ...(kind === 'git' && username.trim() ? { username: username.trim() } : {}),
    };
    try {
      await controller.saveCredential({ kind, label, value, ...(Object.keys(target).length ? { target } : {}) });
      setSaved(label);
      setLabel('');
      setValue('');
    } catch (err) {
      // The typed value stays, so a retry after unlocking the keychain needs no retyping.
      setError(toErrorInfo(err));
      if (toErrorInfo(err).name === 'KeychainUnavailable') void controller.refreshStatus();
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="credential-form" data-testid="credential-form" onSubmit={onSubmit}>
      <h3>Add a credential</h3>
      <div className="form-grid">
        <label>
          For
          <select data-testid="credential-kind" value={kind} onChange={(e) => setKind(e.target.value as CredentialKind)}>
            {CREDENTIAL_KINDS.map((k) => (
              <option key={k} value={k}>
                {KIND_LABEL[k]}
              </option>
            ))}
          </select>
        </label>
        <label>
          Label
          <input type="text" data-testid="credential-label" value={label} onChange={(e) => setLabel(e.target.value)} />
        </label>
        <label>
          Value
          <input type="password" autoComplete="off" data-testid="credential-value" value={value} onChange={(e) => setValue(e.target.value)} />
        </label>
        {needsUpstream || upstream ? (
          <label>
            Upstream (https://…)
            <input type="text" data-testid="credential-upstream" value={upstream} onChange={(e) => setUpstream(e.target.value)} />
          </label>
        ) : null}
        {kind === 'custom-header' ? (
          <label>
            Header
            <input type="text" data-testid="credential-header" value={header} onChange={(e) => setHeader(e.target.value)} />
          </label>
        ) : null}
        {kind === 'git' ? (
          <label>
            User name (optional)
            <input type="text" data-testid="credential-username" value={username} onChange={(e) => setUsername(e.target.value)} />
          </label>
        ) : null}
      </div>
      <KindHelp kind={kind} />
      <button type="submit" data-testid="credential-save" disabled={busy || !label.trim() || !value}>
        Save to keychain
      </button>
      {saved ? (
        <p className="ok" data-testid="credential-saved">
          Saved “{saved}”.
        </p>
      ) : null}
      {error ? <ErrorBox testId="credential-form-error" error={error} /> : null}
    </form>
  );
}
