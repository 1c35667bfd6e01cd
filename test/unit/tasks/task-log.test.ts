// A failure the app steps over must leave a trace in the app log. The case: a
// task's run ends (here its boot fails) and recording that end on disk fails,
// because the task's state file was replaced by a folder. The run is over either
// way, so nothing is thrown; before the app log existed this went to stderr only.
// The VM layer is a stand-in whose image build waits for the test (no VM is
// needed to reach this point); git, the state on disk and the log are real.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createFactoryApp } from '../../../main/app.js';
import { appPaths } from '../../../main/state/paths.js';
import type { ImageStatus } from '../../../common/domain.js';
import { makeRepo, tempDir } from '../../support/repo.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

describe('the app log of the task service', () => {
  it('records a failed write of the end of a run, with the task and the reason', async () => {
    const dataDir = tempDir();
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    let buildStarted!: () => void;
    const started = new Promise<void>((r) => (buildStarted = r));
    let failBuild!: (err: Error) => void;
    const status: ImageStatus = { state: 'missing', version: 'test' };
    const paths = appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') });
    const app = await createFactoryApp({
      host: 'web',
      paths,
      vm: {
        images: {
          status: () => status,
          ensure: () => {
            buildStarted();
            return new Promise((_, reject) => (failBuild = reject));
          },
        },
        qemu: { checkInstalled: async () => ({ ok: true, version: '8' }), start: async () => { throw new Error('no VM here'); } },
      },
    });
    cleanups.push(() => app.dispose());
    const repo = await makeRepo({ files: { a: 'a\n' } });
    cleanups.push(repo.cleanup);

    const task = await app.api['tasks.create']({ repoPath: repo.dir, title: 'log it' });
    await started;
    // The state file becomes a non-empty folder: the atomic rename onto it fails, even as root.
    const stateFile = path.join(paths.state, 'tasks', `${task.id}.json`);
    fs.rmSync(stateFile);
    fs.mkdirSync(path.join(stateFile, 'in-the-way'), { recursive: true });
    failBuild(new Error('image build failed in the test'));

    const logFile = path.join(paths.logs, 'app.log');
    const entry = () =>
      (fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').filter(Boolean) : [])
        .map((l) => JSON.parse(l) as { level: string; component: string; msg: string; taskId?: string; err?: { message: string; code?: string } })
        .find((l) => l.msg === 'recording the end of its run failed');
    await expect.poll(entry, { timeout: 10_000 }).toBeDefined();
    expect(entry()).toMatchObject({ level: 'warn', component: 'tasks', taskId: task.id, err: { code: expect.stringMatching(/^(EISDIR|ENOTEMPTY|EEXIST|EPERM)$/) } });
    expect(fs.readdirSync(path.join(paths.state, 'tasks')).filter((n) => n.endsWith('.tmp'))).toEqual([]);
    // A step that could not be saved does not keep the task from ending: it shows as failed, with its reason.
    const shown = await app.api['tasks.get']({ taskId: task.id });
    expect(shown.phase).toBe('failed');
    expect(shown.error?.message).toContain('image build failed in the test');
  });
});
