import { useEffect } from 'react';
import type { Task } from '../../common/domain.js';
import { useController, useFactory } from '../state/context.js';

function lineClass(line: string): string {
  if (line.startsWith('+++') || line.startsWith('---')) return 'diff-file';
  if (line.startsWith('+')) return 'diff-add';
  if (line.startsWith('-')) return 'diff-del';
  if (line.startsWith('@@')) return 'diff-hunk';
  if (line.startsWith('diff ')) return 'diff-header';
  return 'diff-ctx';
}

/** The diff that came back, as escaped text, with Approve and Reject. */
export function ReviewPanel({ task }: { task: Task }) {
  const controller = useController();
  const review = useFactory((s) => s.reviews[task.id]);
  const busy = useFactory((s) => s.busy[task.id]);
  const inReview = task.phase === 'review';

  useEffect(() => {
    if ((inReview || task.decision) && !review) void controller.loadReview(task.id);
  }, [controller, task.id, inReview, task.decision, review]);

  if (!review) {
    return inReview ? (
      <section className="review" data-testid="review-panel">
        <p className="hint">Loading the result…</p>
      </section>
    ) : null;
  }
  return (
    <section className="review" data-testid="review-panel">
      <h3>
        Result: {review.files.length} file{review.files.length === 1 ? '' : 's'},{' '}
        <span className="diff-add">+{review.added}</span> <span className="diff-del">−{review.removed}</span>
      </h3>
      <p className="muted">
        branch {review.branch} · {review.baseCommit.slice(0, 10)}..{review.headCommit.slice(0, 10)} · bundle {review.bundleBytes} bytes
      </p>
      <ul className="review-files" data-testid="review-files">
        {review.files.map((f) => (
          <li key={f.path} data-testid="review-file" data-path={f.path}>
            <span className={`file-status file-${f.status}`}>{f.status}</span> <code>{f.oldPath ? `${f.oldPath} → ${f.path}` : f.path}</code>{' '}
            {f.binary ? <span className="muted">binary</span> : (
              <>
                <span className="diff-add">+{f.added}</span> <span className="diff-del">−{f.removed}</span>
              </>
            )}
          </li>
        ))}
      </ul>
      <ul className="checks" data-testid="review-checks">
        {review.checks.map((c) => (
          <li key={c.name} className={c.ok ? 'ok' : 'bad'} data-testid="review-check" data-ok={String(c.ok)}>
            {c.ok ? '✓' : '✗'} {c.name}: {c.message}
          </li>
        ))}
      </ul>
      <pre className="patch" data-testid="review-patch">
        {review.patch.split('\n').map((line, i) => (
          <div key={i} className={lineClass(line)}>
            {line || ' '}
          </div>
        ))}
      </pre>
      {review.patchTruncated ? <p className="note">The patch was cut at its size limit.</p> : null}
      {task.decision ? (
        <p className="decision" data-testid="decision" data-kind={task.decision.kind}>
          {task.decision.kind === 'approved'
            ? `Approved: branch ${task.decision.branch ?? task.branch} is in your repository${task.decision.commit ? ` at ${task.decision.commit.slice(0, 10)}` : ''}.`
            : 'Rejected: the result was discarded.'}
        </p>
      ) : inReview ? (
        <div className="actions">
          <button type="button" data-testid="approve-button" disabled={!!busy} onClick={() => void controller.approve(task.id)}>
            {busy === 'approve' ? 'Approving…' : 'Approve'}
          </button>
          <button type="button" className="secondary" data-testid="reject-button" disabled={!!busy} onClick={() => void controller.reject(task.id)}>
            Reject
          </button>
        </div>
      ) : null}
    </section>
  );
}
