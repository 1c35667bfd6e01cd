// What Start will do, shown in the new-task form before the task is created: the
// environment lines, whether a cached environment skips setup, and the egress the
// repository asks for. Those requests come from the repository, so they are
// untrusted: each one is off unless the user allows it here.
import { useEffect, useRef } from 'react';
import type { TaskPreflight } from '../../../common/environment.js';
import { escapeName } from '../../../common/review-text.js';
import { Unsupported } from './TaskEnvironment.js';
import { SOURCE_WORDS } from './setup-text.js';
import type { EgressRule } from '../../../common/egress.js';

export interface EgressChoices {
  /** Per request (by index in egressRequests): allowed for this task. */
  allow: boolean[];
  remember: boolean;
}

/** Each request starts as not allowed, unless the user already allowed it for this repository. */
export function initialChoices(p: TaskPreflight): EgressChoices {
  return { allow: p.egressRequests.map((r) => r.allowedAlways), remember: false };
}

/** The rules Start sends: exactly the requests the user chose. */
export function chosenRules(p: TaskPreflight, c: EgressChoices): EgressRule[] {
  return p.egressRequests.filter((_, i) => c.allow[i]).map((r) => r.rule);
}

/** True while a request still waits for the user's decision (one that was not allowed before). */
export function needsDecision(p: TaskPreflight): boolean {
  return p.egressRequests.some((r) => !r.allowedAlways);
}

function ruleDetail(rule: EgressRule): string {
  const parts = [`${rule.scheme}://${escapeName(rule.host)}:${rule.port}`];
  if (rule.scheme === 'http') {
    parts.push(`${(rule.methods ?? ['GET', 'HEAD']).map(escapeName).join(', ')} ${(rule.pathPrefixes ?? ['/']).map((p) => `${escapeName(p)}…`).join(' ')}`);
  }
  parts.push(rule.steps ? `steps: ${rule.steps.join(', ')}` : 'every step');
  return parts.join(' · ');
}

export function PreflightPanel({
  preflight: p,
  choices,
  onChange,
  focusOnShow,
}: {
  preflight: TaskPreflight;
  choices: EgressChoices;
  onChange: (c: EgressChoices) => void;
  focusOnShow: boolean;
}) {
  const heading = useRef<HTMLHeadingElement>(null);
  // A decision is needed before Start goes on: take the keyboard there (and say it to a screen reader).
  useEffect(() => {
    if (focusOnShow) heading.current?.focus();
  }, [focusOnShow, p]);
  const set = (i: number, allow: boolean) => onChange({ ...choices, allow: choices.allow.map((a, j) => (j === i ? allow : a)) });
  return (
    <div className="preflight" data-testid="preflight" data-source={p.source}>
      <h3 ref={heading} tabIndex={-1} data-testid="preflight-heading">
        Environment <span className="muted">({SOURCE_WORDS[p.source]})</span>
      </h3>
      {p.cached ? (
        <p className="ok" data-testid="preflight-cached">
          setup will be skipped: cached environment
        </p>
      ) : null}
      {p.lines.length ? (
        <ul className="plan-lines" data-testid="preflight-lines">
          {p.lines.map((l, i) => (
            <li key={i}>{escapeName(l)}</li>
          ))}
        </ul>
      ) : null}
      <Unsupported items={p.unsupported} testId="preflight-unsupported" />
      {p.egressRequests.length ? (
        <div className="egress-requests" data-testid="egress-requests">
          <p className="note">
            The repository asks the sandbox to reach these. The request comes from the repository itself, so it is untrusted:
            nothing is allowed unless you choose it.
          </p>
          {p.egressRequests.map((r, i) => (
            <fieldset key={i} className="egress-request" data-testid={`egress-request-${i}`} data-allowed-always={r.allowedAlways}>
              <legend>
                {escapeName(r.rule.name)} <code>{ruleDetail(r.rule)}</code>
              </legend>
              <label className="checkbox">
                <input type="radio" name={`egress-${i}`} data-testid={`egress-deny-${i}`} checked={!choices.allow[i]} onChange={() => set(i, false)} />
                Not allowed
              </label>
              <label className="checkbox">
                <input type="radio" name={`egress-${i}`} data-testid={`egress-allow-${i}`} checked={!!choices.allow[i]} onChange={() => set(i, true)} />
                {r.allowedAlways ? 'Allowed (you allowed it always for this repository)' : 'Allow for this task'}
              </label>
            </fieldset>
          ))}
          <label className="checkbox">
            <input
              type="checkbox"
              data-testid="egress-remember"
              checked={choices.remember}
              onChange={(e) => onChange({ ...choices, remember: e.target.checked })}
            />
            Remember for this repository
          </label>
        </div>
      ) : null}
    </div>
  );
}
