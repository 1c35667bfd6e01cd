// Quick launch from the system tray: new task, show the window, quit.
import { pickRepoFolder } from './dialogs.js';
import type { ElectronParts, TrayLike, WindowLike } from './electron-parts.js';
import { pushToRenderer } from './ipc.js';

// A 16x16 PNG drawn at build time and kept inline, so packaging needs no asset
// for it (nativeImage reads PNG and JPEG, not SVG).
const ICON_PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hAAAALklEQVR4nGNgGHRAVtngPz5MtAHEilPHAP38e//JwYPUAEKA9gYMfBgMUQMoAQBxvYpUx7oD7QAAAABJRU5ErkJggg==';

export function createTray(electron: ElectronParts, win: WindowLike, quit: () => void): TrayLike {
  const { Menu, Tray, nativeImage } = electron;
  const tray = new Tray(nativeImage.createFromBuffer(Buffer.from(ICON_PNG_BASE64, 'base64')));
  const show = () => {
    if (win.isDestroyed()) return;
    if (win.isMinimized()) win.restore();
    win.show();
    win.focus();
  };
  tray.setToolTip('Factory in a Box');
  tray.setContextMenu(
    Menu.buildFromTemplate([
      {
        label: 'New task…',
        click: async () => {
          show();
          const repoPath = await pickRepoFolder(electron.dialog, win);
          pushToRenderer(win, 'onNewTaskRequest', repoPath ? { repoPath } : {});
        },
      },
      { label: 'Show window', click: show },
      { type: 'separator' },
      { label: 'Quit', click: quit },
    ]),
  );
  tray.on('click', show);
  return tray;
}
