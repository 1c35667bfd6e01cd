#!/usr/bin/env node
// `npm test`: everything a fresh machine needs, then every test.
//  1. system packages (apt-get as root, else the exact command to run)
//  2. type checks of every process's config (the Electron host against Electron's
//     own types), the layering rules (dependency-cruiser) and ESLint
//  3. the app build (the end-to-end tests drive the built renderer)
//  4. the base VM image, built on first use with progress and cached
//  5. vitest (unit, renderer, integration with real QEMU, e2e in Chromium) inside
//     a D-Bus session with an unlocked gnome-keyring, so the keychain is real
// It ends with one line "N passed, N failed, N skipped".
import { spawnSync } from 'node:child_process';
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

step('system packages', 'bash', ['scripts/ensure-system.sh', 'test']);
step('type check', 'npm', ['run', '--silent', 'typecheck']);
step('layering (dependency-cruiser, .dependency-cruiser.cjs)', 'npx', ['depcruise', 'main', 'common', 'renderer', 'preload', '--config', '.dependency-cruiser.cjs', '--output-type', 'err']);
step('lint (ESLint)', 'npx', ['eslint', '.']);
step('build the app', 'npm', ['run', '--silent', 'build']);
step('base VM image (built on first use, then cached)', 'npx', ['tsx', 'main/vm/build-image-cli.ts']);

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
const status = existsSync(withKeyring)
  ? step('tests', 'bash', [withKeyring, 'npx', ...vitestArgs], { allowFail: true })
  : step('tests', 'npx', vitestArgs, { allowFail: true });

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
