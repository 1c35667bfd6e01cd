// Exposes the typed API to the sandboxed renderer as window.factory. No logic:
// every call goes to the main process, which validates the sender and the input.
// CommonJS (sandboxed preloads cannot load ES modules); only 'electron' is required.
import type {
  ApiInput,
  ApiMethod,
  ApiOutputs,
  FactoryBridge,
  FactoryEvent,
  TerminalDataEvent,
} from '../common/contract.js';

// The few Electron APIs used here, typed locally so this file also type-checks
// where the electron package (and its types) is not installed.
interface IpcRendererLike {
  invoke(channel: string, ...args: unknown[]): Promise<unknown>;
  on(channel: string, listener: (event: unknown, payload: any) => void): void;
  removeListener(channel: string, listener: (event: unknown, payload: any) => void): void;
}
interface PreloadElectron {
  contextBridge: { exposeInMainWorld(key: string, api: unknown): void };
  ipcRenderer: IpcRendererLike;
  webUtils: { getPathForFile(file: File): string };
}
declare const require: (id: 'electron') => PreloadElectron;
const { contextBridge, ipcRenderer, webUtils } = require('electron');

/** Keep in sync with renderer/transport/electron-bridge.ts. */
const WIRE_ERROR_PREFIX = 'factory-wire-error:';

function subscribe<T>(channel: string, listener: (payload: T) => void): () => void {
  const wrapped = (_event: unknown, payload: T) => listener(payload);
  ipcRenderer.on(channel, wrapped);
  return () => ipcRenderer.removeListener(channel, wrapped);
}

const bridge: FactoryBridge = {
  async call<M extends ApiMethod>(method: M, input: ApiInput<M>): Promise<ApiOutputs[M]> {
    const reply = (await ipcRenderer.invoke('factory:call', method, input)) as
      | { result: ApiOutputs[M] }
      | { error: { name: string; message: string; detail?: string } };
    if ('error' in reply) {
      // contextBridge copies only an Error's message, so the wire error travels
      // inside it; the renderer's Electron adapter turns it back into a named error.
      throw new Error(WIRE_ERROR_PREFIX + JSON.stringify(reply.error));
    }
    return (reply.result === null ? undefined : reply.result) as ApiOutputs[M];
  },
  onEvent: (listener: (e: FactoryEvent) => void) => subscribe('factory:event', listener),
  onTerminalData: (listener: (e: TerminalDataEvent) => void) => subscribe('factory:terminal-data', listener),
  pathForFile: (file: File) => webUtils.getPathForFile(file),
  pickRepoFolder: async () => ((await ipcRenderer.invoke('factory:pick-repo-folder')) as string | null) ?? undefined,
  onNewTaskRequest: (listener: (request: { repoPath?: string }) => void) => subscribe('factory:new-task', listener),
};

contextBridge.exposeInMainWorld('factory', bridge);
