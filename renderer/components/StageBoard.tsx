import { useState, type FocusEvent, type KeyboardEvent } from 'react';
import { interactiveAgentName, STAGE_NAMES, type StageResult, type Task } from '../../common/domain.js';
import { loadBoardFilter, matchesFilter, saveBoardFilter, type BoardFilter } from '../state/board-filter.js';
import { useController, useFactory } from '../state/context.js';
import { ArchivedTasks, BoardFilterBar } from './BoardFilters.js';
import { keptUntilTitle, sandboxWords } from './sandbox-words.js';
import { taskOrder } from '../state/store.js';
import { SetupCell } from './environment/SetupCell.js';
import { formatCost, formatDuration, formatTokens } from './format.js';
import { shortDuration } from './short-duration.js';
import { SessionLine } from './session/SessionLine.js';
import { StatusIcon } from './icons.js';

/** Short column heads, so the seven stage columns fit beside the task column; the full name is read out. */
const SHORT: Record<string, string> = { setup: 'set', request: 'req', plan: 'plan', build: 'build', test: 'test', review: 'rev', document: 'doc' };

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
  // A task run N ways is one row: its first way's, with a lane per way.
  const ordered = fanoutRows(onBoard.filter((t) => matchesFilter(t, filter)));
  const repos = [...new Set(all.map((t) => t.repoPath).filter(Boolean))].sort();
  const grid = useBoardGrid(ordered.map((t) => t.id), selected);
  return (
    <section className="board" data-testid="stage-board" data-region="board" aria-labelledby="board-heading">
      <h2 id="board-heading">Tasks</h2>
      {all.length > 0 ? <BoardFilterBar filter={filter} repos={repos} onChange={setFilter} shown={ordered.length} total={onBoard.length} /> : null}
      {ordered.length === 0 ? (
        onBoard.length || all.length ? (
          <p className="hint" data-testid="board-empty">
            {onBoard.length ? 'No task matches the filter.' : 'Every task is archived.'}
          </p>
        ) : (
          <FirstRun />
        )
      ) : (
        <div className="board-scroll">
          {/* One Tab stop for the whole board; arrow keys move between its cells (the ARIA grid pattern). */}
          <table role="grid" aria-labelledby="board-heading" aria-describedby="board-keys" onKeyDown={grid.onKeyDown} onFocus={grid.onFocus}>
            <thead>
              <tr>
                <th scope="col">Task</th>
                {['setup', ...STAGE_NAMES].map((s) => (
                  <th key={s} scope="col" className="stage-head" title={s}>
                    <span aria-hidden="true">{SHORT[s]}</span>
                    <span className="sr-only">{s}</span>
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {ordered.map((t) => (
                <TaskRow key={t.id} task={t} ways={t.fanout ? waysOf(onBoard, t.fanout.group) : undefined} selected={t.id === selected || (!!t.fanout && sameGroup(onBoard, selected, t.fanout.group))} active={grid.active} />
              ))}
            </tbody>
          </table>
          <p className="sr-only" id="board-keys">
            Arrow keys move between tasks and stages; Enter opens one.
          </p>
        </div>
      )}
      <ArchivedTasks tasks={all.filter((t) => t.archivedAt)} />
    </section>
  );
}

/** An empty app says what to do, in order. */
function FirstRun() {
  const controller = useController();
  const credentials = useFactory((s) => s.credentials);
  const defaultAgent = useFactory((s) => s.settings?.defaultAgent);
  const hasModelKey = !!credentials?.some((c) => c.kind !== 'git' && c.kind !== 'custom-header');
  return (
    <div className="first-run" data-testid="board-empty">
      <p>No tasks yet. To run one:</p>
      <ol>
        <li data-done={hasModelKey || defaultAgent === 'command' ? '' : undefined}>
          {hasModelKey ? 'A model credential is stored.' : 'Store an Anthropic or OpenAI credential for Claude Code or Codex, or use the Command agent, which needs none.'}{' '}
          {!hasModelKey ? (
            <button type="button" className="secondary small" data-testid="first-run-credentials" onClick={() => controller.showView('credentials')}>
              Open Credentials
            </button>
          ) : null}
        </li>
        <li>Pick a repository in New task: type its path, or drop its folder.</li>
        <li>Describe the task, choose the agent and press Start. Its stages show here, its terminal on the right.</li>
      </ol>
    </div>
  );
}

/** Roving focus over the board's cells: [row, column]; column 0 is the task, 1 setup, 2… the stages. */
function useBoardGrid(ids: string[], selected: string | undefined) {
  const [pos, setPos] = useState<{ id: string; col: number }>();
  const row = pos && ids.includes(pos.id) ? pos.id : selected && ids.includes(selected) ? selected : ids[0];
  const active = { id: row, col: pos && pos.id === row ? pos.col : 0 };
  const cell = (id: string, col: number) => document.querySelector<HTMLElement>(`[data-grid-row="${id}"][data-grid-col="${col}"]`);
  const onFocus = (e: FocusEvent<HTMLTableElement>) => {
    const el = (e.target as HTMLElement).closest<HTMLElement>('[data-grid-row]');
    if (el) setPos({ id: el.dataset.gridRow!, col: Number(el.dataset.gridCol) });
  };
  const onKeyDown = (e: KeyboardEvent<HTMLTableElement>) => {
    if (e.altKey || e.ctrlKey || e.metaKey || !active.id) return;
    const r = ids.indexOf(active.id);
    const cols = STAGE_NAMES.length + 1;
    let next: { id: string; col: number } | undefined;
    switch (e.key) {
      case 'ArrowRight':
        next = { id: active.id, col: Math.min(cols, active.col + 1) };
        break;
      case 'ArrowLeft':
        next = { id: active.id, col: Math.max(0, active.col - 1) };
        break;
      case 'ArrowDown':
        next = { id: ids[Math.min(ids.length - 1, r + 1)]!, col: active.col };
        break;
      case 'ArrowUp':
        next = { id: ids[Math.max(0, r - 1)]!, col: active.col };
        break;
      case 'Home':
        next = { id: e.shiftKey ? ids[0]! : active.id, col: 0 };
        break;
      case 'End':
        next = { id: e.shiftKey ? ids.at(-1)! : active.id, col: cols };
        break;
      default:
        return;
    }
    e.preventDefault();
    // Sideways, a column without a cell (no setup step) is passed over; a quick sandbox's or
    // session's row has one cell after the task, which every stage column lands on.
    const step = e.key === 'ArrowLeft' ? -1 : 1;
    let target = cell(next.id, next.col);
    for (let c = next.col; !target && c >= 0 && c <= cols && (e.key === 'ArrowLeft' || e.key === 'ArrowRight'); c += step) target = cell(next.id, c);
    target ??= cell(next.id, 1) ?? cell(next.id, 0);
    target?.focus();
    target?.scrollIntoView?.({ block: 'nearest', inline: 'nearest' });
  };
  return { active, onFocus, onKeyDown };
}

/**
 * The board's rows: a fan-out group's ways folded into one row, where its first
 * way in the board's order sits, headed by its lowest way shown (way 1 unless filtered out).
 */
function fanoutRows(tasks: Task[]): Task[] {
  const head = new Map<string, Task>();
  for (const t of tasks) if (t.fanout && (head.get(t.fanout.group)?.fanout?.way ?? Infinity) > t.fanout.way) head.set(t.fanout.group, t);
  const seen = new Set<string>();
  return tasks.flatMap((t) => {
    if (!t.fanout) return [t];
    if (seen.has(t.fanout.group)) return [];
    seen.add(t.fanout.group);
    return [head.get(t.fanout.group)!];
  });
}

function waysOf(tasks: Task[], group: string): Task[] {
  return tasks.filter((t) => t.fanout?.group === group).sort((a, b) => a.fanout!.way - b.fanout!.way);
}

function sameGroup(tasks: Task[], taskId: string | undefined, group: string): boolean {
  return !!taskId && tasks.some((t) => t.id === taskId && t.fanout?.group === group);
}

function TaskRow({ task, ways, selected, active }: { task: Task; ways?: Task[]; selected: boolean; active: { id: string | undefined; col: number } }) {
  const controller = useController();
  // Only the grid's active cell is in the Tab order.
  const single = task.kind === 'quick' || task.kind === 'agent' || !!ways;
  const tab = (col: number) => (active.id === task.id && (active.col === col || (single && col === 1 && active.col > 1)) ? 0 : -1);
  const cellProps = (col: number) => ({ 'data-grid-row': task.id, 'data-grid-col': col, tabIndex: tab(col) });
  const phaseWords = task.phase;
  return (
    <tr className={selected ? 'selected' : ''} data-testid={`task-row-${task.id}`} data-phase={task.phase} aria-selected={selected} data-region-focus={selected ? '' : undefined}>
      <td className="task-cell">
        <button type="button" className="link" title={task.title} data-testid={`task-select-${task.id}`} onClick={() => controller.open(task.id)} {...cellProps(0)}>
          {task.title}
        </button>
        <SessionLine task={task} />
        <div className="task-meta">
          <span className={`phase phase-${task.phase}`} data-testid={`task-phase-${task.id}`}>
            {phaseWords}
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
      {ways ? (
        // A task run N ways: one cell, a small lane per way; it opens the comparison.
        <td className="stage fanout-lanes" colSpan={STAGE_NAMES.length + 1}>
          <button type="button" data-testid={`fanout-cell-${task.fanout!.group}`} onClick={() => controller.open(task.id)} {...cellProps(1)}>
            <span className="sr-only">{ways.length} ways: </span>
            {ways.map((w) => (
              <span key={w.id} className={`lane phase-${w.phase}`} data-testid={`fanout-lane-${w.fanout!.way}`} data-phase={w.phase}>
                <StatusIcon status={laneStatus(w)} /> way {w.fanout!.way} {w.phase === 'creating' && w.sandbox.status === 'none' ? 'queued' : w.phase}
                {w.fanout!.way < ways.length ? <span className="sr-only">, </span> : null}
              </span>
            ))}
          </button>
        </td>
      ) : task.kind === 'quick' ? (
        // No setup and no pipeline: one cell says what it is and opens it.
        <td className="stage quick" colSpan={STAGE_NAMES.length + 1}>
          <button type="button" data-testid={`quick-cell-${task.id}`} onClick={() => controller.open(task.id)} {...cellProps(1)}>
            quick sandbox · {task.phase === 'running' && task.sandbox.status === 'running' ? (task.keep ? 'kept until you destroy it' : 'shell open until you exit it') : task.phase}
            {task.keep ? ' · kept' : ''}
          </button>
        </td>
      ) : task.kind === 'agent' ? (
        // The agent's own session: one cell says whose and where it is, and opens its terminal.
        <td className="stage quick" colSpan={STAGE_NAMES.length + 1}>
          <button type="button" data-testid={`agent-cell-${task.id}`} onClick={() => controller.open(task.id)} {...cellProps(1)}>
            Agent session · {interactiveAgentName(task.agent)} · {task.phase === 'running' ? 'running until you exit it' : task.phase}
          </button>
        </td>
      ) : (
        <>
          <SetupCell task={task} cell={cellProps(1)} />
          {STAGE_NAMES.map((name, i) => {
            const stage: StageResult = task.stages.find((s) => s.name === name) ?? { name, status: 'pending' };
            const usage = [formatTokens(stage.tokens), formatCost(stage.costUsd)].filter(Boolean).join(' · ');
            const reason = stageReason(stage);
            const exit = stage.status === 'failed' && stage.exitCode !== undefined && stage.exitCode !== null ? `exit status ${stage.exitCode}` : '';
            const retried = stage.attempt !== undefined && stage.attempt > 1;
            const tip = [`${name}: ${stage.status}`, formatDuration(stage.durationMs), retried ? `attempt ${stage.attempt}` : '', exit, reason, usage].filter(Boolean).join(' · ');
            return (
              <td key={name} className={`stage stage-${stage.status}`}>
                <button type="button" data-testid={`stage-${task.id}-${name}`} data-status={stage.status} title={tip} onClick={() => controller.open(task.id, stage.sessionId)} {...cellProps(2 + i)}>
                  <span className="mark">
                    <StatusIcon status={stage.status} />
                  </span>
                  <span className="duration">{shortDuration(stage.durationMs)}</span>
                  {retried ? (
                    <span className="attempt" aria-hidden="true">
                      ×{stage.attempt}
                    </span>
                  ) : null}
                  {/* The card's words for a screen reader (and the tooltip); the sandbox's text is escaped by React. */}
                  <span className="sr-only">
                    {name}: {stage.status}
                    {retried ? (
                      <>
                        , <span data-testid={`stage-attempt-${task.id}-${name}`}>attempt {stage.attempt}</span>
                      </>
                    ) : null}
                    {exit ? <>, {exit}</> : null}
                    {reason ? (
                      <>
                        , <span data-testid={`stage-summary-${task.id}-${name}`}>{reason}</span>
                      </>
                    ) : null}
                    {usage ? (
                      <>
                        , <span data-testid={`stage-usage-${task.id}-${name}`}>{usage}</span>
                      </>
                    ) : null}
                  </span>
                </button>
              </td>
            );
          })}
        </>
      )}
    </tr>
  );
}

/** A lane's mark: how far the way got. */
function laneStatus(t: Task): string {
  if (t.phase === 'review' || t.phase === 'approved') return 'passed';
  if (t.phase === 'failed' || t.phase === 'interrupted') return 'failed';
  if (t.phase === 'cancelled' || t.phase === 'rejected') return 'cancelled';
  return t.phase === 'creating' && t.sandbox.status === 'none' ? 'pending' : 'running';
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
