// After the decision, in Chromium through the web host with the scripted app
// behind it: the card says the sandbox was destroyed (or until when it is kept),
// the next steps on an approved branch run the host's own code on a real git
// repository (copy the name, open the editor, check out after saying what that
// changes, push to a local bare repository), and the board can be filtered
// (kept across a reload), archived and cleared.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { clockTime } from '../../renderer/components/sandbox-words.js';
import { gitIn, makeRepo, tempDir, type FixtureRepo } from '../support/repo.js';
import { describeViolations, screenshot, seriousViolations } from './support/axe.js';
import { chromiumMissingReason } from './support/browser.js';
import { FAILS, ScriptedApp } from './support/scripted-app.js';
import { ScriptedUi } from './support/scripted-ui.js';
import { startTask } from './support/ui-driver.js';

const missing = chromiumMissingReason();
if (missing) console.log(`lifecycle skipped: ${missing}`);

describe.skipIf(!!missing)('after the decision, in Chromium', () => {
  let ui: ScriptedUi;
  let app: ScriptedApp;
  let repo: FixtureRepo;
  let scratch: string;
  let bare: string;
  let editorArgv: string;
  const ids: Record<string, string> = {};
  const phase = (page: Page, id: string) => page.getByTestId(`task-phase-${id}`).textContent();
  const rows = (page: Page) => page.locator('[data-testid^="task-row-"]').evaluateAll((els) => els.map((e) => e.getAttribute('data-testid')!.slice('task-row-'.length)));

  beforeAll(async () => {
    app = new ScriptedApp(40);
    app.realBranches = true;
    scratch = tempDir('factory-lifecycle-');
    // The user's "editor": records the arguments it was started with.
    editorArgv = path.join(scratch, 'editor-argv.json');
    const editor = path.join(scratch, 'my-editor');
    fs.writeFileSync(editor, `#!${process.execPath}\nrequire('fs').writeFileSync(${JSON.stringify(editorArgv)}, JSON.stringify(process.argv.slice(2)));\n`, { mode: 0o755 });
    app.editorCommand = editor;
    repo = await makeRepo({ files: { 'a.txt': 'main\n' } });
    bare = path.join(scratch, 'origin.git');
    fs.mkdirSync(bare);
    gitIn(bare, ['init', '-q', '--bare']);
    repo.git('remote', 'add', 'origin', bare);
    ui = await ScriptedUi.start(app);
    await ui.browser.page.setViewportSize({ width: 1400, height: 900 });
    await ui.browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(ui.host.url).origin });
  });
  afterAll(async () => {
    await ui?.close();
    repo?.cleanup();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  it('after Approve the sandbox is destroyed and the card says so; copy, open in editor, check out and push work', async () => {
    const { page, problems } = ui.browser;
    await page.goto(ui.host.url);
    const id = (ids.approved = await startTask(page, repo.dir, 'Add a greeting'));
    await expect.poll(() => phase(page, id), { timeout: 30_000 }).toBe('review');
    await page.getByTestId('review-file').first().waitFor();
    await page.getByTestId('approve-button').click();
    await expect.poll(() => page.getByTestId(`task-sandbox-${id}`).textContent(), { timeout: 15_000 }).toBe('sandbox destroyed');
    expect(await page.getByTestId('sandbox-status').getAttribute('data-status')).toBe('destroyed');
    const branch = `factory/${id}`;

    const steps = page.getByTestId('next-steps');
    await steps.getByTestId('push-remote').waitFor();
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await steps.scrollIntoViewIfNeeded();
    await screenshot(page, 'approved-next-steps');

    await page.getByTestId('copy-branch-button').click();
    await expect.poll(() => page.getByTestId('next-step-status').textContent()).toBe(`Copied ${branch} to the clipboard.`);
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(branch);

    await page.getByTestId('open-editor-button').click();
    await expect.poll(() => fs.existsSync(editorArgv), { timeout: 15_000 }).toBe(true);
    expect(JSON.parse(fs.readFileSync(editorArgv, 'utf8'))).toEqual([repo.dir]);

    // An unfinished edit of the user's own: the checkout says what it would change and refuses.
    repo.write('a.txt', 'my unfinished edit\n');
    await page.getByTestId('checkout-button').click();
    await expect.poll(() => page.getByTestId('checkout-what').textContent()).toContain(`from branch main to ${branch}`);
    expect(await page.getByTestId('checkout-dirty').textContent()).toContain('uncommitted changes in a.txt');
    expect(await page.getByTestId('checkout-confirmed-button').isDisabled()).toBe(true);
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await page.getByTestId('checkout-cancel-button').click();
    expect(repo.git('symbolic-ref', '--short', 'HEAD').trim()).toBe('main');

    repo.git('checkout', '--', 'a.txt');
    await page.getByTestId('checkout-button').click();
    await page.getByTestId('checkout-what').waitFor();
    expect(await page.getByTestId('checkout-dirty').count()).toBe(0);
    await page.getByTestId('checkout-confirmed-button').click();
    await expect.poll(() => page.getByTestId('next-step-status').textContent()).toContain(`Checked out: ${branch} is now the current branch`);
    expect(repo.git('symbolic-ref', '--short', 'HEAD').trim()).toBe(branch);
    expect(await page.getByTestId('checkout-button').textContent()).toBe('Checked out');

    expect(await page.getByTestId('push-remote').inputValue()).toBe('origin');
    await page.getByTestId('push-button').click();
    await expect.poll(() => page.getByTestId('next-step-status').textContent(), { timeout: 30_000 }).toBe(`Pushed ${branch} to origin.`);
    expect(await page.getByTestId('push-output').textContent()).toContain(`[new branch]      ${branch} -> ${branch}`);
    expect(gitIn(bare, ['rev-parse', `refs/heads/${branch}`]).trim()).toBe(repo.git('rev-parse', branch).trim());
    expect(problems).toEqual([]);
  });

  it('keeps the sandbox after the decision when the setting says so, and the card says until when', async () => {
    const { page } = ui.browser;
    app.keepMinutes = 45;
    repo.git('switch', '-q', 'main');
    const id = (ids.kept = await startTask(page, repo.dir, 'Keep me for a look'));
    await expect.poll(() => phase(page, id), { timeout: 30_000 }).toBe('review');
    await page.getByTestId('review-file').first().waitFor();
    await page.getByTestId('reject-button').click();
    await expect.poll(() => page.getByTestId('decision').getAttribute('data-kind')).toBe('rejected');
    const keptUntil = (await app.api['tasks.get']({ taskId: id })).sandbox.keptUntil!;
    expect(Date.parse(keptUntil) - Date.now()).toBeGreaterThan(44 * 60_000);
    await expect.poll(() => page.getByTestId(`task-sandbox-${id}`).textContent()).toBe(`sandbox kept until ${clockTime(keptUntil)}`);
    expect(await page.getByTestId('sandbox-status').textContent()).toContain(`sandbox kept until ${clockTime(keptUntil)}`);
    // A rejected task has no branch to work with: no next steps.
    expect(await page.getByTestId('next-steps').count()).toBe(0);
    app.keepMinutes = 0;
  });

  it('filters the board by state and by repository, and the filter survives a reload', async () => {
    const { page, problems } = ui.browser;
    const id = (ids.failed = await startTask(page, ui.repo, `${FAILS} Break the tests`));
    await expect.poll(() => phase(page, id), { timeout: 30_000 }).toBe('failed');
    expect((await rows(page)).sort()).toEqual([ids.approved, ids.kept, ids.failed].sort());

    await page.getByTestId('filter-state').selectOption('failed');
    expect(await rows(page)).toEqual([ids.failed]);
    expect(await page.getByTestId('filter-count').textContent()).toBe('1 of 3 shown');
    await page.reload();
    await page.getByTestId(`task-row-${ids.failed}`).waitFor();
    expect(await rows(page)).toEqual([ids.failed]);
    expect(await page.getByTestId('filter-state').inputValue()).toBe('failed');

    await page.getByTestId('filter-state').selectOption('done');
    expect((await rows(page)).sort()).toEqual([ids.approved, ids.kept].sort());
    await page.getByTestId('filter-state').selectOption('all');
    await page.getByTestId('filter-repo').selectOption(ui.repo);
    expect(await rows(page)).toEqual([ids.failed]);
    await page.reload();
    await page.getByTestId(`task-row-${ids.failed}`).waitFor();
    expect(await page.getByTestId('filter-repo').inputValue()).toBe(ui.repo);
    expect(await rows(page)).toEqual([ids.failed]);
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await page.getByTestId('filter-repo').selectOption('');
    expect((await rows(page)).length).toBe(3);
    expect(problems).toEqual([]);
  });

  it('archives a task (hidden, listed under Archived, restorable) and removes one after asking', async () => {
    const { page, problems } = ui.browser;
    await page.getByTestId(`task-select-${ids.approved}`).click();
    await page.getByTestId('archive-button').click();
    await expect.poll(() => rows(page)).not.toContain(ids.approved);
    const archived = page.getByTestId('archived-tasks');
    await archived.locator('summary').click();
    await page.getByTestId(`archived-${ids.approved}`).waitFor();
    expect(await archived.locator('summary').textContent()).toBe('Archived (1)');
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await page.getByTestId(`restore-${ids.approved}`).click();
    await expect.poll(() => rows(page)).toContain(ids.approved);
    expect(await page.getByTestId('archived-tasks').count()).toBe(0);

    await page.getByTestId(`task-select-${ids.failed}`).click();
    await page.getByTestId('remove-button').click();
    await page.getByTestId('remove-confirm').waitFor();
    // The confirmation passes axe in both colour schemes.
    for (const colorScheme of ['dark', 'light'] as const) {
      await page.emulateMedia({ colorScheme });
      expect(describeViolations(await seriousViolations(page)), `remove confirmation, ${colorScheme}`).toEqual([]);
    }
    await page.getByTestId('remove-cancel-button').click();
    expect(await rows(page)).toContain(ids.failed);
    await page.getByTestId('remove-button').click();
    await page.getByTestId('remove-confirmed-button').click();
    await expect.poll(() => rows(page)).not.toContain(ids.failed);
    expect(problems).toEqual([]);
  });
});
