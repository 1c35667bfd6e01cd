#!/usr/bin/env node
// `npm start`: builds what is missing or stale, then runs the app — Electron when
// an Electron runtime is installed, else the web host on 127.0.0.1, whose URL
// (with its access token) is printed. The base VM image is built on first use by
// the app itself, with progress shown in the UI and on this console.
// Ctrl-C stops the app, which tears every sandbox down first.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const forceWeb = args.includes('--web') || process.env.FACTORY_HOST === 'web';

/** The Electron binary when the optional electron package and its download are present. */
function electronBinary() {
  try {
    const require = createRequire(path.join(root, 'package.json'));
    require.resolve('electron');
    const binary = require('electron'); // the package's main export is the binary's path
    return typeof binary === 'string' && existsSync(binary) ? binary : undefined;
  } catch {
    return undefined;
  }
}

function newestMtime(paths) {
  let newest = 0;
  const visit = (p) => {
    let st;
    try {
      st = statSync(p);
    } catch {
      return;
    }
    if (st.isDirectory()) {
      for (const e of readdirSync(p)) if (e !== 'node_modules') visit(path.join(p, e));
    } else newest = Math.max(newest, st.mtimeMs);
  };
  for (const p of paths) visit(path.join(root, p));
  return newest;
}

function isStale(output, sources) {
  const out = path.join(root, output);
  return !existsSync(out) || statSync(out).mtimeMs < newestMtime(sources);
}

function run(title, cmd, cmdArgs) {
  console.log(`▶ ${title}`);
  const r = spawnSync(cmd, cmdArgs, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`✖ ${title} failed${r.error ? `: ${r.error.message}` : ` (exit ${r.status})`}`);
    process.exit(r.status ?? 1);
  }
}

// System packages (QEMU, mmdebstrap, socat...): installed with apt-get when this
// runs as root, else the exact command is printed. The app still starts without
// them and says in its header what is missing.
const system = spawnSync('bash', [path.join(root, 'scripts/ensure-system.sh'), 'start'], { cwd: root, stdio: 'inherit' });
if (system.status !== 0) console.error('Continuing without them: the app shows what is missing.');

const electron = forceWeb ? undefined : electronBinary();
const mainSources = ['common', 'main', 'tsconfig.main.json', 'tsconfig.base.json'];

if (electron) {
  if (isStale('dist/main/host/electron/main.js', mainSources)) run('build main (Electron)', 'npx', ['tsc', '-p', 'tsconfig.electron.json']);
  if (isStale('dist/preload/preload/preload.js', ['preload', 'common', 'tsconfig.preload.json'])) {
    run('build preload', 'npx', ['tsc', '-p', 'tsconfig.preload.json']);
  }
} else if (isStale('dist/main/host/web/main.js', mainSources)) {
  run('build main', 'npx', ['tsc', '-p', 'tsconfig.main.json']);
}
if (isStale('dist/renderer/index.html', ['renderer', 'common'])) {
  run('build renderer', 'npx', ['vite', 'build', '--config', 'vite.config.ts', '--logLevel', 'warn']);
}

if (!electron && !forceWeb) console.log('No Electron runtime installed: serving the UI from the web host.');
const child = electron
  ? spawn(electron, [root, ...args.filter((a) => a !== '--web')], { cwd: root, stdio: 'inherit' })
  : spawn(process.execPath, [path.join(root, 'dist/main/host/web/main.js'), ...args.filter((a) => a !== '--web')], {
      cwd: root,
      stdio: 'inherit',
    });

// Ctrl-C reaches the whole process group; the child disposes the app and exits.
// This process waits for it instead of dying first and orphaning its sandboxes.
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    if (child.exitCode === null) child.kill(sig === 'SIGHUP' ? 'SIGTERM' : sig);
  });
}
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
