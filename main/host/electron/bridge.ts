// Everything the main process does for the preload bridge, in one call: the
// invoke handlers (API calls, the folder picker) and the pushes (events, terminal
// bytes, the tray's "New task…"). main.ts calls this with the real Electron parts;
// the bridge test calls it with recording doubles and checks it against the preload.
import type { HostedApp } from '../hosted-app.js';
import { registerDialogs } from './dialogs.js';
import type { ElectronParts, WindowLike } from './electron-parts.js';
import { registerIpc } from './ipc.js';
import { createTray } from './tray.js';

/** Connects the window to the app; returns the function that disconnects it and removes the tray. */
export function connectBridge(electron: ElectronParts, app: HostedApp, win: WindowLike, pageFile: string, quit: () => void): () => void {
  const offIpc = registerIpc(electron.ipcMain, app, win, pageFile);
  const offDialogs = registerDialogs(electron, win, pageFile);
  const tray = createTray(electron, win, quit, app);
  return () => {
    offIpc();
    offDialogs();
    tray.destroy();
  };
}
