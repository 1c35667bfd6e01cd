// What a user does on the page, in one place for the web and Electron specs.
import { expect } from 'vitest';
import type { Page } from 'playwright-core';
import { STAGE_NAMES } from '../../../common/domain.js';

export async function startTask(page: Page, repoPath: string, text: string, opts: { agent?: string } = {}): Promise<string> {
  const detail = page.getByTestId('task-detail');
  // The view may still show the task started before this one: wait for the new one.
  const shownBefore = (await detail.count()) > 0 ? await detail.getAttribute('data-task-id') : null;
  await openNewTask(page);
  await page.getByTestId('repo-path-input').fill(repoPath);
  await page.getByTestId('task-text-input').fill(text);
  if (opts.agent) await page.getByTestId('agent-select').selectOption(opts.agent);
  await page.getByTestId('start-button').click();
  await expect
    .poll(async () => ((await detail.count()) > 0 ? await detail.getAttribute('data-task-id') : null), { timeout: 60_000 })
    .not.toBe(shownBefore);
  const taskId = await detail.getAttribute('data-task-id');
  expect(taskId).toBeTruthy();
  return taskId!;
}

/** Unfolds the new-task form (it folds after each Start) unless it is open. */
export async function openNewTask(page: Page): Promise<void> {
  const toggle = page.getByTestId('new-task-toggle');
  if ((await toggle.getAttribute('aria-expanded')) !== 'true') await toggle.click();
}

/** Waits until every stage passed; fails early, with what the page shows, when one fails. */
export async function waitForAllStagesPassed(page: Page, taskId: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const statuses = await Promise.all(
      STAGE_NAMES.map((s) => page.getByTestId(`stage-${taskId}-${s}`).getAttribute('data-status')),
    );
    if (statuses.every((s) => s === 'passed')) return;
    const phase = await page.getByTestId(`task-phase-${taskId}`).textContent();
    if (statuses.includes('failed') || phase === 'failed' || Date.now() > deadline) {
      const err = await page.getByTestId('task-error').textContent().catch(() => '');
      const term = await page.getByTestId('terminal-pane').textContent().catch(() => '');
      throw new Error(
        `pipeline did not pass: phase=${phase} stages=${statuses.join(',')}\nerror: ${err}\nterminal:\n${(term ?? '').slice(-3000)}`,
      );
    }
    await page.waitForTimeout(250);
  }
}

/**
 * The text of the terminal shown in the pane, scrollback included, read from
 * xterm.js's buffer (WebGL draws to a canvas) through the test hook that only
 * the e2e build of the renderer has (support/build.ts).
 */
export async function terminalText(page: Page): Promise<string> {
  const pane = page.getByTestId('terminal-pane');
  const sessionId = await pane.getAttribute('data-session-id');
  if (!sessionId) return '';
  const text = await page.evaluate(
    (id) => (window as unknown as { __factoryTerminals?: { text(id: string): string } }).__factoryTerminals?.text(id) ?? null,
    sessionId,
  );
  if (text === null) throw new Error('window.__factoryTerminals is missing: serve the e2e build of the renderer (ensureE2eRendererBuilt)');
  return text;
}

/**
 * The rows the terminal shows on screen, for the production build (no test
 * hook), e.g. under Electron. Only the DOM renderer has rows to read; it is the
 * one used without a GPU (`--disable-gpu`), and the WebGL one has none.
 */
export async function terminalScreenText(page: Page): Promise<string> {
  const rows = page.getByTestId('terminal-pane').locator('.xterm-rows > div');
  return (await rows.allTextContents()).map((r) => r.replace(/\u00a0/g, ' ').trimEnd()).join('\n');
}

/** Types into the terminal shown in the pane, as a user would. */
export async function typeInTerminal(page: Page, text: string): Promise<void> {
  await page.getByTestId('terminal-pane').locator('.xterm').click();
  await page.keyboard.type(text);
}
