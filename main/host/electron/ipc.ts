// The Electron side of the API: one invoke channel for calls, two send channels
// for events and terminal bytes. Only our own page in our own window may call.
import { ipcMain, type BrowserWindow, type IpcMainInvokeEvent } from 'electron';
import { dispatchCall, type CallReply, type HostedApp } from '../hosted-app.js';
import { isOwnPage } from './sender-check.js';

export { isOwnPage };

export const CALL_CHANNEL = 'factory:call';
export const EVENT_CHANNEL = 'factory:event';
export const TERMINAL_DATA_CHANNEL = 'factory:terminal-data';

export function senderAllowed(event: IpcMainInvokeEvent, win: BrowserWindow, pageFile: string): boolean {
  return !win.isDestroyed() && event.sender === win.webContents && isOwnPage(event.senderFrame?.url, pageFile);
}

export function registerIpc(app: HostedApp, win: BrowserWindow, pageFile: string): () => void {
  ipcMain.handle(CALL_CHANNEL, async (event, method: unknown, input: unknown): Promise<CallReply> => {
    if (!senderAllowed(event, win, pageFile)) {
      return { error: { name: 'Forbidden', message: 'calls are accepted only from the app window' } };
    }
    return dispatchCall(app.api, method, input);
  });
  const send = (channel: string, payload: unknown) => {
    if (!win.isDestroyed() && !win.webContents.isDestroyed()) win.webContents.send(channel, payload);
  };
  const offEvent = app.onEvent((e) => send(EVENT_CHANNEL, e));
  const offData = app.onTerminalData((e) => send(TERMINAL_DATA_CHANNEL, { sessionId: e.sessionId, data: e.data }));
  return () => {
    ipcMain.removeHandler(CALL_CHANNEL);
    offEvent();
    offData();
  };
}
