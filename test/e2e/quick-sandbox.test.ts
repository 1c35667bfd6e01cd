// A quick sandbox and a notification, as a user meets them in Chromium.
// 1. Against the web host serving the real app (real QEMU, no warm pool, so the
//    sandbox is restored from the image's snapshot): the user clicks Quick
//    sandbox, its shell opens in the window (the shell the restore started,
//    the only one), `uname -a` prints the guest's kernel, and typing `exit`
//    destroys the sandbox: no QEMU process is left.
// 2. Against the scripted app: with the notification permission granted through
//    the browser context, a task that reaches review raises Chromium's own
//    Notification (recorded on its way through, then handed to the real API).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../common/domain.js';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { startWebHost, type WebHost } from '../../main/host/web/web-host.js';
import { appPaths } from '../../main/state/paths.js';
import { chromiumMissingReason, openBrowser, type OpenBrowser } from './support/browser.js';
import { ensureE2eRendererBuilt } from './support/build.js';
import { qemuProcessesUnder, which } from './support/processes.js';
import { HELD, ScriptedApp } from './support/scripted-app.js';
import { ScriptedUi } from './support/scripted-ui.js';
import { terminalText, typeInTerminal } from './support/ui-driver.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const noChromium = chromiumMissingReason();
const skipReal = noChromium ?? (which('qemu-system-x86_64') ? undefined : 'qemu-system-x86_64 is not installed');
if (skipReal) console.log(`quick sandbox e2e skipped: ${skipReal}`);

describe.skipIf(!!skipReal)('a quick sandbox from the web UI (real sandbox)', () => {
  let dataDir: string;
  let app: FactoryApp;
  let host: WebHost;
  let browser: OpenBrowser;

  beforeAll(async () => {
    const staticDir = ensureE2eRendererBuilt(root);
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'factory-e2e-quick-'));
    app = await createFactoryApp({ host: 'web', paths: appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir }), warmPool: false });
    host = await startWebHost(app, { staticDir });
    browser = await openBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    await host?.close();
    await app?.dispose();
    const left = dataDir ? qemuProcessesUnder(dataDir) : [];
    for (const p of left) process.kill(p.pid, 'SIGKILL'); // never leave one behind, even on failure
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    expect(left, 'QEMU processes left after dispose').toEqual([]);
  });

  it('Quick sandbox opens a shell, uname -a prints, and exit destroys the sandbox', async () => {
    const { page, problems } = browser;
    await page.goto(host.url);
    await page.getByTestId('qemu-status').waitFor();
    // What the app did, in order: the shell's session opens before the sandbox runs.
    const order: string[] = [];
    const stop = app.onEvent((e) => {
      if (e.type === 'terminal.opened' && e.info.kind === 'shell') order.push('shell opened');
      if (e.type === 'task.updated' && e.task.kind === 'quick' && e.task.phase === 'running' && !order.includes('running')) order.push('running');
    });
    const clicked = Date.now();
    await page.getByTestId('quick-sandbox-button').click();
    // The shell's tab opens by itself: the shell the restore started, maybe before the sandbox runs.
    await expect.poll(() => page.getByTestId('terminal-pane').getAttribute('data-session-id').catch(() => null), { timeout: 8 * 60_000, interval: 100 }).toBeTruthy();
    await expect.poll(() => terminalText(page), { timeout: 60_000, interval: 50 }).toMatch(/# $/m);
    console.log(`quick sandbox: click to the shell's prompt in the page ${((Date.now() - clicked) / 1000).toFixed(2)} s`);
    const [booted] = (await app.api['tasks.list']({})).filter((t: Task) => t.kind === 'quick');
    await expect.poll(async () => (await app.api['tasks.get']({ taskId: booted!.id })).phase, { timeout: 60_000, interval: 250 }).toBe('running');
    const quick = await app.api['tasks.get']({ taskId: booted!.id });
    expect(quick).toMatchObject({ phase: 'running', sandbox: { status: 'running' }, repoPath: '' });
    // One shell: the page showed the restore's first shell and opened no second one.
    expect((await app.api['terminal.list']({ taskId: quick.id })).filter((t) => t.kind === 'shell')).toHaveLength(1);
    stop();
    expect(order).toEqual(['shell opened', 'running']);
    expect(qemuProcessesUnder(dataDir)).toHaveLength(1);
    expect(await page.getByTestId(`quick-cell-${quick!.id}`).textContent()).toContain('shell open until you exit it');

    await typeInTerminal(page, 'uname -a\r');
    await expect.poll(() => terminalText(page), { timeout: 60_000 }).toMatch(/Linux \S+ \d+\.\d+\S* .*GNU\/Linux/);
    await typeInTerminal(page, 'exit\r');

    await expect.poll(async () => (await app.api['tasks.get']({ taskId: quick!.id })).phase, { timeout: 60_000, interval: 250 }).toBe('closed');
    expect((await app.api['tasks.get']({ taskId: quick!.id })).sandbox.status).toBe('destroyed');
    await expect.poll(() => qemuProcessesUnder(dataDir).length, { timeout: 30_000 }).toBe(0);
    await expect.poll(() => page.getByTestId(`task-phase-${quick!.id}`).textContent()).toBe('closed');
    expect(problems).toEqual([]);
  });
});

/** Records each Notification the page makes (title, body, and whether Chromium showed it or refused it), then lets the real API make it. */
async function recordNotifications(page: Page): Promise<void> {
  await page.addInitScript(() => {
    const Real = window.Notification;
    const seen: Array<{ title: string; body?: string; tag?: string; shown: boolean; error: boolean }> = [];
    (window as unknown as { __notices: typeof seen }).__notices = seen;
    window.Notification = new Proxy(Real, {
      construct(target, args: [string, NotificationOptions?]) {
        const n = Reflect.construct(target, args) as Notification;
        const rec = { title: args[0], body: args[1]?.body, tag: args[1]?.tag, shown: false, error: false };
        seen.push(rec);
        n.addEventListener('show', () => (rec.shown = true));
        n.addEventListener('error', () => (rec.error = true));
        return n;
      },
      // The static members (permission, requestPermission) answer for the real class.
      get(target, key) {
        const v = Reflect.get(target, key, target) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  });
}

describe.skipIf(!!noChromium)('a browser notification when a task reaches review (scripted app)', () => {
  let ui: ScriptedUi;

  beforeAll(async () => {
    ui = await ScriptedUi.start(new ScriptedApp(100));
  });

  afterAll(async () => {
    await ui?.close();
  });

  it('with the permission granted, Chromium notifies once when the task reaches review', async () => {
    const { page, context } = ui.browser;
    await context.grantPermissions(['notifications'], { origin: new URL(ui.host.url).origin });
    await recordNotifications(page);
    await page.goto(ui.host.url);
    await page.getByTestId('qemu-status').waitFor();
    expect(await page.evaluate(() => Notification.permission)).toBe('granted');

    await page.getByTestId('repo-path-input').fill(ui.repo);
    await page.getByTestId('task-text-input').fill(`Add a greeting ${HELD}`);
    await page.getByTestId('start-button').click();
    const taskId = (await page.locator('[data-testid^="task-row-"]').first().getAttribute('data-testid'))!.replace('task-row-', '');
    await expect.poll(() => ui.app.isHeld(taskId), { timeout: 30_000 }).toBe(true);
    // Stages ran and passed: nothing worth a notice yet.
    expect(await page.evaluate(() => (window as unknown as { __notices: unknown[] }).__notices)).toEqual([]);
    ui.app.release(taskId);
    await expect.poll(() => page.getByTestId(`task-phase-${taskId}`).textContent()).toBe('review');
    await expect
      .poll(() => page.evaluate(() => (window as unknown as { __notices: Array<{ title: string; body?: string; tag?: string; error: boolean }> }).__notices))
      .toEqual([{ title: 'Ready for review', body: `Add a greeting ${HELD}`, tag: `review-${taskId}`, shown: expect.any(Boolean), error: false }]);
    // A reload sees the task already in review: no second notice for the same news.
    await page.reload();
    await page.getByTestId(`task-phase-${taskId}`).waitFor();
    await page.waitForTimeout(500);
    expect(await page.evaluate(() => (window as unknown as { __notices: unknown[] }).__notices)).toEqual([]);
  });
});
