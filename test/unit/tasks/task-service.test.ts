// The task service's checks before a sandbox exists, and its recovery after a
// crash. The VM layer is replaced by a QEMU probe that reports what we tell it;
// everything else (git, state on disk, processes) is real.
import { afterEach, describe, expect, it } from 'vitest';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createFactoryApp, type FactoryApp } from '../../../main/app.js';
import { appPaths } from '../../../main/state/paths.js';
import { StateStore } from '../../../main/state/state-store.js';
import { isOurQemu } from '../../../main/vm/leftover-qemu.js';
import { qemuIdentityArgs } from '../../../main/vm/sandbox-files.js';
import type { ImageStatus } from '../../../common/domain.js';
import { makeRepo, tempDir } from '../../support/repo.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

function fakeVm(qemuOk: boolean, ensure: () => Promise<unknown> = async () => { throw new Error('no image in unit tests'); }) {
  const status: ImageStatus = { state: 'missing', version: 'test' };
  return {
    images: { status: () => status, ensure },
    qemu: {
      checkInstalled: async () => (qemuOk ? { ok: true, version: '8' } : { ok: false, installHint: 'sudo apt install qemu-system-x86 qemu-utils' }),
      start: async () => { throw new Error('no VM in unit tests'); },
    },
  };
}

async function app(qemuOk = true, dataDir = tempDir(), ensure?: () => Promise<unknown>): Promise<FactoryApp> {
  const paths = appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') });
  const a = await createFactoryApp({ host: 'web', paths, vm: fakeVm(qemuOk, ensure) });
  // Pushed first, so run last: dispose saves the tasks' state into the folder.
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  cleanups.push(() => a.dispose());
  return a;
}

describe('tasks.create validation', () => {
  it('names a path that is not a repository', async () => {
    const a = await app();
    const dir = tempDir();
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    await expect(a.api['tasks.create']({ repoPath: dir, title: 'x' })).rejects.toMatchObject({ name: 'NotAGitRepository', message: `${dir} is not a git repository` });
    expect(await a.api['tasks.list']({})).toEqual([]);
  });

  it('names a repository with no commits', async () => {
    const a = await app();
    const repo = await makeRepo();
    cleanups.push(repo.cleanup);
    await expect(a.api['tasks.create']({ repoPath: repo.dir, title: 'x' })).rejects.toMatchObject({ name: 'EmptyRepository' });
  });

  it('names the invalid field of the committed pipeline config', async () => {
    const a = await app();
    const repo = await makeRepo({ files: { '.factory/pipeline.json': '{"stages":{"build":{"command":42}}}' } });
    cleanups.push(repo.cleanup);
    await expect(a.api['tasks.create']({ repoPath: repo.dir, title: 'x' })).rejects.toThrow('.factory/pipeline.json: stages.build.command: expected string');
  });

  it('says how to install QEMU when it is missing', async () => {
    const a = await app(false);
    const repo = await makeRepo({ files: { a: 'a\n' } });
    cleanups.push(repo.cleanup);
    await expect(a.api['tasks.create']({ repoPath: repo.dir, title: 'x' })).rejects.toMatchObject({
      name: 'QemuMissing',
      message: expect.stringContaining('apt install qemu-system-x86'),
    });
  });

  it('refuses an unknown agent and an empty task text', async () => {
    const a = await app();
    const repo = await makeRepo({ files: { a: 'a\n' } });
    cleanups.push(repo.cleanup);
    await expect(a.api['tasks.create']({ repoPath: repo.dir, title: 'x', agent: 'nobody' })).rejects.toMatchObject({ name: 'UnknownAgent' });
    await expect(a.api['tasks.create']({ repoPath: repo.dir, title: '   ' })).rejects.toThrow(/the task text is empty/);
    expect(await a.api['tasks.list']({})).toEqual([]);
  });

  it('records a failed provision as a failed task with the reason; Retry starts it over', async () => {
    let ensureCalls = 0;
    const a = await app(true, tempDir(), async () => {
      ensureCalls++;
      throw new Error('no image in unit tests');
    });
    const repo = await makeRepo({ files: { a: 'a\n' } });
    cleanups.push(repo.cleanup);
    const events: string[] = [];
    a.onEvent((e) => {
      if (e.type === 'task.updated') events.push(`${e.task.phase}/${e.task.sandbox.status}`);
    });
    const task = await a.api['tasks.create']({ repoPath: repo.dir, title: 'do it' });
    expect(task.id).toMatch(/^[a-z][a-z0-9]{7}$/);
    expect(task.branch).toBe(`factory/${task.id}`);
    await expect.poll(async () => (await a.api['tasks.get']({ taskId: task.id })).phase).toBe('failed');
    const failed = await a.api['tasks.get']({ taskId: task.id });
    expect(failed.error?.message).toBe('no image in unit tests');
    // No VM ever started: the sandbox does not claim to be booting any more.
    expect(failed.sandbox.status).toBe('none');
    await expect(a.api['tasks.review']({ taskId: task.id })).rejects.toMatchObject({ name: 'NoReview' });
    await expect(a.api['tasks.approve']({ taskId: task.id })).rejects.toMatchObject({ name: 'NotInReview' });
    // Nothing was lost with the sandbox, so a retry starts from the top with a fresh one.
    const retried = await a.api['tasks.retry']({ taskId: task.id });
    expect(retried).toMatchObject({ phase: 'creating', sandbox: { status: 'none' } });
    expect(retried.error).toBeUndefined();
    await expect.poll(async () => (await a.api['tasks.get']({ taskId: task.id })).phase).toBe('failed');
    expect(ensureCalls).toBe(2);
    const once = ['creating/none', 'provisioning/booting', 'provisioning/none', 'failed/none'];
    expect(events).toEqual([...once, ...once]);
  });
});

describe('cancel', () => {
  it('cancels a task waiting for the base image at once', async () => {
    const a = await app(true, tempDir(), () => new Promise(() => {})); // an image build that never ends
    const repo = await makeRepo({ files: { a: 'a\n' } });
    cleanups.push(repo.cleanup);
    const task = await a.api['tasks.create']({ repoPath: repo.dir, title: 'wait' });
    await expect.poll(async () => (await a.api['tasks.get']({ taskId: task.id })).phase).toBe('provisioning');
    const started = Date.now();
    const cancelled = await a.api['tasks.cancel']({ taskId: task.id });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(cancelled.phase).toBe('cancelled');
    expect(cancelled.stages.map((s) => s.status)).toEqual(['skipped', 'skipped', 'skipped', 'skipped', 'skipped', 'skipped']);
    // It never got a VM: the sandbox is none, not booting, and destroy leaves it so.
    expect(cancelled.sandbox.status).toBe('none');
    expect((await a.api['tasks.destroy']({ taskId: task.id })).sandbox.status).toBe('none');
  });
});

describe('remove', () => {
  it('refuses a running task by name, then removes it with its record, seed, logs and leak records once cancelled', async () => {
    const dataDir = tempDir();
    const a = await app(true, dataDir, () => new Promise(() => {})); // an image build that never ends
    const repo = await makeRepo({ files: { a: 'a\n' } });
    cleanups.push(repo.cleanup);
    const task = await a.api['tasks.create']({ repoPath: repo.dir, title: 'to remove' });
    const other = await a.api['tasks.create']({ repoPath: repo.dir, title: 'to keep' });
    await expect.poll(async () => (await a.api['tasks.get']({ taskId: task.id })).phase).toBe('provisioning');
    await expect(a.api['tasks.remove']({ taskId: task.id })).rejects.toMatchObject({ name: 'TaskActive' });
    await a.api['tasks.cancel']({ taskId: task.id });
    const paths = appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') });
    const recordFile = path.join(paths.state, 'tasks', `${task.id}.json`);
    expect(fs.existsSync(recordFile)).toBe(true);
    const removed: string[] = [];
    a.onEvent((e) => {
      if (e.type === 'task.removed') removed.push(e.taskId);
    });

    // What the credential broker kept for the task (its credential ids, its last leak report) goes too.
    const brokerFiles = [path.join(paths.state, 'sandbox-credentials', `${task.id}.json`), path.join(paths.data, 'leakchecks', `${task.id}.json`)];
    for (const f of brokerFiles) {
      fs.mkdirSync(path.dirname(f), { recursive: true });
      fs.writeFileSync(f, '{}');
    }

    await a.api['tasks.remove']({ taskId: task.id });
    expect(removed).toEqual([task.id]);
    expect(brokerFiles.filter((f) => fs.existsSync(f))).toEqual([]);
    expect((await a.api['tasks.list']({})).map((t) => t.id)).not.toContain(task.id);
    await expect(a.api['tasks.get']({ taskId: task.id })).rejects.toMatchObject({ name: 'TaskNotFound' });
    expect(fs.existsSync(recordFile)).toBe(false);
    expect(fs.existsSync(path.join(paths.data, 'work', task.id))).toBe(false);
    // The other task is untouched.
    expect((await a.api['tasks.get']({ taskId: other.id })).title).toBe('to keep');
    await a.api['tasks.cancel']({ taskId: other.id });
  });
});

describe('parallel limit', () => {
  it('holds a task back while the limit is reached and starts it when a slot frees', async () => {
    const dataDir = tempDir();
    const paths = appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') });
    let ensureCalls = 0;
    const a = await createFactoryApp({
      host: 'web',
      paths,
      settings: { maxParallelTasks: 1 },
      vm: fakeVm(true, () => {
        ensureCalls++;
        return new Promise(() => {});
      }),
    });
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    cleanups.push(() => a.dispose());
    const repo = await makeRepo({ files: { a: 'a\n' } });
    cleanups.push(repo.cleanup);
    const first = await a.api['tasks.create']({ repoPath: repo.dir, title: 'one' });
    const second = await a.api['tasks.create']({ repoPath: repo.dir, title: 'two' });
    await expect.poll(async () => (await a.api['tasks.get']({ taskId: first.id })).phase).toBe('provisioning');
    await new Promise((r) => setTimeout(r, 300));
    expect((await a.api['tasks.get']({ taskId: second.id })).phase).toBe('creating');
    expect(ensureCalls).toBe(1);
    // A third task queues behind the second; the second is cancelled while queued, which must not swallow the next free slot.
    const third = await a.api['tasks.create']({ repoPath: repo.dir, title: 'three' });
    expect((await a.api['tasks.cancel']({ taskId: second.id })).phase).toBe('cancelled');
    await a.api['tasks.cancel']({ taskId: first.id });
    await expect.poll(async () => (await a.api['tasks.get']({ taskId: third.id })).phase).toBe('provisioning');
    // The phase shows before the task's state is on disk; the image is asked for right after.
    await expect.poll(() => ensureCalls).toBe(2);
    expect((await a.api['tasks.get']({ taskId: first.id })).phase).toBe('cancelled');
  });
});

describe('restart', () => {
  it('interrupts a task whose app was killed mid-stage, kills its leftover QEMU only, and keeps only logs', async () => {
    const dataDir = tempDir();
    const paths = appPaths({ FACTORY_DATA_DIR: dataDir });
    const sandboxDir = path.join(paths.sandboxes, 'abcdefgh');
    fs.mkdirSync(sandboxDir, { recursive: true });
    fs.writeFileSync(path.join(sandboxDir, 'overlay.qcow2'), 'disk');
    fs.writeFileSync(path.join(sandboxDir, 'serial.log'), 'boot log');
    // A real QEMU with the driver's identity for the sandbox, detached as after a crash of the app
    // (an empty machine, paused: no guest is needed to be found).
    execFileSync('qemu-system-x86_64', [...qemuIdentityArgs(sandboxDir), '-nodefaults', '-machine', 'none', '-display', 'none', '-S', '-daemonize']);
    const leftover = Number(fs.readFileSync(path.join(sandboxDir, 'qemu.pid'), 'utf8').trim());
    cleanups.push(() => {
      try {
        process.kill(leftover, 'SIGKILL');
      } catch {
        // reaped by the app, as it should be
      }
    });
    expect(await isOurQemu(leftover, sandboxDir)).toBe(true);
    // The pid the task record kept now belongs to another process (pid reuse), dressed up with
    // "qemu" and the folder: it must survive.
    const lookAlike = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 600000)', 'qemu-system-x86_64', sandboxDir], { stdio: 'ignore' });
    cleanups.push(() => void lookAlike.kill('SIGKILL'));
    await new StateStore({ dir: paths.state }).saveTask({
      version: 1,
      task: {
        id: 'abcdefgh', title: 't', repoPath: '/r', baseRef: 'HEAD', baseCommit: 'a'.repeat(40), branch: 'factory/abcdefgh',
        createdAt: new Date().toISOString(), phase: 'running', sandbox: { status: 'running', sshPort: 1 },
        stages: [{ name: 'request', status: 'passed' }, { name: 'plan', status: 'running', sessionId: 's1' }, { name: 'build', status: 'pending' }],
      },
      sandboxDir,
      qemuPid: lookAlike.pid!,
    });
    const a = await app(true, dataDir);
    const t = await a.api['tasks.get']({ taskId: 'abcdefgh' });
    expect(t.sandbox.status).toBe('lost');
    expect(t.phase).toBe('interrupted');
    expect(t.stages.map((s) => s.status)).toEqual(['passed', 'interrupted', 'pending']);
    expect(t.stages[1]).toEqual({ name: 'plan', status: 'interrupted', sessionId: 's1', summary: 'interrupted: the app stopped' });
    expect(t.error).toEqual({ name: 'Interrupted', message: 'the app stopped while the task was running; Retry runs it again in a fresh sandbox' });
    expect(await isOurQemu(leftover, sandboxDir)).toBe(false);
    await new Promise((r) => setTimeout(r, 200)); // time for a wrongly sent SIGKILL to show
    expect([lookAlike.exitCode, lookAlike.signalCode]).toEqual([null, null]);
    expect(fs.readdirSync(sandboxDir)).toEqual(['serial.log']);
    const reread = await new StateStore({ dir: paths.state }).loadTasks();
    expect(reread[0]!.task).toEqual(t);
    expect(reread[0]!.qemuPid).toBeUndefined();
    // This record predates kept seeds: Retry says so instead of seeding something else.
    await expect(a.api['tasks.retry']({ taskId: 'abcdefgh' })).rejects.toMatchObject({ name: 'SeedMissing', message: expect.stringContaining('start a new task') });
    expect((await a.api['tasks.get']({ taskId: 'abcdefgh' })).phase).toBe('interrupted');
    // Destroy throws the lost sandbox away for good.
    expect((await a.api['tasks.destroy']({ taskId: 'abcdefgh' })).sandbox.status).toBe('destroyed');
  });

  it('removes the quarantine of a pull-back the crash cut, and keeps the one of a task in review', async () => {
    // Found by the soak (issue 30, seed 3): the app SIGKILLed while a task pulled back left quarantine/<id> for good.
    const dataDir = tempDir();
    const paths = appPaths({ FACTORY_DATA_DIR: dataDir });
    const base = { title: 't', repoPath: '/r', baseRef: 'HEAD', baseCommit: 'a'.repeat(40), createdAt: new Date().toISOString(), stages: [] };
    const store = new StateStore({ dir: paths.state });
    await store.saveTask({ version: 1, task: { ...base, id: 'cutpullb', branch: 'factory/cutpullb', phase: 'pulling-back', sandbox: { status: 'running', sshPort: 1 } } });
    await store.saveTask({
      version: 1,
      task: { ...base, id: 'inreview', branch: 'factory/inreview', phase: 'review', sandbox: { status: 'destroyed' } },
      pullback: { headCommit: 'b'.repeat(40), bundleSha256: 'c'.repeat(64), bundleBytes: 1, empty: false },
    });
    for (const id of ['cutpullb', 'inreview']) {
      fs.mkdirSync(path.join(dataDir, 'quarantine', id, 'repo.git'), { recursive: true });
      fs.writeFileSync(path.join(dataDir, 'quarantine', id, 'repo.git', 'HEAD'), 'ref: refs/heads/main\n');
    }
    const a = await app(true, dataDir);
    expect((await a.api['tasks.get']({ taskId: 'cutpullb' })).phase).toBe('interrupted');
    expect(fs.readdirSync(path.join(dataDir, 'quarantine'))).toEqual(['inreview']);
  });

  it('interrupts a task when the app shuts down, and Retry in the next app seeds it as it was at create', async () => {
    const dataDir = tempDir();
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const paths = appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') });
    const repo = await makeRepo({ files: { 'a.txt': 'committed\n' } });
    cleanups.push(repo.cleanup);
    repo.write('a.txt', 'uncommitted at create\n');
    const first = await createFactoryApp({ host: 'web', paths, vm: fakeVm(true, () => new Promise(() => {})) });
    const created = await first.api['tasks.create']({ repoPath: repo.dir, title: 'carry my edit', includeUncommitted: true });
    await expect.poll(async () => (await first.api['tasks.get']({ taskId: created.id })).phase).toBe('provisioning');
    await first.dispose();

    // The user edits on while the app is down; a retry must not pick that up.
    repo.write('a.txt', 'edited after the app stopped\n');
    let ensureCalls = 0;
    const second = await createFactoryApp({
      host: 'web',
      paths,
      vm: fakeVm(true, async () => {
        ensureCalls++;
        throw new Error('no image in unit tests');
      }),
    });
    cleanups.push(() => second.dispose());
    const interrupted = await second.api['tasks.get']({ taskId: created.id });
    expect(interrupted).toMatchObject({ phase: 'interrupted', sandbox: { status: 'none' }, error: { name: 'Interrupted' } });
    expect((await second.api['tasks.retry']({ taskId: created.id })).phase).toBe('creating');
    await expect.poll(async () => (await second.api['tasks.get']({ taskId: created.id })).phase).toBe('failed');
    expect(ensureCalls).toBe(1);

    const bundle = path.join(dataDir, 'work', created.id, 'seed.bundle');
    const clone = tempDir();
    cleanups.push(() => fs.rmSync(clone, { recursive: true, force: true }));
    execFileSync('git', ['clone', '-q', '-b', created.branch, bundle, clone]);
    expect(fs.readFileSync(path.join(clone, 'a.txt'), 'utf8')).toBe('uncommitted at create\n');
    expect(execFileSync('git', ['-C', clone, 'rev-parse', 'HEAD^'], { encoding: 'utf8' }).trim()).toBe(created.baseCommit);
  });
});
