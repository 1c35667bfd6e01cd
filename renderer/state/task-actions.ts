// Actions on finished tasks beside the controller (archive, remove) and the
// next steps on an approved branch. Archive and remove report like the
// controller's actions (busy, the task's action error); the next steps answer
// their caller, which shows git's output next to the button that asked.
import type { BranchInfo, PushResult, Task } from '../../common/domain.js';
import type { FactoryController } from './controller.js';
import { toErrorInfo } from './store.js';

async function act<T>(c: FactoryController, taskId: string, what: string, fn: () => Promise<T>): Promise<T | undefined> {
  const s = c.store.getState();
  c.store.setState({ busy: { ...s.busy, [taskId]: what }, actionErrors: { ...s.actionErrors, [taskId]: undefined } });
  try {
    return await fn();
  } catch (err) {
    const e = toErrorInfo(err);
    const st = c.store.getState();
    c.store.setState({ actionErrors: { ...st.actionErrors, [taskId]: { ...e, message: `${what}: ${e.message}` } } });
    return undefined;
  } finally {
    const st = c.store.getState();
    c.store.setState({ busy: { ...st.busy, [taskId]: undefined } });
  }
}

function upsert(c: FactoryController, task: Task): void {
  c.store.setState({ tasks: { ...c.store.getState().tasks, [task.id]: task } });
}

/** Hides a finished task from the board (or restores it); an archived task that was open is closed. */
export async function archiveTask(c: FactoryController, taskId: string, archived: boolean): Promise<void> {
  await act(c, taskId, archived ? 'archive' : 'restore', async () => {
    const task = await c.bridge.call('tasks.archive', { taskId, archived });
    upsert(c, task);
    if (archived && c.store.getState().selectedTaskId === taskId) c.store.setState({ selectedTaskId: undefined });
    if (!archived) c.open(taskId);
  });
}

/** Removes a task with its logs (the host refuses a running one, saying so). */
export async function removeTask(c: FactoryController, taskId: string): Promise<void> {
  await act(c, taskId, 'remove', async () => {
    await c.bridge.call('tasks.remove', { taskId });
    const { [taskId]: _gone, ...rest } = c.store.getState().tasks;
    c.store.setState({ tasks: rest, selectedTaskId: c.store.getState().selectedTaskId === taskId ? undefined : c.store.getState().selectedTaskId });
  });
}

export type StepResult<T> = { ok: true; value: T } | { ok: false; error: ReturnType<typeof toErrorInfo> };

async function step<T>(fn: () => Promise<T>): Promise<StepResult<T>> {
  try {
    return { ok: true, value: await fn() };
  } catch (err) {
    return { ok: false, error: toErrorInfo(err) };
  }
}

export const nextSteps = {
  info: (c: FactoryController, taskId: string) => step<BranchInfo>(() => c.bridge.call('tasks.branchInfo', { taskId })),
  checkout: (c: FactoryController, taskId: string) => step<BranchInfo>(() => c.bridge.call('tasks.checkout', { taskId })),
  push: (c: FactoryController, taskId: string, remote: string) => step<PushResult>(() => c.bridge.call('tasks.push', { taskId, remote })),
  openEditor: (c: FactoryController, taskId: string) => step<{ command: string }>(() => c.bridge.call('tasks.openEditor', { taskId })),
};

/** Puts text on the clipboard: the async API where the page may use it, else a selected text area and copy. */
export async function copyText(text: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    return;
  } catch {
    // Not allowed here (no permission, not a secure context): the older way below.
  }
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.style.position = 'fixed';
  area.style.opacity = '0';
  document.body.appendChild(area);
  area.select();
  const ok = document.execCommand('copy');
  area.remove();
  if (!ok) throw new Error('the clipboard is not available here; select the branch name and copy it');
}
