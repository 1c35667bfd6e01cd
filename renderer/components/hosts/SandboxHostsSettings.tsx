// Settings › Sandbox hosts (issue 14): the machines sandboxes may run on besides
// this one, with their live state; add, change, remove (asked twice).
import { useState } from 'react';
import type { ErrorInfo } from '../../../common/domain.js';
import type { SandboxHostView } from '../../../common/sandbox-hosts.js';
import { useController } from '../../state/context.js';
import { toErrorInfo } from '../../state/store.js';
import { ErrorBox } from '../ErrorBox.js';
import { draftOf, EMPTY_HOST } from './host-draft.js';
import { HostForm } from './HostForm.js';
import { hostState, useSandboxHosts } from './use-hosts.js';
import './hosts.css';

export function SandboxHostsSettings() {
  const controller = useController();
  const { hosts, set } = useSandboxHosts();
  // '' adds a host; a name changes that one.
  const [editing, setEditing] = useState<string>();
  const [removing, setRemoving] = useState<string>();
  const [error, setError] = useState<ErrorInfo>();

  const remove = async (name: string) => {
    setError(undefined);
    try {
      set(await controller.bridge.call('hosts.remove', { name }));
    } catch (err) {
      setError(toErrorInfo(err));
    } finally {
      setRemoving(undefined);
    }
  };

  const current = editing ? hosts?.find((h) => h.name === editing) : undefined;
  return (
    <section className="settings-form sandbox-hosts" aria-labelledby="settings-hosts" data-testid="sandbox-hosts">
      <h3 id="settings-hosts">Sandbox hosts</h3>
      <p className="hint">Other machines of yours that run sandboxes through libvirt over SSH. Keys and credentials stay on this computer.</p>
      {hosts === undefined ? <p className="hint">Loading hosts…</p> : hosts.length === 0 ? <p className="hint" data-testid="hosts-empty">No sandbox hosts: every sandbox runs on this machine.</p> : (
        <ul className="host-list" data-testid="host-list">
          {hosts.map((h) => (
            <HostRow key={h.name} host={h} removing={removing === h.name} onEdit={() => setEditing(h.name)} onRemove={() => setRemoving(h.name)} onConfirmRemove={() => void remove(h.name)} onKeep={() => setRemoving(undefined)} />
          ))}
        </ul>
      )}
      {error ? <ErrorBox testId="hosts-error" error={error} /> : null}
      {editing === undefined ? (
        <button type="button" className="secondary" data-testid="host-add" onClick={() => setEditing('')}>Add a sandbox host…</button>
      ) : (
        <HostForm
          key={editing}
          initial={current ? draftOf(current) : EMPTY_HOST}
          {...(current ? { editing: current } : {})}
          onSaved={(list) => { set(list); setEditing(undefined); }}
          onCancel={() => setEditing(undefined)}
        />
      )}
    </section>
  );
}

interface RowProps { host: SandboxHostView; removing: boolean; onEdit(): void; onRemove(): void; onConfirmRemove(): void; onKeep(): void }

function HostRow({ host: h, removing, onEdit, onRemove, onConfirmRemove, onKeep }: RowProps) {
  const state = hostState(h);
  return (
    <li className="host-row" data-testid="host-row" data-host={h.name} data-state={state}>
      <div>
        <strong>{h.name}</strong> <span className="hint">{h.destination}{h.port === 22 ? '' : `:${h.port}`}</span>{' '}
        <span className={`host-state ${state === 'lost' ? 'bad' : ''}`} data-testid="host-state">{state}</span>{' '}
        <span data-testid="host-load">{h.running}/{h.capacity} sandboxes</span>
      </div>
      {h.error ? <p className="field-error" data-testid="host-last-error">Last error: {h.error}</p> : null}
      {h.hostKeyFingerprint ? <p className="hint">Host key <code>{h.hostKeyFingerprint}</code></p> : null}
      <div className="actions">
        {removing ? (
          <>
            <span role="alert">Remove {h.name}? Tasks can no longer run there.</span>
            <button type="button" className="danger" data-testid="host-remove-confirm" onClick={onConfirmRemove}>Remove {h.name}</button>
            <button type="button" className="secondary" data-testid="host-remove-keep" onClick={onKeep}>Keep it</button>
          </>
        ) : (
          <>
            <button type="button" className="secondary small" data-testid="host-edit" aria-label={`Change ${h.name}`} onClick={onEdit}>Change</button>
            <button type="button" className="secondary small" data-testid="host-remove" aria-label={`Remove ${h.name}`} onClick={onRemove}>Remove</button>
          </>
        )}
      </div>
    </li>
  );
}
