// The ways of a task run N ways, side by side (issue 32): a column per way with
// its state, stages and durations, test counts, review verdict, change size,
// tokens and cost, leak check and failure. Keyboard: one Tab stop on the way
// headings, Left/Right (Home/End) move between ways, Enter opens the way (its
// review and diff below); each way in review has its Approve, and Reject all
// ends them all, each after a confirm step.
import { useEffect, useRef, useState, type KeyboardEvent, type ReactNode } from 'react';
import type { ErrorInfo, Task } from '../../../common/domain.js';
import type { FanoutComparison, WayComparison } from '../../../common/fanout.js';
import { useController, useFactory } from '../../state/context.js';
import { toErrorInfo } from '../../state/store.js';
import { ErrorBox } from '../ErrorBox.js';
import { formatCost, formatDuration, formatTokens } from '../format.js';
import { InlineConfirm } from '../InlineConfirm.js';
import { WaysDiff } from './WaysDiff.js';
import { StatusIcon } from '../icons.js';


type Decision = { kind: 'approve'; way: number } | { kind: 'reject-all' };

export function FanoutCompare({ task }: { task: Task }) {
  const controller = useController();
  const group = task.fanout!.group;
  // Any change of a way (phase, stage, sandbox) asks for the comparison again.
  const changed = useFactory((s) =>
    Object.values(s.tasks)
      .filter((t) => t.fanout?.group === group)
      .map((t) => `${t.id}:${t.phase}:${t.sandbox.status}:${t.setup?.status ?? ''}:${t.stages.map((x) => x.status).join(',')}`)
      .sort()
      .join('|'),
  );
  const [comparison, setComparison] = useState<FanoutComparison>();
  const [error, setError] = useState<ErrorInfo>();
  const [asking, setAsking] = useState<Decision>();
  const [busy, setBusy] = useState(false);
  const [focused, setFocused] = useState(task.fanout!.way);
  const heads = useRef(new Map<number, HTMLButtonElement>());

  useEffect(() => {
    let live = true;
    controller.bridge.call('fanout.compare', { group }).then(
      (c) => live && setComparison(c),
      (err: unknown) => live && setError(toErrorInfo(err)),
    );
    return () => {
      live = false;
    };
  }, [controller, group, changed]);

  const decide = async (d: Decision) => {
    setBusy(true);
    setError(undefined);
    try {
      setComparison(d.kind === 'approve' ? await controller.bridge.call('fanout.approve', { group, way: d.way }) : await controller.bridge.call('fanout.rejectAll', { group }));
      setAsking(undefined);
    } catch (err) {
      setError(toErrorInfo(err));
    } finally {
      setBusy(false);
    }
  };

  if (!comparison) return error ? <ErrorBox testId="fanout-error" error={error} /> : <p className="hint">Comparing the ways…</p>;
  const ways = comparison.ways;
  const decided = ways.some((w) => w.state === 'approved');
  const onKeyDown = (e: KeyboardEvent<HTMLTableRowElement>) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const i = ways.findIndex((w) => w.way === focused);
    const to = e.key === 'ArrowRight' ? i + 1 : e.key === 'ArrowLeft' ? i - 1 : e.key === 'Home' ? 0 : e.key === 'End' ? ways.length - 1 : undefined;
    if (to === undefined) return;
    e.preventDefault();
    const next = ways[Math.max(0, Math.min(ways.length - 1, to))]!;
    setFocused(next.way);
    heads.current.get(next.way)?.focus();
  };

  return (
    <section className="fanout" data-testid="fanout-compare" data-group={group} aria-labelledby="fanout-heading">
      <h3 id="fanout-heading">
        {ways.length} ways of this task
      </h3>
      <p className="sr-only" id="fanout-keys">
        Left and right arrows move between ways; Enter opens a way, its review and diff.
      </p>
      <div className="fanout-scroll">
        <table className="fanout-table" aria-describedby="fanout-keys">
          <thead>
            <tr onKeyDown={onKeyDown}>
              <th scope="col">
                <span className="sr-only">What</span>
              </th>
              {ways.map((w) => (
                <th key={w.way} scope="col" aria-current={w.taskId === task.id ? 'true' : undefined}>
                  <button
                    type="button"
                    className="link"
                    data-testid={`fanout-way-${w.way}`}
                    data-state={w.state}
                    tabIndex={w.way === focused ? 0 : -1}
                    ref={(el) => {
                      if (el) heads.current.set(w.way, el);
                      else heads.current.delete(w.way);
                    }}
                    onFocus={() => setFocused(w.way)}
                    onClick={() => controller.open(w.taskId)}
                  >
                    Way {w.way}
                    {w.preparation ? ' (prepared)' : ''}
                  </button>
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            <Row label="State" ways={ways} cell={(w) => w.state} id="state" />
            <Row label="Agent" ways={ways} cell={(w) => w.agent ?? 'default'} id="agent" />
            <Row
              label="Stages"
              ways={ways}
              id="stages"
              cell={(w) => (
                <ul className="fanout-stages">
                  {w.stages.map((s) => (
                    <li key={s.name}>
                      <StatusIcon status={s.status} /> {s.name}: {s.status}
                      {s.durationMs !== undefined ? `, ${formatDuration(s.durationMs)}` : ''}
                    </li>
                  ))}
                </ul>
              )}
            />
            <Row label="Tests" ways={ways} id="tests" cell={(w) => (w.tests ? `${w.tests.passed} passed, ${w.tests.failed} failed` : 'no counts')} />
            <Row label="Review" ways={ways} id="review" cell={(w) => (w.reviewVerdict ? `${w.reviewVerdict.status}${w.reviewVerdict.summary ? `: ${w.reviewVerdict.summary}` : ''}` : 'not run')} />
            <Row label="Change" ways={ways} id="change" cell={(w) => (w.change ? `+${w.change.added} −${w.change.removed}, ${w.change.files} file${w.change.files === 1 ? '' : 's'}` : '—')} />
            <Row label="Tokens, cost" ways={ways} id="usage" cell={(w) => [formatTokens(w.tokens), formatCost(w.costUsd)].filter(Boolean).join(' · ') || '—'} />
            <Row label="Leak check" ways={ways} id="leak" cell={(w) => w.leakCheck ?? 'not run'} />
            <Row label="Failure" ways={ways} id="error" cell={(w) => (w.error ? `${w.error.name}: ${w.error.message}` : '—')} />
            <tr>
              <th scope="row">Decide</th>
              {ways.map((w) => (
                <td key={w.way}>
                  {w.state === 'review' && !decided ? (
                    <button type="button" className="primary small" data-testid={`fanout-approve-${w.way}`} disabled={busy} onClick={() => setAsking({ kind: 'approve', way: w.way })}>
                      Approve way {w.way}
                    </button>
                  ) : null}
                </td>
              ))}
            </tr>
          </tbody>
        </table>
      </div>
      {/* Remounted when the ways in review change, so its choice starts from them. */}
      {!decided ? <WaysDiff key={ways.filter((w) => w.state === 'review').map((w) => w.way).join(',')} group={group} ways={ways} /> : null}
      {!decided && ways.some((w) => w.state !== 'rejected' && w.state !== 'cancelled') ? (
        <button type="button" className="danger small" data-testid="fanout-reject-all" disabled={busy} onClick={() => setAsking({ kind: 'reject-all' })}>
          Reject all
        </button>
      ) : null}
      {asking ? (
        <InlineConfirm
          id="fanout-confirm"
          testId="fanout-confirm"
          question={
            asking.kind === 'approve' ? (
              <>
                <strong>Approve way {asking.way}?</strong> Its change lands as its branch; every other way is rejected or stopped, and its sandbox destroyed.
              </>
            ) : (
              <>
                <strong>Reject all ways?</strong> Ways in review are rejected, running ones stopped, and their sandboxes destroyed.
              </>
            )
          }
          focus="confirm"
          tone={asking.kind === 'approve' ? 'primary' : 'danger'}
          confirmLabel={asking.kind === 'approve' ? `Approve way ${asking.way}` : 'Reject all'}
          confirmTestId="fanout-confirmed"
          cancelLabel="Not now"
          cancelTestId="fanout-confirm-cancel"
          busy={busy}
          onCancel={() => setAsking(undefined)}
          onConfirm={() => void decide(asking)}
        />
      ) : null}
      {error ? <ErrorBox testId="fanout-error" error={error} /> : null}
    </section>
  );
}

function Row({ label, ways, cell, id }: { label: string; ways: WayComparison[]; cell: (w: WayComparison) => ReactNode; id: string }) {
  return (
    <tr>
      <th scope="row">{label}</th>
      {ways.map((w) => (
        <td key={w.way} data-testid={`fanout-${id}-${w.way}`}>
          {cell(w)}
        </td>
      ))}
    </tr>
  );
}
