import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { blobIds, readRepoFile } from '../../../main/git/repo-files.js';
import { loadPipelineConfig } from '../../../main/pipeline/config.js';
import { makeRepo, type FixtureRepo } from '../../support/repo.js';

const repos: FixtureRepo[] = [];
afterAll(() => repos.forEach((r) => r.cleanup()));

async function repoWith(files: Record<string, string>, extra?: (r: FixtureRepo) => void): Promise<FixtureRepo> {
  const r = await makeRepo({ files, commit: false });
  extra?.(r);
  r.commit('fixture');
  repos.push(r);
  return r;
}

describe('reading repository files at a commit', () => {
  it('reads the committed bytes, not the working tree, and says when a file is absent', async () => {
    const r = await repoWith({ 'package.json': '{"name":"a"}', 'dir/x y".txt': 'odd name' });
    r.write('package.json', '{"name":"edited"}');
    expect((await readRepoFile(r.dir, r.head(), 'package.json', 1024))?.toString()).toBe('{"name":"a"}');
    expect((await readRepoFile(r.dir, r.head(), 'dir/x y".txt', 1024))?.toString()).toBe('odd name');
    expect(await readRepoFile(r.dir, r.head(), 'missing.json', 1024)).toBeNull();
  });

  it('refuses a folder, a symlink and a submodule in place of a file, by name', async () => {
    const r = await repoWith({ 'real.json': '{}', 'folder/inner.txt': 'x' }, (repo) => {
      fs.symlinkSync('/etc/passwd', path.join(repo.dir, 'link.json'));
    });
    // A gitlink: what a submodule looks like in a tree (committed without `add -A`, which would drop it).
    r.git('update-index', '--add', '--cacheinfo', `160000,${'a'.repeat(40)},sub`);
    r.git('commit', '-q', '-m', 'submodule');
    await expect(readRepoFile(r.dir, r.head(), 'folder', 1024)).rejects.toThrow('folder is a folder in the repository, expected a regular file');
    await expect(readRepoFile(r.dir, r.head(), 'link.json', 1024)).rejects.toThrow('link.json is a symlink');
    await expect(readRepoFile(r.dir, r.head(), 'sub', 1024)).rejects.toThrow('sub is a submodule');
    // A folder named together with a file inside it is still seen as a folder.
    await expect(blobIds(r.dir, r.head(), ['folder/inner.txt', 'folder'])).rejects.toThrow('folder is a folder');
  });

  it('refuses a file over the cap before reading it', async () => {
    const r = await repoWith({ 'big.json': 'x'.repeat(70 * 1024) });
    await expect(readRepoFile(r.dir, r.head(), 'big.json', 64 * 1024)).rejects.toThrow('big.json is 71680 bytes, over the 65536 byte limit');
  });

  it.each([
    ['../outside', "must not contain '..'"],
    ['a/../../b', "must not contain '..'"],
    ['/etc/passwd', 'must be relative'],
    ['a\nb', 'control character'],
    ['a//b', 'empty or "." segment'],
    ['', 'is empty'],
  ])('refuses the path %j', async (p, message) => {
    const r = await repoWith({ 'a.txt': 'a' });
    await expect(readRepoFile(r.dir, r.head(), p, 1024)).rejects.toThrow(message);
    await expect(blobIds(r.dir, r.head(), [p])).rejects.toThrow(message);
  });

  it('takes pathspec magic literally: a glob names no file', async () => {
    const r = await repoWith({ 'a.lock': 'a', 'b.lock': 'b' });
    expect([...(await blobIds(r.dir, r.head(), ['*.lock', ':(glob)*.lock']))]).toEqual([['*.lock', null], [':(glob)*.lock', null]]);
  });

  it('gives the blob id of each path, null when absent', async () => {
    const r = await repoWith({ 'package-lock.json': '{"lockfileVersion":3}', 'go.sum': '' });
    const ids = await blobIds(r.dir, r.head(), ['package-lock.json', 'go.sum', 'Cargo.lock']);
    expect(ids.get('package-lock.json')).toBe(r.git('rev-parse', 'HEAD:package-lock.json').trim());
    expect(ids.get('go.sum')).toBe(r.git('rev-parse', 'HEAD:go.sum').trim());
    expect(ids.get('Cargo.lock')).toBeNull();
  });

  it('names a pipeline.json that is a symlink instead of reading its target text', async () => {
    const r = await repoWith({ 'x.json': '{}' }, (repo) => {
      fs.mkdirSync(path.join(repo.dir, '.factory'));
      fs.symlinkSync('../x.json', path.join(repo.dir, '.factory/pipeline.json'));
    });
    await expect(loadPipelineConfig(r.dir, r.head())).rejects.toThrow('.factory/pipeline.json: is a symlink in the repository, expected a regular file');
  });
});
