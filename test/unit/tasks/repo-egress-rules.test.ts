// Rules the user allowed "for this repository from now on" can be seen and
// revoked: egress.repoRules.list shows them per repository, and after
// egress.repoRules.remove the repository's next task starts without the rule.
// Through the app's API on a real repository and real settings on disk. No VM
// boots in a unit test: the image is a stand-in and QEMU refuses to start, so
// the rules a task's sandbox starts with are read where the app hands them to
// the sandbox's add-ons (a recording extension), just before the VM would boot.
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { createFactoryApp, type FactoryApp } from '../../../main/app.js';
import { appPaths } from '../../../main/state/paths.js';
import type { ImageStatus } from '../../../common/domain.js';
import type { EgressRule } from '../../../common/egress.js';
import type { SandboxExtension } from '../../../main/sandbox/sandbox-ports.js';
import { makeRepo, tempDir, type FixtureRepo } from '../../support/repo.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/** What each task's sandbox was about to start with. */
const started = new Map<string, EgressRule[]>();

async function app(): Promise<FactoryApp> {
  const dataDir = tempDir();
  const status: ImageStatus = { state: 'ready', version: 'test' };
  const vm = {
    images: { status: () => status, ensure: async () => ({ stand: 'in' }) },
    qemu: { checkInstalled: async () => ({ ok: true, version: '8' }), start: async () => { throw new Error('no VM in unit tests'); } },
  };
  const recorder: SandboxExtension = {
    name: 'egress-recorder',
    prepare: async ({ taskId, egress }) => {
      started.set(taskId, egress ?? []);
      return {};
    },
    release: async () => undefined,
  };
  const a = await createFactoryApp({
    host: 'web',
    paths: appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') }),
    vm: vm as never,
    sandboxExtensions: [recorder],
    warmPool: false,
  });
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  cleanups.push(() => a.dispose());
  return a;
}

async function repoAsking(host: string): Promise<FixtureRepo> {
  const repo = await makeRepo({ files: { '.factory/pipeline.json': JSON.stringify({ environment: { egress: [{ host }] } }) } });
  cleanups.push(repo.cleanup);
  return repo;
}

/** The egress rules the sandbox of a new task on the repository starts with. */
async function rulesOfNextTask(a: FactoryApp, repoPath: string): Promise<EgressRule[]> {
  const task = await a.api['tasks.create']({ repoPath, title: 'x', agent: 'command' });
  await expect.poll(() => started.has(task.id), { timeout: 20_000 }).toBe(true);
  return started.get(task.id)!;
}

describe('egress rules remembered for a repository', () => {
  it('are listed per repository, and a removed rule no longer applies to its next task', async () => {
    const a = await app();
    const repo = await repoAsking('files.example.org');
    const other = await repoAsking('mirror.example.net');
    expect(await a.api['egress.repoRules.list']({})).toEqual([]);
    const asked = (await a.api['tasks.preflight']({ repoPath: repo.dir })).egressRequests[0]!.rule;
    const otherAsked = (await a.api['tasks.preflight']({ repoPath: other.dir })).egressRequests[0]!.rule;
    await a.api['tasks.create']({ repoPath: repo.dir, title: 'x', agent: 'command', egressApproval: { rules: [asked], remember: true } });
    await a.api['tasks.create']({ repoPath: other.dir, title: 'x', agent: 'command', egressApproval: { rules: [otherAsked], remember: true } });

    const listed = await a.api['egress.repoRules.list']({});
    expect(listed).toEqual([{ repoPath: repo.dir, rules: [asked] }, { repoPath: other.dir, rules: [otherAsked] }].sort((x, y) => (x.repoPath < y.repoPath ? -1 : 1)));
    expect((await rulesOfNextTask(a, repo.dir)).map((r) => r.host)).toContain('files.example.org');

    const left = await a.api['egress.repoRules.remove']({ repoPath: repo.dir, rule: asked });
    expect(left).toEqual([{ repoPath: other.dir, rules: [otherAsked] }]);
    expect((await rulesOfNextTask(a, repo.dir)).map((r) => r.host)).not.toContain('files.example.org');
    expect((await a.api['tasks.preflight']({ repoPath: repo.dir })).egressRequests[0]!.allowedAlways).toBe(false);
    // The other repository keeps its rule.
    expect((await rulesOfNextTask(a, other.dir)).map((r) => r.host)).toContain('mirror.example.net');
  });

  it('removing a rule that is not remembered, or from another repository, is refused by name and changes nothing', async () => {
    const a = await app();
    const repo = await repoAsking('files.example.org');
    const asked = (await a.api['tasks.preflight']({ repoPath: repo.dir })).egressRequests[0]!.rule;
    await a.api['tasks.create']({ repoPath: repo.dir, title: 'x', agent: 'command', egressApproval: { rules: [asked], remember: true } });
    const before = await a.api['egress.repoRules.list']({});
    await expect(a.api['egress.repoRules.remove']({ repoPath: '/elsewhere/repo', rule: asked }))
      .rejects.toMatchObject({ name: 'NotFound', message: expect.stringContaining('no rule for https://files.example.org:443 is remembered for the repository "/elsewhere/repo"') });
    // A rule like the remembered one but wider (an address range) is a different rule: not removed by accident.
    await expect(a.api['egress.repoRules.remove']({ repoPath: repo.dir, rule: { ...asked, port: 8443 } })).rejects.toMatchObject({ name: 'NotFound' });
    // A prototype name as a repository path is a missing repository, not a crash or a match.
    await expect(a.api['egress.repoRules.remove']({ repoPath: '__proto__', rule: asked })).rejects.toMatchObject({ name: 'NotFound' });
    expect(await a.api['egress.repoRules.list']({})).toEqual(before);
  });
});
