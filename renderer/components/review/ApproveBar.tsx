// Approve and Reject. When the review could not show everything (or found
// secrets), Approve is a deliberate second step: the first click lists what the
// user has not seen, and only a differently worded button sends the approval,
// naming exactly those confirmations. Cancel goes back.
import { useEffect, useRef, useState } from 'react';
import type { Task } from '../../../common/domain.js';
import { escapeContentLine } from '../../../common/review-text.js';
import type { ReviewConfirmation, ReviewConfirmationKind } from '../../../common/review.js';
import { useController, useFactory } from '../../state/context.js';
import { useFocusRequest } from '../../state/focus.js';
import { keysOf } from '../../keyboard/shortcuts.js';
import { InlineConfirm } from '../InlineConfirm.js';
import { NextSteps } from '../NextSteps.js';
import { ActionIcon } from '../icons.js';

const KIND_WORDS: Record<ReviewConfirmationKind, string> = {
  unshown: 'Not shown',
  secrets: 'Possible secrets',
};

export function ApproveBar({ task, confirmations }: { task: Task; confirmations: ReviewConfirmation[] }) {
  const controller = useController();
  const busy = useFactory((s) => s.busy[task.id]);
  const error = useFactory((s) => s.actionErrors[task.id]);
  const [confirming, setConfirming] = useState(false);
  const decision = useRef<HTMLParagraphElement>(null);
  const approveButton = useRef<HTMLButtonElement>(null);
  const rejectButton = useRef<HTMLButtonElement>(null);
  useFocusRequest('decision', task.id, decision);
  // Approve or Reject asked for by a shortcut: confirmed here first (a click on the button needs no second step).
  const ask = useFactory((s) => (s.decisionAsk?.taskId === task.id ? s.decisionAsk : undefined));
  const needsSeen = confirmations.length > 0;
  useEffect(() => {
    // Approving what was not shown keeps its own, stronger second step.
    if (ask?.kind === 'approve' && needsSeen) {
      setConfirming(true);
      controller.store.setState({ decisionAsk: undefined });
    }
  }, [ask, needsSeen, controller]);
  // The bar's buttons are hidden while the question is asked: the one to go back to takes the focus once shown again.
  const [backTo, setBackTo] = useState<'approve' | 'reject'>();
  useEffect(() => {
    if (!backTo || ask) return;
    (backTo === 'approve' ? approveButton : rejectButton).current?.focus();
    setBackTo(undefined);
  }, [backTo, ask]);
  const endAsk = (back: 'approve' | 'reject') => {
    controller.store.setState({ decisionAsk: undefined });
    setBackTo(back);
  };

  if (task.decision) {
    return (
      <>
        <p className="decision" data-testid="decision" data-kind={task.decision.kind} ref={decision} tabIndex={-1}>
          {task.decision.kind === 'approved'
            ? `Approved: branch ${task.decision.branch ?? task.branch} is in your repository${task.decision.commit ? ` at ${task.decision.commit.slice(0, 10)}` : ''}.`
            : 'Rejected: the result was discarded.'}
        </p>
        {task.decision.kind === 'approved' && task.phase === 'approved' ? <NextSteps task={task} /> : null}
      </>
    );
  }
  if (task.phase !== 'review') return null;

  const needs = confirmations;
  const kinds = [...new Set(needs.map((c) => c.kind))];
  const refused =
    error?.name === 'ApproveNeedsConfirmation' ? (
      <p className="note" role="alert" data-testid="approve-needs-confirmation">
        Not approved: {escapeContentLine(error.message)}. The review was loaded again; check what it lists now.
      </p>
    ) : null;

  if (confirming && needs.length) {
    return (
      <div className="approve-confirm" role="group" aria-labelledby={`approve-confirm-${task.id}`} data-testid="approve-confirm">
        {refused}
        <p id={`approve-confirm-${task.id}`}>
          <strong>You are about to approve what this review did not show you, or what it warned about:</strong>
        </p>
        <ul>
          {needs.map((c, i) => (
            <li key={i} data-testid="approve-confirmation" data-kind={c.kind}>
              <strong>{KIND_WORDS[c.kind]}:</strong> {escapeContentLine(c.message)}
            </li>
          ))}
        </ul>
        <div className="actions">
          {/* Cancel first, where Approve was, so a double click cannot approve. */}
          <button type="button" className="secondary" data-testid="approve-cancel-button" autoFocus onClick={() => setConfirming(false)}>
            Cancel
          </button>
          <button
            type="button"
            className="danger"
            data-testid="approve-confirmed-button"
            disabled={!!busy}
            onClick={() => void controller.approve(task.id, kinds)}
          >
            {busy === 'approve' ? 'Approving…' : 'Approve without seeing these'}
          </button>
        </div>
      </div>
    );
  }
  const asking = ask && !(ask.kind === 'approve' && needs.length) ? ask.kind : undefined;
  return (
    <>
      {refused}
      <div className="actions approve-bar">
        {/* In the sticky bar, so the bar never covers the question. */}
        {asking ? (
          <InlineConfirm
            id={`decision-confirm-${task.id}`}
            testId={`${asking}-confirm`}
            question={
              asking === 'approve' ? (
                <>
                  <strong>Approve this change?</strong> Branch <code>{task.branch}</code> is created in your repository with one commit holding the tree shown; your
                  checkout is not touched.
                </>
              ) : (
                <>
                  <strong>Reject this change?</strong> What the sandbox returned is discarded.
                </>
              )
            }
            // Asked for by a shortcut: the user meant it, Enter confirms and Esc goes back.
            focus="confirm"
            tone={asking === 'approve' ? 'primary' : 'danger'}
            confirmLabel={asking === 'approve' ? 'Approve' : 'Reject'}
            confirmTestId={`${asking}-confirmed-button`}
            cancelLabel="Cancel"
            cancelTestId={`${asking}-cancel-button`}
            busy={!!busy}
            onCancel={() => endAsk(asking)}
            onConfirm={() => {
              controller.store.setState({ decisionAsk: undefined });
              void (asking === 'approve' ? controller.approve(task.id) : controller.reject(task.id));
            }}
          />
        ) : null}
        {/* While the question is asked, its own buttons are the decision: Approve is not shown twice. */}
        <button
          ref={approveButton}
          type="button"
          hidden={!!asking}
          data-testid="approve-button"
          aria-keyshortcuts={keysOf('approve')}
          title={`Approve (${keysOf('approve')})`}
          disabled={!!busy}
          onClick={() => (needs.length ? setConfirming(true) : void controller.approve(task.id))}
        >
          <ActionIcon action="approve" />
          {busy === 'approve' ? 'Approving…' : needs.length ? 'Approve…' : 'Approve'}
        </button>
        <button
          ref={rejectButton}
          type="button"
          hidden={!!asking}
          className="secondary"
          data-testid="reject-button"
          aria-keyshortcuts={keysOf('reject')}
          title={`Reject (${keysOf('reject')})`}
          disabled={!!busy}
          onClick={() => void controller.reject(task.id)}
        >
          <ActionIcon action="reject" />
          Reject
        </button>
      </div>
    </>
  );
}
