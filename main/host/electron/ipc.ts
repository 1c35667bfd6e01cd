// The Electron side of the API: one invoke channel for calls, push channels for
// events and terminal bytes. Only our own page in our own window may call.
// Channel names come from common/bridge.ts, shared with the preload.
import { BRIDGE_CHANNELS, type PushMember, type PushPayload } from '../../../common/bridge.js';
import { dispatchCall, type CallReply, type HostedApp } from '../hosted-app.js';
import type { ElectronParts, InvokeEventLike, WindowLike } from './electron-parts.js';
import { isOwnPage } from './sender-check.js';

export { isOwnPage };

export function senderAllowed(event: InvokeEventLike, win: WindowLike, pageFile: string): boolean {
  return !win.isDestroyed() && event.sender === win.webContents && isOwnPage(event.senderFrame?.url, pageFile);
}

/** Sends what a bridge member's listeners receive (e.g. onNewTaskRequest) to the window, if it is still there. */
export function pushToRenderer<K extends PushMember>(win: WindowLike, member: K, payload: PushPayload<K>): void {
  if (!win.isDestroyed() && !win.webContents.isDestroyed()) win.webContents.send(BRIDGE_CHANNELS[member], payload);
}

export function registerIpc(ipcMain: ElectronParts['ipcMain'], app: HostedApp, win: WindowLike, pageFile: string): () => void {
  ipcMain.handle(BRIDGE_CHANNELS.call, async (event, method: unknown, input: unknown): Promise<CallReply> => {
    if (!senderAllowed(event, win, pageFile)) {
      return { error: { name: 'Forbidden', message: 'calls are accepted only from the app window' } };
    }
    return dispatchCall(app.api, method, input);
  });
  const offEvent = app.onEvent((e) => pushToRenderer(win, 'onEvent', e));
  const offData = app.onTerminalData((e) => pushToRenderer(win, 'onTerminalData', { sessionId: e.sessionId, data: e.data }));
  return () => {
    ipcMain.removeHandler(BRIDGE_CHANNELS.call);
    offEvent();
    offData();
  };
}
