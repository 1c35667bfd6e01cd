// What happens to a sandbox after Approve or Reject, and to a kept one across a
// restart; archiving a task. The lifetime's clock is a fake one in the first
// tests (a kept sandbox waits at least a minute, real time would only slow the
// test); the restart test uses the real app, state on disk and a real QEMU process.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createFactoryApp, type FactoryApp } from '../../../main/app.js';
import { appPaths } from '../../../main/state/paths.js';
import { StateStore, type TaskRecord } from '../../../main/state/state-store.js';
import { SandboxLifetime } from '../../../main/tasks/sandbox-lifetime.js';
import { isOurQemu } from '../../../main/vm/leftover-qemu.js';
import { qemuIdentityArgs } from '../../../main/vm/sandbox-files.js';
import type { Task } from '../../../common/domain.js';
import { tempDir } from '../../support/repo.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  vi.useRealTimers();
  while (cleanups.length) await cleanups.pop()!();
});

function decided(id: string, patch: Partial<Task> = {}): Task {
  return {
    id, title: 't', repoPath: '/r', baseRef: 'HEAD', baseCommit: 'a'.repeat(40), branch: `factory/${id}`, createdAt: '2026-01-01T00:00:00.000Z',
    phase: 'approved', sandbox: { status: 'running' }, stages: [], decision: { kind: 'approved', at: '2026-01-01T00:00:00.000Z' }, ...patch,
  };
}

function lifetime(minutes: number) {
  const destroyed: string[] = [];
  const kept: Record<string, string> = {};
  const lt = new SandboxLifetime({
    keepMinutes: () => minutes,
    destroy: async (id) => void destroyed.push(id),
    setKeptUntil: async (id, until) => void (kept[id] = until),
    log: { info: () => {}, warn: () => {} },
  });
  cleanups.push(() => lt.dispose());
  return { lt, destroyed, kept };
}

describe('sandbox lifetime after a decision', () => {
  it('destroys the sandbox at once by default', async () => {
    const { lt, destroyed, kept } = lifetime(0);
    await lt.afterDecision(decided('aaaaaaaa'));
    await lt.afterDecision(decided('bbbbbbbb', { phase: 'rejected', decision: { kind: 'rejected', at: 'x' } }));
    expect(destroyed).toEqual(['aaaaaaaa', 'bbbbbbbb']);
    expect(kept).toEqual({});
  });

  it('keeps it until the deadline saved on the task, then destroys it', async () => {
    vi.useFakeTimers({ now: Date.parse('2026-03-04T10:00:00.000Z') });
    const { lt, destroyed, kept } = lifetime(90);
    await lt.afterDecision(decided('aaaaaaaa'));
    expect(kept).toEqual({ aaaaaaaa: '2026-03-04T11:30:00.000Z' });
    vi.advanceTimersByTime(89 * 60_000);
    expect(destroyed).toEqual([]);
    vi.advanceTimersByTime(60_000);
    expect(destroyed).toEqual(['aaaaaaaa']);
  });

  it('destroys a lost sandbox at once even when the setting keeps sandboxes, and leaves none alone', async () => {
    const { lt, destroyed, kept } = lifetime(60);
    await lt.afterDecision(decided('aaaaaaaa', { sandbox: { status: 'lost' } }));
    await lt.afterDecision(decided('bbbbbbbb', { sandbox: { status: 'none' } }));
    await lt.afterDecision(decided('cccccccc', { sandbox: { status: 'destroyed' } }));
    expect(destroyed).toEqual(['aaaaaaaa']);
    expect(kept).toEqual({});
  });

  it('forgets the deadline of a sandbox destroyed another way', async () => {
    vi.useFakeTimers();
    const { lt, destroyed } = lifetime(5);
    await lt.afterDecision(decided('aaaaaaaa'));
    expect(lt.pending()).toEqual(['aaaaaaaa']);
    lt.forget('aaaaaaaa');
    vi.advanceTimersByTime(10 * 60_000);
    expect(destroyed).toEqual([]);
  });

  it('at start, destroys what is past its deadline or lost with a decided task, and keeps waiting for a running one', () => {
    vi.useFakeTimers({ now: Date.parse('2026-03-04T10:00:00.000Z') });
    const { lt, destroyed } = lifetime(60);
    lt.resume([
      decided('pastpast', { sandbox: { status: 'lost', keptUntil: '2026-03-04T09:00:00.000Z' } }),
      decided('lostlost', { sandbox: { status: 'lost' } }),
      decided('aheadrun', { sandbox: { status: 'running', keptUntil: '2026-03-04T10:30:00.000Z' } }),
      decided('inreview', { phase: 'review', sandbox: { status: 'lost' } }),
    ]);
    expect(destroyed.sort()).toEqual(['lostlost', 'pastpast']);
    vi.advanceTimersByTime(30 * 60_000);
    expect(destroyed.sort()).toEqual(['aheadrun', 'lostlost', 'pastpast']);
  });
});

async function app(dataDir: string): Promise<FactoryApp> {
  const paths = appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') });
  const never = async () => {
    throw new Error('no VM in unit tests');
  };
  const a = await createFactoryApp({
    host: 'web',
    paths,
    vm: { images: { status: () => ({ state: 'missing', version: 'test' }), ensure: never }, qemu: { checkInstalled: async () => ({ ok: true, version: '8' }), start: never } },
  });
  cleanups.push(() => a.dispose());
  return a;
}

describe('a kept sandbox across a restart', () => {
  it('is destroyed at start when the app stopped while keeping it: QEMU ended, the deadline cleared, the card says destroyed', async () => {
    const dataDir = tempDir();
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const paths = appPaths({ FACTORY_DATA_DIR: dataDir });
    const sandboxDir = path.join(paths.sandboxes, 'keptkept');
    fs.mkdirSync(sandboxDir, { recursive: true });
    fs.writeFileSync(path.join(sandboxDir, 'overlay.qcow2'), 'disk');
    // A real QEMU with the sandbox's identity, left running as by an app that was killed while keeping it.
    execFileSync('qemu-system-x86_64', [...qemuIdentityArgs(sandboxDir), '-nodefaults', '-machine', 'none', '-display', 'none', '-S', '-daemonize']);
    const qemuPid = Number(fs.readFileSync(path.join(sandboxDir, 'qemu.pid'), 'utf8').trim());
    cleanups.push(() => {
      try {
        process.kill(qemuPid, 'SIGKILL');
      } catch {
        // ended by the app, as it should be
      }
    });
    const record: TaskRecord = {
      version: 1,
      task: decided('keptkept', { sandbox: { status: 'running', sshPort: 1, keptUntil: new Date(Date.now() - 60_000).toISOString() } }),
      sandboxDir,
      qemuPid,
    };
    await new StateStore({ dir: paths.state }).saveTask(record);
    const a = await app(dataDir);
    await expect.poll(async () => (await a.api['tasks.get']({ taskId: 'keptkept' })).sandbox, { timeout: 15_000 }).toEqual({ status: 'destroyed', sshPort: 1 });
    expect(await isOurQemu(qemuPid, sandboxDir)).toBe(false);
    expect(fs.existsSync(path.join(sandboxDir, 'overlay.qcow2'))).toBe(false);
    const reread = await new StateStore({ dir: paths.state }).loadTasks();
    expect(reread[0]!.task.sandbox).toEqual({ status: 'destroyed', sshPort: 1 });
  });
});

describe('archive', () => {
  it('hides a finished task and restores it, across a restart; a running task cannot be archived', async () => {
    const dataDir = tempDir();
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const paths = appPaths({ FACTORY_DATA_DIR: dataDir });
    const store = new StateStore({ dir: paths.state });
    await store.saveTask({ version: 1, task: decided('donedone', { sandbox: { status: 'destroyed' } }) });
    await store.saveTask({ version: 1, task: decided('failfail', { phase: 'failed', sandbox: { status: 'destroyed' } }) });
    let a = await app(dataDir);
    const archived = await a.api['tasks.archive']({ taskId: 'donedone', archived: true });
    expect(Date.parse(archived.archivedAt!)).toBeGreaterThan(Date.now() - 60_000);
    await a.dispose();
    a = await app(dataDir);
    const tasks = await a.api['tasks.list']({});
    expect(tasks.find((t) => t.id === 'donedone')!.archivedAt).toBe(archived.archivedAt);
    expect(tasks.find((t) => t.id === 'failfail')!.archivedAt).toBeUndefined();
    const restored = await a.api['tasks.archive']({ taskId: 'donedone', archived: false });
    expect('archivedAt' in restored).toBe(false);
    await expect(a.api['tasks.archive']({ taskId: 'nosuchid', archived: true })).rejects.toMatchObject({ name: 'TaskNotFound' });
  });

  it('refuses to hide a task whose work still runs', async () => {
    const dataDir = tempDir();
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const { setArchived } = await import('../../../main/tasks/task-archive.js');
    const record: TaskRecord = { version: 1, task: decided('runrunrn', { phase: 'running' }) };
    let saved = 0;
    await expect(setArchived({ persist: async () => void saved++ }, record, true)).rejects.toMatchObject({
      name: 'TaskActive',
      message: 'task runrunrn is running; cancel it or let it finish before archiving it',
    });
    expect(saved).toBe(0);
    expect(record.task.archivedAt).toBeUndefined();
  });
});

describe('settings of the lifecycle and the next steps', () => {
  it('keeps a sandbox at most a day and runs the editor as one program, refusing what a shell would need', async () => {
    const dataDir = tempDir();
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const a = await app(dataDir);
    expect(await a.api['settings.get']({})).toMatchObject({ keepSandboxAfterDecisionMinutes: 0, editorCommand: 'code' });
    expect(await a.api['settings.set']({ keepSandboxAfterDecisionMinutes: 1440, editorCommand: '/opt/My Editor/bin/editor' })).toMatchObject({
      keepSandboxAfterDecisionMinutes: 1440,
      editorCommand: '/opt/My Editor/bin/editor',
    });
    await expect(a.api['settings.set']({ keepSandboxAfterDecisionMinutes: 1441 })).rejects.toThrow(/keepSandboxAfterDecisionMinutes/);
    await expect(a.api['settings.set']({ keepSandboxAfterDecisionMinutes: 1.5 })).rejects.toThrow(/keepSandboxAfterDecisionMinutes/);
    for (const editorCommand of ['code\n--new-window', '--help', 'code\u0000', ' code', '']) {
      await expect(a.api['settings.set']({ editorCommand }), JSON.stringify(editorCommand)).rejects.toThrow(/editorCommand/);
    }
    expect(await a.api['settings.get']({})).toMatchObject({ keepSandboxAfterDecisionMinutes: 1440, editorCommand: '/opt/My Editor/bin/editor' });
  });
});
