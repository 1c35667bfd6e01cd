// The terminal-log retention as a user sets it: through the app's settings API,
// kept on disk, applied by the app at its next start (no VM: the image store
// refuses, which nothing here needs).
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { ImageStatus } from '../../../common/domain.js';
import { createFactoryApp, type FactoryApp } from '../../../main/app.js';
import { appPaths, type AppPaths } from '../../../main/state/paths.js';
import { spawnHostShell } from '../../../main/terminal/host-shell.js';
import { TerminalService } from '../../../main/terminal/terminal-service.js';
import { tempDir } from '../../support/repo.js';

const DAY = 24 * 60 * 60 * 1000;
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function startApp(paths: AppPaths, settings?: { terminalLogRetentionDays: number }): Promise<FactoryApp> {
  const status: ImageStatus = { state: 'missing', version: 'test' };
  const a = await createFactoryApp({
    host: 'web',
    paths,
    vm: {
      images: { status: () => status, ensure: async () => { throw new Error('no image in unit tests'); } },
      qemu: { checkInstalled: async () => ({ ok: true, version: '8' }), start: async () => { throw new Error('no VM in unit tests'); } },
    },
    ...(settings ? { settings } : {}),
  });
  cleanups.push(() => a.dispose());
  return a;
}

/** A finished stage log written `daysAgo` days ago, as an earlier run of the app would have left it. */
async function seedLog(logDir: string, daysAgo: number): Promise<string> {
  const svc = new TerminalService({ logDir, emit: () => {}, emitData: () => {}, now: () => Date.now() - daysAgo * DAY });
  const { source } = spawnHostShell({ cwd: logDir, cols: 80, rows: 24, shell: '/bin/sh', args: ['-c', 'echo seeded'] });
  const info = svc.register({ taskId: 'old-task', kind: 'stage', title: 'build', cols: 80, rows: 24, source, persistLog: true });
  await svc.waitForExit(info.id);
  await svc.dispose();
  return info.id;
}

it('keeps the retention setting and applies it to old terminal logs at the next start', async () => {
  const dataDir = tempDir('term-retention-');
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const paths = appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') });
  const logDir = path.join(paths.logs, 'terminals');
  fs.mkdirSync(logDir, { recursive: true });
  const id = await seedLog(logDir, 10);

  const first = await startApp(paths);
  // The default keeps 30 days: a 10-day-old log is still listed.
  expect((await first.api['settings.get']({})).terminalLogRetentionDays).toBe(30);
  expect((await first.api['terminal.list']({})).map((i) => i.id)).toEqual([id]);
  expect((await first.api['settings.set']({ terminalLogRetentionDays: 7 })).terminalLogRetentionDays).toBe(7);
  await expect(first.api['settings.set']({ terminalLogRetentionDays: -1 })).rejects.toThrow(/terminalLogRetentionDays|>=0|too small/i);
  // Changed settings apply at the next start, not under a running app.
  expect((await first.api['terminal.list']({})).map((i) => i.id)).toEqual([id]);
  await first.dispose();

  const second = await startApp(paths);
  expect(await second.api['terminal.list']({})).toEqual([]);
  expect(fs.readdirSync(logDir).filter((f) => f.startsWith(id))).toEqual([]);
  await second.dispose();

  // 0 keeps logs forever.
  const ancient = await seedLog(logDir, 3000);
  const third = await startApp(paths, { terminalLogRetentionDays: 0 });
  expect((await third.api['terminal.list']({})).map((i) => i.id)).toEqual([ancient]);
});
