// The board's filters (state, repository; kept across reloads) and the list of
// archived tasks, each restorable.
import type { Task } from '../../common/domain.js';
import { useController } from '../state/context.js';
import { STATE_FILTERS, type BoardFilter, type StateFilter } from '../state/board-filter.js';
import { archiveTask } from '../state/task-actions.js';

const STATE_WORDS: Record<StateFilter, string> = { all: 'All states', running: 'Running', review: 'In review', done: 'Done', failed: 'Failed' };

export function BoardFilterBar({ filter, repos, onChange, shown, total }: { filter: BoardFilter; repos: string[]; onChange: (f: BoardFilter) => void; shown: number; total: number }) {
  // A repository remembered by the filter but no longer on the board stays choosable, so the filter never hides itself.
  const choices = filter.repo && !repos.includes(filter.repo) ? [...repos, filter.repo] : repos;
  return (
    <div className="board-filters" role="group" aria-label="Filter the board" data-testid="board-filters">
      <label>
        State
        <select data-testid="filter-state" value={filter.state} onChange={(e) => onChange({ ...filter, state: e.target.value as StateFilter })}>
          {STATE_FILTERS.map((s) => (
            <option key={s} value={s}>
              {STATE_WORDS[s]}
            </option>
          ))}
        </select>
      </label>
      <label>
        Repository
        <select data-testid="filter-repo" value={filter.repo} onChange={(e) => onChange({ ...filter, repo: e.target.value })}>
          <option value="">All repositories</option>
          {choices.map((r) => (
            <option key={r} value={r} title={r}>
              {r.split('/').filter(Boolean).pop() ?? r} ({r})
            </option>
          ))}
        </select>
      </label>
      <span className="muted" data-testid="filter-count" aria-live="polite">
        {shown === total ? `${total} task${total === 1 ? '' : 's'}` : `${shown} of ${total} shown`}
      </span>
    </div>
  );
}

export function ArchivedTasks({ tasks }: { tasks: Task[] }) {
  const controller = useController();
  if (!tasks.length) return null;
  return (
    <details className="archived" data-testid="archived-tasks">
      <summary>Archived ({tasks.length})</summary>
      <ul>
        {tasks.map((t) => (
          <li key={t.id} data-testid={`archived-${t.id}`}>
            <button type="button" className="link" title={t.title} onClick={() => controller.open(t.id)}>
              {t.title}
            </button>{' '}
            <span className="muted">{t.phase}</span>{' '}
            <button type="button" className="secondary" data-testid={`restore-${t.id}`} onClick={() => void archiveTask(controller, t.id, false)}>
              Restore
            </button>
          </li>
        ))}
      </ul>
    </details>
  );
}
