// Removing a finished task takes its logs with it: the terminal logs of its
// stages (kept across restarts) and the sandbox's serial log, which Destroy keeps. The app is real; only QEMU is absent.
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { createFactoryApp, type FactoryApp } from '../../../main/app.js';
import { appPaths } from '../../../main/state/paths.js';
import { StateStore } from '../../../main/state/state-store.js';
import { makeRepo, tempDir } from '../../support/repo.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

function filesUnder(dir: string): string[] {
  return fs.existsSync(dir) ? fs.readdirSync(dir, { recursive: true }).map(String) : [];
}

describe('remove', () => {
  it('deletes the task with its terminal logs and its sandbox folder with the serial log', async () => {
    const dataDir = tempDir();
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const repo = await makeRepo({ files: { a: 'a\n' } });
    cleanups.push(repo.cleanup);
    const paths = appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') });
    // A task whose sandbox was destroyed: its folder keeps the serial log.
    const sandboxDir = path.join(paths.sandboxes, 'donedone');
    fs.mkdirSync(sandboxDir, { recursive: true });
    fs.writeFileSync(path.join(sandboxDir, 'serial.log'), 'Debian GNU/Linux 12 sandbox ttyS0\n');
    await new StateStore({ dir: paths.state }).saveTask({
      version: 1,
      task: {
        id: 'donedone', title: 't', repoPath: repo.dir, baseRef: 'HEAD', baseCommit: repo.head(), branch: 'factory/donedone',
        createdAt: new Date().toISOString(), phase: 'rejected', sandbox: { status: 'destroyed' }, stages: [], decision: { kind: 'rejected', at: new Date().toISOString() },
      },
      sandboxDir,
    });
    // The logs of a stage that ran before the app restarted, and of another task's stage.
    const terminalDir = path.join(paths.logs, 'terminals');
    fs.mkdirSync(terminalDir, { recursive: true });
    for (const [id, taskId] of [['stage-log-1', 'donedone'], ['other-log', 'othertsk']]) {
      fs.writeFileSync(path.join(terminalDir, `${id}.log`), `$ make build\r\nbuilt for ${taskId}\r\n`);
      const info = { id, taskId, kind: 'stage', title: 'build', status: 'exited', exitCode: 0, cols: 80, rows: 24 };
      fs.writeFileSync(path.join(terminalDir, `${id}.json`), JSON.stringify({ version: 1, info, createdAt: Date.now(), endedAt: Date.now() }));
    }
    const never = async () => {
      throw new Error('no VM in unit tests');
    };
    const a: FactoryApp = await createFactoryApp({
      host: 'web',
      paths,
      vm: { images: { status: () => ({ state: 'missing', version: 'test' }), ensure: never }, qemu: { checkInstalled: async () => ({ ok: true }), start: never } },
    });
    cleanups.push(() => a.dispose());
    const terminalLogs = path.join(paths.logs, 'terminals');
    expect((await a.api['terminal.list']({ taskId: 'donedone' })).map((t) => t.id)).toEqual(['stage-log-1']);
    await a.api['tasks.remove']({ taskId: 'donedone' });
    // Its stage log is gone; another task's log stays.
    expect(filesUnder(terminalLogs).sort()).toEqual(['other-log.json', 'other-log.log']);
    expect(await a.api['terminal.list']({ taskId: 'donedone' })).toEqual([]);
    expect(fs.existsSync(sandboxDir)).toBe(false);
    await expect(a.api['tasks.get']({ taskId: 'donedone' })).rejects.toMatchObject({ name: 'TaskNotFound' });
  });
});
