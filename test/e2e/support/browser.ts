// Debian's Chromium driven by playwright-core, with a fresh profile per run.
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.FACTORY_CHROMIUM ?? '/usr/bin/chromium';

export function chromiumMissingReason(): string | undefined {
  return existsSync(CHROMIUM) ? undefined : `no Chromium at ${CHROMIUM} (set FACTORY_CHROMIUM)`;
}

/** Chromium's flags for every test and bench: no sandbox (root in CI), no GPU, nothing fetched in the background. */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
] as const;

export interface OpenBrowser {
  context: BrowserContext;
  page: Page;
  /** Console errors and CSP violations seen by the page. */
  problems: string[];
  close(): Promise<void>;
}

export async function openBrowser(): Promise<OpenBrowser> {
  const profile = mkdtempSync(path.join(os.tmpdir(), 'factory-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: [...CHROMIUM_ARGS],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  return {
    context,
    page,
    problems,
    async close() {
      await context.close().catch(() => {}); // teardown: what is already gone is fine
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
