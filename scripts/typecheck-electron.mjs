#!/usr/bin/env node
// Type-checks the Electron host (main/host/electron/) against Electron's own
// types. The Electron runtime cannot be installed everywhere (its binary is a
// download of its own), and then `npm install` drops the optional package, types
// and all. The types alone come from the npm registry: `npm pack` the locked
// version and read its electron.d.ts, so a mistake in the Electron host still
// fails the build where Electron cannot run.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', ...opts });
  if (r.error) throw r.error;
  if (r.status !== 0) {
    console.error(`typecheck-electron: ${cmd} ${args.join(' ')} failed (exit ${r.status})`);
    process.exit(r.status ?? 1);
  }
  return r.stdout;
}

function electronTypes() {
  const installed = path.join(root, 'node_modules/electron/electron.d.ts');
  if (existsSync(installed)) return installed;
  const lock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8'));
  const version = lock.packages?.['node_modules/electron']?.version;
  if (!/^\d+\.\d+\.\d+$/.test(version ?? '')) {
    console.error('typecheck-electron: package-lock.json names no electron version');
    process.exit(1);
  }
  const cache = path.join(root, 'node_modules/.cache/electron-types', version);
  const dts = path.join(cache, 'package/electron.d.ts');
  if (existsSync(dts)) return dts;
  mkdirSync(cache, { recursive: true });
  console.log(`typecheck-electron: fetching the types of electron ${version} (npm pack, no binary)`);
  const packed = JSON.parse(run('npm', ['pack', '--json', '--silent', `electron@${version}`, '--pack-destination', cache]));
  run('tar', ['-xzf', path.join(cache, packed[0].filename), '-C', cache, 'package/electron.d.ts']);
  return dts;
}

const dts = electronTypes();
const tsconfig = path.join(root, 'node_modules/.cache/electron-types/tsconfig.json');
writeFileSync(
  tsconfig,
  JSON.stringify(
    {
      extends: path.join(root, 'tsconfig.electron.json'),
      compilerOptions: { noEmit: true, paths: { electron: [dts] } },
      include: [path.join(root, 'common/**/*.ts'), path.join(root, 'main/**/*.ts')],
    },
    null,
    2,
  ),
);
run('npx', ['tsc', '-p', tsconfig], { stdio: 'inherit' });
