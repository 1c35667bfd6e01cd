// The board's setup card: the step before the pipeline (packages, Node, the
// project's install), or nothing for a task made before environments existed.
import type { Task } from '../../../common/domain.js';
import { useController } from '../../state/context.js';
import { formatDuration } from '../format.js';
import { setupReason } from './setup-text.js';

export function SetupCell({ task, mark }: { task: Task; mark: (status: string) => string }) {
  const controller = useController();
  const setup = task.setup;
  if (!setup) return <td className="stage stage-none" data-testid={`setup-${task.id}`} />;
  const reason = setupReason(setup);
  return (
    <td className={`stage stage-${setup.status}`}>
      <button
        type="button"
        data-testid={`setup-${task.id}`}
        data-status={setup.status}
        title={reason ? `setup: ${reason}` : `setup: ${setup.status}`}
        aria-label={`setup: ${setup.status}${reason ? `, ${reason}` : ''}`}
        onClick={() => controller.open(task.id, setup.sessionId)}
      >
        <span className="mark" aria-hidden="true">
          {mark(setup.status)}
        </span>{' '}
        {setup.status}
        <span className="duration">{formatDuration(setup.durationMs)}</span>
        {setup.status === 'failed' && setup.exitCode !== undefined && setup.exitCode !== null ? <span className="exit">exit status {setup.exitCode}</span> : null}
        {reason ? (
          <span className="summary" data-testid={`setup-summary-${task.id}`}>
            {reason}
          </span>
        ) : null}
      </button>
    </td>
  );
}
