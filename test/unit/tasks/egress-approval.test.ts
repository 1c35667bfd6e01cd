// What a repository asks to reach is untrusted: shown at Start, granted only as
// the user approves it, for the task or for the repository from now on, and
// never wider than asked. Through the app's API on a real repository and real
// settings on disk; the VM layer is replaced (no sandbox boots in a unit test),
// so these tasks end at provisioning, after their egress was decided.
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { createFactoryApp, type FactoryApp } from '../../../main/app.js';
import { appPaths } from '../../../main/state/paths.js';
import type { ImageStatus } from '../../../common/domain.js';
import type { EgressRule } from '../../../common/egress.js';
import { makeRepo, tempDir, type FixtureRepo } from '../../support/repo.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function app(): Promise<FactoryApp> {
  const dataDir = tempDir();
  const status: ImageStatus = { state: 'missing', version: 'test' };
  const vm = {
    images: { status: () => status, ensure: async () => { throw new Error('no image in unit tests'); } },
    qemu: { checkInstalled: async () => ({ ok: true, version: '8' }), start: async () => { throw new Error('no VM in unit tests'); } },
  };
  const a = await createFactoryApp({ host: 'web', paths: appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') }), vm });
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  cleanups.push(() => a.dispose());
  return a;
}

async function repoAsking(): Promise<FixtureRepo> {
  const repo = await makeRepo({ files: { '.factory/pipeline.json': JSON.stringify({ environment: { egress: [{ host: 'files.example.org' }] } }) } });
  cleanups.push(repo.cleanup);
  return repo;
}

describe("a repository's egress requests", () => {
  it('are shown at Start and granted only as approved: nothing by themselves, never a host not asked for', async () => {
    const a = await app();
    const repo = await repoAsking();
    const pre = await a.api['tasks.preflight']({ repoPath: repo.dir });
    expect(pre.egressRequests).toEqual([{ rule: { name: 'asked by the repository: files.example.org', host: 'files.example.org', port: 443, scheme: 'https' }, allowedAlways: false }]);
    const asked = pre.egressRequests[0]!.rule;

    const unapproved = await a.api['tasks.create']({ repoPath: repo.dir, title: 'x', agent: 'command' });
    expect(unapproved.egress).toEqual({ allowed: [], refusals: [] });

    const other: EgressRule = { ...asked, host: 'evil.example.org' };
    await expect(a.api['tasks.create']({ repoPath: repo.dir, title: 'x', agent: 'command', egressApproval: { rules: [other], remember: false } }))
      .rejects.toMatchObject({ name: 'InvalidInput', message: expect.stringContaining('https://evil.example.org:443 is not among the egress this repository asks for') });

    const once = await a.api['tasks.create']({ repoPath: repo.dir, title: 'x', agent: 'command', egressApproval: { rules: [asked], remember: false } });
    expect(once.egress?.allowed).toEqual([asked]);
    expect((await a.api['tasks.preflight']({ repoPath: repo.dir })).egressRequests[0]!.allowedAlways).toBe(false);

    await a.api['tasks.create']({ repoPath: repo.dir, title: 'x', agent: 'command', egressApproval: { rules: [asked], remember: true } });
    expect((await a.api['tasks.preflight']({ repoPath: repo.dir })).egressRequests[0]!.allowedAlways).toBe(true);
  });

  it('cannot be widened by the approval: address ranges the repository did not ask for are refused', async () => {
    const a = await app();
    const repo = await repoAsking();
    const asked = (await a.api['tasks.preflight']({ repoPath: repo.dir })).egressRequests[0]!.rule;
    // The same host, port and scheme, but allowed into a private range (a repository can never ask for ranges).
    const wider: EgressRule = { ...asked, addresses: ['10.0.0.0/8'] };
    await expect(a.api['tasks.create']({ repoPath: repo.dir, title: 'x', agent: 'command', egressApproval: { rules: [wider], remember: true } }))
      .rejects.toMatchObject({ name: 'InvalidInput', message: expect.stringContaining('is not among the egress this repository asks for') });
    expect(await a.api['tasks.list']({})).toEqual([]);
    expect((await a.api['tasks.preflight']({ repoPath: repo.dir })).egressRequests[0]!.allowedAlways).toBe(false);
  });

  it('a rule the proxy would refuse is refused when saved, naming it, not at every later Start', async () => {
    const a = await app();
    const before = (await a.api['settings.get']({})).egressRules;
    const lan: EgressRule = { name: 'LAN mirror', host: 'mirror.example.org', port: 80, scheme: 'http', addresses: ['127.0.0.0/8'] };
    await expect(a.api['settings.set']({ egressRules: [...before, lan] }))
      .rejects.toMatchObject({ name: 'InvalidInput', message: expect.stringMatching(/"LAN mirror".*127\.0\.0\.0\/8 reaches loopback/) });
    await expect(a.api['settings.set']({ egressRules: [{ ...lan, addresses: ['0.0.0.0/0'] }] })).rejects.toMatchObject({ name: 'InvalidInput' });
    expect((await a.api['settings.get']({})).egressRules).toEqual(before);
  });

  it('"Always allow for this repository" after the sandbox ended is kept for the next tasks; a bad rule is never kept', async () => {
    const a = await app();
    const repo = await repoAsking();
    const asked = (await a.api['tasks.preflight']({ repoPath: repo.dir })).egressRequests[0]!.rule;
    const task = await a.api['tasks.create']({ repoPath: repo.dir, title: 'x', agent: 'command' });
    await expect.poll(async () => (await a.api['tasks.get']({ taskId: task.id })).phase).toBe('failed');
    // A rule whose range reaches loopback: refused by name, and not remembered.
    await expect(a.api['egress.allow']({ taskId: task.id, scope: 'repository', rule: { ...asked, addresses: ['127.0.0.1/32'] } }))
      .rejects.toMatchObject({ name: 'InvalidInput' });
    // For this task only: there is no sandbox to let it through, which is said.
    await expect(a.api['egress.allow']({ taskId: task.id, scope: 'task', rule: asked })).rejects.toMatchObject({ name: 'NotFound' });
    expect((await a.api['tasks.preflight']({ repoPath: repo.dir })).egressRequests[0]!.allowedAlways).toBe(false);
    // For the repository: the sandbox is gone, but the next tasks get it.
    const allowed = await a.api['egress.allow']({ taskId: task.id, scope: 'repository', rule: asked });
    expect(allowed.egress?.allowed).toEqual([]);
    expect((await a.api['tasks.preflight']({ repoPath: repo.dir })).egressRequests[0]!.allowedAlways).toBe(true);
  });
});
