import { useState } from 'react';
import { STAGE_NAMES, type StageResult, type Task } from '../../common/domain.js';
import { loadBoardFilter, matchesFilter, saveBoardFilter, type BoardFilter } from '../state/board-filter.js';
import { useController, useFactory } from '../state/context.js';
import { ArchivedTasks, BoardFilterBar } from './BoardFilters.js';
import { keptUntilTitle, sandboxWords } from './sandbox-words.js';
import { taskOrder } from '../state/store.js';
import { SetupCell } from './environment/SetupCell.js';
import { formatCost, formatDuration, formatTokens } from './format.js';

const STATUS_MARK: Record<string, string> = {
  pending: '○',
  running: '◐',
  passed: '✓',
  failed: '✗',
  skipped: '–',
  cancelled: '⊘',
  interrupted: '↯',
};

export function StageBoard() {
  const tasks = useFactory((s) => s.tasks);
  const selected = useFactory((s) => s.selectedTaskId);
  const [filter, setFilterState] = useState<BoardFilter>(loadBoardFilter);
  const setFilter = (f: BoardFilter) => {
    setFilterState(f);
    saveBoardFilter(f);
  };
  const all = taskOrder(tasks);
  const onBoard = all.filter((t) => !t.archivedAt);
  const ordered = onBoard.filter((t) => matchesFilter(t, filter));
  const repos = [...new Set(all.map((t) => t.repoPath).filter(Boolean))].sort();
  return (
    <section className="board" data-testid="stage-board" data-region="board" aria-labelledby="board-heading">
      <h2 id="board-heading">Tasks</h2>
      {all.length > 0 ? <BoardFilterBar filter={filter} repos={repos} onChange={setFilter} shown={ordered.length} total={onBoard.length} /> : null}
      {ordered.length === 0 ? (
        <p className="hint" data-testid="board-empty">
          {onBoard.length ? 'No task matches the filter.' : all.length ? 'Every task is archived.' : 'No tasks yet. Start one above.'}
        </p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Task</th>
              <th>setup</th>
              {STAGE_NAMES.map((s) => (
                <th key={s}>{s}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {ordered.map((t) => (
              <TaskRow key={t.id} task={t} selected={t.id === selected} />
            ))}
          </tbody>
        </table>
      )}
      <ArchivedTasks tasks={all.filter((t) => t.archivedAt)} />
    </section>
  );
}

function TaskRow({ task, selected }: { task: Task; selected: boolean }) {
  const controller = useController();
  return (
    <tr className={selected ? 'selected' : ''} data-testid={`task-row-${task.id}`} data-phase={task.phase} data-region-focus={selected ? '' : undefined}>
      <td className="task-cell">
        <button type="button" className="link" title={task.title} data-testid={`task-select-${task.id}`} onClick={() => controller.open(task.id)}>
          {task.title}
        </button>
        <div className="task-meta">
          <span className={`phase phase-${task.phase}`} data-testid={`task-phase-${task.id}`}>
            {task.phase}
          </span>{' '}
          <span className="muted" data-testid={`task-sandbox-${task.id}`} title={keptUntilTitle(task.sandbox)}>
            {sandboxWords(task.sandbox)}
          </span>
          {task.agent ? (
            <>
              {' '}
              <span className="muted" data-testid={`task-agent-${task.id}`}>
                · {task.agent}
              </span>
            </>
          ) : null}
        </div>
      </td>
      {task.kind === 'quick' ? (
        // No setup and no pipeline: one cell says what it is and opens it.
        <td className="stage quick" colSpan={STAGE_NAMES.length + 1}>
          <button type="button" data-testid={`quick-cell-${task.id}`} onClick={() => controller.open(task.id)}>
            quick sandbox · {task.phase === 'running' && task.sandbox.status === 'running' ? (task.keep ? 'kept until you destroy it' : 'shell open until you exit it') : task.phase}
            {task.keep ? ' · kept' : ''}
          </button>
        </td>
      ) : task.kind === 'agent' ? (
        // The agent's own session: one cell says whose and where it is, and opens its terminal.
        <td className="stage quick" colSpan={STAGE_NAMES.length + 1}>
          <button type="button" data-testid={`agent-cell-${task.id}`} onClick={() => controller.open(task.id)}>
            Agent session · {task.agent === 'codex' ? 'Codex' : 'Claude Code'} · {task.phase === 'running' ? 'running until you exit it' : task.phase}
          </button>
        </td>
      ) : (
        <>
          <SetupCell task={task} mark={(status) => STATUS_MARK[status] ?? '?'} />
          {STAGE_NAMES.map((name) => {
            const stage: StageResult = task.stages.find((s) => s.name === name) ?? { name, status: 'pending' };
            const usage = [formatTokens(stage.tokens), formatCost(stage.costUsd)].filter(Boolean).join(' · ');
            const reason = stageReason(stage);
            return (
              <td key={name} className={`stage stage-${stage.status}`}>
                <button
                  type="button"
                  data-testid={`stage-${task.id}-${name}`}
                  data-status={stage.status}
                  title={reason || `${name}: ${stage.status}`}
                  onClick={() => controller.open(task.id, stage.sessionId)}
                >
                  <span className="mark">{STATUS_MARK[stage.status] ?? '?'}</span> {stage.status}
                  <span className="duration">{formatDuration(stage.durationMs)}</span>
                  {stage.attempt !== undefined && stage.attempt > 1 ? (
                    <span className="attempt" data-testid={`stage-attempt-${task.id}-${name}`}>
                      attempt {stage.attempt}
                    </span>
                  ) : null}
                  {stage.status === 'failed' && stage.exitCode !== undefined && stage.exitCode !== null ? (
                    <span className="exit">exit status {stage.exitCode}</span>
                  ) : null}
                  {reason ? (
                    // Agent text and test counts come from the sandbox: React escapes it; CSS keeps it to one line.
                    <span className="summary" data-testid={`stage-summary-${task.id}-${name}`}>
                      {reason}
                    </span>
                  ) : null}
                  {usage ? (
                    <span className="usage" data-testid={`stage-usage-${task.id}-${name}`}>
                      {usage}
                    </span>
                  ) : null}
                </button>
              </td>
            );
          })}
        </>
      )}
    </tr>
  );
}

/**
 * The one reason a card gives: the summary without an exit status the card
 * already shows (tasks saved before the summary stopped repeating it say
 * "exit 3: boom" or just "exit 3").
 */
export function stageReason(stage: StageResult): string {
  const summary = stage.summary?.trim() ?? '';
  if (stage.status !== 'failed' || stage.exitCode === undefined || stage.exitCode === null) return summary;
  const repeated = new RegExp(`^exit(?: status)? ${stage.exitCode}(?::\\s*|$)`);
  return summary.replace(repeated, '').trim();
}
