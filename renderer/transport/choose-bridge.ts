// The transport is chosen once at start-up: the preload's window.factory under
// Electron, else the web host's WebSocket with the token from the launch URL.
import type { ElectronBridge } from '../../common/bridge.js';
import { electronBridge } from './electron-bridge.js';
import { WebSocketBridge } from './web-socket-bridge.js';

const TOKEN_KEY = 'factory.token';

declare global {
  interface Window {
    /** Set by the Electron preload, with every member (see common/bridge.ts). */
    factory?: ElectronBridge;
  }
}

/** Takes ?token= from the address bar into sessionStorage and removes it from the URL (and history). */
export function takeToken(win: Window = window): string | undefined {
  const params = new URLSearchParams(win.location.search);
  const fromUrl = params.get('token');
  if (fromUrl) {
    win.sessionStorage.setItem(TOKEN_KEY, fromUrl);
    params.delete('token');
    const rest = params.toString();
    win.history.replaceState(null, '', win.location.pathname + (rest ? `?${rest}` : '') + win.location.hash);
    return fromUrl;
  }
  return win.sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

export type BridgeChoice =
  | { kind: 'electron'; bridge: ElectronBridge }
  | { kind: 'web'; bridge: WebSocketBridge }
  | { kind: 'no-token' };

export function chooseBridge(win: Window = window): BridgeChoice {
  if (win.factory) return { kind: 'electron', bridge: electronBridge(win.factory) };
  const token = takeToken(win);
  if (!token) return { kind: 'no-token' };
  const scheme = win.location.protocol === 'https:' ? 'wss' : 'ws';
  return { kind: 'web', bridge: new WebSocketBridge(`${scheme}://${win.location.host}/ws?token=${encodeURIComponent(token)}`) };
}
