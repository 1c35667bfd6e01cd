// The system tray, built from the live task list (tray-menu.ts makes the menu as
// data; this turns it into Electron's Menu and runs its actions), and the desktop
// notification when a task reaches review or fails.
import { taskNotice, type Task } from '../../../common/domain.js';
import type { HostedApp } from '../hosted-app.js';
import { trayMenu, type TrayAction, type TrayItem } from '../tray-menu.js';
import { pickRepoFolder } from './dialogs.js';
import type { ElectronParts, MenuItemLike, TrayLike, WindowLike } from './electron-parts.js';
import { pushToRenderer } from './ipc.js';

// A 16x16 PNG drawn at build time and kept inline, so packaging needs no asset
// for it (nativeImage reads PNG and JPEG, not SVG).
const ICON_PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hAAAALklEQVR4nGNgGHRAVtngPz5MtAHEilPHAP38e//JwYPUAEKA9gYMfBgMUQMoAQBxvYpUx7oD7QAAAABJRU5ErkJggg==';

/** The elapsed times in the menu move on even when no task does. */
const REFRESH_MS = 30_000;

export function createTray(electron: ElectronParts, win: WindowLike, quit: () => void, app?: HostedApp): TrayLike {
  const { Menu, Tray, nativeImage } = electron;
  const tray = new Tray(nativeImage.createFromBuffer(Buffer.from(ICON_PNG_BASE64, 'base64')));
  const show = () => {
    if (win.isDestroyed()) return;
    if (win.isMinimized()) win.restore();
    win.show();
    win.focus();
  };
  const notify = (title: string, body: string) => {
    const N = electron.Notification;
    if (!N?.isSupported()) return;
    const n = new N({ title, body });
    n.on('click', show);
    n.show();
  };
  const tasks = new Map<string, Task>();

  const run = async (action: TrayAction): Promise<void> => {
    switch (action.type) {
      case 'show':
        return show();
      case 'quit':
        return quit();
      case 'newTask': {
        show();
        const repoPath = await pickRepoFolder(electron.dialog, win);
        return pushToRenderer(win, 'onNewTaskRequest', repoPath ? { repoPath } : {});
      }
      case 'quick':
        if (app) await quickSandbox(app, action.repoPath, action.keep === true);
        return show();
      case 'open':
        // A quick sandbox gets a shell (the window shows it); a task's view is in the window.
        if (app && tasks.get(action.taskId)?.kind === 'quick') await openShell(app, action.taskId);
        return show();
      case 'destroy':
        if (app) await app.api['tasks.destroy']({ taskId: action.taskId });
        return;
    }
  };
  const click = (action: TrayAction) => () =>
    void run(action).catch((err: unknown) => notify('Factory in a Box', err instanceof Error ? err.message : String(err)));
  const render = () => tray.setContextMenu(Menu.buildFromTemplate(toTemplate(trayMenu({ tasks: [...tasks.values()], now: new Date() }), click)));

  tray.setToolTip('Factory in a Box');
  render();
  tray.on('click', show);
  const cleanups: Array<() => void> = [];
  if (app) {
    cleanups.push(
      app.onEvent((e) => {
        if (e.type === 'task.updated') {
          const notice = taskNotice(tasks.get(e.task.id), e.task);
          tasks.set(e.task.id, e.task);
          if (notice) notify(notice.title, notice.body);
        } else if (e.type === 'task.removed') {
          tasks.delete(e.taskId);
        } else return;
        render();
      }),
    );
    void app.api['tasks.list']({}).then((list) => {
      for (const t of list) if (!tasks.has(t.id)) tasks.set(t.id, t);
      render();
    }, () => undefined);
    const timer = setInterval(render, REFRESH_MS);
    timer.unref?.();
    cleanups.push(() => clearInterval(timer));
  }
  return {
    setToolTip: (t) => tray.setToolTip(t),
    setContextMenu: (m) => tray.setContextMenu(m),
    on: (event, listener) => tray.on(event, listener),
    destroy: () => {
      for (const c of cleanups.splice(0)) c();
      tray.destroy();
    },
  };
}

/** The menu model as Electron's template. */
export function toTemplate(items: TrayItem[], click: (action: TrayAction) => () => void): MenuItemLike[] {
  return items.map((item): MenuItemLike => {
    switch (item.kind) {
      case 'separator':
        return { type: 'separator' };
      case 'label':
        return { label: item.label, enabled: false };
      case 'action':
        return { label: item.label, click: click(item.action) };
      case 'submenu':
        return { label: item.label, submenu: toTemplate(item.items, click) };
    }
  });
}

/** A quick sandbox (kept until destroyed if `keep`), and its shell once it runs (the window shows it). */
async function quickSandbox(app: HostedApp, repoPath: string | undefined, keep: boolean): Promise<void> {
  const task = await app.api['sandboxes.quick']({ ...(repoPath ? { repoPath } : {}), ...(keep ? { keep: true } : {}) });
  await new Promise<void>((resolve, reject) => {
    const check = (t: Task) => {
      if (t.id !== task.id) return;
      if (t.phase === 'running' && t.sandbox.status === 'running') done(resolve);
      else if (!['creating', 'provisioning', 'seeding', 'running'].includes(t.phase)) done(() => reject(new Error(`the quick sandbox ended before its shell opened: ${t.error?.message ?? t.phase}`)));
    };
    const off = app.onEvent((e) => e.type === 'task.updated' && check(e.task));
    const done = (then: () => void) => {
      off();
      then();
    };
    void app.api['tasks.get']({ taskId: task.id }).then(check, () => undefined);
  });
  await openShell(app, task.id);
}

async function openShell(app: HostedApp, taskId: string): Promise<void> {
  await app.api['terminal.openShell']({ taskId, cols: 100, rows: 30 });
}
