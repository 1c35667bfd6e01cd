// Exposes the typed API to the sandboxed renderer as window.factory. No logic:
// every call goes to the main process, which validates the sender and the input.
// CommonJS (sandboxed preloads cannot load ES modules); a sandboxed preload can
// require only 'electron' and a few built-ins, never a file of ours, so everything
// from common/ is imported as a type and the few values restated below are
// checked against common/bridge.ts by the compiler.
import type { BridgeChannels, ElectronBridge, InvokeChannel, PushChannel, WireErrorPrefix } from '../common/bridge.js';
import type { ApiInput, ApiMethod, ApiOutputs, FactoryEvent, TerminalDataEvent } from '../common/contract.js';

// The few Electron APIs used here, typed locally so this file also type-checks
// where the electron package (and its types) is not installed. The channel
// parameters accept only the channels common/bridge.ts names.
interface IpcRendererLike {
  invoke(channel: InvokeChannel, ...args: unknown[]): Promise<unknown>;
  on(channel: PushChannel, listener: (event: unknown, payload: any) => void): void;
  removeListener(channel: PushChannel, listener: (event: unknown, payload: any) => void): void;
}
interface PreloadElectron {
  contextBridge: { exposeInMainWorld(key: string, api: unknown): void };
  ipcRenderer: IpcRendererLike;
  webUtils: { getPathForFile(file: File): string };
}
declare const require: (id: 'electron') => PreloadElectron;
const { contextBridge, ipcRenderer, webUtils } = require('electron');

// Must equal common/bridge.ts: a different or missing channel does not compile.
const CHANNEL: BridgeChannels = {
  call: 'factory:call',
  onEvent: 'factory:event',
  onTerminalData: 'factory:terminal-data',
  pickRepoFolder: 'factory:pick-repo-folder',
  onNewTaskRequest: 'factory:new-task',
};
const WIRE_ERROR_PREFIX: WireErrorPrefix = 'factory-wire-error:';

function subscribe<T>(channel: PushChannel, listener: (payload: T) => void): () => void {
  const wrapped = (_event: unknown, payload: T) => listener(payload);
  ipcRenderer.on(channel, wrapped);
  return () => ipcRenderer.removeListener(channel, wrapped);
}

// Every member of FactoryBridge, the Electron-only ones included: a missing one does not compile.
const bridge: ElectronBridge = {
  async call<M extends ApiMethod>(method: M, input: ApiInput<M>): Promise<ApiOutputs[M]> {
    const reply = (await ipcRenderer.invoke(CHANNEL.call, method, input)) as
      | { result: ApiOutputs[M] }
      | { error: { name: string; message: string; detail?: string } };
    if ('error' in reply) {
      // contextBridge copies only an Error's message, so the wire error travels
      // inside it; the renderer's Electron adapter turns it back into a named error.
      throw new Error(WIRE_ERROR_PREFIX + JSON.stringify(reply.error));
    }
    return (reply.result === null ? undefined : reply.result) as ApiOutputs[M];
  },
  onEvent: (listener: (e: FactoryEvent) => void) => subscribe(CHANNEL.onEvent, listener),
  onTerminalData: (listener: (e: TerminalDataEvent) => void) => subscribe(CHANNEL.onTerminalData, listener),
  pathForFile: (file: File) => webUtils.getPathForFile(file),
  pickRepoFolder: async () => ((await ipcRenderer.invoke(CHANNEL.pickRepoFolder)) as string | null) ?? undefined,
  onNewTaskRequest: (listener: (request: { repoPath?: string }) => void) => subscribe(CHANNEL.onNewTaskRequest, listener),
};

contextBridge.exposeInMainWorld('factory', bridge);
