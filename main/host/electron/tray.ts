// Quick launch from the system tray: new task, show the window, quit.
import { Menu, Tray, nativeImage, type BrowserWindow } from 'electron';
import { pickRepoFolder } from './dialogs.js';

export const NEW_TASK_CHANNEL = 'factory:new-task';

// A 16x16 template-style icon drawn in code, so packaging needs no asset for it.
const ICON_DATA_URL =
  'data:image/svg+xml;base64,' +
  Buffer.from(
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"><rect x="1" y="5" width="14" height="10" rx="2" fill="#2f6fde"/><rect x="4" y="1" width="8" height="4" fill="none" stroke="#1d2330" stroke-width="1.5"/></svg>',
  ).toString('base64');

export function createTray(win: BrowserWindow, quit: () => void): Tray {
  const tray = new Tray(nativeImage.createFromDataURL(ICON_DATA_URL));
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
          const repoPath = await pickRepoFolder(win);
          if (!win.isDestroyed()) win.webContents.send(NEW_TASK_CHANNEL, repoPath ? { repoPath } : {});
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
