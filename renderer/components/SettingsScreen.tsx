// Every setting that has an API (settings.get / settings.set), built from a table
// of field descriptors: a new setting is one entry in SETTING_FIELDS. Values show
// in human units (MiB or GiB, days, minutes), never raw bytes. The host validates:
// its refusal is shown next to the field it names, and what the user typed stays.
// The fields and the default egress rules are one form with one Save: the bar
// above them names what is unsaved, and Esc (or Discard) goes back to what is saved.
import { useRef, useState } from 'react';
import type { ApiInput, SettingsView } from '../../common/contract.js';
import type { ErrorInfo } from '../../common/domain.js';
import { useFactory } from '../state/context.js';
import { CommandLineSettings } from './CommandLineSettings.js';
import { EgressRulesFields, RULES_ERROR, fromDraft, toDraft, type RuleDraft } from './environment/EgressRulesSettings.js';
import { RepoEgressRules } from './environment/RepoEgressRules.js';
import { ErrorBox } from './ErrorBox.js';
import { SandboxHostsSettings } from './hosts/SandboxHostsSettings.js';
import { useSettingsDraft } from './settings-draft.js';
import './look.css';

export type SettingsPatch = ApiInput<'settings.set'>;
type Key = keyof SettingsPatch & keyof SettingsView;

interface Common {
  key: Key;
  label: string;
  help: string;
  /** Error names the host gives for this field without naming it (e.g. UnknownAgent). */
  errorNames?: string[];
}
/** A number in one unit ("days", "GiB", "minutes"; none for a count). */
interface NumberField extends Common { kind: 'number'; unit?: string; integer?: boolean }
/** A size the host keeps in MiB, shown and typed in MiB or GiB. */
interface MemoryField extends Common { kind: 'memory' }
interface ChoiceField extends Common { kind: 'choice'; options: (s: SettingsView) => string[] }
interface ToggleField extends Common { kind: 'toggle' }
interface TextField extends Common { kind: 'text'; placeholder?: string }
export type SettingField = NumberField | MemoryField | ChoiceField | ToggleField | TextField;

export const SETTING_FIELDS: SettingField[] = [
  { key: 'maxParallelTasks', kind: 'number', integer: true, label: 'Tasks at the same time', help: 'How many tasks may boot and run their pipeline at once; more wait their turn.' },
  { key: 'vmMemoryMb', kind: 'memory', label: 'Memory per sandbox', help: 'Guest memory of each new sandbox (256 MiB to 64 GiB).' },
  { key: 'vmMemoryMaxMb', kind: 'memory', label: 'Most memory a repository may ask for', help: 'A repository\u2019s .factory/pipeline.json may ask for more guest memory (environment.memoryMb); it gets at most this.' },
  { key: 'vmCpus', kind: 'number', integer: true, label: 'CPUs per sandbox', help: 'Virtual CPUs of each new sandbox.' },
  { key: 'defaultAgent', kind: 'choice', options: (s) => s.agents, errorNames: ['UnknownAgent'], label: 'Default agent', help: 'Used when neither the task nor the repository\u2019s pipeline.json chooses one; "command" runs the pipeline\u2019s commands.' },
  { key: 'terminalLogRetentionDays', kind: 'number', integer: true, unit: 'days', label: 'Keep terminal logs for', help: 'Logs of finished terminals older than this are deleted at the next start; 0 keeps them forever.' },
  { key: 'layerBudgetGb', kind: 'number', unit: 'GiB', label: 'Disk for cached environments', help: 'The least recently used environment layers are deleted past this size.' },
  { key: 'guestTrustsHostCertificates', kind: 'toggle', label: 'Sandboxes trust this computer\u2019s certificate authorities', help: 'Needed behind a TLS-inspecting company proxy; the host\u2019s CA bundle is copied into each sandbox.' },
  { key: 'warmPoolSize', kind: 'number', integer: true, label: 'Sandboxes waiting in the pool', help: 'Restored and ready, so Start takes one at once; each holds its guest memory. 0 turns the pool off.' },
  { key: 'warmPoolMemoryBudgetMb', kind: 'memory', label: 'Memory budget of running and pooled sandboxes', help: 'The pool stops refilling past it; 0 means half of this computer\u2019s memory.' },
  { key: 'keepSandboxAfterDecisionMinutes', kind: 'number', integer: true, unit: 'minutes', label: 'Keep a sandbox after Approve or Reject', help: 'For inspection; 0 destroys it at the decision (its leak check runs first). At most a day.' },
  { key: 'editorCommand', kind: 'text', placeholder: 'code', label: 'Editor', help: '"Open in editor" runs this program with the repository folder as its one argument (no shell, no options).' },
];

/** What a field shows for a saved value, as the user would type it. */
type Draft = Record<string, string | boolean>;

function initial(field: SettingField, v: unknown): Draft {
  switch (field.kind) {
    case 'toggle':
      return { [field.key]: v === true };
    case 'memory': {
      const mib = typeof v === 'number' ? v : 0;
      return mib >= 1024 && mib % 1024 === 0 ? { [field.key]: String(mib / 1024), [`${field.key}:unit`]: 'GiB' } : { [field.key]: String(mib), [`${field.key}:unit`]: 'MiB' };
    }
    default:
      return { [field.key]: v === undefined ? '' : String(v) };
  }
}

/** The value to send for a field, or why what was typed is not one (before asking the host). */
export function fieldValue(field: SettingField, draft: Draft): { value: unknown } | { error: string } {
  const raw = draft[field.key];
  if (field.kind === 'toggle') return { value: raw === true };
  const text = String(raw ?? '').trim();
  if (field.kind === 'choice' || field.kind === 'text') return { value: text };
  if (!/^-?\d+(\.\d+)?$/.test(text)) return { error: text ? `"${text}" is not a number` : 'is empty' };
  const n = Number(text);
  if (field.kind === 'memory') return { value: Math.round(n * (draft[`${field.key}:unit`] === 'GiB' ? 1024 : 1)) };
  return { value: n };
}

/** Which field a host error is about: "vmMemoryMb: must be ..." names it; some error names stand for one. */
export function fieldOfError(err: ErrorInfo, fields: SettingField[] = SETTING_FIELDS): { field: SettingField; problem: string } | undefined {
  const m = /^([A-Za-z]+)(?:\.[^:]*)?: (.*)$/s.exec(err.message);
  const named = m ? fields.find((f) => f.key === m[1]) : undefined;
  if (named) return { field: named, problem: m![2]! };
  const byName = fields.find((f) => f.errorNames?.includes(err.name));
  return byName ? { field: byName, problem: err.message } : undefined;
}

export function SettingsScreen() {
  return (
    <section className="settings panel-screen" data-testid="settings-screen" aria-labelledby="settings-heading">
      <h2 id="settings-heading">Settings</h2>
      <SettingsForm />
      <RepoEgressRules />
      <SandboxHostsSettings />
      <CommandLineSettings />
    </section>
  );
}

/** What the form holds that differs from the host's settings. */
interface FormDraft {
  general?: Draft;
  rules?: RuleDraft[];
}

function SettingsForm() {
  const saved = useFactory((s) => s.settings);
  const { draft, error, busy, done, setError, edit, discard, begin, save: send } = useSettingsDraft<FormDraft>();
  const [local, setLocal] = useState<{ key: string; problem: string }>();
  const saveButton = useRef<HTMLButtonElement>(null);
  if (!saved) return <p className="hint">Loading settings…</p>;
  // Only settings this host knows (an older host lacks some).
  const fields = SETTING_FIELDS.filter((f) => saved[f.key] !== undefined);
  const base: Draft = Object.assign({}, ...fields.map((f) => initial(f, saved[f.key])));
  const current = { ...base, ...draft?.general };
  const changed = fields.filter((f) => current[f.key] !== base[f.key] || (f.kind === 'memory' && current[`${f.key}:unit`] !== base[`${f.key}:unit`]));
  const savedRules = (saved.egressRules ?? []).map(toDraft);
  const rules = draft?.rules ?? savedRules;
  const rulesChanged = draft?.rules !== undefined && JSON.stringify(draft.rules) !== JSON.stringify(savedRules);
  const unsaved = [...changed.map((f) => f.label), ...(rulesChanged ? ['Default egress rules'] : [])];

  const discardAll = () => {
    discard();
    setLocal(undefined);
    // The Discard button goes away with the changes: the focus goes to Save, not to the page body.
    saveButton.current?.focus();
  };
  const save = async () => {
    if (busy || unsaved.length === 0) return;
    begin();
    setLocal(undefined);
    const patch: Record<string, unknown> = {};
    for (const f of changed) {
      const v = fieldValue(f, current);
      if ('error' in v) return setLocal({ key: f.key, problem: v.error });
      patch[f.key] = v.value;
    }
    if (rulesChanged) {
      const built = rules.map(fromDraft);
      const bad = built.find((b): b is { error: string } => 'error' in b);
      if (bad) return setError({ name: 'InvalidInput', message: bad.error });
      patch.egressRules = built.map((b) => (b as { rule: unknown }).rule);
    }
    await send(patch as SettingsPatch);
  };

  const hostProblem = error ? fieldOfError(error, fields) : undefined;
  const rulesError = error && !hostProblem && RULES_ERROR.test(error.message) ? error : undefined;
  const problemOf = (f: SettingField) => (local?.key === f.key ? local.problem : hostProblem?.field.key === f.key ? hostProblem.problem : undefined);
  return (
    <form
      className="settings-form"
      data-testid="settings-form"
      aria-label="Settings"
      data-unsaved={unsaved.length > 0}
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
      onKeyDown={(e) => {
        if (e.key !== 'Escape' || unsaved.length === 0 || busy) return;
        e.preventDefault();
        discardAll();
      }}
    >
      {/* First in the form and kept in view: Save is one Tab from the menu, and Enter in any field saves too. */}
      <div className="settings-savebar" data-testid="settings-savebar">
        <p className={unsaved.length ? 'unsaved' : 'hint'} role="status" data-testid="settings-unsaved">
          {unsaved.length ? `Unsaved: ${unsaved.join(', ')}. Esc discards.` : done ? '' : 'No unsaved changes.'}
          {done && !unsaved.length ? (
            <span className="ok" data-testid="settings-saved">
              Saved. New sandboxes use these values.
            </span>
          ) : null}
        </p>
        <div className="actions">
          {/* aria-disabled, not disabled: a disabled button drops the keyboard focus to the page body as it saves. */}
          <button ref={saveButton} type="submit" data-testid="settings-save" aria-disabled={busy || unsaved.length === 0}>
            {busy ? 'Saving…' : 'Save settings'}
          </button>
          {unsaved.length ? (
            <button type="button" className="secondary" data-testid="settings-undo" onClick={discardAll}>
              Discard changes
            </button>
          ) : null}
        </div>
      </div>
      <h3 id="settings-general">Sandboxes and tasks</h3>
      <div className="settings-fields">
        {fields.map((f) => (
          <FieldRow key={f.key} field={f} saved={saved} value={current} changed={changed.includes(f)} problem={problemOf(f)} onChange={(patch) => edit({ ...draft, general: { ...draft?.general, ...patch } })} />
        ))}
      </div>
      <EgressRulesFields rows={rules} onChange={(rows) => edit({ ...draft, rules: rows })} error={rulesError} />
      {/* A refusal that names no field or rule shows here, in full. */}
      {error && !hostProblem && !rulesError ? <ErrorBox testId="settings-error" error={error} /> : null}
    </form>
  );
}

function FieldRow({ field: f, saved, value, changed, problem, onChange }: { field: SettingField; saved: SettingsView; value: Draft; changed: boolean; problem?: string; onChange: (p: Draft) => void }) {
  const id = `setting-${f.key}`;
  const helpId = `${id}-help`;
  const errId = `${id}-error`;
  const describedBy = problem ? `${errId} ${helpId}` : helpId;
  const common = { id, 'data-testid': id, 'aria-describedby': describedBy, 'aria-invalid': problem ? true : undefined } as const;
  let control;
  switch (f.kind) {
    case 'toggle':
      control = <input type="checkbox" {...common} checked={value[f.key] === true} onChange={(e) => onChange({ [f.key]: e.target.checked })} />;
      break;
    case 'choice': {
      const options = f.options(saved);
      const v = String(value[f.key]);
      control = (
        <select {...common} value={v} onChange={(e) => onChange({ [f.key]: e.target.value })}>
          {(options.includes(v) ? options : [v, ...options]).map((o) => (
            <option key={o} value={o}>
              {o}
            </option>
          ))}
        </select>
      );
      break;
    }
    case 'memory':
      control = (
        <span className="with-unit">
          <input type="text" inputMode="decimal" {...common} value={String(value[f.key])} onChange={(e) => onChange({ [f.key]: e.target.value })} />
          <select aria-label={`${f.label} unit`} data-testid={`${id}-unit`} value={String(value[`${f.key}:unit`])} onChange={(e) => onChange({ [`${f.key}:unit`]: e.target.value })}>
            <option value="MiB">MiB</option>
            <option value="GiB">GiB</option>
          </select>
        </span>
      );
      break;
    default:
      control = (
        <span className="with-unit">
          <input
            type="text"
            inputMode={f.kind === 'number' ? (f.integer ? 'numeric' : 'decimal') : undefined}
            {...common}
            placeholder={f.kind === 'text' ? f.placeholder : undefined}
            value={String(value[f.key])}
            onChange={(e) => onChange({ [f.key]: e.target.value })}
          />
          {f.kind === 'number' && f.unit ? <span className="unit">{f.unit}</span> : null}
        </span>
      );
  }
  return (
    <div className={`setting-row${problem ? ' invalid' : ''}${changed ? ' changed' : ''}`} data-testid={`${id}-row`} data-changed={changed}>
      <label htmlFor={id} className="setting-label">
        {f.label}
      </label>
      <div className="setting-control">
        {control}
        {problem ? (
          <p className="field-error" role="alert" id={errId} data-testid={`${id}-error`}>
            {f.label}: {problem}
          </p>
        ) : null}
        <p className="hint" id={helpId}>
          {f.help}
        </p>
      </div>
    </div>
  );
}
