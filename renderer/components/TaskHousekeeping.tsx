// Archive (hide from the board, kept, restorable) and Remove (the task, its logs,
// review and sandbox; an approved branch stays in the repository) for a task
// whose work is over. Remove asks first.
import { useRef, useState } from 'react';
import type { Task } from '../../common/domain.js';
import { useController, useFactory } from '../state/context.js';
import { archiveTask, removeTask } from '../state/task-actions.js';

const ACTIVE = new Set(['creating', 'provisioning', 'seeding', 'running', 'pulling-back']);

export function TaskHousekeeping({ task }: { task: Task }) {
  const controller = useController();
  const busy = useFactory((s) => s.busy[task.id]);
  const [confirming, setConfirming] = useState(false);
  const removeButton = useRef<HTMLButtonElement>(null);
  if (ACTIVE.has(task.phase)) return null;
  return (
    <>
      <button
        type="button"
        className="secondary"
        data-testid={task.archivedAt ? 'restore-button' : 'archive-button'}
        disabled={!!busy}
        title={task.archivedAt ? 'Show this task on the board again' : 'Hide this task from the board; it stays under "Archived"'}
        onClick={() => void archiveTask(controller, task.id, !task.archivedAt)}
      >
        {task.archivedAt ? 'Restore' : 'Archive'}
      </button>
      <button ref={removeButton} type="button" className="secondary" data-testid="remove-button" aria-expanded={confirming} disabled={!!busy} onClick={() => setConfirming(true)}>
        Remove…
      </button>
      {confirming ? (
        <div
          className="remove-confirm"
          role="group"
          aria-labelledby={`remove-confirm-${task.id}`}
          data-testid="remove-confirm"
          onKeyDown={(e) => {
            if (e.key === 'Escape') {
              e.preventDefault();
              setConfirming(false);
              removeButton.current?.focus();
            }
          }}
        >
          <p id={`remove-confirm-${task.id}`}>
            <strong>Remove this task?</strong> Its record, terminal logs, review and sandbox are deleted.
            {task.decision?.kind === 'approved' ? ' The approved branch stays in your repository.' : ''}
          </p>
          <div className="actions">
            <button type="button" className="secondary" data-testid="remove-cancel-button" autoFocus onClick={() => setConfirming(false)}>
              Keep it
            </button>
            <button type="button" className="danger" data-testid="remove-confirmed-button" disabled={!!busy} onClick={() => void removeTask(controller, task.id)}>
              Remove task
            </button>
          </div>
        </div>
      ) : null}
    </>
  );
}
