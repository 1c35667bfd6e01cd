#!/usr/bin/env node
// `npm test`: everything a fresh machine needs, then every test.
//  1. system packages (apt-get as root, else the exact command to run)
//  2. type checks of every process's config (the Electron host against Electron's
//     own types), the layering rules (dependency-cruiser) and ESLint
//  3. the app build (the end-to-end tests drive the built renderer; the app, CLI and
//     hook processes the tests start run the built JavaScript)
//  4. the base VM image, built on first use with progress and cached
//     (2 to 4 in two lanes side by side: tsc and ESLint each keep one core busy; the
//     build's tsc checks main and preload, so the type check lane leaves those to it:
//     ~12 CPU-s less; both lanes 69 s where checking them twice took 81 s back to back,
//     70 s in a fresh-clone run against 71-72 s before, 2026-12-07)
//  5. vitest (unit, renderer, integration with real QEMU, e2e in Chromium) inside
//     a D-Bus session with an unlocked gnome-keyring, so the keychain is real
// It ends with one line "N passed, N failed, N skipped".
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const extraArgs = process.argv.slice(2);

function step(title, cmd, args, opts = {}) {
  const started = Date.now();
  console.log(`\n▶ ${title}`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...opts });
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  if (r.error) {
    console.error(`✖ ${title}: ${r.error.message}`);
    process.exit(1);
  }
  if (r.status !== 0 && !opts.allowFail) {
    console.error(`✖ ${title} failed (exit ${r.status}) after ${secs}s`);
    process.exit(r.status ?? 1);
  }
  console.log(`✔ ${title} (${secs}s)`);
  return r.status;
}

/**
 * One step of a lane: its output is kept and printed whole when it ends, so two
 * lanes never interleave lines; a `live` step (the image build's progress) prints as it goes.
 */
function laneStep(title, cmd, args, live = false) {
  const started = Date.now();
  if (live) console.log(`\n▶ ${title}`);
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, stdio: ['ignore', live ? 'inherit' : 'pipe', live ? 'inherit' : 'pipe'] });
    const out = [];
    child.stdout?.on('data', (d) => out.push(d));
    child.stderr?.on('data', (d) => out.push(d));
    const end = (status, error) => {
      const secs = ((Date.now() - started) / 1000).toFixed(1);
      const text = Buffer.concat(out).toString('utf8');
      if (!live) console.log(`\n▶ ${title}`);
      if (text.trim()) process.stdout.write(text.endsWith('\n') ? text : text + '\n');
      if (error || status !== 0) console.error(`✖ ${title} failed (${error ? error.message : `exit ${status}`}) after ${secs}s`);
      else console.log(`✔ ${title} (${secs}s)`);
      resolve(error ? 1 : status ?? 1);
    };
    child.on('error', (err) => end(1, err));
    child.on('close', (status) => end(status));
  });
}

/** Steps one after another; the lane stops at its first failure and returns its exit status. */
async function lane(steps) {
  for (const [title, cmd, args, live] of steps) {
    const status = await laneStep(title, cmd, args, live);
    if (status !== 0) return status;
  }
  return 0;
}

step('system packages', 'bash', ['scripts/ensure-system.sh', 'test']);
const checksStarted = Date.now();
const lanes = await Promise.all([
  lane([
    ['type check (renderer, tests, Electron host)', 'npm', ['run', '--silent', 'typecheck:beyond-build']],
    ['build the app (type checks main and preload)', 'npm', ['run', '--silent', 'build']],
  ]),
  lane([
    ['layering (dependency-cruiser, .dependency-cruiser.cjs)', 'npx', ['depcruise', 'main', 'common', 'renderer', 'preload', '--config', '.dependency-cruiser.cjs', '--output-type', 'err']],
    ['lint (ESLint)', 'npx', ['eslint', '.']],
    ['base VM image (built on first use, then cached)', 'npx', ['tsx', 'main/vm/build-image-cli.ts'], true],
  ]),
]);
const failedLane = lanes.find((s) => s !== 0);
if (failedLane !== undefined) process.exit(failedLane);
console.log(`✔ checks, build and image (${((Date.now() - checksStarted) / 1000).toFixed(1)}s)`);

mkdirSync(path.join(root, 'test-results'), { recursive: true });
const resultsFile = path.join(root, 'test-results', 'vitest.json');
const vitestArgs = [
  'vitest',
  'run',
  '--reporter=default',
  '--reporter=json',
  `--outputFile.json=${resultsFile}`,
  ...extraArgs,
];
const withKeyring = path.join(root, 'test/support/with-keyring.sh');
// dist/ was just built from this tree: the processes the tests start may run it (test/support/cli.ts, runnable).
const testEnv = { ...process.env, FACTORY_TEST_DIST: '1' };
const status = existsSync(withKeyring)
  ? step('tests', 'bash', [withKeyring, 'npx', ...vitestArgs], { allowFail: true, env: testEnv })
  : step('tests', 'npx', vitestArgs, { allowFail: true, env: testEnv });

// One plain closing line that any reader understands.
let passed = 0;
let failed = 0;
let skipped = 0;
try {
  const report = JSON.parse(readFileSync(resultsFile, 'utf8'));
  passed = report.numPassedTests ?? 0;
  failed = report.numFailedTests ?? 0;
  skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  if (status !== 0 && failed === 0) failed = 1; // a suite that failed to load counts
} catch {
  failed = status === 0 ? 0 : 1;
}
console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(status === 0 && failed === 0 ? 0 : 1);
