// Native dialogs the renderer may ask for; the answer is only a path string.
import { dialog, ipcMain, type BrowserWindow } from 'electron';
import { senderAllowed } from './ipc.js';

export const PICK_REPO_CHANNEL = 'factory:pick-repo-folder';

export async function pickRepoFolder(win: BrowserWindow): Promise<string | undefined> {
  const result = await dialog.showOpenDialog(win, {
    title: 'Choose a git repository',
    buttonLabel: 'Use this repository',
    properties: ['openDirectory'],
  });
  return result.canceled ? undefined : result.filePaths[0];
}

export function registerDialogs(win: BrowserWindow, pageFile: string): () => void {
  ipcMain.handle(PICK_REPO_CHANNEL, async (event) => {
    if (!senderAllowed(event, win, pageFile)) return null;
    return (await pickRepoFolder(win)) ?? null;
  });
  return () => ipcMain.removeHandler(PICK_REPO_CHANNEL);
}
