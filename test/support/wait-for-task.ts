// Waits, as the UI does, for a task to reach a state: from its update events,
// with the current state checked first so an update that already happened counts.
import type { Task } from '../../common/domain.js';
import type { FactoryApp } from '../../main/app.js';

export function waitForTask(app: FactoryApp, taskId: string, done: (t: Task) => boolean, timeoutMs = 8 * 60_000): Promise<Task> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      // The task's state only makes the timeout's message clearer; without it the timeout still rejects.
      void app.api['tasks.get']({ taskId }).catch(() => undefined).then((t) => {
        reject(new Error(`timed out waiting for task ${taskId}; it is ${t?.phase}: ${JSON.stringify(t?.error ?? t?.stages)}`));
      });
    }, timeoutMs);
    const check = (t: Task) => {
      if (t.id === taskId && done(t)) {
        clearTimeout(timer);
        off();
        resolve(t);
      }
    };
    const off = app.onEvent((e) => {
      if (e.type === 'task.updated') check(e.task);
    });
    void app.api['tasks.get']({ taskId }).then(check, () => undefined);
  });
}
