// The app the CLI starts in the background, as a user meets it after a hooks
// session: `factory status` says what runs and when the app ends by itself;
// with nothing running it ends after the stated time (short here); `factory
// quit` ends it at once; neither command starts an app when none runs. No
// sandbox boots (the warm pool is off), but the app, its socket and its lock
// are the real ones.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, appPid, runCli, stopApp } from '../support/cli.js';
import { testImage } from '../support/image.js';

let dataDir: string;
const env = { FACTORY_WARM_POOL: '0', FACTORY_IDLE_EXIT_SEC: '4' };

async function gone(pid: number, timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  while (alive(pid)) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`the app (pid ${pid}) still runs after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return Date.now() - t0;
}

beforeAll(async () => {
  // The headless app checks the base image at start: have it ready, so only idleness is measured.
  await testImage();
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'idle-exit-'));
}, 15 * 60_000);
afterAll(async () => {
  await stopApp(dataDir);
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('the app the CLI started', () => {
  it('factory status and factory quit start no app when none runs', async () => {
    const status = await runCli(dataDir, ['status'], { env });
    expect(status.code).toBe(3);
    expect(status.stdout).toContain('no app is running');
    expect((await runCli(dataDir, ['quit'], { env })).code).toBe(0);
    expect(appPid(dataDir)).toBeUndefined();
  });

  it('says when it ends by itself, and ends once nothing ran for that long', async () => {
    expect((await runCli(dataDir, ['ls'], { env })).code).toBe(0);
    const pid = appPid(dataDir)!;
    expect(alive(pid)).toBe(true);
    const status = await runCli(dataDir, ['status'], { env });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/started by the CLI: nothing runs; it ends by itself in \d+ s/);
    expect(status.stdout).toContain('running: nothing');
    const ms = await gone(pid, 30_000);
    expect(fs.existsSync(path.join(dataDir, 'factory.sock'))).toBe(false);
    expect((await runCli(dataDir, ['status'], { env })).code).toBe(3);
    console.log(`the idle app ended ${ms} ms after factory status (idle exit after 4 s)`);
  }, 120_000);

  it('factory quit ends it at once', async () => {
    expect((await runCli(dataDir, ['ls'], { env: { ...env, FACTORY_IDLE_EXIT_SEC: '600' } })).code).toBe(0);
    const pid = appPid(dataDir)!;
    const quit = await runCli(dataDir, ['quit'], { env });
    expect(quit.code, quit.stderr).toBe(0);
    expect(quit.stdout).toContain(`the app (pid ${pid}) is ending`);
    await gone(pid, 20_000);
  }, 120_000);
});
