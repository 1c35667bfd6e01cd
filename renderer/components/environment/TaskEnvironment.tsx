// A task's environment in its view: what setup does (plan lines, the parts of the
// repository's config the sandbox cannot honour) and the destinations its sandbox
// was refused, each with a way to allow it.
import { useState } from 'react';
import type { ErrorInfo, Task } from '../../../common/domain.js';
import type { EgressRefusal } from '../../../common/egress.js';
import { escapeName } from '../../../common/review-text.js';
import { useController } from '../../state/context.js';
import { toErrorInfo } from '../../state/store.js';
import { ErrorBox } from '../ErrorBox.js';
import { ruleCovers, ruleFromRefusal } from './egress-rules.js';
import { setupReason, SOURCE_WORDS } from './setup-text.js';

export function SetupDetails({ task }: { task: Task }) {
  const setup = task.setup;
  if (!setup) return null;
  const reason = setupReason(setup);
  return (
    <section className="environment" data-testid="setup-details" aria-labelledby={`setup-heading-${task.id}`}>
      <h3 id={`setup-heading-${task.id}`}>
        Environment <span className="muted">({SOURCE_WORDS[setup.source]})</span>
      </h3>
      <p className="muted" data-testid="setup-status" data-status={setup.status}>
        setup {setup.status}
        {reason ? ` · ${reason}` : ''}
        {setup.layer ? (setup.layer.reused ? ' · booted on a cached environment' : ' · saved as a cached environment') : ''}
      </p>
      {setup.lines.length ? (
        <ul className="plan-lines" data-testid="setup-lines">
          {setup.lines.map((l, i) => (
            <li key={i}>{escapeName(l)}</li>
          ))}
        </ul>
      ) : null}
      <Unsupported items={setup.unsupported} testId="setup-unsupported" />
    </section>
  );
}

/** Parts of the repository's config the sandbox cannot honour: named, as a warning. */
export function Unsupported({ items, testId }: { items: string[]; testId: string }) {
  if (!items.length) return null;
  return (
    <div className="unsupported" role="note" data-testid={testId}>
      <strong>Not supported in a sandbox ({items.length}):</strong>
      <ul>
        {items.map((u, i) => (
          <li key={i}>{escapeName(u)}</li>
        ))}
      </ul>
    </div>
  );
}

function refusalKey(r: EgressRefusal): string {
  return [r.scheme, r.host, r.port, r.method ?? '', r.path ?? '', r.step].join('\u0000');
}

export function EgressRefusals({ task }: { task: Task }) {
  const refusals = task.egress?.refusals ?? [];
  if (!refusals.length) return null;
  return (
    <section className="egress-refusals" data-testid="egress-refusals" aria-labelledby={`refusals-heading-${task.id}`}>
      <h3 id={`refusals-heading-${task.id}`}>Refused destinations ({refusals.length})</h3>
      <p className="hint">The sandbox tried to reach these and the proxy refused. Allow one only if the task needs it.</p>
      <table>
        <thead>
          <tr>
            <th>Time</th>
            <th>Destination</th>
            <th>Step</th>
            <th>Request</th>
            <th>Reason</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {refusals.map((r, i) => (
            <RefusalRow key={refusalKey(r)} task={task} refusal={r} index={i} />
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** The address a refusal names when the proxy refused it as private or reserved (net-guard's words), else undefined. */
export function reservedAddress(reason: string): string | undefined {
  return /(\S+) is a loopback, private, link-local/.exec(reason)?.[1];
}

function RefusalRow({ task, refusal: r, index }: { task: Task; refusal: EgressRefusal; index: number }) {
  const controller = useController();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ErrorInfo>();
  const [allowedAs, setAllowedAs] = useState<'task' | 'repository'>();
  const built = ruleFromRefusal(r);
  const dest = `${escapeName(r.host)}:${r.port}`;
  const allowed = allowedAs ?? ((task.egress?.allowed ?? []).some((rule) => ruleCovers(rule, r)) ? 'task' : undefined);

  const allow = async (scope: 'task' | 'repository') => {
    if (!('rule' in built)) return;
    setBusy(true);
    setError(undefined);
    try {
      await controller.allowEgress(task.id, built.rule, scope);
      setAllowedAs(scope);
    } catch (err) {
      setError(toErrorInfo(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <tr data-testid={`refusal-${index}`} data-allowed={allowed ?? 'no'}>
        <td title={r.time}>{r.time.slice(11, 19)}</td>
        <td>
          <code>{dest}</code> <span className="muted">{r.scheme}</span>
          {(r.count ?? 1) > 1 ? (
            <span className="muted" data-testid={`refusal-count-${index}`} title={`${r.count} requests to this destination were refused in this step`}>
              {' '}
              × {r.count}
            </span>
          ) : null}
        </td>
        <td>{escapeName(r.step)}</td>
        <td className="path">{r.method || r.path ? `${escapeName(r.method ?? '')} ${escapeName(r.path ?? '')}`.trim() : <span className="muted">tunnel</span>}</td>
        <td>{escapeName(r.reason)}</td>
        <td className="actions">
          {allowed ? (
            <span className="ok" data-testid={`refusal-allowed-${index}`}>
              {allowed === 'repository' ? 'allowed for this repository' : 'allowed for this task'}
            </span>
          ) : reservedAddress(r.reason) ? (
            // Allowing the host cannot help: the proxy refuses the address it resolved to. A rule must name that range.
            <span className="note" data-testid={`refusal-reserved-${index}`}>
              {escapeName(r.host)} resolved to {escapeName(reservedAddress(r.reason)!)}: a rule for it must list that address range (a LAN mirror, say).{' '}
              <button type="button" className="secondary small" data-testid={`refusal-open-rules-${index}`} onClick={() => controller.showView('settings')}>
                Add the range in Settings
              </button>
            </span>
          ) : 'rule' in built ? (
            <>
              <button
                type="button"
                className="secondary small"
                data-testid={`refusal-allow-task-${index}`}
                aria-label={`Allow ${dest} for this task`}
                disabled={busy}
                onClick={() => void allow('task')}
              >
                Allow for this task
              </button>
              <button
                type="button"
                className="secondary small"
                data-testid={`refusal-allow-repo-${index}`}
                aria-label={`Always allow ${dest} for this repository`}
                disabled={busy}
                onClick={() => void allow('repository')}
              >
                Always allow for this repository
              </button>
            </>
          ) : (
            <span className="note" data-testid={`refusal-unallowable-${index}`}>
              cannot be allowed: {escapeName(built.error)}
            </span>
          )}
        </td>
      </tr>
      {error ? (
        <tr>
          <td colSpan={6}>
            <ErrorBox testId={`refusal-error-${index}`} error={error} />
          </td>
        </tr>
      ) : null}
    </>
  );
}
