// Recording doubles of the few Electron APIs the preload bridge and the Electron
// host use (contextBridge, ipcRenderer, webUtils, ipcMain, dialog, Menu, Tray,
// nativeImage), joined by an in-memory IPC wire that copies every payload with
// structured clone as Electron's IPC does.
//
// Doubles only because no Electron runtime can be installed on the machines these
// tests run on (its binary cannot be downloaded there). Everything else is real:
// the preload is compiled from preload/preload.ts with the project's TypeScript and
// its tsconfig.preload.json options, and run as a sandboxed preload is run: a
// CommonJS script whose `require` answers only 'electron'. The main side is the
// real main/host/electron wiring (connectBridge), handed these doubles as its ElectronParts.
// Where a runtime exists, test/e2e/electron.test.ts drives the real app.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import { type ApiMethod, type FactoryApi, type FactoryEvent, type TerminalDataEvent } from '../../common/contract.js';
import { FactoryError } from '../../common/errors.js';
import { Listeners } from '../../common/listeners.js';
import type { ElectronParts, InvokeEventLike, MenuItemLike } from '../../main/host/electron/electron-parts.js';

type Handler = (event: InvokeEventLike, ...args: unknown[]) => unknown;
type Listener = (event: unknown, payload: unknown) => void;


const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** Where the renderer page would be; the sender check compares frame URLs with it. */
export const PAGE_FILE = path.join(root, 'dist/renderer/index.html');
export const PAGE_URL = pathToFileURL(PAGE_FILE).href;

/** The modules a sandboxed preload's `require` can load (Electron's sandbox documentation). */
const SANDBOX_MODULES = new Set(['electron', 'events', 'timers', 'url']);

/** One Electron app's worth of IPC state: a main process, one window, one preload. */
export class ElectronDouble {
  /** ipcMain.handle registrations, by channel. */
  readonly handlers = new Map<string, Handler>();
  /** ipcRenderer.on listeners, by channel. */
  readonly listeners = new Map<string, Set<Listener>>();
  /** Channels in the order the preload invoked or listened to them, and what main sent. */
  readonly invoked: string[] = [];
  readonly listenedTo: string[] = [];
  readonly sent: Array<{ channel: string; payload: unknown }> = [];
  /** What the preload asked `require` for. */
  readonly required: string[] = [];
  /** contextBridge.exposeInMainWorld, by key, as the page sees it. */
  readonly exposed = new Map<string, Record<string, unknown>>();
  /** The tray's context menu, as Menu.buildFromTemplate received it. */
  trayMenu: MenuItemLike[] = [];
  trayDestroyed = false;
  /** How many times the native folder picker opened, and what it answers next (undefined = cancel). */
  dialogsOpened = 0;
  nextPickedFolder: string | undefined;
  /** The page's window (jsdom's in renderer tests), where exposeInMainWorld puts what it exposes. */
  mainWorld: object | undefined;
  /** The frame the renderer's invokes come from: the app's own page unless a test says otherwise. */
  senderFrameUrl = PAGE_URL;

  readonly webContents = {
    isDestroyed: () => false,
    send: (channel: string, payload: unknown) => {
      this.sent.push({ channel, payload });
      for (const l of this.listeners.get(channel) ?? []) l({ sender: 'main' }, structuredClone(payload));
    },
  };
  readonly win = {
    webContents: this.webContents,
    isDestroyed: () => false,
    isMinimized: () => false,
    restore: () => {},
    show: () => {},
    focus: () => {},
  };

  /** The preload's view of require('electron'). */
  readonly rendererElectron = {
    contextBridge: {
      exposeInMainWorld: (key: string, api: unknown) => {
        if (this.exposed.has(key) || (this.mainWorld && key in this.mainWorld)) {
          throw new Error(`Cannot bind an API on top of an existing property on the window object: ${key}`);
        }
        const copy = acrossWorlds(api);
        this.exposed.set(key, copy);
        if (this.mainWorld) Object.defineProperty(this.mainWorld, key, { value: copy, configurable: true, enumerable: true });
      },
    },
    ipcRenderer: {
      invoke: async (channel: string, ...args: unknown[]) => {
        this.invoked.push(channel);
        const handler = this.handlers.get(channel);
        if (!handler) throw new Error(`Error invoking remote method '${channel}': Error: No handler registered for '${channel}'`);
        const event = { sender: this.webContents, senderFrame: { url: this.senderFrameUrl } };
        try {
          return structuredClone(await handler(event, ...args.map((a) => structuredClone(a))));
        } catch (err) {
          throw new Error(`Error invoking remote method '${channel}': ${String(err)}`);
        }
      },
      on: (channel: string, listener: Listener) => {
        this.listenedTo.push(channel);
        if (!this.listeners.has(channel)) this.listeners.set(channel, new Set());
        this.listeners.get(channel)!.add(listener);
      },
      removeListener: (channel: string, listener: Listener) => {
        this.listeners.get(channel)?.delete(listener);
      },
    },
    webUtils: { getPathForFile: (file: { name: string }) => `/dropped/${file.name}` },
  };

  /** The main process's Electron, the parts main/host/electron's bridge wiring is handed. */
  readonly mainElectron: ElectronParts = {
    ipcMain: {
      handle: (channel: string, handler: (event: InvokeEventLike, ...args: any[]) => unknown) => {
        if (this.handlers.has(channel)) throw new Error(`Attempted to register a second handler for '${channel}'`);
        this.handlers.set(channel, handler);
      },
      removeHandler: (channel: string) => {
        this.handlers.delete(channel);
      },
    },
    dialog: {
      showOpenDialog: async () => {
        this.dialogsOpened++;
        const picked = this.nextPickedFolder;
        return picked ? { canceled: false, filePaths: [picked] } : { canceled: true, filePaths: [] };
      },
    },
    Menu: {
      buildFromTemplate: (template: MenuItemLike[]) => {
        this.trayMenu = template;
        return { template };
      },
    },
    Tray: makeTrayClass(this),
    nativeImage: { createFromBuffer: (buffer) => ({ bytes: buffer.length }) },
  };

  /** The listeners still attached to a channel. */
  listenerCount(channel: string): number {
    return this.listeners.get(channel)?.size ?? 0;
  }

  /** Clicks the tray menu item with this label, as the user would. */
  async clickTray(label: string): Promise<void> {
    const item = this.trayMenu.find((i) => i.label === label);
    if (!item?.click) throw new Error(`the tray menu has no item "${label}" (it has: ${this.trayMenu.map((i) => i.label).join(', ')})`);
    await item.click();
  }
}

function makeTrayClass(owner: ElectronDouble) {
  return class TrayDouble {
    setToolTip(): void {}
    setContextMenu(): void {}
    on(): void {}
    destroy(): void {
      owner.trayDestroyed = true;
    }
  };
}

/**
 * What contextBridge does to an exposed object: a copy of its own members, each
 * function proxied, and an Error thrown or rejected across worlds arriving as a
 * plain Error with only its message (the reason for the wire error prefix).
 */
function acrossWorlds(api: unknown): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(api as Record<string, unknown>)) {
    if (typeof value !== 'function') {
      copy[key] = structuredClone(value);
      continue;
    }
    const plain = (err: unknown) => new Error(err instanceof Error ? err.message : String(err));
    copy[key] = (...args: unknown[]) => {
      try {
        const out = (value as (...a: unknown[]) => unknown)(...args);
        return out instanceof Promise ? out.catch((err: unknown) => Promise.reject(plain(err))) : out;
      } catch (err) {
        throw plain(err);
      }
    };
  }
  return Object.freeze(copy);
}

let compiledPreload: string | undefined;

/** preload/preload.ts compiled as the build compiles it (tsconfig.preload.json: CommonJS). */
export function compilePreload(): string {
  if (compiledPreload) return compiledPreload;
  const configPath = path.join(root, 'tsconfig.preload.json');
  const parsed = ts.getParsedCommandLineOfConfigFile(configPath, {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  });
  if (!parsed) throw new Error('tsconfig.preload.json could not be read');
  const file = path.join(root, 'preload/preload.ts');
  const out = ts.transpileModule(readFileSync(file, 'utf8'), { compilerOptions: parsed.options, fileName: file, reportDiagnostics: true });
  if (out.diagnostics?.length) throw new Error(ts.flattenDiagnosticMessageText(out.diagnostics[0]!.messageText, '\n'));
  compiledPreload = out.outputText;
  return compiledPreload;
}

/**
 * Runs the preload as Electron runs a sandboxed one: a CommonJS script whose
 * require answers 'electron' with the renderer-side doubles and refuses files.
 * Returns what it exposed as window.factory.
 */
export function loadPreload(double: ElectronDouble): Record<string, unknown> {
  const sandboxRequire = (id: string) => {
    double.required.push(id);
    if (id === 'electron') return double.rendererElectron;
    if (SANDBOX_MODULES.has(id)) throw new Error(`this double does not provide '${id}'`);
    throw new Error(`module not found: ${id} (a sandboxed preload can require only ${[...SANDBOX_MODULES].join(', ')})`);
  };
  const module = { exports: {} as Record<string, unknown> };
  new Function('require', 'module', 'exports', compilePreload())(sandboxRequire, module, module.exports);
  const factory = double.exposed.get('factory');
  if (!factory) throw new Error(`the preload exposed no window.factory (it exposed: ${[...double.exposed.keys()].join(', ') || 'nothing'})`);
  return factory;
}

/**
 * A small in-memory app with FactoryApp's shape (as in the web host's test): the
 * methods given answer, any other is refused by name; events and terminal bytes
 * are pushed with emit() and emitData().
 */
export function smallApp(handlers: Partial<Record<ApiMethod, (input: any) => unknown>>) {
  const events = new Listeners<FactoryEvent>();
  const data = new Listeners<TerminalDataEvent>();
  const api = new Proxy({} as FactoryApi, {
    get: (_target, method: string) => async (input: unknown) => {
      const handler = handlers[method as ApiMethod];
      if (!handler) throw FactoryError.carried('NotImplemented', `${method} is not in this test app`);
      return handler(input);
    },
  });
  return {
    api,
    onEvent: (l: (e: FactoryEvent) => void) => events.add(l),
    onTerminalData: (l: (e: TerminalDataEvent) => void) => data.add(l),
    emit: (e: FactoryEvent) => events.emit(e),
    emitData: (e: TerminalDataEvent) => data.emit(e),
  };
}
