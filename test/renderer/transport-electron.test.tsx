// The page under Electron: the real preload (run as a sandboxed preload) puts
// window.factory on jsdom's window, the renderer picks its transport as it does at
// start-up, and the real main-side wiring answers over recording IPC doubles.
// Doubles only because no Electron runtime can be installed on the machines these
// tests run on; test/support/electron-doubles.ts says what they copy.
import { act, cleanup, fireEvent, render, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { connectBridge } from '../../main/host/electron/bridge.js';
import { App } from '../../renderer/App.js';
import { FactoryController } from '../../renderer/state/controller.js';
import { ControllerContext } from '../../renderer/state/context.js';
import { createFactoryStore } from '../../renderer/state/store.js';
import { chooseBridge } from '../../renderer/transport/choose-bridge.js';
import { ElectronDouble, loadPreload, PAGE_FILE, smallApp } from '../support/electron-doubles.js';

let electron: ElectronDouble;
let disconnect: () => void;
let controller: FactoryController | undefined;

beforeEach(() => {
  electron = new ElectronDouble();
  electron.mainWorld = window;
  const app = smallApp({
    'system.status': () => ({ qemu: { ok: true }, image: { state: 'ready', version: 'v1' }, dataDir: '/data', host: 'electron' }),
    'tasks.list': () => [],
    'terminal.list': () => [],
    'settings.get': () => ({ defaultAgent: 'command', maxParallelTasks: 2, vmMemoryMb: 2048, vmCpus: 2, agents: ['command'] }),
  });
  disconnect = connectBridge(electron.mainElectron, app, electron.win, PAGE_FILE, () => {});
  loadPreload(electron);
});

afterEach(() => {
  cleanup();
  controller?.dispose();
  disconnect();
  delete (window as { factory?: unknown }).factory;
});

/** Starts the page as renderer/main.tsx does. */
function startPage() {
  const choice = chooseBridge(window);
  if (choice.kind !== 'electron') throw new Error(`expected the Electron transport, got ${choice.kind}`);
  controller = new FactoryController(choice.bridge, createFactoryStore());
  controller.start();
  render(
    <ControllerContext.Provider value={controller}>
      <App />
    </ControllerContext.Provider>,
  );
}

describe('the page under Electron', () => {
  it('offers the native folder picker, and the folder chosen there fills the repository field', async () => {
    startPage();
    electron.nextPickedFolder = '/home/me/projects/shop';
    fireEvent.click(await screen.findByTestId('pick-folder-button'));
    await waitFor(() => expect((screen.getByTestId('repo-path-input') as HTMLInputElement).value).toBe('/home/me/projects/shop'));
    expect(electron.dialogsOpened).toBe(1);
  });

  it("the tray's New task… brings its folder to the new-task form and puts the cursor in the task text", async () => {
    startPage();
    await screen.findByTestId('new-task-form');
    electron.nextPickedFolder = '/home/me/projects/api';
    await act(() => electron.clickTray('New task…'));
    await waitFor(() => expect((screen.getByTestId('repo-path-input') as HTMLInputElement).value).toBe('/home/me/projects/api'));
    expect(document.activeElement).toBe(screen.getByTestId('task-text-input'));
  });

  it('a folder dropped on the window fills the repository field with its path on disk', async () => {
    startPage();
    fireEvent.drop(await screen.findByTestId('drop-zone'), { dataTransfer: { files: [new File(['x'], 'my-repo')] } });
    await waitFor(() => expect((screen.getByTestId('repo-path-input') as HTMLInputElement).value).toBe('/dropped/my-repo'));
    expect(screen.queryByTestId('drop-note')).toBeNull();
  });
});
