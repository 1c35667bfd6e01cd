// The board's filter (by state and by repository), kept in localStorage so a
// reload keeps it. What is read back is checked: the storage is shared with
// every page of the origin and may hold anything.
import type { Task, TaskPhase } from '../../common/domain.js';

export const BOARD_FILTER_KEY = 'factory.boardFilter';

export const STATE_FILTERS = ['all', 'running', 'review', 'done', 'failed'] as const;
export type StateFilter = (typeof STATE_FILTERS)[number];

export interface BoardFilter {
  state: StateFilter;
  /** A repository path, or '' for every repository. */
  repo: string;
}

export const NO_FILTER: BoardFilter = { state: 'all', repo: '' };

const GROUP: Record<TaskPhase, Exclude<StateFilter, 'all'>> = {
  creating: 'running',
  provisioning: 'running',
  seeding: 'running',
  running: 'running',
  'pulling-back': 'running',
  review: 'review',
  approved: 'done',
  rejected: 'done',
  closed: 'done',
  failed: 'failed',
  cancelled: 'failed',
  interrupted: 'failed',
};

/** Which state filter a task's phase falls under. */
export function stateGroup(phase: TaskPhase): Exclude<StateFilter, 'all'> {
  return GROUP[phase];
}

export function matchesFilter(task: Task, f: BoardFilter): boolean {
  if (f.state !== 'all' && stateGroup(task.phase) !== f.state) return false;
  return !f.repo || task.repoPath === f.repo;
}

function storage(): Storage | undefined {
  try {
    return globalThis.localStorage ?? undefined;
  } catch {
    return undefined; // storage disabled: the filter works, it just forgets
  }
}

export function loadBoardFilter(): BoardFilter {
  let parsed: unknown;
  try {
    parsed = JSON.parse(storage()?.getItem(BOARD_FILTER_KEY) ?? 'null');
  } catch {
    return NO_FILTER;
  }
  if (!parsed || typeof parsed !== 'object') return NO_FILTER;
  const { state, repo } = parsed as Record<string, unknown>;
  return {
    state: STATE_FILTERS.includes(state as StateFilter) ? (state as StateFilter) : 'all',
    repo: typeof repo === 'string' && repo.length <= 4096 && !/[\u0000-\u001f\u007f]/.test(repo) ? repo : '',
  };
}

export function saveBoardFilter(f: BoardFilter): void {
  try {
    storage()?.setItem(BOARD_FILTER_KEY, JSON.stringify(f));
  } catch {
    // Storage full or disabled: the filter still applies until the reload.
  }
}
