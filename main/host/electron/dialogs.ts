// Native dialogs the renderer may ask for; the answer is only a path string.
import { BRIDGE_CHANNELS } from '../../../common/bridge.js';
import type { ElectronParts, WindowLike } from './electron-parts.js';
import { senderAllowed } from './ipc.js';

export async function pickRepoFolder(dialog: ElectronParts['dialog'], win: WindowLike): Promise<string | undefined> {
  const result = await dialog.showOpenDialog(win, {
    title: 'Choose a git repository',
    buttonLabel: 'Use this repository',
    properties: ['openDirectory'],
  });
  return result.canceled ? undefined : result.filePaths[0];
}

export function registerDialogs(electron: Pick<ElectronParts, 'ipcMain' | 'dialog'>, win: WindowLike, pageFile: string): () => void {
  electron.ipcMain.handle(BRIDGE_CHANNELS.pickRepoFolder, async (event) => {
    if (!senderAllowed(event, win, pageFile)) return null;
    return (await pickRepoFolder(electron.dialog, win)) ?? null;
  });
  return () => electron.ipcMain.removeHandler(BRIDGE_CHANNELS.pickRepoFolder);
}
