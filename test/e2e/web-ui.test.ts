// The whole path once, as a user would, in Chromium against the web host serving
// the real app: real QEMU sandbox, real git, real pipeline. A fixture repo's
// pipeline edits a file and prints a marker; the test starts the task, watches
// all six stages pass, sees the marker in the terminal pane and the changed file
// in the diff, approves, checks the host repo with git, destroys the sandbox and
// checks that no QEMU process of this test remains.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { startWebHost, type WebHost } from '../../main/host/web/web-host.js';
import { appPaths } from '../../main/state/paths.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';
import { chromiumMissingReason, openBrowser, type OpenBrowser } from './support/browser.js';
import { ensureE2eRendererBuilt } from './support/build.js';
import { qemuProcessesUnder, which } from './support/processes.js';
import { startTask, terminalText, typeInTerminal, waitForAllStagesPassed } from './support/ui-driver.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const skipReason = chromiumMissingReason() ?? (which('qemu-system-x86_64') ? undefined : 'qemu-system-x86_64 is not installed');
if (skipReason) console.log(`web-ui e2e skipped: ${skipReason}`);

const MARKER = `E2E-MARKER-${randomBytes(4).toString('hex')}`;
const PIPELINE_MS = 10 * 60_000;

function pipelineConfig() {
  const say = (s: string) => ({ command: `echo "stage ${s} in $(pwd)"` });
  return JSON.stringify(
    {
      stages: {
        request: say('request'),
        plan: say('plan'),
        // Edits a tracked file; the runner commits the work on the task branch.
        build: { command: `printf 'hello from the sandbox\\n' >> hello.txt && echo ${MARKER}` },
        test: { command: 'grep -q "hello from the sandbox" hello.txt && echo tests-ok' },
        // --no-pager: stages run under a pty, where git would otherwise wait in less.
        review: { command: 'git --no-pager diff --stat HEAD' },
        document: say('document'),
      },
    },
    null,
    2,
  );
}

describe.skipIf(!!skipReason)('web UI end to end (real sandbox)', () => {
  let dataDir: string;
  let app: FactoryApp;
  let host: WebHost;
  let browser: OpenBrowser;
  let repo: FixtureRepo;
  let notRepo: string;

  beforeAll(async () => {
    const staticDir = ensureE2eRendererBuilt(root);
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'factory-e2e-data-'));
    // Temp data dir; the image cache is shared (FACTORY_CACHE_DIR or the user cache).
    const paths = appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir });
    app = await createFactoryApp({ host: 'web', paths });
    host = await startWebHost(app, { staticDir });
    // A running account of the task in the test log, so a slow or stuck run shows where it is.
    const t0 = Date.now();
    let last = '';
    app.onEvent((e) => {
      if (e.type !== 'task.updated') return;
      const t = e.task;
      const line = `${t.phase} sandbox=${t.sandbox.status} ${t.stages.map((s) => `${s.name}:${s.status}`).join(' ')}${t.error ? ` error=${t.error.name}: ${t.error.message}` : ''}`;
      if (line !== last) console.log(`[e2e +${((Date.now() - t0) / 1000).toFixed(1)}s] ${(last = line)}`);
    });
    browser = await openBrowser();
    repo = await makeRepo({ files: { 'hello.txt': 'hello\n', '.factory/pipeline.json': pipelineConfig() } });
    repo.write('scratch.txt', 'uncommitted work the app must not touch\n');
    repo.write('hello.txt', 'hello\nlocal edit, not committed\n');
    notRepo = mkdtempSync(path.join(os.tmpdir(), 'factory-e2e-not-a-repo-'));
  });

  afterAll(async () => {
    await browser?.close();
    await host?.close();
    await app?.dispose();
    const left = dataDir ? qemuProcessesUnder(dataDir) : [];
    for (const p of left) process.kill(p.pid, 'SIGKILL'); // never leave one behind, even on failure
    repo?.cleanup();
    if (notRepo) rmSync(notRepo, { recursive: true, force: true });
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    expect(left, 'QEMU processes left after dispose').toEqual([]);
  });

  it('a path that is not a repository shows a clear error', async () => {
    const { page } = browser;
    await page.goto(host.url);
    await page.getByTestId('qemu-status').waitFor();
    await page.getByTestId('repo-path-input').fill(notRepo);
    await page.getByTestId('task-text-input').fill('anything');
    await page.getByTestId('start-button').click();
    await expect.poll(() => page.getByTestId('new-task-error-name').textContent()).toBe('NotAGitRepository');
    expect(await page.getByTestId('new-task-error-message').textContent()).toContain(`${notRepo} is not a git repository`);
  });

  it('starts a task, passes six stages, shows the marker and the diff, opens a shell, approves into the host repo, destroys the sandbox', async () => {
    const { page, problems } = browser;
    const headBefore = repo.head();
    const branchBefore = repo.git('symbolic-ref', 'HEAD').trim();
    const statusBefore = repo.status();
    const shots = path.join(root, 'test-results');
    mkdirSync(shots, { recursive: true });

    await page.goto(host.url);
    await page.getByTestId('qemu-status').waitFor();
    expect(page.url()).not.toContain('token=');

    const started = Date.now();
    const taskId = await startTask(page, repo.dir, 'Append a greeting to hello.txt');
    try {
      await waitForAllStagesPassed(page, taskId, PIPELINE_MS);
    } catch (err) {
      await page.screenshot({ path: path.join(shots, 'e2e-failed.png'), fullPage: true });
      throw err;
    }
    console.log(`e2e: six stages passed ${((Date.now() - started) / 1000).toFixed(1)} s after Start`);

    await page.getByTestId('terminal-tab-build').click();
    await expect.poll(() => terminalText(page), { timeout: 15_000 }).toContain(MARKER);

    await page.getByTestId('review-file').first().waitFor({ timeout: 60_000 });
    const files = await page.getByTestId('review-file').evaluateAll((els) => els.map((e) => e.getAttribute('data-path')));
    expect(files).toEqual(['hello.txt']);
    expect(await page.getByTestId('review-patch').textContent()).toContain('+hello from the sandbox');
    await page.screenshot({ path: path.join(shots, 'e2e-review.png'), fullPage: true });

    // An interactive shell inside the sandbox, in its own tab.
    await page.getByTestId('shell-button').click();
    await expect.poll(() => page.getByTestId('terminal-pane').getAttribute('data-status'), { timeout: 60_000 }).toBe('live');
    await typeInTerminal(page, 'echo "shell as $(whoami) in $(pwd)"; tail -n1 hello.txt\r');
    await expect.poll(() => terminalText(page), { timeout: 30_000 }).toMatch(/shell as \w+ in \/work\/repo/);
    await expect.poll(() => terminalText(page), { timeout: 30_000 }).toMatch(/^hello from the sandbox$/m);

    await page.getByTestId('approve-button').click();
    await expect.poll(() => page.getByTestId('decision').getAttribute('data-kind'), { timeout: 60_000 }).toBe('approved');

    // The branch is in the host repo with the change; HEAD, the index and the working tree are as before.
    const branch = `factory/${taskId}`;
    expect(repo.git('rev-parse', '--verify', `refs/heads/${branch}`).trim()).toMatch(/^[0-9a-f]{40}$/);
    expect(repo.git('show', `${branch}:hello.txt`)).toBe('hello\nhello from the sandbox\n');
    expect(repo.git('merge-base', '--is-ancestor', headBefore, branch)).toBe('');
    expect(repo.head()).toBe(headBefore);
    expect(repo.git('symbolic-ref', 'HEAD').trim()).toBe(branchBefore);
    expect(repo.status()).toBe(statusBefore);

    // After Approve the sandbox is destroyed without asking (setting keepSandboxAfterDecisionMinutes is 0).
    await expect.poll(() => page.getByTestId('sandbox-status').getAttribute('data-status'), { timeout: 120_000 }).toBe('destroyed');
    expect(await page.getByTestId(`task-sandbox-${taskId}`).textContent()).toBe('sandbox destroyed');
    expect(qemuProcessesUnder(dataDir)).toEqual([]);
    const overlays = readdirSync(path.join(dataDir, 'sandboxes'), { recursive: true }).map(String).filter((f) => f.endsWith('.qcow2'));
    expect(overlays).toEqual([]);
    await page.screenshot({ path: path.join(shots, 'e2e-destroyed.png'), fullPage: true });
    expect(problems).toEqual([]);
  }, 20 * 60_000);
});
