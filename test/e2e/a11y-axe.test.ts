// axe-core in Chromium on every screen a user meets (the scripted app behind the
// real web host): no critical and no serious violation on the landing page, the
// board with finished and failed tasks, a task's view, the review pane and
// Approve's confirmation, a Claude Code session with a nested subagent and its
// leak checks, an agent's conversation read from its stream, the credentials
// screen (with the keychain unavailable, its most coloured state), the
// environments and settings screens and the shortcuts dialog, in the light and
// the dark colour scheme (playwright's colorScheme, as the system would set
// it). Each screen is also saved as a screenshot at 1400×900, and checked again
// (axe, and no button label wrapping) and saved at 1280×800 and 1920×1080.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeViolations, screenshot, seriousViolations } from './support/axe.js';
import { chromiumMissingReason } from './support/browser.js';
import { FAILS, ScriptedApp } from './support/scripted-app.js';
import { ScriptedUi } from './support/scripted-ui.js';
import { startTask, terminalText } from './support/ui-driver.js';

const missing = chromiumMissingReason();
if (missing) console.log(`a11y-axe skipped: ${missing}`);

const SCHEMES = ['light', 'dark'] as const;

describe.skipIf(!!missing).each(SCHEMES)('accessibility of every screen (axe-core), %s scheme', (scheme) => {
  let ui: ScriptedUi;
  let app: ScriptedApp;
  const ids: Record<string, string> = {};
  // The light screenshots keep their names; the dark ones get a suffix. Each screen is also
  // checked and saved at 1280×800 and 1920×1080, the sizes the layout is made for.
  const shot = async (page: Parameters<typeof screenshot>[0], name: string) => {
    const base = scheme === 'light' ? name : `${name}-${scheme}`;
    await screenshot(page, base);
    for (const size of [{ width: 1280, height: 800 }, { width: 1920, height: 1080 }]) {
      await page.setViewportSize(size);
      expect(describeViolations(await seriousViolations(page)), `${base} at ${size.width}×${size.height}`).toEqual([]);
      await screenshot(page, `${base}-${size.width}x${size.height}`);
      // No button's label wraps (finding 10 of issue 31); a stage cell's two lines (mark, duration) are its design.
      const wrapped = await page.evaluate(() =>
        [...document.querySelectorAll<HTMLElement>('button')]
          .filter((b) => b.getClientRects().length > 0 && !b.closest('td.stage'))
          .map((b) => {
            const r = document.createRange();
            r.selectNodeContents(b);
            const tops = [...r.getClientRects()].filter((x) => x.width > 0).map((x) => x.top).sort((x, y) => x - y);
            return { label: (b.textContent ?? '').trim(), lines: tops.filter((t, i) => i === 0 || t - tops[i - 1]! > 8).length };
          })
          .filter((x) => x.lines > 1)
          .map((x) => `"${x.label}" on ${x.lines} lines`),
      );
      expect(wrapped, `${base} at ${size.width}×${size.height}`).toEqual([]);
    }
    await page.setViewportSize({ width: 1400, height: 900 });
  };

  beforeAll(async () => {
    app = new ScriptedApp(40);
    // The approved task keeps its sandbox, so its Destroy confirmation can be checked.
    app.keepMinutes = 30;
    // The keychain unavailable: its red pill and its explanation are on every screen checked.
    app.keychain = { ok: false, error: { name: 'KeychainUnavailable', message: 'the OS keychain cannot be used (no Secret Service answered).' } };
    ui = await ScriptedUi.start(app);
    await ui.browser.page.setViewportSize({ width: 1400, height: 900 });
    await ui.browser.page.emulateMedia({ colorScheme: scheme });
  });
  afterAll(async () => {
    await ui?.close();
  });

  const phase = (id: string) => ui.browser.page.getByTestId(`task-phase-${id}`).textContent();

  it('the landing page', async () => {
    const { page } = ui.browser;
    await page.goto(ui.host.url);
    await page.getByTestId('qemu-status').waitFor();
    await page.getByTestId('board-empty').waitFor();
    // The empty app says what to do, in order; a model credential is stored here, so the first step is done.
    const steps = page.getByTestId('board-empty').locator('li');
    await expect.poll(() => steps.first().textContent()).toBe('A model credential is stored. ');
    expect(await steps.first().getAttribute('data-done')).toBe('');
    const [, pick, write] = await steps.allTextContents();
    expect([pick, write]).toEqual([
      'Pick a repository in New task: type its path, or drop its folder.',
      'Describe the task, choose the agent and press Start. Its stages show here, its terminal on the right.',
    ]);
    // The scheme took effect: the page's background is light or dark as asked.
    const bg = await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
    const [r, g, b] = bg.match(/\d+/g)!.map(Number) as [number, number, number];
    expect((r + g + b) / 3 > 128 ? 'light' : 'dark', bg).toBe(scheme);
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await shot(page, 'landing');
  });

  it('the board with an approved, a failed and a task in review, and the failed task view', async () => {
    const { page } = ui.browser;
    ids.approved = await startTask(page, ui.repo, 'Add a greeting to the README');
    await expect.poll(() => phase(ids.approved!), { timeout: 30_000 }).toBe('review');
    await page.getByTestId('approve-button').click();
    await expect.poll(() => page.getByTestId('decision').getAttribute('data-kind')).toBe('approved');
    ids.failed = await startTask(page, ui.repo, `${FAILS} Make the tests pass on Node 22`);
    await expect.poll(() => phase(ids.failed!), { timeout: 30_000 }).toBe('failed');
    ids.review = await startTask(page, ui.repo, 'Rename the config loader and update its callers');
    await expect.poll(() => phase(ids.review!), { timeout: 30_000 }).toBe('review');

    await page.getByTestId(`task-select-${ids.failed}`).click();
    await page.getByTestId('task-error').waitFor();
    // The failed stage's terminal, with the runner's ANSI green, red and grey lines drawn.
    await page.getByTestId(`stage-${ids.failed}-test`).click();
    await expect.poll(() => terminalText(page)).toContain('at Context.<anonymous>');
    const pane = page.getByTestId('terminal-pane');
    // Drawn in the DOM (no WebGL here), so axe sees each coloured run of text; each keeps 4.5:1 on the terminal's background.
    expect(await page.evaluate((id) => (window as unknown as { __factoryTerminals: { renderer(id: string): string } }).__factoryTerminals.renderer(id), (await pane.getAttribute('data-session-id'))!)).toBe('dom');
    const colours = await pane.locator('.xterm-rows span').evaluateAll((spans) =>
      spans.filter((s) => /passing|failing|at Context/.test(s.textContent ?? '')).map((s) => getComputedStyle(s).color),
    );
    expect(new Set(colours).size, colours.join(' ')).toBe(3);
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await shot(page, 'board');
    await page.getByTestId('task-detail').scrollIntoViewIfNeeded();
    await shot(page, 'task-failed');
  });

  it('the review pane', async () => {
    const { page } = ui.browser;
    await page.getByTestId(`task-select-${ids.review}`).click();
    await page.getByTestId('review-file').first().waitFor();
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await page.getByTestId('approve-button').scrollIntoViewIfNeeded();
    await shot(page, 'review');
    // Approve's confirmation (Alt+A asks before the branch is made), then cancelled.
    await page.keyboard.press('Alt+KeyA');
    await page.getByTestId('approve-confirm').waitFor();
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await shot(page, 'approve-confirm');
    await page.keyboard.press('Escape');
    await expect.poll(() => page.getByTestId('approve-confirm').count()).toBe(0);
    expect(app.approvals.map((a) => a.taskId)).not.toContain(ids.review);
  });

  it('the destroy confirmation', async () => {
    const { page } = ui.browser;
    await page.getByTestId(`task-select-${ids.approved}`).click();
    await page.getByTestId('destroy-button').click();
    await page.getByTestId('destroy-confirm').waitFor();
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await page.getByTestId('destroy-cancel-button').click();
  });

  it('a Claude Code session on the board, its subagent nested, and its leak checks', async () => {
    const { page } = ui.browser;
    const { sessionId, subagentId } = app.addSession(ui.repo);
    // On the board: the session's line shows the check that was not clean, the subagent's its clean one.
    await page.getByTestId(`session-line-${sessionId}`).waitFor();
    expect(await page.getByTestId(`session-verdict-${sessionId}`).getAttribute('data-verdict')).toBe('incomplete');
    expect(await page.getByTestId(`subagent-line-${subagentId}`).getAttribute('data-nested')).toBe('');
    expect(await page.getByTestId(`subagent-verdict-${subagentId}`).getAttribute('data-verdict')).toBe('clean');
    await page.getByTestId(`task-select-${sessionId}`).click();
    await expect.poll(() => page.getByTestId('session-check').evaluateAll((els) => els.map((e) => e.getAttribute('data-verdict')))).toEqual(['incomplete', 'leak', 'clean']);
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await shot(page, 'session-board');
    await page.getByTestId('session-checks').scrollIntoViewIfNeeded();
    await shot(page, 'session-checks');
  });

  it("an agent's conversation: Claude Code's event stream read as a transcript", async () => {
    const { page } = ui.browser;
    const id = await startTask(page, ui.repo, 'Write hello.txt', { agent: 'claude-code' });
    await expect.poll(() => phase(id), { timeout: 30_000 }).toBe('review');
    await page.getByTestId(`stage-${id}-build`).click();
    const transcript = page.getByTestId('agent-transcript');
    // The real CLI's recorded stream, as it came through the terminal: its messages, two tool calls and the run's end.
    await expect
      .poll(() => transcript.locator('ol > li').evaluateAll((els) => els.map((e) => e.getAttribute('data-testid'))))
      .toEqual(['transcript-message', 'transcript-tool', 'transcript-tool', 'transcript-message', 'transcript-end']);
    expect(await transcript.getByTestId('transcript-end').textContent()).toContain('37,278 tokens in');
    // A tool call unfolds to its input and its result.
    await transcript.getByTestId('transcript-tool').first().locator('summary').click();
    expect(await transcript.getByTestId('transcript-tool-result').first().textContent()).toContain('File created successfully');
    await transcript.scrollIntoViewIfNeeded();
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await shot(page, 'transcript');
  });

  it('the credentials screen', async () => {
    const { page, problems } = ui.browser;
    await page.getByTestId('nav-credentials').click();
    await page.getByTestId('credentials-screen').locator('table').waitFor();
    await page.getByTestId('keychain-error').waitFor();
    expect(await page.getByTestId('keychain-status').getAttribute('data-state')).toBe('unavailable');
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await shot(page, 'credentials');
    expect(problems).toEqual([]);
  });

  it('the environments and settings screens, and the shortcuts dialog', async () => {
    const { page, problems } = ui.browser;
    // Two environment layers, one in use: the table, its sizes and its in-use mark.
    const GiB = 1024 ** 3;
    const layer = { repo: ui.repo, imageVersion: 'scripted-1', createdAt: '2026-01-01T09:00:00.000Z', lastUsedAt: '2026-01-02T10:30:00.000Z', summary: ['Node 22.12.0 (.nvmrc)', 'npm ci'] };
    app.layers = [
      { ...layer, id: 'l1', sizeBytes: 1.5 * GiB, inUse: true, made: { commit: '0123456789abcdef0123', tree: 'fedcba9876543210fedc' } },
      { ...layer, id: 'l2', repo: '/home/me/src/billing', sizeBytes: 0.4 * GiB, inUse: false, summary: ['Python 3.12 (.python-version)', 'pip install -r requirements.txt'] },
    ];
    await page.getByTestId('nav-environments').click();
    await page.getByTestId('environments-heading').waitFor();
    await expect.poll(() => page.getByTestId('layers-table').locator('tbody tr').count()).toBe(2);
    // Each Delete keeps its label on one line beside a long path, at 1280 px too.
    await page.setViewportSize({ width: 1280, height: 800 });
    const deleteLines = await page.locator('[data-testid^="layer-delete-"]').evaluateAll((buttons) =>
      buttons.map((b) => {
        const r = document.createRange();
        r.selectNodeContents(b);
        return new Set([...r.getClientRects()].filter((x) => x.width > 0).map((x) => Math.round(x.top))).size;
      }),
    );
    expect(deleteLines).toEqual([1, 1]);
    await page.setViewportSize({ width: 1400, height: 900 });
    await shot(page, 'environments');
    await page.getByTestId('nav-settings').click();
    await page.getByTestId('settings-form').waitFor();
    await shot(page, 'settings');
    await page.getByTestId('nav-tasks').click();
    await page.keyboard.press('Alt+Slash');
    await page.getByTestId('shortcuts-dialog').waitFor();
    await shot(page, 'shortcuts');
    await page.keyboard.press('Escape');
    expect(problems).toEqual([]);
  });
});
