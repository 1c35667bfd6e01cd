// The task's git route through the credential proxy: the host repository's
// origin (untrusted config) reduced to an https URL without credentials, then
// matched by the broker against the stored git credentials; and the task's
// allowPush flag, off unless asked for.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ImageStatus } from '../../../common/domain.js';
import { createFactoryApp, gitRouteForTask } from '../../../main/app.js';
import { CredentialBroker } from '../../../main/credentials/broker.js';
import { MemorySecretStore } from '../../../main/credentials/keychain.js';
import { appPaths } from '../../../main/state/paths.js';
import { httpsRemoteUrl, originHttpsUrl } from '../../../main/tasks/host-repo.js';
import { makeRepo, tempDir, type FixtureRepo } from '../../support/repo.js';

describe('httpsRemoteUrl', () => {
  it('keeps https URLs and drops embedded credentials, query and fragment', () => {
    expect(httpsRemoteUrl('https://git.example/acme/app.git')).toBe('https://git.example/acme/app.git');
    expect(httpsRemoteUrl('  https://git.example/acme/app.git\n')).toBe('https://git.example/acme/app.git');
    expect(httpsRemoteUrl('https://x-access-token:ghp_secret@git.example/acme/app.git')).toBe('https://git.example/acme/app.git');
    expect(httpsRemoteUrl('https://someone@git.example:8443/acme/app?x=1#frag')).toBe('https://git.example:8443/acme/app');
  });

  it('gives nothing for ssh, scp-style, file, plain http and junk', () => {
    for (const url of [
      'ssh://git@git.example/acme/app.git',
      'git@git.example:acme/app.git',
      'git.example:acme/app.git',
      'file:///srv/git/app.git',
      '/srv/git/app.git',
      '../app.git',
      'http://git.example/acme/app.git',
      'git://git.example/acme/app.git',
      'https://',
      'https://git.example/a b',
      '',
      undefined,
    ]) {
      expect(httpsRemoteUrl(url), String(url)).toBeUndefined();
    }
  });
});

describe('git route of a task', () => {
  let root: string;
  let broker: CredentialBroker;
  let repo: FixtureRepo;
  let credentialId: string;

  beforeAll(async () => {
    root = tempDir('fiab-git-route-');
    broker = new CredentialBroker({ paths: appPaths({ FACTORY_DATA_DIR: path.join(root, 'data'), FACTORY_CACHE_DIR: path.join(root, 'cache') }), secrets: new MemorySecretStore() });
    credentialId = (await broker.api()['credentials.set']({ kind: 'git', label: 'acme', value: 'tok', target: { upstream: 'https://git.example/acme' } })).id;
    repo = await makeRepo({ files: { a: 'a\n' } });
  });
  afterAll(async () => {
    await broker.dispose();
    repo.cleanup();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('reads origin from the host repo and routes it when a git credential covers it', async () => {
    expect(await originHttpsUrl(repo.dir)).toBeUndefined(); // no origin at all
    expect(await gitRouteForTask(broker, { repoPath: repo.dir })).toBeUndefined();

    repo.git('remote', 'add', 'origin', 'https://x-access-token:leaked@git.example/acme/app.git');
    expect(await originHttpsUrl(repo.dir)).toBe('https://git.example/acme/app.git');
    expect(await gitRouteForTask(broker, { repoPath: repo.dir })).toEqual({ repoUrl: 'https://git.example/acme/app.git', credentialId, allowPush: false });
    expect(await gitRouteForTask(broker, { repoPath: repo.dir, allowPush: true })).toEqual({ repoUrl: 'https://git.example/acme/app.git', credentialId, allowPush: true });

    for (const url of ['git@git.example:acme/app.git', 'ssh://git@git.example/acme/app.git', `file://${repo.dir}`, 'https://elsewhere.example/acme/app.git', 'https://git.example/other/app.git']) {
      repo.git('remote', 'set-url', 'origin', url);
      expect(await gitRouteForTask(broker, { repoPath: repo.dir, allowPush: true }), url).toBeUndefined();
    }
    expect(await gitRouteForTask(broker, { repoPath: path.join(root, 'missing') })).toBeUndefined();
  });
});

describe('tasks.create allowPush', () => {
  it('is kept on the task record, and is off by default', async () => {
    const dataDir = tempDir();
    const status: ImageStatus = { state: 'missing', version: 'test' };
    const app = await createFactoryApp({
      host: 'web',
      paths: appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') }),
      vm: {
        images: { status: () => status, ensure: () => new Promise(() => {}) },
        qemu: { checkInstalled: async () => ({ ok: true, version: '8' }), start: async () => { throw new Error('no VM in unit tests'); } },
      },
    });
    const repo = await makeRepo({ files: { a: 'a\n' } });
    try {
      const plain = await app.api['tasks.create']({ repoPath: repo.dir, title: 'no push' });
      const pushing = await app.api['tasks.create']({ repoPath: repo.dir, title: 'may push', allowPush: true });
      expect(plain.allowPush).toBeUndefined();
      expect(pushing.allowPush).toBe(true);
      expect((await app.api['tasks.get']({ taskId: pushing.id })).allowPush).toBe(true);
      await expect(app.api['tasks.create']({ repoPath: repo.dir, title: 'x', allowPush: 'yes' as unknown as boolean })).rejects.toThrow(/boolean/);
    } finally {
      await app.dispose();
      repo.cleanup();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
