// The Settings screen in Chromium, by keyboard only (the scripted app behind the
// real web host, whose contract validation refuses bad values as it does for the
// real app): a change is saved, a bad value is refused next to its field with what
// was typed kept, unsaved changes are named and Esc discards them, the one Save
// stays in view for a change at the foot of the form (the egress rules), and axe
// finds nothing critical or serious, in both colour schemes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeViolations, screenshot, seriousViolations } from './support/axe.js';
import { chromiumMissingReason } from './support/browser.js';
import { focused, tabTo } from './support/keyboard.js';
import { ScriptedApp } from './support/scripted-app.js';
import { ScriptedUi } from './support/scripted-ui.js';

const missing = chromiumMissingReason();
if (missing) console.log(`settings skipped: ${missing}`);

describe.skipIf(!!missing)('the Settings screen by keyboard', () => {
  let ui: ScriptedUi;
  let app: ScriptedApp;

  beforeAll(async () => {
    app = new ScriptedApp(40);
    ui = await ScriptedUi.start(app);
    await ui.browser.page.setViewportSize({ width: 1400, height: 900 });
  });
  afterAll(async () => {
    await ui?.close();
  });

  /** Focuses a field by Tab and replaces what it holds, as a user selecting all and typing. */
  async function retype(testId: string, text: string, opts: { backwards?: boolean; max?: number } = {}) {
    const { page } = ui.browser;
    await tabTo(page, testId, { max: 60, ...opts });
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.type(text);
  }

  it('opens Settings from the header and saves a change', async () => {
    const { page } = ui.browser;
    await page.goto(ui.host.url);
    await page.getByTestId('qemu-status').waitFor();
    await tabTo(page, 'nav-settings');
    await page.keyboard.press('Enter');
    await page.getByTestId('settings-form').waitFor();
    expect(await page.getByTestId('nav-settings').getAttribute('aria-current')).toBe('page');
    // 1024 MiB reads as 1 GiB; the layer budget in GiB; no byte counts anywhere on the screen.
    expect(await page.getByTestId('setting-vmMemoryMb').inputValue()).toBe('1');
    expect(await page.getByTestId('setting-vmMemoryMb-unit').inputValue()).toBe('GiB');
    expect(await page.getByTestId('settings-screen').textContent()).not.toMatch(/\d{7,}/);

    await retype('setting-vmCpus', '4');
    // Save is above the fields, in the bar that names what is unsaved.
    await tabTo(page, 'settings-save', { backwards: true });
    await page.keyboard.press('Enter');
    await page.getByTestId('settings-saved').waitFor();
    expect(app.settingsSaved).toEqual([{ vmCpus: 4 }]);
    expect(await page.getByTestId('setting-vmCpus').inputValue()).toBe('4');
  });

  it('shows the host\u2019s refusal of a bad value next to its field and keeps what was typed', async () => {
    const { page, problems } = ui.browser;
    // 100 GiB is more than a sandbox may have: the web host's validation refuses it.
    await page.getByTestId('nav-settings').focus();
    await retype('setting-vmMemoryMb', '100');
    await retype('setting-terminalLogRetentionDays', '14');
    await page.keyboard.press('Enter'); // Enter in a field submits the form
    const error = page.getByTestId('setting-vmMemoryMb-error');
    await error.waitFor();
    expect(await error.textContent()).toBe('Memory per sandbox: must be at most 64 GiB');
    expect(await page.getByTestId('setting-vmMemoryMb').getAttribute('aria-invalid')).toBe('true');
    expect(await page.getByTestId('setting-vmMemoryMb').inputValue()).toBe('100');
    expect(await page.getByTestId('setting-terminalLogRetentionDays').inputValue()).toBe('14');
    expect(app.settingsSaved).toHaveLength(1);
    expect(app.settings.vmMemoryMb).toBe(1024);
    expect((await focused(page)).invisible).toBeNull();

    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      expect(describeViolations(await seriousViolations(page)), scheme).toEqual([]);
      await screenshot(page, scheme === 'light' ? 'settings' : 'settings-dark');
    }
    await page.emulateMedia({ colorScheme: 'light' });

    // Fixed: 2 GiB is saved as 2048 MiB, with the other change that waited.
    await retype('setting-vmMemoryMb', '2', { backwards: true });
    await tabTo(page, 'settings-save', { backwards: true });
    await page.keyboard.press('Enter');
    await page.getByTestId('settings-saved').waitFor();
    expect(app.settingsSaved.at(-1)).toEqual({ vmMemoryMb: 2048, terminalLogRetentionDays: 14 });
    expect(await page.getByTestId('setting-vmMemoryMb-error').count()).toBe(0);
    expect(problems.filter((p) => !p.includes('status of 400'))).toEqual([]);
  });

  it('names what is unsaved under the one Save, and Esc discards it with the focus on Save', async () => {
    const { page, problems } = ui.browser;
    expect(await page.getByRole('button', { name: /^Save/ }).count()).toBe(1);
    await retype('setting-vmCpus', '6');
    expect(await page.getByTestId('settings-unsaved').textContent()).toBe('Unsaved: CPUs per sandbox. Esc discards.');
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await page.keyboard.press('Escape');
    expect(await page.getByTestId('setting-vmCpus').inputValue()).toBe('4');
    expect(await page.getByTestId('settings-unsaved').textContent()).toBe('No unsaved changes.');
    const f = await focused(page);
    expect(f.testId).toBe('settings-save');
    expect(f.invisible).toBeNull();
    expect(app.settingsSaved).toHaveLength(2);
    expect(problems.filter((p) => !p.includes('status of 400'))).toEqual([]);
  });

  it('keeps the one Save in view at 1280×800 for a change at the foot of the form, and saves the rules with it', async () => {
    const { page, problems } = ui.browser;
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(ui.host.url);
    await page.getByTestId('nav-settings').click();
    await page.getByTestId('settings-form').waitFor();
    const rulesBefore = (app.settings.egressRules as unknown[]).length;
    // The last field of the default egress rules is far below the bar.
    const last = rulesBefore - 1;
    await page.getByTestId('settings-save').focus();
    await retype(`egress-rule-${last}-addresses`, '10.20.0.0/16', { max: 200 });
    // The page scrolled to the field: the screen's heading, just above the bar, is gone off the top.
    expect((await page.locator('#settings-heading').boundingBox())!.y).toBeLessThan(0);
    // The bar is on screen and on top: what is at its Save button's centre is that button.
    const onTop = await page.evaluate(() => {
      const save = document.querySelector('[data-testid="settings-save"]')!;
      const r = save.getBoundingClientRect();
      const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
      return { inView: r.top >= 0 && r.bottom <= innerHeight, hit: !!hit && save.contains(hit) };
    });
    expect(onTop).toEqual({ inView: true, hit: true });
    expect(await page.getByTestId('settings-unsaved').textContent()).toBe('Unsaved: Default egress rules. Esc discards.');
    expect(await page.getByTestId(`egress-rule-${last}-addresses`).evaluate((e) => e.closest('[data-testid="settings-form"]') !== null)).toBe(true);
    // Enter in the field saves the whole form: the rules go in the one settings.set.
    await page.keyboard.press('Enter');
    await page.getByTestId('settings-saved').waitFor();
    const sent = app.settingsSaved.at(-1) as { egressRules: Array<{ addresses?: string[] }> };
    expect(Object.keys(sent)).toEqual(['egressRules']);
    expect(sent.egressRules).toHaveLength(rulesBefore);
    expect(sent.egressRules[last]!.addresses).toEqual(['10.20.0.0/16']);
    expect(await page.getByTestId('settings-unsaved').textContent()).not.toContain('Unsaved');
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      expect(describeViolations(await seriousViolations(page)), scheme).toEqual([]);
    }
    await page.emulateMedia({ colorScheme: 'light' });
    expect(problems.filter((p) => !p.includes('status of 400'))).toEqual([]);
  });
});
