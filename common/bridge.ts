// The Electron bridge named once: which IPC channel each member of window.factory
// uses, the prefix that carries a wire error through contextBridge, and the member
// list. Used by preload/, main/host/electron/ and the renderer's Electron adapter.
// The preload is a sandboxed CommonJS script that can require only 'electron', so
// it imports these as types only; its channel literals are checked against them.
import type { FactoryBridge } from './contract.js';

/** The bridge as the Electron preload exposes it: every member, the Electron-only ones included. */
export type ElectronBridge = Required<FactoryBridge>;

/**
 * Each member of window.factory and how it reaches the main process: `invoke`
 * (ipcRenderer.invoke, answered by ipcMain.handle), `push` (webContents.send,
 * heard with ipcRenderer.on), or null when the preload answers it itself.
 * `satisfies` makes a member missing here, or one FactoryBridge lacks, a compile error.
 */
export const BRIDGE_WIRING = {
  call: { direction: 'invoke', channel: 'factory:call' },
  onEvent: { direction: 'push', channel: 'factory:event' },
  onTerminalData: { direction: 'push', channel: 'factory:terminal-data' },
  /** webUtils.getPathForFile in the preload: no IPC. */
  pathForFile: null,
  pickRepoFolder: { direction: 'invoke', channel: 'factory:pick-repo-folder' },
  onNewTaskRequest: { direction: 'push', channel: 'factory:new-task' },
} as const satisfies Record<keyof FactoryBridge, { direction: 'invoke' | 'push'; channel: `factory:${string}` } | null>;

type Wiring = typeof BRIDGE_WIRING;
type ChannelOf<D> = { [K in keyof Wiring]: Wiring[K] extends { direction: D; channel: infer C } ? C : never }[keyof Wiring];

/** Channels the renderer invokes and the main process handles. */
export type InvokeChannel = ChannelOf<'invoke'>;
/** Channels the main process sends on and the renderer listens to. */
export type PushChannel = ChannelOf<'push'>;

/** The members whose channel carries pushes from the main process, and what each push carries. */
export type PushMember = { [K in keyof Wiring]: Wiring[K] extends { direction: 'push' } ? K : never }[keyof Wiring];
export type PushPayload<K extends PushMember> = Parameters<Parameters<ElectronBridge[K]>[0]>[0];

/** The channel of each member that has one, e.g. BRIDGE_CHANNELS.call === 'factory:call'. */
export type BridgeChannels = {
  [K in keyof Wiring as Wiring[K] extends null ? never : K]: NonNullable<Wiring[K]>['channel'];
};
export const BRIDGE_CHANNELS = Object.freeze(
  Object.fromEntries(Object.entries(BRIDGE_WIRING).flatMap(([member, w]) => (w ? [[member, w.channel]] : []))),
) as BridgeChannels;

/** Every member window.factory has under Electron, in a fixed order. */
export const FACTORY_BRIDGE_MEMBERS = Object.freeze(Object.keys(BRIDGE_WIRING) as Array<keyof FactoryBridge>);

function channels<D extends 'invoke' | 'push'>(direction: D): Array<ChannelOf<D>> {
  return Object.values(BRIDGE_WIRING).flatMap((w) => (w?.direction === direction ? [w.channel as ChannelOf<D>] : []));
}
export const INVOKE_CHANNELS: readonly InvokeChannel[] = Object.freeze(channels('invoke'));
export const PUSH_CHANNELS: readonly PushChannel[] = Object.freeze(channels('push'));

/**
 * contextBridge copies only an Error's message across worlds, so the preload puts
 * the wire error ({name, message, detail} as JSON) in the message after this prefix
 * and the renderer's Electron adapter rebuilds a named FactoryError from it.
 */
export const WIRE_ERROR_PREFIX = 'factory-wire-error:';
export type WireErrorPrefix = typeof WIRE_ERROR_PREFIX;
