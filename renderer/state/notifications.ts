// Browser notifications for the web UI: a task that reaches review or fails
// (common/domain.ts decides which updates deserve one). Electron's window does
// not use these: the main process shows the desktop's own (main/host/electron/tray.ts).
import { taskNotice, type Task } from '../../common/domain.js';

function api(): typeof Notification | undefined {
  return typeof globalThis.Notification === 'function' ? globalThis.Notification : undefined;
}

/**
 * Asks the browser once, on a click of the user's (browsers ignore or penalize a
 * prompt that comes from nowhere); an answer already given is not asked again.
 */
export function askNotificationPermission(): void {
  const N = api();
  if (!N || N.permission !== 'default') return;
  // Refused or unsupported: the app works without notifications.
  void Promise.resolve(N.requestPermission()).catch(() => undefined);
}

/** Shows the notice for this update, if it deserves one and the user allowed them; returns whether it did. */
export function notifyTaskChange(before: Task | undefined, after: Task): boolean {
  const notice = taskNotice(before, after);
  const N = api();
  if (!notice || !N || N.permission !== 'granted') return false;
  try {
    const n = new N(notice.title, { body: notice.body, tag: notice.tag });
    n.onclick = () => globalThis.focus?.();
    return true;
  } catch {
    // Some browsers allow notifications only from a service worker: the board still shows the change.
    return false;
  }
}
