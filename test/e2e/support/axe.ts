// axe-core run inside the page, for the accessibility specs. The source is
// evaluated through the DevTools protocol, which the page's CSP (script-src
// 'self') does not apply to, so the page under test keeps its real policy.
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { projectRoot } from './scripted-ui.js';

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeProblem {
  id: string;
  impact: string;
  help: string;
  targets: string[];
}

/** The critical and serious violations axe finds in the page as it is now (WCAG 2.x A and AA rules, best practices). */
export async function seriousViolations(page: Page): Promise<AxeProblem[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
  const found = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(ctx: unknown, opts: unknown): Promise<{ violations: any[] }> } }).axe;
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({
      id: String(v.id),
      impact: String(v.impact),
      help: String(v.help),
      targets: v.nodes.map((n: { target: unknown[]; failureSummary?: string }) => `${n.target.join(' ')} — ${(n.failureSummary ?? '').split('\n').slice(1).join(' ').slice(0, 200)}`),
    }));
  });
  return found.filter((v) => v.impact === 'critical' || v.impact === 'serious');
}

/** One line per problem, so a failing expectation says what to fix. */
export function describeViolations(problems: AxeProblem[]): string[] {
  return problems.flatMap((p) => p.targets.map((t) => `${p.impact} ${p.id}: ${t}`));
}

export const SCREENSHOT_DIR = path.join(projectRoot, 'test-results/screenshots');

/** Saves what the page shows now as test-results/screenshots/<name>.png (the viewport, as a user sees it). */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`) });
}
