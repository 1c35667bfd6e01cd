// Archiving: a task hidden from the board but kept (its logs, review and branch
// stay), listed under "Archived" and restorable. A task whose work still runs
// cannot be hidden: it would keep a sandbox busy out of sight.
import { FactoryError } from '../../common/errors.js';
import type { Task } from '../../common/domain.js';
import type { TaskRecord } from '../state/state-store.js';
import type { TaskBook } from './task-book.js';
import { isActive } from './task-life.js';

export async function setArchived(book: Pick<TaskBook, 'persist'>, record: TaskRecord, archived: boolean, now: () => Date = () => new Date()): Promise<Task> {
  const t = record.task;
  if (archived && isActive(t.phase)) {
    throw new FactoryError('TaskActive', `task ${t.id} is ${t.phase}; cancel it or let it finish before archiving it`);
  }
  if (archived === !!t.archivedAt) return { ...t };
  if (archived) {
    record.task = { ...t, archivedAt: now().toISOString() };
  } else {
    const { archivedAt: _restored, ...rest } = t;
    record.task = rest;
  }
  await book.persist(record);
  return { ...record.task };
}
