// The board's setup card: the step before the pipeline (packages, Node, the
// project's install), or nothing for a task made before environments existed.
import type { Task } from '../../../common/domain.js';
import { useController } from '../../state/context.js';
import { formatDuration } from '../format.js';
import { shortDuration } from '../short-duration.js';
import { setupReason } from './setup-text.js';
import { StatusIcon } from '../icons.js';

export function SetupCell({ task, cell }: { task: Task; cell: Record<string, string | number> }) {
  const controller = useController();
  const setup = task.setup;
  if (!setup) return <td className="stage stage-none" data-testid={`setup-${task.id}`} />;
  const reason = setupReason(setup);
  const exit = setup.status === 'failed' && setup.exitCode !== undefined && setup.exitCode !== null ? `exit status ${setup.exitCode}` : '';
  return (
    <td className={`stage stage-${setup.status}`}>
      <button
        type="button"
        data-testid={`setup-${task.id}`}
        data-status={setup.status}
        title={['setup: ' + setup.status, formatDuration(setup.durationMs), exit, reason].filter(Boolean).join(' · ')}
        onClick={() => controller.open(task.id, setup.sessionId)}
        {...cell}
      >
        <span className="mark">
          <StatusIcon status={setup.status} />
        </span>
        <span className="duration">{shortDuration(setup.durationMs)}</span>
        {/* Its words for a screen reader and the tooltip; no aria-label, so the name holds what is seen. */}
        <span className="sr-only">
          setup: {setup.status}
          {exit ? <>, {exit}</> : null}
          {reason ? (
            <>
              , <span data-testid={`setup-summary-${task.id}`}>{reason}</span>
            </>
          ) : null}
        </span>
      </button>
    </td>
  );
}
