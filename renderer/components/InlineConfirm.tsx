// A confirm step in the page (not a modal): what will happen, then two
// buttons. Esc cancels. The caller says which button has the focus: Cancel
// where a double click or a stray Enter must not do it (Destroy), the confirm
// button where the user asked by a shortcut and Enter confirms (Approve, Reject).
import type { ReactNode } from 'react';

export interface InlineConfirmProps {
  id: string;
  testId: string;
  question: ReactNode;
  confirmLabel: string;
  cancelLabel: string;
  confirmTestId: string;
  cancelTestId: string;
  focus: 'confirm' | 'cancel';
  /** The confirm button's and the box's look: danger (red) for what cannot be undone, primary for a decision like Approve. */
  tone?: 'danger' | 'primary';
  busy?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}

export function InlineConfirm(p: InlineConfirmProps) {
  return (
    <div
      className={`inline-confirm tone-${p.tone ?? 'danger'}`}
      role="group"
      aria-labelledby={p.id}
      data-testid={p.testId}
      onKeyDown={(e) => {
        if (e.key === 'Escape') {
          e.preventDefault();
          e.stopPropagation();
          p.onCancel();
        }
      }}
    >
      <p id={p.id}>{p.question}</p>
      <div className="actions">
        {/* data-ring: the focused button shows its ring even when the step was asked for after a mouse click (Alt+A). */}
        <button type="button" className="secondary" data-testid={p.cancelTestId} autoFocus={p.focus === 'cancel'} data-ring={p.focus === 'cancel' ? '' : undefined} onClick={p.onCancel}>
          {p.cancelLabel}
        </button>
        <button
          type="button"
          className={p.tone === 'primary' ? undefined : 'danger'}
          data-testid={p.confirmTestId}
          autoFocus={p.focus === 'confirm'}
          data-ring={p.focus === 'confirm' ? '' : undefined}
          disabled={p.busy}
          onClick={p.onConfirm}
        >
          {p.confirmLabel}
        </button>
      </div>
    </div>
  );
}
