// The default egress rules every sandbox starts with (package registries, Debian
// mirrors), per pipeline step: listed, edited, added, removed. They are part of
// the Settings form and saved with its one Save (settings.set); a rule the host
// refuses is named in the error.
import { EgressRule, STEP_NAMES, type StepName } from '../../../common/egress.js';
import type { ErrorInfo } from '../../../common/domain.js';
import { ErrorBox } from '../ErrorBox.js';

export interface RuleDraft {
  name: string;
  host: string;
  port: string;
  scheme: 'https' | 'http';
  methods: string;
  pathPrefixes: string;
  /** Private address ranges the host may resolve to (a LAN mirror). */
  addresses: string;
  steps: StepName[];
}

const list = (s: string) => s.split(/[\s,]+/).filter(Boolean);

export function toDraft(r: EgressRule): RuleDraft {
  return {
    name: r.name, host: r.host, port: String(r.port), scheme: r.scheme,
    methods: (r.methods ?? []).join(', '), pathPrefixes: (r.pathPrefixes ?? []).join(', '),
    addresses: (r.addresses ?? []).join(', '),
    steps: r.steps ? [...r.steps] : [...STEP_NAMES],
  };
}

/** The rule a row stands for, or why it is not one, naming the rule and the field. */
export function fromDraft(d: RuleDraft, index: number): { rule: EgressRule } | { error: string } {
  const label = `rule ${index + 1}${d.name.trim() ? ` ("${d.name.trim()}")` : ''}`;
  if (!d.steps.length) return { error: `${label}: steps: choose at least one step` };
  const candidate = {
    name: d.name.trim(),
    host: d.host.trim().toLowerCase(),
    port: /^\d+$/.test(d.port.trim()) ? Number(d.port.trim()) : NaN,
    scheme: d.scheme,
    ...(d.scheme === 'http' && list(d.methods).length ? { methods: list(d.methods).map((m) => m.toUpperCase()) } : {}),
    ...(d.scheme === 'http' && list(d.pathPrefixes).length ? { pathPrefixes: list(d.pathPrefixes) } : {}),
    ...(list(d.addresses).length ? { addresses: list(d.addresses) } : {}),
    // Every step ticked is the same as no list: the rule applies in every step.
    ...(d.steps.length === STEP_NAMES.length ? {} : { steps: STEP_NAMES.filter((s) => d.steps.includes(s)) }),
  };
  const parsed = EgressRule.safeParse(candidate);
  if (!parsed.success) return { error: `${label}: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'rule'}: ${i.message}`).join('; ')}` };
  return { rule: parsed.data };
}

const EMPTY: RuleDraft = { name: '', host: '', port: '443', scheme: 'https', methods: '', pathPrefixes: '', addresses: '', steps: ['setup', 'build'] };

/** An error about the egress rules: a refusal naming them, or a row that is not a rule. */
export const RULES_ERROR = /^(?:egressRules\b|rule \d+)/;

/** The rows of the default egress rules, as the Settings form holds them. */
export function EgressRulesFields({ rows, onChange, error }: { rows: RuleDraft[]; onChange: (rows: RuleDraft[]) => void; error?: ErrorInfo }) {
  const change = (i: number, patch: Partial<RuleDraft>) => onChange(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  return (
    <section className="egress-rules" data-testid="egress-rules-form" aria-labelledby="egress-rules-heading">
      <h3 id="egress-rules-heading">Default egress rules</h3>
      <p className="hint">
        Where every sandbox may go without a credential, and in which steps. HTTPS rules allow a tunnel to the host and
        port; plain HTTP rules also check the method and the path.
      </p>
      {rows.length === 0 ? (
        <p className="hint" data-testid="egress-rules-empty">
          No default rules: sandboxes reach only the model APIs and git through the proxy.
        </p>
      ) : null}
      {rows.map((r, i) => {
        const id = `egress-rule-${i}`;
        const named = !!error && !!r.name.trim() && error.message.includes(r.name.trim());
        return (
          <fieldset key={i} className={`egress-rule${named ? ' invalid' : ''}`} data-testid={id} aria-invalid={named || undefined}>
            <legend>Rule {i + 1}{r.name ? `: ${r.name}` : ''}</legend>
            <div className="form-grid">
              <label>
                Name
                <input type="text" data-testid={`${id}-name`} value={r.name} onChange={(e) => change(i, { name: e.target.value })} />
              </label>
              <label>
                Host
                <input type="text" data-testid={`${id}-host`} placeholder="registry.npmjs.org or *.example.com" value={r.host} onChange={(e) => change(i, { host: e.target.value })} />
              </label>
              <label>
                Port
                <input type="text" inputMode="numeric" data-testid={`${id}-port`} value={r.port} onChange={(e) => change(i, { port: e.target.value })} />
              </label>
              <label>
                Scheme
                <select data-testid={`${id}-scheme`} value={r.scheme} onChange={(e) => change(i, { scheme: e.target.value as RuleDraft['scheme'] })}>
                  <option value="https">https (tunnel)</option>
                  <option value="http">http (method and path checked)</option>
                </select>
              </label>
              {r.scheme === 'http' ? (
                <>
                  <label>
                    Methods (default GET, HEAD)
                    <input type="text" data-testid={`${id}-methods`} value={r.methods} onChange={(e) => change(i, { methods: e.target.value })} />
                  </label>
                  <label>
                    Path prefixes (default /)
                    <input type="text" data-testid={`${id}-paths`} value={r.pathPrefixes} onChange={(e) => change(i, { pathPrefixes: e.target.value })} />
                  </label>
                </>
              ) : null}
              <label>
                Private address ranges (a mirror on your network; optional)
                <input type="text" data-testid={`${id}-addresses`} placeholder="e.g. 10.20.0.0/16" value={r.addresses} onChange={(e) => change(i, { addresses: e.target.value })} />
              </label>
            </div>
            <fieldset className="steps" data-testid={`${id}-steps`}>
              <legend>Steps</legend>
              {STEP_NAMES.map((s) => (
                <label key={s} className="checkbox">
                  <input
                    type="checkbox"
                    data-testid={`${id}-step-${s}`}
                    checked={r.steps.includes(s)}
                    onChange={(e) => change(i, { steps: e.target.checked ? [...r.steps, s] : r.steps.filter((x) => x !== s) })}
                  />
                  {s}
                </label>
              ))}
            </fieldset>
            <button type="button" className="danger small" data-testid={`${id}-remove`} aria-label={`Remove rule ${i + 1}${r.name ? ` (${r.name})` : ''}`} onClick={() => onChange(rows.filter((_, j) => j !== i))}>
              Remove
            </button>
          </fieldset>
        );
      })}
      <div className="actions">
        <button type="button" className="secondary" data-testid="egress-rule-add" onClick={() => onChange([...rows, { ...EMPTY }])}>
          Add a rule
        </button>
      </div>
      {error ? <ErrorBox testId="egress-rules-error" error={error} /> : null}
    </section>
  );
}
