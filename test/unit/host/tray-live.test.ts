// The Electron tray over the real app: its menu follows the live task list, its
// Destroy ends a sandbox, and a task that fails raises a desktop notification.
// Electron itself is a double (no Electron runtime can be installed here, see
// test/support/electron-doubles.ts), and so is the VM layer (no VM boots in a unit
// test: the base image never arrives, or fails); the app, its task service, state
// on disk and git are real.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createFactoryApp, type FactoryApp } from '../../../main/app.js';
import { connectBridge } from '../../../main/host/electron/bridge.js';
import type { MenuItemLike } from '../../../main/host/electron/electron-parts.js';
import { appPaths } from '../../../main/state/paths.js';
import type { ImageStatus } from '../../../common/domain.js';
import { ElectronDouble, PAGE_FILE } from '../../support/electron-doubles.js';
import { makeRepo, tempDir } from '../../support/repo.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function realApp(ensure: () => Promise<unknown>): Promise<FactoryApp> {
  const dataDir = tempDir();
  const status: ImageStatus = { state: 'missing', version: 'test' };
  const a = await createFactoryApp({
    host: 'electron',
    paths: appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') }),
    vm: {
      images: { status: () => status, ensure },
      qemu: { checkInstalled: async () => ({ ok: true, version: '8' }), start: async () => { throw new Error('no VM in unit tests'); } },
    },
  });
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  cleanups.push(() => a.dispose());
  return a;
}

function connect(app: FactoryApp) {
  const electron = new ElectronDouble();
  const shown: Array<{ title: string; body: string }> = [];
  class NotificationDouble {
    constructor(private readonly o: { title: string; body: string }) {}
    static isSupported() {
      return true;
    }
    on() {}
    show() {
      shown.push(this.o);
    }
  }
  const disconnect = connectBridge({ ...electron.mainElectron, Notification: NotificationDouble }, app, electron.win, PAGE_FILE, () => {});
  cleanups.push(disconnect);
  const labels = (items: MenuItemLike[] = electron.trayMenu): string[] => items.flatMap((i) => [i.label ?? '---', ...(i.submenu ? labels(i.submenu).map((l) => `  ${l}`) : [])]);
  const find = (label: RegExp): MenuItemLike => {
    const all = (items: MenuItemLike[]): MenuItemLike[] => items.flatMap((i) => [i, ...all(i.submenu ?? [])]);
    const hit = all(electron.trayMenu).find((i) => label.test(i.label ?? ''));
    if (!hit) throw new Error(`no tray item ${label}: ${labels().join(' | ')}`);
    return hit;
  };
  return { electron, shown, labels, find };
}

describe('the tray over the live task list', () => {
  it('lists a quick sandbox while it boots, and its Destroy ends it and empties the list', async () => {
    const app = await realApp(() => new Promise(() => {})); // a base image that never arrives: the sandbox stays booting
    const tray = connect(app);
    expect(tray.labels()[0]).toBe('No running sandboxes');
    const q = await app.api['sandboxes.quick']({});
    await expect.poll(() => tray.labels()[0]).toBe('Running sandboxes (1)');
    expect(tray.labels()[1]).toMatch(/^quick sandbox — booting, \d+ s$/);
    const destroy = tray.find(/^Destroy$/);
    destroy.click!();
    await expect.poll(async () => (await app.api['tasks.get']({ taskId: q.id })).phase).toBe('closed');
    await expect.poll(() => tray.labels()[0]).toBe('No running sandboxes');
    // No notice for a quick sandbox the user closed.
    expect(tray.shown).toEqual([]);
  });

  it('"Quick sandbox (keep until destroyed)" starts a sandbox that outlives its shell; plain "Quick sandbox" does not', async () => {
    const app = await realApp(() => new Promise(() => {}));
    const tray = connect(app);
    tray.find(/^Quick sandbox \(keep until destroyed\)$/).click!();
    await expect.poll(async () => (await app.api['tasks.list']({})).map((t) => t.keep === true)).toEqual([true]);
    tray.find(/^Quick sandbox$/).click!();
    await expect.poll(async () => (await app.api['tasks.list']({})).map((t) => t.keep === true).sort()).toEqual([false, true]);
  });

  it('offers the repositories of earlier tasks, and notifies when a task fails', async () => {
    const app = await realApp(async () => {
      throw new Error('the base image could not be built');
    });
    const repo = await makeRepo({ files: { 'a.txt': 'a\n' } });
    cleanups.push(repo.cleanup);
    const tray = connect(app);
    const t = await app.api['tasks.create']({ repoPath: repo.dir, title: 'Add a greeting' });
    await expect.poll(async () => (await app.api['tasks.get']({ taskId: t.id })).phase).toBe('failed');
    await expect.poll(() => tray.shown).toEqual([{ title: 'Task failed', body: 'Add a greeting: the base image could not be built' }]);
    expect(tray.labels()).toContain(`  ${path.basename(repo.dir)} (…/${path.basename(path.dirname(repo.dir))})`);
  });
});
