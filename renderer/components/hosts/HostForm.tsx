// Add or change one sandbox host: type it (or fill it in from an alias of the
// user's SSH config), Check (the host key it presents, then what libvirt there
// offers), trust the key, Save. A refusal that names a field shows next to it;
// what the user typed stays through every failure.
import { useState, type ReactNode } from 'react';
import type { ErrorInfo } from '../../../common/domain.js';
import type { HostCheckResult, SandboxHostView } from '../../../common/sandbox-hosts.js';
import { useController } from '../../state/context.js';
import { toErrorInfo } from '../../state/store.js';
import { ErrorBox } from '../ErrorBox.js';
import { checkInput, fieldOfMessage, gib, type HostField, type HostFormDraft } from './host-draft.js';

interface Props {
  initial: HostFormDraft;
  /** The host being changed; absent when adding one. */
  editing?: SandboxHostView;
  onSaved(hosts: SandboxHostView[]): void;
  onCancel(): void;
}

export function HostForm({ initial, editing, onSaved, onCancel }: Props) {
  const controller = useController();
  const [d, setD] = useState(initial);
  // The fingerprint the user trusts: the saved pin when editing, else none until they confirm one.
  const [trusted, setTrusted] = useState<string | undefined>(editing?.hostKeyFingerprint);
  const [result, setResult] = useState<HostCheckResult>();
  const [error, setError] = useState<ErrorInfo>();
  const [local, setLocal] = useState<{ field: HostField; problem: string }>();
  const [busy, setBusy] = useState<'check' | 'save' | 'fill'>();
  const [alias, setAlias] = useState('');
  const edit = (patch: Partial<HostFormDraft>) => {
    // From the form as it is now: a fill-in that answers late keeps what was typed meanwhile.
    setD((now) => ({ ...now, ...patch }));
    // Another address or port may present another key: what was trusted no longer applies.
    if (patch.destination !== undefined || patch.port !== undefined) {
      setTrusted(undefined);
      setResult(undefined);
    }
  };

  const run = async (what: 'check' | 'save', pin = trusted) => {
    if (busy) return;
    setError(undefined);
    setLocal(undefined);
    const v = checkInput(d);
    if ('field' in v) return setLocal(v);
    setBusy(what);
    try {
      if (what === 'check') {
        const r = await controller.bridge.call('hosts.check', { ...v.input, ...(pin ? { hostKeyFingerprint: pin } : {}) });
        setResult(r);
        if (r.hostKey !== 'unverified') setTrusted(r.fingerprint);
      } else {
        if (!pin) return setLocal({ field: 'hostKeyFingerprint', problem: 'check the host and trust its host key first' });
        onSaved(await controller.bridge.call('hosts.save', { ...v.input, hostKeyFingerprint: pin, ...(editing ? { previousName: editing.name } : {}) }));
      }
    } catch (err) {
      setError(toErrorInfo(err));
    } finally {
      setBusy(undefined);
    }
  };

  /** The form's address, user, port and key from what the alias stands for in the user's SSH config. */
  const fill = async () => {
    if (busy) return;
    setError(undefined);
    setLocal(undefined);
    const a = alias.trim();
    if (!a) return setLocal({ field: 'alias', problem: 'is empty' });
    setBusy('fill');
    try {
      const h = await controller.bridge.call('hosts.fromSshConfig', { alias: a });
      edit({ destination: h.destination, port: String(h.port), keySource: h.keySource, keyFile: h.keyFile ?? '' });
      // The alias is suggested as the name only when there is none and it is one.
      if (/^[a-z][a-z0-9-]{0,31}$/.test(a)) setD((now) => (now.name.trim() ? now : { ...now, name: a }));
    } catch (err) {
      setError(toErrorInfo(err));
    } finally {
      setBusy(undefined);
    }
  };

  const named = error ? fieldOfMessage(error.message) : undefined;
  const problemOf = (f: HostField) => (local?.field === f ? local.problem : named?.field === f ? named.problem : undefined);
  const row = (f: HostField, label: string, control: (common: Record<string, unknown>) => ReactNode, help?: string) => {
    const id = `host-${f}`;
    const problem = problemOf(f);
    const describedBy = [problem ? `${id}-error` : '', help ? `${id}-help` : ''].filter(Boolean).join(' ') || undefined;
    return (
      <div className={`setting-row${problem ? ' invalid' : ''}`}>
        <label htmlFor={id} className="setting-label">{label}</label>
        <div className="setting-control">
          {control({ id, 'data-testid': id, 'aria-describedby': describedBy, 'aria-invalid': problem ? true : undefined })}
          {problem ? <p className="field-error" role="alert" id={`${id}-error`} data-testid={`${id}-error`}>{label}: {problem}</p> : null}
          {help ? <p className="hint" id={`${id}-help`}>{help}</p> : null}
        </div>
      </div>
    );
  };
  const text = (f: keyof HostFormDraft, extra: Record<string, unknown> = {}) => (common: Record<string, unknown>) => (
    <input type="text" spellCheck={false} {...common} {...extra} value={d[f]} onChange={(e) => edit({ [f]: e.target.value })} />
  );

  return (
    <form className="settings-form host-form" data-testid="host-form" aria-label={editing ? `Change sandbox host ${editing.name}` : 'Add a sandbox host'} onSubmit={(e) => { e.preventDefault(); void run('save'); }}>
      <div className="settings-fields">
        {editing
          ? null
          : row(
              'alias',
              'From your SSH config',
              (c) => (
                <span className="with-unit">
                  <input
                    type="text"
                    spellCheck={false}
                    {...c}
                    placeholder="kvm-box"
                    value={alias}
                    onChange={(e) => setAlias(e.target.value)}
                    // Enter here fills the form in; it does not save a half-typed host.
                    onKeyDown={(e) => {
                      if (e.key === 'Enter') {
                        e.preventDefault();
                        void fill();
                      }
                    }}
                  />
                  <button type="button" data-testid="host-fill" aria-disabled={!!busy} onClick={() => void fill()}>
                    {busy === 'fill' ? 'Reading…' : 'Fill in'}
                  </button>
                </span>
              ),
              'A Host alias from ~/.ssh/config: fills in the address, user, port and key it stands for (as ssh -G reads them).',
            )}
        {row('name', 'Name', text('name', { placeholder: 'kvm-box' }), 'How tasks and the board name it: lowercase letters, digits and dashes.')}
        {row('destination', 'SSH destination', text('destination', { placeholder: 'you@kvm-box.lan' }), 'user@host, as for ssh.')}
        {row('port', 'SSH port', text('port', { inputMode: 'numeric' }))}
        {row('keySource', 'Log in with', (c) => (
          <select {...c} value={d.keySource} onChange={(e) => edit({ keySource: e.target.value as 'file' | 'agent' })}>
            <option value="agent">My SSH agent (SSH_AUTH_SOCK)</option>
            <option value="file">A private key file</option>
          </select>
        ))}
        {d.keySource === 'file' ? row('keyFile', 'Private key file', text('keyFile', { placeholder: '~/.ssh/id_ed25519' }), 'Unencrypted OpenSSH key; it stays on this computer.') : null}
        {row('capacity', 'Sandboxes at once', text('capacity', { inputMode: 'numeric' }))}
        {row('storageDir', 'Storage folder on the host', text('storageDir'), 'Base images and sandbox disks go here.')}
        {row('virtType', 'Accelerator', (c) => (
          <select {...c} value={d.virtType} onChange={(e) => edit({ virtType: e.target.value as 'kvm' | 'qemu' })}>
            <option value="kvm">KVM (needs /dev/kvm on the host)</option>
            <option value="qemu">Emulation (no KVM; much slower)</option>
          </select>
        ))}
      </div>
      <HostKey result={result} trusted={trusted} problem={problemOf('hostKeyFingerprint')} onTrust={(fp) => { setTrusted(fp); void run('check', fp); }} />
      {result?.facts ? <Facts result={result} /> : null}
      <div className="actions">
        <button type="button" data-testid="host-check" aria-disabled={!!busy} onClick={() => void run('check')}>{busy === 'check' ? 'Checking…' : 'Check'}</button>
        <button type="submit" data-testid="host-save" aria-disabled={!!busy}>{busy === 'save' ? 'Saving…' : 'Save host'}</button>
        <button type="button" className="secondary" data-testid="host-cancel" onClick={onCancel}>Cancel</button>
      </div>
      {error && !named ? <ErrorBox testId="host-error" error={error} /> : null}
    </form>
  );
}

function HostKey({ result, trusted, problem, onTrust }: { result?: HostCheckResult; trusted?: string; problem?: string; onTrust(fp: string): void }) {
  if (result?.hostKey === 'unverified' && trusted !== result.fingerprint) {
    return (
      <div className="host-key" role="group" aria-labelledby="host-key-title" data-testid="host-key">
        <p id="host-key-title"><strong>The host presented this key, which nothing vouches for yet:</strong></p>
        <p><code data-testid="host-key-fingerprint">{result.fingerprint}</code></p>
        <p className="hint">Compare it with what the host itself shows (<code>ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub</code>) before you trust it.</p>
        <button type="button" data-testid="host-trust" onClick={() => onTrust(result.fingerprint)}>Trust this host key</button>
        {problem ? <p className="field-error" role="alert" data-testid="host-hostKeyFingerprint-error">{problem}</p> : null}
      </div>
    );
  }
  if (trusted) {
    const how = result?.hostKey === 'known_hosts' ? 'listed in your known_hosts' : 'trusted';
    return (
      <>
        <p className="ok" data-testid="host-key-trusted">Host key {how}: <code>{trusted}</code></p>
        {problem ? <p className="field-error" role="alert" data-testid="host-hostKeyFingerprint-error">Host key: {problem}</p> : null}
      </>
    );
  }
  return problem ? <p className="field-error" role="alert" data-testid="host-hostKeyFingerprint-error">Host key: {problem}</p> : null;
}

function Facts({ result }: { result: HostCheckResult }) {
  const f = result.facts!;
  return (
    <div className="host-facts" role="status" data-testid="host-facts">
      <ul>
        <li data-testid="host-fact-libvirt">libvirt: {f.qemu ? `answers, QEMU ${f.qemu}` : 'does not answer'}</li>
        <li data-testid="host-fact-accel">Accelerator: {f.kvm ? 'KVM available' : 'no KVM (emulation only)'}</li>
        <li data-testid="host-fact-disk">Free disk in the storage folder: {gib(f.freeBytes)}</li>
      </ul>
      {f.problems.length ? (
        <ul className="field-error" data-testid="host-problems">
          {f.problems.map((p) => <li key={p}>{p}</li>)}
        </ul>
      ) : (
        <p className="ok" data-testid="host-ready">Ready for sandboxes.</p>
      )}
    </div>
  );
}
