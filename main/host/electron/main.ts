// Electron entry: one hardened window over the same app the web host serves.
// Thin on purpose: everything else lives in the services behind createFactoryApp.
import { app, BrowserWindow, dialog, ipcMain, Menu, nativeImage, Notification, Tray } from 'electron';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createFactoryApp, type FactoryApp } from '../../app.js';
import { runCli } from '../../cli/run-cli.js';
import { electronMode } from '../../cli/cli-route.js';
import { connectBridge } from './bridge.js';
import { appPaths } from '../../state/paths.js';
import { acquireInstanceLock } from '../../instance/instance-lock.js';
import { startSocketHost } from '../socket/socket-host.js';
import type { ElectronParts } from './electron-parts.js';
import { hardenSession } from './security.js';

const here = path.dirname(fileURLToPath(import.meta.url)); // dist/main/host/electron
const distRoot = path.resolve(here, '../../..');
export const PAGE_FILE = path.join(distRoot, 'renderer/index.html');
const PRELOAD_FILE = path.join(distRoot, 'preload/preload/preload.js');

// The parts the bridge wiring uses; the compiler checks Electron's fit ElectronParts.
const electronParts: ElectronParts = { ipcMain, dialog, Menu, Tray, nativeImage, Notification };

let factory: FactoryApp | undefined;
const cleanups: Array<() => void> = [];
let quitting = false;

function createWindow(): BrowserWindow {
  const win = new BrowserWindow({
    width: 1400,
    height: 950,
    minWidth: 900,
    minHeight: 600,
    title: 'Factory in a Box',
    show: false,
    webPreferences: {
      preload: PRELOAD_FILE,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
      spellcheck: false,
    },
  });
  win.once('ready-to-show', () => win.show());
  void win.loadFile(PAGE_FILE);
  return win;
}

async function quit(): Promise<void> {
  if (quitting) return;
  quitting = true;
  for (const c of cleanups.splice(0)) c();
  // Every sandbox is torn down before the process ends: nothing left running.
  await factory?.dispose().catch((err: unknown) => console.error('dispose failed:', err));
  app.exit(0);
}

/** The app's services and the factory CLI's socket, once per data dir (a web host may hold it). */
async function startServices(): Promise<FactoryApp> {
  const paths = appPaths();
  const lock = acquireInstanceLock(paths.data);
  process.on('exit', () => lock.release());
  // factory quit ends the desktop app as its tray's Quit does.
  factory = await createFactoryApp({ host: 'electron', paths, quit: () => app.quit() });
  const socket = await startSocketHost(factory, { dataDir: paths.data });
  cleanups.push(() => void socket.close());
  console.log(`Factory in a Box is running; the factory CLI talks to it on ${socket.path}`);
  return factory;
}

async function main(): Promise<void> {
  if (!app.requestSingleInstanceLock()) {
    app.quit();
    return;
  }
  await app.whenReady();
  hardenSession(PAGE_FILE);
  const f = await startServices();
  const win = createWindow();
  cleanups.push(connectBridge(electronParts, f, win, PAGE_FILE, () => void quit()));
  // Build the base image now rather than on the first task; the UI shows its progress.
  void f.api['system.status']({}).then((s) => {
    if (s.image.state !== 'ready') return f.api['image.ensure']({});
  }).catch((err: unknown) => console.error('base image:', err));
  app.on('second-instance', () => {
    if (win.isDestroyed()) return;
    if (win.isMinimized()) win.restore();
    win.focus();
  });
  app.on('window-all-closed', () => void quit());
  app.on('before-quit', (event) => {
    if (!quitting) {
      event.preventDefault();
      void quit();
    }
  });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => void quit());
}

/** The app binary as the `factory` CLI (the launcher's --factory-cli): no window, no tray, its exit status. */
async function runAsCli(args: string[]): Promise<void> {
  app.dock?.hide();
  const code = await runCli(args).catch((err: unknown) => {
    console.error('factory:', err instanceof Error ? err.message : err);
    return 1;
  });
  // Let stdout drain before leaving (a pipe may be slow).
  process.stdout.write('', () => app.exit(code));
}

/**
 * The headless host the CLI starts when no app runs (the packaged app cannot run
 * the web host's entry as Node): the services and the CLI's socket, no window or
 * tray. It ends on SIGTERM, tearing every sandbox down.
 */
async function headless(): Promise<void> {
  app.dock?.hide();
  await app.whenReady();
  const f = await startServices();
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => void quit());
  const status = await f.api['system.status']({});
  if (status.image.state !== 'ready') await f.api['image.ensure']({}).catch((err: unknown) => console.error('base image:', err));
}

// Decided before anything else: the CLI takes no instance lock, and neither it nor the headless host makes a window.
const started = electronMode(process.argv, process.defaultApp === true);
const run = started.mode === 'cli' ? runAsCli(started.args) : started.mode === 'headless' ? headless() : main();
run.catch((err: unknown) => {
  console.error('Factory in a Box failed to start:', err);
  app.exit(1);
});
