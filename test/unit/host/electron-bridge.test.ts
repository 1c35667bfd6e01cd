// The Electron bridge end to end, minus Electron: the real preload (compiled as the
// build compiles it, run as a sandboxed preload) and the real main-side wiring
// (connectBridge), joined by recording doubles of contextBridge, ipcRenderer,
// ipcMain, the folder dialog and the tray menu. Doubles only because no Electron runtime can be installed on the
// machines these tests run on; test/support/electron-doubles.ts says what they copy.
import { beforeEach, describe, expect, it } from 'vitest';
import { BRIDGE_CHANNELS, BRIDGE_WIRING, FACTORY_BRIDGE_MEMBERS, INVOKE_CHANNELS, PUSH_CHANNELS } from '../../../common/bridge.js';
import { type FactoryEvent, type TerminalDataEvent } from '../../../common/contract.js';
import { FactoryError } from '../../../common/errors.js';
import type { Task } from '../../../common/domain.js';
import { connectBridge } from '../../../main/host/electron/bridge.js';
import { electronBridge } from '../../../renderer/transport/electron-bridge.js';
import { ElectronDouble, loadPreload, PAGE_FILE, smallApp } from '../../support/electron-doubles.js';

const task = {
  id: 't1', title: 'demo', repoPath: '/repo', baseRef: 'main', baseCommit: 'abc', branch: 'factory/t1',
  createdAt: new Date(0).toISOString(), phase: 'running', sandbox: { status: 'running' }, stages: [],
} as unknown as Task;

function appForTest() {
  return smallApp({
    'tasks.list': () => [task],
    'tasks.get': ({ taskId }: { taskId: string }) => {
      throw new FactoryError('NotFound', `no task ${taskId}`, 'looked in the state store');
    },
  });
}

type Bridge = Record<(typeof FACTORY_BRIDGE_MEMBERS)[number], (...args: any[]) => any>;

let electron: ElectronDouble;
let app: ReturnType<typeof appForTest>;
let disconnect: () => void;
let quits: number;

beforeEach(() => {
  electron = new ElectronDouble();
  app = appForTest();
  quits = 0;
  disconnect = connectBridge(electron.mainElectron, app, electron.win, PAGE_FILE, () => quits++);
});

/** Uses every member of the exposed bridge once, as the renderer would. */
async function useEveryMember(bridge: Bridge) {
  const got = { events: [] as FactoryEvent[], data: [] as TerminalDataEvent[], requests: [] as Array<{ repoPath?: string }> };
  const offs = [
    bridge.onEvent((e: FactoryEvent) => got.events.push(e)),
    bridge.onTerminalData((e: TerminalDataEvent) => got.data.push(e)),
    bridge.onNewTaskRequest((r: { repoPath?: string }) => got.requests.push(r)),
  ];
  const list = await bridge.call('tasks.list', {});
  electron.nextPickedFolder = '/home/me/picked-repo';
  const picked = await bridge.pickRepoFolder();
  const dropped = bridge.pathForFile({ name: 'repo' });
  return { got, offs, list, picked, dropped };
}

describe('the preload bridge (window.factory)', () => {
  it('exposes exactly the FactoryBridge members, each a function, and requires nothing but electron', () => {
    const factory = loadPreload(electron);
    expect([...electron.exposed.keys()]).toEqual(['factory']);
    expect(Object.keys(factory).sort()).toEqual([...FACTORY_BRIDGE_MEMBERS].sort());
    for (const m of FACTORY_BRIDGE_MEMBERS) expect(typeof factory[m], m).toBe('function');
    expect(electron.required).toEqual(['electron']);
  });

  it('invokes only channels the main process handles, and main handles no channel the preload never uses', async () => {
    const bridge = loadPreload(electron) as Bridge;
    const { list, picked, dropped } = await useEveryMember(bridge);
    expect(list).toEqual([task]);
    expect(picked).toBe('/home/me/picked-repo');
    expect(dropped).toBe('/dropped/repo');
    expect(new Set(electron.invoked)).toEqual(new Set(INVOKE_CHANNELS));
    expect(new Set(electron.handlers.keys())).toEqual(new Set(INVOKE_CHANNELS));
    // Each member on the channel common/bridge.ts assigns it.
    expect(electron.invoked).toEqual([BRIDGE_CHANNELS.call, BRIDGE_CHANNELS.pickRepoFolder]);
  });

  it('listens on exactly the channels the main process pushes on, and each push reaches its listener', async () => {
    const bridge = loadPreload(electron) as Bridge;
    const { got, offs } = await useEveryMember(bridge);
    expect(electron.listenedTo).toEqual([BRIDGE_CHANNELS.onEvent, BRIDGE_CHANNELS.onTerminalData, BRIDGE_CHANNELS.onNewTaskRequest]);

    app.emit({ type: 'task.removed', taskId: 't1' });
    app.emitData({ sessionId: 's1', data: new TextEncoder().encode('hello') });
    electron.nextPickedFolder = '/home/me/from-tray';
    await electron.clickTray('New task…');
    electron.nextPickedFolder = undefined;
    await electron.clickTray('New task…'); // the user cancels the picker: the form still opens, without a folder

    expect(new Set(electron.sent.map((s) => s.channel))).toEqual(new Set(PUSH_CHANNELS));
    expect(new Set(electron.listenedTo)).toEqual(new Set(PUSH_CHANNELS));
    expect(got.events).toEqual([{ type: 'task.removed', taskId: 't1' }]);
    expect(got.data.map((d) => [d.sessionId, new TextDecoder().decode(d.data)])).toEqual([['s1', 'hello']]);
    expect(got.requests).toEqual([{ repoPath: '/home/me/from-tray' }, {}]);

    for (const off of offs) off();
    for (const channel of PUSH_CHANNELS) expect(electron.listenerCount(channel), channel).toBe(0);
  });

  it('carries a named error (name, message, detail) through contextBridge, which keeps only the message', async () => {
    const bridge = electronBridge(loadPreload(electron) as never);
    const err = await bridge.call('tasks.get', { taskId: 'zz' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FactoryError);
    expect([(err as FactoryError).name, (err as FactoryError).message, (err as FactoryError).detail]).toEqual([
      'NotFound', 'no task zz', 'looked in the state store',
    ]);
    const bad = await bridge.call('no.such.method' as never, {} as never).catch((e: unknown) => e);
    expect((bad as Error).name).toBe('UnknownMethod');
  });

  it('refuses calls and the folder picker to a frame that is not the app page (a page navigated or framed elsewhere)', async () => {
    const bridge = electronBridge(loadPreload(electron) as never);
    for (const url of ['https://evil.example/index.html', 'file:///tmp/index.html', 'about:blank']) {
      electron.senderFrameUrl = url;
      const err = await bridge.call('tasks.list', {}).catch((e: unknown) => e);
      expect((err as Error).name, url).toBe('Forbidden');
      electron.nextPickedFolder = '/home/me/secret';
      expect(await bridge.pickRepoFolder(), url).toBeUndefined();
    }
    expect(electron.dialogsOpened).toBe(0);
  });

  it('disconnecting removes every handler and the tray, and quit in the tray quits', async () => {
    await electron.clickTray('Quit');
    expect(quits).toBe(1);
    disconnect();
    expect(electron.handlers.size).toBe(0);
    expect(electron.trayDestroyed).toBe(true);
  });
});

describe("the renderer's Electron adapter", () => {
  it('keeps every member of the preload bridge: the folder picker and the tray request reach the page', async () => {
    const bridge = electronBridge(loadPreload(electron) as never) as unknown as Bridge;
    expect(Object.keys(bridge).sort()).toEqual([...FACTORY_BRIDGE_MEMBERS].sort());
    const { got, picked } = await useEveryMember(bridge);
    expect(picked).toBe('/home/me/picked-repo');
    electron.nextPickedFolder = '/home/me/from-tray';
    await electron.clickTray('New task…');
    expect(got.requests).toEqual([{ repoPath: '/home/me/from-tray' }]);
  });
});

describe('common/bridge.ts', () => {
  it('gives every member a distinct channel, except pathForFile, which the preload answers itself', () => {
    const channels = Object.values(BRIDGE_WIRING).flatMap((w) => (w ? [w.channel] : []));
    expect(new Set(channels).size).toBe(channels.length);
    expect(Object.entries(BRIDGE_WIRING).filter(([, w]) => w === null).map(([m]) => m)).toEqual(['pathForFile']);
    expect([...INVOKE_CHANNELS, ...PUSH_CHANNELS].sort()).toEqual(channels.sort());
  });
});
