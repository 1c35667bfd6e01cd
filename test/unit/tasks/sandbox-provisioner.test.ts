// The seed a fresh sandbox gets on a retry: the same commit the task was first
// seeded with, whatever the user did in the working tree since, or a clear
// refusal. Real git repositories and bundles; no VM is needed for the seed.
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { createFileLogger } from '../../../main/log/logger.js';
import { LiveSandboxes } from '../../../main/sandbox/live-sandboxes.js';
import { SandboxProvisioner } from '../../../main/tasks/sandbox-provisioner.js';
import { appPaths } from '../../../main/state/paths.js';
import { killLeftoverQemu } from '../../../main/vm/leftover-qemu.js';
import { SettingsSchema } from '../../../main/state/settings.js';
import { gitIn, makeRepo, tempDir, type FixtureRepo } from '../../support/repo.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

async function setup(): Promise<{ provisioner: SandboxProvisioner; repo: FixtureRepo; task: { id: string; repoPath: string; baseCommit: string; branch: string }; dataDir: string }> {
  const dataDir = tempDir();
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const repo = await makeRepo({ files: { 'a.txt': 'committed\n' } });
  cleanups.push(repo.cleanup);
  const never = () => {
    throw new Error('no VM in this test');
  };
  const provisioner = new SandboxProvisioner({
    paths: appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') }),
    settings: () => SettingsSchema.parse({}),
    images: { status: () => ({ state: 'missing', version: 'test' }), ensure: never },
    qemu: { checkInstalled: async () => ({ ok: true }), start: never },
    live: new LiveSandboxes(),
    emit: () => {},
    killLeftovers: killLeftoverQemu,
    log: createFileLogger({ dir: path.join(dataDir, 'logs') }),
  });
  return { provisioner, repo, dataDir, task: { id: 'abcdefgh', repoPath: repo.dir, baseCommit: repo.head(), branch: 'factory/abcdefgh' } };
}

function fileInBundle(bundle: string, branch: string, file: string): { content: string; head: string; parent: string } {
  const clone = tempDir();
  cleanups.push(() => fs.rmSync(clone, { recursive: true, force: true }));
  gitIn(clone, ['clone', '-q', '-b', branch, bundle, '.']);
  return {
    content: fs.readFileSync(path.join(clone, file), 'utf8'),
    head: gitIn(clone, ['rev-parse', 'HEAD']).trim(),
    parent: gitIn(clone, ['log', '-1', '--format=%P']).trim(),
  };
}

describe('the seed of a fresh sandbox', () => {
  it('keeps a seed with uncommitted changes as it was, whatever the working tree holds now', async () => {
    const { provisioner, repo, task } = await setup();
    repo.write('a.txt', 'edited before create\n');
    await provisioner.rememberSeed(task.id, true);
    const bundle = await provisioner.seedBundle(task);
    repo.write('a.txt', 'edited after create\n');
    expect(await provisioner.seedBundle(task)).toBe(bundle);
    expect(fileInBundle(bundle, task.branch, 'a.txt')).toMatchObject({ content: 'edited before create\n', parent: task.baseCommit });
  });

  it('makes a base-only seed again from the base commit, never from the working tree', async () => {
    const { provisioner, repo, task } = await setup();
    await provisioner.rememberSeed(task.id, true); // asked for, but there was nothing uncommitted
    const bundle = await provisioner.seedBundle(task);
    fs.rmSync(bundle); // what seeding a sandbox does with a seed that can be made again
    repo.write('a.txt', 'edited after the first seed\n');
    const again = await provisioner.seedBundle(task);
    expect(fileInBundle(again, task.branch, 'a.txt')).toMatchObject({ content: 'committed\n', head: task.baseCommit });
  });

  it('refuses when a seed with uncommitted changes is gone, rather than seeding something else', async () => {
    const { provisioner, repo, task } = await setup();
    repo.write('a.txt', 'edited\n');
    await provisioner.rememberSeed(task.id, true);
    fs.rmSync(await provisioner.seedBundle(task));
    await expect(provisioner.checkSeed(task)).rejects.toMatchObject({ name: 'SeedMissing', message: expect.stringContaining('start a new task') });
    await expect(provisioner.seedBundle(task)).rejects.toMatchObject({ name: 'SeedMissing' });
  });

  it('makes the seed again when a kill cut the bundle before it was recorded', async () => {
    const { provisioner, task, dataDir } = await setup();
    await provisioner.rememberSeed(task.id, false);
    const bundle = path.join(dataDir, 'work', task.id, 'seed.bundle');
    fs.writeFileSync(bundle, '# v2 git bundle\ntruncated');
    expect(await provisioner.seedBundle(task)).toBe(bundle);
    expect(fs.readFileSync(bundle, 'utf8').length).toBeGreaterThan(100);
    expect(fileInBundle(bundle, task.branch, 'a.txt')).toMatchObject({ content: 'committed\n', head: task.baseCommit });
  });

  it.each([
    ['missing', undefined, 'is missing'],
    ['not JSON', '{"includeUncommitted":', 'unreadable'],
    ['a seed commit that is not a commit id', JSON.stringify({ includeUncommitted: false, seedCommit: '--upload-pack=evil' }), 'unreadable'],
    ['a wrong type', JSON.stringify({ includeUncommitted: 'yes' }), 'unreadable'],
  ])('names the problem when the seed record is %s', async (_what, content, says) => {
    const { provisioner, task, dataDir } = await setup();
    if (content !== undefined) {
      fs.mkdirSync(path.join(dataDir, 'work', task.id), { recursive: true });
      fs.writeFileSync(path.join(dataDir, 'work', task.id, 'seed.json'), content);
    }
    await expect(provisioner.seedBundle(task)).rejects.toMatchObject({ name: 'SeedMissing', message: expect.stringContaining(says) });
  });
});
