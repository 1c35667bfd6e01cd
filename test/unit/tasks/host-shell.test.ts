// terminal.openHostShell through the whole app: a real shell (node-pty) on the
// host in the task's repository folder, resized and closed through the API. The
// VM layer is replaced (the task's provision fails at once); no sandbox is needed.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ImageStatus } from '../../../common/domain.js';
import { createFactoryApp, type FactoryApp } from '../../../main/app.js';
import { appPaths } from '../../../main/state/paths.js';
import { makeRepo, tempDir, type FixtureRepo } from '../../support/repo.js';
import { processAlive } from '../../../main/vm/file-lock.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

function noVm() {
  const status: ImageStatus = { state: 'missing', version: 'test' };
  return {
    images: { status: () => status, ensure: async () => { throw new Error('no image in unit tests'); } },
    qemu: { checkInstalled: async () => ({ ok: true, version: '8' }), start: async () => { throw new Error('no VM in unit tests'); } },
  };
}

const plain = (s: string) => s.replace(/\x1b\[[0-?]*[ -/]*[@-~]/g, '').replace(/\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g, '').replace(/\r/g, '');

async function appWithTask(): Promise<{ app: FactoryApp; repo: FixtureRepo; taskId: string; repoPath: string; output: (sessionId: string) => string }> {
  const dataDir = tempDir();
  const paths = appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') });
  const app = await createFactoryApp({ host: 'web', paths, vm: noVm() });
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  cleanups.push(() => app.dispose());
  const repo = await makeRepo({ files: { 'README.md': '# host shell\n' } });
  cleanups.push(repo.cleanup);
  repo.git('branch', 'factory/approved-one');
  const out = new Map<string, string>();
  app.onTerminalData((e) => out.set(e.sessionId, (out.get(e.sessionId) ?? '') + Buffer.from(e.data).toString('utf8')));
  const task = await app.api['tasks.create']({ repoPath: repo.dir, title: 'inspect on the host' });
  await expect.poll(async () => (await app.api['tasks.get']({ taskId: task.id })).phase).toBe('failed');
  return { app, repo, taskId: task.id, repoPath: task.repoPath, output: (id) => plain(out.get(id) ?? '') };
}

describe('terminal.openHostShell', () => {
  it('opens a shell only when asked, in the host repository, follows resizes, and leaves no process when closed', async () => {
    const { app, taskId, repoPath, output } = await appWithTask();
    // Creating (and failing) a task never starts anything on the host.
    expect((await app.api['terminal.list']({ taskId })).filter((t) => t.kind === 'host')).toEqual([]);

    const info = await app.api['terminal.openHostShell']({ taskId, cols: 100, rows: 30 });
    expect(info).toMatchObject({ taskId, kind: 'host', title: `host: ${path.basename(repoPath)}`, status: 'live', cols: 100, rows: 30 });
    expect((await app.api['terminal.list']({ taskId })).map((t) => t.id)).toContain(info.id);

    const type = (line: string) => app.api['terminal.write']({ sessionId: info.id, data: `${line}\r` });
    await type('echo "shell pid: $$"; GIT_PAGER=cat git branch --list; pwd');
    await expect.poll(() => output(info.id), { timeout: 10_000 }).toMatch(/^\* main$/m);
    await expect.poll(() => output(info.id)).toContain(`\n${repoPath}\n`);
    expect(output(info.id)).toMatch(/^ {2}factory\/approved-one$/m);
    const pid = Number(/shell pid: (\d+)/.exec(output(info.id))?.[1]);
    expect(pid).toBeGreaterThan(1);
    expect(processAlive(pid)).toBe(true);

    await app.api['terminal.resize']({ sessionId: info.id, cols: 123, rows: 41 });
    await type('stty size');
    await expect.poll(() => output(info.id), { timeout: 10_000 }).toMatch(/^41 123$/m);

    await app.api['terminal.close']({ sessionId: info.id });
    await expect.poll(async () => (await app.api['terminal.list']({ taskId })).find((t) => t.id === info.id)?.status, { timeout: 10_000 }).not.toBe('live');
    await expect.poll(() => processAlive(pid), { timeout: 10_000 }).toBe(false);
  });

  it('refuses a folder that is no longer a git repository, and an unknown task', async () => {
    const { app, repo, taskId, repoPath } = await appWithTask();
    fs.rmSync(path.join(repo.dir, '.git'), { recursive: true, force: true });
    await expect(app.api['terminal.openHostShell']({ taskId, cols: 80, rows: 24 })).rejects.toMatchObject({
      name: 'NotAGitRepository',
      message: `${repoPath} is no longer a git repository`,
    });
    fs.rmSync(repo.dir, { recursive: true, force: true });
    await expect(app.api['terminal.openHostShell']({ taskId, cols: 80, rows: 24 })).rejects.toMatchObject({ name: 'NotAGitRepository', message: `${repoPath} no longer exists` });
    await expect(app.api['terminal.openHostShell']({ taskId: 'nosuchtask', cols: 80, rows: 24 })).rejects.toMatchObject({ name: 'TaskNotFound' });
    expect((await app.api['terminal.list']({ taskId })).filter((t) => t.kind === 'host')).toEqual([]);
  });
});
