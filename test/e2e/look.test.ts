// Look rather than read, in Chromium (the scripted app behind the real web host):
// a task's stage timeline grows while a stage runs and marks a failure and its
// retry; the sandbox's CPU and memory come live from the host's real sampler (a
// small node process stands in for QEMU, which the scripted app never boots) and
// stop with the sandbox. axe finds nothing critical or serious on the task view in
// either colour scheme; it is saved as 1400×900 screenshots.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeViolations, screenshot, seriousViolations } from './support/axe.js';
import { chromiumMissingReason } from './support/browser.js';
import { FAILS, HELD, ScriptedApp } from './support/scripted-app.js';
import { ScriptedUi } from './support/scripted-ui.js';
import { startTask } from './support/ui-driver.js';

const missing = chromiumMissingReason();
if (missing) console.log(`look skipped: ${missing}`);

describe.skipIf(!!missing)('the task view at a glance', () => {
  let ui: ScriptedUi;
  let app: ScriptedApp;
  let heldId = '';

  beforeAll(async () => {
    app = new ScriptedApp(1500);
    app.sampleSandboxes(500);
    ui = await ScriptedUi.start(app);
    await ui.browser.page.setViewportSize({ width: 1400, height: 900 });
  });
  afterAll(async () => {
    await ui?.close();
  });

  const row = (name: string) => ui.browser.page.getByTestId(`timeline-${name}`);

  it('draws the timeline as stages run, the running one growing', async () => {
    const { page } = ui.browser;
    await page.goto(ui.host.url);
    heldId = await startTask(page, ui.repo, `${HELD} Add a greeting to the README`);
    await expect.poll(() => row('request').getAttribute('data-status'), { timeout: 30_000 }).toBe('running');
    const first = Number(await row('request').getAttribute('data-ms'));
    await expect.poll(async () => Number(await row('request').getAttribute('data-ms'))).toBeGreaterThan(first);
    await expect.poll(() => row('plan').getAttribute('data-status'), { timeout: 30_000 }).toBe('running');
    expect(await row('request').textContent()).toMatch(/^request passed in \d\.\d s$/);
    expect(await row('build').textContent()).toBe('build pending');
    await expect.poll(() => app.isHeld(heldId), { timeout: 60_000 }).toBe(true);
    // Six bars, left to right in order, each starting where the one before it ended or later.
    const bars = await page.evaluate(() =>
      [...document.querySelectorAll('[data-testid^="timeline-bar-"]')].map((b) => {
        const r = b.getBoundingClientRect();
        return { left: r.left, right: r.right };
      }),
    );
    expect(bars).toHaveLength(6);
    for (let i = 1; i < bars.length; i++) expect(bars[i]!.left).toBeGreaterThanOrEqual(bars[i - 1]!.right - 1);
  });

  it('shows the running sandbox\u2019s CPU and memory live, measured on the host', async () => {
    const { page } = ui.browser;
    const now = page.getByTestId('resource-now');
    await expect.poll(() => now.textContent(), { timeout: 30_000 }).toMatch(/^CPU \d+% · \d+ MiB$/);
    // The stand-in keeps a core about a third busy and holds a 64 MiB buffer: both show.
    await expect.poll(async () => Number(/CPU (\d+)%/.exec((await now.textContent()) ?? '')?.[1]), { timeout: 30_000 }).toBeGreaterThan(0);
    const mib = Number(/(\d+) MiB/.exec((await now.textContent()) ?? '')?.[1]);
    expect(mib).toBeGreaterThan(64);
    expect(mib).toBeLessThan(1024);
    // The sparkline fills as samples arrive.
    const points = () => page.getByTestId('spark-cpu').locator('polyline').getAttribute('points').then((p) => (p ? p.split(' ').length : 0));
    const before = await points();
    await expect.poll(points, { timeout: 30_000 }).toBeGreaterThan(before);
    expect(await page.getByTestId('spark-mem').getAttribute('aria-label')).toMatch(/^Memory over the last \d+ s: now \d+ MiB, peak \d+ MiB of a 1\.0 GiB guest$/);
    expect(await page.getByTestId('sandbox-memory-in-use').textContent()).toMatch(/· \d+ MiB in use$/);
  });

  it('marks a failed stage and its retry as attempt 2; axe finds no serious problem; screenshot', async () => {
    const { page, problems } = ui.browser;
    const failedId = await startTask(page, ui.repo, `${FAILS} Make the tests pass on Node 22`);
    await expect.poll(() => page.getByTestId(`task-phase-${failedId}`).textContent(), { timeout: 60_000 }).toBe('failed');
    expect(await row('test').getAttribute('data-status')).toBe('failed');
    expect(await row('test').textContent()).toMatch(/^test failed in \d\.\d s$/);
    await page.getByTestId('retry-button').click();
    await expect.poll(() => row('test').textContent(), { timeout: 30_000 }).toMatch(/attempt 2$/);
    await page.getByTestId('resource-now').waitFor();
    await page.getByTestId('task-title').scrollIntoViewIfNeeded();
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      expect(describeViolations(await seriousViolations(page)), scheme).toEqual([]);
      await screenshot(page, scheme === 'light' ? 'task-look' : 'task-look-dark');
    }
    await page.emulateMedia({ colorScheme: 'light' });
    expect(problems).toEqual([]);
  });

  it('stops measuring when the sandbox is destroyed, keeping the last values', async () => {
    const { page } = ui.browser;
    await page.getByTestId(`task-select-${heldId}`).click();
    await page.getByTestId('destroy-button').click();
    await page.getByTestId('destroy-confirmed-button').click();
    await expect.poll(() => page.getByTestId('resource-spark').getAttribute('data-state')).toBe('stopped');
    expect(await page.getByTestId('resource-now').textContent()).toMatch(/^last: CPU \d+% · \d+ MiB$/);
    const shown = await page.getByTestId('spark-cpu').locator('polyline').getAttribute('points');
    await page.waitForTimeout(1500);
    expect(await page.getByTestId('spark-cpu').locator('polyline').getAttribute('points')).toBe(shown);
  });
});
